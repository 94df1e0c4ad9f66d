"""loaderx for torch: the loader's batches as a torch IterableDataset.

    from loaderx.torch import StreamDataset, StepLoader

    ds = StreamDataset({"images": "train/images", "labels": "train/labels"},
                       batch_size=64, seed=1)
    loader = StepLoader(ds)                 # a torch DataLoader, batch_size=None
    for epoch in range(start_epoch, epochs):
        ds.set_epoch(epoch)
        for batch in loader:                # {"images": tensor, "labels": tensor}
            ...
        torch.save(loader.state_dict(), "loader.pt")

Every item of the dataset is a whole batch, the step's records of every
stream, so it goes to torch's DataLoader with ``batch_size=None`` (which
StepLoader sets): torch then only turns the NumPy arrays into tensors,
without copying them.

An epoch is one cycle of the sampler, ``n // (batch_size * world)`` steps
(``len(ds)``); epoch e is the steps [e * len, (e + 1) * len), so in CYCLIC
mode every record is read once per epoch, in a new order each epoch.

Sharding is by rank and by torch worker at once. Each rank (from
torch.distributed once it is initialised, or given) reads its share of
every global batch, as the loaderx sampler splits it; the torch workers of
a rank take the epoch's steps in turn, worker w the steps first + w,
first + w + W, ..., which is the order in which torch's DataLoader takes
their items, so batch k of an epoch is always step first + k, whatever
num_workers is. Nothing is read twice or skipped.

The fast path is ``num_workers=0``: the batches then come from a loaderx
DataLoader in the training process, whose threads gather ahead into
buffers that are recycled, and torch wraps them without a copy. With
``num_workers`` > 0 each torch worker process opens the stores itself and
gathers its steps with one call per stream, and torch copies every batch
into new shared memory to hand it to the training process: that copy and
the fresh memory it takes cost more than the gather (doc/python-benchmarks.md).

Resuming: state_dict() is the next step the training process will receive
and load_state_dict() makes the next iteration start there (to the end of
that step's epoch). The count is the training process's: with
num_workers=0 the dataset counts the batches it hands out, and with
workers it is StepLoader that counts the batches torch delivers, so
iterate a StepLoader (not a bare torch DataLoader) when workers are used.

The dataset holds paths and parameters only, so it pickles (for the
"spawn" start method) and forks freely; loaders and store handles are made
where they are used. Its epoch and resume point are kept in shared memory
that torch's worker processes share with the training process, so
set_epoch() and load_state_dict() reach workers that outlive an iteration
(``persistent_workers=True``), with any start method. A copy pickled
other than to start a process is independent of the original.
"""

import multiprocessing.context
import multiprocessing.sharedctypes
import os

import numpy as np
import torch
import torch.utils.data

from . import _lib
from .dataloader import DataLoader, _dense_columns, _layouts, _saved_step
from .errors import invalid
from .zrecord import _Store, _absolute, open_store
from .zsampler import Sampler, _mode

__all__ = ["StreamDataset", "StepLoader"]

# Steps are below 2**63, the bound of load_state_dict() and of the signed
# shared counters.
_STEP_BOUND = 2**63

# The shared resume point when there is none.
_NO_RESUME = -1


def _integer(name, v, low, high):
    """v as an int, checked to be in [low, high], or an error naming it."""
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) \
            or not low <= v <= high:
        raise invalid(f"{name} must be an integer in [{low}, {high}], not "
                      f"{v!r}")
    return int(v)


def _shared_span(epoch, resume):
    """Shared memory for an epoch and a resume point: forked workers
    inherit it and spawned ones receive it while they start, so either sees
    what the training process sets after they have started."""
    span = multiprocessing.sharedctypes.RawArray("q", 2)
    span[0] = epoch
    span[1] = _NO_RESUME if resume is None else resume
    return span


def _distributed():
    """(rank, world) of the initialised torch.distributed group, or None."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


class StreamDataset(torch.utils.data.IterableDataset):
    """Batches of named stores, one item per step, for torch's DataLoader.

    StreamDataset(streams, batch_size, mode="cyclic", seed=0, rank=None,
    world=None, prefetch=2, threads=1, transform=None, mmap=True,
    ragged="list", pad=0, length=None, block=None, window=None)

    streams maps names to store paths or to read-only stores (of equal
    length); each process and each torch worker opens them read-only for
    itself. batch_size is this rank's share of a step. rank and world
    default to torch.distributed's when it is initialised, else 0 and 1.
    prefetch and threads are the loaderx DataLoader's prefetch and workers
    on the num_workers=0 path; transform maps each batch dict (NumPy
    arrays, Ragged streams as lists) to the item, on the loader's threads
    or in the torch worker. ragged, pad and length are the loaderx
    DataLoader's: "padded", "packed" or "packed_flat" makes each Ragged
    stream one tensor (with NAME_lengths, or NAME_offsets and for
    packed_flat NAME_shapes), which torch hands over far more cheaply
    than a list of tensors; length pads to a fixed number of rows, the
    same shape every step, and refuses longer records. block and window
    are the QUASI mode's (the Sampler's).
    """

    def __init__(self, streams, batch_size, mode="cyclic", seed=0, rank=None,
                 world=None, prefetch=2, threads=1, transform=None,
                 mmap=True, ragged="list", pad=0, length=None, block=None,
                 window=None):
        super().__init__()
        if not isinstance(streams, dict) or not streams:
            raise invalid("streams must be a non-empty dict of name: store "
                          "path or read-only store")
        paths = {}
        for name, s in streams.items():
            if isinstance(s, _Store):
                if s.writable:
                    raise invalid(f"stream {name!r}: {s.path} is open for "
                                  "writing; a dataset reads stores opened "
                                  "with readonly=True, or their paths")
                s = s._abspath
            elif not isinstance(s, (str, bytes, os.PathLike)):
                raise invalid(f"stream {name!r} is a {type(s).__name__}, "
                              "not a store or a store's path")
            paths[name] = _absolute(s)
        if rank is None and world is None:
            rank, world = _distributed() or (0, 1)
        elif rank is None or world is None:
            raise invalid("give both rank and world, or neither (then they "
                          "are torch.distributed's)")
        if transform is not None and not callable(transform):
            raise invalid(f"transform {transform!r} is not callable")
        self._paths = paths
        self._mmap = bool(mmap)
        self._transform = transform
        # Used only with num_workers=0, but checked here, under their own
        # names, rather than as the loaderx DataLoader's in the first
        # iteration.
        self._prefetch = _integer("prefetch", prefetch, 1,
                                  _lib.ZR_LOADER_MAX_DEPTH)
        self._threads = _integer("threads", threads, 1,
                                 _lib.ZR_LOADER_MAX_THREADS)
        # Open the stores once here: it checks the paths, the lengths and
        # the sampling parameters before any worker starts, and the
        # sampler gives the steps of a cycle.
        stores = [open_store(p, readonly=True, mmap=self._mmap)
                  for p in paths.values()]
        try:
            lengths = {n: len(s) for n, s in zip(paths, stores)}
            if len(set(lengths.values())) != 1:
                raise invalid("the streams differ in length: " + ", ".join(
                    f"{n}={v}" for n, v in lengths.items()))
            # Checked here, with the stores' kinds, not first in a worker.
            _layouts(list(paths), stores, ragged, pad, length)
        finally:
            for s in stores:
                s.close()
        self._ragged = ragged
        self._pad = pad
        self._length = length
        self._n = lengths[next(iter(paths))]
        sampler = Sampler(self._n, batch_size, _mode(mode), seed=seed,
                          rank=rank, world=world, block=block, window=window)
        self._mode = sampler.mode
        self._quasi = ((sampler.block, sampler.window)
                       if sampler.mode == Sampler.Mode.QUASI else (None, None))
        self._batch_size = sampler.batch_size
        self._seed = sampler.seed
        self._rank = sampler.rank
        self._world = sampler.world
        self._len = self._n // sampler.global_batch
        # The epoch and a step to start the next iteration at
        # (load_state_dict), which torch's workers read at the start of
        # every iteration; and the next step the training process is to
        # receive, which is the training process's alone.
        self._span_state = _shared_span(0, None)
        self._position = 0

    # The training process writes the shared state between iterations
    # (set_epoch, load_state_dict, the end of one) and a worker reads it as
    # one starts, so it needs no lock (which would have to be made for a
    # start method the dataset does not know).
    @property
    def _epoch(self):
        return self._span_state[0]

    @_epoch.setter
    def _epoch(self, epoch):
        self._span_state[0] = epoch

    @property
    def _resume(self):
        step = self._span_state[1]
        return None if step == _NO_RESUME else step

    @_resume.setter
    def _resume(self, step):
        self._span_state[1] = _NO_RESUME if step is None else step

    def __getstate__(self):
        state = self.__dict__.copy()
        # Shared memory goes only to a process being started, which it
        # then shares with this one; any other copy gets memory of its own.
        if multiprocessing.context.get_spawning_popen() is None:
            state["_span_state"] = (self._epoch, self._resume)
        return state

    def __setstate__(self, state):
        if isinstance(state["_span_state"], tuple):
            state["_span_state"] = _shared_span(*state["_span_state"])
        self.__dict__.update(state)

    # ---- epochs and resuming -------------------------------------------

    def set_epoch(self, epoch):
        """Make the next iteration epoch ``epoch``: the steps [epoch *
        len(self), (epoch + 1) * len(self)), which must stay below 2**63.
        A resume point that load_state_dict set in another epoch is
        dropped. Workers that torch keeps from one iteration to the next
        (persistent_workers) take the epoch when the next one starts."""
        # The epoch's steps, and the step after them that state_dict() then
        # gives, are below the bound that load_state_dict() takes back.
        epoch = _integer("epoch", epoch, 0, (_STEP_BOUND - 1) // self._len - 1)
        if self._resume is not None and self._resume // self._len != epoch:
            self._resume = None
        self._epoch = epoch

    @property
    def epoch(self):
        return self._epoch

    def _span(self):
        """The steps [first, end) of the next iteration."""
        first = self._epoch * self._len
        if self._resume is not None:
            first = self._resume
        return first, (self._epoch + 1) * self._len

    def __len__(self):
        """The batches of the next iteration: a whole epoch, or what is
        left of it after load_state_dict."""
        first, end = self._span()
        return end - first

    def state_dict(self):
        """The next step the training process is to receive, with the
        sampling parameters that give it its meaning."""
        return {"step": self._position, "epoch": self._position // self._len,
                "batch_size": self._batch_size, "mode": self._mode.name,
                "seed": self._seed, "world": self._world, "n": self._n,
                "block": self._quasi[0] or 0, "window": self._quasi[1] or 0}

    def load_state_dict(self, state):
        """Start the next iteration at the saved step, in its epoch. The
        state must come from the same sampling (seed, mode, batch size,
        world, number of records); any rank's state will do."""
        step = _saved_step(state, self.state_dict(), "StreamDataset",
                           "dataset", _STEP_BOUND)
        self._epoch = step // self._len
        self._resume = step
        self._position = step

    # ---- iterating ---------------------------------------------------------

    def __iter__(self):
        first, end = self._span()
        info = torch.utils.data.get_worker_info()
        if info is None:
            return self._from_loader(first, end)
        return self._from_worker(first + info.id, end, info.num_workers)

    def _from_loader(self, first, end):
        """All steps in the training process, from a loaderx DataLoader."""
        if first >= end:
            self._finish(end)
            return
        loader = DataLoader(dict(self._paths), batch_size=self._batch_size,
                            mode=self._mode, seed=self._seed,
                            start_step=first, transform=self._transform,
                            prefetch=self._prefetch, workers=self._threads,
                            rank=self._rank, world=self._world,
                            mmap=self._mmap, ragged=self._ragged,
                            pad=self._pad, length=self._length,
                            block=self._quasi[0], window=self._quasi[1])
        try:
            for step in range(first, end):
                batch = next(loader)
                # Counted before the yield: once torch has the batch, it is
                # the training process's.
                self._position = step + 1
                yield batch
            self._finish(end)
        finally:
            loader.close()

    def _finish(self, end):
        self._position = end
        self._resume = None

    def _from_worker(self, first, end, stride):
        """Every stride-th step from first, in a torch worker process."""
        stores = {n: open_store(p, readonly=True, mmap=self._mmap)
                  for n, p in self._paths.items()}
        sampler = Sampler(self._n, self._batch_size, self._mode,
                          seed=self._seed, rank=self._rank, world=self._world,
                          block=self._quasi[0], window=self._quasi[1])
        layouts = _layouts(list(stores), list(stores.values()), self._ragged,
                           self._pad, self._length)
        try:
            for step in range(first, end, stride):
                idx = sampler.batch(step)
                batch = {}
                for n, s in stores.items():
                    if n not in layouts:
                        batch[n] = s[idx]
                        continue
                    layout, _, rows = layouts[n]
                    _dense_columns(batch, n, layout,
                                   s._dense(idx, layout, rows,
                                            self._pad_of(n)))
                if self._transform is not None:
                    batch = self._transform(batch)
                yield batch
        finally:
            for s in stores.values():
                s.close()

    def _pad_of(self, name):
        pad = self._pad
        return pad.get(name, 0) if isinstance(pad, dict) else pad

    def __repr__(self):
        return (f"StreamDataset({', '.join(self._paths)}; batch_size="
                f"{self._batch_size}, mode={self._mode.name}, rank="
                f"{self._rank}, world={self._world}, epoch={self._epoch})")


class StepLoader(torch.utils.data.DataLoader):
    """torch's DataLoader over a StreamDataset, counting the steps.

    StepLoader(dataset, num_workers=0, **kwargs): the other arguments are
    torch.utils.data.DataLoader's (pin_memory, prefetch_factor, ...),
    except batch_size, sampler and shuffle, which the dataset's steps
    replace. The loader records each batch it delivers in the dataset, so
    state_dict() is exact with any number of workers.
    """

    def __init__(self, dataset, num_workers=0, **kwargs):
        if not isinstance(dataset, StreamDataset):
            raise invalid(f"StepLoader reads a StreamDataset, not a "
                          f"{type(dataset).__name__}")
        for key in ("batch_size", "sampler", "batch_sampler", "shuffle"):
            if kwargs.get(key) not in (None, False):
                raise invalid(f"StepLoader takes no {key}: each item of a "
                              "StreamDataset is a whole batch, drawn by the "
                              "loaderx sampler")
            kwargs.pop(key, None)
        super().__init__(dataset, batch_size=None, num_workers=num_workers,
                         **kwargs)

    def __iter__(self):
        ds = self.dataset
        first, end = ds._span()
        step = first
        for batch in super().__iter__():
            step += 1
            ds._position = step
            yield batch
        ds._finish(end)

    def state_dict(self):
        return self.dataset.state_dict()

    def load_state_dict(self, state):
        self.dataset.load_state_dict(state)

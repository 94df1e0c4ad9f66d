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

Both paths hand over batches without a copy. With ``num_workers=0`` the
batches come from one loaderx DataLoader in the training process, kept
from epoch to epoch, whose threads gather ahead into buffers that are
recycled, and torch wraps them. With ``num_workers`` > 0 each torch
worker opens the stores itself and gathers its steps into shared-memory
buffers of its own; the training process maps them (through /proc, on
Linux) and wraps them as tensors, and a worker writes a buffer again
only once every tensor of the batch it held has been collected in the
training process. Arrays that a transform makes anew go through torch,
which copies them into new shared memory. StepLoader keeps its workers
from one epoch to the next (persistent_workers=True), so that their
buffers and mappings last; bench/torchbench.py measures both paths
(doc/benchmarks.md, "torch").

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

import collections.abc
import mmap
import multiprocessing.context
import multiprocessing.sharedctypes
import os
import threading
import weakref

import numpy as np
import torch
import torch.utils.data
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils.data._utils.collate import default_convert

from . import _lib
from .dataloader import DataLoader, _dense_columns, _layouts, _saved_step
from .errors import StoreError, invalid
from .zrecord import DenseStore, _Store, _absolute, open_store
from .zsampler import Sampler, _mode

__all__ = ["StreamDataset", "StepLoader"]

# Steps are below 2**63, the bound of load_state_dict() and of the signed
# shared counters.
_STEP_BOUND = 2**63

# The shared resume point when there is none.
_NO_RESUME = -1

# A StepLoader's release table: _CELLS cells for each of the first
# _TABLE_WORKERS torch workers (a worker beyond them, or one whose cells
# the training loop holds all of, hands its batches to torch to copy, as a
# plain dataset's are).
_TABLE_WORKERS = 64
_CELLS = 64

# Offsets of the arrays in a shared batch buffer: a cache line apart.
_ALIGN = 64

# In the training process: release tables by key, the deliveries not yet
# released, and the mappings of the buffers that workers reuse, by (key,
# worker pid, cell). Mapping a buffer costs a page fault per page read,
# about as much as the gather; a kept mapping costs it once.
_TABLES = {}
_PENDING = []
_MAPS = {}
_LOCK = threading.Lock()


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


# ---- batches in shared memory, for torch's worker processes ---------------
#
# Under a StepLoader, a torch worker gathers each batch into a buffer of
# its own, a memfd that it maps, and hands the training process not the
# bytes but where they are: the worker's pid, the buffer's descriptor and
# inode, and the arrays' offsets. The training process maps the buffer
# through /proc (no copy, no round trip to the worker) and wraps the
# arrays as tensors. Once none of their storages is alive, it writes the
# delivery's token into the StepLoader's release table, a shared array;
# the worker reuses a buffer only once its cell holds the token of the
# buffer's last delivery and the worker itself holds no view of it, so a
# batch that either process still holds is never written.


def _aligned(nbytes):
    """nbytes rounded up to the alignment of a buffer's arrays."""
    return -(-nbytes // _ALIGN) * _ALIGN


def _token():
    """A delivery's token: random, never 0 (a cell's first value)."""
    return int.from_bytes(os.urandom(8), "little") | 1


class _Slice:
    """An array of a shared batch: where it lies in the buffer."""

    __slots__ = ("offset", "dtype", "shape", "strides")

    def __init__(self, offset, dtype, shape, strides):
        self.offset = offset
        self.dtype = dtype
        self.shape = shape
        self.strides = strides

    def __reduce__(self):
        return _Slice, (self.offset, self.dtype, self.shape, self.strides)


def _torch_dtype(dtype, known={}):
    """Whether torch makes tensors of the NumPy dtype."""
    if dtype not in known:
        try:
            torch.from_numpy(np.empty(0, dtype))
            known[dtype] = True
        except (TypeError, ValueError):
            known[dtype] = False
    return known[dtype]


def _walk(obj, leaf):
    """obj with leaf applied to each leaf, and its containers rebuilt as
    torch's default_convert rebuilds them (a tuple becomes a list)."""
    if isinstance(obj, collections.abc.Mapping):
        items = {k: _walk(obj[k], leaf) for k in obj}
        try:
            return type(obj)(items)
        except TypeError:
            return items
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_walk(v, leaf) for v in obj))
    if isinstance(obj, tuple):
        return [_walk(v, leaf) for v in obj]
    if isinstance(obj, collections.abc.Sequence) \
            and not isinstance(obj, (str, bytes)):
        items = [_walk(v, leaf) for v in obj]
        try:
            return type(obj)(items)
        except TypeError:
            return items
    return leaf(obj)


class _Buffer:
    """A worker's shared batch buffer and its last delivery."""

    def __init__(self, nbytes, cell, kept):
        self.fd = os.memfd_create("loaderx-batch", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, nbytes)
            self.map = mmap.mmap(self.fd, nbytes)
        except BaseException:
            os.close(self.fd)
            raise
        self.ino = os.fstat(self.fd).st_ino
        self.nbytes = nbytes
        self.cell = cell
        self.kept = kept
        self.token = 0
        # The worker's own view of the last batch: what its arrays hold.
        self.local = None

    def view(self):
        """A new view of the whole buffer, for one batch's arrays."""
        a = np.frombuffer(self.map, np.uint8)
        self.local = weakref.ref(a)
        return a

    def free(self, table):
        return (self.token == 0 or table[self.cell] == self.token) \
            and (self.local is None or self.local() is None)

    def close(self):
        self.map.close()
        os.close(self.fd)


class _Pool:
    """The shared buffers of one torch worker: at most size reused, and
    more (each closed once released) while the training process holds
    more batches than that; past the worker's cells, None."""

    def __init__(self, table, worker, size):
        self.table = table
        self.first = worker * _CELLS
        self.size = min(size, _CELLS)
        self.kept = []                    # reused, cells 0 .. size-1
        self.extra = []                   # closed once released
        self.cells = list(range(self.size, _CELLS))
        self.grown = False

    def take(self, nbytes):
        for b in [b for b in self.extra if b.free(self.table)]:
            self.extra.remove(b)
            self.cells.append(b.cell - self.first)
            b.close()
        free = [b for b in self.kept if b.free(self.table)]
        fits = [b for b in free if b.nbytes >= nbytes]
        if fits:
            return min(fits, key=lambda b: b.nbytes)
        # Batches of one size (Dense streams) get buffers of that size;
        # once one has outgrown a buffer, a quarter more, so that varying
        # sizes (Ragged streams) settle on a few buffers.
        if free:
            self.grown = True
        if self.grown:
            nbytes = nbytes * 5 // 4
        size = -(-nbytes // mmap.PAGESIZE) * mmap.PAGESIZE
        if free:
            old = free[0]
            b = _Buffer(size, old.cell, True)
            self.kept[self.kept.index(old)] = b
            old.close()
            return b
        if len(self.kept) < self.size:
            b = _Buffer(size, self.first + len(self.kept), True)
            self.kept.append(b)
            return b
        if not self.cells:
            return None
        b = _Buffer(size, self.first + self.cells[-1], False)
        self.cells.pop()
        self.extra.append(b)
        return b


class _Shared:
    """A batch in a worker's shared buffer, as torch's queue carries it:
    pickled, it is where the arrays lie; unpickled in the training
    process, it is the batch itself, its arrays tensors on that memory."""

    __slots__ = ("buffer", "key", "item")

    def __init__(self, buffer, key, item):
        self.buffer = buffer
        self.key = key
        self.item = item

    def __reduce__(self):
        b = self.buffer
        return _rebuild, (os.getpid(), b.fd, b.ino, b.nbytes, self.key,
                          b.cell, b.token, b.kept, self.item)


class _Delivery:
    """A batch the training process holds: released once its base array
    and every storage of its tensors are gone (a storage can outlive the
    array it was made from, and the array a storage: share_memory_()
    moves a tensor to new memory and lets the old go)."""

    __slots__ = ("pid", "table", "cell", "token", "base", "storages",
                 "released", "__weakref__")

    def __init__(self, table, cell, token, base, tensors):
        self.pid = os.getpid()
        self.table = table
        self.cell = cell
        self.token = token
        self.storages = [StorageWeakRef(
            t.untyped_storage() if hasattr(t, "untyped_storage")
            else t.storage()) for t in tensors]
        self.released = False
        # Collected, the base may be the last of the batch: release then,
        # so that the worker has the buffer for the batch it makes next.
        me = weakref.ref(self)
        self.base = weakref.ref(base, lambda _: me() and me().release())

    def release(self):
        """Give the buffer back if nothing here holds the batch: once,
        and only in the process that received it. True once given."""
        if not self.released and self.pid == os.getpid() \
                and self.base() is None \
                and all(s.expired() for s in self.storages):
            # Written once: a later write of this token could land after
            # the buffer's next delivery was released, and hide it.
            self.released = True
            self.table[self.cell] = self.token
        return self.released


def _sweep():
    """Release the deliveries that nothing holds any more. In a child of
    fork() they are the parent's, and go without a word."""
    with _LOCK:
        _PENDING[:] = [d for d in _PENDING
                       if d.pid == os.getpid() and not d.release()]


def _alive(pid):
    return os.path.exists(f"/proc/{pid}")


def _forget(key=None):
    """Drop the kept mappings of workers that have ended, and with a key
    all of its: the memory of a buffer lasts as long as a mapping."""
    with _LOCK:
        for k in [k for k in _MAPS if k[0] == key or not _alive(k[1])]:
            del _MAPS[k]
        if key is not None:
            _TABLES.pop(key, None)


def _map(pid, fd, ino, nbytes, key, cell, kept):
    """The worker's buffer mapped here: a kept mapping, or a new one."""
    if kept:
        with _LOCK:
            hit = _MAPS.get((key, pid, cell))
        if hit is not None and hit[0] == (fd, ino, nbytes):
            return hit[1]
    path = f"/proc/{pid}/fd/{fd}"
    try:
        f = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        raise StoreError(f"loaderx.torch: cannot open the batch buffer of "
                         f"torch worker {pid} ({path}: {e.strerror}); give "
                         "StreamDataset share=False to let torch copy the "
                         "batches instead") from None
    try:
        if os.fstat(f).st_ino != ino:
            raise StoreError(f"loaderx.torch: {path} is no longer the batch "
                             f"buffer of torch worker {pid}")
        m = mmap.mmap(f, nbytes)
    finally:
        os.close(f)
    if kept:
        # The cell's earlier buffer, if the worker has replaced it, and
        # the buffers of workers that have ended go now.
        with _LOCK:
            for k in [k for k in _MAPS if not _alive(k[1])]:
                del _MAPS[k]
            _MAPS[(key, pid, cell)] = ((fd, ino, nbytes), m)
    return m


def _rebuild(pid, fd, ino, nbytes, key, cell, token, kept, item):
    """The batch a worker delivered, on its buffer mapped here."""
    base = np.frombuffer(_map(pid, fd, ino, nbytes, key, cell, kept),
                         np.uint8)
    tensors = []

    def leaf(x):
        if isinstance(x, _Slice):
            tensors.append(torch.from_numpy(np.ndarray(
                x.shape, np.dtype(x.dtype), base, x.offset, x.strides)))
            return tensors[-1]
        return x
    batch = _walk(item, leaf)
    with _LOCK:
        table = _TABLES.get(key)
        if table is not None:
            _PENDING.append(_Delivery(table, cell, token, base, tensors))
    return batch


def _in_buffer(buffer, base):
    """The leaf function that makes an array (or CPU tensor) on the
    buffer's memory a _Slice of it, and anything else what torch's
    default_convert makes of it (a NumPy array a tensor, which torch then
    copies)."""
    lo_b = base.ctypes.data
    hi_b = lo_b + buffer.nbytes

    def leaf(x):
        a = x
        if type(x) is torch.Tensor:
            if x.device.type != "cpu" or x.requires_grad or x.is_sparse:
                return x
            try:
                a = x.numpy()
            except (TypeError, RuntimeError):
                return x
        # torch makes no tensor of negative strides or of strides that are
        # not whole items: default_convert says so.
        if type(a) is np.ndarray and a.size and _torch_dtype(a.dtype) \
                and all(s >= 0 and s % a.itemsize == 0 for s in a.strides):
            lo, hi = np.byte_bounds(a)
            if lo_b <= lo and hi <= hi_b:
                first = a.__array_interface__["data"][0]
                return _Slice(first - lo_b, a.dtype.str, a.shape, a.strides)
        return default_convert(x)
    return leaf


class StreamDataset(torch.utils.data.IterableDataset):
    """Batches of named stores, one item per step, for torch's DataLoader.

    StreamDataset(streams, batch_size, mode="cyclic", seed=0, rank=None,
    world=None, prefetch=2, threads=1, transform=None, mmap=True,
    ragged="list", pad=0, length=None, block=None, window=None,
    share=True)

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

    With num_workers=0 the batches come from one loaderx DataLoader that
    the dataset keeps from epoch to epoch (close() ends it). A torch
    worker gathers each batch into shared memory that it reuses once the
    training process has let the batch go (every tensor of it collected),
    and the training process maps it without a copy (share=True, on
    Linux); arrays that a transform makes anew are copied by torch, as
    are all of them with share=False.
    """

    def __init__(self, streams, batch_size, mode="cyclic", seed=0, rank=None,
                 world=None, prefetch=2, threads=1, transform=None,
                 mmap=True, ragged="list", pad=0, length=None, block=None,
                 window=None, share=True):
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
        self._share = bool(share)
        # The loader of the num_workers=0 path, kept across epochs, and
        # whether an iteration is reading it; in a worker that a StepLoader
        # started, what it shares batches through (its table's key, the
        # table, how many buffers to reuse; set by the loader's
        # worker_init_fn), and its buffers.
        self._loader = None
        self._loader_busy = False
        self._deliver = None
        self._pool = None

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
            state["_deliver"] = None
        state.update(_loader=None, _loader_busy=False, _pool=None)
        return state

    def __setstate__(self, state):
        if isinstance(state["_span_state"], tuple):
            state["_span_state"] = _shared_span(*state["_span_state"])
        self.__dict__.update(state)

    def close(self):
        """End the loader that the num_workers=0 path keeps from epoch to
        epoch (its threads and buffers); the next iteration makes another.
        Batches already taken stay valid."""
        loader, self._loader = self._loader, None
        if loader is not None and loader._handle.pid == os.getpid():
            loader.close()

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
        """All steps in the training process, from a loaderx DataLoader:
        the one kept across epochs, moved to first if it stands elsewhere,
        or one of this iteration's own while another iteration reads it."""
        if first >= end:
            self._finish(end)
            return
        loader = self._loader
        if loader is not None and (loader.closed
                                   or loader._handle.pid != os.getpid()):
            loader = self._loader = None
        own = self._loader_busy
        if own or loader is None:
            loader = self._new_loader(first)
            if not own:
                self._loader = loader
        elif loader.step != first:
            loader.load_state_dict({"step": first})
        if not own:
            self._loader_busy = True
        try:
            for step in range(first, end):
                batch = next(loader)
                # Counted before the yield: once torch has the batch, it is
                # the training process's.
                self._position = step + 1
                yield batch
                # Not held while the next is gathered: the loader's
                # threads may need its buffer back.
                del batch
            self._finish(end)
        finally:
            if own:
                loader.close()
            else:
                self._loader_busy = False

    def _new_loader(self, first):
        return DataLoader(dict(self._paths), batch_size=self._batch_size,
                          mode=self._mode, seed=self._seed, start_step=first,
                          transform=self._transform, prefetch=self._prefetch,
                          workers=self._threads, rank=self._rank,
                          world=self._world, mmap=self._mmap,
                          ragged=self._ragged, pad=self._pad,
                          length=self._length, block=self._quasi[0],
                          window=self._quasi[1])

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
        pool = self._worker_pool()
        try:
            for step in range(first, end, stride):
                yield self._worker_batch(pool, stores, layouts,
                                         sampler.batch(step))
        finally:
            for s in stores.values():
                s.close()

    def _worker_pool(self):
        """This worker's buffers, or None where batches are not shared."""
        info = torch.utils.data.get_worker_info()
        if not self._share or self._deliver is None \
                or info.id >= _TABLE_WORKERS \
                or not os.path.isdir(f"/proc/{os.getpid()}/fd"):
            return None
        if self._pool is None or self._pool[0] != os.getpid():
            _, table, size = self._deliver
            self._pool = (os.getpid(), _Pool(table, info.id, size))
        return self._pool[1]

    def _worker_batch(self, pool, stores, layouts, idx):
        """The batch of idx: in a buffer of pool, as a _Shared, or as the
        stores give it where there is no pool or it has no buffer."""
        u = np.ascontiguousarray(idx, dtype=np.uint64)
        # The batch's arrays in order: a Dense stream's to be gathered
        # (straight into the buffer), the others read (a Ragged stream's
        # the library allocates, then copied into the buffer).
        plan, size = [], 0
        for n, s in stores.items():
            if pool is not None and n not in layouts \
                    and isinstance(s, DenseStore):
                shape = (u.size,) + s.item_shape
                plan.append((n, s, shape))
                size += _aligned(int(np.prod(shape)) * s.dtype.itemsize)
                continue
            if n in layouts:
                layout, _, rows = layouts[n]
                cols = {}
                _dense_columns(cols, n, layout,
                               s._dense(idx, layout, rows, self._pad_of(n)))
            else:
                cols = {n: s[idx]}
            for name, v in cols.items():
                plan.append((name, v, None))
                size += sum(_aligned(a.nbytes)
                            for a in (v if isinstance(v, list) else [v]))
        buffer = pool.take(max(size, 1)) if pool is not None else None
        if buffer is None:
            batch = {name: src[idx] if shape else src
                     for name, src, shape in plan}
            if self._transform is not None:
                batch = self._transform(batch)
            return batch
        batch, at, base = {}, 0, buffer.view()

        def place(dtype, shape):
            nonlocal at
            a = np.ndarray(shape, dtype, base, at)
            at += _aligned(a.nbytes)
            return a

        for name, src, shape in plan:
            if shape:
                batch[name] = place(np.dtype(src.dtype), shape)
                src._gather_into(u, batch[name])
            elif isinstance(src, list):
                batch[name] = [place(a.dtype, a.shape) for a in src]
                for a, b in zip(src, batch[name]):
                    b[...] = a
            else:
                batch[name] = place(src.dtype, src.shape)
                batch[name][...] = src
        if self._transform is not None:
            batch = self._transform(batch)
        item = _walk(batch, _in_buffer(buffer, base))
        buffer.token = _token()
        return _Shared(buffer, self._deliver[0], item)

    def _pad_of(self, name):
        pad = self._pad
        return pad.get(name, 0) if isinstance(pad, dict) else pad

    def __repr__(self):
        return (f"StreamDataset({', '.join(self._paths)}; batch_size="
                f"{self._batch_size}, mode={self._mode.name}, rank="
                f"{self._rank}, world={self._world}, epoch={self._epoch})")


class _WorkerInit:
    """A StepLoader's worker_init_fn: gives the worker's copy of the
    dataset the loader's release table, then calls the caller's own."""

    def __init__(self, fn):
        self.fn = fn
        self.deliver = None

    def __call__(self, worker_id):
        torch.utils.data.get_worker_info().dataset._deliver = self.deliver
        if self.fn is not None:
            self.fn(worker_id)


class StepLoader(torch.utils.data.DataLoader):
    """torch's DataLoader over a StreamDataset, counting the steps.

    StepLoader(dataset, num_workers=0, **kwargs): the other arguments are
    torch.utils.data.DataLoader's (pin_memory, prefetch_factor, ...),
    except batch_size, sampler and shuffle, which the dataset's steps
    replace. The loader records each batch it delivers in the dataset, so
    state_dict() is exact with any number of workers.

    With workers, persistent_workers defaults to True: workers that
    outlive an epoch keep their batch buffers, which the training process
    has mapped already, where new ones would map and fault in new memory
    every epoch. The dataset's set_epoch and load_state_dict reach them
    all the same. The workers hand their batches over in those buffers
    without a copy unless a collate_fn is given, which then gets each
    batch as the dataset makes it (and torch copies its result); a bare
    torch DataLoader over a StreamDataset works as with any dataset.
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
        # A worker reuses as many buffers as torch keeps batches in flight
        # for it, and two more for those the training loop holds.
        ahead = kwargs.get("prefetch_factor")
        if not isinstance(ahead, int) or ahead < 1:
            ahead = 2                     # torch's default; it checks others
        self._pool_size = ahead + 2
        self._key = None
        # What the workers share their batches through reaches them with
        # their worker_init_fn, which is this loader's alone.
        self._init = _WorkerInit(kwargs.get("worker_init_fn"))
        kwargs["worker_init_fn"] = self._init
        if isinstance(num_workers, int) and num_workers > 0:
            kwargs.setdefault("persistent_workers", True)
        super().__init__(dataset, batch_size=None, num_workers=num_workers,
                         **kwargs)

    def _table(self):
        """A release table for the workers this iteration starts: a new
        one for every start, so that no late release of earlier workers'
        batches, nor any other loader's, lands in their cells."""
        with _LOCK:
            _TABLES.pop(self._key, None)
        self._key = os.urandom(8).hex()
        table = multiprocessing.sharedctypes.RawArray(
            "Q", _TABLE_WORKERS * _CELLS)
        with _LOCK:
            _TABLES[self._key] = table
        weakref.finalize(self, _forget, self._key)
        return self._key, table, self._pool_size

    def __iter__(self):
        ds = self.dataset
        first, end = ds._span()
        step = first
        _sweep()
        starts = self.num_workers > 0 and not (
            self.persistent_workers and self._iterator is not None)
        if starts:
            # Workers share their batches only into torch's own
            # default_convert: a collate_fn of the caller's gets the
            # dataset's batch itself.
            self._init.deliver = (self._table() if self.collate_fn
                                  is default_convert else None)
        batches = super().__iter__()
        try:
            for batch in batches:
                step += 1
                ds._position = step
                yield batch
                del batch
                _sweep()
            ds._finish(end)
        finally:
            # The workers have ended (or end now, unless persistent): so
            # can the training process's mappings of their buffers.
            del batches
            _forget()

    def state_dict(self):
        return self.dataset.state_dict()

    def load_state_dict(self, state):
        self.dataset.load_state_dict(state)

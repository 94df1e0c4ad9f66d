"""DataLoader: an endless, prefetching iterator of batches over stores.

The loader is libloaderx's: worker threads draw the indices of each step
from the sampler, gather every stream at those indices into recycled batch
buffers and keep ``prefetch`` batches ready, all without the GIL. Taking a
batch is one library call. Dense streams come out as one array of shape
(batch_size, *item_shape), Ragged streams as a list of arrays; every array
is a view of the loader's buffer, so nothing is copied after the gather.

A buffer goes back to the loader when the last array that views it is
garbage collected, not before: a batch (or any array taken from it) stays
valid for as long as the program holds it, and a program that drops each
batch before taking the next keeps ``prefetch`` + 1 buffers in use.

The transform runs on the loader's worker threads, as the library's own
transform hook, so that collation and host-to-device copies overlap the
training step instead of adding to it. A Python callable needs the GIL to
run, and cffi's callbacks take it on the C thread for the call; this is
safe (the calling thread is one the library created, never one that holds
the GIL) and worth it because the work a transform typically does (NumPy
operations, torch's ``.to(device)``, ``jax.device_put``) releases the GIL
again. With ``workers`` > 1, transforms of different steps run at the same
time, so a transform must be thread-safe. The transform receives the batch
dict and returns what the iterator yields, usually a dict again; if it
raises, the iterator raises that exception for that step and goes on with
the next one at the next call.
"""

import atexit
import os
import threading
import traceback
import weakref
from collections.abc import Mapping

import numpy as np

from . import _lib
from ._lib import ffi, lib
from .errors import (StoreBusyError, StoreError, check, error_from_code,
                     invalid)
from .zrecord import _pad_item, _Store, dense_arrays, open_store
from .zsampler import Sampler, _mode, _quasi_params

__all__ = ["DataLoader"]

# Set on a worker thread while it runs a Python transform. Code that would
# block on the loader (destroying it, which waits for its workers) must not
# run there; it is handed to a thread of its own instead.
_tls = threading.local()

# Loaders whose workers call Python. They are destroyed before the
# interpreter shuts down, when a worker could no longer take the GIL.
_calling_python = weakref.WeakSet()


class _Lease:
    """The claim of the arrays of one batch on the loader's buffer.

    Every array of a batch views memory through an object that holds the
    lease; when the last of them is collected, the lease gives the batch
    back. A lease whose batch was never handed out (a transform that
    failed, a loader closed before the step was taken) gives back nothing:
    the loader still owns that batch.
    """

    __slots__ = ("handle", "batch")

    def __init__(self):
        self.handle = None
        self.batch = None

    def __del__(self):
        handle = self.handle
        if handle is not None:
            self.handle = None
            handle.release(self.batch)


class _Memory:
    """A window on a batch buffer that NumPy wraps without copying."""

    __slots__ = ("lease", "__array_interface__")

    def __init__(self, lease, address, nbytes):
        self.lease = lease
        self.__array_interface__ = {"data": (address, False),
                                    "shape": (nbytes,), "typestr": "|u1",
                                    "version": 3}


_LAYOUTS = {"list": None, "padded": _lib.ZR_PADDED, "packed": _lib.ZR_PACKED,
            "packed_flat": _lib.ZR_PACKED_FLAT}

# The arrays that come with a Ragged stream made dense, by layout: the
# suffixes of their names in the batch dict.
_EXTRAS = {_lib.ZR_PADDED: ("_lengths",), _lib.ZR_PACKED: ("_offsets",),
           _lib.ZR_PACKED_FLAT: ("_offsets", "_shapes")}


def _saved_step(state, mine, kind, noun, bound):
    """The step of a saved state (a dict from state_dict()), checked
    against this object's own state mine: the sampling parameters must be
    the same, or the step would mean other records."""
    if not isinstance(state, Mapping) or "step" not in state:
        raise invalid(f"a {kind} state is the dict state_dict() "
                      f"returns, not {state!r:.80}")
    for key in ("batch_size", "mode", "seed", "world", "n", "block",
                "window"):
        if key in state and state[key] != mine[key]:
            raise invalid(f"the state was saved with {key}="
                          f"{state[key]!r}, this {noun} has {key}="
                          f"{mine[key]!r}")
    step = state["step"]
    if not isinstance(step, (int, np.integer)) or isinstance(step, bool) \
            or not 0 <= step < bound:
        raise invalid(f"the state's step {step!r} is not in [0, {bound})")
    return int(step)


def _dense_columns(out, name, layout, arrays):
    """File a dense Ragged stream's arrays under their names in out."""
    values, lengths, offsets, shapes = arrays
    out[name] = values
    if layout == _lib.ZR_PADDED:
        out[name + "_lengths"] = lengths
    else:
        out[name + "_offsets"] = offsets
    if layout == _lib.ZR_PACKED_FLAT:
        out[name + "_shapes"] = shapes


class _Stream:
    """What the binding needs to know of one stream to read its columns."""

    __slots__ = ("name", "dense", "dtype", "item_shape", "layout", "pad",
                 "rows")

    def __init__(self, name, store, layout=None, pad=None, rows=0):
        self.name = name
        self.dense = store._kind == _lib.ZR_DENSE
        self.dtype = store.dtype
        self.item_shape = store.item_shape if self.dense else None
        # A Ragged stream made dense: ZR_PADDED or ZR_PACKED, and the pad
        # item (a cffi buffer, or NULL for zeros).
        self.layout = layout
        self.pad = pad
        # Padded: the fixed rows to pad to, 0 for the batch's longest.
        self.rows = rows


def _columns(b, streams, lease):
    """The batch dict of a zr_batch: arrays viewing its buffers."""
    size = int(b.size)
    out = {}
    for k, s in enumerate(streams):
        col = b.streams[k]
        addr = int(ffi.cast("uintptr_t", col.data))
        base = np.asarray(_Memory(lease, addr, int(col.nbytes)))
        if s.dense:
            out[s.name] = base.view(s.dtype).reshape((size,) + s.item_shape)
            continue
        if s.layout is not None:
            dense = ffi.new("zr_ragged_dense **")
            check(lib.zr_ragged_densify(col.views, size, s.dtype.itemsize,
                                        s.layout, s.rows, s.pad, dense))
            _dense_columns(out, s.name, s.layout,
                           dense_arrays(dense[0], s.dtype))
            continue
        recs = []
        for i in range(size):
            v = col.views[i]
            off = int(ffi.cast("uintptr_t", v.data)) - addr
            shape = tuple(v.shape[0:v.ndim])
            recs.append(base[off:off + int(v.nbytes)].view(s.dtype)
                        .reshape(shape))
        out[s.name] = recs
    return out


class _Transform:
    """The Python side of the library's transform hook.

    It runs on the worker threads: it reads the gathered batch as arrays,
    calls the user's transform and files the result (or the exception)
    under the batch's step, where the consuming thread picks it up when
    the library hands that step out.
    """

    def __init__(self, fn, streams):
        self.fn = fn
        self.streams = streams
        self.results = {}

    def run(self, b):
        lease = _Lease()
        result = self.fn(_columns(b, self.streams, lease))
        self.results[int(b.step)] = (result, lease)

    def hook(self, b, user):
        _tls.in_transform = True
        try:
            self.run(b)
            return 0
        except BaseException as e:
            # The traceback keeps the frames' locals, which include arrays
            # on a buffer the loader takes back; clear them so that the
            # exception cannot be used to reach that memory later.
            traceback.clear_frames(e.__traceback__)
            self.results[int(b.step)] = e
            return _lib.ZR_EINVAL
        finally:
            _tls.in_transform = False


class _Handle:
    """One zr_loader and the accounting that decides when it may go.

    The loader is destroyed once it is closed (explicitly, or because the
    DataLoader was collected) and no batch is out: the leases of handed-out
    batches hold this object, so it outlives every array on its buffers.
    """

    def __init__(self, stores, names, opts, transform, layouts=None):
        # The loader's worker threads exist only in the process that made
        # it: a child of fork() inherits the memory but not the threads.
        self.pid = os.getpid()
        # Stores the DataLoader opened itself from paths, closed with it.
        self.owned = []
        self.lock = threading.RLock()     # ptr, outstanding, closing
        self.next_lock = threading.RLock()  # zr_loader_next is single-caller
        self.ptr = None
        self.outstanding = 0
        self.closing = False
        self.stores = stores
        layouts = layouts or {}
        self.streams = [_Stream(n, s, *layouts.get(n, (None, None, 0)))
                        for n, s in zip(names, stores)]
        self.transform = None
        self.callback = None
        self.out = ffi.new("zr_batch **")
        ptrs = []
        try:
            for s in stores:
                ptrs.append(s._pin())
            if transform is not None:
                self.transform = _Transform(transform, self.streams)
                self.callback = ffi.callback("zr_transform_fn",
                                             self.transform.hook,
                                             error=_lib.ZR_EINVAL)
                opts.transform = self.callback
            names_c = [ffi.new("char[]", n.encode()) for n in names]
            out = ffi.new("zr_loader **")
            check(lib.zr_loader_create(out, ffi.new("zr_store *[]", ptrs),
                                       ffi.new("const char *[]", names_c),
                                       len(stores), opts))
            self.ptr = out[0]
        finally:
            if self.ptr is None:
                for s in stores[:len(ptrs)]:
                    s._unpin()
        if transform is not None:
            _calling_python.add(self)

    def check_process(self):
        """Raise at once in a process other than the one that made the
        loader, where waiting for a batch would wait for ever."""
        if os.getpid() != self.pid:
            raise invalid(
                f"this DataLoader was created in process {self.pid} and is "
                f"used in process {os.getpid()}: a loader's worker threads "
                "do not survive fork(). Create the loader in the process "
                "that reads it (loaderx.torch.StreamDataset does so in "
                "each torch worker)", StoreBusyError)

    def next(self):
        """Take the next step's batch: what the iterator yields."""
        self.check_process()
        if getattr(_tls, "in_transform", False):
            # The transform runs on a worker while the caller waits in
            # next(): asking for a batch from there would wait for itself.
            raise invalid("a DataLoader cannot be advanced from inside a "
                          "transform")
        with self.next_lock:
            with self.lock:
                if self.ptr is None or self.closing:
                    raise invalid("the DataLoader is closed")
                ptr = self.ptr
            step = int(lib.zr_loader_step(ptr))
            rc = lib.zr_loader_next(ptr, self.out)
            if rc < 0:
                err = error_from_code(rc)
                got = self.transform.results.pop(step, None) \
                    if self.transform else None
                if isinstance(got, BaseException):
                    raise got from err
                raise err
            b = self.out[0]
            # Count the batch at once: from here on, a lease collected on
            # this or another thread must not see the loader idle.
            with self.lock:
                self.outstanding += 1
            if self.transform is not None:
                got = self.transform.results.pop(int(b.step), None)
                if not isinstance(got, tuple):
                    self.release(b)
                    raise StoreError(f"step {int(b.step)} was handed out "
                                     "without its transform's result")
                result, lease = got
            else:
                lease = _Lease()
            lease.batch = b
            lease.handle = self
            if self.transform is None:
                result = _columns(b, self.streams, lease)
            return result

    def release(self, b):
        """Give a handed-out batch back (from a lease's finaliser)."""
        if os.getpid() != self.pid:
            return
        with self.lock:
            if self.ptr is None:
                return
            lib.zr_batch_release(b)
            self.outstanding -= 1
            last = self.closing and self.outstanding == 0
        if last:
            self.destroy()

    def close(self):
        if os.getpid() != self.pid:
            return
        with self.lock:
            if self.ptr is None or self.closing:
                return
            self.closing = True
            last = self.outstanding == 0
        if last:
            self.destroy()

    def destroy(self, force=False):
        """Destroy the loader if nothing holds its batches (or if forced)."""
        if os.getpid() != self.pid:
            # In a child of fork() the workers that zr_loader_destroy would
            # wait for do not exist: the copy of the loader is left as it
            # is, and goes with the child.
            return
        if getattr(_tls, "in_transform", False):
            # Destroying waits for the workers, one of which is this thread.
            threading.Thread(target=self.destroy, args=(force,),
                             daemon=True).start()
            return
        with self.next_lock:
            with self.lock:
                if self.ptr is None or (self.outstanding and not force):
                    return
                ptr, self.ptr = self.ptr, None
            lib.zr_loader_destroy(ptr)
        if self.transform is not None:
            self.transform.results.clear()
        for s in self.stores:
            s._unpin()
        owned, self.owned = self.owned, []
        for s in owned:
            s.close()

    def __del__(self):
        if getattr(self, "ptr", None) is not None:
            self.destroy(force=True)


@atexit.register
def _shutdown():
    for handle in list(_calling_python):
        handle.destroy(force=True)


def _identity(batch):
    return batch


def _layouts(names, stores, ragged, pad, length=None):
    """{name: (layout, pad item, rows)} of the Ragged streams to make
    dense, from the ragged, pad and length arguments."""
    per = ragged if isinstance(ragged, Mapping) else \
        {n: ragged for n, s in zip(names, stores) if s._kind == _lib.ZR_RAGGED}
    kinds = dict(zip(names, stores))
    lengths = length if isinstance(length, Mapping) else \
        {n: length for n, lay in per.items() if lay == "padded"} \
        if length is not None else {}
    if length is not None and not lengths:
        raise invalid("length is given but no stream is padded: it is the "
                      "rows padded streams are padded to")
    for name, rows in lengths.items():
        if per.get(name) != "padded":
            raise invalid(f"length is given for {name!r}, which is not a "
                          "padded stream: only padded streams have a length")
        if not isinstance(rows, (int, np.integer)) or \
                isinstance(rows, bool) or not 1 <= rows < 2**63:
            raise invalid(f"length must be a positive integer, not "
                          f"{rows!r}")
    out = {}
    for name, layout in per.items():
        if name not in kinds:
            raise invalid(f"ragged names {name!r}, which is not a stream")
        if layout not in _LAYOUTS:
            raise invalid(f"unknown Ragged layout {layout!r} for {name!r}; "
                          f"expected one of {', '.join(_LAYOUTS)}")
        if _LAYOUTS[layout] is None:
            continue
        if kinds[name]._kind != _lib.ZR_RAGGED:
            raise invalid(f"stream {name!r} is Dense: only Ragged streams "
                          "are padded or packed")
        for suffix in _EXTRAS[_LAYOUTS[layout]]:
            if name + suffix in kinds:
                raise invalid(f"the {layout} stream {name!r} comes with "
                              f"{name + suffix!r}, which is also a stream's "
                              "name")
        p = pad.get(name, 0) if isinstance(pad, Mapping) else pad
        out[name] = (_LAYOUTS[layout], _pad_item(p, kinds[name].dtype),
                     int(lengths.get(name) or 0))
    return out


class DataLoader:
    """An endless iterator of batches, ``{name: values}``, over named stores.

    DataLoader(streams, batch_size=256, mode=Sampler.Mode.CYCLIC, seed=0,
    start_step=0, transform=None, prefetch=2, workers=1, rank=0, world=1,
    mmap=True, ragged="list", pad=0, length=None, block=None, window=None)

    streams maps names to stores (DenseStore or RaggedStore) that all
    hold the same number of records, or to the paths of such stores,
    which the loader opens read-only (with the given mmap, as
    DenseStore.open takes it) and closes with itself; every stream
    of a batch is gathered at the same indices, those of the sampler's
    step. Each iteration yields the next step's batch, for ever. A Dense
    stream's value is an array of shape (batch_size, *item_shape), a Ragged
    stream's a list of batch_size arrays. mode, seed, rank and world are
    the Sampler's, and so are block and window (QUASI mode only: records
    per block and blocks per shuffle window, None for the defaults);
    start_step is the step of the first batch, so a run is
    resumed by passing the ``step`` it had reached (or through
    state_dict() and load_state_dict()). prefetch is the number of batches
    prepared ahead, workers the number of threads preparing them;
    transform (see the module's description) maps each batch dict to what
    is yielded.

    ragged says how Ragged streams come out: "list" (a list of arrays,
    the default), "padded" (one array of shape (batch_size, L, *row),
    each record followed by pad up to the batch's longest, L, with its
    lengths as an int64 array under NAME_lengths) or "packed" (the
    records back to back in one array, with the int64 offsets of each
    under NAME_offsets, batch_size + 1 of them) or "packed_flat" (records
    of any shapes with one number of dimensions, their items back to back
    in one 1-D array, with int64 NAME_offsets in items and NAME_shapes of
    shape (batch_size, ndim)). A dict gives a layout per stream; pad may
    be a dict too. The library lays the batch out on the loader's worker
    threads (RaggedStore.padded and .packed say which records can be).

    length (an int, or a dict by stream) pads the padded streams to that
    many rows in every batch instead of to the batch's longest record, so
    that every batch has the same shape (what a JAX step compiled for one
    shape needs). A record longer than length is refused, not truncated:
    the step that draws it raises ShapeMismatchError, naming the record
    and its length. Cutting it would train on data the store does not
    hold without saying so, and which part to keep (the head, the tail, a
    window) is the model's choice; the lengths array always gives the
    rows that are the record's. Choose length at least the longest
    record's, or cut the records when they are written.

    The stream never ends, but len(loader) is the number of steps of one
    cycle, ``n // (batch_size * world)``: in CYCLIC mode every record is
    read once in each cycle. ``epoch`` is the cycle the next step is in.

    A loader belongs to the process that created it: its worker threads
    do not survive fork(), so a child that takes a batch from an inherited
    loader gets StoreBusyError at once, and a loader cannot be pickled.

    The stores stay open and must not be deleted from or compacted while
    the loader lives (the store refuses); records appended meanwhile are
    not sampled.
    """

    def __init__(self, streams, batch_size=256, mode=Sampler.Mode.CYCLIC,
                 seed=0, start_step=0, transform=None, prefetch=2, workers=1,
                 rank=0, world=1, mmap=True, ragged="list", pad=0,
                 length=None, block=None, window=None):
        if not isinstance(streams, Mapping) or not streams:
            raise invalid("streams must be a non-empty dict of name: store "
                          "or path")
        names = list(streams)
        for n in names:
            if not isinstance(n, str) or not n or "\0" in n:
                raise invalid(f"stream name {n!r} is not a non-empty string")
            s = streams[n]
            if not isinstance(s, (_Store, str, bytes, os.PathLike)):
                raise invalid(f"stream {n!r} is a {type(s).__name__}, not a "
                              "DenseStore, a RaggedStore or a store's path")
        owned = []
        try:
            stores = []
            for n in names:
                s = streams[n]
                if not isinstance(s, _Store):
                    s = open_store(s, readonly=True, mmap=mmap)
                    owned.append(s)
                stores.append(s)
            self._create(names, stores, batch_size, mode, seed, start_step,
                         transform, prefetch, workers, rank, world,
                         ragged, pad, length, block, window)
        except BaseException:
            for s in owned:
                s.close()
            raise
        self._handle.owned = owned

    def _create(self, names, stores, batch_size, mode, seed, start_step,
                transform, prefetch, workers, rank, world, ragged, pad,
                length, block=None, window=None):
        lengths = {n: len(s) for n, s in zip(names, stores)}
        if len(set(lengths.values())) != 1:
            raise invalid("the streams differ in length: " + ", ".join(
                f"{n}={v}" for n, v in lengths.items()))
        if transform is not None and not callable(transform):
            raise invalid(f"transform {transform!r} is not callable")
        for name, v in (("batch_size", batch_size), ("seed", seed),
                        ("start_step", start_step), ("prefetch", prefetch),
                        ("workers", workers), ("rank", rank),
                        ("world", world)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) \
                    or v < 0 or v >= 2**64:
                raise invalid(f"{name} must be a non-negative integer, not "
                              f"{v!r}")
        if not 1 <= prefetch <= _lib.ZR_LOADER_MAX_DEPTH:
            raise invalid(f"prefetch must be in [1, {_lib.ZR_LOADER_MAX_DEPTH}]")
        if not 1 <= workers <= _lib.ZR_LOADER_MAX_THREADS:
            raise invalid(f"workers must be in [1, {_lib.ZR_LOADER_MAX_THREADS}]")
        if world < 1 or world >= 2**32:
            raise invalid(f"world must be in [1, 2**32), not {world}")
        if rank >= world:
            raise invalid(f"rank must be in [0, world={world}), not {rank}")
        mode = _mode(mode)
        block, window = _quasi_params(mode, block, window)
        layouts = _layouts(names, stores, ragged, pad, length)
        opts = _lib.new_sized("zr_loader_opts")
        opts.mode = int(mode)
        opts.batch = int(batch_size)
        opts.seed = int(seed)
        opts.rank = int(rank)
        opts.world = int(world)
        opts.start_step = int(start_step)
        opts.depth = int(prefetch)
        opts.threads = int(workers)
        opts.block = block
        opts.window = window
        # Ragged streams made dense are laid out where the transform runs,
        # on the worker threads: an identity transform puts them there.
        self._handle = _Handle(stores, names, opts,
                               transform if transform is not None or
                               not layouts else _identity, layouts)
        self._names = names
        self._mode = mode
        self._params = (int(seed), int(rank), int(world))
        self._batch_size = int(batch_size)
        # QUASI's block and window as the sampler took them (the defaults
        # filled in), 0 in the other modes.
        info = _lib.new_sized("zr_sampler_info")
        check(lib.zr_sampler_get_info(lib.zr_loader_sampler(self._handle.ptr),
                                      info))
        self._quasi = (int(info.block), int(info.window))
        self._n = lengths[names[0]]
        # What load_state_dict needs to make the loader again at a step.
        self._remake = (int(prefetch), int(workers), transform, ragged, pad,
                        length)

    def __iter__(self):
        return self

    def __next__(self):
        return self._handle.next()

    next = __next__

    @property
    def step(self):
        """The step of the next batch: pass it as start_step to resume."""
        h = self._handle
        h.check_process()
        with h.next_lock:
            if h.ptr is None or h.closing:
                raise invalid("the DataLoader is closed")
            return int(lib.zr_loader_step(h.ptr))

    def __len__(self):
        """Steps per cycle: n // (batch_size * world), at least 1."""
        _, _, world = self._params
        return self._n // (self._batch_size * world)

    @property
    def epoch(self):
        """The cycle the next step belongs to: step // len(self)."""
        return self.step // len(self)

    def state_dict(self):
        """Where the loader stands, as a dict of plain ints and strings
        (for torch.save, json or pickle): the next step and the sampler's
        parameters, which load_state_dict checks."""
        seed, rank, world = self._params
        return {"step": self.step, "epoch": self.epoch,
                "batch_size": self._batch_size, "mode": self._mode.name,
                "seed": seed, "rank": rank, "world": world, "n": self._n,
                "block": self._quasi[0], "window": self._quasi[1]}

    def load_state_dict(self, state):
        """Continue from the step a state_dict() recorded.

        The batches from there on are those the saved loader would have
        given. Raises InvalidArgumentError, leaving the loader as it was,
        when the state was saved with other sampling parameters (another
        seed, mode, batch size, rank, world or number of records), which
        would make its step mean other records (so do another QUASI
        block or window, when the state records them). The rank is not checked:
        every rank stands at the same step, so the state one rank saved
        serves them all. Batches already taken stay valid. A closed loader
        stays closed: it raises InvalidArgumentError.
        """
        if self.closed:
            raise invalid("the DataLoader is closed")
        step = _saved_step(state, self.state_dict(), "DataLoader", "loader", 2**64)
        old = self._handle
        prefetch, workers, transform, ragged, pad, length = self._remake
        seed, rank, world = self._params
        self._create(list(self._names), list(old.stores), self._batch_size,
                     self._mode, seed, int(step), transform, prefetch,
                     workers, rank, world, ragged, pad, length,
                     *self._quasi_args())
        self._handle.owned, old.owned = old.owned, []
        old.close()

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def names(self):
        """The stream names, in the order given."""
        return list(self._names)

    @property
    def streams(self):
        """The stores, by name."""
        return dict(zip(self._names, self._handle.stores))

    @property
    def sampler(self):
        """A Sampler that draws exactly this loader's indices, step by step."""
        h = self._handle
        h.check_process()
        with h.next_lock:
            if h.ptr is None or h.closing:
                raise invalid("the DataLoader is closed")
            # The loader's index space is the streams' length when it was
            # created, whatever was appended since.
            info = _lib.new_sized("zr_sampler_info")
            check(lib.zr_sampler_get_info(lib.zr_loader_sampler(h.ptr), info))
            n = int(info.n)
            step = int(lib.zr_loader_step(h.ptr))
        seed, rank, world = self._params
        block, window = self._quasi_args()
        return Sampler(n, self._batch_size, self._mode, seed=seed, rank=rank,
                       world=world, start_step=step, block=block,
                       window=window)

    def _quasi_args(self):
        """block and window as the constructor takes them: None outside
        QUASI."""
        if self._mode != Sampler.Mode.QUASI:
            return None, None
        return self._quasi

    @property
    def closed(self):
        return self._handle.closing or self._handle.ptr is None

    def close(self):
        """Stop the loader. Its workers and buffers go once no batch
        taken from it is still held; its stores are free again then, and
        those it opened from paths are closed."""
        self._handle.close()

    def __reduce__(self):
        raise TypeError(
            "loaderx: a DataLoader cannot be pickled or copied: its worker "
            "threads and batch buffers belong to the process that made it. "
            "Pickle its stores (read-only handles reopen) or a "
            "loaderx.torch.StreamDataset, and make the loader where it runs")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle is not None:
            handle.close()

    def __repr__(self):
        return (f"DataLoader({', '.join(self._names)}; batch_size="
                f"{self._batch_size}, mode={self._mode.name})")

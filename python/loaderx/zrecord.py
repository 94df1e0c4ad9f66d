"""DenseStore and RaggedStore: the typed record stores, over libloaderx.

A store is a directory on disk holding records of one dtype. A DenseStore's
records all have one item shape, so a batch of them is one stacked array; a
RaggedStore's records each keep their own shape, so a batch of them is a
list of arrays. The type identity (dtype, and for Dense the item shape) is
fixed when the store is created and kept by the library in the store itself.

Every read, append, delete and dictionary training is one library call for
the whole batch, made with the GIL released (cffi releases it around every
call), and reads land directly in the memory of the NumPy array that is
returned: nothing is copied after the call.

A Dense read of a megabyte or more lands in a buffer the store recycles.
Fresh memory of that size comes from the kernel untouched, and faulting
it in page by page costs more than the gather itself, so the buffer of a
batch the program has dropped is kept (at most two per store, released
at close) and the next read of the same size reuses it. The array that a
read returns owns its buffer for as long as anything references it, as
any NumPy array does; only then does the buffer go back to the store.

Indexing a store selects records, never elements: ``ds[3]`` is one record,
``ds[0, 5, 2]`` (a tuple), ``ds[[0, 5, 2]]``, ``ds[2:8:3]``, an integer
array or a boolean mask of ``len(ds)`` entries select several, in the order
given, repeats allowed, negative numbers counting from the end.

A new store is compressed with zstd unless told otherwise (codec="raw"
stores records as they are). Closing a writable store, or leaving its
``with`` block, syncs it first: what was appended is durable once close()
returns, and a failed sync raises (see _Store.close).

Handles are guarded so that misuse from Python cannot reach freed memory:
closing a store waits for the calls other threads are making on it and
refuses new ones, closing a store that a live DataLoader reads raises
StoreBusyError instead of pulling the handle away, and delete and compact,
which the library requires to have the handle to themselves, refuse to run
while anything else uses it.

Paths are taken as open() takes them (str, bytes or os.PathLike) and go to
the library as os.fsencode gives them, so that a name that is not UTF-8
round-trips; one with an embedded NUL, which C would cut short, is refused.
"""

import collections
import operator
import os
import threading

import numpy as np

from . import _lib
from ._lib import ffi, lib
from .errors import (DtypeMismatchError, EmptyRecordError,
                     IndexOutOfRangeError, InvalidArgumentError,
                     InvalidIndexError, RecordTooBigError, ShapeMismatchError, StoreBusyError,
                     StoreError, StoreKindError, check, error_from_code, invalid)

__all__ = ["DenseStore", "RaggedStore", "open_store", "CODECS", "DICT_TIERS",
           "TierSizes"]

CODECS = {"raw": _lib.ZR_CODEC_RAW, "zstd": _lib.ZR_CODEC_ZSTD,
          "zstd_dict": _lib.ZR_CODEC_ZSTD_DICT}
_CODEC_NAMES = {v: k for k, v in CODECS.items()}

TierSizes = collections.namedtuple("TierSizes", ["dict_bytes", "sample_bytes"])

_TIER_CODES = {"fast": _lib.ZR_TIER_FAST, "balanced": _lib.ZR_TIER_BALANCED,
               "max": _lib.ZR_TIER_MAX}


def _tier_sizes(code):
    d = ffi.new("size_t *")
    s = ffi.new("size_t *")
    check(lib.zr_tier_sizes(code, d, s))
    return TierSizes(int(d[0]), int(s[0]))


# The dictionary tiers, by name: the dictionary size and the sample budget
# it is trained on, both in bytes, as the library defines them.
DICT_TIERS = {name: _tier_sizes(code) for name, code in _TIER_CODES.items()}

# Records are read in blocks of this many when a store is iterated.
_ITER_BLOCK = 1024

# Ragged records are gathered at offsets that are multiples of 8, so that
# every payload lands 8-byte aligned; their shape prefix is little-endian.
_PREFIX = np.dtype("<u8")

# Dense reads of at least this many bytes use recycled buffers, and a store
# keeps at most _POOL_IDLE of them idle. Two idle buffers cover the usual
# loop, ``x = ds[idx]``, where the previous batch is dropped only after the
# next one has been read.
_POOL_MIN_BYTES = 1 << 20
_POOL_IDLE = 2


class _BufferPool:
    """The idle gather buffers of one store.

    The lock is re-entrant because a buffer comes back from a finaliser,
    which the garbage collector may run on a thread that is inside take().
    """

    __slots__ = ("lock", "idle", "closed")

    def __init__(self):
        self.lock = threading.RLock()
        self.idle = []
        self.closed = False

    def take(self, nbytes):
        """A buffer of nbytes bytes: an idle one, or a new one."""
        with self.lock:
            for k in range(len(self.idle) - 1, -1, -1):
                if self.idle[k].nbytes == nbytes:
                    return self.idle.pop(k)
        return np.empty(nbytes, dtype=np.uint8)

    def give(self, buf):
        with self.lock:
            if not self.closed and len(self.idle) < _POOL_IDLE:
                self.idle.append(buf)

    def close(self):
        with self.lock:
            self.closed = True
            self.idle.clear()


class _Recycled:
    """A pooled buffer lent to the arrays of one read; collected with the
    last of them, it gives the buffer back."""

    __slots__ = ("pool", "buf", "__array_interface__")

    def __init__(self, pool, buf):
        self.pool = pool
        self.buf = buf
        self.__array_interface__ = buf.__array_interface__

    def __del__(self):
        self.pool.give(self.buf)


def _tier_code(tier):
    if isinstance(tier, str):
        if tier not in _TIER_CODES:
            raise invalid(f"unknown dictionary tier {tier!r}; "
                          f"expected one of {', '.join(_TIER_CODES)}")
        return _TIER_CODES[tier]
    raise invalid(f"a dictionary tier is a name ({', '.join(_TIER_CODES)}), "
                  f"not {tier!r}")


def _store_dtype(dtype):
    """The np.dtype for a store, refusing what the format cannot keep."""
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise invalid(f"{dtype!r} is not a dtype ({e})") from None
    if dt.fields is not None:
        raise invalid(f"structured dtype {dt} is not stored: its fields "
                      f"would be lost; use a plain |V{dt.itemsize} or one "
                      "store per field")
    if dt.subdtype is not None:
        raise invalid(f"sub-array dtype {dt}: put the sub-array's shape in "
                      "the item shape instead")
    if lib.zr_dtype_itemsize(dt.str.encode()) <= 0:
        raise invalid(f"dtype {dt} ({dt.str}) cannot be stored")
    return dt


def _create_opts(codec, dict_bytes):
    """A zr_create_opts for codec and dictionary, and what keeps it alive."""
    if codec not in CODECS:
        raise invalid(f"unknown codec {codec!r}; expected one of "
                      f"{', '.join(CODECS)}")
    opts = _lib.new_sized("zr_create_opts")
    opts.codec = CODECS[codec]
    keep = None
    if codec == "zstd_dict":
        if dict_bytes is None or len(dict_bytes) == 0:
            raise invalid("codec 'zstd_dict' needs the trained dictionary "
                          "(dict_bytes=loaderx.utils.train_dict(...))")
        keep = ffi.from_buffer(dict_bytes)
        opts.dict = keep
        opts.dict_len = len(keep)
    elif dict_bytes is not None:
        raise invalid(f"dict_bytes is only used by codec 'zstd_dict', not "
                      f"{codec!r}")
    return opts, keep


def _c_path(path):
    """path (str, bytes or os.PathLike) as the bytes a C call takes."""
    b = os.fsencode(path)
    if b"\0" in b:
        # C would stop at the NUL and act on another path than the one given.
        raise invalid(f"{os.fsdecode(b)!r}: embedded null byte in a path")
    return b


def _absolute(path):
    """A store path made absolute; an s3:// address is one already."""
    path = os.fsdecode(path)
    return path if path.startswith("s3://") else os.path.abspath(path)


def _reopen(cls, path, mmap):
    """Unpickle (or copy) a read-only handle: open the store again."""
    return cls.open(path, readonly=True, mmap=mmap)


def _shape_array(shape):
    return ffi.new("uint64_t[]", [int(d) for d in shape]) if shape else ffi.NULL


class _Store:
    """What DenseStore and RaggedStore share: the handle and its guards."""

    _kind = None
    _kind_name = None

    def __init__(self, ptr):
        # _guard protects _ptr and the counters below, and close() waits on
        # _idle for the calls in flight. _active counts those calls
        # (_callers the same by thread), _pins the DataLoaders reading the
        # handle, _exclusive marks a delete or compact, which must be
        # alone, and _closing a close() under way. The lock is re-entrant
        # because a DataLoader's finaliser, which unpins, may run on a
        # thread that holds it.
        self._guard = threading.RLock()
        self._idle = threading.Condition(self._guard)
        self._writer = threading.Lock()
        self._ptr = ptr
        self._active = 0
        self._callers = {}
        self._pins = 0
        self._exclusive = False
        self._closing = False
        self._pid = os.getpid()
        self._path = os.fsdecode(ffi.string(lib.zr_path(ptr)))
        self._dtype = np.dtype(ffi.string(lib.zr_dtype(ptr)).decode())
        self._codec = _CODEC_NAMES.get(lib.zr_codec(ptr), "unknown")
        self._writable = bool(lib.zr_writable(ptr))
        self._pool = _BufferPool()
        # What a copy or an unpickled handle reopens (see __reduce__).
        self._abspath = _absolute(self._path)
        self._mmap = True

    # ---- creating and opening -------------------------------------------

    @classmethod
    def open(cls, path, readonly=None, mmap=True):
        """Open the store at path.

        A writable handle (the default) has the store to itself: a second
        handle, here or in another process, gets StoreBusyError. Read-only
        handles share the store with each other (and with a read-only
        zrecordfs mount). Raises StoreNotFoundError when path holds no
        store, StoreKindError when it holds the other kind.

        path may be an object store's address, "s3://bucket/prefix",
        configured as the AWS tools are (AWS_ENDPOINT_URL,
        AWS_ACCESS_KEY_ID, AWS_PROFILE, ...): such a store opens read-only,
        which is the default for it (readonly=None means read-write for a
        local path, read-only for a remote one).

        With mmap=False, reads copy records out of the page cache with
        pread instead of through a mapping, so the process's resident set
        does not grow with the store (what top and ps call RSS counts every
        mapped page a process has touched). Raw records under 64 KiB in the
        store's first GiB are still copied from a mapping, where a pread
        would cost about twice as much: such a handle maps at most 1 GiB of
        the store (and, like a mapped handle, dies of SIGBUS there if a
        chunk file is cut short behind it from outside). Raw records of
        64 KiB or more are read with pread either way.
        """
        out = ffi.new("zr_store **")
        path_c = _c_path(path)
        if readonly is None:
            readonly = path_c.startswith(b"s3://")
        mode = _lib.ZR_RDONLY if readonly else _lib.ZR_RDWR
        if not mmap:
            mode |= _lib.ZR_NOMAP
        rc = lib.zr_open(out, path_c, mode)
        if rc == _lib.ZR_EBUSY and not readonly:
            # The usual cause is a second writable open of a store that a
            # DataLoader, a torch worker or zrecordfs already reads; say
            # what would share it.
            err = error_from_code(rc)
            raise type(err)(err.message + "; a writable handle needs the "
                            "store to itself: to read it alongside other "
                            "readers, open it with readonly=True", rc)
        check(rc)
        ptr = out[0]
        kind = lib.zr_kind(ptr)
        if cls._kind is not None and kind != cls._kind:
            lib.zr_close(ptr)
            other = DenseStore if kind == _lib.ZR_DENSE else RaggedStore
            raise invalid(f"{os.fsdecode(path_c)} holds a "
                          f"{other._kind_name} store; "
                          f"open it with {other.__name__}", StoreKindError)
        if cls._kind is None:
            cls = DenseStore if kind == _lib.ZR_DENSE else RaggedStore
        store = cls(ptr)
        store._mmap = bool(mmap)
        return store

    # ---- the handle's guards --------------------------------------------

    def _forget_parent_calls(self):
        """In a child of fork(), forget the calls the parent's threads were
        making: the child has none of those threads, and close() would wait
        for them for ever. Called with _guard held."""
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._active = 0
            self._callers = {}
            self._exclusive = False

    def _enter(self, exclusive=False):
        """Count a call on the handle and return the handle."""
        with self._guard:
            self._forget_parent_calls()
            if self._ptr is None or self._closing:
                raise invalid(f"{self._path}: the store is closed")
            if self._exclusive:
                raise invalid(f"{self._path}: a delete or compact is running "
                              "on this handle", StoreBusyError)
            if exclusive:
                if self._pins:
                    raise invalid(f"{self._path}: a DataLoader reads this "
                                  "store; close the loader first",
                                  StoreBusyError)
                if self._active:
                    raise invalid(f"{self._path}: another thread is using "
                                  "this handle", StoreBusyError)
                self._exclusive = True
            self._active += 1
            me = threading.get_ident()
            self._callers[me] = self._callers.get(me, 0) + 1
            return self._ptr

    def _leave(self, exclusive=False):
        with self._guard:
            self._active -= 1
            me = threading.get_ident()
            left = self._callers[me] - 1
            if left:
                self._callers[me] = left
            else:
                del self._callers[me]
            if exclusive:
                self._exclusive = False
            if self._closing and not self._active:
                self._idle.notify_all()

    def _pin(self):
        """Keep the handle open for a DataLoader; return it."""
        with self._guard:
            if self._ptr is None or self._closing:
                raise invalid(f"{self._path}: the store is closed")
            if self._exclusive:
                raise invalid(f"{self._path}: a delete or compact is running",
                              StoreBusyError)
            self._pins += 1
            return self._ptr

    def _unpin(self):
        with self._guard:
            self._pins -= 1

    def close(self):
        """Sync a writable handle, then close it and release its lock.

        Once close() returns, everything appended, deleted or compacted
        through the handle is durable. If the sync fails, the handle is
        closed all the same and the sync's error (StoreIOError,
        NoSpaceError, ...) is raised: the latest changes may be lost in a
        crash. The sync fails with StoreBusyError in a child of fork()
        while the parent that opened the handle runs (the library lets one
        process write through a handle). A read-only handle is closed
        without a sync, and so is one garbage-collected without close().

        Calls that other threads are making on the handle are waited for,
        and calls made once close() has begun raise InvalidArgumentError
        (the store is closed), as they do after it. Closing twice is
        harmless, and a close() that finds another under way waits for it.
        Raises StoreBusyError, leaving the store open, while a DataLoader
        that reads it is alive, or when called from inside a call on the
        store on the same thread (which it would wait for for ever).
        """
        with self._guard:
            self._forget_parent_calls()
            if threading.get_ident() in self._callers:
                raise invalid(f"{self._path}: this thread is in a call on "
                              "this handle", StoreBusyError)
            while self._closing and self._ptr is not None:
                self._idle.wait()
            if self._ptr is None:
                return
            if self._pins:
                raise invalid(f"{self._path}: a DataLoader reads this store; "
                              "close the loader first", StoreBusyError)
            self._closing = True
            try:
                while self._active:
                    self._idle.wait()
            except BaseException:
                # Interrupted while waiting: the store stays open and usable.
                self._closing = False
                self._idle.notify_all()
                raise
            ptr = self._ptr
        # Nothing else uses the handle now: new calls are refused while
        # _closing is set. The error is built before zr_close, while
        # zr_last_error() still holds the sync's message; the handle goes
        # whatever the sync gave, since keeping it open would only keep
        # the store locked.
        error = None
        try:
            if self._writable:
                rc = lib.zr_sync(ptr)
                if rc < 0:
                    error = error_from_code(rc)
        finally:
            with self._guard:
                self._ptr = None
                lib.zr_close(ptr)
                self._idle.notify_all()
        self._pool.close()
        if error is not None:
            raise error

    def __del__(self):
        ptr = getattr(self, "_ptr", None)
        if ptr is not None:
            self._ptr = None
            lib.zr_close(ptr)

    def __reduce__(self):
        """copy.copy, copy.deepcopy and pickle of a read-only handle give a
        new read-only handle on the same store (so a Dataset holding one
        goes to DataLoader worker processes); the two are independent. A
        writable handle holds the store's only write lock and cannot be
        copied."""
        if self.closed:
            raise TypeError(f"{self._path}: a closed store handle cannot be "
                            "copied or pickled")
        if self._writable:
            raise TypeError(f"{self._path}: a writable store handle cannot "
                            "be copied or pickled (it holds the store's only "
                            "write lock); copy a handle opened with "
                            "readonly=True")
        return (_reopen, (type(self), self._abspath, self._mmap))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        """Close the store (syncing a writable one), even when the block
        raised. A failed sync raises from here; if the block had raised,
        its exception is the sync error's __context__, so the traceback
        shows both, as for a file whose flush fails at the end of a with
        block. The sync error is the one raised because the block's
        exception may be caught by a program that would then go on
        believing its appends durable."""
        self.close()

    # ---- identity ---------------------------------------------------------

    @property
    def closed(self):
        return self._ptr is None or self._closing

    @property
    def path(self):
        """The store's directory, as it was given."""
        return self._path

    @property
    def dtype(self):
        """The dtype of every element of every record."""
        return self._dtype

    @property
    def codec(self):
        """'raw', 'zstd' or 'zstd_dict', fixed at creation."""
        return self._codec

    @property
    def writable(self):
        return self._writable

    @property
    def readonly(self):
        return not self._writable

    def __len__(self):
        ptr = self._enter()
        try:
            return int(lib.zr_len(ptr))
        finally:
            self._leave()

    # ---- selecting records ----------------------------------------------

    def _select(self, key, n):
        """Turn a key into (uint64 indices, result shape, scalar?)."""
        if isinstance(key, (bool, np.bool_)) or (
                isinstance(key, np.ndarray) and key.ndim == 0
                and key.dtype.kind == "b"):
            raise invalid("a boolean is not a record index; use a mask of "
                          f"{n} booleans", InvalidIndexError)
        if isinstance(key, (int, np.integer)):
            i = int(key)
            if not -n <= i < n:
                raise invalid(f"index {i} is out of range for a store of "
                              f"{n} records", IndexOutOfRangeError)
            return np.array([i % n], dtype=np.uint64), (), True
        if isinstance(key, slice):
            idx = np.arange(*key.indices(n), dtype=np.uint64)
            return idx, (idx.size,), False
        if isinstance(key, tuple):
            key = list(key)
        try:
            a = np.asarray(key)
        except (ValueError, TypeError) as e:
            # A ragged nested list: NumPy makes no array of it.
            raise invalid(f"records are selected by an integer, a slice, "
                          f"integers or a boolean mask, not {key!r:.60}",
                          InvalidIndexError) from e
        if a.ndim == 0 and a.dtype.kind in "iu":
            return self._select(int(a), n)
        if a.dtype == object and a.size and all(
                isinstance(i, (int, np.integer))
                and not isinstance(i, (bool, np.bool_)) for i in a.flat):
            # Integers beyond int64 and uint64 make an object array: any
            # such index is out of range, and so reported.
            for i in a.flat:
                if not -n <= i < n:
                    raise invalid(f"index {int(i)} is out of range for a "
                                  f"store of {n} records",
                                  IndexOutOfRangeError)
            a = a.astype(np.int64)
        if a.size == 0 and a.dtype.kind == "f" and \
                not isinstance(key, np.ndarray):
            # An empty list or tuple comes out of NumPy as float64; an
            # empty array of another type than integers or booleans is
            # refused below, as a non-empty one is.
            a = a.astype(np.int64)
        if a.dtype.kind == "b":
            if a.ndim != 1 or a.shape[0] != n:
                raise invalid(f"a boolean mask must have one entry per "
                              f"record ({n}), not shape {a.shape}",
                              IndexOutOfRangeError)
            idx = np.flatnonzero(a).astype(np.uint64)
            return idx, (idx.size,), False
        if a.dtype.kind not in "iu":
            raise invalid("records are selected by an integer, a slice, "
                          "integers or a boolean mask, not "
                          f"{type(key).__name__} of {a.dtype}",
                          InvalidIndexError)
        # Two reductions clear the common case, indices already in
        # [0, n); only the others pay for finding the first bad index and
        # for counting negative ones from the end.
        signed = a.dtype.kind == "i"
        if a.size and (a.max() >= n or (signed and a.min() < 0)):
            if signed:
                bad = (a < -n) | (a >= n)
                if bad.any():
                    raise invalid(f"index {int(a[bad].flat[0])} is out of "
                                  f"range for a store of {n} records",
                                  IndexOutOfRangeError)
                a = np.where(a < 0, a + n, a)
            else:
                raise invalid(f"index {int(a.max())} is out of range for a "
                              f"store of {n} records", IndexOutOfRangeError)
        idx = np.ascontiguousarray(a.reshape(-1), dtype=np.uint64)
        return idx, a.shape, False

    def __getitem__(self, key):
        ptr = self._enter()
        try:
            idx, shape, scalar = self._select(key, int(lib.zr_len(ptr)))
            return self._gather(ptr, idx, shape, scalar)
        finally:
            self._leave()

    def __iter__(self):
        """Every record in index order, read in blocks."""
        start = 0
        while True:
            n = len(self)
            if start >= n:
                return
            block = self[start:min(start + _ITER_BLOCK, n)]
            yield from block
            start += len(block)

    # ---- maintenance ------------------------------------------------------

    def delete(self, key):
        """Delete the selected records by swap-last.

        key is normalised like a read (an integer, a slice, integers or a
        boolean mask). Each hole is filled by the then last record, so the
        remaining records are exactly 0..len-1 and indices held elsewhere go
        stale. Repeats count once; every index is checked before anything
        changes. Needs a writable handle that nothing else is using.
        """
        ptr = self._enter(exclusive=True)
        try:
            idx, _, _ = self._select(key, int(lib.zr_len(ptr)))
            if idx.size:
                check(lib.zr_delete(ptr, ffi.from_buffer("uint64_t[]", idx),
                                    idx.size))
        finally:
            self._leave(exclusive=True)

    def compact(self):
        """Reclaim the space of deleted records, in place.

        Returns {'records_moved', 'bytes_before', 'bytes_after'}. Needs a
        writable handle that nothing else is using.
        """
        res = _lib.new_sized("zr_compact_result")
        ptr = self._enter(exclusive=True)
        try:
            check(lib.zr_compact(ptr, res))
        finally:
            self._leave(exclusive=True)
        return {"records_moved": int(res.records_moved),
                "bytes_before": int(res.bytes_before),
                "bytes_after": int(res.bytes_after)}

    def stats(self):
        """The store's space accounting, as a dict.

        records, live_bytes (stored bytes of the live records), chunk_bytes
        (bytes held by chunk files), reclaimable (what compact may free),
        codec and dict_bytes (0 without a dictionary).
        """
        st = _lib.new_sized("zr_store_stats")
        ptr = self._enter()
        try:
            check(lib.zr_stats(ptr, st))
        finally:
            self._leave()
        return {"records": int(st.records), "live_bytes": int(st.live_bytes),
                "chunk_bytes": int(st.chunk_bytes),
                "reclaimable": int(st.reclaimable),
                "codec": _CODEC_NAMES.get(st.codec, "unknown"),
                "dict_bytes": int(st.dict_bytes)}

    def verify(self):
        """Check the whole store.

        Returns {'ok', 'records_checked', 'problems'}, problems being a list
        of (file, entry or None, what) for the first thousand found. A file
        that cannot be read as the store says (a remote object deleted,
        shortened or replaced since the open) stops the scan and is listed
        last, its file '' where what names the object; an I/O error raises.
        """
        out = ffi.new("zr_verify_report **")
        ptr = self._enter()
        try:
            rc = lib.zr_verify(ptr, out)
        finally:
            self._leave()
        rep = out[0]
        try:
            # ZR_ECORRUPT with a report is a finding (a file the scan could
            # not read is listed last); any other error, or none, raises.
            if rep == ffi.NULL or (rc < 0 and rc != _lib.ZR_ECORRUPT):
                check(rc)
            problems = []
            for k in range(rep.nlisted):
                p = lib.zr_verify_problem(rep, k)
                entry = None if p.entry == 2**64 - 1 else int(p.entry)
                problems.append((os.fsdecode(ffi.string(p.file)), entry,
                                 ffi.string(p.what).decode("utf-8",
                                                           "replace")))
            return {"ok": rc == 0,
                    "records_checked": int(rep.records_checked),
                    "problems": problems}
        finally:
            lib.zr_verify_report_free(rep)

    def sync(self):
        """Make every append so far durable (data, then table, then header).

        close() does this for a writable store; sync() is for making a
        point durable while the store stays open."""
        ptr = self._enter()
        try:
            with self._writer:
                check(lib.zr_sync(ptr))
        finally:
            self._leave()

    def __repr__(self):
        if self.closed:
            return f"{type(self).__name__}({self._path!r}, closed)"
        return (f"{type(self).__name__}({self._path!r}, dtype={self._dtype.str!r}"
                f"{self._repr_shape()}, codec={self._codec!r}, len={len(self)})")

    def _repr_shape(self):
        return ""


class DenseStore(_Store):
    """A store whose records all have one dtype and one item shape.

    Reading several records gives one array of shape (B, *item_shape);
    reading one record gives an array of shape item_shape (a NumPy scalar
    when item_shape is ()), exactly as indexing a NumPy array of shape
    (len, *item_shape) with the same key would.
    """

    _kind = _lib.ZR_DENSE
    _kind_name = "Dense"

    def __init__(self, ptr):
        super().__init__(ptr)
        nd = ffi.new("uint32_t *")
        shape = lib.zr_item_shape(ptr, nd)
        self._item_shape = tuple(int(shape[k]) for k in range(nd[0]))
        self._shape_c = _shape_array(self._item_shape)
        self._width = int(lib.zr_record_width(ptr))

    @classmethod
    def create(cls, path, dtype, item_shape=(), codec="zstd", dict_bytes=None):
        """Create a new, empty Dense store at path, open for writing.

        dtype is anything np.dtype accepts; item_shape the shape of one
        record (() for scalar records, every dimension > 0). codec is 'zstd'
        (the default: each record its own zstd frame), 'raw' (records as
        they are, nothing to decode on a read) or 'zstd_dict'; 'zstd_dict'
        needs dict_bytes, a dictionary from loaderx.utils.train_dict. path
        must be a new folder (missing parents are made) or an empty one:
        StoreExistsError when it holds a store or other files, or is a
        file.
        """
        dt = _store_dtype(dtype)
        try:
            if isinstance(item_shape, (int, np.integer)):
                item_shape = (item_shape,)
            # operator.index: 2.5 or '3' is refused, not truncated; a bool
            # is not a dimension either.
            if any(isinstance(d, (bool, np.bool_)) for d in item_shape):
                raise TypeError
            shape = tuple(operator.index(d) for d in item_shape)
        except TypeError:
            raise invalid(f"item_shape must be a tuple of integers, not "
                          f"{item_shape!r}") from None
        if any(d >= 2**64 for d in shape):
            raise invalid(f"item_shape {shape} has a dimension of 2**64 or "
                          "more")
        if len(shape) > _lib.ZR_MAX_NDIM:
            raise invalid(f"item_shape has {len(shape)} dimensions; at most "
                          f"{_lib.ZR_MAX_NDIM}")
        if any(d <= 0 for d in shape):
            raise invalid(f"item_shape {shape} has a dimension that is not "
                          "positive")
        # keep holds the dictionary's buffer until the call has returned.
        opts, keep = _create_opts(codec, dict_bytes)
        out = ffi.new("zr_store **")
        check(lib.zr_dense_create(out, _c_path(path), dt.str.encode(),
                                  _shape_array(shape), len(shape), opts))
        del keep
        return cls(out[0])

    @property
    def item_shape(self):
        """The shape of one record."""
        return self._item_shape

    @property
    def record_width(self):
        """Bytes per record."""
        return self._width

    @property
    def shape(self):
        """(len, *item_shape): the shape of the whole store as one array."""
        return (len(self),) + self._item_shape

    def _repr_shape(self):
        return f", item_shape={self._item_shape}"

    def _gather(self, ptr, idx, shape, scalar):
        nbytes = idx.size * self._width
        if nbytes >= _POOL_MIN_BYTES:
            buf = np.asarray(_Recycled(self._pool, self._pool.take(nbytes)))
            out = buf.view(self._dtype).reshape((idx.size,) + self._item_shape)
        else:
            out = np.empty((idx.size,) + self._item_shape, dtype=self._dtype)
        if idx.size:
            check(lib.zr_gather_dense(ptr, ffi.from_buffer("uint64_t[]", idx),
                                      idx.size, _writable_buffer(out)))
        if scalar:
            return out[0]
        return out.reshape(tuple(shape) + self._item_shape)

    def _gather_into(self, idx, out):
        """Gather the records idx (uint64) into out, a C-contiguous array
        of (len(idx), *item_shape) of the store's dtype that the caller
        owns (loaderx.torch's shared batch buffers)."""
        if out.shape != (idx.size,) + self._item_shape \
                or out.dtype != self._dtype or not out.flags.c_contiguous:
            raise invalid(f"{self._path}: the output is {out.dtype} "
                          f"{out.shape}, not C-contiguous {self._dtype} "
                          f"{(idx.size,) + self._item_shape}")
        ptr = self._enter()
        try:
            if idx.size:
                check(lib.zr_gather_dense(
                    ptr, ffi.from_buffer("uint64_t[]", idx), idx.size,
                    _writable_buffer(out)))
        finally:
            self._leave()

    def append(self, data):
        """Append the records data[0], data[1], ... as one batch.

        data is an array of shape (B, *item_shape) and exactly the store's
        dtype (a 1-D array when the records are scalars); a single record is
        appended as data[None]. Returns the index of the first new record.
        The dtype and shape are checked before anything is written, and the
        batch is one commit: after a failure nothing of it is visible.
        """
        a = np.asarray(data)
        if a.dtype != self._dtype:
            raise invalid(f"data has dtype {a.dtype} ({a.dtype.str}); the "
                          f"store holds {self._dtype} ({self._dtype.str})",
                          DtypeMismatchError)
        if a.ndim == 0 or a.shape[1:] != self._item_shape:
            raise invalid(f"data of shape {a.shape} is not a batch of records "
                          f"of shape {self._item_shape}: expected "
                          f"(B, {', '.join(map(str, self._item_shape))})"
                          if self._item_shape else
                          f"data of shape {a.shape} is not a batch of scalar "
                          "records: expected shape (B,)", ShapeMismatchError)
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        first = ffi.new("uint64_t *")
        ptr = self._enter()
        try:
            if a.shape[0] == 0:
                return int(lib.zr_len(ptr))
            with self._writer:
                check(lib.zr_append_dense(
                    ptr, self._dtype.str.encode(), self._shape_c,
                    len(self._item_shape), _readable_buffer(a), a.shape[0],
                    first))
        finally:
            self._leave()
        return int(first[0])


class RaggedStore(_Store):
    """A store whose records share one dtype but each keep their own shape.

    Reading several records gives a list of arrays, each of its recorded
    shape (never padded), or for a key of two or more dimensions nested
    lists of the key's shape; reading one record gives one array. The
    arrays of one read are views into one buffer that the read filled.
    A key of another type (a float, a string, None) raises
    InvalidIndexError, an IndexError and a TypeError, for either store.
    """

    _kind = _lib.ZR_RAGGED
    _kind_name = "Ragged"

    @classmethod
    def create(cls, path, dtype, codec="zstd", dict_bytes=None):
        """Create a new, empty Ragged store at path, open for writing.

        Like DenseStore.create, without an item shape: every record carries
        its own shape. For raw bytes (encoded images, text) use np.uint8.
        """
        dt = _store_dtype(dtype)
        # keep holds the dictionary's buffer until the call has returned.
        opts, keep = _create_opts(codec, dict_bytes)
        out = ffi.new("zr_store **")
        check(lib.zr_ragged_create(out, _c_path(path), dt.str.encode(),
                                   opts))
        del keep
        return cls(out[0])

    def _gather(self, ptr, idx, shape, scalar):
        n = idx.size
        if not n:
            return _nest([], shape)
        idx_c = ffi.from_buffer("uint64_t[]", idx)
        sizes = np.empty(n, dtype=np.uint64)
        check(lib.zr_ragged_sizes(ptr, idx_c, n,
                                  ffi.from_buffer("uint64_t[]", sizes)))
        padded = (sizes + np.uint64(7)) & ~np.uint64(7)
        offsets = np.zeros(n, dtype=np.uint64)
        np.cumsum(padded[:-1], out=offsets[1:])
        total = int(offsets[-1] + padded[-1])
        # A buffer of 8-byte words, so that the offsets' alignment is real.
        words = np.empty(total // 8, dtype=np.uint64)
        check(lib.zr_gather_ragged(ptr, idx_c, n, _writable_buffer(words),
                                   ffi.from_buffer("uint64_t[]", offsets)))
        records = _ragged_records(words, offsets.tolist(), sizes.tolist(),
                                  self._dtype, scalar)
        return _nest(records, shape)

    def padded(self, key, pad=0, length=None):
        """The selected records as one padded array, and their lengths.

        Returns (values, lengths): values of shape (B, L, *row) holding
        record k in values[k, :lengths[k]] and pad after it, lengths an
        int64 array of the B records' first dimensions. L is the longest
        record's length, or ``length`` when given (a longer record raises
        ShapeMismatchError). Every record must have the same shape after
        its first dimension (a scalar record is one row of shape ());
        others raise ShapeMismatchError. key selects records as indexing
        does, and its records come in its order, flattened. The batch is
        laid out by the library in the same call as the gather.
        """
        if length is not None:
            if not isinstance(length, (int, np.integer)) or \
                    isinstance(length, (bool, np.bool_)) or \
                    not 1 <= length < 2**64:
                raise invalid(f"length must be an integer in [1, 2**64), "
                              f"not {length!r}")
        values, lengths, _, _ = self._dense(key, _lib.ZR_PADDED,
                                            int(length or 0), pad)
        return values, lengths

    def packed(self, key, flat=False):
        """The selected records back to back, and where each begins.

        Returns (values, offsets): values of shape (T, *row), the records'
        rows one after another (T is the sum of their first dimensions),
        and offsets, int64 of B + 1 entries, record k being
        values[offsets[k]:offsets[k + 1]] (the cu_seqlens of
        variable-length attention). Records must agree in shape after
        their first dimension, as for padded().

        flat=True packs records of any shapes that have the same number
        of dimensions (images of different sizes, say) and returns
        (values, offsets, shapes): values one-dimensional, every record's
        items back to back, offsets in items, and shapes int64 of shape
        (B, ndim), so that record k is
        values[offsets[k]:offsets[k + 1]].reshape(shapes[k]).

        The library gathers each payload straight to its place in values
        (no second copy of the batch) whenever every record but the last
        holds at least as many bytes as its shape prefix.
        """
        if flat:
            values, _, offsets, shapes = self._dense(
                key, _lib.ZR_PACKED_FLAT, 0, None)
            return values, offsets, shapes
        values, _, offsets, _ = self._dense(key, _lib.ZR_PACKED, 0, None)
        return values, offsets

    def _dense(self, key, layout, rows, pad):
        pad_c = _pad_item(pad, self._dtype)
        ptr = self._enter()
        try:
            idx, _, _ = self._select(key, int(lib.zr_len(ptr)))
            out = ffi.new("zr_ragged_dense **")
            check(lib.zr_gather_ragged_dense(
                ptr, ffi.from_buffer("uint64_t[]", idx), idx.size, layout,
                rows, pad_c, out))
        finally:
            self._leave()
        return dense_arrays(out[0], self._dtype)

    def append(self, records):
        """Append records, each an array of the store's dtype, as one batch.

        records is a list or any iterable of arrays (an iterator is read to
        its end first); each record keeps its own shape, scalars included.
        Empty records, records of another dtype and records over the 2 GiB
        limit are refused before anything is written, and the batch is one
        commit. Returns the index of the first new record.
        """
        if isinstance(records, np.ndarray) and records.dtype != object:
            # Iterating an array would make each row (of a 1-D array, each
            # scalar) a record of its own: say which was meant.
            raise invalid("append takes a list (or iterable) of records, not "
                          f"one array of shape {records.shape}: pass "
                          "[array] to append it as one record, or "
                          "list(array) to append its rows as records")
        if isinstance(records, np.ndarray):
            records = list(records)
        arrays = []
        for k, r in enumerate(records):
            a = np.asarray(r)
            if a.dtype != self._dtype:
                raise invalid(f"record {k} has dtype {a.dtype} "
                              f"({a.dtype.str}); the store holds "
                              f"{self._dtype} ({self._dtype.str})",
                              DtypeMismatchError)
            if a.ndim > _lib.ZR_MAX_NDIM:
                raise invalid(f"record {k} has {a.ndim} dimensions; at most "
                              f"{_lib.ZR_MAX_NDIM}", ShapeMismatchError)
            if a.nbytes == 0:
                raise invalid(f"record {k} (shape {a.shape}) has no bytes",
                              EmptyRecordError)
            if a.nbytes + 8 * (1 + a.ndim) > _lib.ZR_MAX_RECORD:
                raise invalid(f"record {k} is {a.nbytes} bytes; a record is "
                              f"at most {_lib.ZR_MAX_RECORD} with its shape",
                              RecordTooBigError)
            if not a.flags.c_contiguous:
                a = a.copy(order="C")
            arrays.append(a)
        n = len(arrays)
        ptr = self._enter()
        try:
            if n == 0:
                return int(lib.zr_len(ptr))
            recs = ffi.new("zr_rec[]", n)
            dims = [d for a in arrays for d in a.shape]
            shapes = ffi.new("uint64_t[]", max(len(dims), 1))
            shapes[0:len(dims)] = dims
            keep = []
            pos = 0
            for k, a in enumerate(arrays):
                buf = _readable_buffer(a)
                keep.append(buf)
                recs[k].data = buf
                recs[k].shape = shapes + pos
                recs[k].ndim = a.ndim
                pos += a.ndim
            first = ffi.new("uint64_t *")
            with self._writer:
                check(lib.zr_append_ragged(ptr, self._dtype.str.encode(), recs,
                                           n, first))
        finally:
            self._leave()
        return int(first[0])


def _writable_buffer(a):
    """The memory of a C-contiguous array, for the library to fill."""
    return ffi.from_buffer(a.reshape(-1).view(np.uint8), require_writable=True)


def _readable_buffer(a):
    """The memory of a C-contiguous array, for the library to read."""
    return ffi.from_buffer(a.reshape(-1).view(np.uint8))


def _nest(records, shape):
    """The records of a Ragged selection: a list, or for a key of two or
    more dimensions nested lists of the key's shape (as NumPy's object
    arrays index)."""
    if len(shape) < 2:
        return records
    nested = np.empty(len(records), dtype=object)
    for i, r in enumerate(records):
        nested[i] = r
    return nested.reshape(shape).tolist()


def _ragged_records(words, offsets, sizes, dtype, scalar):
    """Split a gathered Ragged batch into arrays that view its buffer.

    words holds the records as the library wrote them, each at its offset
    (a multiple of 8) as [u64 ndim][u64 dims...][payload]. The library has
    already checked every prefix against the record's size and the itemsize;
    the checks here only keep a wrong buffer from becoming a wrong view.
    """
    prefix = words.view(_PREFIX)
    raw = words.view(np.uint8)
    out = []
    for off, size in zip(offsets, sizes):
        w = off // 8
        ndim = int(prefix[w])
        if ndim > _lib.ZR_MAX_NDIM or 8 * (1 + ndim) > size:
            raise StoreError(f"record prefix ndim {ndim} does not "
                             f"fit its {size} bytes", _lib.ZR_ECORRUPT)
        shape = tuple(prefix[w + 1:w + 1 + ndim].tolist())
        start = off + 8 * (1 + ndim)
        out.append(raw[start:off + size].view(dtype).reshape(shape))
    return out[0] if scalar else out


class _CMemory:
    """Memory the library allocated, wrapped by NumPy without a copy; the
    struct that owns it is freed when the last array on it goes."""

    __slots__ = ("owner", "__array_interface__")

    def __init__(self, owner, address, shape, typestr):
        self.owner = owner
        self.__array_interface__ = {"data": (address, False),
                                    "shape": shape, "typestr": typestr,
                                    "version": 3}


def dense_arrays(d, dtype):
    """(values, lengths, offsets, shapes) of a zr_ragged_dense, which they
    own; shapes is None but for ZR_PACKED_FLAT."""
    d = ffi.gc(d, lib.zr_ragged_dense_free)
    n = int(d.n)
    shape = tuple(int(x) for x in d.shape[0:d.ndim])
    values = np.asarray(_CMemory(d, int(ffi.cast("uintptr_t", d.data)),
                                 (int(d.nbytes),), "|u1"))
    values = values.view(dtype).reshape(shape)
    lengths = np.asarray(_CMemory(d, int(ffi.cast("uintptr_t", d.lengths)),
                                  (n,), "<i8"))
    offsets = np.asarray(_CMemory(d, int(ffi.cast("uintptr_t", d.offsets)),
                                  (n + 1,), "<i8"))
    shapes = None
    if d.layout == _lib.ZR_PACKED_FLAT:
        nd = int(d.rec_ndim)
        shapes = np.asarray(_CMemory(d, int(ffi.cast("uintptr_t", d.shapes)),
                                     (n, nd), "<i8")) if n * nd else \
            np.zeros((n, nd), dtype=np.int64)
    return values, lengths, offsets, shapes


def _pad_item(pad, dtype):
    """The pad value as one item of dtype, for the library (None: zeros)."""
    if pad is None:
        return ffi.NULL
    try:
        want = np.asarray(pad)
        item = want.astype(dtype)
    except (TypeError, ValueError) as e:
        raise invalid(f"pad {pad!r} is not a value of dtype {dtype} "
                      f"({e})") from None
    if want.shape != () or not (item == want or (want != want and
                                                 item != item)):
        raise invalid(f"pad {pad!r} is not a value of dtype {dtype}")
    return ffi.new("char[]", item.tobytes())


def open_store(path, readonly=None, mmap=True):
    """Open the store at path as a DenseStore or RaggedStore, whichever
    kind it holds."""
    return _Store.open(path, readonly=readonly, mmap=mmap)


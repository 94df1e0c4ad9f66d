"""Errors: library codes become the StoreError hierarchy with the library's
message, and bad appends are refused before anything is written."""

import os
import pathlib
import signal
import threading
import time

import numpy as np
import pytest

import loaderx
from loaderx import (CorruptStoreError, DataLoader, DtypeMismatchError,
                     EmptyRecordError, IndexOutOfRangeError,
                     InvalidArgumentError, InvalidIndexError,
                     ShapeMismatchError, StoreBusyError, StoreError,
                     StoreExistsError, StoreNotFoundError)
from loaderx.errors import error_from_code
from loaderx.zrecord import DenseStore, RaggedStore


def test_every_code_maps_to_its_class():
    # The numbers are pinned: a change here breaks every compiled caller.
    expected = {-30700: "InvalidArgumentError", -30701: "StoreMemoryError",
                -30702: "StoreIOError", -30703: "CorruptStoreError",
                -30704: "StoreNotFoundError", -30705: "StoreExistsError",
                -30706: "StoreBusyError", -30707: "IndexOutOfRangeError",
                -30708: "DtypeMismatchError", -30709: "ShapeMismatchError",
                -30710: "RecordTooBigError", -30711: "EmptyRecordError",
                -30712: "ReadOnlyStoreError", -30713: "StoreKindError",
                -30714: "CodecError", -30715: "NoSpaceError", -30716: "LimitError",
                -30717: "AccessDeniedError"}
    for code, name in expected.items():
        err = error_from_code(code, "msg")
        assert type(err).__name__ == name and err.code == code
        assert isinstance(err, StoreError) and err.message == "msg"
        assert getattr(loaderx, name) is type(err)
    assert type(error_from_code(-99, "x")) is StoreError


def test_builtin_bases_let_generic_handlers_catch():
    assert issubclass(loaderx.IndexOutOfRangeError, IndexError)
    assert issubclass(loaderx.InvalidArgumentError, ValueError)
    assert issubclass(loaderx.StoreNotFoundError, FileNotFoundError)
    assert issubclass(loaderx.StoreExistsError, FileExistsError)
    assert issubclass(loaderx.NoSpaceError, OSError)
    assert issubclass(loaderx.LimitError, OSError)
    assert issubclass(loaderx.AccessDeniedError, PermissionError)
    assert issubclass(loaderx.StoreMemoryError, MemoryError)


def test_exception_carries_the_library_message():
    with pytest.raises(StoreNotFoundError) as exc:
        DenseStore.open("missing/store")
    assert exc.value.code == -30704
    # The message is the library's, naming the path; the code travels in
    # .code and the class, not as a prefix of the text.
    assert str(exc.value).startswith("missing/store")
    assert exc.value.message == str(exc.value)
    DenseStore.create("d", np.int8).close()
    with pytest.raises(StoreExistsError) as exc:
        RaggedStore.create("d", np.int8)
    assert exc.value.code == -30705
    assert "d" in str(exc.value) and "ZR_E" not in str(exc.value)


def test_binding_checks_carry_the_code_without_a_prefix():
    with pytest.raises(InvalidArgumentError) as exc:
        DenseStore.create("e", np.int8, codec="lz4")
    assert exc.value.code == -30700
    assert str(exc.value).startswith("unknown codec")


def test_busy_store_raises_busy():
    ds = DenseStore.create("d", np.int8)
    with pytest.raises(StoreBusyError) as exc:
        DenseStore.open("d")
    assert exc.value.code == -30706
    ds.close()


def test_corrupt_identity_raises_corrupt():
    DenseStore.create("d", np.float32, (2,)).close()
    with open(os.path.join("d", "store.zr"), "wb") as f:
        f.write(b"\x81\xa5dtype\xa3<q9")     # {"dtype": "<q9"}: no such dtype
    with pytest.raises(CorruptStoreError) as exc:
        DenseStore.open("d")
    assert "store.zr" in str(exc.value)


def test_corrupt_record_raises_corrupt_on_read():
    with DenseStore.create("d", np.uint8, (64,), codec="zstd") as ds:
        ds.append(np.full((4, 64), 7, np.uint8))
    chunk = os.path.join("d", "0.chunk")
    size = os.path.getsize(chunk)
    with open(chunk, "r+b") as f:
        f.write(b"\xff" * size)
    with DenseStore.open("d", readonly=True) as ds:
        with pytest.raises(CorruptStoreError):
            ds[0]


@pytest.mark.parametrize("bad, cls", [
    (np.zeros((3, 2), np.float64), DtypeMismatchError),
    (np.zeros((3, 2), np.int32), DtypeMismatchError),
    (np.zeros((3, 3), np.float32), ShapeMismatchError),
    (np.zeros((3, 2, 1), np.float32), ShapeMismatchError),
    (np.zeros(2, np.float32), ShapeMismatchError),
    (np.float32(1), ShapeMismatchError),
])
def test_dense_bad_append_writes_nothing(bad, cls):
    with DenseStore.create("d", np.float32, (2,)) as ds:
        ds.append(np.ones((5, 2), np.float32))
        before = ds.stats()
        with pytest.raises(cls):
            ds.append(bad)
        assert ds.stats() == before and len(ds) == 5
        np.testing.assert_array_equal(ds[:], np.ones((5, 2), np.float32))


@pytest.mark.parametrize("bad, cls", [
    ([np.ones(3, np.int32), np.ones(2, np.int64)], DtypeMismatchError),
    ([np.ones(3, np.int32), [1, 2]], DtypeMismatchError),
    ([np.ones(3, np.int32), np.ones(0, np.int32)], EmptyRecordError),
    ([np.ones(3, np.int32), np.ones((2, 0), np.int32)], EmptyRecordError),
    ([np.ones(3, np.int32), object()], DtypeMismatchError),
])
def test_ragged_bad_record_rejects_the_whole_batch(bad, cls):
    with RaggedStore.create("r", np.int32) as rs:
        rs.append([np.arange(4, dtype=np.int32)])
        before = rs.stats()
        with pytest.raises(cls):
            rs.append(bad)
        assert rs.stats() == before and len(rs) == 1


def test_create_refuses_what_the_format_cannot_keep():
    with pytest.raises(InvalidArgumentError, match="structured"):
        DenseStore.create("a", np.dtype([("x", "<i4"), ("y", "<f4")]))
    with pytest.raises(InvalidArgumentError):
        DenseStore.create("b", object)
    with pytest.raises(InvalidArgumentError):
        DenseStore.create("c", "datetime64[s]")
    with pytest.raises(InvalidArgumentError, match="positive"):
        DenseStore.create("d", np.int8, (3, 0))
    with pytest.raises(InvalidArgumentError, match="codec"):
        DenseStore.create("e", np.int8, codec="lz4")
    with pytest.raises(InvalidArgumentError, match="dict_bytes"):
        DenseStore.create("f", np.int8, codec="zstd", dict_bytes=b"x" * 100)
    # Nothing was created by the refused calls.
    assert os.listdir(".") == []


def test_train_dict_refuses_bad_input():
    from loaderx.utils import train_dict
    with pytest.raises(InvalidArgumentError, match="tier"):
        train_dict(np.zeros((10, 10), np.uint8), tier="huge")
    with pytest.raises(InvalidArgumentError):
        train_dict(np.zeros((0, 10), np.uint8))
    with pytest.raises(loaderx.CodecError):
        train_dict([b"ab", b"cd"])


# ---- paths cross into C as open() takes them --------------------------------

def test_path_with_an_embedded_nul_is_refused_as_open_refuses_it():
    bad = os.path.join(os.getcwd(), "victim\0/../other")
    # The expectation is Python's own: open() refuses such a path with
    # ValueError before touching the file system.
    with pytest.raises(ValueError):
        open(bad, "wb")
    for call in (lambda: DenseStore.create(bad, np.int8),
                 lambda: DenseStore.create(os.fsencode(bad), np.int8),
                 lambda: RaggedStore.create(bad, np.int8),
                 lambda: DenseStore.open(bad),
                 lambda: loaderx.open_store(bad),
                 lambda: loaderx.push(bad, "s3://bucket/p"),
                 lambda: loaderx.pull("s3://bucket/p", bad),
                 lambda: loaderx.pull("s3://bucket/p\0x", "elsewhere")):
        with pytest.raises(InvalidArgumentError, match="null byte"):
            call()
    assert os.listdir(".") == []


def test_path_that_is_not_utf8_round_trips():
    name = os.fsencode(os.getcwd()) + b"/caf\xe9"
    with DenseStore.create(name, np.int16, (2,)) as ds:
        ds.append(np.arange(6, dtype=np.int16).reshape(3, 2))
        # The path comes back as os.fsdecode gives it, which os accepts.
        assert ds.path == os.fsdecode(name)
        assert os.path.isdir(ds.path)
        assert ds.verify()["ok"]
    assert os.listdir(b".") == [b"caf\xe9"]
    for p in (name, os.fsdecode(name), pathlib.Path(os.fsdecode(name))):
        with DenseStore.open(p, readonly=True) as ds:
            assert ds[:].tolist() == [[0, 1], [2, 3], [4, 5]]
    with RaggedStore.create(os.fsencode(os.getcwd()) + b"/r\xff", np.uint8):
        pass
    with loaderx.open_store(b"r\xff") as rs:
        assert isinstance(rs, RaggedStore) and len(rs) == 0
    loader = DataLoader({"x": name}, batch_size=3)
    assert next(loader)["x"].shape == (3, 2)
    loader.close()


# ---- closed objects stay closed ----------------------------------------------

def test_closed_loader_stays_closed():
    with DenseStore.create("d", np.int32) as ds:
        ds.append(np.arange(20, dtype=np.int32))
    ds = DenseStore.open("d", readonly=True)
    loader = DataLoader({"d": ds}, batch_size=4)
    held = next(loader)
    state = loader.state_dict()
    loader.close()
    loader.close()
    assert loader.closed
    # A held batch keeps the loader's buffers, not the loader, alive.
    with pytest.raises(InvalidArgumentError, match="closed"):
        loader.load_state_dict(state)
    assert loader.closed
    for use in (lambda: next(loader), lambda: loader.step,
                lambda: loader.sampler, lambda: loader.state_dict()):
        with pytest.raises(InvalidArgumentError, match="closed"):
            use()
    assert held["d"].shape == (4,)
    del held
    loader.close()
    # Nothing reads the store any more: it closes.
    ds.close()
    ds.close()


def test_closed_store_refuses_every_use():
    from loaderx.utils import train_dict
    with DenseStore.create("d", np.int8) as ds:
        ds.append(np.arange(4, dtype=np.int8))
    with RaggedStore.create("r", np.int8) as rs:
        rs.append([np.arange(3, dtype=np.int8)])
    for s in (ds, rs):
        s.close()
        assert s.closed and "closed" in repr(s)
        for use in (lambda: len(s), lambda: s[0], lambda: s[[0]],
                    lambda: list(s), lambda: s.delete(0), lambda: s.compact(),
                    lambda: s.stats(), lambda: s.verify(), lambda: s.sync(),
                    lambda: train_dict(s),
                    lambda: DataLoader({"x": s}, batch_size=1)):
            with pytest.raises(InvalidArgumentError, match="closed"):
                use()
    with pytest.raises(InvalidArgumentError, match="closed"):
        ds.append(np.arange(2, dtype=np.int8))
    with pytest.raises(InvalidArgumentError, match="closed"):
        rs.append([np.arange(2, dtype=np.int8)])
    for use in (lambda: rs.padded([0]), lambda: rs.packed([0])):
        with pytest.raises(InvalidArgumentError, match="closed"):
            use()


# ---- integers C cannot hold are refused at the call ---------------------------

def test_huge_integers_are_refused_naming_what_they_are():
    with DenseStore.create("d", np.int8) as ds:
        ds.append(np.arange(10, dtype=np.int8))
        # NumPy's own answer for an index that is out of range is IndexError.
        with pytest.raises(IndexError):
            np.arange(10)[[2**64]]
        for key in ([2**64], [0, 2**64], [-2**64], (2**64, 1), [[1], [2**70]],
                    np.array([2**64], dtype=object)):
            with pytest.raises(IndexOutOfRangeError, match="out of range"):
                ds[key]
        with pytest.raises(IndexOutOfRangeError):
            ds.delete([2**64])
        assert len(ds) == 10
    with RaggedStore.create("r", np.int8) as rs:
        rs.append([np.arange(3, dtype=np.int8)])
        with pytest.raises(IndexOutOfRangeError):
            rs[[2**64]]
        for length in (2**64, 2**100):
            with pytest.raises(InvalidArgumentError, match="length"):
                rs.padded([0], length=length)
        assert rs.padded([0], length=5)[0].shape == (1, 5)
    ds = DenseStore.open("d", readonly=True)
    for kw, name in ((dict(rank=2**40, world=2), "rank"),
                     (dict(seed=2**64), "seed"),
                     (dict(start_step=2**64), "start_step"),
                     (dict(batch_size=2**64), "batch_size"),
                     (dict(prefetch=2**64), "prefetch")):
        with pytest.raises(InvalidArgumentError, match=name):
            DataLoader({"d": ds}, **{"batch_size": 2, **kw})
        if name in ("prefetch", "batch_size"):
            continue
        with pytest.raises(InvalidArgumentError, match=name):
            loaderx.Sampler(10, 2, **kw)
    with pytest.raises(InvalidArgumentError, match="step"):
        loaderx.Sampler(10, 2).batch(2**64)
    ds.close()


@pytest.mark.parametrize("key", [np.array([], dtype=str),
                                 np.zeros(0, dtype="<U1"),
                                 np.zeros((2, 0), dtype="<U3"),
                                 np.array([], dtype="S1"),
                                 np.array([], dtype=np.float64)])
def test_empty_key_of_a_wrong_type_raises_as_a_full_one(key):
    # NumPy refuses these as indices whether or not they are empty.
    with pytest.raises(IndexError):
        np.arange(3)[key]
    full = np.resize(key, 1)
    with DenseStore.create("d", np.int8) as ds:
        ds.append(np.arange(3, dtype=np.int8))
        with pytest.raises(InvalidIndexError) as want:
            ds[full]
        with pytest.raises(type(want.value)):
            ds[key]
        # An empty list still selects nothing, as it does in NumPy.
        assert ds[[]].shape == (0,)
    with RaggedStore.create("r", np.int8) as rs:
        rs.append([np.arange(2, dtype=np.int8)])
        with pytest.raises(InvalidIndexError):
            rs[key]
        with pytest.raises(InvalidIndexError):
            rs.padded(key)


# ---- close() while another thread reads ----------------------------------------

class _HeldKey:
    """A record key whose conversion waits for go: the call that reads it
    stays in flight on the store until then."""

    def __init__(self, value):
        self.value = value
        self.inside = threading.Event()
        self.go = threading.Event()

    def __array__(self, dtype=None):
        self.inside.set()
        self.go.wait(30)
        return np.asarray(self.value)


def test_close_waits_for_a_gathering_thread_which_then_sees_it_closed():
    with DenseStore.create("d", np.int32, (4,)) as ds:
        ds.append(np.arange(400, dtype=np.int32).reshape(100, 4))
    ds = DenseStore.open("d", readonly=True)
    key = _HeldKey([3, 5])
    stop = threading.Event()
    first, errors, count = [], [], [0]

    def gather():
        first.append(ds[key])
        try:
            while not stop.is_set():
                ds[[1, 2, 3]]
                count[0] += 1
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=gather, daemon=True)
    t.start()
    try:
        assert key.inside.wait(30)
        # Let the held call go only once close() is (most likely) waiting
        # for it; close must succeed whichever comes first.
        threading.Timer(0.05, key.go.set).start()
        ds.close()
        assert ds.closed
    finally:
        key.go.set()
        stop.set()
        t.join(30)
    assert not t.is_alive()
    # The call in flight finished with its records; the next one was refused.
    assert first[0].tolist() == [[12, 13, 14, 15], [20, 21, 22, 23]]
    assert len(errors) == 1
    assert type(errors[0]) is InvalidArgumentError, repr(errors[0])
    assert "closed" in str(errors[0])
    ds.close()
    # The handle is gone: a writer may open the store.
    DenseStore.open("d").close()


def test_close_in_a_forked_child_does_not_wait_for_the_parents_calls():
    with DenseStore.create("d", np.int32, (4,)) as ds:
        ds.append(np.arange(400, dtype=np.int32).reshape(100, 4))
    ds = DenseStore.open("d", readonly=True)
    key = _HeldKey([3, 5])
    got = []
    t = threading.Thread(target=lambda: got.append(ds[key]), daemon=True)
    t.start()
    try:
        assert key.inside.wait(30)
        pid = os.fork()
        if pid == 0:
            # The parent's thread, in a call, is not in this process.
            code = 1
            try:
                ds.close()
                code = 0 if ds.closed else 2
            finally:
                os._exit(code)
        for _ in range(300):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("close() in a forked child waited for the parent's call")
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        key.go.set()
        t.join(30)
    assert got[0].tolist() == [[12, 13, 14, 15], [20, 21, 22, 23]]
    ds.close()


def test_close_from_inside_a_call_on_the_same_thread_refuses():
    with DenseStore.create("d", np.int8) as ds:
        ds.append(np.arange(3, dtype=np.int8))
        got = []

        class Key:
            def __array__(self, dtype=None):
                try:
                    ds.close()
                except StoreBusyError as e:
                    got.append(e)
                return np.array([1])

        assert ds[Key()].tolist() == [1]
        assert len(got) == 1 and "this thread" in str(got[0])
        assert not ds.closed
    assert ds.closed

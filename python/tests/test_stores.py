"""Stores: round trips of every dtype kind through every codec, identity
kept across reopening, handles and their life cycle."""

import copy
import os
import pickle
import threading
import tracemalloc

import numpy as np
import pytest

from loaderx import (InvalidArgumentError, ReadOnlyStoreError, StoreBusyError,
                     StoreKindError, open_store)
from loaderx.dataloader import DataLoader
from loaderx.utils import train_dict
from loaderx.zrecord import DenseStore, RaggedStore
from loaderx.zsampler import Sampler

# Every dtype the format keeps: each kind, size and byte order.
DTYPES = ["|b1", "|i1", "<i2", ">i2", "<i4", "<i8", ">i8", "|u1", "<u2",
          "<u4", ">u4", "<u8", "<f2", "<f4", ">f4", "<f8", ">f8", "<c8",
          "<c16", ">c16", "|S7", "<U3", ">U2", "|V5"]
# One of each kind, for the codec matrix (creating a store syncs, so the
# full product would be slow for what it adds).
KINDS = ["|b1", ">i2", "<u8", "<f2", ">f8", "<c8", "|S7", "<U3", "|V5"]
CODECS = ["raw", "zstd", "zstd_dict"]


@pytest.fixture(scope="module")
def dictionary():
    rng = np.random.default_rng(7)
    sample = np.tile(np.arange(64, dtype=np.uint8), (2000, 1))
    sample += rng.integers(0, 3, size=sample.shape, dtype=np.uint8)
    return train_dict(sample, tier="fast")


def random_array(dtype, shape, rng):
    """An array of dtype whose bytes are random (booleans 0 or 1)."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dt)
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * dt.itemsize,
                       dtype=np.uint8)
    return raw.view(dt).reshape(shape)


def same_bytes(a, b):
    """Equal dtype, shape and bytes (NaN patterns included)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.dtype.str == b.dtype.str
    assert a.shape == b.shape
    assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def codec_args(codec, dictionary):
    return {"codec": codec,
            "dict_bytes": dictionary if codec == "zstd_dict" else None}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("dtype", KINDS)
def test_dense_round_trip(dtype, codec, dictionary, rng):
    data = random_array(dtype, (40, 3, 2), rng)
    with DenseStore.create("d", dtype, (3, 2), **codec_args(codec, dictionary)) as ds:
        assert ds.append(data[:25]) == 0
        assert ds.append(data[25:]) == 25
    with DenseStore.open("d", readonly=True) as ds:
        assert ds.dtype.str == np.dtype(dtype).str
        assert ds.item_shape == (3, 2) and len(ds) == 40 and ds.codec == codec
        same_bytes(ds[:], data)
        same_bytes(ds[::-1], data[::-1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_dense_every_dtype_round_trips_raw(dtype, rng):
    data = random_array(dtype, (30, 2), rng)
    with DenseStore.create("d", dtype, (2,), codec="raw") as ds:
        ds.append(data)
        same_bytes(ds[:], data)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("dtype", ["|b1", "<i4", "<c16", "<U3"])
def test_dense_scalar_records_round_trip(dtype, codec, dictionary, rng):
    data = random_array(dtype, (30,), rng)
    with DenseStore.create("d", dtype, **codec_args(codec, dictionary)) as ds:
        ds.append(data)
        assert ds.item_shape == ()
        same_bytes(ds[:], data)
        same_bytes(ds[[3, 3, 0]], data[[3, 3, 0]])


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("dtype", KINDS)
def test_ragged_round_trip(dtype, codec, dictionary, rng):
    shapes = [(), (1,), (5,), (2, 3), (1, 1, 4), (7, 1)]
    records = [random_array(dtype, shapes[i % len(shapes)], rng) for i in range(30)]
    with RaggedStore.create("r", dtype, **codec_args(codec, dictionary)) as rs:
        assert rs.append(records[:10]) == 0
        assert rs.append(iter(records[10:])) == 10
    with RaggedStore.open("r", readonly=True) as rs:
        assert rs.dtype.str == np.dtype(dtype).str and rs.codec == codec
        got = rs[:]
        assert len(got) == len(records)
        for g, r in zip(got, records):
            same_bytes(g, r)


@pytest.mark.parametrize("codec", CODECS)
def test_unmapped_handles_read_what_mapped_ones_read(codec, dictionary, rng):
    dense = rng.integers(0, 256, size=(40, 3, 16), dtype=np.uint8)
    ragged = [random_array("<i4", (1 + i % 7, 2), rng) for i in range(40)]
    with DenseStore.create("d", "|u1", (3, 16), **codec_args(codec, dictionary)) as ds:
        ds.append(dense)
    with RaggedStore.create("r", "<i4", **codec_args(codec, dictionary)) as rs:
        rs.append(ragged)
    idx = rng.integers(0, 40, size=100)
    with DenseStore.open("d", readonly=True, mmap=False) as ds:
        np.testing.assert_array_equal(ds[idx], dense[idx])
        np.testing.assert_array_equal(ds[5], dense[5])
    with open_store("r", readonly=True, mmap=False) as rs:
        for i, got in zip(idx, rs[idx]):
            same_bytes(got, ragged[i])


def test_identity_survives_reopening():
    with DenseStore.create("d", "<f8", (4, 5, 6), codec="zstd") as ds:
        ds.append(np.zeros((2, 4, 5, 6)))
    ds = open_store("d")
    assert isinstance(ds, DenseStore)
    assert (ds.dtype, ds.item_shape, ds.codec, len(ds)) == \
        (np.dtype("<f8"), (4, 5, 6), "zstd", 2)
    assert ds.shape == (2, 4, 5, 6) and ds.record_width == 8 * 120
    ds.close()
    with RaggedStore.create("r", "|S4") as rs:
        rs.append([np.array([b"ab", b"cdef"], dtype="S4")])
    rs = open_store("r", readonly=True)
    assert isinstance(rs, RaggedStore) and rs.dtype == np.dtype("S4")
    assert rs[0].tolist() == [b"ab", b"cdef"]
    rs.close()


def test_opening_as_the_other_kind_raises_kind_error():
    DenseStore.create("d", np.int8).close()
    RaggedStore.create("r", np.int8).close()
    with pytest.raises(StoreKindError, match="Dense"):
        RaggedStore.open("d")
    with pytest.raises(StoreKindError, match="Ragged"):
        DenseStore.open("r")
    # The failed open released its lock.
    DenseStore.open("d").close()


def test_empty_append_writes_nothing_and_returns_length():
    with DenseStore.create("d", np.int32, (2,)) as ds:
        ds.append(np.ones((3, 2), np.int32))
        assert ds.append(np.empty((0, 2), np.int32)) == 3
        assert len(ds) == 3
    with RaggedStore.create("r", np.int32) as rs:
        assert rs.append([]) == 0 and len(rs) == 0
        assert rs[:] == []


def test_non_contiguous_input_is_appended_by_value():
    src = np.arange(200, dtype=np.int64).reshape(10, 20)
    with DenseStore.create("d", np.int64, (5,)) as ds:
        ds.append(src.T[:, ::2])
        np.testing.assert_array_equal(ds[:], src.T[:, ::2])
    with RaggedStore.create("r", np.int64) as rs:
        rs.append([src[::3, 1:7:2], src.T[2]])
        np.testing.assert_array_equal(rs[0], src[::3, 1:7:2])
        np.testing.assert_array_equal(rs[1], src.T[2])


def test_iterating_a_store_yields_every_record_in_order():
    data = np.arange(2500 * 2, dtype=np.int16).reshape(2500, 2)
    with DenseStore.create("d", np.int16, (2,)) as ds:
        ds.append(data)
        np.testing.assert_array_equal(np.array(list(ds)), data)


def test_readonly_handle_refuses_writes():
    DenseStore.create("d", np.int8).close()
    with DenseStore.open("d", readonly=True) as ds:
        assert ds.readonly and not ds.writable
        with pytest.raises(ReadOnlyStoreError):
            ds.append(np.zeros(2, np.int8))
        with pytest.raises(ReadOnlyStoreError):
            ds.sync()


def test_readers_share_a_store_and_a_writer_has_it_alone():
    DenseStore.create("d", np.int8).close()
    a = DenseStore.open("d", readonly=True)
    b = DenseStore.open("d", readonly=True)
    with pytest.raises(StoreBusyError):
        DenseStore.open("d")
    a.close()
    b.close()
    w = DenseStore.open("d")
    with pytest.raises(StoreBusyError):
        DenseStore.open("d", readonly=True)
    w.close()


def test_closed_store_refuses_use_and_closing_twice_is_harmless():
    ds = DenseStore.create("d", np.int8)
    ds.append(np.arange(4, dtype=np.int8))
    ds.close()
    ds.close()
    assert ds.closed
    with pytest.raises(InvalidArgumentError, match="closed"):
        ds[0]
    with pytest.raises(InvalidArgumentError, match="closed"):
        len(ds)


def test_sync_and_context_manager_close_the_lock():
    with DenseStore.create("d", np.float32, (2,)) as ds:
        ds.append(np.ones((4, 2), np.float32))
        ds.sync()
    assert ds.closed
    with DenseStore.open("d") as again:
        assert len(again) == 4


def test_store_read_by_a_loader_cannot_be_closed_or_compacted():
    with DenseStore.create("d", np.int32) as ds:
        ds.append(np.arange(50, dtype=np.int32))
    ds = DenseStore.open("d")
    loader = DataLoader({"d": ds}, batch_size=5)
    next(loader)
    with pytest.raises(StoreBusyError):
        ds.close()
    with pytest.raises(StoreBusyError):
        ds.delete(0)
    with pytest.raises(StoreBusyError):
        ds.compact()
    # Appending is allowed; the loader keeps sampling the first 50.
    ds.append(np.arange(50, 60, dtype=np.int32))
    assert len(ds) == 60 and loader.sampler.n == 50
    assert max(int(next(loader)["d"].max()) for _ in range(20)) < 50
    loader.close()
    ds.delete([0])
    assert len(ds) == 59
    ds.close()


def test_concurrent_gathers_from_threads_agree_with_numpy(rng):
    data = rng.normal(size=(500, 16)).astype(np.float32)
    with DenseStore.create("d", np.float32, (16,), codec="zstd") as ds:
        ds.append(data)
    ds = DenseStore.open("d", readonly=True)
    errors = []

    def reader(seed):
        r = np.random.default_rng(seed)
        for _ in range(30):
            idx = r.integers(0, 500, size=64)
            if not np.array_equal(ds[idx], data[idx]):
                errors.append(seed)

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    ds.close()


def test_verify_reports_a_sound_store():
    with RaggedStore.create("r", np.uint8, codec="zstd") as rs:
        rs.append([np.full(n, n, np.uint8) for n in range(1, 40)])
        rep = rs.verify()
    assert rep == {"ok": True, "records_checked": 39, "problems": []}


# Reads of a megabyte or more go through the store's recycled buffers; these
# records make a 16-record read exactly 1 MiB.
BIG_ITEM = (256, 256)


def big_store(rng, n=64):
    data = rng.integers(0, 256, size=(n,) + BIG_ITEM, dtype=np.uint8)
    ds = DenseStore.create("big", np.uint8, BIG_ITEM, codec="raw")
    ds.append(data)
    return ds, data


def test_big_reads_held_at_once_never_share_memory(rng):
    ds, data = big_store(rng)
    with ds:
        held = [(idx, ds[idx]) for idx in
                (rng.integers(0, 64, 16) for _ in range(5))]
        for k, (idx, got) in enumerate(held):
            same_bytes(got, data[idx])
            for _, other in held[k + 1:]:
                assert not np.shares_memory(got, other)


def test_a_dropped_big_read_gives_its_buffer_to_the_next(rng):
    ds, data = big_store(rng)
    with ds:
        first = ds[:16]
        del first
        idx = rng.integers(0, 64, 16)
        # NumPy reports its data allocations to tracemalloc: a read that
        # reuses the dropped buffer allocates next to nothing.
        tracemalloc.start()
        try:
            got = ds[idx]
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < (1 << 20) // 4
        same_bytes(got, data[idx])


def test_a_view_of_a_big_read_keeps_its_buffer(rng):
    ds, data = big_store(rng)
    with ds:
        row = ds[:16][3]
        for _ in range(4):
            ds[rng.integers(0, 64, 16)]
        same_bytes(row, data[3])


def test_a_big_read_outlives_its_closed_store(rng):
    ds, data = big_store(rng)
    got = ds[16:32]
    ds.close()
    again = DenseStore.open("big", readonly=True)
    same_bytes(again[:16], data[:16])
    same_bytes(got, data[16:32])
    again.close()


def test_copies_and_pickles_of_a_read_only_handle_reopen_the_store():
    data = np.arange(24, dtype=">f4").reshape(6, 4)
    with DenseStore.create("st", ">f4", (4,)) as w:
        w.append(data)
        # The writer holds the only write lock: it is never duplicated.
        for dup in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError, match="writable store handle"):
                dup(w)
    r = DenseStore.open("st", readonly=True, mmap=False)
    c = copy.copy(r)
    p = pickle.loads(pickle.dumps(r))
    assert c is not r and p is not r
    r.close()  # the copies are handles of their own
    for h in (c, p):
        assert h.readonly and h.dtype == np.dtype(">f4")
        np.testing.assert_array_equal(h[:], data)
        h.close()
    with pytest.raises(TypeError, match="closed"):
        pickle.dumps(r)


def test_item_shape_and_steps_must_be_integers():
    for bad in ((2.5,), (True, 3), ("3",), 2.0):
        with pytest.raises(InvalidArgumentError, match="item_shape"):
            DenseStore.create("bad", np.float32, bad)
    assert not os.path.exists("bad")
    sm = Sampler(10, 2)
    for bad in (1.5, "3", True):
        with pytest.raises(InvalidArgumentError, match="step"):
            sm.batch(bad)
    np.testing.assert_array_equal(sm.batch(np.int64(1)), sm.batch(1))


def test_ragged_append_of_a_bare_array_says_how():
    with RaggedStore.create("rg", np.float32) as rg:
        with pytest.raises(InvalidArgumentError, match=r"\[array\]"):
            rg.append(np.arange(5, dtype=np.float32))
        with pytest.raises(InvalidArgumentError, match=r"list\(array\)"):
            rg.append(np.ones((3, 2), np.float32))
        assert len(rg) == 0
        rg.append([np.arange(5, dtype=np.float32)])
        rg.append(list(np.ones((3, 2), np.float32)))
        assert [r.shape for r in rg[:]] == [(5,), (2,), (2,), (2,)]

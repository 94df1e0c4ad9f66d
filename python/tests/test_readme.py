"""The usage the reference README shows, section by section, checked.

Each test follows one example of the reference's Quick Start, Records,
Writable stores, Codec notes, Multi-stream stores, CPU -> GPU transfer and
Zsampler sections with this binding, and checks what it produces against
NumPy or against an independent computation, not against the binding.
"""

import threading

import numpy as np
import pytest

from loaderx import (DICT_TIERS, InvalidArgumentError, StoreExistsError,
                     StoreNotFoundError)
from loaderx.dataloader import DataLoader
from loaderx.utils import train_dict
from loaderx.zrecord import DenseStore, RaggedStore, open_store
from loaderx.zsampler import Sampler


def swap_last_delete(n, targets):
    """The positions that survive a swap-last delete, in their new order."""
    order = list(range(n))
    for t in sorted(set(targets), reverse=True):
        order[t] = order[-1]
        order.pop()
    return order


# ---- Quick Start ---------------------------------------------------------

def test_quick_start_trains_on_npy_files_through_two_streams():
    n = 300
    samples = np.random.default_rng(1).normal(size=(n, 4, 3)).astype(np.float32)
    np.save("data.npy", samples)
    np.save("label.npy", np.arange(n, dtype=np.int64))

    data = np.load("data.npy", mmap_mode="r")
    label = np.load("label.npy", mmap_mode="r")
    with DenseStore.create("train_data", data.dtype, data.shape[1:]) as s:
        s.append(data)
    with DenseStore.create("train_label", label.dtype, label.shape[1:]) as s:
        s.append(label)

    loader = DataLoader({"data": DenseStore.open("train_data"),
                         "label": DenseStore.open("train_label")},
                        transform=lambda b: b)
    for step, batch in enumerate(loader):
        if step >= 256:
            break
    assert batch["data"].shape == (256, 4, 3)
    assert batch["label"].shape == (256,)
    # The default sampler is CYCLIC with seed 0; the 257th batch is step 256.
    want = Sampler(n, 256, Sampler.Mode.CYCLIC, seed=0).batch(256)
    np.testing.assert_array_equal(batch["label"], want)
    np.testing.assert_array_equal(batch["data"], samples[want])


def test_creating_a_dense_store_from_a_memory_mapped_array():
    rows = np.arange(5 * 6 * 2, dtype=np.int16).reshape(5, 6, 2)
    np.save("data.npy", rows)
    data = np.load("data.npy", mmap_mode="r")
    with DenseStore.create("train_data", data.dtype, data.shape[1:]) as ds:
        assert ds.append(data) == 0
    ds = DenseStore.open("train_data")
    assert ds.dtype == np.int16 and ds.item_shape == (6, 2) and len(ds) == 5
    np.testing.assert_array_equal(ds[:], rows)
    ds.close()
    # A label set, 1-D, becomes scalar records.
    labels = np.array([3, 1, 4, 1, 5], dtype=np.uint8)
    with DenseStore.create("labels", labels.dtype, labels.shape[1:]) as ls:
        ls.append(labels)
        assert ls.item_shape == () and len(ls) == 5
        assert ls[2] == 4 and ls[1:4].tolist() == [1, 4, 1]
    # create needs a new path, open an existing store.
    with pytest.raises(StoreExistsError):
        DenseStore.create("train_data", data.dtype, data.shape[1:])
    with pytest.raises(StoreNotFoundError):
        DenseStore.open("no_such_store")


# ---- Records -------------------------------------------------------------

def test_records_a_dense_tuple_key_selects_records():
    data = np.arange(64, dtype=np.float32).reshape(8, 2, 4)
    with DenseStore.create("data", data.dtype, data.shape[1:]) as ds:
        ds.append(data)
    ds = DenseStore.open("data")
    picked = ds[0, 5, 2]
    assert picked.shape == (3, 2, 4)
    np.testing.assert_array_equal(picked, data[[0, 5, 2]])
    np.testing.assert_array_equal(ds[-1], data[7])
    np.testing.assert_array_equal(ds[-8], data[0])


def test_records_ragged_keeps_each_shape_and_pads_by_hand():
    seqs = [np.arange(n, dtype=np.int32) for n in (3, 1, 4, 1, 5)]
    with RaggedStore.create("tokens", np.int32) as rs:
        rs.append(seqs)
    rs = RaggedStore.open("tokens")
    records = rs[0, 2, 4]
    assert isinstance(records, list)
    assert [r.shape for r in records] == [(3,), (4,), (5,)]
    lengths = np.array([len(r) for r in records])
    padded = np.zeros((len(records), lengths.max()), dtype=records[0].dtype)
    for row, r in enumerate(records):
        padded[row, :len(r)] = r
    np.testing.assert_array_equal(padded, [[0, 1, 2, 0, 0],
                                           [0, 1, 2, 3, 0],
                                           [0, 1, 2, 3, 4]])
    assert padded.dtype == np.int32


def test_records_a_scalar_ragged_record_keeps_shape_empty():
    with RaggedStore.create("mixed", np.float64) as rs:
        rs.append([np.float64(2.5), np.ones((2, 3))])
        assert rs[0].shape == () and rs[0] == 2.5
        assert rs[1].shape == (2, 3)


def test_records_collate_transform_renames_streams():
    n = 64
    tokens = np.arange(n * 16, dtype=np.int32).reshape(n, 16)
    labels = np.arange(n, dtype=np.int64) * 10
    with DenseStore.create("tok", tokens.dtype, (16,)) as s:
        s.append(tokens)
    with DenseStore.create("lab", labels.dtype) as s:
        s.append(labels)

    def collate(batch):
        return {"input_ids": batch["tokens"], "label": batch["label"]}

    loader = DataLoader({"tokens": DenseStore.open("tok"),
                         "label": DenseStore.open("lab")},
                        batch_size=32, transform=collate)
    out = next(loader)
    assert sorted(out) == ["input_ids", "label"]
    assert out["input_ids"].shape == (32, 16)
    np.testing.assert_array_equal(out["input_ids"], tokens[out["label"] // 10])


# ---- Writable stores -----------------------------------------------------

def test_writable_stores_append_returns_first_index():
    images = np.random.default_rng(2).integers(0, 256, size=(3000, 28, 28),
                                               dtype=np.uint8)
    ds = DenseStore.create("mnist/x", dtype=np.uint8, item_shape=(28, 28))
    for i in range(0, len(images), 1024):
        assert ds.append(images[i:i + 1024]) == i
    one = images[7]
    assert ds.append(one[None]) == 3000
    np.testing.assert_array_equal(ds[:4], images[:4])
    np.testing.assert_array_equal(ds[3000], one)
    ds.close()

    a = np.array([1, 2, 3], dtype=np.int32)
    b = np.array([[4, 5]], dtype=np.int32)
    c = np.array(6, dtype=np.int32)
    tok = RaggedStore.create("tokens", dtype=np.int32)
    assert tok.append([a, b, c]) == 0
    got = tok[0, 2]
    assert isinstance(got, list) and len(got) == 2
    np.testing.assert_array_equal(got[0], a)
    assert got[1].shape == () and got[1] == 6
    tok.close()


def test_writable_stores_delete_stats_compact():
    n = 101
    src = np.random.default_rng(3).normal(size=(n, 5)).astype(np.float32)
    # Raw, so that the accounting counts the records' own 20 bytes each.
    ds = DenseStore.create("s", src.dtype, (5,), codec="raw")
    ds.append(src)
    before = ds.stats()
    assert before["records"] == n and before["reclaimable"] == 0
    assert before["live_bytes"] == n * 20 == before["chunk_bytes"]

    targets = np.arange(0, len(ds), 2)
    ds.delete(targets)
    survivors = swap_last_delete(n, targets.tolist())
    assert len(ds) == len(survivors)
    np.testing.assert_array_equal(ds[:], src[survivors])

    st = ds.stats()
    assert set(st) >= {"records", "live_bytes", "chunk_bytes", "reclaimable"}
    assert st["records"] == len(survivors)
    assert st["live_bytes"] == len(survivors) * 20
    assert st["reclaimable"] == st["chunk_bytes"] - st["live_bytes"] > 0

    ds.compact()
    after = ds.stats()
    assert after["reclaimable"] == 0
    assert after["chunk_bytes"] == after["live_bytes"] == len(survivors) * 20
    np.testing.assert_array_equal(ds[:], src[survivors])
    ds.close()


# ---- Codec notes ---------------------------------------------------------

def settled_records(n=3000, seed=4):
    """Similar small records, the data a dictionary is made for."""
    rng = np.random.default_rng(seed)
    base = (np.arange(96) * 7 % 251).astype(np.uint8)
    out = np.tile(base, (n, 1))
    noise = rng.integers(0, 4, size=out.shape, dtype=np.uint8)
    return out + noise


def test_codec_dictionary_trained_once_and_installed_in_new_stores():
    settled = settled_records()
    d = train_dict(settled, tier="balanced")
    assert isinstance(d, bytes) and 0 < len(d) <= DICT_TIERS["balanced"].dict_bytes

    seqs = [settled[i, :(i % 90) + 1].astype(np.int32) for i in range(500)]
    token_generator = (s for s in seqs)
    with RaggedStore.create("tokens", np.int32, codec="zstd_dict",
                            dict_bytes=d) as rs:
        rs.append(token_generator)
        got = rs[:]
        assert rs.stats()["codec"] == "zstd_dict"
        assert rs.stats()["dict_bytes"] == len(d)
    assert len(got) == len(seqs)
    for g, s in zip(got, seqs):
        np.testing.assert_array_equal(g, s)

    with DenseStore.create("data", settled.dtype, settled.shape[1:],
                           codec="zstd_dict", dict_bytes=d) as ds:
        ds.append(settled)
        np.testing.assert_array_equal(ds[:], settled)
        # The dictionary pays: the records shrink below their raw size.
        assert ds.stats()["live_bytes"] < settled.nbytes

    with pytest.raises(InvalidArgumentError):
        DenseStore.create("nodict", settled.dtype, settled.shape[1:],
                          codec="zstd_dict")


def test_codec_recode_is_read_all_then_append():
    settled = settled_records(seed=5)
    with DenseStore.create("src", settled.dtype, settled.shape[1:],
                           codec="zstd") as s:
        s.append(settled)
    with DenseStore.open("src") as s, \
            DenseStore.create("dst", dtype=s.dtype, item_shape=s.item_shape,
                              codec="zstd_dict", dict_bytes=train_dict(s)) as d:
        d.append(s[:])
        assert d.codec == "zstd_dict" and len(d) == len(s)
        np.testing.assert_array_equal(d[:], settled)

    recs = [settled[i, :(i % 50) + 1] for i in range(400)]
    with RaggedStore.create("rsrc", np.uint8) as s:
        s.append(recs)
    with RaggedStore.open("rsrc") as s, \
            RaggedStore.create("rdst", dtype=s.dtype, codec="zstd") as d:
        d.append(s[:])
        for got, want in zip(d[:], recs):
            np.testing.assert_array_equal(got, want)


def test_codec_zstd_is_the_default():
    rows = np.zeros((40, 256), dtype=np.int32)
    with DenseStore.create("d", rows.dtype, rows.shape[1:]) as ds:
        ds.append(rows)
        assert ds.codec == ds.stats()["codec"] == "zstd"
        assert ds.stats()["live_bytes"] < rows.nbytes // 10
    with RaggedStore.create("r", np.uint8) as rs:
        assert rs.codec == "zstd"
    for path in ("d", "r"):
        with open_store(path, readonly=True) as s:
            assert s.codec == "zstd"


def test_codec_dict_tiers_preset_dictionary_and_sample():
    kib, mib = 1024, 1024 * 1024
    assert DICT_TIERS == {"fast": (32 * kib, 4 * mib),
                          "balanced": (128 * kib, 16 * mib),
                          "max": (1 * mib, 64 * mib)}
    assert DICT_TIERS["max"].dict_bytes == mib


def test_codec_plain_zstd_round_trips_and_compresses():
    zeros = np.zeros((50, 1000), dtype=np.float64)
    with DenseStore.create("z", zeros.dtype, (1000,), codec="zstd") as ds:
        ds.append(zeros)
        np.testing.assert_array_equal(ds[[49, 0]], zeros[:2])
        assert ds.stats()["live_bytes"] < zeros.nbytes // 10


# ---- Multi-stream stores -------------------------------------------------

def test_multi_stream_dict_of_dense_and_ragged_streams():
    n = 400
    rng = np.random.default_rng(6)
    joint = rng.normal(size=(n, 3, 25)).astype(np.float32)
    label = np.arange(n, dtype=np.int64)
    seqs = [rng.integers(0, 1000, size=1 + i % 13).astype(np.int32)
            for i in range(n)]
    root = "xsub/train"
    with DenseStore.create(root + "/joint", joint.dtype, joint.shape[1:]) as s:
        s.append(joint)
    with DenseStore.create(root + "/label", label.dtype, label.shape[1:]) as s:
        s.append(label)
    with RaggedStore.create(root + "/token", np.int32) as s:
        s.append(seqs)

    streams = {"joint": DenseStore.open(root + "/joint"),
               "label": DenseStore.open(root + "/label"),
               "token": RaggedStore.open(root + "/token")}
    np.testing.assert_array_equal(streams["joint"][0, 5, 2], joint[[0, 5, 2]])
    loader = DataLoader(streams, batch_size=256)
    batch = next(loader)
    assert batch["joint"].shape == (256, 3, 25)
    assert isinstance(batch["token"], list) and len(batch["token"]) == 256
    ids = batch["label"]
    np.testing.assert_array_equal(batch["joint"], joint[ids])
    for got, i in zip(batch["token"], ids):
        np.testing.assert_array_equal(got, seqs[i])


def test_multi_stream_refuses_streams_of_different_lengths():
    with DenseStore.create("a", np.int8) as s:
        s.append(np.zeros(10, np.int8))
    with DenseStore.create("b", np.int8) as s:
        s.append(np.zeros(11, np.int8))
    with pytest.raises(InvalidArgumentError, match="differ in length"):
        DataLoader({"a": DenseStore.open("a"), "b": DenseStore.open("b")},
                   batch_size=2)


# ---- CPU -> GPU transfer -------------------------------------------------

def make_streams(n=128):
    x = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
    y = np.arange(n, dtype=np.int64)
    with DenseStore.create("x", x.dtype, (4,)) as s:
        s.append(x)
    with DenseStore.create("y", y.dtype) as s:
        s.append(y)
    return x, {"x": DenseStore.open("x"), "y": DenseStore.open("y")}


def test_transfer_transform_hands_over_on_a_worker_thread():
    # What a device copy does, without a device: the transform turns every
    # stream into a new object of another type, off the consuming thread.
    x, streams = make_streams()
    seen = []

    class Device:
        def __init__(self, array):
            self.array = np.array(array, copy=True)

    def to_device(batch):
        seen.append(threading.get_ident())
        return {k: Device(v) for k, v in batch.items()}

    loader = DataLoader(streams, batch_size=16, transform=to_device)
    for _ in range(4):
        batch = next(loader)
        assert isinstance(batch["x"], Device)
        np.testing.assert_array_equal(batch["x"].array, x[batch["y"].array])
    assert seen and threading.get_ident() not in seen


def test_transfer_to_torch_device():
    torch = pytest.importorskip("torch")
    x, streams = make_streams()
    device = "cuda:0" if torch.cuda.is_available() else "cpu"

    def to_device(batch):
        return {k: torch.from_numpy(v).to(device, non_blocking=True)
                for k, v in batch.items()}

    batch = next(DataLoader(streams, batch_size=16, transform=to_device))
    assert batch["x"].device.type == device.split(":")[0]
    np.testing.assert_array_equal(batch["x"].cpu().numpy(),
                                  x[batch["y"].cpu().numpy()])


def test_transfer_to_jax_device():
    jax = pytest.importorskip("jax")
    x, streams = make_streams()

    def to_device(batch):
        return {k: jax.device_put(v) for k, v in batch.items()}

    batch = next(DataLoader(streams, batch_size=16, transform=to_device))
    np.testing.assert_array_equal(np.asarray(batch["x"]),
                                  x[np.asarray(batch["y"])])


# ---- Zsampler ------------------------------------------------------------

def test_zsampler_iid_next_draws_a_batch_per_step():
    sampler = Sampler(1_000_000, 256, Sampler.Mode.IID, seed=42)
    first = sampler.next()
    assert first.shape == (256,) and first.dtype == np.int64
    assert first.max() < 1_000_000
    second = sampler.next()
    again = Sampler(1_000_000, 256, Sampler.Mode.IID, seed=42)
    np.testing.assert_array_equal(again.batch(0), first)
    np.testing.assert_array_equal(again.batch(1), second)
    assert not np.array_equal(first, second)
    other = Sampler(1_000_000, 256, Sampler.Mode.IID, seed=43).batch(0)
    assert not np.array_equal(other, first)

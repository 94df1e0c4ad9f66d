"""Stores cross between the C tool zr and the binding in both directions."""

import io
import json
import os

import numpy as np
import pytest

from loaderx.zrecord import DenseStore, RaggedStore, open_store


def read_npy_stream(data):
    """The arrays of consecutive .npy files in one byte string."""
    f = io.BytesIO(data)
    out = []
    while f.tell() < len(data):
        out.append(np.load(f))
    return out


@pytest.mark.parametrize("codec", ["raw", "zstd", "zstd_dict"])
@pytest.mark.parametrize("dtype, shape", [("<f4", (50, 3, 4)), ("|u1", (300, 16)),
                                          (">i8", (20,)), ("<c8", (9, 2))])
def test_store_imported_by_zr_reads_in_python(zr, rng, dtype, shape, codec):
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(dtype).itemsize,
                       dtype=np.uint8)
    src = raw.view(dtype).reshape(shape)
    np.save("src.npy", src)
    args = ["--codec", codec, "-q"]
    if codec == "zstd_dict":
        # Random bytes give a dictionary nothing to learn from: zr trains
        # one on text instead, and imports with it.
        corpus = np.frombuffer(b"record %d of the interop corpus; " * 400,
                               dtype=np.uint8)[:12000].reshape(300, 40)
        np.save("corpus.npy", corpus)
        zr("train-dict", "corpus.npy", "--tier", "fast", "-o", "dict.bin")
        args += ["--dict", "dict.bin"]
    zr("import", "st", "src.npy", *args)
    with open_store("st", readonly=True) as ds:
        assert isinstance(ds, DenseStore)
        assert ds.dtype.str == dtype and ds.item_shape == shape[1:]
        assert ds.codec == codec
        got = ds[:]
        assert got.tobytes() == src.tobytes()
        idx = rng.integers(0, shape[0], size=17)
        assert ds[idx].tobytes() == src[idx].tobytes()


@pytest.mark.parametrize("codec", ["raw", "zstd"])
def test_dense_store_written_in_python_exports_with_zr(zr, rng, codec):
    src = rng.normal(size=(64, 5, 2)).astype(">f8")
    with DenseStore.create("st", src.dtype, src.shape[1:], codec=codec) as ds:
        ds.append(src[:40])
        ds.append(src[40:])
        ds.sync()
    zr("export", "st", "out.npy", "-q")
    back = np.load("out.npy")
    assert back.dtype == src.dtype and back.shape == src.shape
    np.testing.assert_array_equal(back, src)
    zr("export", "st", "part.npy", "--range", "10:13", "-q")
    np.testing.assert_array_equal(np.load("part.npy"), src[10:13])
    info = json.loads(zr("info", "st", "--json").stdout)
    assert info["records"] == 64 and info["dtype"] == ">f8"
    zr("verify", "st")


def test_ragged_store_written_in_python_reads_with_zr_cat(zr, rng):
    recs = [rng.integers(-1000, 1000, size=shape).astype("<i4")
            for shape in [(3,), (2, 5), (), (1, 1, 7), (11,)]]
    with RaggedStore.create("rg", np.int32, codec="zstd") as rs:
        rs.append(recs)
    out = zr("cat", "rg", "0:5", "--npy").stdout
    arrays = read_npy_stream(out)
    assert len(arrays) == len(recs)
    for got, want in zip(arrays, recs):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    # Without --npy, the payloads back to back, in the order asked for.
    raw = zr("cat", "rg", "4", "0").stdout
    assert raw == recs[4].tobytes() + recs[0].tobytes()
    zr("verify", "rg")


def test_files_imported_by_zr_read_as_ragged_bytes(zr, rng):
    os.mkdir("files")
    payloads = {}
    for k in range(12):
        data = rng.integers(0, 256, size=1 + k * 37, dtype=np.uint8).tobytes()
        name = os.path.join("files", f"f{k:02d}.bin")
        with open(name, "wb") as f:
            f.write(data)
        payloads[name] = data
    zr("import", "rg", "--files", "files", "--map", "map.txt", "-q")
    with RaggedStore.open("rg", readonly=True) as rs:
        assert rs.dtype == np.uint8 and len(rs) == len(payloads)
        records = rs[:]
    with open("map.txt") as f:
        for line in f:
            index, path = line.rstrip("\n").split("\t")
            rel = os.path.relpath(path) if os.path.isabs(path) else path
            assert records[int(index)].tobytes() == payloads[os.path.normpath(rel)]


def test_zr_deletes_what_python_sees(zr):
    src = np.arange(10, dtype=np.int16)
    with DenseStore.create("st", src.dtype) as ds:
        ds.append(src)
    zr("delete", "st", "2")
    with DenseStore.open("st") as ds:
        # Swap-last: the last record moved into the hole.
        assert ds[:].tolist() == [0, 1, 9, 3, 4, 5, 6, 7, 8]

"""Every way of selecting records, against NumPy's indexing of the source.

A DenseStore indexed with a key must give what the source array indexed
with the same key gives; a RaggedStore must give, record for record, what
an object array of the source records gives.
"""

import numpy as np
import pytest

from loaderx import (IndexOutOfRangeError, InvalidArgumentError,
                     InvalidIndexError)
from loaderx.zrecord import DenseStore, RaggedStore

N = 37


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    src = np.random.default_rng(8).normal(size=(N, 3, 2)).astype(np.float32)
    path = tmp_path_factory.mktemp("idx") / "dense"
    with DenseStore.create(path, src.dtype, src.shape[1:]) as ds:
        ds.append(src)
    ds = DenseStore.open(path, readonly=True)
    yield src, ds
    ds.close()


@pytest.fixture(scope="module")
def scalars(tmp_path_factory):
    src = np.arange(N, dtype=np.int64) * 3 - 50
    path = tmp_path_factory.mktemp("idx") / "scalars"
    with DenseStore.create(path, src.dtype) as ds:
        ds.append(src)
    ds = DenseStore.open(path, readonly=True)
    yield src, ds
    ds.close()


@pytest.fixture(scope="module")
def ragged(tmp_path_factory):
    rng = np.random.default_rng(9)
    recs = [rng.integers(-9, 9, size=(1 + i % 4, 1 + i % 3)).astype(np.int16)
            for i in range(N)]
    path = tmp_path_factory.mktemp("idx") / "ragged"
    with RaggedStore.create(path, np.int16) as rs:
        rs.append(recs)
    objects = np.empty(N, dtype=object)
    objects[:] = recs
    rs = RaggedStore.open(path, readonly=True)
    yield objects, rs
    rs.close()


rng = np.random.default_rng(10)
mask = rng.integers(0, 2, size=N).astype(bool)

# (description, key) pairs; each is applied to the store and to NumPy.
KEYS = [
    ("scalar", 5),
    ("numpy scalar", np.int32(11)),
    ("negative scalar", -1),
    ("most negative scalar", -N),
    ("zero-d array", np.array(4)),
    ("slice", slice(3, 20)),
    ("slice with step", slice(1, None, 4)),
    ("reversed slice", slice(None, None, -1)),
    ("negative slice bounds", slice(-10, -2, 3)),
    ("empty slice", slice(10, 5)),
    ("whole", slice(None)),
    ("integer list", [0, 5, 2]),
    ("integer list with repeats and negatives", [3, -1, 3, -N, 0]),
    ("int64 array", rng.integers(0, N, size=50)),
    ("uint64 array", rng.integers(0, N, size=20).astype(np.uint64)),
    ("int8 array", np.array([-2, 7, 1], dtype=np.int8)),
    ("two-dimensional integer array", rng.integers(-N, N, size=(4, 3))),
    ("empty list", []),
    ("boolean mask", mask),
    ("boolean mask as list", mask.tolist()),
    ("all-false mask", np.zeros(N, dtype=bool)),
]
IDS = [k for k, _ in KEYS]
VALUES = [v for _, v in KEYS]


@pytest.mark.parametrize("key", VALUES, ids=IDS)
def test_dense_matches_numpy(dense, key):
    src, ds = dense
    got, want = ds[key], src[key]
    assert type(got) is type(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("key", VALUES, ids=IDS)
def test_dense_scalar_records_match_numpy(scalars, key):
    src, ds = scalars
    got, want = ds[key], src[key]
    assert type(got) is type(want)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_array_equal(got, want)


def test_tuple_selects_records_like_a_list(dense, ragged):
    src, ds = dense
    np.testing.assert_array_equal(ds[0, 5, 2], src[[0, 5, 2]])
    objects, rs = ragged
    for g, w in zip(rs[0, 5, 2], objects[[0, 5, 2]]):
        np.testing.assert_array_equal(g, w)


def _same_records(got, want):
    """got (nested lists of arrays) holds what NumPy's object array want
    holds, shape for shape."""
    assert isinstance(got, list) and len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, np.ndarray) and w.dtype == object:
            _same_records(g, w)
        else:
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("key", VALUES, ids=IDS)
def test_ragged_matches_numpy_object_indexing(ragged, key):
    objects, rs = ragged
    got, want = rs[key], objects[key]
    if isinstance(want, np.ndarray) and want.dtype == object:
        _same_records(got, want)
    else:
        assert isinstance(got, np.ndarray)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_ragged_two_dimensional_key_nests_lists(ragged):
    objects, rs = ragged
    got = rs[np.array([[3, 1, 4], [1, 5, 9]])]
    assert len(got) == 2 and all(len(row) == 3 for row in got)
    np.testing.assert_array_equal(got[1][2], objects[9])
    assert rs[np.zeros((2, 0), dtype=np.int64)] == [[], []]


@pytest.mark.parametrize("key", [N, -N - 1, [0, N], np.array([-N - 1]),
                                 np.array([N], dtype=np.uint64)])
def test_out_of_range_raises_index_error(dense, ragged, key):
    for store in (dense[1], ragged[1]):
        with pytest.raises(IndexOutOfRangeError) as exc:
            store[key]
        assert isinstance(exc.value, IndexError)


def test_mask_of_the_wrong_length_raises(dense):
    with pytest.raises(IndexError):
        dense[1][np.ones(N - 1, dtype=bool)]


@pytest.mark.parametrize("key", [1.5, "3", [1.0, 2.0], True, None,
                                 np.array(True), [[1, 2], [3]]])
def test_non_integer_keys_raise(dense, ragged, key):
    for store in (dense[1], ragged[1]):
        with pytest.raises(InvalidIndexError) as exc:
            store[key]
        # What NumPy (IndexError) and Python's lists (TypeError) raise.
        assert isinstance(exc.value, (InvalidArgumentError, IndexError, TypeError))
        assert all(isinstance(exc.value, c)
                   for c in (InvalidArgumentError, IndexError, TypeError))


def test_gather_of_many_random_indices(dense, ragged):
    src, ds = dense
    idx = np.random.default_rng(11).integers(0, N, size=5000)
    np.testing.assert_array_equal(ds[idx], src[idx])
    objects, rs = ragged
    got = rs[idx]
    assert len(got) == len(idx)
    for g, i in zip(got, idx):
        np.testing.assert_array_equal(g, objects[i])

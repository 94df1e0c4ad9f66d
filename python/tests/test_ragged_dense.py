"""Ragged batches made dense by the library, padded and packed, from a
store and from the loader, against layouts built here with NumPy from
the records themselves."""

import gc

import numpy as np
import pytest

from loaderx import InvalidArgumentError, ShapeMismatchError
from loaderx.dataloader import DataLoader
from loaderx.zrecord import DenseStore, RaggedStore
from loaderx.zsampler import Sampler

N = 60


def pad_by_hand(records, pad, length=None):
    lengths = np.array([len(r) for r in records], dtype=np.int64)
    width = length or lengths.max()
    out = np.full((len(records), width) + records[0].shape[1:], pad,
                  dtype=records[0].dtype)
    for k, r in enumerate(records):
        out[k, :len(r)] = r
    return out, lengths


def pack_by_hand(records):
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in records])])
    return np.concatenate(records), offsets.astype(np.int64)


@pytest.fixture
def tokens(rng):
    recs = [rng.integers(-1000, 1000, size=1 + (i * 5) % 13).astype(np.int32)
            for i in range(N)]
    with RaggedStore.create("tokens", np.int32) as s:
        s.append(recs)
    return recs


@pytest.fixture
def frames(rng):
    """Records of shape (L, 3): rows of one shape, of different counts."""
    recs = [rng.standard_normal((1 + i % 4, 3)).astype(np.float32)
            for i in range(N)]
    with RaggedStore.create("frames", np.float32, codec="raw") as s:
        s.append(recs)
    return recs


@pytest.mark.parametrize("key", [[5, 0, 17, 5], slice(3, 40, 7),
                                 np.arange(N) % 3 == 0, np.array([-1, 2])])
def test_padded_and_packed_hold_the_selected_records(tokens, key):
    rs = RaggedStore.open("tokens", readonly=True)
    picked = [tokens[i] for i in np.arange(N)[key]]
    values, lengths = rs.padded(key, pad=-9)
    want, want_lengths = pad_by_hand(picked, -9)
    assert values.dtype == np.int32 and lengths.dtype == np.int64
    np.testing.assert_array_equal(values, want)
    np.testing.assert_array_equal(lengths, want_lengths)
    values, offsets = rs.packed(key)
    want, want_offsets = pack_by_hand(picked)
    np.testing.assert_array_equal(values, want)
    np.testing.assert_array_equal(offsets, want_offsets)


def test_a_fixed_length_pads_further_and_refuses_longer_records(tokens):
    rs = RaggedStore.open("tokens", readonly=True)
    values, lengths = rs.padded([1, 2], length=16)
    want, _ = pad_by_hand([tokens[1], tokens[2]], 0, 16)
    np.testing.assert_array_equal(values, want)
    longest = int(np.argmax([len(t) for t in tokens]))
    with pytest.raises(ShapeMismatchError, match="more than the 4"):
        rs.padded([0, longest], length=4)
    for bad in (0, 2.5, True):
        with pytest.raises(InvalidArgumentError):
            rs.padded([0], length=bad)
    for bad in (2**40, 0.5, "x", [1, 2]):
        with pytest.raises(InvalidArgumentError, match="pad"):
            rs.padded([0], pad=bad)


def test_records_of_rows_are_padded_along_their_first_dimension(frames):
    rs = RaggedStore.open("frames", readonly=True)
    key = [7, 2, 11, 0]
    values, lengths = rs.padded(key, pad=np.nan)
    want, want_lengths = pad_by_hand([frames[i] for i in key], np.nan)
    assert values.shape == (4, 4, 3)
    np.testing.assert_array_equal(values, want)
    np.testing.assert_array_equal(lengths, want_lengths)
    values, offsets = rs.packed(key)
    np.testing.assert_array_equal(values, np.concatenate([frames[i]
                                                         for i in key]))


def test_records_whose_rows_differ_are_refused(rng):
    with RaggedStore.create("mixed", np.uint8) as s:
        s.append([np.zeros((2, 3), np.uint8), np.zeros((2, 4), np.uint8),
                  np.zeros(5, np.uint8)])
    rs = RaggedStore.open("mixed", readonly=True)
    with pytest.raises(ShapeMismatchError, match="record 1 has rows"):
        rs.padded([0, 1])
    with pytest.raises(ShapeMismatchError):
        rs.packed([2, 0])
    # Each alone is fine.
    assert rs.packed([1])[0].shape == (2, 4)


def test_the_arrays_own_their_memory(tokens):
    rs = RaggedStore.open("tokens", readonly=True)
    values, lengths = rs.padded([3, 4])
    del lengths
    rs.close()
    gc.collect()
    np.testing.assert_array_equal(values[1, :len(tokens[4])], tokens[4])


@pytest.mark.parametrize("layout", ["padded", "packed"])
def test_the_loader_lays_out_ragged_streams(tokens, layout):
    with DenseStore.create("ids", np.int64, codec="raw") as s:
        s.append(np.arange(N, dtype=np.int64))
    loader = DataLoader({"ids": "ids", "tokens": "tokens"}, batch_size=8,
                        seed=2, ragged=layout, pad=-1, workers=2)
    sampler = Sampler(N, 8, "cyclic", seed=2)
    for step in range(10):
        batch = next(loader)
        idx = sampler.batch(step)
        np.testing.assert_array_equal(batch["ids"], idx)
        picked = [tokens[i] for i in idx]
        if layout == "padded":
            want, lengths = pad_by_hand(picked, -1)
            np.testing.assert_array_equal(batch["tokens_lengths"], lengths)
        else:
            want, offsets = pack_by_hand(picked)
            np.testing.assert_array_equal(batch["tokens_offsets"], offsets)
        np.testing.assert_array_equal(batch["tokens"], want)
    loader.close()


def test_a_transform_receives_the_laid_out_stream(tokens):
    seen = []
    loader = DataLoader({"tokens": "tokens"}, batch_size=4, seed=1,
                        ragged={"tokens": "packed"},
                        transform=lambda b: seen.append(sorted(b)) or b)
    next(loader)
    # The workers may have prepared further steps already.
    assert seen and all(keys == ["tokens", "tokens_offsets"] for keys in seen)
    loader.close()


def test_bad_layouts_raise(tokens):
    with DenseStore.create("tokens_lengths", np.int64, codec="raw") as s:
        s.append(np.arange(N, dtype=np.int64))
    streams = {"tokens": "tokens", "tokens_lengths": "tokens_lengths"}
    with pytest.raises(InvalidArgumentError, match="also a stream's name"):
        DataLoader(streams, batch_size=2, ragged="padded")
    with pytest.raises(InvalidArgumentError, match="Dense"):
        DataLoader(streams, batch_size=2, ragged={"tokens_lengths": "packed"})
    with pytest.raises(InvalidArgumentError, match="unknown Ragged layout"):
        DataLoader(streams, batch_size=2, ragged="stacked")
    with pytest.raises(InvalidArgumentError, match="not a stream"):
        DataLoader(streams, batch_size=2, ragged={"other": "packed"})
    # packed leaves the name free: it adds tokens_offsets.
    DataLoader(streams, batch_size=2, ragged="packed").close()


@pytest.fixture
def pictures(rng):
    """Records of shape (h, w, 3) with h and w of their own: only their
    number of dimensions is shared. The first three hold fewer bytes than
    their shape prefix (32 bytes), which the library packs in two steps
    instead of in place."""
    shapes = [(1, 1, 3), (1, 2, 3), (2, 1, 3)] + \
        [(4 + (i * 7) % 9, 3 + (i * 5) % 6, 3) for i in range(3, N)]
    recs = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in shapes]
    for codec in ("raw", "zstd"):
        with RaggedStore.create("pictures-" + codec, np.uint8,
                                codec=codec) as s:
            s.append(recs)
    return recs


def unpack_flat(values, offsets, shapes):
    return [values[offsets[k]:offsets[k + 1]].reshape(shapes[k])
            for k in range(len(shapes))]


@pytest.mark.parametrize("codec", ["raw", "zstd"])
@pytest.mark.parametrize("key", [[5, 0, 17, 5, 40], list(range(3, N)),
                                 [0, 1, 2, 9], [9, 2], [59]])
def test_flat_packing_holds_records_of_any_shape(pictures, codec, key):
    rs = RaggedStore.open("pictures-" + codec, readonly=True)
    values, offsets, shapes = rs.packed(key, flat=True)
    picked = [pictures[i] for i in key]
    assert values.ndim == 1 and values.dtype == np.uint8
    assert offsets.dtype == np.int64 and shapes.dtype == np.int64
    assert shapes.shape == (len(key), 3)
    np.testing.assert_array_equal(shapes, [r.shape for r in picked])
    np.testing.assert_array_equal(
        offsets, np.concatenate([[0], np.cumsum([r.size for r in picked])]))
    for got, want in zip(unpack_flat(values, offsets, shapes), picked):
        np.testing.assert_array_equal(got, want)
    # Packing by rows needs one row shape, which these do not share.
    with pytest.raises(ShapeMismatchError, match="PACKED_FLAT"):
        rs.packed([0, 1])


def test_flat_packing_refuses_mixed_dimensions():
    with RaggedStore.create("nd", np.float32) as s:
        s.append([np.ones((2, 3), np.float32), np.ones(4, np.float32)])
    rs = RaggedStore.open("nd", readonly=True)
    with pytest.raises(ShapeMismatchError, match="dimensions"):
        rs.packed([0, 1], flat=True)
    values, offsets, shapes = rs.packed([1, 1], flat=True)
    np.testing.assert_array_equal(shapes, [[4], [4]])
    np.testing.assert_array_equal(offsets, [0, 4, 8])


def test_the_loader_packs_flat(pictures):
    with DenseStore.create("ids", np.int64, codec="raw") as s:
        s.append(np.arange(N, dtype=np.int64))
    loader = DataLoader({"ids": "ids", "pictures": "pictures-zstd"},
                        batch_size=8, seed=4, ragged="packed_flat",
                        workers=2)
    sampler = Sampler(N, 8, "cyclic", seed=4)
    for step in range(8):
        batch = next(loader)
        idx = sampler.batch(step)
        np.testing.assert_array_equal(batch["ids"], idx)
        got = unpack_flat(batch["pictures"], batch["pictures_offsets"],
                          batch["pictures_shapes"])
        for g, i in zip(got, idx):
            np.testing.assert_array_equal(g, pictures[i])
    loader.close()


def test_the_loader_pads_to_a_fixed_length(tokens):
    """length gives every batch one shape; a longer record is refused at
    its step, not cut, and the loader goes on with the next step."""
    loader = DataLoader({"tokens": "tokens"}, batch_size=4, seed=3,
                        ragged="padded", pad=-1, length=13, workers=2)
    sampler = Sampler(N, 4, "cyclic", seed=3)
    for step in range(6):
        batch = next(loader)
        picked = [tokens[i] for i in sampler.batch(step)]
        want, lengths = pad_by_hand(picked, -1, 13)
        assert batch["tokens"].shape == (4, 13)
        np.testing.assert_array_equal(batch["tokens"], want)
        np.testing.assert_array_equal(batch["tokens_lengths"], lengths)
    loader.close()

    # The records are 1 to 13 tokens long: with length 6, a step that
    # draws a longer one raises, and a step that does not is served.
    loader = DataLoader({"tokens": "tokens"}, batch_size=1, seed=3,
                        ragged="padded", length=6)
    sampler = Sampler(N, 1, "cyclic", seed=3)
    outcomes = set()
    for step in range(12):
        i = int(sampler.batch(step)[0])
        if len(tokens[i]) > 6:
            with pytest.raises(ShapeMismatchError, match="more than the 6"):
                next(loader)
            outcomes.add("refused")
        else:
            batch = next(loader)
            assert batch["tokens"].shape == (1, 6)
            np.testing.assert_array_equal(
                batch["tokens"][0, :len(tokens[i])], tokens[i])
            outcomes.add("served")
    assert outcomes == {"refused", "served"}
    loader.close()


def test_bad_lengths_raise(tokens):
    for bad in (0, -3, 2.5, True, "8"):
        with pytest.raises(InvalidArgumentError, match="length"):
            DataLoader({"tokens": "tokens"}, batch_size=2, ragged="padded",
                       length=bad)
    with pytest.raises(InvalidArgumentError, match="not a padded stream"):
        DataLoader({"tokens": "tokens"}, batch_size=2, ragged="packed",
                   length={"tokens": 8})
    with pytest.raises(InvalidArgumentError, match="no stream is padded"):
        DataLoader({"tokens": "tokens"}, batch_size=2, length=8)

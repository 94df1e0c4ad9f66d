"""Sampler: each mode against what it is defined to produce."""

import numpy as np
import pytest

from loaderx import InvalidArgumentError
from loaderx.zsampler import Sampler

M = Sampler.Mode


def test_sequential_is_a_wrapping_window():
    n, b = 10, 4
    s = Sampler(n, b, M.SEQUENTIAL)
    for step in (0, 1, 2, 3, 7, 2**40):
        want = [(step * b + p) % n for p in range(b)]
        assert s.batch(step).tolist() == want


def test_cyclic_walks_a_permutation_per_cycle():
    n, b = 103, 10
    s = Sampler(n, b, M.CYCLIC, seed=5)
    assert s.per_cycle == n // b
    cycles = []
    for c in range(3):
        idx = np.concatenate([s.batch(c * s.per_cycle + k)
                              for k in range(s.per_cycle)])
        assert len(np.unique(idx)) == len(idx) == s.per_cycle * b
        assert idx.max() < n
        cycles.append(idx)
    # A fresh permutation each cycle.
    assert not np.array_equal(cycles[0], cycles[1])


def test_iid_draws_are_in_range_and_cover_the_space():
    s = Sampler(50, 50, M.IID, seed=9)
    idx = np.concatenate([s.batch(k) for k in range(200)])
    assert idx.max() < 50
    counts = np.bincount(idx.astype(np.int64), minlength=50)
    # 10,000 uniform draws over 50 values: every value near 200 times.
    assert counts.min() > 120 and counts.max() < 280


@pytest.mark.parametrize("mode", list(M))
def test_shards_concatenate_to_the_global_batch(mode):
    n, b, world = 1000, 8, 4
    whole = Sampler(n, b * world, mode, seed=3)
    shards = [Sampler(n, b, mode, seed=3, rank=r, world=world)
              for r in range(world)]
    for step in (0, 1, 17, 500):
        joined = np.concatenate([sh.batch(step) for sh in shards])
        np.testing.assert_array_equal(joined, whole.batch(step))


def test_next_moves_one_step_and_batch_does_not():
    s = Sampler(100, 7, M.CYCLIC, seed=1, start_step=5)
    assert s.step == 5
    first = s.next()
    np.testing.assert_array_equal(first, s.batch(5))
    assert s.step == 6
    np.testing.assert_array_equal(next(s), s.batch(6))
    s.batch(99)
    assert s.step == 7


def test_parameters_are_read_back():
    s = Sampler(1000, 16, "iid", seed=2**64 - 1, rank=1, world=3)
    assert (s.n, s.batch_size, s.global_batch, s.seed, s.rank, s.world,
            s.mode) == (1000, 16, 48, 2**64 - 1, 1, 3, M.IID)
    assert Sampler(1000, 16, M.CYCLIC).per_cycle == 1000 // 16
    assert Sampler(1000, 16, M.SEQUENTIAL).per_cycle == 0


@pytest.mark.parametrize("args", [
    (0, 1, M.IID), (10, 0, M.IID), (10, 11, M.IID), (10, 2, 99),
    (10, 2, "random"), (10, 3, M.IID, 0, 4, 4), (10, 3, M.IID, 0, 0, 4),
    (10, 2, M.IID, -1), (10.0, 2, M.IID),
])
def test_bad_parameters_raise(args):
    with pytest.raises(InvalidArgumentError):
        Sampler(*args)

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


def quasi_cycle(s, cycle):
    """The indices of one cycle of s, batch after batch."""
    per = s.per_cycle
    return np.concatenate([s.batch(cycle * per + k) for k in range(per)])


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 23, 24, 25, 100, 241, 1031])
def test_quasi_cycle_is_without_replacement(n):
    # block 8, window 3, batch 5: n a multiple of each of them or not.
    b = min(n, 5)
    s = Sampler(n, b, "quasi", seed=n, block=8, window=3)
    assert s.per_cycle == n // b
    cycles = [quasi_cycle(s, c) for c in range(3)]
    for idx in cycles:
        assert len(np.unique(idx)) == len(idx) == s.per_cycle * b
        assert 0 <= idx.min() and idx.max() < n
    if n >= 24:
        assert not np.array_equal(cycles[0], cycles[1])
    if n == 8 * 3 * 5:
        # Every index once per cycle when the batch divides n.
        assert sorted(cycles[2].tolist()) == list(range(n))


def test_quasi_batches_touch_few_blocks():
    # A batch of 256 from 10^6 records: at most W * (2 + (m + b - 3) //
    # (W * b)) blocks of 64, 32 with the defaults, against about 256 for
    # CYCLIC, and 64-record blocks from larger ones.
    n, m = 10**6, 256
    q = Sampler(n, m, Sampler.Mode.QUASI, seed=1)
    c = Sampler(n, m, Sampler.Mode.CYCLIC, seed=1)
    assert (q.block, q.window) == (64, 16)
    for step in range(0, 3000, 97):
        assert len(np.unique(q.batch(step) // 64)) <= 32
        assert len(np.unique(c.batch(step) // 64)) > 200
    q = Sampler(n, m, "quasi", seed=2, block=1000, window=2)
    for step in range(0, 3000, 97):
        assert len(np.unique(q.batch(step) // 1000)) <= 2 * (2 + (m + 997) // 2000)


def test_quasi_is_deterministic_and_seeded():
    a = Sampler(5000, 100, "quasi", seed=42)
    b = Sampler(5000, 100, "quasi", seed=42)
    c = Sampler(5000, 100, "quasi", seed=43)
    for step in (0, 1, 49, 50, 10**12):
        np.testing.assert_array_equal(a.batch(step), b.batch(step))
        assert not np.array_equal(a.batch(step), c.batch(step))


def test_quasi_resumes_at_a_step():
    walk = Sampler(500, 32, "quasi", seed=3, rank=1, world=3, block=10,
                   window=4)
    kept = [walk.next() for _ in range(40)]
    seek = Sampler(500, 32, "quasi", seed=3, rank=1, world=3, block=10,
                   window=4, start_step=17)
    for k in range(17, 40):
        np.testing.assert_array_equal(seek.next(), kept[k])


def test_quasi_shards_are_disjoint():
    n, b, world = 1000, 16, 4
    whole = Sampler(n, b * world, "quasi", seed=9, block=8, window=2)
    for step in (0, 5, 14, 15, 16):
        shards = [Sampler(n, b, "quasi", seed=9, rank=r, world=world,
                          block=8, window=2).batch(step)
                  for r in range(world)]
        joined = np.concatenate(shards)
        assert len(np.unique(joined)) == b * world
        np.testing.assert_array_equal(joined, whole.batch(step))


def test_quasi_parameters_are_read_back_and_checked():
    s = Sampler(1000, 10, "quasi", block=5, window=7)
    assert (s.mode, s.block, s.window) == (M.QUASI, 5, 7)
    assert "block=5, window=7" in repr(s)
    assert (Sampler(1000, 10, M.CYCLIC).block,
            Sampler(1000, 10, M.CYCLIC).window) == (0, 0)
    for kw in ({"block": 0}, {"window": 0}, {"block": -1}, {"block": 2.0},
               {"window": True}):
        with pytest.raises(InvalidArgumentError):
            Sampler(1000, 10, "quasi", **kw)
    with pytest.raises(InvalidArgumentError, match="QUASI"):
        Sampler(1000, 10, "cyclic", block=8)

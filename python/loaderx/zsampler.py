"""Sampler: record indices for each training step, from libloaderx.

A sampler maps a step number to a batch of indices in [0, n). The batch is
a pure function of the sampler's parameters and the step, so there is no
state to save: resuming a run means asking for the step it stopped at, and
every rank of a distributed job computes its own disjoint share of the same
global batch without talking to the others. The modes are the library's:

SEQUENTIAL  a window of batch_size * world indices sliding over [0, n),
            wrapping around at the end so that no batch is short;
IID         every index an independent uniform draw (with replacement);
CYCLIC      without replacement: each cycle of n // (batch_size * world)
            steps walks a fresh pseudorandom permutation of [0, n), and the
            n mod (batch_size * world) indices left over differ each cycle.
QUASI       without replacement, cycles as CYCLIC's, in an order that keeps
            a batch within few blocks of `block` consecutive records: each
            cycle shuffles the blocks, then the records within each window
            of `window` blocks (defaults 64 and 16). A batch of m indices
            touches at most about m / block + 2 * window blocks, so a store
            read by ranged requests (an object store) serves it with far
            fewer requests; doc/sampler.md says what it costs in randomness.

Each batch is drawn by one library call that writes straight into the
returned array.
"""

import enum

import numpy as np

from . import _lib
from ._lib import ffi, lib
from .errors import check, invalid

__all__ = ["Sampler"]


class Sampler:
    """Batches of indices in [0, n), a pure function of (seed, step).

    Sampler(n, batch_size, mode, seed=0, rank=0, world=1): batch_size is
    this rank's share; the global batch, batch_size * world, must be
    between 1 and n. next() returns the batch of the current step and
    moves to the following one; batch(step) returns any step's batch
    without moving. Both return int64 arrays of batch_size indices: an
    index space holds at most 2**63 records, so every index fits, and
    int64 is the index type of torch and JAX, which have no uint64
    indexing.
    """

    class Mode(enum.IntEnum):
        SEQUENTIAL = _lib.ZR_SEQUENTIAL
        IID = _lib.ZR_IID
        CYCLIC = _lib.ZR_CYCLIC
        QUASI = _lib.ZR_QUASI

    def __init__(self, n, batch_size, mode=Mode.CYCLIC, seed=0, rank=0,
                 world=1, start_step=0, block=None, window=None):
        mode = _mode(mode)
        for name, v in (("n", n), ("batch_size", batch_size), ("seed", seed),
                        ("rank", rank), ("world", world),
                        ("start_step", start_step)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise invalid(f"{name} must be an integer, not {v!r}")
        block, window = _quasi_params(mode, block, window)
        for name, v in (("seed", seed), ("start_step", start_step)):
            if not 0 <= v < 2**64:
                raise invalid(f"{name} must be in [0, 2**64), not {v}")
        if not (1 <= n <= _lib.ZR_SAMPLER_MAX_N and batch_size >= 1
                and world >= 1 and 0 <= rank < world < 2**32
                and batch_size * world <= n):
            raise invalid(f"no sampler for n={n}, batch_size={batch_size}, "
                          f"rank={rank}, world={world}: need 0 <= rank < "
                          "world and 1 <= batch_size * world <= n")
        opts = _lib.new_sized("zr_sampler_opts")
        opts.mode = int(mode)
        opts.batch = int(batch_size)
        opts.seed = int(seed)
        opts.rank = int(rank)
        opts.world = int(world)
        opts.block = block
        opts.window = window
        out = ffi.new("zr_sampler **")
        check(lib.zr_sampler_create_opts(out, int(n), opts))
        self._sm = ffi.gc(out[0], lib.zr_sampler_free)
        self._info = _lib.new_sized("zr_sampler_info")
        check(lib.zr_sampler_get_info(self._sm, self._info))
        self._mode = mode
        self.step = int(start_step)

    n = property(lambda self: int(self._info.n),
                 doc="The index space: indices are in [0, n).")
    batch_size = property(lambda self: int(self._info.batch),
                          doc="Indices per batch on this rank.")
    global_batch = property(lambda self: int(getattr(self._info, "global")),
                            doc="Indices per global batch: batch_size * world.")
    per_cycle = property(lambda self: int(self._info.per_cycle),
                         doc="CYCLIC, QUASI: steps per cycle; 0 in the other modes.")
    block = property(lambda self: int(self._info.block),
                     doc="QUASI: records per block; 0 in the other modes.")
    window = property(lambda self: int(self._info.window),
                      doc="QUASI: blocks per shuffle window; 0 in the other modes.")
    seed = property(lambda self: int(self._info.seed))
    rank = property(lambda self: int(self._info.rank))
    world = property(lambda self: int(self._info.world))
    mode = property(lambda self: self._mode)

    def batch(self, step):
        """The indices of step (any step in [0, 2**64), in any order)."""
        if not isinstance(step, (int, np.integer)) or isinstance(step, bool):
            raise invalid(f"a step is an integer, not {step!r}")
        if not 0 <= step < 2**64:
            raise invalid(f"step {step} is not in [0, 2**64)")
        out = np.empty(self._info.batch, dtype=np.int64)
        check(lib.zr_sampler_batch(self._sm, int(step),
                                   ffi.from_buffer("uint64_t[]", out,
                                                   require_writable=True)))
        return out

    def next(self):
        """The indices of the current step; then move to the next step."""
        out = self.batch(self.step)
        self.step += 1
        return out

    __next__ = next

    def __iter__(self):
        return self

    def __repr__(self):
        quasi = (f", block={self.block}, window={self.window}"
                 if self._mode == Sampler.Mode.QUASI else "")
        return (f"Sampler({self.n}, {self.batch_size}, Sampler.Mode."
                f"{self._mode.name}, seed={self.seed}, rank={self.rank}, "
                f"world={self.world}{quasi}, step={self.step})")


def _quasi_params(mode, block, window):
    """QUASI's block and window as the library takes them (0 for the
    default), refusing them in the other modes."""
    out = []
    for name, v in (("block", block), ("window", window)):
        if v is None:
            out.append(0)
            continue
        if mode != Sampler.Mode.QUASI:
            raise invalid(f"{name} applies to the QUASI mode only, not "
                          f"{mode.name}")
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) \
                or not 1 <= v < 2**64:
            raise invalid(f"{name} must be an integer in [1, 2**64), not "
                          f"{v!r}")
        out.append(int(v))
    return tuple(out)


def _mode(mode):
    """A Sampler.Mode from a Mode, its value or its name."""
    if isinstance(mode, str):
        try:
            return Sampler.Mode[mode.upper()]
        except KeyError:
            pass
    else:
        try:
            return Sampler.Mode(mode)
        except ValueError:
            pass
    raise invalid(f"unknown sampling mode {mode!r}; expected one of "
                  f"{', '.join(m.name for m in Sampler.Mode)}")

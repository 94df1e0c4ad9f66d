"""Stores whose pages are not in memory, read through the binding.

A handle plans the reads of batches that are not in the page cache and
copies from its mappings once they are (doc/cold-reads.md); both must
give what NumPy gives on the source arrays. Each test writes its stores,
closes them, drops their pages from the page cache and checks that they
are gone, then gathers with repeats cold and again warm, and runs a
DataLoader cold and warm over the same steps.

pytest.sh puts the tests' folders on tmpfs, whose pages are the files
themselves and are never dropped: the stores here go to the first of
the test's folder, /var/tmp and the build folder whose pages can be
dropped, and the tests are skipped where none can.
"""

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from loaderx.dataloader import DataLoader
from loaderx.zrecord import DenseStore, RaggedStore
from loaderx.zsampler import Sampler

N_DENSE = 1500   # records of 3 x 16 x 16 float32 (3 KiB): 4.5 MiB
N_RAGGED = 3000  # int32 token blocks of 1..600 tokens: about 3.5 MiB

_libc = ctypes.CDLL(None, use_errno=True)
_SYS_CACHESTAT = 451  # x86-64 and arm64 alike (Linux 6.5)


class _Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Stat(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in
                ("nr_cache", "nr_dirty", "nr_writeback", "nr_evicted",
                 "nr_recently_evicted")]


def cached_pages(path):
    """The pages of path in the page cache (cachestat(2)), or None where
    the kernel lacks the call."""
    fd = os.open(path, os.O_RDONLY)
    try:
        st = _Stat()
        rc = _libc.syscall(ctypes.c_long(_SYS_CACHESTAT), ctypes.c_int(fd),
                           ctypes.byref(_Range(0, 0)), ctypes.byref(st),
                           ctypes.c_uint(0))
        return None if rc != 0 else st.nr_cache
    finally:
        os.close(fd)


def drop_pages(folder):
    """Write back and drop the pages of every file under folder (no handle
    of its stores may be open: pages mapped by a process stay), and check
    that none is left. DONTNEED skips dirty pages and pages under
    write-back, so each file is synced first."""
    files = [os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs]
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    left = {os.path.relpath(p, folder): cached_pages(p) for p in files}
    assert not any(left.values()), f"pages still cached: {left}"


def _drops_pages(folder):
    """Whether a synced file in folder leaves the page cache on DONTNEED."""
    probe = os.path.join(folder, "probe")
    try:
        with open(probe, "wb") as f:
            f.write(b"\3" * 65536)
            f.flush()
            os.fdatasync(f.fileno())
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        return cached_pages(probe) == 0
    except OSError:
        return False
    finally:
        if os.path.exists(probe):
            os.unlink(probe)


@pytest.fixture
def cold_dir(tmp_path):
    """A folder whose files' pages can be dropped."""
    if cached_pages(__file__) is None:
        pytest.skip("no cachestat(2) (Linux before 6.5): cannot tell "
                    "whether pages were dropped")
    top = os.environ.get("top_builddir", os.getcwd())
    for base in (str(tmp_path), "/var/tmp", top):
        try:
            d = tempfile.mkdtemp(prefix="loaderx-cold-", dir=base)
        except OSError:
            continue
        if _drops_pages(d):
            yield d
            shutil.rmtree(d, ignore_errors=True)
            return
        shutil.rmtree(d, ignore_errors=True)
    pytest.skip("no folder here drops its pages from the page cache "
                "(tmpfs or read-only everywhere)")


@pytest.fixture
def sources():
    """The arrays the stores are written from: the expectations."""
    rng = np.random.default_rng(26)
    images = rng.normal(size=(N_DENSE, 3, 16, 16)).astype(np.float32)
    # A shared pattern, so that zstd has something to find.
    images[:, 0] = np.round(images[:, 0])
    lengths = rng.integers(1, 600, size=N_RAGGED)
    tokens = [rng.integers(0, 512, size=k).astype(np.int32) for k in lengths]
    return images, tokens


def write_stores(folder, sources, codec):
    images, tokens = sources
    paths = (os.path.join(folder, f"images-{codec}"),
             os.path.join(folder, f"tokens-{codec}"))
    with DenseStore.create(paths[0], np.float32, (3, 16, 16),
                           codec=codec) as s:
        s.append(images)
    with RaggedStore.create(paths[1], np.int32, codec=codec) as s:
        s.append(tokens)
    return paths


def keys(n, rng):
    """Index arrays with repeats, neighbours, one record and all records."""
    return [
        ("repeats", np.array([7, 7, 7, 8, 6, 7, n - 1, 0, n - 1])),
        ("random with repeats", rng.integers(0, n, size=700)),
        ("a window, shuffled, each twice",
         rng.permutation(np.repeat(np.arange(n // 2 - 40, n // 2 + 40), 2))),
        ("one", np.array([n // 3])),
        ("all", np.arange(n)),
    ]


def assert_ragged_equal(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("mmap", [True, False], ids=["mapped", "nomap"])
@pytest.mark.parametrize("codec", ["raw", "zstd"])
def test_cold_and_warm_gathers_equal_numpy(cold_dir, sources, codec, mmap):
    images, tokens = sources
    dense_path, ragged_path = write_stores(cold_dir, sources, codec)
    drop_pages(cold_dir)
    rng = np.random.default_rng(3)
    dense = DenseStore.open(dense_path, readonly=True, mmap=mmap)
    ragged = RaggedStore.open(ragged_path, readonly=True, mmap=mmap)
    dkeys, rkeys = keys(N_DENSE, rng), keys(N_RAGGED, rng)
    try:
        # Cold, then warm: the second pass finds every page cached (the
        # first ended with the whole store) and moves the handles to
        # their mappings after two such batches.
        for _ in ("cold", "warm"):
            for name, key in dkeys:
                np.testing.assert_array_equal(dense[key], images[key],
                                              err_msg=name)
            for name, key in rkeys:
                assert_ragged_equal(ragged[key], [tokens[i] for i in key])
        for name, key in dkeys:
            np.testing.assert_array_equal(dense[key], images[key],
                                          err_msg=name)
    finally:
        dense.close()
        ragged.close()


@pytest.mark.parametrize("mode", [Sampler.Mode.IID, Sampler.Mode.CYCLIC])
def test_loader_yields_the_same_batches_cold_and_warm(cold_dir, sources,
                                                      mode):
    images, tokens = sources
    n = N_DENSE
    tokens = tokens[:n]
    paths = write_stores(cold_dir, (images, tokens), "zstd")
    steps, batch = 12, 64

    def run():
        streams = {"images": DenseStore.open(paths[0], readonly=True),
                   "tokens": RaggedStore.open(paths[1], readonly=True)}
        loader = DataLoader(streams, batch_size=batch, mode=mode, seed=5,
                            prefetch=3, workers=2)
        # Copies, and no batch kept: the stores are free again (and their
        # pages unmapped, so that they can be dropped) only once the
        # loader's buffers are all back.
        out = []
        for _ in range(steps):
            b = next(loader)
            out.append((b["images"].copy(), [t.copy() for t in b["tokens"]]))
            del b
        loader.close()
        for s in streams.values():
            s.close()
        return out

    drop_pages(cold_dir)
    cold = run()
    warm = run()
    sampler = Sampler(n, batch, mode, seed=5)
    for step in range(steps):
        idx = sampler.next()
        for got in (cold[step], warm[step]):
            np.testing.assert_array_equal(got[0], images[idx])
            assert_ragged_equal(got[1], [tokens[i] for i in idx])


# A store more than four times the memory its reader may use reads its
# large records around the page cache (O_DIRECT, lib/readmode.c): the
# reader here runs in a memory cgroup of CGROUP_MB, over a store of
# BIG_RECORDS records of 160 KiB (437 MiB). Root only (making a cgroup).
CGROUP_MB = 96
BIG_RECORDS = 2800
BIG_WIDTH = 160 << 10

_READER = r"""
import os, sys
with open(sys.argv[1], "w") as f:
    f.write(str(os.getpid()))
import numpy as np
from loaderx.zrecord import DenseStore
rng = np.random.default_rng(5)
with DenseStore.open(sys.argv[2], readonly=True) as s:
    for _ in range(40):
        idx = rng.integers(0, len(s), size=16)
        got = s[idx]
        want = (idx % 251).astype(np.uint8)[:, None]
        assert (got == want).all(), "a record differs"
print("ok")
"""


def _memory_cgroup(name):
    """A new memory cgroup limited to CGROUP_MB: (its folder, the file a
    process writes its pid to), or None where none can be made. cgroup v1
    where its memory controller is mounted, else v2."""
    if os.path.isdir("/sys/fs/cgroup/memory"):
        base, limit_file, procs = ("/sys/fs/cgroup/memory",
                                   "memory.limit_in_bytes", "cgroup.procs")
    elif os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        base, limit_file, procs = "/sys/fs/cgroup", "memory.max", "cgroup.procs"
    else:
        return None
    d = os.path.join(base, name)
    try:
        os.mkdir(d)
    except OSError:
        return None
    try:
        with open(os.path.join(d, limit_file), "w") as f:
            f.write(str(CGROUP_MB << 20))
        return d, os.path.join(d, procs)
    except OSError:
        os.rmdir(d)
        return None


def test_store_four_times_the_memory_is_read_around_the_page_cache(cold_dir):
    if os.geteuid() != 0:
        pytest.skip("making a memory cgroup needs root")
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("AddressSanitizer's shadow memory alone passes the cgroup's limit")
    path = os.path.join(cold_dir, "big")
    with DenseStore.create(path, np.uint8, (BIG_WIDTH,), codec="raw") as s:
        for first in range(0, BIG_RECORDS, 100):
            n = min(100, BIG_RECORDS - first)
            block = np.empty((n, BIG_WIDTH), np.uint8)
            block[:] = (np.arange(first, first + n) % 251)[:, None]
            s.append(block)
    try:
        os.close(os.open(os.path.join(path, "0.chunk"), os.O_RDONLY | os.O_DIRECT))
    except OSError:
        pytest.skip("the folder's file system refuses O_DIRECT")
    cg = _memory_cgroup(f"loaderx-test-{os.getpid()}")
    if cg is None:
        pytest.skip("no memory cgroup can be made here")
    folder, procs = cg
    chunk = os.path.join(path, "0.chunk")
    cached = {}
    try:
        for direct in ("", "0"):
            drop_pages(path)
            env = dict(os.environ)
            env.pop("LOADERX_DIRECT", None)
            if direct:
                env["LOADERX_DIRECT"] = direct
            # The reader moves itself into the cgroup before it imports
            # loaderx, which reads the limit once.
            out = subprocess.run([sys.executable, "-c", _READER, procs, path],
                                 env=env, capture_output=True, text=True,
                                 timeout=120)
            assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
            cached[direct] = cached_pages(chunk)
    finally:
        os.rmdir(folder)
    # 40 batches of 16 records of 160 KiB: 100 MiB read. Around the page
    # cache nothing of the chunk stays; buffered, what the cgroup holds.
    assert cached[""] < 256, cached
    assert cached["0"] > 2048, cached

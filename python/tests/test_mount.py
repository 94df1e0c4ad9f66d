"""A store mounted with zrecordfs -o npy reads the same through np.load as
through the binding. These tests mount for real: they need /dev/fuse and
fusermount3, and fail rather than skip without them."""

import os
import shutil
import subprocess
import time

import numpy as np
import pytest

from loaderx.zrecord import DenseStore, RaggedStore


@pytest.fixture
def mount(zrecordfs_path, tmp_path):
    """mount(root, options) -> the mount point, unmounted at teardown."""
    assert os.path.exists("/dev/fuse"), "/dev/fuse is missing: FUSE is required"
    assert shutil.which("fusermount3"), "fusermount3 is missing (Debian fuse3)"
    mounted = []

    def do_mount(root, options):
        mnt = tmp_path / f"mnt{len(mounted)}"
        mnt.mkdir()
        log = open(tmp_path / f"mnt{len(mounted)}.log", "w+")
        proc = subprocess.Popen([zrecordfs_path, "-f", "-o", options,
                                 str(root), str(mnt)], stderr=log)
        mounted.append((mnt, proc, log))
        deadline = time.monotonic() + 10
        while not os.path.ismount(mnt):
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"zrecordfs exited {proc.returncode}: {log.read()}")
            if time.monotonic() > deadline:
                pytest.fail("zrecordfs did not mount within 10 s")
            time.sleep(0.02)
        return mnt

    yield do_mount
    for mnt, proc, log in mounted:
        if os.path.ismount(mnt):
            subprocess.run(["fusermount3", "-u", str(mnt)], check=False)
        try:
            assert proc.wait(timeout=10) == 0, "zrecordfs failed after unmount"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()


def record_names(folder):
    return sorted((n for n in os.listdir(folder) if not n.startswith(".")),
                  key=lambda n: int(n.split(".")[0]))


def test_dense_store_reads_equally_through_np_load_and_the_binding(mount, rng):
    src = rng.normal(size=(23, 3, 4)).astype(np.float32)
    with DenseStore.create("root/images", src.dtype, src.shape[1:],
                           codec="zstd") as ds:
        ds.append(src)
    mnt = mount("root", "ro,npy")
    folder = mnt / "images"
    assert record_names(folder) == [f"{i}.npy" for i in range(len(src))]
    # The mount holds a shared lock, which read-only handles share.
    with DenseStore.open("root/images", readonly=True) as ds:
        for i in range(len(src)):
            via_fs = np.load(folder / f"{i}.npy")
            via_binding = ds[i]
            assert via_fs.dtype == via_binding.dtype
            assert via_fs.shape == via_binding.shape == (3, 4)
            np.testing.assert_array_equal(via_fs, via_binding)
            np.testing.assert_array_equal(via_fs, src[i])
        mapped = np.load(folder / "7.npy", mmap_mode="r")
        np.testing.assert_array_equal(mapped, ds[7])


def test_ragged_store_reads_equally_through_np_load_and_the_binding(mount, rng):
    recs = [rng.integers(0, 2**16, size=shape).astype(">u2")
            for shape in [(5,), (2, 3), (), (1, 9), (4, 1, 2)]]
    with RaggedStore.create("root/tokens", ">u2", codec="raw") as rs:
        rs.append(recs)
    mnt = mount("root", "ro,npy")
    folder = mnt / "tokens"
    assert record_names(folder) == [f"{i}.npy" for i in range(len(recs))]
    with RaggedStore.open("root/tokens", readonly=True) as rs:
        via_binding = rs[:]
        for i, want in enumerate(recs):
            via_fs = np.load(folder / f"{i}.npy")
            assert via_fs.dtype == via_binding[i].dtype == want.dtype
            assert via_fs.shape == via_binding[i].shape == want.shape
            np.testing.assert_array_equal(via_fs, via_binding[i])
            np.testing.assert_array_equal(via_fs, want)

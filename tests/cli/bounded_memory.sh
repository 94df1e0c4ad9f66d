#!/bin/bash
# import streams an .npy: its peak resident memory stays far below the
# size of the file (here 192 MiB of data against a 64 MiB bound), so a
# file larger than memory imports. export of the store gives it back.
#
# The bound is measured two ways: as the child's peak RSS (getrusage),
# and by running the import under an address-space limit (`ulimit -v`)
# smaller than the file. The measuring process is a small Python without
# NumPy, because a child started by vfork counts its parent's peak until
# it execs.
. "${srcdir:-.}/tests/cli/lib.sh"

py '
n, width = 49152, 1024                     # 49152 records of 4 KiB: 192 MiB
a = np.lib.format.open_memmap("big.npy", mode="w+", dtype="<f4", shape=(n, width))
for i in range(0, n, 4096):
    a[i:i + 4096] = np.arange(i, i + 4096, dtype="<f4")[:, None] + np.arange(width, dtype="<f4")
a.flush()
'

"$PY" -c '
import os, resource, subprocess, sys
def peak_mib(*args):
    r = subprocess.run([os.environ["ZR"], *args])
    assert r.returncode == 0, args
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
p = peak_mib("import", "st", "big.npy", "-q")
assert p < 64, "import peaked at %.0f MiB" % p
'
zr export st out.npy -q

# The whole process may use less address space than the file's size.
# (Not under AddressSanitizer, whose shadow memory alone exceeds any such
# limit.)
if ! grep -qa __asan_init "$ZR" "$top_builddir/lib/.libs/libloaderx.so" 2>/dev/null; then
    (ulimit -v 160000 && "$ZR" import st2 big.npy -q)
    zr verify st2 -q
fi

py '
a = np.load("big.npy", mmap_mode="r")
b = np.load("out.npy", mmap_mode="r")
assert a.shape == b.shape and a.dtype == b.dtype
for i in range(0, a.shape[0], 4096):
    assert np.array_equal(a[i:i + 4096], b[i:i + 4096]), i
'
exit 0

#!/bin/bash
# Records one step over the 2 GiB record limit are refused before anything
# is written, with exit 1, a one-line reason and no store left behind: an
# .npy whose scalar items are of a dtype wider than 2 GiB ('<U536870913',
# 2^31 + 4 bytes), one whose items are one byte over (|u1, 2^31 + 1), and
# zr create of such a scalar dtype. The .npy files are sparse: a header
# written by hand and a hole for the data. The calls run under a 1 MiB
# file size limit, so that a build that accepted them would fail rather
# than write gigabytes.
. "${srcdir:-.}/tests/cli/lib.sh"

py '
import struct
def sparse_npy(name, descr, shape, nbytes):
    d = "{\"descr\": \"%s\", \"fortran_order\": False, \"shape\": %s, }" % (descr, shape)
    pad = 64 - (10 + len(d) + 1) % 64
    h = (d + " " * pad + "\n").encode("latin1")
    with open(name, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h)
        f.truncate(10 + len(h) + nbytes)
sparse_npy("wide.npy", "<U536870913", "(1,)", 2**31 + 4)
sparse_npy("long.npy", "|u1", "(1, 2147483649)", 2**31 + 1)
sparse_npy("limit.npy", "|u1", "(1, 2147483648)", 2**31)
'

limited() {
    (ulimit -f 1024; trap '' XFSZ; exec "$ZR" "$@")
}

expect_fail 1 'wide.npy: one record would exceed the 2 GiB record limit' limited import st wide.npy
expect_fail 1 'long.npy: one record would exceed the 2 GiB record limit' limited import st long.npy
expect_fail 1 'exceeds 2 GiB' limited create st --dtype '<U536870913'
[ ! -e st ] || fail "a refused record left $T/st behind"

# At the limit the same calls go on: create makes the store, and an
# raw import gets as far as writing the record (stopped by the size limit).
limited create st --dtype '<U536870912'
limited info st | grep -q 'dtype: *<U536870912$' || fail "zr info st: $(limited info st)"
expect_fail 1 'File too large' limited import --codec raw st2 limit.npy
exit 0

#!/bin/bash
# Bad input of every kind gives a one-line message "zr: CMD: ..." and the
# documented exit status (2 for usage errors, 1 for failures), never a
# crash: unknown options, missing operands, missing stores, dtype and shape
# mismatches, out-of-range indices, corrupt and locked stores.
. "${srcdir:-.}/tests/cli/lib.sh"

py '
np.save("f4.npy", np.arange(20, dtype="<f4").reshape(5, 4))
np.save("f8.npy", np.arange(20, dtype="<f8").reshape(5, 4))
np.save("f4x5.npy", np.arange(25, dtype="<f4").reshape(5, 5))
'
zr import st f4.npy

# Usage errors: exit 2.
expect_fail 2 "import: unknown option '--bogus'" zr import st2 f4.npy --bogus
expect_fail 2 "import: unknown option '-z'" zr import st2 f4.npy -z
expect_fail 2 "option '--codec' needs a value" zr import st2 f4.npy --codec
expect_fail 2 "unknown codec 'gzip'" zr import st2 f4.npy --codec gzip
expect_fail 2 'import: missing STORE' zr import
expect_fail 2 'missing FILE.npy' zr import st2
expect_fail 2 'either FILE.npy or --files' zr import st2 f4.npy --files .
expect_fail 2 '--map only applies to --files' zr import st2 f4.npy --map m.txt
expect_fail 2 'append: too many operands' zr append st f4.npy f4.npy
expect_fail 2 'missing --dtype' zr create st2
expect_fail 2 "'<f3' is not a dtype loaderx stores" zr create st2 --dtype '<f3'
expect_fail 2 "'3,,4' is not an item shape" zr create st2 --dtype '<f4' --shape 3,,4
expect_fail 2 "has a zero dimension" zr create st2 --dtype '<f4' --shape 3,0
expect_fail 2 '--shape applies to Dense stores' zr create st2 --dtype '<f4' --ragged --shape 3
expect_fail 2 'cat: missing INDEX' zr cat st
expect_fail 2 "'x1' is not an index" zr cat st x1
expect_fail 2 "'1:2:3' is not an index" zr cat st 1:2:3
expect_fail 2 "range 3:1 is reversed" zr cat st 3:1
expect_fail 2 "unknown option '-1'" zr cat st -1
expect_fail 2 '--range takes A:B' zr export st out.npy --range 3
expect_fail 2 'info: too many operands' zr info st st
expect_fail 2 'missing ROOT or MOUNTPOINT' zr mount st
[ ! -e st2 ] || fail "a usage error created a store"

# Failures: exit 1.
expect_fail 1 'info: nostore' zr info nostore
expect_fail 1 'cat: nostore' zr cat nostore 0
expect_fail 1 'export: nostore' zr export nostore out.npy
expect_fail 1 'append: nostore' zr append nostore f4.npy
mkdir plain
expect_fail 1 'plain holds no store' zr info plain
expect_fail 1 'st holds <f4 items of shape (4,), f8.npy holds <f8 items of shape (4,)' zr append st f8.npy
expect_fail 1 'st holds <f4 items of shape (4,), f4x5.npy holds <f4 items of shape (5,)' zr append st f4x5.npy
expect_fail 1 'index 5 is out of range: the store holds 5 records' zr cat st 5
expect_fail 1 'range 3:6 is out of range' zr cat st 3:6
expect_fail 1 'range 0:9 is out of range' zr export st out.npy --range 0:9
expect_fail 1 'st already holds a store' zr import st f4.npy
expect_fail 1 'st already holds a store' zr create st --dtype '<f4'
# A store is a folder of its own: not one that holds other files, not a file.
mkdir photos && echo keep > photos/a.png
expect_fail 1 'photos is a folder that holds other files' zr import photos f4.npy
expect_fail 1 'photos is a folder that holds other files' zr create photos --dtype '<f4'
expect_fail 1 'photos is a folder that holds other files' zr recode st photos --codec zstd
[ "$(ls photos)" = a.png ] || fail "a refused import wrote into photos: $(ls photos)"
expect_fail 1 'f8.npy exists and is not a folder' zr import f8.npy f4.npy
# An empty folder, or one with only what a creation that died left behind,
# takes a store.
mkdir empty && zr import empty f4.npy
mkdir leftover && : > leftover/meta.zr && : > leftover/0.loc && zr import leftover f4.npy
zr verify -q leftover
[ ! -e out.npy ] || fail "a failed export left out.npy"
# A creation that fails halfway (no file may grow) leaves nothing; stderr
# goes through a pipe, which the file size limit does not stop.
rc=0
err=$( (ulimit -f 0; trap '' XFSZ; exec "$ZR" create new/st --dtype '<f4') 2>&1) || rc=$?
[ "$rc" = 1 ] && [[ $err == "zr: create: "*"File too large" ]] || fail "create under a size limit: $rc $err"
[ ! -e new ] || fail "a failed create left new/ behind"
zr export st ok.npy
py 'assert np.array_equal(np.load("ok.npy"), np.load("f4.npy")), "a refused append changed the store"'
zr create rg --ragged --dtype '|u1'
expect_fail 1 "rg is a Ragged store.*use 'zr cat" zr export rg out.npy
expect_fail 1 'rg holds |u1 records, f4.npy holds <f4' zr append rg f4.npy

# A held lock: a writer elsewhere makes every open fail at once.
py '
import fcntl, os, subprocess
fd = os.open("st/meta.zr", os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
r = subprocess.run([os.environ["ZR"], "info", "st"], capture_output=True, text=True)
assert r.returncode == 1, r
assert r.stderr.startswith("zr: info: ") and r.stderr.count("\n") == 1, r.stderr
assert "st is open for writing by another handle or process" in r.stderr, r.stderr
' 

# Corrupt stores (raw here; compressed records come after). A damaged
# record-table entry fails that record only.
zr import bad_loc f4.npy --codec raw
py '
import struct
with open("bad_loc/0.loc", "r+b") as f:
    f.seek(2 * 16)
    f.write(struct.pack("<I", 0xFFFFFFF0))
'
expect_fail 1 'bad_loc/0.loc entry 2' zr cat bad_loc 2
zr cat bad_loc 1 >one.bin
py 'assert open("one.bin", "rb").read() == np.load("f4.npy")[1].tobytes()'

# A truncated chunk file, a header of the wrong size, a garbled identity.
zr import short f4.npy --codec raw
truncate -s 10 short/0.chunk
expect_fail 1 'corrupt store: short/0.loc entry 0' zr cat short 0
# A writer takes records past the chunk's end for appends a power cut
# lost (doc/format.md R15): it keeps the records before them, none here.
zr append short f4.npy -q
zr export short short.npy -q
py 'assert np.array_equal(np.load("short.npy"), np.load("f4.npy")), "the cut store holds other records"'
zr import meta f4.npy
truncate -s 31 meta/meta.zr
expect_fail 1 'meta/meta.zr is 31 bytes' zr cat meta 0
zr import ident f4.npy
printf 'garbage' >ident/store.zr
expect_fail 1 'store.zr' zr info ident

# A compressed record whose bytes were damaged cannot be decoded.
zr import zs f4.npy --codec zstd
py '
import os
size = os.path.getsize("zs/0.chunk")
with open("zs/0.chunk", "r+b") as f:
    data = bytearray(f.read())
    for i in range(4, size):
        data[i] ^= 0x5A
    f.seek(0)
    f.write(data)
'
expect_fail 1 'cat: ' zr cat zs 0
exit 0

#!/bin/bash
# .npy files zr must refuse, each with exit 1, a one-line reason, and no
# store left behind: Fortran order, object and structured dtypes, 0-d
# arrays, dtypes loaderx does not store, damaged headers and truncated
# data. An import that fails after creating its store removes it.
. "${srcdir:-.}/tests/cli/lib.sh"

py '
import struct
a = np.arange(12, dtype="<i4").reshape(3, 4)
np.save("fortran.npy", np.asfortranarray(a))
np.save("object.npy", np.array([1, "a", None], dtype=object))
np.save("structured.npy", np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8")]))
np.save("scalar.npy", np.float32(3.5))
np.save("datetime.npy", np.array(["2024-01-01"], dtype="M8[D]"))
np.save("zerodim.npy", np.zeros((4, 0), dtype="<f4"))
np.save("good.npy", a)
raw = open("good.npy", "rb").read()
open("truncated.npy", "wb").write(raw[:-5])
open("badmagic.npy", "wb").write(b"\x93NUMPX" + raw[6:])
open("version4.npy", "wb").write(raw[:6] + b"\x04\x00" + raw[8:])
open("shortheader.npy", "wb").write(raw[:40])
hlen = struct.unpack("<H", raw[8:10])[0]
def with_header(d):
    d = d.encode("latin1")
    d += b" " * (hlen - 1 - len(d)) + b"\n"
    return raw[:10] + d + raw[10 + hlen:]
open("garbage.npy", "wb").write(with_header("{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (3, 4), \"x\": 1}"))
open("noshape.npy", "wb").write(with_header("{\"descr\": \"<i4\", \"fortran_order\": False}"))
open("notuple.npy", "wb").write(with_header("{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (3)}"))
open("code.npy", "wb").write(with_header("__import__(\"os\").system(\"touch pwned\")"))
open("empty.npy", "wb").close()
'

expect_fail 1 'fortran.npy: Fortran-order arrays are not supported' zr import st fortran.npy
expect_fail 1 'object.npy: object arrays are not supported' zr import st object.npy
expect_fail 1 'structured.npy: structured dtypes .* are not supported' zr import st structured.npy
expect_fail 1 'scalar.npy: a 0-d array holds no records' zr import st scalar.npy
expect_fail 1 "datetime.npy: dtype '<M8\[D\]' is not one loaderx stores" zr import st datetime.npy
expect_fail 1 'zerodim.npy: the item shape has a zero dimension' zr import st zerodim.npy
expect_fail 1 'truncated.npy: NPY file is truncated' zr import st truncated.npy
expect_fail 1 'badmagic.npy: not an NPY file' zr import st badmagic.npy
expect_fail 1 'version4.npy: NPY format version 4.0 is not supported' zr import st version4.npy
expect_fail 1 'shortheader.npy: NPY file ends inside its header' zr import st shortheader.npy
expect_fail 1 'garbage.npy: malformed NPY header: unexpected key' zr import st garbage.npy
expect_fail 1 'noshape.npy: malformed NPY header: a key is missing' zr import st noshape.npy
expect_fail 1 'notuple.npy: malformed NPY header: shape (n) lacks the comma' zr import st notuple.npy
expect_fail 1 'code.npy: malformed NPY header: the header is not a dict' zr import st code.npy
expect_fail 1 'empty.npy: not an NPY file' zr import st empty.npy
expect_fail 1 'missing.npy: No such file or directory' zr import st missing.npy
expect_fail 1 '\.: not a regular file' zr import st .
[ ! -e st ] || fail "a refused import left $T/st behind"
[ ! -e pwned ] || fail "a header was executed"

# The same refusals hold for append, and the store is left as it was.
zr import st good.npy
expect_fail 1 'fortran.npy: Fortran-order' zr append st fortran.npy
expect_fail 1 'truncated.npy: NPY file is truncated' zr append st truncated.npy
zr export st back.npy
py 'assert np.array_equal(np.load("back.npy"), np.load("good.npy")), "a refused append changed the store"'


# A write that fails after creation (the file size limit stops the first
# chunk write) leaves no store, and no folder the import created.
py 'np.save("big.npy", np.ones((4096, 256), dtype="<f4"))'
rc=0
(ulimit -f 64; trap '' XFSZ; exec "$ZR" import deep/er/st big.npy) 2>err.txt || rc=$?
[ "$rc" = 1 ] || fail "import under a file size limit exited $rc: $(cat err.txt)"
[ "$(wc -l <err.txt)" = 1 ] && grep -q '^zr: import: .*File too large' err.txt ||
    fail "import under a file size limit: $(cat err.txt)"
[ ! -e deep ] || fail "a failed import left $T/deep behind"
mkdir existing
rc=0
(ulimit -f 64; trap '' XFSZ; exec "$ZR" import existing big.npy) 2>err.txt || rc=$?
[ "$rc" = 1 ] || fail "import into an empty folder under a size limit exited $rc"
[ -d existing ] && [ -z "$(ls -A existing)" ] ||
    fail "a failed import into an existing folder left: $(ls -A existing)"
exit 0

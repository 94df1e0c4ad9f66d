#!/bin/bash
# delete, compact, verify and the space accounting of info: swap-last
# deletion against a NumPy model, compaction keeping every record, verify
# clean on a sound store and failing on a damaged one, and an append that
# fails midway taken back by deletion.
. "${srcdir:-.}/tests/cli/lib.sh"

py 'np.save("a.npy", np.arange(40 * 6, dtype="<i8").reshape(40, 6))'
# Raw, so that the space accounting below counts the records' own bytes.
zr import st a.npy --codec raw
zr info st --json >before.json

# Swap-last: the batch goes from the highest index down, each hole filled
# by the then last record.
zr delete st 3 0 39 10:13 3
zr export st after_delete.npy
zr info st --json >deleted.json
zr verify st >verify.txt
grep -q '^st: 34 records checked, no problems$' verify.txt || fail "verify: $(cat verify.txt)"
zr compact st >compact.txt
grep -q '^st: .* records moved, chunk bytes 1920 -> 1632$' compact.txt || fail "compact: $(cat compact.txt)"
zr export st after_compact.npy
zr info st --json >compacted.json
zr verify st -q >quiet.txt
[ ! -s quiet.txt ] || fail "verify -q printed: $(cat quiet.txt)"
py '
import json, os
a = np.load("a.npy")
model = list(range(40))
for i in sorted({3, 0, 39, 10, 11, 12}, reverse=True):
    model[i] = model[-1]
    model.pop()
want = a[model]
assert np.array_equal(np.load("after_delete.npy"), want)
assert np.array_equal(np.load("after_compact.npy"), want)
b, d, c = (json.load(open(f + ".json")) for f in ("before", "deleted", "compacted"))
width = 6 * 8
assert b["records"] == 40 and b["live_bytes"] == 40 * width and b["chunk_bytes"] == 40 * width, b
assert b["reclaimable"] == 0 and b["dict_bytes"] == 0, b
assert d["records"] == 34 and d["live_bytes"] == 34 * width and d["reclaimable"] == 6 * width, d
assert c["records"] == 34 and c["reclaimable"] == 0, c
assert c["chunk_bytes"] == os.path.getsize("st/0.chunk") == 34 * width, c
'
# The record numbering changes, so "34" above: 40 minus 6 distinct indices.

# Refusals leave the store as it was.
expect_fail 1 'index 34 is out of range' zr delete st 0 34
expect_fail 2 'delete: missing INDEX' zr delete st
expect_fail 1 'nostore' zr compact nostore
zr export st unchanged.npy
cmp -s unchanged.npy after_compact.npy || fail "a refused delete changed the store"

# A damaged store: verify lists the problems on stdout and fails with one
# line on stderr.
zr import zs a.npy --codec zstd
zr verify zs >ok.txt
truncate -s 100 zs/0.chunk
rc=0
zr verify zs >problems.txt 2>err.txt || rc=$?
[ "$rc" = 1 ] || fail "verify of a truncated store exited $rc"
[ "$(wc -l <err.txt)" = 1 ] && grep -q '^zr: verify: zs: [0-9]* problems found in 40 records$' err.txt ||
    fail "verify stderr: $(cat err.txt)"
grep -q '^zs/0.chunk\|^zs/0.loc: record [0-9]*: ' problems.txt || fail "verify stdout: $(cat problems.txt)"
expect_fail 1 'corrupt store: zs/0.loc entry' zr info zs

# An append whose second batch fails (the file size limit stops it) takes
# back the first: the store is as before.
py 'np.save("big.npy", np.ones((10 * 4096, 256), dtype="<i8"))'   # 80 MiB, three batches
# Raw: compressed, these rows of ones would fit under the limit.
zr create tall --dtype '<i8' --shape 256 --codec raw
zr append tall big.npy --quiet
zr delete tall 0:40960
zr compact tall -q
zr append tall a.npy 2>/dev/null && fail "appending 6-wide rows to a 256-wide store succeeded"
rc=0
(ulimit -f 40960; trap '' XFSZ; exec "$ZR" append tall big.npy -q) 2>err.txt || rc=$?
[ "$rc" = 1 ] || fail "append under a file size limit exited $rc: $(cat err.txt)"
[ "$(wc -l <err.txt)" = 1 ] && grep -q 'File too large' err.txt || fail "append: $(cat err.txt)"
[ "$(zr info tall --json | py 'import json; print(json.load(sys.stdin)["records"])')" = 0 ] ||
    fail "a failed append left records behind"
zr verify tall -q
exit 0

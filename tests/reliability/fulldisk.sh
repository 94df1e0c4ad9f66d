#!/bin/bash
# Full disk: appends into a small tmpfs fail with a clean one-line error
# and leave the store intact (zr verify, the record count, the data); once
# space is freed, appends work again; and zr import into a full disk exits
# 1 with a one-line message and leaves no half store behind. Needs root to
# mount the tmpfs; skipped (77) without it.
. "${srcdir:-.}/tests/cli/lib.sh"

MNT=$T/mnt
mkdir "$MNT"
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=8m zr-fulldisk "$MNT" 2>/dev/null; then
    echo "SKIP: mounting a tmpfs needs root" >&2
    exit 77
fi
trap 'umount "$MNT" 2>/dev/null; rm -rf "$T"' EXIT

# 256 incompressible records of 4 KiB: 1 MiB per append.
py 'np.save("batch.npy", np.random.default_rng(7).integers(0, 256, (256, 4096), dtype=np.uint8))'
# Room that can be given back later.
head -c 2M /dev/zero >"$MNT/reserve"

zr import "$MNT/st" batch.npy
ok=1
for _ in $(seq 1 20); do
    rc=0
    zr append "$MNT/st" batch.npy >"$T/out" 2>"$T/err" || rc=$?
    [ "$rc" = 0 ] || break
    ok=$((ok + 1))
done
[ "$rc" = 1 ] || fail "append into a full disk exited $rc: $(cat "$T/err")"
[ "$(wc -l <"$T/err")" = 1 ] || fail "append error is not one line: $(cat "$T/err")"
grep -qi 'space\|full' "$T/err" || fail "append error does not say the disk is full: $(cat "$T/err")"
[ "$ok" -ge 2 ] || fail "only $ok appends fit before the disk was full"

check_store() {
    local want=$1
    zr verify "$MNT/st" >/dev/null || fail "verify failed after $want batches"
    zr export "$MNT/st" all.npy
    py '
a = np.load("all.npy"); b = np.load("batch.npy"); n = int(sys.argv[1])
assert a.shape == (256 * n, 4096), (a.shape, n)
assert (a.reshape(n, 256, 4096) == b).all()
' "$want" || fail "the store does not hold $want batches"
    rm -f all.npy
}
# Export needs room outside the full tmpfs: all.npy is written in $T.
cat "$T/err" >&2
check_store "$ok"

# Free space: the next append succeeds and lands after the others.
rm "$MNT/reserve"
zr append "$MNT/st" batch.npy || fail "append after freeing space failed"
check_store $((ok + 1))

# Fill the disk to the last byte, then import: exit 1, one line, nothing left.
head -c 16M /dev/zero >"$MNT/filler" 2>/dev/null || true
expect_fail 1 '' zr import "$MNT/st2" batch.npy
[ ! -e "$MNT/st2" ] || fail "import into a full disk left $(ls -A "$MNT/st2" | tr '\n' ' ')behind"
zr verify "$MNT/st" >/dev/null || fail "the existing store broke when the disk filled"
echo "fulldisk: $ok appends fit; error, recovery and import checks passed"

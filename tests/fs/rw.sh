#!/bin/bash
# rw.sh: a read-write mount. .delete applies an index list, written in
# one or several writes, as one swap-last batch when closed; .compact
# compacts; after each, every record (including through descriptors
# opened before) reads as a model of swap-last deletion says, nothing
# stale is served, and the stores stay that way after a remount. Bad
# lists give EINVAL, too long ones E2BIG, rm gives EPERM.
. "$(dirname "$0")/lib.sh"

make_tree
m="$tmp/m"
mount_fs "$m" -o rw "$tmp/tree"
pid=$DAEMON
[ "$(ls -A "$m/scalar_i8" | tr '\n' ' ')" = ".compact .delete .gather .stats 0 1 2 3 4 " ] ||
    fail "-o rw lists: $(ls -A "$m/scalar_i8")"

# Warm the kernel's caches of names, sizes and pages before changing.
$CHECK records "$m" "$tmp/exp" 1 $STORES > /dev/null
ls -l "$m/ragged_zstd" > /dev/null
# .gather of a read-write mount gathers into its buffer, O_DIRECT or not.
$CHECK gather_direct "$m" "$tmp/exp" $STORES

$CHECK delete "$m" "$tmp/exp" dense/raw_f4 "$tmp/raw_f4.model" "1 4" ",4 1" "7" $'\n4' "9"
$CHECK delete "$m" "$tmp/exp" ragged_zstd "$tmp/ragged_zstd.model" "0 24 3"
$CHECK delete "$m" "$tmp/exp" deep/a/b/ragged_dict "$tmp/ragged_dict.model" "59"
$CHECK delete "$m" "$tmp/exp" deep/a/b/ragged_dict "$tmp/ragged_dict.model" "1 2 3 4 5 6 7 8 9 10 30 31"
# From a shell, as a user does it.
echo 2 > "$m/dense/zstd_u2/.delete"
[ "$(ls "$m/dense/zstd_u2" | wc -l)" -eq 39 ] || fail "echo 2 > .delete did not delete"
cmp -s "$m/dense/zstd_u2/2" "$tmp/exp/dense/zstd_u2/39" || fail "after echo 2 > .delete, 2 is not the old 39"
$CHECK errno read "$m/dense/zstd_u2/39" ENOENT
ok "deletes, in one and in several writes, read back as swap-last"

# Bad lists: EINVAL at the write, or at the close for a last number, and
# at every later write and the close; nothing is deleted by a refused list.
# (A good list first: deleting 0 of scalar_i8 moves its record 4 there.)
$CHECK errno write "$m/scalar_i8/.delete" OK
$PY - "$m/scalar_i8" << 'PYEOF' || fail "bad .delete lists"
import errno, os, sys
d = sys.argv[1]
fd = os.open(d + "/.delete", os.O_WRONLY)
os.write(fd, b"3")
try:
    os.write(fd, b"9")   # 39 is out of range: refused when the number ends
    os.close(fd)
    sys.exit("closing with 39 pending succeeded")
except OSError as e:
    if e.errno != errno.EINVAL:
        sys.exit("closing with 39 pending gave %s" % errno.errorcode[e.errno])
# A refused list, at its first write or after some of it was taken,
# fails every later write and the close too, so nothing a writer sends
# on after the error is deleted (what follows may be the rest of one
# write(2) that the kernel passed on in pieces).
refused = [(b"", bad) for bad in (b"x", b"-1", b"4 ", b"1.5")]
refused += [(b"1 ", b"x"), (b"1 2", b"9 0")]
for first, bad in refused:
    fd = os.open(d + "/.delete", os.O_WRONLY)
    if first:
        os.write(fd, first)
    for text in (bad, b"0\n"):
        try:
            os.write(fd, text)
            sys.exit("%r after %r was accepted" % (text, first))
        except OSError as e:
            if e.errno != errno.EINVAL:
                sys.exit("%r after %r gave %s" % (text, first, errno.errorcode[e.errno]))
    try:
        os.close(fd)
        sys.exit("closing after %r %r succeeded" % (first, bad))
    except OSError as e:
        if e.errno != errno.EINVAL:
            sys.exit("closing after %r %r gave %s" % (first, bad, errno.errorcode[e.errno]))
if len([n for n in os.listdir(d) if not n.startswith(".")]) != 4:
    sys.exit("a refused list deleted something")
PYEOF
[ "$(ls "$m/scalar_i8" | wc -l)" -eq 4 ] || fail "scalar_i8 should hold 4 records"
cmp -s "$m/scalar_i8/0" "$tmp/exp/scalar_i8/4" || fail "scalar_i8/0 should be the old 4"
$CHECK errno read "$m/scalar_i8/.delete" EACCES  unlink "$m/scalar_i8/1" EPERM \
    write "$m/scalar_i8/1" EACCES  create "$m/scalar_i8/new" EPERM  mkdir "$m/scalar_i8/d" EPERM
ok "bad lists give EINVAL and change nothing; rm gives EPERM"

# A list longer than the most, sent by one write loop: the kernel passes
# it on in pieces; E2BIG, and nothing of it is applied.
$CHECK longlist "$m" ragged_raw "$(records_of ragged_raw)"
ok "a list of more than 16,777,216 indices fails with E2BIG and changes nothing"

# Compaction: the space comes back, the records do not change.
for s in dense/raw_f4 ragged_zstd deep/a/b/ragged_dict; do
    before=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["reclaimable"])' "$m/$s/.stats")
    [ "$before" -gt 0 ] || fail "$s: nothing to reclaim after deletes"
    echo now > "$m/$s/.compact"
    $PY - "$m/$s" << 'PYEOF' || fail "$s: compaction result"
import json, sys
d = sys.argv[1]
res = json.load(open(d + "/.compact"))
st = json.load(open(d + "/.stats"))
assert res["compactions"] == 1, res
assert res["bytes_after"] < res["bytes_before"], res
assert st["reclaimable"] == 0 and st["chunk_bytes"] == st["live_bytes"] == res["bytes_after"], (res, st)
PYEOF
done
exec 3<> "$m/ragged_raw/.compact"
echo >&3
grep -q '"compactions": 1' <&3 || fail ".compact on one descriptor"
exec 3>&-
$CHECK model "$m" "$tmp/exp" dense/raw_f4 "$tmp/raw_f4.model"
$CHECK model "$m" "$tmp/exp" ragged_zstd "$tmp/ragged_zstd.model"
$CHECK model "$m" "$tmp/exp" deep/a/b/ragged_dict "$tmp/ragged_dict.model"
ok "compaction reclaims the space and keeps every record"

unmount_fs "$m" "$pid"

# What the mount did is in the stores.
mount_fs "$m" -o npy "$tmp/tree"
pid=$DAEMON
[ "$(ls "$m/dense/raw_f4" | wc -l)" -eq 46 ] || fail "after remount, dense/raw_f4 lists $(ls "$m/dense/raw_f4" | wc -l)"
unmount_fs "$m" "$pid"
mount_fs "$m" "$tmp/tree"
pid=$DAEMON
$CHECK model "$m" "$tmp/exp" dense/raw_f4 "$tmp/raw_f4.model"
$CHECK model "$m" "$tmp/exp" deep/a/b/ragged_dict "$tmp/ragged_dict.model"
$CHECK errno create "$m/dense/raw_f4/.compact" EROFS  create "$m/dense/raw_f4/.delete" EROFS
unmount_fs "$m" "$pid"
ok "the changes persist across a remount; read-only mounts refuse them"

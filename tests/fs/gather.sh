#!/bin/bash
# gather.sh: the .gather control file, from a shell on one descriptor and
# from Python with os.write/os.read, against the expected records: Dense
# batches back to back, Ragged batches framed with their shapes; bad
# lists give EINVAL and leave the handle usable. Then opened with
# O_DIRECT: whole batches in one read, reads at offsets in any order and
# from several threads, and several descriptors gathering at once.
. "$(dirname "$0")/lib.sh"

make_tree
m="$tmp/m"
mount_fs "$m" "$tmp/tree"
pid=$DAEMON

# From the shell, on one descriptor, as the man page shows it.
cd "$m/dense/zstd_u2"
exec 3<> .gather
echo 3 1 4 >&3
cat <&3 > "$tmp/batch"
cat "$tmp/exp/dense/zstd_u2/3" "$tmp/exp/dense/zstd_u2/1" "$tmp/exp/dense/zstd_u2/4" > "$tmp/want"
cmp -s "$tmp/batch" "$tmp/want" || fail "shell .gather of 3 1 4 differs"
if (echo 1 oops >&3) 2> /dev/null; then fail "a bad list was accepted"; fi
echo 39 >&3
cat <&3 | cmp -s - "$tmp/exp/dense/zstd_u2/39" || fail "shell .gather after a bad list differs"
exec 3>&-
seq -w 0 39 > "$tmp/all"
exec 3<> .gather
cat "$tmp/all" >&3
cat <&3 > "$tmp/batch"
exec 3>&-
(for i in $(seq 0 39); do cat "$tmp/exp/dense/zstd_u2/$i"; done) > "$tmp/want"
cmp -s "$tmp/batch" "$tmp/want" || fail "shell .gather of seq -w 0 39 differs"
cd "$tmp"
ok "shell .gather on one descriptor"

$CHECK gather "$m" "$tmp/exp" $STORES
$CHECK gather_direct "$m" "$tmp/exp" $STORES

unmount_fs "$m" "$pid"
ok "unmounted"

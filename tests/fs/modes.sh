#!/bin/bash
# modes.sh: the naming and opening modes. -o npy serves complete NPY
# files that numpy.load reads back as the appended arrays; -o ext=SUFFIX
# names records with a suffix; -o noopen serves the same bytes without
# OPEN round trips and has no .gather; -o mt serves them from libfuse's
# multi-threaded loop, -s from the polling one-thread loop (-o spin=0:
# without polling).
. "$(dirname "$0")/lib.sh"

make_tree

m="$tmp/npy"
mount_fs "$m" -o npy "$tmp/tree"
pid=$DAEMON
[ "$(ls "$m/scalar_i8" | tr '\n' ' ')" = "0.npy 1.npy 2.npy 3.npy 4.npy " ] || fail "-o npy names: $(ls "$m/scalar_i8")"
$CHECK errno read "$m/scalar_i8/0" ENOENT
$CHECK npy "$m" "$tmp/exp" $STORES
unmount_fs "$m" "$pid"
ok "-o npy"

m="$tmp/ext"
mount_fs "$m" -o ext=.bin "$tmp/tree"
pid=$DAEMON
[ "$(ls "$m/scalar_i8" | tr '\n' ' ')" = "0.bin 1.bin 2.bin 3.bin 4.bin " ] || fail "-o ext names: $(ls "$m/scalar_i8")"
$CHECK errno read "$m/scalar_i8/0" ENOENT  read "$m/scalar_i8/0.bin.bin" ENOENT  read "$m/scalar_i8/00.bin" ENOENT
for i in 0 1 2 3 4; do
    cmp -s "$m/scalar_i8/$i.bin" "$tmp/exp/scalar_i8/$i" || fail "-o ext: $i.bin differs"
done
unmount_fs "$m" "$pid"
ok "-o ext=.bin"

m="$tmp/noopen"
# -d logs every request: OPEN must reach the daemon once, then never.
mount_fs "$m" -d -o noopen "$tmp/tree"
pid=$DAEMON
[ ! -e "$m/ragged_raw/.gather" ] || fail "-o noopen shows .gather"
[ "$(ls -A "$m/scalar_i8" | tr '\n' ' ')" = ".compact .stats 0 1 2 3 4 " ] || fail "-o noopen lists: $(ls -A "$m/scalar_i8")"
$CHECK records "$m" "$tmp/exp" 2 $STORES
$CHECK attrs "$m" "$tmp/exp" $STORES
$CHECK mmap "$m/ragged_zstd/11" "$tmp/exp/ragged_zstd/11"
$CHECK errno read "$m/damaged/zstd_u1/4" EIO  unlink "$m/scalar_i8/1" EPERM  write "$m/scalar_i8/1" EROFS
unmount_fs "$m" "$pid"
opens=$(grep -c "opcode: OPEN " "$m.log" || true)
[ "$opens" -eq 1 ] || fail "-o noopen: $opens OPEN requests reached the daemon"
ok "-o noopen"

# The loops: -o mt, libfuse's multi-threaded loop (the default above two
# CPUs); -s, the one-thread loop, which polls for the next request
# (fs/loop.c), whatever the number of CPUs; and that loop with -o spin=0,
# which never polls (libfuse's own loop). Each serves the same bytes to
# parallel readers, .gather included.
for loop in "-o mt" "-s" "-s -o spin=0"; do
    m="$tmp/loop"
    mount_fs "$m" $loop "$tmp/tree"
    pid=$DAEMON
    $CHECK records "$m" "$tmp/exp" 4 $STORES
    $CHECK gather "$m" "$tmp/exp" $STORES
    $CHECK gather_direct "$m" "$tmp/exp" $STORES
    unmount_fs "$m" "$pid"
    ok "$loop"
done

# Options that do not go together, values out of range and unknown
# options are usage errors (exit status 2), refused before anything is
# mounted.
mkdir -p "$tmp/x"
for opts in "-o noopen,rw" "-o npy,ext=.png" "-o ext=1x" "-o ext=a/b" \
    "-o spin=" "-o spin=x" "-o spin=-1" "-o spin=+5" "-o spin=100001" "-o spin=5us" \
    "-o spin=18446744073709551621" \
    "-o bogus" "--bogus"; do
    rc=0
    "$ZRFS" $opts "$tmp/tree" "$tmp/x" 2> "$tmp/err" || rc=$?
    [ "$rc" = 2 ] || fail "zrecordfs $opts exited $rc, expected 2"
    [ "$(wc -l < "$tmp/err")" = 1 ] || fail "zrecordfs $opts: not one line: $(cat "$tmp/err")"
    ! mountpoint -q "$tmp/x" || fail "zrecordfs $opts left a mount"
done
rc=0
"$ZRFS" "$tmp/tree" 2> "$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -q '^usage: zrecordfs' "$tmp/err" || fail "no MOUNTPOINT: exit $rc, $(cat "$tmp/err")"
ok "conflicting options, bad values and unknown options: exit 2 with one line"

# A mount point that is missing or not a folder: exit 1 with one line.
touch "$tmp/afile"
for mp in "$tmp/afile" "$tmp/missing"; do
    rc=0
    "$ZRFS" "$tmp/tree" "$mp" 2> "$tmp/err" || rc=$?
    [ "$rc" = 1 ] || fail "mount point $mp: exit $rc, expected 1"
    [ "$(wc -l < "$tmp/err")" = 1 ] || fail "mount point $mp: not one line: $(cat "$tmp/err")"
    ! grep -q " $mp " /proc/self/mounts || fail "zrecordfs mounted on $mp"
done
"$ZRFS" "$tmp/tree" "$tmp/afile" 2>&1 | grep -q 'afile: not a folder' || fail "no reason given for a file as mount point"
ok "a mount point that is a file or missing is refused (exit 1)"

#!/bin/bash
# fio --verify through zrecordfs. fio writes files with a checksum and the
# file offset in a header of every block (--verify=crc32c); the files
# become the records of a raw and a zstd Ragged store (zrfs-mkstores
# files); the stores are mounted read-only and read-write, and fio reads
# every record file back through the mounts in sequential and random
# order, with read(2) and with mmap (the read-write mount: random order
# with read(2)), three jobs at once on each file, checking every
# block (--verify_only). A block with wrong bytes, or the right bytes at
# the wrong offset, fails the run. fio is a test dependency
# (scripts/deps.sh installs it); without it the test is skipped (77).
. "${srcdir:-.}/tests/fs/lib.sh"
# Under AddressSanitizer the daemons need tests/reliability/asan-fuse.supp.
export ASAN_OPTIONS="suppressions=$here/asan-fuse.supp${ASAN_OPTIONS:+:$ASAN_OPTIONS}"

command -v fio > /dev/null || { echo "SKIP: fio is not installed (bash scripts/deps.sh)"; exit 77; }

# Record sizes: whole blocks, a block and a half-block tail, one block.
mkdir "$tmp/src"
i=0
for spec in 4k:4m 64k:3m 4k:12k 512:3584; do
    bs=${spec%%:*} size=${spec##*:}
    (cd "$tmp" && fio --name=mk --filename="$tmp/src/$i" --rw=write --bs="$bs" --size="$size" \
        --verify=crc32c --do_verify=0 --ioengine=psync --output=/dev/null) ||
        fail "fio could not write $tmp/src/$i"
    echo "$tmp/src/$i" >> "$tmp/list"
    i=$((i + 1))
done
nrec=$i
mkdir "$tmp/tree"
"$MKSTORES" files "$tmp/tree/raw" raw < "$tmp/list" || fail "building the raw store"
"$MKSTORES" files "$tmp/tree/zstd" zstd < "$tmp/list" || fail "building the zstd store"
cp -a "$tmp/tree" "$tmp/tree_rw"
mount_fs "$tmp/ro" "$tmp/tree"
ro_pid=$DAEMON
mount_fs "$tmp/rw" -o rw "$tmp/tree_rw"
rw_pid=$DAEMON

runs=0
i=0
for spec in 4k:4m 64k:3m 4k:12k 512:3584; do
    bs=${spec%%:*} size=${spec##*:}
    for mnt in "$tmp/ro" "$tmp/rw"; do
        for store in raw zstd; do
            hows="read:psync randread:psync randread:mmap"
            [ "$mnt" = "$tmp/rw" ] && hows="randread:psync"
            for how in $hows; do
                f="$mnt/$store/$i"
                # The per-job state files fio writes go to $tmp.
                (cd "$tmp" && fio --name=check --filename="$f" --rw="${how%%:*}" --bs="$bs" \
                    --size="$size" --ioengine="${how##*:}" --numjobs=3 --verify=crc32c \
                    --verify_only=1 --verify_fatal=1 --output="$tmp/fio.out") ||
                    { cat "$tmp/fio.out" >&2; fail "fio verify of $f (${how})"; }
                grep -q "err= 0" "$tmp/fio.out" || { cat "$tmp/fio.out" >&2; fail "fio reported an error on $f"; }
                grep -q "verify failed" "$tmp/fio.out" && { cat "$tmp/fio.out" >&2; fail "fio verify of $f failed"; }
                runs=$((runs + 1))
            done
        done
    done
    i=$((i + 1))
done
kill -0 "$ro_pid" && kill -0 "$rw_pid" || fail "a daemon died"
unmount_fs "$tmp/ro" "$ro_pid"
unmount_fs "$tmp/rw" "$rw_pid"
ok "fio verified $nrec records in $runs runs of 3 jobs (read, randread and mmap on the ro mount, randread on the rw mount; raw and zstd)"

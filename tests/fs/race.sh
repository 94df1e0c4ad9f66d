#!/bin/bash
# race.sh: a read-write mount stays alive while .delete runs under
# readers. 4 processes read record files in a loop while another deletes
# a few of them at a time (.delete), on the one-thread loop (-s) and on
# the multi-threaded loop (-o mt); after each delete what changed reads
# anew and what went is gone, and at the end every record reads as a
# model of swap-last deletion says. A mount that stops answering is
# aborted (/sys/fs/fuse/connections), so a hang fails the test instead of
# hanging it. ZRFS_RACE_SECONDS sets the time per loop (default 10).
. "$(dirname "$0")/lib.sh"

# The watchdog aborts a hung mount through the FUSE control file system.
if ! mountpoint -q /sys/fs/fuse/connections; then
    mount -t fusectl none /sys/fs/fuse/connections 2> /dev/null ||
        echo "note: /sys/fs/fuse/connections is not mounted: a hang cannot be aborted" >&2
fi

secs=${ZRFS_RACE_SECONDS:-10}
n=200000
for loop in -s "-o mt"; do
    name=${loop//[ -]/}
    "$MKSTORES" count "$tmp/$name" $n || fail "building the store"
    m="$tmp/$name.m"
    # shellcheck disable=SC2086 # $loop is one option, or an option and its value
    mount_fs "$m" -o rw $loop "$tmp/$name"
    pid=$DAEMON
    $CHECK race "$m" $n "$secs" || fail "readers and deletes at once ($loop)"
    unmount_fs "$m" "$pid"
    ok "readers and deletes for $secs s on the loop of $loop"
done

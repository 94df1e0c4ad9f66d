#!/bin/bash
# The file system under abuse: a tree of stores mounted read-only and a
# copy of it mounted read-write, and FSABUSE_PROCS
# processes (default 4) making random operations on both for FSABUSE_SECONDS (default 20):
# reads at random offsets and sizes, listings, odd names, garbage to every
# control file, .gather batches, mmap of records, compactions
# (tests/reliability/fsabuse.py). Every answer must be the right data or
# the documented errno, both daemons must stay up and exit 0 when
# unmounted, and afterwards every record of both mounts reads back
# exactly. FSABUSE_SEED picks the run (default: the time).
# doc/reliability.md gives the 10-minute command.
. "${srcdir:-.}/tests/fs/lib.sh"
# Under AddressSanitizer the daemons need tests/reliability/asan-fuse.supp.
export ASAN_OPTIONS="suppressions=$here/asan-fuse.supp${ASAN_OPTIONS:+:$ASAN_OPTIONS}"

CHECK="$PY $here/../fs/zrfs_check.py"
seconds=${FSABUSE_SECONDS:-20}
procs=${FSABUSE_PROCS:-4}
seed=${FSABUSE_SEED:-$(date +%s)}

make_tree
cp -a "$tmp/tree" "$tmp/tree_rw"
# FSABUSE_LOOP=mt mounts with -o mt, libfuse's multi-threaded loop
# whatever the number of CPUs, so that requests of the processes are served
# at the same time; the default is the loop zrecordfs picks (one thread on
# two CPUs). The documented long runs use FSABUSE_LOOP=mt, which found a
# use-after-free between a reply and the RELEASE that followed it
# (doc/reliability.md).
loop=""
[ "${FSABUSE_LOOP:-}" = mt ] && loop=",mt"
mount_fs "$tmp/ro" -o "ro$loop" "$tmp/tree"
ro_pid=$DAEMON
mount_fs "$tmp/rw" -o "rw$loop" "$tmp/tree_rw"
rw_pid=$DAEMON

$PY "$here/../reliability/fsabuse.py" "$tmp/ro" "$tmp/rw" "$tmp/exp" "$seconds" "$procs" "$seed" ||
    fail "abuse run (FSABUSE_SEED=$seed)"
kill -0 "$ro_pid" && kill -0 "$rw_pid" || fail "a daemon died"
$CHECK records "$tmp/ro" "$tmp/exp" 1 $STORES > /dev/null || fail "records of the read-only mount after the run"
$CHECK records "$tmp/rw" "$tmp/exp" 1 $STORES > /dev/null || fail "records of the read-write mount after the run"
unmount_fs "$tmp/ro" "$ro_pid"
unmount_fs "$tmp/rw" "$rw_pid"
ok "$seconds s of abuse by $procs processes (FSABUSE_SEED=$seed)"

# lib.sh: sourced by the zrecordfs integration scripts. They run from the
# top build folder (as make check runs them), mount for real, and must
# fail, not skip, when FUSE is missing: CI runs them as root with FUSE.
set -eu

top_builddir=${top_builddir:-$PWD}
here=$(cd "$(dirname "$0")" && pwd)
ZRFS="$top_builddir/fs/zrecordfs"
MKSTORES="$top_builddir/tests/fs/zrfs-mkstores"
PY=/usr/bin/python3
CHECK="$PY $here/zrfs_check.py"

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

ok() {
    echo "ok: $*"
}

[ -c /dev/fuse ] || fail "/dev/fuse is missing: FUSE is required"
command -v fusermount3 > /dev/null || fail "fusermount3 is missing (Debian package fuse3)"
[ -x "$ZRFS" ] || fail "$ZRFS is not built"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/zrfs-test.XXXXXX")
mounts=""
daemons=""

cleanup() {
    status=$?
    if [ "$status" -ne 0 ]; then
        for m in $mounts; do
            [ -s "$m.log" ] && { echo "--- end of the log of the daemon serving $m:"; tail -n 40 "$m.log"; } >&2
        done
    fi
    # /proc/mounts, not mountpoint(1): a dead daemon's mount cannot be
    # stat'ed, but must still go.
    for m in $mounts; do
        if grep -qs " $m fuse" /proc/mounts; then
            fusermount3 -u "$m" 2> /dev/null || fusermount3 -uz "$m" 2> /dev/null || true
        fi
    done
    for p in $daemons; do
        if kill -0 "$p" 2> /dev/null; then
            kill "$p" 2> /dev/null || true
        fi
    done
    rm -rf "$tmp"
    exit "$status"
}
trap cleanup EXIT

# mount_fs MNT ARGS...: run zrecordfs in the foreground, in the background
# of this script, with ARGS (options and ROOT) and MNT; wait until MNT is
# mounted. Sets DAEMON to its process id; its stderr goes to MNT.log.
mount_fs() {
    local mnt=$1
    shift
    mkdir -p "$mnt"
    "$ZRFS" -f "$@" "$mnt" 2> "$mnt.log" &
    DAEMON=$!
    daemons="$daemons $DAEMON"
    mounts="$mounts $mnt"
    local i
    for i in $(seq 200); do
        mountpoint -q "$mnt" && return 0
        if ! kill -0 "$DAEMON" 2> /dev/null; then
            wait "$DAEMON" || true
            forget_pid "$DAEMON"
            fail "zrecordfs $* exited without mounting"
        fi
        sleep 0.05
    done
    fail "zrecordfs $* did not mount within 10 s"
}

# forget_pid PID: PID has ended; cleanup must not signal it (process ids
# are reused quickly, and the number may soon name someone else's process).
forget_pid() {
    local p rest=""
    for p in $daemons; do [ "$p" = "$1" ] || rest="$rest $p"; done
    daemons=$rest
}

# unmount_fs MNT PID: unmount and check that the daemon exits with 0.
unmount_fs() {
    fusermount3 -u "$1" || fail "fusermount3 -u $1"
    local rc=0
    wait "$2" || rc=$?
    forget_pid "$2"
    [ "$rc" -eq 0 ] || fail "zrecordfs exited with $rc after unmount of $1"
}

# The tree of test stores and what each record must read as.
make_tree() {
    "$MKSTORES" tree "$tmp/tree" "$tmp/exp" || fail "building the test stores"
}

# The stores of the tree that open, and their record counts.
STORES="dense/raw_f4 dense/zstd_u2 scalar_i8 ragged_raw ragged_zstd deep/a/b/ragged_dict dense/raw_big ragged_big"

records_of() {
    echo $(($(wc -l < "$tmp/exp/$1/manifest") - 1))
}

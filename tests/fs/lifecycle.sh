#!/bin/bash
# lifecycle.sh: mounting and unmounting as a user does it. Without -f the
# mount is ready when zrecordfs returns; SIGTERM and fusermount3 -u end
# the daemon cleanly; a killed daemon leaves ENOTCONN and a remount works.
# Store locks: -o ro shares a store with library readers, -o rw refuses a
# store in use, and a store held by a writer is shown with EIO.
. "$(dirname "$0")/lib.sh"

make_tree
m="$tmp/m"
mkdir -p "$m"
mounts="$m"

# The process serving the mount at $1 (its command line names it).
daemon_of() {
    $PY - "$1" << 'PYEOF'
import os, sys
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        cmd = open("/proc/%s/cmdline" % p, "rb").read().split(b"\0")
    except OSError:
        continue
    if any(b"zrecordfs" in a for a in cmd) and sys.argv[1].encode() in cmd:
        print(p)
PYEOF
}

# Wait (at most 10 s) for process $1 (not a child) to end.
wait_gone() {
    local i
    for i in $(seq 200); do
        if ! kill -0 "$1" 2> /dev/null; then
            forget_pid "$1"
            return 0
        fi
        sleep 0.05
    done
    fail "process $1 still running"
}

for how in TERM unmount; do
    "$ZRFS" "$tmp/tree" "$m" 2> "$tmp/err" || { cat "$tmp/err" >&2; fail "zrecordfs (daemon) failed"; }
    # No waiting: the mount must already be there.
    mountpoint -q "$m" || fail "not mounted when zrecordfs returned"
    cmp -s "$m/ragged_raw/7" "$tmp/exp/ragged_raw/7" || fail "first read after mounting differs"
    d=$(daemon_of "$m")
    [ -n "$d" ] || fail "no daemon process found"
    daemons="$daemons $d"
    if [ "$how" = TERM ]; then kill -TERM "$d"; else fusermount3 -u "$m"; fi
    wait_gone "$d"
    ! mountpoint -q "$m" || fail "still mounted after $how"
    ok "daemon mode: ready on return, $how unmounts and ends the daemon"
done

# In daemon mode -o rw changes the stores: the daemon, not the process
# that opened them and went, writes through their handles.
cp -a "$tmp/tree/ragged_raw" "$tmp/rwstore"
"$ZRFS" -o rw "$tmp/rwstore" "$m" 2> "$tmp/err" || { cat "$tmp/err" >&2; fail "zrecordfs -o rw (daemon) failed"; }
d=$(daemon_of "$m")
daemons="$daemons $d"
n=$(ls "$m" | wc -l)
last=$((n - 1))
$PY - "$m" << 'PYEOF' || fail "delete and compact on a daemon-mode -o rw mount"
import os, sys
m = sys.argv[1]
fd = os.open(os.path.join(m, ".delete"), os.O_WRONLY)
os.write(fd, b"0\n")
os.close(fd)  # the delete happens here; an error would raise
fd = os.open(os.path.join(m, ".compact"), os.O_WRONLY)
os.write(fd, b"1")
os.close(fd)
PYEOF
[ "$(ls "$m" | wc -l)" = "$last" ] || fail "daemon-mode delete: $(ls "$m" | wc -l) records, expected $last"
cmp -s "$m/0" "$tmp/exp/ragged_raw/$last" || fail "daemon-mode delete: 0 is not the old last record"
grep -q '"compactions": 1' "$m/.compact" || fail "daemon-mode compact: $(cat "$m/.compact")"
fusermount3 -u "$m"
wait_gone "$d"
ok "daemon mode: -o rw deletes and compacts"

"$ZRFS" "$tmp/tree" "$m" 2> /dev/null || fail "zrecordfs (daemon) failed"
d=$(daemon_of "$m")
kill -KILL "$d"
wait_gone "$d"
$CHECK errno read "$m/ragged_raw/7" ENOTCONN
# Mounting over the dead mount would stack a second one on it: refused,
# with the way out in the message.
rc=0
"$ZRFS" "$tmp/tree" "$m" 2> "$tmp/err" || rc=$?
[ "$rc" = 1 ] && grep -q 'fusermount3 -u' "$tmp/err" || fail "mount over a dead mount: exit $rc, $(cat "$tmp/err")"
[ "$(grep -c " $m " /proc/self/mounts)" = 1 ] || fail "a mount was stacked on the dead one"
fusermount3 -u "$m" 2> /dev/null || fusermount3 -uz "$m"
mount_fs "$m" "$tmp/tree"
cmp -s "$m/ragged_raw/7" "$tmp/exp/ragged_raw/7" || fail "read after remount differs"
# A library reader shares the store with the read-only mount.
coproc HOLDER { "$MKSTORES" hold "$tmp/tree/ragged_raw" ro; }
holder=$HOLDER_PID
daemons="$daemons $holder"
read -r line <&"${HOLDER[0]}" || true
[ "$line" = held ] || fail "a library reader could not open a store mounted read-only"
eval "exec ${HOLDER[1]}>&-"
wait "$holder" || fail "the library reader failed"
forget_pid "$holder"
unmount_fs "$m" "$DAEMON"
ok "killed daemon: ENOTCONN, then a remount works; readers share -o ro"

# A writer holds ragged_raw: -o ro shows it with EIO and the rest works;
# -o rw refuses to mount.
coproc HOLDER { "$MKSTORES" hold "$tmp/tree/ragged_raw" rw; }
holder=$HOLDER_PID
daemons="$daemons $holder"
read -r line <&"${HOLDER[0]}" || true
[ "$line" = held ] || fail "the writer could not open ragged_raw"
mount_fs "$m" "$tmp/tree"
$CHECK errno read "$m/ragged_raw/0" EIO
cmp -s "$m/ragged_zstd/3" "$tmp/exp/ragged_zstd/3" || fail "other stores do not read while one is busy"
grep -q "ragged_raw cannot be opened" "$m.log" || fail "the busy store is not reported"
unmount_fs "$m" "$DAEMON"
if "$ZRFS" -o rw "$tmp/tree" "$m" 2> "$tmp/err"; then fail "-o rw mounted a store in use"; fi
grep -q "in use" "$tmp/err" || fail "-o rw on a store in use: $(cat "$tmp/err")"
! mountpoint -q "$m" || fail "-o rw on a store in use left a mount"
eval "exec ${HOLDER[1]}>&-"
wait "$holder" || fail "the writer failed"
forget_pid "$holder"
ok "a store held by a writer: EIO under -o ro, refused under -o rw"

# -o rw holds the stores alone: a library reader is refused.
mount_fs "$m" -o rw "$tmp/tree"
if echo | "$MKSTORES" hold "$tmp/tree/ragged_raw" ro > /dev/null 2>&1; then
    fail "a library reader opened a store mounted -o rw"
fi
cmp -s "$m/ragged_raw/7" "$tmp/exp/ragged_raw/7" || fail "read under -o rw differs"
unmount_fs "$m" "$DAEMON"
ok "-o rw takes the stores alone"

# Nothing to show, or nothing there: refused with a message.
mkdir -p "$tmp/nothing/sub"
for root in "$tmp/nothing" "$tmp/missing"; do
    if "$ZRFS" "$root" "$m" 2> "$tmp/err"; then fail "zrecordfs mounted $root"; fi
    [ -s "$tmp/err" ] || fail "no message for $root"
    ! mountpoint -q "$m" || fail "a mount was left for $root"
done
ok "a ROOT without stores is refused"

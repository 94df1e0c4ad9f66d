#!/bin/bash
# t_mount.sh: zrecordfs over stores in an object store (s3://bucket/prefix).
# Stores made locally (the integration tree of tests/fs, and larger Dense
# and Ragged stores, raw and zstd, made with zr import) are uploaded, one
# object per file, and mounted from s3:// beside a mount of the local
# copies: the same names, the same bytes in every record file (read in
# index order, which the read-ahead fetches in windows, and in random
# order), the same .stats and the same .gather batches. A prefix holding
# several stores shows them as folders, and a prefix that is one store
# shows its records; -o npy and -o noopen read as they do locally. A
# server gone under a mount gives EIO, not a hang. Refusals: -o rw, a
# wrong secret (the mount fails with the server's refusal), a server that
# does not answer, a prefix without stores. Every mount unmounts cleanly.
# Needs root and /dev/fuse (skipped otherwise) and run.sh's server.
if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ] || ! command -v fusermount3 > /dev/null; then
    echo "SKIP: mounting needs root, /dev/fuse and fusermount3"
    exit 77
fi
: "${LOADERX_TEST_BUCKET:?run by tests/s3/run.sh}"
. "${top_srcdir:-.}/tests/fs/lib.sh"
CHECK="$PY ${top_srcdir:-.}/tests/fs/zrfs_check.py"
ZR="$top_builddir/src/zr"
url="s3://$LOADERX_TEST_BUCKET/t_mount"

# The test tree, and four larger stores: Dense 4 KiB records and Ragged
# records of 1 to 24 KiB, each raw and zstd.
make_tree
big="$tmp/tree/big"
mkdir -p "$big" "$tmp/files"
$PY - "$tmp/dense.npy" "$tmp/files" << 'EOF'
import os, sys
import numpy as np
rng = np.random.default_rng(28)
a = rng.integers(0, 16, size=(300, 64, 64), dtype=np.uint8)
np.save(sys.argv[1], a)
for i in range(260):
    n = int(rng.integers(1024, 24 * 1024))
    with open(os.path.join(sys.argv[2], "%04d" % i), "wb") as f:
        f.write(rng.integers(0, 8, size=n, dtype=np.uint8).tobytes())
EOF
for c in raw zstd; do
    "$ZR" import "$big/dense_$c" "$tmp/dense.npy" --codec $c -q || fail "zr import dense_$c"
    "$ZR" import "$big/ragged_$c" --files "$tmp/files" --codec $c -q || fail "zr import ragged_$c"
done
BIG="big/dense_raw big/dense_zstd big/ragged_raw big/ragged_zstd"
SMALL="dense/raw_f4 dense/zstd_u2 dense/raw_big ragged_raw ragged_zstd ragged_big"

# Upload: every file of a store as prefix/<store>/<file>.
for s in $SMALL $BIG; do
    s3cmd put -q --recursive "$tmp/tree/$s/" "$url/$s/" > /dev/null || fail "uploading $s"
done
ok "uploaded $(echo $SMALL $BIG | wc -w) stores"

local_m="$tmp/local"
mount_fs "$local_m" "$tmp/tree"
local_pid=$DAEMON
m="$tmp/remote"
mount_fs "$m" "$url"
pid=$DAEMON

# The tree: folders of stores, as the local mount shows them.
[ "$(ls "$m" | tr '\n' ' ')" = "big dense ragged_big ragged_raw ragged_zstd " ] ||
    fail "the remote root lists: $(ls "$m" | tr '\n' ' ')"
[ "$(ls "$m/dense" | tr '\n' ' ')" = "raw_big raw_f4 zstd_u2 " ] ||
    fail "dense/ lists: $(ls "$m/dense" | tr '\n' ' ')"
for s in $SMALL $BIG; do
    [ "$(ls -A "$m/$s")" = "$(ls -A "$local_m/$s")" ] || fail "$s does not list as its local copy"
done
ok "ls lists the names of the local mount"

# Every record: in index order (the read-ahead's case), then against the
# expected bytes and attributes of the test tree.
for s in $SMALL $BIG; do
    n=$(ls "$local_m/$s" | wc -l)
    for i in $(seq 0 $((n - 1))); do
        cmp -s "$m/$s/$i" "$local_m/$s/$i" || fail "$s/$i differs from the local mount"
    done
    [ "$(stat -c %s "$m/$s/$((n - 1))")" = "$(stat -c %s "$local_m/$s/$((n - 1))")" ] ||
        fail "stat of $s/$((n - 1)) differs"
done
$CHECK records "$m" "$tmp/exp" 1 $SMALL
$CHECK attrs "$m" "$tmp/exp" $SMALL
ok "every record file reads as the local one"

# .stats: the same text.
for s in $SMALL $BIG; do
    cmp -s "$m/$s/.stats" "$local_m/$s/.stats" || fail "$s/.stats differs: $(cat "$m/$s/.stats")"
done
ok ".stats as the local mount's"

# .gather: the same batch for the same list, from a shell descriptor, and
# the framing checks of tests/fs.
gather() {
    exec 3<> "$1/.gather"
    echo "$2" >&3
    cat <&3
    exec 3>&-
}
for s in $SMALL $BIG; do
    n=$(ls "$local_m/$s" | wc -l)
    list="$((n - 1)) 0 $((n / 2)) 1 $((n - 1)) 2"
    gather "$m/$s" "$list" > "$tmp/g.remote" || fail ".gather of $s"
    gather "$local_m/$s" "$list" > "$tmp/g.local"
    [ -s "$tmp/g.local" ] && cmp -s "$tmp/g.remote" "$tmp/g.local" ||
        fail ".gather of $list in $s differs from the local mount's"
done
$CHECK gather "$m" "$tmp/exp" $SMALL
ok ".gather gives the local mount's batches"

# Random order, several readers at once, and a copy of a whole store.
readers=""
for s in $BIG; do
    n=$(ls "$local_m/$s" | wc -l)
    for i in $(shuf -i 0-$((n - 1)) -n 40 --random-source=<(yes)); do
        cmp -s "$m/$s/$i" "$local_m/$s/$i" || fail "$s/$i (random order) differs"
    done &
    readers="$readers $!"
done
for r in $readers; do
    wait "$r" || fail "a random-order reader failed"
done
cp -r "$m/big/ragged_zstd" "$tmp/copy"
diff -r "$tmp/copy" "$local_m/big/ragged_zstd" > /dev/null || fail "cp -r of big/ragged_zstd differs"
ok "random order, parallel readers and cp -r"

unmount_fs "$m" "$pid"
# The records read in order came in windows, not one GET each.
line=$(grep "records read in" "$m.log") || fail "no read-ahead counts in the log"
windows=$(echo "$line" | sed -E 's/.* read in ([0-9]+) windows.*/\1/')
[ "$windows" -gt 0 ] || fail "no window was fetched: $line"
ok "unmounted; $line"

# The options that change how records are served: -o npy (a header
# before each record) and -o noopen (reads without a handle).
for opt in npy noopen; do
    mount_fs "$tmp/local_$opt" -o $opt "$tmp/tree/big"
    lpid=$DAEMON
    mount_fs "$m" -o $opt "$url/big"
    pid=$DAEMON
    diff -r "$m" "$tmp/local_$opt" > /dev/null || fail "-o $opt: the remote mount differs"
    unmount_fs "$m" "$pid"
    unmount_fs "$tmp/local_$opt" "$lpid"
done
ok "-o npy and -o noopen read as their local mounts"

# A prefix holding stores one level down: one folder each.
mount_fs "$m" "$url/big/"
pid=$DAEMON
[ "$(ls "$m" | tr '\n' ' ')" = "dense_raw dense_zstd ragged_raw ragged_zstd " ] ||
    fail "$url/big lists: $(ls "$m" | tr '\n' ' ')"
unmount_fs "$m" "$pid"
# A prefix that is a store: its records at the top.
mount_fs "$m" "$url/big/ragged_zstd"
pid=$DAEMON
cmp -s "$m/7" "$local_m/big/ragged_zstd/7" || fail "record 7 of a store mounted alone differs"
[ "$(ls "$m" | wc -l)" = 260 ] || fail "a store mounted alone lists $(ls "$m" | wc -l) records"
unmount_fs "$m" "$pid"
ok "a prefix of stores shows folders, a store's prefix its records"

# The server goes away under a mount (its requests pass through a
# forwarder, which is stopped): a read fails with EIO within the S3
# client's retries, never hangs, and the mount still unmounts cleanly.
cat > "$tmp/forward.py" << 'EOF'
import socket, sys, threading
ls = socket.create_server(("127.0.0.1", 0))
print(ls.getsockname()[1], flush=True)
def pipe(a, b):
    try:
        while (d := a.recv(65536)):
            b.sendall(d)
    except OSError:
        pass
    for c in (a, b):
        try:
            c.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
while True:
    c, _ = ls.accept()
    u = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
    threading.Thread(target=pipe, args=(u, c), daemon=True).start()
EOF
$PY "$tmp/forward.py" "${AWS_ENDPOINT_URL##*:}" > "$tmp/fwd.port" &
fwd=$!
daemons="$daemons $fwd"
for i in $(seq 100); do [ -s "$tmp/fwd.port" ] && break; sleep 0.05; done
AWS_ENDPOINT_URL=http://127.0.0.1:$(cat "$tmp/fwd.port") mount_fs "$m" "$url/big/ragged_zstd"
pid=$DAEMON
cmp -s "$m/3" "$local_m/big/ragged_zstd/3" || fail "record 3 through the forwarder differs"
kill "$fwd"
wait "$fwd" 2> /dev/null || true
forget_pid "$fwd"
t0=$(date +%s)
if cat "$m/200" > /dev/null 2> "$tmp/err"; then fail "a record read with the server gone"; fi
grep -q "Input/output error" "$tmp/err" || fail "with the server gone: $(cat "$tmp/err")"
if cat "$m/.stats" > /dev/null 2> "$tmp/err"; then :; fi
[ $(($(date +%s) - t0)) -lt 60 ] || fail "reads with the server gone took $(($(date +%s) - t0)) s"
unmount_fs "$m" "$pid"
ok "the server gone: EIO after $(($(date +%s) - t0)) s, then a clean unmount"

# Refusals, each with a message and no mount left behind.
expect_refusal() {
    local what=$1 pattern=$2
    shift 2
    local rc=0
    timeout 120 "$@" 2> "$tmp/err" || rc=$?
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "$what: zrecordfs exited $rc"
    grep -qiE "$pattern" "$tmp/err" || fail "$what: unclear message: $(cat "$tmp/err")"
    ! grep -qs " $m fuse" /proc/mounts || fail "$what: a mount was left behind"
    ok "$what: $(head -n 1 "$tmp/err")"
}
expect_refusal "-o rw" "read-only" "$ZRFS" -o rw "$url" "$m"
expect_refusal "a wrong secret" "ZR_EACCESS|denied|forbidden|403" \
    env AWS_SECRET_ACCESS_KEY=not-the-secret "$ZRFS" "$url" "$m"
expect_refusal "no server" "ZR_EIO" env AWS_ENDPOINT_URL=http://127.0.0.1:9 "$ZRFS" "$url" "$m"
expect_refusal "no store" "no store found" "$ZRFS" "s3://$LOADERX_TEST_BUCKET/t_mount/none" "$m"

unmount_fs "$local_m" "$local_pid"
s3cmd del -q --recursive --force "$url/" > /dev/null || true
ok "unmounted"

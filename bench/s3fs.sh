#!/bin/bash
# s3fs.sh: record files of a store in an object store read through
# zrecordfs, against the same records stored one object per record read
# through s3fs (Debian's s3fs-fuse), from the same S3 server with the same
# readers: N records of SIZE bytes (random, incompressible), a store
# made with zr import and uploaded as its files, and N objects
# files/<i>. Each run mounts afresh (nothing cached in the kernel or
# either daemon) and READERS threads read every file once, whole:
#   seq   each reader reads a contiguous slice of the files in index order
#         (a parallel cp -r, tar, a checksum of each file)
#   rand  each reader reads its share of a random permutation
# Prints a Markdown table: seconds, MB/s and files/s of each, the ratio
# zrecordfs / s3fs in files/s, and what zrecordfs's read-ahead did (the
# records its windows brought and those read alone).
#
# usage: bench/s3fs.sh [-n N] [-s SIZE] [-p READERS] [-r REPS] [-c CODEC] [-k KIND]
#   defaults: N 2000, SIZE 102400 (an ImageNet JPEG's mean), READERS 8,
#   REPS 3, CODEC raw (zstd: the store compressed, which the random bytes
#   are not, so a record costs its table entry's GET as well), KIND dense
#   (ragged: a store of files, as `zr import --files` makes of a folder of
#   JPEGs, whose record sizes are in its record table)
#
# The server: the AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
# and AWS_REGION of a running one (`. $LOADERX_S3_DIR/env` after
# scripts/s3server.sh start), and the bucket LOADERX_BENCH_BUCKET
# (default loaderx-bench, made if missing); without AWS_ENDPOINT_URL a
# server of its own is started (scripts/s3server.sh, root) and stopped.
# Needs root (FUSE mounts), s3fs, fusermount, /usr/bin/python3 with NumPy
# and boto3.
set -euo pipefail

n=2000 size=102400 readers=8 reps=3 codec=raw kind=dense
while getopts n:s:p:r:c:k: o; do
    case $o in
    n) n=$OPTARG ;;
    s) size=$OPTARG ;;
    p) readers=$OPTARG ;;
    r) reps=$OPTARG ;;
    c) codec=$OPTARG ;;
    k) kind=$OPTARG ;;
    *) sed -n 's/^# \{0,1\}//;/^usage/,/^$/p' "$0" >&2; exit 2 ;;
    esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
ZRFS=$here/fs/zrecordfs
ZR=$here/src/zr
PY=/usr/bin/python3
[ -x "$ZRFS" ] && [ -x "$ZR" ] || { echo "s3fs.sh: build zr and zrecordfs first" >&2; exit 1; }
command -v s3fs > /dev/null || { echo "s3fs.sh: s3fs is missing (Debian package s3fs)" >&2; exit 1; }

tmp=$(mktemp -d /var/tmp/s3fs-bench.XXXXXX)
own_server=""
daemon=""
mnt=$tmp/mnt
mkdir -p "$mnt"
uploaded=""
# Remove the bench's objects from a server that outlives it.
remove_objects() {
    $PY - << 'EOF'
import os
import boto3, botocore
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                  config=botocore.config.Config(s3={"addressing_style": "path"}))
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=os.environ["bucket"],
                                                         Prefix=os.environ["prefix"] + "/"):
    keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
    if keys:
        s3.delete_objects(Bucket=os.environ["bucket"], Delete={"Objects": keys})
EOF
}
cleanup() {
    if grep -qs " $mnt fuse" /proc/mounts; then
        fusermount3 -u "$mnt" 2> /dev/null || fusermount -u "$mnt" 2> /dev/null || fusermount -uz "$mnt" || true
    fi
    [ -z "$daemon" ] || wait "$daemon" 2> /dev/null || true
    if [ -n "$uploaded" ] && [ -z "$own_server" ]; then remove_objects || true; fi
    [ -z "$own_server" ] || LOADERX_S3_DIR=$own_server "$here/scripts/s3server.sh" stop > /dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

if [ -z "${AWS_ENDPOINT_URL:-}" ]; then
    own_server=$tmp/server
    LOADERX_S3_DIR=$own_server "$here/scripts/s3server.sh" start > /dev/null
    . "$own_server/env"
fi
bucket=${LOADERX_BENCH_BUCKET:-loaderx-bench}
prefix=s3fs-bench-$$
export bucket prefix

# The records, the store, and both uploads (boto3, 16 PUTs in flight).
$PY - "$tmp/data.npy" "$n" "$size" "$kind" "$tmp/files" << 'EOF'
import os, sys
import numpy as np
n, size = int(sys.argv[2]), int(sys.argv[3])
a = np.random.default_rng(28).integers(0, 256, size=(n, size), dtype=np.uint8)
np.save(sys.argv[1], a)
if sys.argv[4] == "ragged":
    os.mkdir(sys.argv[5])
    for i in range(n):
        with open(os.path.join(sys.argv[5], "%08d" % i), "wb") as f:
            f.write(a[i].tobytes())
EOF
case $kind in
dense) "$ZR" import "$tmp/store" "$tmp/data.npy" --codec "$codec" -q ;;
ragged) "$ZR" import "$tmp/store" --files "$tmp/files" --codec "$codec" -q ;;
*) echo "s3fs.sh: -k dense or -k ragged" >&2; exit 2 ;;
esac
uploaded=1
$PY - "$tmp/data.npy" "$tmp/store" << 'EOF'
import os, sys
from concurrent.futures import ThreadPoolExecutor
import boto3, botocore
import numpy as np
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                  config=botocore.config.Config(s3={"addressing_style": "path"},
                                                max_pool_connections=32))
bucket, prefix = os.environ["bucket"], os.environ["prefix"]
try:
    s3.create_bucket(Bucket=bucket)
except s3.exceptions.BucketAlreadyOwnedByYou:
    pass
a = np.load(sys.argv[1], mmap_mode="r")
store = sys.argv[2]
names = sorted(os.listdir(store), key=lambda f: f == "meta.zr")  # the header last
with ThreadPoolExecutor(16) as ex:
    list(ex.map(lambda i: s3.put_object(Bucket=bucket, Key=f"{prefix}/files/{i}",
                                        Body=a[i].tobytes()), range(len(a))))
    list(ex.map(lambda f: s3.upload_file(os.path.join(store, f), bucket,
                                         f"{prefix}/store/{f}"), names[:-1]))
s3.upload_file(os.path.join(store, names[-1]), bucket, f"{prefix}/store/{names[-1]}")
EOF

printf '%s:%s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" > "$tmp/passwd"
chmod 600 "$tmp/passwd"

wait_mounted() {
    local i
    for i in $(seq 300); do
        grep -qs " $mnt fuse" /proc/mounts && return 0
        kill -0 "$daemon" 2> /dev/null || { echo "s3fs.sh: $1 exited: $(tail -n 3 "$tmp/daemon.log")" >&2; exit 1; }
        sleep 0.1
    done
    echo "s3fs.sh: $1 did not mount" >&2
    exit 1
}

mount_zrfs() {
    "$ZRFS" -f "s3://$bucket/$prefix/store" "$mnt" 2> "$tmp/daemon.log" &
    daemon=$!
    wait_mounted zrecordfs
}

mount_s3fs() {
    s3fs "$bucket:/$prefix/files" "$mnt" -f -o url="$AWS_ENDPOINT_URL" -o use_path_request_style \
        -o passwd_file="$tmp/passwd" -o endpoint="${AWS_REGION:-us-east-1}" > "$tmp/daemon.log" 2>&1 &
    daemon=$!
    wait_mounted s3fs
}

unmount() {
    fusermount3 -u "$mnt" 2> /dev/null || fusermount -u "$mnt"
    wait "$daemon" || true
    daemon=""
}

# READERS threads read files 0..n-1 of the mount, whole; prints seconds
# and bytes.
read_files() {
    $PY - "$mnt" "$n" "$readers" "$1" << 'EOF'
import os, random, sys, threading, time
mnt, n, p, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
order = list(range(n))
if mode == "rand":
    random.Random(28).shuffle(order)
shares = [order[n * t // p:n * (t + 1) // p] for t in range(p)]
total = [0] * p
def reader(t):
    buf = bytearray(1 << 20)
    for i in shares[t]:
        fd = os.open(f"{mnt}/{i}", os.O_RDONLY)
        while (k := os.readv(fd, [buf])) > 0:
            total[t] += k
        os.close(fd)
threads = [threading.Thread(target=reader, args=(t,)) for t in range(p)]
t0 = time.monotonic()
for th in threads:
    th.start()
for th in threads:
    th.join()
print(f"{time.monotonic() - t0:.3f} {sum(total)}")
EOF
}

want=$((n * size))
declare -A best ahead
for rep in $(seq "$reps"); do
    for mode in seq rand; do
        for fs in zrecordfs s3fs; do
            if [ $fs = zrecordfs ]; then mount_zrfs; else mount_s3fs; fi
            read -r secs bytes < <(read_files $mode)
            unmount
            [ "$bytes" = "$want" ] || { echo "s3fs.sh: $fs read $bytes bytes, not $want" >&2; exit 1; }
            if [ $fs = zrecordfs ]; then
                ahead[$mode]=$(grep -o '[0-9]* records read in [0-9]* windows, [0-9]* alone' "$tmp/daemon.log" || true)
            fi
            k=$fs.$mode
            if [ -z "${best[$k]:-}" ] || awk "BEGIN{exit !($secs < ${best[$k]})}"; then best[$k]=$secs; fi
            echo "rep $rep $mode $fs: $secs s" >&2
        done
    done
done

echo "N=$n records of $size bytes, a $kind $codec store, $readers readers, best of $reps fresh mounts, $(nproc) CPUs"
echo
echo "| order | zrecordfs s | zrecordfs MB/s | zrecordfs files/s | s3fs s | s3fs MB/s | s3fs files/s | ratio | zrecordfs read-ahead |"
echo "|---|---|---|---|---|---|---|---|---|"
for mode in seq rand; do
    z=${best[zrecordfs.$mode]} s=${best[s3fs.$mode]}
    awk -v m=$mode -v z=$z -v s=$s -v b=$want -v n=$n -v a="${ahead[$mode]:-}" 'BEGIN {
        printf "| %s | %.2f | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %s |\n",
            m, z, b / z / 1e6, n / z, s, b / s / 1e6, n / s, s / z, a }'
done

#!/bin/bash
# s3ranges.sh: ranged GETs per second of the S3 client (bench/s3ranges)
# and of `curl --parallel` (libcurl too, signed the same way) on the same
# object of the server named by AWS_ENDPOINT_URL and the AWS_* keys.
#   bench/s3ranges.sh BUCKET [LEN [COUNT [INFLIGHT]]]
# Run from the top build folder after `make bench/s3ranges`.
set -eu
bucket=$1 len=${2:-4096} count=${3:-2000} inflight=${4:-32}
size=$((64 << 20))
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c "$size" /dev/urandom > "$tmp/obj"
/usr/bin/python3 "$here/../tests/s3/peer.py" mkbucket "$bucket"
/usr/bin/python3 "$here/../tests/s3/peer.py" put "$bucket" bench/s3ranges.bin "$tmp/obj"
echo "== loaderx S3 client"
./bench/s3ranges "s3://$bucket/bench" s3ranges.bin "$size" "$len" "$count" "$inflight" 3
echo "== curl --parallel --parallel-max $inflight"
# The same offsets are not needed: any LEN-aligned ones cost the same.
# The keys go in curl's config file, not on its command line.
printf 'user = "%s:%s"\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" > "$tmp/urls"
awk -v n="$count" -v len="$len" -v size="$size" -v ep="$AWS_ENDPOINT_URL" -v b="$bucket" 'BEGIN {
    srand(1)
    for (i = 0; i < n; i++) {
        off = int(rand() * (size / len)) * len
        printf "url = \"%s/%s/bench/s3ranges.bin\"\nrange = %d-%d\noutput = /dev/null\n", ep, b, off, off + len - 1
    }
}' >> "$tmp/urls"
for round in 1 2 3; do
    t0=$(date +%s.%N)
    curl -s --no-progress-meter --fail --parallel --parallel-max "$inflight" --aws-sigv4 "aws:amz:${AWS_REGION:-us-east-1}:s3" \
        -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
        -K "$tmp/urls"
    t1=$(date +%s.%N)
    echo "round $round: $count x $len B, parallel $inflight: $(echo "$t1 - $t0" | bc) s," \
        "$(echo "$count / ($t1 - $t0)" | bc) req/s"
done

#!/bin/bash
# s3push.sh: zr push and zr pull against s3cmd put/get --recursive of the
# same files on the same server, the reference for their throughput.
#
#   bench/s3push.sh BUCKET [MIB [RUNS]]
#
# Needs a running server's environment (`. $LOADERX_S3_DIR/env` after
# scripts/s3server.sh start: AWS_* and S3CMD_CONFIG) and a bucket.
# Makes a raw Dense store of MIB MiB (default 200) of random bytes, then
# RUNS times (default 3), interleaved so that a busy machine slows both
# alike: zr push, s3cmd put --recursive, zr pull, s3cmd get --recursive,
# each into a fresh prefix or folder. Prints one line per transfer and
# the medians, in MiB/s, and the ratios zr / s3cmd.
#
# radosgw frees deleted objects only later (its garbage collection), so
# each run keeps about 2 x MIB MiB of the server's memstore (4 GiB by
# default) for a while: a full one makes requests hang (`ceph -s` says
# "full osd"). Start a fresh server for long series.
set -euo pipefail

bucket=${1:?usage: bench/s3push.sh BUCKET [MIB [RUNS]]}
mib=${2:-200}
runs=${3:-3}
zr=${ZR:-src/zr}
: "${AWS_ENDPOINT_URL:?source the env of the server first}" "${S3CMD_CONFIG:?}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/s3push-bench.XXXXXX")
trap 'rm -rf "$tmp"; s3cmd del -q --recursive "s3://$bucket/s3push-bench/" >/dev/null 2>&1 || true' EXIT
/usr/bin/python3 - "$tmp/data.npy" "$mib" <<'PYEOF'
import sys
import numpy as np
rows = int(sys.argv[2]) * 256
np.save(sys.argv[1], np.random.default_rng(0).integers(0, 256, (rows, 4096), dtype=np.uint8))
PYEOF
"$zr" import "$tmp/store" "$tmp/data.npy" --codec raw -q
rm "$tmp/data.npy"
bytes=$(stat -c %s "$tmp"/store/* | awk '{ s += $1 } END { print s }')
echo "store: $(ls "$tmp/store" | wc -l) files, $bytes bytes"

now() { date +%s%N; }
declare -A rates
# timed NAME CMD...: run CMD, print and keep NAME's MiB/s.
timed() {
    local name=$1 t0 t1 rate
    shift
    t0=$(now)
    "$@" >/dev/null
    t1=$(now)
    rate=$(awk -v b="$bytes" -v ns=$((t1 - t0)) 'BEGIN { printf "%.1f", b / 1048576 / (ns / 1e9) }')
    printf '%-10s run %d  %6.2f s  %7s MiB/s\n' "$name" "$r" "$(awk -v ns=$((t1 - t0)) 'BEGIN { print ns / 1e9 }')" "$rate"
    rates[$name]="${rates[$name]:-} $rate"
}

base=s3://$bucket/s3push-bench
for r in $(seq 1 "$runs"); do
    timed zr-push "$zr" push -q "$tmp/store" "$base/zr-$r"
    timed s3cmd-put s3cmd put -q --no-progress --recursive "$tmp/store/" "$base/s3cmd-$r/"
    timed zr-pull "$zr" pull -q "$base/zr-$r" "$tmp/zr-$r"
    mkdir "$tmp/s3cmd-$r"
    timed s3cmd-get s3cmd get -q --no-progress --recursive "$base/s3cmd-$r/" "$tmp/s3cmd-$r/"
    rm -rf "$tmp/zr-$r" "$tmp/s3cmd-$r"
    s3cmd del -q --recursive "$base/" >/dev/null
done

take_median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
m=()
echo "medians of $runs runs (MiB/s):"
for n in zr-push s3cmd-put zr-pull s3cmd-get; do
    m[${#m[@]}]=$(echo "${rates[$n]}" | take_median)
    printf '  %-10s %s\n' "$n" "${m[${#m[@]} - 1]}"
done
awk -v a="${m[0]}" -v b="${m[1]}" -v c="${m[2]}" -v d="${m[3]}" \
    'BEGIN { printf "ratio push/put %.2f, pull/get %.2f\n", a / b, c / d }'

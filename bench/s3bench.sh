#!/usr/bin/env bash
# s3bench.sh: stores in an object store against the server's own limit, in
# one run on one server (scripts/s3server.sh: Ceph's radosgw on this
# machine). Everything is a ratio to what the same server gives in the
# same run, since radosgw on two shared cores bounds every figure.
#
#   bench/s3bench.sh [--quick] [--out doc/benchmarks.md]   (root; make bench first)
#
# Without --out the section is printed; with it, the page's section
# "Remote stores (S3)" is replaced (or added at its end).
#
# For Dense raw stores of 2 KiB and of 147 KiB records:
#   limit      ranged GETs of one record each at random records of the
#              store's chunk object, `curl --parallel` at the same number
#              of connections as the library (LOADERX_S3_CONNECTIONS, 32)
#   objects    the layout of a bucket without a store, one object per
#              record, fetched with one GET each at that concurrency
#   remote     the library's gather of random batches (cyclic sampler), no
#              cache; and (2 KiB) the quasi-random sampler
#   cached     the same gathers with LOADERX_CACHE_DIR, after one pass
#              filled the cache, against the same store read locally (in
#              the page cache)
# Each figure is the median of 3 runs.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
quick=0
out=-
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=1 ;;
    --out) out=$2; shift ;;
    *) echo "s3bench.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
heading='## Remote stores (S3)'
start=$(date +%s)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

[ -x bench/s3gather ] || { echo "make bench/s3gather first" >&2; exit 2; }
PY=/usr/bin/python3
CONNS=${LOADERX_S3_CONNECTIONS:-32}
export LOADERX_S3_CONNECTIONS=$CONNS
work=$(mktemp -d /var/tmp/loaderx-s3bench.XXXXXX)
export LOADERX_S3_DIR=$work/server
cleanup() {
    scripts/s3server.sh stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
scripts/s3server.sh start >/dev/null
. "$LOADERX_S3_DIR/env"
BUCKET=bench
curl -sS -o /dev/null -X PUT --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$AWS_ENDPOINT_URL/$BUCKET"

sign=(--aws-sigv4 "aws:amz:$AWS_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"
      -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD')

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# Seconds a curl config of transfers takes at $CONNS connections.
curl_secs() {
    local cfg=$1 t0 t1
    t0=$(date +%s.%N)
    curl -sS --no-progress-meter --parallel --parallel-max "$CONNS" "${sign[@]}" -K "$cfg" \
        >/dev/null 2>>"$work/curl.err"
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}

# A store of n random records of w bytes, locally and under prefix name.
make_store() {
    local name=$1 n=$2 w=$3
    "$PY" -c "
import numpy as np, sys
a = np.random.default_rng(7).integers(0, 256, size=($n, $w), dtype=np.uint8)
np.save(sys.argv[1], a)" "$work/$name.npy"
    src/zr import "$work/$name" "$work/$name.npy" --codec raw -q
    rm -f "$work/$name.npy"
    "$PY" - "$work/$name" "$BUCKET" "$name" <<'EOF'
import boto3, os, sys
folder, bucket, prefix = sys.argv[1:4]
c = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
for f in sorted(os.listdir(folder)):
    if f != "meta.zr":
        c.upload_file(os.path.join(folder, f), bucket, f"{prefix}/{f}")
c.upload_file(os.path.join(folder, "meta.zr"), bucket, f"{prefix}/meta.zr")
EOF
}

# Records per second of k ranged GETs of w bytes at random records of the
# chunk object of store name (n records).
limit_rate() {
    local name=$1 n=$2 w=$3 k=$4 cfg=$work/limit.cfg
    "$PY" -c "
import random, sys
r = random.Random(int(sys.argv[5]))
n, w, k = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for _ in range(k):
    i = r.randrange(n)
    print(f'url = \"{sys.argv[1]}\"\nrange = {i * w}-{i * w + w - 1}\noutput = /dev/null')
" "$AWS_ENDPOINT_URL/$BUCKET/$name/0.chunk" "$n" "$w" "$k" "$RANDOM" > "$cfg"
    echo "$k / $(curl_secs "$cfg")" | bc -l
}

# One object per record: upload k records of store name as objects, then
# records per second of GETs of them.
objects_rate() {
    local name=$1 w=$2 k=$3 dir=$work/objs-$1 cfg=$work/objs.cfg
    mkdir -p "$dir"
    "$PY" -c "
import sys
w, k = int(sys.argv[2]), int(sys.argv[3])
with open(sys.argv[1] + '/0.chunk', 'rb') as f:
    for i in range(k):
        open(f'{sys.argv[4]}/{i}', 'wb').write(f.read(w))
" "$work/$name" "$w" "$k" "$dir"
    for i in $(seq 0 $((k - 1))); do
        printf 'url = "%s"\nupload-file = "%s"\noutput = /dev/null\n' \
            "$AWS_ENDPOINT_URL/$BUCKET/objs-$name/$i" "$dir/$i"
    done > "$cfg"
    curl_secs "$cfg" >/dev/null
    for i in $(seq 0 $((k - 1))); do
        printf 'url = "%s"\noutput = /dev/null\n' "$AWS_ENDPOINT_URL/$BUCKET/objs-$name/$(( (i * 7919) % k ))"
    done > "$cfg"
    echo "$k / $(curl_secs "$cfg")" | bc -l
}

# Records per second of bench/s3gather on a store.
gather_rate() {
    bench/s3gather "$@" | awk '{ print $3 }'
}

row() { printf '| %s | %s | %s | %s |\n' "$@"; }
ratio() { echo "scale=2; $1 / $2" | bc -l; }

if [ "$quick" = 1 ]; then runs=1; else runs=3; fi
rep() { local k; for k in $(seq "$runs"); do "$@"; done | median; }

table() {
echo "| workload | measure | records/s | ratio |"
echo "|---|---|---:|---:|"
for spec in "s2k 100000 2048 256 3072 2000" "s147k 1500 150528 32 640 300"; do
    read -r name n w batch recs objs <<<"$spec"
    make_store "$name" "$n" "$w"
    url="s3://$BUCKET/$name"
    lim=$(rep limit_rate "$name" "$n" "$w" "$recs")
    obj=$(rep objects_rate "$name" "$w" "$objs")
    rem=$(rep gather_rate "$url" cyclic "$batch" "$recs")
    mib() { echo "scale=1; $1 * $w / 1048576" | bc -l; }
    row "$name" "server limit: ranged GETs, $CONNS connections" "$(printf %.0f "$lim") ($(mib "$lim") MiB/s)" 1.00
    row "$name" "one object per record, one GET each" "$(printf %.0f "$obj")" "$(ratio "$obj" "$lim")"
    row "$name" "remote gather, random batches of $batch, no cache" "$(printf %.0f "$rem") ($(mib "$rem") MiB/s)" "$(ratio "$rem" "$lim")"
    if [ "$name" = s2k ]; then
        qr=$(rep gather_rate "$url" quasi "$batch" $((recs * 8)))
        row "$name" "remote gather, quasi-random batches, no cache" "$(printf %.0f "$qr")" "$(ratio "$qr" "$rem") of random"
    fi
    export LOADERX_CACHE_DIR=$work/cache-$name
    bench/s3gather "$url" sequential 1024 "$n" >/dev/null
    cached=$(rep gather_rate "$url" cyclic "$batch" $((recs * 20)))
    unset LOADERX_CACHE_DIR
    bench/s3gather "$work/$name" sequential 1024 "$n" >/dev/null
    local_rate=$(rep gather_rate "$work/$name" cyclic "$batch" $((recs * 20)))
    row "$name" "local store, in the page cache" "$(printf %.0f "$local_rate")" 1.00
    row "$name" "remote gather, warm local cache" "$(printf %.0f "$cached")" "$(ratio "$cached" "$local_rate") of local"
done
}

table >"$work/table.md"
# zr push and pull against s3cmd, on the same server (bench/s3push.sh).
s3cmd mb -q "s3://$BUCKET-push" >/dev/null 2>&1 || true
bench/s3push.sh "$BUCKET-push" "$([ "$quick" = 1 ] && echo 50 || echo 100)" "$runs" >"$work/push.txt" 2>&1 ||
    { cat "$work/push.txt" >&2; exit 1; }
push_ratios=$(tail -n 1 "$work/push.txt")
push_medians=$(grep -E '^  (zr-push|s3cmd-put|zr-pull|s3cmd-get) ' "$work/push.txt" |
    awk '{ printf "%s%s %s MiB/s", (NR > 1 ? ", " : ""), $1, $2 }')
{
    printf '%s\n\n' "$heading"
    printf 'Command: `bench/s3bench.sh%s`, at commit %s on %s; %d s.\n\n' \
        "$([ "$quick" = 1 ] && echo ' --quick')" "$commit" "$(date -u +%Y-%m-%d)" $(( $(date +%s) - start ))
    cat <<'EOF'
Stores in an object store (doc/remote.md) against what the same server
gives in the same run: a throw-away radosgw on this machine
(`scripts/s3server.sh`, Ceph's S3 gateway with its objects in RAM),
which shares the two cores with the client and bounds every figure, so
each row is a ratio to a measure of that server. Two Dense raw stores of
random bytes, uploaded with boto3: 100,000 records of 2 KiB and 1,500 of
147 KiB. *Server limit*: ranged GETs of one record each at random
records of the store's chunk object, `curl --parallel` at the library's
number of connections (32). *One object per record*: what a bucket
without a store holds, one GET per record at the same concurrency.
*Remote gather*: `bench/s3gather`, batches from the cyclic sampler (and,
for 2 KiB records, the quasi-random one, doc/sampler.md), gathered one
after another with no cache. *Warm local cache*: the same gathers with
`LOADERX_CACHE_DIR` after one sequential pass filled it, against the
same store read locally from the page cache. Medians of three runs.

EOF
    cat "$work/table.md"
    echo
    printf '`zr push` and `zr pull` of a raw store of %s MiB against `s3cmd put --recursive` and\n' \
        "$([ "$quick" = 1 ] && echo 50 || echo 100)"
    printf '`get --recursive` of the same files, same server (`bench/s3push.sh`, medians): %s; %s.\n\n' \
        "$push_medians" "$push_ratios"
    echo 'zrecordfs over a remote store against s3fs reading one object per record:'
    echo '[remote-fs-benchmarks.md](remote-fs-benchmarks.md) (`bench/s3fs.sh`).'
    echo
} >"$work/section.md"
if [ "$out" = - ]; then
    cat "$work/section.md"
else
    if [ -f "$out" ]; then
        awk -v h="$heading" '$0 == h { on = 1; next } on && /^## / { on = 0 } !on' "$out" >"$work/page.md"
    else
        : >"$work/page.md"
    fi
    cat "$work/section.md" >>"$work/page.md"
    cp "$work/page.md" "$out"
    echo "s3bench.sh: wrote $out" >&2
fi

#!/bin/bash
# Which FUSE loop should zrecordfs run on a small machine? One reader of
# record files through a zrecordfs mount on the single-threaded loop (-s,
# which polls for the next request before it sleeps), on that loop without
# polling (-s -o spin=0) and on libfuse's multi-threaded loop (-o mt), with
# 0, 1 and 2 CPU-bound processes beside it (a training job keeps cores
# busy; an idle virtual CPU halts, and waking it costs a trip through the
# host). Prints tables of medians over the repetitions: files/s for a
# first read (fresh mount, backing pages dropped), a warm read and a warm
# read by two readers; and the CPU time the busy processes got meanwhile,
# what a polling loop could take from a training job.
#
# usage: bench/loopbench.sh [--reps R]
# Needs: make bench, fuse3, python3-numpy. Run from the build tree.
set -euo pipefail

reps=3
while [ $# -gt 0 ]; do
    case "$1" in
    --reps) reps="$2"; shift ;;
    *) echo "usage: bench/loopbench.sh [--reps R]" >&2; exit 2 ;;
    esac
    shift
done
here=$(cd "$(dirname "$0")/.." && pwd)
fsbench="$here/bench/fsbench"
zrfs="$here/fs/zrecordfs"
zr="$here/src/zr"
for tool in "$fsbench" "$zrfs" "$zr"; do
    [ -x "$tool" ] || { echo "loopbench: $tool missing: run make bench" >&2; exit 1; }
done

work=$(mktemp -d /var/tmp/loopbench.XXXXXX)
mnt="$work/mnt"
mkdir "$mnt"
spinners=""
stop_spinners() {
    [ -n "$spinners" ] && kill $spinners 2>/dev/null && wait $spinners 2>/dev/null
    spinners=""
}
cleanup() {
    stop_spinners || true
    fusermount3 -u "$mnt" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The records of fsbench.sh at a smaller count: 300 smooth uint8 images of
# 3x224x224 (147 KiB) and 6,000 int32[512] token blocks (2 KiB).
/usr/bin/python3 - "$here/bench" "$work" <<'EOF'
import os, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from fsdata import records
images, tokens = records(300, 6000)
np.save(os.path.join(sys.argv[2], "vision.npy"), images)
np.save(os.path.join(sys.argv[2], "token.npy"), tokens)
EOF
for w in vision token; do
    for c in raw zstd; do
        "$zr" import "$work/$w.$c" "$work/$w.npy" --codec "$c" -q
    done
done

# rate ARGS...: files/s of one fsbench read.
rate() { "$fsbench" read "$@" | awk '{ print $8 }'; }
# busy_ticks: CPU time (user + system, clock ticks) the busy processes have had.
busy_ticks() {
    local t=0 p
    for p in $spinners; do
        t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
    done
    echo "$t"
}
results="$work/results"
: >"$results"
for load in 0 1 2; do
    for _ in $(seq "$load"); do
        (while :; do :; done) &
        spinners="$spinners $!"
    done
    sleep 1
    for r in $(seq "$reps"); do
        for s in vision.raw vision.zstd token.raw token.zstd; do
            n=300
            [ "${s%%.*}" = token ] && n=6000
            for loop in -s spin0 mt; do
                case "$loop" in
                -s) opt=(-s) ;;
                spin0) opt=(-s -o spin=0) ;;
                mt) opt=(-o mt) ;;
                esac
                echo "loopbench: load $load, rep $r, $s, $loop" >&2
                "$fsbench" drop "$work/$s"
                "$zrfs" "${opt[@]}" "$work/$s" "$mnt"
                c0=$(busy_ticks)
                t0=$(date +%s.%N)
                f=$(rate "$mnt" "$n")
                w=$(rate "$mnt" "$n")
                w2=$(rate -j 2 "$mnt" "$n")
                share=$(awk -v c0="$c0" -v c1="$(busy_ticks)" -v t0="$t0" -v t1="$(date +%s.%N)" \
                    -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.3f", (c1 - c0) / hz / (t1 - t0) }')
                fusermount3 -u "$mnt"
                for _ in $(seq 50); do
                    pgrep -f -- " $mnt\$" >/dev/null || break
                    sleep 0.1
                done
                echo "$load $s $loop $f $w $w2 $share" >>"$results"
            done
        done
    done
    stop_spinners || true
done

echo "# The FUSE loop of zrecordfs beside busy processes"
echo
echo "- Command: \`make bench && bench/loopbench.sh --reps $reps\`, $(date -u +%Y-%m-%d)"
echo "- Machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r)"
echo "- One reader of 300 images (uint8 3x224x224, 147 KiB) or 6,000 token blocks"
echo "  (int32[512], 2 KiB), raw and zstd stores, with 0, 1 or 2 CPU-bound"
echo "  processes (busy loops at the same priority) running beside it."
echo "- Files/s, medians of $reps runs. *first*: fresh mount, the store's pages"
echo "  dropped; *warm*: the same again; *warm, 2 readers*: two readers, each"
echo "  taking every other record. Loops: \`-s\`, the single-threaded loop as it"
echo "  runs by default on 2 CPUs (polling for the next request before it sleeps);"
echo "  \`spin=0\`, that loop with \`-s -o spin=0\` (never polling); \`-o mt\`,"
echo "  libfuse's multi-threaded loop. Ratios > 1: \`-s\` wins."
echo "- *busy CPU*: CPU-seconds per second the busy processes got while the"
echo "  three reads of one mount ran (at most their number, 1 or 2), medians"
echo "  over the stores and runs."
echo
/usr/bin/python3 - "$results" <<'EOF'
import statistics, sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    load, s, loop, *v = line.split()
    runs[(int(load), s, loop)].append([float(x) for x in v])
def med(k, i):
    return statistics.median(v[i] for v in runs[k])
print("| busy processes | store | metric | -s | spin=0 | -o mt | -s / spin=0 | -s / -o mt |")
print("|---:|---|---|---:|---:|---:|---:|---:|")
for load, s, _ in sorted(k for k in runs if k[2] == "-s"):
    for i, m in enumerate(("first", "warm", "warm, 2 readers")):
        a, b, c = (med((load, s, lp), i) for lp in ("-s", "spin0", "mt"))
        print(f"| {load} | {s} | {m} | {a:,.0f} | {b:,.0f} | {c:,.0f} | {a / b:.2f} | {a / c:.2f} |")
print()
print("| busy processes | busy CPU, -s | spin=0 | -o mt |")
print("|---:|---:|---:|---:|")
for load in sorted({k[0] for k in runs if k[0] > 0}):
    cells = [statistics.median(v[3] for k, vs in runs.items() if k[0] == load and k[2] == lp
                               for v in vs) for lp in ("-s", "spin0", "mt")]
    print(f"| {load} | " + " | ".join(f"{x:.2f}" for x in cells) + " |")
EOF

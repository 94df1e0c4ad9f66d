#!/bin/bash
# Which FUSE loop should zrecordfs run on a small machine? One reader of
# record files through a zrecordfs mount on the single-threaded loop (-s)
# and on libfuse's multi-threaded loop (-o mt), with 0, 1 and 2 CPU-bound
# processes beside it (a training job keeps cores busy; an idle virtual CPU
# halts, and waking it costs a trip through the host). Prints one table of
# medians over the repetitions: files/s for a first read (fresh mount,
# backing pages dropped), a warm read and a warm read by two readers.
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
            for loop in -s mt; do
                opt=(-s)
                [ "$loop" = mt ] && opt=(-o mt)
                echo "loopbench: load $load, rep $r, $s, $loop" >&2
                "$fsbench" drop "$work/$s"
                "$zrfs" "${opt[@]}" "$work/$s" "$mnt"
                f=$(rate "$mnt" "$n")
                w=$(rate "$mnt" "$n")
                w2=$(rate -j 2 "$mnt" "$n")
                fusermount3 -u "$mnt"
                for _ in $(seq 50); do
                    pgrep -f -- " $mnt\$" >/dev/null || break
                    sleep 0.1
                done
                echo "$load $s $loop $f $w $w2" >>"$results"
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
echo "  taking every other record. Ratio: \`-s\` / \`-o mt\` (> 1: the single loop wins)."
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
print("| busy processes | store | metric | -s | -o mt | ratio |")
print("|---:|---|---|---:|---:|---:|")
for load, s, _ in sorted(k for k in runs if k[2] == "-s"):
    for i, m in enumerate(("first", "warm", "warm, 2 readers")):
        a, b = med((load, s, "-s"), i), med((load, s, "mt"), i)
        print(f"| {load} | {s} | {m} | {a:,.0f} | {b:,.0f} | {a / b:.2f} |")
EOF

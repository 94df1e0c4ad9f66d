#!/bin/bash
# fileab.sh: cold record files of plain files on the local disk against
# zrecordfs, read interleaved file by file (bench/fileab.c) so that both
# meet the same load on a shared disk; for comparing zrecordfs builds with
# each other and with ext4 where bench/coldbench's rows, read one after
# the other, move too much between runs. Each pass mounts every ZRECORDFS
# given afresh on the workload's store (-o npy), reads FILES random files
# of the plain folder and of each mount, and unmounts: a daemon that lives
# on keeps the pages it mapped, which dropping the page cache does not
# drop. The folders are those bench/coldbench --stores leaves. Prints each
# pass's mean microseconds per file, then per mount the median, lowest and
# highest ratio to the plain files over the passes (above 1: faster).
#
# A ZRECORDFS of `ceiling` (libfuse's multi-threaded loop) or `ceiling-s`
# (zrecordfs's one-thread loop) mounts bench/fuse_ceiling over the plain
# folder instead: the same files served through FUSE by splicing from
# them, ext4's reads plus FUSE's own cost. Needs root (the page cache is
# dropped before each pass).
#
# usage: bench/fileab.sh [--readers N] [--files N] [--passes P]
#                        [--store zr-raw|zr-zstd] WORKLOAD_DIR ZRECORDFS...
set -euo pipefail

readers=1 files=400 passes=7 store=zr-raw
while [ $# -gt 0 ]; do
    case $1 in
    --readers) readers=$2; shift 2 ;;
    --files) files=$2; shift 2 ;;
    --passes) passes=$2; shift 2 ;;
    --store) store=$2; shift 2 ;;
    *) break ;;
    esac
done
[ $# -ge 2 ] || { echo "usage: bench/fileab.sh [--readers N] [--files N] [--passes P] [--store S] WORKLOAD_DIR ZRECORDFS..." >&2; exit 2; }
wl=$(cd "$1" && pwd)
shift
here=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$here/bench/fileab" ] && [ -x "$here/bench/fuse_ceiling" ] ||
    { echo "fileab: build bench/fileab and bench/fuse_ceiling first (make bench)" >&2; exit 1; }
[ -d "$wl/files" ] && [ -d "$wl/$store" ] || { echo "fileab: $wl has no files/ or $store/" >&2; exit 1; }
[ -w /proc/sys/vm/drop_caches ] || { echo "fileab: dropping the page cache needs root" >&2; exit 1; }
records=$(find "$wl/files" -maxdepth 1 -type f | wc -l)

mnts=()
cleanup() {
    for m in "${mnts[@]}"; do
        if mountpoint -q "$m"; then fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" || true; fi
        rmdir "$m"
    done
}
trap cleanup EXIT
for z in "$@"; do
    mnts+=("$(mktemp -d /var/tmp/fileab-mnt.XXXXXX)")
done

out=$(mktemp)
# Ragged workloads' plain files are .npy files (coldbench).
ext=""
[ -e "$wl/files/0.npy" ] && ext=.npy
for p in $(seq "$passes"); do
    sides=("$wl/files:$ext")
    for k in "${!mnts[@]}"; do
        z=${@:k+1:1}
        case $z in
        ceiling | ceiling-s)
            flag=()
            [ "$z" = ceiling-s ] && flag=(-s)
            "$here/bench/fuse_ceiling" "${flag[@]}" -o "count=$records,dir=$wl/files${ext:+,ext=$ext}" "${mnts[k]}"
            sides+=("${mnts[k]}:$ext")
            ;;
        *)
            "$z" "$wl/$store" "${mnts[k]}" -o npy
            sides+=("${mnts[k]}:.npy")
            ;;
        esac
    done
    "$here/bench/fileab" "$readers" "$files" "$records" "${sides[@]}" | tee -a "$out"
    for m in "${mnts[@]}"; do fusermount3 -u "$m"; done
done
python3 - "$out" "$@" <<'PY'
import statistics, sys
rows = [[float(x) for x in line.split()] for line in open(sys.argv[1])]
for k, name in enumerate(sys.argv[2:], 1):
    r = [row[0] / row[k] for row in rows]
    print(f"{name}: ratio to plain files {statistics.median(r):.2f} "
          f"(lowest {min(r):.2f}, highest {max(r):.2f}), median "
          f"{statistics.median(row[k] for row in rows):.0f} us a file against "
          f"{statistics.median(row[0] for row in rows):.0f}")
PY
rm -f "$out"

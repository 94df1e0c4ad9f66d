#!/bin/bash
# fsseq.sh: whole folders read by sequential readers, cold. `cp -r` (into
# a tmpfs, so that nothing is written to the disk) and `tar -c` (into a
# pipe) of a folder of plain record files on the local disk, against the
# same records through zrecordfs: a raw store and a zstd store. The folders
# are those bench/coldbench leaves with --stores (one workload's "files",
# "zr-raw" and "zr-zstd"). The page cache, dentries and inodes are dropped
# before each run (root), and the bytes the device read are taken from
# /proc/diskstats. Prints a Markdown table to standard output.
#
# usage: bench/fsseq.sh [--reps R] WORKLOAD_DIR [ZRECORDFS]
set -euo pipefail

reps=1
if [ "${1:-}" = --reps ]; then
    reps=$2
    shift 2
fi
[ $# -ge 1 ] || { echo "usage: bench/fsseq.sh [--reps R] WORKLOAD_DIR [ZRECORDFS]" >&2; exit 2; }
wl=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
zrfs=${2:-$here/fs/zrecordfs}
for d in files zr-raw zr-zstd; do
    [ -d "$wl/$d" ] || { echo "fsseq: $wl/$d missing (bench/coldbench --stores DIR makes it)" >&2; exit 1; }
done
[ -w /proc/sys/vm/drop_caches ] || { echo "fsseq: dropping the page cache needs root" >&2; exit 1; }

mnt=$(mktemp -d /var/tmp/fsseq-mnt.XXXXXX)
dst=$(mktemp -d /dev/shm/fsseq.XXXXXX)
daemon=""
cleanup() {
    if mountpoint -q "$mnt"; then fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" || true; fi
    [ -z "$daemon" ] || wait "$daemon" 2>/dev/null || true
    rm -rf "$dst"
    rmdir "$mnt"
}
trap cleanup EXIT

# The device under the workload's folder, as /proc/diskstats names it.
devno=$(stat -c '%d' "$wl/files")
major=$((devno >> 8)) minor=$((devno & 255))
dev=$(awk -v a="$major" -v b="$minor" '$1 == a && $2 == b { print $3 }' /proc/diskstats)
[ -n "$dev" ] || { echo "fsseq: no /proc/diskstats line for device $major:$minor" >&2; exit 1; }
sectors() { awk -v d="$dev" '$3 == d { print $6 }' /proc/diskstats; }

nfiles=$(find "$wl/files" -type f | wc -l)
bytes=$(du -s --apparent-size -B1 "$wl/files" | cut -f1)

mount_store() {
    "$zrfs" -f "$wl/$1" "$mnt" 2>/dev/null &
    daemon=$!
    for _ in $(seq 200); do
        mountpoint -q "$mnt" && return 0
        sleep 0.05
    done
    echo "fsseq: zrecordfs did not mount $wl/$1" >&2
    exit 1
}
unmount_store() {
    fusermount3 -u "$mnt"
    wait "$daemon" || true
    daemon=""
}

# run ROW TOOL: one cold run; prints "seconds device-bytes".
run() {
    local row=$1 tool=$2 src
    sync
    echo 3 > /proc/sys/vm/drop_caches
    if [ "$row" = files ]; then
        src="$wl/files"
    else
        mount_store "$row"
        src=$mnt
    fi
    local s0 t0 t1 s1
    s0=$(sectors)
    t0=$(date +%s.%N)
    if [ "$tool" = cp ]; then
        cp -r "$src" "$dst/copy"
    else
        tar -C "$src" --exclude='./.*' -cf - . | cat > /dev/null
    fi
    t1=$(date +%s.%N)
    s1=$(sectors)
    [ "$row" = files ] || unmount_store
    if [ "$tool" = cp ]; then
        # The copy is checked against the plain files, untimed.
        local bad
        bad=$(cd "$wl/files" && find . -type f | head -n 200 | while read -r f; do
            cmp -s "$f" "$dst/copy/$f" || echo "$f"; done | head -n 1)
        [ -z "$bad" ] || { echo "fsseq: $row: cp -r gave a different $bad" >&2; exit 1; }
        rm -rf "$dst/copy"
    fi
    echo "$(echo "$t1 - $t0" | bc -l) $(((s1 - s0) * 512))"
}

echo "| reader | folder | seconds | files/s | MiB/s | disk read / copied |"
echo "|---|---|---:|---:|---:|---:|"
for tool in cp tar; do
    for row in files zr-raw zr-zstd; do
        best=""
        for _ in $(seq "$reps"); do
            r=$(run "$row" "$tool")
            if [ -z "$best" ] || [ "$(echo "${r% *} < ${best% *}" | bc -l)" = 1 ]; then best=$r; fi
        done
        secs=${best% *} dbytes=${best#* }
        case $row in files) name="plain files (ext4)" ;; zr-raw) name="zrecordfs raw" ;; *) name="zrecordfs zstd" ;; esac
        label=$([ "$tool" = cp ] && echo "cp -r" || echo "tar -c")
        printf '| %s | %s | %.1f | %.0f | %.0f | %.2f |\n' "$label" "$name" "$secs" \
            "$(echo "$nfiles / $secs" | bc -l)" "$(echo "$bytes / 1048576 / $secs" | bc -l)" \
            "$(echo "$dbytes / $bytes" | bc -l)"
    done
done

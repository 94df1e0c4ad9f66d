#!/bin/bash
# The file system benchmark: the same records read four ways in one run --
# plain files on the local disk, squashfs images (zstd and uncompressed)
# mounted with squashfuse_ll, zrecordfs (raw and zstd stores, default mode,
# -o noopen, and the multi-threaded loop -o mt), and bench/fuse_ceiling, a
# do-nothing FUSE server with the same options -- then ls -l of a large
# store against a folder of as many files, and .gather against the
# library's gather. Writes the table and ratios to OUT (default
# doc/fs-benchmarks.md).
#
# usage: bench/fsbench.sh [--quick] [--reps R] [--out FILE]
# Needs: make bench, squashfuse (squashfuse_ll), squashfs-tools, fuse3,
# python3-numpy. Run from the build tree (the source tree for in-tree
# builds).
set -euo pipefail

quick=0
reps=3
here=$(cd "$(dirname "$0")/.." && pwd)
out="$here/doc/fs-benchmarks.md"
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=1 ;;
    --reps) reps="$2"; shift ;;
    --out) out="$2"; shift ;;
    *) echo "usage: bench/fsbench.sh [--quick] [--reps R] [--out FILE]" >&2; exit 2 ;;
    esac
    shift
done

if [ "$quick" = 1 ]; then
    n_vision=60 n_token=600 n_ls=5000 gather_iters=3
else
    n_vision=400 n_token=2000 n_ls=200000 gather_iters=20
fi

fsbench="$here/bench/fsbench"
ceiling="$here/bench/fuse_ceiling"
zrfs="$here/fs/zrecordfs"
zr="$here/src/zr"
py=/usr/bin/python3
for tool in "$fsbench" "$ceiling" "$zrfs" "$zr"; do
    [ -x "$tool" ] || { echo "fsbench: $tool missing: run make bench" >&2; exit 1; }
done
for tool in squashfuse_ll mksquashfs fusermount3; do
    command -v "$tool" >/dev/null || { echo "fsbench: $tool not installed" >&2; exit 1; }
done

work=$(mktemp -d /var/tmp/fsbench.XXXXXX)
mnt="$work/mnt"
mkdir "$mnt"
mounted=0

unmount() {
    if [ "$mounted" = 1 ]; then
        fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null || true
        mounted=0
        # The daemon leaves once the mount is gone; wait for it so that no
        # two servers overlap in one measurement.
        for _ in $(seq 50); do
            pgrep -f -- " $mnt\$" >/dev/null || break
            sleep 0.1
        done
    fi
}
cleanup() {
    unmount
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

results="$work/results.tsv"
: >"$results"

# --- data ---------------------------------------------------------------
# Vision: uint8 3x224x224 smooth images (147 KiB); token: int32[512]
# (2 KiB); ls: int32[16] records, whose size does not matter to a listing.
# Plain files are written from the same arrays and read back against them;
# the plain ls files are empty: a listing reads inodes, not data, and on
# this disk 50,000 64-byte files took 198 s to write back and 32 s to
# delete, against 10 s and 3 s empty (minutes of writeback that would
# overlap the measurements).

# Progress on stderr, with the seconds since the start.
say() { echo "fsbench: [${SECONDS} s] $*" >&2; }
say "building data in $work"

# On an ext4 without a journal (as here) a new file skips every inode
# deleted in the last minutes whose inode table block is still cached,
# one lookup each: after the store benchmark's deletions, the 200,000
# empty files of the ls benchmark took minutes to create (20,000 took
# 77 s against 8 s). Writing the dirty pages and dropping the clean
# caches, as root, lets the creates reuse those inodes.
sync
{ echo 1 >/proc/sys/vm/drop_caches; } 2>/dev/null || true
"$py" - "$here/bench" "$work" "$n_vision" "$n_token" "$n_ls" <<'EOF'
import os, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from fsdata import records
work, nv, nt, nl = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
images, tokens = records(nv, nt)
sets = {
    "vision": images,
    "token": tokens,
    "ls": np.arange(nl * 16, dtype=np.int32).reshape(nl, 16),
}
for name, arr in sets.items():
    np.save(os.path.join(work, name + ".npy"), arr)
    d = os.path.join(work, name + ".files")
    os.mkdir(d)
    for i in range(len(arr)):
        with open(os.path.join(d, str(i)), "wb") as f:
            if name != "ls":
                f.write(arr[i].tobytes())
    if name != "ls":
        for i in range(len(arr)):
            with open(os.path.join(d, str(i)), "rb") as f:
                assert f.read() == arr[i].tobytes(), (name, i)
EOF
say "building the stores and the squashfs images"
for w in vision token; do
    "$zr" import "$work/$w.raw" "$work/$w.npy" --codec raw -q
    "$zr" import "$work/$w.zstd" "$work/$w.npy" --codec zstd -q
    # -no-duplicates: mksquashfs's search for duplicate files is quadratic
    # in the files of one size (see bench/be_squashfuse.c).
    mksquashfs "$work/$w.files" "$work/$w.sq-zstd" -comp zstd -no-duplicates -noappend -quiet \
        -no-progress >/dev/null
    mksquashfs "$work/$w.files" "$work/$w.sq-none" -noI -noD -noF -noX -no-duplicates -noappend \
        -quiet -no-progress >/dev/null
done
"$zr" import "$work/ls.raw" "$work/ls.npy" --codec raw -q

# --- mounting -------------------------------------------------------------
# mount_case W CASE: make the files of workload W visible as CASE at $dir,
# with its backing files' pages dropped and every daemon freshly started.
mount_case() {
    local w=$1 c=$2 n
    n=$(eval echo "\$n_$w")
    unmount
    dir=$mnt
    case "$c" in
    plain) dir="$work/$w.files"; "$fsbench" drop "$dir"; return ;;
    sqfs-zstd) "$fsbench" drop "$work/$w.sq-zstd"; squashfuse_ll "$work/$w.sq-zstd" "$mnt" ;;
    sqfs-none) "$fsbench" drop "$work/$w.sq-none"; squashfuse_ll "$work/$w.sq-none" "$mnt" ;;
    zrfs-raw | zrfs-zstd) "$fsbench" drop "$work/$w.${c#zrfs-}"; "$zrfs" "$work/$w.${c#zrfs-}" "$mnt" ;;
    zrfs-raw-mt | zrfs-zstd-mt)
        local s=${c#zrfs-}; s=${s%-mt}
        "$fsbench" drop "$work/$w.$s"; "$zrfs" -o mt "$work/$w.$s" "$mnt" ;;
    zrfs-raw-noopen | zrfs-zstd-noopen)
        local s=${c#zrfs-}; s=${s%-noopen}
        "$fsbench" drop "$work/$w.$s"; "$zrfs" -o noopen "$work/$w.$s" "$mnt" ;;
    ceiling) "$ceiling" $loop -o "count=$n,size=$(stat -c %s "$work/$w.files/0")" "$mnt" ;;
    ceiling-noopen) "$ceiling" $loop -o "count=$n,size=$(stat -c %s "$work/$w.files/0"),noopen" "$mnt" ;;
    esac
    mounted=1
}

cases="plain sqfs-none sqfs-zstd zrfs-raw zrfs-zstd zrfs-raw-noopen zrfs-zstd-noopen
       zrfs-raw-mt zrfs-zstd-mt ceiling ceiling-noopen"
# fuse_ceiling runs the loop zrecordfs chooses by default: one thread on
# two CPUs or fewer (fs/loop.c, polling as zrecordfs does), libfuse's
# multi-threaded loop above.
loop=""
[ "$(nproc)" -le 2 ] && loop=-s

# --- validation: every record's bytes through every mount ------------------
# check_case W CASE: after the timed reads of the first repetition, every
# file of W read once more through the same mount and compared with the
# source (fuse_ceiling serves other bytes: only its sizes must agree). A
# difference stops the run, so no figure comes from a mount that returned
# a wrong byte; a warm read costs a fraction of a separate cold pass.
check_case() {
    local w=$1 c=$2 n
    n=$(eval echo "\$n_$w")
    "$fsbench" sums "$dir" "$n" >"$work/$w.$c.sums"
    if [ "${c#ceiling}" != "$c" ]; then
        cmp -s <(cut -d' ' -f1,2 "$work/$w.sums") <(cut -d' ' -f1,2 "$work/$w.$c.sums")
    else
        cmp -s "$work/$w.sums" "$work/$w.$c.sums"
    fi || { echo "fsbench: $w through $c differs from the source" >&2; exit 1; }
}
for w in vision token; do
    "$fsbench" sums "$work/$w.files" "$(eval echo "\$n_$w")" >"$work/$w.sums"
done

# --- reads ------------------------------------------------------------------
# One line per measurement: workload case metric files/s MiB/s.
measure() {
    local w=$1 c=$2 metric=$3
    shift 3
    "$fsbench" read "$@" | awk -v w="$w" -v c="$c" -v m="$metric" \
        '{ print w "\t" c "\t" m "\t" $8 "\t" $10 }' >>"$results"
}
for r in $(seq "$reps"); do
    for w in vision token; do
        n=$(eval echo "\$n_$w")
        for c in $cases; do
            say "rep $r $w $c"
            mount_case "$w" "$c"
            measure "$w" "$c" first "$dir" "$n"
            measure "$w" "$c" warm "$dir" "$n"
            if [ "$r" = 1 ]; then check_case "$w" "$c"; fi
            mount_case "$w" "$c"
            measure "$w" "$c" first-2 -j 2 "$dir" "$n"
            measure "$w" "$c" warm-2 -j 2 "$dir" "$n"
        done
        unmount
    done
done

# --- ls -l ------------------------------------------------------------------
say "ls -l of $n_ls records"
# The plain folder is listed warm (its inodes cached, as after any earlier
# use); zrecordfs is listed right after mounting (first) and again (warm).
timed_ls() {
    local t0 t1
    t0=$(date +%s.%N)
    ls -l "$1" >/dev/null
    t1=$(date +%s.%N)
    echo "$t0 $t1" | awk '{ printf "%.4f", $2 - $1 }'
}
ls -l "$work/ls.files" >/dev/null
for r in $(seq "$reps"); do
    printf 'ls\tplain\tls-warm\t%s\t0\n' "$(timed_ls "$work/ls.files")" >>"$results"
    unmount
    "$zrfs" "$work/ls.raw" "$mnt"; mounted=1
    printf 'ls\tzrfs-raw\tls-first\t%s\t0\n' "$(timed_ls "$mnt")" >>"$results"
    printf 'ls\tzrfs-raw\tls-warm\t%s\t0\n' "$(timed_ls "$mnt")" >>"$results"
    unmount
    "$ceiling" $loop -o "count=$n_ls,size=64" "$mnt"; mounted=1
    printf 'ls\tceiling\tls-first\t%s\t0\n' "$(timed_ls "$mnt")" >>"$results"
    printf 'ls\tceiling\tls-warm\t%s\t0\n' "$(timed_ls "$mnt")" >>"$results"
    unmount
done
[ "$(ls "$mnt" | wc -l)" = 0 ] || { echo "fsbench: $mnt is not empty after the last unmount" >&2; exit 1; }

# --- .gather vs the library's gather ------------------------------------------
say ".gather"
# Each batch through .gather three ways: opened with O_DIRECT and read in
# one read(2) (the default loop, and -o mt), and the stream way (no
# O_DIRECT, 1 MiB reads to end of file); then the library's gather.
gather_line() {
    echo "$2" | awk -v w="$w" -v c="$1" '{ print w "\t" c "\tgather\t" $8 "\t" $10 }' >>"$results"
}
for w in vision token; do
    n=$(eval echo "\$n_$w")
    iters=$gather_iters
    [ "$w" = token ] && iters=$((gather_iters * 10))
    for s in raw zstd; do
        for r in $(seq "$reps"); do
            unmount
            "$zrfs" "$work/$w.$s" "$mnt"; mounted=1
            a=$("$fsbench" gather "$mnt/.gather" "$n" 256 "$iters" "$r")
            a_s=$("$fsbench" gather -s "$mnt/.gather" "$n" 256 "$iters" "$r")
            unmount
            "$zrfs" -o mt "$work/$w.$s" "$mnt"; mounted=1
            a_mt=$("$fsbench" gather "$mnt/.gather" "$n" 256 "$iters" "$r")
            unmount
            b=$("$fsbench" libgather "$work/$w.$s" "$n" 256 "$iters" "$r")
            for x in "$a" "$a_s" "$a_mt"; do
                [ "${x##* }" = "${b##* }" ] ||
                    { echo "fsbench: .gather and zr_gather_dense differ ($w $s)" >&2; exit 1; }
            done
            gather_line "zrfs-$s" "$a"
            gather_line "zrfs-$s-stream" "$a_s"
            gather_line "zrfs-$s-mt" "$a_mt"
            gather_line "lib-$s" "$b"
        done
    done
    # What FUSE itself allows such a read: fuse_ceiling serving one file
    # of a batch's size from memory, read the same way (O_DIRECT, one
    # read of the whole file), on the same loop and on libfuse's
    # multi-threaded one (its threads copy replies in parallel, as
    # zrecordfs's reply threads do under the one-thread loop).
    size=$(stat -c %s "$work/$w.files/0")
    for r in $(seq "$reps"); do
        for c in ceiling ceiling-mt; do
            unmount
            if [ "$c" = ceiling ]; then
                "$ceiling" $loop -o "count=1,size=$((256 * size))" "$mnt"
            else
                "$ceiling" -o "count=1,size=$((256 * size))" "$mnt"
            fi
            mounted=1
            "$fsbench" direct "$mnt/0" $((256 * size)) "$iters" |
                awk -v w="$w" -v c="$c" -v sz="$size" \
                    '{ printf "%s\t%s\tgather\t%.0f\t%s\n", w, c, $8 * 1048576 / sz, $8 }' >>"$results"
            unmount
        done
    done
done

# --- report -------------------------------------------------------------------
machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'),"
machine="$machine $(free -g | awk '/^Mem:/ { print $2 }') GiB RAM, $(uname -r),"
machine="$machine load $(cut -d' ' -f1-3 /proc/loadavg)"
# (An assignment takes the status of its last command substitution, so
# none may end false under set -e.)
cmdline="bench/fsbench.sh"
[ "$quick" = 1 ] && cmdline="$cmdline --quick"
cmdline="$cmdline --reps $reps"
"$py" "$here/bench/fsbench-report.py" "$results" "$out" "$machine" "$cmdline" \
    "$n_vision" "$n_token" "$n_ls" "$gather_iters"
cp "$results" "${out%.md}.tsv"
say "wrote $out"

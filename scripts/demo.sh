#!/usr/bin/env bash
# The main job: install what is missing, build, pack data found on this
# machine into stores (PNG icons as a Ragged store, a NumPy array as a
# Dense store), gather a batch through the library, then mount the stores
# with zrecordfs and look at them with ls, cat, file and numpy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
[ -f configure ] || autoreconf -fi
[ -f Makefile ] || ./configure
make -j"$(nproc)"

out=$(mktemp -d /tmp/loaderx-demo-XXXXXX)
mnt="$out/mnt"
mkdir -p "$out/stores" "$mnt"
cleanup() { fusermount3 -u "$mnt" 2>/dev/null || true; }
trap cleanup EXIT
say() { printf '\n== %s\n' "$*"; }

say "pack 2000 PNG icons from /usr/share/icons into a zstd Ragged store"
find /usr/share/icons -name '*.png' -type f | LC_ALL=C sort | awk 'NR <= 2000' > "$out/icons.txt"
./src/zr import "$out/stores/icons" --files - --codec zstd --map "$out/icons.map" -q < "$out/icons.txt"
./src/zr info "$out/stores/icons"

say "a Dense store from a NumPy array (1000 x 3 x 8 x 8 float32)"
/usr/bin/python3 - "$out/grid.npy" <<'PY'
import sys, numpy as np
a = np.sin(np.arange(1000 * 3 * 8 * 8, dtype=np.float32) / 97).reshape(1000, 3, 8, 8)
np.save(sys.argv[1], a)
PY
./src/zr import "$out/stores/grid" "$out/grid.npy" --codec zstd -q
./src/zr info "$out/stores/grid"

say "gather a random batch through the C library (examples/tour.c)"
./examples/tour "$out/tour" < "$out/icons.txt" | awk 'NR <= 12'

say "mount the stores: zrecordfs -o ext=.png $out/stores/icons $mnt"
./fs/zrecordfs -o ext=.png "$out/stores/icons" "$mnt"
ls "$mnt" | awk 'NR <= 5'
echo "... $(ls "$mnt" | wc -l) names"
cat "$mnt/.stats"; echo
cat "$mnt/7.png" | file -
first=$(awk -F'\t' '$1 == 7 { print $2 }' "$out/icons.map")
cmp "$mnt/7.png" "$first" && echo "record 7 is byte for byte $first"
exec 3<>"$mnt/.gather"
echo "7 0 7" >&3
echo ".gather of 7 0 7 returned $(cat <&3 | wc -c) bytes"
exec 3>&-
fusermount3 -u "$mnt"

say "mount the Dense store as NPY files and load one with numpy"
./fs/zrecordfs -o npy "$out/stores/grid" "$mnt"
ls "$mnt" | awk 'NR <= 3'
/usr/bin/python3 - "$mnt/42.npy" "$out/grid.npy" <<'PY'
import sys, numpy as np
rec = np.load(sys.argv[1])
src = np.load(sys.argv[2], mmap_mode="r")
print("42.npy:", rec.dtype, rec.shape, "equal to row 42 of the source:", bool((rec == src[42]).all()))
PY
fusermount3 -u "$mnt"
echo
echo "stores are in $out/stores; mount them again with"
echo "  ./fs/zrecordfs -o ext=.png $out/stores/icons $mnt    (unmount: fusermount3 -u $mnt)"

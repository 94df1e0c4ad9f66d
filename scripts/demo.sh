#!/usr/bin/env bash
# The main job: install what is missing, build, pack PNG icons found on
# this machine into stores, gather a batch and show it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
[ -f configure ] || autoreconf -fi
[ -f Makefile ] || ./configure
make -j"$(nproc)"
out=$(mktemp -d /tmp/loaderx-demo-XXXXXX)
find /usr/share/icons -name '*.png' -type f | LC_ALL=C sort | awk 'NR <= 3000' > "$out/files.txt"
echo "packing $(wc -l < "$out/files.txt") PNG icons from /usr/share/icons into $out"
./examples/tour "$out" < "$out/files.txt"
echo "store folders:"
ls -l "$out/images" "$out/sizes"

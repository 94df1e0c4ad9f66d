#!/bin/bash
# --files: every PNG icon under /usr/share/icons goes into a Ragged |u1
# store, one record per file, and comes back byte for byte; a folder is
# walked recursively in bytewise path order; --map tells which index holds
# which file; append continues the numbering.
. "${srcdir:-.}/tests/cli/lib.sh"

find /usr/share/icons -name '*.png' -type f | LC_ALL=C sort >pngs.txt
n=$(wc -l <pngs.txt)
[ "$n" -gt 100 ] || fail "too few PNG icons under /usr/share/icons ($n)"

zr import icons --files - --codec zstd --map map.txt <pngs.txt
zr info icons --json >info.json

# The map is the input list, numbered from 0.
awk '{ printf "%d\t%s\n", NR - 1, $0 }' pngs.txt | cmp -s - map.txt || fail "--map differs from the input list"

# All records at once equal all files at once; each record, read as an
# .npy, is its file with shape (size,).
zr cat icons "0:$n" >all.bin
tr '\n' '\0' <pngs.txt | xargs -0 cat | cmp -s - all.bin || fail "zr cat 0:$n differs from the files"
zr cat icons "0:$n" --npy >all.npy
py '
import json
paths = open("pngs.txt").read().splitlines()
info = json.load(open("info.json"))
assert info["kind"] == "ragged" and info["dtype"] == "|u1" and info["codec"] == "zstd", info
assert info["records"] == len(paths) and info["item_shape"] is None, info
with open("all.npy", "rb") as f:
    for p in paths:
        r = np.lib.format.read_array(f)
        data = open(p, "rb").read()
        assert r.dtype == np.uint8 and r.shape == (len(data),), (p, r.shape)
        assert r.tobytes() == data, p
    assert f.read() == b""
'
# And one by one with cmp, for a spread of indices.
mapfile -t png <pngs.txt
for ((i = 0; i < n; i += n / 16)); do
    zr cat icons "$i" | cmp -s - "${png[i]}" || fail "record $i differs from ${png[i]}"
done
zr cat icons $((n - 1)) | cmp -s - "${png[n - 1]}" || fail "the last record differs"

# A folder: nested, names that sort differently by locale, a symlink to a
# file (followed) and one to a folder (not followed).
mkdir -p tree/B tree/a/deep tree/a.b
i=0
for dst in tree/B/x.png tree/a/deep/y.png tree/a.b/z.png tree/a/Z.png tree/_u.png \
    "tree/with space.png" tree/a/deep/0.png tree/a/deep/10.png tree/a/deep/9.png tree/b.png; do
    cp "${png[i]}" "$dst"
    i=$((i + 1))
done
ln -s "${png[10]}" tree/link.png
ln -s ../tree tree/a/loop
zr import fromdir --files tree --map dirmap.txt -q
find tree -type f -o -type l -xtype f | LC_ALL=C sort >expect.txt
cut -f2 dirmap.txt | cmp -s - expect.txt || fail "folder order: $(cut -f2 dirmap.txt | tr '\n' ' ')"
k=0
while IFS= read -r path; do
    zr cat fromdir "$k" | cmp -s - "$path" || fail "fromdir record $k differs from $path"
    k=$((k + 1))
done <expect.txt
[ "$k" = 11 ] || fail "the folder gave $k files, expected 11"

# append --files numbers on from the current length.
printf '%s\n' "${png[11]}" | zr append fromdir --files - --map more.txt
[ "$(cat more.txt)" = "11	${png[11]}" ] || fail "append --map: $(cat more.txt)"
zr cat fromdir 11 | cmp -s - "${png[11]}" || fail "appended record differs"

# NUL-separated lists, and --map to stdout.
printf '%s\0' "tree/with space.png" tree/b.png | zr import nul --files - --null --map - >nulmap.txt
printf '0\ttree/with space.png\n1\ttree/b.png\n' | cmp -s - nulmap.txt || fail "--null map: $(cat nulmap.txt)"

# Refusals, before anything is written.
: >empty.bin
expect_fail 1 'empty.bin: empty file' zr import e1 --files - <<<"empty.bin"
expect_fail 1 'nothere.png: No such file or directory' zr import e2 --files - <<<"nothere.png"
expect_fail 1 'tree: not a regular file' zr import e3 --files - <<<"tree"
expect_fail 1 'pngs.txt is not a folder' zr import e4 --files pngs.txt
expect_fail 1 'no paths on stdin' zr import e5 --files - </dev/null
[ ! -e e1 ] && [ ! -e e2 ] && [ ! -e e3 ] && [ ! -e e4 ] && [ ! -e e5 ] || fail "a refused import left a store"
py 'np.save("d.npy", np.zeros((2, 2), dtype="<f4"))'
zr import dense d.npy
expect_fail 1 'dense is a Dense store; --files appends to a Ragged |u1 store' zr append dense --files tree
zr create rf4 --ragged --dtype '<f4'
expect_fail 1 'rf4 holds <f4 records; --files stores bytes' zr append rf4 --files tree
exit 0

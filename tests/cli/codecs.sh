#!/bin/bash
# Every codec keeps the data: import with raw, zstd and zstd_dict (trained
# on the file, or given with --dict), train-dict from an .npy and from a
# store, and recode between codecs, Dense and Ragged, order kept; create
# and import without --codec make zstd stores.
. "${srcdir:-.}/tests/cli/lib.sh"

# Compressible records: small integers with structure, 2000 x 64 floats.
py '
rng = np.random.default_rng(7)
a = (np.arange(64)[None, :] * rng.integers(1, 4, size=(2000, 1))).astype("<f4")
np.save("a.npy", a)
'

zr import raw a.npy --codec raw
zr import zst a.npy --codec zstd
zr import dct a.npy --codec zstd_dict --tier fast
zr train-dict a.npy --tier fast -o a.dict
zr train-dict zst --tier fast -o zst.dict
[ -s a.dict ] && [ -s zst.dict ] || fail "train-dict wrote an empty dictionary"
zr import given a.npy --codec zstd_dict --dict a.dict
zr create made --dtype '<f4' --shape 64 --codec zstd_dict --dict zst.dict
zr append made a.npy
zr recode raw r_zst --codec zstd
zr recode r_zst r_dct --codec zstd_dict --tier fast
zr recode r_dct r_raw --codec raw -q
zr recode dct r_given --codec zstd_dict --dict a.dict

stores="raw zst dct given made r_zst r_dct r_raw r_given"
for s in $stores; do
    zr export "$s" "$s.npy"
    zr info "$s" --json >"$s.json"
done
py '
import json
a = np.load("a.npy")
codec = {"raw": "raw", "zst": "zstd", "dct": "zstd_dict", "given": "zstd_dict",
         "made": "zstd_dict", "r_zst": "zstd", "r_dct": "zstd_dict", "r_raw": "raw",
         "r_given": "zstd_dict"}
for s in sys.argv[1:]:
    assert np.array_equal(np.load(s + ".npy"), a), s
    info = json.load(open(s + ".json"))
    assert info["codec"] == codec[s] and info["records"] == 2000, (s, info)
' $stores
# Compression does something on this data.
[ "$(du -sk zst | cut -f1)" -lt "$(du -sk raw | cut -f1)" ] || fail "zstd did not compress"

# Without --codec, create and import (of an .npy or of files) make zstd
# stores.
zr import d_npy a.npy -q
zr create d_made --dtype '<f4' --shape 64
zr create d_ragged --dtype '|u1' --ragged
printf '%s\n' a.npy | zr import d_files --files - -q
for s in d_npy d_made d_ragged d_files; do
    zr info "$s" --json >"$s.json"
    py 'import json; i = json.load(open(sys.argv[1])); assert i["codec"] == "zstd", i' "$s.json"
done

# Ragged stores recode too: records keep their shapes and bytes.
find /usr/share/icons -name '*.png' -type f | LC_ALL=C sort | awk 'NR <= 300' >pngs.txt
zr import icons --files - --codec zstd_dict --tier fast <pngs.txt
zr recode icons icons_raw --codec raw
zr cat icons 0:300 >a.bin
zr cat icons_raw 0:300 >b.bin
tr '\n' '\0' <pngs.txt | xargs -0 cat >expect.bin
cmp -s a.bin expect.bin || fail "zstd_dict Ragged store differs from the files"
cmp -s b.bin expect.bin || fail "recoded Ragged store differs from the files"

# Options that contradict each other, and a target that exists.
expect_fail 2 'only apply to --codec zstd_dict' zr import x a.npy --codec zstd --tier fast
expect_fail 2 'either --tier .* or --dict' zr import x a.npy --codec zstd_dict --tier fast --dict a.dict
expect_fail 2 'needs --dict FILE' zr create x --dtype '<f4' --codec zstd_dict
expect_fail 2 "unknown codec 'lz4'" zr recode raw x --codec lz4
expect_fail 2 'missing --codec' zr recode raw x
expect_fail 2 "unknown tier 'huge'" zr train-dict a.npy --tier huge -o x.dict
expect_fail 2 'missing -o FILE' zr train-dict a.npy
expect_fail 1 'zst already holds a store' zr recode raw zst --codec zstd
expect_fail 1 'raw already holds a store' zr import raw a.npy
[ ! -e x ] || fail "a refused command left x behind"
exit 0

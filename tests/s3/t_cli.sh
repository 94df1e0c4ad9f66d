#!/bin/bash
# t_cli.sh: zr reads a store in an object store as it reads a local one.
# Stores are made locally with zr, uploaded with s3cmd (not with loaderx),
# and `zr info`, `cat`, `export` and `verify` of the s3:// address must
# print what they print for the local folder; a write command is refused,
# and so is an upload without its header.
# Run by tests/s3/run.sh, which gives the server's environment.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
[ -x "${top_builddir:-.}/src/.libs/zr" ] && zr=${top_builddir:-.}/src/.libs/zr
export LD_LIBRARY_PATH="${top_builddir:-.}/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/s3-cli.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=t_cli/$$
s3=(s3cmd -q)
[ -n "${S3CMD_CONFIG:-}" ] && s3+=(-c "$S3CMD_CONFIG")

"$PY" -c "
import numpy as np, sys
np.save(sys.argv[1], np.random.default_rng(3).integers(0, 1000, size=(300, 4, 6), dtype=np.int32))
" "$tmp/grid.npy"
"$zr" import "$tmp/grid" "$tmp/grid.npy" --codec zstd -q
find /usr/share/icons -name '*.png' -size -8k | sort > "$tmp/all"
head -n 200 "$tmp/all" > "$tmp/files"
"$zr" import "$tmp/icons" --files - -q < "$tmp/files"

for store in grid icons; do
    "${s3[@]}" put --recursive "$tmp/$store/" "s3://$LOADERX_TEST_BUCKET/$prefix/$store/" >/dev/null
    url=s3://$LOADERX_TEST_BUCKET/$prefix/$store
    "$zr" info "$tmp/$store" | sed 1d > "$tmp/info.local"
    "$zr" info "$url" | sed 1d > "$tmp/info.remote"
    cmp "$tmp/info.local" "$tmp/info.remote" || fail "zr info of $url differs"
    "$zr" cat "$tmp/$store" 0 7 7 199 > "$tmp/cat.local"
    "$zr" cat "$url" 0 7 7 199 > "$tmp/cat.remote"
    cmp "$tmp/cat.local" "$tmp/cat.remote" || fail "zr cat of $url differs"
    "$zr" verify "$url" > "$tmp/verify" || fail "zr verify $url failed: $(cat "$tmp/verify")"
    grep -q "no problems" "$tmp/verify" || fail "zr verify $url said: $(cat "$tmp/verify")"
    echo "ok: zr info, cat and verify of $store"
done

url=s3://$LOADERX_TEST_BUCKET/$prefix/grid
"$zr" export "$url" "$tmp/remote.npy" -q
"$zr" export "$tmp/grid" "$tmp/local.npy" -q
cmp "$tmp/local.npy" "$tmp/remote.npy" || fail "zr export of $url differs"
"$PY" -c "
import numpy as np, sys
assert (np.load(sys.argv[1]) == np.load(sys.argv[2])).all()
" "$tmp/grid.npy" "$tmp/remote.npy" || fail "the exported array is not the imported one"
echo "ok: zr export"

if "$zr" delete "$url" 3 2> "$tmp/err"; then fail "zr delete of $url succeeded"; fi
grep -q "read-only" "$tmp/err" || fail "zr delete of $url said: $(cat "$tmp/err")"
"${s3[@]}" del "s3://$LOADERX_TEST_BUCKET/$prefix/grid/meta.zr" >/dev/null
if "$zr" info "$url" 2> "$tmp/err"; then fail "zr info took a store without its header"; fi
grep -q "meta.zr" "$tmp/err" || fail "zr info without meta.zr said: $(cat "$tmp/err")"
echo "ok: refusals"

#!/bin/bash
# t_race.sh: pushes racing to one prefix. Two stores of the same file
# names, sizes and shape but other bytes are pushed at once to a fresh
# prefix, round after round: exactly one push must succeed, the other
# fail saying another push got there first, and the prefix must then be
# the winner's store, byte for byte (pulled back and compared with cmp,
# and verified in place). Some rounds race stores with a file past the
# 16 MiB multipart threshold, whose ETag push computes differently.
# Then what pull makes of a store's modes: 0600 files in a 0700 folder
# whatever the umask, or what --mode asks for; a bad --mode is refused.
# Run by tests/s3/run.sh, which gives the server's environment.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
"$PY" -c 'import numpy' 2>/dev/null || fail "$PY lacks numpy (Debian package python3-numpy)"
[ -x "$zr" ] || fail "$zr is not built"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/s3-race.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
url=s3://$LOADERX_TEST_BUCKET/t_race/$$
rounds=${LOADERX_RACE_ROUNDS:-24}

# Pairs of stores, a and b, alike but for their bytes: small ones of a
# few files, and large ones whose chunk is a multipart upload.
"$PY" - "$tmp" <<'PYEOF'
import sys
import numpy as np
d = sys.argv[1]
for name, rows in (("small", 300), ("large", 4500)):
    for side, seed in (("a", 1), ("b", 2)):
        a = np.random.default_rng(seed).integers(0, 256, size=(rows, 4096), dtype=np.uint8)
        np.save("%s/%s-%s.npy" % (d, name, side), a)
PYEOF
for s in small-a small-b large-a large-b; do
    "$zr" import "$tmp/$s" "$tmp/$s.npy" --codec raw -q
done
for s in small large; do
    [ "$(cd "$tmp/$s-a" && ls -l | awk '{print $5, $9}')" = \
      "$(cd "$tmp/$s-b" && ls -l | awk '{print $5, $9}')" ] ||
        fail "$s-a and $s-b differ in their files' names or sizes"
    ! cmp -s "$tmp/$s-a/0.chunk" "$tmp/$s-b/0.chunk" || fail "$s-a and $s-b hold the same bytes"
done
[ "$(stat -c %s "$tmp/large-a/0.chunk")" -gt $((16 << 20)) ] || fail "large is not past the part size"
ok "two pairs of stores, alike but for their bytes"

lost="another push .* (is under way|first)|already holds"
wins_a=0
for r in $(seq "$rounds"); do
    pair=small
    [ $((r % 8)) -eq 0 ] && pair=large
    u=$url/$r
    rc_a=0 rc_b=0
    "$zr" push -q "$tmp/$pair-a" "$u" 2>"$tmp/err-a" & pid_a=$!
    "$zr" push -q "$tmp/$pair-b" "$u" 2>"$tmp/err-b" & pid_b=$!
    wait "$pid_a" || rc_a=$?
    wait "$pid_b" || rc_b=$?
    if [ "$rc_a" -eq 0 ] && [ "$rc_b" -ne 0 ]; then
        win=a lose=b
        wins_a=$((wins_a + 1))
    elif [ "$rc_b" -eq 0 ] && [ "$rc_a" -ne 0 ]; then
        win=b lose=a
    else
        fail "round $r ($pair): the pushes exited $rc_a and $rc_b, not one 0 and one failure" \
            "($(cat "$tmp/err-a" "$tmp/err-b"))"
    fi
    grep -Eq "$lost" "$tmp/err-$lose" ||
        fail "round $r: the losing push said: $(cat "$tmp/err-$lose")"
    "$zr" verify -q "$u" || fail "round $r: zr verify $u"
    keys=$("$PY" - "$u" <<'PYEOF'
import os, sys
import boto3
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                  config=Config(s3={"addressing_style": "path"}))
bucket, _, prefix = sys.argv[1][len("s3://"):].partition("/")
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
    for o in page.get("Contents", []):
        print(o["Key"][len(prefix) + 1:])
PYEOF
)
    ! grep -qx push.claim <<< "$keys" || fail "round $r: a push.claim is left in $u"
    "$zr" pull -q "$u" "$tmp/pulled-$r" || fail "round $r: pull $u"
    for f in "$tmp/$pair-$win"/*; do
        cmp -s "$f" "$tmp/pulled-$r/$(basename "$f")" ||
            fail "round $r: $(basename "$f") of $u is not the winner's ($pair-$win)"
    done
    [ "$(ls "$tmp/pulled-$r" | wc -l)" -eq "$(ls "$tmp/$pair-$win" | wc -l)" ] ||
        fail "round $r: $u holds other files than $pair-$win"
    rm -rf "$tmp/pulled-$r"
done
ok "$rounds rounds of two racing pushes: one won each ($wins_a by a), the prefix is its store"

# A push over a published store still fails, naming it, and a --force
# push replaces it, its ETags checked.
rc=0
"$zr" push -q "$tmp/small-a" "$url/1" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 1 ] && grep -q "already holds" "$tmp/err" || fail "push over a store: $rc $(cat "$tmp/err")"
"$zr" push -q --force "$tmp/large-b" "$url/1" || fail "push --force"
"$zr" pull -q "$url/1" "$tmp/forced" || fail "pull after push --force"
for f in "$tmp/large-b"/*; do cmp "$f" "$tmp/forced/$(basename "$f")"; done
ok "push refuses a published store; --force replaces it"

# Modes of a pulled store: 0600 files, 0700 folder, whatever the umask.
# modes DIR: "FOLDER-MODE FILE-MODES..." (the files' distinct modes).
modes() { echo "$(stat -c %a "$1")" $(stat -c %a "$1"/* | sort -u); }
(umask 022 && "$zr" pull -q "$url/2" "$tmp/m-default") || fail "pull with umask 022"
[ "$(modes "$tmp/m-default")" = "700 600" ] ||
    fail "a pulled store has modes $(modes "$tmp/m-default"), not 0600 files in 0700"
(umask 077 && "$zr" pull -q --mode 0644 "$url/2" "$tmp/m-644") || fail "pull --mode 0644"
[ "$(modes "$tmp/m-644")" = "755 644" ] || fail "pull --mode 0644 gave $(modes "$tmp/m-644")"
(umask 022 && "$zr" pull -q --mode 640 "$url/2" "$tmp/m-640") || fail "pull --mode 640"
[ "$(modes "$tmp/m-640")" = "750 640" ] || fail "pull --mode 640 gave $(modes "$tmp/m-640")"
for bad in 999 07777 0400 1644 abc ""; do
    rc=0
    "$zr" pull -q --mode "$bad" "$url/2" "$tmp/m-bad" 2>"$tmp/err" || rc=$?
    [ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "--mode" "$tmp/err" ||
        fail "pull --mode '$bad': exit $rc, $(cat "$tmp/err")"
    [ ! -e "$tmp/m-bad" ] || fail "pull --mode '$bad' made $tmp/m-bad"
done
ok "pull makes 0600 files in a 0700 folder, or what --mode asks; a bad --mode is refused"

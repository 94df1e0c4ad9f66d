#!/bin/bash
# t_push.sh: zr push and zr pull against a real S3 server. Stores of
# several kinds and codecs (one of 40 MiB, past the client's 16 MiB
# multipart threshold) are pushed, and every object is checked with an
# independent client (boto3: the keys are the store's files, each with
# the local file's sha256); they are pulled back into new folders, every
# file compared with cmp and the copy verified. Then the refusals: a push
# to a prefix that holds objects fails and leaves them as they were, and
# --force replaces them (the old store's extra objects gone); a push
# killed half-way leaves a prefix zr info refuses as unfinished, and so
# does a --force push killed over an old store; a pull of such a prefix
# fails and leaves no folder; a pull over a store needs --force; a store
# with a pending intent.zr, or held by a writer, is not pushed.
# Run by tests/s3/run.sh, which gives the server's environment.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
"$PY" -c 'import boto3, numpy' 2>/dev/null ||
    fail "$PY lacks boto3 or numpy (Debian packages python3-boto3 python3-numpy)"

[ -x "$zr" ] || fail "$zr is not built"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/s3-push.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
url=s3://$LOADERX_TEST_BUCKET/t_push/$$

# boto CMD PREFIX [ARGS]: an S3 client that is not loaderx's.
#   manifest PREFIX      "name sha256 size" of every object under PREFIX/
#   put PREFIX NAME      an object PREFIX/NAME of a few bytes
boto() {
    "$PY" - "$@" <<'PYEOF'
import hashlib, os, sys
import boto3
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                  config=Config(s3={"addressing_style": "path"}))
cmd, url = sys.argv[1], sys.argv[2]
bucket, _, prefix = url[len("s3://"):].partition("/")
if cmd == "manifest":
    rows = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for o in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
            rows.append("%s %s %d" % (o["Key"][len(prefix) + 1:],
                                      hashlib.sha256(body).hexdigest(), len(body)))
    print("\n".join(sorted(rows)))
elif cmd == "put":
    s3.put_object(Bucket=bucket, Key=prefix + "/" + sys.argv[3], Body=b"not a store")
PYEOF
}

# local_manifest DIR: the same for the files of a store folder, as push
# sends them (an empty intent.zr stays behind).
local_manifest() {
    (cd "$1" && for f in *; do
        [ "$f" = intent.zr ] && [ ! -s "$f" ] && continue
        echo "$f $(sha256sum <"$f" | cut -d' ' -f1) $(stat -c %s "$f")"
    done | LC_ALL=C sort)
}

# same_files A B: the two folders hold the same store files, byte for byte.
same_files() {
    local f n=0
    for f in "$1"/*; do
        [ "$(basename "$f")" = intent.zr ] && [ ! -s "$f" ] && continue
        cmp "$f" "$2/$(basename "$f")" || fail "$2/$(basename "$f") differs from $f"
        n=$((n + 1))
    done
    [ "$(ls "$2" | wc -l)" -eq "$n" ] || fail "$2 holds other files than $1: $(ls "$2")"
}

# Stores: Dense raw of 40 MiB, Dense zstd <f4, Ragged zstd_dict of bytes,
# and an empty Ragged zstd one.
"$PY" - "$tmp" <<'PYEOF'
import os, sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(28)
np.save(d + "/big.npy", rng.integers(0, 256, size=(10240, 4096), dtype=np.uint8))
np.save(d + "/f4.npy", rng.standard_normal((3000, 3, 8)).astype("<f4"))
os.mkdir(d + "/files")
words = [b"alpha", b"beta", b"gamma", b"delta", b"epsilon", b"zeta"]
for i in range(2000):
    n = int(rng.integers(5, 60))
    text = b" ".join(words[int(k)] for k in rng.integers(0, len(words), n))
    with open("%s/files/%05d.txt" % (d, i), "wb") as f:
        f.write(b"record %d: " % i + text)
PYEOF
"$zr" import "$tmp/big" "$tmp/big.npy" --codec raw -q
"$zr" import "$tmp/f4" "$tmp/f4.npy" --codec zstd -q
"$zr" import "$tmp/dict" --files "$tmp/files" --codec zstd_dict --tier fast -q
"$zr" create "$tmp/empty" --ragged --dtype '<i8' --codec zstd
[ "$(stat -c %s "$tmp/big/0.chunk")" -gt $((16 << 20)) ] || fail "big is not past the part size"
[ -e "$tmp/dict/dict.zr" ] || fail "the zstd_dict store has no dict.zr"
ok "stores made"

for s in big f4 dict empty; do
    "$zr" push -q "$tmp/$s" "$url/$s" || fail "push $s"
    [ "$(boto manifest "$url/$s")" = "$(local_manifest "$tmp/$s")" ] ||
        fail "the objects of $url/$s are not the files of $s"
    "$zr" info "$url/$s" >/dev/null || fail "zr info $url/$s"
    "$zr" pull -q --verify "$url/$s" "$tmp/pulled-$s" || fail "pull $s"
    same_files "$tmp/$s" "$tmp/pulled-$s"
    "$zr" verify -q "$tmp/pulled-$s" || fail "verify pulled-$s"
    ok "$s: pushed byte for byte (sha256 by boto3), pulled back identical and sound"
done
"$zr" export "$tmp/pulled-f4" "$tmp/f4-back.npy"
"$PY" -c 'import numpy as np, sys; a, b = np.load(sys.argv[1]), np.load(sys.argv[2]);
assert a.dtype == b.dtype and (a == b).all()' "$tmp/f4.npy" "$tmp/f4-back.npy" ||
    fail "the pulled f4 store does not give back the array"
ok "the pulled f4 store exports the array it was imported from"

# A prefix that holds a store, or any object, is not replaced without --force.
before=$(boto manifest "$url/dict")
rc=0
"$zr" push -q "$tmp/f4" "$url/dict" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 1 ] || fail "push over a store exited $rc, not 1"
grep -q "already holds" "$tmp/err" || fail "push over a store said: $(cat "$tmp/err")"
[ "$(boto manifest "$url/dict")" = "$before" ] || fail "a refused push changed $url/dict"
boto put "$url/other" README
rc=0
"$zr" push -q "$tmp/f4" "$url/other" 2>/dev/null || rc=$?
[ "$rc" -eq 1 ] || fail "push over a prefix holding an object exited $rc, not 1"
ok "push refuses a prefix that holds objects and leaves them as they were"

# --force replaces: the dict store's dict.zr goes, f4's files come.
"$zr" push -q --force "$tmp/f4" "$url/dict" || fail "push --force"
[ "$(boto manifest "$url/dict")" = "$(local_manifest "$tmp/f4")" ] ||
    fail "after push --force $url/dict is not f4's files"
[ "$("$zr" info --json "$url/dict" | grep -c '"<f4"')" -eq 1 ] || fail "info of the replaced store"
ok "push --force replaces a store, its extra objects (dict.zr) removed"

# A push killed after some objects are up and before meta.zr. The
# subshell, not this shell, reports the kill, to /dev/null. A reader says
# the upload has not finished, or, when store.zr was not up yet either,
# that the prefix holds no store.
unfinished="has not finished|holds no store"
killed_push() {
    (
        LOADERX_TEST_PUSH_KILL_AFTER=1 "$zr" push "$@"
        rc=$?
        exit $rc
    ) 2>/dev/null
}
rc=0
killed_push -q "$tmp/big" "$url/killed" || rc=$?
[ "$rc" -eq 137 ] || fail "the killed push exited $rc, not 137 (SIGKILL)"
killed=$(boto manifest "$url/killed")
[ -n "$killed" ] || fail "the killed push left no object: it was killed too early to test"
! echo "$killed" | grep -q '^meta.zr ' || fail "the killed push left a meta.zr"
rc=0
"$zr" info "$url/killed" >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" -eq 1 ] && grep -Eq "$unfinished" "$tmp/err" ||
    fail "zr info of a killed push: exit $rc, $(cat "$tmp/err")"
ok "a push killed half-way leaves no meta.zr, and zr info refuses the prefix as unfinished"

# The same over an old store: the old header goes first.
rc=0
killed_push -q --force "$tmp/big" "$url/f4" || rc=$?
[ "$rc" -eq 137 ] || fail "the killed push --force exited $rc, not 137"
rc=0
"$zr" info "$url/f4" >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" -eq 1 ] && grep -Eq "$unfinished" "$tmp/err" ||
    fail "zr info of a killed push --force: exit $rc, $(cat "$tmp/err")"
"$zr" push -q --force "$tmp/big" "$url/f4" || fail "push --force over a killed push"
[ "$(boto manifest "$url/f4")" = "$(local_manifest "$tmp/big")" ] ||
    fail "a push after a killed one did not leave the store's files"
ok "a killed push --force leaves no store; pushing again finishes it"

# A pull of an unfinished upload fails and leaves no folder.
rc=0
"$zr" pull -q "$url/killed" "$tmp/from-killed" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 1 ] && grep -Eq "$unfinished" "$tmp/err" ||
    fail "pull of a killed push: exit $rc, $(cat "$tmp/err")"
[ -z "$(ls -d "$tmp"/from-killed* 2>/dev/null)" ] || fail "a refused pull left $(ls -d "$tmp"/from-killed*)"
rc=0
"$zr" pull -q "$url/nothing-here" "$tmp/from-nothing" 2>/dev/null || rc=$?
[ "$rc" -eq 1 ] && [ ! -e "$tmp/from-nothing" ] || fail "pull of an empty prefix: exit $rc"
ok "pull refuses a prefix without meta.zr and leaves no folder"

# A pull over a store needs --force, and replaces it whole.
rc=0
"$zr" pull -q "$url/big" "$tmp/pulled-f4" 2>/dev/null || rc=$?
[ "$rc" -eq 1 ] || fail "pull over a store exited $rc, not 1"
same_files "$tmp/f4" "$tmp/pulled-f4"
"$zr" pull -q --force "$url/big" "$tmp/pulled-f4" || fail "pull --force"
same_files "$tmp/big" "$tmp/pulled-f4"
[ -z "$(ls -d "$tmp"/pulled-f4.part-* 2>/dev/null)" ] || fail "pull --force left its folder"
mkdir "$tmp/notastore" && echo keep >"$tmp/notastore/notes.txt"
rc=0
"$zr" pull -q --force "$url/big" "$tmp/notastore" 2>/dev/null || rc=$?
[ "$rc" -eq 1 ] && [ -e "$tmp/notastore/notes.txt" ] || fail "pull --force over a non-store: exit $rc"
ok "pull refuses an existing store without --force, replaces it with, never other folders"

# A pending delete or compaction is refused, and left as it was; an open
# finishes it (an incomplete intent is cleared) and the push then goes.
cp -r "$tmp/f4" "$tmp/pending"
echo "half an intent" >"$tmp/pending/intent.zr"
rc=0
"$zr" push -q "$tmp/pending" "$url/pending" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 1 ] && grep -q "pending delete or compaction" "$tmp/err" ||
    fail "push of a store with a pending intent: exit $rc, $(cat "$tmp/err")"
[ -s "$tmp/pending/intent.zr" ] || fail "a refused push changed the local intent.zr"
[ -z "$(boto manifest "$url/pending")" ] || fail "a refused push sent objects"
"$zr" info "$tmp/pending" >/dev/null
"$zr" push -q "$tmp/pending" "$url/pending" || fail "push after the intent was finished"
! boto manifest "$url/pending" | grep -q '^intent.zr ' || fail "push sent an empty intent.zr"
ok "a store with a pending intent.zr is refused untouched; an empty intent.zr is not sent"

# A writer's lock (an exclusive flock on meta.zr, R2) keeps push out.
"$PY" -c 'import fcntl, sys, time
f = open(sys.argv[1], "rb"); fcntl.flock(f, fcntl.LOCK_EX); print(flush=True); time.sleep(60)' \
    "$tmp/big/meta.zr" >"$tmp/locked" &
locker=$!
for _ in $(seq 100); do [ -s "$tmp/locked" ] && break; sleep 0.1; done
rc=0
"$zr" push -q "$tmp/big" "$url/locked" 2>"$tmp/err" || rc=$?
kill "$locker"
wait "$locker" 2>/dev/null || true
[ "$rc" -eq 1 ] && grep -q "open for writing" "$tmp/err" ||
    fail "push of a store being written: exit $rc, $(cat "$tmp/err")"
[ -z "$(boto manifest "$url/locked")" ] || fail "push of a locked store sent objects"
ok "push refuses a store a writer holds"

# Usage errors and a local STORE that is not a store.
rc=0
"$zr" push "$tmp/big" 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "push with one operand exited $rc, not 2"
for args in "push $tmp/big $tmp/elsewhere" "pull $tmp/big $tmp/elsewhere" "push $url/big $url/x"; do
    rc=0
    "$zr" $args 2>/dev/null || rc=$?
    [ "$rc" -eq 2 ] || fail "zr $args exited $rc, not 2"
done
rc=0
"$zr" push -q "$tmp/files" "$url/files" 2>/dev/null || rc=$?
[ "$rc" -eq 1 ] || fail "push of a folder that is no store exited $rc, not 1"
[ -z "$(boto manifest "$url/files")" ] || fail "push of a folder that is no store sent objects"
ok "usage errors exit 2; a folder that is no store is refused before anything is sent"

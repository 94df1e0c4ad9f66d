#!/bin/bash
# t_clients.sh: the server and the reference clients agree, without
# loaderx, so that a failure of a later S3 test points at loaderx and not
# at the harness: an object put with s3cmd reads back byte for byte
# through boto3; a ranged GET signed by curl (--aws-sigv4) returns exactly
# its range; a listing with a prefix names exactly the keys under it; a
# wrong secret gets 403, an unsigned request 403, a missing bucket 404.
# Run by tests/s3/run.sh, which gives the server's environment.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
command -v s3cmd >/dev/null || fail "s3cmd is missing (Debian package s3cmd)"
"$PY" -c 'import boto3' 2>/dev/null || fail "$PY lacks boto3 (Debian package python3-boto3)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/s3-clients.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
bucket=$LOADERX_TEST_BUCKET
prefix=t_clients/$$

# s3cmd's configuration from the environment alone, path-style.
host=${AWS_ENDPOINT_URL#http://}
cat >"$tmp/s3cfg" <<CFG
[default]
access_key = $AWS_ACCESS_KEY_ID
secret_key = $AWS_SECRET_ACCESS_KEY
host_base = $host
host_bucket = $host
bucket_location = $AWS_REGION
use_https = False
signature_v2 = False
CFG
s3() {
    s3cmd -c "$tmp/s3cfg" --no-progress "$@"
}

# scurl SECRET ARGS...: curl with a SigV4 signature made with SECRET.
# curl 7.88 leaves x-amz-content-sha256 out, which radosgw requires.
scurl() {
    local secret=$1
    shift
    curl -sS --aws-sigv4 "aws:amz:$AWS_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$secret" \
        -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@"
}

boto() {
    "$PY" - "$@" <<'PYEOF'
import os, sys
import boto3
from botocore.config import Config

s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                  region_name=os.environ["AWS_REGION"],
                  config=Config(s3={"addressing_style": "path"}))
op, bucket = sys.argv[1], sys.argv[2]
if op == "get":
    body = s3.get_object(Bucket=bucket, Key=sys.argv[3])["Body"].read()
    with open(sys.argv[4], "wb") as f:
        f.write(body)
elif op == "list":
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=sys.argv[3]):
        keys += [o["Key"] for o in page.get("Contents", [])]
    print("\n".join(keys))
PYEOF
}

# An object of an odd size, larger than one radosgw stripe (4 MiB).
head -c 5000011 /dev/urandom >"$tmp/obj"
s3 put -q "$tmp/obj" "s3://$bucket/$prefix/obj" || fail "s3cmd put"
boto get "$bucket" "$prefix/obj" "$tmp/back" || fail "boto3 get_object"
cmp "$tmp/obj" "$tmp/back" || fail "boto3 read back other bytes than s3cmd put"
ok "put with s3cmd, read back byte for byte with boto3"

# Ranged GETs: inside one stripe, across the stripe end, and a suffix.
url=$AWS_ENDPOINT_URL/$bucket/$prefix/obj
for range in 1000-66535 4194000-4194999 -100; do
    code=$(scurl "$AWS_SECRET_ACCESS_KEY" -o "$tmp/part" -w '%{http_code}' -H "Range: bytes=$range" "$url")
    [ "$code" = 206 ] || fail "GET of bytes=$range answered $code"
    case $range in
    -*) tail -c "${range#-}" "$tmp/obj" >"$tmp/want" ;;
    *) first=${range%-*} last=${range#*-}
       dd if="$tmp/obj" of="$tmp/want" iflag=skip_bytes,count_bytes status=none \
           skip="$first" count=$((last - first + 1)) ;;
    esac
    cmp "$tmp/part" "$tmp/want" || fail "GET of bytes=$range returned other bytes"
done
ok "ranged GETs with curl --aws-sigv4 return exactly their range"

# A listing with a prefix names the keys under it and nothing else.
printf a >"$tmp/small"
for key in dir/a dir/b dir/sub/c dirt other; do
    s3 put -q "$tmp/small" "s3://$bucket/$prefix/$key" || fail "s3cmd put $key"
done
got=$(boto list "$bucket" "$prefix/dir/" | tr '\n' ' ')
[ "$got" = "$prefix/dir/a $prefix/dir/b $prefix/dir/sub/c " ] || fail "listing $prefix/dir/ gave: $got"
got=$(s3 ls "s3://$bucket/$prefix/dir/" | awk '{print $NF}' | tr '\n' ' ')
[ "$got" = "s3://$bucket/$prefix/dir/sub/ s3://$bucket/$prefix/dir/a s3://$bucket/$prefix/dir/b " ] ||
    fail "s3cmd ls of $prefix/dir/ gave: $got"
ok "listings with a prefix (boto3 list_objects_v2, s3cmd ls) name exactly the keys under it"

code=$(scurl "wrong$AWS_SECRET_ACCESS_KEY" -o "$tmp/err" -w '%{http_code}' "$url")
[ "$code" = 403 ] || fail "a wrong secret got $code"
grep -q SignatureDoesNotMatch "$tmp/err" || fail "a wrong secret got: $(cat "$tmp/err")"
code=$(curl -sS -o "$tmp/err" -w '%{http_code}' "$url")
[ "$code" = 403 ] || fail "an unsigned GET got $code"
ok "a wrong secret and an unsigned request get 403"

code=$(scurl "$AWS_SECRET_ACCESS_KEY" -o "$tmp/err" -w '%{http_code}' "$AWS_ENDPOINT_URL/no-such-bucket-$$/obj")
[ "$code" = 404 ] || fail "a missing bucket got $code"
grep -q NoSuchBucket "$tmp/err" || fail "a missing bucket got: $(cat "$tmp/err")"
code=$(scurl "$AWS_SECRET_ACCESS_KEY" -o "$tmp/err" -w '%{http_code}' "$url.missing")
[ "$code" = 404 ] || fail "a missing key got $code"
ok "a missing bucket and a missing key get 404"

s3 del -q --recursive --force "s3://$bucket/$prefix/" >/dev/null || fail "s3cmd del"
[ -z "$(boto list "$bucket" "$prefix/")" ] || fail "objects left under $prefix/ after s3cmd del"
ok "s3cmd del --recursive leaves nothing under the prefix"

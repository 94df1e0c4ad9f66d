#!/bin/bash
# run.sh: the S3 tests of make check. It starts one throw-away S3 server
# (scripts/s3server.sh, Ceph's radosgw on 127.0.0.1 at ports of its own),
# makes the bucket $LOADERX_TEST_BUCKET, and runs every executable
# tests/s3/t_*.sh of the source tree in name order, each from the top build
# folder with the server's environment (AWS_ENDPOINT_URL,
# AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_DEFAULT_REGION,
# S3CMD_CONFIG), LOADERX_TEST_BUCKET, LOADERX_S3_DIR, srcdir, top_srcdir
# and top_builddir. A t_*.sh passes with 0, is skipped with 77 and fails
# otherwise; the bucket is shared, so each works under a prefix of its own
# name. The server is stopped on every exit, failed or interrupted.
#
# Skipped (77) only where the server cannot run: not root, or the Ceph
# programs missing (bash scripts/deps.sh). CI runs it as root with them.
# LOADERX_S3_TEST_TIMEOUT (default 600) bounds each t_*.sh, in seconds;
# LOADERX_S3_TESTS (a shell pattern, default t_*.sh) picks which run.
set -u

top_srcdir=$(cd "$(dirname "$0")/../.." && pwd)
top_builddir=$(cd "${top_builddir:-$PWD}" && pwd)
srcdir=$top_srcdir
timeout_s=${LOADERX_S3_TEST_TIMEOUT:-600}

if [ "$(id -u)" != 0 ]; then
    echo "SKIP: the S3 tests run their server as root only"
    exit 77
fi
for tool in ceph-mon ceph-osd radosgw radosgw-admin ceph ceph-authtool monmaptool; do
    if ! command -v "$tool" >/dev/null; then
        echo "SKIP: $tool is missing (Debian packages ceph-mon ceph-osd radosgw ceph-common: bash scripts/deps.sh)"
        exit 77
    fi
done

LOADERX_S3_DIR=$(mktemp -d /tmp/loaderx-s3-check.XXXXXX) || exit 1
export LOADERX_S3_DIR
server="$top_srcdir/scripts/s3server.sh"

child=""
cleanup() {
    local status=$?
    trap - EXIT INT TERM HUP
    if [ -n "$child" ]; then
        kill -TERM "$child" 2>/dev/null
        wait "$child" 2>/dev/null
    fi
    "$server" stop 2>&1 | sed 's/^/  /'
    rm -rf "$LOADERX_S3_DIR"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

t0=$(date +%s%N)
if ! "$server" start >/dev/null; then
    echo "FAIL: the S3 server did not start (the daemons' logs are above)"
    exit 1
fi
echo "server up in $((($(date +%s%N) - t0) / 1000000)) ms"
. "$LOADERX_S3_DIR/env"

export LOADERX_TEST_BUCKET=loaderx-test
code=$(curl -sS -o "$LOADERX_S3_DIR/mb.out" -w '%{http_code}' -X PUT \
    --aws-sigv4 "aws:amz:$AWS_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$AWS_ENDPOINT_URL/$LOADERX_TEST_BUCKET")
if [ "$code" != 200 ]; then
    echo "FAIL: making bucket $LOADERX_TEST_BUCKET answered $code: $(cat "$LOADERX_S3_DIR/mb.out")"
    exit 1
fi
export srcdir top_srcdir top_builddir

pass=0
failed=""
skip=0
for t in "$top_srcdir"/tests/s3/${LOADERX_S3_TESTS:-t_*.sh}; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    echo "=== $name"
    t1=$(date +%s%N)
    # In the background, so that a signal runs the trap at once rather than
    # after the test; timeout passes the cleanup's SIGTERM on to the test.
    (cd "$top_builddir" && exec timeout "$timeout_s" "$t") &
    child=$!
    rc=0
    wait "$child" || rc=$?
    child=""
    ms=$((($(date +%s%N) - t1) / 1000000))
    case $rc in
    0) echo "PASS: $name ($ms ms)"; pass=$((pass + 1)) ;;
    77) echo "SKIP: $name ($ms ms)"; skip=$((skip + 1)) ;;
    124) echo "FAIL: $name timed out after $timeout_s s"; failed="$failed $name" ;;
    *) echo "FAIL: $name exited $rc ($ms ms)"; failed="$failed $name" ;;
    esac
done

echo "S3 tests: $pass passed, $skip skipped, $(echo $failed | wc -w) failed${failed:+:$failed}"
if [ -n "$failed" ]; then
    echo "--- last lines of radosgw's log:"
    tail -n 30 "$LOADERX_S3_DIR/log/client.rgw.log"
    exit 1
fi
[ "$pass" -gt 0 ] || exit 77
exit 0

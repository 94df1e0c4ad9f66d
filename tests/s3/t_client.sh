#!/bin/bash
# t_client.sh: the S3 client's Check tests (tests/s3_client.c) against the
# server that tests/s3/run.sh started and described in AWS_ENDPOINT_URL,
# the AWS_* keys and LOADERX_TEST_BUCKET. Run from the top build folder,
# like every tests/s3/t_*.sh; S3_VALGRIND=1 runs the program under
# valgrind's memcheck, which must find no leak or error.
set -eu
top_builddir=${top_builddir:-${builddir:-$PWD}}
here=$(cd "$(dirname "$0")" && pwd)
prog="$top_builddir/tests/s3_client"
[ -x "$prog" ] || { echo "FAIL: $prog is not built (make check builds it)" >&2; exit 1; }
: "${AWS_ENDPOINT_URL:?tests/s3/run.sh sets it}" "${LOADERX_TEST_BUCKET:?tests/s3/run.sh sets it}"
export LOADERX_S3_PEER="$here/peer.py"
# The bucket the tests write under a prefix of their own.
/usr/bin/python3 "$LOADERX_S3_PEER" mkbucket "$LOADERX_TEST_BUCKET"
# Check forks for each test; its default timeout (4 s) is raised per case.
if [ "${S3_VALGRIND:-0}" = 1 ]; then
    exec "$top_builddir/libtool" --mode=execute valgrind --quiet --leak-check=full \
        --errors-for-leak-kinds=definite,indirect --error-exitcode=99 \
        --trace-children=no "$prog"
fi
exec "$prog"

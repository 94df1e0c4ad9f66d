# lib.sh: what the shell tests of tests/s3 share, sourced after `set -e`:
# NumPy's interpreter, the zr of the build tree, a way to fail and to say
# what passed, and the refusal to run without the server's environment
# (tests/s3/run.sh gives it).
PY=/usr/bin/python3
zr=${top_builddir:-.}/src/zr

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

ok() {
    echo "ok: $*"
}

: "${AWS_ENDPOINT_URL:?run through tests/s3/run.sh}" "${LOADERX_TEST_BUCKET:?}"

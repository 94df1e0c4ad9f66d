#!/bin/sh
# Stores in an object store, through the Python binding (python/tests/test_s3.py).
set -eu
top_srcdir=${srcdir:-.}
[ -x "${top_builddir:-.}/lib/.libs/libloaderx.so" ] || { echo "SKIP: no shared library"; exit 77; }
LOADERX_PYTESTS="$top_srcdir/python/tests/test_s3.py" exec sh "$top_srcdir/python/tests/pytest.sh"

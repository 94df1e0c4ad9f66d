#!/bin/sh
# Run the Python binding's pytest suite against this build tree: the
# package from the source folder, libloaderx from lib/.libs, and zr and
# zrecordfs from the build (for the tests that cross between C and Python).
# make check runs it from the top build folder with srcdir set.
set -eu

top_builddir=$(cd "${top_builddir:-.}" && pwd)
top_srcdir=$(cd "${srcdir:-.}" && pwd)
PY=${LOADERX_PYTHON:-/usr/bin/python3}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

"$PY" -c 'import numpy, cffi' 2>/dev/null ||
    fail "$PY lacks NumPy or cffi (Debian packages python3-numpy, python3-cffi)"
"$PY" -c 'import pytest' 2>/dev/null ||
    fail "$PY lacks pytest (Debian package python3-pytest)"

lib=$top_builddir/lib/.libs/libloaderx.so
[ -e "$lib" ] || fail "$lib is not built (the tests need the shared library)"
export LOADERX_LIBRARY="$lib"
export LD_LIBRARY_PATH="$top_builddir/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# libtool's wrapper scripts cost more to start than most commands they
# run: call the real programs, with the library path set above.
for prog in src/zr fs/zrecordfs tests/abi_layout; do
    name=$(basename "$prog")
    dir=$(dirname "$prog")
    if [ -x "$top_builddir/$dir/.libs/$name" ]; then
        path=$top_builddir/$dir/.libs/$name
    else
        path=$top_builddir/$prog
    fi
    case $name in
    zr) export ZR="$path" ;;
    zrecordfs) export ZRECORDFS="$path" ;;
    abi_layout) export ZR_ABI_LAYOUT="$path" ;;
    esac
done

# configure leaves zrecordfs out without libfuse3 or with --disable-fs;
# then the tests that mount it do not run.
if [ ! -x "$ZRECORDFS" ]; then
    echo "zrecordfs is not built (no libfuse3, or --disable-fs): test_mount.py is skipped"
    set -- --ignore="$top_srcdir/python/tests/test_mount.py" "$@"
fi

# A library built with --enable-sanitizers needs the sanitizer runtimes
# loaded before anything else in the interpreter, which is not built with
# them; leaks are not checked because CPython keeps memory until exit.
asan=$(ldd "$lib" | awk '/libasan/ { print $3 }')
ubsan=$(ldd "$lib" | awk '/libubsan/ { print $3 }')
if [ -n "$asan" ]; then
    export LD_PRELOAD="$asan${ubsan:+ $ubsan}"
    export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
fi

# The source folder may be read-only (make distcheck): write no bytecode
# and no cache into it.
export PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$top_srcdir/python${PYTHONPATH:+:$PYTHONPATH}"

# Creating a store syncs its files, which costs tens of milliseconds on a
# disk and nothing on tmpfs; the tests create hundreds. Their folders go
# to /dev/shm when it is there (unless TMPDIR says otherwise) and are
# removed at the end.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
    export TMPDIR=/dev/shm
fi
base=$(mktemp -d "${TMPDIR:-/tmp}/loaderx-pytest.XXXXXX")
trap 'rm -rf "$base"' EXIT

# LOADERX_PYTESTS names the test files to run instead of them all (the
# S3 tests run this way, from tests/s3/run.sh, with a server).
cd "$top_builddir"
status=0
# shellcheck disable=SC2086
"$PY" -m pytest -q -p no:cacheprovider --rootdir="$top_srcdir/python" \
    --basetemp="$base/tmp" ${LOADERX_PYTESTS:-"$top_srcdir/python/tests"} "$@" || status=$?
exit "$status"

#!/bin/bash
# What is installed and what is distributed is what the source tree holds:
# make install into a staging folder puts every module of python/loaderx
# in place, each of which then imports from there; make distdir copies
# every script, source and test file of python/ and tests/. The lists in
# the Makemodule.am files cannot drift from the folders without this
# failing.
set -euo pipefail
top_builddir=$PWD
srcdir=$(cd "${srcdir:-.}" && pwd)
PY=/usr/bin/python3
MAKE=${MAKE:-make}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

T=$(mktemp -d "${TMPDIR:-/tmp}/zr-install.XXXXXX")
trap 'rm -rf "$T"' EXIT

# sorted_names DIR PATTERN...: the files under DIR matching any PATTERN,
# as paths relative to DIR, one per line in bytewise order.
sorted_names() {
    local dir=$1 args=() p
    shift
    for p in "$@"; do
        args+=(${args[@]:+-o} -name "$p")
    done
    (cd "$dir" && find . \( -path ./python/gen -o -path ./gen \) -prune -o -path '*/__pycache__' -prune -o \
        -type f \( "${args[@]}" \) -print | sed 's|^\./||' | LC_ALL=C sort)
}

# The distribution: every file of these kinds in python/ and tests/.
"$MAKE" -s -C "$top_builddir" distdir distdir="$T/dist" >"$T/dist.log" 2>&1 ||
    { cat "$T/dist.log" >&2; fail "make distdir failed"; }
for d in python tests; do
    sorted_names "$srcdir/$d" '*.py' '*.sh' '*.c' '*.h' '*.supp' '*.md' >"$T/src-$d"
    sorted_names "$T/dist/$d" '*.py' '*.sh' '*.c' '*.h' '*.supp' '*.md' >"$T/dist-$d"
    missing=$(LC_ALL=C comm -23 "$T/src-$d" "$T/dist-$d")
    [ -z "$missing" ] || fail "make dist leaves out of $d/: $(echo $missing)"
done

if ! "$PY" -c 'import numpy, cffi' 2>/dev/null || ! grep -q '^loaderxpy_PYTHON = ' "$top_builddir/Makefile"; then
    echo "SKIP: the Python binding is not built, so make install has no package to check"
    exit 77
fi

"$MAKE" -s -C "$top_builddir" install DESTDIR="$T/dest" >"$T/install.log" 2>&1 ||
    { cat "$T/install.log" >&2; fail "make install failed"; }
init=$(find "$T/dest" -path '*/loaderx/__init__.py')
[ -n "$init" ] || fail "make install put no loaderx package under $T/dest"
pkg=$(dirname "$init")
lib=$(find "$T/dest" -name libloaderx.so -type l -o -name libloaderx.so -type f | head -1)
[ -n "$lib" ] || fail "make install put no libloaderx.so under $T/dest"

sorted_names "$srcdir/python/loaderx" '*.py' >"$T/src-modules"
sorted_names "$pkg" '*.py' | grep -v -x '_libdir.py' >"$T/installed-modules" || true
missing=$(LC_ALL=C comm -23 "$T/src-modules" "$T/installed-modules")
[ -z "$missing" ] || fail "make install leaves out of the package: $(echo $missing)"

# A library built with --enable-sanitizers needs their runtimes loaded
# first in the interpreter, which is not built with them (as pytest.sh).
asan=$(ldd "$lib" | awk '/libasan/ { print $3 }')
ubsan=$(ldd "$lib" | awk '/libubsan/ { print $3 }')
if [ -n "$asan" ]; then
    export LD_PRELOAD="$asan${ubsan:+ $ubsan}"
    export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
fi

# Each module imports from the staging folder, none from the source tree.
# The recorded library folder is the final one, not the staging one, so
# the library is named here.
modules=$(sed -n 's/\.py$//p' "$T/src-modules" | grep -v -x '__init__')
(cd / && env LOADERX_LIBRARY="$lib" PYTHONPATH="$(dirname "$pkg")" PYTHONDONTWRITEBYTECODE=1 \
    "$PY" -c '
import importlib, importlib.util, os, sys
pkg = sys.argv[1]
import loaderx
assert os.path.dirname(loaderx.__file__) == pkg, loaderx.__file__
for name in sys.argv[2:]:
    if name == "torch" and importlib.util.find_spec("torch") is None:
        print("loaderx.torch: torch is not installed; only its presence is checked")
        continue
    m = importlib.import_module("loaderx." + name)
    assert os.path.dirname(m.__file__) == pkg, (name, m.__file__)
print("imported from", pkg, ":", " ".join(sys.argv[2:]))
' "$pkg" $modules) || fail "a module of the installed package does not import"
echo "install and dist: ok"

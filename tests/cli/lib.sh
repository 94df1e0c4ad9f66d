# lib.sh: the shared setup of zr's shell tests, sourced by each of them.
#
# Each test runs in a fresh temporary folder that is removed on exit, uses
# Debian's python3 with NumPy as the independent reference, and exits
# non-zero at the first failed expectation.
set -euo pipefail

top_builddir=${top_builddir:-$PWD}
PY=/usr/bin/python3

# In a shared build, src/zr is libtool's wrapper script, whose start-up
# costs more than most of the commands it runs; call the real program
# with the library path the wrapper would set.
if [ -z "${ZR:-}" ] && [ -x "$top_builddir/src/.libs/zr" ]; then
    ZR=$top_builddir/src/.libs/zr
    export LD_LIBRARY_PATH=$top_builddir/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
ZR=${ZR:-$top_builddir/src/zr}
case $ZR in /*) ;; *) ZR=$PWD/$ZR ;; esac
export ZR

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

[ -x "$ZR" ] || fail "zr is not built at $ZR"
"$PY" -c 'import numpy' 2>/dev/null || fail "$PY lacks NumPy (Debian package python3-numpy)"

T=$(mktemp -d "${TMPDIR:-/tmp}/zr-cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T"

zr() {
    "$ZR" "$@"
}

# expect_fail STATUS PATTERN CMD...: CMD exits with STATUS and writes one
# line to stderr, of the form "zr: ...", that matches the regex PATTERN.
expect_fail() {
    local want=$1 pat=$2 rc=0
    shift 2
    "$@" >"$T/.out" 2>"$T/.err" || rc=$?
    [ "$rc" = "$want" ] || fail "'$*' exited $rc, expected $want; stderr: $(cat "$T/.err")"
    [ "$(wc -l <"$T/.err")" = 1 ] || fail "'$*' stderr is not one line: $(cat "$T/.err")"
    grep -q '^zr: ' "$T/.err" || fail "'$*' stderr does not start with 'zr: ': $(cat "$T/.err")"
    grep -q -e "$pat" "$T/.err" || fail "'$*' stderr lacks '$pat': $(cat "$T/.err")"
}

# py SCRIPT ARGS...: run a Python snippet with NumPy imported as np.
py() {
    local script=$1
    shift
    "$PY" -c "import sys, numpy as np
$script" "$@"
}

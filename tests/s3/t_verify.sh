#!/bin/bash
# t_verify.sh: zr verify of a remote store whose chunk object is deleted,
# shortened or replaced after the store was opened. The scan cannot read
# that object; zr verify says which it is and why, and exits 1.
#
# zr is stopped between its open and its scan by strace, which sends it
# SIGSTOP at its first ioctl: the isatty of its progress line, made just
# before the scan starts. The object is changed while it is stopped and
# zr is let go on. A store left as it was verifies clean the same way,
# so the stop itself changes nothing.
# Run by tests/s3/run.sh, which gives the server's environment.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
peer=$(cd "$(dirname "$0")" && pwd)/peer.py
"$PY" -c 'import boto3, numpy' 2>/dev/null ||
    fail "$PY lacks boto3 or numpy (Debian packages python3-boto3 python3-numpy)"
command -v strace >/dev/null || fail "strace is needed (Debian package strace, scripts/deps.sh)"
[ -x "$zr" ] || fail "$zr is not built"
top=$(cd "${top_builddir:-.}" && pwd)
# The program itself, not libtool's wrapper script, whose shell makes
# ioctls of its own before it runs zr.
if [ -x "$top/src/.libs/zr" ]; then
    run_zr=(env "LD_LIBRARY_PATH=$top/lib/.libs" "$top/src/.libs/zr")
else
    run_zr=("$top/src/zr")
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/s3-verify.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
base=s3://$LOADERX_TEST_BUCKET/t_verify/$$

"$PY" -c 'import numpy as np; np.save("s.npy", np.random.default_rng(7).integers(
    0, 255, size=(400, 3, 32, 32), dtype=np.uint8))'
"$zr" import s s.npy -q

# change URL HOW: the store's 0.chunk deleted, shortened or replaced (its
# bytes each one more, the length kept), or left as it was (none), by boto3.
change() {
    local url=$1 how=$2
    local bucket=${url#s3://}
    local key=${bucket#*/}/0.chunk
    bucket=${bucket%%/*}
    case $how in
    deleted) "$PY" "$peer" delete "$bucket" "$key" ;;
    shortened)
        head -c $(($(stat -c %s s/0.chunk) / 2)) s/0.chunk > short
        "$PY" "$peer" put "$bucket" "$key" short ;;
    replaced)
        LC_ALL=C tr '\000-\377' '\001-\377\000' < s/0.chunk > changed
        "$PY" "$peer" put "$bucket" "$key" changed ;;
    esac
}

# verify_changed URL HOW: zr verify URL, its object changed once it has
# opened the store; its status to rc, its stdout and stderr to out, err.
# The tracer's log says when zr has entered the stop (not just a stop of
# the tracer's own at a system call): only then is it changed and let go.
verify_changed() {
    rm -f trace
    # LeakSanitizer cannot run in a traced process (a build with
    # --enable-sanitizers): the other sanitizers still do.
    ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
        strace -qq -o trace -e trace=ioctl -e inject=ioctl:signal=SIGSTOP:when=1 \
        "${run_zr[@]}" verify "$1" > out 2> err &
    local tracer=$! pid="" i
    for i in $(seq 300); do
        grep -q "stopped by SIGSTOP" trace 2>/dev/null && break
        kill -0 "$tracer" 2>/dev/null || break
        sleep 0.1
    done
    grep -q "stopped by SIGSTOP" trace 2>/dev/null || fail "zr verify $1 never reached its scan"
    pid=$(pgrep -P "$tracer") || fail "zr verify $1 is not running under the tracer"
    change "$1" "$2"
    kill -CONT "$pid"
    rc=0
    wait "$tracer" || rc=$?
}

"$zr" push s "$base/none" -q
verify_changed "$base/none" none
[ "$rc" = 0 ] || fail "zr verify of a store left as it was exited $rc: $(cat out err)"
grep -q "400 records checked, no problems" out || fail "zr verify said: $(cat out)"
ok "a store left as it was verifies clean after the stop"

for how in deleted shortened replaced; do
    url=$base/$how
    "$zr" push s "$url" -q
    verify_changed "$url" "$how"
    [ "$rc" = 1 ] || fail "zr verify of a store whose 0.chunk was $how exited $rc: $(cat out err)"
    case $how in
    deleted) why="the object is missing" ;;
    shortened) why="the object is shorter than" ;;
    replaced) why="the object changed since it was listed" ;;
    esac
    grep -q "^$url/0.chunk: .*$why" out ||
        fail "zr verify of a store whose 0.chunk was $how said: $(cat out)"
    grep -q "^zr: verify: $url: 1 problem found" err ||
        fail "zr verify of a store whose 0.chunk was $how ended with: $(cat err)"
    ok "zr verify names 0.chunk $how after the open, and why, and exits 1"
done

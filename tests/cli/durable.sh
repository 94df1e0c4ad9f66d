#!/bin/bash
# Every zr command that writes a store makes it durable before it reports
# success: run under strace, each one syncs every store file it wrote
# after its last write to it, meta.zr (whose header makes records visible)
# among them. strace sees the system calls themselves, so the check holds
# whichever part of zr or the library makes the sync.
. "${srcdir:-.}/tests/cli/lib.sh"
command -v strace >/dev/null || fail "strace is needed (Debian package strace, scripts/deps.sh)"

# Compressible records, enough to train a dictionary on, and a few files.
py '
import os
rng = np.random.default_rng(3)
a = (np.arange(64)[None, :] * rng.integers(1, 4, size=(2000, 1))).astype("<f4")
np.save("a.npy", a)
np.save("r.npy", np.arange(40 * 3, dtype="<i2").reshape(40, 3))
os.mkdir("files")
for i in range(1, 6):
    open("files/f%d" % i, "wb").write(bytes(range(256)) * i)
'

# traced STORE CMD ARGS...: run zr CMD ARGS under strace, its trace noted
# in traces.txt with the store to check.
n=0
traced() {
    local store=$1
    shift
    n=$((n + 1))
    # LeakSanitizer (a --enable-sanitizers build) cannot run under ptrace.
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        strace -f -y -qq -e trace=pwrite64,pwritev,pwritev2,write,fsync,fdatasync \
        -o "trace$n.txt" "$ZR" "$@" || fail "zr $* failed under strace"
    printf '%s\t%s\t%s\n' "trace$n.txt" "$store" "zr $*" >>traces.txt
}

traced d create d --dtype '<f4' --shape 64
traced d append d a.npy -q
traced rg create rg --dtype '<i2' --ragged --codec raw
traced rg append rg r.npy -q
traced z import z a.npy -q
traced raw import raw a.npy --codec raw -q
traced fl import fl --files files -q
find files -type f | LC_ALL=C sort >list.txt
traced fl append fl --files - -q <list.txt
traced raw delete raw 0 7 100:1400
traced raw compact raw -q
traced z delete z 1999
traced z compact z -q
traced rc recode raw rc --codec zstd -q
traced rr recode z rr --codec raw -q
traced dc recode z dc --codec zstd_dict --tier fast -q

# Every file of the store that a command wrote was synced after its last
# write to it.
"$PY" -c '
import os, re, sys
call = re.compile(r"^\d+\s+(\w+)\(\d+<([^>]*)>")
for entry in open("traces.txt"):
    log, store, what = entry.rstrip("\n").split("\t")
    folder = os.path.realpath(store) + os.sep
    last_write, last_sync = {}, {}
    for n, line in enumerate(open(log)):
        m = call.match(line)
        if not m or not m.group(2).startswith(folder):
            continue
        name = m.group(2)[len(folder):]
        (last_sync if m.group(1) in ("fsync", "fdatasync") else last_write)[name] = n
    assert "meta.zr" in last_write, "%s: no write to meta.zr seen: %s" % (what, sorted(last_write))
    late = sorted(p for p, n in last_write.items() if last_sync.get(p, -1) < n)
    assert not late, "%s: written after their last sync: %s" % (what, late)
' || fail "a command reported success before its writes were durable"

# The records are all there.
for s in d raw rc z rr dc; do
    zr export "$s" "$s.npy" -q
done
py '
a = np.load("a.npy")
assert np.array_equal(np.load("d.npy"), a)
assert np.load("raw.npy").shape == (2000 - 1302, 64)
assert np.array_equal(np.load("rc.npy"), np.load("raw.npy"))
assert np.array_equal(np.load("rr.npy"), a[:1999])
assert np.array_equal(np.load("dc.npy"), a[:1999])
'
[ "$(zr info fl --json | py 'import json; print(json.load(sys.stdin)["records"])')" = 10 ] ||
    fail "fl does not hold 10 records"
exit 0

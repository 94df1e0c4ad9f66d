#!/bin/bash
# Replay the seed corpus and every regression input of each fuzz harness
# (tests/fuzz/corpus/NAME) through the harness built with the ordinary
# compiler: no libFuzzer needed. doc/reliability.md has the fuzzing runs.
set -euo pipefail
top_builddir=${top_builddir:-$PWD}
srcdir=${srcdir:-.}
for name in store identity npy indexlist; do
    "$top_builddir/tests/fuzz/replay_$name" "$srcdir/tests/fuzz/corpus/$name" >/dev/null ||
        { echo "FAIL: replay of tests/fuzz/corpus/$name" >&2; exit 1; }
done

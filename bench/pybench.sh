#!/bin/sh
# Runs the Python benchmark (bench/pybench.py) with Debian's interpreter
# against the libloaderx and bench/pygather of a build tree, and prints
# doc/python-benchmarks.md on stdout.
#   usage: bench/pybench.sh [build-dir] [pybench.py options] > doc/python-benchmarks.md
# The build directory (default: the current one) must have run `make bench`.
# Needs python3-numpy, python3-cffi, python3-torch (scripts/deps.sh),
# python3-h5py and python3-lmdb (scripts/deps.sh --bench).
set -eu
build=${1:-.}
[ $# -gt 0 ] && shift
src=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x "$build/bench/pygather" ]; then
    echo "pybench.sh: $build/bench/pygather is not built; run make bench" >&2
    exit 1
fi
exec /usr/bin/python3 "$src/bench/pybench.py" --build "$build" "$@"

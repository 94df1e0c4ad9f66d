#!/usr/bin/env bash
# The test command: install what is missing, build from a clean configure,
# run every test (make check), and print Check's summary lines.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
autoreconf -fi
./configure
make -j"$(nproc)"
status=0
make -j"$(nproc)" check || status=$?
echo "== Check summaries =="
grep -h -E '^[0-9]+%: Checks:' tests/*.log || true
grep -h -E '[0-9]+ (passed|failed)' python/tests/*.log 2>/dev/null || true
grep -h -E '^(S3 tests:|SKIP:)' tests/s3/run.sh.log 2>/dev/null || true
if [ "$status" -ne 0 ]; then
    echo "== Logs of failed tests =="
    for t in $(grep -l -E '^:test-result: (FAIL|ERROR)' $(find . -name '*.trs' -not -path './loaderx-*') 2>/dev/null); do
        echo "--- ${t%.trs}.log"
        cat "${t%.trs}.log"
    done
fi
exit "$status"

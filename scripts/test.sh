#!/usr/bin/env bash
# The test command: install what is missing, build from a clean configure,
# run every test (make check), then build the same sources again with
# AddressSanitizer and UBSan in a folder of their own and run every test
# there too; print Check's summary lines of each. LOADERX_SANITIZERS=0
# leaves the second run out.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
autoreconf -fi
./configure
make -j"$(nproc)"

# summarise DIR NAME STATUS: the summary lines of the tests run in DIR,
# and the logs of those that failed.
summarise() {
    local dir=$1 name=$2 status=$3
    echo "== Check summaries ($name) =="
    (
        cd "$dir"
        grep -h -E '^[0-9]+%: Checks:' tests/*.log || true
        grep -h -E '[0-9]+ (passed|failed)' python/tests/*.log 2>/dev/null || true
        grep -h -E '^(S3 tests:|SKIP:)' tests/s3/run.sh.log 2>/dev/null || true
        if [ "$status" -ne 0 ]; then
            echo "== Logs of failed tests ($name) =="
            for t in $(grep -l -E '^:test-result: (FAIL|ERROR)' \
                $(find . -name '*.trs' -not -path './loaderx-*') 2>/dev/null); do
                echo "--- ${t%.trs}.log"
                cat "${t%.trs}.log"
            done
        fi
    )
}

status=0
make -j"$(nproc)" check || status=$?
summarise . "make check" "$status"

san_status=0
if [ "${LOADERX_SANITIZERS:-1}" != 0 ]; then
    # A configured source folder refuses a second build beside it: the
    # sanitizer build gets a copy of the distributed sources.
    # The folder is readable by all: some tests run zr as another user.
    san=$(mktemp -d "${TMPDIR:-/tmp}/loaderx-sanitizers.XXXXXX")
    chmod 755 "$san"
    make -s distdir distdir="$san/src"
    (
        cd "$san/src" &&
            ./configure --enable-sanitizers &&
            make -j"$(nproc)" &&
            make -j"$(nproc)" check
    ) || san_status=$?
    summarise "$san/src" "ASan and UBSan" "$san_status"
    [ "$san_status" -ne 0 ] || rm -rf "$san"
fi
if [ "$status" -ne 0 ] || [ "$san_status" -ne 0 ]; then
    exit 1
fi

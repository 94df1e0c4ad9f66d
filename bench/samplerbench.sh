#!/bin/sh
# Runs bench/samplerbench and NumPy's integer generator in the same run and
# prints doc/loader-benchmarks.md on stdout.
#   usage: bench/samplerbench.sh [build-dir] > doc/loader-benchmarks.md
# The build directory (default: the current one) must have run `make bench`.
# NumPy comes from /usr/bin/python3, Debian's interpreter.
set -eu
build=${1:-.}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

"$build/bench/samplerbench" >"$out" 2>/dev/null

# NumPy's default generator drawing B uniform integers in [0, 1,000,000):
# median over 7 repetitions of about four million indices each, the same
# protocol as samplerbench uses for the sampler.
/usr/bin/python3 - >>"$out" <<'PY'
import statistics, time
import numpy as np
rng = np.random.default_rng(0)
for b in (256, 1024, 8192):
    steps = (4 << 20) // b
    ns = []
    for _ in range(7):
        t0 = time.perf_counter_ns()
        for _ in range(steps):
            rng.integers(0, 1_000_000, size=b)
        ns.append((time.perf_counter_ns() - t0) / (steps * b))
    print("numpy iid %d %.3f" % (b, statistics.median(ns)))
PY

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
load=$(cut -d ' ' -f 1-3 /proc/loadavg)

awk -v nproc="$(nproc)" -v cpu="$cpu" -v load="$load" '
$1 == "sampler" { s[$2, $3] = $4 }
$1 == "numpy"   { np[$3] = $4 }
$1 == "plain"   { plain[$2] = $3 }
$1 == "plain2"  { plain2[$2] = $3 }
$1 == "loader"  { ld[$2, $3] = $4; rss[$2, $3] = $5; anon[$2, $3] = $6; file[$2, $3] = $7 }
$1 == "rss_start" { rss0 = $2 }
END {
    print "# Sampler and loader benchmarks"
    print ""
    printf "Machine: %s cores, %s, load average %s at the end of the run.\n", nproc, cpu, load
    print "The machine is shared and loaded, so every figure is the median of several"
    print "timed repetitions (7 for the sampler and NumPy, 5 for the loaders), taken"
    print "in one run of:"
    print ""
    print "    make bench && bench/samplerbench.sh > doc/loader-benchmarks.md"
    print ""
    print "## Sampler: nanoseconds per index"
    print ""
    print "Index space 1,000,000; each repetition draws about four million indices"
    print "(4 Mi / batch steps). NumPy is `np.random.default_rng(0).integers(0, 1_000_000, size=B)`"
    print "from /usr/bin/python3 in the same run. The ratio is NumPy / iid: how many"
    print "times faster the iid sampler draws an index (the target is at least 2)."
    print ""
    print "| batch | sequential | iid | cyclic | NumPy | iid vs NumPy |"
    print "|------:|-----------:|----:|-------:|------:|-------------:|"
    n = split("256 1024 8192", B, " ")
    for (i = 1; i <= n; i++) {
        b = B[i]
        printf "| %s | %.2f | %.2f | %.2f | %.2f | %.1fx |\n", b, s["sequential", b], s["iid", b], s["cyclic", b], np[b], np[b] / s["iid", b]
    }
    print ""
    print "## Loader: batches per second"
    print ""
    print "A Dense store of 1,000 uint8 3x224x224 records (smooth synthetic images,"
    print "147 KiB each) written by the benchmark into a temporary folder on local disk"
    print "and read with a warm page cache; batch 256 (36.75 MiB), iid sampling, no"
    print "transform, one worker thread. The plain loop is zr_sampler_batch followed by"
    print "zr_gather_dense into one reused buffer on the calling thread; the ratio is"
    print "loader / plain (the target is at least 0.9). *plain, 2 buffers* is the same"
    print "loop gathering into two buffers in turn, as a caller must do to keep one"
    print "batch while the next is gathered; the batches of the loader rotate through"
    print "at least two buffers too. With one buffer, part of it is still in the CPU"
    print "caches when the next gather writes it again. Each round runs one repetition"
    print "of each plain loop and of a fresh loader of each depth, in that order; each"
    print "repetition runs for at least half a second, after one untimed repetition"
    print "for each loader and one untimed pass over the buffers of each plain loop."
    print ""
    print "Memory: peak RSS is getrusage ru_maxrss after that loader first ran (in the"
    print "first round). It is the peak of the whole process so far (raw runs first,"
    print "then zstd; in each round depth 2 before depth 4), and it"
    print "counts the store chunk pages the library maps (the raw store is 143 MiB),"
    print "which the kernel may drop at will. The anonymous and file-backed resident"
    print "sizes (RssAnon, RssFile from /proc/self/status, largest sample taken after"
    print "each repetition while the loader runs) separate the two. The bound for the"
    print "memory the loader owns is (depth + 1) x 37 MiB + 64 MiB."
    printf "Peak RSS before any store was written: %.1f MiB.\n", rss0 / 1024
    print ""
    print "| codec | plain | plain, 2 buffers | depth | loader | ratio | ratio to 2 buffers | peak RSS (MiB) | anon (MiB) | file (MiB) | bound (MiB) |"
    print "|-------|------:|------:|------:|-------:|------:|------:|---------------:|-----------:|-----------:|------------:|"
    split("raw zstd", C, " ")
    split("2 4", D, " ")
    for (i = 1; i <= 2; i++)
        for (j = 1; j <= 2; j++) {
            c = C[i]; d = D[j]
            printf "| %s | %.2f | %.2f | %s | %.2f | %.2f | %.2f | %.1f | %.1f | %.1f | %d |\n", c, plain[c], plain2[c], d, ld[c, d], ld[c, d] / plain[c], ld[c, d] / plain2[c], rss[c, d] / 1024, anon[c, d] / 1024, file[c, d] / 1024, (d + 1) * 37 + 64
        }
}' "$out"

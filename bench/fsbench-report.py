#!/usr/bin/python3
# Turns the measurements of bench/fsbench.sh (one line per run: workload,
# case, metric, rate, MiB/s) into doc/fs-benchmarks.md: medians over the
# repetitions, one table per workload, and the ratios the targets name.
# What follows these sections in the page ("Cold reads" on) is kept.
import statistics
import sys
from collections import defaultdict

results, out, machine, cmdline = sys.argv[1:5]
n_vision, n_token, n_ls, gather_iters = (int(v) for v in sys.argv[5:9])

runs = defaultdict(list)
with open(results) as f:
    for line in f:
        w, c, m, rate, mib = line.split("\t")
        runs[(w, c, m)].append((float(rate), float(mib)))


def med(w, c, m, k=0):
    return statistics.median(r[k] for r in runs[(w, c, m)])


CASES = [
    ("plain", "plain files (local disk)"),
    ("sqfs-none", "squashfuse_ll, uncompressed image"),
    ("sqfs-zstd", "squashfuse_ll, zstd image"),
    ("zrfs-raw", "zrecordfs raw"),
    ("zrfs-zstd", "zrecordfs zstd"),
    ("zrfs-raw-mt", "zrecordfs raw, -o mt"),
    ("zrfs-zstd-mt", "zrecordfs zstd, -o mt"),
    ("zrfs-raw-noopen", "zrecordfs raw, -o noopen"),
    ("zrfs-zstd-noopen", "zrecordfs zstd, -o noopen"),
    ("ceiling", "fuse_ceiling"),
    ("ceiling-noopen", "fuse_ceiling, noopen"),
]
METRICS = ["first", "warm", "first-2", "warm-2"]
WORK = {
    "vision": f"vision: {n_vision} records of uint8 3x224x224 (147 KiB)",
    "token": f"token: {n_token} records of int32[512] (2 KiB)",
}

lines = []
put = lines.append
put("# zrecordfs benchmark")
put("")
put("The same records read through plain files on the local disk, squashfuse_ll")
put("(squashfs images built by mksquashfs, zstd and uncompressed), zrecordfs (raw")
put("and zstd stores; default mode, `-o mt` and `-o noopen`) and `fuse_ceiling`, a")
put("do-nothing FUSE server that serves files of the same sizes from memory with")
put("the same options and the same loop (the cost of FUSE itself). On two CPUs")
put("or fewer zrecordfs and fuse_ceiling serve on one thread by default, which")
put("polls for the next request for 300 us before it sleeps (`-o spin`, see")
put("zrecordfs(1)); `-o mt` rows are zrecordfs on libfuse's multi-threaded loop;")
put("squashfuse_ll runs as shipped (multi-threaded, never polling).")
put("")
put(f"- Machine: {machine}")
put(f"- Command: `make bench && {cmdline}`")
reps = len(runs[("vision", "plain", "first")])
put(f"- Medians of {reps} runs; the machine is shared, so single runs vary.")
put("- *first*: a fresh mount (daemon caches empty), after the kernel page cache")
put("  of the backing files (plain files, store, image) was dropped with")
put("  `posix_fadvise(POSIX_FADV_DONTNEED)`; every file opened, read whole with")
put("  1 MiB reads, closed. *warm*: the same again. *-2*: two readers, each taking")
put("  every other record, on a fresh mount.")
put("- Every record was read once more through every mount after the timed reads")
put("  of the first run and its checksum compared with the source (fuse_ceiling:")
put("  its sizes); a difference stops the benchmark.")
put("")
for w, title in WORK.items():
    put(f"## {title}")
    put("")
    put("Files/s, MiB/s in parentheses.")
    put("")
    put("| | first | warm | first, 2 readers | warm, 2 readers |")
    put("|---|---:|---:|---:|---:|")
    for c, label in CASES:
        cells = [f"{med(w, c, m):,.0f} ({med(w, c, m, 1):,.0f})" for m in METRICS]
        put(f"| {label} | " + " | ".join(cells) + " |")
    put("")

put(f"## ls -l of {n_ls:,} records")
put("")
put("Seconds for `ls -l` to /dev/null. The plain folder is listed warm (its")
put("inodes cached); the FUSE mounts right after mounting (first) and again.")
put("The plain folder's files are empty (a listing reads inodes, not data);")
put("the records behind the FUSE listings hold 64 bytes each.")
put("")
put("| | first | warm |")
put("|---|---:|---:|")
put(f"| plain files | | {med('ls', 'plain', 'ls-warm'):.3f} |")
put(f"| zrecordfs | {med('ls', 'zrfs-raw', 'ls-first'):.3f} | {med('ls', 'zrfs-raw', 'ls-warm'):.3f} |")
put(f"| fuse_ceiling | {med('ls', 'ceiling', 'ls-first'):.3f} | {med('ls', 'ceiling', 'ls-warm'):.3f} |")
put("")
put("## .gather of 256-record batches vs zr_gather_dense")
put("")
put("Records/s (MiB/s). One descriptor; per batch one index-list write, then")
put("(O_DIRECT) one read of the whole batch into a page-aligned buffer of its size,")
put("or (stream, the descriptor opened without O_DIRECT) 1 MiB reads to end of")
put(f"file; {gather_iters} timed batches (vision), {gather_iters * 10} (token), after 4")
put("untimed batches whose bytes were compared with the library's. Ratios are")
put("against the library's gather of the same batches. *fuse_ceiling*: the same")
put("O_DIRECT read of one batch-sized file that fuse_ceiling serves from memory,")
put("nothing gathered, on the default loop and on libfuse's multi-threaded one")
put("(`-o mt`, whose threads copy the replies in parallel as zrecordfs's reply")
put("threads do): what FUSE itself allows such a read. The kernel copies each")
put("reply into the reader's pinned pages one page at a time, pinning each")
put("source page on its own as well; that copy, not the gather, is what the")
put("raw rows pay.")
put("")
put("| | O_DIRECT | O_DIRECT, -o mt | stream | library | fuse_ceiling | fuse_ceiling, -o mt "
    "| ratio | ratio, -o mt |")
put("|---|---:|---:|---:|---:|---:|---:|---:|---:|")


def cell(w, c):
    return f"{med(w, c, 'gather'):,.0f} ({med(w, c, 'gather', 1):,.0f})"


for w in WORK:
    for s in ("raw", "zstd"):
        b = med(w, f"lib-{s}", "gather")
        put(f"| {w} {s} | {cell(w, f'zrfs-{s}')} | {cell(w, f'zrfs-{s}-mt')} | "
            f"{cell(w, f'zrfs-{s}-stream')} | {cell(w, f'lib-{s}')} | {cell(w, 'ceiling')} | "
            f"{cell(w, 'ceiling-mt')} | "
            f"{med(w, f'zrfs-{s}', 'gather') / b:.2f} | {med(w, f'zrfs-{s}-mt', 'gather') / b:.2f} |")
put("")

put("## Ratios against the targets")
put("")
put("| ratio | vision | token | target |")
put("|---|---:|---:|---|")


def ratio(label, num, den, metric, target, dmetric=None):
    cells = []
    for w in WORK:
        cells.append(f"{med(w, num, metric) / med(w, den, dmetric or metric):.2f}")
    put(f"| {label} | " + " | ".join(cells) + f" | {target} |")


for s, sq in (("raw", "sqfs-none"), ("zstd", "sqfs-zstd")):
    for m in ("first", "warm"):
        ratio(f"zrecordfs {s} / fuse_ceiling, {m}", f"zrfs-{s}", "ceiling", m, "≥ 0.8")
    for m in ("first", "warm"):
        ratio(f"zrecordfs {s} / squashfuse_ll {sq[5:]}, {m}", f"zrfs-{s}", sq, m, "≥ 1.0")
for s, sq in (("raw", "sqfs-none"), ("zstd", "sqfs-zstd")):
    ratio(f"zrecordfs {s} noopen / plain files, warm", f"zrfs-{s}-noopen", "plain", "warm",
          "≥ 0.5")
    ratio(f"zrecordfs {s} noopen / squashfuse_ll {sq[5:]}, first", f"zrfs-{s}-noopen", sq,
          "first", "≥ 1.5")
for s in ("raw", "zstd"):
    for m in METRICS:
        ratio(f"zrecordfs {s}: default / -o mt, {m}", f"zrfs-{s}", f"zrfs-{s}-mt", m,
              "> 1: the default loop wins")
gcells = [f"{med(w, 'zrfs-' + s, 'gather') / med(w, 'lib-' + s, 'gather'):.2f}"
          for w in WORK for s in ("raw",)]
put(f"| .gather / library gather (raw) | {gcells[0]} | {gcells[1]} | ≥ 0.6 (vision) |")
gcells = [f"{med(w, 'zrfs-zstd', 'gather') / med(w, 'lib-zstd', 'gather'):.2f}" for w in WORK]
put(f"| .gather / library gather (zstd) | {gcells[0]} | {gcells[1]} | ≥ 0.6 (vision) |")
gcells = [f"{med(w, 'zrfs-raw', 'gather') / med(w, 'ceiling', 'gather'):.2f}" for w in WORK]
put(f"| .gather raw / fuse_ceiling direct read | {gcells[0]} | {gcells[1]} | (the bound) |")
gcells = [f"{med(w, 'zrfs-raw', 'gather') / med(w, 'ceiling-mt', 'gather'):.2f}" for w in WORK]
put(f"| .gather raw / fuse_ceiling -o mt direct read | {gcells[0]} | {gcells[1]} | (the bound) |")
gcells = [f"{med(w, 'ceiling-mt', 'gather') / med(w, 'lib-raw', 'gather'):.2f}" for w in WORK]
put(f"| fuse_ceiling -o mt direct read / library gather (raw) | {gcells[0]} | {gcells[1]} "
    "| (what FUSE leaves) |")
plain_ls = med("ls", "plain", "ls-warm")
put("")
put(f"ls -l time, zrecordfs / plain files: first {med('ls', 'zrfs-raw', 'ls-first') / plain_ls:.2f}, "
    f"warm {med('ls', 'zrfs-raw', 'ls-warm') / plain_ls:.2f} (target ≤ 2).")
put("")
put("The raw measurements (one line per run) are in doc/fs-benchmarks.tsv.")

# The sections from "## Cold reads" on are measured by other benchmarks
# (bench/coldbench, bench/fsseq.sh) and written by hand: they are kept as
# they are, after the sections written here.
kept = ""
try:
    with open(out) as f:
        old = f.read()
    at = old.find("\n## Cold reads\n")
    if at >= 0:
        kept = old[at:]
except FileNotFoundError:
    pass
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n" + kept)

#!/bin/sh
# The store tables alone: build bench/zrbench (make bench), run it, and
# print the method followed by the measured tables on stdout. Arguments
# are passed to bench/zrbench (for example --quick, or --only
# dense-vision,zrecord-raw,memcpy-limit). With --write first, the page
# goes to doc/engine-benchmarks.md instead. bench/run is the command that
# writes doc/benchmarks.md (these tables, the file system and the loader
# benchmarks together).
#
# Run it from a configured build tree (./configure has run) while the
# machine is otherwise idle: the ratios compare rows of one run, but other
# processes on the same cores still add noise.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

out=-
if [ $# -gt 0 ] && [ "$1" = "--write" ]; then
    shift
    out=doc/engine-benchmarks.md
fi

if [ ! -f Makefile ]; then
    echo "run-engine.sh: configure the tree first (autoreconf -fi && ./configure)" >&2
    exit 1
fi
make -s bench >&2

# The stores go to a folder of this run under /var/tmp (a local disk, not
# tmpfs), removed however the run ends; a --dir argument overrides it.
tables=$(mktemp)
work=$(mktemp -d /var/tmp/zrbench-run.XXXXXX)
trap 'rm -rf "$tables" "$work"' EXIT INT TERM
bench/zrbench --dir "$work" "$@" >"$tables"

if [ "$out" = "-" ]; then
    cat "$tables"
    exit 0
fi

{
cat <<'EOF'
# Engine benchmarks

What the record engine costs against what the machine can do at all: for
four workloads, the three codecs of a zrecord store are measured next to
two limits held in RAM, in the same run, on the same records and the same
index plans. The tables below are written by `bench/run-engine.sh`, which
builds `bench/zrbench` (`make bench`; never part of `make check`) and runs it.

## Method

**Workloads.** Batches of 256 indices drawn uniformly with replacement from
a fixed seed; the same records and the same plan for every row.

- *Dense vision*: 500 images of `(3, 224, 224)` uint8 (147 KiB each, 72
  MiB in all: more than twice the 32 MiB last-level cache), 16 batches.
- *Ragged vision*: 500 images of `(3, H, W)` uint8, H and W independently
  `round(224 * exp(0.4 N(0,1)))` clipped to 64..512, 16 batches.
- *Dense tokens*: 50,000 records of `int32[512]` (2 KiB each), 50 batches.
- *Ragged tokens*: 50,000 `int32` records of 16..512 tokens, 50 batches.

The images come from one smooth spatial model, deterministic from the seed:
a luminance field of four plane waves (2 to 10 grey levels, at most one
cycle across the image) mixed into three channels, each with its own base
level, gain, gradient (up to 10 levels across the image) and one extra wave,
plus mild noise (one pixel in 200 moves one grey level). Dense and Ragged
images share the generator; only H and W differ.

The tokens are word-level ids of real text from this machine: every file
under `/usr/share/doc` and `/usr/share/common-licenses` and the English
manual pages in `/usr/share/man/man1` to `man8`, read in sorted path order
(`find ... | LC_ALL=C sort -z | xargs -0 zcat -f`, so gzip-compressed files
are decompressed), skipping images, PDFs, fonts and archives by name. A
token is a run of ASCII letters, digits and non-ASCII bytes, or one ASCII
punctuation character; its id is its frequency rank in the corpus (0 the
most common, ties by first appearance), so the ids follow the text's
Zipf-like law. Dense blocks pack the token stream into 512-token records,
ignoring text boundaries; if the stream is shorter than 50,000 blocks it
is reused from its start, and the table's note says how often. Ragged
records keep paragraphs (a blank line or a man-page paragraph or section
macro ends one), join fragments shorter than 16 tokens to the next and
split at 512. The corpus line of the report gives its size, token and
vocabulary counts; it depends on the packages installed.

**Rows.**

- `zrecord-raw`, `zrecord-zstd`, `zrecord-zstdict`: a store written and
  read through the public API (`zr_append_*` in one call for all records,
  then `zr_close`; reopened read-only; `zr_gather_dense`, or for Ragged
  `zr_ragged_sizes`, the 8-byte-aligned offsets, `zr_gather_ragged` and a
  `zr_ragged_view` per record). The dictionary is trained with the balanced
  tier (128 KiB dictionary, 16 MiB sample) and the store compresses at level
  19, as the library always does for `zstd_dict`. Its write column includes
  the training; the table's note gives the training time on its own.
- `memcpy-limit`: every record in one RAM buffer; a gather copies the
  records into the batch with `memcpy`. Its write column is the copy of all
  records into that buffer, allocated and faulted in before the timing (on
  this virtual machine a first touch of fresh memory costs far more than the
  copy).
- `zstd-limit`: the very frames `zrecord-zstd` stores (each record its own
  frame, level 3, checksum flag, Ragged records with their shape prefix),
  copied out of its chunk files into RAM and decompressed into the batch.
  Its write column is the all-thread (or 1-thread) in-memory compression
  rate: every record compressed at level 3 with the checksum flag, each
  thread claiming records one at a time as the library's do, into RAM
  faulted in beforehand. Those are plain frames: for records of up to 16
  KiB the library's rule on literals (doc/format.md) often makes another
  frame, so the note counts how many of the store's frames they equal.
- `zstd-dict-limit`: the frames of the `zrecord-zstdict` store, copied out
  of its chunk files into RAM, decompressed with the same dictionary. It
  compresses nothing, so it has no write rate; it is the limit the
  `zrecord-zstdict` gather is compared with.

Each limit runs with 1 thread and with all threads. A limit splits a batch
into one contiguous block per thread of about equal bytes and, like the
library, keeps a batch on one thread when the blocks would be under 64 KiB.
The zrecord rows use the library's own pool (all online CPUs).

**Columns.** *Logical write* and *logical gather* divide uncompressed payload
bytes by elapsed time (bytes accepted or returned, not bytes on disk).
*krecords/s* counts gathered records; *p95* is the 95th percentile of the
latency of one batch. *Disk* is the allocated blocks (`st_blocks * 512`) of
the store's files after a `syncfs`, or for a limit the RAM its records take;
*ratio* is logical bytes over that.

A zrecord write is everything a user pays to make the store: create (which
syncs the new folder, about 50 ms here), one append of all records, close.
Large buffers (records, limit buffers, batch buffers) are 2 MiB-aligned and
advised for transparent huge pages, the same for every row; the page cache
maps the chunk files with huge pages on its own on this kernel.

The machine is shared with other jobs, so the whole run takes nice -20 when
the process may raise its priority (it may as root; `--no-boost` turns this
off). The other jobs then disturb the measurements less; the run uses the
same CPU time either way, it just takes it sooner (most of it goes to the
level-19 `zrecord-zstdict` writes). The report says which applied and gives
the load average at the start and the end.

**Procedure.** Stores live in a fresh folder under `/var/tmp` on the local
disk (the program refuses tmpfs). Writes go through the page cache and are
not synced inside the timed region; the file system is flushed (`syncfs`)
between steps so that write-back of one step does not land in the next. Each
write is repeated three times into a fresh folder and the median is shown,
except the slow `zrecord-zstdict` write, which runs once. Before anything is
timed, every row gathers every record once and every planned batch, and each
result is compared byte for byte (values and shapes) with the source
records. Gathers then run five timed passes over the plan on a warm page
cache; within a pass each batch is gathered by every row in turn, so that
load from other processes falls on all rows alike. A row's gather rate and
krecords/s come from its median pass, its p95 is the median of the passes'
p95 values.

**Targets.** Within one run, with all threads: `zrecord-raw` gathers at
least 0.75x `memcpy-limit` on both vision workloads and 0.6x on dense tokens;
`zrecord-zstd` and `zrecord-zstdict` gather at least 0.85x `zstd-limit` and
`zstd-dict-limit` on every workload; `zrecord-zstd` writes at least 0.8x the
all-thread in-memory compression rate (`zstd-limit`'s write column). The
last table of the results gives each ratio. `--quick` (100 images, 10,000
token records) checks the program in well under a minute; its stores are
too small for the ratios to mean much (the 50 ms create alone is a large
part of a write there).

## Results

EOF
printf 'Command: `bench/run-engine.sh%s` (runs `bench/zrbench%s`), from a\nconfigured tree at commit %s.\n\n' \
    "$(for a in "$@"; do printf ' %s' "$a"; done)" \
    "$(for a in "$@"; do printf ' %s' "$a"; done)" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
cat "$tables"
} >"$out"
echo "run-engine.sh: wrote $out" >&2

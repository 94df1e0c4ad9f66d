/*
 * coldbench.c: the cold-read benchmark, for reads that the page cache does
 * not serve (doc/benchmarks.md, "Cold reads"). In one run, for each
 * workload (147 KiB images and 2 KiB token blocks, Dense and Ragged) it
 * makes or reuses stores of several GiB, measures what the disk itself
 * delivers with fio on the zrecord stores' own chunk files, and then reads
 * the same records in the same order, cold and then warm, through every
 * read path: the library's gathers (mapped and ZR_NOMAP, raw and zstd,
 * and with the record table cached while the records are not),
 * the stores users pick instead (LMDB, an .npy memory map, a file per
 * record), the loader with a simulated training step, and zrecordfs
 * (record files and .gather). It prints a Markdown page (the tables and
 * the ratios issue 26 targets) and, with --tsv, one line per measurement.
 *
 * coldrun.c does the measuring and coldio.c the system plumbing; this file
 * holds the options and the report.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <loaderx/loaderx.h>

#include "bench/cold.h"

static const char *const WORKLOADS[] = {"dense-vision", "ragged-vision", "dense-tokens",
                                        "ragged-tokens"};
#define NWL (sizeof WORKLOADS / sizeof *WORKLOADS)

static const char *const PARTS[] = {"fio", "gather", "loader", "fs"};

static void usage(FILE *to)
{
    fprintf(to,
            "usage: coldbench [--quick] [--size MIB] [--only NAME[,NAME...]]\n"
            "                 [--stores DIR] [--dir DIR] [--vision-batches N]\n"
            "                 [--token-batches N] [--passes N] [--step-ms MS] [--depth N]\n"
            "                 [--fio-seconds S] [--fs-files N] [--seed N]\n"
            "                 [--out FILE] [--tsv FILE]\n"
            "Reads stores whose pages are not in the page cache (dropped before every\n"
            "measured pass: run as root) and compares them with the device's own limit\n"
            "(fio) and with LMDB, an .npy memory map and a file per record.\n"
            "  --size       payload of each workload's records, MiB (default 4096;\n"
            "               --quick 512)\n"
            "  --only       workloads (dense-vision ragged-vision dense-tokens\n"
            "               ragged-tokens) and parts (fio gather loader fs)\n"
            "  --stores     keep the stores in DIR and reuse them on the next run with\n"
            "               the same size and seed (--stores-from is the same);\n"
            "               without it they are made under --dir (default /var/tmp)\n"
            "               and removed at the end\n"
            "  --vision-batches, --token-batches  batches of 256 in the plan (24 and\n"
            "               64; --quick 8 and 16)\n"
            "  --passes     cold passes per row, the median shown (default 1)\n"
            "  --step-ms    the loader's simulated step (default: twice the longer of\n"
            "               the warm gather's batch and the device's time, at fio's\n"
            "               queue depth 32 rate, for what a cold gather's batch read)\n"
            "  --depth      the loader's depth (default: the library's)\n"
            "  --fio-seconds  the longest fio job (default 5; --quick 2)\n"
            "  --settle     seconds to wait after writing a workload's stores, before\n"
            "               anything is timed (default 30; --quick 5)\n"
            "  --fs-files   record files read by the file rows (default 1000)\n"
            "  --out        the Markdown page (default stdout)\n"
            "  --tsv        one line per measurement: workload, part (fio gather\n"
            "               loader files), row, threads (fio: queue depth), state (cold\n"
            "               warm; fio: before after), MiB/s, records/s (fio: IOPS),\n"
            "               first batch ms (fio: mean latency), disk read / gathered,\n"
            "               device bytes read, process bytes read, bytes gathered,\n"
            "               seconds\n");
}

/* ---- Interruption ----------------------------------------------------- */

/* A run interrupted by a signal still takes its FUSE mounts off and, if it
 * made its stores for itself, removes them (several GiB each). The
 * handler only forks, runs a shell command made at the start and waits:
 * all async-signal-safe. */
static char g_cleanup[8192];

static void on_signal(int sig)
{
    static const char msg[] = "\ncoldbench: interrupted; unmounting and removing its stores\n";
    ssize_t k = write(2, msg, sizeof msg - 1);
    (void)k;
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", g_cleanup, (char *)NULL);
        _exit(127);
    }
    if (pid > 0)
        waitpid(pid, NULL, 0);
    _exit(128 + sig);
}

static void catch_signals(const char *base, bool remove)
{
    /* The mounts under base, lazily if busy, then (remove) base itself. */
    snprintf(g_cleanup, sizeof g_cleanup,
             "grep -o ' %s/[^ ]*' /proc/mounts | while read -r m; do fusermount3 -u \"$m\" "
             "2>/dev/null || fusermount3 -uz \"$m\"; done; %s%s%s",
             base, remove ? "rm -rf '" : "", remove ? base : "", remove ? "'" : "");
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* ---- Report ----------------------------------------------------------- */

static double mibs(uint64_t bytes, double secs)
{
    return secs > 0 ? (double)bytes / 1048576.0 / secs : 0;
}

static void fmt_bytes(char *buf, size_t n, uint64_t v)
{
    if (v >= (1ull << 30))
        snprintf(buf, n, "%.2f GiB", (double)v / (double)(1ull << 30));
    else if (v >= (1ull << 20))
        snprintf(buf, n, "%.1f MiB", (double)v / 1048576.0);
    else
        snprintf(buf, n, "%.1f KiB", (double)v / 1024.0);
}

static void fmt_ratio(char *buf, size_t n, uint64_t a, uint64_t b)
{
    if (!b)
        snprintf(buf, n, "—");
    else if ((double)a / (double)b >= 100)
        snprintf(buf, n, "%.0f", (double)a / (double)b);
    else
        snprintf(buf, n, "%.2f", (double)a / (double)b);
}

static void print_machine(FILE *out, const char *dir, const struct cold_device *dev)
{
    char model[256] = "unknown CPU", line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
            snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
            model[strcspn(model, "\n")] = 0;
            break;
        }
    if (f)
        fclose(f);
    unsigned long long memkb = 0;
    f = fopen("/proc/meminfo", "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %llu kB", &memkb) == 1)
            break;
    if (f)
        fclose(f);
    struct utsname u;
    uname(&u);
    struct statfs sf;
    const char *fs = "unknown";
    if (statfs(dir, &sf) == 0)
        fs = sf.f_type == 0xEF53 ? "ext4" : sf.f_type == 0x58465342 ? "xfs"
             : sf.f_type == 0x9123683E ? "btrfs" : "other";
    char rot[32], sched[64], ra[32], maxs[32], nr[32], lbs[32], thp[128] = "?", thpd[128] = "?";
    cold_device_queue(dev, "rotational", rot, sizeof rot);
    cold_device_queue(dev, "scheduler", sched, sizeof sched);
    cold_device_queue(dev, "read_ahead_kb", ra, sizeof ra);
    cold_device_queue(dev, "max_sectors_kb", maxs, sizeof maxs);
    cold_device_queue(dev, "nr_requests", nr, sizeof nr);
    cold_device_queue(dev, "logical_block_size", lbs, sizeof lbs);
    f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f && fgets(thp, sizeof thp, f))
        thp[strcspn(thp, "\n")] = 0;
    if (f)
        fclose(f);
    f = fopen("/sys/kernel/mm/transparent_hugepage/defrag", "r");
    if (f && fgets(thpd, sizeof thpd, f))
        thpd[strcspn(thpd, "\n")] = 0;
    if (f)
        fclose(f);
    double load[3] = {0};
    getloadavg(load, 3);
    fprintf(out,
            "**Machine**: %s, %ld online CPUs (%d used by libloaderx), %.1f GiB RAM, %s %s %s, "
            "libzstd %s. Stores on %s (%s) on /dev/%s (%u:%u): rotational %s, scheduler %s, "
            "read_ahead_kb %s, max_sectors_kb %s, nr_requests %s, logical block %s bytes; "
            "transparent huge pages %s, defrag %s. Load average at the start %.2f.\n\n",
            model, sysconf(_SC_NPROCESSORS_ONLN), zr_threads(), (double)memkb / 1048576.0,
            u.sysname, u.release, u.machine, ZSTD_versionString(), dir, fs, dev->name, dev->major,
            dev->minor, rot, sched, ra, maxs, nr, lbs, thp, thpd, load[0]);
}

static void print_method(FILE *out, const struct cold_opts *o, const struct cold_device *dev)
{
    fprintf(out,
            "A run that writes a workload's stores waits %d s after the writes before "
            "anything is timed. Every measured pass starts from a cold page cache: `sync; echo 3 > "
            "/proc/sys/vm/drop_caches` (page cache, dentries and inodes), after which the row "
            "opens its store, maps its file or mounts its file system, so that the first batch "
            "pays for the metadata too. A warm pass of the same plan follows at once, nothing "
            "dropped. The plan is %zu batches of 256 records for the images and %zu for the "
            "tokens, from the library's cyclic sampler with seed %llu: a permutation, so no "
            "record is read twice in a pass; every row, the loader and the file rows (the "
            "plan's first %zu records) read the same records in the same order, and every batch "
            "is checked against the records' checksums after its timing. *Disk read / gathered* "
            "is the growth of the sectors-read field of /proc/diskstats for /dev/%s (the device "
            "holding the stores) times 512, divided by the payload bytes the pass returned "
            "counted in 4 KiB pages (each record rounded up to whole pages, the least a disk "
            "reads to deliver it); it counts every process's reads, so *own* gives read_bytes of /proc/PID/io for this "
            "process and the FUSE daemon alone. *First batch* is the first batch's latency "
            "(the loader: from its creation to its first batch). The device's limit is fio on "
            "the zrecord stores' largest chunk files in the same run: O_DIRECT, io_uring, "
            "random reads of the mean stored record rounded up to 4 KiB, queue depths 1 and "
            "32, at most an eighth of the file or %d s, once before the rows and once after "
            "them with another seed (other blocks); the ratios take the faster round (the "
            "commands are listed at the end). The same job without O_DIRECT on the raw "
            "chunk, page cache dropped first, gives the limit of reads through the page "
            "cache, which a store that fits the memory takes so that its next epoch is "
            "served from memory. As the device's rate moves from one minute to the next, the "
            "zrecord-raw row also runs a 2 s fio job at queue depth 32 (on the LMDB store's "
            "file, on the same device, so that none of its blocks is one the pass reads; "
            "another seed each time) just before each of its cold passes, and its *just "
            "before* ratio is the median of the passes' ratios to those jobs. "
            "The rows ending in *-table* read the store's record table "
            "(its .loc files) into the page cache after the drop and before the pass, as an "
            "epoch finds it once its first records are read; that read is not counted in "
            "their disk bytes. "
            "A virtual disk's host may cache what the guest reads; fio and the rows run on the "
            "same files in the same run, so they meet the same host.\n\n",
            o->settle, o->vision_batches, o->token_batches, (unsigned long long)o->seed, o->fs_files,
            dev->name, o->fio_seconds);
}

static void print_fio(FILE *out, const struct cold_wl *c)
{
    if (!c->fio_rounds)
        return;
    fprintf(out, "**Device** (fio, O_DIRECT, io_uring, random reads, before the rows and after "
                 "them; the ratios below take the faster; *buffered*: the same at queue depth 32 "
                 "without O_DIRECT, page cache dropped first):\n\n"
                 "| file | block | fio | QD1 MiB/s | QD1 IOPS | QD1 latency | QD32 MiB/s | "
                 "QD32 IOPS | QD32 buffered MiB/s |\n"
                 "|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
    for (int z = 0; z < 2; z++)
        for (int r = 0; r < c->fio_rounds; r++) {
            const struct cold_fio *a = &c->fio[r][z][0], *b = &c->fio[r][z][1];
            char size[32], buf[32] = "—";
            fmt_bytes(size, sizeof size, c->chunk_bytes[z]);
            if (!z)
                snprintf(buf, sizeof buf, "%.0f", c->fio[r][z][2].mibs);
            const char *base = strrchr(c->chunk[z], '/');
            fprintf(out,
                    "| %s/%s (%s) | %llu KiB | %s | %.0f | %.0f | %.2f ms | %.0f | %.0f | %s |\n",
                    COLD_STORE_DIRS[z], base ? base + 1 : c->chunk[z], size,
                    (unsigned long long)(a->bs >> 10), r ? "after" : "before", a->mibs, a->iops,
                    a->lat_us / 1000.0, b->mibs, b->iops, buf);
        }
    fprintf(out, "\n");
}

static void print_gathers(FILE *out, const struct cold_wl *c)
{
    bool any = false;
    for (size_t r = 0; r < c->nrows; r++)
        any |= c->rows[r].valid && strcmp(c->rows[r].part, "gather") == 0;
    if (!any)
        return;
    char size[32];
    fmt_bytes(size, sizeof size, c->w.plan_logical);
    fprintf(out,
            "**Gathers** (%zu batches of 256, %s; threads: what the row reads with):\n\n"
            "| row | threads | cold MiB/s | cold krec/s | first batch | disk read / gathered | "
            "own | warm MiB/s | warm krec/s | warm first batch |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            c->w.nbatches, size);
    for (size_t r = 0; r < c->nrows; r++) {
        const struct cold_row *x = &c->rows[r];
        if (!x->valid || strcmp(x->part, "gather") != 0)
            continue;
        char amp[32], own[32];
        fmt_ratio(amp, sizeof amp, x->cold.dev, x->paged);
        fmt_ratio(own, sizeof own, x->cold.proc, x->paged);
        fprintf(out, "| %s | %d | %.0f | %.1f | %.1f ms | %s | %s | %.0f | %.1f | %.2f ms |\n",
                x->name, x->threads, mibs(x->gathered, x->cold.secs),
                (double)x->recs / x->cold.secs / 1e3, x->cold.first * 1e3, amp, own,
                mibs(x->gathered, x->warm.secs), (double)x->recs / x->warm.secs / 1e3,
                x->warm.first * 1e3);
    }
    fprintf(out, "\n");
}

static void print_loader(FILE *out, const struct cold_opts *o, const struct cold_wl *c)
{
    bool any = false;
    for (size_t r = 0; r < c->nrows; r++)
        any |= c->rows[r].valid && strcmp(c->rows[r].part, "loader") == 0;
    if (!any)
        return;
    char depth[32];
    if (o->depth)
        snprintf(depth, sizeof depth, "%u", o->depth);
    else
        snprintf(depth, sizeof depth, "2 (the default)");
    fprintf(out,
            "**Loader** (zr_loader, cyclic sampler, batch 256, %zu steps, depth %s, one worker; "
            "each step checks its batch and sleeps out the step time; the time runs from the "
            "loader's creation to the end of the last step, and the disk bytes include the "
            "batches prefetched past it; unless set, the step is twice the longer of the warm "
            "gather's batch and the time the device takes, at fio's queue depth 32 rate, for "
            "what the cold gather read per batch, table pages included):\n\n"
            "| store | step | warm batches/s | cold batches/s | cold / warm | cold first batch | "
            "disk read / gathered |\n"
            "|---|---:|---:|---:|---:|---:|---:|\n",
            c->w.nbatches, depth);
    for (size_t r = 0; r < c->nrows; r++) {
        const struct cold_row *x = &c->rows[r];
        if (!x->valid || strcmp(x->part, "loader") != 0)
            continue;
        char amp[32];
        fmt_ratio(amp, sizeof amp, x->cold.dev, x->paged);
        fprintf(out, "| %s | %.1f ms | %.1f | %.1f | %.2f | %.1f ms | %s |\n", x->name,
                x->step * 1e3, (double)x->batches / x->warm.secs,
                (double)x->batches / x->cold.secs, x->warm.secs / x->cold.secs,
                x->cold.first * 1e3, amp);
    }
    fprintf(out, "\n");
}

static void print_files(FILE *out, const struct cold_wl *c)
{
    bool any = false;
    size_t nf = 0;
    for (size_t r = 0; r < c->nrows; r++)
        if (c->rows[r].valid && strcmp(c->rows[r].part, "files") == 0) {
            any = true;
            nf = c->rows[r].recs;
        }
    if (!any)
        return;
    fprintf(out,
            "**Record files** (the plan's first %zu records, a file each: open, read to end of "
            "file, close; several readers take every n-th file; zrecordfs in its default mode%s; "
            "*ext4 files through FUSE* reads the plain files through bench/fuse_ceiling, which "
            "serves them by splicing from them, as zrecordfs serves a cold record: ext4's reads of "
            "the files plus FUSE's round trips):"
            "\n\n"
            "| files | readers | cold files/s | cold MiB/s | disk read / read | own | "
            "warm files/s | warm MiB/s |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|\n",
            nf, c->w.ragged ? ", -o npy, as the plain files are .npy files" : "");
    for (size_t r = 0; r < c->nrows; r++) {
        const struct cold_row *x = &c->rows[r];
        if (!x->valid || strcmp(x->part, "files") != 0)
            continue;
        char amp[32], own[32];
        fmt_ratio(amp, sizeof amp, x->cold.dev, x->paged);
        fmt_ratio(own, sizeof own, x->cold.proc, x->paged);
        fprintf(out, "| %s | %d | %.0f | %.0f | %s | %s | %.0f | %.0f |\n", x->name, x->threads,
                (double)x->recs / x->cold.secs, mibs(x->gathered, x->cold.secs), amp, own,
                (double)x->recs / x->warm.secs, mibs(x->gathered, x->warm.secs));
    }
    fprintf(out, "\n");
}

static void print_workload(FILE *out, const struct cold_opts *o, const struct cold_wl *c)
{
    fprintf(out, "## %s\n\n%s. ", c->w.title, c->w.note);
    if (c->reused)
        fprintf(out, "Stores reused from an earlier run (--stores).\n\n");
    else
        fprintf(out, "Records made and stores written by this run in %.0f s.\n\n",
                c->build_seconds);
    if (c->corpus[0])
        fprintf(out, "Token corpus: %s\n\n", c->corpus);
    fprintf(out, "Stores (allocated on disk):");
    for (int s = 0, k = 0; s < ST_COUNT; s++) {
        if (!c->has[s])
            continue;
        char size[32];
        fmt_bytes(size, sizeof size, c->footprint[s]);
        fprintf(out, "%s %s %s", k++ ? "," : "", COLD_STORE_DIRS[s], size);
    }
    fprintf(out, ".");
    if (!c->has[ST_FILES])
        fprintf(out, " No file per record: that would be %zu files, %.1f GiB of 4 KiB blocks "
                     "(the file rows read zrecordfs alone)", c->w.n,
                (double)c->w.n * 4096.0 / (double)(1ull << 30));
    fprintf(out, "\n\n");
    print_fio(out, c);
    print_gathers(out, c);
    print_loader(out, o, c);
    print_files(out, c);
}

struct target {
    char wl[32], what[200];
    double value, goal;
    bool le; /* at most goal */
};

static void add_target(struct target *t, size_t *n, const char *wl, double value, double goal,
                       bool le, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static void add_target(struct target *t, size_t *n, const char *wl, double value, double goal,
                       bool le, const char *fmt, ...)
{
    if (*n >= 128 || !(value == value))
        return;
    struct target *x = &t[(*n)++];
    snprintf(x->wl, sizeof x->wl, "%s", wl);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->what, sizeof x->what, fmt, ap);
    va_end(ap);
    x->value = value;
    x->goal = goal;
    x->le = le;
}

static double rate(const struct cold_row *x, bool warm)
{
    return mibs(x->gathered, warm ? x->warm.secs : x->cold.secs);
}

static int print_targets(FILE *out, const struct cold_wl *cws, size_t n)
{
    struct target t[128];
    size_t nt = 0;
    for (size_t k = 0; k < n; k++) {
        const struct cold_wl *c = &cws[k];
        const char *wl = c->name;
        bool tokens = strstr(wl, "tokens") != NULL;
        const struct cold_row *raw = cold_find(c, "gather", "zrecord-raw", -1);
        const struct cold_row *zs = cold_find(c, "gather", "zrecord-zstd", -1);
        const struct cold_fio *fr = &c->limit[0][1], *fz = &c->limit[1][1];
        const struct cold_fio *fb = &c->limit[0][2];
        /* The same measures twice: from a cold start, and with the record
         * table cached (rows "-table"), as after an epoch's first records. */
        for (int v = 0; v < 2; v++) {
            const char *tag = v ? "-table" : "", *in = v ? ", table in memory" : "";
            char name[64];
            snprintf(name, sizeof name, "zrecord-raw%s", tag);
            const struct cold_row *r = cold_find(c, "gather", name, -1);
            snprintf(name, sizeof name, "zrecord-zstd%s", tag);
            const struct cold_row *z = cold_find(c, "gather", name, -1);
            if (r && c->fio_rounds && !tokens)
                add_target(t, &nt, wl, rate(r, false) / fr->mibs, 0.8, false,
                           "zrecord-raw%s cold MiB/s / fio QD32 MiB/s (%llu KiB blocks)", tag,
                           (unsigned long long)(fr->bs >> 10));
            if (r && r->paired > 0)
                add_target(t, &nt, wl, r->paired, tokens ? 0.5 : 0.8, false,
                           "zrecord-raw cold %s / fio QD32 %s of a job just before each pass "
                           "(median)", tokens ? "records/s" : "MiB/s", tokens ? "IOPS" : "MiB/s");
            if (r && c->fio_rounds && !tokens && fb->mibs > 0)
                add_target(t, &nt, wl, rate(r, false) / fb->mibs, 0.8, false,
                           "zrecord-raw%s cold MiB/s / fio QD32 buffered MiB/s", tag);
            if (r && c->fio_rounds && tokens)
                add_target(t, &nt, wl, (double)r->recs / r->cold.secs / fr->iops, 0.5, false,
                           "zrecord-raw%s cold records/s / fio QD32 IOPS (%llu KiB blocks)", tag,
                           (unsigned long long)(fr->bs >> 10));
            /* Small compressed records: the same reads as the raw row's,
             * one per record, so the raw row's rate is what the zstd row
             * can reach whatever the decoder does. */
            if (z && r && tokens)
                add_target(t, &nt, wl, ((double)z->recs / z->cold.secs) /
                                           ((double)r->recs / r->cold.secs), NAN, false,
                           "zrecord-zstd%s / zrecord-raw%s cold records/s (the same reads, "
                           "decoded)", tag, tag);
            if (z && c->fio_rounds) {
                double per_rec = (double)c->w.plan_logical / (double)z->recs;
                double dev = fz->iops * per_rec / 1048576.0, warm = rate(zs ? zs : z, true);
                add_target(t, &nt, wl, rate(z, false) / (dev < warm ? dev : warm), 0.8, false,
                           "zrecord-zstd%s cold MiB/s / min(fio QD32 %.0f, warm %.0f) MiB/s", tag,
                           dev, warm);
            }
            if (r)
                add_target(t, &nt, wl, (double)r->cold.dev / (double)r->paged, 1.5, true,
                           "zrecord-raw%s cold: disk bytes read / bytes gathered in 4 KiB "
                           "pages%s", tag, in);
            if (z)
                add_target(t, &nt, wl, (double)z->cold.dev / (double)c->plan_stored[1], 1.5, true,
                           "zrecord-zstd%s cold: disk bytes read / stored bytes gathered in "
                           "4 KiB pages%s", tag, in);
        }
        for (int z = 0; z < 2; z++) {
            const char *name = z ? "zrecord-zstd" : "zrecord-raw";
            const struct cold_row *l = cold_find(c, "loader", name, -1);
            if (l)
                add_target(t, &nt, wl, l->warm.secs / l->cold.secs, 0.9, false,
                           "loader over %s, step %.1f ms: cold / warm batches/s", name,
                           l->step * 1e3);
        }
        for (int r = 1; r <= 4; r *= 4) {
            const struct cold_row *a = cold_find(c, "files", "zrecordfs-raw", r);
            const struct cold_row *b = cold_find(c, "files", "files-raw (ext4)", r);
            const struct cold_row *f = cold_find(c, "files", "ext4 files through FUSE", r);
            const char *s = r == 1 ? "" : "s";
            if (a && b)
                add_target(t, &nt, wl, b->cold.secs / a->cold.secs, 1.0, false,
                           "zrecordfs-raw / plain files on ext4, cold files/s, %d reader%s", r, s);
            /* The same files through FUSE: what FUSE's round trips leave
             * of ext4's rate, for a file system that reads what ext4
             * reads. */
            if (f && b)
                add_target(t, &nt, wl, b->cold.secs / f->cold.secs, NAN, false,
                           "ext4 files through FUSE / plain files on ext4, cold files/s, %d "
                           "reader%s", r, s);
            if (a && f)
                add_target(t, &nt, wl, f->cold.secs / a->cold.secs, 1.0, false,
                           "zrecordfs-raw / ext4 files through FUSE, cold files/s, %d reader%s", r,
                           s);
        }
        for (int z = 0; z < 2; z++) {
            const struct cold_row *a =
                cold_find(c, "gather", z ? "zrecordfs-gather-zstd" : "zrecordfs-gather-raw", -1);
            const struct cold_row *b = z ? zs : raw;
            if (a && b)
                add_target(t, &nt, wl, b->cold.secs / a->cold.secs, 0.6, false,
                           "%s / %s, cold", a->name, b->name);
        }
    }
    if (!nt)
        return 0;
    int missed = 0;
    fprintf(out, "## Targets (issue 26)\n\n| workload | measure | value | target | met |\n"
                 "|---|---|---:|---:|---|\n");
    for (size_t k = 0; k < nt; k++) {
        char v[32];
        snprintf(v, sizeof v, t[k].value >= 100 ? "%.0f" : "%.2f", t[k].value);
        if (!(t[k].goal == t[k].goal)) { /* a limit, shown beside the targets */
            fprintf(out, "| %s | %s | %s | | |\n", t[k].wl, t[k].what, v);
            continue;
        }
        bool met = t[k].le ? t[k].value <= t[k].goal : t[k].value >= t[k].goal;
        missed += !met;
        fprintf(out, "| %s | %s | %s | %s %.2f | %s |\n", t[k].wl, t[k].what, v,
                t[k].le ? "≤" : "≥", t[k].goal, met ? "yes" : "**no**");
    }
    fprintf(out, "\n");
    return missed;
}

static void write_tsv(FILE *f, const struct cold_wl *c)
{
    for (int r = 0; r < c->fio_rounds; r++)
        for (int z = 0; z < 2; z++)
            for (int q = 0; q < (z ? 2 : 3); q++) {
                const struct cold_fio *x = &c->fio[r][z][q];
                fprintf(f, "%s\tfio\t%s%s\t%d\t%s\t%.1f\t%.0f\t%.3f\t\t%llu\t\t%llu\t\n",
                        c->name, COLD_STORE_DIRS[z], x->buffered ? "-buffered" : "", x->qd,
                        r ? "after" : "before", x->mibs,
                        x->iops, x->lat_us / 1000.0, (unsigned long long)x->bytes,
                        (unsigned long long)x->bytes);
            }
    for (size_t r = 0; r < c->nrows; r++) {
        const struct cold_row *x = &c->rows[r];
        for (int s = 0; s < 2 && x->valid; s++) {
            const struct cold_meas *m = s ? &x->warm : &x->cold;
            fprintf(f, "%s\t%s\t%s\t%d\t%s\t%.1f\t%.0f\t%.3f\t%.3f\t%llu\t%llu\t%llu\t%.4f\n",
                    c->name, x->part, x->name, x->threads, s ? "warm" : "cold",
                    mibs(x->gathered, m->secs), (double)x->recs / m->secs, m->first * 1e3,
                    x->gathered ? (double)m->dev / (double)x->gathered : 0,
                    (unsigned long long)m->dev, (unsigned long long)m->proc,
                    (unsigned long long)x->gathered, m->secs);
        }
    }
}

int main(int argc, char **argv)
{
    struct cold_opts o = {.size = 4096ull << 20, .dir = "/var/tmp", .vision_batches = 24,
                          .token_batches = 64, .passes = 1, .fio_seconds = 5, .settle = 30,
                          .fs_files = 1000,
                          .seed = 20240601};
    const char *out_path = NULL, *tsv_path = NULL;
    bool size_set = false, vb_set = false, tb_set = false, fio_set = false, settle_set = false;
    static const struct option longopts[] = {
        {"quick", no_argument, NULL, 'q'},           {"size", required_argument, NULL, 'S'},
        {"only", required_argument, NULL, 'o'},      {"stores", required_argument, NULL, 'c'},
        {"stores-from", required_argument, NULL, 'c'}, {"dir", required_argument, NULL, 'd'},
        {"vision-batches", required_argument, NULL, 'v'},
        {"token-batches", required_argument, NULL, 't'},
        {"passes", required_argument, NULL, 'p'},    {"step-ms", required_argument, NULL, 'm'},
        {"depth", required_argument, NULL, 'D'},     {"fio-seconds", required_argument, NULL, 'f'},
        {"fs-files", required_argument, NULL, 'F'},  {"seed", required_argument, NULL, 's'},
        {"settle", required_argument, NULL, 'W'},
        {"out", required_argument, NULL, 'O'},       {"tsv", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'q': o.quick = true; break;
        case 'S': o.size = strtoull(optarg, NULL, 10) << 20; size_set = true; break;
        case 'o': o.only = optarg; break;
        case 'c': o.stores = optarg; break;
        case 'd': o.dir = optarg; break;
        case 'v': o.vision_batches = strtoull(optarg, NULL, 10); vb_set = true; break;
        case 't': o.token_batches = strtoull(optarg, NULL, 10); tb_set = true; break;
        case 'p': o.passes = atoi(optarg); break;
        case 'm': o.step_ms = strtod(optarg, NULL); break;
        case 'D': o.depth = (unsigned)atoi(optarg); break;
        case 'f': o.fio_seconds = atoi(optarg); fio_set = true; break;
        case 'F': o.fs_files = strtoull(optarg, NULL, 10); break;
        case 'W': o.settle = atoi(optarg); settle_set = true; break;
        case 's': o.seed = strtoull(optarg, NULL, 10); break;
        case 'O': out_path = optarg; break;
        case 'T': tsv_path = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    if (o.quick) {
        if (!size_set)
            o.size = 512ull << 20;
        if (!vb_set)
            o.vision_batches = 8;
        if (!tb_set)
            o.token_batches = 16;
        if (!fio_set)
            o.fio_seconds = 2;
        if (!settle_set)
            o.settle = 5;
    }
    if (o.size < (16ull << 20) || o.passes < 1 || o.passes > 64 || o.vision_batches < 1 ||
        o.token_batches < 1 || o.fio_seconds < 1 || o.fs_files < 1 || o.step_ms < 0 ||
        o.settle < 0 || o.settle > 3600 ||
        o.depth > ZR_LOADER_MAX_DEPTH) {
        fprintf(stderr, "coldbench: --size must be at least 16 MiB, --passes 1..64, the batch "
                        "counts, --fio-seconds and --fs-files at least 1\n");
        return 2;
    }
    bool names_wl = false;
    for (const char *p = o.only; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        bool found = false;
        for (size_t k = 0; k < NWL; k++)
            if (strlen(WORKLOADS[k]) == len && strncmp(p, WORKLOADS[k], len) == 0)
                found = names_wl = true;
        for (size_t k = 0; k < sizeof PARTS / sizeof *PARTS; k++)
            found |= strlen(PARTS[k]) == len && strncmp(p, PARTS[k], len) == 0;
        if (!found) {
            fprintf(stderr, "coldbench: unknown name '%.*s' in --only\n", (int)len, p);
            return 2;
        }
        p += len + (e ? 1 : 0);
    }

    const char *base = o.stores ? o.stores : o.dir;
    if (o.stores && mkdir(o.stores, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "coldbench: %s: %s\n", o.stores, strerror(errno));
        return 1;
    }
    struct statfs sf;
    if (statfs(base, &sf) != 0 || sf.f_type == 0x01021994) {
        fprintf(stderr, "coldbench: %s must be a folder on a disk (not tmpfs)\n", base);
        return 1;
    }
    struct cold_device dev;
    if (cold_device_of(base, &dev) != 0)
        return 1;
    /* Fail now rather than after the stores are made. */
    if (cold_drop_caches() != 0)
        return 1;
    char *tmp = NULL;
    if (!o.stores) {
        size_t len = strlen(o.dir) + 32;
        tmp = bench_xmalloc(len);
        snprintf(tmp, len, "%s/coldbench-XXXXXX", o.dir);
        if (!mkdtemp(tmp)) {
            fprintf(stderr, "coldbench: cannot make a folder in %s: %s\n", o.dir, strerror(errno));
            return 1;
        }
    }
    catch_signals(tmp ? tmp : o.stores, tmp != NULL);
    FILE *out = stdout, *tsv = NULL;
    if (out_path && !(out = fopen(out_path, "w"))) {
        fprintf(stderr, "coldbench: %s: %s\n", out_path, strerror(errno));
        return 1;
    }
    if (tsv_path && !(tsv = fopen(tsv_path, "w"))) {
        fprintf(stderr, "coldbench: %s: %s\n", tsv_path, strerror(errno));
        return 1;
    }

    struct cold_wl cws[NWL];
    size_t n = 0;
    memset(cws, 0, sizeof cws);
    for (size_t k = 0; k < NWL; k++)
        if (!names_wl || cold_listed(o.only, WORKLOADS[k]))
            cws[n++].name = WORKLOADS[k];
    cold_place_stores(&o, cws, n, tmp ? tmp : o.stores);

    double t0 = now_seconds();
    cold_progress("stores under %s, %llu MiB each", tmp ? tmp : o.stores,
                  (unsigned long long)(o.size >> 20));
    fprintf(out, "# Cold reads (data not in RAM)\n\n");
    print_machine(out, tmp ? tmp : o.stores, &dev);
    fprintf(out, "**Run**: %s, %llu MiB of records per workload, %d cold pass%s per row (%s), "
                 "loader step %s, depth %u%s.\n\n",
            o.quick ? "--quick" : "full size", (unsigned long long)(o.size >> 20), o.passes,
            o.passes == 1 ? "" : "es", o.passes == 1 ? "one each" : "the median shown",
            o.step_ms > 0 ? "set by --step-ms" : "chosen per store (see the loader tables)",
            o.depth ? o.depth : 2, o.depth ? "" : " (the library's default)");
    print_method(out, &o, &dev);
    fflush(out);
    int rc = 0;
    size_t done = 0;
    for (size_t k = 0; k < n && rc == 0; k++) {
        rc = cold_run_workload(&o, cws, n, k, &dev);
        if (rc == 0) {
            print_workload(out, &o, &cws[k]);
            if (tsv)
                write_tsv(tsv, &cws[k]);
            fflush(out);
            done++;
        }
        cold_cleanup(&cws[k]);
    }
    /* A failure leaves later workloads' stores (or records) behind. */
    for (size_t k = done; k < n; k++)
        cold_cleanup(&cws[k]);
    int missed = 0;
    if (rc == 0) {
        missed = print_targets(out, cws, done);
        fprintf(out, "fio command lines of this run:\n\n");
        for (size_t k = 0; k < done; k++)
            for (int r = 0; r < cws[k].fio_rounds; r++)
                for (int z = 0; z < 2; z++)
                    for (int q = 0; q < (z ? 2 : 3); q++)
                        fprintf(out, "    %s\n", cws[k].fio[r][z][q].cmd);
        double load[3] = {0};
        getloadavg(load, 3);
        fprintf(out, "\nWhole run: %.0f s; load average at the end %.2f.\n",
                now_seconds() - t0, load[0]);
    }
    if (tmp) {
        rmdir(tmp);
        free(tmp);
    }
    if (out != stdout && fclose(out) != 0)
        rc = -1;
    if (tsv && fclose(tsv) != 0)
        rc = -1;
    team_shutdown();
    if (rc != 0)
        return 1;
    fprintf(stderr, "coldbench: %s\n", missed ? "some targets were missed" : "all targets met");
    return 0;
}

/*
 * zrbench.c: the engine benchmark. For each workload it writes the same
 * records into every backend, checks that every backend gives back exactly
 * the right records (a sweep of all records, then every planned batch),
 * and only then times the planned random gathers: several passes, each
 * batch gathered by every backend in turn, so that a burst of load from
 * elsewhere falls on every row alike. It prints Markdown tables (the rows, then the target ratios)
 * on stdout and its progress on stderr. The token workloads run twice: at
 * the size of the others and with a larger store (200,000 records), since
 * a gather's cost per record must not grow with the store.
 *
 * Columns: logical write and logical gather divide uncompressed payload
 * bytes by elapsed time; krecords/s counts gathered records; p95 is the
 * 95th percentile of one batch's latency; disk is the allocated blocks
 * (st_blocks * 512) of a store's files after a syncfs, or the RAM the
 * records take for a limit; ratio is logical bytes over that footprint.
 * Writes go to the page cache (nothing is fsynced inside a timed write);
 * gathers run on a warm page cache.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <zstd.h>

#include <loaderx/loaderx.h>

#include "bench/bench.h"

#define TMPFS_MAGIC_NUMBER 0x01021994

struct options {
    bool quick;
    bool boost;
    const char *only;
    const char *dir;
    int passes;
    int write_reps;
    uint64_t seed;
    bool keep;
    const char *tsv;
    long large;     /* records of the larger token workloads; 0: none */
};

struct row_spec {
    enum backend_kind kind;
    int threads;             /* 0: all */
    enum backend_kind peer;  /* the row whose store it reads, or BK_KIND_COUNT */
    bool need_peer;          /* cannot run without that row */
    bool dense_only;
};

#define NONE BK_KIND_COUNT
/* The order of the tables: this project's rows, the stores users pick
 * instead, then the limits. */
static const struct row_spec ROWS[] = {
    {BK_ZRECORD_RAW, 0, NONE, false, false},
    {BK_ZRECORD_ZSTD, 0, NONE, false, false},
    {BK_ZRECORD_ZSTDICT, 0, NONE, false, false},
    {BK_ZRECORDFS_RAW, 1, BK_ZRECORD_RAW, true, false},
    {BK_ZRECORDFS_ZSTD, 1, BK_ZRECORD_ZSTD, true, false},
    {BK_ZRECORDFS_GATHER_RAW, 0, BK_ZRECORD_RAW, true, false},
    {BK_ZRECORDFS_GATHER_ZSTD, 0, BK_ZRECORD_ZSTD, true, false},
    {BK_NPY_MMAP_RAW, 1, NONE, false, true},
    {BK_NPY_MMAP_RAW, 0, NONE, false, true},
    {BK_NUMPY_FANCY_RAW, 1, BK_NPY_MMAP_RAW, true, true},
    {BK_FILES_RAW, 1, NONE, false, false},
    {BK_SQUASHFUSE_RAW, 1, BK_FILES_RAW, true, false},
    {BK_SQUASHFUSE_ZSTD, 1, BK_FILES_RAW, true, false},
    {BK_LMDB_RAW, 1, NONE, false, false},
    {BK_HDF5_RAW, 1, NONE, false, false},
    {BK_HDF5_GZIP, 1, NONE, false, false},
    {BK_SQLITE_RAW, 1, NONE, false, false},
    {BK_MEMCPY_LIMIT, 1, NONE, false, false},
    {BK_MEMCPY_LIMIT, 0, NONE, false, false},
    {BK_ZSTD_LIMIT, 1, BK_ZRECORD_ZSTD, false, false},
    {BK_ZSTD_LIMIT, 0, BK_ZRECORD_ZSTD, false, false},
    {BK_ZSTD_DICT_LIMIT, 1, BK_ZRECORD_ZSTDICT, true, false},
    {BK_ZSTD_DICT_LIMIT, 0, BK_ZRECORD_ZSTDICT, true, false},
};
#define NROWS (sizeof ROWS / sizeof *ROWS)

static const char *const ROW_NAMES[BK_KIND_COUNT] = {
    [BK_ZRECORD_RAW] = "zrecord-raw",
    [BK_ZRECORD_ZSTD] = "zrecord-zstd",
    [BK_ZRECORD_ZSTDICT] = "zrecord-zstdict",
    [BK_MEMCPY_LIMIT] = "memcpy-limit",
    [BK_ZSTD_LIMIT] = "zstd-limit",
    [BK_ZSTD_DICT_LIMIT] = "zstd-dict-limit",
    [BK_ZRECORDFS_RAW] = "zrecordfs-raw",
    [BK_ZRECORDFS_ZSTD] = "zrecordfs-zstd",
    [BK_ZRECORDFS_GATHER_RAW] = "zrecordfs-gather-raw",
    [BK_ZRECORDFS_GATHER_ZSTD] = "zrecordfs-gather-zstd",
    [BK_NPY_MMAP_RAW] = "npy-mmap-raw",
    [BK_NUMPY_FANCY_RAW] = "numpy-fancy-raw",
    [BK_FILES_RAW] = "files-raw",
    [BK_SQUASHFUSE_RAW] = "squashfuse-raw",
    [BK_SQUASHFUSE_ZSTD] = "squashfuse-zstd",
    [BK_LMDB_RAW] = "lmdb-raw",
    [BK_HDF5_RAW] = "hdf5-raw",
    [BK_HDF5_GZIP] = "hdf5-gzip",
    [BK_SQLITE_RAW] = "sqlite-raw",
};

/* The last two are the token workloads again with a larger store (200,000
 * records by default): the cost of a record must not grow with the store,
 * so their ratios are held to the same targets. They run the rows those
 * targets name, and the limits (see runs_large). */
static const char *const WORKLOADS[] = {"dense-vision",
                                        "ragged-vision", "dense-tokens", "ragged-tokens",
                                        "dense-tokens-large", "ragged-tokens-large"};
#define NWORKLOADS (sizeof WORKLOADS / sizeof *WORKLOADS)

static bool is_large(const struct workload *w)
{
    return strstr(w->name, "-large") != NULL;
}

/* The rows of the larger token workloads: the library's, the peers the
 * targets compare it with, and the limits. A file per record (files-raw,
 * the squashfs images, zrecordfs) would be 200,000 files, and HDF5 and
 * SQLite, far behind at the small size, would add minutes and no target. */
static bool runs_large(enum backend_kind k)
{
    switch (k) {
    case BK_ZRECORD_RAW:
    case BK_ZRECORD_ZSTD:
    case BK_ZRECORD_ZSTDICT:
    case BK_NPY_MMAP_RAW:
    case BK_LMDB_RAW:
    case BK_MEMCPY_LIMIT:
    case BK_ZSTD_LIMIT:
    case BK_ZSTD_DICT_LIMIT:
        return true;
    default:
        return false;
    }
}

/* The measured numbers of one row. */
struct result {
    const char *name;
    int threads;
    bool valid, in_ram, no_write;
    double write_mibs;   /* median over the write repetitions */
    int write_reps;
    double gather_mibs;  /* median pass */
    double krecs;
    double p95_ms;       /* median of the passes' p95 */
    uint64_t footprint;
    double ratio;
    char note[512];
};

struct wl_result {
    const struct workload *w; /* valid while its table is printed */
    const char *wname;
    struct result rows[NROWS];
    size_t nrows;
};

/* Progress on stderr, stamped with the seconds since the start. */
static double g_start;

static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%7.1f s] ", now_seconds() - g_start);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- Selection ------------------------------------------------------ */

static bool listed(const char *list, const char *name)
{
    if (!list)
        return true;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return true;
        p += len + (e ? 1 : 0);
    }
    return false;
}

static bool only_names_rows(const char *only)
{
    if (!only)
        return false;
    for (size_t k = 0; k < sizeof ROW_NAMES / sizeof *ROW_NAMES; k++)
        if (listed(only, ROW_NAMES[k]))
            return true;
    return false;
}

static bool only_names_workloads(const char *only)
{
    if (!only)
        return false;
    for (size_t k = 0; k < NWORKLOADS; k++)
        if (listed(only, WORKLOADS[k]))
            return true;
    return false;
}

static bool want_workload(const struct options *o, const char *name)
{
    return !only_names_workloads(o->only) || listed(o->only, name);
}

static bool want_kind(const struct options *o, enum backend_kind k)
{
    return !only_names_rows(o->only) || listed(o->only, ROW_NAMES[k]);
}

/* A row runs if --only names no row, if it names this one, or if it names
 * a row that cannot run without this one's store. */
static bool want_row(const struct options *o, enum backend_kind k)
{
    if (want_kind(o, k))
        return true;
    for (size_t r = 0; r < NROWS; r++)
        if (ROWS[r].need_peer && ROWS[r].peer == k && want_kind(o, ROWS[r].kind))
            return true;
    return false;
}

/* ---- Files ---------------------------------------------------------- */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void rmtree(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Flush the file system holding dir, so that write-back from one step
 * does not run during the next one's timing. */
static void settle(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        syncfs(fd);
        close(fd);
    }
}

/* On an ext4 without a journal (as here) a new file skips every inode
 * deleted in the last minutes whose inode table block is still cached,
 * one lookup each, so a row that creates a file per record right after
 * the deletions of earlier workloads wrote at a fraction of its speed
 * (50,000 token files: 0.2 MiB/s). Before such a write, dirty pages are
 * written and the clean caches dropped (as root; otherwise nothing
 * happens), so that the creates reuse those inodes as on a fresh disk. */
static void fresh_inodes(void)
{
    sync();
    FILE *f = fopen("/proc/sys/vm/drop_caches", "w");
    if (f) {
        fputs("1\n", f);
        fclose(f);
    }
}

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (!p) {
        fprintf(stderr, "zrbench: out of memory\n");
        exit(1);
    }
    snprintf(p, n, "%s/%s", a, b);
    return p;
}

/* ---- Priority ------------------------------------------------------- */

/* On a machine shared with other jobs, the whole run takes the highest CPU
 * priority the process may have (nice -20), so that the other jobs disturb
 * the measurements less. It is set before any thread starts, so the
 * library's pool, the limits' teams and the corpus reader inherit it. The
 * run uses the same CPU time either way; it just takes it sooner. */
static bool raise_priority(void)
{
    return setpriority(PRIO_PROCESS, 0, -20) == 0;
}

/* ---- Validation ----------------------------------------------------- */

static int check_batch(const struct workload *w, const char *name, const uint64_t *idx, size_t n,
                       const struct batch_out *o)
{
    for (size_t k = 0; k < n; k++) {
        uint64_t i = idx[k];
        if (!w->ragged) {
            if (memcmp(o->buf + k * w->width, wl_rec(w, i), w->width) != 0) {
                fprintf(stderr, "zrbench: %s/%s: record %llu (position %zu) differs\n", w->name,
                        name, (unsigned long long)i, k);
                return -1;
            }
            continue;
        }
        bool shape_ok = true;
        for (uint32_t d = 0; d < w->ndim; d++)
            shape_ok &= o->shape[k * w->ndim + d] == w->shape[i * w->ndim + d];
        if (!shape_ok || o->bytes[k] != wl_bytes(w, i) ||
            memcmp(o->rec[k], wl_rec(w, i), wl_bytes(w, i)) != 0) {
            fprintf(stderr, "zrbench: %s/%s: record %llu (position %zu) differs%s\n", w->name, name,
                    (unsigned long long)i, k, shape_ok ? "" : " in shape");
            return -1;
        }
    }
    return 0;
}

/* Before timing, the library's rows and the limits (the engine
 * benchmark's rows) gather every record once, in index order, and check
 * it. The planned batches of every row are checked in the first timed
 * pass (see timed_pass). The other rows skip the sweep: on the token
 * workloads it is several times the plan, and through a file system at a
 * few thousand records a second it would take longer than the whole
 * benchmark. */
static int sweep(struct backend *b, const struct workload *w, struct batch_out *o)
{
    if (!b->in_ram && strncmp(b->name, "zrecord-", 8) != 0)
        return 0;
    uint64_t *idx = malloc(w->batch * sizeof *idx);
    int rc = 0;
    if (!idx)
        return -1;
    for (size_t a = 0; rc == 0 && a < w->n; a += w->batch) {
        size_t n = w->n - a < w->batch ? w->n - a : w->batch;
        for (size_t k = 0; k < n; k++)
            idx[k] = a + k;
        rc = b->ops->gather(b, idx, n, o);
        if (rc == 0)
            rc = check_batch(w, b->name, idx, n, o);
    }
    free(idx);
    return rc;
}

/* ---- Measurement ---------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double p95(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)(0.95 * (double)(n - 1) + 0.5);
    return v[i];
}

struct pass {
    double seconds;
    double p95;
};

static int cmp_pass(const void *a, const void *b)
{
    double x = ((const struct pass *)a)->seconds, y = ((const struct pass *)b)->seconds;
    return x < y ? -1 : x > y;
}

/* One timed pass over the plan. Batch by batch, every backend gathers the
 * same batch in turn, so that load from elsewhere and the state of the
 * caches fall on all rows alike. lat holds nbatches latencies per row.
 * With check, every batch is compared with the source records after its
 * timing ends; a difference fails the run, so no published figure comes
 * from a pass (or a backend) that returned wrong bytes. */
static int timed_pass(struct backend *bk, const bool *on, size_t nrows, const struct workload *w,
                      struct batch_out *o, double *lat, struct pass *out, bool check)
{
    for (size_t q = 0; q < w->nbatches; q++) {
        const uint64_t *idx = w->plan + q * w->batch;
        for (size_t r = 0; r < nrows; r++) {
            if (!on[r])
                continue;
            double t0 = now_seconds();
            if (bk[r].ops->gather(&bk[r], idx, w->batch, o) != 0) {
                fprintf(stderr, "zrbench: %s/%s: gather failed\n", w->name, bk[r].name);
                return -1;
            }
            double t = now_seconds() - t0;
            lat[r * w->nbatches + q] = bk[r].self_timed ? bk[r].inner_seconds : t;
            if (check && check_batch(w, bk[r].name, idx, w->batch, o) != 0) {
                fprintf(stderr, "zrbench: %s/%s: validation failed\n", w->name, bk[r].name);
                return -1;
            }
        }
    }
    for (size_t r = 0; r < nrows; r++) {
        if (!on[r])
            continue;
        double *l = lat + r * w->nbatches, total = 0;
        for (size_t q = 0; q < w->nbatches; q++)
            total += l[q];
        out[r].seconds = total;
        out[r].p95 = p95(l, w->nbatches);
    }
    return 0;
}

static int run_workload(const struct options *opt, const struct workload *w, const char *tmp,
                        struct wl_result *res)
{
    struct backend bk[NROWS];
    bool on[NROWS] = {0};
    size_t nb = 0;
    int rc = 0;
    int all = zr_threads();
    char *wdir = join(tmp, w->name);
    char *dirs[NROWS] = {0};
    mkdir(wdir, 0700);

    res->w = w;
    res->wname = w->name;
    for (size_t r = 0; r < NROWS; r++) {
        if (!want_row(opt, ROWS[r].kind))
            continue;
        /* On a one-CPU machine a kind's all-thread row is its 1-thread
         * row. */
        if (ROWS[r].threads == 1 && all == 1 && r + 1 < NROWS && ROWS[r + 1].kind == ROWS[r].kind)
            continue;
        if (ROWS[r].dense_only && w->ragged)
            continue;
        if (is_large(w) && !runs_large(ROWS[r].kind))
            continue;
        /* Rows of one kind with different thread counts get folders of
         * their own. */
        char sub[64];
        snprintf(sub, sizeof sub, "%s-%d", ROW_NAMES[ROWS[r].kind], ROWS[r].threads);
        dirs[r] = join(wdir, sub);
        /* Some rows read the store a row earlier in ROWS wrote. */
        const char *peer = NULL;
        for (size_t q = 0; q < r && ROWS[r].peer != NONE; q++)
            if (on[q] && ROWS[q].kind == ROWS[r].peer && !peer)
                peer = dirs[q];
        if (ROWS[r].need_peer && !peer)
            continue;
        if (backend_init(&bk[r], ROWS[r].kind, ROWS[r].threads, dirs[r], peer) != 0) {
            fprintf(stderr, "zrbench: cannot set up %s\n", ROW_NAMES[ROWS[r].kind]);
            rc = -1;
            goto out;
        }
        on[r] = true;
        nb++;
    }

    /* Write: a few repetitions (one for the slow dictionary store), each
     * into a fresh folder, the page cache flushed in between. */
    for (size_t r = 0; r < NROWS; r++) {
        if (!on[r])
            continue;
        struct backend *b = &bk[r];
        int reps = b->write_once ? 1 : opt->write_reps;
        double t[16];
        if (b->ops->setup && b->ops->setup(b, w) != 0) {
            fprintf(stderr, "zrbench: %s/%s: setup failed\n", w->name, b->name);
            rc = -1;
            goto out;
        }
        for (int k = 0; k < reps; k++) {
            rmtree(b->dir);
            if (b->many_files)
                fresh_inodes();
            else
                settle(wdir);
            progress("%s: %s, %d thread%s: write %d/%d", w->name, b->name, b->threads,
                     b->threads == 1 ? "" : "s", k + 1, reps);
            double t0 = now_seconds();
            int wrc = b->ops->write(b, w);
            t[k] = now_seconds() - t0;
            if (wrc != 0) {
                fprintf(stderr, "zrbench: %s/%s: write failed\n", w->name, b->name);
                rc = -1;
                goto out;
            }
            settle(wdir);
        }
        struct result *x = &res->rows[r];
        x->write_mibs = (double)w->logical / 1048576.0 / median(t, (size_t)reps);
        x->write_reps = reps;
    }

    /* Check every backend: the sweep now, the plan in the first pass. */
    struct batch_out o = {
        .rec = malloc(w->batch * sizeof *o.rec),
        .bytes = malloc(w->batch * sizeof *o.bytes),
        .shape = malloc(w->batch * BENCH_MAX_NDIM * sizeof *o.shape),
    };
    double *lat = malloc(NROWS * w->nbatches * sizeof *lat);
    struct pass *passes = malloc((size_t)opt->passes * NROWS * sizeof *passes);
    if (!o.rec || !o.bytes || !o.shape || !lat || !passes) {
        rc = -1;
        goto done;
    }
    for (size_t r = 0; r < NROWS; r++) {
        if (!on[r])
            continue;
        progress("%s: %s, %d thread%s: prepare", w->name, bk[r].name, bk[r].threads,
                 bk[r].threads == 1 ? "" : "s");
        if (bk[r].ops->prepare(&bk[r], w) != 0 || sweep(&bk[r], w, &o) != 0) {
            fprintf(stderr, "zrbench: %s/%s: validation failed\n", w->name, bk[r].name);
            rc = -1;
            goto done;
        }
    }

    /* Time: every pass visits every backend in turn. */
    struct pass cur[NROWS];
    for (int p = 0; p < opt->passes; p++) {
        progress("%s: gather pass %d/%d%s", w->name, p + 1, opt->passes,
                 p == 0 ? ", every batch checked" : "");
        int prc = timed_pass(bk, on, NROWS, w, &o, lat, cur, p == 0);
        if (prc != 0) {
            rc = -1;
            goto done;
        }
        for (size_t r = 0; r < NROWS; r++)
            passes[r * (size_t)opt->passes + (size_t)p] = cur[r];
    }

    for (size_t r = 0; r < NROWS; r++) {
        if (!on[r])
            continue;
        struct result *x = &res->rows[r];
        struct pass *ps = passes + r * (size_t)opt->passes;
        double p95s[64];
        for (int p = 0; p < opt->passes; p++)
            p95s[p] = ps[p].p95;
        qsort(ps, (size_t)opt->passes, sizeof *ps, cmp_pass);
        double secs = ps[opt->passes / 2].seconds;
        x->name = bk[r].name;
        x->threads = bk[r].threads;
        x->in_ram = bk[r].in_ram;
        x->no_write = bk[r].no_write;
        x->gather_mibs = (double)w->plan_logical / 1048576.0 / secs;
        x->krecs = (double)(w->nbatches * w->batch) / secs / 1000.0;
        x->p95_ms = median(p95s, (size_t)opt->passes) * 1000.0;
        x->footprint = bk[r].ops->footprint(&bk[r]);
        x->ratio = x->footprint ? (double)w->logical / (double)x->footprint : 0;
        snprintf(x->note, sizeof x->note, "%s", bk[r].note);
        x->valid = true;
    }
    res->nrows = NROWS;

done:
    free(o.rec);
    free(o.bytes);
    free(o.shape);
    free(lat);
    free(passes);
out:
    for (size_t r = 0; r < NROWS; r++) {
        if (on[r])
            bk[r].ops->release(&bk[r]);
        free(dirs[r]);
    }
    if (!opt->keep)
        rmtree(wdir);
    free(wdir);
    return rc;
}

/* ---- Report --------------------------------------------------------- */

static void fmt_bytes(char *buf, size_t n, uint64_t v)
{
    if (v >= (1ull << 30))
        snprintf(buf, n, "%.2f GiB", (double)v / (double)(1ull << 30));
    else
        snprintf(buf, n, "%.1f MiB", (double)v / 1048576.0);
}

static void print_table(const struct wl_result *res)
{
    const struct workload *w = res->w;
    printf("### %s\n\n%s\n\n", w->title, w->note);
    printf("| backend | threads | logical write | logical gather | krecords/s | p95 | disk | ratio |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t r = 0; r < res->nrows; r++) {
        const struct result *x = &res->rows[r];
        if (!x->valid)
            continue;
        char wr[32], disk[48];
        if (x->no_write)
            snprintf(wr, sizeof wr, "—");
        else if (x->write_mibs < 10)
            snprintf(wr, sizeof wr, "%.1f MiB/s", x->write_mibs);
        else
            snprintf(wr, sizeof wr, "%.0f MiB/s", x->write_mibs);
        fmt_bytes(disk, sizeof disk, x->footprint);
        if (x->in_ram)
            strncat(disk, " (RAM)", sizeof disk - strlen(disk) - 1);
        printf("| %s | %d | %s | %.0f MiB/s | %.1f | %.2f ms | %s | %.2fx |\n", x->name, x->threads,
               wr, x->gather_mibs, x->krecs, x->p95_ms, disk, x->ratio);
    }
    printf("\n");
    for (size_t r = 0; r < res->nrows; r++) {
        const struct result *x = &res->rows[r];
        if (x->valid && x->note[0])
            printf("- %s (%d thread%s): %s.\n", x->name, x->threads, x->threads == 1 ? "" : "s",
                   x->note);
    }
    printf("\n");
}

static const struct result *find(const struct wl_result *res, const char *name, int threads)
{
    for (size_t r = 0; r < res->nrows; r++) {
        const struct result *x = &res->rows[r];
        if (x->valid && strcmp(x->name, name) == 0 && x->threads == threads)
            return x;
    }
    return NULL;
}

static int print_targets(const struct wl_result *res, size_t nres, int all)
{
    int missed = 0;
    printf("### Target ratios (same run, all = %d threads)\n\n", all);
    printf("| workload | measure | ratio | target | met |\n|---|---|---:|---:|---|\n");
    for (size_t k = 0; k < nres; k++) {
        const struct wl_result *r = &res[k];
        const char *wn = r->wname;
        const struct result *raw = find(r, "zrecord-raw", all), *mem = find(r, "memcpy-limit", all);
        const struct result *zs = find(r, "zrecord-zstd", all), *zl = find(r, "zstd-limit", all);
        const struct result *zd = find(r, "zrecord-zstdict", all),
                            *zdl = find(r, "zstd-dict-limit", all);
        double raw_target = strncmp(wn, "dense-tokens", 12) == 0 ? 0.6
                            : strstr(wn, "vision")           ? 0.75
                                                             : 0;
        struct {
            const struct result *a, *b;
            bool write;
            const char *what;
            double target;
        } t[] = {
            {raw, mem, false, "zrecord-raw gather / memcpy-limit gather", raw_target},
            {zs, zl, false, "zrecord-zstd gather / zstd-limit gather", 0.85},
            {zd, zdl, false, "zrecord-zstdict gather / zstd-dict-limit gather", 0.85},
            {zs, zl, true, "zrecord-zstd write / zstd-limit write (in-RAM compression)", 0.8},
        };
        for (size_t j = 0; j < sizeof t / sizeof *t; j++) {
            if (!t[j].a || !t[j].b)
                continue;
            double ratio = t[j].write ? t[j].a->write_mibs / t[j].b->write_mibs
                                      : t[j].a->gather_mibs / t[j].b->gather_mibs;
            if (t[j].target > 0) {
                bool met = ratio >= t[j].target;
                missed += !met;
                printf("| %s | %s | %.2f | ≥ %.2f | %s |\n", wn, t[j].what, ratio, t[j].target,
                       met ? "yes" : "**no**");
            } else {
                printf("| %s | %s | %.2f | — | — |\n", wn, t[j].what, ratio);
            }
        }
    }
    printf("\n");
    return missed;
}

/* This project's rows (the library and its file system) and the limits
 * are not "other backends". */
static bool is_other(const struct result *x)
{
    return x->valid && !x->in_ram && strncmp(x->name, "zrecord", 7) != 0;
}

static const struct result *best_other(const struct wl_result *res)
{
    const struct result *best = NULL;
    for (size_t r = 0; r < res->nrows; r++) {
        const struct result *x = &res->rows[r];
        if (is_other(x) && (!best || x->gather_mibs > best->gather_mibs))
            best = x;
    }
    return best;
}

/* After each table: every zrecord codec against the fastest other row. */
static void print_best_other(const struct wl_result *res, int all)
{
    const struct result *b = best_other(res);
    if (!b)
        return;
    printf("**zrecord / best other backend** (the fastest gather among the rows that are not "
           "zrecord, zrecordfs or a limit: %s, %d thread%s, %.0f MiB/s):",
           b->name, b->threads, b->threads == 1 ? "" : "s", b->gather_mibs);
    const char *ours[] = {"zrecord-raw", "zrecord-zstd", "zrecord-zstdict"};
    int shown = 0;
    for (size_t k = 0; k < 3; k++) {
        const struct result *z = find(res, ours[k], all);
        if (z)
            printf("%s %s %.2fx", shown++ ? "," : "", z->name, z->gather_mibs / b->gather_mibs);
    }
    printf(".\n\n");
}

/* The comparison targets: ratios of gather rates (krecords/s for Ragged
 * tokens, the same ratio on one plan) against named rows, some also
 * requiring an equal or better disk ratio. */
static int print_comparison(const struct wl_result *res, size_t nres, int all)
{
    struct target {
        const char *wl, *ours, *peer;
        int peer_threads; /* -1: the best other backend */
        double target;
        bool disk;        /* also an equal or better disk ratio */
    };
    static const struct target T[] = {
        {"dense-vision", "zrecord-raw", NULL, -1, 1.5, false},
        {"dense-vision", "zrecord-zstd", "squashfuse-zstd", 1, 1.8, true},
        {"dense-vision", "zrecord-zstd", "hdf5-gzip", 1, 3.0, true},
        {"ragged-vision", "zrecord-raw", "lmdb-raw", 1, 1.5, false},
        {"ragged-vision", "zrecord-zstd", "hdf5-gzip", 1, 5.0, false},
        {"dense-tokens", "zrecord-raw", "npy-mmap-raw", 1, 1.0, false},
        {"dense-tokens", "zrecord-raw", "npy-mmap-raw", 0, 0, false},
        {"dense-tokens", "zrecord-raw", "lmdb-raw", 1, 2.5, false},
        {"ragged-tokens", "zrecord-raw", "lmdb-raw", 1, 1.5, false},
        {"ragged-tokens", "zrecord-zstd", "lmdb-raw", 1, 1.5, false},
        {"ragged-tokens", "zrecord-zstdict", "lmdb-raw", 1, 1.5, false},
        {"dense-tokens-large", "zrecord-raw", "npy-mmap-raw", 1, 1.0, false},
        {"dense-tokens-large", "zrecord-raw", "npy-mmap-raw", 0, 0, false},
        {"dense-tokens-large", "zrecord-raw", "lmdb-raw", 1, 2.5, false},
        {"ragged-tokens-large", "zrecord-raw", "lmdb-raw", 1, 1.5, false},
        {"ragged-tokens-large", "zrecord-zstd", "lmdb-raw", 1, 1.5, false},
        {"ragged-tokens-large", "zrecord-zstdict", "lmdb-raw", 1, 1.5, false},
    };
    int missed = 0, shown = 0;
    for (size_t j = 0; j < sizeof T / sizeof *T; j++) {
        const struct wl_result *r = NULL;
        for (size_t k = 0; k < nres; k++)
            if (strcmp(res[k].wname, T[j].wl) == 0)
                r = &res[k];
        if (!r)
            continue;
        const struct result *a = find(r, T[j].ours, all);
        const struct result *b = T[j].peer_threads < 0
                                     ? best_other(r)
                                     : find(r, T[j].peer, T[j].peer_threads ? T[j].peer_threads : all);
        if (!a || !b)
            continue;
        if (!shown++)
            printf("### Comparison targets (same run)\n\n"
                   "*limit* is the same ratio for the in-RAM limit of the row's codec "
                   "(memcpy-limit, zstd-limit or zstd-dict-limit, %d thread%s): copying or "
                   "decoding the same records from RAM, with no store at all.\n\n"
                   "| workload | measure | ratio | limit | target | met |\n"
                   "|---|---|---:|---:|---:|---|\n",
                   all, all == 1 ? "" : "s");
        double ratio = a->gather_mibs / b->gather_mibs;
        const char *lim_name = strcmp(T[j].ours, "zrecord-raw") == 0    ? "memcpy-limit"
                               : strcmp(T[j].ours, "zrecord-zstd") == 0 ? "zstd-limit"
                                                                        : "zstd-dict-limit";
        const struct result *lim = find(r, lim_name, all);
        char limit[32] = "—";
        if (lim)
            snprintf(limit, sizeof limit, "%.2f", lim->gather_mibs / b->gather_mibs);
        char what[256], disk[96] = "";
        if (T[j].disk)
            snprintf(disk, sizeof disk, ", disk ratio %.2fx vs %.2fx", a->ratio, b->ratio);
        snprintf(what, sizeof what, "%s %s / %s%s (%d thread%s) %s%s", a->name,
                 strncmp(T[j].wl, "ragged-tokens", 13) == 0 ? "krecords/s" : "gather",
                 T[j].peer_threads < 0 ? "best other: " : "", b->name, b->threads,
                 b->threads == 1 ? "" : "s",
                 strncmp(T[j].wl, "ragged-tokens", 13) == 0 ? "krecords/s" : "gather", disk);
        if (T[j].target <= 0) {
            printf("| %s | %s | %.2f | %s | — | — |\n", T[j].wl, what, ratio, limit);
            continue;
        }
        bool met = ratio >= T[j].target && (!T[j].disk || a->ratio >= b->ratio);
        missed += !met;
        printf("| %s | %s | %.2f | %s | ≥ %.2f%s | %s |\n", T[j].wl, what, ratio, limit,
               T[j].target, T[j].disk ? ", disk ratio ≥" : "", met ? "yes" : "**no**");
    }
    if (shown)
        printf("\n");
    return missed;
}

/* One line per row for the plot: workload, backend, threads, gather
 * MiB/s, krecords/s. */
static void write_tsv(FILE *f, const struct wl_result *res)
{
    for (size_t r = 0; r < res->nrows; r++) {
        const struct result *x = &res->rows[r];
        if (x->valid)
            fprintf(f, "%s\t%s\t%d\t%.1f\t%.2f\n", res->wname, x->name, x->threads,
                    x->gather_mibs, x->krecs);
    }
}

static void print_machine(const char *tmp)
{
    char model[256] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                snprintf(model, sizeof model, "%s", c + 2);
                model[strcspn(model, "\n")] = 0;
            }
            break;
        }
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
    if (statfs(tmp, &sf) == 0)
        fs = sf.f_type == 0xEF53             ? "ext4"
             : sf.f_type == 0x58465342       ? "xfs"
             : sf.f_type == 0x9123683E       ? "btrfs"
             : sf.f_type == TMPFS_MAGIC_NUMBER ? "tmpfs"
                                             : "other";
    double load[3] = {0};
    getloadavg(load, 3);
    printf("**Machine**: %s, %ld online CPUs (%d used by libloaderx), %.1f GiB RAM, %s %s %s, "
           "compiler %s, libzstd %s, stores on %s (%s); load average at start %.2f.\n\n",
           model, sysconf(_SC_NPROCESSORS_ONLN), zr_threads(), (double)memkb / 1048576.0, u.sysname,
           u.release, u.machine, __VERSION__, ZSTD_versionString(), fs, tmp, load[0]);
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: zrbench [--quick] [--only NAME[,NAME...]] [--dir DIR] [--passes N]\n"
            "               [--write-reps N] [--seed N] [--keep] [--no-boost] [--tsv FILE]\n"
            "               [--large N]\n"
            "NAME is a workload (dense-vision ragged-vision dense-tokens ragged-tokens\n"
            "dense-tokens-large ragged-tokens-large) or a row: zrecord-raw zrecord-zstd\n"
            "zrecord-zstdict zrecordfs-raw zrecordfs-zstd zrecordfs-gather-raw\n"
            "zrecordfs-gather-zstd npy-mmap-raw\n"
            "numpy-fancy-raw files-raw squashfuse-raw squashfuse-zstd lmdb-raw hdf5-raw\n"
            "hdf5-gzip sqlite-raw memcpy-limit zstd-limit zstd-dict-limit (a row that\n"
            "reads another row's store brings that row along). Stores go to a temporary\n"
            "folder under DIR (default /var/tmp), which must be on a local disk, not\n"
            "tmpfs. --tsv writes workload, row, threads, gather MiB/s and krecords/s\n"
            "per line to FILE. --large sets the records of the larger token workloads\n"
            "(default 200000, --quick 20000; 0 leaves them out), which run the\n"
            "zrecord rows, npy-mmap-raw, lmdb-raw and the limits. The run takes nice\n"
            "-20 when the process may raise its priority (--no-boost: never).\n");
}

int main(int argc, char **argv)
{
    struct options opt = {
        .dir = "/var/tmp", .passes = 3, .write_reps = 3, .seed = 20240601, .boost = true};
    bool passes_set = false, reps_set = false, large_set = false;
    static const struct option longopts[] = {
        {"quick", no_argument, NULL, 'q'},     {"only", required_argument, NULL, 'o'},
        {"dir", required_argument, NULL, 'd'}, {"passes", required_argument, NULL, 'p'},
        {"write-reps", required_argument, NULL, 'w'}, {"seed", required_argument, NULL, 's'},
        {"keep", no_argument, NULL, 'k'},      {"help", no_argument, NULL, 'h'},
        {"no-boost", no_argument, NULL, 'n'},  {"tsv", required_argument, NULL, 't'},
        {"large", required_argument, NULL, 'l'}, {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'q': opt.quick = true; break;
        case 'o': opt.only = optarg; break;
        case 'd': opt.dir = optarg; break;
        case 'p': opt.passes = atoi(optarg); passes_set = true; break;
        case 'w': opt.write_reps = atoi(optarg); reps_set = true; break;
        case 's': opt.seed = strtoull(optarg, NULL, 10); break;
        case 'k': opt.keep = true; break;
        case 'n': opt.boost = false; break;
        case 't': opt.tsv = optarg; break;
        case 'l': opt.large = atol(optarg); large_set = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    if (opt.quick) {
        if (!passes_set)
            opt.passes = 3;
        if (!reps_set)
            opt.write_reps = 1;
    }
    if (!large_set)
        opt.large = opt.quick ? 20000 : 200000;
    if (opt.passes < 1 || opt.passes > 64 || opt.write_reps < 1 || opt.write_reps > 16 ||
        opt.large < 0 || opt.large > 100000000) {
        fprintf(stderr, "zrbench: --passes must be 1..64, --write-reps 1..16 and --large "
                        "0..100000000\n");
        return 2;
    }
    if (opt.only) {
        bool known = true;
        for (const char *p = opt.only; *p;) {
            const char *e = strchr(p, ',');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            bool found = false;
            for (size_t k = 0; k < NWORKLOADS; k++)
                found |= strlen(WORKLOADS[k]) == len && strncmp(p, WORKLOADS[k], len) == 0;
            for (size_t k = 0; k < BK_KIND_COUNT; k++)
                found |= strlen(ROW_NAMES[k]) == len && strncmp(p, ROW_NAMES[k], len) == 0;
            if (!found) {
                fprintf(stderr, "zrbench: unknown name '%.*s' in --only\n", (int)len, p);
                known = false;
            }
            p += len + (e ? 1 : 0);
        }
        if (!known)
            return 2;
    }

    struct statfs sf;
    if (statfs(opt.dir, &sf) != 0) {
        fprintf(stderr, "zrbench: %s: %s\n", opt.dir, strerror(errno));
        return 1;
    }
    if (sf.f_type == TMPFS_MAGIC_NUMBER) {
        fprintf(stderr, "zrbench: %s is tmpfs; stores must be on a local disk (use --dir)\n", opt.dir);
        return 1;
    }
    char *tmp = join(opt.dir, "zrbench-XXXXXX");
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "zrbench: cannot make a folder in %s: %s\n", opt.dir, strerror(errno));
        return 1;
    }

    struct sizes sz = {.images = 500, .tokens = 30000, .vision_batches = 12, .token_batches = 30};
    if (opt.quick)
        sz = (struct sizes){.images = 40, .tokens = 4000, .vision_batches = 4, .token_batches = 10};

    FILE *tsv = NULL;
    if (opt.tsv && !(tsv = fopen(opt.tsv, "w"))) {
        fprintf(stderr, "zrbench: %s: %s\n", opt.tsv, strerror(errno));
        return 1;
    }
    g_start = now_seconds();
    bool boosted = opt.boost && raise_priority();
    print_machine(tmp);
    printf("Run: %s, %d timed gather passes per row (median reported), %d write repetitions "
           "(median; zrecord-zstdict written once), batch %d, seed %llu; %s.\n\n",
           opt.quick ? "--quick" : "full size", opt.passes, opt.write_reps, BENCH_BATCH,
           (unsigned long long)opt.seed,
           boosted      ? "run at nice -20"
           : opt.boost ? "run at normal priority (raising it was not permitted)"
                       : "run at normal priority (--no-boost)");
    fflush(stdout);

    double t_start = g_start;
    struct wl_result res[NWORKLOADS];
    size_t nres = 0;
    int rc = 0;
    struct workload wv = {0}, wtd = {0}, wtr = {0};
    char corpus_note[1024] = "";
    for (size_t k = 0; k < NWORKLOADS && rc == 0; k++) {
        const char *name = WORKLOADS[k];
        if (!want_workload(&opt, name) || (k >= 4 && opt.large == 0))
            continue;
        struct workload *w = &wv;
        double t0 = now_seconds();
        progress("%s: making the records", name);
        if (k == 0)
            rc = wl_dense_vision(&wv, &sz, opt.seed);
        else if (k == 1)
            rc = wl_ragged_vision(&wv, &sz, opt.seed);
        else if (!wtd.n || (k >= 4 && !is_large(&wtd))) {
            /* The token workloads of one size share one read of the
             * corpus; the larger ones replace the smaller. */
            struct sizes tsz = sz;
            if (k >= 4)
                tsz.tokens = (size_t)opt.large;
            wl_free(&wtd);
            wl_free(&wtr);
            rc = wl_tokens(&wtd, &wtr, &tsz, opt.seed, corpus_note, sizeof corpus_note);
            if (rc == 0 && k >= 4) {
                wtd.name = "dense-tokens-large";
                wtd.title = "Dense tokens, larger store: int32[512] blocks";
                wtr.name = "ragged-tokens-large";
                wtr.title = "Ragged tokens, larger store: int32 records of 16..512 tokens";
            }
            if (rc == 0) {
                printf("**Token corpus%s**: %s\n\n", k >= 4 ? " (larger token workloads)" : "",
                       corpus_note);
                fflush(stdout);
            }
        }
        if (k >= 2)
            w = k % 2 == 0 ? &wtd : &wtr;
        if (rc != 0)
            break;
        progress("%s: records ready in %.1f s", name, now_seconds() - t0);
        memset(&res[nres], 0, sizeof res[nres]);
        rc = run_workload(&opt, w, tmp, &res[nres]);
        if (rc == 0) {
            print_table(&res[nres]);
            print_best_other(&res[nres], zr_threads());
            if (tsv)
                write_tsv(tsv, &res[nres]);
            fflush(stdout);
            nres++;
        }
        /* The token workloads share one read of the corpus and are
         * freed after both have run. */
        if (k < 2)
            wl_free(&wv);
    }
    int missed = 0;
    if (rc == 0) {
        missed = print_targets(res, nres, zr_threads());
        missed += print_comparison(res, nres, zr_threads());
        double load[3] = {0};
        getloadavg(load, 3);
        printf("Whole run: %.0f s; load average at the end %.2f.\n", now_seconds() - t_start,
               load[0]);
    }
    wl_free(&wtd);
    wl_free(&wtr);
    team_shutdown();
    if (tsv && fclose(tsv) != 0)
        rc = -1;
    if (!opt.keep)
        rmtree(tmp);
    free(tmp);
    if (rc != 0)
        return 1;
    fprintf(stderr, "zrbench: %s\n", missed ? "some targets were missed" : "all targets met");
    return 0;
}

/*
 * coldrun.c: the measuring part of the cold-read benchmark (bench/coldbench;
 * coldstores.c makes the stores, coldbench.c has the options and the
 * report).
 *
 * Every measured pass starts with the page cache dropped
 * (cold_drop_caches); then the row opens its store (or mounts it), and
 * reads the plan: batches of 256 distinct records from the library's
 * cyclic sampler (a permutation, so no record is read twice in a pass and
 * the bytes read per byte gathered mean what they say). A warm pass of the
 * same plan follows at once. Every batch of every pass is checked against
 * the records' checksums after its timing ends.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <loaderx/loaderx.h>

#include "bench/cold.h"

/* ---- A zrecord row that states its open mode ------------------------- */

/* zrbench's zrecord rows (backends.c) write their store and open it with
 * ZR_RDONLY alone; these read a store made beforehand, with or without
 * ZR_NOMAP, and gather exactly as those rows do. */

struct zrow {
    int mode;
    zr_store *s;
    uint8_t *buf;
    uint64_t *sizes, *offs;
    uint64_t itemsize;
};

static int zrow_prepare(struct backend *b, const struct workload *w)
{
    struct zrow *z = b->state;
    if (zr_open(&z->s, b->dir, z->mode) != 0 || zr_len(z->s) != w->n) {
        fprintf(stderr, "coldbench: %s: %s\n", b->dir, zr_last_error());
        return -1;
    }
    z->itemsize = w->itemsize;
    z->buf = bench_batch_alloc(w->ragged ? bench_max_batch_bytes(w, wl_prefix(w))
                                         : w->batch * w->width);
    z->sizes = bench_xmalloc(w->batch * sizeof *z->sizes);
    z->offs = bench_xmalloc(w->batch * sizeof *z->offs);
    return 0;
}

static int zrow_gather(struct backend *b, const uint64_t *idx, size_t n, struct batch_out *o)
{
    struct zrow *z = b->state;
    o->buf = z->buf;
    int rc;
    if (zr_kind(z->s) == ZR_DENSE) {
        rc = zr_gather_dense(z->s, idx, n, z->buf);
        goto done;
    }
    rc = zr_ragged_sizes(z->s, idx, n, z->sizes);
    uint64_t at = 0;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        z->offs[k] = at;
        at += (z->sizes[k] + 7) & ~(uint64_t)7;
    }
    if (rc == 0)
        rc = zr_gather_ragged(z->s, idx, n, z->buf, z->offs);
    for (size_t k = 0; rc == 0 && k < n; k++) {
        zr_view v;
        rc = zr_ragged_view(z->buf + z->offs[k], z->sizes[k], z->itemsize, &v);
        if (rc == 0 && v.ndim > BENCH_MAX_NDIM)
            rc = ZR_ECORRUPT;
        if (rc == 0) {
            o->rec[k] = v.data;
            o->bytes[k] = v.nbytes;
            memcpy(o->shape + k * v.ndim, v.shape, v.ndim * sizeof *v.shape);
        }
    }
done:
    if (rc != 0)
        fprintf(stderr, "coldbench: gather: %s\n", zr_last_error());
    return rc ? -1 : 0;
}

static uint64_t zrow_footprint(struct backend *b)
{
    return dir_allocated(b->dir);
}

static void zrow_release(struct backend *b)
{
    struct zrow *z = b->state;
    if (!z)
        return;
    zr_close(z->s);
    free(z->buf);
    free(z->sizes);
    free(z->offs);
    free(z);
    b->state = NULL;
}

static const struct backend_ops zrow_ops = {
    .prepare = zrow_prepare,
    .gather = zrow_gather,
    .footprint = zrow_footprint,
    .release = zrow_release,
};

/* ---- Gather rows ---------------------------------------------------- */

enum row_kind { R_ZR, R_ZRFS_GATHER, R_NPY, R_LMDB, R_FILES };

struct gather_spec {
    const char *name;
    enum row_kind kind;
    enum cold_store store;
    bool nomap;
    int threads; /* 0: all */
    bool table;  /* the record table read into the page cache after the drop */
};

static const struct gather_spec GATHER_ROWS[] = {
    {"zrecord-raw", R_ZR, ST_RAW, false, 0, false},
    {"zrecord-raw-nomap", R_ZR, ST_RAW, true, 0, false},
    {"zrecord-zstd", R_ZR, ST_ZSTD, false, 0, false},
    {"zrecord-zstd-nomap", R_ZR, ST_ZSTD, true, 0, false},
    /* An epoch past its first records: the table is cached by then
     * (16 bytes a record), the records are not. A Dense raw store reads
     * its table too, until its handle has checked the layout (layout.c). */
    {"zrecord-raw-table", R_ZR, ST_RAW, false, 0, true},
    {"zrecord-zstd-table", R_ZR, ST_ZSTD, false, 0, true},
    {"zrecordfs-gather-raw", R_ZRFS_GATHER, ST_RAW, false, 0, false},
    {"zrecordfs-gather-zstd", R_ZRFS_GATHER, ST_ZSTD, false, 0, false},
    {"npy-mmap-raw", R_NPY, ST_NPY, false, 1, false},
    {"npy-mmap-raw", R_NPY, ST_NPY, false, 0, false},
    {"lmdb-raw", R_LMDB, ST_LMDB, false, 1, false},
    {"files-raw", R_FILES, ST_FILES, false, 1, false},
};

static int check_batch(const struct cold_wl *c, const char *row, const uint64_t *idx, size_t n,
                       const struct batch_out *o)
{
    const struct workload *w = &c->w;
    for (size_t k = 0; k < n; k++) {
        uint64_t i = idx[k], h;
        if (!w->ragged) {
            h = cold_hash(o->buf + k * w->width, w->width, 0);
        } else {
            if (o->bytes[k] != wl_bytes(w, i))
                h = ~c->hash[i];
            else
                h = cold_hash(o->rec[k], o->bytes[k],
                              cold_shape_seed(o->shape + k * w->ndim, w->ndim));
        }
        if (h != c->hash[i]) {
            fprintf(stderr, "coldbench: %s/%s: record %llu (position %zu) differs\n", c->name, row,
                    (unsigned long long)i, k);
            return -1;
        }
    }
    return 0;
}

static uint64_t proc_bytes(pid_t daemon)
{
    return cold_proc_read(getpid()) + (daemon ? cold_proc_read(daemon) : 0);
}

/* One pass over the plan: each batch timed, then checked. */
static int gather_pass(struct cold_wl *c, struct backend *b, struct batch_out *o, pid_t daemon,
                       const struct cold_device *dev, struct cold_meas *m)
{
    const struct workload *w = &c->w;
    uint64_t d0 = cold_device_read(dev), p0 = proc_bytes(daemon);
    m->secs = 0;
    for (size_t q = 0; q < w->nbatches; q++) {
        const uint64_t *idx = w->plan + q * w->batch;
        double t0 = now_seconds();
        if (b->ops->gather(b, idx, w->batch, o) != 0) {
            fprintf(stderr, "coldbench: %s/%s: gather failed\n", c->name, b->name);
            return -1;
        }
        double t = now_seconds() - t0;
        m->secs += t;
        if (q == 0)
            m->first = t;
        if (check_batch(c, b->name, idx, w->batch, o) != 0)
            return -1;
    }
    m->dev = cold_device_read(dev) - d0;
    m->proc = proc_bytes(daemon) - p0;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmp_meas(const void *a, const void *b)
{
    double x = ((const struct cold_meas *)a)->secs, y = ((const struct cold_meas *)b)->secs;
    return x < y ? -1 : x > y;
}

static int init_row(struct backend *b, struct cold_wl *c, const struct gather_spec *g, char **dirp)
{
    char *store = cold_path(c->dir, COLD_STORE_DIRS[g->store]);
    int rc = -1;
    *dirp = store;
    switch (g->kind) {
    case R_ZR: {
        memset(b, 0, sizeof *b);
        struct zrow *z = calloc(1, sizeof *z);
        if (!z)
            return -1;
        z->mode = ZR_RDONLY | (g->nomap ? ZR_NOMAP : 0);
        b->name = g->name;
        b->dir = store;
        b->threads = zr_threads();
        b->ops = &zrow_ops;
        b->state = z;
        return 0;
    }
    case R_ZRFS_GATHER: {
        /* The mount point lives in a folder of its own beside the stores. */
        *dirp = cold_path(c->dir, "gather-mnt");
        mkdir(*dirp, 0700);
        enum backend_kind k =
            g->store == ST_RAW ? BK_ZRECORDFS_GATHER_RAW : BK_ZRECORDFS_GATHER_ZSTD;
        rc = backend_init(b, k, 0, *dirp, store);
        /* The backend keeps the store's path as its peer folder. */
        return rc;
    }
    case R_NPY:
        return backend_init(b, BK_NPY_MMAP_RAW, g->threads, store, NULL);
    case R_LMDB:
        return backend_init(b, BK_LMDB_RAW, 1, store, NULL);
    case R_FILES:
        return backend_init(b, BK_FILES_RAW, 1, store, NULL);
    }
    return rc;
}

/* The device's rate just before a pass: a short fio job like run_fio's
 * at queue depth 32, on the LMDB store's file where there is one (the
 * same device, none of the blocks the pass reads: a host that caches
 * what the guest read cannot hand the pass fio's blocks), other blocks
 * each time. Returns 0 or -1. */
static int paired_fio(const struct cold_opts *o, const struct cold_wl *c, int p,
                      struct cold_fio *f)
{
    *f = (struct cold_fio){.bs = c->limit[0][1].bs, .qd = 32};
    const char *file = c->chunk[0];
    uint64_t size = c->chunk_bytes[0];
    char *lmdb = NULL;
    struct stat st;
    if (c->has[ST_LMDB]) {
        char *d = cold_path(c->dir, COLD_STORE_DIRS[ST_LMDB]);
        lmdb = cold_path(d, "data.mdb");
        free(d);
        if (stat(lmdb, &st) == 0 && (uint64_t)st.st_size >= size) {
            file = lmdb;
            size = (uint64_t)st.st_size;
        }
    }
    uint64_t io = size / 8 / f->bs * f->bs;
    int secs = o->fio_seconds < 2 ? o->fio_seconds : 2;
    int rc = cold_fio_run(file, io, secs, o->seed + 100 + (uint64_t)p, f);
    free(lmdb);
    return rc;
}

static int run_gather_row(const struct cold_opts *o, struct cold_wl *c,
                          const struct gather_spec *g, const struct cold_device *dev,
                          struct batch_out *out, struct cold_row *row)
{
    struct cold_meas cold[64], warm[64];
    double ratio[64];
    bool paired = g->kind == R_ZR && g->store == ST_RAW && !g->nomap && !g->table &&
                  c->fio_rounds > 0 && c->limit[0][1].bs > 0;
    int rc = 0;
    for (int p = 0; rc == 0 && p < o->passes; p++) {
        struct backend b;
        char *dir = NULL;
        char *store = NULL;
        if (init_row(&b, c, g, &dir) != 0) {
            fprintf(stderr, "coldbench: cannot set up %s\n", g->name);
            free(dir);
            return -1;
        }
        if (g->kind == R_ZRFS_GATHER)
            store = (char *)b.peer_dir;
        cold_progress("%s: %s, %d thread%s: cold pass %d/%d", c->name, g->name, b.threads,
                      b.threads == 1 ? "" : "s", p + 1, o->passes);
        struct cold_fio f;
        if (paired)
            rc = paired_fio(o, c, p, &f);
        if (rc == 0)
            rc = cold_drop_caches();
        if (rc == 0 && g->table)
            rc = cold_cache_tables(b.dir);
        if (rc == 0 && b.ops->prepare(&b, &c->w) != 0)
            rc = -1;
        pid_t daemon = 0;
        if (rc == 0 && g->kind == R_ZRFS_GATHER) {
            char *mnt = cold_path(dir, "mnt");
            daemon = cold_mount_daemon(mnt);
            free(mnt);
        }
        if (rc == 0)
            rc = gather_pass(c, &b, out, daemon, dev, &cold[p]);
        if (rc == 0 && paired)
            ratio[p] = cold_is_tokens(c->name)
                           ? (double)(c->w.nbatches * c->w.batch) / cold[p].secs / f.iops
                           : (double)c->w.plan_logical / 1048576.0 / cold[p].secs / f.mibs;
        if (rc == 0)
            rc = gather_pass(c, &b, out, daemon, dev, &warm[p]);
        row->threads = b.threads;
        b.ops->release(&b);
        free(dir);
        free(store);
    }
    if (rc != 0)
        return -1;
    qsort(cold, (size_t)o->passes, sizeof *cold, cmp_meas);
    qsort(warm, (size_t)o->passes, sizeof *warm, cmp_meas);
    row->paired = 0;
    if (paired) {
        qsort(ratio, (size_t)o->passes, sizeof *ratio, cmp_double);
        row->paired = ratio[o->passes / 2];
    }
    snprintf(row->name, sizeof row->name, "%s", g->name);
    row->part = "gather";
    row->cold = cold[o->passes / 2];
    row->warm = warm[o->passes / 2];
    row->gathered = c->w.plan_logical;
    row->paged = c->w.plan_paged;
    row->recs = c->w.nbatches * c->w.batch;
    row->batches = c->w.nbatches;
    row->valid = true;
    return 0;
}

static struct cold_row *new_row(struct cold_wl *c)
{
    if (c->nrows == COLD_MAX_ROWS) {
        fprintf(stderr, "coldbench: too many rows\n");
        exit(1);
    }
    struct cold_row *r = &c->rows[c->nrows++];
    memset(r, 0, sizeof *r);
    return r;
}

const struct cold_row *cold_find(const struct cold_wl *c, const char *part, const char *name,
                                 int threads)
{
    for (size_t r = 0; r < c->nrows; r++) {
        const struct cold_row *x = &c->rows[r];
        if (x->valid && strcmp(x->part, part) == 0 && strcmp(x->name, name) == 0 &&
            (threads < 0 || x->threads == threads))
            return x;
    }
    return NULL;
}

/* ---- The loader ------------------------------------------------------ */

/* Check a loader batch against the checksums of its step's records. */
static int check_loader_batch(const struct cold_wl *c, const zr_batch *b)
{
    const struct workload *w = &c->w;
    const zr_column *col = &b->streams[0];
    for (size_t k = 0; k < b->size; k++) {
        uint64_t i = b->indices[k], h;
        if (i != w->plan[b->step * w->batch + k])
            return -1;
        if (!w->ragged) {
            h = cold_hash((const uint8_t *)col->data + k * w->width, w->width, 0);
        } else {
            const zr_view *v = &col->views[k];
            h = v->ndim == w->ndim
                    ? cold_hash(v->data, v->nbytes, cold_shape_seed(v->shape, v->ndim))
                    : ~c->hash[i];
        }
        if (h != c->hash[i]) {
            fprintf(stderr, "coldbench: %s/loader: step %llu record %llu differs\n", c->name,
                    (unsigned long long)b->step, (unsigned long long)i);
            return -1;
        }
    }
    return 0;
}

/* One run of the loader over the plan's steps: each batch is checked and
 * then held for the rest of the step time (a sleep, as a training step
 * that waits for an accelerator leaves the CPU to the loader). The time
 * runs from the loader's creation to the end of the last step. */
static int loader_pass(const struct cold_opts *o, struct cold_wl *c, zr_store *s, double step,
                       const struct cold_device *dev, struct cold_meas *m)
{
    const struct workload *w = &c->w;
    const char *names[] = {"x"};
    zr_loader_opts lo = {.size = sizeof(zr_loader_opts), .mode = ZR_CYCLIC, .batch = BENCH_BATCH, .seed = o->seed, .world = 1,
                         .depth = o->depth, .threads = 1};
    zr_loader *ld = NULL;
    uint64_t d0 = cold_device_read(dev), p0 = proc_bytes(0);
    double t0 = now_seconds(), end = t0;
    int rc = zr_loader_create(&ld, &s, names, 1, &lo);
    for (size_t q = 0; rc == 0 && q < w->nbatches; q++) {
        zr_batch *b = NULL;
        rc = zr_loader_next(ld, &b);
        double got = now_seconds();
        if (rc != 0)
            break;
        if (q == 0)
            m->first = got - t0;
        rc = check_loader_batch(c, b);
        zr_batch_release(b);
        end = got + step;
        cold_sleep_until(end);
    }
    m->secs = end - t0;
    m->dev = cold_device_read(dev) - d0;
    m->proc = proc_bytes(0) - p0;
    zr_loader_destroy(ld);
    if (rc != 0)
        fprintf(stderr, "coldbench: %s: loader: %s\n", c->name, zr_last_error());
    return rc ? -1 : 0;
}

/* The step a loader run simulates: --step-ms, or twice the longer of the
 * warm gather's batch time (so the loader has time to spare when the data
 * is in RAM) and the time the device needs for a batch at fio's queue
 * depth 32 rate (so a loader that keeps the device busy enough has time to
 * spare when it is not). A batch's reads are what the cold gather of the
 * same store read, in fio's blocks: a record whose table entry is not
 * cached costs the device a read of the table too. */
static double step_for(const struct cold_opts *o, const struct cold_wl *c, int z)
{
    if (o->step_ms > 0)
        return o->step_ms / 1000.0;
    double warm = 0, device = 0;
    const struct cold_row *g = cold_find(c, "gather", z ? "zrecord-zstd" : "zrecord-raw", -1);
    if (g)
        warm = g->warm.secs / (double)g->batches;
    const struct cold_fio *f = &c->limit[z][1];
    if (c->fio_rounds && f->iops > 0) {
        double per_batch = (double)c->plan_stored[z] / (double)c->w.nbatches;
        if (g && g->batches && (double)g->cold.dev / (double)g->batches > per_batch)
            per_batch = (double)g->cold.dev / (double)g->batches;
        /* Records under a block take a block each. */
        double ios = per_batch / (double)f->bs < (double)c->w.batch ? (double)c->w.batch
                                                                    : per_batch / (double)f->bs;
        device = ios / f->iops;
    }
    double t = 2 * (warm > device ? warm : device);
    return t > 0.001 ? t : 0.001;
}

static int run_loader_row(const struct cold_opts *o, struct cold_wl *c, int z,
                          const struct cold_device *dev)
{
    char *dir = cold_path(c->dir, COLD_STORE_DIRS[z ? ST_ZSTD : ST_RAW]);
    double step = step_for(o, c, z);
    struct cold_meas cold[64], warm[64];
    int rc = 0;
    for (int p = 0; rc == 0 && p < o->passes; p++) {
        cold_progress("%s: loader over %s, step %.1f ms: pass %d/%d", c->name,
                      COLD_STORE_DIRS[z ? ST_ZSTD : ST_RAW], step * 1e3, p + 1, o->passes);
        zr_store *s = NULL;
        rc = cold_drop_caches();
        if (rc == 0 && zr_open(&s, dir, ZR_RDONLY) != 0) {
            fprintf(stderr, "coldbench: %s: %s\n", dir, zr_last_error());
            rc = -1;
        }
        if (rc == 0)
            rc = loader_pass(o, c, s, step, dev, &cold[p]);
        if (rc == 0)
            rc = loader_pass(o, c, s, step, dev, &warm[p]);
        zr_close(s);
    }
    free(dir);
    if (rc != 0)
        return -1;
    qsort(cold, (size_t)o->passes, sizeof *cold, cmp_meas);
    qsort(warm, (size_t)o->passes, sizeof *warm, cmp_meas);
    struct cold_row *row = new_row(c);
    snprintf(row->name, sizeof row->name, "%s", z ? "zrecord-zstd" : "zrecord-raw");
    row->part = "loader";
    row->threads = 1;
    row->cold = cold[o->passes / 2];
    row->warm = warm[o->passes / 2];
    row->gathered = c->w.plan_logical;
    row->paged = c->w.plan_paged;
    row->recs = c->w.nbatches * c->w.batch;
    row->batches = c->w.nbatches;
    row->step = step;
    row->valid = true;
    return 0;
}

/* ---- Record files: plain files against zrecordfs ---------------------- */

/* The program `rel` of the build tree this benchmark (bench/coldbench)
 * belongs to, in out; 0 when it is there to run. */
static int build_path(char *out, size_t n, const char *rel)
{
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0)
        return -1;
    exe[k] = 0;
    snprintf(out, n, "%s/%s", dirname(dirname(exe)), rel);
    return access(out, X_OK);
}

static int driver_path(char *out, size_t n)
{
    const char *env = getenv("ZRBENCH_ZRECORDFS");
    if (env) {
        snprintf(out, n, "%s", env);
        return 0;
    }
    return build_path(out, n, "fs/zrecordfs");
}

/* Mount what row `which` of run_files_row reads on mnt: zrecordfs over
 * store (1, 2), or bench/fuse_ceiling passing the plain files of store
 * through FUSE (3). 0 once mounted. */
static int mount_files(const struct workload *w, int which, int readers, const char *store,
                       const char *mnt)
{
    char driver[PATH_MAX];
    if (which == 3) {
        if (build_path(driver, sizeof driver, "bench/fuse_ceiling") != 0) {
            fprintf(stderr, "coldbench: no bench/fuse_ceiling (make bench builds it)\n");
            return -1;
        }
        /* The faster of its two loops for the number of readers (measured
         * with bench/fileab.sh): libfuse's threads let four readers' disk
         * reads overlap, and the one-thread loop spares one reader a
         * thread's wake-up per request. */
        char opt[PATH_MAX + 64];
        snprintf(opt, sizeof opt, "count=%zu,dir=%s%s", w->n, store, w->ragged ? ",ext=.npy" : "");
        const char *one[] = {driver, "-s", "-o", opt, mnt, NULL};
        const char *many[] = {driver, "-o", opt, mnt, NULL};
        return bench_mount(readers == 1 ? one : many, mnt);
    }
    if (driver_path(driver, sizeof driver) != 0) {
        fprintf(stderr, "coldbench: no fs/zrecordfs (make bench builds it)\n");
        return -1;
    }
    const char *plain[] = {driver, store, mnt, NULL};
    const char *npy[] = {driver, "-o", "npy", store, mnt, NULL};
    return bench_mount(w->ragged ? npy : plain, mnt);
}

static int run_files_row(const struct cold_opts *o, struct cold_wl *c, int which, int readers,
                         const struct cold_device *dev)
{
    static const char *const NAMES[] = {"files-raw (ext4)", "zrecordfs-raw", "zrecordfs-zstd",
                                        "ext4 files through FUSE"};
    const struct workload *w = &c->w;
    size_t nf = o->fs_files < w->nbatches * w->batch ? o->fs_files : w->nbatches * w->batch;
    char *mnt = cold_path(c->dir, "files-mnt");
    static const enum cold_store STORE[] = {ST_FILES, ST_RAW, ST_ZSTD, ST_FILES};
    char *store = cold_path(c->dir, COLD_STORE_DIRS[STORE[which]]);
    const char *dir = which == 0 ? store : mnt;
    struct cold_meas cold[64], warm[64];
    uint64_t *check = bench_xmalloc(nf * sizeof *check);
    uint64_t bytes = 0;
    int rc = 0;
    for (int p = 0; rc == 0 && p < o->passes; p++) {
        cold_progress("%s: %s, %d reader%s: cold pass %d/%d", c->name, NAMES[which], readers,
                      readers == 1 ? "" : "s", p + 1, o->passes);
        bool mounted = false;
        rc = cold_drop_caches();
        if (rc == 0 && which > 0) {
            rc = mount_files(w, which, readers, store, mnt);
            mounted = rc == 0;
        }
        pid_t daemon = mounted ? cold_mount_daemon(mnt) : 0;
        for (int pass = 0; rc == 0 && pass < 2; pass++) {
            struct cold_meas *m = pass == 0 ? &cold[p] : &warm[p];
            uint64_t d0 = cold_device_read(dev), p0 = proc_bytes(daemon);
            rc = cold_read_files(w, dir, w->plan, nf, readers, NULL, &m->secs, &bytes);
            m->dev = cold_device_read(dev) - d0;
            m->proc = proc_bytes(daemon) - p0;
            m->first = 0;
        }
        /* Check the bytes: a third, untimed read that hashes every file. */
        if (rc == 0) {
            double s;
            uint64_t b;
            rc = cold_read_files(w, dir, w->plan, nf, 1, check, &s, &b);
            for (size_t k = 0; rc == 0 && k < nf; k++)
                if (check[k] != c->hash[w->plan[k]]) {
                    fprintf(stderr, "coldbench: %s/%s: record file %llu differs\n", c->name,
                            NAMES[which], (unsigned long long)w->plan[k]);
                    rc = -1;
                }
        }
        if (mounted)
            bench_unmount(mnt);
    }
    free(check);
    free(mnt);
    free(store);
    if (rc != 0)
        return -1;
    qsort(cold, (size_t)o->passes, sizeof *cold, cmp_meas);
    qsort(warm, (size_t)o->passes, sizeof *warm, cmp_meas);
    struct cold_row *row = new_row(c);
    snprintf(row->name, sizeof row->name, "%s", NAMES[which]);
    row->part = "files";
    row->threads = readers;
    row->cold = cold[o->passes / 2];
    row->warm = warm[o->passes / 2];
    row->gathered = row->paged = 0;
    for (size_t k = 0; k < nf; k++) {
        row->gathered += wl_bytes(w, w->plan[k]);
        row->paged += cold_pages(wl_bytes(w, w->plan[k]));
    }
    row->recs = nf;
    row->valid = true;
    return 0;
}

/* ---- One workload ------------------------------------------------------ */

static bool want_part(const struct cold_opts *o, const char *part)
{
    static const char *const PARTS[] = {"fio", "gather", "loader", "fs"};
    bool any = false;
    for (size_t k = 0; k < 4; k++)
        any |= cold_listed(o->only, PARTS[k]);
    return !any || cold_listed(o->only, part);
}

/* One round of fio: both stores' chunk files at queue depths 1 and 32,
 * and the raw store's buffered at 32 (the page cache's own cost, which a
 * store that fits the memory pays to be cached for its next epoch). The
 * second round, after the rows, reads other blocks (another seed) and
 * shows whether the device's speed moved while the rows ran. */
static int run_fio(const struct cold_opts *o, struct cold_wl *c, int round)
{
    for (int z = 0; z < 2; z++) {
        /* A block of the mean stored record, in whole 4 KiB pages. */
        uint64_t bs = ((uint64_t)c->mean_stored[z] + 4095) & ~(uint64_t)4095;
        /* Far less than the file, so that nothing is read twice (and a
         * host's cache of the virtual disk serves nothing fio put there). */
        uint64_t io = c->chunk_bytes[z] / 8 / bs * bs;
        for (int q = 0; q < (z ? 2 : 3); q++) {
            struct cold_fio *f = &c->fio[round][z][q];
            f->bs = bs;
            f->qd = q ? 32 : 1;
            f->buffered = q == 2;
            cold_progress("%s: fio on %s, %llu-byte blocks, queue depth %d%s (%s the rows)",
                          c->name, COLD_STORE_DIRS[z], (unsigned long long)bs, f->qd,
                          f->buffered ? ", buffered" : "", round ? "after" : "before");
            if (cold_fio_run(c->chunk[z], io, o->fio_seconds, o->seed + (uint64_t)round, f) != 0)
                return -1;
            if (!round || f->iops > c->limit[z][q].iops)
                c->limit[z][q] = *f;
        }
    }
    c->fio_rounds = round + 1;
    return 0;
}

static int measure(const struct cold_opts *o, struct cold_wl *c, const struct cold_device *dev)
{
    struct workload *w = &c->w;
    int rc = 0;
    cold_make_plan(c, cold_is_tokens(c->name) ? o->token_batches : o->vision_batches, o->seed);
    if (cold_store_facts(c) != 0)
        return -1;
    if (want_part(o, "fio") && run_fio(o, c, 0) != 0)
        return -1;

    struct batch_out out = {
        .rec = bench_xmalloc(w->batch * sizeof *out.rec),
        .bytes = bench_xmalloc(w->batch * sizeof *out.bytes),
        .shape = bench_xmalloc(w->batch * BENCH_MAX_NDIM * sizeof *out.shape),
    };
    if (want_part(o, "gather") || want_part(o, "loader")) {
        /* The loader's step needs the warm gathers: --only loader runs
         * the two zrecord rows it uses as well. */
        bool all = want_part(o, "gather");
        for (size_t g = 0; rc == 0 && g < sizeof GATHER_ROWS / sizeof *GATHER_ROWS; g++) {
            const struct gather_spec *s = &GATHER_ROWS[g];
            if (!c->has[s->store] || (!all && (s->kind != R_ZR || s->nomap || s->table)))
                continue;
            if (s->kind == R_NPY && s->threads == 0 && zr_threads() == 1)
                continue;
            rc = run_gather_row(o, c, s, dev, &out, new_row(c));
        }
    }
    if (rc == 0 && want_part(o, "loader"))
        for (int z = 0; rc == 0 && z < 2; z++)
            rc = run_loader_row(o, c, z, dev);
    if (rc == 0 && want_part(o, "fs")) {
        static const int READERS[] = {1, 4};
        for (int which = 0; rc == 0 && which < 4; which++)
            for (size_t r = 0; rc == 0 && r < 2; r++)
                if ((which % 3) > 0 || c->has[ST_FILES])
                    rc = run_files_row(o, c, which, READERS[r], dev);
    }
    if (rc == 0 && want_part(o, "fio"))
        rc = run_fio(o, c, 1);
    free(out.rec);
    free(out.bytes);
    free(out.shape);
    return rc;
}

int cold_run_workload(const struct cold_opts *o, struct cold_wl *cws, size_t n, size_t k,
                      const struct cold_device *dev)
{
    if (cold_ready_stores(o, cws, n, k) != 0)
        return -1;
    return measure(o, &cws[k], dev);
}

/*
 * coldstores.c: the stores of the cold-read benchmark (bench/coldbench).
 *
 * Each workload's records (bench/workloads.c, made by payload bytes rather
 * than by count) are written once into every store the rows read: a raw
 * and a zstd zrecord store, LMDB, one .npy file (Dense) and a file per
 * record (not for Ragged tokens: 4 GiB of them are some fifteen million
 * files). They are written by the engine benchmark's own backends
 * (backends.c, be_*.c), so they are the stores zrbench measures warm.
 * With --stores DIR they are kept there with each record's checksum and
 * shape, and a later run with the same size and seed reuses them without
 * making the records again. The plan and the facts the report needs
 * about the stores (stored bytes, chunk files for fio) are made here too.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <loaderx/loaderx.h>

#include "bench/cold.h"

const char *const COLD_STORE_DIRS[ST_COUNT] = {"zr-raw", "zr-zstd", "lmdb", "npy", "files"};

#define MANIFEST_VERSION 1

char *cold_path(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = bench_xmalloc(n);
    snprintf(p, n, "%s/%s", a, b);
    return p;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void cold_rmtree(const char *path)
{
    nftw(path, rm_one, 64, FTW_DEPTH | FTW_PHYS);
}

void cold_settle(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        syncfs(fd);
        close(fd);
    }
}

/* ---- Workloads and their stores ---------------------------------------- */

bool cold_is_tokens(const char *name)
{
    return strstr(name, "tokens") != NULL;
}

bool cold_is_ragged(const char *name)
{
    return strncmp(name, "ragged", 6) == 0;
}

/* What a workload is, as bench/workloads.c makes it: for stores read back
 * from the --stores folder without making the records. */
static void set_identity(struct workload *w, const char *name)
{
    w->name = name;
    w->ragged = cold_is_ragged(name);
    w->batch = BENCH_BATCH;
    if (!cold_is_tokens(name)) {
        w->dtype = "|u1";
        w->itemsize = 1;
        w->ndim = 3;
        if (!w->ragged) {
            w->title = "Dense vision: (3, 224, 224) uint8 images";
            w->item_shape[0] = 3;
            w->item_shape[1] = 224;
            w->item_shape[2] = 224;
            w->width = 3 * 224 * 224;
        } else {
            w->title = "Ragged vision: (3, H, W) uint8 images, H and W lognormal in 64..512";
        }
    } else {
        w->dtype = "<i4";
        w->itemsize = 4;
        w->ndim = 1;
        if (!w->ragged) {
            w->title = "Dense tokens: int32[512] blocks";
            w->item_shape[0] = 512;
            w->width = 2048;
        } else {
            w->title = "Ragged tokens: int32 records of 16..512 tokens";
        }
    }
}

static int write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) {
        fprintf(stderr, "coldbench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static void *read_whole(const char *path, size_t want)
{
    FILE *f = fopen(path, "rb");
    void *p = bench_xmalloc(want);
    bool ok = f && fread(p, 1, want, f) == want && fgetc(f) == EOF;
    if (f)
        fclose(f);
    if (!ok) {
        free(p);
        return NULL;
    }
    return p;
}

static void manifest_head(char *buf, size_t n, const struct cold_opts *o, const char *name)
{
    snprintf(buf, n, "coldbench stores %d\nworkload %s\nbytes %llu\nseed %llu\n", MANIFEST_VERSION,
             name, (unsigned long long)o->size, (unsigned long long)o->seed);
}

/* Fill c from the --stores folder if a complete set made with the same
 * size and seed is there. */
static bool load_cached(const struct cold_opts *o, struct cold_wl *c)
{
    char *mpath = cold_path(c->dir, "manifest"), want[512], text[8192] = "";
    FILE *f = fopen(mpath, "r");
    size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f)
        fclose(f);
    free(mpath);
    text[len] = 0;
    manifest_head(want, sizeof want, o, c->name);
    if (strncmp(text, want, strlen(want)) != 0 || !strstr(text, "\ncomplete\n"))
        return false;
    unsigned long long n = 0;
    const char *p = strstr(text, "\nrecords ");
    if (!p || sscanf(p, "\nrecords %llu", &n) != 1 || n == 0)
        return false;
    struct workload *w = &c->w;
    memset(w, 0, sizeof *w);
    set_identity(w, c->name);
    w->n = (size_t)n;
    char *hp = cold_path(c->dir, "hashes.u64"), *sp = cold_path(c->dir, "shapes.u64");
    c->hash = read_whole(hp, w->n * 8);
    if (w->ragged)
        w->shape = read_whole(sp, w->n * w->ndim * 8);
    free(hp);
    free(sp);
    if (!c->hash || (w->ragged && !w->shape)) {
        free(c->hash);
        free(w->shape);
        c->hash = NULL;
        w->shape = NULL;
        return false;
    }
    w->off = bench_xmalloc((w->n + 1) * sizeof *w->off);
    w->off[0] = 0;
    for (size_t k = 0; k < w->n; k++) {
        uint64_t b = w->width;
        if (w->ragged) {
            b = w->itemsize;
            for (uint32_t d = 0; d < w->ndim; d++)
                b *= w->shape[k * w->ndim + d];
        }
        w->off[k + 1] = w->off[k] + b;
    }
    w->logical = w->off[w->n];
    const char *q = strstr(text, "\nnote ");
    if (q)
        sscanf(q, "\nnote %1023[^\n]", w->note);
    q = strstr(text, "\ncorpus ");
    if (q)
        sscanf(q, "\ncorpus %1023[^\n]", c->corpus);
    for (int s = 0; s < ST_COUNT; s++) {
        char *d = cold_path(c->dir, COLD_STORE_DIRS[s]);
        struct stat st;
        if (c->has[s] && stat(d, &st) != 0) {
            free(d);
            return false;
        }
        free(d);
    }
    return true;
}

/* Make the records of c (and of the other token workload in cws, when it
 * needs its stores made too: one read of the corpus serves both). */
static int make_records(const struct cold_opts *o, struct cold_wl *cws, size_t n, size_t k)
{
    struct sizes sz = {.bytes = o->size, .vision_batches = 1, .token_batches = 1};
    struct cold_wl *c = &cws[k];
    if (!cold_is_tokens(c->name))
        return strcmp(c->name, "dense-vision") == 0 ? wl_dense_vision(&c->w, &sz, o->seed)
                                                     : wl_ragged_vision(&c->w, &sz, o->seed);
    struct cold_wl *dense = NULL, *ragged = NULL;
    for (size_t j = 0; j < n; j++) {
        /* The other token workload, if it comes later and has no stores
         * to reuse. */
        if (!cold_is_tokens(cws[j].name) || (j != k && (j < k || cws[j].reused || cws[j].w.data)))
            continue;
        if (j != k && o->stores && load_cached(o, &cws[j])) {
            cws[j].reused = true;
            continue;
        }
        if (cold_is_ragged(cws[j].name))
            ragged = &cws[j];
        else
            dense = &cws[j];
    }
    char note[1024];
    int rc = wl_tokens(dense ? &dense->w : NULL, ragged ? &ragged->w : NULL, &sz, o->seed, note,
                       sizeof note);
    if (dense)
        snprintf(dense->corpus, sizeof dense->corpus, "%s", note);
    if (ragged)
        snprintf(ragged->corpus, sizeof ragged->corpus, "%s", note);
    return rc;
}

static int write_store(struct cold_wl *c, enum cold_store s)
{
    static const enum backend_kind KIND[ST_COUNT] = {BK_ZRECORD_RAW, BK_ZRECORD_ZSTD, BK_LMDB_RAW,
                                                     BK_NPY_MMAP_RAW, BK_FILES_RAW};
    char *dir = cold_path(c->dir, COLD_STORE_DIRS[s]);
    struct backend b;
    int rc = -1;
    cold_rmtree(dir);
    /* A file per record: clean caches first (see zrbench's fresh_inodes). */
    if (s == ST_FILES && cold_drop_caches() != 0)
        goto out;
    double t0 = now_seconds();
    if (backend_init(&b, KIND[s], 1, dir, NULL) != 0)
        goto out;
    rc = (b.ops->setup ? b.ops->setup(&b, &c->w) : 0) || b.ops->write(&b, &c->w) ? -1 : 0;
    b.ops->release(&b);
    cold_settle(c->dir);
    cold_progress("%s: wrote %s in %.0f s", c->name, COLD_STORE_DIRS[s], now_seconds() - t0);
out:
    if (rc != 0)
        fprintf(stderr, "coldbench: %s: writing %s failed\n", c->name, dir);
    free(dir);
    return rc;
}

static int build_stores(const struct cold_opts *o, struct cold_wl *c)
{
    struct workload *w = &c->w;
    double t0 = now_seconds();
    char *mpath = cold_path(c->dir, "manifest");
    unlink(mpath);
    mkdir(c->dir, 0700);
    c->hash = bench_xmalloc(w->n * sizeof *c->hash);
    for (size_t k = 0; k < w->n; k++)
        c->hash[k] = cold_record_hash(w, k);
    int rc = 0;
    for (int s = 0; rc == 0 && s < ST_COUNT; s++)
        if (c->has[s])
            rc = write_store(c, (enum cold_store)s);
    char *hp = cold_path(c->dir, "hashes.u64"), *sp = cold_path(c->dir, "shapes.u64");
    if (rc == 0)
        rc = write_file(hp, c->hash, w->n * 8);
    if (rc == 0 && w->ragged)
        rc = write_file(sp, w->shape, w->n * w->ndim * 8);
    /* The note without its plan (the cold plan is made later). */
    char *semi = strstr(w->note, "; ");
    while (semi && !strstr(semi, "random batches"))
        semi = strstr(semi + 2, "; ");
    if (semi)
        *semi = 0;
    char text[4096];
    manifest_head(text, sizeof text, o, c->name);
    size_t at = strlen(text);
    snprintf(text + at, sizeof text - at, "records %zu\nnote %s\ncorpus %s\ncomplete\n", w->n,
             w->note, c->corpus);
    cold_settle(c->dir);
    if (rc == 0)
        rc = write_file(mpath, text, strlen(text));
    free(hp);
    free(sp);
    free(mpath);
    c->build_seconds = now_seconds() - t0;
    /* The records themselves are not needed any more: every row is
     * checked against the checksums. */
    free(w->data);
    w->data = NULL;
    free(w->plan);
    w->plan = NULL;
    return rc;
}

void cold_place_stores(const struct cold_opts *o, struct cold_wl *cws, size_t n, const char *tmp)
{
    for (size_t k = 0; k < n; k++) {
        struct cold_wl *c = &cws[k];
        if (c->dir)
            continue;
        char sub[256];
        snprintf(sub, sizeof sub, "%s-%llum-s%llu", c->name,
                 (unsigned long long)(o->size >> 20), (unsigned long long)o->seed);
        c->dir = cold_path(o->stores ? o->stores : tmp, sub);
        c->temporary = !o->stores;
        for (int s = 0; s < ST_COUNT; s++)
            c->has[s] = true;
        c->has[ST_NPY] = !cold_is_ragged(c->name);
        /* Some fifteen million files per 4 GiB. */
        c->has[ST_FILES] = !(cold_is_ragged(c->name) && cold_is_tokens(c->name));
    }
}

/* Make ready the stores of cws[k]: reuse them, or make its records (if an
 * earlier call has not) and write them. */
int cold_ready_stores(const struct cold_opts *o, struct cold_wl *cws, size_t n, size_t k)
{
    struct cold_wl *c = &cws[k];
    if (!c->reused && o->stores && !c->w.data && load_cached(o, c))
        c->reused = true;
    if (c->reused) {
        cold_progress("%s: reusing the stores in %s", c->name, c->dir);
        return 0;
    }
    if (!c->w.data) {
        double t0 = now_seconds();
        cold_progress("%s: making the records", c->name);
        if (make_records(o, cws, n, k) != 0)
            return -1;
        cold_progress("%s: records ready in %.0f s (%zu records, %.0f MiB)", c->name,
                      now_seconds() - t0, c->w.n, c->w.logical / 1048576.0);
    }
    if (build_stores(o, c) != 0)
        return -1;
    /* Reads right after some GiB of writes ran at a fraction of the
     * device's speed here (fio at queue depth 32: 188 MiB/s, against
     * 700-1,200 a minute later): the writes are done in the guest but not
     * yet below it. A pause lets them settle before anything is timed. */
    cold_progress("%s: %d s of quiet after the writes", c->name, o->settle);
    sync();
    sleep((unsigned)o->settle);
    return 0;
}

void cold_cleanup(struct cold_wl *c)
{
    if (c->temporary && c->dir)
        cold_rmtree(c->dir);
}

/* ---- Facts about the stores --------------------------------------------- */

static uint64_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The stored bytes of the plan's records, from the zstd store's record
 * table (doc/format.md), and the mean stored record over the store. Read
 * before the first drop of the page cache. */
int cold_store_facts(struct cold_wl *c)
{
    struct workload *w = &c->w;
    c->plan_stored[0] = w->plan_logical + w->nbatches * w->batch * wl_prefix(w);
    c->mean_stored[0] = (double)(w->logical + w->n * wl_prefix(w)) / (double)w->n;
    char *zdir = cold_path(c->dir, COLD_STORE_DIRS[ST_ZSTD]);
    zr_store *s = NULL;
    zr_store_stats st = ZR_STORE_STATS_INIT;
    int rc = zr_open(&s, zdir, ZR_RDONLY);
    if (rc == 0)
        rc = zr_stats(s, &st);
    zr_close(s);
    if (rc != 0) {
        fprintf(stderr, "coldbench: %s: %s\n", zdir, zr_last_error());
        free(zdir);
        return -1;
    }
    c->mean_stored[1] = (double)st.live_bytes / (double)w->n;
    uint64_t total = 0;
    int fd = -1;
    uint64_t seg_open = UINT64_MAX;
    for (size_t k = 0; k < w->nbatches * w->batch; k++) {
        uint64_t i = w->plan[k], seg = i >> 28;
        if (seg != seg_open) {
            char name[64];
            snprintf(name, sizeof name, "%llu.loc", (unsigned long long)seg);
            char *lp = cold_path(zdir, name);
            if (fd >= 0)
                close(fd);
            fd = open(lp, O_RDONLY | O_CLOEXEC);
            free(lp);
            seg_open = seg;
        }
        uint8_t e[16];
        if (fd < 0 || pread(fd, e, 16, (off_t)((i & ((1u << 28) - 1)) * 16)) != 16) {
            rc = -1;
            break;
        }
        total += cold_pages(le32(e + 4));
    }
    if (fd >= 0)
        close(fd);
    c->plan_stored[1] = total;
    /* fio reads the largest chunk file of each zrecord store. */
    for (int z = 0; z < 2; z++) {
        char *d = cold_path(c->dir, COLD_STORE_DIRS[z]);
        c->chunk_bytes[z] = 0;
        for (int k = 0; k < 64; k++) {
            char p[4096];
            struct stat sb;
            snprintf(p, sizeof p, "%s/%d.chunk", d, k);
            if (stat(p, &sb) != 0)
                break;
            if ((uint64_t)sb.st_size > c->chunk_bytes[z]) {
                c->chunk_bytes[z] = (uint64_t)sb.st_size;
                snprintf(c->chunk[z], sizeof c->chunk[z], "%s", p);
            }
        }
        free(d);
    }
    for (int k = 0; k < ST_COUNT; k++) {
        if (!c->has[k])
            continue;
        char *d = cold_path(c->dir, COLD_STORE_DIRS[k]);
        c->footprint[k] = dir_allocated(d);
        free(d);
    }
    free(zdir);
    if (rc != 0)
        fprintf(stderr, "coldbench: %s: cannot read the zstd store's record table\n", c->name);
    return rc;
}

/* The plan: nbatches batches of the library's cyclic sampler (a
 * permutation of the records, so every record at most once) from the
 * seed; the loader draws the same batches. */
void cold_make_plan(struct cold_wl *c, size_t nbatches, uint64_t seed)
{
    struct workload *w = &c->w;
    zr_sampler *sm = NULL;
    zr_sampler_info info = ZR_SAMPLER_INFO_INIT;
    if (zr_sampler_create(&sm, w->n, BENCH_BATCH, ZR_CYCLIC, seed, 0, 1) != 0 ||
        zr_sampler_get_info(sm, &info) != 0) {
        fprintf(stderr, "coldbench: %s: too few records for a batch\n", c->name);
        exit(1);
    }
    if (nbatches > info.per_cycle)
        nbatches = (size_t)info.per_cycle;
    free(w->plan);
    w->batch = BENCH_BATCH;
    w->nbatches = nbatches;
    w->plan = bench_xmalloc(nbatches * BENCH_BATCH * sizeof *w->plan);
    w->plan_logical = w->plan_paged = 0;
    for (size_t s = 0; s < nbatches; s++)
        zr_sampler_batch(sm, s, w->plan + s * BENCH_BATCH);
    for (size_t k = 0; k < nbatches * BENCH_BATCH; k++) {
        w->plan_logical += wl_bytes(w, w->plan[k]);
        w->plan_paged += cold_pages(wl_bytes(w, w->plan[k]));
    }
    zr_sampler_free(sm);
}

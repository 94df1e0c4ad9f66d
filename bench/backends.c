/*
 * backends.c: the rows of the benchmark tables.
 *
 * zrecord-raw, zrecord-zstd and zrecord-zstdict store the records through
 * the public libloaderx API and gather them back with it. The limits keep
 * the records in RAM and show what the same machine does without a store:
 * memcpy-limit copies records out of one buffer; zstd-limit compresses
 * every record in RAM (level 3, checksum flag, each record its own frame,
 * Ragged records with their shape prefix) for its write column, then
 * gathers by decompressing the very frames the zrecord-zstd store holds,
 * read out of its chunk files (the library's rule on small records'
 * literals makes frames of its own); zstd-dict-limit holds the frames of
 * the zrecord-zstdict store, likewise, and decompresses them with its
 * dictionary. Every limit splits a batch into one contiguous block of
 * about equal bytes per thread, the best split a gather of contiguous
 * blocks can make, and like the library it keeps a small batch on one
 * thread (no block under 64 KiB).
 *
 * The stores users would pick instead live in the be_*.c files, one per
 * library; a new one is a struct backend_ops there plus a case in
 * backend_init.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include <loaderx/loaderx.h>

#include "bench/bench.h"

#define ZSTD_LEVEL 3 /* what libloaderx uses for ZR_CODEC_ZSTD */

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t dir_allocated(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    uint64_t total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            total += (uint64_t)st.st_blocks * 512;
    }
    closedir(d);
    return total;
}

void *bench_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "zrbench: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

void *big_alloc(size_t n)
{
    void *p = NULL;
    size_t huge = (size_t)2 << 20;
    if (posix_memalign(&p, huge, n ? n : 1) != 0) {
        fprintf(stderr, "zrbench: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    if (n >= huge)
        madvise(p, (n + huge - 1) & ~(huge - 1), MADV_HUGEPAGE);
    return p;
}

/* A batch buffer, touched once so page faults stay out of the timed
 * gathers. */
uint8_t *bench_batch_alloc(size_t n)
{
    uint8_t *p = big_alloc(n);
    memset(p, 0, n);
    return p;
}

/* ---- The thread team ----------------------------------------------- */

/* A job lives on its caller's stack. Shards are claimed under the team's
 * lock; once the last one is claimed the job is unpublished, so a worker
 * touches a job only while it owns one of its unfinished shards, and the
 * caller waits for the shards to finish, not for every worker to wake. */
struct job {
    void (*fn)(void *ctx, size_t k);
    void *ctx;
    size_t nshards, next, done;
};

struct team {
    int n;
    pthread_t *th;
    pthread_mutex_t m;
    pthread_cond_t go, done;
    struct job *job; /* the job with shards left to claim, or NULL */
    bool quit;
};

static struct team *teams[1025];

/* Claim the next shard of t->job; call with the lock held. */
static size_t claim_locked(struct team *t, struct job *j)
{
    size_t k = j->next++;
    if (j->next >= j->nshards)
        t->job = NULL;
    return k;
}

static void *team_worker(void *arg)
{
    struct team *t = arg;
    pthread_mutex_lock(&t->m);
    for (;;) {
        while (!t->job && !t->quit)
            pthread_cond_wait(&t->go, &t->m);
        if (t->quit)
            break;
        struct job *j = t->job;
        size_t k = claim_locked(t, j);
        pthread_mutex_unlock(&t->m);
        j->fn(j->ctx, k);
        pthread_mutex_lock(&t->m);
        if (++j->done == j->nshards)
            pthread_cond_signal(&t->done);
    }
    pthread_mutex_unlock(&t->m);
    return NULL;
}

struct team *team_get(int threads)
{
    if (threads < 1)
        threads = 1;
    if (threads > 1024)
        threads = 1024;
    if (teams[threads])
        return teams[threads];
    struct team *t = calloc(1, sizeof *t);
    if (!t) {
        fprintf(stderr, "zrbench: out of memory\n");
        exit(1);
    }
    t->n = threads;
    pthread_mutex_init(&t->m, NULL);
    pthread_cond_init(&t->go, NULL);
    pthread_cond_init(&t->done, NULL);
    t->th = bench_xmalloc((size_t)threads * sizeof *t->th);
    for (int i = 1; i < threads; i++)
        if (pthread_create(&t->th[i], NULL, team_worker, t) != 0) {
            fprintf(stderr, "zrbench: cannot start a thread\n");
            exit(1);
        }
    teams[threads] = t;
    return t;
}

void team_run(struct team *t, size_t nshards, void (*fn)(void *ctx, size_t k), void *ctx)
{
    if (t->n == 1 || nshards <= 1) {
        for (size_t k = 0; k < nshards; k++)
            fn(ctx, k);
        return;
    }
    struct job j = {.fn = fn, .ctx = ctx, .nshards = nshards};
    pthread_mutex_lock(&t->m);
    t->job = &j;
    if (nshards - 1 >= (size_t)t->n - 1)
        pthread_cond_broadcast(&t->go);
    else
        for (size_t i = 1; i < nshards; i++)
            pthread_cond_signal(&t->go);
    while (j.next < nshards) {
        size_t k = claim_locked(t, &j);
        pthread_mutex_unlock(&t->m);
        fn(ctx, k);
        pthread_mutex_lock(&t->m);
        j.done++;
    }
    while (j.done < nshards)
        pthread_cond_wait(&t->done, &t->m);
    pthread_mutex_unlock(&t->m);
}

void team_shutdown(void)
{
    for (int n = 1; n <= 1024; n++) {
        struct team *t = teams[n];
        if (!t)
            continue;
        pthread_mutex_lock(&t->m);
        t->quit = true;
        pthread_cond_broadcast(&t->go);
        pthread_mutex_unlock(&t->m);
        for (int i = 1; i < t->n; i++)
            pthread_join(t->th[i], NULL);
        free(t->th);
        free(t);
        teams[n] = NULL;
    }
}

static int all_threads(int threads)
{
    return threads > 0 ? threads : zr_threads();
}

/* ---- Batch layout shared by the Ragged gathers --------------------- */

/* The largest number of bytes any planned batch needs when each record
 * takes size(k) bytes rounded up to 8. */
uint64_t bench_max_batch_bytes(const struct workload *w, uint64_t extra)
{
    uint64_t best = 0;
    for (size_t b = 0; b < w->nbatches; b++) {
        uint64_t sum = 0;
        for (size_t j = 0; j < w->batch; j++)
            sum += (wl_bytes(w, w->plan[b * w->batch + j]) + extra + 7) & ~(uint64_t)7;
        if (sum > best)
            best = sum;
    }
    /* The validation sweep gathers records in index order, which may make
     * a larger batch than any planned one. */
    for (size_t a = 0; a < w->n; a += w->batch) {
        uint64_t sum = 0;
        for (size_t k = a; k < w->n && k < a + w->batch; k++)
            sum += (wl_bytes(w, k) + extra + 7) & ~(uint64_t)7;
        if (sum > best)
            best = sum;
    }
    return best;
}

/* ---- Ragged frames -------------------------------------------------- */

void bench_frame(const struct workload *w, size_t k, uint8_t *dst)
{
    uint64_t ndim = w->ndim;
    memcpy(dst, &ndim, 8); /* little-endian host */
    memcpy(dst + 8, w->shape + k * w->ndim, 8 * (size_t)w->ndim);
    memcpy(dst + wl_prefix(w), wl_rec(w, k), wl_bytes(w, k));
}

int bench_unframe(const struct workload *w, const uint8_t *src, uint64_t len,
                  struct batch_out *o, size_t k)
{
    uint64_t pre = wl_prefix(w), ndim, count = 1;
    if (len < pre)
        return -1;
    memcpy(&ndim, src, 8);
    if (ndim != w->ndim)
        return -1;
    for (uint32_t d = 0; d < w->ndim; d++) {
        uint64_t v;
        memcpy(&v, src + 8 + 8 * d, 8);
        o->shape[k * w->ndim + d] = v;
        count *= v;
    }
    if (count * w->itemsize != len - pre)
        return -1;
    o->rec[k] = src + pre;
    o->bytes[k] = len - pre;
    return 0;
}

/* ---- zrecord -------------------------------------------------------- */

struct zrec {
    int codec;
    zr_store *s;
    uint8_t *buf;
    uint64_t *sizes, *offs;
    uint64_t itemsize;
};

static int zr_fail(const char *what, int rc)
{
    fprintf(stderr, "zrbench: %s: %s\n", what, zr_last_error());
    return rc ? rc : -1;
}

static int zrec_write(struct backend *b, const struct workload *w)
{
    struct zrec *z = b->state;
    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = z->codec};
    void *dict = NULL;
    zr_rec *recs = NULL;
    zr_store *s = NULL;
    int rc = 0;
    if (z->codec == ZR_CODEC_ZSTD_DICT) {
        double t0 = now_seconds();
        if (!w->ragged) {
            rc = zr_train_dict_buffer(w->data, w->width, w->n, ZR_TIER_BALANCED, &dict,
                                      &opts.dict_len);
        } else {
            const void **ptrs = bench_xmalloc(w->n * sizeof *ptrs);
            size_t *lens = bench_xmalloc(w->n * sizeof *lens);
            for (size_t k = 0; k < w->n; k++) {
                ptrs[k] = wl_rec(w, k);
                lens[k] = wl_bytes(w, k);
            }
            rc = zr_train_dict_records((const void *const *)ptrs, lens, w->n, ZR_TIER_BALANCED,
                                       &dict, &opts.dict_len);
            free(ptrs);
            free(lens);
        }
        if (rc != 0) {
            rc = zr_fail("training the dictionary", rc);
            goto out;
        }
        double t = now_seconds() - t0;
        snprintf(b->note, sizeof b->note, "dictionary %zu bytes (balanced tier), trained in %.2f s",
                 opts.dict_len, t);
        opts.dict = dict;
    }
    if (!w->ragged) {
        rc = zr_dense_create(&s, b->dir, w->dtype, w->item_shape, w->ndim, &opts);
        if (rc == 0)
            rc = zr_append_dense(s, w->dtype, w->item_shape, w->ndim, w->data, w->n, NULL);
    } else {
        recs = bench_xmalloc(w->n * sizeof *recs);
        for (size_t k = 0; k < w->n; k++)
            recs[k] = (zr_rec){.data = wl_rec(w, k), .shape = w->shape + k * w->ndim, .ndim = w->ndim};
        rc = zr_ragged_create(&s, b->dir, w->dtype, &opts);
        if (rc == 0)
            rc = zr_append_ragged(s, w->dtype, recs, w->n, NULL);
    }
    if (rc != 0)
        rc = zr_fail(b->dir, rc);
out:
    zr_close(s);
    free(recs);
    free(dict);
    return rc;
}

static int zrec_prepare(struct backend *b, const struct workload *w)
{
    struct zrec *z = b->state;
    int rc = zr_open(&z->s, b->dir, ZR_RDONLY);
    if (rc != 0)
        return zr_fail(b->dir, rc);
    if (zr_len(z->s) != w->n) {
        fprintf(stderr, "zrbench: %s holds %llu records, expected %zu\n", b->dir,
                (unsigned long long)zr_len(z->s), w->n);
        return -1;
    }
    z->itemsize = w->itemsize;
    z->buf = bench_batch_alloc(w->ragged ? bench_max_batch_bytes(w, wl_prefix(w)) : w->batch * w->width);
    z->sizes = bench_xmalloc(w->batch * sizeof *z->sizes);
    z->offs = bench_xmalloc(w->batch * sizeof *z->offs);
    return 0;
}

static int zrec_gather(struct backend *b, const uint64_t *idx, size_t n, struct batch_out *o)
{
    struct zrec *z = b->state;
    o->buf = z->buf;
    if (zr_kind(z->s) == ZR_DENSE) {
        int rc = zr_gather_dense(z->s, idx, n, z->buf);
        return rc ? zr_fail("gather", rc) : 0;
    }
    int rc = zr_ragged_sizes(z->s, idx, n, z->sizes);
    if (rc != 0)
        return zr_fail("sizes", rc);
    uint64_t at = 0;
    for (size_t k = 0; k < n; k++) {
        z->offs[k] = at;
        at += (z->sizes[k] + 7) & ~(uint64_t)7;
    }
    rc = zr_gather_ragged(z->s, idx, n, z->buf, z->offs);
    if (rc != 0)
        return zr_fail("gather", rc);
    for (size_t k = 0; k < n; k++) {
        zr_view v;
        rc = zr_ragged_view(z->buf + z->offs[k], z->sizes[k], z->itemsize, &v);
        if (rc != 0)
            return zr_fail("view", rc);
        o->rec[k] = v.data;
        o->bytes[k] = v.nbytes;
        if (v.ndim > BENCH_MAX_NDIM)
            return -1;
        memcpy(o->shape + k * v.ndim, v.shape, v.ndim * sizeof *v.shape);
    }
    return 0;
}

static uint64_t zrec_footprint(struct backend *b) { return dir_allocated(b->dir); }

static void zrec_release(struct backend *b)
{
    struct zrec *z = b->state;
    if (!z)
        return;
    zr_close(z->s);
    free(z->buf);
    free(z->sizes);
    free(z->offs);
    free(z);
    b->state = NULL;
}

static const struct backend_ops zrec_ops = {
    .write = zrec_write,
    .prepare = zrec_prepare,
    .gather = zrec_gather,
    .footprint = zrec_footprint,
    .release = zrec_release,
};

/* ---- Splitting a batch over threads --------------------------------- */

/* Below this many bytes per block, handing work to another thread costs
 * more than it saves (the library's gather uses the same floor). */
#define MIN_BLOCK_BYTES (64u << 10)

size_t bench_block_count(int threads, size_t n, uint64_t bytes)
{
    uint64_t p = bytes / MIN_BLOCK_BYTES;
    if (p > (uint64_t)threads)
        p = (uint64_t)threads;
    if (p > n)
        p = n;
    return p ? (size_t)p : 1;
}

/* Cut n records into `parts` contiguous blocks of about equal bytes:
 * cut[p] is the first record of block p, cut[parts] = n. */
void bench_split_bytes(const uint64_t *end_bytes, size_t n, size_t parts, size_t *cut)
{
    uint64_t total = n ? end_bytes[n - 1] : 0;
    size_t k = 0;
    cut[0] = 0;
    for (size_t p = 1; p < parts; p++) {
        uint64_t goal = total * p / parts;
        while (k < n && end_bytes[k] <= goal)
            k++;
        cut[p] = k;
    }
    cut[parts] = n;
}

/* ---- memcpy-limit --------------------------------------------------- */

struct memlim {
    const struct workload *w;
    struct team *team;
    int threads;
    uint8_t *data;     /* every payload, back to back, as in the workload */
    uint8_t *buf;      /* the batch */
    uint64_t *offs;    /* batch offsets (Ragged) */
    uint64_t *ends;    /* running byte totals of the batch */
    size_t cut[1025];
    /* the current call */
    const uint64_t *idx;
    size_t n;
    struct batch_out *out;
};

static void memlim_copy_in(void *arg, size_t k)
{
    struct memlim *m = arg;
    uint64_t total = m->w->logical;
    uint64_t a = total * k / (uint64_t)m->threads, e = total * (k + 1) / (uint64_t)m->threads;
    memcpy(m->data + a, m->w->data + a, e - a);
}

/* The RAM buffer is allocated and faulted in once, before the timed
 * writes: a limit's write is the copy alone. */
static int memlim_setup(struct backend *b, const struct workload *w)
{
    struct memlim *m = b->state;
    m->w = w;
    m->data = bench_batch_alloc(w->logical);
    return 0;
}

static int memlim_write(struct backend *b, const struct workload *w)
{
    struct memlim *m = b->state;
    m->w = w;
    team_run(m->team, (size_t)m->threads, memlim_copy_in, m);
    return 0;
}

static int memlim_prepare(struct backend *b, const struct workload *w)
{
    struct memlim *m = b->state;
    m->buf = bench_batch_alloc(w->ragged ? bench_max_batch_bytes(w, 0) : w->batch * w->width);
    m->offs = bench_xmalloc(w->batch * sizeof *m->offs);
    m->ends = bench_xmalloc(w->batch * sizeof *m->ends);
    return 0;
}

static void memlim_shard(void *arg, size_t p)
{
    struct memlim *m = arg;
    const struct workload *w = m->w;
    if (!w->ragged) {
        for (size_t k = m->cut[p]; k < m->cut[p + 1]; k++)
            memcpy(m->buf + k * w->width, m->data + m->idx[k] * w->width, w->width);
        return;
    }
    for (size_t k = m->cut[p]; k < m->cut[p + 1]; k++) {
        uint64_t i = m->idx[k];
        memcpy(m->buf + m->offs[k], m->data + w->off[i], w->off[i + 1] - w->off[i]);
    }
}

static int memlim_gather(struct backend *b, const uint64_t *idx, size_t n, struct batch_out *o)
{
    struct memlim *m = b->state;
    const struct workload *w = m->w;
    size_t parts;
    m->idx = idx;
    m->n = n;
    o->buf = m->buf;
    if (!w->ragged) {
        parts = bench_block_count(m->threads, n, n * w->width);
        for (size_t p = 0; p <= parts; p++)
            m->cut[p] = n * p / parts;
    } else {
        uint64_t at = 0;
        for (size_t k = 0; k < n; k++) {
            uint64_t i = idx[k];
            m->offs[k] = at;
            at += (w->off[i + 1] - w->off[i] + 7) & ~(uint64_t)7;
            m->ends[k] = at;
            o->rec[k] = m->buf + m->offs[k];
            o->bytes[k] = w->off[i + 1] - w->off[i];
            memcpy(o->shape + k * w->ndim, w->shape + i * w->ndim, w->ndim * sizeof *w->shape);
        }
        parts = bench_block_count(m->threads, n, at);
        bench_split_bytes(m->ends, n, parts, m->cut);
    }
    team_run(m->team, parts, memlim_shard, m);
    return 0;
}

static uint64_t memlim_footprint(struct backend *b)
{
    struct memlim *m = b->state;
    return m->w ? m->w->logical : 0;
}

static void memlim_release(struct backend *b)
{
    struct memlim *m = b->state;
    if (!m)
        return;
    free(m->data);
    free(m->buf);
    free(m->offs);
    free(m->ends);
    free(m);
    b->state = NULL;
}

static const struct backend_ops memlim_ops = {
    .setup = memlim_setup,
    .write = memlim_write,
    .prepare = memlim_prepare,
    .gather = memlim_gather,
    .footprint = memlim_footprint,
    .release = memlim_release,
};

/* ---- Reading a store's frames (for the zstd limits) ----------------- */

static int read_file(const char *path, uint8_t **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    int rc = -1;
    uint8_t *buf = NULL;
    if (fstat(fd, &st) != 0)
        goto out;
    buf = bench_xmalloc((size_t)st.st_size);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);
        if (r <= 0)
            goto out;
        got += (size_t)r;
    }
    *out = buf;
    *len = got;
    buf = NULL;
    rc = 0;
out:
    free(buf);
    close(fd);
    return rc;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The n frames of a store, copied out of its chunk files by its record
 * table (doc/format.md: entry i in (i >> 28).loc at (i & (2^28 - 1)) * 16:
 * offset, phys_length, logic_length, chunk_id, all u32 little-endian). */
struct frames {
    uint8_t *arena;
    uint64_t *off;     /* n + 1 offsets into arena */
    uint32_t *logic;   /* decompressed size of each frame */
    size_t n;
};

static void frames_free(struct frames *f)
{
    free(f->arena);
    free(f->off);
    free(f->logic);
    memset(f, 0, sizeof *f);
}

static int frames_from_store(const char *dir, size_t n, struct frames *f)
{
    char path[4096];
    uint8_t *loc = NULL;
    size_t loclen = 0, nchunks = 0;
    uint8_t **chunk = NULL;
    size_t *chunklen = NULL;
    int rc = -1;
    memset(f, 0, sizeof *f);
    snprintf(path, sizeof path, "%s/0.loc", dir);
    if (n > ((size_t)1 << 28) || read_file(path, &loc, &loclen) != 0 || loclen < n * 16)
        goto out;
    f->n = n;
    f->off = bench_xmalloc((n + 1) * sizeof *f->off);
    f->logic = bench_xmalloc(n * sizeof *f->logic);
    f->off[0] = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *e = loc + i * 16;
        f->off[i + 1] = f->off[i] + le32(e + 4);
        f->logic[i] = le32(e + 8);
        if (le32(e + 12) + 1 > nchunks)
            nchunks = le32(e + 12) + 1;
    }
    chunk = calloc(nchunks, sizeof *chunk);
    chunklen = calloc(nchunks, sizeof *chunklen);
    if (!chunk || !chunklen)
        goto out;
    for (size_t c = 0; c < nchunks; c++) {
        snprintf(path, sizeof path, "%s/%zu.chunk", dir, c);
        if (read_file(path, &chunk[c], &chunklen[c]) != 0)
            goto out;
    }
    f->arena = big_alloc(f->off[n]);
    for (size_t i = 0; i < n; i++) {
        const uint8_t *e = loc + i * 16;
        uint32_t c = le32(e + 12), o = le32(e), len = le32(e + 4);
        if ((uint64_t)o + len > chunklen[c])
            goto out;
        memcpy(f->arena + f->off[i], chunk[c] + o, len);
    }
    rc = 0;
out:
    for (size_t c = 0; chunk && c < nchunks; c++)
        free(chunk[c]);
    free(chunk);
    free(chunklen);
    free(loc);
    if (rc != 0) {
        fprintf(stderr, "zrbench: cannot read the frames of %s\n", dir);
        frames_free(f);
    }
    return rc;
}

/* ---- zstd-limit and zstd-dict-limit --------------------------------- */

struct zlim {
    const struct workload *w;
    struct team *team;
    int threads;
    bool dict;          /* frames and dictionary come from the zstdict store */
    struct frames fr;
    ZSTD_CCtx **cctx;
    ZSTD_DCtx **dctx;
    ZSTD_DDict *ddict;
    /* compression */
    uint64_t *slot;     /* record i's frame: at slot[i], length len[i] */
    uint32_t *len;
    atomic_uint_fast64_t next_rec, arena_used;
    atomic_int failed;
    /* the batch */
    uint8_t *buf;
    uint64_t *offs, *ends;
    size_t cut[1025];
    const uint64_t *idx;
};

/* The bytes the store compresses for record i: for Ragged records, the
 * shape prefix and then the payload. */
static size_t physical(const struct workload *w, size_t i, uint8_t *stage)
{
    size_t pre = 0;
    if (w->ragged) {
        uint64_t v = w->ndim;
        for (int b = 0; b < 8; b++)
            stage[b] = (uint8_t)(v >> (8 * b));
        for (uint32_t d = 0; d < w->ndim; d++) {
            v = w->shape[i * w->ndim + d];
            for (int b = 0; b < 8; b++)
                stage[8 + 8 * d + b] = (uint8_t)(v >> (8 * b));
        }
        pre = 8 * (1 + (size_t)w->ndim);
        memcpy(stage + pre, wl_rec(w, i), wl_bytes(w, i));
    }
    return pre + wl_bytes(w, i);
}

static void zlim_compress(void *arg, size_t t)
{
    struct zlim *z = arg;
    const struct workload *w = z->w;
    ZSTD_CCtx *c = z->cctx[t];
    uint8_t *stage = NULL, *out = NULL;
    size_t stage_cap = 0, out_cap = 0;
    ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, ZSTD_LEVEL);
    for (;;) {
        uint64_t i = atomic_fetch_add(&z->next_rec, 1);
        if (i >= w->n)
            break;
        size_t size = wl_bytes(w, i) + wl_prefix(w);
        const void *in = wl_rec(w, i);
        if (w->ragged) {
            if (size > stage_cap) {
                free(stage);
                stage = bench_xmalloc(stage_cap = size);
            }
            physical(w, i, stage);
            in = stage;
        }
        size_t bound = ZSTD_compressBound(size);
        if (bound > out_cap) {
            free(out);
            out = bench_xmalloc(out_cap = bound);
        }
        size_t r = ZSTD_compress2(c, out, out_cap, in, size);
        if (ZSTD_isError(r)) {
            atomic_store(&z->failed, 1);
            break;
        }
        uint64_t at = atomic_fetch_add(&z->arena_used, r);
        memcpy(z->fr.arena + at, out, r);
        z->slot[i] = at;
        z->len[i] = (uint32_t)r;
    }
    free(stage);
    free(out);
}

/* zstd-limit: room for every frame, allocated and faulted in once before
 * the timed writes, so that a write is the compression alone. */
static int zlim_setup(struct backend *b, const struct workload *w)
{
    struct zlim *z = b->state;
    z->w = w;
    if (z->dict)
        return 0;
    uint64_t cap = 0;
    for (size_t i = 0; i < w->n; i++)
        cap += ZSTD_compressBound(wl_bytes(w, i) + wl_prefix(w));
    z->fr.arena = bench_batch_alloc(cap);
    z->slot = bench_xmalloc(w->n * sizeof *z->slot);
    z->len = bench_xmalloc(w->n * sizeof *z->len);
    z->fr.n = w->n;
    z->fr.off = bench_xmalloc((w->n + 1) * sizeof *z->fr.off);
    z->fr.logic = bench_xmalloc(w->n * sizeof *z->fr.logic);
    for (size_t i = 0; i < w->n; i++)
        z->fr.logic[i] = (uint32_t)(wl_bytes(w, i) + wl_prefix(w));
    return 0;
}

static int zlim_write(struct backend *b, const struct workload *w)
{
    struct zlim *z = b->state;
    z->w = w;
    if (z->dict) {
        /* The frames are the zstdict store's own; nothing is compressed. */
        char path[4096];
        uint8_t *dict = NULL;
        size_t dlen = 0;
        frames_free(&z->fr);
        if (frames_from_store(b->peer_dir, w->n, &z->fr) != 0)
            return -1;
        snprintf(path, sizeof path, "%s/dict.zr", b->peer_dir);
        if (read_file(path, &dict, &dlen) != 0)
            return -1;
        ZSTD_freeDDict(z->ddict);
        z->ddict = ZSTD_createDDict(dict, dlen);
        free(dict);
        return z->ddict ? 0 : -1;
    }
    /* Frames land in the arena in completion order, each record's place
     * noted in slot and len. */
    atomic_store(&z->next_rec, 0);
    atomic_store(&z->arena_used, 0);
    atomic_store(&z->failed, 0);
    team_run(z->team, (size_t)z->threads, zlim_compress, z);
    return atomic_load(&z->failed) ? -1 : 0;
}

/* zstd-limit: take the zrecord-zstd store's frames for the gathers, so
 * that both rows decompress the same bytes, and count how many equal the
 * frames the write column made. Returns false (and keeps the row's own
 * frames) when there is no such store to read. */
static bool zlim_take_store_frames(struct backend *b)
{
    struct zlim *z = b->state;
    struct frames st;
    if (!b->peer_dir || frames_from_store(b->peer_dir, z->w->n, &st) != 0) {
        snprintf(b->note, sizeof b->note,
                 "its own level-3 frames (no zrecord-zstd store to read them from)");
        return false;
    }
    size_t same = 0;
    for (size_t i = 0; i < z->w->n; i++)
        same += st.off[i + 1] - st.off[i] == z->len[i] &&
                memcmp(st.arena + st.off[i], z->fr.arena + z->slot[i], z->len[i]) == 0;
    snprintf(b->note, sizeof b->note,
             "gathers the zrecord-zstd store's frames; %zu of %zu are byte-identical to the "
             "plain level-3 frames of its write column",
             same, z->w->n);
    frames_free(&z->fr);
    z->fr = st;
    return true;
}

static int zlim_prepare(struct backend *b, const struct workload *w)
{
    struct zlim *z = b->state;
    if (z->dict) {
        snprintf(b->note, sizeof b->note, "frames and dictionary read from the zrecord-zstdict store");
    } else if (!zlim_take_store_frames(b)) {
        /* Repack in record order, as the store's frames are. */
        uint8_t *packed = big_alloc(atomic_load(&z->arena_used));
        z->fr.off[0] = 0;
        for (size_t i = 0; i < w->n; i++) {
            memcpy(packed + z->fr.off[i], z->fr.arena + z->slot[i], z->len[i]);
            z->fr.off[i + 1] = z->fr.off[i] + z->len[i];
        }
        free(z->fr.arena);
        z->fr.arena = packed;
    }
    z->buf = bench_batch_alloc(w->ragged ? bench_max_batch_bytes(w, wl_prefix(w)) : w->batch * w->width);
    z->offs = bench_xmalloc(w->batch * sizeof *z->offs);
    z->ends = bench_xmalloc(w->batch * sizeof *z->ends);
    return 0;
}

static void zlim_shard(void *arg, size_t p)
{
    struct zlim *z = arg;
    const struct workload *w = z->w;
    ZSTD_DCtx *d = z->dctx[p];
    for (size_t k = z->cut[p]; k < z->cut[p + 1]; k++) {
        uint64_t i = z->idx[k];
        size_t at = w->ragged ? z->offs[k] : k * w->width;
        uint8_t *dst = z->buf + at;
        const uint8_t *src = z->fr.arena + z->fr.off[i];
        size_t srclen = z->fr.off[i + 1] - z->fr.off[i];
        /* As the library does, a record may be decoded into the start of
         * the next one this thread writes: zstd copies faster when its
         * output does not end at the record's last byte. */
        size_t cap = z->fr.logic[i];
        if (k + 1 < z->cut[p + 1]) {
            size_t next = w->ragged ? z->offs[k + 1] : (k + 1) * w->width;
            size_t room = z->fr.logic[z->idx[k + 1]];
            cap = next - at + (room < 64 ? room : 64);
        }
        size_t r = z->ddict ? ZSTD_decompress_usingDDict(d, dst, cap, src, srclen, z->ddict)
                            : ZSTD_decompressDCtx(d, dst, cap, src, srclen);
        if (r != z->fr.logic[i])
            atomic_store(&z->failed, 1);
    }
}

static int zlim_gather(struct backend *b, const uint64_t *idx, size_t n, struct batch_out *o)
{
    struct zlim *z = b->state;
    const struct workload *w = z->w;
    size_t parts;
    z->idx = idx;
    o->buf = z->buf;
    if (!w->ragged) {
        parts = bench_block_count(z->threads, n, n * w->width);
        for (size_t p = 0; p <= parts; p++)
            z->cut[p] = n * p / parts;
    } else {
        uint64_t at = 0;
        for (size_t k = 0; k < n; k++) {
            z->offs[k] = at;
            at += (z->fr.logic[idx[k]] + 7) & ~(uint64_t)7;
            z->ends[k] = at;
        }
        parts = bench_block_count(z->threads, n, at);
        bench_split_bytes(z->ends, n, parts, z->cut);
    }
    team_run(z->team, parts, zlim_shard, z);
    if (atomic_load(&z->failed))
        return -1;
    if (w->ragged) {
        /* Read each shape back out of its decompressed prefix. */
        uint64_t pre = wl_prefix(w);
        for (size_t k = 0; k < n; k++) {
            const uint8_t *r = z->buf + z->offs[k];
            o->rec[k] = r + pre;
            o->bytes[k] = z->fr.logic[idx[k]] - pre;
            for (uint32_t d = 0; d < w->ndim; d++) {
                uint64_t v = 0;
                memcpy(&v, r + 8 + 8 * d, 8); /* little-endian host */
                o->shape[k * w->ndim + d] = v;
            }
        }
    }
    return 0;
}

static uint64_t zlim_footprint(struct backend *b)
{
    struct zlim *z = b->state;
    return z->fr.n ? z->fr.off[z->fr.n] : 0;
}

static void zlim_release(struct backend *b)
{
    struct zlim *z = b->state;
    if (!z)
        return;
    frames_free(&z->fr);
    for (int t = 0; t < z->threads; t++) {
        ZSTD_freeCCtx(z->cctx[t]);
        ZSTD_freeDCtx(z->dctx[t]);
    }
    free(z->cctx);
    free(z->dctx);
    ZSTD_freeDDict(z->ddict);
    free(z->slot);
    free(z->len);
    free(z->buf);
    free(z->offs);
    free(z->ends);
    free(z);
    b->state = NULL;
}

static const struct backend_ops zlim_ops = {
    .setup = zlim_setup,
    .write = zlim_write,
    .prepare = zlim_prepare,
    .gather = zlim_gather,
    .footprint = zlim_footprint,
    .release = zlim_release,
};

/* ---- Rows ----------------------------------------------------------- */

int backend_init(struct backend *b, enum backend_kind kind, int threads, const char *dir,
                 const char *peer_dir)
{
    memset(b, 0, sizeof *b);
    b->dir = dir;
    b->peer_dir = peer_dir;
    b->threads = all_threads(threads);
    switch (kind) {
    case BK_ZRECORD_RAW:
    case BK_ZRECORD_ZSTD:
    case BK_ZRECORD_ZSTDICT: {
        struct zrec *z = calloc(1, sizeof *z);
        if (!z)
            return -1;
        z->codec = kind == BK_ZRECORD_RAW    ? ZR_CODEC_RAW
                   : kind == BK_ZRECORD_ZSTD ? ZR_CODEC_ZSTD
                                             : ZR_CODEC_ZSTD_DICT;
        b->name = kind == BK_ZRECORD_RAW    ? "zrecord-raw"
                  : kind == BK_ZRECORD_ZSTD ? "zrecord-zstd"
                                            : "zrecord-zstdict";
        b->threads = zr_threads();
        b->write_once = kind == BK_ZRECORD_ZSTDICT;
        b->ops = &zrec_ops;
        b->state = z;
        return 0;
    }
    case BK_MEMCPY_LIMIT: {
        struct memlim *m = calloc(1, sizeof *m);
        if (!m)
            return -1;
        m->threads = b->threads;
        m->team = team_get(m->threads);
        b->name = "memcpy-limit";
        b->in_ram = true;
        b->ops = &memlim_ops;
        b->state = m;
        return 0;
    }
    case BK_ZSTD_LIMIT:
    case BK_ZSTD_DICT_LIMIT: {
        struct zlim *z = calloc(1, sizeof *z);
        if (!z)
            return -1;
        z->threads = b->threads;
        z->team = team_get(z->threads);
        z->dict = kind == BK_ZSTD_DICT_LIMIT;
        z->cctx = calloc((size_t)z->threads, sizeof *z->cctx);
        z->dctx = calloc((size_t)z->threads, sizeof *z->dctx);
        if (!z->cctx || !z->dctx)
            return -1;
        for (int t = 0; t < z->threads; t++) {
            z->cctx[t] = ZSTD_createCCtx();
            z->dctx[t] = ZSTD_createDCtx();
            if (!z->cctx[t] || !z->dctx[t])
                return -1;
        }
        b->name = z->dict ? "zstd-dict-limit" : "zstd-limit";
        b->in_ram = true;
        b->write_once = z->dict;
        b->no_write = z->dict;
        b->ops = &zlim_ops;
        b->state = z;
        return 0;
    }
    case BK_ZRECORDFS_RAW:
    case BK_ZRECORDFS_ZSTD:
    case BK_ZRECORDFS_GATHER_RAW:
    case BK_ZRECORDFS_GATHER_ZSTD:
        return be_zrecordfs_init(b, kind);
    case BK_NPY_MMAP_RAW:
        return be_npy_init(b, kind);
    case BK_NUMPY_FANCY_RAW:
        return be_numpy_init(b, kind);
    case BK_FILES_RAW:
        return be_files_init(b, kind);
    case BK_SQUASHFUSE_RAW:
    case BK_SQUASHFUSE_ZSTD:
        return be_squashfuse_init(b, kind);
    case BK_LMDB_RAW:
        return be_lmdb_init(b, kind);
    case BK_HDF5_RAW:
    case BK_HDF5_GZIP:
        return be_hdf5_init(b, kind);
    case BK_SQLITE_RAW:
        return be_sqlite_init(b, kind);
    case BK_KIND_COUNT:
        break;
    }
    return -1;
}

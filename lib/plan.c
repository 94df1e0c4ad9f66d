/*
 * plan.c: the batch read planner (plan.h).
 *
 * A batch becomes reads in three steps. The pieces are sorted by file and
 * offset; pieces that follow one another in a file become one read (a
 * readv into their several destinations), up to RUN_MAX_PIECES pieces
 * and RUN_MAX_BYTES; the reads are cut into shards of about equal bytes,
 * one per pool thread. Each shard keeps up to RING_ENTRIES reads in
 * flight through its thread's io_uring and runs the caller's callback on
 * each piece as its read completes, so that decoding one record overlaps
 * the reads of the next.
 *
 * The reads are buffered: the kernel completes a read whose pages are
 * cached at once, inside the submission, and starts the disk for the
 * others without blocking. That tells the caller, for free, how much of a
 * batch was in memory (zr_plan_stats), which gather.c uses to choose its
 * path for the next batch. The exception is a store many times the
 * memory (zr_read_direct): its runs of DIRECT_MIN_RUN bytes or more are
 * read with O_DIRECT, whole 4 KiB blocks into an aligned buffer of the
 * run's own, from which its pieces are copied (with pread where there is
 * no ring); a direct read that fails or comes back short is made again
 * buffered, which tells a file's end from an error.
 *
 * A thread's ring is made on its first planned read and lives until the
 * thread exits. A process made by fork() shares its parent's rings, so a
 * child lets go of the ring it inherited and makes its own. Where io_uring
 * cannot be had (an old kernel, a sandbox that forbids it) the reads are
 * made one at a time with preadv, each tried first without waiting
 * (RWF_NOWAIT) so that the statistics still tell what was cached.
 *
 * A read pins its file's descriptor from its submission to its completion
 * (tables.c). When every descriptor the handle may hold is pinned, a
 * shard with reads in flight finishes some before it submits more, and
 * one with none waits for another thread's to be put back.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "io.h"
#include "plan.h"
#include "pool.h"

/* Reads in flight per thread: enough for a device's queue (fio's QD32
 * per thread, and more for remote devices) with room to spare. */
#define RING_ENTRIES 128

/* A merged read holds at most this many pieces (under IOV_MAX) and this
 * many bytes, so that a sequential batch still spreads over the shards
 * and the device sees several reads at once. */
#define RUN_MAX_PIECES 256
#define RUN_MAX_BYTES (2u << 20)

/* Below this many bytes a shard is not worth a thread of its own. */
#define MIN_SHARD_BYTES (64u << 10)

/* Runs this long are read with O_DIRECT where the store asks for it; the
 * offsets, lengths and buffers of such reads are multiples of
 * DIRECT_ALIGN, which every block device's logical block divides. */
#define DIRECT_MIN_RUN (64u << 10)
#define DIRECT_ALIGN 4096u

/* A planned read opens at most this many files with O_DIRECT (a
 * descriptor each, for the read's length, beside the handle's bounded
 * cache); the runs of further files are read buffered. */
#define DIRECT_MAX_FILES 64

/* Direct reads completed in this process, for tests. */
static _Atomic uint64_t direct_reads;

uint64_t zr_testing_direct_reads(void)
{
    return atomic_load(&direct_reads);
}

struct run {
    uint32_t file;
    uint32_t count;   /* pieces */
    size_t first;     /* its first piece in the sorted pieces */
    uint64_t off;
    uint64_t len;
    unsigned submit;  /* the submission of its shard that issued it */
    int fd;           /* the file's descriptor, pinned while the read is made */
    uint8_t *stage;   /* a direct read's buffer (NULL: buffered), from byte */
    uint64_t stage_off; /* stage_off of the file on */
    int dfd;          /* and the O_DIRECT descriptor it is read with */
};

/* A file's O_DIRECT descriptor, opened for one planned read. */
struct direct_fd {
    uint32_t file;
    int fd;
};

struct plan_ctx {
    zr_store *s;
    struct zr_ftable *t;
    struct zr_piece *p;
    struct iovec *iov; /* iov[i] is piece i's destination */
    struct run *runs;
    size_t *cut;       /* shard k is runs [cut[k], cut[k + 1]) */
    zr_piece_fn done;
    void *arg;
    bool direct;       /* large runs with O_DIRECT (zr_read_direct) */
    pthread_mutex_t dfd_lock;
    struct direct_fd *dfds; /* the files opened so, at most one per run */
    size_t ndfds;
    _Atomic size_t cached;
    _Atomic int failed;
    _Atomic bool ended;
    size_t ended_tag;
    pthread_mutex_t err_lock;
    int err;
    char errmsg[512];
};

static void plan_error(struct plan_ctx *c, int rc)
{
    pthread_mutex_lock(&c->err_lock);
    if (c->err == 0) {
        c->err = rc;
        snprintf(c->errmsg, sizeof c->errmsg, "%s", zr_last_error());
    }
    pthread_mutex_unlock(&c->err_lock);
    atomic_store(&c->failed, 1);
}

/* ---- a ring per thread ------------------------------------------------ */

struct ring {
    struct io_uring r;
    int state;         /* 0: not made yet, 1: usable, -1: io_uring refused */
    unsigned gen;      /* fork_gen when it was made */
    uint64_t retry_at; /* refused: when to ask again (ns of CLOCK_MONOTONIC) */
};

static _Thread_local struct ring tl_ring;
static atomic_uint fork_gen;
static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;

/* A thread whose ring could not be made (out of descriptors or locked
 * memory for a moment) asks again after this long. */
#define RING_RETRY_NS 1000000000ull

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void ring_forked(void)
{
    atomic_fetch_add(&fork_gen, 1);
}

static void ring_exit(void *p)
{
    struct ring *rg = p;
    if (rg->state == 1)
        io_uring_queue_exit(&rg->r);
    rg->state = 0;
}

/* LOADERX_IO_URING=0 in the environment makes every planned read a
 * preadv: for tools that cannot see what the kernel writes through a
 * ring (valgrind takes such bytes for uninitialised memory). */
static bool ring_refused;

static void ring_setup(void)
{
    const char *env = getenv("LOADERX_IO_URING");
    ring_refused = env && strcmp(env, "0") == 0;
    (void)pthread_key_create(&ring_key, ring_exit);
    (void)pthread_atfork(NULL, NULL, ring_forked);
}

/* This thread's ring, or NULL where io_uring cannot be used. */
static struct io_uring *ring_get(void)
{
    struct ring *rg = &tl_ring;
    unsigned gen = atomic_load_explicit(&fork_gen, memory_order_relaxed);
    if (rg->state == 1 && rg->gen == gen)
        return &rg->r;
    if (rg->state == -1 && rg->gen == gen && mono_ns() < rg->retry_at)
        return NULL;
    /* A ring made before a fork is shared with the parent: the child
     * unmaps and closes only its own copies, which leaves the parent's
     * ring as it was, and makes a ring of its own. */
    pthread_once(&ring_once, ring_setup);
    if (ring_refused)
        return NULL;
    if (rg->state == 1)
        io_uring_queue_exit(&rg->r);
    rg->gen = gen;
    if (io_uring_queue_init(RING_ENTRIES, &rg->r, 0) != 0) {
        rg->state = -1;
        rg->retry_at = mono_ns() + RING_RETRY_NS;
        return NULL;
    }
    rg->state = 1;
    (void)pthread_setspecific(ring_key, rg);
    return &rg->r;
}

/* ---- reading a run ---------------------------------------------------- */

/* Pin the descriptor of run r's file (how: ZR_FD_READ, or with ZR_FD_TRY
 * to be refused with ZR_FD_BUSY rather than wait). */
static int run_pin(struct plan_ctx *c, struct run *r, int how)
{
    return zr_file_fd(c->s, c->t, r->file, how, &r->fd);
}

static void run_put(struct plan_ctx *c, const struct run *r)
{
    zr_file_put(c->s, c->t, r->file);
}

/* Read run r from byte `done` of it on, with preadv on this thread: the
 * rest of a read the kernel cut short, or a whole read without a ring.
 * Its descriptor is pinned. */
static int read_sync(struct plan_ctx *c, const struct run *r, uint64_t done)
{
    struct iovec local[RUN_MAX_PIECES];
    size_t cnt = 0;
    uint64_t skip = done;
    for (uint32_t k = 0; k < r->count; k++) {
        struct iovec v = c->iov[r->first + k];
        if (skip >= v.iov_len) {
            skip -= v.iov_len;
            continue;
        }
        local[cnt].iov_base = (uint8_t *)v.iov_base + skip;
        local[cnt].iov_len = v.iov_len - skip;
        skip = 0;
        cnt++;
    }
    struct iovec *v = local;
    int fd = r->fd;
    while (done < r->len) {
        ssize_t got = zr_io.preadv(fd, v, (int)ZR_MIN(cnt, (size_t)IOV_MAX), (off_t)(r->off + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return zr_err_sys(errno, "%s: reading %u.%s at byte %llu", c->s->path, r->file,
                              c->t->suffix, (unsigned long long)(r->off + done));
        if (got == 0) {
            /* The piece that holds byte `done` of the run. */
            size_t i = r->first;
            for (uint64_t at = c->iov[i].iov_len; at <= done; at += c->iov[i].iov_len)
                i++;
            bool no = false;
            if (atomic_compare_exchange_strong(&c->ended, &no, true))
                c->ended_tag = c->p[i].tag;
            return zr_err(ZR_ECORRUPT, "%s/%u.%s ends at byte %llu, before the bytes read there",
                          c->s->path, r->file, c->t->suffix,
                          (unsigned long long)(r->off + done));
        }
        done += (uint64_t)got;
        while (cnt > 0 && (size_t)got >= v->iov_len) {
            got -= (ssize_t)v->iov_len;
            v++;
            cnt--;
        }
        if (cnt > 0) {
            v->iov_base = (uint8_t *)v->iov_base + got;
            v->iov_len -= (size_t)got;
        }
    }
    return 0;
}

/* The O_DIRECT descriptor of file `file` for this read, opened on first
 * use; -1 where it cannot be had (a file system without O_DIRECT, no
 * descriptor left), whose runs are then read buffered. */
static int direct_fd(struct plan_ctx *c, uint32_t file)
{
    pthread_mutex_lock(&c->dfd_lock);
    size_t k = 0;
    while (k < c->ndfds && c->dfds[k].file != file)
        k++;
    if (k == c->ndfds && k == DIRECT_MAX_FILES) {
        pthread_mutex_unlock(&c->dfd_lock);
        return -1;
    }
    if (k == c->ndfds) {
        char name[32];
        snprintf(name, sizeof name, "%u.%s", file, c->t->suffix);
        int fd = zr_io.openat(c->s->dirfd, name, O_RDONLY | O_DIRECT | O_CLOEXEC, 0);
        c->dfds[c->ndfds++] = (struct direct_fd){.file = file, .fd = fd};
    }
    int fd = c->dfds[k].fd;
    pthread_mutex_unlock(&c->dfd_lock);
    return fd;
}

/* Make run r a direct read if the plan reads large runs so and r is one:
 * give it its aligned buffer and descriptor. */
static void direct_prep(struct plan_ctx *c, struct run *r)
{
    r->stage = NULL;
    if (!c->direct || r->len < DIRECT_MIN_RUN)
        return;
    int fd = direct_fd(c, r->file);
    uint64_t from = r->off & ~(uint64_t)(DIRECT_ALIGN - 1);
    uint64_t to = (r->off + r->len + DIRECT_ALIGN - 1) & ~(uint64_t)(DIRECT_ALIGN - 1);
    void *buf;
    if (fd < 0 || posix_memalign(&buf, DIRECT_ALIGN, (size_t)(to - from)) != 0)
        return;
    r->stage = buf;
    r->stage_off = from;
    r->dfd = fd;
}

static uint64_t stage_len(const struct run *r)
{
    return (r->off + r->len - r->stage_off + DIRECT_ALIGN - 1) & ~(uint64_t)(DIRECT_ALIGN - 1);
}

/* A direct read of run r ended with res: copy its pieces out of the
 * buffer if it holds them all; returns res, or -EAGAIN to have the run
 * read again buffered. */
static int direct_done(struct plan_ctx *c, struct run *r, int res)
{
    uint64_t skip = r->off - r->stage_off;
    if (res >= 0 && (uint64_t)res >= skip + r->len) {
        const uint8_t *from = r->stage + skip;
        for (uint32_t k = 0; k < r->count; k++) {
            const struct iovec *v = &c->iov[r->first + k];
            memcpy(v->iov_base, from, v->iov_len);
            from += v->iov_len;
        }
        res = (int)r->len;
        atomic_fetch_add_explicit(&direct_reads, 1, memory_order_relaxed);
    } else {
        res = -EAGAIN;
    }
    free(r->stage);
    r->stage = NULL;
    return res;
}

/* Hand run r's pieces to the callback. */
static void pieces_done(struct plan_ctx *c, const struct run *r)
{
    for (uint32_t k = 0; c->done && k < r->count; k++) {
        if (atomic_load_explicit(&c->failed, memory_order_relaxed))
            return;
        int rc = c->done(c->arg, &c->p[r->first + k]);
        if (rc != 0) {
            plan_error(c, rc);
            return;
        }
    }
}

/* Run r's read ended with res (bytes, or -errno): finish it, put its
 * descriptor back and hand its pieces to the callback. A read the kernel
 * interrupted or could not start is made again with preadv. */
static void run_finish(struct plan_ctx *c, struct run *r, int res)
{
    if (r->stage)
        res = direct_done(c, r, res);
    if (atomic_load_explicit(&c->failed, memory_order_relaxed)) {
        run_put(c, r);
        return;
    }
    int rc = 0;
    if (res == -EINTR || res == -EAGAIN)
        rc = read_sync(c, r, 0);
    else if (res < 0)
        rc = zr_err_sys(-res, "%s: reading %u.%s at byte %llu", c->s->path, r->file,
                        c->t->suffix, (unsigned long long)r->off);
    else if ((uint64_t)res < r->len)
        rc = read_sync(c, r, (uint64_t)res);
    run_put(c, r);
    if (rc != 0)
        plan_error(c, rc);
    else
        pieces_done(c, r);
}

/* Read runs [j, b) of a shard without a ring: each first without waiting
 * for the disk, which succeeds, whole, only where its pages are cached
 * (counted in *cached), then the rest with preadv. */
static void shard_sync(struct plan_ctx *c, size_t j, size_t b, size_t *cached)
{
    for (; j < b && !atomic_load(&c->failed); j++) {
        struct run *r = &c->runs[j];
        int rc = run_pin(c, r, ZR_FD_READ);
        if (rc != 0) {
            plan_error(c, rc);
            return;
        }
        /* A direct read is made at once: it never finds pages cached. */
        direct_prep(c, r);
        if (r->stage) {
            ssize_t got = zr_io.pread(r->dfd, r->stage, (size_t)stage_len(r), (off_t)r->stage_off);
            run_finish(c, r, got < 0 ? -EAGAIN : (int)ZR_MIN(got, (ssize_t)INT32_MAX));
            continue;
        }
        ssize_t got = -1;
        if (r->count <= IOV_MAX)
            got = preadv2(r->fd, &c->iov[r->first], (int)r->count, (off_t)r->off, RWF_NOWAIT);
        if (got == (ssize_t)r->len)
            (*cached)++;
        run_finish(c, r, got < 0 ? -EAGAIN : (int)got);
    }
}

static void prep_run(struct io_uring_sqe *sqe, const struct plan_ctx *c, const struct run *r)
{
    int fd = r->fd;
    if (r->stage)
        io_uring_prep_read(sqe, r->dfd, r->stage, (unsigned)stage_len(r), r->stage_off);
    else if (r->count == 1)
        io_uring_prep_read(sqe, fd, c->iov[r->first].iov_base, (unsigned)r->len, r->off);
    else
        io_uring_prep_readv(sqe, fd, &c->iov[r->first], r->count, r->off);
}

/* Take one completion off the ring; returns its run. */
static struct run *reap(struct plan_ctx *c, struct io_uring *ring, struct io_uring_cqe *cqe,
                        int *res)
{
    struct run *r = &c->runs[(size_t)io_uring_cqe_get_data64(cqe)];
    *res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    return r;
}

/* Submit the n reads queued on ring; returns how many the kernel took,
 * which is fewer when it is short of resources or refuses the ring. */
static size_t submit_all(struct io_uring *ring, size_t n)
{
    size_t took = 0;
    while (took < n) {
        int got = io_uring_submit(ring);
        if (got == -EINTR)
            continue;
        if (got <= 0)
            break;
        took += (size_t)got;
    }
    return took;
}

static void plan_shard(void *arg, size_t k)
{
    struct plan_ctx *c = arg;
    size_t a = c->cut[k], b = c->cut[k + 1], cached = 0;
    struct io_uring *ring = a < b ? ring_get() : NULL;
    if (!ring) {
        shard_sync(c, a, b, &cached);
        atomic_fetch_add_explicit(&c->cached, cached, memory_order_relaxed);
        return;
    }
    size_t next = a, inflight = 0;
    unsigned submit = 0;
    bool broken = false;
    while (inflight > 0 || (!broken && next < b &&
                            !atomic_load_explicit(&c->failed, memory_order_relaxed))) {
        size_t queued = 0;
        while (!broken && next < b && inflight + queued < RING_ENTRIES &&
               !atomic_load_explicit(&c->failed, memory_order_relaxed)) {
            /* A shard with reads of its own in flight never waits for a
             * descriptor: those reads may hold the ones it waits for. */
            int rc = run_pin(c, &c->runs[next], inflight + queued > 0 ? ZR_FD_TRY : ZR_FD_READ);
            if (rc == ZR_FD_BUSY)
                break;
            if (rc != 0) {
                plan_error(c, rc);
                break;
            }
            struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
            if (!sqe) {
                run_put(c, &c->runs[next]);
                break;
            }
            direct_prep(c, &c->runs[next]);
            prep_run(sqe, c, &c->runs[next]);
            io_uring_sqe_set_data64(sqe, next);
            c->runs[next].submit = submit + 1;
            next++;
            queued++;
        }
        if (queued > 0) {
            submit++;
            size_t took = submit_all(ring, queued);
            inflight += took;
            /* Reads the kernel did not take stay queued in the ring: the
             * ring is dropped once the others end, and they are read
             * without it (their descriptors are put back meanwhile). */
            if (took < queued) {
                for (size_t j = next - (queued - took); j < next; j++) {
                    free(c->runs[j].stage);
                    c->runs[j].stage = NULL;
                    run_put(c, &c->runs[j]);
                }
                next -= queued - took;
                broken = true;
            }
        }
        /* What completed during the submission had its pages cached. */
        struct io_uring_cqe *cqe;
        bool any = false;
        while (inflight > 0 && io_uring_peek_cqe(ring, &cqe) == 0) {
            int res;
            struct run *r = reap(c, ring, cqe, &res);
            if (r->submit == submit && !r->stage)
                cached++;
            inflight--;
            any = true;
            run_finish(c, r, res);
        }
        if (!any && inflight > 0) {
            int rc = io_uring_wait_cqe(ring, &cqe);
            if (rc == -EINTR)
                continue;
            /* Reads in flight write into the caller's memory: the batch
             * cannot return before they end, and a ring that cannot wait
             * for them is past repair. */
            if (rc != 0)
                abort();
            int res;
            struct run *r = reap(c, ring, cqe, &res);
            inflight--;
            run_finish(c, r, res);
        }
    }
    if (broken) {
        ring_exit(&tl_ring);
        shard_sync(c, next, b, &cached);
    }
    atomic_fetch_add_explicit(&c->cached, cached, memory_order_relaxed);
}

/* ---- planning --------------------------------------------------------- */

static int piece_cmp(const void *x, const void *y)
{
    const struct zr_piece *a = x, *b = y;
    if (a->file != b->file)
        return a->file < b->file ? -1 : 1;
    return a->off < b->off ? -1 : a->off > b->off;
}

/* Merge the sorted pieces into runs; returns how many. */
static size_t make_runs(struct plan_ctx *c, size_t n)
{
    size_t nruns = 0;
    for (size_t i = 0; i < n; i++) {
        const struct zr_piece *q = &c->p[i];
        c->iov[i].iov_base = q->to;
        c->iov[i].iov_len = q->len;
        struct run *r = nruns ? &c->runs[nruns - 1] : NULL;
        if (r && r->file == q->file && r->off + r->len == q->off && r->count < RUN_MAX_PIECES &&
            r->len + q->len <= RUN_MAX_BYTES) {
            r->count++;
            r->len += q->len;
            continue;
        }
        c->runs[nruns++] = (struct run){.file = q->file, .count = 1, .first = i, .off = q->off,
                                        .len = q->len};
    }
    return nruns;
}

/* Cut the runs into shards of about equal bytes; returns how many. */
static size_t make_shards(struct plan_ctx *c, size_t nruns, uint64_t total)
{
    size_t shards = (size_t)ZR_MIN((uint64_t)zr_pool_threads(),
                                   ZR_MAX(1, total / MIN_SHARD_BYTES));
    shards = ZR_MIN(shards, nruns);
    uint64_t seen = 0;
    size_t j = 0;
    c->cut[0] = 0;
    for (size_t k = 1; k < shards; k++) {
        uint64_t goal = total * k / shards;
        while (j < nruns && seen < goal)
            seen += c->runs[j++].len;
        c->cut[k] = j;
    }
    c->cut[shards] = nruns;
    return shards;
}

int zr_plan_read(zr_store *s, struct zr_ftable *t, struct zr_piece *p, size_t n,
                 zr_piece_fn done, void *arg, struct zr_plan_stats *st)
{
    if (s->remote)
        return zr_remote_read(s, t, p, n, done, arg, st);
    return zr_plan_read_local(s, t, p, n, done, arg, st);
}

int zr_plan_read_local(zr_store *s, struct zr_ftable *t, struct zr_piece *p, size_t n,
                       zr_piece_fn done, void *arg, struct zr_plan_stats *st)
{
    if (st)
        *st = (struct zr_plan_stats){0};
    if (n == 0)
        return 0;
    qsort(p, n, sizeof *p, piece_cmp);
    struct plan_ctx c = {.s = s, .t = t, .p = p, .done = done, .arg = arg};
    c.iov = zr_malloc(n * sizeof *c.iov);
    c.runs = zr_malloc(n * sizeof *c.runs);
    c.cut = zr_malloc(((size_t)zr_pool_threads() + 1) * sizeof *c.cut);
    int rc = 0;
    if (!c.iov || !c.runs || !c.cut) {
        rc = zr_err(ZR_ENOMEM, "%s: planning the reads of %zu records", s->path, n);
        goto out;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += p[i].len;
    size_t nruns = make_runs(&c, n);
    size_t shards = make_shards(&c, nruns, total);
    c.direct = t == &s->chunks && !s->rcache && zr_read_direct(s) &&
               (c.dfds = zr_malloc(ZR_MIN(nruns, DIRECT_MAX_FILES) * sizeof *c.dfds));
    pthread_mutex_init(&c.dfd_lock, NULL);
    pthread_mutex_init(&c.err_lock, NULL);
    if (shards == 1)
        plan_shard(&c, 0);
    else
        zr_pool_run(shards, plan_shard, &c);
    pthread_mutex_destroy(&c.err_lock);
    pthread_mutex_destroy(&c.dfd_lock);
    for (size_t k = 0; k < c.ndfds; k++)
        if (c.dfds[k].fd >= 0)
            zr_io.close(c.dfds[k].fd);
    if (st) {
        st->reads = nruns;
        st->cached = atomic_load(&c.cached);
        st->ended = atomic_load(&c.ended);
        st->ended_tag = c.ended_tag;
    }
    if (c.err != 0) {
        zr_err_restore(c.err, c.errmsg);
        rc = c.err;
    }
out:
    zr_free(c.iov);
    zr_free(c.runs);
    zr_free(c.cut);
    zr_free(c.dfds);
    return rc;
}

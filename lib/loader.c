/*
 * loader.c: the endless prefetching loader. It owns the worker threads
 * that turn sampler steps into gathered, transformed batches, the ring
 * that hands those batches to the caller strictly in step order, and the
 * batch buffers, which are recycled rather than allocated per step.
 *
 * Workers claim steps in increasing order, but only within a window of
 * `depth` steps past the one the caller will take next, so at most depth
 * batches are ever being prepared or waiting. A claimed step owns the ring
 * entry (step - start_step) % depth: the window guarantees no two steps in
 * flight share an entry, and the caller waits on exactly the entry of its
 * step, so however the workers race, step k is handed out k-th. A worker
 * takes a buffer (a "slot") from the free list, or makes one when the list
 * is empty; in steady state there are depth + (batches held by the caller)
 * slots and nothing is allocated per step, except that a Ragged buffer
 * grows when a batch needs more bytes than it has held so far.
 *
 * A failure while preparing a step is stored in the step's ring entry
 * with its message and given to the caller by zr_loader_next for that
 * step, on the caller's thread; the workers carry on with later steps.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "io.h"
#include "sampler.h"

#define MSG_MAX 512
/* Batch buffers are aligned for vector loads in transforms. */
#define BUF_ALIGN 64

enum { ENTRY_EMPTY, ENTRY_BUSY, ENTRY_READY };

/* A stream as the loader keeps it: its store, its name and its geometry. */
struct stream {
    zr_store *store;
    char *name;
    int kind;
    uint64_t width;    /* Dense record bytes */
    uint64_t itemsize; /* Ragged element bytes, for zr_ragged_view */
};

/* The loader's own record of a Ragged column's buffers. The public
 * zr_column is rewritten from it for every step, so a transform that
 * scribbles over the column's fields cannot make the loader lose memory. */
struct ragged_buf {
    uint64_t *sizes;
    uint64_t *offsets;
    zr_view *views;
    void *buf;
    uint64_t cap;
};

/* A batch buffer. The public batch comes first so that a zr_batch pointer
 * is also a pointer to its slot. */
struct slot {
    zr_batch b;
    zr_loader *ld;
    uint64_t *indices;
    zr_column *cols;
    void **dense;           /* per stream: the Dense buffer, or NULL */
    struct ragged_buf *rag; /* per stream: the Ragged buffers */
    struct slot *next_free;
    struct slot *next_all;
    bool held; /* handed out by zr_loader_next, not yet released */
};

struct entry {
    int state;
    uint64_t step;
    struct slot *slot; /* NULL if the slot could not be made */
    int err;
    char msg[MSG_MAX];
};

struct zr_loader {
    zr_sampler sampler;
    struct stream *streams;
    size_t nstreams;
    zr_transform_fn transform;
    void *user;
    void (*aux_free)(void *aux, void *user);
    unsigned depth;
    uint64_t start_step;
    uint64_t dense_bytes_max; /* largest Dense buffer, checked at creation */

    pthread_t *threads;
    unsigned nthreads; /* threads started */

    pthread_mutex_t lock;
    pthread_cond_t work_cv;  /* workers: the window moved, or stop */
    pthread_cond_t ready_cv; /* the caller: an entry became ready */
    atomic_bool stop;
    uint64_t next_step;  /* the step zr_loader_next hands out next */
    uint64_t claim_step; /* the step the next idle worker claims */
    /* Step UINT64_MAX is the last: neither counter may wrap to step 0. */
    bool claimed_last;   /* a worker has claimed step UINT64_MAX */
    bool handed_last;    /* zr_loader_next has handed it out */
    bool in_next;        /* a thread is inside zr_loader_next */
    struct entry *ring;
    struct slot *free_slots;
    struct slot *all_slots;
};

static void slot_free(zr_loader *ld, struct slot *sl)
{
    if (!sl)
        return;
    if (sl->b.aux && ld->aux_free)
        ld->aux_free(sl->b.aux, ld->user);
    for (size_t k = 0; k < ld->nstreams; k++) {
        if (sl->dense)
            zr_free(sl->dense[k]);
        if (sl->rag) {
            zr_free(sl->rag[k].sizes);
            zr_free(sl->rag[k].offsets);
            zr_free(sl->rag[k].views);
            zr_free(sl->rag[k].buf);
        }
    }
    zr_free(sl->dense);
    zr_free(sl->rag);
    zr_free(sl->cols);
    zr_free(sl->indices);
    zr_free(sl);
}

static void *aligned_or_null(uint64_t bytes)
{
    void *p = NULL;
    if (bytes > SIZE_MAX || posix_memalign(&p, BUF_ALIGN, bytes ? (size_t)bytes : 1) != 0)
        return NULL;
    return p;
}

/* Make a slot with every fixed-size buffer a batch needs. Ragged data
 * buffers start empty and grow on first use. Runs on a worker without the
 * lock, then links the slot into the list destroy walks. */
static int slot_new(zr_loader *ld, struct slot **out)
{
    size_t n = (size_t)ld->sampler.batch, ns = ld->nstreams;
    struct slot *sl = zr_calloc(1, sizeof *sl);
    int rc = 0;
    if (!sl || !(sl->indices = zr_malloc(n * sizeof *sl->indices)) ||
        !(sl->cols = zr_calloc(ns, sizeof *sl->cols)) || !(sl->dense = zr_calloc(ns, sizeof *sl->dense)) ||
        !(sl->rag = zr_calloc(ns, sizeof *sl->rag)))
        rc = ZR_ENOMEM;
    for (size_t k = 0; rc == 0 && k < ns; k++) {
        const struct stream *st = &ld->streams[k];
        if (st->kind == ZR_DENSE) {
            if (!(sl->dense[k] = aligned_or_null(n * st->width)))
                rc = ZR_ENOMEM;
        } else {
            struct ragged_buf *r = &sl->rag[k];
            if (!(r->sizes = zr_malloc(n * sizeof *r->sizes)) ||
                !(r->offsets = zr_malloc(n * sizeof *r->offsets)) ||
                !(r->views = zr_malloc(n * sizeof *r->views)))
                rc = ZR_ENOMEM;
        }
    }
    if (rc != 0) {
        slot_free(ld, sl);
        return zr_err(ZR_ENOMEM, "allocating a batch buffer of %zu records", n);
    }
    sl->ld = ld;
    sl->b.indices = sl->indices;
    sl->b.size = n;
    sl->b.nstreams = ns;
    sl->b.streams = sl->cols;
    pthread_mutex_lock(&ld->lock);
    sl->next_all = ld->all_slots;
    ld->all_slots = sl;
    pthread_mutex_unlock(&ld->lock);
    *out = sl;
    return 0;
}

/* Make a slot ahead of time, its Dense buffers' pages faulted in, and put
 * it on the free list. zr_loader_create makes the depth + 1 slots of the
 * steady state (depth steps prepared, one held by the caller) this way:
 * made lazily, a slot's first batch paid for faulting in its buffer, a
 * page at a time, at whatever step the workers first got that far ahead
 * (for a 37 MiB batch, a tenth of a second of the first minute). */
static int slot_ready(zr_loader *ld)
{
    struct slot *sl;
    int rc = slot_new(ld, &sl);
    if (rc != 0)
        return rc;
    for (size_t k = 0; k < ld->nstreams; k++)
        if (sl->dense[k])
            zr_populate(sl->dense[k], (size_t)(ld->sampler.batch * ld->streams[k].width), true);
    sl->next_free = ld->free_slots;
    ld->free_slots = sl;
    return 0;
}

/* Gather one Ragged stream: sizes from the record table, 8-aligned offsets
 * so that every payload is aligned, the buffer grown if this batch is the
 * largest yet, then the gather and a view per record. */
static int gather_ragged(const struct stream *st, struct slot *sl, size_t k)
{
    struct ragged_buf *r = &sl->rag[k];
    size_t n = sl->b.size;
    int rc = zr_ragged_sizes(st->store, sl->indices, n, r->sizes);
    if (rc != 0)
        return rc;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        r->offsets[i] = total;
        if (!zr_add_ok(total, (r->sizes[i] + 7) & ~(uint64_t)7, &total))
            return zr_err(ZR_ENOMEM, "a batch of stream '%s' exceeds 2^64 bytes", st->name);
    }
    if (total > r->cap) {
        uint64_t cap = ZR_MAX(total, r->cap + r->cap / 2);
        void *buf = aligned_or_null(cap);
        if (!buf && cap > total)
            buf = aligned_or_null(cap = total);
        if (!buf)
            return zr_err(ZR_ENOMEM, "allocating %llu bytes for a batch of stream '%s'",
                          (unsigned long long)total, st->name);
        zr_free(r->buf);
        r->buf = buf;
        r->cap = cap;
    }
    rc = zr_gather_ragged(st->store, sl->indices, n, r->buf, r->offsets);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = zr_ragged_view((uint8_t *)r->buf + r->offsets[i], r->sizes[i], st->itemsize,
                            &r->views[i]);
    zr_column *c = &sl->cols[k];
    c->data = r->buf;
    c->nbytes = total;
    c->views = r->views;
    return rc;
}

/* Prefix the message a failed call left on this thread with where it
 * happened (zr_err may be given that message as an argument). */
static int annotate(int rc, const char *stream, uint64_t step)
{
    const char *detail = zr_last_error();
    if (stream)
        return zr_err(rc, "stream '%s', step %llu%s%s", stream, (unsigned long long)step,
                      *detail ? ": " : "", detail);
    return zr_err(rc, "transform failed at step %llu%s%s", (unsigned long long)step,
                  *detail ? ": " : "", detail);
}

/* Fill slot sl with step: indices, every stream, then the transform. Stops
 * early when the loader is being destroyed (the result is then unused). */
static int fill(zr_loader *ld, struct slot *sl, uint64_t step)
{
    sl->b.step = step;
    int rc = zr_sampler_batch(&ld->sampler, step, sl->indices);
    for (size_t k = 0; rc == 0 && k < ld->nstreams; k++) {
        if (atomic_load_explicit(&ld->stop, memory_order_relaxed))
            return 0;
        const struct stream *st = &ld->streams[k];
        zr_column *c = &sl->cols[k];
        c->name = st->name;
        c->store = st->store;
        c->kind = st->kind;
        if (st->kind == ZR_DENSE) {
            c->data = sl->dense[k];
            c->nbytes = sl->b.size * st->width;
            c->width = st->width;
            c->views = NULL;
            rc = zr_gather_dense(st->store, sl->indices, sl->b.size, c->data);
        } else {
            c->width = 0;
            rc = gather_ragged(st, sl, k);
        }
        if (rc != 0)
            return annotate(rc, st->name, step);
    }
    if (rc == 0 && ld->transform && !atomic_load_explicit(&ld->stop, memory_order_relaxed)) {
        /* Clear this thread's message so that only one the transform
         * causes (through a library call) is attached to its failure. */
        zr_err_restore(0, "");
        rc = ld->transform(&sl->b, ld->user);
        if (rc > 0)
            rc = zr_err(ZR_EINVAL, "the transform returned %d, not 0 or a negative ZR_E* code", rc);
        if (rc != 0)
            return annotate(rc, NULL, step);
    }
    return rc;
}

/* The loader whose worker this thread is, if any: a transform that asks
 * its own loader for a batch would wait for itself. */
static _Thread_local const zr_loader *worker_of;

static void *worker_main(void *arg)
{
    zr_loader *ld = arg;
    worker_of = ld;
    pthread_mutex_lock(&ld->lock);
    for (;;) {
        while (!atomic_load(&ld->stop) &&
               (ld->claimed_last || ld->claim_step - ld->next_step >= ld->depth))
            pthread_cond_wait(&ld->work_cv, &ld->lock);
        if (atomic_load(&ld->stop))
            break;
        uint64_t step = ld->claim_step;
        if (step == UINT64_MAX)
            ld->claimed_last = true;
        else
            ld->claim_step++;
        struct entry *e = &ld->ring[(step - ld->start_step) % ld->depth];
        e->state = ENTRY_BUSY;
        e->step = step;
        struct slot *sl = ld->free_slots;
        if (sl)
            ld->free_slots = sl->next_free;
        pthread_mutex_unlock(&ld->lock);

        /* The entry is this worker's alone while it is BUSY: the caller
         * reads it only once it is READY, under the lock. */
        int rc = sl ? 0 : slot_new(ld, &sl);
        if (rc == 0)
            rc = fill(ld, sl, step);
        e->msg[0] = '\0';
        if (rc != 0)
            snprintf(e->msg, sizeof e->msg, "%s", zr_last_error());

        pthread_mutex_lock(&ld->lock);
        e->slot = sl;
        e->err = rc;
        e->state = ENTRY_READY;
        pthread_cond_broadcast(&ld->ready_cv);
    }
    pthread_mutex_unlock(&ld->lock);
    return NULL;
}

static int check_streams(zr_store *const *stores, const char *const *names, size_t nstreams,
                         uint64_t *len)
{
    if (!stores || !names || nstreams == 0)
        return zr_err(ZR_EINVAL, "zr_loader_create: no streams");
    for (size_t k = 0; k < nstreams; k++) {
        if (!stores[k] || !names[k])
            return zr_err(ZR_EINVAL, "zr_loader_create: stream %zu has a NULL store or name", k);
        for (size_t j = 0; j < k; j++)
            if (strcmp(names[j], names[k]) == 0)
                return zr_err(ZR_EINVAL, "stream name '%s' is given twice", names[k]);
        uint64_t n = zr_len(stores[k]);
        if (k > 0 && n != *len)
            return zr_err(ZR_EINVAL, "stream '%s' holds %llu records but '%s' holds %llu",
                          names[k], (unsigned long long)n, names[0], (unsigned long long)*len);
        *len = n;
    }
    if (*len == 0)
        return zr_err(ZR_EINVAL, "the streams hold no records");
    return 0;
}

ZR_API int zr_loader_create(zr_loader **out, zr_store *const *stores, const char *const *names,
                            size_t nstreams, const zr_loader_opts *opts)
{
    if (out)
        *out = NULL;
    if (!out || !opts)
        return zr_err(ZR_EINVAL, "zr_loader_create: NULL argument");
    zr_loader_opts o = ZR_LOADER_OPTS_INIT;
    int rc = zr_abi_read(&o, sizeof o, opts, ZR_ABI_MIN(zr_loader_opts, mode), "zr_loader_opts");
    if (rc != 0)
        return rc;
    opts = &o;
    uint64_t len = 0;
    rc = check_streams(stores, names, nstreams, &len);
    if (rc != 0)
        return rc;
    unsigned depth = opts->depth ? opts->depth : 2;
    unsigned nthreads = opts->threads ? opts->threads : 1;
    if (depth > ZR_LOADER_MAX_DEPTH || nthreads > ZR_LOADER_MAX_THREADS)
        return zr_err(ZR_EINVAL, "depth %u or threads %u over the limits %d and %d", depth,
                      nthreads, ZR_LOADER_MAX_DEPTH, ZR_LOADER_MAX_THREADS);
    zr_sampler sm;
    zr_sampler_opts so = {.size = sizeof so, .mode = opts->mode, .batch = opts->batch,
                          .seed = opts->seed, .rank = opts->rank, .world = opts->world,
                          .block = opts->block, .window = opts->window};
    rc = zr_sampler_setup(&sm, len, &so);
    if (rc != 0)
        return rc;
    /* Every per-record array of a slot must be addressable. */
    uint64_t bytes;
    if (sm.batch > SIZE_MAX / sizeof(zr_view))
        return zr_err(ZR_ENOMEM, "a batch of %llu records is too large", (unsigned long long)sm.batch);
    for (size_t k = 0; k < nstreams; k++)
        if (zr_kind(stores[k]) == ZR_DENSE &&
            (!zr_mul_ok(sm.batch, zr_record_width(stores[k]), &bytes) || bytes > SIZE_MAX))
            return zr_err(ZR_ENOMEM, "a batch of stream '%s' does not fit in memory", names[k]);

    zr_loader *ld = zr_calloc(1, sizeof *ld);
    if (!ld)
        return zr_err(ZR_ENOMEM, "allocating a loader");
    ld->sampler = sm;
    ld->nstreams = nstreams;
    ld->transform = opts->transform;
    ld->user = opts->user;
    ld->aux_free = opts->aux_free;
    ld->depth = depth;
    ld->start_step = ld->next_step = ld->claim_step = opts->start_step;
    atomic_init(&ld->stop, false);
    pthread_mutex_init(&ld->lock, NULL);
    pthread_cond_init(&ld->work_cv, NULL);
    pthread_cond_init(&ld->ready_cv, NULL);
    ld->streams = zr_calloc(nstreams, sizeof *ld->streams);
    ld->ring = zr_calloc(depth, sizeof *ld->ring);
    ld->threads = zr_calloc(nthreads, sizeof *ld->threads);
    if (!ld->streams || !ld->ring || !ld->threads)
        rc = zr_err(ZR_ENOMEM, "allocating a loader");
    for (size_t k = 0; rc == 0 && k < nstreams; k++) {
        struct stream *st = &ld->streams[k];
        st->store = stores[k];
        st->kind = zr_kind(stores[k]);
        st->width = zr_record_width(stores[k]);
        st->itemsize = zr_itemsize(stores[k]);
        if (!(st->name = zr_strdup(names[k])))
            rc = zr_err(ZR_ENOMEM, "allocating a loader");
    }
    for (unsigned k = 0; rc == 0 && k <= depth; k++)
        rc = slot_ready(ld);
    for (unsigned t = 0; rc == 0 && t < nthreads; t++) {
        int e = pthread_create(&ld->threads[t], NULL, worker_main, ld);
        if (e != 0)
            rc = zr_err_sys(e, "starting loader worker %u of %u", t + 1, nthreads);
        else
            ld->nthreads++;
    }
    if (rc != 0) {
        zr_loader_destroy(ld);
        /* destroy does not touch this thread's message */
        return rc;
    }
    *out = ld;
    return 0;
}

ZR_API int zr_loader_next(zr_loader *ld, zr_batch **out)
{
    if (out)
        *out = NULL;
    if (!ld || !out)
        return zr_err(ZR_EINVAL, "zr_loader_next: NULL argument");
    if (worker_of == ld)
        return zr_err(ZR_EINVAL, "zr_loader_next: called from the loader's own transform, "
                                 "which would wait for itself");
    char msg[MSG_MAX];
    pthread_mutex_lock(&ld->lock);
    /* A second caller would wait for the step the first one takes, and
     * then for an entry no worker fills: forever. */
    if (ld->in_next) {
        pthread_mutex_unlock(&ld->lock);
        return zr_err(ZR_EBUSY, "zr_loader_next: another thread is already in it on this "
                                "loader; one caller at a time");
    }
    if (ld->handed_last) {
        pthread_mutex_unlock(&ld->lock);
        return zr_err(ZR_ERANGE, "zr_loader_next: step %llu was the last step a loader has",
                      (unsigned long long)UINT64_MAX);
    }
    ld->in_next = true;
    uint64_t step = ld->next_step;
    struct entry *e = &ld->ring[(step - ld->start_step) % ld->depth];
    while (!(e->state == ENTRY_READY && e->step == step))
        pthread_cond_wait(&ld->ready_cv, &ld->lock);
    struct slot *sl = e->slot;
    int rc = e->err;
    if (rc != 0) {
        memcpy(msg, e->msg, sizeof msg);
        if (sl) {
            sl->next_free = ld->free_slots;
            ld->free_slots = sl;
        }
    } else {
        sl->held = true;
    }
    e->state = ENTRY_EMPTY;
    e->slot = NULL;
    if (step == UINT64_MAX)
        ld->handed_last = true;
    else
        ld->next_step++;
    ld->in_next = false;
    pthread_cond_broadcast(&ld->work_cv);
    pthread_mutex_unlock(&ld->lock);
    if (rc != 0) {
        zr_err_restore(rc, msg);
        return rc;
    }
    *out = &sl->b;
    return 0;
}

ZR_API void zr_batch_release(zr_batch *b)
{
    if (!b)
        return;
    struct slot *sl = (struct slot *)b;
    zr_loader *ld = sl->ld;
    pthread_mutex_lock(&ld->lock);
    /* A batch released twice would be handed to two steps at once. */
    if (sl->held) {
        sl->held = false;
        sl->next_free = ld->free_slots;
        ld->free_slots = sl;
    }
    pthread_mutex_unlock(&ld->lock);
}

ZR_API zr_column *zr_batch_column(zr_batch *b, const char *name)
{
    if (!b || !name)
        return NULL;
    for (size_t k = 0; k < b->nstreams; k++)
        if (b->streams[k].name && strcmp(b->streams[k].name, name) == 0)
            return &b->streams[k];
    return NULL;
}

ZR_API uint64_t zr_loader_step(const zr_loader *ld)
{
    return ld ? ld->next_step : 0;
}

ZR_API const zr_sampler *zr_loader_sampler(const zr_loader *ld)
{
    return ld ? &ld->sampler : NULL;
}

ZR_API void zr_loader_destroy(zr_loader *ld)
{
    if (!ld)
        return;
    pthread_mutex_lock(&ld->lock);
    atomic_store(&ld->stop, true);
    pthread_cond_broadcast(&ld->work_cv);
    pthread_mutex_unlock(&ld->lock);
    for (unsigned t = 0; t < ld->nthreads; t++)
        pthread_join(ld->threads[t], NULL);
    /* Every slot is on all_slots, whether free, ready, held by the caller
     * or left behind by a worker that stopped early. */
    struct slot *sl = ld->all_slots;
    while (sl) {
        struct slot *next = sl->next_all;
        slot_free(ld, sl);
        sl = next;
    }
    for (size_t k = 0; ld->streams && k < ld->nstreams; k++)
        zr_free(ld->streams[k].name);
    zr_free(ld->streams);
    zr_free(ld->ring);
    zr_free(ld->threads);
    pthread_cond_destroy(&ld->ready_cv);
    pthread_cond_destroy(&ld->work_cv);
    pthread_mutex_destroy(&ld->lock);
    zr_free(ld);
}

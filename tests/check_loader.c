/*
 * check_loader.c: the prefetching loader against direct gathers of the
 * sampler's batches, over real stores in temporary folders.
 *
 * Every record encodes its own index (Dense record i holds i * 16 + j at
 * element j; Ragged record i holds i + 1000 * j and a shape derived from
 * i), so a batch can also be checked without trusting the gather.
 */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#include "tests/helpers.h"
#include "tests/suites.h"

#define NREC 300
static const uint64_t dense_shape[2] = {3, 5};

struct fixture {
    char *dir;
    zr_store *dense;  /* "<i4" [3, 5], raw */
    zr_store *ragged; /* "<i4", shapes of 0 to 2 dimensions */
    zr_store *zdense; /* like dense, zstd */
};

static void ragged_shape(uint64_t i, uint64_t *shape, uint32_t *ndim)
{
    *ndim = (uint32_t)(i % 3);
    shape[0] = i % 5 + 1;
    shape[1] = 2;
}

static uint64_t shape_count(const uint64_t *shape, uint32_t ndim)
{
    uint64_t c = 1;
    for (uint32_t d = 0; d < ndim; d++)
        c *= shape[d];
    return c;
}

static zr_store *make_dense(const char *dir, const char *name, int codec)
{
    char *path = zt_join(dir, name);
    zr_create_opts o = {.size = sizeof(zr_create_opts), .codec = codec};
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<i4", dense_shape, 2, &o));
    int32_t *v = malloc(NREC * 15 * sizeof *v);
    for (int i = 0; i < NREC; i++)
        for (int j = 0; j < 15; j++)
            v[i * 15 + j] = i * 16 + j;
    ZR_OK_CALL(zr_append_dense(s, "<i4", dense_shape, 2, v, NREC, NULL));
    free(v);
    free(path);
    return s;
}

static zr_store *make_ragged(const char *dir, const char *name, uint64_t count)
{
    char *path = zt_join(dir, name);
    zr_create_opts o = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_RAW};
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<i4", &o));
    zr_rec *recs = calloc(count, sizeof *recs);
    uint64_t(*shapes)[2] = calloc(count, sizeof *shapes);
    for (uint64_t i = 0; i < count; i++) {
        ragged_shape(i, shapes[i], &recs[i].ndim);
        uint64_t c = shape_count(shapes[i], recs[i].ndim);
        int32_t *d = malloc(c * sizeof *d);
        for (uint64_t j = 0; j < c; j++)
            d[j] = (int32_t)(i + 1000 * j);
        recs[i].data = d;
        recs[i].shape = shapes[i];
    }
    ZR_OK_CALL(zr_append_ragged(s, "<i4", recs, count, NULL));
    for (uint64_t i = 0; i < count; i++)
        free((void *)recs[i].data);
    free(recs);
    free(shapes);
    free(path);
    return s;
}

static void setup(struct fixture *f)
{
    f->dir = zt_tempdir();
    f->dense = make_dense(f->dir, "dense", ZR_CODEC_RAW);
    f->zdense = make_dense(f->dir, "zdense", ZR_CODEC_ZSTD);
    f->ragged = make_ragged(f->dir, "ragged", NREC);
}

static void teardown(struct fixture *f)
{
    zr_close(f->dense);
    zr_close(f->zdense);
    zr_close(f->ragged);
    zt_rmtree(f->dir);
    free(f->dir);
}

/* The batch must be the sampler's batch for its step, every Dense column
 * byte-equal to a direct gather and to the records' encoded contents, and
 * every Ragged view equal to a direct gather's view and to the record. */
static void check_batch(const zr_batch *b, const zr_sampler *sm)
{
    zr_sampler_info info = ZR_SAMPLER_INFO_INIT;
    ZR_OK_CALL(zr_sampler_get_info(sm, &info));
    uint64_t *idx = malloc(info.batch * sizeof *idx);
    ZR_OK_CALL(zr_sampler_batch(sm, b->step, idx));
    ck_assert_uint_eq(b->size, info.batch);
    ck_assert_mem_eq(b->indices, idx, info.batch * sizeof *idx);
    for (size_t k = 0; k < b->nstreams; k++) {
        const zr_column *c = &b->streams[k];
        ck_assert_uint_eq(((uintptr_t)c->data) % 64, 0);
        if (c->kind == ZR_DENSE) {
            ck_assert_uint_eq(c->width, 60);
            ck_assert_uint_eq(c->nbytes, 60 * b->size);
            void *direct = malloc(c->nbytes);
            ZR_OK_CALL(zr_gather_dense(c->store, idx, b->size, direct));
            ck_assert_mem_eq(c->data, direct, c->nbytes);
            free(direct);
            const int32_t *v = c->data;
            for (size_t i = 0; i < b->size; i++)
                ck_assert_int_eq(v[i * 15 + 14], (int32_t)(idx[i] * 16 + 14));
        } else {
            zr_ragged_batch *direct;
            ZR_OK_CALL(zr_gather_ragged_alloc(c->store, idx, b->size, &direct));
            for (size_t i = 0; i < b->size; i++) {
                const zr_view *got = &c->views[i], *want = &direct->recs[i];
                ck_assert_uint_eq(got->ndim, want->ndim);
                ck_assert_mem_eq(got->shape, want->shape, want->ndim * sizeof(uint64_t));
                ck_assert_uint_eq(got->nbytes, want->nbytes);
                ck_assert_mem_eq(got->data, want->data, want->nbytes);
                uint64_t shape[2];
                uint32_t nd;
                ragged_shape(idx[i], shape, &nd);
                ck_assert_uint_eq(got->ndim, nd);
                ck_assert_uint_eq(got->nbytes, 4 * shape_count(shape, nd));
                ck_assert_int_eq(((const int32_t *)got->data)[0], (int32_t)idx[i]);
                ck_assert_uint_eq(((uintptr_t)got->data) % 8, 0);
            }
            zr_ragged_batch_free(direct);
        }
    }
    free(idx);
}

static zr_loader *open_loader(struct fixture *f, const zr_loader_opts *o)
{
    zr_store *stores[] = {f->dense, f->ragged, f->zdense};
    const char *names[] = {"image", "tokens", "zimage"};
    zr_loader *ld;
    ZR_OK_CALL(zr_loader_create(&ld, stores, names, 3, o));
    return ld;
}

START_TEST(batches_equal_direct_gathers_at_every_depth_and_thread_count)
{
    struct fixture f;
    setup(&f);
    static const int modes[] = {ZR_SEQUENTIAL, ZR_IID, ZR_CYCLIC, ZR_QUASI};
    static const unsigned depths[] = {1, 2, 5};
    static const unsigned threads[] = {1, 3};
    for (int m = 0; m < 4; m++)
        for (int d = 0; d < 3; d++)
            for (int t = 0; t < 2; t++) {
                zr_loader_opts o = {.size = sizeof(zr_loader_opts), .mode = modes[m], .batch = 16,
                                    .seed = 9, .depth = depths[d], .threads = threads[t]};
                zr_loader *ld = open_loader(&f, &o);
                const zr_sampler *sm = zr_loader_sampler(ld);
                zr_sampler_info info = ZR_SAMPLER_INFO_INIT;
                ZR_OK_CALL(zr_sampler_get_info(sm, &info));
                ck_assert_uint_eq(info.n, NREC);
                for (uint64_t s = 0; s < 25; s++) {
                    zr_batch *b;
                    ZR_OK_CALL(zr_loader_next(ld, &b));
                    ck_assert_uint_eq(b->step, s);
                    ck_assert_ptr_eq(zr_batch_column(b, "tokens"), &b->streams[1]);
                    ck_assert_ptr_null(zr_batch_column(b, "missing"));
                    check_batch(b, sm);
                    zr_batch_release(b);
                }
                ck_assert_uint_eq(zr_loader_step(ld), 25);
                zr_loader_destroy(ld);
            }
    teardown(&f);
}
END_TEST

START_TEST(start_step_resumes_exactly_where_a_run_stood)
{
    struct fixture f;
    setup(&f);
    zr_loader_opts o = {.size = sizeof(zr_loader_opts), .mode = ZR_CYCLIC, .batch = 32, .seed = 4,
                        .depth = 3, .threads = 2};
    zr_loader *first = open_loader(&f, &o);
    /* Run 30 steps (past the cycle boundary at 9) and keep the last 20. */
    void *kept[20];
    for (uint64_t s = 0; s < 30; s++) {
        zr_batch *b;
        ZR_OK_CALL(zr_loader_next(first, &b));
        if (s >= 10) {
            kept[s - 10] = malloc(b->streams[0].nbytes);
            memcpy(kept[s - 10], b->streams[0].data, b->streams[0].nbytes);
        }
        zr_batch_release(b);
    }
    o.start_step = 10;
    zr_loader *resumed = open_loader(&f, &o);
    ck_assert_uint_eq(zr_loader_step(resumed), 10);
    for (uint64_t s = 10; s < 30; s++) {
        zr_batch *b;
        ZR_OK_CALL(zr_loader_next(resumed, &b));
        ck_assert_uint_eq(b->step, s);
        ck_assert_mem_eq(b->streams[0].data, kept[s - 10], b->streams[0].nbytes);
        check_batch(b, zr_loader_sampler(resumed));
        zr_batch_release(b);
        free(kept[s - 10]);
    }
    zr_loader_destroy(first);
    zr_loader_destroy(resumed);
    teardown(&f);
}
END_TEST

/* Step UINT64_MAX is handed out, with the sampler's indices for it, and
 * is the last: the next call is refused instead of wrapping to step 0. */
START_TEST(the_last_step_is_uint64_max_and_nothing_wraps)
{
    struct fixture f;
    setup(&f);
    zr_loader_opts o = {.size = sizeof(zr_loader_opts), .mode = ZR_IID, .batch = 8, .seed = 3,
                        .start_step = UINT64_MAX - 2, .depth = 3, .threads = 2};
    zr_loader *ld = open_loader(&f, &o);
    for (uint64_t s = UINT64_MAX - 2;; s++) {
        zr_batch *b;
        ZR_OK_CALL(zr_loader_next(ld, &b));
        ck_assert_uint_eq(b->step, s);
        check_batch(b, zr_loader_sampler(ld));
        zr_batch_release(b);
        if (s == UINT64_MAX)
            break;
    }
    zr_batch *b = (zr_batch *)&f;
    ck_assert_int_eq(zr_loader_next(ld, &b), ZR_ERANGE);
    ck_assert_ptr_null(b);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "last step"));
    ck_assert_uint_eq(zr_loader_step(ld), UINT64_MAX);
    zr_loader_destroy(ld);
    teardown(&f);
}
END_TEST

/* A transform that holds every step until a caller opens the gate: the
 * first caller of zr_loader_next waits inside it for as long as the gate
 * is shut. */
struct gate {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool open;
    zr_loader *ld;
    int rc[2];
    uint64_t step[2];
};

static int tx_gate(zr_batch *b, void *user)
{
    (void)b;
    struct gate *g = user;
    pthread_mutex_lock(&g->lock);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->lock);
    pthread_mutex_unlock(&g->lock);
    return 0;
}

static void gate_next(struct gate *g, int k)
{
    zr_batch *b;
    g->rc[k] = zr_loader_next(g->ld, &b);
    g->step[k] = b ? b->step : UINT64_MAX;
    zr_batch_release(b);
    /* Only the caller refused can open the gate: the one waiting in the
     * loader cannot, so on a loader that let both in, neither returns. */
    if (g->rc[k] == ZR_EBUSY) {
        pthread_mutex_lock(&g->lock);
        g->open = true;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->lock);
    }
}

static void *gate_thread(void *arg)
{
    gate_next(arg, 1);
    return NULL;
}

START_TEST(a_second_caller_of_next_gets_ebusy)
{
    struct fixture f;
    setup(&f);
    struct gate g = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    zr_loader_opts o = {.size = sizeof(zr_loader_opts), .mode = ZR_SEQUENTIAL, .batch = 4,
                        .depth = 2, .threads = 2, .transform = tx_gate, .user = &g};
    g.ld = open_loader(&f, &o);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, gate_thread, &g), 0);
    gate_next(&g, 0);
    pthread_join(t, NULL);
    /* One call was refused and took no step; the other got step 0. */
    int busy = g.rc[0] == ZR_EBUSY ? 0 : 1;
    ck_assert_int_eq(g.rc[busy], ZR_EBUSY);
    ck_assert_int_eq(g.rc[1 - busy], 0);
    ck_assert_uint_eq(g.step[1 - busy], 0);
    zr_batch *b;
    ZR_OK_CALL(zr_loader_next(g.ld, &b));
    ck_assert_uint_eq(b->step, 1);
    check_batch(b, zr_loader_sampler(g.ld));
    zr_batch_release(b);
    zr_loader_destroy(g.ld);
    teardown(&f);
}
END_TEST

/* The options' block and window reach the loader's sampler, which draws
 * what a sampler made with the same options draws. */
START_TEST(quasi_block_and_window_reach_the_sampler)
{
    struct fixture f;
    setup(&f);
    zr_loader_opts o = {.size = sizeof(zr_loader_opts), .mode = ZR_QUASI, .batch = 16, .seed = 5,
                        .block = 8, .window = 3};
    zr_loader *ld = open_loader(&f, &o);
    zr_sampler_info info = ZR_SAMPLER_INFO_INIT;
    ZR_OK_CALL(zr_sampler_get_info(zr_loader_sampler(ld), &info));
    ck_assert_int_eq(info.mode, ZR_QUASI);
    ck_assert_uint_eq(info.block, 8);
    ck_assert_uint_eq(info.window, 3);
    zr_sampler_opts so = {.size = sizeof so, .mode = ZR_QUASI, .batch = 16, .seed = 5,
                          .block = 8, .window = 3};
    zr_sampler *sm;
    ZR_OK_CALL(zr_sampler_create_opts(&sm, NREC, &so));
    for (uint64_t s = 0; s < 12; s++) {
        zr_batch *b;
        uint64_t want[16];
        ZR_OK_CALL(zr_loader_next(ld, &b));
        ZR_OK_CALL(zr_sampler_batch(sm, s, want));
        ck_assert_mem_eq(b->indices, want, sizeof want);
        zr_batch_release(b);
    }
    zr_sampler_free(sm);
    zr_loader_destroy(ld);
    /* Block and window mean nothing to the other modes, which refuse them. */
    o.mode = ZR_CYCLIC;
    zr_store *stores[] = {f.dense};
    const char *names[] = {"image"};
    ZR_FAIL_CALL(zr_loader_create(&ld, stores, names, 1, &o), ZR_EINVAL);
    ck_assert_ptr_null(ld);
    teardown(&f);
}
END_TEST

struct tx_state {
    pthread_t caller;
    atomic_int on_caller;
    atomic_int allocs;
    atomic_int frees;
    uint64_t fail_step;
    int fail_code;
    useconds_t nap;
};

/* Negate the first Dense column, count the calls made on the caller's
 * thread, keep one aux allocation per buffer, fail on request. */
static int tx_negate(zr_batch *b, void *user)
{
    struct tx_state *st = user;
    if (pthread_equal(pthread_self(), st->caller))
        atomic_fetch_add(&st->on_caller, 1);
    if (st->nap)
        usleep(st->nap);
    if (!b->aux) {
        b->aux = malloc(64);
        atomic_fetch_add(&st->allocs, 1);
    }
    if (st->fail_code && b->step == st->fail_step)
        return st->fail_code;
    int32_t *v = b->streams[0].data;
    for (size_t i = 0; i < b->size * 15; i++)
        v[i] = -v[i];
    return 0;
}

/* Every aux a transform allocated was handed to aux_free exactly once. */
static void check_aux_balanced(struct tx_state *st)
{
    int allocs = atomic_load(&st->allocs), frees = atomic_load(&st->frees);
    ck_assert_int_eq(frees, allocs);
}

static void tx_aux_free(void *aux, void *user)
{
    struct tx_state *st = user;
    atomic_fetch_add(&st->frees, 1);
    free(aux);
}

START_TEST(transform_runs_on_workers_and_edits_batches_in_place)
{
    struct fixture f;
    setup(&f);
    struct tx_state st = {.caller = pthread_self()};
    zr_loader_opts o = {.size = sizeof(zr_loader_opts), .mode = ZR_SEQUENTIAL, .batch = 8,
                        .depth = 2, .threads = 2, .transform = tx_negate, .user = &st,
                        .aux_free = tx_aux_free};
    zr_loader *ld = open_loader(&f, &o);
    for (uint64_t s = 0; s < 10; s++) {
        zr_batch *b;
        ZR_OK_CALL(zr_loader_next(ld, &b));
        const int32_t *v = b->streams[0].data;
        for (size_t i = 0; i < 8; i++)
            ck_assert_int_eq(v[i * 15 + 1], -(int32_t)(((s * 8 + i) % NREC) * 16 + 1));
        zr_batch_release(b);
    }
    zr_loader_destroy(ld);
    int on_caller = atomic_load(&st.on_caller);
    ck_assert_int_eq(on_caller, 0);
    check_aux_balanced(&st);
    teardown(&f);
}
END_TEST

/* A failing transform fails its step, and next() returns the code: a
 * negative return as it is, a positive one as ZR_EINVAL (not a code that
 * looks like success or a count). The failed step is consumed; the run
 * carries on with the next one. */
static const struct tx_failure {
    int mode;
    unsigned depth, threads;
    uint64_t step;
    int code, want;
    const char *message;
} tx_failures[] = {
    {ZR_IID, 4, 3, 5, -1000, -1000, "transform failed at step 5"},
    {ZR_SEQUENTIAL, 2, 1, 2, 7, ZR_EINVAL, "returned 7"},
};

START_TEST(transform_failure_surfaces_from_next)
{
    const struct tx_failure *c = &tx_failures[_i];
    struct fixture f;
    setup(&f);
    struct tx_state st = {.caller = pthread_self(), .fail_step = c->step, .fail_code = c->code};
    zr_loader_opts o = {.size = sizeof(zr_loader_opts), .mode = c->mode, .batch = 8,
                        .depth = c->depth, .threads = c->threads, .transform = tx_negate,
                        .user = &st, .aux_free = tx_aux_free};
    zr_loader *ld = open_loader(&f, &o);
    zr_batch *b;
    for (uint64_t s = 0; s < c->step; s++) {
        ZR_OK_CALL(zr_loader_next(ld, &b));
        ck_assert_uint_eq(b->step, s);
        zr_batch_release(b);
    }
    ck_assert_int_eq(zr_loader_next(ld, &b), c->want);
    ck_assert_ptr_null(b);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), c->message));
    ZR_OK_CALL(zr_loader_next(ld, &b));
    ck_assert_uint_eq(b->step, c->step + 1);
    zr_batch_release(b);
    zr_loader_destroy(ld);
    check_aux_balanced(&st);
    teardown(&f);
}
END_TEST

/* A transform that asks its own loader for a batch gets ZR_EINVAL instead
 * of waiting for itself. */
static int tx_reenter(zr_batch *b, void *user)
{
    _Atomic(zr_loader *) *ld = user;
    zr_batch *inner = b; /* must come back NULL */
    int rc = zr_loader_next(atomic_load(ld), &inner);
    return rc == ZR_EINVAL && inner == NULL && strstr(zr_last_error(), "own transform") ? 0 : -1000;
}

START_TEST(transform_cannot_take_from_its_own_loader)
{
    struct fixture f;
    setup(&f);
    _Atomic(zr_loader *) shared = NULL;
    /* The worker starts at creation and may run step 0's transform before
     * open_loader returns, while shared is still NULL (its inner call then
     * fails as a NULL argument, and so does step 0). With depth 1 no later
     * step is prepared before the first zr_loader_next, by which time
     * shared is set. */
    zr_loader_opts o = {.size = sizeof(zr_loader_opts), .mode = ZR_SEQUENTIAL, .batch = 8,
                        .depth = 1, .threads = 1, .transform = tx_reenter, .user = &shared};
    zr_loader *ld = open_loader(&f, &o);
    atomic_store(&shared, ld);
    zr_batch *b;
    int rc0 = zr_loader_next(ld, &b);
    if (rc0 == 0)
        zr_batch_release(b);
    for (int s = 1; s < 4; s++) {
        ZR_OK_CALL(zr_loader_next(ld, &b));
        ck_assert_uint_eq(b->step, (uint64_t)s);
        zr_batch_release(b);
    }
    zr_loader_destroy(ld);
    teardown(&f);
}
END_TEST

/* Releasing a batch twice does not put its buffers back twice: held
 * batches never share memory. */
START_TEST(double_release_does_not_share_buffers)
{
    struct fixture f;
    setup(&f);
    zr_loader_opts o = {.size = sizeof(zr_loader_opts), .mode = ZR_SEQUENTIAL, .batch = 8,
                        .depth = 2, .threads = 2};
    zr_loader *ld = open_loader(&f, &o);
    zr_batch *b;
    ZR_OK_CALL(zr_loader_next(ld, &b));
    zr_batch_release(b);
    zr_batch_release(b);
    zr_batch *held[6];
    for (int k = 0; k < 6; k++)
        ZR_OK_CALL(zr_loader_next(ld, &held[k]));
    for (int i = 0; i < 6; i++) {
        check_batch(held[i], zr_loader_sampler(ld));
        for (int j = i + 1; j < 6; j++) {
            ck_assert_ptr_ne(held[i], held[j]);
            ck_assert_ptr_ne(held[i]->streams[0].data, held[j]->streams[0].data);
        }
    }
    for (int k = 0; k < 6; k++)
        zr_batch_release(held[k]);
    zr_loader_destroy(ld);
    teardown(&f);
}
END_TEST

/* Overwrite the stored frame of record i of a zstd store with garbage. */
static void corrupt_record(const char *dir, const char *name, uint64_t i)
{
    char *sdir = zt_join(dir, name), *loc = zt_join(sdir, "0.loc"), *chunk = zt_join(sdir, "0.chunk");
    int fd = open(loc, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    uint8_t e[16];
    ck_assert_int_eq(pread(fd, e, 16, (off_t)(i * 16)), 16);
    close(fd);
    uint32_t off = (uint32_t)e[0] | (uint32_t)e[1] << 8 | (uint32_t)e[2] << 16 | (uint32_t)e[3] << 24;
    uint32_t len = (uint32_t)e[4] | (uint32_t)e[5] << 8 | (uint32_t)e[6] << 16 | (uint32_t)e[7] << 24;
    uint8_t *junk = malloc(len);
    memset(junk, 0xA5, len);
    fd = open(chunk, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, junk, len, off), (ssize_t)len);
    close(fd);
    free(junk);
    free(sdir);
    free(loc);
    free(chunk);
}

START_TEST(gather_error_surfaces_from_next_for_its_step)
{
    struct fixture f;
    setup(&f);
    corrupt_record(f.dir, "zdense", 7);
    zr_loader_opts o = {.size = sizeof(zr_loader_opts), .mode = ZR_SEQUENTIAL, .batch = 4,
                        .depth = 3, .threads = 2};
    zr_loader *ld = open_loader(&f, &o);
    zr_batch *b;
    ZR_OK_CALL(zr_loader_next(ld, &b));
    zr_batch_release(b);
    /* Step 1 is records 4..7. */
    ck_assert_int_eq(zr_loader_next(ld, &b), ZR_ECORRUPT);
    ck_assert_ptr_null(b);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "stream 'zimage', step 1"));
    ZR_OK_CALL(zr_loader_next(ld, &b));
    ck_assert_uint_eq(b->step, 2);
    check_batch(b, zr_loader_sampler(ld));
    zr_batch_release(b);
    zr_loader_destroy(ld);
    teardown(&f);
}
END_TEST

/* With every batch released at once, the loader needs depth + 1 buffers
 * (the one the caller holds while the window moves on), whatever the
 * number of steps: no buffer is made per step. */
START_TEST(batch_buffers_are_recycled_across_steps)
{
    struct fixture f;
    setup(&f);
    struct tx_state st = {.caller = pthread_self()};
    zr_loader_opts o = {.size = sizeof(zr_loader_opts), .mode = ZR_IID, .batch = 16, .depth = 3,
                        .threads = 2, .transform = tx_negate, .user = &st,
                        .aux_free = tx_aux_free};
    zr_loader *ld = open_loader(&f, &o);
    zr_batch *seen[64];
    size_t nseen = 0;
    for (int s = 0; s < 80; s++) {
        zr_batch *b;
        ZR_OK_CALL(zr_loader_next(ld, &b));
        bool known = false;
        for (size_t k = 0; k < nseen; k++)
            known |= seen[k] == b;
        if (!known)
            seen[nseen++] = b;
        zr_batch_release(b);
    }
    ck_assert_uint_le(nseen, 4);
    int allocs = atomic_load(&st.allocs);
    ck_assert_int_le(allocs, 4);
    zr_loader_destroy(ld);
    check_aux_balanced(&st);
    teardown(&f);
}
END_TEST

/* This process's anonymous resident memory, in KiB (/proc/self/status). */
static long rss_anon_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

#define BIG_WIDTH ((uint64_t)256 << 10) /* 256 KiB records, 16 MiB a batch of 64 */

/* The buffers of the steady state (depth steps prepared, one held by the
 * caller) exist, their pages resident, when zr_loader_create returns: made
 * as the workers got ahead, the last of them was faulted in a page at a
 * time during some later step. Before any step is taken the workers can
 * have filled depth buffers at most, so depth + 1 resident buffers can only
 * come from the creation. */
START_TEST(loader_buffers_are_resident_when_it_is_created)
{
    void *probe = malloc(1 << 20);
    ck_assert_ptr_nonnull(probe);
    bool populate = madvise((void *)(((uintptr_t)probe + 4095) & ~(uintptr_t)4095), 1 << 16,
                            MADV_POPULATE_WRITE) == 0;
    free(probe);
    if (!populate)
        return; /* a kernel before 5.14 */
    char *dir = zt_tempdir(), *path = zt_join(dir, "big");
    const uint64_t shape[] = {BIG_WIDTH};
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "|u1", shape, 1, NULL));
    uint8_t *recs = calloc(64, BIG_WIDTH);
    ck_assert_ptr_nonnull(recs);
    ZR_OK_CALL(zr_append_dense(s, "|u1", shape, 1, recs, 64, NULL));
    free(recs);
    zr_loader_opts o = {.size = sizeof(zr_loader_opts), .mode = ZR_IID, .batch = 64, .depth = 2};
    const char *name = "big";
    long before = rss_anon_kib();
    zr_loader *ld;
    ZR_OK_CALL(zr_loader_create(&ld, &s, &name, 1, &o));
    long grown = rss_anon_kib() - before, slot = (long)(64 * BIG_WIDTH / 1024);
    ck_assert_msg(grown >= 3 * slot - slot / 4, "%ld KiB resident after creation, %ld a batch",
                  grown, slot);
    zr_batch *b;
    ZR_OK_CALL(zr_loader_next(ld, &b));
    zr_batch_release(b);
    zr_loader_destroy(ld);
    zr_close(s);
    zt_rmtree(dir);
    free(path);
    free(dir);
}
END_TEST

/* Destroy while workers are mid-transform and the caller holds batches:
 * it must return, and (run under valgrind) leak nothing. */
START_TEST(destroy_with_batches_in_flight_returns_and_frees_everything)
{
    struct fixture f;
    setup(&f);
    struct tx_state st = {.caller = pthread_self(), .nap = 2000};
    zr_loader_opts o = {.size = sizeof(zr_loader_opts), .mode = ZR_CYCLIC, .batch = 32, .depth = 8,
                        .threads = 4, .transform = tx_negate, .user = &st,
                        .aux_free = tx_aux_free};
    zr_loader *ld = open_loader(&f, &o);
    zr_batch *held[2];
    ZR_OK_CALL(zr_loader_next(ld, &held[0]));
    ZR_OK_CALL(zr_loader_next(ld, &held[1]));
    zr_loader_destroy(ld);
    check_aux_balanced(&st);
    /* A loader destroyed before its first batch, too. */
    ld = open_loader(&f, &o);
    zr_loader_destroy(ld);
    zr_loader_destroy(NULL);
    zr_batch_release(NULL);
    check_aux_balanced(&st);
    teardown(&f);
}
END_TEST

START_TEST(streams_of_unequal_length_are_refused)
{
    struct fixture f;
    setup(&f);
    zr_store *shorter = make_ragged(f.dir, "short", NREC - 1);
    zr_loader_opts o = {.size = sizeof(zr_loader_opts), .mode = ZR_IID, .batch = 4};
    zr_loader *ld = (zr_loader *)&o;
    zr_store *stores[] = {f.dense, shorter};
    const char *names[] = {"a", "b"};
    ZR_FAIL_CALL(zr_loader_create(&ld, stores, names, 2, &o), ZR_EINVAL);
    ck_assert_ptr_null(ld);
    /* Other bad arguments. */
    stores[1] = f.ragged;
    const char *dup[] = {"a", "a"};
    ZR_FAIL_CALL(zr_loader_create(&ld, stores, dup, 2, &o), ZR_EINVAL);
    ZR_FAIL_CALL(zr_loader_create(&ld, stores, names, 0, &o), ZR_EINVAL);
    ZR_FAIL_CALL(zr_loader_create(&ld, stores, names, 2, NULL), ZR_EINVAL);
    zr_loader_opts big = {.size = sizeof(zr_loader_opts), .mode = ZR_CYCLIC, .batch = NREC + 1};
    ZR_FAIL_CALL(zr_loader_create(&ld, stores, names, 2, &big), ZR_EINVAL);
    zr_loader_opts deep = {.size = sizeof(zr_loader_opts), .mode = ZR_CYCLIC, .batch = 4,
                           .depth = ZR_LOADER_MAX_DEPTH + 1};
    ZR_FAIL_CALL(zr_loader_create(&ld, stores, names, 2, &deep), ZR_EINVAL);
    ZR_FAIL_CALL(zr_loader_next(NULL, NULL), ZR_EINVAL);
    zr_close(shorter);
    teardown(&f);
}
END_TEST

/*
 * Three processes open the same stores read-only at once (shared locks),
 * each loads its rank's shard of a cyclic sampler, and reports the record
 * ids it actually received, decoded from the gathered bytes. Together they
 * must cover each cycle's kept indices exactly once.
 */
#define WORLD 3
#define SHARD 10

static void run_rank(const char *dir, uint32_t rank, int fd)
{
    char *pd = zt_join(dir, "dense"), *pr = zt_join(dir, "ragged");
    zr_store *d = NULL, *r = NULL;
    zr_loader *ld = NULL;
    int ok = zr_open(&d, pd, ZR_RDONLY) == 0 && zr_open(&r, pr, ZR_RDONLY) == 0;
    zr_store *stores[] = {d, r};
    const char *names[] = {"image", "tokens"};
    zr_loader_opts o = {.size = sizeof(zr_loader_opts), .mode = ZR_CYCLIC, .batch = SHARD,
                        .seed = 31, .rank = rank, .world = WORLD, .depth = 2, .threads = 2};
    ok = ok && zr_loader_create(&ld, stores, names, 2, &o) == 0;
    /* 300 / 30 = 10 steps per cycle; two cycles. */
    for (int s = 0; ok && s < 20; s++) {
        zr_batch *b;
        if (zr_loader_next(ld, &b) != 0) {
            ok = 0;
            break;
        }
        uint64_t ids[SHARD];
        const int32_t *v = b->streams[0].data;
        for (int i = 0; i < SHARD; i++) {
            ids[i] = (uint64_t)v[i * 15] / 16;
            if (((const int32_t *)b->streams[1].views[i].data)[0] != (int32_t)ids[i])
                ok = 0;
        }
        if (write(fd, ids, sizeof ids) != (ssize_t)sizeof ids)
            ok = 0;
        zr_batch_release(b);
    }
    zr_loader_destroy(ld);
    zr_close(d);
    zr_close(r);
    free(pd);
    free(pr);
    _exit(ok ? 0 : 1);
}

START_TEST(ranks_in_separate_processes_cover_each_cycle_once)
{
    struct fixture f;
    setup(&f);
    /* The children need shared locks: give up the writable handles. */
    zr_close(f.dense);
    zr_close(f.ragged);
    zr_close(f.zdense);
    f.dense = f.ragged = f.zdense = NULL;
    int fds[WORLD][2];
    pid_t pids[WORLD];
    for (uint32_t r = 0; r < WORLD; r++) {
        ck_assert_int_eq(pipe(fds[r]), 0);
        pids[r] = fork();
        ck_assert_int_ge(pids[r], 0);
        if (pids[r] == 0) {
            close(fds[r][0]);
            run_rank(f.dir, r, fds[r][1]);
        }
        close(fds[r][1]);
    }
    /* Each child writes 20 * SHARD ids, well within a pipe's buffer. */
    for (uint32_t r = 0; r < WORLD; r++) {
        int status;
        ck_assert_int_eq(waitpid(pids[r], &status, 0), pids[r]);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    uint64_t got[WORLD][20][SHARD];
    for (uint32_t r = 0; r < WORLD; r++) {
        size_t have = 0;
        ssize_t n;
        while (have < sizeof got[r] &&
               (n = read(fds[r][0], (char *)got[r] + have, sizeof got[r] - have)) > 0)
            have += (size_t)n;
        ck_assert_uint_eq(have, sizeof got[r]);
        close(fds[r][0]);
    }
    zr_sampler *global;
    ZR_OK_CALL(zr_sampler_create(&global, NREC, SHARD * WORLD, ZR_CYCLIC, 31, 0, 1));
    for (int c = 0; c < 2; c++) {
        int count[NREC] = {0};
        for (int s = c * 10; s < c * 10 + 10; s++) {
            uint64_t want[SHARD * WORLD];
            ZR_OK_CALL(zr_sampler_batch(global, (uint64_t)s, want));
            for (uint32_t r = 0; r < WORLD; r++)
                for (int i = 0; i < SHARD; i++) {
                    ck_assert_uint_eq(got[r][s][i], want[r * SHARD + i]);
                    count[got[r][s][i]]++;
                }
        }
        for (int i = 0; i < NREC; i++)
            ck_assert_int_eq(count[i], 1);
    }
    zr_sampler_free(global);
    teardown(&f);
}
END_TEST

Suite *suite_loader(void)
{
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("loader");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, batches_equal_direct_gathers_at_every_depth_and_thread_count);
    tcase_add_test(tc, start_step_resumes_exactly_where_a_run_stood);
    tcase_add_test(tc, the_last_step_is_uint64_max_and_nothing_wraps);
    tcase_add_test(tc, a_second_caller_of_next_gets_ebusy);
    tcase_add_test(tc, quasi_block_and_window_reach_the_sampler);
    tcase_add_test(tc, transform_runs_on_workers_and_edits_batches_in_place);
    tcase_add_loop_test(tc, transform_failure_surfaces_from_next, 0,
                        (int)(sizeof tx_failures / sizeof tx_failures[0]));
    tcase_add_test(tc, transform_cannot_take_from_its_own_loader);
    tcase_add_test(tc, double_release_does_not_share_buffers);
    tcase_add_test(tc, gather_error_surfaces_from_next_for_its_step);
    tcase_add_test(tc, batch_buffers_are_recycled_across_steps);
    tcase_add_test(tc, loader_buffers_are_resident_when_it_is_created);
    tcase_add_test(tc, destroy_with_batches_in_flight_returns_and_frees_everything);
    tcase_add_test(tc, streams_of_unequal_length_are_refused);
    tcase_add_test(tc, ranks_in_separate_processes_cover_each_cycle_once);
    suite_add_tcase(s, tc);
    return s;
}

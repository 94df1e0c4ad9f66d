/*
 * check_concurrency.c: one handle used from several threads. Readers
 * gather while a writer appends (the readers must only ever see committed
 * records, each exactly as generated, and an index past the length they
 * saw must be refused or, if committed meanwhile, be right); many threads
 * gather one compressed store at once; two threads append to one handle
 * and their batches come out whole. The writer waits for the readers to
 * gather between its appends, so appends and gathers interleave by
 * construction, not by luck; the small geometry makes the appends add
 * chunk files and table segments under the readers' feet.
 *
 * Threads other than the test's own never call Check: they record the
 * first failure, which the test thread then asserts on.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "engine.h"
#include "tests/helpers.h"
#include "tests/records.h"
#include "tests/suites.h"

#define SEED 400
#define READERS 3
#define TOTAL 1200
#define MAXNDIM 2
#define MAXDIM 12

struct shared {
    zr_store *s;
    int kind;
    void *dense;         /* Dense: all TOTAL records back to back */
    zt_ragged *ragged;   /* Ragged: all TOTAL records */
    _Atomic int stop;
    _Atomic uint64_t gathers;
    _Atomic uint64_t checked; /* records verified by readers */
    pthread_mutex_t lock;
    char failure[512];
};

static void report_failure(struct shared *sh, const char *fmt, uint64_t a, int rc)
{
    pthread_mutex_lock(&sh->lock);
    if (!sh->failure[0])
        snprintf(sh->failure, sizeof sh->failure, fmt, (unsigned long long)a, rc,
                 zr_last_error());
    pthread_mutex_unlock(&sh->lock);
    atomic_store(&sh->stop, 1);
}

static bool matches(struct shared *sh, const uint64_t *idx, size_t n, int *rc)
{
    return sh->kind == ZR_DENSE ? zt_dense_matches(sh->s, SEED, idx, n, rc)
                                : zt_ragged_matches(sh->s, SEED, idx, n, MAXNDIM, MAXDIM, rc);
}

static uint64_t next_rand(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return *state >> 33;
}

static void *reader(void *arg)
{
    struct shared *sh = arg;
    uint64_t state = (uint64_t)(uintptr_t)&state;
    uint64_t idx[24];
    while (!atomic_load(&sh->stop)) {
        uint64_t len = zr_len(sh->s);
        /* A batch of old and newest records, repeats and all. */
        for (size_t k = 0; k < 24; k++)
            idx[k] = k % 4 == 0 ? len - 1 - k / 4 % (len < 6 ? len : 6) : next_rand(&state) % len;
        int rc;
        if (!matches(sh, idx, 24, &rc)) {
            report_failure(sh, "batch at length %llu: rc %d, %s (or wrong bytes)", len, rc);
            break;
        }
        /* The newest record alone, on the inline path. */
        uint64_t last = len - 1;
        if (!matches(sh, &last, 1, &rc)) {
            report_failure(sh, "newest record %llu: rc %d, %s (or wrong bytes)", last, rc);
            break;
        }
        /* One past what this thread saw: refused, or committed and right. */
        uint64_t beyond = len;
        bool ok = matches(sh, &beyond, 1, &rc);
        if (!ok && rc != ZR_ERANGE) {
            report_failure(sh, "record %llu past the seen length: rc %d, %s (or wrong bytes)", beyond, rc);
            break;
        }
        atomic_fetch_add(&sh->checked, 25 + (ok ? 1 : 0));
        atomic_fetch_add(&sh->gathers, 1);
    }
    return NULL;
}

static void wait_for_gathers(struct shared *sh, uint64_t count)
{
    while (atomic_load(&sh->gathers) < count && !atomic_load(&sh->stop))
        sched_yield();
}

static void *writer(void *arg)
{
    struct shared *sh = arg;
    uint64_t done = zr_len(sh->s), b = 0;
    while (done < TOTAL && !atomic_load(&sh->stop)) {
        uint64_t n = 1 + (b++ * 37) % 45;
        if (n > TOTAL - done)
            n = TOTAL - done;
        uint64_t first = UINT64_MAX;
        int rc;
        if (sh->kind == ZR_DENSE) {
            uint32_t ndim;
            const uint64_t *shape = zr_item_shape(sh->s, &ndim);
            uint64_t width = zr_record_width(sh->s);
            rc = zr_append_dense(sh->s, zr_dtype(sh->s), shape, ndim,
                                 (uint8_t *)sh->dense + done * width, n, &first);
        } else {
            rc = zr_append_ragged(sh->s, zr_dtype(sh->s), sh->ragged->recs + done, n, &first);
        }
        if (rc != 0 || first != done) {
            report_failure(sh, "append at %llu: rc %d, %s", done, rc);
            break;
        }
        done += n;
        /* Let every reader gather at least once more before going on. */
        wait_for_gathers(sh, atomic_load(&sh->gathers) + READERS);
    }
    return NULL;
}

static const struct {
    int kind;
    int codec;
} configs[] = {
    {ZR_DENSE, ZR_CODEC_RAW},
    {ZR_DENSE, ZR_CODEC_ZSTD},
    {ZR_RAGGED, ZR_CODEC_RAW},
    {ZR_RAGGED, ZR_CODEC_ZSTD_DICT},
};

START_TEST(gathers_see_only_committed_records_during_appends)
{
    const char *dtype = "<i4";
    const uint64_t shape[] = {32};
    struct shared sh = {.kind = configs[_i].kind};
    pthread_mutex_init(&sh.lock, NULL);
    void *dict = NULL;
    size_t dict_len = 0;
    if (sh.kind == ZR_DENSE) {
        sh.dense = zt_dense_gen(dtype, 32, SEED, 0, TOTAL);
    } else {
        sh.ragged = zt_ragged_gen(dtype, SEED, 0, TOTAL, MAXNDIM, MAXDIM);
        if (configs[_i].codec == ZR_CODEC_ZSTD_DICT) {
            size_t *sizes = malloc(TOTAL * sizeof *sizes);
            ck_assert_ptr_nonnull(sizes);
            for (uint64_t k = 0; k < TOTAL; k++)
                sizes[k] = sh.ragged->nbytes[k];
            ZR_OK_CALL(zr_train_dict_records((const void *const *)sh.ragged->data, sizes, TOTAL,
                                             ZR_TIER_FAST, &dict, &dict_len));
            free(sizes);
        }
    }
    /* Small chunks and segments: appends keep adding files. */
    zr_testing_set_geometry(8192, 32);
    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = configs[_i].codec,
                           .dict = dict, .dict_len = dict_len};
    char *path = zt_path("c");
    if (sh.kind == ZR_DENSE) {
        ZR_OK_CALL(zr_dense_create(&sh.s, path, dtype, shape, 1, &opts));
        ZR_OK_CALL(zr_append_dense(sh.s, dtype, shape, 1, sh.dense, 8, NULL));
    } else {
        ZR_OK_CALL(zr_ragged_create(&sh.s, path, dtype, &opts));
        ZR_OK_CALL(zr_append_ragged(sh.s, dtype, sh.ragged->recs, 8, NULL));
    }
    pthread_t readers[READERS], w;
    for (int k = 0; k < READERS; k++)
        ck_assert_int_eq(pthread_create(&readers[k], NULL, reader, &sh), 0);
    ck_assert_int_eq(pthread_create(&w, NULL, writer, &sh), 0);
    pthread_join(w, NULL);
    /* Every reader gathers once more after the last commit. */
    wait_for_gathers(&sh, atomic_load(&sh.gathers) + READERS);
    atomic_store(&sh.stop, 1);
    for (int k = 0; k < READERS; k++)
        pthread_join(readers[k], NULL);
    ck_assert_msg(!sh.failure[0], "%s", sh.failure);
    ck_assert_uint_eq(zr_len(sh.s), TOTAL);
    ck_assert_uint_gt(atomic_load(&sh.checked), 0);
    ck_assert_uint_ge(zt_meta_read(path).tail_chunk, 2); /* chunks rolled over */
    zr_close(sh.s);

    /* What the readers saw is what reopening sees. */
    ZR_OK_CALL(zr_open(&sh.s, path, ZR_RDONLY));
    if (sh.kind == ZR_DENSE)
        zt_check_dense_all(sh.s, SEED);
    else
        zt_check_ragged_all(sh.s, SEED, MAXNDIM, MAXDIM);
    zr_close(sh.s);
    pthread_mutex_destroy(&sh.lock);
    zt_ragged_free(sh.ragged);
    free(sh.dense);
    free(dict);
    free(path);
}
END_TEST

/* Many threads gather one zstd_dict store at once: the dictionary is
 * shared, each batch is right. */
START_TEST(concurrent_gathers_share_one_dictionary)
{
    void *sample = zt_dense_gen("<u2", 64, SEED, 0, 500), *dict;
    size_t dict_len;
    ZR_OK_CALL(zr_train_dict_buffer(sample, 128, 500, ZR_TIER_FAST, &dict, &dict_len));
    free(sample);
    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD_DICT,
                           .dict = dict, .dict_len = dict_len};
    const uint64_t shape[] = {8, 8};
    char *path = zt_path("d");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<u2", shape, 2, &opts));
    zt_append_dense_gen(s, SEED, 600);
    zr_close(s);
    struct shared sh = {.kind = ZR_DENSE};
    pthread_mutex_init(&sh.lock, NULL);
    ZR_OK_CALL(zr_open(&sh.s, path, ZR_RDONLY));
    pthread_t t[4];
    for (int k = 0; k < 4; k++)
        ck_assert_int_eq(pthread_create(&t[k], NULL, reader, &sh), 0);
    wait_for_gathers(&sh, 200);
    atomic_store(&sh.stop, 1);
    for (int k = 0; k < 4; k++)
        pthread_join(t[k], NULL);
    ck_assert_msg(!sh.failure[0], "%s", sh.failure);
    ck_assert_uint_ge(atomic_load(&sh.gathers), 200);
    zr_close(sh.s);
    pthread_mutex_destroy(&sh.lock);
    free(dict);
    free(path);
}
END_TEST

/* Two threads append to one handle: the calls are serialised, so each
 * batch lands whole and contiguous at the index it reports. */
struct appender {
    zr_store *s;
    uint64_t seed;
    uint64_t firsts[20], sizes[20];
    int rc;
};

static void *append_batches(void *arg)
{
    struct appender *a = arg;
    uint64_t local = 0;
    for (int b = 0; b < 20 && a->rc == 0; b++) {
        uint64_t n = 1 + (uint64_t)(b * 7) % 23;
        void *buf = zt_dense_gen("<f8", 6, a->seed, local, n);
        const uint64_t shape[] = {6};
        a->rc = zr_append_dense(a->s, "<f8", shape, 1, buf, n, &a->firsts[b]);
        a->sizes[b] = n;
        local += n;
        free(buf);
    }
    return NULL;
}

/* The gathering thread's allocations wait at a gate the test opens: its
 * gather is then in flight for as long as the test needs. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool open;
    int waiting;
    bool gathered; /* the gather returned */
} gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0, false};

static void gate_pass(void)
{
    pthread_mutex_lock(&gate.lock);
    gate.waiting++;
    pthread_cond_broadcast(&gate.cv);
    while (!gate.open)
        pthread_cond_wait(&gate.cv, &gate.lock);
    pthread_mutex_unlock(&gate.lock);
}

static _Thread_local bool gated;

static void *gated_malloc(size_t n)
{
    if (gated)
        gate_pass();
    return malloc(n);
}

static void *gated_calloc(size_t n, size_t size)
{
    if (gated)
        gate_pass();
    return calloc(n, size);
}

struct inflight {
    zr_store *s;
    uint64_t idx[16];
    int rc;
    bool matched;
    atomic_bool closed;
};

static void *gather_held(void *arg)
{
    struct inflight *f = arg;
    gated = true;
    f->matched = zt_dense_matches(f->s, SEED, f->idx, 16, &f->rc);
    pthread_mutex_lock(&gate.lock);
    gate.gathered = true;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.lock);
    return NULL;
}

static void *close_store(void *arg)
{
    struct inflight *f = arg;
    zr_close(f->s);
    atomic_store(&f->closed, true);
    return NULL;
}

/* zr_close waits for a gather in flight on another thread, which then
 * completes with the right records; a call made while close waits is
 * refused instead of reading what is about to be freed. */
START_TEST(close_waits_for_a_gather_in_flight_and_refuses_new_ones)
{
    char *path = zt_path("c");
    const uint64_t shape[] = {40};
    zr_create_opts o = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD};
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<i4", shape, 1, &o));
    zt_append_dense_gen(s, SEED, 64);
    ZR_OK_CALL(zr_sync(s));
    zr_close(s);
    struct inflight f = {.closed = false};
    ZR_OK_CALL(zr_open(&f.s, path, ZR_RDONLY));
    for (int k = 0; k < 16; k++)
        f.idx[k] = (uint64_t)k * 4 + 1;
    zr_alloc.malloc = gated_malloc;
    zr_alloc.calloc = gated_calloc;
    pthread_t g, c;
    ck_assert_int_eq(pthread_create(&g, NULL, gather_held, &f), 0);
    pthread_mutex_lock(&gate.lock);
    while (gate.waiting == 0 && !gate.gathered)
        pthread_cond_wait(&gate.cv, &gate.lock);
    bool held = gate.waiting > 0;
    pthread_mutex_unlock(&gate.lock);
    ck_assert_msg(held, "the gather allocated nothing: no gate held it");
    ck_assert_int_eq(pthread_create(&c, NULL, close_store, &f), 0);
    while (!atomic_load(&f.s->closing))
        sched_yield();
    int32_t buf[40];
    const uint64_t one = 0;
    ZR_FAIL_CALL(zr_gather_dense(f.s, &one, 1, buf), ZR_EINVAL);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "being closed"));
    ck_assert(!atomic_load(&f.closed));
    pthread_mutex_lock(&gate.lock);
    gate.open = true;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.lock);
    pthread_join(g, NULL);
    pthread_join(c, NULL);
    zr_alloc = zr_alloc_default;
    ck_assert_int_eq(f.rc, 0);
    ck_assert(f.matched);
    ck_assert(atomic_load(&f.closed));
    free(path);
}
END_TEST

START_TEST(appends_from_two_threads_land_whole)
{
    zr_testing_set_geometry(4096, 16);
    const uint64_t shape[] = {6};
    char *path = zt_path("a");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<f8", shape, 1, NULL));
    struct appender a[2] = {{.s = s, .seed = 1}, {.s = s, .seed = 2}};
    pthread_t t[2];
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(pthread_create(&t[k], NULL, append_batches, &a[k]), 0);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    uint64_t total = 0;
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(a[k].rc, 0);
        for (int b = 0; b < 20; b++)
            total += a[k].sizes[b];
    }
    ck_assert_uint_eq(zr_len(s), total);
    zr_close(s);
    /* Every index belongs to exactly one batch, and holds its records. */
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    uint8_t *owner = calloc(total, 1);
    ck_assert_ptr_nonnull(owner);
    for (int k = 0; k < 2; k++) {
        uint64_t local = 0;
        for (int b = 0; b < 20; b++) {
            uint64_t n = a[k].sizes[b], first = a[k].firsts[b];
            ck_assert_uint_le(first + n, total);
            uint64_t *idx = malloc(n * sizeof *idx);
            ck_assert_ptr_nonnull(idx);
            for (uint64_t j = 0; j < n; j++) {
                ck_assert_uint_eq(owner[first + j], 0);
                owner[first + j] = 1;
                idx[j] = first + j;
            }
            double got[23 * 6];
            ZR_OK_CALL(zr_gather_dense(s, idx, n, got));
            void *want = zt_dense_gen("<f8", 6, a[k].seed, local, n);
            ck_assert_mem_eq(got, want, n * 48);
            free(want);
            free(idx);
            local += n;
        }
    }
    zr_close(s);
    free(owner);
    free(path);
}
END_TEST

Suite *suite_concurrency(void)
{
    Suite *s = suite_create("concurrency");
    TCase *tc = tcase_create("concurrency");
    tcase_add_checked_fixture(tc, zt_setup, zt_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, gathers_see_only_committed_records_during_appends, 0,
                        sizeof configs / sizeof configs[0]);
    tcase_add_test(tc, concurrent_gathers_share_one_dictionary);
    tcase_add_test(tc, appends_from_two_threads_land_whole);
    tcase_add_test(tc, close_waits_for_a_gather_in_flight_and_refuses_new_ones);
    suite_add_tcase(s, tc);
    return s;
}

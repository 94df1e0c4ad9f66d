/*
 * check_faultloop.c: the I/O fault loop. For each workload (an append of
 * Dense and Ragged records, raw and zstd, rolling over chunk and segment
 * files; a delete; a compaction; a sync) and each fault (EIO, ENOSPC,
 * EINTR, a short write, at one call or at that call and every later one),
 * the k-th mutating file-system call is made to fail for every k until
 * the workload runs through untouched. A failed call must surface as an
 * error (an interrupted or short write must be retried and succeed),
 * leak no descriptor, leave the store reopening in the state before or
 * after the workload, and after a failed fsync the handle must refuse
 * every further write. Memory leaks are left to LeakSanitizer.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "tests/faults.h"
#include "tests/helpers.h"
#include "tests/idrecords.h"
#include "tests/model.h"
#include "tests/suites.h"

#define MAXREC 300 /* Ragged record bytes at most */
#define WIDTH 200  /* Dense record bytes */
#define BEFORE 24  /* records in the store before the workload */
#define BATCH 40   /* records the append workloads add */

enum op { OP_APPEND, OP_DELETE, OP_COMPACT, OP_SYNC };

struct workload {
    const char *name;
    int kind, codec;
    enum op op;
};

static const struct workload workloads[] = {
    {"append dense raw", ZR_DENSE, ZR_CODEC_RAW, OP_APPEND},
    {"append dense zstd", ZR_DENSE, ZR_CODEC_ZSTD, OP_APPEND},
    {"append ragged raw", ZR_RAGGED, ZR_CODEC_RAW, OP_APPEND},
    {"append ragged zstd", ZR_RAGGED, ZR_CODEC_ZSTD, OP_APPEND},
    {"delete ragged zstd", ZR_RAGGED, ZR_CODEC_ZSTD, OP_DELETE},
    {"compact ragged raw", ZR_RAGGED, ZR_CODEC_RAW, OP_COMPACT},
    {"sync dense raw", ZR_DENSE, ZR_CODEC_RAW, OP_SYNC},
};
#define NWORK (sizeof workloads / sizeof workloads[0])

struct fault {
    const char *name;
    int err, persistent;
};

static const struct fault faults[] = {
    {"EIO once", EIO, 0},         {"EIO from then on", EIO, 1},
    {"ENOSPC once", ENOSPC, 0},   {"ENOSPC from then on", ENOSPC, 1},
    {"EINTR once", EINTR, 0},     {"EINTR from then on", EINTR, 1},
    {"short once", ZT_SHORT, 0},  {"short from then on", ZT_SHORT, 1},
};
#define NFAULT (sizeof faults / sizeof faults[0])

static char *dir, *path;

static void setup(void)
{
    dir = zt_tempdir();
    path = zt_join(dir, "store");
    zt_nosync(1);
    /* Small files, so a batch of 40 records crosses chunks and segments. */
    zr_testing_set_geometry(4096, 16);
}

static void teardown(void)
{
    zt_faults_disarm();
    zt_nosync(0);
    zr_testing_set_geometry(0, 0);
    zt_rmtree(dir);
    free(path);
    free(dir);
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* Dense record id r is the first WIDTH bytes of Ragged-style record r. */
static int append_dense_ids(zr_store *s, const uint64_t *ids, uint64_t n)
{
    uint8_t *buf = malloc(n * WIDTH + 1);
    ck_assert_ptr_nonnull(buf);
    for (uint64_t k = 0; k < n; k++)
        zt_record_fill(ids[k], buf + k * WIDTH, WIDTH);
    uint64_t shape = WIDTH;
    int rc = zr_append_dense(s, "|u1", &shape, 1, buf, n, NULL);
    free(buf);
    return rc;
}

static int append_ids(zr_store *s, const uint64_t *ids, uint64_t n)
{
    return zr_kind(s) == ZR_DENSE ? append_dense_ids(s, ids, n) : zt_append_ids(s, ids, n, MAXREC);
}

/* 0 when the store holds exactly the model's records. */
static int matches(zr_store *s, const zt_model *m, char *why, size_t whylen)
{
    if (zr_kind(s) == ZR_RAGGED)
        return zt_model_matches(s, m, MAXREC, why, whylen);
    if (zr_len(s) != m->len) {
        snprintf(why, whylen, "store has %llu records, model %llu",
                 (unsigned long long)zr_len(s), (unsigned long long)m->len);
        return -1;
    }
    uint64_t *idx = malloc((m->len + 1) * sizeof *idx);
    uint8_t *got = malloc(m->len * WIDTH + 1), want[WIDTH];
    ck_assert(idx && got);
    for (uint64_t k = 0; k < m->len; k++)
        idx[k] = k;
    int rc = zr_gather_dense(s, idx, m->len, got);
    if (rc != 0)
        snprintf(why, whylen, "gather failed: %s", zr_last_error());
    for (uint64_t k = 0; rc == 0 && k < m->len; k++) {
        zt_record_fill(m->ids[k], want, WIDTH);
        if (memcmp(got + k * WIDTH, want, WIDTH) != 0) {
            snprintf(why, whylen, "index %llu does not hold record %llu", (unsigned long long)k,
                     (unsigned long long)m->ids[k]);
            rc = -1;
        }
    }
    free(idx);
    free(got);
    return rc;
}

static zr_store *create(const struct workload *w)
{
    zr_store *s;
    zr_create_opts o = {.size = sizeof(zr_create_opts), .codec = w->codec};
    uint64_t shape = WIDTH;
    if (w->kind == ZR_DENSE)
        ZR_OK_CALL(zr_dense_create(&s, path, "|u1", &shape, 1, &o));
    else
        ZR_OK_CALL(zr_ragged_create(&s, path, "|u1", &o));
    return s;
}

static const uint64_t del_idx[] = {0, 5, BEFORE - 1, 17, 16, 5};
#define NDEL (sizeof del_idx / sizeof del_idx[0])

/* Build the store as it is before the workload, and both models. */
static zr_store *prepare(const struct workload *w, zt_model *before, zt_model *after)
{
    zr_store *s = create(w);
    uint64_t ids[BATCH];
    for (uint64_t k = 0; k < BEFORE; k++)
        ids[k] = 1000 + k;
    ZR_OK_CALL(append_ids(s, ids, BEFORE));
    zt_model_append(before, ids, BEFORE);
    if (w->op == OP_COMPACT) {
        /* Leave garbage for the compaction to reclaim. */
        uint64_t d[] = {2, 9, 3};
        ZR_OK_CALL(zr_delete(s, d, 3));
        zt_model_delete(before, d, 3);
    }
    zt_model_copy(after, before);
    if (w->op == OP_APPEND) {
        for (uint64_t k = 0; k < BATCH; k++)
            ids[k] = 5000 + k;
        zt_model_append(after, ids, BATCH);
    } else if (w->op == OP_DELETE) {
        zt_model_delete(after, del_idx, NDEL);
    }
    return s;
}

static int run(const struct workload *w, zr_store *s)
{
    switch (w->op) {
    case OP_APPEND: {
        uint64_t ids[BATCH];
        for (uint64_t k = 0; k < BATCH; k++)
            ids[k] = 5000 + k;
        return append_ids(s, ids, BATCH);
    }
    case OP_DELETE: {
        uint64_t d[NDEL];
        memcpy(d, del_idx, sizeof d);
        return zr_delete(s, d, NDEL);
    }
    case OP_COMPACT:
        return zr_compact(s, NULL);
    case OP_SYNC:
        return zr_sync(s);
    }
    return -1;
}

/* After a failed fsync the kernel may have dropped dirty pages: every
 * later write through the handle must be refused, never trusted. */
static void assert_refuses_writes(zr_store *s, const char *what)
{
    uint64_t id = 9999, d = 0;
    ck_assert_msg(append_ids(s, &id, 1) != 0, "%s: append accepted after a failed sync", what);
    ck_assert_msg(zr_sync(s) != 0, "%s: sync succeeded after a failed sync", what);
    ck_assert_msg(zr_delete(s, &d, 1) != 0, "%s: delete accepted after a failed sync", what);
    ck_assert_msg(zr_compact(s, NULL) != 0, "%s: compact accepted after a failed sync", what);
}

/* The loop for one workload and one fault; returns the most mutating
 * calls a run made. Compressed appends write a group of frames with one
 * call or several depending on how the workers interleave, so the count
 * can differ between runs: the loop goes on until k is past every count
 * seen. */
static long fault_loop(const struct workload *w, const struct fault *f)
{
    int retried = f->err == EINTR || f->err == ZT_SHORT;
    long calls = 0, fired_cases = 0;
    for (long k = 0; k <= calls; k++) {
        zt_rmtree(path);
        zt_model before = {0}, after = {0};
        int fds = open_fds();
        zr_store *s = prepare(w, &before, &after);
        zt_faults_arm(k, f->err, f->persistent);
        int rc = run(w, s);
        int fired = zt_faults_fired();
        enum zt_call call = zt_faults_fired_call();
        calls = ZR_MAX(calls, zt_faults_disarm());
        fired_cases += fired;
        char what[160];
        snprintf(what, sizeof what, "%s, %s at call %ld", w->name, f->name, k);
        if (retried || !fired)
            ck_assert_msg(rc == 0, "%s: rc %d: %s", what, rc, zr_last_error());
        else
            ck_assert_msg(rc != 0, "%s: the failure was not reported", what);
        if (fired && !retried && call == ZT_CALL_SYNC)
            assert_refuses_writes(s, what);
        zr_close(s);
        ck_assert_msg(open_fds() == fds, "%s: %d descriptors before, %d after", what, fds,
                      open_fds());

        ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
        char why1[256] = "-", why2[256] = "";
        int is_after = matches(s, &after, why2, sizeof why2) == 0;
        int ok = is_after || (rc != 0 && matches(s, &before, why1, sizeof why1) == 0);
        ck_assert_msg(ok, "%s: neither before (%s) nor after (%s)", what, why1, why2);
        zr_verify_report *rep;
        ZR_OK_CALL(zr_verify(s, &rep));
        zr_verify_report_free(rep);
        zr_close(s);
        zt_model_free(&before);
        zt_model_free(&after);
    }
    if (getenv("ZT_FAULT_COUNTS"))
        fprintf(stderr, "faultloop: %s, %s: %ld calls, %ld faults fired\n", w->name, f->name,
                calls, fired_cases);
    return calls;
}

START_TEST(every_fault_at_every_call_leaves_before_or_after)
{
    const struct workload *w = &workloads[_i / NFAULT];
    ck_assert_int_gt(fault_loop(w, &faults[_i % NFAULT]), 0);
}
END_TEST

START_TEST(a_failed_sync_is_not_retried_by_the_next_sync)
{
    /* The fault is a one-off: a second sync would succeed if it were
     * tried, which is exactly what must not happen. */
    zt_model before = {0}, after = {0};
    const struct workload w = {"sync", ZR_RAGGED, ZR_CODEC_RAW, OP_SYNC};
    zr_store *s = prepare(&w, &before, &after);
    long k;
    for (k = 1;; k++) {
        zt_faults_arm(0, 0, 0);
        uint64_t id = 7000 + (uint64_t)k;
        ZR_OK_CALL(append_ids(s, &id, 1));
        zt_faults_arm(k, EIO, 0);
        int rc = zr_sync(s);
        int fired = zt_faults_fired() && zt_faults_fired_call() == ZT_CALL_SYNC;
        zt_faults_disarm();
        if (!fired) {
            ck_assert_int_eq(rc, 0);
            break;
        }
        ck_assert_int_ne(rc, 0);
        assert_refuses_writes(s, "sync");
        zr_close(s);
        ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
    }
    ck_assert_int_gt(k, 1);
    zr_close(s);
    zt_model_free(&before);
    zt_model_free(&after);
}
END_TEST

Suite *suite_faultloop(void)
{
    Suite *su = suite_create("faultloop");
    TCase *tc = tcase_create("faultloop");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, every_fault_at_every_call_leaves_before_or_after, 0,
                        (int)(NWORK * NFAULT));
    tcase_add_test(tc, a_failed_sync_is_not_retried_by_the_next_sync);
    suite_add_tcase(su, tc);
    return su;
}

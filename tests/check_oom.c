/*
 * check_oom.c: the out-of-memory loop. Every allocation of the library
 * goes through the table zr_alloc (lib/alloc.h); this suite makes
 * allocation number k fail, for every k over a workload that opens a
 * store, appends a batch and gathers every record, and checks that the
 * failure comes back as ZR_ENOMEM, that no descriptor is leaked (memory
 * leaks are left to LeakSanitizer) and that the store reopens holding the
 * records before or after the append. Allocations made inside libzstd and
 * msgpack-c do not pass through the table and are not reached.
 */
#include <check.h>
#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "engine.h"
#include "tests/faults.h"
#include "tests/helpers.h"
#include "tests/idrecords.h"
#include "tests/model.h"
#include "tests/suites.h"

#define MAXREC 300
#define WIDTH 96
#define BEFORE 20
#define BATCH 30

static atomic_long nallocs;
static long fail_at;
static int fail_persistent;
static atomic_int fired;

static int should_fail(void)
{
    long n = atomic_fetch_add(&nallocs, 1) + 1;
    if (fail_at <= 0 || n < fail_at || (n > fail_at && !fail_persistent))
        return 0;
    atomic_store(&fired, 1);
    return 1;
}
static void *f_malloc(size_t n) { return should_fail() ? NULL : malloc(n); }
static void *f_calloc(size_t n, size_t z) { return should_fail() ? NULL : calloc(n, z); }
static void *f_realloc(void *p, size_t n) { return should_fail() ? NULL : realloc(p, n); }

/* Allocation number k (1-based) fails, and with persistent set every
 * later one too; k = 0 only counts. */
static void oom_arm(long k, int persistent)
{
    fail_persistent = persistent;
    atomic_store(&nallocs, 0);
    atomic_store(&fired, 0);
    fail_at = k;
    zr_alloc.malloc = f_malloc;
    zr_alloc.calloc = f_calloc;
    zr_alloc.realloc = f_realloc;
}

static long oom_disarm(void)
{
    zr_alloc = zr_alloc_default;
    return atomic_load(&nallocs);
}

static char *dir, *path;

static void setup(void)
{
    dir = zt_tempdir();
    path = zt_join(dir, "store");
    zt_nosync(1);
    zr_testing_set_geometry(4096, 16);
}

static void teardown(void)
{
    oom_disarm();
    zt_nosync(0);
    zr_testing_set_geometry(0, 0);
    zt_rmtree(dir);
    free(path);
    free(dir);
}

/* The process's open descriptors, not counting io_uring instances: a
 * thread keeps the ring its first planned read made for its lifetime
 * (lib/plan.c), which is a cache, not a leak. */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char link[300], target[64];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(link, target, sizeof target - 1);
        if (len > 0) {
            target[len] = 0;
            if (strcmp(target, "anon_inode:[io_uring]") == 0)
                continue;
        }
        n++;
    }
    closedir(d);
    return n;
}

struct workload {
    const char *name;
    int kind, codec;
};

static const struct workload workloads[] = {
    {"ragged raw", ZR_RAGGED, ZR_CODEC_RAW},
    {"ragged zstd", ZR_RAGGED, ZR_CODEC_ZSTD},
    {"dense raw", ZR_DENSE, ZR_CODEC_RAW},
    {"dense zstd", ZR_DENSE, ZR_CODEC_ZSTD},
};

static int append_ids(zr_store *s, const uint64_t *ids, uint64_t n)
{
    if (zr_kind(s) == ZR_RAGGED)
        return zt_append_ids(s, ids, n, MAXREC);
    uint8_t *buf = malloc(n * WIDTH);
    ck_assert_ptr_nonnull(buf);
    for (uint64_t k = 0; k < n; k++)
        zt_record_fill(ids[k], buf + k * WIDTH, WIDTH);
    uint64_t shape = WIDTH;
    int rc = zr_append_dense(s, "|u1", &shape, 1, buf, n, NULL);
    free(buf);
    return rc;
}

/* Gather every record; returns the library's code, or -100 when a
 * record read back differs from the model. */
static int gather_all(zr_store *s, const zt_model *m)
{
    uint64_t n = zr_len(s);
    if (n != m->len)
        return -100;
    uint64_t *idx = malloc(n * sizeof *idx);
    ck_assert_ptr_nonnull(idx);
    for (uint64_t k = 0; k < n; k++)
        idx[k] = k;
    int rc;
    if (zr_kind(s) == ZR_RAGGED) {
        zr_ragged_batch *b;
        rc = zr_gather_ragged_alloc(s, idx, n, &b);
        for (uint64_t k = 0; rc == 0 && k < n; k++)
            if (!zt_record_is(m->ids[k], b->recs[k].data, b->recs[k].nbytes, MAXREC))
                rc = -100;
        if (rc == 0 || rc == -100)
            zr_ragged_batch_free(b);
    } else {
        uint8_t *got = malloc(n * WIDTH), want[WIDTH];
        ck_assert_ptr_nonnull(got);
        rc = zr_gather_dense(s, idx, n, got);
        for (uint64_t k = 0; rc == 0 && k < n; k++) {
            zt_record_fill(m->ids[k], want, WIDTH);
            if (memcmp(got + k * WIDTH, want, WIDTH) != 0)
                rc = -100;
        }
        free(got);
    }
    free(idx);
    return rc;
}

/* The store on disk before the workload, and both models. */
static void prepare(const struct workload *w, zt_model *before, zt_model *after)
{
    zr_store *s;
    zr_create_opts o = {.size = sizeof(zr_create_opts), .codec = w->codec};
    uint64_t shape = WIDTH, ids[BATCH];
    if (w->kind == ZR_DENSE)
        ZR_OK_CALL(zr_dense_create(&s, path, "|u1", &shape, 1, &o));
    else
        ZR_OK_CALL(zr_ragged_create(&s, path, "|u1", &o));
    for (uint64_t k = 0; k < BEFORE; k++)
        ids[k] = 300 + k;
    ZR_OK_CALL(append_ids(s, ids, BEFORE));
    zt_model_append(before, ids, BEFORE);
    zr_close(s);
    zt_model_copy(after, before);
    for (uint64_t k = 0; k < BATCH; k++)
        ids[k] = 900 + k;
    zt_model_append(after, ids, BATCH);
}

START_TEST(every_failed_allocation_is_enomem_and_leaves_the_store_intact)
{
    const struct workload *w = &workloads[_i / 2];
    int persistent = _i % 2;
    long total = 0;
    for (long k = 0; k <= total; k++) {
        zt_rmtree(path);
        zt_model before = {0}, after = {0};
        prepare(w, &before, &after);
        int fds = open_fds();
        zr_store *s = NULL;
        int appended = 0;
        oom_arm(k, persistent);
        int rc = zr_open(&s, path, ZR_RDWR);
        if (rc == 0) {
            uint64_t ids[BATCH];
            for (uint64_t j = 0; j < BATCH; j++)
                ids[j] = 900 + j;
            rc = append_ids(s, ids, BATCH);
            appended = rc == 0;
        }
        if (rc == 0)
            rc = gather_all(s, &after);
        zr_close(s);
        int hit = atomic_load(&fired);
        /* Compressed appends allocate per worker, and how the records
         * split between workers varies: go on past every count seen. */
        long n = oom_disarm();
        total = n > total ? n : total;
        ck_assert_msg(hit ? rc == ZR_ENOMEM : rc == 0, "%s, allocation %ld%s: rc %d (%s)",
                      w->name, k, persistent ? " on" : "", rc, zr_last_error());
        ck_assert_msg(open_fds() == fds, "%s, allocation %ld: %d descriptors before, %d after",
                      w->name, k, fds, open_fds());
        ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
        const zt_model *want = appended ? &after : &before;
        ck_assert_msg(gather_all(s, want) == 0, "%s, allocation %ld: the store does not hold "
                      "the records %s the append", w->name, k, appended ? "after" : "before");
        zr_verify_report *rep;
        ZR_OK_CALL(zr_verify(s, &rep));
        zr_verify_report_free(rep);
        zr_close(s);
        zt_model_free(&before);
        zt_model_free(&after);
    }
    ck_assert_int_gt(total, 0);
    if (getenv("ZT_FAULT_COUNTS"))
        fprintf(stderr, "oom: %s%s: %ld allocations\n", w->name,
                persistent ? ", from then on" : "", total);
}
END_TEST

Suite *suite_oom(void)
{
    Suite *su = suite_create("oom");
    TCase *tc = tcase_create("oom");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, every_failed_allocation_is_enomem_and_leaves_the_store_intact, 0,
                        (int)(2 * sizeof workloads / sizeof workloads[0]));
    suite_add_tcase(su, tc);
    return su;
}

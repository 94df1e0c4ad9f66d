/*
 * check_maint.c: delete, compact, stats and verify, and their atomicity:
 * a fault loop over every mutating call, an interrupted delete finished
 * by a read-only open, a randomized model check, and a corruption sweep
 * over every byte of meta.zr, a loc segment and store.zr.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"
#include "tests/faults.h"
#include "tests/helpers.h"
#include "tests/idrecords.h"
#include "tests/model.h"
#include "tests/suites.h"

#define MAXREC 300

static char *dir, *path;

static void setup(void)
{
    dir = zt_tempdir();
    path = zt_join(dir, "store");
    zt_nosync(1);
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

/* A Ragged |u1 store holding records ids first..first+n-1, and the model. */
static zr_store *make_store(int codec, uint64_t first, uint64_t n, zt_model *m)
{
    zr_store *s;
    zr_create_opts o = {.size = sizeof(zr_create_opts), .codec = codec};
    ZR_OK_CALL(zr_ragged_create(&s, path, "|u1", &o));
    uint64_t *ids = malloc(n * sizeof *ids);
    for (uint64_t k = 0; k < n; k++)
        ids[k] = first + k;
    ZR_OK_CALL(zt_append_ids(s, ids, n, MAXREC));
    zt_model_append(m, ids, n);
    free(ids);
    return s;
}

static void assert_matches(zr_store *s, const zt_model *m)
{
    char why[256];
    ck_assert_msg(zt_model_matches(s, m, MAXREC, why, sizeof why) == 0, "%s", why);
}

START_TEST(delete_fills_each_hole_with_the_last_record)
{
    zt_model m = {0};
    zr_store *s = make_store(ZR_CODEC_RAW, 100, 10, &m);
    /* 10 records 100..109; delete 2, 9, 5, 2: descending 9, 5, 2.
     * 9 is last: dropped. 5 takes 108. 2 takes 107. */
    uint64_t del[] = {2, 9, 5, 2};
    ZR_OK_CALL(zr_delete(s, del, 4));
    static const uint64_t expect[] = {100, 101, 107, 103, 104, 108, 106};
    zt_model want = {0};
    zt_model_append(&want, expect, 7);
    assert_matches(s, &want);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    assert_matches(s, &want);
    zr_close(s);
    zt_model_free(&want);
    zt_model_free(&m);
}
END_TEST

START_TEST(delete_checks_every_index_before_changing_anything)
{
    zt_model m = {0};
    zr_store *s = make_store(ZR_CODEC_ZSTD, 0, 20, &m);
    uint64_t del[] = {3, 4, 20};
    ZR_FAIL_CALL(zr_delete(s, del, 3), ZR_ERANGE);
    assert_matches(s, &m);
    ZR_OK_CALL(zr_delete(s, del, 0));
    assert_matches(s, &m);
    zr_close(s);
    zt_model_free(&m);
}
END_TEST

START_TEST(maintenance_through_a_read_only_handle_is_refused)
{
    zt_model m = {0};
    zr_store *s = make_store(ZR_CODEC_RAW, 0, 5, &m);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    uint64_t del[] = {1};
    ZR_FAIL_CALL(zr_delete(s, del, 1), ZR_EROFS);
    ZR_FAIL_CALL(zr_compact(s, NULL), ZR_EROFS);
    assert_matches(s, &m);
    zr_close(s);
    zt_model_free(&m);
}
END_TEST

static int count_files(const char *suffix)
{
    int n = 0;
    char name[600];
    for (int i = 0; i < 100000; i++) {
        snprintf(name, sizeof name, "%s/%d.%s", path, i, suffix);
        struct stat st;
        if (stat(name, &st) != 0)
            break;
        n++;
    }
    return n;
}

static uint64_t file_bytes(const char *suffix)
{
    uint64_t total = 0;
    char name[600];
    for (int i = 0; i < 100000; i++) {
        snprintf(name, sizeof name, "%s/%d.%s", path, i, suffix);
        struct stat st;
        if (stat(name, &st) != 0)
            break;
        total += (uint64_t)st.st_size;
    }
    return total;
}

START_TEST(compact_reclaims_garbage_and_removes_surplus_files)
{
    zr_testing_set_geometry(4096, 16);
    zt_model m = {0};
    zr_store *s = make_store(ZR_CODEC_RAW, 0, 400, &m);
    uint64_t del[200];
    for (int k = 0; k < 200; k++)
        del[k] = (uint64_t)k * 2;
    ZR_OK_CALL(zr_delete(s, del, 200));
    zt_model_delete(&m, del, 200);
    zr_store_stats st = ZR_STORE_STATS_INIT;
    ZR_OK_CALL(zr_stats(s, &st));
    ck_assert_uint_eq(st.records, 200);
    ck_assert_uint_eq(st.chunk_bytes, file_bytes("chunk"));
    ck_assert_uint_gt(st.reclaimable, st.chunk_bytes / 3);
    int chunks_before = count_files("chunk");
    zr_compact_result r = ZR_COMPACT_RESULT_INIT;
    ZR_OK_CALL(zr_compact(s, &r));
    assert_matches(s, &m);
    ck_assert_uint_eq(r.bytes_before, st.chunk_bytes);
    ck_assert_uint_eq(r.bytes_after, file_bytes("chunk"));
    ck_assert_int_lt(count_files("chunk"), chunks_before);
    /* 200 entries at 16 per segment: 13 segments, the last holding 8. */
    ck_assert_int_eq(count_files("loc"), 13);
    ck_assert_uint_eq(file_bytes("loc"), 200 * 16);
    zr_store_stats after = ZR_STORE_STATS_INIT;
    ZR_OK_CALL(zr_stats(s, &after));
    ck_assert_uint_eq(after.live_bytes, st.live_bytes);
    /* Only the slack at chunk ends (each less than one record) remains. */
    ck_assert_uint_lt(after.reclaimable, (uint64_t)count_files("chunk") * (MAXREC + 16));
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
    assert_matches(s, &m);
    zr_verify_report *rep;
    ZR_OK_CALL(zr_verify(s, &rep));
    ck_assert_uint_eq(rep->nproblems, 0);
    zr_verify_report_free(rep);
    /* The store keeps working: append after compaction. */
    uint64_t more[] = {9000, 9001, 9002};
    ZR_OK_CALL(zt_append_ids(s, more, 3, MAXREC));
    zt_model_append(&m, more, 3);
    assert_matches(s, &m);
    zr_close(s);
    zt_model_free(&m);
}
END_TEST

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

START_TEST(compact_moves_records_only_downwards_and_skips_those_in_place)
{
    zr_testing_set_geometry(8192, 64);
    zt_model m = {0};
    zr_store *s = make_store(ZR_CODEC_ZSTD, 0, 300, &m);
    /* Compressed appends lay records out in completion order, so pick the
     * victims by physical address: the record in the middle of the store
     * and the last two. Every record before the middle one stays put. */
    uint64_t addr[300], sorted[300];
    for (uint64_t i = 0; i < 300; i++) {
        struct zr_loc l;
        ck_assert_int_eq(zr_batch_locs(s, &i, 1, &l, false), 0);
        addr[i] = sorted[i] = (uint64_t)l.chunk_id << 32 | l.offset;
    }
    qsort(sorted, 300, sizeof *sorted, cmp_u64);
    uint64_t del[3];
    for (uint64_t i = 0; i < 300; i++) {
        if (addr[i] == sorted[150])
            del[0] = i;
        if (addr[i] == sorted[298])
            del[1] = i;
        if (addr[i] == sorted[299])
            del[2] = i;
    }
    ZR_OK_CALL(zr_delete(s, del, 3));
    zt_model_delete(&m, del, 3);
    uint64_t n = zr_len(s);
    struct zr_loc *before = malloc(n * sizeof *before);
    for (uint64_t i = 0; i < n; i++)
        ck_assert_int_eq(zr_batch_locs(s, &i, 1, &before[i], false), 0);
    zr_compact_result r = ZR_COMPACT_RESULT_INIT;
    ZR_OK_CALL(zr_compact(s, &r));
    uint64_t unmoved = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct zr_loc l;
        ck_assert_int_eq(zr_batch_locs(s, &i, 1, &l, false), 0);
        uint64_t was = (uint64_t)before[i].chunk_id << 32 | before[i].offset;
        uint64_t now = (uint64_t)l.chunk_id << 32 | l.offset;
        ck_assert_uint_le(now, was);
        unmoved += now == was;
    }
    ck_assert_uint_eq(r.records_moved + unmoved, n);
    ck_assert_uint_ge(unmoved, 150);
    ZR_OK_CALL(zr_compact(s, &r));
    ck_assert_uint_eq(r.records_moved, 0);
    assert_matches(s, &m);
    free(before);
    zr_close(s);
    zt_model_free(&m);
}
END_TEST

START_TEST(stats_count_stored_and_file_bytes)
{
    zt_model m = {0};
    zr_store *s = make_store(ZR_CODEC_RAW, 0, 50, &m);
    uint64_t live = 0;
    for (uint64_t r = 0; r < 50; r++)
        live += 16 + zt_record_size(r, MAXREC); /* raw: prefix (ndim 1) + payload */
    zr_store_stats st = ZR_STORE_STATS_INIT;
    ZR_OK_CALL(zr_stats(s, &st));
    ck_assert_uint_eq(st.records, 50);
    ck_assert_uint_eq(st.live_bytes, live);
    ck_assert_uint_eq(st.chunk_bytes, file_bytes("chunk"));
    ck_assert_uint_eq(st.reclaimable, st.chunk_bytes - live);
    ck_assert_int_eq(st.codec, ZR_CODEC_RAW);
    ck_assert_uint_eq(st.dict_bytes, 0);
    zr_close(s);
    zt_model_free(&m);
}
END_TEST

START_TEST(verify_passes_a_sound_store)
{
    zt_model m = {0};
    zr_store *s = make_store(ZR_CODEC_ZSTD, 0, 100, &m);
    zr_verify_report *rep;
    ZR_OK_CALL(zr_verify(s, &rep));
    ck_assert_uint_eq(rep->records_checked, 100);
    ck_assert_uint_eq(rep->nproblems, 0);
    zr_verify_report_free(rep);
    zr_close(s);
    zt_model_free(&m);
}
END_TEST

START_TEST(verify_reports_a_file_that_went_missing_after_the_open)
{
    /* Chunks of 4 KiB: the open reads the header's chunk, the last, and
     * 0.chunk only when the scan first maps it. */
    zr_testing_set_geometry(4096, 16);
    zt_model m = {0};
    zr_store *s = make_store(ZR_CODEC_RAW, 0, 400, &m);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    char *cp = zt_join(path, "0.chunk");
    ck_assert_int_eq(unlink(cp), 0);
    free(cp);
    zr_verify_report *rep = NULL;
    ZR_FAIL_CALL(zr_verify(s, &rep), ZR_ECORRUPT);
    ck_assert_msg(strstr(zr_last_error(), "0.chunk is missing"), "%s", zr_last_error());
    ck_assert_ptr_nonnull(rep);
    ck_assert_uint_eq(rep->records_checked, 0);
    ck_assert_uint_ge(rep->nlisted, 1);
    const zr_problem *p = zr_verify_problem(rep, rep->nlisted - 1);
    ck_assert_str_eq(p->file, "0.chunk");
    ck_assert_uint_eq(p->entry, UINT64_MAX);
    ck_assert_msg(strstr(p->what, "0.chunk is missing"), "%s", p->what);
    zr_verify_report_free(rep);
    zr_close(s);
    zt_model_free(&m);
}
END_TEST

static void patch(const char *name, uint64_t off, const void *bytes, size_t n)
{
    char *p = zt_join(path, name);
    int fd = open(p, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, bytes, n, (off_t)off), (ssize_t)n);
    close(fd);
    free(p);
}

START_TEST(verify_lists_every_damaged_entry)
{
    zt_model m = {0};
    zr_store *s = make_store(ZR_CODEC_RAW, 0, 20, &m);
    zr_close(s);
    /* Entry 3 points at entry 4's bytes (overlap); entry 7 gets a length
     * that runs past the file; record 9's shape prefix claims 5 dims. */
    uint8_t e4[16], e7[16];
    char *lp = zt_join(path, "0.loc");
    int fd = open(lp, O_RDONLY);
    ck_assert_int_eq(pread(fd, e4, 16, 4 * 16), 16);
    ck_assert_int_eq(pread(fd, e7, 16, 7 * 16), 16);
    close(fd);
    free(lp);
    patch("0.loc", 3 * 16, e4, 16);
    uint8_t huge[4] = {0xff, 0xff, 0xff, 0x7f};
    patch("0.loc", 7 * 16 + 4, huge, 4);
    patch("0.loc", 7 * 16 + 8, huge, 4);
    uint32_t off9;
    lp = zt_join(path, "0.loc");
    fd = open(lp, O_RDONLY);
    ck_assert_int_eq(pread(fd, &off9, 4, 9 * 16), 4);
    close(fd);
    free(lp);
    uint8_t five[8] = {5};
    patch("0.chunk", off9, five, 8);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zr_verify_report *rep;
    ZR_FAIL_CALL(zr_verify(s, &rep), ZR_ECORRUPT);
    ck_assert_uint_eq(rep->records_checked, 20);
    int saw3 = 0, saw7 = 0, saw9 = 0;
    for (size_t k = 0; k < rep->nlisted; k++) {
        const zr_problem *p = zr_verify_problem(rep, k);
        saw3 |= (p->entry == 3 || p->entry == 4) && strstr(p->what, "overlaps") != NULL;
        saw7 |= p->entry == 7 && strcmp(p->file, "0.loc") == 0;
        saw9 |= p->entry == 9 && strcmp(p->file, "0.chunk") == 0;
    }
    ck_assert_msg(saw3 && saw7 && saw9, "missing problems: overlap %d length %d prefix %d", saw3,
                  saw7, saw9);
    zr_verify_report_free(rep);
    zr_close(s);
    zt_model_free(&m);
}
END_TEST

/* Run op under a fault at every mutating call in turn; after each failure
 * the store must reopen to the state before or after the operation. */
static void fault_loop(int op)
{
    zr_testing_set_geometry(4096, 16);
    for (long k = 1;; k++) {
        zt_rmtree(path);
        zt_model before = {0}, after = {0};
        zr_store *s = make_store(ZR_CODEC_RAW, 0, 48, &before);
        uint64_t del[] = {0, 5, 47, 30, 31, 5};
        if (op == 0) {
            uint64_t d[6];
            memcpy(d, del, sizeof d);
            ZR_OK_CALL(zr_delete(s, d, 2)); /* leave garbage for compaction */
            zt_model_delete(&before, d, 2);
        }
        zt_model_copy(&after, &before);
        if (op == 1)
            zt_model_delete(&after, del, 6);
        zt_faults_arm(k, k % 2 ? EIO : ENOSPC, 0);
        int rc = op == 0 ? zr_compact(s, NULL) : zr_delete(s, del, 6);
        int fired = zt_faults_fired();
        zt_faults_disarm();
        zr_close(s);
        ck_assert_msg(fired ? rc != 0 : rc == 0, "call %ld: rc %d fired %d: %s", k, rc, fired,
                      zr_last_error());
        ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
        char why1[256], why2[256];
        int ok = zt_model_matches(s, &before, MAXREC, why1, sizeof why1) == 0 ||
                 zt_model_matches(s, &after, MAXREC, why2, sizeof why2) == 0;
        ck_assert_msg(ok, "fault at call %ld: neither before (%s) nor after (%s)", k, why1, why2);
        zr_verify_report *rep;
        ZR_OK_CALL(zr_verify(s, &rep));
        zr_verify_report_free(rep);
        zr_close(s);
        zt_model_free(&before);
        zt_model_free(&after);
        if (!fired)
            break;
    }
}

START_TEST(a_failure_at_any_write_of_compact_leaves_before_or_after)
{
    fault_loop(0);
}
END_TEST

START_TEST(a_failure_at_any_write_of_delete_leaves_before_or_after)
{
    fault_loop(1);
}
END_TEST

START_TEST(a_read_only_open_finishes_an_interrupted_delete)
{
    zt_model m = {0};
    zr_store *s = make_store(ZR_CODEC_ZSTD, 0, 30, &m);
    uint64_t del[] = {1, 2, 3};
    ZR_OK_CALL(zr_sync(s));
    /* The intent takes four calls (truncate, write, checksum, sync) and
     * the folder sync a fifth; fail the first entry write after it. */
    zt_faults_arm(6, EIO, 1);
    ck_assert_int_ne(zr_delete(s, del, 3), 0);
    zt_faults_disarm();
    zr_close(s);
    char *ip = zt_join(path, "intent.zr");
    struct stat st;
    ck_assert_int_eq(stat(ip, &st), 0);
    ck_assert_int_gt(st.st_size, 0);
    zt_model_delete(&m, del, 3);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    assert_matches(s, &m);
    ck_assert_int_eq(stat(ip, &st), 0);
    ck_assert_int_eq(st.st_size, 0);
    zr_close(s);
    free(ip);
    zt_model_free(&m);
}
END_TEST

struct calls {
    uint64_t n, last_done, last_total;
    int backwards;
};

static void count_progress(void *user, uint64_t done, uint64_t total)
{
    struct calls *c = user;
    if (c->n > 0 && done < c->last_done)
        c->backwards = 1;
    c->n++;
    c->last_done = done;
    c->last_total = total;
}

START_TEST(long_calls_report_progress_ending_at_the_total)
{
    zt_model m = {0};
    zr_store *s = make_store(ZR_CODEC_ZSTD, 0, 9000, &m);
    uint64_t del[] = {3, 4000};
    ZR_OK_CALL(zr_delete(s, del, 2));
    struct calls c = {0};
    zr_set_progress(s, count_progress, &c);
    ZR_OK_CALL(zr_compact(s, NULL));
    ck_assert_uint_ge(c.n, 1);
    ck_assert_int_eq(c.backwards, 0);
    ck_assert_uint_eq(c.last_done, 8998);
    ck_assert_uint_eq(c.last_total, 8998);
    c = (struct calls){0};
    zr_verify_report *rep;
    ZR_OK_CALL(zr_verify(s, &rep));
    zr_verify_report_free(rep);
    ck_assert_uint_ge(c.n, 1);
    ck_assert_int_eq(c.backwards, 0);
    ck_assert_uint_eq(c.last_done, 8998);
    ck_assert_uint_eq(c.last_total, 8998);
    zr_set_progress(s, NULL, NULL);
    c = (struct calls){0};
    ZR_OK_CALL(zr_compact(s, NULL));
    ck_assert_uint_eq(c.n, 0);
    zr_close(s);
    zt_model_free(&m);
}
END_TEST

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

START_TEST(random_operations_match_the_model)
{
    long steps = env_long("LOADERX_MODEL_STEPS", 1000);
    uint64_t seed = (uint64_t)env_long("LOADERX_MODEL_SEED", 1);
    zr_testing_set_geometry(2048, 32);
    zt_model m = {0};
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "|u1", &(zr_create_opts){.size = sizeof(zr_create_opts),
                                                                   .codec = ZR_CODEC_ZSTD}));
    uint64_t next_id = 1;
    for (long step = 0; step < steps; step++) {
        uint64_t r = zt_mix(seed * 1000003 + (uint64_t)step);
        int op = (int)(r % 100);
        /* Appends outnumber deletes until the store holds about 400
         * records, then the reverse, so every step stays cheap to check. */
        int append_share = m.len < 400 ? 45 : 20;
        if (op < append_share || m.len < 5) {
            uint64_t ids[24];
            uint64_t n = 1 + (r >> 8) % 24;
            for (uint64_t k = 0; k < n; k++)
                ids[k] = next_id++;
            ZR_OK_CALL(zt_append_ids(s, ids, n, MAXREC));
            zt_model_append(&m, ids, n);
        } else if (op < 80) {
            uint64_t idx[16];
            size_t n = 1 + (size_t)((r >> 8) % (m.len < 400 ? 8 : 16));
            for (size_t k = 0; k < n; k++)
                idx[k] = zt_mix(r + k) % m.len;
            ZR_OK_CALL(zr_delete(s, idx, n));
            zt_model_delete(&m, idx, n);
        } else if (op < 88) {
            ZR_OK_CALL(zr_compact(s, NULL));
        } else if (op < 94) {
            zr_close(s);
            ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
        } else {
            ZR_OK_CALL(zr_sync(s));
        }
        char why[256];
        ck_assert_msg(zt_model_matches(s, &m, MAXREC, why, sizeof why) == 0, "step %ld op %d: %s",
                      step, op, why);
    }
    zr_verify_report *rep;
    ZR_OK_CALL(zr_verify(s, &rep));
    zr_verify_report_free(rep);
    zr_close(s);
    zt_model_free(&m);
}
END_TEST

/* Open, gather everything and verify a damaged copy: each step either
 * reports ZR_ECORRUPT or gives exactly the model's records. */
static void check_variant(const zt_model *m, const char *what, long at)
{
    zr_store *s;
    int rc = zr_open(&s, path, ZR_RDONLY);
    if (rc != 0) {
        ck_assert_msg(rc == ZR_ECORRUPT, "%s at %ld: open gave %d (%s)", what, at, rc,
                      zr_last_error());
        return;
    }
    zr_verify_report *rep = NULL;
    int vrc = zr_verify(s, &rep);
    zr_verify_report_free(rep);
    ck_assert_msg(vrc == 0 || vrc == ZR_ECORRUPT, "%s at %ld: verify gave %d", what, at, vrc);
    uint64_t n = zr_len(s);
    for (uint64_t i = 0; i < n && vrc == 0; i++) {
        zr_ragged_batch *b;
        rc = zr_gather_ragged_alloc(s, &i, 1, &b);
        ck_assert_msg(rc == 0 || rc == ZR_ECORRUPT, "%s at %ld: gather gave %d", what, at, rc);
        if (rc != 0)
            break;
        /* A store that verifies clean must hold the model's records. */
        ck_assert_msg(i < m->len && b->recs[0].ndim == 1 &&
                          zt_record_is(m->ids[i], b->recs[0].data, b->recs[0].nbytes, MAXREC),
                      "%s at %ld: record %llu is wrong but nothing was reported", what, at,
                      (unsigned long long)i);
        zr_ragged_batch_free(b);
    }
    zr_close(s);
}

static void sweep_file(const zt_model *m, const char *name)
{
    char *p = zt_join(path, name);
    int fd = open(p, O_RDWR);
    ck_assert_int_ge(fd, 0);
    struct stat st;
    fstat(fd, &st);
    long size = (long)st.st_size;
    uint8_t *orig = malloc((size_t)size);
    ck_assert_int_eq(pread(fd, orig, (size_t)size, 0), size);
    for (long at = 0; at < size; at++) {
        for (int how = 0; how < 3; how++) {
            if (how == 0) {
                uint8_t b = orig[at] ^ 0xff;
                pwrite(fd, &b, 1, at);
            } else if (how == 1) {
                uint8_t b = 0;
                if (orig[at] == 0)
                    continue;
                pwrite(fd, &b, 1, at);
            } else {
                ck_assert_int_eq(ftruncate(fd, at), 0);
            }
            check_variant(m, how == 0 ? "flip" : how == 1 ? "zero" : "truncate", at);
            ck_assert_int_eq(pwrite(fd, orig, (size_t)size, 0), size);
        }
    }
    close(fd);
    free(orig);
    free(p);
}

START_TEST(every_damaged_byte_of_the_metadata_is_caught_or_harmless)
{
    zt_model m = {0};
    zr_store *s = make_store(_i ? ZR_CODEC_ZSTD : ZR_CODEC_RAW, 0, 12, &m);
    ZR_OK_CALL(zr_compact(s, NULL));
    zr_close(s);
    sweep_file(&m, "meta.zr");
    sweep_file(&m, "0.loc");
    sweep_file(&m, "store.zr");
    zt_model_free(&m);
}
END_TEST

Suite *suite_maint(void)
{
    Suite *s = suite_create("maint");
    TCase *tc = tcase_create("maint");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, delete_fills_each_hole_with_the_last_record);
    tcase_add_test(tc, delete_checks_every_index_before_changing_anything);
    tcase_add_test(tc, maintenance_through_a_read_only_handle_is_refused);
    tcase_add_test(tc, compact_reclaims_garbage_and_removes_surplus_files);
    tcase_add_test(tc, compact_moves_records_only_downwards_and_skips_those_in_place);
    tcase_add_test(tc, stats_count_stored_and_file_bytes);
    tcase_add_test(tc, verify_passes_a_sound_store);
    tcase_add_test(tc, verify_lists_every_damaged_entry);
    tcase_add_test(tc, verify_reports_a_file_that_went_missing_after_the_open);
    tcase_add_test(tc, a_failure_at_any_write_of_compact_leaves_before_or_after);
    tcase_add_test(tc, a_failure_at_any_write_of_delete_leaves_before_or_after);
    tcase_add_test(tc, a_read_only_open_finishes_an_interrupted_delete);
    tcase_add_test(tc, long_calls_report_progress_ending_at_the_total);
    suite_add_tcase(s, tc);
    TCase *model = tcase_create("model");
    tcase_add_checked_fixture(model, setup, teardown);
    tcase_set_timeout(model, 3600);
    tcase_add_test(model, random_operations_match_the_model);
    suite_add_tcase(s, model);
    TCase *sweep = tcase_create("sweep");
    tcase_add_checked_fixture(sweep, setup, teardown);
    tcase_set_timeout(sweep, 300);
    tcase_add_loop_test(sweep, every_damaged_byte_of_the_metadata_is_caught_or_harmless, 0, 2);
    suite_add_tcase(s, sweep);
    return s;
}

/* check_abi.c: what a compiled caller relies on: the version the library
 * reports, and sized structs of an older or a newer header than the
 * library's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "tests/helpers.h"
#include "tests/suites.h"

/* The header's numbers, the library's and configure's AC_INIT version are
 * one version, written by configure, not copied by hand. */
START_TEST(version_is_configures)
{
    unsigned major, minor, patch;
    char end;
    ck_assert_int_eq(sscanf(PACKAGE_VERSION, "%u.%u.%u%c", &major, &minor, &patch, &end), 3);
    ck_assert_str_eq(zr_version_string(), PACKAGE_VERSION);
    ck_assert_str_eq(ZR_VERSION_STRING, PACKAGE_VERSION);
    ck_assert_int_eq(zr_version(), (int)(major * 10000 + minor * 100 + patch));
    ck_assert_int_eq(zr_version(), ZR_VERSION_NUMBER);
    ck_assert_uint_eq(ZR_VERSION_MAJOR, major);
    ck_assert_uint_eq(ZR_VERSION_MINOR, minor);
    ck_assert_uint_eq(ZR_VERSION_PATCH, patch);
}
END_TEST

/* A struct as a caller compiled against another header holds it: the
 * library's struct followed by extra bytes a newer header would have. */
struct grown {
    union {
        zr_create_opts create;
        zr_loader_opts loader;
        zr_store_stats stats;
        zr_compact_result compact;
    } u;
    uint64_t newer[4];
};

static zr_store *dense_store(const char *path, const zr_create_opts *opts, int *rc)
{
    const uint64_t shape[] = {4};
    zr_store *s = NULL;
    *rc = zr_dense_create(&s, path, "<u2", shape, 1, opts);
    if (*rc == 0) {
        uint16_t rec[3][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}};
        ZR_OK_CALL(zr_append_dense(s, "<u2", shape, 1, rec, 3, NULL));
    }
    return s;
}

/* A caller whose header ended before a field: the field takes its
 * default, whatever lies in memory where the library's struct has it. */
START_TEST(create_opts_of_an_older_header_are_accepted)
{
    char *dir = zt_tempdir();
    char *path = zt_join(dir, "s");
    static const uint8_t junk[64] = {1};
    const size_t sizes[] = {offsetof(zr_create_opts, dict_len), offsetof(zr_create_opts, dict)};
    for (size_t k = 0; k < 2; k++) {
        /* A dictionary for a zstd store would be refused, were it read. */
        zr_create_opts o = {.size = sizes[k], .codec = ZR_CODEC_ZSTD,
                            .dict = k ? junk : NULL, .dict_len = sizeof junk};
        int rc;
        zr_store *s = dense_store(path, &o, &rc);
        ZR_OK_CALL(rc);
        ck_assert_int_eq(zr_codec(s), ZR_CODEC_ZSTD);
        zr_close(s);
        zt_rmtree(path);
    }
    zt_rmtree(dir);
    free(path);
    free(dir);
}
END_TEST

/* A newer header's fields left at zero ask for nothing and are accepted;
 * one that is set asks for what this library cannot do and is refused, as
 * is a size that cannot hold the first field. */
START_TEST(create_opts_of_a_newer_header_need_a_zero_tail)
{
    char *dir = zt_tempdir();
    char *path = zt_join(dir, "s");
    struct grown g;
    memset(&g, 0, sizeof g);
    g.u.create.size = sizeof g;
    g.u.create.codec = ZR_CODEC_ZSTD;
    int rc;
    zr_store *s = dense_store(path, &g.u.create, &rc);
    ZR_OK_CALL(rc);
    ck_assert_int_eq(zr_codec(s), ZR_CODEC_ZSTD);
    zr_close(s);
    zt_rmtree(path);

    g.newer[3] = 1;
    ZR_FAIL_CALL(zr_dense_create(&s, path, "<u2", NULL, 0, &g.u.create), ZR_EINVAL);
    ck_assert_ptr_null(s);
    ZR_FAIL_CALL(zr_ragged_create(&s, path, "<u2", &g.u.create), ZR_EINVAL);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "zr_create_opts"));
    const size_t small[] = {0, sizeof(size_t), offsetof(zr_create_opts, codec) + 1};
    for (size_t k = 0; k < sizeof small / sizeof small[0]; k++) {
        zr_create_opts o = {.size = small[k], .codec = ZR_CODEC_RAW};
        ZR_FAIL_CALL(zr_ragged_create(&s, path, "<u2", &o), ZR_EINVAL);
    }
    /* Nothing was created by the refused calls. */
    ck_assert_int_eq(access(path, F_OK), -1);
    zt_rmtree(dir);
    free(path);
    free(dir);
}
END_TEST

/* Results: a library fills only the fields the caller's size covers, and
 * leaves a newer caller's zero tail as it was. */
START_TEST(results_fill_only_what_the_size_covers)
{
    char *dir = zt_tempdir();
    char *path = zt_join(dir, "s");
    int rc;
    zr_store *s = dense_store(path, NULL, &rc);
    ZR_OK_CALL(rc);

    zr_store_stats full = ZR_STORE_STATS_INIT, old;
    ZR_OK_CALL(zr_stats(s, &full));
    ck_assert_uint_eq(full.records, 3);
    ck_assert_uint_eq(full.live_bytes, 24);
    memset(&old, 0xa5, sizeof old);
    old.size = offsetof(zr_store_stats, dict_bytes);
    ZR_OK_CALL(zr_stats(s, &old));
    ck_assert_uint_eq(old.size, offsetof(zr_store_stats, dict_bytes));
    ck_assert_uint_eq(old.records, 3);
    ck_assert_int_eq(old.codec, ZR_CODEC_RAW);
    uint64_t untouched;
    memset(&untouched, 0xa5, sizeof untouched);
    ck_assert_uint_eq(old.dict_bytes, untouched);

    struct grown g;
    memset(&g, 0, sizeof g);
    g.u.stats.size = sizeof g;
    ZR_OK_CALL(zr_stats(s, &g.u.stats));
    ck_assert_uint_eq(g.u.stats.size, sizeof g);
    ck_assert_mem_eq(&g.u.stats.records, &full.records,
                     sizeof full - offsetof(zr_store_stats, records));
    ck_assert_uint_eq(g.newer[0] | g.newer[1] | g.newer[2] | g.newer[3], 0);
    g.newer[0] = 7;
    ZR_FAIL_CALL(zr_stats(s, &g.u.stats), ZR_EINVAL);
    zr_store_stats zero = {0};
    ZR_FAIL_CALL(zr_stats(s, &zero), ZR_EINVAL);

    /* A compaction refuses a bad size before it moves anything. */
    uint64_t del = 0;
    ZR_OK_CALL(zr_delete(s, &del, 1));
    memset(&g, 0, sizeof g);
    g.u.compact.size = sizeof g;
    g.newer[2] = 1;
    ZR_FAIL_CALL(zr_compact(s, &g.u.compact), ZR_EINVAL);
    zr_store_stats before = ZR_STORE_STATS_INIT;
    ZR_OK_CALL(zr_stats(s, &before));
    ck_assert_uint_gt(before.reclaimable, 0);
    zr_compact_result r;
    memset(&r, 0xa5, sizeof r);
    r.size = offsetof(zr_compact_result, bytes_after);
    ZR_OK_CALL(zr_compact(s, &r));
    ck_assert_uint_gt(r.records_moved, 0);
    ck_assert_uint_eq(r.bytes_after, untouched);
    zr_close(s);
    zt_rmtree(dir);
    free(path);
    free(dir);
}
END_TEST

static int refuse(zr_batch *b, void *user)
{
    (void)b;
    (void)user;
    return ZR_ECODEC;
}

/* The loader's options follow the same rules: an older header's size,
 * whose missing fields (here the transform and its state) take their
 * defaults, and a newer one's with a zero tail are accepted. */
START_TEST(loader_opts_of_another_header)
{
    char *dir = zt_tempdir();
    char *path = zt_join(dir, "s");
    int rc;
    zr_store *s = dense_store(path, NULL, &rc);
    ZR_OK_CALL(rc);
    const char *name = "x";
    zr_loader *ld = NULL;
    zr_batch *b;

    const size_t sizes[] = {offsetof(zr_loader_opts, aux_free),
                            offsetof(zr_loader_opts, transform)};
    for (size_t k = 0; k < 2; k++) {
        /* A transform that fails every batch, were it read. */
        zr_loader_opts old = {.size = sizes[k], .mode = ZR_SEQUENTIAL, .batch = 2,
                              .transform = k ? refuse : NULL};
        ZR_OK_CALL(zr_loader_create(&ld, &s, &name, 1, &old));
        ZR_OK_CALL(zr_loader_next(ld, &b));
        ck_assert_uint_eq(b->size, 2);
        zr_batch_release(b);
        zr_loader_destroy(ld);
    }

    struct grown g;
    memset(&g, 0, sizeof g);
    g.u.loader.size = sizeof g;
    g.u.loader.mode = ZR_IID;
    g.u.loader.batch = 3;
    ZR_OK_CALL(zr_loader_create(&ld, &s, &name, 1, &g.u.loader));
    ZR_OK_CALL(zr_loader_next(ld, &b));
    ck_assert_uint_eq(b->size, 3);
    zr_loader_destroy(ld);
    g.newer[1] = 1;
    ZR_FAIL_CALL(zr_loader_create(&ld, &s, &name, 1, &g.u.loader), ZR_EINVAL);
    ck_assert_ptr_null(ld);
    zr_loader_opts unsized = {.mode = ZR_IID, .batch = 3};
    ZR_FAIL_CALL(zr_loader_create(&ld, &s, &name, 1, &unsized), ZR_EINVAL);

    zr_close(s);
    zt_rmtree(dir);
    free(path);
    free(dir);
}
END_TEST

/* A report the library allocates carries the library's sizes, and its
 * problems are reached through zr_verify_problem. */
START_TEST(verify_report_carries_the_librarys_sizes)
{
    char *dir = zt_tempdir();
    char *path = zt_join(dir, "s");
    int rc;
    zr_store *s = dense_store(path, NULL, &rc);
    ZR_OK_CALL(rc);
    zr_close(s);
    char *chunk = zt_join(path, "0.chunk");
    ck_assert_int_eq(truncate(chunk, 10), 0);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zr_verify_report *rep = NULL;
    ZR_FAIL_CALL(zr_verify(s, &rep), ZR_ECORRUPT);
    ck_assert_uint_eq(rep->size, sizeof *rep);
    ck_assert_uint_ge(rep->nlisted, 1);
    for (size_t k = 0; k < rep->nlisted; k++) {
        const zr_problem *p = zr_verify_problem(rep, k);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq(p->size, sizeof *p);
        ck_assert(p->file[0] != '\0' && p->what[0] != '\0');
    }
    ck_assert_ptr_null(zr_verify_problem(rep, rep->nlisted));
    ck_assert_ptr_null(zr_verify_problem(NULL, 0));
    zr_verify_report_free(rep);
    zr_close(s);
    zt_rmtree(dir);
    free(chunk);
    free(path);
    free(dir);
}
END_TEST

Suite *suite_abi(void)
{
    Suite *s = suite_create("abi");
    TCase *tc = tcase_create("abi");
    tcase_add_test(tc, version_is_configures);
    tcase_add_test(tc, create_opts_of_an_older_header_are_accepted);
    tcase_add_test(tc, create_opts_of_a_newer_header_need_a_zero_tail);
    tcase_add_test(tc, results_fill_only_what_the_size_covers);
    tcase_add_test(tc, loader_opts_of_another_header);
    tcase_add_test(tc, verify_report_carries_the_librarys_sizes);
    suite_add_tcase(s, tc);
    return s;
}

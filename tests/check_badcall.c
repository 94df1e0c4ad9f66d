/*
 * check_badcall.c: calls the library must refuse. Each test makes one
 * kind of bad call, checks its specific code, and checks that the store
 * on disk is byte for byte what it was before (and still reads back), so
 * a refused call can never have written half of anything. Also the texts
 * of the codes and the per-thread last-error message.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/helpers.h"
#include "tests/records.h"
#include "tests/suites.h"

#define SEED 200
static const uint64_t shape3x4[] = {3, 4};

static zr_store *dense_store(char **path, uint64_t n)
{
    *path = zt_path("d");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, *path, "<i4", shape3x4, 2, NULL));
    zt_append_dense_gen(s, SEED, n);
    return s;
}

static zr_store *ragged_store(char **path, uint64_t n)
{
    *path = zt_path("r");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, *path, "<f4", NULL));
    zt_append_ragged_gen(s, SEED, n, 2, 4);
    return s;
}

START_TEST(append_with_the_wrong_dtype_is_refused)
{
    char *dpath, *rpath;
    zr_store *d = dense_store(&dpath, 6), *r = ragged_store(&rpath, 6);
    size_t dlen, rlen;
    void *dsnap = zt_snapshot(dpath, &dlen), *rsnap = zt_snapshot(rpath, &rlen);
    int32_t data[12] = {0};
    ZR_FAIL_CALL(zr_append_dense(d, "<u4", shape3x4, 2, data, 1, NULL), ZR_EDTYPE);
    ZR_FAIL_CALL(zr_append_dense(d, ">i4", shape3x4, 2, data, 1, NULL), ZR_EDTYPE);
    ZR_FAIL_CALL(zr_append_dense(d, NULL, shape3x4, 2, data, 1, NULL), ZR_EDTYPE);
    const uint64_t two = 2;
    zr_rec rec = {.data = data, .shape = &two, .ndim = 1};
    ZR_FAIL_CALL(zr_append_ragged(r, "<f8", &rec, 1, NULL), ZR_EDTYPE);
    ZR_FAIL_CALL(zr_append_ragged(r, "<i4", &rec, 1, NULL), ZR_EDTYPE);
    ck_assert_uint_eq(zr_len(d), 6);
    ck_assert_uint_eq(zr_len(r), 6);
    zt_assert_unchanged(dpath, dsnap, dlen);
    zt_assert_unchanged(rpath, rsnap, rlen);
    zt_check_dense_all(d, SEED);
    zt_check_ragged_all(r, SEED, 2, 4);
    zr_close(d);
    zr_close(r);
    free(dpath);
    free(rpath);
}
END_TEST

START_TEST(append_with_the_wrong_item_shape_is_refused)
{
    char *path;
    zr_store *s = dense_store(&path, 4);
    size_t len;
    void *snap = zt_snapshot(path, &len);
    int32_t data[24] = {0};
    const uint64_t other[] = {4, 3}, longer[] = {3, 4, 1}, flat[] = {12};
    ZR_FAIL_CALL(zr_append_dense(s, "<i4", other, 2, data, 1, NULL), ZR_ESHAPE);
    ZR_FAIL_CALL(zr_append_dense(s, "<i4", longer, 3, data, 1, NULL), ZR_ESHAPE);
    ZR_FAIL_CALL(zr_append_dense(s, "<i4", flat, 1, data, 1, NULL), ZR_ESHAPE);
    ZR_FAIL_CALL(zr_append_dense(s, "<i4", shape3x4, 1, data, 1, NULL), ZR_ESHAPE);
    ZR_FAIL_CALL(zr_append_dense(s, "<i4", NULL, 0, data, 1, NULL), ZR_ESHAPE);
    ZR_FAIL_CALL(zr_append_dense(s, "<i4", NULL, 2, data, 1, NULL), ZR_ESHAPE);
    ck_assert_uint_eq(zr_len(s), 4);
    zt_assert_unchanged(path, snap, len);
    zt_check_dense_all(s, SEED);
    zr_close(s);
    free(path);
}
END_TEST

/* A zero-byte record anywhere in a batch rejects the whole batch. */
START_TEST(zero_byte_ragged_record_is_refused)
{
    char *path;
    zr_store *s = ragged_store(&path, 5);
    size_t len;
    void *snap = zt_snapshot(path, &len);
    float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const uint64_t good[] = {2, 4}, empty[] = {3, 0}, none[] = {0};
    zr_rec batch[4] = {
        {.data = data, .shape = good, .ndim = 2},
        {.data = data, .shape = good, .ndim = 1},
        {.data = data, .shape = empty, .ndim = 2},
        {.data = data, .shape = good, .ndim = 2},
    };
    ZR_FAIL_CALL(zr_append_ragged(s, "<f4", batch, 4, NULL), ZR_EEMPTY);
    batch[2] = (zr_rec){.data = data, .shape = none, .ndim = 1};
    ZR_FAIL_CALL(zr_append_ragged(s, "<f4", batch, 4, NULL), ZR_EEMPTY);
    ck_assert_uint_eq(zr_len(s), 5);
    zt_assert_unchanged(path, snap, len);
    zt_check_ragged_all(s, SEED, 2, 4);
    zr_close(s);
    free(path);
}
END_TEST

/* Records over 2 GiB are refused from their shape alone: the one-byte
 * buffer given as their data is never read (AddressSanitizer would see
 * it), and nothing reaches the disk. */
START_TEST(record_over_2_gib_is_refused)
{
    char *path = zt_path("u1");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "|u1", NULL));
    zt_append_ragged_gen(s, SEED, 3, 2, 4);
    size_t len;
    void *snap = zt_snapshot(path, &len);
    uint8_t tiny = 0;
    const uint64_t four_gib[] = {(uint64_t)1 << 20, (uint64_t)1 << 12};
    const uint64_t just_over[] = {((uint64_t)1 << 31) + 1};
    const uint64_t with_prefix[] = {(uint64_t)1 << 31}; /* 2 GiB payload + 16-byte prefix */
    const uint64_t overflow[] = {(uint64_t)1 << 40, (uint64_t)1 << 40};
    const uint64_t *shapes[] = {four_gib, just_over, with_prefix, overflow};
    const uint32_t ndims[] = {2, 1, 1, 2};
    for (int k = 0; k < 4; k++) {
        const uint64_t ok_shape[] = {1};
        zr_rec batch[2] = {{.data = &tiny, .shape = ok_shape, .ndim = 1},
                           {.data = &tiny, .shape = shapes[k], .ndim = ndims[k]}};
        ZR_FAIL_CALL(zr_append_ragged(s, "|u1", batch, 2, NULL), ZR_ETOOBIG);
    }
    ck_assert_uint_eq(zr_len(s), 3);
    zt_assert_unchanged(path, snap, len);
    zr_close(s);

    /* A Dense store whose records would exceed 2 GiB is never made. */
    char *big = zt_path("big");
    const uint64_t item[] = {(uint64_t)1 << 16, (uint64_t)1 << 14};
    s = (zr_store *)&s;
    ZR_FAIL_CALL(zr_dense_create(&s, big, "<f4", item, 2, NULL), ZR_ETOOBIG);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(zt_file_size(big), -1);
    free(big);
    free(path);
}
END_TEST

START_TEST(index_out_of_range_is_refused)
{
    char *dpath, *rpath;
    zr_store *d = dense_store(&dpath, 10), *r = ragged_store(&rpath, 10);
    uint8_t dst[4 * 48];
    memset(dst, 0xee, sizeof dst);
    const uint64_t at_len = 10, huge = UINT64_MAX;
    const uint64_t late[] = {0, 9, 3, 10}; /* the bad index comes last */
    ZR_FAIL_CALL(zr_gather_dense(d, &at_len, 1, dst), ZR_ERANGE);
    ZR_FAIL_CALL(zr_gather_dense(d, &huge, 1, dst), ZR_ERANGE);
    ZR_FAIL_CALL(zr_gather_dense(d, late, 4, dst), ZR_ERANGE);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "index 10"));
    /* Every index is checked before anything is read. */
    for (size_t k = 0; k < sizeof dst; k++)
        ck_assert_uint_eq(dst[k], 0xee);
    uint64_t sizes[4];
    const uint64_t offsets[4] = {0, 48, 96, 144};
    zr_ragged_batch *b = (zr_ragged_batch *)&b;
    ZR_FAIL_CALL(zr_ragged_sizes(r, late, 4, sizes), ZR_ERANGE);
    ZR_FAIL_CALL(zr_gather_ragged(r, late, 4, dst, offsets), ZR_ERANGE);
    ZR_FAIL_CALL(zr_gather_ragged(r, &huge, 1, dst, offsets), ZR_ERANGE);
    ZR_FAIL_CALL(zr_gather_ragged_alloc(r, late, 4, &b), ZR_ERANGE);
    ck_assert_ptr_null(b);
    for (size_t k = 0; k < sizeof dst; k++)
        ck_assert_uint_eq(dst[k], 0xee);
    zr_close(d);
    zr_close(r);

    /* An empty store has no index 0. */
    char *epath = zt_path("empty");
    zr_store *e;
    ZR_OK_CALL(zr_dense_create(&e, epath, "<i4", shape3x4, 2, NULL));
    const uint64_t zero = 0;
    ZR_FAIL_CALL(zr_gather_dense(e, &zero, 1, dst), ZR_ERANGE);
    zr_close(e);
    free(epath);
    free(dpath);
    free(rpath);
}
END_TEST

START_TEST(create_over_an_existing_store_is_refused)
{
    char *dpath, *rpath;
    zr_store *d = dense_store(&dpath, 3), *r = ragged_store(&rpath, 3);
    zr_close(d);
    zr_close(r);
    size_t dlen, rlen;
    void *dsnap = zt_snapshot(dpath, &dlen), *rsnap = zt_snapshot(rpath, &rlen);
    zr_store *s = (zr_store *)&s;
    ZR_FAIL_CALL(zr_dense_create(&s, dpath, "<i4", shape3x4, 2, NULL), ZR_EEXIST);
    ck_assert_ptr_null(s);
    ZR_FAIL_CALL(zr_ragged_create(&s, dpath, "<i4", NULL), ZR_EEXIST);
    ZR_FAIL_CALL(zr_dense_create(&s, rpath, "|u1", NULL, 0, NULL), ZR_EEXIST);
    zr_create_opts z = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD};
    ZR_FAIL_CALL(zr_ragged_create(&s, rpath, "<f4", &z), ZR_EEXIST);
    zt_assert_unchanged(dpath, dsnap, dlen);
    zt_assert_unchanged(rpath, rsnap, rlen);
    ZR_OK_CALL(zr_open(&s, dpath, ZR_RDONLY));
    zt_check_dense_all(s, SEED);
    zr_close(s);
    free(dpath);
    free(rpath);
}
END_TEST

/* A store has its folder to itself: creation refuses a folder holding
 * other files, a path that is a file, an empty path, and one that holds
 * a store someone has open (ZR_EEXIST all the same), and writes nothing.
 * A folder holding only what an unfinished creation leaves takes one. */
START_TEST(create_needs_a_folder_of_its_own)
{
    char *path = zt_path("photos");
    ck_assert_int_eq(mkdir(path, 0755), 0);
    char *f = zt_join(path, "a.png");
    zt_spit(f, "png", 3);
    size_t len;
    void *snap = zt_snapshot(path, &len);
    zr_store *s = (zr_store *)&s;
    ZR_FAIL_CALL(zr_dense_create(&s, path, "<i4", shape3x4, 2, NULL), ZR_EEXIST);
    ck_assert_ptr_null(s);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "a.png"));
    ZR_FAIL_CALL(zr_ragged_create(&s, path, "|u1", NULL), ZR_EEXIST);
    zt_assert_unchanged(path, snap, len);
    ZR_FAIL_CALL(zr_ragged_create(&s, f, "|u1", NULL), ZR_EEXIST);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "not a folder"));
    ZR_FAIL_CALL(zr_ragged_create(&s, "", "|u1", NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_open(&s, "", ZR_RDONLY), ZR_EINVAL);
    ck_assert_ptr_null(s);

    char *open_path;
    zr_store *d = dense_store(&open_path, 2); /* held open, read-write */
    ZR_FAIL_CALL(zr_dense_create(&s, open_path, "<i4", shape3x4, 2, NULL), ZR_EEXIST);
    zr_close(d);

    char *left = zt_path("leftover");
    ck_assert_int_eq(mkdir(left, 0755), 0);
    const char *names[] = {"meta.zr", "0.loc", "0.chunk", "store.zr.tmp"};
    for (size_t i = 0; i < 4; i++) {
        char *p = zt_join(left, names[i]);
        zt_spit(p, "x", 1);
        free(p);
    }
    ZR_OK_CALL(zr_dense_create(&s, left, "<i4", shape3x4, 2, NULL));
    zt_append_dense_gen(s, SEED, 4);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, left, ZR_RDONLY));
    zt_check_dense_all(s, SEED);
    zr_close(s);
    free(left);
    free(open_path);
    free(f);
    free(path);
}
END_TEST

/* Accessors given NULL answer what no store would; the dictionary trainer
 * refuses a NULL record. */
START_TEST(null_handles_and_records_are_refused)
{
    uint32_t ndim = 9;
    ck_assert_int_eq(zr_kind(NULL), ZR_EINVAL);
    ck_assert_int_eq(zr_codec(NULL), ZR_EINVAL);
    ck_assert_uint_eq(zr_len(NULL), 0);
    ck_assert_uint_eq(zr_itemsize(NULL), 0);
    ck_assert_uint_eq(zr_record_width(NULL), 0);
    ck_assert_int_eq(zr_writable(NULL), 0);
    ck_assert_ptr_null(zr_dtype(NULL));
    ck_assert_ptr_null(zr_path(NULL));
    ck_assert_ptr_null(zr_item_shape(NULL, &ndim));
    ck_assert_uint_eq(ndim, 0);
    uint8_t buf[64] = {1};
    const void *recs[2] = {buf, NULL};
    size_t sizes[2] = {64, 64};
    void *dict = NULL;
    size_t dict_len = 0;
    ZR_FAIL_CALL(zr_train_dict_records(recs, sizes, 2, ZR_TIER_FAST, &dict, &dict_len), ZR_EINVAL);
    ck_assert_ptr_null(dict);
}
END_TEST

/* Refused before anything is sent: no server is needed (the transfers
 * themselves are tested against one, tests/s3/t_push.sh). */
START_TEST(push_and_pull_arguments_are_refused)
{
    char *path;
    zr_store *s = dense_store(&path, 10);
    ZR_OK_CALL(zr_sync(s));
    zr_close(s);
    ZR_FAIL_CALL(zr_push(NULL, "s3://b/p", 0, NULL, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_push(path, NULL, 0, NULL, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_push(path, "s3://b/p", 2, NULL, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_push(path, path, 0, NULL, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_push("s3://b/p", "s3://b/q", 0, NULL, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_pull(NULL, path, 0, NULL, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_pull("s3://b/p", NULL, 0, NULL, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_pull("s3://b/p", "", 0, NULL, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_pull("s3://b/p", path, 2, NULL, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_pull(path, path, 0, NULL, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_pull_mode("s3://b/p", path, 0, 0400, NULL, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_pull_mode("s3://b/p", path, 0, 07777, NULL, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_pull_mode(NULL, path, 0, 0644, NULL, NULL), ZR_EINVAL);
    char *plain = zt_path("plain");
    ck_assert_int_eq(mkdir(plain, 0755), 0);
    ZR_FAIL_CALL(zr_push(plain, "s3://b/p", 0, NULL, NULL), ZR_ENOTSTORE);
    /* A pending intent is refused and left for an open to finish. */
    char *intent = zt_join(path, "intent.zr");
    FILE *f = fopen(intent, "w");
    ck_assert_ptr_nonnull(f);
    fputs("half an intent", f);
    ck_assert_int_eq(fclose(f), 0);
    ZR_FAIL_CALL(zr_push(path, "s3://b/p", 0, NULL, NULL), ZR_EBUSY);
    struct stat st;
    ck_assert_int_eq(stat(intent, &st), 0);
    ck_assert_int_eq(st.st_size, 14);
    free(intent);
    free(plain);
    free(path);
}
END_TEST

START_TEST(open_of_a_folder_that_is_not_a_store_is_refused)
{
    char *path = zt_path("plain");
    ck_assert_int_eq(mkdir(path, 0755), 0);
    zr_store *s = (zr_store *)&s;
    ZR_FAIL_CALL(zr_open(&s, path, ZR_RDONLY), ZR_ENOTSTORE);
    ck_assert_ptr_null(s);
    ZR_FAIL_CALL(zr_open(&s, path, ZR_RDWR), ZR_ENOTSTORE);
    /* Unrelated files, or chunk-like names without an identity. */
    char *f = zt_join(path, "notes.txt"), *c = zt_join(path, "0.chunk");
    zt_spit(f, "hello\n", 6);
    zt_spit(c, "abc", 3);
    size_t len;
    void *snap = zt_snapshot(path, &len);
    ZR_FAIL_CALL(zr_open(&s, path, ZR_RDONLY), ZR_ENOTSTORE);
    ZR_FAIL_CALL(zr_open(&s, path, ZR_RDWR), ZR_ENOTSTORE);
    zt_assert_unchanged(path, snap, len);
    free(f);
    free(c);
    free(path);
}
END_TEST

/* A creation that never finished leaves no store.zr: not a store yet. */
START_TEST(open_of_an_unfinished_store_is_refused)
{
    char *path;
    zr_store *s = dense_store(&path, 2);
    zr_close(s);
    char *id = zt_join(path, "store.zr");
    ck_assert_int_eq(remove(id), 0);
    ZR_FAIL_CALL(zr_open(&s, path, ZR_RDONLY), ZR_ENOTSTORE);
    ZR_FAIL_CALL(zr_open(&s, path, ZR_RDWR), ZR_ENOTSTORE);
    free(id);
    free(path);
}
END_TEST

START_TEST(open_of_a_missing_path_is_refused)
{
    char *path = zt_path("nowhere/deeper");
    zr_store *s = (zr_store *)&s;
    ZR_FAIL_CALL(zr_open(&s, path, ZR_RDONLY), ZR_ENOTSTORE);
    ck_assert_ptr_null(s);
    ZR_FAIL_CALL(zr_open(&s, path, ZR_RDWR), ZR_ENOTSTORE);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), path));
    char *parent = zt_path("nowhere");
    ck_assert_int_eq(zt_file_size(parent), -1); /* opening creates nothing */
    char *file = zt_path("file");
    zt_spit(file, "x", 1);
    ZR_FAIL_CALL(zr_open(&s, file, ZR_RDONLY), ZR_ENOTSTORE);
    free(file);
    free(parent);
    free(path);
}
END_TEST

START_TEST(call_for_the_other_kind_is_refused)
{
    char *dpath, *rpath;
    zr_store *d = dense_store(&dpath, 3), *r = ragged_store(&rpath, 3);
    size_t dlen, rlen;
    void *dsnap = zt_snapshot(dpath, &dlen), *rsnap = zt_snapshot(rpath, &rlen);
    float data[12] = {0};
    const uint64_t idx[] = {0, 1}, offsets[] = {0, 64};
    uint8_t dst[256];
    uint64_t sizes[2];
    zr_ragged_batch *b = NULL;
    const uint64_t one = 1;
    zr_rec rec = {.data = data, .shape = &one, .ndim = 1};
    /* Dense calls on a Ragged store. */
    ZR_FAIL_CALL(zr_append_dense(r, "<f4", NULL, 0, data, 1, NULL), ZR_EKIND);
    ZR_FAIL_CALL(zr_gather_dense(r, idx, 2, dst), ZR_EKIND);
    /* Ragged calls on a Dense store. */
    ZR_FAIL_CALL(zr_append_ragged(d, "<i4", &rec, 1, NULL), ZR_EKIND);
    ZR_FAIL_CALL(zr_ragged_sizes(d, idx, 2, sizes), ZR_EKIND);
    ZR_FAIL_CALL(zr_gather_ragged(d, idx, 2, dst, offsets), ZR_EKIND);
    ZR_FAIL_CALL(zr_gather_ragged_alloc(d, idx, 2, &b), ZR_EKIND);
    ck_assert_ptr_null(b);
    zt_assert_unchanged(dpath, dsnap, dlen);
    zt_assert_unchanged(rpath, rsnap, rlen);
    zr_close(d);
    zr_close(r);
    free(dpath);
    free(rpath);
}
END_TEST

START_TEST(write_through_a_read_only_handle_is_refused)
{
    char *dpath, *rpath;
    zr_store *d = dense_store(&dpath, 4), *r = ragged_store(&rpath, 4);
    zr_close(d);
    zr_close(r);
    size_t dlen, rlen;
    void *dsnap = zt_snapshot(dpath, &dlen), *rsnap = zt_snapshot(rpath, &rlen);
    ZR_OK_CALL(zr_open(&d, dpath, ZR_RDONLY));
    ZR_OK_CALL(zr_open(&r, rpath, ZR_RDONLY));
    ck_assert_int_eq(zr_writable(d), 0);
    void *data = zt_dense_gen("<i4", 12, SEED, 4, 1);
    ZR_FAIL_CALL(zr_append_dense(d, "<i4", shape3x4, 2, data, 1, NULL), ZR_EROFS);
    zt_ragged *more = zt_ragged_gen("<f4", SEED, 4, 2, 2, 4);
    ZR_FAIL_CALL(zr_append_ragged(r, "<f4", more->recs, 2, NULL), ZR_EROFS);
    ZR_FAIL_CALL(zr_sync(d), ZR_EROFS);
    ZR_FAIL_CALL(zr_sync(r), ZR_EROFS);
    ck_assert_uint_eq(zr_len(d), 4);
    ck_assert_uint_eq(zr_len(r), 4);
    zr_close(d);
    zr_close(r);
    zt_assert_unchanged(dpath, dsnap, dlen);
    zt_assert_unchanged(rpath, rsnap, rlen);
    zt_ragged_free(more);
    free(data);
    free(dpath);
    free(rpath);
}
END_TEST

/* A zstd_dict store is made with its dictionary or not at all; a
 * dictionary for any other codec is a mistake too. */
START_TEST(dictionary_codec_without_a_dictionary_is_refused)
{
    char *path = zt_path("d");
    zr_store *s = (zr_store *)&s;
    const uint8_t dict[64] = {1};
#define OPTS(...) {.size = sizeof(zr_create_opts), __VA_ARGS__}
    const zr_create_opts bad[] = {
        OPTS(.codec = ZR_CODEC_ZSTD_DICT),
        OPTS(.codec = ZR_CODEC_ZSTD_DICT, .dict = dict, .dict_len = 0),
        OPTS(.codec = ZR_CODEC_ZSTD_DICT, .dict = NULL, .dict_len = 64),
        OPTS(.codec = ZR_CODEC_RAW, .dict = dict, .dict_len = 64),
        OPTS(.codec = ZR_CODEC_ZSTD, .dict = dict, .dict_len = 64),
        OPTS(.codec = 3),
        OPTS(.codec = -1),
    };
#undef OPTS
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ZR_FAIL_CALL(zr_dense_create(&s, path, "<f4", NULL, 0, &bad[k]), ZR_EINVAL);
        ck_assert_ptr_null(s);
        ZR_FAIL_CALL(zr_ragged_create(&s, path, "<f4", &bad[k]), ZR_EINVAL);
        ck_assert_int_eq(zt_file_size(path), -1); /* no folder, no store */
    }
    free(path);
}
END_TEST

START_TEST(bad_creation_arguments_are_refused)
{
    char *path = zt_path("c");
    zr_store *s = (zr_store *)&s;
    const uint64_t zero_dim[] = {3, 0, 2};
    uint64_t many[ZR_MAX_NDIM + 1];
    for (int k = 0; k <= ZR_MAX_NDIM; k++)
        many[k] = 1;
    ZR_FAIL_CALL(zr_dense_create(&s, path, "<f3", NULL, 0, NULL), ZR_EINVAL);
    ck_assert_ptr_null(s);
    ZR_FAIL_CALL(zr_dense_create(&s, path, NULL, NULL, 0, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_ragged_create(&s, path, "float32", NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_dense_create(&s, path, "<f4", zero_dim, 3, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_dense_create(&s, path, "<f4", many, ZR_MAX_NDIM + 1, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_dense_create(&s, path, "<f4", NULL, 2, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_dense_create(&s, NULL, "<f4", NULL, 0, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_dense_create(NULL, path, "<f4", NULL, 0, NULL), ZR_EINVAL);
    ck_assert_int_eq(zt_file_size(path), -1);
    /* Every failing constructor leaves *out NULL, whatever it held, and
     * whichever argument it refuses first. */
    const char *dt = "<f4";
    zr_store *const junk = (zr_store *)&s;
    s = junk;
    ZR_FAIL_CALL(zr_open(&s, path, 7), ZR_EINVAL);
    ck_assert_ptr_null(s);
    s = junk;
    ZR_FAIL_CALL(zr_open(&s, NULL, ZR_RDONLY), ZR_EINVAL);
    ck_assert_ptr_null(s);
    s = junk;
    ZR_FAIL_CALL(zr_dense_create(&s, NULL, dt, NULL, 0, NULL), ZR_EINVAL);
    ck_assert_ptr_null(s);
    s = junk;
    ZR_FAIL_CALL(zr_ragged_create(&s, NULL, dt, NULL), ZR_EINVAL);
    ck_assert_ptr_null(s);
    zr_loader *ld = (zr_loader *)&s;
    ZR_FAIL_CALL(zr_loader_create(&ld, NULL, NULL, 0, NULL), ZR_EINVAL);
    ck_assert_ptr_null(ld);
    zr_batch *b = (zr_batch *)&s;
    ZR_FAIL_CALL(zr_loader_next(NULL, &b), ZR_EINVAL);
    ck_assert_ptr_null(b);
    zr_verify_report *rep = (zr_verify_report *)&s;
    ZR_FAIL_CALL(zr_verify(NULL, &rep), ZR_EINVAL);
    ck_assert_ptr_null(rep);
    zr_ragged_dense *d = (zr_ragged_dense *)&s;
    ZR_FAIL_CALL(zr_gather_ragged_dense(NULL, NULL, 0, ZR_PADDED, 0, NULL, &d), ZR_EINVAL);
    ck_assert_ptr_null(d);
    free(path);
}
END_TEST

START_TEST(strerror_names_every_code)
{
    static const struct {
        int code;
        const char *name;
    } codes[] = {
        {ZR_OK, "ZR_OK"},           {ZR_EINVAL, "ZR_EINVAL"},   {ZR_ENOMEM, "ZR_ENOMEM"},
        {ZR_EIO, "ZR_EIO"},         {ZR_ECORRUPT, "ZR_ECORRUPT"}, {ZR_ENOTSTORE, "ZR_ENOTSTORE"},
        {ZR_EEXIST, "ZR_EEXIST"},   {ZR_EBUSY, "ZR_EBUSY"},     {ZR_ERANGE, "ZR_ERANGE"},
        {ZR_EDTYPE, "ZR_EDTYPE"},   {ZR_ESHAPE, "ZR_ESHAPE"},   {ZR_ETOOBIG, "ZR_ETOOBIG"},
        {ZR_EEMPTY, "ZR_EEMPTY"},   {ZR_EROFS, "ZR_EROFS"},     {ZR_EKIND, "ZR_EKIND"},
        {ZR_ECODEC, "ZR_ECODEC"},   {ZR_ENOSPC, "ZR_ENOSPC"},   {ZR_ELIMIT, "ZR_ELIMIT"},
        {ZR_EACCESS, "ZR_EACCESS"},
    };
    const size_t n = sizeof codes / sizeof codes[0];
    for (size_t k = 0; k < n; k++) {
        /* Pinned values: the failure codes count down from -30700 in this
         * order, outside the negative errno values (-1 to -4095). */
        ck_assert_int_eq(codes[k].code, k == 0 ? 0 : -30700 - (int)(k - 1));
        ck_assert(codes[k].code == 0 || codes[k].code < -4095);
        const char *text = zr_strerror(codes[k].code);
        size_t len = strlen(codes[k].name);
        ck_assert_msg(strncmp(text, codes[k].name, len) == 0 && text[len] == ':' &&
                          strlen(text) > len + 2,
                      "zr_strerror(%d) is '%s'", codes[k].code, text);
    }
    const int unknown[] = {1, -1, -17, -1000, -30699, -30718, 12345};
    for (size_t k = 0; k < sizeof unknown / sizeof unknown[0]; k++) {
        const char *text = zr_strerror(unknown[k]);
        ck_assert_ptr_nonnull(text);
        for (size_t j = 0; j < n; j++)
            ck_assert_str_ne(text, zr_strerror(codes[j].code));
    }
}
END_TEST

static void *fail_in_thread(void *arg)
{
    zr_store *s;
    int rc = zr_open(&s, arg, ZR_RDONLY);
    static char copy[512];
    snprintf(copy, sizeof copy, "%d %d %s", rc, zr_last_error_code(), zr_last_error());
    return copy;
}

/* The message and its code belong to the thread whose call failed. */
START_TEST(last_error_is_kept_per_thread)
{
    char *path = zt_path("missing-store");
    zr_store *s;
    ZR_FAIL_CALL(zr_dense_create(&s, path, "<f3", NULL, 0, NULL), ZR_EINVAL);
    char mine[512];
    snprintf(mine, sizeof mine, "%s", zr_last_error());
    ck_assert_ptr_nonnull(strstr(mine, "<f3"));
    pthread_t t;
    char *theirs;
    ck_assert_int_eq(pthread_create(&t, NULL, fail_in_thread, path), 0);
    ck_assert_int_eq(pthread_join(t, (void **)&theirs), 0);
    char want[64];
    snprintf(want, sizeof want, "%d %d ", ZR_ENOTSTORE, ZR_ENOTSTORE);
    ck_assert_ptr_eq(strstr(theirs, want), theirs);
    ck_assert_ptr_nonnull(strstr(theirs, path));
    ck_assert_str_eq(zr_last_error(), mine);
    ck_assert_int_eq(zr_last_error_code(), ZR_EINVAL);
    free(path);
}
END_TEST

/* A message says what went wrong without the code's name, which
 * zr_last_error_code gives, and a success leaves both as they were. */
START_TEST(last_error_has_no_code_prefix)
{
    char *path = zt_path("store");
    zr_store *s = NULL;
    const uint64_t idx = 3;
    uint8_t rec;
    ZR_FAIL_CALL(zr_open(&s, path, ZR_RDONLY), ZR_ENOTSTORE);
    ck_assert_int_eq(zr_last_error_code(), ZR_ENOTSTORE);
    ck_assert_ptr_eq(strstr(zr_last_error(), path), zr_last_error());
    ZR_OK_CALL(zr_dense_create(&s, path, "|u1", NULL, 0, NULL));
    ck_assert_int_eq(zr_last_error_code(), ZR_ENOTSTORE);
    ZR_FAIL_CALL(zr_gather_dense(s, &idx, 1, &rec), ZR_ERANGE);
    ck_assert_int_eq(zr_last_error_code(), ZR_ERANGE);
    ZR_FAIL_CALL(zr_append_dense(s, "<f4", NULL, 0, &rec, 1, NULL), ZR_EDTYPE);
    ck_assert_int_eq(zr_last_error_code(), ZR_EDTYPE);
    ck_assert_msg(strncmp(zr_last_error(), "ZR_", 3) != 0 && !strstr(zr_last_error(), "ZR_EDTYPE"),
                  "message '%s'", zr_last_error());
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "<f4"));
    zr_close(s);
    free(path);
}
END_TEST

Suite *suite_badcall(void)
{
    Suite *s = suite_create("badcall");
    TCase *tc = tcase_create("badcall");
    tcase_add_checked_fixture(tc, zt_setup, zt_teardown);
    tcase_add_test(tc, append_with_the_wrong_dtype_is_refused);
    tcase_add_test(tc, append_with_the_wrong_item_shape_is_refused);
    tcase_add_test(tc, zero_byte_ragged_record_is_refused);
    tcase_add_test(tc, record_over_2_gib_is_refused);
    tcase_add_test(tc, index_out_of_range_is_refused);
    tcase_add_test(tc, create_over_an_existing_store_is_refused);
    tcase_add_test(tc, create_needs_a_folder_of_its_own);
    tcase_add_test(tc, null_handles_and_records_are_refused);
    tcase_add_test(tc, push_and_pull_arguments_are_refused);
    tcase_add_test(tc, open_of_a_folder_that_is_not_a_store_is_refused);
    tcase_add_test(tc, open_of_an_unfinished_store_is_refused);
    tcase_add_test(tc, open_of_a_missing_path_is_refused);
    tcase_add_test(tc, call_for_the_other_kind_is_refused);
    tcase_add_test(tc, write_through_a_read_only_handle_is_refused);
    tcase_add_test(tc, dictionary_codec_without_a_dictionary_is_refused);
    tcase_add_test(tc, bad_creation_arguments_are_refused);
    tcase_add_test(tc, strerror_names_every_code);
    tcase_add_test(tc, last_error_is_kept_per_thread);
    tcase_add_test(tc, last_error_has_no_code_prefix);
    suite_add_tcase(s, tc);
    return s;
}

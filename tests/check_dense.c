/*
 * check_dense.c: the Dense contract end to end: every dtype kind, scalar
 * and multi-dimensional items, gathers in any order, reopen, and the
 * layout of records across chunks and record-table segments, read back
 * from the files themselves.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "tests/helpers.h"
#include "tests/records.h"
#include "tests/suites.h"

/* Every dtype kind, with the item size NumPy gives it. */
static const struct {
    const char *dtype;
    uint64_t itemsize;
} dtypes[] = {
    {"|b1", 1}, {"|i1", 1}, {"|u1", 1},  {"<i2", 2},  {"<u2", 2}, {"<i4", 4}, {"<u4", 4},
    {"<i8", 8}, {"<u8", 8}, {">i4", 4},  {">u8", 8},  {"<f2", 2}, {"<f4", 4}, {"<f8", 8},
    {">f8", 8}, {"<c8", 8}, {"<c16", 16}, {"|S7", 7}, {"|V5", 5}, {"<U3", 12},
};
#define NDTYPES (sizeof dtypes / sizeof dtypes[0])

START_TEST(dense_round_trips_every_dtype)
{
    const char *dt = dtypes[_i].dtype;
    const uint64_t shape[] = {3, 5};
    char *path = zt_path("s");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, dt, shape, 2, NULL));
    zt_append_dense_gen(s, 11, 20);
    zt_append_dense_gen(s, 11, 17);
    zt_check_dense_all(s, 11);
    zr_close(s);

    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    ck_assert_int_eq(zr_kind(s), ZR_DENSE);
    ck_assert_str_eq(zr_dtype(s), dt);
    ck_assert_uint_eq(zr_itemsize(s), dtypes[_i].itemsize);
    ck_assert_uint_eq(zr_record_width(s), dtypes[_i].itemsize * 15);
    ck_assert_uint_eq(zr_len(s), 37);
    zt_check_dense_all(s, 11);
    zr_close(s);
    free(path);
}
END_TEST

START_TEST(dense_scalar_items_round_trip)
{
    char *path = zt_path("scalar");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<f8", NULL, 0, NULL));
    zt_append_dense_gen(s, 5, 100);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    uint32_t ndim = 99;
    zr_item_shape(s, &ndim);
    ck_assert_uint_eq(ndim, 0);
    ck_assert_uint_eq(zr_record_width(s), 8);
    zt_check_dense_all(s, 5);
    zr_close(s);
    /* A scalar record is one item: the chunk is the 100 values in order. */
    char *chunk = zt_join(path, "0.chunk");
    size_t len;
    uint8_t *bytes = zt_slurp(chunk, &len);
    void *want = zt_dense_gen("<f8", 1, 5, 0, 100);
    ck_assert_uint_eq(len, 800);
    ck_assert_mem_eq(bytes, want, 800);
    free(want);
    free(bytes);
    free(chunk);
    free(path);
}
END_TEST

START_TEST(dense_multidimensional_items_round_trip)
{
    const uint64_t shape[] = {2, 3, 4, 5};
    char *path = zt_path("nd");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<i2", shape, 4, NULL));
    zt_append_dense_gen(s, 9, 33);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    uint32_t ndim;
    const uint64_t *got = zr_item_shape(s, &ndim);
    ck_assert_uint_eq(ndim, 4);
    ck_assert_mem_eq(got, shape, sizeof shape);
    ck_assert_uint_eq(zr_record_width(s), 2 * 2 * 3 * 4 * 5);
    zt_check_dense_all(s, 9);
    zr_close(s);
    free(path);
}
END_TEST

START_TEST(gather_accepts_unsorted_and_repeated_indices)
{
    const uint64_t shape[] = {7};
    char *path = zt_path("s");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<u4", shape, 1, NULL));
    zt_append_dense_gen(s, 3, 50);
    const uint64_t idx[] = {49, 0, 17, 17, 3, 49, 0, 25, 25, 25, 1, 48, 2};
    zt_check_dense_idx(s, 3, idx, sizeof idx / sizeof idx[0]);
    free(path);
    zr_close(s);
}
END_TEST

/* A batch large enough to be split over the pool's threads, drawn with
 * replacement in a scrambled order. */
START_TEST(gather_large_random_batch_with_repeats)
{
    const uint64_t shape[] = {64};
    char *path = zt_path("s");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<f4", shape, 1, NULL));
    zt_append_dense_gen(s, 21, 1000);
    uint64_t *idx = malloc(4000 * sizeof *idx);
    ck_assert_ptr_nonnull(idx);
    for (uint64_t k = 0; k < 4000; k++)
        idx[k] = (k * 7919 + 13) % 1000;
    zt_check_dense_idx(s, 21, idx, 4000);
    free(idx);
    zr_close(s);
    free(path);
}
END_TEST

START_TEST(gather_single_records)
{
    const uint64_t shape[] = {3, 3};
    char *path = zt_path("s");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<c8", shape, 2, NULL));
    zt_append_dense_gen(s, 4, 30);
    for (uint64_t i = 30; i-- > 0;)
        zt_check_dense_idx(s, 4, &i, 1);
    zr_close(s);
    free(path);
}
END_TEST

START_TEST(gather_of_no_records_touches_nothing)
{
    const uint64_t shape[] = {4};
    char *path = zt_path("s");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "|u1", shape, 1, NULL));
    ZR_OK_CALL(zr_gather_dense(s, NULL, 0, NULL)); /* an empty store, an empty batch */
    zt_append_dense_gen(s, 1, 5);
    uint8_t dst[16];
    memset(dst, 0x77, sizeof dst);
    const uint64_t idx[] = {2};
    ZR_OK_CALL(zr_gather_dense(s, idx, 0, dst));
    for (size_t k = 0; k < sizeof dst; k++)
        ck_assert_uint_eq(dst[k], 0x77);
    ZR_OK_CALL(zr_gather_dense(s, NULL, 0, NULL));
    zr_close(s);
    free(path);
}
END_TEST

START_TEST(append_of_no_records_commits_nothing)
{
    const uint64_t shape[] = {4};
    char *path = zt_path("s");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<i4", shape, 1, NULL));
    zt_append_dense_gen(s, 1, 3);
    size_t len;
    void *snap = zt_snapshot(path, &len);
    ZR_OK_CALL(zr_append_dense(s, "<i4", shape, 1, NULL, 0, NULL));
    ck_assert_uint_eq(zr_len(s), 3);
    zt_assert_unchanged(path, snap, len);
    zr_close(s);
    free(path);
}
END_TEST

START_TEST(reopen_sees_exactly_what_was_committed)
{
    const uint64_t shape[] = {10};
    char *path = zt_path("s");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<i8", shape, 1, NULL));
    zt_append_dense_gen(s, 8, 1);
    zt_append_dense_gen(s, 8, 14);
    zt_append_dense_gen(s, 8, 100);
    ZR_OK_CALL(zr_sync(s));
    zr_close(s);

    /* The header on disk says what was committed, in its own bytes. */
    zt_meta m = zt_meta_read(path);
    ck_assert_uint_eq(m.length, 115);
    ck_assert_uint_eq(m.tail_chunk, 0);
    ck_assert_uint_eq(m.tail_offset, 115 * 80);
    ck_assert_uint_eq(m.codec, ZR_CODEC_RAW);

    ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
    ck_assert_uint_eq(zr_len(s), 115);
    zt_check_dense_all(s, 8);
    zt_append_dense_gen(s, 8, 7);
    zr_close(s);

    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    ck_assert_uint_eq(zr_len(s), 122);
    zt_check_dense_all(s, 8);
    zr_close(s);
    char *chunk = zt_join(path, "0.chunk");
    ck_assert_int_eq(zt_file_size(chunk), 122 * 80);
    free(chunk);
    free(path);
}
END_TEST

START_TEST(failed_append_leaves_length_unchanged)
{
    const uint64_t shape[] = {6};
    char *path = zt_path("s");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<f4", shape, 1, NULL));
    zt_append_dense_gen(s, 2, 10);
    float junk[12] = {0};
    ZR_FAIL_CALL(zr_append_dense(s, "<f8", shape, 1, junk, 1, NULL), ZR_EDTYPE);
    ck_assert_uint_eq(zr_len(s), 10);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
    ck_assert_uint_eq(zr_len(s), 10);
    zt_append_dense_gen(s, 2, 5);
    zt_check_dense_all(s, 2);
    zr_close(s);
    free(path);
}
END_TEST

/* Check every entry of a raw Dense store against the layout it must have:
 * floor(cap / width) records fill a chunk, the rest of the chunk stays
 * unused, and the entries sit in segments of seg_entries. */
static void check_dense_layout(const char *path, uint64_t n, uint64_t width, uint64_t cap,
                               uint64_t seg_entries)
{
    uint64_t per = cap / width;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t seg, entry;
        zt_loc_where(i, seg_entries, &seg, &entry);
        zt_loc l = zt_loc_read(path, seg, entry);
        ck_assert_uint_eq(l.chunk, i / per);
        ck_assert_uint_eq(l.offset, (i % per) * width);
        ck_assert_uint_eq(l.phys, width);
        ck_assert_uint_eq(l.logic, width);
    }
    /* A frontier at the end of a full chunk is offset 0 of the next one,
     * whose file exists empty (R7). */
    bool exact = per * width == cap && n % per == 0;
    uint64_t nchunks = (n + per - 1) / per + exact;
    for (uint64_t c = 0; c < nchunks + 1; c++) {
        char name[32];
        snprintf(name, sizeof name, "%llu.chunk", (unsigned long long)c);
        char *chunk = zt_join(path, name);
        int64_t want = c + 1 < nchunks ? (int64_t)(per * width)
                       : c + 1 == nchunks ? (int64_t)((n - c * per) * width)
                                          : -1;
        ck_assert_int_eq(zt_file_size(chunk), want);
        free(chunk);
    }
    zt_meta m = zt_meta_read(path);
    ck_assert_uint_eq(m.length, n);
    ck_assert_uint_eq(m.tail_chunk, nchunks - 1);
    ck_assert_uint_eq(m.tail_offset, (n - (nchunks - 1) * per) * width);
}

START_TEST(dense_records_roll_over_to_the_next_chunk)
{
    /* 96-byte records in 1000-byte chunks: ten fit, 40 bytes stay empty. */
    zr_testing_set_geometry(1000, 1024);
    const uint64_t shape[] = {24};
    char *path = zt_path("s");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<u4", shape, 1, NULL));
    zt_append_dense_gen(s, 6, 7);
    zt_append_dense_gen(s, 6, 1);
    zt_append_dense_gen(s, 6, 27);
    zt_check_dense_all(s, 6);
    zr_close(s);
    check_dense_layout(path, 35, 96, 1000, 1024);

    ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
    zt_check_dense_all(s, 6);
    zt_append_dense_gen(s, 6, 6);
    zr_close(s);
    check_dense_layout(path, 41, 96, 1000, 1024);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zt_check_dense_all(s, 6);
    zr_close(s);
    free(path);
}
END_TEST

START_TEST(dense_record_that_fills_a_chunk_exactly_stays_in_it)
{
    zr_testing_set_geometry(960, 1024);
    const uint64_t shape[] = {24};
    char *path = zt_path("s");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<u4", shape, 1, NULL));
    zt_append_dense_gen(s, 7, 10); /* exactly one full chunk */
    zr_close(s);
    check_dense_layout(path, 10, 96, 960, 1024);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
    zt_append_dense_gen(s, 7, 21);
    zt_check_dense_all(s, 7);
    zr_close(s);
    check_dense_layout(path, 31, 96, 960, 1024);
    free(path);
}
END_TEST

START_TEST(record_table_rolls_over_to_new_segments)
{
    zr_testing_set_geometry(0, 8);
    const uint64_t shape[] = {5};
    char *path = zt_path("s");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<i2", shape, 1, NULL));
    zt_append_dense_gen(s, 12, 5);
    zt_append_dense_gen(s, 12, 20);
    zt_append_dense_gen(s, 12, 3); /* 28 entries: segment 3 holds four */
    zr_close(s);
    check_dense_layout(path, 28, 10, (uint64_t)1 << 32, 8);
    for (uint64_t g = 0; g < 4; g++) {
        char name[16];
        snprintf(name, sizeof name, "%llu.loc", (unsigned long long)g);
        char *seg = zt_join(path, name);
        ck_assert_int_eq(zt_file_size(seg), g < 3 ? 128 : 4 * 16);
        free(seg);
    }
    char *seg4 = zt_join(path, "4.loc");
    ck_assert_int_eq(zt_file_size(seg4), -1);

    ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
    zt_check_dense_all(s, 12);
    zt_append_dense_gen(s, 12, 4);
    ck_assert_int_eq(zt_file_size(seg4), -1); /* 32 entries fill segments 0..3 */
    zt_append_dense_gen(s, 12, 1);
    ck_assert_int_eq(zt_file_size(seg4), 16);
    const uint64_t across[] = {7, 8, 15, 16, 31, 32, 0, 24};
    zt_check_dense_idx(s, 12, across, 8);
    zr_close(s);
    check_dense_layout(path, 33, 10, (uint64_t)1 << 32, 8);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zt_check_dense_all(s, 12);
    zr_close(s);
    free(seg4);
    free(path);
}
END_TEST

START_TEST(chunks_and_segments_roll_over_together)
{
    zr_testing_set_geometry(4096, 16);
    const uint64_t shape[] = {4, 25};
    char *path = zt_path("s");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<f2", shape, 2, NULL));
    for (int b = 0; b < 6; b++)
        zt_append_dense_gen(s, 30, 37 + (uint64_t)b * 11);
    zt_check_dense_all(s, 30);
    uint64_t n = zr_len(s);
    zr_close(s);
    check_dense_layout(path, n, 200, 4096, 16);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zt_check_dense_all(s, 30);
    zr_close(s);
    free(path);
}
END_TEST

/* zr_record_span points at exactly the bytes a gather copies, for Dense
 * and Ragged raw stores, checks its index, and refuses compressed stores
 * (there is nothing to point at). */
START_TEST(record_span_points_at_the_bytes_a_gather_copies)
{
    const uint64_t shape[] = {4, 6};
    char *dpath = zt_path("dspan"), *rpath = zt_path("rspan"), *zpath = zt_path("zspan");
    zr_store *d, *r, *z;
    ZR_OK_CALL(zr_dense_create(&d, dpath, "<i4", shape, 2, NULL));
    zt_append_dense_gen(d, 21, 50);
    ZR_OK_CALL(zr_ragged_create(&r, rpath, "<u2", NULL));
    zt_append_ragged_gen(r, 22, 40, 3, 9);
    zr_create_opts zopts = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD};
    ZR_OK_CALL(zr_dense_create(&z, zpath, "<i4", shape, 2, &zopts));
    zt_append_dense_gen(z, 23, 5);

    uint8_t want[4 * 6 * 4];
    for (uint64_t i = 0; i < 50; i++) {
        const void *p;
        uint64_t size;
        ZR_OK_CALL(zr_record_span(d, i, &p, &size));
        ck_assert_uint_eq(size, sizeof want);
        ZR_OK_CALL(zr_gather_dense(d, &i, 1, want));
        ck_assert_mem_eq(p, want, sizeof want);
        /* The extent names the same bytes in the chunk file. */
        int fd;
        uint64_t off, esize;
        uint8_t got[sizeof want];
        ZR_OK_CALL(zr_record_extent(d, i, &fd, &off, &esize));
        ck_assert_uint_eq(esize, sizeof want);
        ck_assert_int_eq(pread(fd, got, sizeof got, (off_t)off), (ssize_t)sizeof got);
        ck_assert_mem_eq(got, want, sizeof want);
    }
    for (uint64_t i = 0; i < 40; i++) {
        const void *p;
        uint64_t size, stored;
        const uint64_t zero = 0;
        ZR_OK_CALL(zr_record_span(r, i, &p, &size));
        ZR_OK_CALL(zr_ragged_sizes(r, &i, 1, &stored));
        ck_assert_uint_eq(size, stored);
        uint8_t *buf = malloc(stored);
        ZR_OK_CALL(zr_gather_ragged(r, &i, 1, buf, &zero));
        ck_assert_mem_eq(p, buf, stored);
        free(buf);
    }
    const void *p = NULL;
    uint64_t size = 0;
    ck_assert_int_eq(zr_record_span(d, 50, &p, &size), ZR_ERANGE);
    ck_assert_int_eq(zr_record_span(z, 0, &p, &size), ZR_EINVAL);
    int fd;
    uint64_t off;
    ck_assert_int_eq(zr_record_extent(z, 0, &fd, &off, &size), ZR_EINVAL);
    ck_assert_int_eq(zr_record_extent(d, 50, &fd, &off, &size), ZR_ERANGE);
    ck_assert_int_eq(zr_record_span(d, 0, NULL, &size), ZR_EINVAL);
    zr_close(d);
    zr_close(r);
    zr_close(z);
    free(dpath);
    free(rpath);
    free(zpath);
}
END_TEST

/* A raw batch of several MiB is cut into blocks for the pool's threads;
 * every record still lands in its place, in request order. */
START_TEST(large_raw_batches_split_across_threads_keep_request_order)
{
    const uint64_t shape[] = {2048};
    char *path = zt_path("big");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<i4", shape, 1, NULL));
    zt_append_dense_gen(s, 31, 700);
    uint64_t *idx = malloc(1500 * sizeof *idx);
    for (uint64_t k = 0; k < 1500; k++)
        idx[k] = (k * 409 + 11) % 700;
    int rc = 0;
    ck_assert(zt_dense_matches(s, 31, idx, 1500, &rc));
    ck_assert_int_eq(rc, 0);
    free(idx);
    zr_close(s);
    free(path);
}
END_TEST

/* How many leading records gathers know to lie in the layout. */
static uint64_t known_layout(zr_store *s)
{
    return atomic_load(&s->laid_out);
}

/* Gather records 0..n-1 and compare record i with record ids[i] of the
 * generator stream seed (<u4 items of nelem elements). */
static void check_dense_ids(zr_store *s, uint64_t seed, uint64_t nelem, const uint64_t *ids,
                            uint64_t n)
{
    uint64_t width = 4 * nelem;
    uint64_t *idx = malloc(n * sizeof *idx);
    uint8_t *got = malloc(n * width);
    for (uint64_t i = 0; i < n; i++)
        idx[i] = i;
    ZR_OK_CALL(zr_gather_dense(s, idx, n, got));
    for (uint64_t i = 0; i < n; i++) {
        void *want = zt_dense_gen("<u4", nelem, seed, ids[i], 1);
        ck_assert_msg(memcmp(got + i * width, want, width) == 0,
                      "record %llu is not record %llu of the stream", (unsigned long long)i,
                      (unsigned long long)ids[i]);
        free(want);
    }
    free(got);
    free(idx);
}

/* A raw Dense store written only by appends has every record where the
 * chunk geometry puts it, and gathers use that instead of reading each
 * entry: the layout must agree with where appends put records, follow a
 * delete, and end where the entries say otherwise. */
START_TEST(gathers_know_the_layout_of_appended_records_and_follow_deletes)
{
    /* 96-byte records in 1000-byte chunks: ten fit, 40 bytes stay empty. */
    zr_testing_set_geometry(1000, 16);
    const uint64_t shape[] = {24};
    char *path = zt_path("s");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<u4", shape, 1, NULL));
    zt_append_dense_gen(s, 9, 37);
    zt_append_dense_gen(s, 9, 1);
    zt_append_dense_gen(s, 9, 62);
    uint64_t ids[100];
    for (uint64_t i = 0; i < 100; i++)
        ids[i] = i;
    check_dense_ids(s, 9, 24, ids, 100);
    ck_assert_uint_eq(known_layout(s), 100);

    /* Descending 99, 50, 3: 99 is last and goes; 50 takes 98, 3 takes 97. */
    uint64_t del[] = {3, 50, 99, 3};
    ZR_OK_CALL(zr_delete(s, del, 4));
    ids[50] = 98;
    ids[3] = 97;
    check_dense_ids(s, 9, 24, ids, 97);
    ck_assert_uint_eq(known_layout(s), 3);

    /* Compaction packs the records in physical order: index 3 is then
     * still out of place, and every gather stays right. */
    ZR_OK_CALL(zr_compact(s, NULL));
    check_dense_ids(s, 9, 24, ids, 97);
    ck_assert_uint_eq(known_layout(s), 3);
    zt_check_dense_idx(s, 9, (const uint64_t[]){0, 1, 2}, 3);
    zr_close(s);
    free(path);
}
END_TEST

/* An entry that names another record's place is followed, even where the
 * layout would put the record elsewhere: records 5 and 6 swap entries. */
START_TEST(gathers_follow_entries_that_leave_the_layout)
{
    const uint64_t shape[] = {24};
    char *path = zt_path("s");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<u4", shape, 1, NULL));
    zt_append_dense_gen(s, 4, 20);
    zr_close(s);
    char *seg = zt_join(path, "0.loc");
    size_t len;
    uint8_t *t = zt_slurp(seg, &len);
    ck_assert_uint_eq(len, 20 * 16);
    zt_patch(seg, 5 * 16, t + 6 * 16, 16);
    zt_patch(seg, 6 * 16, t + 5 * 16, 16);
    free(t);
    free(seg);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    uint64_t ids[20];
    for (uint64_t i = 0; i < 20; i++)
        ids[i] = i;
    ids[5] = 6;
    ids[6] = 5;
    check_dense_ids(s, 4, 24, ids, 20);
    check_dense_ids(s, 4, 24, ids, 20);
    ck_assert_uint_eq(known_layout(s), 5);
    zr_close(s);
    free(path);
}
END_TEST

/* A store larger than what one gather checks of the layout: batches mix
 * records below and above what is known, and all come out right. */
START_TEST(gathers_mix_known_and_unknown_layout)
{
    const uint64_t shape[] = {2};
    char *path = zt_path("s");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<u4", shape, 1, NULL));
    zt_append_dense_gen(s, 5, 50000);
    uint64_t idx[512];
    for (int round = 0; round < 6; round++) {
        for (uint64_t k = 0; k < 512; k++)
            idx[k] = (k * 7919 + (uint64_t)round * 104729) % 50000;
        zt_check_dense_idx(s, 5, idx, 512);
        ck_assert_uint_gt(known_layout(s), 0);
        ck_assert_uint_le(known_layout(s), 50000);
    }
    ck_assert_uint_eq(known_layout(s), 50000);
    zr_close(s);
    free(path);
}
END_TEST

Suite *suite_dense(void)
{
    Suite *s = suite_create("dense");
    TCase *tc = tcase_create("dense");
    tcase_add_checked_fixture(tc, zt_setup, zt_teardown);
    tcase_add_loop_test(tc, dense_round_trips_every_dtype, 0, NDTYPES);
    tcase_add_test(tc, dense_scalar_items_round_trip);
    tcase_add_test(tc, dense_multidimensional_items_round_trip);
    tcase_add_test(tc, gather_accepts_unsorted_and_repeated_indices);
    tcase_add_test(tc, gather_large_random_batch_with_repeats);
    tcase_add_test(tc, gather_single_records);
    tcase_add_test(tc, gather_of_no_records_touches_nothing);
    tcase_add_test(tc, append_of_no_records_commits_nothing);
    tcase_add_test(tc, reopen_sees_exactly_what_was_committed);
    tcase_add_test(tc, failed_append_leaves_length_unchanged);
    tcase_add_test(tc, dense_records_roll_over_to_the_next_chunk);
    tcase_add_test(tc, dense_record_that_fills_a_chunk_exactly_stays_in_it);
    tcase_add_test(tc, record_table_rolls_over_to_new_segments);
    tcase_add_test(tc, chunks_and_segments_roll_over_together);
    tcase_add_test(tc, record_span_points_at_the_bytes_a_gather_copies);
    tcase_add_test(tc, large_raw_batches_split_across_threads_keep_request_order);
    tcase_add_test(tc, gathers_know_the_layout_of_appended_records_and_follow_deletes);
    tcase_add_test(tc, gathers_follow_entries_that_leave_the_layout);
    tcase_add_test(tc, gathers_mix_known_and_unknown_layout);
    suite_add_tcase(s, tc);
    return s;
}

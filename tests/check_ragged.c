/*
 * check_ragged.c: the Ragged contract end to end: records of their own
 * shapes (scalar ones included) in every dtype kind, the shape prefix as
 * it lies in the chunk, sizes, gathers at caller-chosen offsets, the
 * allocating gather and its views, chunk rollover of records of varying
 * size against a layout computed here, and batches made dense (padded
 * and packed) against the records they came from.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "engine.h"
#include "tests/helpers.h"
#include "tests/records.h"
#include "tests/suites.h"

static const char *const dtypes[] = {
    "|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", ">i2",
    "<f2", "<f4", "<f8", ">f4", "<c8", "<c16", ">c16", "|S3", "<U2",
};
#define NDTYPES (sizeof dtypes / sizeof dtypes[0])

START_TEST(ragged_round_trips_every_dtype)
{
    const char *dt = dtypes[_i];
    char *path = zt_path("r");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, dt, NULL));
    zt_append_ragged_gen(s, 40, 25, 3, 6);
    zt_append_ragged_gen(s, 40, 15, 3, 6);
    zt_check_ragged_all(s, 40, 3, 6);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    ck_assert_int_eq(zr_kind(s), ZR_RAGGED);
    ck_assert_str_eq(zr_dtype(s), dt);
    ck_assert_uint_eq(zr_itemsize(s), zt_itemsize(dt));
    ck_assert_uint_eq(zr_record_width(s), 0);
    uint32_t ndim = 7;
    ck_assert_ptr_null(zr_item_shape(s, &ndim));
    ck_assert_uint_eq(ndim, 0);
    ck_assert_uint_eq(zr_len(s), 40);
    zt_check_ragged_all(s, 40, 3, 6);
    zr_close(s);
    free(path);
}
END_TEST

/* Scalar records keep their empty shape: each is an 8-byte prefix (ndim
 * 0) and one item, back to back in the chunk. */
START_TEST(ragged_scalar_records_round_trip)
{
    char *path = zt_path("r");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<i4", NULL));
    zt_append_ragged_gen(s, 2, 64, 0, 1);
    uint64_t idx[64], sizes[64];
    for (uint64_t k = 0; k < 64; k++)
        idx[k] = 63 - k;
    ZR_OK_CALL(zr_ragged_sizes(s, idx, 64, sizes));
    for (uint64_t k = 0; k < 64; k++)
        ck_assert_uint_eq(sizes[k], 12);
    zt_check_ragged_idx(s, 2, idx, 64, 0, 1);
    zr_close(s);

    char *chunk = zt_join(path, "0.chunk");
    size_t len;
    uint8_t *bytes = zt_slurp(chunk, &len);
    ck_assert_uint_eq(len, 64 * 12);
    for (uint64_t k = 0; k < 64; k++) {
        uint8_t want[4];
        zt_fill(want, "<i4", 1, 2, k);
        ck_assert_uint_eq(zt_le64(bytes + 12 * k), 0);
        ck_assert_mem_eq(bytes + 12 * k + 8, want, 4);
    }
    free(bytes);
    free(chunk);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zt_check_ragged_all(s, 2, 0, 1);
    zr_close(s);
    free(path);
}
END_TEST

/* The bytes of a raw Ragged store, read from the files: each entry points
 * at [u64 ndim][u64 dims][payload], little-endian, records in order. */
START_TEST(ragged_records_lie_on_disk_with_their_shape_prefix)
{
    char *path = zt_path("r");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, ">u2", NULL));
    zt_append_ragged_gen(s, 77, 30, 4, 5);
    zr_close(s);
    char *chunk = zt_join(path, "0.chunk");
    size_t len;
    uint8_t *bytes = zt_slurp(chunk, &len);
    zt_ragged *want = zt_ragged_gen(">u2", 77, 0, 30, 4, 5);
    uint64_t off = 0;
    for (uint64_t i = 0; i < 30; i++) {
        uint32_t ndim = want->recs[i].ndim;
        uint64_t pre = 8 * (1 + (uint64_t)ndim), size = pre + want->nbytes[i];
        zt_loc l = zt_loc_read(path, 0, i);
        ck_assert_uint_eq(l.chunk, 0);
        ck_assert_uint_eq(l.offset, off);
        ck_assert_uint_eq(l.phys, size);
        ck_assert_uint_eq(l.logic, size);
        ck_assert_uint_le(off + size, len);
        ck_assert_uint_eq(zt_le64(bytes + off), ndim);
        for (uint32_t d = 0; d < ndim; d++)
            ck_assert_uint_eq(zt_le64(bytes + off + 8 + 8 * d), want->shapes[i][d]);
        ck_assert_mem_eq(bytes + off + pre, want->data[i], want->nbytes[i]);
        off += size;
    }
    ck_assert_uint_eq(off, len);
    zt_ragged_free(want);
    free(bytes);
    free(chunk);
    free(path);
}
END_TEST

START_TEST(ragged_gather_accepts_unsorted_and_repeated_indices)
{
    char *path = zt_path("r");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<f4", NULL));
    zt_append_ragged_gen(s, 5, 60, 3, 9);
    const uint64_t idx[] = {59, 0, 30, 30, 30, 2, 59, 1, 17, 16, 15, 0};
    zt_check_ragged_idx(s, 5, idx, sizeof idx / sizeof idx[0], 3, 9);
    uint64_t *big = malloc(3000 * sizeof *big);
    ck_assert_ptr_nonnull(big);
    for (uint64_t k = 0; k < 3000; k++)
        big[k] = (k * 104729 + 7) % 60;
    zt_check_ragged_idx(s, 5, big, 3000, 3, 9);
    free(big);
    zr_close(s);
    free(path);
}
END_TEST

START_TEST(ragged_gather_single_records)
{
    char *path = zt_path("r");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<i8", NULL));
    zt_append_ragged_gen(s, 6, 20, 2, 4);
    for (uint64_t i = 0; i < 20; i++)
        zt_check_ragged_idx(s, 6, &i, 1, 2, 4);
    zr_close(s);
    free(path);
}
END_TEST

START_TEST(ragged_gather_of_no_records_touches_nothing)
{
    char *path = zt_path("r");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "|u1", NULL));
    ZR_OK_CALL(zr_ragged_sizes(s, NULL, 0, NULL));
    ZR_OK_CALL(zr_gather_ragged(s, NULL, 0, NULL, NULL));
    zt_append_ragged_gen(s, 1, 3, 1, 4);
    uint8_t dst[32];
    memset(dst, 0x33, sizeof dst);
    const uint64_t idx[] = {0}, offsets[] = {0};
    uint64_t sizes[1] = {12345};
    ZR_OK_CALL(zr_ragged_sizes(s, idx, 0, sizes));
    ck_assert_uint_eq(sizes[0], 12345);
    ZR_OK_CALL(zr_gather_ragged(s, idx, 0, dst, offsets));
    for (size_t k = 0; k < sizeof dst; k++)
        ck_assert_uint_eq(dst[k], 0x33);
    zr_ragged_batch *b = NULL;
    ZR_OK_CALL(zr_gather_ragged_alloc(s, NULL, 0, &b));
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->n, 0);
    zr_ragged_batch_free(b);
    zr_close(s);
    free(path);
}
END_TEST

/* The allocating gather: one batch, a view per request, payloads 8-byte
 * aligned, shapes and bytes as generated. */
START_TEST(ragged_gather_alloc_gives_views_in_request_order)
{
    char *path = zt_path("r");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<c8", NULL));
    zt_append_ragged_gen(s, 14, 25, 4, 3);
    const uint64_t idx[] = {24, 3, 3, 0, 11, 24, 7};
    const size_t n = sizeof idx / sizeof idx[0];
    zr_ragged_batch *b;
    ZR_OK_CALL(zr_gather_ragged_alloc(s, idx, n, &b));
    ck_assert_uint_eq(b->n, n);
    for (size_t k = 0; k < n; k++) {
        zt_ragged *want = zt_ragged_gen("<c8", 14, idx[k], 1, 4, 3);
        const zr_view *v = &b->recs[k];
        ck_assert_uint_eq(v->ndim, want->recs[0].ndim);
        ck_assert_mem_eq(v->shape, want->shapes[0], v->ndim * sizeof(uint64_t));
        ck_assert_uint_eq(v->nbytes, want->nbytes[0]);
        ck_assert_mem_eq(v->data, want->data[0], v->nbytes);
        ck_assert_uint_eq((uintptr_t)v->data % 8, 0);
        zt_ragged_free(want);
    }
    zr_ragged_batch_free(b);
    zr_ragged_batch_free(NULL);
    zr_close(s);
    free(path);
}
END_TEST

/* zr_ragged_view decodes a well-formed record and refuses every prefix
 * that disagrees with the record's size. */
START_TEST(ragged_view_checks_the_prefix_against_the_size)
{
    uint8_t rec[8 + 2 * 8 + 24];
    memset(rec, 0, sizeof rec);
    rec[0] = 2;          /* ndim 2 */
    rec[8] = 2;          /* dims (2, 3) of 4-byte items: 24 payload bytes */
    rec[16] = 3;
    zr_view v;
    ZR_OK_CALL(zr_ragged_view(rec, sizeof rec, 4, &v));
    ck_assert_uint_eq(v.ndim, 2);
    ck_assert_uint_eq(v.shape[0], 2);
    ck_assert_uint_eq(v.shape[1], 3);
    ck_assert_uint_eq(v.nbytes, 24);
    ck_assert_ptr_eq(v.data, rec + 24);
    ZR_FAIL_CALL(zr_ragged_view(rec, sizeof rec - 1, 4, &v), ZR_ECORRUPT);
    ZR_FAIL_CALL(zr_ragged_view(rec, sizeof rec, 8, &v), ZR_ECORRUPT);
    ZR_FAIL_CALL(zr_ragged_view(rec, 7, 4, &v), ZR_ECORRUPT);
    rec[0] = 33; /* more dimensions than allowed */
    ZR_FAIL_CALL(zr_ragged_view(rec, sizeof rec, 4, &v), ZR_ECORRUPT);
    rec[0] = 2;
    memset(rec + 8, 0xff, 16); /* dims whose product overflows */
    ZR_FAIL_CALL(zr_ragged_view(rec, sizeof rec, 4, &v), ZR_ECORRUPT);
    /* A scalar: prefix 0, one item. */
    uint8_t scalar[8 + 2] = {0};
    ZR_OK_CALL(zr_ragged_view(scalar, sizeof scalar, 2, &v));
    ck_assert_uint_eq(v.ndim, 0);
    ck_assert_uint_eq(v.nbytes, 2);
    ZR_FAIL_CALL(zr_ragged_view(scalar, 8, 2, &v), ZR_ECORRUPT); /* no payload */
}
END_TEST

/* Where each record of sizes[] must land: in order, rolling over to the
 * next chunk at offset 0 when it does not fit in the current one. */
static void expect_layout(const uint64_t *sizes, uint64_t n, uint64_t cap, zt_loc *out,
                          uint32_t *tail_chunk, uint32_t *tail_offset)
{
    uint32_t chunk = 0;
    uint64_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (off + sizes[i] > cap) {
            chunk++;
            off = 0;
        }
        out[i] = (zt_loc){.offset = (uint32_t)off, .phys = (uint32_t)sizes[i],
                          .logic = (uint32_t)sizes[i], .chunk = chunk};
        off += sizes[i];
    }
    *tail_chunk = chunk;
    *tail_offset = (uint32_t)off;
}

static void check_ragged_layout(const char *path, const char *dtype, uint64_t seed, uint64_t n,
                                uint64_t cap, uint64_t seg_entries, uint32_t maxndim,
                                uint64_t maxdim)
{
    zt_ragged *r = zt_ragged_gen(dtype, seed, 0, n, maxndim, maxdim);
    uint64_t *sizes = malloc(n * sizeof *sizes);
    zt_loc *want = malloc(n * sizeof *want);
    ck_assert(sizes && want);
    for (uint64_t i = 0; i < n; i++)
        sizes[i] = 8 * (1 + (uint64_t)r->recs[i].ndim) + r->nbytes[i];
    uint32_t tail_chunk, tail_offset;
    expect_layout(sizes, n, cap, want, &tail_chunk, &tail_offset);
    uint64_t *chunk_end = calloc(tail_chunk + 1, sizeof *chunk_end);
    ck_assert_ptr_nonnull(chunk_end);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t seg, entry;
        zt_loc_where(i, seg_entries, &seg, &entry);
        zt_loc l = zt_loc_read(path, seg, entry);
        ck_assert_msg(memcmp(&l, &want[i], sizeof l) == 0,
                      "record %llu: entry (%u, %u, %u, %u), expected (%u, %u, %u, %u)",
                      (unsigned long long)i, l.chunk, l.offset, l.phys, l.logic,
                      want[i].chunk, want[i].offset, want[i].phys, want[i].logic);
        ck_assert_uint_le((uint64_t)l.offset + l.phys, cap);
        chunk_end[l.chunk] = (uint64_t)l.offset + l.phys;
    }
    for (uint32_t c = 0; c <= tail_chunk + 1; c++) {
        char name[32];
        snprintf(name, sizeof name, "%u.chunk", c);
        char *chunk = zt_join(path, name);
        ck_assert_int_eq(zt_file_size(chunk), c <= tail_chunk ? (int64_t)chunk_end[c] : -1);
        free(chunk);
    }
    zt_meta m = zt_meta_read(path);
    ck_assert_uint_eq(m.length, n);
    ck_assert_uint_eq(m.tail_chunk, tail_chunk);
    ck_assert_uint_eq(m.tail_offset, tail_offset);
    free(chunk_end);
    free(want);
    free(sizes);
    zt_ragged_free(r);
}

START_TEST(ragged_records_roll_over_to_the_next_chunk)
{
    /* Records of 10..312 bytes in 512-byte chunks: most chunks end with a
     * gap, and batches start both inside a chunk and at a rollover. */
    zr_testing_set_geometry(512, 8);
    char *path = zt_path("r");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<u2", NULL));
    zt_append_ragged_gen(s, 91, 13, 2, 12);
    zt_append_ragged_gen(s, 91, 1, 2, 12);
    zt_append_ragged_gen(s, 91, 40, 2, 12);
    zt_check_ragged_all(s, 91, 2, 12);
    zr_close(s);
    check_ragged_layout(path, "<u2", 91, 54, 512, 8, 2, 12);
    ck_assert_uint_ge(zt_meta_read(path).tail_chunk, 4); /* the layout did roll over */

    ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
    zt_check_ragged_all(s, 91, 2, 12);
    zt_append_ragged_gen(s, 91, 29, 2, 12);
    zr_close(s);
    check_ragged_layout(path, "<u2", 91, 83, 512, 8, 2, 12);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zt_check_ragged_all(s, 91, 2, 12);
    zr_close(s);
    free(path);
}
END_TEST

START_TEST(ragged_reopen_sees_exactly_what_was_committed)
{
    char *path = zt_path("r");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<f8", NULL));
    zt_append_ragged_gen(s, 3, 10, 3, 5);
    zt_append_ragged_gen(s, 3, 1, 3, 5);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
    ck_assert_uint_eq(zr_len(s), 11);
    zt_check_ragged_all(s, 3, 3, 5);
    const uint64_t zero = 0;
    zr_rec bad = {.data = &zero, .shape = &zero, .ndim = 1};
    ZR_FAIL_CALL(zr_append_ragged(s, "<f8", &bad, 1, NULL), ZR_EEMPTY);
    ck_assert_uint_eq(zr_len(s), 11);
    zt_append_ragged_gen(s, 3, 6, 3, 5);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    ck_assert_uint_eq(zr_len(s), 17);
    zt_check_ragged_all(s, 3, 3, 5);
    zr_close(s);
    free(path);
}
END_TEST


/* A Ragged store of int32 records: record k holds lens[k] rows of cols
 * items, item (r, c) being 100 * k + cols * r + c (cols 0: 1-D records). */
static zr_store *dense_source(const char *name, const uint64_t *lens, size_t n, uint64_t cols)
{
    char *path = zt_path(name);
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<i4", NULL));
    free(path);
    for (size_t k = 0; k < n; k++) {
        uint64_t items = lens[k] * (cols ? cols : 1);
        int32_t *v = malloc(items * sizeof *v);
        ck_assert_ptr_nonnull(v);
        for (uint64_t i = 0; i < items; i++)
            v[i] = (int32_t)(100 * k + i);
        uint64_t shape[2] = {lens[k], cols};
        zr_rec rec = {.data = v, .shape = shape, .ndim = cols ? 2 : 1};
        ZR_OK_CALL(zr_append_ragged(s, "<i4", &rec, 1, NULL));
        free(v);
    }
    return s;
}

START_TEST(ragged_padded_batch_holds_each_record_then_the_pad)
{
    static const uint64_t lens[] = {3, 1, 4, 1, 5};
    zr_store *s = dense_source("p", lens, 5, 0);
    uint64_t idx[] = {4, 0, 3, 4};
    int32_t pad = -7;
    zr_ragged_dense *d;
    ZR_OK_CALL(zr_gather_ragged_dense(s, idx, 4, ZR_PADDED, 0, &pad, &d));
    ck_assert_int_eq(d->layout, ZR_PADDED);
    ck_assert_uint_eq(d->ndim, 2);
    ck_assert_uint_eq(d->shape[0], 4);
    ck_assert_uint_eq(d->shape[1], 5);
    ck_assert_uint_eq(d->nbytes, 4 * 5 * sizeof(int32_t));
    const int32_t *v = d->data;
    int64_t at = 0;
    for (size_t k = 0; k < 4; k++) {
        ck_assert_int_eq(d->lengths[k], (int64_t)lens[idx[k]]);
        ck_assert_int_eq(d->offsets[k], at);
        at += (int64_t)lens[idx[k]];
        for (uint64_t r = 0; r < 5; r++)
            ck_assert_int_eq(v[k * 5 + r], r < lens[idx[k]] ? (int32_t)(100 * idx[k] + r) : pad);
    }
    ck_assert_int_eq(d->offsets[4], at);
    zr_ragged_dense_free(d);

    /* A fixed length: the padding grows; a NULL pad is zeros. */
    ZR_OK_CALL(zr_gather_ragged_dense(s, idx, 2, ZR_PADDED, 8, NULL, &d));
    ck_assert_uint_eq(d->shape[1], 8);
    v = d->data;
    for (uint64_t r = 5; r < 8; r++)
        ck_assert_int_eq(v[r], 0);
    ck_assert_int_eq(v[8 + 2], 2);
    ck_assert_int_eq(v[8 + 3], 0);
    zr_ragged_dense_free(d);
    zr_close(s);
}
END_TEST

START_TEST(ragged_packed_batch_holds_the_records_back_to_back)
{
    static const uint64_t lens[] = {2, 3, 1};
    zr_store *s = dense_source("q", lens, 3, 2); /* records of shape (L, 2) */
    uint64_t idx[] = {1, 2, 1, 0};
    zr_ragged_dense *d;
    ZR_OK_CALL(zr_gather_ragged_dense(s, idx, 4, ZR_PACKED, 0, NULL, &d));
    ck_assert_uint_eq(d->ndim, 2);
    ck_assert_uint_eq(d->shape[0], 3 + 1 + 3 + 2);
    ck_assert_uint_eq(d->shape[1], 2);
    const int32_t *v = d->data;
    size_t pos = 0;
    for (size_t k = 0; k < 4; k++) {
        ck_assert_int_eq(d->offsets[k], (int64_t)(pos / 2));
        ck_assert_int_eq(d->lengths[k], (int64_t)lens[idx[k]]);
        for (uint64_t i = 0; i < 2 * lens[idx[k]]; i++)
            ck_assert_int_eq(v[pos++], (int32_t)(100 * idx[k] + i));
    }
    ck_assert_int_eq(d->offsets[4], 9);
    ck_assert_uint_eq(d->nbytes, pos * sizeof(int32_t));
    zr_ragged_dense_free(d);
    zr_close(s);
}
END_TEST

START_TEST(ragged_dense_refuses_what_it_cannot_lay_out)
{
    static const uint64_t lens[] = {2, 6};
    zr_store *s = dense_source("r", lens, 2, 0);
    uint64_t idx[] = {0, 1};
    zr_ragged_dense *d = (zr_ragged_dense *)&d;
    ZR_FAIL_CALL(zr_gather_ragged_dense(s, idx, 2, ZR_PADDED, 4, NULL, &d), ZR_ESHAPE);
    ck_assert_ptr_null(d);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "record 1 has 6 rows, more than the 4"));
    ZR_FAIL_CALL(zr_gather_ragged_dense(s, idx, 2, ZR_PACKED, 4, NULL, &d), ZR_EINVAL);
    ZR_FAIL_CALL(zr_gather_ragged_dense(s, idx, 2, 0, 0, NULL, &d), ZR_EINVAL);
    uint64_t late[] = {2};
    ZR_FAIL_CALL(zr_gather_ragged_dense(s, late, 1, ZR_PACKED, 0, NULL, &d), ZR_ERANGE);
    zr_close(s);

    /* Rows of different shapes: (2, 3) and (2, 2). */
    uint64_t a[2] = {2, 3}, b[2] = {2, 2};
    int32_t items[6] = {0};
    zr_view views[2] = {{.data = items, .nbytes = 24, .ndim = 2}, {.data = items, .nbytes = 16, .ndim = 2}};
    memcpy(views[0].shape, a, sizeof a);
    memcpy(views[1].shape, b, sizeof b);
    ZR_FAIL_CALL(zr_ragged_densify(views, 2, 4, ZR_PACKED, 0, NULL, &d), ZR_ESHAPE);
    /* A view whose bytes are not its shape's. */
    views[1].shape[1] = 3;
    ZR_FAIL_CALL(zr_ragged_densify(views, 2, 4, ZR_PACKED, 0, NULL, &d), ZR_EINVAL);
    views[1].nbytes = 24;
    ZR_OK_CALL(zr_ragged_densify(views, 2, 4, ZR_PACKED, 0, NULL, &d));
    ck_assert_uint_eq(d->shape[0], 4);
    zr_ragged_dense_free(d);

    char *path = zt_path("dense");
    zr_store *ds;
    uint64_t shape[1] = {3};
    ZR_OK_CALL(zr_dense_create(&ds, path, "<i4", shape, 1, NULL));
    ZR_FAIL_CALL(zr_gather_ragged_dense(ds, idx, 0, ZR_PADDED, 0, NULL, &d), ZR_EKIND);
    zr_close(ds);
    free(path);
}
END_TEST

/* Allocations of a GiB or more fail, as a padded batch far past memory
 * does: the other allocations of a call go through. */
static void *big_fails_malloc(size_t n) { return n >= ((size_t)1 << 30) ? NULL : malloc(n); }

/* A batch too big to allocate is ZR_ENOMEM naming its size (read before
 * the half-made batch is freed), and *out is NULL. */
START_TEST(ragged_dense_that_cannot_be_allocated_is_enomem)
{
    int32_t vals[2] = {5, 6};
    zr_view views[2];
    for (int k = 0; k < 2; k++)
        views[k] = (zr_view){.data = &vals[k], .nbytes = 4, .ndim = 1, .shape = {1}};
    zr_ragged_dense *d = (zr_ragged_dense *)vals;
    zr_alloc.malloc = big_fails_malloc;
    int rc = zr_ragged_densify(views, 2, 4, ZR_PADDED, (uint64_t)1 << 28, NULL, &d);
    zr_alloc = zr_alloc_default;
    ck_assert_int_eq(rc, ZR_ENOMEM);
    ck_assert_ptr_null(d);
    char want[64];
    snprintf(want, sizeof want, "%llu bytes", (unsigned long long)2 << 30);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), want));
}
END_TEST

/* Scalar records are one row each, and no records make an empty batch. */
START_TEST(ragged_dense_scalars_and_empty_batches)
{
    int32_t vals[3] = {5, 6, 7};
    zr_view views[3];
    for (int k = 0; k < 3; k++)
        views[k] = (zr_view){.data = &vals[k], .nbytes = 4, .ndim = 0};
    zr_ragged_dense *d;
    ZR_OK_CALL(zr_ragged_densify(views, 3, 4, ZR_PADDED, 0, NULL, &d));
    ck_assert_uint_eq(d->ndim, 2);
    ck_assert_uint_eq(d->shape[0], 3);
    ck_assert_uint_eq(d->shape[1], 1);
    ck_assert_int_eq(((int32_t *)d->data)[2], 7);
    zr_ragged_dense_free(d);
    ZR_OK_CALL(zr_ragged_densify(NULL, 0, 4, ZR_PACKED, 0, NULL, &d));
    ck_assert_uint_eq(d->ndim, 1);
    ck_assert_uint_eq(d->shape[0], 0);
    ck_assert_int_eq(d->offsets[0], 0);
    zr_ragged_dense_free(d);
    zr_ragged_dense_free(NULL);
}
END_TEST

/* A Ragged store of int32 records of random 2-D shapes (rows in [1, 9],
 * columns in [1, 7]), item i of record k being 1000 * k + i; shapes[2k],
 * shapes[2k + 1] give record k's. */
static zr_store *mixed_source(const char *name, size_t n, int codec, uint64_t *shapes)
{
    char *path = zt_path(name);
    zr_store *s;
    zr_create_opts o = ZR_CREATE_OPTS_INIT;
    o.codec = codec;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<i4", &o));
    free(path);
    uint64_t seed = 12345;
    int32_t v[9 * 7];
    for (size_t k = 0; k < n; k++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        shapes[2 * k] = 1 + (seed >> 33) % 9;
        shapes[2 * k + 1] = 1 + (seed >> 45) % 7;
        for (uint64_t i = 0; i < shapes[2 * k] * shapes[2 * k + 1]; i++)
            v[i] = (int32_t)(1000 * k + i);
        zr_rec rec = {.data = v, .shape = &shapes[2 * k], .ndim = 2};
        ZR_OK_CALL(zr_append_ragged(s, "<i4", &rec, 1, NULL));
    }
    return s;
}

/* Check a ZR_PACKED_FLAT batch of records idx[0..n) of mixed_source. */
static void check_flat(const zr_ragged_dense *d, const uint64_t *idx, size_t n,
                       const uint64_t *shapes)
{
    ck_assert_int_eq(d->layout, ZR_PACKED_FLAT);
    ck_assert_uint_eq(d->n, n);
    ck_assert_uint_eq(d->ndim, 1);
    ck_assert_uint_eq(d->rec_ndim, 2);
    const int32_t *v = d->data;
    int64_t at = 0;
    for (size_t k = 0; k < n; k++) {
        uint64_t rows = shapes[2 * idx[k]], cols = shapes[2 * idx[k] + 1];
        ck_assert_int_eq(d->shapes[2 * k], (int64_t)rows);
        ck_assert_int_eq(d->shapes[2 * k + 1], (int64_t)cols);
        ck_assert_int_eq(d->offsets[k], at);
        ck_assert_int_eq(d->lengths[k], (int64_t)(rows * cols));
        for (uint64_t i = 0; i < rows * cols; i++)
            ck_assert_int_eq(v[at + (int64_t)i], (int32_t)(1000 * idx[k] + i));
        at += (int64_t)(rows * cols);
    }
    ck_assert_int_eq(d->offsets[n], at);
    ck_assert_uint_eq(d->shape[0], (uint64_t)at);
    ck_assert_uint_eq(d->nbytes, (uint64_t)at * sizeof(int32_t));
}

/* Packed flat: records of any shapes, their items back to back, their
 * shapes beside. Batches of odd and even sizes, repeats, both codecs:
 * these records (16-byte prefixes, payloads of 4 to 252 bytes) are
 * gathered in place whenever no payload but the last is under 16 bytes,
 * and in two steps otherwise; either way the batch must equal the
 * records. */
START_TEST(ragged_packed_flat_holds_records_of_any_shape)
{
    enum { N = 300 };
    static const size_t sizes[] = {1, 2, 3, 4, 7, 64, 257};
    int codec = _i ? ZR_CODEC_ZSTD : ZR_CODEC_RAW;
    uint64_t shapes[2 * N];
    zr_store *s = mixed_source("flat", N, codec, shapes);
    uint64_t idx[257], seed = 99;
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
        size_t n = sizes[t];
        for (int round = 0; round < 2; round++) {
            for (size_t k = 0; k < n; k++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                /* Round 1 keeps to records of 4 items or more (16 bytes),
                 * so that the batch is gathered in place. */
                do
                    idx[k] = (seed >> 33) % N, seed += 0x9e3779b97f4a7c15ull;
                while (round == 1 && shapes[2 * idx[k]] * shapes[2 * idx[k] + 1] < 4);
            }
            zr_ragged_dense *d;
            ZR_OK_CALL(zr_gather_ragged_dense(s, idx, n, ZR_PACKED_FLAT, 0, NULL, &d));
            check_flat(d, idx, n, shapes);
            zr_ragged_dense_free(d);
        }
    }
    zr_close(s);
}
END_TEST

/* The in-place gather puts a record's prefix on its neighbour's payload
 * and the neighbour's bytes back after: records whose payloads are
 * exactly the prefix's length, the least it allows, and batches where a
 * short record (under the prefix) sits first, in the middle or last. */
START_TEST(ragged_packed_in_place_at_its_limits)
{
    /* 1-D int32 records: lengths 4 (16 bytes, the prefix's length), 1
     * (4 bytes, shorter) and 9. */
    static const uint64_t lens[] = {4, 1, 9, 4, 4};
    int codec = _i ? ZR_CODEC_ZSTD : ZR_CODEC_RAW;
    char *path = zt_path("limits");
    zr_store *s;
    zr_create_opts o = ZR_CREATE_OPTS_INIT;
    o.codec = codec;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<i4", &o));
    free(path);
    for (size_t k = 0; k < 5; k++) {
        int32_t v[9];
        for (uint64_t i = 0; i < lens[k]; i++)
            v[i] = (int32_t)(100 * k + i);
        zr_rec rec = {.data = v, .shape = &lens[k], .ndim = 1};
        ZR_OK_CALL(zr_append_ragged(s, "<i4", &rec, 1, NULL));
    }
    static const uint64_t batches[][6] = {
        {0, 3, 4, 0, 3, 4}, {0, 4, 3, 2, 0, 3}, {1, 0, 3, 4, 0, 2},
        {0, 3, 1, 4, 0, 3}, {0, 3, 4, 2, 3, 1}, {2, 2, 2, 2, 2, 2},
    };
    for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
        for (int layout = ZR_PACKED; layout <= ZR_PACKED_FLAT; layout++) {
            zr_ragged_dense *d;
            ZR_OK_CALL(zr_gather_ragged_dense(s, batches[b], 6, layout, 0, NULL, &d));
            const int32_t *v = d->data;
            int64_t at = 0;
            for (size_t k = 0; k < 6; k++) {
                uint64_t r = batches[b][k];
                ck_assert_int_eq(d->offsets[k], at);
                ck_assert_int_eq(d->lengths[k], (int64_t)lens[r]);
                for (uint64_t i = 0; i < lens[r]; i++)
                    ck_assert_int_eq(v[at + (int64_t)i], (int32_t)(100 * r + i));
                at += (int64_t)lens[r];
            }
            ck_assert_uint_eq(d->shape[0], (uint64_t)at);
            if (layout == ZR_PACKED_FLAT) {
                ck_assert_uint_eq(d->rec_ndim, 1);
                for (size_t k = 0; k < 6; k++)
                    ck_assert_int_eq(d->shapes[k], (int64_t)lens[batches[b][k]]);
            } else {
                ck_assert_ptr_null(d->shapes);
                ck_assert_uint_eq(d->rec_ndim, 0);
            }
            zr_ragged_dense_free(d);
        }
    }
    zr_close(s);
}
END_TEST

/* Flat packing needs one number of dimensions; packing by rows (ZR_PACKED)
 * still needs one row shape, and names the layout that does not. */
START_TEST(ragged_packed_flat_refuses_mixed_dimensions)
{
    int32_t items[6] = {1, 2, 3, 4, 5, 6};
    zr_view views[3] = {{.data = items, .nbytes = 24, .ndim = 2, .shape = {2, 3}},
                        {.data = items, .nbytes = 8, .ndim = 1, .shape = {2}},
                        {.data = items, .nbytes = 16, .ndim = 2, .shape = {2, 2}}};
    zr_ragged_dense *d = NULL;
    ZR_FAIL_CALL(zr_ragged_densify(views, 3, 4, ZR_PACKED_FLAT, 0, NULL, &d), ZR_ESHAPE);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "record 1 has 1 dimensions"));
    ZR_FAIL_CALL(zr_ragged_densify(views, 3, 4, ZR_PACKED_FLAT, 2, NULL, &d), ZR_EINVAL);
    views[1] = views[2];
    ZR_FAIL_CALL(zr_ragged_densify(views, 3, 4, ZR_PACKED, 0, NULL, &d), ZR_ESHAPE);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "ZR_PACKED_FLAT"));
    ZR_OK_CALL(zr_ragged_densify(views, 3, 4, ZR_PACKED_FLAT, 0, NULL, &d));
    ck_assert_uint_eq(d->shape[0], 6 + 4 + 4);
    ck_assert_int_eq(d->shapes[5], 2);
    ck_assert_int_eq(d->offsets[2], 10);
    ck_assert_int_eq(((int32_t *)d->data)[13], 4);
    zr_ragged_dense_free(d);

    /* Through a store: a scalar record among 1-D ones goes the two-step
     * way and is refused there. */
    char *path = zt_path("nd");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<i4", NULL));
    free(path);
    uint64_t five = 5;
    zr_rec recs[2] = {{.data = items, .shape = &five, .ndim = 1}, {.data = items, .ndim = 0}};
    ZR_OK_CALL(zr_append_ragged(s, "<i4", recs, 2, NULL));
    uint64_t idx[] = {0, 1, 0};
    ZR_FAIL_CALL(zr_gather_ragged_dense(s, idx, 3, ZR_PACKED_FLAT, 0, NULL, &d), ZR_ESHAPE);
    ck_assert_ptr_null(d);
    /* Packed by rows, a scalar is one row of shape (): it fits. */
    ZR_OK_CALL(zr_gather_ragged_dense(s, idx, 3, ZR_PACKED, 0, NULL, &d));
    ck_assert_uint_eq(d->shape[0], 11);
    ck_assert_int_eq(((int32_t *)d->data)[5], 1);
    zr_ragged_dense_free(d);
    zr_close(s);
}
END_TEST

Suite *suite_ragged(void)
{
    Suite *s = suite_create("ragged");
    TCase *tc = tcase_create("ragged");
    tcase_add_checked_fixture(tc, zt_setup, zt_teardown);
    tcase_add_loop_test(tc, ragged_round_trips_every_dtype, 0, NDTYPES);
    tcase_add_test(tc, ragged_scalar_records_round_trip);
    tcase_add_test(tc, ragged_records_lie_on_disk_with_their_shape_prefix);
    tcase_add_test(tc, ragged_gather_accepts_unsorted_and_repeated_indices);
    tcase_add_test(tc, ragged_gather_single_records);
    tcase_add_test(tc, ragged_gather_of_no_records_touches_nothing);
    tcase_add_test(tc, ragged_gather_alloc_gives_views_in_request_order);
    tcase_add_test(tc, ragged_view_checks_the_prefix_against_the_size);
    tcase_add_test(tc, ragged_records_roll_over_to_the_next_chunk);
    tcase_add_test(tc, ragged_reopen_sees_exactly_what_was_committed);
    tcase_add_test(tc, ragged_padded_batch_holds_each_record_then_the_pad);
    tcase_add_test(tc, ragged_packed_batch_holds_the_records_back_to_back);
    tcase_add_test(tc, ragged_dense_refuses_what_it_cannot_lay_out);
    tcase_add_test(tc, ragged_dense_scalars_and_empty_batches);
    tcase_add_test(tc, ragged_dense_that_cannot_be_allocated_is_enomem);
    tcase_add_loop_test(tc, ragged_packed_flat_holds_records_of_any_shape, 0, 2);
    tcase_add_loop_test(tc, ragged_packed_in_place_at_its_limits, 0, 2);
    tcase_add_test(tc, ragged_packed_flat_refuses_mixed_dimensions);
    suite_add_tcase(s, tc);
    return s;
}

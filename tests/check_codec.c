/*
 * check_codec.c: the three codecs and dictionary training. Compressed
 * records are checked twice: through the engine's gather, and by reading
 * each record's frame straight from its chunk and decoding it with libzstd
 * alone, so the test does not trust the engine to judge its own output.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zdict.h>
/* For ZSTD_c_literalCompressionMode, to make the frames a small record
 * may be stored as. */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "engine.h"
#include "tests/helpers.h"
#include "tests/records.h"
#include "tests/suites.h"

/* Records of 256 small integers that share a pattern, as dictionaries
 * like: n of them back to back. */
#define DICT_WIDTH 256
static void *dict_sample(uint64_t seed, uint64_t n)
{
    return zt_dense_gen("|u1", DICT_WIDTH, seed, 0, n);
}

static void train_buffer(uint64_t seed, uint64_t n, int tier, void **dict, size_t *len)
{
    void *buf = dict_sample(seed, n);
    ZR_OK_CALL(zr_train_dict_buffer(buf, DICT_WIDTH, n, tier, dict, len));
    free(buf);
    size_t cap;
    ZR_OK_CALL(zr_tier_sizes(tier, &cap, NULL));
    ck_assert_uint_gt(*len, 0);
    ck_assert_uint_le(*len, cap);
    ck_assert_uint_ne(ZDICT_getDictID(*dict, *len), 0);
}

/* Read record i's stored bytes from its chunk, by the entry on disk. */
static uint8_t *stored_record(const char *path, uint64_t i, uint64_t seg_entries, zt_loc *l)
{
    uint64_t seg, entry;
    zt_loc_where(i, seg_entries, &seg, &entry);
    *l = zt_loc_read(path, seg, entry);
    char name[32];
    snprintf(name, sizeof name, "%u.chunk", l->chunk);
    char *chunk = zt_join(path, name);
    size_t len;
    uint8_t *bytes = zt_slurp(chunk, &len);
    ck_assert_uint_le((uint64_t)l->offset + l->phys, len);
    uint8_t *rec = malloc(l->phys);
    ck_assert_ptr_nonnull(rec);
    memcpy(rec, bytes + l->offset, l->phys);
    free(bytes);
    free(chunk);
    return rec;
}

/* Decode record i of a compressed store with libzstd alone and compare it
 * with want (want_len bytes). dict may be NULL. */
static void check_frame(const char *path, uint64_t i, uint64_t seg_entries, const void *dict,
                        size_t dict_len, const void *want, size_t want_len)
{
    zt_loc l;
    uint8_t *frame = stored_record(path, i, seg_entries, &l);
    ck_assert_uint_eq(l.logic, want_len);
    ck_assert_uint_eq(ZSTD_getFrameContentSize(frame, l.phys), want_len);
    ck_assert_uint_eq(ZSTD_findFrameCompressedSize(frame, l.phys), l.phys);
    ck_assert_uint_eq(ZSTD_getDictID_fromFrame(frame, l.phys),
                      dict ? ZDICT_getDictID(dict, dict_len) : 0);
    uint8_t *out = malloc(want_len);
    ck_assert_ptr_nonnull(out);
    ZSTD_DCtx *d = ZSTD_createDCtx();
    size_t r = dict ? ZSTD_decompress_usingDict(d, out, want_len, frame, l.phys, dict, dict_len)
                    : ZSTD_decompressDCtx(d, out, want_len, frame, l.phys);
    ck_assert_msg(!ZSTD_isError(r), "record %llu: %s", (unsigned long long)i,
                  ZSTD_getErrorName(r));
    ck_assert_uint_eq(r, want_len);
    ck_assert_mem_eq(out, want, want_len);
    ZSTD_freeDCtx(d);
    free(out);
    free(frame);
}

/* Check every Dense record's frame against the generator. */
static void check_dense_frames(const char *path, const char *dtype, uint64_t nelem,
                               uint64_t seed, uint64_t n, const void *dict, size_t dict_len)
{
    uint64_t width = nelem * zt_itemsize(dtype);
    for (uint64_t i = 0; i < n; i++) {
        void *want = zt_dense_gen(dtype, nelem, seed, i, 1);
        check_frame(path, i, ZR_SEGMENT_ENTRIES, dict, dict_len, want, width);
        free(want);
    }
}

/* Check every Ragged record's frame: prefix and payload in one frame. */
static void check_ragged_frames(const char *path, uint64_t seg_entries, const char *dtype,
                                uint64_t seed, uint64_t n, uint32_t maxndim, uint64_t maxdim,
                                const void *dict, size_t dict_len)
{
    zt_ragged *r = zt_ragged_gen(dtype, seed, 0, n, maxndim, maxdim);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t ndim = r->recs[i].ndim;
        uint64_t pre = 8 * (1 + (uint64_t)ndim);
        uint8_t *want = malloc(pre + r->nbytes[i]);
        ck_assert_ptr_nonnull(want);
        memset(want, 0, pre);
        want[0] = (uint8_t)ndim;
        for (uint32_t d = 0; d < ndim; d++)
            for (int b = 0; b < 8; b++)
                want[8 + 8 * d + b] = (uint8_t)(r->shapes[i][d] >> (8 * b));
        memcpy(want + pre, r->data[i], r->nbytes[i]);
        check_frame(path, i, seg_entries, dict, dict_len, want, pre + r->nbytes[i]);
        free(want);
    }
    zt_ragged_free(r);
}

START_TEST(tier_sizes_are_the_documented_ones)
{
    static const size_t want[3][2] = {
        {32u << 10, 4u << 20}, {128u << 10, 16u << 20}, {1u << 20, 64u << 20}};
    static const int tiers[3] = {ZR_TIER_FAST, ZR_TIER_BALANCED, ZR_TIER_MAX};
    for (int t = 0; t < 3; t++) {
        size_t d = 0, sample = 0;
        ZR_OK_CALL(zr_tier_sizes(tiers[t], &d, &sample));
        ck_assert_uint_eq(d, want[t][0]);
        ck_assert_uint_eq(sample, want[t][1]);
    }
    size_t d;
    ZR_FAIL_CALL(zr_tier_sizes(3, &d, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_tier_sizes(-1, &d, NULL), ZR_EINVAL);
}
END_TEST

START_TEST(codec_is_recorded_in_the_header)
{
    static const char *const names[] = {"raw", "zstd", "zstd_dict"};
    int codec = (int)_i;
    void *dict = NULL;
    size_t dict_len = 0;
    if (codec == ZR_CODEC_ZSTD_DICT)
        train_buffer(1, 400, ZR_TIER_FAST, &dict, &dict_len);
    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = codec, .dict = dict,
                           .dict_len = dict_len};
    char *path = zt_path("s");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<i4", &opts));
    ck_assert_int_eq(zr_codec(s), codec);
    zr_close(s);
    ck_assert_uint_eq(zt_meta_read(path).codec, (unsigned)codec);
    char *dict_path = zt_join(path, "dict.zr");
    ck_assert_int_eq(zt_file_size(dict_path), dict ? (int64_t)dict_len : -1);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    ck_assert_int_eq(zr_codec(s), codec);
    ck_assert_str_eq(zr_codec_name(codec), names[codec]);
    zr_close(s);
    ck_assert_str_eq(zr_codec_name(7), "unknown");
    free(dict_path);
    free(dict);
    free(path);
}
END_TEST

START_TEST(zstd_dense_records_are_frames_of_their_own)
{
    const uint64_t shape[] = {4, 256};
    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD};
    char *path = zt_path("z");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<f4", shape, 2, &opts));
    zt_append_dense_gen(s, 17, 90);
    zt_append_dense_gen(s, 17, 1);
    zt_check_dense_all(s, 17);
    zr_close(s);
    check_dense_frames(path, "<f4", 1024, 17, 91, NULL, 0);
    /* The records share a pattern: zstd must have found it. */
    char *chunk = zt_join(path, "0.chunk");
    ck_assert_int_lt(zt_file_size(chunk), 91 * 4096);
    free(chunk);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zt_check_dense_all(s, 17);
    const uint64_t idx[] = {90, 0, 45, 45, 3};
    zt_check_dense_idx(s, 17, idx, 5);
    zr_close(s);
    free(path);
}
END_TEST

START_TEST(zstd_ragged_records_frame_prefix_and_payload_together)
{
    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD};
    char *path = zt_path("z");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<i2", &opts));
    zt_append_ragged_gen(s, 23, 70, 3, 10);
    zt_check_ragged_all(s, 23, 3, 10);
    zr_close(s);
    check_ragged_frames(path, ZR_SEGMENT_ENTRIES, "<i2", 23, 70, 3, 10, NULL, 0);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zt_check_ragged_all(s, 23, 3, 10);
    zr_close(s);
    free(path);
}
END_TEST

/* A level-3 frame of len bytes, with the checksum, its literals Huffman
 * coded where zstd finds it pays (huffman) or stored raw. */
static uint8_t *frame_of(const void *src, size_t len, bool huffman, size_t *flen)
{
    ZSTD_CCtx *c = ZSTD_createCCtx();
    ck_assert_ptr_nonnull(c);
    ck_assert(!ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3)));
    ck_assert(!ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1)));
    if (!huffman)
        ck_assert(!ZSTD_isError(
            ZSTD_CCtx_setParameter(c, ZSTD_c_literalCompressionMode, ZSTD_ps_disable)));
    size_t cap = ZSTD_compressBound(len);
    uint8_t *f = malloc(cap);
    ck_assert_ptr_nonnull(f);
    *flen = ZSTD_compress2(c, f, cap, src, len);
    ck_assert(!ZSTD_isError(*flen));
    ZSTD_freeCCtx(c);
    return f;
}

/* The rule of lib/codec.h for small records: a Huffman table for the
 * literals is kept only where it saves at least 128 bytes or a third of
 * the record; otherwise the frame stores the literals raw, which reads
 * several times faster. Three records of random bytes without repeats,
 * so only the literals' coding differs: 300 bytes over 64 symbols (the
 * table saves a few dozen bytes: raw), 4,000 bytes over 16 symbols (it
 * saves about 2,000: kept), 200 bytes over 16 symbols (it saves under 128
 * bytes, but more than a third: kept). Each stored frame must be the very
 * frame libzstd makes with those settings. */
START_TEST(small_records_keep_a_huffman_table_only_where_it_pays)
{
    static const struct {
        uint64_t n, symbols;
        bool huffman;
        size_t gain_lo, gain_hi; /* raw-literal frame minus Huffman frame */
    } cases[] = {{300, 64, false, 1, 99}, {4000, 16, true, 1500, 2500}, {200, 16, true, 73, 127}};
    /* One append of the cases in an order where each follows each other
     * one, since a worker first tries what its last record kept. */
    static const size_t order[] = {0, 1, 2, 0, 2, 1, 0, 0, 1, 1, 2, 2};
    enum { NREC = sizeof order / sizeof order[0] };
    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD};
    char *path = zt_path("z");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "|u1", &opts));
    uint64_t rng = 99;
    uint8_t *logical[NREC];
    size_t logical_len[NREC];
    uint64_t shapes[NREC];
    zr_rec recs[NREC];
    for (size_t k = 0; k < NREC; k++) {
        uint64_t n = cases[order[k]].n;
        logical_len[k] = 16 + n;
        uint8_t *b = logical[k] = calloc(1, logical_len[k]);
        ck_assert_ptr_nonnull(b);
        b[0] = 1; /* the Ragged prefix: ndim 1, then dims[0] = n */
        for (int i = 0; i < 8; i++)
            b[8 + i] = (uint8_t)(n >> (8 * i));
        for (uint64_t i = 0; i < n; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            b[16 + i] = (uint8_t)((rng >> 33) % cases[order[k]].symbols);
        }
        shapes[k] = n;
        recs[k] = (zr_rec){.data = b + 16, .shape = &shapes[k], .ndim = 1};
    }
    ZR_OK_CALL(zr_append_ragged(s, "|u1", recs, NREC, NULL));
    zr_close(s);
    for (size_t k = 0; k < NREC; k++) {
        size_t c = order[k], hlen, rlen;
        uint8_t *h = frame_of(logical[k], logical_len[k], true, &hlen);
        uint8_t *r = frame_of(logical[k], logical_len[k], false, &rlen);
        ck_assert_msg(rlen >= hlen + cases[c].gain_lo && rlen <= hlen + cases[c].gain_hi,
                      "record %zu: the test data no longer gives the gain it is meant to (%zu)", k,
                      rlen - hlen);
        zt_loc l;
        uint8_t *stored = stored_record(path, k, ZR_SEGMENT_ENTRIES, &l);
        const uint8_t *want = cases[c].huffman ? h : r;
        size_t want_len = cases[c].huffman ? hlen : rlen;
        ck_assert_msg(l.phys == want_len, "record %zu: stored %u bytes, want %zu (%s literals)", k,
                      l.phys, want_len, cases[c].huffman ? "Huffman" : "raw");
        ck_assert_mem_eq(stored, want, want_len);
        check_frame(path, k, ZR_SEGMENT_ENTRIES, NULL, 0, logical[k], logical_len[k]);
        free(stored);
        free(h);
        free(r);
        free(logical[k]);
    }
    free(path);
}
END_TEST

/* Each tier trains a dictionary within its size that a zstd_dict store
 * accepts, keeps in dict.zr and names in every frame. */
START_TEST(dictionary_tiers_train_from_a_buffer)
{
    int tier = (int)_i;
    void *dict;
    size_t dict_len;
    train_buffer(50, 500, tier, &dict, &dict_len);
    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD_DICT,
                           .dict = dict, .dict_len = dict_len};
    const uint64_t shape[] = {DICT_WIDTH};
    char *path = zt_path("d");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "|u1", shape, 1, &opts));
    zt_append_dense_gen(s, 50, 60);
    zt_check_dense_all(s, 50);
    zr_close(s);
    char *dict_path = zt_join(path, "dict.zr");
    size_t len;
    void *stored = zt_slurp(dict_path, &len);
    ck_assert_uint_eq(len, dict_len);
    ck_assert_mem_eq(stored, dict, len);
    check_dense_frames(path, "|u1", DICT_WIDTH, 50, 60, dict, dict_len);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
    zt_check_dense_all(s, 50);
    zt_append_dense_gen(s, 50, 5);
    zt_check_dense_all(s, 50);
    zr_close(s);
    free(stored);
    free(dict_path);
    free(dict);
    free(path);
}
END_TEST

START_TEST(dictionary_trains_from_a_list_of_records)
{
    zt_ragged *r = zt_ragged_gen("<u2", 61, 0, 600, 2, 20);
    size_t *sizes = malloc(r->n * sizeof *sizes);
    ck_assert_ptr_nonnull(sizes);
    for (uint64_t k = 0; k < r->n; k++)
        sizes[k] = r->nbytes[k];
    void *dict;
    size_t dict_len;
    ZR_OK_CALL(zr_train_dict_records((const void *const *)r->data, sizes, r->n,
                                     ZR_TIER_BALANCED, &dict, &dict_len));
    ck_assert_uint_gt(dict_len, 0);
    ck_assert_uint_le(dict_len, 128u << 10);
    free(sizes);
    zt_ragged_free(r);

    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD_DICT,
                           .dict = dict, .dict_len = dict_len};
    char *path = zt_path("d");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<u2", &opts));
    zt_append_ragged_gen(s, 61, 80, 2, 20);
    zt_check_ragged_all(s, 61, 2, 20);
    zr_close(s);
    check_ragged_frames(path, ZR_SEGMENT_ENTRIES, "<u2", 61, 80, 2, 20, dict, dict_len);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zt_check_ragged_all(s, 61, 2, 20);
    zr_close(s);
    free(dict);
    free(path);
}
END_TEST

/* Train on a raw store's records, then fill a zstd_dict store with the
 * same records and read them back. */
START_TEST(dictionary_trains_from_an_open_store)
{
    char *raw_path = zt_path("raw");
    zr_store *raw;
    ZR_OK_CALL(zr_ragged_create(&raw, raw_path, "|u1", NULL));
    zt_append_ragged_gen(raw, 62, 600, 2, 24);
    void *dict;
    size_t dict_len;
    ZR_OK_CALL(zr_train_dict_store(raw, ZR_TIER_FAST, &dict, &dict_len));
    ck_assert_uint_gt(dict_len, 0);
    ck_assert_uint_le(dict_len, 32u << 10);
    zr_close(raw);
    ZR_OK_CALL(zr_open(&raw, raw_path, ZR_RDONLY));
    void *again;
    size_t again_len;
    ZR_OK_CALL(zr_train_dict_store(raw, ZR_TIER_FAST, &again, &again_len));
    zr_close(raw);
    /* Training is deterministic: the same records give the same bytes. */
    ck_assert_uint_eq(again_len, dict_len);
    ck_assert_mem_eq(again, dict, dict_len);
    free(again);

    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD_DICT,
                           .dict = dict, .dict_len = dict_len};
    char *path = zt_path("dict");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "|u1", &opts));
    zt_append_ragged_gen(s, 62, 100, 2, 24);
    zr_close(s);
    check_ragged_frames(path, ZR_SEGMENT_ENTRIES, "|u1", 62, 100, 2, 24, dict, dict_len);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zt_check_ragged_all(s, 62, 2, 24);
    zr_close(s);
    free(dict);
    free(path);
    free(raw_path);
}
END_TEST

START_TEST(dictionary_training_refuses_what_it_cannot_use)
{
    void *dict = NULL;
    size_t len = 0;
    uint8_t buf[64] = {1, 2, 3};
    ZR_FAIL_CALL(zr_train_dict_buffer(buf, 16, 0, ZR_TIER_FAST, &dict, &len), ZR_EINVAL);
    ZR_FAIL_CALL(zr_train_dict_buffer(buf, 16, 4, 9, &dict, &len), ZR_EINVAL);
    ZR_FAIL_CALL(zr_train_dict_buffer(buf, 0, 4, ZR_TIER_FAST, &dict, &len), ZR_EINVAL);
    ZR_FAIL_CALL(zr_train_dict_buffer(buf, 16, 4, ZR_TIER_FAST, NULL, &len), ZR_EINVAL);
    ZR_FAIL_CALL(zr_train_dict_records(NULL, NULL, 0, ZR_TIER_FAST, &dict, &len), ZR_EINVAL);
    /* Four records of 16 bytes are too little to learn from. */
    ZR_FAIL_CALL(zr_train_dict_buffer(buf, 16, 4, ZR_TIER_FAST, &dict, &len), ZR_ECODEC);
    ck_assert_ptr_null(dict);
    char *path = zt_path("empty");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<i4", NULL));
    ZR_FAIL_CALL(zr_train_dict_store(s, ZR_TIER_FAST, &dict, &len), ZR_EINVAL);
    zr_close(s);
    free(path);
}
END_TEST

/* Small records that share a pattern compress better against a
 * dictionary trained on their kind than alone. */
START_TEST(dictionary_shrinks_small_records)
{
    void *dict;
    size_t dict_len;
    train_buffer(70, 500, ZR_TIER_FAST, &dict, &dict_len);
    const uint64_t shape[] = {DICT_WIDTH};
    int64_t size[2];
    for (int k = 0; k < 2; k++) {
        zr_create_opts opts = {.size = sizeof(zr_create_opts),
                               .codec = k ? ZR_CODEC_ZSTD_DICT : ZR_CODEC_ZSTD,
                               .dict = k ? dict : NULL, .dict_len = k ? dict_len : 0};
        char *path = zt_path(k ? "dict" : "plain");
        zr_store *s;
        ZR_OK_CALL(zr_dense_create(&s, path, "|u1", shape, 1, &opts));
        zt_append_dense_gen(s, 70, 300);
        zt_check_dense_all(s, 70);
        zr_close(s);
        char *chunk = zt_join(path, "0.chunk");
        size[k] = zt_file_size(chunk);
        free(chunk);
        free(path);
    }
    ck_assert_int_lt(size[1], size[0]);
    free(dict);
}
END_TEST

/* Compressed records are placed in completion order, so the layout is not
 * predictable; what must hold is that no record crosses its chunk's end,
 * no two records overlap, and every chunk holds exactly its records. */
START_TEST(compressed_records_never_straddle_chunks)
{
    int codec = _i ? ZR_CODEC_ZSTD_DICT : ZR_CODEC_ZSTD;
    void *dict = NULL;
    size_t dict_len = 0;
    if (codec == ZR_CODEC_ZSTD_DICT) {
        zt_ragged *r = zt_ragged_gen("<i4", 81, 0, 800, 2, 16);
        size_t *sizes = malloc(r->n * sizeof *sizes);
        ck_assert_ptr_nonnull(sizes);
        for (uint64_t k = 0; k < r->n; k++)
            sizes[k] = r->nbytes[k];
        ZR_OK_CALL(zr_train_dict_records((const void *const *)r->data, sizes, r->n,
                                         ZR_TIER_FAST, &dict, &dict_len));
        free(sizes);
        zt_ragged_free(r);
    }
    const uint64_t cap = 1024, seg_entries = 16;
    zr_testing_set_geometry(cap, seg_entries);
    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = codec, .dict = dict,
                           .dict_len = dict_len};
    char *path = zt_path("z");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<i4", &opts));
    zt_append_ragged_gen(s, 81, 150, 2, 16);
    zt_append_ragged_gen(s, 81, 1, 2, 16);
    zt_append_ragged_gen(s, 81, 149, 2, 16);
    zt_check_ragged_all(s, 81, 2, 16);
    zr_close(s);

    const uint64_t n = 300;
    zt_meta m = zt_meta_read(path);
    ck_assert_uint_eq(m.length, n);
    ck_assert_uint_ge(m.tail_chunk, 3);
    uint64_t nchunks = (uint64_t)m.tail_chunk + 1;
    zt_loc *locs = malloc(n * sizeof *locs);
    uint64_t *used = calloc(nchunks, sizeof *used), *end = calloc(nchunks, sizeof *end);
    ck_assert(locs && used && end);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t seg, entry;
        zt_loc_where(i, seg_entries, &seg, &entry);
        locs[i] = zt_loc_read(path, seg, entry);
        ck_assert_uint_lt(locs[i].chunk, nchunks);
        ck_assert_uint_le((uint64_t)locs[i].offset + locs[i].phys, cap);
        used[locs[i].chunk] += locs[i].phys;
        end[locs[i].chunk] = ZR_MAX(end[locs[i].chunk], (uint64_t)locs[i].offset + locs[i].phys);
        for (uint64_t j = 0; j < i; j++)
            if (locs[j].chunk == locs[i].chunk)
                ck_assert(locs[j].offset + locs[j].phys <= locs[i].offset ||
                          locs[i].offset + locs[i].phys <= locs[j].offset);
    }
    /* Records are packed: each chunk is exactly as long as its records,
     * and the frontier is the end of the last chunk's records. */
    for (uint64_t c = 0; c < nchunks; c++) {
        char name[32];
        snprintf(name, sizeof name, "%llu.chunk", (unsigned long long)c);
        char *chunk = zt_join(path, name);
        ck_assert_int_eq(zt_file_size(chunk), (int64_t)end[c]);
        ck_assert_uint_eq(used[c], end[c]);
        free(chunk);
    }
    ck_assert_uint_eq(m.tail_offset, end[nchunks - 1]);
    check_ragged_frames(path, seg_entries, "<i4", 81, n, 2, 16, dict, dict_len);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zt_check_ragged_all(s, 81, 2, 16);
    zr_close(s);
    free(end);
    free(used);
    free(locs);
    free(dict);
    free(path);
}
END_TEST

/* The bytes of Ragged record i of stream seed (shape prefix and payload),
 * as a gather writes them; *len receives their count. */
static uint8_t *ragged_bytes(const char *dtype, uint64_t seed, uint64_t i, uint32_t maxndim,
                             uint64_t maxdim, uint64_t *len)
{
    zt_ragged *r = zt_ragged_gen(dtype, seed, i, 1, maxndim, maxdim);
    uint32_t nd = r->recs[0].ndim;
    *len = 8 * (1 + (uint64_t)nd) + r->nbytes[0];
    uint8_t *b = malloc(*len);
    ck_assert_ptr_nonnull(b);
    uint64_t v = nd;
    memcpy(b, &v, 8); /* the tests run on little-endian hosts only */
    for (uint32_t d = 0; d < nd; d++)
        memcpy(b + 8 + 8 * d, &r->shapes[0][d], 8);
    memcpy(b + 8 * (1 + (uint64_t)nd), r->data[0], r->nbytes[0]);
    zt_ragged_free(r);
    return b;
}

/* A compressed gather decodes small records with room to spare after
 * them when the next record of the batch follows (lib/gather.c). Whatever
 * the layout, it must write exactly the records: records back to back in
 * request order, back to back in the reverse order, and one at a time into
 * buffers of exactly their size, with guard bytes all around. The records
 * run from 12 bytes to 14 KiB, so small and large, with and without room,
 * all occur; 600 random requests keep both threads busy with many
 * blocks. */
START_TEST(compressed_gathers_write_only_their_records)
{
    const uint32_t maxndim = 2;
    const uint64_t maxdim = 60, seed = 41, nrec = 200, n = 600, guard = 256;
    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD};
    char *path = zt_path("z");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<i4", &opts));
    zt_append_ragged_gen(s, seed, nrec, maxndim, maxdim);
    uint64_t *idx = malloc(n * sizeof *idx), *sizes = malloc(n * sizeof *sizes);
    uint64_t *offsets = malloc(n * sizeof *offsets);
    ck_assert(idx && sizes && offsets);
    uint64_t x = 7, total = 0;
    for (uint64_t k = 0; k < n; k++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        idx[k] = (x >> 33) % nrec;
    }
    ZR_OK_CALL(zr_ragged_sizes(s, idx, n, sizes));
    for (uint64_t k = 0; k < n; k++)
        total += sizes[k];
    uint8_t *buf = malloc(total + 2 * guard);
    ck_assert_ptr_nonnull(buf);
    for (int reverse = 0; reverse < 2; reverse++) {
        uint64_t at = 0;
        for (uint64_t k = 0; k < n; k++) {
            offsets[k] = reverse ? total - at - sizes[k] : at;
            offsets[k] += guard;
            at += sizes[k];
        }
        memset(buf, 0xa5, total + 2 * guard);
        ZR_OK_CALL(zr_gather_ragged(s, idx, n, buf, offsets));
        for (uint64_t g = 0; g < guard; g++) {
            ck_assert_uint_eq(buf[g], 0xa5);
            ck_assert_uint_eq(buf[guard + total + g], 0xa5);
        }
        for (uint64_t k = 0; k < n; k++) {
            uint64_t len;
            uint8_t *want = ragged_bytes("<i4", seed, idx[k], maxndim, maxdim, &len);
            ck_assert_uint_eq(len, sizes[k]);
            ck_assert_mem_eq(buf + offsets[k], want, len);
            free(want);
        }
    }
    for (uint64_t i = 0; i < nrec; i++) {
        uint64_t len;
        uint8_t *want = ragged_bytes("<i4", seed, i, maxndim, maxdim, &len);
        uint8_t *exact = malloc(len);
        ck_assert_ptr_nonnull(exact);
        const uint64_t zero = 0;
        ZR_OK_CALL(zr_gather_ragged(s, &i, 1, exact, &zero));
        ck_assert_mem_eq(exact, want, len);
        free(exact);
        free(want);
    }
    free(buf);
    /* Dense records of 20 bytes (less room than a decode takes) and of
     * 4 KiB, back to back, guard bytes after the batch. */
    const uint64_t widths[] = {5, 1024};
    for (int w = 0; w < 2; w++) {
        char *dpath = zt_path(w ? "d1" : "d0");
        zr_store *d;
        ZR_OK_CALL(zr_dense_create(&d, dpath, "<i4", &widths[w], 1, &opts));
        zt_append_dense_gen(d, seed, nrec);
        uint64_t width = widths[w] * 4;
        uint8_t *out = malloc(n * width + guard);
        uint8_t *want = zt_dense_gen("<i4", widths[w], seed, 0, nrec);
        ck_assert(out && want);
        memset(out, 0xa5, n * width + guard);
        ZR_OK_CALL(zr_gather_dense(d, idx, n, out));
        for (uint64_t k = 0; k < n; k++)
            ck_assert_mem_eq(out + k * width, want + idx[k] * width, width);
        for (uint64_t g = 0; g < guard; g++)
            ck_assert_uint_eq(out[n * width + g], 0xa5);
        free(want);
        free(out);
        zr_close(d);
        free(dpath);
    }
    free(offsets);
    free(sizes);
    free(idx);
    zr_close(s);
    free(path);
}
END_TEST

Suite *suite_codec(void)
{
    Suite *s = suite_create("codec");
    TCase *tc = tcase_create("codec");
    tcase_add_checked_fixture(tc, zt_setup, zt_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, tier_sizes_are_the_documented_ones);
    tcase_add_loop_test(tc, codec_is_recorded_in_the_header, ZR_CODEC_RAW, ZR_CODEC_ZSTD_DICT + 1);
    tcase_add_test(tc, zstd_dense_records_are_frames_of_their_own);
    tcase_add_test(tc, zstd_ragged_records_frame_prefix_and_payload_together);
    tcase_add_test(tc, small_records_keep_a_huffman_table_only_where_it_pays);
    tcase_add_loop_test(tc, dictionary_tiers_train_from_a_buffer, ZR_TIER_FAST, ZR_TIER_MAX + 1);
    tcase_add_test(tc, dictionary_trains_from_a_list_of_records);
    tcase_add_test(tc, dictionary_trains_from_an_open_store);
    tcase_add_test(tc, dictionary_training_refuses_what_it_cannot_use);
    tcase_add_test(tc, dictionary_shrinks_small_records);
    tcase_add_loop_test(tc, compressed_records_never_straddle_chunks, 0, 2);
    tcase_add_test(tc, compressed_gathers_write_only_their_records);
    suite_add_tcase(s, tc);
    return s;
}

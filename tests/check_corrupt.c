/*
 * check_corrupt.c: damaged stores. Each test builds a sound store, damages
 * one thing in its files the way a disk, a crash or a careless tool might,
 * and checks that the library answers ZR_ECORRUPT with a message naming
 * the file (at open, or at the gather that reaches the damage), never a
 * crash and never a wrong record; records the damage does not reach still
 * read back exactly.
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

#define SEED 100
/* Dense test stores hold "<u4" records of 8 items: 32 bytes each. */
static const uint64_t dense_shape[] = {8};
#define WIDTH 32

static char *make_dense(int codec, uint64_t n)
{
    void *dict = NULL;
    size_t dict_len = 0;
    if (codec == ZR_CODEC_ZSTD_DICT) {
        void *sample = zt_dense_gen("<u4", 8, SEED, 0, 1000);
        ZR_OK_CALL(zr_train_dict_buffer(sample, WIDTH, 1000, ZR_TIER_FAST, &dict, &dict_len));
        free(sample);
    }
    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = codec, .dict = dict,
                           .dict_len = dict_len};
    char *path = zt_path("s");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "<u4", dense_shape, 1, &opts));
    zt_append_dense_gen(s, SEED, n);
    zr_close(s);
    free(dict);
    return path;
}

static char *make_ragged(int codec, uint64_t n)
{
    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = codec};
    char *path = zt_path("r");
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<i2", &opts));
    zt_append_ragged_gen(s, SEED, n, 3, 5);
    zr_close(s);
    return path;
}

static void file_in(const char *store, const char *name, char **out)
{
    *out = zt_join(store, name);
}

/* Opening must fail with ZR_ECORRUPT, name what, and give no handle. */
static void expect_open_corrupt(const char *path, int mode, const char *what)
{
    zr_store *s = (zr_store *)&s; /* must be reset to NULL */
    int rc = zr_open(&s, path, mode);
    ck_assert_msg(rc == ZR_ECORRUPT, "open (%s) returned %d: %s", mode ? "rw" : "ro", rc,
                  zr_last_error());
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(zr_last_error(), what) != NULL, "message '%s' does not name %s",
                  zr_last_error(), what);
    ck_assert_int_eq(zr_last_error_code(), ZR_ECORRUPT);
}

static void expect_open_corrupt_both(const char *path, const char *what)
{
    expect_open_corrupt(path, ZR_RDONLY, what);
    expect_open_corrupt(path, ZR_RDWR, what);
}

/* A Dense gather of record i must fail with ZR_ECORRUPT naming its entry;
 * so must a batch that contains it. */
static void expect_dense_gather_corrupt(zr_store *s, uint64_t i)
{
    uint8_t dst[4 * WIDTH];
    ZR_FAIL_CALL(zr_gather_dense(s, &i, 1, dst), ZR_ECORRUPT);
    char want[64];
    snprintf(want, sizeof want, "(record %llu)", (unsigned long long)i);
    ck_assert_msg(strstr(zr_last_error(), ".loc entry") && strstr(zr_last_error(), want),
                  "message '%s' does not name the entry of record %llu", zr_last_error(),
                  (unsigned long long)i);
    const uint64_t batch[4] = {0, i, 1, i};
    ZR_FAIL_CALL(zr_gather_dense(s, batch, 4, dst), ZR_ECORRUPT);
}

static void expect_ragged_gather_corrupt(zr_store *s, uint64_t i)
{
    uint64_t size;
    ZR_OK_CALL(zr_ragged_sizes(s, &i, 1, &size));
    uint8_t *dst = malloc(size + 8);
    ck_assert_ptr_nonnull(dst);
    const uint64_t off = 0;
    ZR_FAIL_CALL(zr_gather_ragged(s, &i, 1, dst, &off), ZR_ECORRUPT);
    ck_assert_msg(strstr(zr_last_error(), ".loc entry") != NULL, "message '%s'", zr_last_error());
    zr_ragged_batch *b = (zr_ragged_batch *)&b;
    const uint64_t batch[3] = {0, i, 0};
    ZR_FAIL_CALL(zr_gather_ragged_alloc(s, batch, 3, &b), ZR_ECORRUPT);
    ck_assert_ptr_null(b);
    free(dst);
}

/* Every record but the damaged ones still reads back exactly. */
static void check_dense_except(zr_store *s, uint64_t bad)
{
    for (uint64_t i = 0; i < zr_len(s); i++)
        if (i != bad)
            zt_check_dense_idx(s, SEED, &i, 1);
}

/* A writer opens a store whose header counts records past the end of the
 * files (the appends a power cut lost, doc/format.md R15) with the
 * longest prefix of records the files hold, and makes that durable. */
static void expect_writer_cut(const char *path, uint64_t n)
{
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
    ck_assert_uint_eq(zr_len(s), n);
    for (uint64_t i = 0; i < n; i++)
        zt_check_dense_idx(s, SEED, &i, 1);
    zr_verify_report *rep;
    ZR_OK_CALL(zr_verify(s, &rep));
    zr_verify_report_free(rep);
    zr_close(s);
    ck_assert_uint_eq(zt_meta_read(path).length, n);
}

START_TEST(truncated_chunk_is_refused_by_readers_and_cut_off_by_writers)
{
    int codec = (int)_i;
    char *path = make_dense(codec, 20), *chunk;
    file_in(path, "0.chunk", &chunk);
    int64_t size = zt_file_size(chunk);
    ck_assert_int_eq(truncate(chunk, size - 5), 0);
    /* A reader opens; the cut record is refused, the others are intact. */
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    uint64_t last = 0;
    for (uint64_t i = 0; i < 20; i++) {
        zt_loc l = zt_loc_read(path, 0, i);
        if (l.offset + l.phys > (uint64_t)size - 5)
            last = i; /* the record that reached the old end */
    }
    ck_assert_uint_eq(zt_loc_read(path, 0, last).offset + zt_loc_read(path, 0, last).phys,
                      (uint64_t)size);
    expect_dense_gather_corrupt(s, last);
    check_dense_except(s, last);
    zr_close(s);
    /* A writer keeps the records before it. */
    expect_writer_cut(path, last);
    free(chunk);
    free(path);
}
END_TEST

/* Entries whose fields point outside the files or contradict the store. */
static const struct {
    const char *what;
    int field;     /* 0 offset, 1 phys, 2 logic, 3 chunk */
    uint32_t value;
} bad_entries[] = {
    {"offset past the chunk's end", 0, 20 * WIDTH},
    {"offset near 2^32", 0, 0xfffffff0u},
    {"length past the chunk's end", 1, 20 * WIDTH},
    {"length near 2^32", 1, 0xffffffffu},
    {"zero length", 1, 0},
    {"logical length not the record width", 2, WIDTH + 1},
    {"zero logical length", 2, 0},
    {"chunk that does not exist", 3, 1},
    {"chunk id near 2^32", 3, 0xffffffffu},
};

START_TEST(entry_pointing_outside_the_files_is_corrupt)
{
    char *path = make_dense(ZR_CODEC_RAW, 20), *loc;
    file_in(path, "0.loc", &loc);
    uint8_t v[4];
    for (int b = 0; b < 4; b++)
        v[b] = (uint8_t)(bad_entries[_i].value >> (8 * b));
    zt_patch(loc, 7 * 16 + 4 * (uint64_t)bad_entries[_i].field, v, 4);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    expect_dense_gather_corrupt(s, 7);
    ck_assert_msg(strstr(zr_last_error(), "0.loc") != NULL, "%s", zr_last_error());
    check_dense_except(s, 7);
    zr_close(s);
    free(loc);
    free(path);
}
END_TEST

/* A raw entry whose stored and logical lengths differ is impossible. */
START_TEST(raw_entry_with_different_lengths_is_corrupt)
{
    char *path = make_ragged(ZR_CODEC_RAW, 10), *loc;
    file_in(path, "0.loc", &loc);
    zt_loc l = zt_loc_read(path, 0, 4);
    uint8_t v[4];
    uint32_t shorter = l.phys - 1;
    for (int b = 0; b < 4; b++)
        v[b] = (uint8_t)(shorter >> (8 * b));
    zt_patch(loc, 4 * 16 + 4, v, 4);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    uint64_t i = 4, size;
    ZR_FAIL_CALL(zr_ragged_sizes(s, &i, 1, &size), ZR_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "0.loc"));
    uint8_t dst[512];
    const uint64_t off = 0;
    ZR_FAIL_CALL(zr_gather_ragged(s, &i, 1, dst, &off), ZR_ECORRUPT);
    zt_check_ragged_idx(s, SEED, (const uint64_t[]){0, 3, 5, 9}, 4, 3, 5);
    zr_close(s);
    free(loc);
    free(path);
}
END_TEST

START_TEST(unknown_codec_byte_is_corrupt)
{
    char *path = make_dense(ZR_CODEC_RAW, 5), *meta;
    file_in(path, "meta.zr", &meta);
    const uint8_t codecs[] = {3, 0x80, 0xff};
    for (size_t k = 0; k < sizeof codecs; k++) {
        zt_patch(meta, 16, &codecs[k], 1);
        expect_open_corrupt_both(path, "meta.zr");
    }
    free(meta);
    free(path);
}
END_TEST

START_TEST(reserved_header_bytes_must_be_zero)
{
    char *path = make_dense(ZR_CODEC_RAW, 5), *meta;
    file_in(path, "meta.zr", &meta);
    const uint8_t one = 1, zero = 0;
    for (uint64_t off = 17; off < 32; off++) {
        zt_patch(meta, off, &one, 1);
        expect_open_corrupt_both(path, "meta.zr");
        zt_patch(meta, off, &zero, 1);
    }
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY)); /* restored, it opens */
    zt_check_dense_all(s, SEED);
    zr_close(s);
    free(meta);
    free(path);
}
END_TEST

START_TEST(meta_of_the_wrong_size_is_corrupt)
{
    char *path = make_dense(ZR_CODEC_RAW, 5), *meta;
    file_in(path, "meta.zr", &meta);
    size_t len;
    uint8_t *good = zt_slurp(meta, &len);
    ck_assert_uint_eq(len, 32);
    uint8_t longer[64] = {0};
    memcpy(longer, good, 32);
    const size_t sizes[] = {0, 16, 31, 33, 64};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        zt_spit(meta, longer, sizes[k]);
        expect_open_corrupt_both(path, "meta.zr");
    }
    free(good);
    free(meta);
    free(path);
}
END_TEST

START_TEST(header_length_beyond_the_record_table_is_refused_or_cut_off)
{
    char *path = make_dense(ZR_CODEC_RAW, 20), *meta;
    file_in(path, "meta.zr", &meta);
    const uint8_t len21[8] = {21};
    zt_patch(meta, 0, len21, 8);
    /* A reader counts only the records with an entry. */
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    ck_assert_uint_eq(zr_len(s), 20);
    check_dense_except(s, 20);
    zr_close(s);
    expect_writer_cut(path, 20);
    /* A length past what any table can hold is damage. */
    const uint8_t huge[8] = {0, 0, 0, 0, 0, 0, 0, 0x80};
    zt_patch(meta, 0, huge, 8);
    expect_open_corrupt_both(path, "meta.zr");
    free(meta);
    free(path);
}
END_TEST

START_TEST(header_tail_chunk_that_does_not_exist_is_corrupt)
{
    char *path = make_dense(ZR_CODEC_RAW, 20), *meta;
    file_in(path, "meta.zr", &meta);
    const uint8_t one[4] = {1};
    zt_patch(meta, 8, one, 4);
    expect_open_corrupt_both(path, "1.chunk");
    const uint8_t far[4] = {0xff, 0xff, 0xff, 0xff};
    zt_patch(meta, 8, far, 4);
    expect_open_corrupt_both(path, "meta.zr");
    free(meta);
    free(path);
}
END_TEST

START_TEST(header_frontier_past_the_chunk_end_is_corrupt)
{
    char *path = make_dense(ZR_CODEC_RAW, 20), *meta;
    file_in(path, "meta.zr", &meta);
    const uint8_t past[4] = {(20 * WIDTH + 1) & 0xff, (20 * WIDTH + 1) >> 8};
    zt_patch(meta, 12, past, 4);
    expect_open_corrupt(path, ZR_RDWR, "0.chunk");
    free(meta);
    free(path);
}
END_TEST

/* The bytes of store.zr variants. The sound one, for a "<u4" store of
 * item shape (8), is {"dtype": "<u4", "item_shape": [8]}. */
#define K_DTYPE 0xa5, 'd', 't', 'y', 'p', 'e'
#define V_U4 0xa3, '<', 'u', '4'
#define K_SHAPE 0xaa, 'i', 't', 'e', 'm', '_', 's', 'h', 'a', 'p', 'e'
#define BYTES(...) (const uint8_t[]){__VA_ARGS__}, sizeof((const uint8_t[]){__VA_ARGS__})
static const struct {
    const char *what;
    const uint8_t *bytes;
    size_t len;
} bad_identities[] = {
    {"bytes that are not msgpack", BYTES(0xc1, 0xc1, 0xc1, 0xc1)},
    {"text that is not a map", BYTES('h', 'e', 'l', 'l', 'o')},
    {"an empty file", (const uint8_t[]){0}, 0},
    {"a map cut short", BYTES(0x82, K_DTYPE, V_U4, K_SHAPE, 0x91)},
    {"a wrong key", BYTES(0x82, 0xa4, 'd', 't', 'y', 'p', V_U4, K_SHAPE, 0x91, 8)},
    {"an extra key", BYTES(0x83, K_DTYPE, V_U4, K_SHAPE, 0x91, 8, 0xa1, 'x', 1)},
    {"a repeated key", BYTES(0x82, K_DTYPE, V_U4, K_DTYPE, V_U4)},
    {"no dtype", BYTES(0x81, K_SHAPE, 0x91, 8)},
    {"a bad dtype", BYTES(0x82, K_DTYPE, 0xa3, '<', 'u', '3', K_SHAPE, 0x91, 8)},
    {"a dtype that is not a string", BYTES(0x82, K_DTYPE, 4, K_SHAPE, 0x91, 8)},
    {"a dtype holding a NUL", BYTES(0x82, K_DTYPE, 0xa3, '<', 0, '4', K_SHAPE, 0x91, 8)},
    {"a zero dimension", BYTES(0x82, K_DTYPE, V_U4, K_SHAPE, 0x91, 0)},
    {"a negative dimension", BYTES(0x82, K_DTYPE, V_U4, K_SHAPE, 0x91, 0xff)},
    {"a shape that is not an array", BYTES(0x82, K_DTYPE, V_U4, K_SHAPE, 8)},
    {"33 dimensions", BYTES(0x82, K_DTYPE, V_U4, K_SHAPE, 0xdc, 0, 33, 1, 1, 1, 1, 1, 1, 1, 1,
                            1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                            1, 1)},
    {"records over 2 GiB", BYTES(0x82, K_DTYPE, V_U4, K_SHAPE, 0x92, 0xcd, 0xff, 0xff, 0xcd, 0xff,
                                 0xff)},
    {"trailing bytes", BYTES(0x82, K_DTYPE, V_U4, K_SHAPE, 0x91, 8, 0xc0)},
    {"an array claiming 2^32-1 elements",
     BYTES(0x82, K_DTYPE, V_U4, K_SHAPE, 0xdd, 0xff, 0xff, 0xff, 0xff)},
    {"a map claiming 2^32-1 pairs", BYTES(0xdf, 0xff, 0xff, 0xff, 0xff, K_DTYPE, V_U4)},
    {"a string claiming 4 GiB", BYTES(0x81, K_DTYPE, 0xdb, 0xff, 0xff, 0xff, 0xff, '<')},
    {"arrays nested 40 deep",
     BYTES(0x81, K_DTYPE, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91,
           0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91,
           0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 1)},
};

START_TEST(malformed_identity_is_corrupt)
{
    char *path = make_dense(ZR_CODEC_RAW, 5), *id;
    file_in(path, "store.zr", &id);
    zt_spit(id, bad_identities[_i].bytes, bad_identities[_i].len);
    expect_open_corrupt_both(path, "store.zr");
    free(id);
    free(path);
}
END_TEST

/* The sound identity, written by the test, opens: the variants above
 * differ from a working store.zr only in what they break. */
START_TEST(handwritten_identity_opens)
{
    char *path = make_dense(ZR_CODEC_RAW, 5), *id;
    file_in(path, "store.zr", &id);
    const uint8_t good[] = {0x82, K_DTYPE, V_U4, K_SHAPE, 0x91, 8};
    size_t len;
    uint8_t *written = zt_slurp(id, &len);
    ck_assert_uint_eq(len, sizeof good);
    ck_assert_mem_eq(written, good, sizeof good);
    zt_spit(id, good, sizeof good);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zt_check_dense_all(s, SEED);
    zr_close(s);
    free(written);
    free(id);
    free(path);
}
END_TEST

START_TEST(missing_dictionary_is_corrupt)
{
    char *path = make_dense(ZR_CODEC_ZSTD_DICT, 10), *dict;
    file_in(path, "dict.zr", &dict);
    ck_assert_int_eq(unlink(dict), 0);
    expect_open_corrupt_both(path, "dict.zr");
    zt_spit(dict, "", 0);
    expect_open_corrupt_both(path, "dict.zr");
    free(dict);
    free(path);
}
END_TEST

START_TEST(dictionary_in_a_store_without_one_is_corrupt)
{
    int codec = _i ? ZR_CODEC_ZSTD : ZR_CODEC_RAW;
    char *path = make_dense(codec, 10), *dict;
    file_in(path, "dict.zr", &dict);
    const uint8_t junk[] = {0x37, 0xa4, 0x30, 0xec, 1, 2, 3, 4};
    zt_spit(dict, junk, sizeof junk);
    expect_open_corrupt_both(path, "dict.zr");
    free(dict);
    free(path);
}
END_TEST

/* A dictionary replaced by another: the frames name a dictionary the store
 * no longer has, so every record fails, none decodes to wrong bytes. */
START_TEST(replaced_dictionary_fails_every_gather)
{
    char *path = make_dense(ZR_CODEC_ZSTD_DICT, 10), *dict;
    file_in(path, "dict.zr", &dict);
    void *sample = zt_dense_gen("<u4", 8, SEED + 1, 0, 1000), *other;
    size_t other_len;
    ZR_OK_CALL(zr_train_dict_buffer(sample, WIDTH, 1000, ZR_TIER_FAST, &other, &other_len));
    zt_spit(dict, other, other_len);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    for (uint64_t i = 0; i < 10; i++)
        expect_dense_gather_corrupt(s, i);
    zr_close(s);
    free(other);
    free(sample);
    free(dict);
    free(path);
}
END_TEST

/* Shape prefixes that cannot describe the record they head. The record
 * chosen is record 2 of a raw "<i2" Ragged store; its prefix is replaced
 * in the chunk, its entry left alone. */
static const struct {
    const char *what;
    uint64_t words[4]; /* the first four u64 of the record */
    int nwords;
} bad_prefixes[] = {
    {"more dimensions than allowed", {33}, 1},
    {"a prefix longer than the record", {30}, 1},
    {"dimensions that overflow", {2, (uint64_t)1 << 40, (uint64_t)1 << 40}, 3},
    {"a zero dimension", {1, 0}, 2},
    {"one item too many", {1, 0}, 2}, /* dims[0] patched below */
    {"dimensions over 2 GiB", {1, (uint64_t)1 << 31}, 2},
    {"ndim near 2^64", {UINT64_MAX}, 1},
};

START_TEST(impossible_ragged_prefix_is_corrupt)
{
    /* Record 3 has shape (5,): 26 bytes, room for every variant; the
     * records around it are generated as usual. */
    char *path = zt_path("r"), *chunk;
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<i2", NULL));
    zt_append_ragged_gen(s, SEED, 3, 3, 5);
    const uint64_t five = 5;
    uint8_t payload[10];
    zt_fill(payload, "<i2", 5, SEED, 3);
    const zr_rec rec = {.data = payload, .shape = &five, .ndim = 1};
    ZR_OK_CALL(zr_append_ragged(s, "<i2", &rec, 1, NULL));
    zt_append_ragged_gen(s, SEED, 4, 3, 5);
    zr_close(s);

    uint64_t words[4];
    memcpy(words, bad_prefixes[_i].words, sizeof words);
    if (strcmp(bad_prefixes[_i].what, "one item too many") == 0)
        words[1] = 6;
    uint8_t raw[32];
    for (int w = 0; w < bad_prefixes[_i].nwords; w++)
        for (int b = 0; b < 8; b++)
            raw[8 * w + b] = (uint8_t)(words[w] >> (8 * b));
    const uint64_t i = 3;
    zt_loc l = zt_loc_read(path, 0, i);
    ck_assert_uint_eq(l.phys, 26);
    file_in(path, "0.chunk", &chunk);
    zt_patch(chunk, l.offset, raw, 8 * (size_t)bad_prefixes[_i].nwords);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    expect_ragged_gather_corrupt(s, i);
    const uint64_t others[] = {0, 1, 2, 4, 5, 6, 7};
    zt_check_ragged_idx(s, SEED, others, 7, 3, 5);
    zr_close(s);
    free(chunk);
    free(path);
}
END_TEST

/* Flip one byte in the middle of a compressed record's frame. */
START_TEST(flipped_frame_byte_is_corrupt)
{
    int codec = _i ? ZR_CODEC_ZSTD_DICT : ZR_CODEC_ZSTD;
    char *path = make_dense(codec, 12), *chunk;
    file_in(path, "0.chunk", &chunk);
    zt_loc l = zt_loc_read(path, 0, 5);
    ck_assert_uint_gt(l.phys, 12);
    size_t len;
    uint8_t *bytes = zt_slurp(chunk, &len);
    uint8_t flipped = bytes[l.offset + l.phys / 2] ^ 0x10;
    zt_patch(chunk, l.offset + l.phys / 2, &flipped, 1);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    expect_dense_gather_corrupt(s, 5);
    check_dense_except(s, 5);
    zr_close(s);
    free(bytes);
    free(chunk);
    free(path);
}
END_TEST

/* Damage each byte of one frame in turn: a gather of that record either
 * fails with ZR_ECORRUPT or, when the byte did not matter (a header flag
 * whose loss the frame survives), returns the exact record. Never a wrong
 * record, never a crash. */
START_TEST(any_damaged_frame_byte_never_gives_a_wrong_record)
{
    int codec = _i ? ZR_CODEC_ZSTD_DICT : ZR_CODEC_ZSTD;
    char *path = make_dense(codec, 12), *chunk;
    file_in(path, "0.chunk", &chunk);
    zt_loc l = zt_loc_read(path, 0, 5);
    size_t len;
    uint8_t *bytes = zt_slurp(chunk, &len);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    uint8_t want[WIDTH], got[WIDTH];
    zt_fill(want, "<u4", 8, SEED, 5);
    const uint64_t i = 5;
    int failures = 0;
    for (uint32_t k = 0; k < l.phys; k++) {
        static const uint8_t masks[] = {0x01, 0x80, 0xff};
        for (size_t m = 0; m < sizeof masks; m++) {
            uint8_t b = bytes[l.offset + k] ^ masks[m];
            zt_patch(chunk, l.offset + k, &b, 1);
            memset(got, 0, sizeof got);
            int rc = zr_gather_dense(s, &i, 1, got);
            ck_assert_msg(rc == ZR_ECORRUPT || (rc == 0 && memcmp(got, want, WIDTH) == 0),
                          "byte %u ^ 0x%02x: rc %d, record %s", k, masks[m], rc,
                          rc == 0 ? "wrong" : "-");
            failures += rc == ZR_ECORRUPT;
            zt_patch(chunk, l.offset + k, &bytes[l.offset + k], 1);
        }
    }
    ck_assert_int_gt(failures, (int)l.phys); /* most damage is detected */
    zt_check_dense_all(s, SEED);             /* restored, everything reads */
    zr_close(s);
    free(bytes);
    free(chunk);
    free(path);
}
END_TEST

START_TEST(missing_record_table_segment_is_corrupt)
{
    zr_testing_set_geometry(0, 8);
    char *path = make_dense(ZR_CODEC_RAW, 20), *seg;
    file_in(path, "1.loc", &seg);
    size_t len;
    uint8_t *bytes = zt_slurp(seg, &len);
    ck_assert_uint_eq(len, 8 * 16);
    ck_assert_int_eq(unlink(seg), 0);
    expect_open_corrupt_both(path, "1.loc");
    /* A segment cut short is as bad as a missing one when a later one
     * holds entries. */
    zt_spit(seg, bytes, len - 16);
    expect_open_corrupt_both(path, "1.loc");
    /* The last segment cut short is the table of an append a power cut
     * lost: a reader counts the records with an entry, a writer cuts the
     * others off. */
    char *last;
    file_in(path, "2.loc", &last);
    zt_spit(seg, bytes, len);
    ck_assert_int_eq(truncate(last, 3 * 16), 0);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    ck_assert_uint_eq(zr_len(s), 19);
    check_dense_except(s, 19);
    zr_close(s);
    expect_writer_cut(path, 19);
    free(last);
    free(bytes);
    free(seg);
    free(path);
}
END_TEST

START_TEST(missing_chunk_file_is_corrupt)
{
    zr_testing_set_geometry(8 * WIDTH, 0);
    char *path = make_dense(ZR_CODEC_RAW, 20), *chunk;
    ck_assert_uint_eq(zt_meta_read(path).tail_chunk, 2);
    file_in(path, "1.chunk", &chunk);
    ck_assert_int_eq(unlink(chunk), 0);
    expect_open_corrupt_both(path, "1.chunk");
    free(chunk);
    free(path);
}
END_TEST

START_TEST(missing_first_chunk_is_corrupt)
{
    char *path = make_dense(ZR_CODEC_RAW, 3), *chunk;
    file_in(path, "0.chunk", &chunk);
    ck_assert_int_eq(unlink(chunk), 0);
    expect_open_corrupt_both(path, "0.chunk");
    free(chunk);
    free(path);
}
END_TEST

START_TEST(missing_header_is_corrupt)
{
    char *path = make_dense(ZR_CODEC_RAW, 3), *meta;
    file_in(path, "meta.zr", &meta);
    ck_assert_int_eq(unlink(meta), 0);
    expect_open_corrupt_both(path, "meta.zr");
    free(meta);
    free(path);
}
END_TEST

/* Records wider than a chunk can hold cannot come from an append; a
 * store whose header and entries say otherwise (here written with 8 KiB
 * chunks and read with 4 KiB ones, its frontier moved below 4 KiB) is
 * corrupt to every gather, which must say so rather than divide by the
 * number of records a chunk holds. */
START_TEST(records_wider_than_a_chunk_are_corrupt)
{
    zr_testing_set_geometry(8192, 0);
    char *path = zt_path("wide");
    zr_store *s;
    const uint64_t shape[] = {1250}; /* 5000 bytes */
    ZR_OK_CALL(zr_dense_create(&s, path, "<u4", shape, 1, NULL));
    zt_append_dense_gen(s, 8, 1);
    zr_close(s);
    char *meta = zt_join(path, "meta.zr");
    const uint8_t tail[4] = {0x00, 0x08, 0, 0}; /* tail_offset 2048 */
    zt_patch(meta, 12, tail, sizeof tail);
    zr_testing_set_geometry(4096, 0);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    uint8_t out[2][5000];
    const uint64_t idx[] = {0, 0};
    ZR_FAIL_CALL(zr_gather_dense(s, idx, 1, out), ZR_ECORRUPT);
    ZR_FAIL_CALL(zr_gather_dense(s, idx, 2, out), ZR_ECORRUPT);
    zr_close(s);
    free(meta);
    free(path);
}
END_TEST

Suite *suite_corrupt(void)
{
    Suite *s = suite_create("corrupt");
    TCase *tc = tcase_create("corrupt");
    tcase_add_checked_fixture(tc, zt_setup, zt_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, truncated_chunk_is_refused_by_readers_and_cut_off_by_writers, ZR_CODEC_RAW, ZR_CODEC_ZSTD_DICT + 1);
    tcase_add_loop_test(tc, entry_pointing_outside_the_files_is_corrupt, 0,
                        sizeof bad_entries / sizeof bad_entries[0]);
    tcase_add_test(tc, raw_entry_with_different_lengths_is_corrupt);
    tcase_add_test(tc, unknown_codec_byte_is_corrupt);
    tcase_add_test(tc, reserved_header_bytes_must_be_zero);
    tcase_add_test(tc, meta_of_the_wrong_size_is_corrupt);
    tcase_add_test(tc, header_length_beyond_the_record_table_is_refused_or_cut_off);
    tcase_add_test(tc, header_tail_chunk_that_does_not_exist_is_corrupt);
    tcase_add_test(tc, header_frontier_past_the_chunk_end_is_corrupt);
    tcase_add_loop_test(tc, malformed_identity_is_corrupt, 0,
                        sizeof bad_identities / sizeof bad_identities[0]);
    tcase_add_test(tc, handwritten_identity_opens);
    tcase_add_test(tc, missing_dictionary_is_corrupt);
    tcase_add_loop_test(tc, dictionary_in_a_store_without_one_is_corrupt, 0, 2);
    tcase_add_test(tc, replaced_dictionary_fails_every_gather);
    tcase_add_loop_test(tc, impossible_ragged_prefix_is_corrupt, 0,
                        sizeof bad_prefixes / sizeof bad_prefixes[0]);
    tcase_add_loop_test(tc, flipped_frame_byte_is_corrupt, 0, 2);
    tcase_add_loop_test(tc, any_damaged_frame_byte_never_gives_a_wrong_record, 0, 2);
    tcase_add_test(tc, missing_record_table_segment_is_corrupt);
    tcase_add_test(tc, missing_chunk_file_is_corrupt);
    tcase_add_test(tc, missing_first_chunk_is_corrupt);
    tcase_add_test(tc, missing_header_is_corrupt);
    tcase_add_test(tc, records_wider_than_a_chunk_are_corrupt);
    suite_add_tcase(s, tc);
    return s;
}

/* check_format.c: dtype spellings and the header and identity encodings. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "tests/helpers.h"
#include "tests/suites.h"

START_TEST(dtype_spellings_give_numpy_item_sizes)
{
    static const struct { const char *s; int64_t size; } ok[] = {
        {"|b1", 1}, {"|i1", 1}, {"|u1", 1}, {"<i2", 2}, {">u2", 2}, {"<i4", 4}, {"<u8", 8},
        {"<f2", 2}, {"<f4", 4}, {">f8", 8}, {"<c8", 8}, {"<c16", 16}, {"|S10", 10},
        {"|V16", 16}, {"<U3", 12},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        ck_assert_int_eq(zr_dtype_itemsize(ok[i].s), ok[i].size);
    static const char *bad[] = {"", "f4", "<f3", "<u1", "|f4", "<b1", "<i16", "|S0",
                                "|S01", "<O8", "<f4 ", "=f4", "<M8[ns]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_int_eq(zr_dtype_itemsize(bad[i]), ZR_EINVAL);
    ck_assert_int_eq(zr_dtype_itemsize(NULL), ZR_EINVAL);
}
END_TEST

START_TEST(header_is_little_endian_at_fixed_offsets)
{
    struct zr_header h = {.length = 0x0102030405060708ull, .tail_chunk = 0x0a0b0c0d,
                          .tail_offset = 0x11121314, .codec = ZR_CODEC_ZSTD_DICT};
    uint8_t raw[ZR_HEADER_SIZE];
    zr_header_encode(&h, raw);
    static const uint8_t expect[ZR_HEADER_SIZE] = {
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x0d, 0x0c, 0x0b,
        0x0a, 0x14, 0x13, 0x12, 0x11, 0x02};
    ck_assert_mem_eq(raw, expect, ZR_HEADER_SIZE);
    struct zr_header back;
    ck_assert_int_eq(zr_header_decode(raw, &back), 0);
    ck_assert_uint_eq(back.length, h.length);
    ck_assert_uint_eq(back.tail_chunk, h.tail_chunk);
    ck_assert_uint_eq(back.tail_offset, h.tail_offset);
    raw[16] = 3;
    ck_assert_int_eq(zr_header_decode(raw, &back), ZR_ECORRUPT);
    raw[16] = 0;
    raw[31] = 1;
    ck_assert_int_eq(zr_header_decode(raw, &back), ZR_ECORRUPT);
}
END_TEST

START_TEST(identity_round_trips_through_msgpack)
{
    struct zr_identity id = {.kind = ZR_DENSE, .dtype = "<f4", .itemsize = 4, .ndim = 3,
                             .shape = {3, 224, 224}};
    void *buf;
    size_t len;
    ck_assert_int_eq(zr_identity_encode(&id, &buf, &len), 0);
    /* {"dtype": "<f4", "item_shape": [3, 224, 224]} as Python's msgpack packs it */
    const uint8_t py[] = {0x82, 0xa5, 'd', 't', 'y', 'p', 'e', 0xa3, '<', 'f', '4', 0xaa, 'i', 't',
                          'e', 'm', '_', 's', 'h', 'a', 'p', 'e', 0x93, 0x03, 0xcc, 0xe0, 0xcc, 0xe0};
    ck_assert_uint_eq(len, sizeof py);
    ck_assert_mem_eq(buf, py, sizeof py);
    struct zr_identity back;
    ck_assert_int_eq(zr_identity_decode(buf, len, &back), 0);
    ck_assert_int_eq(back.kind, ZR_DENSE);
    ck_assert_str_eq(back.dtype, "<f4");
    ck_assert_uint_eq(back.ndim, 3);
    ck_assert_uint_eq(back.shape[1], 224);
    free(buf);
}
END_TEST

Suite *suite_format(void)
{
    Suite *s = suite_create("format");
    TCase *tc = tcase_create("format");
    tcase_add_test(tc, dtype_spellings_give_numpy_item_sizes);
    tcase_add_test(tc, header_is_little_endian_at_fixed_offsets);
    tcase_add_test(tc, identity_round_trips_through_msgpack);
    suite_add_tcase(s, tc);
    return s;
}

/* check_decimal.c: the decimal parser zr and zrecordfs share
 * (common/decimal.c). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/decimal.h"
#include "tests/suites.h"

/* s copied into a buffer of exactly strlen(s) bytes, with no NUL after
 * it, so that a read past the length is caught by the sanitizers. */
static char *exact(const char *s)
{
    size_t n = strlen(s);
    char *b = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(b);
    memcpy(b, s, n);
    return b;
}

/* dec_parse of the whole of s. */
static bool parse(const char *s, bool canonical, uint64_t *out)
{
    char *b = exact(s);
    bool ok = dec_parse(b, strlen(s), canonical, out);
    free(b);
    return ok;
}

START_TEST(take_stops_at_the_first_byte_that_is_not_a_digit)
{
    static const struct {
        const char *s;
        size_t taken;
        uint64_t v;
    } cases[] = {
        {"123", 3, 123}, {"123 4", 3, 123}, {"7,8", 1, 7},     {"0x1", 1, 0},
        {"12a", 2, 12},  {"", 0, 0},        {" 1", 0, 0},      {"+1", 0, 0},
        {"-1", 0, 0},    {"1.5", 1, 1},     {"\xd9\xa1", 0, 0}, {"00042", 5, 42},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *b = exact(cases[k].s);
        uint64_t v = 0;
        size_t n = dec_take(b, strlen(cases[k].s), &v);
        ck_assert_msg(n == cases[k].taken, "'%s' took %zu", cases[k].s, n);
        ck_assert_uint_eq(v, cases[k].v);
        free(b);
    }
}
END_TEST

START_TEST(take_reads_no_further_than_the_length)
{
    uint64_t v = 0;
    ck_assert_uint_eq(dec_take("12345", 2, &v), 2);
    ck_assert_uint_eq(v, 12);
    v = 0;
    ck_assert_uint_eq(dec_take("9", 0, &v), 0);
    ck_assert_uint_eq(v, 0);
}
END_TEST

START_TEST(take_continues_a_number_cut_between_buffers)
{
    uint64_t v = 0;
    ck_assert_uint_eq(dec_take("1844674407", 10, &v), 10);
    ck_assert_uint_eq(dec_take("3709551615", 10, &v), 10);
    ck_assert_uint_eq(v, UINT64_MAX);
    v = 0;
    ck_assert_uint_eq(dec_take("12", 2, &v), 2);
    ck_assert_uint_eq(dec_take("34 5", 4, &v), 2);
    ck_assert_uint_eq(v, 1234);
}
END_TEST

START_TEST(take_refuses_a_value_past_2_to_the_64)
{
    static const char *const big[] = {"18446744073709551616", "18446744073709551620",
                                      "99999999999999999999", "100000000000000000000",
                                      "340282366920938463463374607431768211456"};
    for (size_t k = 0; k < sizeof big / sizeof big[0]; k++) {
        uint64_t v = 0;
        ck_assert_msg(dec_take(big[k], strlen(big[k]), &v) == DEC_TOO_BIG, "%s", big[k]);
    }
    /* Past 2^64 - 1 across a cut, too. */
    uint64_t v = 0;
    ck_assert_uint_eq(dec_take("1844674407370955161", 19, &v), 19);
    ck_assert_uint_eq(dec_take("6", 1, &v), DEC_TOO_BIG);
    v = UINT64_MAX;
    ck_assert_uint_eq(dec_take("0", 1, &v), DEC_TOO_BIG);
    v = UINT64_MAX;
    ck_assert_uint_eq(dec_take("x", 1, &v), 0);
    ck_assert_uint_eq(v, UINT64_MAX);
}
END_TEST

START_TEST(parse_gives_the_largest_value_and_refuses_one_more)
{
    uint64_t v = 0;
    ck_assert(parse("18446744073709551615", true, &v));
    ck_assert_uint_eq(v, UINT64_MAX);
    ck_assert(parse("0", true, &v));
    ck_assert_uint_eq(v, 0);
    v = 7;
    ck_assert(!parse("18446744073709551616", false, &v));
    ck_assert(!parse("000000000000000000018446744073709551616", false, &v));
    ck_assert_uint_eq(v, 7); /* untouched on failure */
}
END_TEST

START_TEST(parse_takes_digits_and_nothing_else)
{
    static const char *const bad[] = {"",   " ",  "+1",  "-1",  " 1",  "1 ",  "1\n", "1.0",
                                      "1.", "0x1", "1a", "1_000", "1,2", "\xd9\xa1", "1e3"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        uint64_t v = 7;
        ck_assert_msg(!parse(bad[k], false, &v), "'%s' was taken", bad[k]);
        ck_assert_msg(!parse(bad[k], true, &v), "'%s' was taken as canonical", bad[k]);
        ck_assert_uint_eq(v, 7);
    }
}
END_TEST

START_TEST(canonical_refuses_leading_zeros_and_plain_allows_them)
{
    static const struct {
        const char *s;
        uint64_t v;
    } zeros[] = {{"00", 0}, {"01", 1}, {"007", 7}, {"0018446744073709551615", UINT64_MAX}};
    for (size_t k = 0; k < sizeof zeros / sizeof zeros[0]; k++) {
        uint64_t v = 0;
        ck_assert_msg(!parse(zeros[k].s, true, &v), "'%s' is not canonical", zeros[k].s);
        ck_assert_msg(parse(zeros[k].s, false, &v), "'%s' was refused", zeros[k].s);
        ck_assert_uint_eq(v, zeros[k].v);
    }
    uint64_t v = 0;
    ck_assert(parse("10", true, &v));
    ck_assert_uint_eq(v, 10);
    ck_assert(parse("100", true, &v));
    ck_assert_uint_eq(v, 100);
}
END_TEST

Suite *suite_decimal(void)
{
    Suite *s = suite_create("decimal");
    TCase *tc = tcase_create("decimal");
    tcase_add_test(tc, take_stops_at_the_first_byte_that_is_not_a_digit);
    tcase_add_test(tc, take_reads_no_further_than_the_length);
    tcase_add_test(tc, take_continues_a_number_cut_between_buffers);
    tcase_add_test(tc, take_refuses_a_value_past_2_to_the_64);
    tcase_add_test(tc, parse_gives_the_largest_value_and_refuses_one_more);
    tcase_add_test(tc, parse_takes_digits_and_nothing_else);
    tcase_add_test(tc, canonical_refuses_leading_zeros_and_plain_allows_them);
    suite_add_tcase(s, tc);
    return s;
}

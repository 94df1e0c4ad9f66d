/* check_indexlist.c: the parser of index lists written to the zrecordfs
 * control files .gather and .delete. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/indexlist.h"
#include "tests/suites.h"

/* Feed each piece in turn; returns the first non-zero result, or the
 * result of finish. */
static int parse(struct zfs_idxlist *l, const char *const *pieces, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        int rc = zfs_idxlist_feed(l, pieces[k], strlen(pieces[k]));
        if (rc != 0)
            return rc;
    }
    return zfs_idxlist_finish(l);
}

static void assert_list(const struct zfs_idxlist *l, const uint64_t *want, size_t n)
{
    ck_assert_uint_eq(l->n, n);
    for (size_t k = 0; k < n; k++)
        ck_assert_msg(l->idx[k] == want[k], "index %zu is %llu, expected %llu", k,
                      (unsigned long long)l->idx[k], (unsigned long long)want[k]);
}

START_TEST(every_separator_kind_splits_numbers)
{
    struct zfs_idxlist l = {0};
    zfs_idxlist_init(&l, 100, 1000);
    const char *in[] = {"3 1,4\t1\n5\r\n9"};
    ck_assert_int_eq(parse(&l, in, 1), 0);
    const uint64_t want[] = {3, 1, 4, 1, 5, 9};
    assert_list(&l, want, 6);
    zfs_idxlist_free(&l);
}
END_TEST

START_TEST(number_cut_between_writes_is_joined)
{
    struct zfs_idxlist l = {0};
    zfs_idxlist_init(&l, 1000, 1000);
    const char *in[] = {"1", "2", " 3", "4", "5\n6"};
    ck_assert_int_eq(parse(&l, in, 5), 0);
    const uint64_t want[] = {12, 345, 6};
    assert_list(&l, want, 3);
    zfs_idxlist_free(&l);
}
END_TEST

START_TEST(last_number_is_complete_only_at_finish)
{
    struct zfs_idxlist l = {0};
    zfs_idxlist_init(&l, 1000, 1000);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "4 7", 3), 0);
    ck_assert_uint_eq(l.n, 1);
    ck_assert_int_eq(zfs_idxlist_finish(&l), 0);
    const uint64_t want[] = {4, 7};
    assert_list(&l, want, 2);
    /* A second finish adds nothing. */
    ck_assert_int_eq(zfs_idxlist_finish(&l), 0);
    ck_assert_uint_eq(l.n, 2);
    zfs_idxlist_free(&l);
}
END_TEST

START_TEST(runs_of_separators_make_no_empty_entries)
{
    struct zfs_idxlist l = {0};
    zfs_idxlist_init(&l, 1000, 1000);
    const char *in[] = {",, 1,,\n\n", "  2 ,", "\n"};
    ck_assert_int_eq(parse(&l, in, 3), 0);
    const uint64_t want[] = {1, 2};
    assert_list(&l, want, 2);
    zfs_idxlist_free(&l);
}
END_TEST

START_TEST(empty_input_is_an_empty_list)
{
    struct zfs_idxlist l = {0};
    zfs_idxlist_init(&l, 10, 10);
    ck_assert_int_eq(zfs_idxlist_finish(&l), 0);
    ck_assert_uint_eq(l.n, 0);
    ck_assert_int_eq(zfs_idxlist_feed(&l, " \n", 2), 0);
    ck_assert_int_eq(zfs_idxlist_finish(&l), 0);
    ck_assert_uint_eq(l.n, 0);
    zfs_idxlist_free(&l);
}
END_TEST

START_TEST(leading_zeros_are_accepted)
{
    struct zfs_idxlist l = {0};
    zfs_idxlist_init(&l, 100, 100);
    const char *in[] = {"007 0 00 010"};
    ck_assert_int_eq(parse(&l, in, 1), 0);
    const uint64_t want[] = {7, 0, 0, 10};
    assert_list(&l, want, 4);
    zfs_idxlist_free(&l);
}
END_TEST

START_TEST(anything_but_digits_and_separators_is_einval)
{
    static const char *bad[] = {"-1", "+1", "1.5", "0x1", "a", "1e3", "1;2", "1_000",
                                "\xd9\xa1", "1\0002", "[1]"};
    static const size_t len[] = {2, 2, 3, 3, 1, 3, 3, 5, 2, 3, 3};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        struct zfs_idxlist l = {0};
        zfs_idxlist_init(&l, 100, 100);
        ck_assert_msg(zfs_idxlist_feed(&l, bad[k], len[k]) == -EINVAL, "'%s' was accepted", bad[k]);
        zfs_idxlist_free(&l);
    }
}
END_TEST

START_TEST(index_at_or_above_the_limit_is_einval)
{
    struct zfs_idxlist l = {0};
    zfs_idxlist_init(&l, 10, 100);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "9 ", 2), 0);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "10 ", 3), -EINVAL);
    zfs_idxlist_reset(&l);
    /* Also when only the end of input completes the number. */
    ck_assert_int_eq(zfs_idxlist_feed(&l, "10", 2), 0);
    ck_assert_int_eq(zfs_idxlist_finish(&l), -EINVAL);
    zfs_idxlist_free(&l);
}
END_TEST

START_TEST(a_lowered_limit_applies_to_later_numbers)
{
    struct zfs_idxlist l = {0};
    zfs_idxlist_init(&l, 10, 100);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "8 ", 2), 0);
    zfs_idxlist_set_limit(&l, 5);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "4 ", 2), 0);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "8 ", 2), -EINVAL);
    zfs_idxlist_free(&l);
}
END_TEST

START_TEST(numbers_past_64_bits_are_einval)
{
    static const char *bad[] = {"18446744073709551616", "99999999999999999999",
                                "340282366920938463463374607431768211456"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        struct zfs_idxlist l = {0};
        zfs_idxlist_init(&l, UINT64_MAX, 100);
        int rc = zfs_idxlist_feed(&l, bad[k], strlen(bad[k]));
        if (rc == 0)
            rc = zfs_idxlist_finish(&l);
        ck_assert_msg(rc == -EINVAL, "%s gave %d", bad[k], rc);
        zfs_idxlist_free(&l);
    }
    /* The largest value parses, and is then checked against the limit. */
    struct zfs_idxlist l = {0};
    zfs_idxlist_init(&l, UINT64_MAX, 100);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "18446744073709551614 ", 21), 0);
    ck_assert_uint_eq(l.idx[0], UINT64_MAX - 1);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "18446744073709551615 ", 21), -EINVAL);
    zfs_idxlist_free(&l);
}
END_TEST

START_TEST(a_number_past_64_bits_across_writes_is_einval)
{
    struct zfs_idxlist l = {0};
    zfs_idxlist_init(&l, UINT64_MAX, 100);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "1 00184467440737", 16), 0);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "09551614,", 9), 0);
    ck_assert_uint_eq(l.n, 2);
    ck_assert_uint_eq(l.idx[1], UINT64_MAX - 1);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "184467440737095516", 18), 0);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "16", 2), -EINVAL);
    zfs_idxlist_free(&l);
}
END_TEST

START_TEST(more_indices_than_the_maximum_is_e2big)
{
    struct zfs_idxlist l = {0};
    zfs_idxlist_init(&l, 100, 3);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "1 2 3 ", 6), 0);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "4 ", 2), -E2BIG);
    zfs_idxlist_free(&l);
}
END_TEST

START_TEST(reset_after_an_error_makes_the_list_usable)
{
    struct zfs_idxlist l = {0};
    zfs_idxlist_init(&l, 100, 100);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "1 2 3", 5), 0);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "x", 1), -EINVAL);
    zfs_idxlist_reset(&l);
    const char *in[] = {"5 6"};
    ck_assert_int_eq(parse(&l, in, 1), 0);
    const uint64_t want[] = {5, 6};
    assert_list(&l, want, 2);
    zfs_idxlist_free(&l);
}
END_TEST

START_TEST(a_long_list_in_odd_pieces_keeps_every_index)
{
    /* The list 0, 7, 14, ... written in pieces of 13 bytes, cutting
     * numbers anywhere. */
    enum { N = 50000 };
    size_t cap = (size_t)N * 8, len = 0;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    for (uint64_t k = 0; k < N; k++)
        len += (size_t)snprintf(text + len, cap - len, "%llu%s", (unsigned long long)(k * 7),
                                k % 3 ? " " : ",\n");
    struct zfs_idxlist l = {0};
    zfs_idxlist_init(&l, (uint64_t)N * 7, N);
    for (size_t off = 0; off < len; off += 13)
        ck_assert_int_eq(zfs_idxlist_feed(&l, text + off, len - off < 13 ? len - off : 13), 0);
    ck_assert_int_eq(zfs_idxlist_finish(&l), 0);
    ck_assert_uint_eq(l.n, N);
    for (uint64_t k = 0; k < N; k++)
        ck_assert_uint_eq(l.idx[k], k * 7);
    zfs_idxlist_free(&l);
    free(text);
}
END_TEST

/* An error after a piece was taken sticks until reset, at every later
 * feed and at finish; one in the first piece discards the list, and the
 * next piece starts a new one. */
START_TEST(an_error_after_a_taken_piece_sticks_until_reset)
{
    struct zfs_idxlist l = {0};
    zfs_idxlist_init(&l, 100, 1000);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "1 2 ", 4), 0);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "x", 1), -EINVAL);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "3 ", 2), -EINVAL);
    ck_assert_int_eq(zfs_idxlist_finish(&l), -EINVAL);
    zfs_idxlist_reset(&l);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "x", 1), -EINVAL);
    ck_assert_int_eq(zfs_idxlist_feed(&l, "3 4", 3), 0);
    ck_assert_int_eq(zfs_idxlist_finish(&l), 0);
    const uint64_t want[] = {3, 4};
    assert_list(&l, want, 2);
    zfs_idxlist_free(&l);
}
END_TEST

Suite *suite_indexlist(void)
{
    Suite *s = suite_create("indexlist");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, every_separator_kind_splits_numbers);
    tcase_add_test(tc, number_cut_between_writes_is_joined);
    tcase_add_test(tc, last_number_is_complete_only_at_finish);
    tcase_add_test(tc, runs_of_separators_make_no_empty_entries);
    tcase_add_test(tc, empty_input_is_an_empty_list);
    tcase_add_test(tc, leading_zeros_are_accepted);
    tcase_add_test(tc, anything_but_digits_and_separators_is_einval);
    tcase_add_test(tc, index_at_or_above_the_limit_is_einval);
    tcase_add_test(tc, a_lowered_limit_applies_to_later_numbers);
    tcase_add_test(tc, numbers_past_64_bits_are_einval);
    tcase_add_test(tc, a_number_past_64_bits_across_writes_is_einval);
    tcase_add_test(tc, more_indices_than_the_maximum_is_e2big);
    tcase_add_test(tc, reset_after_an_error_makes_the_list_usable);
    tcase_add_test(tc, a_long_list_in_odd_pieces_keeps_every_index);
    tcase_add_test(tc, an_error_after_a_taken_piece_sticks_until_reset);
    suite_add_tcase(s, tc);
    return s;
}

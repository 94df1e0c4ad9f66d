/* check_sampler.c: the four sampling modes, sharding, and seeking. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"
#include "tests/helpers.h"
#include "tests/suites.h"

#define P2(k) ((uint64_t)1 << (k))

static zr_sampler_info info_of(const zr_sampler *sm)
{
    zr_sampler_info info = ZR_SAMPLER_INFO_INIT;
    ZR_OK_CALL(zr_sampler_get_info(sm, &info));
    return info;
}

static uint64_t *draw(const zr_sampler *sm, uint64_t step)
{
    uint64_t *out = malloc(info_of(sm).batch * sizeof *out);
    ck_assert_ptr_nonnull(out);
    ZR_OK_CALL(zr_sampler_batch(sm, step, out));
    return out;
}

/* Pearson's statistic of counts against a uniform expectation. */
static double chi_square(const uint64_t *counts, size_t bins, uint64_t draws)
{
    double expect = (double)draws / (double)bins, stat = 0;
    for (size_t b = 0; b < bins; b++) {
        double d = (double)counts[b] - expect;
        stat += d * d / expect;
    }
    return stat;
}

/* Which of `bins` equal ranges of [0, n) index v falls in. */
static size_t bin_of(uint64_t v, uint64_t n, size_t bins)
{
    return (size_t)(((unsigned __int128)v * bins) / n);
}

/* Mark the indices in a bitmap of n bits; false if one was already set. */
static bool mark_all(uint8_t *seen, const uint64_t *idx, uint64_t count)
{
    for (uint64_t i = 0; i < count; i++) {
        if (seen[idx[i] / 8] & (1u << (idx[i] % 8)))
            return false;
        seen[idx[i] / 8] |= (uint8_t)(1u << (idx[i] % 8));
    }
    return true;
}

START_TEST(sequential_window_wraps_around_the_index_space)
{
    zr_sampler *sm = NULL;
    ZR_OK_CALL(zr_sampler_create(&sm, 10, 4, ZR_SEQUENTIAL, 7, 0, 1));
    static const uint64_t expect[4][4] = {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 0, 1}, {2, 3, 4, 5}};
    for (uint64_t s = 0; s < 4; s++) {
        uint64_t *b = draw(sm, s);
        ck_assert_mem_eq(b, expect[s], sizeof expect[s]);
        free(b);
    }
    /* Far steps: the start is (step * batch) mod n, which overflows 64
     * bits here: (2^64 - 1) * 3 mod 2^63 = 2^63 - 3. */
    zr_sampler_free(sm);
    ZR_OK_CALL(zr_sampler_create(&sm, P2(63), 3, ZR_SEQUENTIAL, 0, 0, 1));
    uint64_t *b = draw(sm, UINT64_MAX);
    ck_assert_uint_eq(b[0], P2(63) - 3);
    ck_assert_uint_eq(b[2], P2(63) - 1);
    free(b);
    zr_sampler_free(sm);
    ZR_OK_CALL(zr_sampler_create(&sm, 1000, 7, ZR_SEQUENTIAL, 0, 0, 1));
    b = draw(sm, P2(40));
    for (uint64_t i = 0; i < 7; i++)
        ck_assert_uint_eq(b[i], (P2(40) * 7 + i) % 1000);
    free(b);
    zr_sampler_free(sm);
}
END_TEST

START_TEST(iid_same_seed_repeats_and_other_seeds_differ)
{
    zr_sampler *a, *a2, *c;
    ZR_OK_CALL(zr_sampler_create(&a, 1000003, 256, ZR_IID, 42, 0, 1));
    ZR_OK_CALL(zr_sampler_create(&a2, 1000003, 256, ZR_IID, 42, 0, 1));
    ZR_OK_CALL(zr_sampler_create(&c, 1000003, 256, ZR_IID, 43, 0, 1));
    uint64_t same_pos = 0;
    for (uint64_t s = 0; s < 50; s++) {
        uint64_t *x = draw(a, s), *y = draw(a2, s), *z = draw(c, s);
        ck_assert_mem_eq(x, y, 256 * sizeof *x);
        for (int i = 0; i < 256; i++)
            same_pos += x[i] == z[i];
        free(x);
        free(y);
        free(z);
    }
    /* Two independent streams agree at a position with probability 1/n. */
    ck_assert_uint_le(same_pos, 2);
    /* Consecutive steps of one seed are different batches too. */
    uint64_t *s0 = draw(a, 0), *s1 = draw(a, 1);
    ck_assert(memcmp(s0, s1, 256 * sizeof *s0) != 0);
    free(s0);
    free(s1);
    zr_sampler_free(a);
    zr_sampler_free(a2);
    zr_sampler_free(c);
}
END_TEST

/* 10^6 draws into 1000 equally likely values. Critical values of the
 * chi-square distribution with 999 degrees of freedom: 866.5 (p = 0.001,
 * lower tail, a suspiciously even spread) and 1142.9 (p = 0.001, upper). */
START_TEST(iid_draws_pass_a_chi_square_test_of_uniformity)
{
    uint64_t counts[1000] = {0}, bad = 0;
    zr_sampler *sm = NULL;
    ZR_OK_CALL(zr_sampler_create(&sm, 1000, 1000, ZR_IID, 2024, 0, 1));
    uint64_t *b = malloc(1000 * sizeof *b);
    for (uint64_t s = 0; s < 1000; s++) {
        ZR_OK_CALL(zr_sampler_batch(sm, s, b));
        for (int i = 0; i < 1000; i++) {
            bad += b[i] >= 1000;
            counts[b[i] % 1000]++;
        }
    }
    ck_assert_uint_eq(bad, 0);
    double stat = chi_square(counts, 1000, 1000000);
    ck_assert_msg(stat > 866.5 && stat < 1142.9, "chi-square %.1f rejects uniformity", stat);

    /* A large space: the high-order structure, in 1000 equal ranges. */
    memset(counts, 0, sizeof counts);
    uint64_t n = 1000000000039ull;
    zr_sampler_free(sm);
    ZR_OK_CALL(zr_sampler_create(&sm, n, 1000, ZR_IID, 99, 0, 1));
    for (uint64_t s = 0; s < 1000; s++) {
        ZR_OK_CALL(zr_sampler_batch(sm, s, b));
        for (int i = 0; i < 1000; i++) {
            bad += b[i] >= n;
            counts[bin_of(b[i] % n, n, 1000)]++;
        }
    }
    ck_assert_uint_eq(bad, 0);
    stat = chi_square(counts, 1000, 1000000);
    ck_assert_msg(stat > 866.5 && stat < 1142.9, "chi-square %.1f rejects uniformity", stat);
    free(b);
    zr_sampler_free(sm);
}
END_TEST

/* Just above a power of two, 2^64 mod n is large, so Lemire's method must
 * reject a sizeable share of raw draws: for n = 2^62 + 1 the threshold is
 * t = 2^64 mod n = 2^62 - 3, a rejection probability p of almost 1/4, so
 * 10^5 draws take about 10^5 * p / (1 - p) retries (standard deviation
 * about 210). Without the rejection the counter would stay at zero. */
START_TEST(iid_rejection_runs_just_above_a_power_of_two)
{
    uint64_t n = P2(62) + 1;
    uint64_t t = P2(62) - 3;
    double p = (double)t / 18446744073709551616.0;
    zr_sampler *sm = NULL;
    ZR_OK_CALL(zr_sampler_create(&sm, n, 1000, ZR_IID, 5, 0, 1));
    uint64_t *b = malloc(1000 * sizeof *b), rejections = 0, counts[16] = {0}, bad = 0;
    for (uint64_t s = 0; s < 100; s++) {
        ZR_OK_CALL(zr_sampler_batch_counted(sm, s, b, &rejections));
        for (int i = 0; i < 1000; i++) {
            bad += b[i] >= n;
            counts[bin_of(b[i] % n, n, 16)]++;
        }
    }
    ck_assert_uint_eq(bad, 0);
    double expect = 100000 * p / (1 - p);
    ck_assert_msg(rejections > expect - 1300 && rejections < expect + 1300,
                  "%llu rejections, expected about %.0f", (unsigned long long)rejections, expect);
    /* 15 degrees of freedom: 3.483 and 37.697 bound the middle 99.8%. */
    double stat = chi_square(counts, 16, 100000);
    ck_assert_msg(stat > 3.483 && stat < 37.697, "chi-square %.2f rejects uniformity", stat);

    /* 2^32 + 1: t = 2^64 mod n = 1, so a rejection is a 2^-64 event; the
     * draws must still cover the whole range. 2^63: t = 0, none at all. */
    static const uint64_t spaces[] = {P2(32) + 1, P2(63)};
    for (int k = 0; k < 2; k++) {
        rejections = 0;
        uint64_t top = 0;
        zr_sampler_free(sm);
        ZR_OK_CALL(zr_sampler_create(&sm, spaces[k], 1000, ZR_IID, 6, 0, 1));
        for (uint64_t s = 0; s < 20; s++) {
            ZR_OK_CALL(zr_sampler_batch_counted(sm, s, b, &rejections));
            for (int i = 0; i < 1000; i++) {
                bad += b[i] >= spaces[k];
                top += b[i] >= spaces[k] / 2;
            }
        }
        ck_assert_uint_eq(bad, 0);
        ck_assert_uint_eq(rejections, 0);
        ck_assert_uint_gt(top, 9000);
        ck_assert_uint_lt(top, 11000);
    }
    free(b);
    zr_sampler_free(sm);
}
END_TEST

/* n = 1000, batch 64: 15 full batches per cycle cover 960 distinct
 * indices and drop the other 40. */
START_TEST(cyclic_cycle_is_a_permutation_of_the_kept_indices)
{
    zr_sampler *sm = NULL;
    ZR_OK_CALL(zr_sampler_create(&sm, 1000, 64, ZR_CYCLIC, 11, 0, 1));
    ck_assert_uint_eq(info_of(sm).per_cycle, 15);
    for (uint64_t c = 0; c < 3; c++) {
        uint8_t seen[125] = {0};
        for (uint64_t j = 0; j < 15; j++) {
            uint64_t *b = draw(sm, c * 15 + j);
            for (int i = 0; i < 64; i++)
                ck_assert_uint_lt(b[i], 1000);
            ck_assert_msg(mark_all(seen, b, 64), "cycle %llu repeats an index",
                          (unsigned long long)c);
            free(b);
        }
    }
    /* When the batch divides n, a cycle is every index exactly once. */
    zr_sampler_free(sm);
    ZR_OK_CALL(zr_sampler_create(&sm, 1024, 64, ZR_CYCLIC, 11, 0, 1));
    uint8_t seen[128] = {0};
    for (uint64_t j = 0; j < 16; j++) {
        uint64_t *b = draw(sm, 16 + j);
        ck_assert(mark_all(seen, b, 64));
        free(b);
    }
    for (int i = 0; i < 128; i++)
        ck_assert_uint_eq(seen[i], 0xff);
    zr_sampler_free(sm);
}
END_TEST

START_TEST(cyclic_cycles_differ_and_drop_different_remainders)
{
    zr_sampler *sm = NULL;
    ZR_OK_CALL(zr_sampler_create(&sm, 1000, 64, ZR_CYCLIC, 3, 0, 1));
    uint8_t kept[3][125] = {{0}};
    uint64_t order[3][960];
    for (uint64_t c = 0; c < 3; c++)
        for (uint64_t j = 0; j < 15; j++) {
            uint64_t *b = draw(sm, c * 15 + j);
            memcpy(&order[c][j * 64], b, 64 * sizeof *b);
            ck_assert(mark_all(kept[c], b, 64));
            free(b);
        }
    ck_assert(memcmp(order[0], order[1], sizeof order[0]) != 0);
    ck_assert(memcmp(order[1], order[2], sizeof order[1]) != 0);
    ck_assert(memcmp(kept[0], kept[1], sizeof kept[0]) != 0);
    ck_assert(memcmp(kept[1], kept[2], sizeof kept[1]) != 0);
    /* Over the cycles, the dropped indices are not the same ones: about
     * 40 * 40 / 1000 of one cycle's 40 are dropped again in the next. */
    int both = 0;
    for (int v = 0; v < 1000; v++)
        both += !(kept[0][v / 8] >> (v % 8) & 1) && !(kept[1][v / 8] >> (v % 8) & 1);
    ck_assert_int_lt(both, 20);
    zr_sampler_free(sm);
}
END_TEST

/* Every batch holds exactly `batch` distinct in-range indices, including
 * the ones at cycle boundaries and in the tiniest spaces. */
START_TEST(cyclic_every_batch_is_full)
{
    static const struct { uint64_t n, batch; } cases[] = {{1, 1}, {2, 1}, {3, 2}, {10, 3},
                                                          {17, 17}, {129, 64}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        zr_sampler *sm = NULL;
        ZR_OK_CALL(zr_sampler_create(&sm, cases[k].n, cases[k].batch, ZR_CYCLIC, k, 0, 1));
        ck_assert_uint_eq(info_of(sm).per_cycle, cases[k].n / cases[k].batch);
        for (uint64_t s = 0; s < 3 * info_of(sm).per_cycle + 1; s++) {
            uint64_t *b = draw(sm, s);
            uint8_t seen[32] = {0};
            for (uint64_t i = 0; i < cases[k].batch; i++)
                ck_assert_uint_lt(b[i], cases[k].n);
            ck_assert(mark_all(seen, b, cases[k].batch));
            free(b);
        }
        zr_sampler_free(sm);
    }
}
END_TEST

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

START_TEST(cyclic_accepts_index_spaces_up_to_2_to_the_63)
{
    static const uint64_t spaces[] = {P2(63), P2(63) - 1, P2(62) + 1, P2(32) + 1};
    static const uint64_t steps[] = {0, 1, P2(40) + 3, UINT64_MAX};
    for (int k = 0; k < 4; k++) {
        zr_sampler *sm = NULL;
        ZR_OK_CALL(zr_sampler_create(&sm, spaces[k], 2048, ZR_CYCLIC, 8, 0, 1));
        ck_assert_uint_eq(info_of(sm).per_cycle, spaces[k] / 2048);
        /* Steps 0 and 1 are in one cycle, so their 4096 indices are distinct. */
        uint64_t all[4096];
        for (int s = 0; s < 4; s++) {
            uint64_t *b = draw(sm, steps[s]);
            for (int i = 0; i < 2048; i++)
                ck_assert_uint_lt(b[i], spaces[k]);
            if (s < 2)
                memcpy(&all[s * 2048], b, 2048 * sizeof *b);
            free(b);
        }
        qsort(all, 4096, sizeof all[0], cmp_u64);
        for (int i = 1; i < 4096; i++)
            ck_assert_uint_ne(all[i - 1], all[i]);
        /* A shuffle of a huge space reaches its upper half. */
        ck_assert_uint_ge(all[4095], spaces[k] / 2);
        zr_sampler_free(sm);
    }
}
END_TEST

static zr_sampler *quasi(uint64_t n, uint64_t batch, uint64_t block, uint64_t window,
                         uint64_t seed, uint32_t rank, uint32_t world)
{
    zr_sampler_opts o = {.size = sizeof o, .mode = ZR_QUASI, .batch = batch, .seed = seed,
                         .rank = rank, .world = world, .block = block, .window = window};
    zr_sampler *sm = NULL;
    ZR_OK_CALL(zr_sampler_create_opts(&sm, n, &o));
    return sm;
}

/* The index spaces the quasi tests run over, against block 8 and window 3
 * (a window of 24 records) and a batch of 5: multiples of the block, of
 * the window and of the batch and not, smaller than a block, 1. */
static const uint64_t quasi_spaces[] = {1, 2, 5, 7, 8, 9, 23, 24, 25, 40, 47, 48, 49,
                                        100, 241, 1000, 1024, 1031};

/* A cycle's whole order, the positions the batches drop included, is a
 * permutation of [0, n); the batches of the cycle are its first per_cycle
 * * G positions, in order, at a batch of 5 (drawn one position at a time)
 * and of 21 (eight at a time, then one at a time where a window ends). */
START_TEST(quasi_cycle_is_a_permutation_of_the_index_space)
{
    static const struct { uint64_t block, window; } shapes[] = {{8, 3}, {1, 1}, {1, 4}, {7, 1},
                                                                {64, 16}, {5, 1000}, {3000, 2}};
    for (size_t k = 0; k < 2 * sizeof quasi_spaces / sizeof quasi_spaces[0]; k++)
        for (size_t h = 0; h < sizeof shapes / sizeof shapes[0]; h++) {
            uint64_t n = quasi_spaces[k / 2], want = k % 2 ? 21 : 5;
            uint64_t batch = n < want ? n : want;
            zr_sampler *sm = quasi(n, batch, shapes[h].block, shapes[h].window, k * 31 + h, 0, 1);
            uint64_t per = info_of(sm).per_cycle;
            ck_assert_uint_eq(per, n / batch);
            for (uint64_t c = 0; c < 3; c++) {
                uint64_t *order = malloc(n * sizeof *order);
                uint8_t seen[(1031 + 7) / 8] = {0};
                for (uint64_t p = 0; p < n; p++) {
                    order[p] = zr_sampler_at(sm, c, p);
                    ck_assert_uint_lt(order[p], n);
                }
                ck_assert_msg(mark_all(seen, order, n), "n %llu block %llu window %llu: "
                              "cycle %llu repeats an index", (unsigned long long)n,
                              (unsigned long long)shapes[h].block,
                              (unsigned long long)shapes[h].window, (unsigned long long)c);
                for (uint64_t j = 0; j < per; j++) {
                    uint64_t *b = draw(sm, c * per + j);
                    ck_assert_mem_eq(b, &order[j * batch], batch * sizeof *b);
                    free(b);
                }
                free(order);
            }
            zr_sampler_free(sm);
        }
}
END_TEST

/* Like the cyclic mode's: n = 1000, batch 64, 15 full batches of distinct
 * indices per cycle, a fresh order each cycle, and a different remainder
 * of 40 dropped each time. */
START_TEST(quasi_cycles_differ_and_drop_different_remainders)
{
    zr_sampler *sm = quasi(1000, 64, 8, 4, 3, 0, 1);
    ck_assert_uint_eq(info_of(sm).per_cycle, 15);
    uint8_t kept[3][125] = {{0}};
    uint64_t order[3][960];
    for (uint64_t c = 0; c < 3; c++)
        for (uint64_t j = 0; j < 15; j++) {
            uint64_t *b = draw(sm, c * 15 + j);
            memcpy(&order[c][j * 64], b, 64 * sizeof *b);
            ck_assert(mark_all(kept[c], b, 64));
            free(b);
        }
    ck_assert(memcmp(order[0], order[1], sizeof order[0]) != 0);
    ck_assert(memcmp(order[1], order[2], sizeof order[1]) != 0);
    ck_assert(memcmp(kept[0], kept[1], sizeof kept[0]) != 0);
    ck_assert(memcmp(kept[1], kept[2], sizeof kept[1]) != 0);
    zr_sampler_free(sm);
}
END_TEST

/* Same seed, same batches (also from a second sampler); another seed,
 * another order. */
START_TEST(quasi_same_seed_repeats_and_other_seeds_differ)
{
    zr_sampler *a = quasi(5000, 100, 0, 0, 42, 0, 1), *a2 = quasi(5000, 100, 0, 0, 42, 0, 1);
    zr_sampler *c = quasi(5000, 100, 0, 0, 43, 0, 1);
    int differ = 0;
    for (uint64_t s = 0; s < 60; s++) {
        uint64_t *x = draw(a, s), *y = draw(a2, s), *z = draw(c, s);
        ck_assert_mem_eq(x, y, 100 * sizeof *x);
        differ += memcmp(x, z, 100 * sizeof *x) != 0;
        free(x);
        free(y);
        free(z);
    }
    ck_assert_int_eq(differ, 60);
    zr_sampler_free(a);
    zr_sampler_free(a2);
    zr_sampler_free(c);
}
END_TEST

/* The bound of loader.h: m consecutive positions (m >= 2) lie in at most
 * k = 2 + floor((m + b - 3) / (W * b)) windows, each holding at most W
 * blocks, and there are only ceil(n / b) blocks. */
static uint64_t quasi_bound(uint64_t n, uint64_t m, uint64_t b, uint64_t w)
{
    uint64_t nb = (n + b - 1) / b;
    uint64_t bound = m < 2 ? 1 : w * (2 + (m + b - 3) / (w * b));
    return bound < nb ? bound : nb;
}

static uint64_t distinct_blocks(const uint64_t *idx, uint64_t count, uint64_t b)
{
    uint64_t *blk = malloc(count * sizeof *blk), d = 0;
    for (uint64_t i = 0; i < count; i++)
        blk[i] = idx[i] / b;
    qsort(blk, count, sizeof *blk, cmp_u64);
    for (uint64_t i = 0; i < count; i++)
        d += i == 0 || blk[i] != blk[i - 1];
    free(blk);
    return d;
}

/* Every global batch and every rank's share of it, over three cycles,
 * stays within the bound, for short blocks anywhere in the order; and the
 * default (64, 16) gives a batch of 256 out of a million records far fewer
 * blocks than the cyclic mode's, which touches about 256. */
START_TEST(quasi_batches_touch_few_blocks)
{
    static const struct { uint64_t n, batch, block, window; uint32_t world; } cases[] = {
        {1000, 64, 8, 4, 1}, {1031, 50, 8, 3, 2}, {4099, 256, 16, 2, 4}, {997, 30, 10, 1, 3},
        {5000, 100, 7, 5, 1}, {777, 7, 3, 2, 1}, {20000, 512, 64, 16, 2}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint64_t n = cases[k].n, b = cases[k].block, w = cases[k].window;
        uint32_t world = cases[k].world;
        uint64_t share = cases[k].batch / world;
        zr_sampler *whole = quasi(n, cases[k].batch - cases[k].batch % world, b, w, k, 0, 1);
        uint64_t g = info_of(whole).batch, per = info_of(whole).per_cycle;
        for (uint64_t s = 0; s < 3 * per; s++) {
            uint64_t *x = draw(whole, s);
            ck_assert_uint_le(distinct_blocks(x, g, b), quasi_bound(n, g, b, w));
            for (uint32_t r = 0; r < world; r++)
                ck_assert_uint_le(distinct_blocks(&x[r * share], share, b),
                                  quasi_bound(n, share, b, w));
            free(x);
        }
        zr_sampler_free(whole);
    }
    zr_sampler *q = quasi(1000000, 256, 0, 0, 1, 0, 1), *c = NULL;
    ZR_OK_CALL(zr_sampler_create(&c, 1000000, 256, ZR_CYCLIC, 1, 0, 1));
    uint64_t most = 0, fewest_cyclic = UINT64_MAX;
    for (uint64_t s = 0; s < 200; s++) {
        uint64_t *x = draw(q, s), *y = draw(c, s);
        uint64_t dq = distinct_blocks(x, 256, 64), dc = distinct_blocks(y, 256, 64);
        most = dq > most ? dq : most;
        fewest_cyclic = dc < fewest_cyclic ? dc : fewest_cyclic;
        free(x);
        free(y);
    }
    ck_assert_uint_le(most, quasi_bound(1000000, 256, 64, 16));
    ck_assert_uint_le(most, 32);
    ck_assert_uint_ge(fewest_cyclic, 200);
    zr_sampler_free(q);
    zr_sampler_free(c);
}
END_TEST

/* Huge spaces and far steps: indices in range, distinct within a cycle,
 * reaching the upper half. */
START_TEST(quasi_accepts_index_spaces_up_to_2_to_the_63)
{
    static const uint64_t spaces[] = {P2(63), P2(63) - 1, P2(62) + 1, P2(32) + 1};
    static const uint64_t steps[] = {0, 1, P2(40) + 3, UINT64_MAX};
    for (int k = 0; k < 4; k++) {
        zr_sampler *sm = quasi(spaces[k], 2048, k == 1 ? 1000 : 0, k == 2 ? P2(40) : 0, 8, 0, 1);
        uint64_t all[4096];
        for (int s = 0; s < 4; s++) {
            uint64_t *b = draw(sm, steps[s]);
            for (int i = 0; i < 2048; i++)
                ck_assert_uint_lt(b[i], spaces[k]);
            if (s < 2)
                memcpy(&all[s * 2048], b, 2048 * sizeof *b);
            free(b);
        }
        qsort(all, 4096, sizeof all[0], cmp_u64);
        for (int i = 1; i < 4096; i++)
            ck_assert_uint_ne(all[i - 1], all[i]);
        ck_assert_uint_ge(all[4095], spaces[k] / 2);
        /* Far into the cycle too: the last positions, where the short block
         * and the last window are. */
        uint64_t last = zr_sampler_at(sm, 5, spaces[k] - 1);
        ck_assert_uint_lt(last, spaces[k]);
        zr_sampler_free(sm);
    }
}
END_TEST

/* zr_sampler_create's ZR_QUASI is the defaults of zr_sampler_create_opts,
 * whose other modes are zr_sampler_create's; the info reports the block
 * and window; block and window outside ZR_QUASI, and bad sizes, are
 * refused. */
START_TEST(sampler_options_give_the_same_samplers_and_refuse_misuse)
{
    static const int modes[] = {ZR_SEQUENTIAL, ZR_IID, ZR_CYCLIC, ZR_QUASI};
    for (int m = 0; m < 4; m++) {
        zr_sampler *a = NULL, *b = NULL;
        ZR_OK_CALL(zr_sampler_create(&a, 5000, 16, modes[m], 9, 1, 2));
        zr_sampler_opts o = ZR_SAMPLER_OPTS_INIT;
        o.mode = modes[m];
        o.batch = 16;
        o.seed = 9;
        o.rank = 1;
        o.world = 2;
        ZR_OK_CALL(zr_sampler_create_opts(&b, 5000, &o));
        for (uint64_t s = 0; s < 400; s += 37) {
            uint64_t *x = draw(a, s), *y = draw(b, s);
            ck_assert_mem_eq(x, y, 16 * sizeof *x);
            free(x);
            free(y);
        }
        zr_sampler_info info = info_of(b);
        ck_assert_uint_eq(info.block, modes[m] == ZR_QUASI ? ZR_QUASI_BLOCK : 0);
        ck_assert_uint_eq(info.window, modes[m] == ZR_QUASI ? ZR_QUASI_WINDOW : 0);
        ck_assert_uint_eq(info.per_cycle, modes[m] >= ZR_CYCLIC ? 5000 / 32 : 0);
        zr_sampler_free(a);
        zr_sampler_free(b);
    }
    /* Explicit values are reported as given, even beyond n. */
    zr_sampler *sm = quasi(100, 10, 1000, 7, 0, 0, 1);
    ck_assert_uint_eq(info_of(sm).block, 1000);
    ck_assert_uint_eq(info_of(sm).window, 7);
    zr_sampler_free(sm);
    /* world 0 in the options means 1. */
    zr_sampler_opts o = {.size = sizeof o, .mode = ZR_QUASI, .batch = 4};
    ZR_OK_CALL(zr_sampler_create_opts(&sm, 10, &o));
    ck_assert_uint_eq(info_of(sm).world, 1);
    zr_sampler_free(sm);
    sm = (zr_sampler *)&sm;
    ZR_FAIL_CALL(zr_sampler_create_opts(NULL, 10, &o), ZR_EINVAL);
    ZR_FAIL_CALL(zr_sampler_create_opts(&sm, 10, NULL), ZR_EINVAL);
    ck_assert_ptr_null(sm);
    zr_sampler_opts bad = {.size = sizeof bad, .mode = ZR_CYCLIC, .batch = 4, .block = 8};
    ZR_FAIL_CALL(zr_sampler_create_opts(&sm, 10, &bad), ZR_EINVAL);
    bad.block = 0;
    bad.window = 2;
    ZR_FAIL_CALL(zr_sampler_create_opts(&sm, 10, &bad), ZR_EINVAL);
    bad.window = 0;
    bad.size = 0;
    ZR_FAIL_CALL(zr_sampler_create_opts(&sm, 10, &bad), ZR_EINVAL);
    bad.mode = 5;
    bad.size = sizeof bad;
    ZR_FAIL_CALL(zr_sampler_create_opts(&sm, 10, &bad), ZR_EINVAL);
    /* An options struct of an older header, without block and window. */
    zr_sampler_opts old;
    memset(&old, 0xa5, sizeof old);
    old.size = offsetof(zr_sampler_opts, block);
    old.mode = ZR_QUASI;
    old.batch = 2;
    old.seed = 1;
    old.rank = 0;
    old.world = 1;
    ZR_OK_CALL(zr_sampler_create_opts(&sm, 10, &old));
    ck_assert_uint_eq(info_of(sm).block, ZR_QUASI_BLOCK);
    zr_sampler_free(sm);
}
END_TEST

START_TEST(rank_shards_are_disjoint_and_make_up_the_global_batch)
{
    static const int modes[] = {ZR_SEQUENTIAL, ZR_IID, ZR_CYCLIC, ZR_QUASI};
    for (int m = 0; m < 4; m++) {
        zr_sampler *global = NULL;
        ZR_OK_CALL(zr_sampler_create(&global, 1000, 64, modes[m], 77, 0, 1));
        for (uint64_t step = 0; step < 40; step += 13) {
            uint64_t *whole = draw(global, step);
            uint64_t joined[64];
            for (uint32_t r = 0; r < 4; r++) {
                zr_sampler *shard = NULL;
                ZR_OK_CALL(zr_sampler_create(&shard, 1000, 16, modes[m], 77, r, 4));
                ck_assert_uint_eq(info_of(shard).global, 64);
                uint64_t *part = draw(shard, step);
                memcpy(&joined[r * 16], part, sizeof(uint64_t) * 16);
                free(part);
                zr_sampler_free(shard);
            }
            ck_assert_mem_eq(joined, whole, sizeof joined);
            if (modes[m] != ZR_IID) { /* without replacement: shards share no index */
                uint8_t seen[125] = {0};
                ck_assert(mark_all(seen, joined, 64));
            }
            if (modes[m] == ZR_SEQUENTIAL)
                for (int i = 0; i < 64; i++)
                    ck_assert_uint_eq(joined[i], (step * 64 + (uint64_t)i) % 1000);
            free(whole);
        }
        zr_sampler_free(global);
    }
}
END_TEST

START_TEST(seeking_to_a_step_gives_the_batch_iterating_reaches)
{
    static const int modes[] = {ZR_SEQUENTIAL, ZR_IID, ZR_CYCLIC, ZR_QUASI};
    for (int m = 0; m < 4; m++) {
        zr_sampler *walk = NULL;
        ZR_OK_CALL(zr_sampler_create(&walk, 500, 32, modes[m], 123, 1, 3));
        uint64_t kept[40][32];
        for (uint64_t s = 0; s < 40; s++)
            ZR_OK_CALL(zr_sampler_batch(walk, s, kept[s]));
        /* A fresh sampler asked for steps out of order, across cycles. */
        zr_sampler *seek = NULL;
        ZR_OK_CALL(zr_sampler_create(&seek, 500, 32, modes[m], 123, 1, 3));
        for (uint64_t s = 40; s-- > 0;) {
            uint64_t b[32];
            ZR_OK_CALL(zr_sampler_batch(seek, (s * 17) % 40, b));
            ck_assert_mem_eq(b, kept[(s * 17) % 40], sizeof b);
        }
        zr_sampler_free(walk);
        zr_sampler_free(seek);
    }
}
END_TEST

START_TEST(bad_sampler_parameters_are_refused)
{
    zr_sampler *sm = (zr_sampler *)&sm; /* must be reset to NULL */
    ZR_FAIL_CALL(zr_sampler_create(NULL, 10, 1, ZR_IID, 0, 0, 1), ZR_EINVAL);
    ZR_FAIL_CALL(zr_sampler_create(&sm, 0, 1, ZR_IID, 0, 0, 1), ZR_EINVAL);
    ck_assert_ptr_null(sm);
    ZR_FAIL_CALL(zr_sampler_create(&sm, P2(63) + 1, 1, ZR_IID, 0, 0, 1), ZR_EINVAL);
    ZR_FAIL_CALL(zr_sampler_create(&sm, 10, 0, ZR_IID, 0, 0, 1), ZR_EINVAL);
    ZR_FAIL_CALL(zr_sampler_create(&sm, 10, 11, ZR_SEQUENTIAL, 0, 0, 1), ZR_EINVAL);
    ZR_FAIL_CALL(zr_sampler_create(&sm, 10, 4, ZR_CYCLIC, 0, 0, 3), ZR_EINVAL);
    ZR_FAIL_CALL(zr_sampler_create(&sm, 10, 1, ZR_IID, 0, 3, 3), ZR_EINVAL);
    ZR_FAIL_CALL(zr_sampler_create(&sm, 10, 1, ZR_IID, 0, 0, 0), ZR_EINVAL);
    ZR_FAIL_CALL(zr_sampler_create(&sm, 10, 1, 0, 0, 0, 1), ZR_EINVAL);
    ZR_FAIL_CALL(zr_sampler_create(&sm, P2(63), P2(62), ZR_IID, 0, 0, 1u << 31), ZR_EINVAL);
    ZR_OK_CALL(zr_sampler_create(&sm, 10, 10, ZR_CYCLIC, 0, 0, 1));
    uint64_t out[10];
    ZR_FAIL_CALL(zr_sampler_batch(sm, 0, NULL), ZR_EINVAL);
    ZR_FAIL_CALL(zr_sampler_batch(NULL, 0, out), ZR_EINVAL);
    zr_sampler_info info = ZR_SAMPLER_INFO_INIT;
    ZR_FAIL_CALL(zr_sampler_get_info(NULL, &info), ZR_EINVAL);
    ZR_FAIL_CALL(zr_sampler_get_info(sm, NULL), ZR_EINVAL);
    zr_sampler_free(sm);
    zr_sampler_free(NULL);
}
END_TEST

/* The info gives back what the sampler was made with and what follows
 * from it, and fills only what its size covers (loaderx.h, "Sized
 * structs"). */
START_TEST(info_describes_the_sampler)
{
    zr_sampler *sm;
    ZR_OK_CALL(zr_sampler_create(&sm, 1000, 16, ZR_CYCLIC, 77, 2, 4));
    zr_sampler_info info = info_of(sm);
    ck_assert_uint_eq(info.size, sizeof info);
    ck_assert_uint_eq(info.n, 1000);
    ck_assert_uint_eq(info.batch, 16);
    ck_assert_uint_eq(info.global, 64);
    ck_assert_uint_eq(info.per_cycle, 1000 / 64);
    ck_assert_uint_eq(info.seed, 77);
    ck_assert_uint_eq(info.rank, 2);
    ck_assert_uint_eq(info.world, 4);
    ck_assert_int_eq(info.mode, ZR_CYCLIC);
    zr_sampler_info old;
    memset(&old, 0xa5, sizeof old);
    old.size = offsetof(zr_sampler_info, mode);
    ZR_OK_CALL(zr_sampler_get_info(sm, &old));
    ck_assert_uint_eq(old.world, 4);
    ck_assert_int_eq(old.mode, (int)0xa5a5a5a5);
    zr_sampler_info zero = {0};
    ZR_FAIL_CALL(zr_sampler_get_info(sm, &zero), ZR_EINVAL);
    zr_sampler_free(sm);
}
END_TEST

Suite *suite_sampler(void)
{
    Suite *s = suite_create("sampler");
    TCase *tc = tcase_create("sampler");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, sequential_window_wraps_around_the_index_space);
    tcase_add_test(tc, iid_same_seed_repeats_and_other_seeds_differ);
    tcase_add_test(tc, iid_draws_pass_a_chi_square_test_of_uniformity);
    tcase_add_test(tc, iid_rejection_runs_just_above_a_power_of_two);
    tcase_add_test(tc, cyclic_cycle_is_a_permutation_of_the_kept_indices);
    tcase_add_test(tc, cyclic_cycles_differ_and_drop_different_remainders);
    tcase_add_test(tc, cyclic_every_batch_is_full);
    tcase_add_test(tc, cyclic_accepts_index_spaces_up_to_2_to_the_63);
    tcase_add_test(tc, quasi_cycle_is_a_permutation_of_the_index_space);
    tcase_add_test(tc, quasi_cycles_differ_and_drop_different_remainders);
    tcase_add_test(tc, quasi_same_seed_repeats_and_other_seeds_differ);
    tcase_add_test(tc, quasi_batches_touch_few_blocks);
    tcase_add_test(tc, quasi_accepts_index_spaces_up_to_2_to_the_63);
    tcase_add_test(tc, sampler_options_give_the_same_samplers_and_refuse_misuse);
    tcase_add_test(tc, rank_shards_are_disjoint_and_make_up_the_global_batch);
    tcase_add_test(tc, seeking_to_a_step_gives_the_batch_iterating_reaches);
    tcase_add_test(tc, bad_sampler_parameters_are_refused);
    tcase_add_test(tc, info_describes_the_sampler);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * quasibench: what the quasi-random sampler (ZR_QUASI) gives up in
 * randomness against the cyclic one, and what it gains in locality.
 *
 * Over an index space of N = 10^6 records, with a global batch of B = 256
 * (so 3906 batches per cycle and 64 positions dropped), for the cyclic
 * mode and for ZR_QUASI at several blocks and windows, it reads the whole
 * order of
 * cycles 0 and 1 (a sampler of batch 1 steps through one position at a
 * time: the order of a cycle does not depend on the batch) and prints one
 * Markdown row per sampler:
 *
 *  (a) lag-1: Pearson's correlation between the index at position p and
 *      the index at p + 1 of cycle 0 (0 for a uniform permutation), and
 *      the share of those neighbours that lie in one block of `block`
 *      records (block / N for a uniform permutation);
 *  (b) moved: the mean over records of |pos_0(i) - pos_1(i)| / N, how far
 *      a record moves from one cycle to the next (1/3 for independent
 *      uniform orders);
 *  (c) blocks: distinct blocks per batch of 256, mean and maximum over
 *      the batches of cycle 0, in blocks of the row's block size (64 for
 *      the cyclic rows), with the bound of loader.h beside it;
 *  (d) co-batched: of the pairs of records of one block, the share that
 *      land in the same batch of cycle 0 (the dropped positions are in
 *      no batch), and that share over its value for a uniform
 *      permutation, about (B - 1) / (N - 1).
 *
 * It also times zr_sampler_batch at batch 256 (median of 7 repetitions
 * of 2^20 indices, ns per index); the other figures are exact for the
 * seeds given and do not depend on the machine.
 *
 *   usage: bench/quasibench [seed [N [B]]]   (defaults 1, 1000000, 256)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/loaderx/loaderx.h"

#define REPS 7
#define MAX_B 65536u

static uint64_t N = 1000000, B = 256;

struct config {
    int mode;
    uint64_t block, window;
};

static const struct config configs[] = {
    {ZR_CYCLIC, 64, 0},  {ZR_QUASI, 64, 16}, {ZR_QUASI, 64, 4},   {ZR_QUASI, 64, 64},
    {ZR_QUASI, 16, 16},  {ZR_QUASI, 256, 16}, {ZR_QUASI, 64, 256},
};

static void die(const char *what)
{
    fprintf(stderr, "quasibench: %s: %s\n", what, zr_last_error());
    exit(1);
}

static zr_sampler *make(const struct config *c, uint64_t batch, uint64_t seed)
{
    zr_sampler_opts o = ZR_SAMPLER_OPTS_INIT;
    o.mode = c->mode;
    o.batch = batch;
    o.seed = seed;
    if (c->mode == ZR_QUASI) {
        o.block = c->block;
        o.window = c->window;
    }
    zr_sampler *sm;
    if (zr_sampler_create_opts(&sm, N, &o) != 0)
        die("zr_sampler_create_opts");
    return sm;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The bound of loader.h on the blocks m consecutive positions touch. */
static uint64_t bound(uint64_t m, uint64_t b, uint64_t w)
{
    uint64_t nb = (N + b - 1) / b;
    if (w > nb)
        w = nb;
    uint64_t k = m < 2 ? 1 : w * (2 + (m + b - 3) / (w * b));
    return k < nb ? k : nb;
}

static void row(const struct config *c, uint64_t seed)
{
    uint64_t *order[2], *pos[2];
    zr_sampler *one = make(c, 1, seed);
    for (int k = 0; k < 2; k++) {
        order[k] = malloc(N * sizeof *order[k]);
        pos[k] = malloc(N * sizeof *pos[k]);
        if (!order[k] || !pos[k])
            die("out of memory");
        for (uint64_t p = 0; p < N; p++)
            if (zr_sampler_batch(one, (uint64_t)k * N + p, &order[k][p]) != 0)
                die("zr_sampler_batch");
        for (uint64_t p = 0; p < N; p++)
            pos[k][order[k][p]] = p;
    }
    zr_sampler_free(one);
    uint64_t b = c->block;

    /* (a) */
    double mean = (double)(N - 1) / 2, sxy = 0, sxx = 0;
    uint64_t same = 0;
    for (uint64_t p = 0; p + 1 < N; p++) {
        double x = (double)order[0][p] - mean, y = (double)order[0][p + 1] - mean;
        sxy += x * y;
        same += order[0][p] / b == order[0][p + 1] / b;
    }
    for (uint64_t p = 0; p < N; p++) {
        double x = (double)order[0][p] - mean;
        sxx += x * x;
    }
    double corr = sxy / sxx * (double)N / (double)(N - 1);

    /* (b) */
    double moved = 0;
    for (uint64_t i = 0; i < N; i++)
        moved += (double)(pos[0][i] > pos[1][i] ? pos[0][i] - pos[1][i] : pos[1][i] - pos[0][i]);
    moved /= (double)N * (double)N;

    /* (c) */
    static uint64_t tmp[MAX_B];
    uint64_t most = 0, kept = N / B * B;
    double blocks = 0;
    for (uint64_t s = 0; s < N / B; s++) {
        for (uint64_t i = 0; i < B; i++)
            tmp[i] = order[0][s * B + i] / b;
        qsort(tmp, B, sizeof tmp[0], cmp_u64);
        uint64_t d = 0;
        for (uint64_t i = 0; i < B; i++)
            d += i == 0 || tmp[i] != tmp[i - 1];
        blocks += (double)d;
        most = d > most ? d : most;
    }
    blocks /= (double)(N / B);

    /* (d) */
    uint64_t *bat = malloc(b * sizeof *bat);
    double pairs = 0, together = 0;
    for (uint64_t first = 0; first < N; first += b) {
        uint64_t size = first + b <= N ? b : N - first;
        for (uint64_t i = 0; i < size; i++) /* a dropped position pairs with nothing */
            bat[i] = pos[0][first + i] < kept ? pos[0][first + i] / B : N + pos[0][first + i];
        qsort(bat, size, sizeof bat[0], cmp_u64);
        for (uint64_t i = 0, run = 1; i < size; i++, run++)
            if (i + 1 == size || bat[i + 1] != bat[i]) {
                together += (double)run * (double)(run - 1) / 2;
                run = 0;
            }
        pairs += (double)size * (double)(size - 1) / 2;
    }
    free(bat);
    double cobatch = together / pairs, uniform = (double)(B - 1) / (double)(N - 1);

    /* Time per index at batch B. */
    zr_sampler *sm = make(c, B, seed);
    double ns[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = now_ns();
        for (uint64_t s = 0; s < N / B; s++)
            if (zr_sampler_batch(sm, (uint64_t)r * (N / B) + s, tmp) != 0)
                die("zr_sampler_batch");
        ns[r] = (now_ns() - t0) / (double)kept;
    }
    zr_sampler_free(sm);
    qsort(ns, REPS, sizeof ns[0], cmp_double);

    char name[64];
    if (c->mode == ZR_CYCLIC)
        snprintf(name, sizeof name, "cyclic");
    else
        snprintf(name, sizeof name, "quasi %llu x %llu", (unsigned long long)b,
                 (unsigned long long)c->window);
    char lim[32] = "";
    if (c->mode == ZR_QUASI)
        snprintf(lim, sizeof lim, "%llu", (unsigned long long)bound(B, b, c->window));
    else
        snprintf(lim, sizeof lim, "%llu", (unsigned long long)B);
    printf("| %s | %+.4f | %.4f | %.3f | %.1f | %llu | %s | %.4f | %.0fx | %.0f |\n", name, corr,
           (double)same / (double)(N - 1), moved, blocks, (unsigned long long)most, lim,
           cobatch, cobatch / uniform, ns[REPS / 2]);
    for (int k = 0; k < 2; k++) {
        free(order[k]);
        free(pos[k]);
    }
}

int main(int argc, char **argv)
{
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : 1;
    if (argc > 2)
        N = strtoull(argv[2], NULL, 10);
    if (argc > 3)
        B = strtoull(argv[3], NULL, 10);
    if (N < 2 || B < 1 || B > MAX_B || B > N) {
        fprintf(stderr, "usage: quasibench [seed [N >= 2 [B in [1, min(N, %u)]]]]\n", MAX_B);
        return 2;
    }
    printf("N = %llu records, global batch %llu, seed %llu; quasi b x W is block b, window W.\n\n",
           (unsigned long long)N, (unsigned long long)B, (unsigned long long)seed);
    printf("| sampler | (a) lag-1 corr | (a) same block | (b) moved | (c) blocks/batch | (c) max |"
           " (c) bound | (d) co-batched | (d) vs uniform | ns/index |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++)
        row(&configs[k], seed);
    printf("\nUniform permutation: lag-1 corr 0, same block b / N, moved 1/3, co-batched "
           "about (B - 1) / (N - 1) = %.6f.\n", (double)(B - 1) / (double)(N - 1));
    return 0;
}

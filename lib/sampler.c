/*
 * sampler.c: the index sampler. It owns the three ways a training step is
 * turned into record indices (sequential, iid, cyclic) and the sharding of
 * each global batch among ranks.
 *
 * Every batch is computed from (parameters, seed, step) alone, with no
 * state carried between steps: resuming a run is asking for its step, and
 * a batch costs the same at step 10^12 as at step 0. For that the random
 * modes use counter-based randomness: a 64-bit key derived from the seed is
 * mixed with the step by the SplitMix64 finaliser, a bijective avalanche
 * function, and the position picks a word of a hashed Weyl sequence (iid)
 * or the input of a keyed permutation (cyclic), instead of advancing a
 * generator. Positions are global (rank * batch + offset) so the shards of
 * all ranks are slices of one global batch.
 *
 * The state is opaque to callers, so the derived key and permutation width
 * can only be what zr_sampler_setup computed.
 */
#include "sampler.h"

#define GOLDEN 0x9e3779b97f4a7c15ull /* SplitMix64's odd increment */

/* Domain-separation constants so that the iid and cyclic streams, and the
 * seed's key, never share inputs to the mixer. */
#define TAG_KEY 0x5a52b51e3e2c7f01ull
#define TAG_CYCLE 0xc2b2ae3d27d4eb4full

/* Rounds of the Feistel network. Four already give a pseudorandom
 * permutation in theory; six keep small domains well shuffled too. */
#define FEISTEL_ROUNDS 6

/* The SplitMix64 finaliser: a bijection on 64-bit words in which every
 * input bit affects every output bit. */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static bool mode_ok(int mode)
{
    return mode == ZR_SEQUENTIAL || mode == ZR_IID || mode == ZR_CYCLIC;
}

int zr_sampler_setup(zr_sampler *sm, uint64_t n, uint64_t batch, int mode, uint64_t seed,
                     uint32_t rank, uint32_t world)
{
    memset(sm, 0, sizeof *sm);
    if (!mode_ok(mode))
        return zr_err(ZR_EINVAL, "sampler mode %d is not ZR_SEQUENTIAL, ZR_IID or ZR_CYCLIC", mode);
    if (n == 0 || n > ZR_SAMPLER_MAX_N)
        return zr_err(ZR_EINVAL, "index space of %llu records: it must be in [1, 2^63]",
                      (unsigned long long)n);
    if (world == 0 || rank >= world)
        return zr_err(ZR_EINVAL, "rank %u of world %u: rank must be below world", rank, world);
    uint64_t global;
    if (batch == 0 || !zr_mul_ok(batch, world, &global) || global > n)
        return zr_err(ZR_EINVAL,
                      "batch %llu times world %u must be between 1 and the index space %llu",
                      (unsigned long long)batch, world, (unsigned long long)n);
    unsigned bits = 2;
    while (bits < 64 && ((uint64_t)1 << bits) < n)
        bits++;
    sm->n = n;
    sm->batch = batch;
    sm->global = global;
    sm->per_cycle = mode == ZR_CYCLIC ? n / global : 0;
    sm->seed = seed;
    sm->rank = rank;
    sm->world = world;
    sm->mode = mode;
    sm->bits = bits;
    sm->key = mix64(seed ^ TAG_KEY);
    return 0;
}

ZR_API int zr_sampler_create(zr_sampler **out, uint64_t n, uint64_t batch, int mode,
                             uint64_t seed, uint32_t rank, uint32_t world)
{
    if (!out)
        return zr_err(ZR_EINVAL, "zr_sampler_create: NULL argument");
    *out = NULL;
    zr_sampler *sm = zr_malloc(sizeof *sm);
    if (!sm)
        return zr_err(ZR_ENOMEM, "allocating a sampler");
    int rc = zr_sampler_setup(sm, n, batch, mode, seed, rank, world);
    if (rc != 0) {
        zr_free(sm);
        return rc;
    }
    *out = sm;
    return 0;
}

ZR_API void zr_sampler_free(zr_sampler *sm)
{
    zr_free(sm);
}

ZR_API int zr_sampler_get_info(const zr_sampler *sm, zr_sampler_info *info)
{
    if (!sm || !info)
        return zr_err(ZR_EINVAL, "zr_sampler_get_info: NULL argument");
    size_t n;
    int rc = zr_abi_check(info, sizeof *info, ZR_ABI_MIN(zr_sampler_info, n), "zr_sampler_info",
                          &n);
    if (rc != 0)
        return rc;
    zr_sampler_info full = {
        .size = sizeof full,
        .n = sm->n,
        .batch = sm->batch,
        .global = sm->global,
        .per_cycle = sm->per_cycle,
        .seed = sm->seed,
        .rank = sm->rank,
        .world = sm->world,
        .mode = sm->mode,
    };
    zr_abi_write(info, &full, n);
    return 0;
}

/* The window starts at (step * G) mod n, computed in 128 bits because the
 * product overflows 64 bits for large steps. start + p stays below 2n <=
 * 2^64, so one conditional subtraction wraps it. */
static void fill_sequential(const zr_sampler *sm, uint64_t step, uint64_t *out)
{
    uint64_t n = sm->n;
    uint64_t start = (uint64_t)(((unsigned __int128)step * sm->global) % n);
    start += sm->rank * sm->batch;
    if (start >= n)
        start -= n;
    for (uint64_t i = 0; i < sm->batch; i++) {
        uint64_t v = start + i;
        out[i] = v >= n ? v - n : v;
    }
}

/*
 * The iid words come from a Weyl sequence hashed by one 64x64->128-bit
 * multiply (the wyrand construction): the word at position p of a step is
 * mum(s, s ^ WY_XOR) with s = step_key + p * WY_INC, where mum folds the
 * 128-bit product to 64 bits. It is counter-based like the rest of the
 * sampler, passes the usual statistical batteries, and costs one multiply,
 * where the SplitMix64 finaliser takes two, which matters because drawing indices
 * is a tight loop of nothing else.
 */
#define WY_INC 0xa0761d6478bd642full
#define WY_XOR 0xe7037ed1a0b428dbull

static inline uint64_t wy_word(uint64_t step_key, uint64_t p)
{
    uint64_t s = step_key + p * WY_INC;
    unsigned __int128 m = (unsigned __int128)s * (s ^ WY_XOR);
    return (uint64_t)m ^ (uint64_t)(m >> 64);
}

/*
 * Lemire's nearly-divisionless method: the high word of x * n is uniform
 * on [0, n) once the draws whose low word falls below t = 2^64 mod n are
 * rejected, because every output then has exactly floor(2^64 / n)
 * preimages. A rejected draw is replaced by the next word of the position's
 * own chain, mix64(x + GOLDEN), so a retry never borrows another position's
 * randomness and the result stays a function of (seed, step, position).
 * The threshold (a division) is computed only when the low word falls below
 * n, which is rare unless n is near 2^64.
 */
static inline uint64_t lemire64(uint64_t x, uint64_t n, uint64_t *rejected)
{
    unsigned __int128 m = (unsigned __int128)x * n;
    if ((uint64_t)m < n) {
        uint64_t t = (0 - n) % n;
        while ((uint64_t)m < t) {
            (*rejected)++;
            x = mix64(x + GOLDEN);
            m = (unsigned __int128)x * n;
        }
    }
    return (uint64_t)(m >> 64);
}

/* One position of a space below 2^32: half of a word, drawn by the 32-bit
 * form of the same method. A rejected half continues with the 64-bit form
 * on its own chain, whose result is uniform too. */
static inline uint64_t iid32_at(uint64_t step_key, uint64_t p, uint32_t n, uint32_t t,
                                uint64_t *rejected)
{
    uint64_t x = wy_word(step_key, p >> 1);
    uint32_t h = (p & 1) ? (uint32_t)(x >> 32) : (uint32_t)x;
    uint64_t m = (uint64_t)h * n;
    if ((uint32_t)m >= t)
        return m >> 32;
    (*rejected)++;
    return lemire64(mix64(x + ((p & 1) + 1) * GOLDEN), n, rejected);
}

/* Index spaces below 2^32 (every real dataset) take two indices from each
 * word; larger ones one. Positions are global, so a shard's draws are the
 * same whatever the rank's offset. */
static uint64_t fill_iid(const zr_sampler *sm, uint64_t step, uint64_t *out)
{
    uint64_t n = sm->n;
    uint64_t rejected = 0;
    uint64_t step_key = mix64(sm->key + (step + 1) * GOLDEN);
    uint64_t pos0 = (uint64_t)sm->rank * sm->batch, count = sm->batch;
    if (n >= ((uint64_t)1 << 32)) {
        for (uint64_t i = 0; i < count; i++)
            out[i] = lemire64(wy_word(step_key, pos0 + i), n, &rejected);
        return rejected;
    }
    uint32_t n32 = (uint32_t)n, t32 = (uint32_t)(0 - n32) % n32;
    uint64_t i = 0;
    if (pos0 & 1) {
        out[0] = iid32_at(step_key, pos0, n32, t32, &rejected);
        i = 1;
    }
    /* Pairs: both halves of one word, accepted together unless either low
     * product falls below the threshold (then each takes the slow path). */
    for (; i + 2 <= count; i += 2) {
        uint64_t p = pos0 + i;
        uint64_t x = wy_word(step_key, p >> 1);
        uint64_t m0 = (uint64_t)(uint32_t)x * n32, m1 = (x >> 32) * n32;
        if ((uint32_t)m0 >= t32 && (uint32_t)m1 >= t32) {
            out[i] = m0 >> 32;
            out[i + 1] = m1 >> 32;
        } else {
            out[i] = iid32_at(step_key, p, n32, t32, &rejected);
            out[i + 1] = iid32_at(step_key, p + 1, n32, t32, &rejected);
        }
    }
    if (i < count)
        out[i] = iid32_at(step_key, pos0 + i, n32, t32, &rejected);
    return rejected;
}

/* A permutation of [0, 2^bits) for one cycle: an unbalanced Feistel network
 * whose two halves (hi and lo bits wide) trade places every round. */
struct feistel {
    uint64_t keys[FEISTEL_ROUNDS];
    unsigned bits;
};

static uint64_t feistel_apply(const struct feistel *f, uint64_t x)
{
    unsigned lo_w = f->bits / 2, hi_w = f->bits - lo_w;
    for (int r = 0; r < FEISTEL_ROUNDS; r++) {
        uint64_t lo_mask = ((uint64_t)1 << lo_w) - 1, hi_mask = ((uint64_t)1 << hi_w) - 1;
        uint64_t hi = x >> lo_w, lo = x & lo_mask;
        x = (lo << hi_w) | ((hi ^ mix64(lo ^ f->keys[r])) & hi_mask);
        unsigned w = lo_w;
        lo_w = hi_w;
        hi_w = w;
    }
    return x;
}

/* The same network over LANES consecutive inputs at once. Each input is a
 * long chain of dependent multiplies; interleaving independent chains
 * lets the processor overlap them, which is most of the speed. */
#define LANES 8

static void feistel_lanes(const struct feistel *f, uint64_t first, uint64_t *x)
{
    for (int l = 0; l < LANES; l++)
        x[l] = first + (uint64_t)l;
    unsigned lo_w = f->bits / 2, hi_w = f->bits - lo_w;
    for (int r = 0; r < FEISTEL_ROUNDS; r++) {
        uint64_t lo_mask = ((uint64_t)1 << lo_w) - 1, hi_mask = ((uint64_t)1 << hi_w) - 1;
        for (int l = 0; l < LANES; l++) {
            uint64_t hi = x[l] >> lo_w, lo = x[l] & lo_mask;
            x[l] = (lo << hi_w) | ((hi ^ mix64(lo ^ f->keys[r])) & hi_mask);
        }
        unsigned w = lo_w;
        lo_w = hi_w;
        hi_w = w;
    }
}

/* Cycle-walking: applying the permutation again until the value lands in
 * [0, n) restricts a permutation of the power-of-two domain to one of
 * [0, n). It terminates because the walk follows the permutation's cycle
 * through the starting point, itself below n; with the domain under 2n the
 * expected number of steps is below two. */
static inline uint64_t walk(const struct feistel *f, uint64_t x, uint64_t n)
{
    while (x >= n)
        x = feistel_apply(f, x);
    return x;
}

static void fill_cyclic(const zr_sampler *sm, uint64_t step, uint64_t *out)
{
    uint64_t cycle = step / sm->per_cycle, within = step % sm->per_cycle;
    struct feistel f = {.bits = sm->bits};
    uint64_t cycle_key = mix64(sm->key ^ mix64((cycle + 1) * GOLDEN ^ TAG_CYCLE));
    for (int r = 0; r < FEISTEL_ROUNDS; r++)
        f.keys[r] = mix64(cycle_key + (uint64_t)(r + 1) * GOLDEN);
    uint64_t pos0 = within * sm->global + (uint64_t)sm->rank * sm->batch;
    uint64_t i = 0;
    for (; i + LANES <= sm->batch; i += LANES) {
        uint64_t x[LANES];
        feistel_lanes(&f, pos0 + i, x);
        for (int l = 0; l < LANES; l++)
            out[i + (uint64_t)l] = walk(&f, x[l], sm->n);
    }
    for (; i < sm->batch; i++)
        out[i] = walk(&f, feistel_apply(&f, pos0 + i), sm->n);
}

int zr_sampler_batch_counted(const zr_sampler *sm, uint64_t step, uint64_t *out,
                             uint64_t *rejections)
{
    if (!sm || !out)
        return zr_err(ZR_EINVAL, "zr_sampler_batch: NULL argument");
    switch (sm->mode) {
    case ZR_SEQUENTIAL:
        fill_sequential(sm, step, out);
        break;
    case ZR_IID: {
        uint64_t r = fill_iid(sm, step, out);
        if (rejections)
            *rejections += r;
        break;
    }
    default:
        fill_cyclic(sm, step, out);
        break;
    }
    return 0;
}

ZR_API int zr_sampler_batch(const zr_sampler *sm, uint64_t step, uint64_t *out)
{
    return zr_sampler_batch_counted(sm, step, out, NULL);
}

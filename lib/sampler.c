/*
 * sampler.c: the index sampler. It owns the four ways a training step is
 * turned into record indices (sequential, iid, cyclic, quasi) and the
 * sharding of each global batch among ranks.
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

/* Domain-separation constants so that the iid, cyclic and quasi streams,
 * and the seed's key, never share inputs to the mixer. */
#define TAG_KEY 0x5a52b51e3e2c7f01ull
#define TAG_CYCLE 0xc2b2ae3d27d4eb4full
#define TAG_QUASI 0x165667b19e3779f9ull
#define TAG_WINDOW 0x27d4eb2f165667c5ull

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
    return mode == ZR_SEQUENTIAL || mode == ZR_IID || mode == ZR_CYCLIC || mode == ZR_QUASI;
}

/* The width of a power-of-two domain covering [0, n): at least 2 bits, so
 * that both halves of the Feistel network have one. */
static unsigned domain_bits(uint64_t n)
{
    unsigned bits = 2;
    while (bits < 64 && ((uint64_t)1 << bits) < n)
        bits++;
    return bits;
}

int zr_sampler_setup(zr_sampler *sm, uint64_t n, const zr_sampler_opts *o)
{
    memset(sm, 0, sizeof *sm);
    int mode = o->mode;
    uint64_t batch = o->batch, seed = o->seed;
    uint32_t rank = o->rank, world = o->world ? o->world : 1;
    if (!mode_ok(mode))
        return zr_err(ZR_EINVAL,
                      "sampler mode %d is not ZR_SEQUENTIAL, ZR_IID, ZR_CYCLIC or ZR_QUASI", mode);
    if (mode != ZR_QUASI && (o->block || o->window))
        return zr_err(ZR_EINVAL, "block %llu and window %llu apply to ZR_QUASI only: set them to 0",
                      (unsigned long long)o->block, (unsigned long long)o->window);
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
    sm->n = n;
    sm->batch = batch;
    sm->global = global;
    sm->per_cycle = mode == ZR_CYCLIC || mode == ZR_QUASI ? n / global : 0;
    sm->seed = seed;
    sm->rank = rank;
    sm->world = world;
    sm->mode = mode;
    sm->bits = domain_bits(n);
    sm->key = mix64(seed ^ TAG_KEY);
    if (mode == ZR_QUASI) {
        /* Clamping changes nothing in the order: a block of n records or
         * more is the whole space, a window of all blocks or more is one
         * window. It keeps window * block <= n + block - 1 < 2^64. */
        sm->block_asked = o->block ? o->block : ZR_QUASI_BLOCK;
        sm->window_asked = o->window ? o->window : ZR_QUASI_WINDOW;
        sm->block = sm->block_asked < n ? sm->block_asked : n;
        sm->nblocks = n / sm->block + (n % sm->block != 0);
        sm->tail = n % sm->block;
        sm->window = sm->window_asked < sm->nblocks ? sm->window_asked : sm->nblocks;
        sm->bits = domain_bits(sm->nblocks);
    }
    return 0;
}

static int create(zr_sampler **out, uint64_t n, const zr_sampler_opts *o)
{
    zr_sampler *sm = zr_malloc(sizeof *sm);
    if (!sm)
        return zr_err(ZR_ENOMEM, "allocating a sampler");
    int rc = zr_sampler_setup(sm, n, o);
    if (rc != 0) {
        zr_free(sm);
        return rc;
    }
    *out = sm;
    return 0;
}

ZR_API int zr_sampler_create(zr_sampler **out, uint64_t n, uint64_t batch, int mode,
                             uint64_t seed, uint32_t rank, uint32_t world)
{
    if (!out)
        return zr_err(ZR_EINVAL, "zr_sampler_create: NULL argument");
    *out = NULL;
    /* Here world 0 is an error, not the default it is in the options. */
    if (world == 0)
        return zr_err(ZR_EINVAL, "rank %u of world 0: world must be at least 1", rank);
    zr_sampler_opts o = {.size = sizeof o, .mode = mode, .batch = batch, .seed = seed,
                         .rank = rank, .world = world};
    return create(out, n, &o);
}

ZR_API int zr_sampler_create_opts(zr_sampler **out, uint64_t n, const zr_sampler_opts *opts)
{
    if (out)
        *out = NULL;
    if (!out || !opts)
        return zr_err(ZR_EINVAL, "zr_sampler_create_opts: NULL argument");
    zr_sampler_opts o = ZR_SAMPLER_OPTS_INIT;
    int rc = zr_abi_read(&o, sizeof o, opts, ZR_ABI_MIN(zr_sampler_opts, mode), "zr_sampler_opts");
    if (rc != 0)
        return rc;
    return create(out, n, &o);
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
        .block = sm->block_asked,
        .window = sm->window_asked,
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

static void feistel_lanes_of(const struct feistel *f, uint64_t *x)
{
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

/* The network over the LANES consecutive inputs from first. */
static void feistel_lanes(const struct feistel *f, uint64_t first, uint64_t *x)
{
    for (int l = 0; l < LANES; l++)
        x[l] = first + (uint64_t)l;
    feistel_lanes_of(f, x);
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

/* The network of a key: the round keys are words of the key's own chain. */
static void feistel_init(struct feistel *f, uint64_t key, unsigned bits)
{
    f->bits = bits;
    for (int r = 0; r < FEISTEL_ROUNDS; r++)
        f->keys[r] = mix64(key + (uint64_t)(r + 1) * GOLDEN);
}

/* The inverse network: the rounds undone from the last. Round r maps
 * (hi, lo), of widths (h, l), to (lo, hi ^ F(lo)) of widths (l, h); so the
 * value after it has its round input's lo in its top l bits and the
 * masked hi ^ F(lo) in its low h bits. */
static uint64_t feistel_invert(const struct feistel *f, uint64_t y)
{
    unsigned half = f->bits / 2, rest = f->bits - half;
    for (int r = FEISTEL_ROUNDS - 1; r >= 0; r--) {
        unsigned lo_w = (r % 2 == 0) ? half : rest, hi_w = f->bits - lo_w;
        uint64_t hi_mask = ((uint64_t)1 << hi_w) - 1;
        uint64_t lo = y >> hi_w;
        uint64_t hi = ((y & hi_mask) ^ mix64(lo ^ f->keys[r])) & hi_mask;
        y = (hi << lo_w) | lo;
    }
    return y;
}

/* Cycle-walking backwards: the inverse of walk on [0, n). */
static inline uint64_t walk_back(const struct feistel *f, uint64_t y, uint64_t n)
{
    do
        y = feistel_invert(f, y);
    while (y >= n);
    return y;
}

static void cyclic_network(const zr_sampler *sm, uint64_t cycle, struct feistel *f)
{
    feistel_init(f, mix64(sm->key ^ mix64((cycle + 1) * GOLDEN ^ TAG_CYCLE)), sm->bits);
}

static void fill_cyclic(const zr_sampler *sm, uint64_t step, uint64_t *out)
{
    uint64_t cycle = step / sm->per_cycle, within = step % sm->per_cycle;
    struct feistel f;
    cyclic_network(sm, cycle, &f);
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

/*
 * ZR_QUASI. With b records per block, nb = ceil(n / b) blocks of which the
 * last holds tail < b records when b does not divide n, and W blocks per
 * window, cycle c's order is built in three layers, each a keyed
 * permutation as in the cyclic mode (a Feistel network and cycle-walking),
 * so that nothing the size of the index space is stored:
 *
 *  1. the block order: slot j of the cycle holds block B(j), B a
 *     permutation of [0, nb); laying the blocks out slot after slot gives
 *     a sequence of all n records, in which slot j starts at
 *     start(j) = j * b, less b - tail if the short block sits in an
 *     earlier slot (star, found by inverting B once per batch);
 *  2. the windows: window w is the slots [w * W, (w + 1) * W), the
 *     sequence's records from start(w * W) to start((w + 1) * W);
 *  3. the shuffle: position p of the cycle lies in the window w whose
 *     span holds it, and takes the record at the sequence position
 *     start(w * W) + S_w(p - start(w * W)), S_w a permutation of the
 *     window's length keyed by (c, w).
 *
 * Each layer is a bijection, so a cycle is a permutation of [0, n), and a
 * window's positions take exactly its own blocks' records. Consecutive
 * positions stay in one window (or cross into the next), which is where
 * the bound on the blocks a batch touches comes from (loader.h).
 */
struct quasi {
    struct feistel blocks; /* slot -> block, over nb */
    uint64_t cycle_key;
    uint64_t star;         /* the slot of the short block; nb if there is none */
    uint64_t shift;        /* b - tail if there is a short block, else 0 */
};

static void quasi_cycle(const zr_sampler *sm, uint64_t cycle, struct quasi *q)
{
    q->cycle_key = mix64(sm->key ^ mix64((cycle + 1) * GOLDEN ^ TAG_QUASI));
    feistel_init(&q->blocks, q->cycle_key, sm->bits);
    q->star = sm->nblocks;
    q->shift = 0;
    if (sm->tail) {
        q->star = walk_back(&q->blocks, sm->nblocks - 1, sm->nblocks);
        q->shift = sm->block - sm->tail;
    }
}

/* Where slot j (0 <= j <= nb) starts in the cycle's sequence: n for nb. */
static inline uint64_t slot_start(const zr_sampler *sm, const struct quasi *q, uint64_t j)
{
    uint64_t s = j * sm->block;
    return j > q->star ? s - q->shift : s;
}

/* Where window w (below the number of windows) starts; w one past the
 * last gives n. */
static inline uint64_t window_start(const zr_sampler *sm, const struct quasi *q, uint64_t w)
{
    uint64_t j = w * sm->window;
    return slot_start(sm, q, j < sm->nblocks ? j : sm->nblocks);
}

/* One window's shuffle: its span [lo, hi) and its keyed permutation. */
struct quasi_window {
    uint64_t w, lo, hi;
    struct feistel f;
};

static void quasi_window(const zr_sampler *sm, const struct quasi *q, uint64_t w,
                         struct quasi_window *qw)
{
    qw->w = w;
    qw->lo = window_start(sm, q, w);
    qw->hi = window_start(sm, q, w + 1);
    feistel_init(&qw->f, mix64(q->cycle_key ^ mix64((w + 1) * GOLDEN ^ TAG_WINDOW)),
                 domain_bits(qw->hi - qw->lo));
}

/* The window holding position p. Window w starts at w * W * b, or b - tail
 * earlier once the short block lies in an earlier slot, so the window is
 * p / (W * b) or the one after it. */
static uint64_t window_of(const zr_sampler *sm, const struct quasi *q, uint64_t p)
{
    uint64_t w = p / (sm->window * sm->block);
    if (window_start(sm, q, w + 1) <= p)
        w++;
    return w;
}

/* The slot holding position s of the cycle's sequence, and in *off the
 * offset of s in it. */
static inline uint64_t quasi_slot(const zr_sampler *sm, const struct quasi *q, uint64_t s,
                                  uint64_t *off)
{
    uint64_t b = sm->block, cut = q->star * b;
    if (s < cut) {
        *off = s % b;
        return s / b;
    }
    if (s < cut + sm->tail) {
        *off = s - cut;
        return q->star;
    }
    s += q->shift;
    *off = s % b;
    return s / b;
}

/* The record at position p of the window qw (lo <= p < hi). */
static inline uint64_t quasi_record(const zr_sampler *sm, const struct quasi *q,
                                    const struct quasi_window *qw, uint64_t p)
{
    uint64_t len = qw->hi - qw->lo, off;
    uint64_t s = qw->lo + walk(&qw->f, feistel_apply(&qw->f, p - qw->lo), len);
    uint64_t j = quasi_slot(sm, q, s, &off);
    return walk(&q->blocks, feistel_apply(&q->blocks, j), sm->nblocks) * sm->block + off;
}

static void fill_quasi(const zr_sampler *sm, uint64_t step, uint64_t *out)
{
    uint64_t cycle = step / sm->per_cycle, within = step % sm->per_cycle;
    struct quasi q;
    quasi_cycle(sm, cycle, &q);
    uint64_t pos0 = within * sm->global + (uint64_t)sm->rank * sm->batch;
    struct quasi_window qw;
    quasi_window(sm, &q, window_of(sm, &q, pos0), &qw);
    uint64_t i = 0;
    while (i < sm->batch) {
        uint64_t p = pos0 + i;
        if (p >= qw.hi)
            quasi_window(sm, &q, qw.w + 1, &qw);
        if (i + LANES > sm->batch || p + LANES > qw.hi) {
            out[i++] = quasi_record(sm, &q, &qw, p);
            continue;
        }
        /* LANES positions of one window, both networks interleaved as in
         * the cyclic mode: the same values as quasi_record's. */
        uint64_t x[LANES], off[LANES], len = qw.hi - qw.lo;
        feistel_lanes(&qw.f, p - qw.lo, x);
        for (int l = 0; l < LANES; l++)
            x[l] = quasi_slot(sm, &q, qw.lo + walk(&qw.f, x[l], len), &off[l]);
        feistel_lanes_of(&q.blocks, x);
        for (int l = 0; l < LANES; l++)
            out[i + (uint64_t)l] = walk(&q.blocks, x[l], sm->nblocks) * sm->block + off[l];
        i += LANES;
    }
}

uint64_t zr_sampler_at(const zr_sampler *sm, uint64_t cycle, uint64_t pos)
{
    if (sm->mode == ZR_CYCLIC) {
        struct feistel f;
        cyclic_network(sm, cycle, &f);
        return walk(&f, feistel_apply(&f, pos), sm->n);
    }
    if (sm->mode != ZR_QUASI)
        return UINT64_MAX;
    struct quasi q;
    struct quasi_window qw;
    quasi_cycle(sm, cycle, &q);
    quasi_window(sm, &q, window_of(sm, &q, pos), &qw);
    return quasi_record(sm, &q, &qw, pos);
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
    case ZR_QUASI:
        fill_quasi(sm, step, out);
        break;
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

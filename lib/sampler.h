/*
 * sampler.h: the sampler's state, which the loader keeps inside its own
 * struct, and private hooks its tests use: one watches the rejection step
 * of the IID mode at work, one reads a cycle's whole order, remainder
 * included.
 */
#ifndef ZR_SAMPLER_H
#define ZR_SAMPLER_H

#include "internal.h"

struct zr_sampler {
    uint64_t n;         /* the index space: indices are in [0, n) */
    uint64_t batch;     /* indices per batch on this rank */
    uint64_t global;    /* indices per global batch: batch * world */
    uint64_t per_cycle; /* ZR_CYCLIC, ZR_QUASI: steps per cycle (n / global); 0 otherwise */
    uint64_t seed;
    uint32_t rank;
    uint32_t world;
    int mode;           /* ZR_SEQUENTIAL, ZR_IID, ZR_CYCLIC or ZR_QUASI */
    unsigned bits;      /* ZR_CYCLIC's permutation domain is 2^bits; ZR_QUASI's
                         * block permutation's */
    uint64_t key;       /* derived from seed */
    /* ZR_QUASI only: the block and window asked for (what the info
     * reports), and the ones in use: block at most n, window at most the
     * number of blocks, which give the same order. */
    uint64_t block_asked, window_asked;
    uint64_t block;     /* records per block */
    uint64_t window;    /* blocks per window */
    uint64_t nblocks;   /* ceil(n / block) */
    uint64_t tail;      /* records of the last block if it is short, else 0 */
};

/* Set up *sm as zr_sampler_create_opts describes, in memory the caller
 * owns, from a complete options struct (this library's size). */
int zr_sampler_setup(zr_sampler *sm, uint64_t n, const zr_sampler_opts *o);

/* zr_sampler_batch, adding to *rejections the number of 64-bit draws that
 * Lemire's method rejected (only ZR_IID rejects anything). */
int zr_sampler_batch_counted(const zr_sampler *sm, uint64_t step, uint64_t *out,
                             uint64_t *rejections);

/* ZR_CYCLIC and ZR_QUASI: the index at position pos (below n) of cycle's
 * order, including the positions past per_cycle * global that the batches
 * drop. Other modes give UINT64_MAX. */
uint64_t zr_sampler_at(const zr_sampler *sm, uint64_t cycle, uint64_t pos);

#endif

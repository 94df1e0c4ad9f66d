/*
 * sampler.h: the sampler's state, which the loader keeps inside its own
 * struct, and a private hook its tests use to watch the rejection step of
 * the IID mode at work.
 */
#ifndef ZR_SAMPLER_H
#define ZR_SAMPLER_H

#include "internal.h"

struct zr_sampler {
    uint64_t n;         /* the index space: indices are in [0, n) */
    uint64_t batch;     /* indices per batch on this rank */
    uint64_t global;    /* indices per global batch: batch * world */
    uint64_t per_cycle; /* ZR_CYCLIC: steps per cycle (n / global); 0 otherwise */
    uint64_t seed;
    uint32_t rank;
    uint32_t world;
    int mode;           /* ZR_SEQUENTIAL, ZR_IID or ZR_CYCLIC */
    unsigned bits;      /* ZR_CYCLIC's permutation domain is 2^bits */
    uint64_t key;       /* derived from seed */
};

/* Set up *sm as zr_sampler_create describes, in memory the caller owns. */
int zr_sampler_setup(zr_sampler *sm, uint64_t n, uint64_t batch, int mode, uint64_t seed,
                     uint32_t rank, uint32_t world);

/* zr_sampler_batch, adding to *rejections the number of 64-bit draws that
 * Lemire's method rejected (only ZR_IID rejects anything). */
int zr_sampler_batch_counted(const zr_sampler *sm, uint64_t step, uint64_t *out,
                             uint64_t *rejections);

#endif

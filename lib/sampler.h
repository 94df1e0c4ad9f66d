/*
 * sampler.h: private hooks of the sampler, used by its tests to watch the
 * rejection step of the IID mode at work.
 */
#ifndef ZR_SAMPLER_H
#define ZR_SAMPLER_H

#include "internal.h"

/* zr_sampler_batch, adding to *rejections the number of 64-bit draws that
 * Lemire's method rejected (only ZR_IID rejects anything). */
int zr_sampler_batch_counted(const zr_sampler *sm, uint64_t step, uint64_t *out,
                             uint64_t *rejections);

#endif

/*
 * codec.h: zstd contexts, reused rather than created per record.
 */
#ifndef ZR_CODEC_H
#define ZR_CODEC_H

#include <zstd.h>

#define ZR_ZSTD_LEVEL 3
#define ZR_ZSTD_DICT_LEVEL 19

/* Take a context from the process-wide cache (or make one); NULL when out
 * of memory. Give it back with the matching put. */
ZSTD_DCtx *zr_dctx_get(void);
void zr_dctx_put(ZSTD_DCtx *d);
ZSTD_CCtx *zr_cctx_get(void);
void zr_cctx_put(ZSTD_CCtx *c);

#endif

/*
 * codec.c: a process-wide cache of zstd compression and decompression
 * contexts. A batched call takes one context per shard and returns it at
 * the end, so each worker reuses one context across all of its records
 * and no call pays context setup per record. The cache is bounded; extra
 * contexts are freed on return, and all are freed when the library unloads.
 */
#include <pthread.h>
#include <stdlib.h>

#include "codec.h"

#define CACHE_MAX 64

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static ZSTD_DCtx *dcache[CACHE_MAX];
static ZSTD_CCtx *ccache[CACHE_MAX];
static int ndc, ncc;

ZSTD_DCtx *zr_dctx_get(void)
{
    ZSTD_DCtx *d = NULL;
    pthread_mutex_lock(&cache_lock);
    if (ndc > 0)
        d = dcache[--ndc];
    pthread_mutex_unlock(&cache_lock);
    return d ? d : ZSTD_createDCtx();
}

void zr_dctx_put(ZSTD_DCtx *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&cache_lock);
    if (ndc < CACHE_MAX) {
        dcache[ndc++] = d;
        d = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
    ZSTD_freeDCtx(d);
}

ZSTD_CCtx *zr_cctx_get(void)
{
    ZSTD_CCtx *c = NULL;
    pthread_mutex_lock(&cache_lock);
    if (ncc > 0)
        c = ccache[--ncc];
    pthread_mutex_unlock(&cache_lock);
    return c ? c : ZSTD_createCCtx();
}

void zr_cctx_put(ZSTD_CCtx *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&cache_lock);
    if (ncc < CACHE_MAX) {
        ccache[ncc++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
    ZSTD_freeCCtx(c);
}

__attribute__((destructor)) static void codec_cache_free(void)
{
    pthread_mutex_lock(&cache_lock);
    while (ndc > 0)
        ZSTD_freeDCtx(dcache[--ndc]);
    while (ncc > 0)
        ZSTD_freeCCtx(ccache[--ncc]);
    pthread_mutex_unlock(&cache_lock);
}

/*
 * pool.h: the process-wide worker pool that batched calls fan out over.
 */
#ifndef ZR_POOL_H
#define ZR_POOL_H

#include <stddef.h>

/* Run fn(ctx, k) for every shard k in [0, nshards), spread over the pool's
 * workers and the calling thread, and return when all have finished. The
 * caller always takes part, so a call never waits for a busy pool to make
 * progress and calls may nest. One shard runs inline. */
void zr_pool_run(size_t nshards, void (*fn)(void *ctx, size_t shard), void *ctx);

/* Like zr_pool_run, for jobs too small to be worth waking a sleeping
 * worker for: only workers already awake take shards, and with none awake
 * the caller runs every shard itself. */
void zr_pool_run_light(size_t nshards, void (*fn)(void *ctx, size_t shard), void *ctx);

/* The number of threads a call fans out to, counting the caller. */
int zr_pool_threads(void);

#endif

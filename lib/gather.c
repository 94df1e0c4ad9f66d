/*
 * gather.c: reading a batch of records, in request order, into the
 * caller's memory.
 *
 * The record table and the chunks are read through read-only shared
 * mappings, so a warm gather makes no system call per record: it checks
 * the entry (R5), then copies (raw) or decompresses (zstd) straight from
 * the page cache into the destination. The batch is cut into contiguous
 * blocks of requests that the pool's threads claim; each block takes one
 * zstd context and reuses it for all of its records. A batch of one record
 * runs on the caller's thread.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "codec.h"
#include "engine.h"
#include "pool.h"

/* Below this many output bytes per block, splitting costs more than it
 * saves. */
#define MIN_BLOCK_BYTES (64u << 10)

struct gather_ctx {
    zr_store *s;
    const uint64_t *idx;
    size_t n;
    uint8_t *dst;
    const uint64_t *offsets;
    size_t nshards;
    _Atomic int failed;
    pthread_mutex_t err_lock;
    int err;
    char errmsg[512];
};

static void gather_error(struct gather_ctx *c, int rc)
{
    pthread_mutex_lock(&c->err_lock);
    if (c->err == 0) {
        c->err = rc;
        snprintf(c->errmsg, sizeof c->errmsg, "%s", zr_last_error());
    }
    pthread_mutex_unlock(&c->err_lock);
    atomic_store(&c->failed, 1);
}

static int read_one(zr_store *s, ZSTD_DCtx *dctx, uint64_t i, uint8_t *out)
{
    struct zr_loc l;
    if (zr_loc_get(s, i, &l) != 0)
        return zr_loc_error(s, i, "entry is out of bounds or inconsistent");
    const uint8_t *src = zr_ftable_at(&s->chunks, l.chunk_id)->map + l.offset;
    if (s->codec == ZR_CODEC_RAW) {
        memcpy(out, src, l.logic_length);
    } else {
        size_t r = s->ddict ? ZSTD_decompress_usingDDict(dctx, out, l.logic_length, src,
                                                          l.phys_length, s->ddict)
                            : ZSTD_decompressDCtx(dctx, out, l.logic_length, src, l.phys_length);
        if (ZSTD_isError(r))
            return zr_loc_error(s, i, ZSTD_getErrorName(r));
        if (r != l.logic_length)
            return zr_loc_error(s, i, "record decodes to fewer bytes than its entry says");
    }
    if (s->id.kind == ZR_RAGGED) {
        uint32_t nd;
        uint64_t poff;
        if (zr_prefix_check(out, l.logic_length, s->id.itemsize, &nd, &poff) != 0)
            return zr_loc_error(s, i, "shape prefix does not match the record's length");
    }
    return 0;
}

static void gather_shard(void *arg, size_t k)
{
    struct gather_ctx *c = arg;
    zr_store *s = c->s;
    size_t a = c->n * k / c->nshards, b = c->n * (k + 1) / c->nshards;
    ZSTD_DCtx *dctx = NULL;
    if (s->codec != ZR_CODEC_RAW && !(dctx = zr_dctx_get())) {
        gather_error(c, zr_err(ZR_ENOMEM, "creating a zstd context"));
        return;
    }
    for (size_t j = a; j < b; j++) {
        if (atomic_load_explicit(&c->failed, memory_order_relaxed))
            break;
        uint8_t *out = c->dst + (c->offsets ? c->offsets[j] : j * s->width);
        int rc = read_one(s, dctx, c->idx[j], out);
        if (rc != 0) {
            gather_error(c, rc);
            break;
        }
    }
    zr_dctx_put(dctx);
}

int zr_engine_gather(zr_store *s, const uint64_t *idx, size_t n, uint8_t *dst,
                     const uint64_t *offsets)
{
    uint64_t len;
    int rc = zr_check_indices(s, idx, n, &len);
    if (rc != 0 || n == 0)
        return rc;
    struct gather_ctx c = {.s = s, .idx = idx, .n = n, .dst = dst, .offsets = offsets};
    pthread_mutex_init(&c.err_lock, NULL);
    if (n == 1) {
        c.nshards = 1;
        gather_shard(&c, 0);
    } else {
        /* Estimate the work from the first entry's size; blocks of at
         * least MIN_BLOCK_BYTES, a few per thread for balance. */
        struct zr_loc l;
        uint64_t rec = zr_loc_get(s, idx[0], &l) == 0 ? l.logic_length : MIN_BLOCK_BYTES;
        uint64_t total = rec * n;
        size_t threads = (size_t)zr_pool_threads();
        size_t per_thread = s->codec == ZR_CODEC_RAW ? 2 : 4;
        size_t shards = (size_t)ZR_MIN((uint64_t)n, (uint64_t)threads * per_thread);
        shards = (size_t)ZR_MIN((uint64_t)shards, ZR_MAX(1, total / MIN_BLOCK_BYTES));
        c.nshards = shards;
        zr_pool_run(shards, gather_shard, &c);
    }
    pthread_mutex_destroy(&c.err_lock);
    if (c.err != 0) {
        zr_err_restore(c.err, c.errmsg);
        return c.err;
    }
    return 0;
}

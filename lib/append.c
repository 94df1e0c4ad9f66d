/*
 * append.c: adding a batch of records as one commit.
 *
 * Rules enforced here (doc/format.md):
 *  R6. Payload first, then the record table, then the header: the header
 *      write is the commit, and nothing of a batch is visible before it.
 *      In memory the new length is published (release) only after the
 *      header is written, so a concurrent gather never sees a record whose
 *      bytes or entry are not in place.
 *  R7. A record never straddles two chunks: one that does not fit in the
 *      rest of the current chunk starts the next chunk at offset 0. A
 *      frontier at the very end of a chunk is committed as offset 0 of the
 *      next one (zr_frontier_settle).
 *  R8. Bytes past the committed frontier, and table entries past the
 *      committed length, are garbage: a failed or interrupted append
 *      leaves them, and the next append overwrites them.
 *  R16. An append that may overwrite bytes or entries the disk still
 *      holds makes what it wrote durable before the header: otherwise a
 *      power cut could keep the new header with the old bytes or entries,
 *      which a raw store cannot tell from records and which may name other
 *      live records. That is the first append on a clean handle (just
 *      opened, synced, or after a delete or compaction: the truncations of
 *      a compaction and the entries a delete leaves past the length may
 *      still be on disk) and any append that overwrites garbage of R8.
 *      The appends after it only extend files whose ends are durable: what
 *      a power cut loses of them lies past the files' ends and is cut off
 *      at open (R15, lib/open.c).
 *
 * Raw records are laid out in order and written straight from the
 * caller's memory, the writes spread over the pool: a Dense window's
 * bytes cut between the threads on 2 MiB boundaries of the chunk
 * (dense_cut) and written in pieces of at most WRITE_PIECE bytes, each
 * faulted in just before its write (zr_populate).
 * Compressed records are claimed one at a time by the workers and
 * compressed into the worker's own group buffer; a full group (up to 256
 * records or about 1 MiB) takes the next free offsets for its records, in
 * completion order, in one short visit to the frontier lock, and is
 * written with one write per run of adjacent frames, the workers writing
 * in parallel. Ragged raw records likewise go out up to 512 per write. The batch is handled
 * in windows of WINDOW records, so the working memory (one table window and
 * one buffer per worker) is bounded whatever the batch size.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "codec.h"
#include "engine.h"
#include "io.h"
#include "pool.h"

#define WINDOW 65536

struct append_ctx {
    zr_store *s;
    const struct zr_src *src;
    uint64_t w0, w1;      /* the window: source records [w0, w1) */
    struct zr_loc *locs;  /* entries of the window */
    size_t nshards;
    _Atomic uint64_t next; /* compressed: next record to claim */
    _Atomic int failed;
    pthread_mutex_t err_lock;
    int err;
    char errmsg[512];
};

static void set_error(struct append_ctx *c, int rc)
{
    pthread_mutex_lock(&c->err_lock);
    if (c->err == 0) {
        c->err = rc;
        snprintf(c->errmsg, sizeof c->errmsg, "%s", zr_last_error());
    }
    pthread_mutex_unlock(&c->err_lock);
    atomic_store(&c->failed, 1);
}

void zr_src_fill_prefix(const struct zr_src *src, uint64_t k, uint8_t *out)
{
    const zr_rec *r = &src->recs[k];
    zr_store64(out, r->ndim);
    for (uint32_t d = 0; d < r->ndim; d++)
        zr_store64(out + 8 + 8 * d, r->shape[d]);
}

/* Reserve size bytes at the frontier, rolling over to a new chunk when the
 * record does not fit in the current one (R7). Called with frontier_lock
 * held. */
static int reserve_locked(zr_store *s, uint64_t size, struct zr_loc *loc)
{
    if (size > s->chunk_cap)
        return zr_err(ZR_ETOOBIG, "a record of %llu bytes does not fit in a chunk of %llu",
                      (unsigned long long)size, (unsigned long long)s->chunk_cap);
    if (s->fr_offset + size > s->chunk_cap) {
        uint32_t c = s->fr_chunk + 1;
        if (c >= atomic_load(&s->chunks.count)) {
            int rc = zr_ftable_add(s, &s->chunks, c, true);
            if (rc != 0)
                return rc;
        }
        s->fr_chunk = c;
        s->fr_offset = 0;
    }
    loc->chunk_id = s->fr_chunk;
    loc->offset = (uint32_t)s->fr_offset;
    s->fr_offset += size;
    zr_ftable_at(&s->chunks, s->fr_chunk)->wend = s->fr_offset;
    return 0;
}

static int reserve(zr_store *s, uint64_t size, struct zr_loc *loc)
{
    pthread_mutex_lock(&s->frontier_lock);
    int rc = reserve_locked(s, size, loc);
    pthread_mutex_unlock(&s->frontier_lock);
    return rc;
}

static const char *chunk_name(const zr_store *s, uint32_t c, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%u.chunk", s->path, c);
    return buf;
}

/* Ragged raw records written by one pwritev: a prefix and a payload
 * iovec each, within IOV_MAX. */
#define RAW_RUN 512

/* A Dense run is written in pieces that end on multiples of this many
 * bytes of the chunk (a multiple of 2 MiB), each faulted into the page
 * tables just before its write (zr_populate), so that a run from a buffer
 * larger than the RAM is not faulted in all at once. The kernel copies a
 * write into the page cache in pieces of up to 2 MiB, each a page-cache
 * folio of that size, but halves the piece for the rest of the call
 * whenever a copy stops at a source page that is not mapped yet, as in a
 * buffer that maps a file (an .npy opened with mmap): the chunk would then
 * end up in 4 KiB pages, which a store's huge-page mapping (tables.c)
 * cannot use. */
#define WRITE_PIECE ((uint64_t)64 << 20)
/* The largest page-cache folio the kernel makes of a write (a PMD). */
#define HUGE_FOLIO ((uint64_t)2 << 20)

static int write_dense_run(int fd, const uint8_t *p, uint64_t len, uint64_t off, const char *name)
{
    int rc = 0;
    while (len > 0 && rc == 0) {
        uint64_t piece = ZR_MIN(len, WRITE_PIECE - off % WRITE_PIECE);
        zr_populate(p, (size_t)piece, false);
        rc = zr_write_all(fd, p, (size_t)piece, off, name);
        p += piece;
        off += piece;
        len -= piece;
    }
    return rc;
}

/* A Dense window's bytes, numbered as they lie in the source (byte p is
 * byte p % width of window record p / width), go to the chunks in runs of
 * records that share a chunk, each run contiguous in its chunk. */

/* The chunk offset of window byte p. */
static uint64_t dense_file_offset(const struct append_ctx *c, uint64_t p)
{
    return c->locs[p / c->src->width].offset + p % c->src->width;
}

/* The end (a window byte) of the run that holds window byte p. */
static uint64_t dense_run_end(const struct append_ctx *c, uint64_t p)
{
    uint64_t count = c->w1 - c->w0, r = p / c->src->width, e = r + 1;
    while (e < count && c->locs[e].chunk_id == c->locs[r].chunk_id)
        e++;
    return e * c->src->width;
}

/* Where Dense shard k's bytes start: k/nshards of the window, moved back
 * to a 2 MiB boundary of its chunk (not before its run's start), so that
 * each shard's writes cover whole 2 MiB stretches of the chunk, which the
 * kernel then keeps as whole 2 MiB folios. */
static uint64_t dense_cut(const struct append_ctx *c, size_t k)
{
    uint64_t total = (c->w1 - c->w0) * c->src->width;
    if (k == 0 || k >= c->nshards)
        return k == 0 ? 0 : total;
    uint64_t p = total * k / c->nshards, width = c->src->width;
    uint64_t r = p / width, first = r;
    while (first > 0 && c->locs[first - 1].chunk_id == c->locs[r].chunk_id)
        first--;
    uint64_t at = dense_file_offset(c, p), aligned = at & ~(uint64_t)(HUGE_FOLIO - 1);
    uint64_t run_start = c->locs[first].offset;
    return p - (at - (aligned > run_start ? aligned : run_start));
}

/* Raw Dense: write the window bytes [dense_cut(k), dense_cut(k + 1)), a
 * run's part per write_dense_run. */
static void dense_shard(struct append_ctx *c, size_t k)
{
    zr_store *s = c->s;
    const uint8_t *base = c->src->base + c->w0 * c->src->width;
    uint64_t p = dense_cut(c, k), hi = dense_cut(c, k + 1);
    char name[64];
    while (p < hi && !atomic_load_explicit(&c->failed, memory_order_relaxed)) {
        uint64_t end = ZR_MIN(hi, dense_run_end(c, p));
        uint32_t chunk = c->locs[p / c->src->width].chunk_id;
        int fd;
        int rc = zr_file_fd(s, &s->chunks, chunk, ZR_FD_WRITE, &fd);
        if (rc == 0) {
            rc = write_dense_run(fd, base + p, end - p, dense_file_offset(c, p),
                                 chunk_name(s, chunk, name, sizeof name));
            zr_file_put(s, &s->chunks, chunk);
        }
        if (rc != 0)
            set_error(c, rc);
        p = end;
    }
}

/* Raw: write shard k (Dense: dense_shard; Ragged: its share of the
 * records, up to RAW_RUN adjacent records, prefix and payload each, per
 * write). */
static void raw_shard(void *arg, size_t k)
{
    struct append_ctx *c = arg;
    zr_store *s = c->s;
    const struct zr_src *src = c->src;
    if (src->kind == ZR_DENSE) {
        dense_shard(c, k);
        return;
    }
    uint64_t count = c->w1 - c->w0;
    uint64_t a = c->w0 + count * k / c->nshards, b = c->w0 + count * (k + 1) / c->nshards;
    char name[64];
    uint8_t *prefixes = zr_malloc(RAW_RUN * 8 * (1 + ZR_MAX_NDIM));
    struct iovec *iov = zr_malloc(2 * RAW_RUN * sizeof *iov);
    if (!prefixes || !iov) {
        set_error(c, zr_err(ZR_ENOMEM, "append buffers"));
        goto out;
    }
    while (a < b && !atomic_load_explicit(&c->failed, memory_order_relaxed)) {
        const struct zr_loc *la = &c->locs[a - c->w0];
        /* Records reserved one after another in one chunk are adjacent
         * on disk: one write covers them all. */
        uint64_t e = a + 1, end = (uint64_t)la->offset + la->phys_length;
        while (e < b && e - a < RAW_RUN && c->locs[e - c->w0].chunk_id == la->chunk_id &&
               c->locs[e - c->w0].offset == end) {
            end += c->locs[e - c->w0].phys_length;
            e++;
        }
        uint8_t *p = prefixes;
        for (uint64_t r = a; r < e; r++) {
            zr_src_fill_prefix(src, r, p);
            iov[2 * (r - a)] = (struct iovec){.iov_base = p, .iov_len = zr_src_prefix(src, r)};
            iov[2 * (r - a) + 1] = (struct iovec){.iov_base = (void *)src->recs[r].data,
                                                  .iov_len = zr_src_payload(src, r)};
            p += zr_src_prefix(src, r);
        }
        int fd;
        int rc = zr_file_fd(s, &s->chunks, la->chunk_id, ZR_FD_WRITE, &fd);
        if (rc == 0) {
            rc = zr_writev_all(fd, iov, (int)(2 * (e - a)), la->offset,
                               chunk_name(s, la->chunk_id, name, sizeof name));
            zr_file_put(s, &s->chunks, la->chunk_id);
        }
        a = e;
        if (rc != 0)
            set_error(c, rc);
    }
out:
    zr_free(prefixes);
    zr_free(iov);
}

static int raw_window(struct append_ctx *c)
{
    zr_store *s = c->s;
    for (uint64_t k = c->w0; k < c->w1; k++) {
        struct zr_loc *l = &c->locs[k - c->w0];
        uint64_t size = zr_src_prefix(c->src, k) + zr_src_payload(c->src, k);
        int rc = reserve(s, size, l);
        if (rc != 0)
            return rc;
        l->phys_length = l->logic_length = (uint32_t)size;
    }
    uint64_t count = c->w1 - c->w0;
    c->nshards = ZR_MIN((uint64_t)zr_pool_threads(), count);
    zr_pool_run(c->nshards, raw_shard, c);
    return 0;
}

/* Compressed records a worker collects before it reserves their space
 * and writes them: at most GROUP_RECS records or about GROUP_BYTES. */
#define GROUP_RECS 256
#define GROUP_BYTES (1u << 20)

struct group {
    uint8_t *buf;     /* the frames, back to back */
    size_t used, cap;
    uint64_t rec[GROUP_RECS];
    size_t n;
};

/* Give the group's frames their offsets in one visit to the frontier, in
 * the order they were compressed, then write each run of frames that
 * landed side by side in one chunk with one write. */
static int group_flush(struct append_ctx *c, struct group *g)
{
    zr_store *s = c->s;
    char name[64];
    int rc = 0;
    if (g->n == 0)
        return 0;
    pthread_mutex_lock(&s->frontier_lock);
    for (size_t j = 0; j < g->n && rc == 0; j++) {
        struct zr_loc *l = &c->locs[g->rec[j] - c->w0];
        rc = reserve_locked(s, l->phys_length, l);
    }
    pthread_mutex_unlock(&s->frontier_lock);
    size_t at = 0;
    for (size_t j = 0; j < g->n && rc == 0;) {
        const struct zr_loc *first = &c->locs[g->rec[j] - c->w0];
        uint64_t end = (uint64_t)first->offset + first->phys_length;
        size_t e = j + 1;
        while (e < g->n) {
            const struct zr_loc *l = &c->locs[g->rec[e] - c->w0];
            if (l->chunk_id != first->chunk_id || l->offset != end)
                break;
            end += l->phys_length;
            e++;
        }
        size_t len = (size_t)(end - first->offset);
        int fd;
        rc = zr_file_fd(s, &s->chunks, first->chunk_id, ZR_FD_WRITE, &fd);
        if (rc == 0) {
            rc = zr_write_all(fd, g->buf + at, len, first->offset,
                              chunk_name(s, first->chunk_id, name, sizeof name));
            zr_file_put(s, &s->chunks, first->chunk_id);
        }
        at += len;
        j = e;
    }
    g->used = 0;
    g->n = 0;
    return rc;
}

/* One zstd frame of in, its literals Huffman coded where zstd finds it
 * pays (raw_literals false) or stored raw; the context is left with the
 * default. Returns the frame's length or a zstd error code. */
static size_t compress_with(ZSTD_CCtx *cctx, void *dst, size_t cap, const void *in, size_t size,
                            bool raw_literals)
{
    if (!raw_literals)
        return ZSTD_compress2(cctx, dst, cap, in, size);
    size_t e = ZSTD_CCtx_setParameter(cctx, ZSTD_c_literalCompressionMode, ZSTD_ps_disable);
    size_t n = ZSTD_isError(e) ? e : ZSTD_compress2(cctx, dst, cap, in, size);
    e = ZSTD_CCtx_setParameter(cctx, ZSTD_c_literalCompressionMode, ZSTD_ps_auto);
    return ZSTD_isError(n) ? n : ZSTD_isError(e) ? e : n;
}

/* Record r's frame, by the literal rule of codec.h, in one compression
 * for most records. Records of one store are alike, so each worker first
 * tries what the last small record it compressed kept (*huffman). With a
 * table first, the frame is made again with raw literals if its table
 * turns out to save too little. With raw literals first, it is made again
 * with a table (into alt, ZR_LIT_ALT bytes) only if those literals could
 * repay one, and the smaller frame is kept if the difference pays.
 * Against a dictionary the rule is not needed: there the literals take
 * the dictionary's table (zstd's "repeat" mode), which the decoder does
 * not build per frame. */
static int compress_record(ZSTD_CCtx *cctx, bool dict, void *dst, size_t cap, const void *in,
                           size_t size, uint64_t r, uint8_t *alt, bool *huffman, size_t *z)
{
    size_t n;
    if (size > ZR_LIT_SMALL || dict) {
        n = compress_with(cctx, dst, cap, in, size, false);
    } else if (*huffman) {
        n = compress_with(cctx, dst, cap, in, size, false);
        size_t gain = ZSTD_isError(n) ? 0 : zr_frame_literal_gain(dst, n);
        if (!zr_literal_table_pays(gain, size)) {
            *huffman = false;
            if (gain > 0)
                n = compress_with(cctx, dst, cap, in, size, true);
        }
    } else {
        n = compress_with(cctx, dst, cap, in, size, true);
        const void *lit;
        size_t nlit = ZSTD_isError(n) ? 0 : zr_frame_raw_literals(dst, n, &lit);
        /* A table saves at most 7 bits of each literal's 8. */
        if (nlit > 0 && zr_literal_table_pays(nlit - nlit / 8, size) &&
            zr_literal_table_pays(zr_literal_gain_bound(lit, nlit), size)) {
            size_t m = compress_with(cctx, alt, ZR_LIT_ALT, in, size, false);
            if (ZSTD_isError(m)) {
                n = m;
            } else if (m < n && zr_literal_table_pays(n - m, size)) {
                memcpy(dst, alt, m);
                n = m;
                *huffman = true;
            }
        }
    }
    if (ZSTD_isError(n))
        return zr_err(ZR_ECODEC, "compressing record %llu: %s", (unsigned long long)r,
                      ZSTD_getErrorName(n));
    *z = n;
    return 0;
}

/* Compressed: each shard is a worker loop claiming records one by one,
 * compressing each into its group and flushing the group when full. */
static void zstd_shard(void *arg, size_t k)
{
    ZR_UNUSED(k);
    struct append_ctx *c = arg;
    zr_store *s = c->s;
    const struct zr_src *src = c->src;
    ZSTD_CCtx *cctx = zr_cctx_get();
    uint8_t *stage = NULL, *alt = zr_malloc(ZR_LIT_ALT);
    size_t stage_cap = 0;
    struct group g = {0};
    bool huffman = false; /* what the last small record kept (compress_record) */
    int rc = 0;
    if (!cctx || !alt) {
        set_error(c, zr_err(ZR_ENOMEM, "creating a zstd context"));
        zr_cctx_put(cctx);
        zr_free(alt);
        return;
    }
    ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
    size_t zr = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    if (!ZSTD_isError(zr))
        zr = s->cdict ? ZSTD_CCtx_refCDict(cctx, s->cdict)
                      : ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, ZR_ZSTD_LEVEL);
    if (ZSTD_isError(zr)) {
        set_error(c, zr_err(ZR_ECODEC, "configuring zstd: %s", ZSTD_getErrorName(zr)));
        zr_cctx_put(cctx);
        zr_free(alt);
        return;
    }
    while (!atomic_load_explicit(&c->failed, memory_order_relaxed)) {
        uint64_t r = atomic_fetch_add(&c->next, 1);
        if (r >= c->w1)
            break;
        uint64_t pre = zr_src_prefix(src, r), pay = zr_src_payload(src, r);
        size_t size = (size_t)(pre + pay);
        const void *in;
        if (src->kind == ZR_DENSE) {
            in = src->base + r * src->width;
        } else {
            if (size > stage_cap) {
                zr_free(stage);
                stage_cap = size;
                stage = zr_malloc(stage_cap);
                if (!stage) {
                    stage_cap = 0;
                    rc = zr_err(ZR_ENOMEM, "staging record %llu", (unsigned long long)r);
                    break;
                }
            }
            zr_src_fill_prefix(src, r, stage);
            memcpy(stage + pre, src->recs[r].data, pay);
            in = stage;
        }
        size_t bound = ZSTD_compressBound(size);
        if (g.n == GROUP_RECS || (g.n > 0 && g.used + bound > g.cap)) {
            if ((rc = group_flush(c, &g)) != 0)
                break;
        }
        if (bound > g.cap) {
            /* Room for a full group, or for this one record if larger. */
            size_t want = ZR_MAX(bound, (size_t)GROUP_BYTES);
            zr_free(g.buf);
            g.cap = 0;
            if (!(g.buf = zr_malloc(want))) {
                rc = zr_err(ZR_ENOMEM, "compression buffer for record %llu", (unsigned long long)r);
                break;
            }
            g.cap = want;
        }
        size_t z = 0;
        if ((rc = compress_record(cctx, s->cdict != NULL, g.buf + g.used, g.cap - g.used, in, size,
                                  r, alt, &huffman, &z)) != 0)
            break;
        if (z > s->chunk_cap) {
            rc = zr_err(ZR_ETOOBIG, "record %llu compresses to %zu bytes, more than a chunk",
                        (unsigned long long)r, z);
            break;
        }
        struct zr_loc *l = &c->locs[r - c->w0];
        l->phys_length = (uint32_t)z;
        l->logic_length = (uint32_t)size;
        g.used += z;
        g.rec[g.n++] = r;
    }
    if (rc == 0)
        rc = group_flush(c, &g);
    if (rc != 0)
        set_error(c, rc);
    zr_free(stage);
    zr_free(alt);
    zr_free(g.buf);
    zr_cctx_put(cctx);
}

static int zstd_window(struct append_ctx *c)
{
    atomic_store(&c->next, c->w0);
    c->nshards = ZR_MIN((uint64_t)zr_pool_threads(), c->w1 - c->w0);
    zr_pool_run(c->nshards, zstd_shard, c);
    return 0;
}

/* Write the window's table entries, adding loc segments as needed;
 * *overwrote is set when an entry already in a file was replaced (R16). */
static int write_locs(zr_store *s, uint64_t first, const struct zr_loc *locs, uint64_t n,
                      uint8_t *buf, bool *overwrote)
{
    uint64_t per_seg = (uint64_t)1 << s->seg_shift;
    uint64_t k = 0;
    while (k < n) {
        uint64_t i = first + k;
        uint32_t g = (uint32_t)(i >> s->seg_shift);
        uint64_t in_seg = i & (per_seg - 1);
        uint64_t run = ZR_MIN(n - k, per_seg - in_seg);
        int rc;
        if (g >= atomic_load(&s->segs.count) && (rc = zr_ftable_add(s, &s->segs, g, true)) != 0)
            return rc;
        for (uint64_t j = 0; j < run; j++)
            zr_loc_encode(&locs[k + j], buf + j * ZR_LOC_SIZE);
        struct zr_file *f = zr_ftable_at(&s->segs, g);
        char name[64];
        snprintf(name, sizeof name, "%s/%u.loc", s->path, g);
        int fd;
        if ((rc = zr_file_fd(s, &s->segs, g, ZR_FD_WRITE, &fd)) != 0)
            return rc;
        rc = zr_write_all(fd, buf, run * ZR_LOC_SIZE, in_seg * ZR_LOC_SIZE, name);
        zr_file_put(s, &s->segs, g);
        if (rc != 0)
            return rc;
        uint64_t end = (in_seg + run) * ZR_LOC_SIZE;
        if (in_seg * ZR_LOC_SIZE < atomic_load(&f->size))
            *overwrote = true;
        if (end > atomic_load(&f->size))
            atomic_store_explicit(&f->size, end, memory_order_release);
        k += run;
    }
    return 0;
}

/* Whether the batch must be durable before its header (R16): the handle
 * is clean, or the batch's record bytes may land on bytes already in a
 * chunk file (the tail chunk is longer than the frontier, or files past it
 * were left by an earlier append that failed). */
static int must_sync_first(zr_store *s, bool *garbage)
{
    *garbage = !s->dirty;
    uint64_t size;
    char name[64];
    snprintf(name, sizeof name, "%s/%u.chunk", s->path, s->hdr.tail_chunk);
    int fd;
    int rc = zr_file_fd(s, &s->chunks, s->hdr.tail_chunk, ZR_FD_READ, &fd);
    if (rc != 0)
        return rc;
    rc = zr_file_size(fd, &size, name);
    zr_file_put(s, &s->chunks, s->hdr.tail_chunk);
    if (rc == 0)
        *garbage = *garbage || size > s->hdr.tail_offset ||
                   atomic_load(&s->chunks.count) > s->hdr.tail_chunk + 1;
    return rc;
}

/* Make the batch's bytes and entries durable ahead of its header (R16).
 * A failed sync stops the handle, as in zr_sync (R14). */
static int sync_batch(zr_store *s, uint64_t base, uint64_t n)
{
    int rc = zr_tables_sync_error(s);
    for (uint32_t c = s->hdr.tail_chunk; rc == 0 && c <= s->fr_chunk; c++)
        rc = zr_file_sync(s, &s->chunks, c);
    uint32_t g1 = (uint32_t)((base + n - 1) >> s->seg_shift);
    for (uint32_t g = (uint32_t)(base >> s->seg_shift); rc == 0 && g <= g1; g++)
        rc = zr_file_sync(s, &s->segs, g);
    if (rc == 0)
        rc = zr_tables_sync_error(s); /* see zr_engine_sync_locked */
    if (rc != 0)
        s->failed = true;
    return rc;
}

static int commit(zr_store *s, uint64_t length)
{
    int rc = zr_frontier_settle(s, &s->fr_chunk, &s->fr_offset);
    if (rc != 0)
        return rc;
    struct zr_header h = s->hdr;
    h.length = length;
    h.tail_chunk = s->fr_chunk;
    h.tail_offset = (uint32_t)s->fr_offset;
    uint8_t raw[ZR_HEADER_SIZE];
    zr_header_encode(&h, raw);
    char name[64];
    snprintf(name, sizeof name, "%s/meta.zr", s->path);
    rc = zr_write_all(s->metafd, raw, sizeof raw, 0, name);
    if (rc != 0)
        return rc;
    /* Make the new bytes readable, then publish the length (R6). */
    for (uint32_t c = s->hdr.tail_chunk; c <= h.tail_chunk; c++) {
        struct zr_file *f = zr_ftable_at(&s->chunks, c);
        if (f->wend > atomic_load(&f->size))
            atomic_store_explicit(&f->size, f->wend, memory_order_release);
    }
    s->sync_chunk_lo = ZR_MIN(s->sync_chunk_lo, s->hdr.tail_chunk);
    s->sync_seg_lo = ZR_MIN(s->sync_seg_lo, (uint32_t)(s->hdr.length >> s->seg_shift));
    s->dirty = true;
    s->hdr = h;
    atomic_store_explicit(&s->length, length, memory_order_release);
    return 0;
}

static int ensure_cdict(zr_store *s)
{
    if (s->codec != ZR_CODEC_ZSTD_DICT || s->cdict)
        return 0;
    s->cdict = ZSTD_createCDict(s->dict, s->dict_len, ZR_ZSTD_DICT_LEVEL);
    if (!s->cdict)
        return zr_err(ZR_ECODEC, "%s: cannot build a compression dictionary from dict.zr", s->path);
    return 0;
}

int zr_engine_append(zr_store *s, const struct zr_src *src, uint64_t n, uint64_t *first)
{
    pthread_mutex_lock(&s->append_lock);
    uint64_t base = s->hdr.length;
    uint64_t limit = ZR_MAX_FILES << s->seg_shift;
    struct append_ctx c = {.s = s, .src = src};
    uint8_t *locbuf = NULL;
    int rc = 0;
    pthread_mutex_init(&c.err_lock, NULL);
    if (s->failed)
        rc = zr_err(ZR_EIO, "%s: an earlier sync failed; reopen the store", s->path);
    else if (n > limit - base)
        rc = zr_err(ZR_ENOSPC, "%s: the record table is full", s->path);
    if (rc == 0)
        rc = ensure_cdict(s);
    bool overwrote = false;
    if (rc == 0 && n > 0)
        rc = must_sync_first(s, &overwrote);
    uint64_t wsize = ZR_MIN(n, (uint64_t)WINDOW);
    if (rc == 0 && n > 0) {
        c.locs = zr_malloc(wsize * sizeof *c.locs);
        locbuf = zr_malloc(wsize * ZR_LOC_SIZE);
        if (!c.locs || !locbuf)
            rc = zr_err(ZR_ENOMEM, "append of %llu records", (unsigned long long)n);
    }
    for (uint64_t w0 = 0; rc == 0 && w0 < n; w0 += wsize) {
        c.w0 = w0;
        c.w1 = ZR_MIN(n, w0 + wsize);
        rc = s->codec == ZR_CODEC_RAW ? raw_window(&c) : zstd_window(&c);
        if (rc == 0 && c.err != 0) {
            zr_err_restore(c.err, c.errmsg);
            rc = c.err;
        }
        if (rc == 0)
            rc = write_locs(s, base + c.w0, c.locs, c.w1 - c.w0, locbuf, &overwrote);
    }
    if (rc == 0 && n > 0 && overwrote)
        rc = sync_batch(s, base, n);
    if (rc == 0 && n > 0)
        rc = commit(s, base + n);
    if (rc != 0) {
        /* Nothing was committed: forget the reserved space (R8). */
        s->fr_chunk = s->hdr.tail_chunk;
        s->fr_offset = s->hdr.tail_offset;
        uint32_t count = atomic_load(&s->chunks.count);
        for (uint32_t k = s->hdr.tail_chunk; k < count; k++)
            zr_ftable_at(&s->chunks, k)->wend = k == s->hdr.tail_chunk ? s->hdr.tail_offset : 0;
    } else if (first) {
        *first = base;
    }
    zr_free(c.locs);
    zr_free(locbuf);
    pthread_mutex_destroy(&c.err_lock);
    pthread_mutex_unlock(&s->append_lock);
    return rc;
}

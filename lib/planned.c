/*
 * planned.c: gathering a batch whose pages are not in memory. The batch
 * becomes planned reads (plan.h): each distinct index is read once, the
 * table entries the layout does not give are read first (as pieces of
 * the record table), then the records' stored bytes, straight into the
 * destination for raw stores and into a staging buffer for compressed
 * ones, decoded as each read completes. Repeats are copied at the end.
 * doc/cold-reads.md walks through it.
 */
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "gather.h"

/* A request and its place in the batch, sorted by index. */
struct req {
    uint64_t index;
    size_t k;
};

static int req_cmp(const void *x, const void *y)
{
    const struct req *a = x, *b = y;
    if (a->index != b->index)
        return a->index < b->index ? -1 : 1;
    return a->k < b->k ? -1 : a->k > b->k;
}

/* The batch's distinct records: first[u] is the request that reads the
 * u-th distinct index, rep[k] the request whose bytes request k copies
 * (k itself for a first). Returns the number of distinct records. */
static size_t distinct(const uint64_t *idx, size_t n, struct req *order, size_t *first,
                       size_t *rep)
{
    for (size_t k = 0; k < n; k++)
        order[k] = (struct req){idx[k], k};
    qsort(order, n, sizeof *order, req_cmp);
    size_t m = 0;
    for (size_t j = 0; j < n; j++) {
        if (j == 0 || order[j].index != order[j - 1].index)
            first[m++] = order[j].k;
        rep[order[j].k] = first[m - 1];
    }
    return m;
}

struct entry_read {
    const zr_store *s;
    uint8_t *raw;
};

/* Read the table entries of records idx[first[u]], u < m, that the layout
 * does not give, into locs[first[u]], and check them. */
static int read_entries(zr_store *s, const uint64_t *idx, const size_t *first, size_t m,
                        uint64_t laid_out, struct zr_loc *locs, struct zr_plan_stats *st)
{
    struct zr_piece *pc = zr_malloc((m ? m : 1) * sizeof *pc);
    uint8_t *raw = zr_malloc((m ? m : 1) * ZR_LOC_SIZE);
    int rc = 0;
    size_t np = 0;
    if (!pc || !raw) {
        rc = zr_err(ZR_ENOMEM, "%s: reading the entries of %zu records", s->path, m);
        goto out;
    }
    for (size_t u = 0; u < m; u++) {
        size_t k = first[u];
        uint64_t i = idx[k];
        if (i < laid_out) {
            zr_layout_loc(s, i, &locs[k]);
            continue;
        }
        uint32_t g;
        uint64_t off;
        if ((rc = zr_loc_place(s, i, &g, &off)) != 0)
            goto out;
        pc[np++] = (struct zr_piece){.file = g, .len = ZR_LOC_SIZE, .off = off,
                                     .to = raw + u * ZR_LOC_SIZE, .tag = k};
    }
    rc = zr_plan_read(s, &s->segs, pc, np, NULL, NULL, st);
    if (rc == ZR_ECORRUPT && st->ended)
        rc = zr_loc_error(s, idx[st->ended_tag], "the record table ends before the entry");
    uint32_t nchunks = atomic_load_explicit(&s->chunks.count, memory_order_acquire);
    for (size_t j = 0; rc == 0 && j < np; j++) {
        size_t k = pc[j].tag;
        zr_loc_decode(pc[j].to, &locs[k]);
        if (!zr_loc_fits(s, &locs[k], nchunks))
            rc = zr_loc_error(s, idx[k], "entry is out of bounds or inconsistent");
    }
out:
    zr_free(pc);
    zr_free(raw);
    return rc;
}

int zr_batch_locs(zr_store *s, const uint64_t *idx, size_t n, struct zr_loc *locs, bool planned)
{
    if (!planned) {
        int rc = 0;
        unsigned rs = zr_read_enter(s);
        for (size_t k = 0; rc == 0 && k < n; k++) {
            if (k % ZR_PAUSE_EVERY == 0)
                zr_read_pause(s, &rs);
            rc = zr_loc_read(s, idx[k], &locs[k]);
        }
        zr_read_leave(s, rs);
        return rc;
    }
    struct req *order = zr_malloc((n ? n : 1) * sizeof *order);
    size_t *first = zr_malloc((n ? n : 1) * sizeof *first);
    size_t *rep = zr_malloc((n ? n : 1) * sizeof *rep);
    int rc = 0;
    if (!order || !first || !rep) {
        rc = zr_err(ZR_ENOMEM, "%s: reading the entries of %zu records", s->path, n);
    } else {
        size_t m = distinct(idx, n, order, first, rep);
        struct zr_plan_stats st;
        rc = read_entries(s, idx, first, m, 0, locs, &st);
        for (size_t k = 0; rc == 0 && k < n; k++)
            locs[k] = locs[rep[k]];
    }
    zr_free(order);
    zr_free(first);
    zr_free(rep);
    return rc;
}

int zr_range_locs(zr_store *s, uint64_t first, size_t n, struct zr_loc *locs, bool planned)
{
    uint64_t *idx = zr_malloc((n ? n : 1) * sizeof *idx);
    if (!idx)
        return zr_err(ZR_ENOMEM, "%s: reading the entries of %zu records", s->path, n);
    for (size_t k = 0; k < n; k++)
        idx[k] = first + k;
    int rc = zr_batch_locs(s, idx, n, locs, planned);
    zr_free(idx);
    return rc;
}

struct planned {
    struct gather_ctx *c;
    const struct zr_loc *locs; /* by request */
};

/* A record's stored bytes have arrived (plan.h's callback): decode them
 * to the request's place (zstd) and check its shape prefix (Ragged). */
static int record_read(void *arg, const struct zr_piece *p)
{
    struct planned *pl = arg;
    struct gather_ctx *c = pl->c;
    zr_store *s = c->s;
    size_t k = p->tag;
    const struct zr_loc *l = &pl->locs[k];
    uint8_t *out = zr_gather_out(c, k);
    if (s->codec != ZR_CODEC_RAW) {
        ZSTD_DCtx *dctx = zr_dctx_get();
        if (!dctx)
            return zr_err(ZR_ENOMEM, "creating a zstd context");
        int rc = zr_decode_record(s, dctx, c->idx[k], l, p->to, out, 0);
        zr_dctx_put(dctx);
        if (rc != 0)
            return rc;
    }
    return zr_check_prefix(s, c->idx[k], l, out);
}

int zr_gather_planned(struct gather_ctx *c)
{
    zr_store *s = c->s;
    size_t n = c->n;
    struct req *order = zr_malloc(n * sizeof *order);
    size_t *first = zr_malloc(n * sizeof *first);
    size_t *rep = zr_malloc(n * sizeof *rep);
    struct zr_loc *locs = zr_malloc(n * sizeof *locs);
    struct zr_piece *pc = zr_malloc(n * sizeof *pc);
    uint8_t *stage = NULL;
    int rc = 0;
    if (!order || !first || !rep || !locs || !pc) {
        rc = zr_err(ZR_ENOMEM, "%s: planning the reads of %zu records", s->path, n);
        goto out;
    }
    size_t m = distinct(c->idx, n, order, first, rep);
    struct zr_plan_stats est = {0}, st = {0};
    rc = read_entries(s, c->idx, first, m, c->laid_out, locs, &est);
    if (rc != 0)
        goto out;
    uint64_t staged = 0;
    if (s->codec != ZR_CODEC_RAW) {
        for (size_t u = 0; u < m; u++)
            staged += locs[first[u]].phys_length;
        if (staged > SIZE_MAX || !(stage = zr_malloc(staged ? (size_t)staged : 1))) {
            rc = zr_err(ZR_ENOMEM, "%s: staging %llu bytes of frames", s->path,
                        (unsigned long long)staged);
            goto out;
        }
    }
    staged = 0;
    for (size_t u = 0; u < m; u++) {
        size_t k = first[u];
        const struct zr_loc *l = &locs[k];
        uint8_t *to = zr_gather_out(c, k);
        if (stage) {
            to = stage + staged;
            staged += l->phys_length;
        }
        pc[u] = (struct zr_piece){.file = l->chunk_id, .len = l->phys_length, .off = l->offset,
                                  .to = to, .tag = k};
    }
    struct planned pl = {.c = c, .locs = locs};
    rc = zr_plan_read(s, &s->chunks, pc, m, record_read, &pl, &st);
    if (rc == ZR_ECORRUPT && st.ended)
        rc = zr_loc_error(s, c->idx[st.ended_tag], "the chunk ends before the record");
    if (rc != 0)
        goto out;
    for (size_t k = 0; k < n; k++)
        if (rep[k] != k)
            memcpy(zr_gather_out(c, k), zr_gather_out(c, rep[k]), locs[rep[k]].logic_length);
    st.reads += est.reads;
    st.cached += est.cached;
    zr_note_planned(s, &st);
out:
    zr_free(order);
    zr_free(first);
    zr_free(rep);
    zr_free(locs);
    zr_free(pc);
    zr_free(stage);
    return rc;
}

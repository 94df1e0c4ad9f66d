/*
 * dict.c: training the zstd dictionary of a zstd_dict store.
 *
 * A tier fixes both the dictionary size and the sample budget, so training
 * costs about the same whatever the record size. The sample is a strided
 * subset of the records (every stride-th one, from the first), which
 * covers the whole dataset rather than its beginning; a record larger than
 * the whole budget contributes its first budget bytes.
 */
#include <stdlib.h>
#include <string.h>
#include <zdict.h>

#include "engine.h"

ZR_API int zr_tier_sizes(int tier, size_t *dict_bytes, size_t *sample_bytes)
{
    static const size_t dicts[] = {32u << 10, 128u << 10, 1u << 20};
    static const size_t samples[] = {4u << 20, 16u << 20, 64u << 20};
    if (tier < ZR_TIER_FAST || tier > ZR_TIER_MAX)
        return zr_err(ZR_EINVAL, "unknown dictionary tier %d", tier);
    if (dict_bytes)
        *dict_bytes = dicts[tier];
    if (sample_bytes)
        *sample_bytes = samples[tier];
    return 0;
}

/* Pick the records of the sample: every stride-th record while the budget
 * lasts. Returns how many were picked into pick[] (capacity n). */
static size_t pick_sample(const size_t *sizes, size_t n, size_t budget, size_t *pick)
{
    uint64_t total = 0;
    for (size_t k = 0; k < n; k++)
        total += sizes[k];
    uint64_t stride = total > budget ? (total + budget - 1) / budget : 1;
    size_t m = 0, used = 0;
    for (uint64_t k = 0; k < n && used < budget; k += stride) {
        pick[m++] = (size_t)k;
        used += ZR_MIN(sizes[k], budget - used);
    }
    return m;
}

/* Train on m samples concatenated in buf. */
static int train(const void *buf, const size_t *sample_sizes, size_t m, int tier, void **dict,
                 size_t *dict_len)
{
    size_t cap;
    zr_tier_sizes(tier, &cap, NULL);
    void *d = zr_malloc(cap);
    if (!d)
        return zr_err(ZR_ENOMEM, "dictionary buffer");
    size_t r = ZDICT_trainFromBuffer(d, cap, buf, sample_sizes, (unsigned)m);
    if (ZDICT_isError(r)) {
        zr_free(d);
        return zr_err(ZR_ECODEC, "training on %zu records failed (too little or too uniform data?): %s",
                      m, ZDICT_getErrorName(r));
    }
    void *shrunk = zr_realloc(d, r);
    *dict = shrunk ? shrunk : d;
    *dict_len = r;
    return 0;
}

/* Common path: sizes known, a callback copies record k's first len bytes. */
static int train_from(size_t n, const size_t *sizes, int tier,
                      int (*copy)(void *ctx, const size_t *pick, size_t m, const size_t *lens,
                                  uint8_t *out),
                      void *ctx, void **dict, size_t *dict_len)
{
    size_t budget;
    int rc = zr_tier_sizes(tier, NULL, &budget);
    if (rc != 0)
        return rc;
    if (!dict || !dict_len)
        return zr_err(ZR_EINVAL, "zr_train_dict: NULL output");
    if (n == 0)
        return zr_err(ZR_EINVAL, "zr_train_dict: no records to train on");
    size_t *pick = zr_malloc(n * sizeof *pick);
    size_t *lens = zr_malloc(n * sizeof *lens);
    uint8_t *buf = NULL;
    if (!pick || !lens)
        rc = zr_err(ZR_ENOMEM, "dictionary sample");
    size_t m = 0, used = 0;
    if (rc == 0) {
        m = pick_sample(sizes, n, budget, pick);
        for (size_t j = 0; j < m; j++) {
            lens[j] = ZR_MIN(sizes[pick[j]], budget - used);
            used += lens[j];
        }
        if (!(buf = zr_malloc(used ? used : 1)))
            rc = zr_err(ZR_ENOMEM, "dictionary sample of %zu bytes", used);
    }
    if (rc == 0)
        rc = copy(ctx, pick, m, lens, buf);
    if (rc == 0)
        rc = train(buf, lens, m, tier, dict, dict_len);
    zr_free(buf);
    zr_free(lens);
    zr_free(pick);
    return rc;
}

struct mem_src {
    const void *const *recs;
    const uint8_t *base;
    size_t width;
};

static int copy_mem(void *ctx, const size_t *pick, size_t m, const size_t *lens, uint8_t *out)
{
    const struct mem_src *src = ctx;
    for (size_t j = 0; j < m; j++) {
        const void *p = src->recs ? src->recs[pick[j]] : src->base + pick[j] * src->width;
        memcpy(out, p, lens[j]);
        out += lens[j];
    }
    return 0;
}

ZR_API int zr_train_dict_buffer(const void *buf, size_t width, size_t n, int tier, void **dict,
                                size_t *dict_len)
{
    if ((!buf && n > 0) || width == 0)
        return zr_err(ZR_EINVAL, "zr_train_dict_buffer: bad buffer");
    size_t *sizes = zr_malloc((n ? n : 1) * sizeof *sizes);
    if (!sizes)
        return zr_err(ZR_ENOMEM, "dictionary sample");
    for (size_t k = 0; k < n; k++)
        sizes[k] = width;
    struct mem_src src = {.base = buf, .width = width};
    int rc = train_from(n, sizes, tier, copy_mem, &src, dict, dict_len);
    zr_free(sizes);
    return rc;
}

ZR_API int zr_train_dict_records(const void *const *recs, const size_t *sizes, size_t n, int tier,
                                 void **dict, size_t *dict_len)
{
    if (n > 0 && (!recs || !sizes))
        return zr_err(ZR_EINVAL, "zr_train_dict_records: NULL records");
    for (size_t k = 0; k < n; k++)
        if (!recs[k] && sizes[k] > 0)
            return zr_err(ZR_EINVAL, "zr_train_dict_records: record %zu is NULL", k);
    struct mem_src src = {.recs = recs};
    return train_from(n, sizes, tier, copy_mem, &src, dict, dict_len);
}

/* From a store: gather the picked records whole, then keep lens[j] bytes
 * of each (only a record larger than the budget is cut). */
static int copy_store(void *ctx, const size_t *pick, size_t m, const size_t *lens, uint8_t *out)
{
    zr_store *s = ctx;
    int rc = 0;
    uint8_t *rec = NULL;
    size_t cap = 0;
    for (size_t j = 0; rc == 0 && j < m; j++) {
        uint64_t i = pick[j];
        struct zr_loc l;
        if ((rc = zr_batch_locs(s, &i, 1, &l, s->remote != NULL)) != 0)
            break;
        if (l.logic_length > cap) {
            zr_free(rec);
            cap = l.logic_length;
            if (!(rec = zr_malloc(cap)))
                return zr_err(ZR_ENOMEM, "reading record %llu", (unsigned long long)i);
        }
        uint64_t zero = 0;
        rc = zr_engine_gather(s, &i, 1, rec, &zero);
        if (rc == 0) {
            memcpy(out, rec, lens[j]);
            out += lens[j];
            if ((j + 1) % 256 == 0 || j + 1 == m)
                zr_report(s, j + 1, m);
        }
    }
    zr_free(rec);
    return rc;
}

static int train_dict_store_in(zr_store *s, int tier, void **dict, size_t *dict_len)
{
    if (!s)
        return zr_err(ZR_EINVAL, "zr_train_dict_store: NULL handle");
    uint64_t n = zr_len(s);
    if (n > SIZE_MAX / sizeof(size_t))
        return zr_err(ZR_ENOMEM, "store too large to sample");
    size_t *sizes = zr_malloc((n ? n : 1) * sizeof *sizes);
    if (!sizes)
        return zr_err(ZR_ENOMEM, "dictionary sample");
    int rc = 0;
    if (s->remote) {
        /* A remote store's entries are read by ranges, a block at a time. */
        enum { BLOCK = 65536 };
        struct zr_loc *locs = zr_malloc(BLOCK * sizeof *locs);
        if (!locs)
            rc = zr_err(ZR_ENOMEM, "dictionary sample");
        for (uint64_t a = 0; rc == 0 && a < n; a += BLOCK) {
            size_t m = (size_t)ZR_MIN((uint64_t)BLOCK, n - a);
            rc = zr_range_locs(s, a, m, locs, true);
            for (size_t k = 0; rc == 0 && k < m; k++)
                sizes[a + k] = locs[k].logic_length;
        }
        zr_free(locs);
    }
    unsigned rs = zr_read_enter(s);
    for (uint64_t k = 0; !s->remote && k < n && rc == 0; k++) {
        struct zr_loc l;
        zr_read_pause(s, &rs);
        rc = zr_loc_read(s, k, &l);
        sizes[k] = l.logic_length;
    }
    zr_read_leave(s, rs);
    if (rc == 0)
        rc = train_from((size_t)n, sizes, tier, copy_store, s, dict, dict_len);
    zr_free(sizes);
    return rc;
}

ZR_API int zr_train_dict_store(zr_store *s, int tier, void **dict, size_t *dict_len)
{
    int rc = zr_store_enter(s, "zr_train_dict_store");
    return rc != 0 ? rc : zr_store_leave_rc(s, train_dict_store_in(s, tier, dict, dict_len));
}

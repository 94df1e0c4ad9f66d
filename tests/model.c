/* model.c: the in-memory store model used by the crash and model tests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/model.h"
#include "tests/idrecords.h"

static void grow(zt_model *m, uint64_t need)
{
    if (need <= m->cap)
        return;
    m->cap = need * 2 + 16;
    m->ids = realloc(m->ids, m->cap * sizeof *m->ids);
    if (!m->ids)
        abort();
}

void zt_model_free(zt_model *m)
{
    free(m->ids);
    m->ids = NULL;
    m->len = m->cap = 0;
}

void zt_model_copy(zt_model *dst, const zt_model *src)
{
    dst->len = 0;
    grow(dst, src->len);
    if (src->len > 0)
        memcpy(dst->ids, src->ids, src->len * sizeof *src->ids);
    dst->len = src->len;
}

void zt_model_append(zt_model *m, const uint64_t *ids, uint64_t n)
{
    grow(m, m->len + n);
    if (n > 0)
        memcpy(m->ids + m->len, ids, n * sizeof *ids);
    m->len += n;
}

static int desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

void zt_model_delete(zt_model *m, const uint64_t *idx, size_t n)
{
    uint64_t *t = malloc((n ? n : 1) * sizeof *t);
    if (!t)
        abort();
    memcpy(t, idx, n * sizeof *t);
    qsort(t, n, sizeof *t, desc);
    for (size_t k = 0; k < n; k++) {
        if (k > 0 && t[k] == t[k - 1])
            continue;
        m->ids[t[k]] = m->ids[m->len - 1];
        m->len--;
    }
    free(t);
}

int zt_append_ids(zr_store *s, const uint64_t *ids, uint64_t n, size_t max_size)
{
    zr_rec *recs = calloc(n ? n : 1, sizeof *recs);
    uint64_t *shapes = calloc(n ? n : 1, sizeof *shapes);
    uint8_t **bufs = calloc(n ? n : 1, sizeof *bufs);
    if (!recs || !shapes || !bufs)
        abort();
    for (uint64_t k = 0; k < n; k++) {
        shapes[k] = zt_record_size(ids[k], max_size);
        bufs[k] = malloc(shapes[k]);
        if (!bufs[k])
            abort();
        zt_record_fill(ids[k], bufs[k], shapes[k]);
        recs[k] = (zr_rec){.data = bufs[k], .shape = &shapes[k], .ndim = 1};
    }
    int rc = zr_append_ragged(s, "|u1", recs, n, NULL);
    for (uint64_t k = 0; k < n; k++)
        free(bufs[k]);
    free(bufs);
    free(shapes);
    free(recs);
    return rc;
}

int zt_model_matches(zr_store *s, const zt_model *m, size_t max_size, char *why, size_t whylen)
{
    if (zr_len(s) != m->len) {
        snprintf(why, whylen, "store has %llu records, model %llu",
                 (unsigned long long)zr_len(s), (unsigned long long)m->len);
        return -1;
    }
    enum { STEP = 512 };
    uint64_t idx[STEP];
    for (uint64_t a = 0; a < m->len; a += STEP) {
        size_t n = (size_t)(m->len - a < STEP ? m->len - a : STEP);
        for (size_t k = 0; k < n; k++)
            idx[k] = a + k;
        zr_ragged_batch *b;
        int rc = zr_gather_ragged_alloc(s, idx, n, &b);
        if (rc != 0) {
            snprintf(why, whylen, "gather at %llu failed: %s", (unsigned long long)a,
                     zr_last_error());
            return -1;
        }
        for (size_t k = 0; k < n; k++) {
            const zr_view *v = &b->recs[k];
            if (v->ndim != 1 || !zt_record_is(m->ids[a + k], v->data, v->nbytes, max_size)) {
                snprintf(why, whylen, "index %llu does not hold record %llu",
                         (unsigned long long)(a + k), (unsigned long long)m->ids[a + k]);
                zr_ragged_batch_free(b);
                return -1;
            }
        }
        zr_ragged_batch_free(b);
    }
    return 0;
}

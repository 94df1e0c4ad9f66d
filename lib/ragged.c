/*
 * ragged.c: the Ragged contract. Every record carries its own shape in
 * an inline prefix, [u64 ndim][u64 dims[ndim]], followed by the payload,
 * so shape and bytes share one location, one codec frame and one commit.
 * This file validates records before an append (no zero-byte record, none
 * over 2 GiB), turns gathered records back into shapes and payloads, and
 * makes a batch of them dense (padded or packed) for models that take
 * tensors: done here, one memcpy per record, it costs a fraction of what a
 * Python loop over the records does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

ZR_API int zr_ragged_create(zr_store **out, const char *path, const char *dtype,
                            const zr_create_opts *opts)
{
    if (!out || !path)
        return zr_err(ZR_EINVAL, "zr_ragged_create: NULL argument");
    *out = NULL;
    int64_t itemsize = zr_dtype_parse(dtype);
    if (itemsize <= 0)
        return zr_err(ZR_EINVAL, "'%s' is not a supported dtype", dtype ? dtype : "(null)");
    /* The smallest Ragged record is one item after an 8-byte prefix. */
    if ((uint64_t)itemsize + 8 > ZR_MAX_RECORD)
        return zr_err(ZR_ETOOBIG, "no record of dtype '%s' fits in 2 GiB", dtype);
    struct zr_identity id = {.kind = ZR_RAGGED, .itemsize = (uint64_t)itemsize};
    snprintf(id.dtype, sizeof id.dtype, "%s", dtype);
    zr_create_opts o;
    int rc = zr_create_opts_read(opts, &o);
    if (rc != 0)
        return rc;
    return zr_engine_create(out, path, &id, &o);
}

ZR_API int zr_append_ragged(zr_store *s, const char *dtype, const zr_rec *recs, uint64_t n,
                            uint64_t *first)
{
    int rc = zr_engine_writer(s, "zr_append_ragged");
    if (rc != 0)
        return rc;
    if (s->id.kind != ZR_RAGGED)
        return zr_err(ZR_EKIND, "%s is a Dense store; use zr_append_dense", s->path);
    if (!dtype || strcmp(dtype, s->id.dtype) != 0)
        return zr_err(ZR_EDTYPE, "%s holds %s, the data is %s", s->path, s->id.dtype,
                      dtype ? dtype : "(null)");
    if (n > 0 && !recs)
        return zr_err(ZR_EINVAL, "zr_append_ragged: NULL records");
    for (uint64_t k = 0; k < n; k++) {
        const zr_rec *r = &recs[k];
        if (r->ndim > ZR_MAX_NDIM)
            return zr_err(ZR_ESHAPE, "record %llu has %u dimensions, at most %d are allowed",
                          (unsigned long long)k, r->ndim, ZR_MAX_NDIM);
        if (r->ndim > 0 && !r->shape)
            return zr_err(ZR_EINVAL, "record %llu: NULL shape", (unsigned long long)k);
        uint64_t bytes = s->id.itemsize;
        for (uint32_t d = 0; d < r->ndim; d++) {
            if (r->shape[d] == 0)
                return zr_err(ZR_EEMPTY, "record %llu has a zero dimension: records must be non-empty",
                              (unsigned long long)k);
            if (!zr_mul_ok(bytes, r->shape[d], &bytes) || bytes > ZR_MAX_RECORD)
                return zr_err(ZR_ETOOBIG, "record %llu exceeds 2 GiB", (unsigned long long)k);
        }
        if (bytes + 8 * (1 + (uint64_t)r->ndim) > ZR_MAX_RECORD)
            return zr_err(ZR_ETOOBIG, "record %llu with its shape prefix exceeds 2 GiB",
                          (unsigned long long)k);
        if (!r->data)
            return zr_err(ZR_EINVAL, "record %llu: NULL data", (unsigned long long)k);
    }
    struct zr_src src = {.kind = ZR_RAGGED, .recs = recs, .itemsize = s->id.itemsize};
    return zr_engine_append(s, &src, n, first);
}

ZR_API int zr_ragged_sizes(zr_store *s, const uint64_t *idx, size_t n, uint64_t *sizes)
{
    if (!s || (n > 0 && (!idx || !sizes)))
        return zr_err(ZR_EINVAL, "zr_ragged_sizes: NULL argument");
    if (s->id.kind != ZR_RAGGED)
        return zr_err(ZR_EKIND, "%s is a Dense store", s->path);
    uint64_t len;
    int rc = zr_check_indices(s, idx, n, &len);
    if (rc != 0)
        return rc;
    if (n == 0)
        return 0;
    struct zr_loc *locs = zr_malloc(n * sizeof *locs);
    if (!locs)
        return zr_err(ZR_ENOMEM, "%s: reading the sizes of %zu records", s->path, n);
    rc = zr_batch_locs(s, idx, n, locs, zr_gather_plans(s));
    for (size_t k = 0; rc == 0 && k < n; k++)
        sizes[k] = locs[k].logic_length;
    zr_free(locs);
    return rc;
}

ZR_API int zr_gather_ragged(zr_store *s, const uint64_t *idx, size_t n, void *dst,
                            const uint64_t *offsets)
{
    if (!s || (n > 0 && (!idx || !dst || !offsets)))
        return zr_err(ZR_EINVAL, "zr_gather_ragged: NULL argument");
    if (s->id.kind != ZR_RAGGED)
        return zr_err(ZR_EKIND, "%s is a Dense store; use zr_gather_dense", s->path);
    return zr_engine_gather(s, idx, n, dst, offsets);
}

ZR_API int zr_ragged_view(const void *rec, uint64_t size, uint64_t itemsize, zr_view *view)
{
    if (!rec || !view || itemsize == 0)
        return zr_err(ZR_EINVAL, "zr_ragged_view: bad argument");
    uint32_t nd;
    uint64_t poff;
    if (zr_prefix_check(rec, size, itemsize, &nd, &poff) != 0)
        return zr_err(ZR_ECORRUPT, "ragged record of %llu bytes has an inconsistent shape prefix",
                      (unsigned long long)size);
    const uint8_t *p = rec;
    view->ndim = nd;
    for (uint32_t d = 0; d < nd; d++)
        view->shape[d] = zr_load64(p + 8 + 8 * d);
    view->data = p + poff;
    view->nbytes = size - poff;
    return 0;
}

ZR_API int zr_gather_ragged_alloc(zr_store *s, const uint64_t *idx, size_t n,
                                  zr_ragged_batch **out)
{
    if (!out)
        return zr_err(ZR_EINVAL, "zr_gather_ragged_alloc: NULL out");
    *out = NULL;
    zr_ragged_batch *b = zr_calloc(1, sizeof *b);
    uint64_t *sizes = zr_malloc((n ? n : 1) * sizeof *sizes);
    uint64_t *offsets = zr_malloc((n ? n : 1) * sizeof *offsets);
    int rc = 0;
    if (!b || !sizes || !offsets || !(b->recs = zr_calloc(n ? n : 1, sizeof *b->recs)))
        rc = zr_err(ZR_ENOMEM, "allocating a batch of %zu records", n);
    if (rc == 0)
        rc = zr_ragged_sizes(s, idx, n, sizes);
    uint64_t total = 0;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        offsets[k] = total;
        total += (sizes[k] + 7) & ~(uint64_t)7; /* keep payloads 8-byte aligned */
    }
    if (rc == 0 && (total > SIZE_MAX || !(b->buf = zr_malloc(total ? total : 1))))
        rc = zr_err(ZR_ENOMEM, "allocating %llu bytes for a batch", (unsigned long long)total);
    if (rc == 0)
        rc = zr_gather_ragged(s, idx, n, b->buf, offsets);
    for (size_t k = 0; rc == 0 && k < n; k++)
        rc = zr_ragged_view((uint8_t *)b->buf + offsets[k], sizes[k], s->id.itemsize, &b->recs[k]);
    zr_free(sizes);
    zr_free(offsets);
    if (rc != 0) {
        zr_ragged_batch_free(b);
        return rc;
    }
    b->n = n;
    *out = b;
    return 0;
}

ZR_API void zr_ragged_batch_free(zr_ragged_batch *b)
{
    if (!b)
        return;
    zr_free(b->recs);
    zr_free(b->buf);
    zr_free(b);
}

/* The rows of a record and the shape of one row: a scalar record is one
 * row of shape (). */
static uint64_t view_rows(const zr_view *v)
{
    return v->ndim ? v->shape[0] : 1;
}

static uint32_t view_row_ndim(const zr_view *v)
{
    return v->ndim ? v->ndim - 1 : 0;
}

/* Fill bytes of dst with the item pad repeated (zeros for NULL pad),
 * doubling the copied run so that long pads take few calls. */
static void fill_items(uint8_t *dst, uint64_t bytes, const void *pad, uint64_t itemsize)
{
    if (bytes == 0)
        return;
    if (!pad) {
        memset(dst, 0, bytes);
        return;
    }
    uint64_t done = itemsize < bytes ? itemsize : bytes;
    memcpy(dst, pad, done);
    while (done < bytes) {
        uint64_t step = done < bytes - done ? done : bytes - done;
        memcpy(dst + done, dst, step);
        done += step;
    }
}

ZR_API void zr_ragged_dense_free(zr_ragged_dense *d)
{
    if (!d)
        return;
    zr_free(d->data);
    zr_free(d->lengths);
    zr_free(d->offsets);
    zr_free(d);
}

ZR_API int zr_ragged_densify(const zr_view *recs, size_t n, uint64_t itemsize, int layout,
                             uint64_t rows, const void *pad, zr_ragged_dense **out)
{
    if (!out)
        return zr_err(ZR_EINVAL, "zr_ragged_densify: NULL out");
    *out = NULL;
    if ((n > 0 && !recs) || itemsize == 0)
        return zr_err(ZR_EINVAL, "zr_ragged_densify: NULL records or itemsize 0");
    if (layout != ZR_PADDED && layout != ZR_PACKED)
        return zr_err(ZR_EINVAL, "zr_ragged_densify: unknown layout %d", layout);
    if (layout == ZR_PACKED && rows != 0)
        return zr_err(ZR_EINVAL, "zr_ragged_densify: a packed batch takes no row count");

    /* Every record must have the first one's row shape; the row's bytes
     * and each record's rows follow from it. */
    uint32_t row_ndim = n ? view_row_ndim(&recs[0]) : 0;
    const uint64_t *row_shape = n && recs[0].ndim ? recs[0].shape + 1 : NULL;
    uint64_t row_bytes = itemsize;
    for (uint32_t d = 0; d < row_ndim; d++)
        if (!zr_mul_ok(row_bytes, row_shape[d], &row_bytes))
            return zr_err(ZR_ETOOBIG, "a row of record 0 overflows");
    uint64_t longest = 0, total = 0;
    for (size_t k = 0; k < n; k++) {
        const zr_view *v = &recs[k];
        if (v->ndim > ZR_MAX_NDIM || (v->nbytes > 0 && !v->data))
            return zr_err(ZR_EINVAL, "zr_ragged_densify: record %zu is not a view", k);
        if (view_row_ndim(v) != row_ndim ||
            (row_ndim && memcmp(v->shape + 1, row_shape, row_ndim * sizeof *row_shape) != 0))
            return zr_err(ZR_ESHAPE,
                          "record %zu has rows of another shape than record 0's: only records "
                          "that differ in their first dimension can be padded or packed",
                          k);
        uint64_t r = view_rows(v), bytes;
        if (!zr_mul_ok(r, row_bytes, &bytes) || bytes != v->nbytes)
            return zr_err(ZR_EINVAL, "zr_ragged_densify: record %zu holds %llu bytes, not its shape's",
                          k, (unsigned long long)v->nbytes);
        if (r > longest)
            longest = r;
        if (!zr_add_ok(total, r, &total))
            return zr_err(ZR_ETOOBIG, "the batch's rows overflow");
    }
    uint64_t width = rows ? rows : longest; /* padded rows per record */
    if (layout == ZR_PADDED && rows && longest > rows) {
        for (size_t k = 0; k < n; k++)
            if (view_rows(&recs[k]) > rows)
                return zr_err(ZR_ESHAPE, "record %zu has %llu rows, more than the %llu to pad to",
                              k, (unsigned long long)view_rows(&recs[k]),
                              (unsigned long long)rows);
    }
    uint64_t nbytes;
    bool fits = layout == ZR_PACKED ? zr_mul_ok(total, row_bytes, &nbytes)
                                    : zr_mul_ok(n, width, &nbytes) &&
                                          zr_mul_ok(nbytes, row_bytes, &nbytes);
    if (!fits || nbytes > SIZE_MAX)
        return zr_err(ZR_ETOOBIG, "a dense batch of %zu records does not fit in memory", n);

    zr_ragged_dense *d = zr_calloc(1, sizeof *d);
    if (!d || !(d->data = zr_malloc(nbytes ? (size_t)nbytes : 1)) ||
        !(d->lengths = zr_malloc((n ? n : 1) * sizeof *d->lengths)) ||
        !(d->offsets = zr_malloc((n + 1) * sizeof *d->offsets))) {
        zr_ragged_dense_free(d);
        return zr_err(ZR_ENOMEM, "allocating a dense batch of %llu bytes",
                      (unsigned long long)nbytes);
    }
    d->n = n;
    d->layout = layout;
    d->nbytes = nbytes;
    uint32_t lead = 0;
    if (layout == ZR_PADDED) {
        d->shape[lead++] = n;
        d->shape[lead++] = width;
    } else {
        d->shape[lead++] = total;
    }
    for (uint32_t k = 0; k < row_ndim; k++)
        d->shape[lead + k] = row_shape[k];
    d->ndim = lead + row_ndim;

    uint8_t *dst = d->data;
    uint64_t at = 0; /* rows so far */
    for (size_t k = 0; k < n; k++) {
        uint64_t r = view_rows(&recs[k]);
        d->lengths[k] = (int64_t)r;
        d->offsets[k] = (int64_t)at;
        memcpy(dst, recs[k].data, recs[k].nbytes);
        dst += recs[k].nbytes;
        if (layout == ZR_PADDED) {
            uint64_t gap = (width - r) * row_bytes;
            fill_items(dst, gap, pad, itemsize);
            dst += gap;
        }
        at += r;
    }
    d->offsets[n] = (int64_t)at;
    *out = d;
    return 0;
}

ZR_API int zr_gather_ragged_dense(zr_store *s, const uint64_t *idx, size_t n, int layout,
                                  uint64_t rows, const void *pad, zr_ragged_dense **out)
{
    if (!out || !s)
        return zr_err(ZR_EINVAL, "zr_gather_ragged_dense: NULL argument");
    *out = NULL;
    if (s->id.kind != ZR_RAGGED)
        return zr_err(ZR_EKIND, "%s is a Dense store: its batches are dense already", s->path);
    zr_ragged_batch *b;
    int rc = zr_gather_ragged_alloc(s, idx, n, &b);
    if (rc != 0)
        return rc;
    rc = zr_ragged_densify(b->recs, n, s->id.itemsize, layout, rows, pad, out);
    zr_ragged_batch_free(b);
    return rc;
}

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
    if (out)
        *out = NULL;
    if (!out || !path)
        return zr_err(ZR_EINVAL, "zr_ragged_create: NULL argument");
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

static int append_ragged_in(zr_store *s, const char *dtype, const zr_rec *recs, uint64_t n,
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

ZR_API int zr_append_ragged(zr_store *s, const char *dtype, const zr_rec *recs, uint64_t n,
                            uint64_t *first)
{
    int rc = zr_store_enter(s, "zr_append_ragged");
    return rc != 0 ? rc : zr_store_leave_rc(s, append_ragged_in(s, dtype, recs, n, first));
}

static int ragged_sizes_in(zr_store *s, const uint64_t *idx, size_t n, uint64_t *sizes)
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

ZR_API int zr_ragged_sizes(zr_store *s, const uint64_t *idx, size_t n, uint64_t *sizes)
{
    int rc = zr_store_enter(s, "zr_ragged_sizes");
    return rc != 0 ? rc : zr_store_leave_rc(s, ragged_sizes_in(s, idx, n, sizes));
}

static int gather_ragged_in(zr_store *s, const uint64_t *idx, size_t n, void *dst,
                            const uint64_t *offsets)
{
    if (!s || (n > 0 && (!idx || !dst || !offsets)))
        return zr_err(ZR_EINVAL, "zr_gather_ragged: NULL argument");
    if (s->id.kind != ZR_RAGGED)
        return zr_err(ZR_EKIND, "%s is a Dense store; use zr_gather_dense", s->path);
    return zr_engine_gather(s, idx, n, dst, offsets);
}

ZR_API int zr_gather_ragged(zr_store *s, const uint64_t *idx, size_t n, void *dst,
                            const uint64_t *offsets)
{
    int rc = zr_store_enter(s, "zr_gather_ragged");
    return rc != 0 ? rc : zr_store_leave_rc(s, gather_ragged_in(s, idx, n, dst, offsets));
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

static int gather_ragged_alloc_in(zr_store *s, const uint64_t *idx, size_t n,
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
        rc = ragged_sizes_in(s, idx, n, sizes);
    uint64_t total = 0;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        offsets[k] = total;
        total += (sizes[k] + 7) & ~(uint64_t)7; /* keep payloads 8-byte aligned */
    }
    if (rc == 0 && (total > SIZE_MAX || !(b->buf = zr_malloc(total ? total : 1))))
        rc = zr_err(ZR_ENOMEM, "allocating %llu bytes for a batch", (unsigned long long)total);
    if (rc == 0)
        rc = gather_ragged_in(s, idx, n, b->buf, offsets);
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

ZR_API int zr_gather_ragged_alloc(zr_store *s, const uint64_t *idx, size_t n,
                                  zr_ragged_batch **out)
{
    if (out)
        *out = NULL; /* refused while closing too */
    int rc = zr_store_enter(s, "zr_gather_ragged_alloc");
    return rc != 0 ? rc : zr_store_leave_rc(s, gather_ragged_alloc_in(s, idx, n, out));
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
    zr_free(d->shapes);
    zr_free(d);
}

/* The items of a view: the product of its dimensions (1 for a scalar). */
static bool view_items(const zr_view *v, uint64_t *items)
{
    uint64_t m = 1;
    for (uint32_t d = 0; d < v->ndim; d++)
        if (!zr_mul_ok(m, v->shape[d], &m))
            return false;
    *items = m;
    return true;
}

/* Check n views for layout and make *out's everything but its data: the
 * shape, nbytes, lengths, offsets and (ZR_PACKED_FLAT) shapes. *row_bytes
 * is the bytes of one row of the data's first dimension (one item when
 * flat). d->data is left NULL for the caller to fill or to point at the
 * records gathered in place. */
static int dense_meta(const zr_view *recs, size_t n, uint64_t itemsize, int layout, uint64_t rows,
                      zr_ragged_dense **out, uint64_t *row_bytes_out)
{
    *out = NULL;
    if ((n > 0 && !recs) || itemsize == 0)
        return zr_err(ZR_EINVAL, "zr_ragged_densify: NULL records or itemsize 0");
    if (layout != ZR_PADDED && layout != ZR_PACKED && layout != ZR_PACKED_FLAT)
        return zr_err(ZR_EINVAL, "zr_ragged_densify: unknown layout %d", layout);
    if (layout != ZR_PADDED && rows != 0)
        return zr_err(ZR_EINVAL, "zr_ragged_densify: a packed batch takes no row count");
    bool flat = layout == ZR_PACKED_FLAT;

    /* Padded and packed: every record must have the first one's row
     * shape; the row's bytes and each record's rows follow from it. Flat:
     * the records share only their number of dimensions, and a "row" is
     * one item. */
    uint32_t row_ndim = n && !flat ? view_row_ndim(&recs[0]) : 0;
    const uint64_t *row_shape = n && !flat && recs[0].ndim ? recs[0].shape + 1 : NULL;
    uint32_t rec_ndim = n && flat ? recs[0].ndim : 0;
    uint64_t row_bytes = itemsize;
    for (uint32_t d = 0; d < row_ndim; d++)
        if (!zr_mul_ok(row_bytes, row_shape[d], &row_bytes))
            return zr_err(ZR_ETOOBIG, "a row of record 0 overflows");
    uint64_t longest = 0, total = 0;
    for (size_t k = 0; k < n; k++) {
        const zr_view *v = &recs[k];
        if (v->ndim > ZR_MAX_NDIM || (v->nbytes > 0 && !v->data))
            return zr_err(ZR_EINVAL, "zr_ragged_densify: record %zu is not a view", k);
        if (flat && v->ndim != rec_ndim)
            return zr_err(ZR_ESHAPE,
                          "record %zu has %u dimensions and record 0 %u: a flat packed batch "
                          "holds records of one number of dimensions",
                          k, v->ndim, rec_ndim);
        if (!flat && (view_row_ndim(v) != row_ndim ||
                      (row_ndim && memcmp(v->shape + 1, row_shape, row_ndim * sizeof *row_shape) != 0)))
            return zr_err(ZR_ESHAPE,
                          "record %zu has rows of another shape than record 0's: only records "
                          "that differ in their first dimension can be padded or packed "
                          "(ZR_PACKED_FLAT packs any shapes)",
                          k);
        uint64_t r, bytes;
        if (flat ? !view_items(v, &r) : (r = view_rows(v), false))
            return zr_err(ZR_ETOOBIG, "record %zu's shape overflows", k);
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
    bool fits = layout != ZR_PADDED ? zr_mul_ok(total, row_bytes, &nbytes)
                                    : zr_mul_ok(n, width, &nbytes) &&
                                          zr_mul_ok(nbytes, row_bytes, &nbytes);
    if (!fits || nbytes > SIZE_MAX)
        return zr_err(ZR_ETOOBIG, "a dense batch of %zu records does not fit in memory", n);

    zr_ragged_dense *d = zr_calloc(1, sizeof *d);
    if (!d || !(d->lengths = zr_malloc((n ? n : 1) * sizeof *d->lengths)) ||
        !(d->offsets = zr_malloc((n + 1) * sizeof *d->offsets)) ||
        (flat && !(d->shapes = zr_malloc((n * rec_ndim > 0 ? n * rec_ndim : 1) * sizeof *d->shapes)))) {
        zr_ragged_dense_free(d);
        return zr_err(ZR_ENOMEM, "allocating a dense batch of %zu records", n);
    }
    d->n = n;
    d->layout = layout;
    d->nbytes = nbytes;
    d->rec_ndim = rec_ndim;
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
    uint64_t at = 0; /* rows (items when flat) so far */
    for (size_t k = 0; k < n; k++) {
        uint64_t r = 0;
        if (flat) {
            view_items(&recs[k], &r);
            for (uint32_t j = 0; j < rec_ndim; j++)
                d->shapes[k * rec_ndim + j] = (int64_t)recs[k].shape[j];
        } else {
            r = view_rows(&recs[k]);
        }
        d->lengths[k] = (int64_t)r;
        d->offsets[k] = (int64_t)at;
        at += r;
    }
    d->offsets[n] = (int64_t)at;
    *row_bytes_out = row_bytes;
    *out = d;
    return 0;
}

ZR_API int zr_ragged_densify(const zr_view *recs, size_t n, uint64_t itemsize, int layout,
                             uint64_t rows, const void *pad, zr_ragged_dense **out)
{
    if (!out)
        return zr_err(ZR_EINVAL, "zr_ragged_densify: NULL out");
    *out = NULL;
    zr_ragged_dense *d;
    uint64_t row_bytes;
    int rc = dense_meta(recs, n, itemsize, layout, rows, &d, &row_bytes);
    if (rc != 0)
        return rc;
    if (!(d->data = zr_malloc(d->nbytes ? (size_t)d->nbytes : 1))) {
        unsigned long long nbytes = d->nbytes; /* d is gone once freed */
        zr_ragged_dense_free(d);
        return zr_err(ZR_ENOMEM, "allocating a dense batch of %llu bytes", nbytes);
    }
    uint8_t *dst = d->data;
    uint64_t width = layout == ZR_PADDED ? d->shape[1] : 0;
    for (size_t k = 0; k < n; k++) {
        memcpy(dst, recs[k].data, recs[k].nbytes);
        dst += recs[k].nbytes;
        if (layout == ZR_PADDED) {
            uint64_t gap = (width - (uint64_t)d->lengths[k]) * row_bytes;
            fill_items(dst, gap, pad, itemsize);
            dst += gap;
        }
    }
    *out = d;
    return 0;
}

/* ---- packed batches gathered in place -------------------------------
 *
 * A gather writes each record whole, shape prefix then payload, at the
 * offset it is given. Packed, the payloads must end up back to back, so
 * record k is gathered at P[k] - pre, where P[k] is its payload's place
 * and pre its prefix's length: the prefix lands on the last pre bytes of
 * record k - 1's payload. Two records gathered at the same time must not
 * overlap, so the batch goes in two passes, odd records then even ones:
 * a record's prefix then lands on a neighbour of the other pass. After
 * the odd pass, their prefixes are read (they are where the even records'
 * payload tails go); before the even pass, the odd records' tails that
 * the even prefixes will cover are put aside, and they are put back
 * after it. Record 0, whose prefix would land before the batch, is
 * gathered first, alone, into a buffer of its own, and its prefix gives
 * pre; its payload is copied into place last. The passes are disjoint
 * when every payload but the last is at least pre bytes long (a
 * record's region, prefix and payload, then ends before the next
 * record of its pass begins) and every record has record 0's number of
 * dimensions; the sizes tell the first before anything is read, the
 * prefixes the second after. Either failing, the caller takes the
 * two-step path (gather, then copy). */

/* Gather records idx[k] for k = first, first + 2, ... < n at pos[k] - pre. */
static int gather_pass(zr_store *s, const uint64_t *idx, size_t n, size_t first,
                       const uint64_t *pos, uint64_t pre, uint8_t *data, uint64_t *sub_idx,
                       uint64_t *sub_off)
{
    size_t m = 0;
    for (size_t k = first; k < n; k += 2) {
        sub_idx[m] = idx[k];
        sub_off[m++] = pos[k] - pre;
    }
    return m ? zr_engine_gather(s, sub_idx, m, data, sub_off) : 0;
}

/* Read the prefixes of records first, first + 2, ... < n, now at
 * pos[k] - pre, into views of their payloads at pos[k]. Returns 1 when a
 * record has another number of dimensions than nd (its payload is not
 * where it should be). */
static int read_prefixes(const zr_store *s, const uint64_t *sizes, size_t n, size_t first,
                         const uint64_t *pos, uint64_t pre, uint32_t nd, uint8_t *data,
                         zr_view *views)
{
    for (size_t k = first; k < n; k += 2) {
        int rc = zr_ragged_view(data + pos[k] - pre, sizes[k], s->id.itemsize, &views[k]);
        if (rc != 0)
            return rc;
        if (views[k].ndim != nd)
            return 1;
        views[k].data = data + pos[k];
    }
    return 0;
}

/* The packed layouts gathered in place, as the comment above says: 0
 * with *out made, 1 when the batch cannot be (nothing is left
 * allocated), or an error. */
static int gather_packed_inplace(zr_store *s, const uint64_t *idx, size_t n, int layout,
                                 zr_ragged_dense **out)
{
    if (n < 2)
        return 1;
    uint64_t itemsize = s->id.itemsize;
    uint64_t *sizes = zr_malloc(n * sizeof *sizes);
    uint64_t *pos = zr_malloc((n + 1) * sizeof *pos);
    uint64_t *sub_idx = zr_malloc(((n + 1) / 2) * sizeof *sub_idx);
    uint64_t *sub_off = zr_malloc(((n + 1) / 2) * sizeof *sub_off);
    zr_view *views = zr_malloc(n * sizeof *views);
    uint8_t *first = NULL, *data = NULL, *tails = NULL;
    zr_ragged_dense *d = NULL;
    int rc = 0;
    if (!sizes || !pos || !sub_idx || !sub_off || !views) {
        rc = zr_err(ZR_ENOMEM, "gathering a packed batch of %zu records", n);
        goto done;
    }
    if ((rc = ragged_sizes_in(s, idx, n, sizes)) != 0)
        goto done;
    /* Record 0 alone: its prefix says how long the others' should be. */
    if (!(first = zr_malloc(sizes[0] ? sizes[0] : 1))) {
        rc = zr_err(ZR_ENOMEM, "gathering a packed batch of %zu records", n);
        goto done;
    }
    uint64_t zero = 0;
    if ((rc = zr_engine_gather(s, idx, 1, first, &zero)) != 0 ||
        (rc = zr_ragged_view(first, sizes[0], itemsize, &views[0])) != 0)
        goto done;
    uint32_t nd = views[0].ndim;
    uint64_t pre = 8 * (1 + (uint64_t)nd);
    pos[0] = 0;
    for (size_t k = 0; k < n; k++) {
        /* A record shorter than the prefix, or than two of them when
         * another follows, breaks the passes' disjointness. */
        if (sizes[k] < pre + (k + 1 < n ? pre : 0)) {
            rc = 1;
            goto done;
        }
        pos[k + 1] = pos[k] + sizes[k] - pre;
    }
    if (pos[n] > SIZE_MAX) {
        rc = zr_err(ZR_ETOOBIG, "a packed batch of %llu bytes does not fit in memory",
                    (unsigned long long)pos[n]);
        goto done;
    }
    if (!(data = zr_malloc(pos[n] ? (size_t)pos[n] : 1)) ||
        !(tails = zr_malloc((n / 2 + 1) * pre))) {
        rc = zr_err(ZR_ENOMEM, "allocating a packed batch of %llu bytes",
                    (unsigned long long)pos[n]);
        goto done;
    }
    /* Odd records, then their prefixes before the even records cover them. */
    if ((rc = gather_pass(s, idx, n, 1, pos, pre, data, sub_idx, sub_off)) != 0 ||
        (rc = read_prefixes(s, sizes, n, 1, pos, pre, nd, data, views)) != 0)
        goto done;
    /* Even records from 2: their prefixes cover the odd records' tails,
     * which are put aside first and back after. */
    for (size_t k = 2, t = 0; k < n; k += 2, t++)
        memcpy(tails + t * pre, data + pos[k] - pre, pre);
    if ((rc = gather_pass(s, idx, n, 2, pos, pre, data, sub_idx, sub_off)) != 0 ||
        (rc = read_prefixes(s, sizes, n, 2, pos, pre, nd, data, views)) != 0)
        goto done;
    for (size_t k = 2, t = 0; k < n; k += 2, t++)
        memcpy(data + pos[k] - pre, tails + t * pre, pre);
    memcpy(data, views[0].data, views[0].nbytes);
    views[0].data = data;
    uint64_t row_bytes;
    if ((rc = dense_meta(views, n, itemsize, layout, 0, &d, &row_bytes)) != 0)
        goto done;
    d->data = data;
    data = NULL;
    *out = d;
done:
    zr_free(sizes);
    zr_free(pos);
    zr_free(sub_idx);
    zr_free(sub_off);
    zr_free(views);
    zr_free(first);
    zr_free(data);
    zr_free(tails);
    return rc;
}

static int gather_ragged_dense_in(zr_store *s, const uint64_t *idx, size_t n, int layout,
                                  uint64_t rows, const void *pad, zr_ragged_dense **out)
{
    if (out)
        *out = NULL;
    if (!out || !s)
        return zr_err(ZR_EINVAL, "zr_gather_ragged_dense: NULL argument");
    if (s->id.kind != ZR_RAGGED)
        return zr_err(ZR_EKIND, "%s is a Dense store: its batches are dense already", s->path);
    if ((layout == ZR_PACKED || layout == ZR_PACKED_FLAT) && rows == 0 && (n == 0 || idx)) {
        int rc = gather_packed_inplace(s, idx, n, layout, out);
        if (rc != 1)
            return rc;
    }
    zr_ragged_batch *b;
    int rc = gather_ragged_alloc_in(s, idx, n, &b);
    if (rc != 0)
        return rc;
    rc = zr_ragged_densify(b->recs, n, s->id.itemsize, layout, rows, pad, out);
    zr_ragged_batch_free(b);
    return rc;
}

ZR_API int zr_gather_ragged_dense(zr_store *s, const uint64_t *idx, size_t n, int layout,
                                  uint64_t rows, const void *pad, zr_ragged_dense **out)
{
    if (out)
        *out = NULL; /* refused while closing too */
    int rc = zr_store_enter(s, "zr_gather_ragged_dense");
    return rc != 0 ? rc : zr_store_leave_rc(s, gather_ragged_dense_in(s, idx, n, layout, rows, pad, out));
}

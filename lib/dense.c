/*
 * dense.c: the Dense contract. Every record is one item of the store's
 * dtype and item shape, exactly width bytes, so a batch is a fixed-stride
 * array and no per-record shape is stored. This file checks the caller's
 * declared type against the store before handing bytes to the engine.
 */
#include <stdio.h>
#include <string.h>

#include "engine.h"

static int check_identity_args(const char *dtype, const uint64_t *shape, uint32_t ndim,
                               struct zr_identity *id)
{
    int64_t itemsize = zr_dtype_parse(dtype);
    if (itemsize <= 0)
        return zr_err(ZR_EINVAL, "'%s' is not a supported dtype", dtype ? dtype : "(null)");
    if (ndim > ZR_MAX_NDIM)
        return zr_err(ZR_EINVAL, "item shape has %u dimensions, at most %d are allowed", ndim,
                      ZR_MAX_NDIM);
    if (ndim > 0 && !shape)
        return zr_err(ZR_EINVAL, "item shape is NULL");
    memset(id, 0, sizeof *id);
    id->kind = ZR_DENSE;
    snprintf(id->dtype, sizeof id->dtype, "%s", dtype);
    id->itemsize = (uint64_t)itemsize;
    id->ndim = ndim;
    uint64_t width = id->itemsize;
    for (uint32_t i = 0; i < ndim; i++) {
        if (shape[i] == 0)
            return zr_err(ZR_EINVAL, "item shape dimension %u is zero: records would be empty", i);
        if (!zr_mul_ok(width, shape[i], &width) || width > ZR_MAX_RECORD)
            return zr_err(ZR_ETOOBIG, "a record of this item shape exceeds 2 GiB");
        id->shape[i] = shape[i];
    }
    /* A scalar item skips the loop: its width is the item size alone. */
    if (width > ZR_MAX_RECORD)
        return zr_err(ZR_ETOOBIG, "a record of this dtype exceeds 2 GiB");
    return 0;
}

ZR_API int zr_dense_create(zr_store **out, const char *path, const char *dtype,
                           const uint64_t *item_shape, uint32_t ndim, const zr_create_opts *opts)
{
    if (out)
        *out = NULL;
    if (!out || !path)
        return zr_err(ZR_EINVAL, "zr_dense_create: NULL argument");
    struct zr_identity id;
    zr_create_opts o;
    int rc = check_identity_args(dtype, item_shape, ndim, &id);
    if (rc == 0)
        rc = zr_create_opts_read(opts, &o);
    if (rc != 0)
        return rc;
    return zr_engine_create(out, path, &id, &o);
}

static int append_dense_in(zr_store *s, const char *dtype, const uint64_t *item_shape,
                           uint32_t ndim, const void *data, uint64_t n, uint64_t *first)
{
    int rc = zr_engine_writer(s, "zr_append_dense");
    if (rc != 0)
        return rc;
    if (s->id.kind != ZR_DENSE)
        return zr_err(ZR_EKIND, "%s is a Ragged store; use zr_append_ragged", s->path);
    if (!dtype || strcmp(dtype, s->id.dtype) != 0)
        return zr_err(ZR_EDTYPE, "%s holds %s, the data is %s", s->path, s->id.dtype,
                      dtype ? dtype : "(null)");
    if (ndim != s->id.ndim || (ndim > 0 && !item_shape) ||
        (ndim > 0 && memcmp(item_shape, s->id.shape, ndim * sizeof *item_shape) != 0))
        return zr_err(ZR_ESHAPE, "%s: the data's item shape differs from the store's", s->path);
    if (n > 0 && !data)
        return zr_err(ZR_EINVAL, "zr_append_dense: NULL data");
    uint64_t total;
    if (!zr_mul_ok(n, s->width, &total) || total > SIZE_MAX)
        return zr_err(ZR_EINVAL, "zr_append_dense: batch size overflows");
    struct zr_src src = {.kind = ZR_DENSE, .base = data, .width = s->width};
    return zr_engine_append(s, &src, n, first);
}

ZR_API int zr_append_dense(zr_store *s, const char *dtype, const uint64_t *item_shape,
                           uint32_t ndim, const void *data, uint64_t n, uint64_t *first)
{
    int rc = zr_store_enter(s, "zr_append_dense");
    return rc != 0 ? rc : zr_store_leave_rc(s, append_dense_in(s, dtype, item_shape, ndim, data, n, first));
}

static int gather_dense_in(zr_store *s, const uint64_t *idx, size_t n, void *dst)
{
    if (!s || (n > 0 && (!idx || !dst)))
        return zr_err(ZR_EINVAL, "zr_gather_dense: NULL argument");
    if (s->id.kind != ZR_DENSE)
        return zr_err(ZR_EKIND, "%s is a Ragged store; use zr_gather_ragged", s->path);
    return zr_engine_gather(s, idx, n, dst, NULL);
}

ZR_API int zr_gather_dense(zr_store *s, const uint64_t *idx, size_t n, void *dst)
{
    int rc = zr_store_enter(s, "zr_gather_dense");
    return rc != 0 ? rc : zr_store_leave_rc(s, gather_dense_in(s, idx, n, dst));
}

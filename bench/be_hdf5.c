/*
 * be_hdf5.c: the hdf5-raw and hdf5-gzip rows (libhdf5, the serial
 * library Debian ships), written and read through the C API the way
 * h5py users lay such data out.
 *
 * Dense: one dataset of shape (n, item shape) chunked one record per
 * chunk, so a record is read without touching its neighbours. Ragged:
 * the payloads back to back in one flat dataset, plus an "offsets"
 * dataset (n + 1 element offsets) and a "shapes" dataset (n x ndim); a
 * flat dataset cannot have one chunk per record, so its chunks hold the
 * mean record's element count. hdf5-gzip adds the deflate filter at level
 * 4 (h5py's default for compression="gzip"); hdf5-raw has no filter.
 *
 * A gather reads record by record (a hyperslab of the file space into the
 * batch slot), in batch order, on the calling thread: HDF5 reads and
 * decompresses on one thread, and its default chunk cache (1 MiB) is what
 * a user gets. The Ragged offsets and shapes are read into memory once
 * when the file is opened, as any user would.
 */
#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/bench.h"

struct h5 {
    bool gzip;
    char *path;
    hid_t file, data, fspace, mspace, type;
    const struct workload *w;
    uint64_t *offs;   /* Ragged: n + 1 element offsets */
    uint64_t *shapes; /* Ragged: n * ndim */
    uint8_t *buf;
    uint64_t cap;
};

static hid_t native_type(const struct workload *w)
{
    if (w->itemsize == 1)
        return H5T_NATIVE_UINT8;
    if (w->itemsize == 4 && strchr(w->dtype, 'i'))
        return H5T_NATIVE_INT32;
    return -1;
}

static int h5_fail(const char *what)
{
    fprintf(stderr, "zrbench: hdf5: %s failed\n", what);
    return -1;
}

/* Write a whole 1- or 2-dimensional uint64 dataset, unchunked. */
static int write_u64(hid_t file, const char *name, const uint64_t *v, hsize_t rows, hsize_t cols)
{
    hsize_t dims[2] = {rows, cols};
    hid_t sp = H5Screate_simple(cols ? 2 : 1, dims, NULL);
    hid_t ds = H5Dcreate2(file, name, H5T_NATIVE_UINT64, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = ds < 0 ? -1 : H5Dwrite(ds, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    if (ds >= 0)
        H5Dclose(ds);
    H5Sclose(sp);
    return e < 0 ? -1 : 0;
}

static int h5_write(struct backend *b, const struct workload *w)
{
    struct h5 *h = b->state;
    hid_t type = native_type(w), file = -1, sp = -1, dcpl = -1, ds = -1;
    uint64_t *eoffs = NULL;
    int rc = -1;
    if (type < 0 || (mkdir(b->dir, 0700) != 0 && errno != EEXIST))
        return -1;
    file = H5Fcreate(h->path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (file < 0 || dcpl < 0)
        goto out;
    hsize_t dims[1 + BENCH_MAX_NDIM], chunk[1 + BENCH_MAX_NDIM];
    int rank;
    if (!w->ragged) {
        rank = 1 + (int)w->ndim;
        dims[0] = w->n;
        chunk[0] = 1;
        for (uint32_t d = 0; d < w->ndim; d++)
            dims[1 + d] = chunk[1 + d] = w->item_shape[d];
    } else {
        rank = 1;
        dims[0] = w->logical / w->itemsize;
        chunk[0] = dims[0] / w->n ? dims[0] / w->n : 1;
    }
    if (H5Pset_chunk(dcpl, rank, chunk) < 0 || (h->gzip && H5Pset_deflate(dcpl, 4) < 0))
        goto out;
    sp = H5Screate_simple(rank, dims, NULL);
    ds = H5Dcreate2(file, "data", type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (ds < 0 || H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, w->data) < 0)
        goto out;
    if (w->ragged) {
        eoffs = bench_xmalloc((w->n + 1) * sizeof *eoffs);
        for (size_t k = 0; k <= w->n; k++)
            eoffs[k] = w->off[k] / w->itemsize;
        if (write_u64(file, "offsets", eoffs, w->n + 1, 0) != 0 ||
            write_u64(file, "shapes", w->shape, w->n, w->ndim) != 0)
            goto out;
    }
    rc = 0;
out:
    if (ds >= 0)
        H5Dclose(ds);
    if (sp >= 0)
        H5Sclose(sp);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (file >= 0 && H5Fclose(file) < 0)
        rc = -1;
    free(eoffs);
    return rc ? h5_fail("write") : 0;
}

static int read_u64(hid_t file, const char *name, uint64_t *v)
{
    hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
    herr_t e = ds < 0 ? -1 : H5Dread(ds, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    if (ds >= 0)
        H5Dclose(ds);
    return e < 0 ? -1 : 0;
}

static int h5_prepare(struct backend *b, const struct workload *w)
{
    struct h5 *h = b->state;
    h->w = w;
    h->type = native_type(w);
    h->file = H5Fopen(h->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (h->file < 0 || (h->data = H5Dopen2(h->file, "data", H5P_DEFAULT)) < 0 ||
        (h->fspace = H5Dget_space(h->data)) < 0)
        return h5_fail("open");
    hsize_t one[1 + BENCH_MAX_NDIM] = {1};
    if (!w->ragged) {
        for (uint32_t d = 0; d < w->ndim; d++)
            one[1 + d] = w->item_shape[d];
        h->mspace = H5Screate_simple(1 + (int)w->ndim, one, NULL);
        h->cap = w->batch * w->width;
    } else {
        h->offs = bench_xmalloc((w->n + 1) * sizeof *h->offs);
        h->shapes = bench_xmalloc(w->n * w->ndim * sizeof *h->shapes);
        if (read_u64(h->file, "offsets", h->offs) != 0 || read_u64(h->file, "shapes", h->shapes) != 0)
            return h5_fail("reading offsets and shapes");
        h->mspace = H5Screate_simple(1, one, NULL);
        h->cap = bench_max_batch_bytes(w, 0);
    }
    h->buf = bench_batch_alloc(h->cap);
    return h->mspace < 0 ? h5_fail("memory space") : 0;
}

static int h5_gather(struct backend *b, const uint64_t *idx, size_t n, struct batch_out *o)
{
    struct h5 *h = b->state;
    const struct workload *w = h->w;
    hsize_t start[1 + BENCH_MAX_NDIM] = {0}, count[1 + BENCH_MAX_NDIM] = {1};
    uint64_t at = 0;
    o->buf = h->buf;
    for (uint32_t d = 0; !w->ragged && d < w->ndim; d++)
        count[1 + d] = w->item_shape[d];
    for (size_t k = 0; k < n; k++) {
        uint64_t i = idx[k];
        uint8_t *dst;
        if (!w->ragged) {
            start[0] = i;
            dst = h->buf + k * w->width;
        } else {
            start[0] = h->offs[i];
            count[0] = h->offs[i + 1] - h->offs[i];
            if (H5Sset_extent_simple(h->mspace, 1, count, NULL) < 0)
                return h5_fail("memory extent");
            dst = h->buf + at;
            o->rec[k] = dst;
            o->bytes[k] = count[0] * w->itemsize;
            memcpy(o->shape + k * w->ndim, h->shapes + i * w->ndim, w->ndim * sizeof *o->shape);
            at += (o->bytes[k] + 7) & ~(uint64_t)7;
        }
        if (H5Sselect_hyperslab(h->fspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
            H5Dread(h->data, h->type, h->mspace, h->fspace, H5P_DEFAULT, dst) < 0)
            return h5_fail("read");
    }
    return 0;
}

static uint64_t h5_footprint(struct backend *b) { return dir_allocated(b->dir); }

static void h5_release(struct backend *b)
{
    struct h5 *h = b->state;
    if (!h)
        return;
    if (h->mspace > 0)
        H5Sclose(h->mspace);
    if (h->fspace > 0)
        H5Sclose(h->fspace);
    if (h->data > 0)
        H5Dclose(h->data);
    if (h->file > 0)
        H5Fclose(h->file);
    free(h->offs);
    free(h->shapes);
    free(h->buf);
    free(h->path);
    free(h);
    b->state = NULL;
}

static const struct backend_ops h5_ops = {
    .write = h5_write,
    .prepare = h5_prepare,
    .gather = h5_gather,
    .footprint = h5_footprint,
    .release = h5_release,
};

int be_hdf5_init(struct backend *b, enum backend_kind kind)
{
    struct h5 *h = calloc(1, sizeof *h);
    if (!h)
        return -1;
    h->gzip = kind == BK_HDF5_GZIP;
    size_t n = strlen(b->dir) + 16;
    h->path = bench_xmalloc(n);
    snprintf(h->path, n, "%s/data.h5", b->dir);
    b->name = h->gzip ? "hdf5-gzip" : "hdf5-raw";
    b->threads = 1;
    b->write_once = h->gzip;
    b->ops = &h5_ops;
    b->state = h;
    snprintf(b->note, sizeof b->note,
             "%s; Dense one chunk per record, Ragged flat data + offsets + shapes (chunks of the "
             "mean record); one hyperslab read per record on one thread, default chunk cache",
             h->gzip ? "deflate level 4 (h5py's gzip default)" : "no filter");
    return 0;
}

/*
 * records.c: reproducible record contents and direct reads of a store's
 * files for the engine suites.
 *
 * Every record is a pure function of (dtype, seed, record index, shape),
 * so a test that appends records can check any later gather, from any
 * thread and after any reopen, by regenerating what it expects. The file
 * readers decode meta.zr and the .loc entries with their own code, from
 * the format description, so that layout checks do not trust the engine's
 * decoders.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"
#include "tests/helpers.h"
#include "tests/records.h"

char *zt_dir;

void zt_setup(void)
{
    zt_dir = zt_tempdir();
}

void zt_teardown(void)
{
    zr_testing_set_geometry(0, 0);
    if (zt_dir) {
        zt_rmtree(zt_dir);
        free(zt_dir);
        zt_dir = NULL;
    }
}

char *zt_path(const char *name)
{
    return zt_join(zt_dir, name);
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t zt_itemsize(const char *dtype)
{
    uint64_t n = strtoull(dtype + 2, NULL, 10);
    return dtype[1] == 'U' ? 4 * n : n;
}

static void put(uint8_t *p, uint64_t v, unsigned size, bool big)
{
    for (unsigned i = 0; i < size; i++)
        p[big ? size - 1 - i : i] = (uint8_t)(v >> (8 * i));
}

/* One floating-point value of size bytes (2, 4 or 8) for element j. */
static void put_float(uint8_t *p, unsigned size, bool big, uint64_t h, uint64_t pat, bool rare,
                      uint64_t rec)
{
    if (size == 2) {
        /* A finite, normal half: sign, exponent 8..23, ten mantissa bits. */
        uint64_t sign = (rare ? h : pat) & 1;
        uint64_t exp = 8 + (pat >> 1) % 16;
        uint64_t mant = (rare ? h >> 5 : (pat >> 8) + rec * 7) & 0x3ff;
        put(p, sign << 15 | exp << 10 | mant, 2, big);
        return;
    }
    double x = rare ? ((double)(h >> 11) / 9007199254740992.0 - 0.5) * 1e6
                    : ((double)(pat % 2000) - 1000.0) / 16.0 + (double)(rec % 13);
    if (size == 4) {
        float f = (float)x;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        put(p, bits, 4, big);
    } else {
        uint64_t bits;
        memcpy(&bits, &x, 8);
        put(p, bits, 8, big);
    }
}

void zt_fill(void *dst, const char *dtype, uint64_t nelem, uint64_t seed, uint64_t rec)
{
    uint8_t *p = dst;
    char kind = dtype[1];
    bool big = dtype[0] == '>';
    uint64_t size = zt_itemsize(dtype);
    uint64_t key = mix(seed ^ mix(rec));
    for (uint64_t j = 0; j < nelem; j++, p += size) {
        uint64_t h = mix(key + j);
        uint64_t pat = mix(seed + j % 61); /* shared by every record */
        bool rare = (h & 7) == 0;
        switch (kind) {
        case 'b':
            *p = (uint8_t)(((pat >> 3) ^ rec ^ (rare ? 1 : 0)) & 1);
            break;
        case 'i':
            put(p, rare ? h >> 3 : (uint64_t)((int64_t)(pat % 200) - 100 + (int64_t)(rec % 7)),
                (unsigned)size, big);
            break;
        case 'u':
            put(p, rare ? h >> 3 : pat % 200 + rec % 7, (unsigned)size, big);
            break;
        case 'f':
            put_float(p, (unsigned)size, big, h, pat, rare, rec);
            break;
        case 'c':
            put_float(p, (unsigned)size / 2, big, h, pat, rare, rec);
            put_float(p + size / 2, (unsigned)size / 2, big, mix(h), mix(pat), rare, rec + 1);
            break;
        case 'U':
            for (uint64_t c = 0; c < size / 4; c++)
                put(p + 4 * c, 'a' + (pat + c + (rare ? h : rec)) % 26, 4, big);
            break;
        default: /* 'S', 'V': plain bytes */
            for (uint64_t c = 0; c < size; c++)
                p[c] = (uint8_t)(rare ? h >> (c % 8 * 8) : pat + c + rec);
            break;
        }
    }
}

uint32_t zt_shape(uint64_t seed, uint64_t rec, uint32_t maxndim, uint64_t maxdim,
                  uint64_t shape[ZR_MAX_NDIM])
{
    uint64_t h = mix(seed * 31 + rec + 12345);
    uint32_t ndim = (uint32_t)(h % (maxndim + 1));
    for (uint32_t d = 0; d < ndim; d++)
        shape[d] = 1 + mix(h + d) % maxdim;
    return ndim;
}

zt_ragged *zt_ragged_gen(const char *dtype, uint64_t seed, uint64_t first, uint64_t n,
                         uint32_t maxndim, uint64_t maxdim)
{
    zt_ragged *r = calloc(1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    r->n = n;
    r->recs = calloc(n ? n : 1, sizeof *r->recs);
    r->shapes = calloc(n ? n : 1, sizeof *r->shapes);
    r->data = calloc(n ? n : 1, sizeof *r->data);
    r->nbytes = calloc(n ? n : 1, sizeof *r->nbytes);
    ck_assert(r->recs && r->shapes && r->data && r->nbytes);
    uint64_t itemsize = zt_itemsize(dtype);
    for (uint64_t k = 0; k < n; k++) {
        uint32_t ndim = zt_shape(seed, first + k, maxndim, maxdim, r->shapes[k]);
        uint64_t nelem = 1;
        for (uint32_t d = 0; d < ndim; d++)
            nelem *= r->shapes[k][d];
        r->nbytes[k] = nelem * itemsize;
        r->data[k] = malloc(r->nbytes[k]);
        ck_assert_ptr_nonnull(r->data[k]);
        zt_fill(r->data[k], dtype, nelem, seed, first + k);
        r->recs[k] = (zr_rec){.data = r->data[k], .shape = r->shapes[k], .ndim = ndim};
    }
    return r;
}

void zt_ragged_free(zt_ragged *r)
{
    if (!r)
        return;
    for (uint64_t k = 0; k < r->n; k++)
        free(r->data[k]);
    free(r->recs);
    free(r->shapes);
    free(r->data);
    free(r->nbytes);
    free(r);
}

void *zt_dense_gen(const char *dtype, uint64_t nelem, uint64_t seed, uint64_t first, uint64_t n)
{
    uint64_t width = nelem * zt_itemsize(dtype);
    uint8_t *buf = malloc(n * width > 0 ? n * width : 1);
    ck_assert_ptr_nonnull(buf);
    for (uint64_t k = 0; k < n; k++)
        zt_fill(buf + k * width, dtype, nelem, seed, first + k);
    return buf;
}

static uint64_t dense_nelem(const zr_store *s)
{
    uint32_t ndim;
    const uint64_t *shape = zr_item_shape(s, &ndim);
    uint64_t nelem = 1;
    for (uint32_t d = 0; d < ndim; d++)
        nelem *= shape[d];
    return nelem;
}

void zt_append_dense_gen(zr_store *s, uint64_t seed, uint64_t n)
{
    uint32_t ndim;
    const uint64_t *shape = zr_item_shape(s, &ndim);
    uint64_t base = zr_len(s), first = UINT64_MAX;
    void *buf = zt_dense_gen(zr_dtype(s), dense_nelem(s), seed, base, n);
    ZR_OK_CALL(zr_append_dense(s, zr_dtype(s), shape, ndim, buf, n, &first));
    free(buf);
    if (n > 0)
        ck_assert_uint_eq(first, base);
    ck_assert_uint_eq(zr_len(s), base + n);
}

void zt_append_ragged_gen(zr_store *s, uint64_t seed, uint64_t n, uint32_t maxndim,
                          uint64_t maxdim)
{
    uint64_t base = zr_len(s), first = UINT64_MAX;
    zt_ragged *r = zt_ragged_gen(zr_dtype(s), seed, base, n, maxndim, maxdim);
    ZR_OK_CALL(zr_append_ragged(s, zr_dtype(s), r->recs, n, &first));
    zt_ragged_free(r);
    if (n > 0)
        ck_assert_uint_eq(first, base);
    ck_assert_uint_eq(zr_len(s), base + n);
}

bool zt_dense_matches(zr_store *s, uint64_t seed, const uint64_t *idx, size_t n, int *rc)
{
    uint64_t width = zr_record_width(s), nelem = dense_nelem(s);
    uint8_t *dst = malloc(n * width + 1);
    uint8_t *want = malloc(width);
    bool ok = dst && want;
    *rc = 0;
    if (ok) {
        memset(dst, 0xa5, n * width + 1);
        *rc = zr_gather_dense(s, idx, n, dst);
        ok = *rc == 0 && dst[n * width] == 0xa5;
    }
    for (size_t k = 0; ok && k < n; k++) {
        zt_fill(want, zr_dtype(s), nelem, seed, idx[k]);
        ok = memcmp(dst + k * width, want, width) == 0;
    }
    free(dst);
    free(want);
    return ok;
}

/* The records are gathered at 8-aligned offsets with an 8-byte gap after
 * each; the gaps must stay untouched. */
bool zt_ragged_matches(zr_store *s, uint64_t seed, const uint64_t *idx, size_t n,
                       uint32_t maxndim, uint64_t maxdim, int *rc)
{
    const char *dtype = zr_dtype(s);
    uint64_t itemsize = zt_itemsize(dtype);
    uint64_t *sizes = calloc(n ? n : 1, sizeof *sizes);
    uint64_t *offsets = calloc(n ? n : 1, sizeof *offsets);
    uint8_t *dst = NULL, *want = NULL;
    bool ok = sizes && offsets;
    *rc = 0;
    if (ok)
        *rc = zr_ragged_sizes(s, idx, n, sizes);
    ok = ok && *rc == 0;
    uint64_t total = 0;
    for (size_t k = 0; ok && k < n; k++) {
        uint64_t shape[ZR_MAX_NDIM];
        uint32_t ndim = zt_shape(seed, idx[k], maxndim, maxdim, shape);
        uint64_t nelem = 1;
        for (uint32_t d = 0; d < ndim; d++)
            nelem *= shape[d];
        ok = sizes[k] == 8 * (1 + (uint64_t)ndim) + nelem * itemsize;
        offsets[k] = total;
        total += (sizes[k] + 7) / 8 * 8 + 8;
    }
    if (ok) {
        dst = malloc(total ? total : 1);
        ok = dst != NULL;
    }
    if (ok) {
        memset(dst, 0x5a, total);
        *rc = zr_gather_ragged(s, idx, n, dst, offsets);
        ok = *rc == 0;
    }
    for (size_t k = 0; ok && k < n; k++) {
        const uint8_t *rec = dst + offsets[k];
        uint64_t shape[ZR_MAX_NDIM];
        uint32_t ndim = zt_shape(seed, idx[k], maxndim, maxdim, shape);
        uint64_t pre = 8 * (1 + (uint64_t)ndim), pay = sizes[k] - pre;
        ok = zt_le64(rec) == ndim;
        for (uint32_t d = 0; ok && d < ndim; d++)
            ok = zt_le64(rec + 8 + 8 * d) == shape[d];
        free(want);
        want = malloc(pay);
        ok = ok && want;
        if (ok) {
            zt_fill(want, dtype, pay / itemsize, seed, idx[k]);
            ok = memcmp(rec + pre, want, pay) == 0;
        }
        for (uint64_t g = sizes[k]; ok && g < (sizes[k] + 7) / 8 * 8 + 8; g++)
            ok = rec[g] == 0x5a;
        zr_view v;
        if (ok)
            ok = zr_ragged_view(rec, sizes[k], itemsize, &v) == 0 && v.ndim == ndim &&
                 v.nbytes == pay && v.data == rec + pre &&
                 memcmp(v.shape, shape, ndim * sizeof *shape) == 0;
    }
    free(want);
    free(dst);
    free(offsets);
    free(sizes);
    return ok;
}

static uint64_t *iota(uint64_t n)
{
    uint64_t *idx = malloc((n ? n : 1) * sizeof *idx);
    ck_assert_ptr_nonnull(idx);
    for (uint64_t k = 0; k < n; k++)
        idx[k] = k;
    return idx;
}

void zt_check_dense_idx(zr_store *s, uint64_t seed, const uint64_t *idx, size_t n)
{
    int rc;
    bool ok = zt_dense_matches(s, seed, idx, n, &rc);
    ck_assert_msg(rc == 0, "gather failed: %d %s", rc, zr_last_error());
    ck_assert_msg(ok, "gathered Dense records differ from the generated ones");
}

void zt_check_dense_all(zr_store *s, uint64_t seed)
{
    uint64_t n = zr_len(s);
    uint64_t *idx = iota(n);
    zt_check_dense_idx(s, seed, idx, n);
    free(idx);
}

void zt_check_ragged_idx(zr_store *s, uint64_t seed, const uint64_t *idx, size_t n,
                         uint32_t maxndim, uint64_t maxdim)
{
    int rc;
    bool ok = zt_ragged_matches(s, seed, idx, n, maxndim, maxdim, &rc);
    ck_assert_msg(rc == 0, "ragged gather failed: %d %s", rc, zr_last_error());
    ck_assert_msg(ok, "gathered Ragged records differ from the generated ones");
}

void zt_check_ragged_all(zr_store *s, uint64_t seed, uint32_t maxndim, uint64_t maxdim)
{
    uint64_t n = zr_len(s);
    uint64_t *idx = iota(n);
    zt_check_ragged_idx(s, seed, idx, n, maxndim, maxdim);
    free(idx);
}

void *zt_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    ck_assert_int_ge(size, 0);
    rewind(f);
    void *buf = malloc((size_t)size + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *len = (size_t)size;
    return buf;
}

void zt_spit(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

int64_t zt_file_size(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    return (int64_t)st.st_size;
}

void zt_patch(const char *path, uint64_t off, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY);
    ck_assert_msg(fd >= 0, "cannot open %s", path);
    ck_assert_int_eq(pwrite(fd, buf, len, (off_t)off), (ssize_t)len);
    close(fd);
}

uint32_t zt_le32(const void *p)
{
    const uint8_t *b = p;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

uint64_t zt_le64(const void *p)
{
    return zt_le32(p) | (uint64_t)zt_le32((const uint8_t *)p + 4) << 32;
}

zt_loc zt_loc_read(const char *dir, uint64_t seg, uint64_t entry)
{
    char name[64];
    snprintf(name, sizeof name, "%llu.loc", (unsigned long long)seg);
    char *path = zt_join(dir, name);
    int fd = open(path, O_RDONLY);
    ck_assert_msg(fd >= 0, "cannot open %s", path);
    uint8_t raw[16];
    ck_assert_int_eq(pread(fd, raw, 16, (off_t)(entry * 16)), 16);
    close(fd);
    free(path);
    return (zt_loc){.offset = zt_le32(raw), .phys = zt_le32(raw + 4),
                    .logic = zt_le32(raw + 8), .chunk = zt_le32(raw + 12)};
}

void zt_loc_where(uint64_t i, uint64_t seg_entries, uint64_t *seg, uint64_t *entry)
{
    *seg = i / seg_entries;
    *entry = i % seg_entries;
}

zt_meta zt_meta_read(const char *dir)
{
    char *path = zt_join(dir, "meta.zr");
    size_t len;
    uint8_t *raw = zt_slurp(path, &len);
    ck_assert_uint_eq(len, 32);
    zt_meta m = {.length = zt_le64(raw), .tail_chunk = zt_le32(raw + 8),
                 .tail_offset = zt_le32(raw + 12), .codec = raw[16]};
    free(raw);
    free(path);
    return m;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void zt_meta_write(const char *dir, zt_meta m)
{
    uint8_t raw[32] = {0};
    put32(raw, (uint32_t)m.length);
    put32(raw + 4, (uint32_t)(m.length >> 32));
    put32(raw + 8, m.tail_chunk);
    put32(raw + 12, m.tail_offset);
    raw[16] = m.codec;
    char *path = zt_join(dir, "meta.zr");
    zt_patch(path, 0, raw, sizeof raw);
    free(path);
}

void zt_loc_write(const char *dir, uint64_t seg, uint64_t entry, zt_loc l)
{
    char name[64];
    snprintf(name, sizeof name, "%llu.loc", (unsigned long long)seg);
    char *path = zt_join(dir, name);
    uint8_t raw[16];
    put32(raw, l.offset);
    put32(raw + 4, l.phys);
    put32(raw + 8, l.logic);
    put32(raw + 12, l.chunk);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    ck_assert_msg(fd >= 0, "cannot open %s", path);
    ck_assert_int_eq(pwrite(fd, raw, 16, (off_t)(entry * 16)), 16);
    close(fd);
    free(path);
}

void zt_resize(const char *path, uint64_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    ck_assert_msg(fd >= 0, "cannot open %s", path);
    ck_assert_msg(ftruncate(fd, (off_t)size) == 0, "cannot resize %s", path);
    close(fd);
}

void *zt_snapshot(const char *dir, size_t *len)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    ck_assert_int_ge(n, 0);
    uint8_t *buf = NULL;
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        char *path = zt_join(dir, names[i]->d_name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            size_t flen;
            uint8_t *bytes = zt_slurp(path, &flen);
            size_t nlen = strlen(names[i]->d_name) + 1;
            buf = realloc(buf, used + nlen + sizeof flen + flen);
            ck_assert_ptr_nonnull(buf);
            memcpy(buf + used, names[i]->d_name, nlen);
            memcpy(buf + used + nlen, &flen, sizeof flen);
            memcpy(buf + used + nlen + sizeof flen, bytes, flen);
            used += nlen + sizeof flen + flen;
            free(bytes);
        }
        free(path);
        free(names[i]);
    }
    free(names);
    *len = used;
    return buf;
}

void zt_assert_unchanged(const char *dir, void *snap, size_t len)
{
    size_t now_len;
    void *now = zt_snapshot(dir, &now_len);
    bool same = now_len == len && (len == 0 || memcmp(now, snap, len) == 0);
    free(now);
    free(snap);
    ck_assert_msg(same, "the files of %s changed", dir);
}

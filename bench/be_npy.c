/*
 * be_npy.c: the NPY file format and the npy-mmap-raw row.
 *
 * npy-mmap-raw is what a NumPy user gets from np.save followed by
 * np.load(mmap_mode='r'), with the Python layer taken away: one .npy file
 * holding every Dense record as one array (version 1.0 header, C order),
 * mapped read-only, and a gather that copies each requested row out of
 * the mapping with memcpy. That is the fastest a memory-mapped array can
 * be gathered from, so it is the row zrecord-raw has to beat on Dense
 * workloads. It runs with one thread (what NumPy's fancy indexing does)
 * and with all threads (the batch cut into contiguous blocks, as the
 * memcpy limit does), so the table shows both what a user gets and what
 * a mapping allows. Ragged workloads have no single-array form and no
 * row here.
 *
 * The header writer and reader are shared with the per-record file rows,
 * which store a Ragged record as a small .npy file of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench.h"

static const char NPY_MAGIC[] = "\x93NUMPY";

size_t npy_header(char *buf, const char *dtype, const uint64_t *shape, uint32_t ndim)
{
    char dims[160] = "";
    size_t at = 0;
    for (uint32_t d = 0; d < ndim; d++)
        at += (size_t)snprintf(dims + at, sizeof dims - at, "%llu%s",
                               (unsigned long long)shape[d], ndim == 1 ? "," : d + 1 < ndim ? ", " : "");
    char dict[NPY_HEADER_MAX];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                       dtype, dims);
    /* Magic (6), version (2), header length (2), the dictionary, spaces,
     * and a newline: a multiple of 64 bytes in all. */
    size_t total = (10 + (size_t)len + 1 + 63) & ~(size_t)63;
    if (total > NPY_HEADER_MAX)
        return 0;
    size_t hlen = total - 10;
    memcpy(buf, NPY_MAGIC, 6);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)len);
    memset(buf + 10 + len, ' ', total - 10 - (size_t)len - 1);
    buf[total - 1] = '\n';
    return total;
}

size_t npy_parse(const uint8_t *p, size_t len, const char *dtype, uint64_t *shape,
                 uint32_t maxdim, uint32_t *ndim)
{
    if (len < 10 || memcmp(p, NPY_MAGIC, 6) != 0 || p[6] != 1)
        return 0;
    size_t total = 10 + ((size_t)p[8] | (size_t)p[9] << 8);
    if (total > len || total > NPY_HEADER_MAX)
        return 0;
    char h[NPY_HEADER_MAX + 1];
    memcpy(h, p + 10, total - 10);
    h[total - 10] = 0;
    char want[64];
    snprintf(want, sizeof want, "'descr': '%s'", dtype);
    if (!strstr(h, want) || !strstr(h, "'fortran_order': False"))
        return 0;
    const char *s = strstr(h, "'shape': (");
    if (!s)
        return 0;
    s += strlen("'shape': (");
    uint32_t n = 0;
    while (*s && *s != ')') {
        char *e;
        unsigned long long v = strtoull(s, &e, 10);
        if (e == s || n == maxdim)
            return 0;
        shape[n++] = v;
        s = e;
        while (*s == ',' || *s == ' ')
            s++;
    }
    if (*s != ')')
        return 0;
    *ndim = n;
    return total;
}

/* ---- npy-mmap-raw --------------------------------------------------- */

struct npymap {
    const struct workload *w;
    int threads;
    struct team *team;
    const uint8_t *map;  /* the whole file */
    size_t maplen;
    const uint8_t *rows; /* the array's first byte */
    uint8_t *buf;
    size_t cut[1025];
    const uint64_t *idx; /* the current call */
};

static char *npy_path(const char *dir)
{
    size_t n = strlen(dir) + 16;
    char *p = bench_xmalloc(n);
    snprintf(p, n, "%s/data.npy", dir);
    return p;
}

static int write_all(int fd, const uint8_t *p, uint64_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n > (1u << 30) ? (1u << 30) : (size_t)n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (uint64_t)k;
    }
    return 0;
}

/* np.save: the header, then every record back to back. */
static int npymap_write(struct backend *b, const struct workload *w)
{
    uint64_t shape[1 + BENCH_MAX_NDIM] = {w->n};
    memcpy(shape + 1, w->item_shape, w->ndim * sizeof *shape);
    char hdr[NPY_HEADER_MAX];
    size_t hlen = npy_header(hdr, w->dtype, shape, 1 + w->ndim);
    char *path = npy_path(b->dir);
    int rc = -1, fd = -1;
    if (hlen == 0 || (mkdir(b->dir, 0700) != 0 && errno != EEXIST))
        goto out;
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write_all(fd, (const uint8_t *)hdr, hlen) != 0 ||
        write_all(fd, w->data, w->logical) != 0)
        goto out;
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "zrbench: %s: %s\n", path, strerror(errno));
    if (fd >= 0 && close(fd) != 0)
        rc = -1;
    free(path);
    return rc;
}

/* np.load(mmap_mode='r'): map the file read-only and find the rows after
 * the header, checking that the header describes this workload. */
static int npymap_prepare(struct backend *b, const struct workload *w)
{
    struct npymap *m = b->state;
    char *path = npy_path(b->dir);
    int rc = -1;
    errno = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        goto out;
    m->maplen = (size_t)st.st_size;
    void *p = mmap(NULL, m->maplen, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        goto out;
    m->map = p;
    uint64_t shape[1 + BENCH_MAX_NDIM];
    uint32_t ndim = 0;
    size_t hlen = npy_parse(m->map, m->maplen, w->dtype, shape, 1 + BENCH_MAX_NDIM, &ndim);
    if (hlen == 0 || ndim != 1 + w->ndim || shape[0] != w->n ||
        m->maplen - hlen != w->logical) {
        fprintf(stderr, "zrbench: %s: not the expected array\n", path);
        errno = 0;
        goto out;
    }
    m->rows = m->map + hlen;
    m->w = w;
    m->buf = bench_batch_alloc(w->batch * w->width);
    rc = 0;
out:
    if (rc != 0 && errno)
        fprintf(stderr, "zrbench: %s: %s\n", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    free(path);
    return rc;
}

static void npymap_shard(void *arg, size_t p)
{
    struct npymap *m = arg;
    uint64_t width = m->w->width;
    for (size_t k = m->cut[p]; k < m->cut[p + 1]; k++)
        memcpy(m->buf + k * width, m->rows + m->idx[k] * width, width);
}

static int npymap_gather(struct backend *b, const uint64_t *idx, size_t n, struct batch_out *o)
{
    struct npymap *m = b->state;
    size_t parts = bench_block_count(m->threads, n, n * m->w->width);
    for (size_t p = 0; p <= parts; p++)
        m->cut[p] = n * p / parts;
    m->idx = idx;
    o->buf = m->buf;
    team_run(m->team, parts, npymap_shard, m);
    return 0;
}

static uint64_t npymap_footprint(struct backend *b) { return dir_allocated(b->dir); }

static void npymap_release(struct backend *b)
{
    struct npymap *m = b->state;
    if (!m)
        return;
    if (m->map)
        munmap((void *)m->map, m->maplen);
    free(m->buf);
    free(m);
    b->state = NULL;
}

static const struct backend_ops npymap_ops = {
    .write = npymap_write,
    .prepare = npymap_prepare,
    .gather = npymap_gather,
    .footprint = npymap_footprint,
    .release = npymap_release,
};

int be_npy_init(struct backend *b, enum backend_kind kind)
{
    (void)kind;
    struct npymap *m = calloc(1, sizeof *m);
    if (!m)
        return -1;
    m->threads = b->threads;
    m->team = team_get(m->threads);
    b->name = "npy-mmap-raw";
    b->ops = &npymap_ops;
    b->state = m;
    snprintf(b->note, sizeof b->note,
             "one NPY 1.0 file mapped read-only, each record copied out with memcpy%s",
             b->threads == 1 ? " (one thread, as NumPy's fancy indexing)"
                             : " (the batch cut into one block per thread)");
    return 0;
}

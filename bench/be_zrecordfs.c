/*
 * be_zrecordfs.c: the zrecordfs rows, on a real mount of the built
 * fs/zrecordfs over the store that the zrecord-raw or zrecord-zstd row of
 * the same run wrote (so they write nothing themselves and their disk is
 * that store's).
 *
 * zrecordfs-raw and zrecordfs-zstd read the per-record files with the
 * files-raw loop (open, read, close per record on one thread), in the
 * default read-only mode: Dense records as plain files, Ragged records
 * with -o npy so that each file carries its shape. zrecordfs-gather-raw
 * and zrecordfs-gather-zstd use the .gather control file instead, the way
 * zrecordfs(1) tells a training loop to: one descriptor held open with
 * O_DIRECT, and per batch one write of the index list as text and one
 * read(2) into a page-aligned buffer as large as the largest planned
 * batch, which returns the batch's length. The kernel sends the daemon
 * all of the read's requests at once; the daemon gathers the batch with
 * one library call on the library's pool (all CPUs), so those rows state
 * the library's thread count.
 *
 * The driver is the fs/zrecordfs next to this program's build folder
 * (found through /proc/self/exe), or the one ZRBENCH_ZRECORDFS names.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <loaderx/loaderx.h>

#include "bench/bench.h"

struct zrfs {
    bool gather;
    char *mnt;
    bool is_mounted;
    const struct workload *w;
    struct perfile pf;
    int fd;          /* .gather */
    char *text;      /* the index list of one batch */
    uint8_t *buf;
    uint64_t cap;
};

static int driver_path(char *out, size_t n)
{
    const char *env = getenv("ZRBENCH_ZRECORDFS");
    if (env) {
        snprintf(out, n, "%s", env);
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0)
        return -1;
    exe[k] = 0;
    /* .../bench/zrbench -> .../fs/zrecordfs */
    char *bench_dir = dirname(exe);
    char *top = dirname(bench_dir);
    snprintf(out, n, "%s/fs/zrecordfs", top);
    return access(out, X_OK);
}

static int zrfs_prepare(struct backend *b, const struct workload *w)
{
    struct zrfs *z = b->state;
    char driver[PATH_MAX];
    if (!b->peer_dir || driver_path(driver, sizeof driver) != 0) {
        fprintf(stderr, "zrbench: %s: no store or no fs/zrecordfs (make bench builds it)\n",
                b->name);
        return -1;
    }
    const char *plain[] = {driver, b->peer_dir, z->mnt, NULL};
    const char *npy[] = {driver, "-o", "npy", b->peer_dir, z->mnt, NULL};
    if (bench_mount(w->ragged && !z->gather ? npy : plain, z->mnt) != 0)
        return -1;
    z->is_mounted = true;
    z->w = w;
    if (!z->gather)
        return perfile_open(&z->pf, w, z->mnt);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/.gather", z->mnt);
    z->fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
    if (z->fd < 0) {
        fprintf(stderr, "zrbench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    z->text = bench_xmalloc(w->batch * 24);
    z->cap = w->ragged ? bench_max_batch_bytes(w, wl_prefix(w)) : w->batch * w->width;
    /* Whole pages for O_DIRECT, and more than any planned batch. */
    z->cap = (z->cap + 4096) & ~(size_t)4095;
    z->buf = bench_batch_alloc(z->cap);
    return 0;
}

/* Decimal digits of v, written backwards from end; returns the start. */
static char *put_u64(char *end, uint64_t v)
{
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return end;
}

static int gather_file(struct zrfs *z, const uint64_t *idx, size_t n, struct batch_out *o)
{
    const struct workload *w = z->w;
    size_t len = 0;
    for (size_t k = 0; k < n; k++) {
        char tmp[24], *s = put_u64(tmp + sizeof tmp, idx[k]);
        size_t d = (size_t)(tmp + sizeof tmp - s);
        memcpy(z->text + len, s, d);
        len += d;
        z->text[len++] = k + 1 < n ? ' ' : '\n';
    }
    if (write(z->fd, z->text, len) != (ssize_t)len) {
        fprintf(stderr, "zrbench: .gather write: %s\n", strerror(errno));
        return -1;
    }
    /* One read of the whole batch: the buffer is larger than any planned
     * batch, so a read that fills it is an answer longer than any. */
    ssize_t nread;
    do
        nread = read(z->fd, z->buf, z->cap);
    while (nread < 0 && errno == EINTR);
    if (nread < 0) {
        fprintf(stderr, "zrbench: .gather read: %s\n", strerror(errno));
        return -1;
    }
    uint64_t got = (uint64_t)nread;
    if (got == z->cap)
        return -1;
    o->buf = z->buf;
    if (!w->ragged)
        return got == n * w->width ? 0 : -1;
    uint64_t at = 0;
    for (size_t k = 0; k < n; k++) {
        uint64_t pre = wl_prefix(w), count = 1, dim;
        if (at + pre > got)
            return -1;
        for (uint32_t d = 0; d < w->ndim; d++) {
            memcpy(&dim, z->buf + at + 8 + 8 * d, 8);
            count *= dim;
        }
        uint64_t len_k = pre + count * w->itemsize;
        if (at + len_k > got || bench_unframe(w, z->buf + at, len_k, o, k) != 0)
            return -1;
        at += (len_k + 7) & ~(uint64_t)7;
    }
    return at == got ? 0 : -1;
}

static int zrfs_gather(struct backend *b, const uint64_t *idx, size_t n, struct batch_out *o)
{
    struct zrfs *z = b->state;
    return z->gather ? gather_file(z, idx, n, o) : perfile_gather(&z->pf, idx, n, o);
}

static uint64_t zrfs_footprint(struct backend *b)
{
    return b->peer_dir ? dir_allocated(b->peer_dir) : 0;
}

static void zrfs_release(struct backend *b)
{
    struct zrfs *z = b->state;
    if (!z)
        return;
    perfile_close(&z->pf);
    if (z->fd > 0)
        close(z->fd);
    if (z->is_mounted)
        bench_unmount(z->mnt);
    free(z->text);
    free(z->buf);
    free(z->mnt);
    free(z);
    b->state = NULL;
}

/* The store is the peer row's: nothing to write. */
static int zrfs_write(struct backend *b, const struct workload *w)
{
    (void)w;
    return mkdir(b->dir, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

static const struct backend_ops zrfs_ops = {
    .write = zrfs_write,
    .prepare = zrfs_prepare,
    .gather = zrfs_gather,
    .footprint = zrfs_footprint,
    .release = zrfs_release,
};

int be_zrecordfs_init(struct backend *b, enum backend_kind kind)
{
    struct zrfs *z = calloc(1, sizeof *z);
    if (!z)
        return -1;
    z->gather = kind == BK_ZRECORDFS_GATHER_RAW || kind == BK_ZRECORDFS_GATHER_ZSTD;
    bool zstd = kind == BK_ZRECORDFS_ZSTD || kind == BK_ZRECORDFS_GATHER_ZSTD;
    size_t n = strlen(b->dir) + 8;
    z->mnt = bench_xmalloc(n);
    snprintf(z->mnt, n, "%s/mnt", b->dir);
    b->name = z->gather ? (zstd ? "zrecordfs-gather-zstd" : "zrecordfs-gather-raw")
                        : (zstd ? "zrecordfs-zstd" : "zrecordfs-raw");
    b->threads = z->gather ? zr_threads() : 1;
    b->no_write = true;
    b->write_once = true;
    b->ops = &zrfs_ops;
    b->state = z;
    if (z->gather)
        snprintf(b->note, sizeof b->note,
                 "zrecordfs mount of the %s store; per batch one write of the index list "
                 "to .gather and one O_DIRECT read of the batch; the daemon gathers on the library's pool",
                 zstd ? "zrecord-zstd" : "zrecord-raw");
    else
        snprintf(b->note, sizeof b->note,
                 "zrecordfs mount (read-only, default mode; Ragged with -o npy) of the %s store, "
                 "open/read/close per record file on one thread",
                 zstd ? "zrecord-zstd" : "zrecord-raw");
    return 0;
}

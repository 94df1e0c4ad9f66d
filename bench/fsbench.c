/*
 * fsbench.c: the measuring half of the file system benchmark; the driver
 * bench/fsbench.sh builds the data, mounts the file systems and calls it.
 * Each subcommand does one thing to one folder of record files named
 * 0 .. N-1 (plus an optional suffix) and prints one line:
 *
 *   read [-j T] DIR N      read every file whole (T readers, interleaved)
 *   drop PATH...           drop files' pages from the kernel page cache
 *   sums DIR N             print one checksum line per file, for validation
 *   gather [-s] FILE N B K S  K batches of B random indices through a .gather
 *   libgather STORE N B K S  the same batches through zr_gather_dense
 *   direct FILE BYTES K    K reads of the first BYTES of FILE, each one
 *                          O_DIRECT read(2) into one buffer (against
 *                          fuse_ceiling: what FUSE itself allows .gather)
 *
 * The timed loops do nothing but the system calls a plain reader makes
 * (open, read into one buffer until end of file, close), so that the rates
 * are those of the file system, not of this program. Both gathers draw the
 * same index lists from the seed S and print a checksum of the bytes of
 * their first, untimed batches, so the driver can check that they agree
 * before it trusts the rates.
 *
 * gather reads as a training job would: .gather opened with O_DIRECT and
 * each batch taken by one read(2) into a page-aligned buffer of the
 * batch's size (the library's gather also fills one batch-sized buffer),
 * so the kernel sends all the requests of a batch at once. With -s it
 * reads the old way: no O_DIRECT, 1 MiB reads until end of file, one
 * request after another.
 */
#include <errno.h>
#include <libgen.h>
#include <ftw.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/loaderx/loaderx.h"

#define BUF_BYTES (1u << 20)

/* Read buffers are page-aligned: a direct-I/O read (.gather) is cut into
 * FUSE requests of at most 256 pages of the reader's buffer, so a buffer
 * that starts mid-page turns each 1 MiB read into a 1 MiB - 16 byte request
 * and a 16-byte one. Any program that wants speed from .gather should do
 * the same (NumPy arrays are not page-aligned; mmap'd or valloc'd ones are). */
static char *read_buffer(void)
{
    void *p = NULL;
    return posix_memalign(&p, 4096, BUF_BYTES) == 0 ? p : NULL;
}
/* Gather batches checksummed (untimed) before the timed ones. */
#define VERIFY_BATCHES 4

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        h ^= p[k];
        h *= 1099511628211ull;
    }
    return h;
}

static const uint64_t fnv_seed = 14695981039346656037ull;

static void path_of(char *out, size_t cap, const char *dir, uint64_t i)
{
    snprintf(out, cap, "%s/%" PRIu64, dir, i);
}

/* Reads one file whole into buf; returns its length, or -1. When sum is
 * not NULL, folds the bytes into it. */
static long long read_file(const char *path, char *buf, uint64_t *sum)
{
    long long total = -1;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    total = 0;
    for (;;) {
        ssize_t got = read(fd, buf, BUF_BYTES);
        if (got < 0) {
            total = -1;
            break;
        }
        if (got == 0)
            break;
        if (sum)
            *sum = fnv1a(*sum, (const unsigned char *)buf, (size_t)got);
        total += got;
    }
    close(fd);
    return total;
}

struct reader {
    const char *dir;
    uint64_t n, first, step;
    long long bytes;
    int failed;
};

static void *reader_run(void *arg)
{
    struct reader *r = arg;
    char path[4096];
    char *buf = read_buffer();
    if (!buf) {
        r->failed = 1;
        return NULL;
    }
    for (uint64_t i = r->first; i < r->n; i += r->step) {
        path_of(path, sizeof path, r->dir, i);
        long long got = read_file(path, buf, NULL);
        if (got < 0) {
            fprintf(stderr, "fsbench: %s: %s\n", path, strerror(errno));
            r->failed = 1;
            break;
        }
        r->bytes += got;
    }
    free(buf);
    return NULL;
}

static int cmd_read(int argc, char **argv)
{
    unsigned threads = 1;
    int a = 0;
    if (argc >= 2 && strcmp(argv[0], "-j") == 0) {
        threads = (unsigned)strtoul(argv[1], NULL, 10);
        a = 2;
    }
    if (argc - a != 2 || threads == 0 || threads > 64)
        return 2;
    const char *dir = argv[a];
    uint64_t n = strtoull(argv[a + 1], NULL, 10);
    struct reader r[64];
    pthread_t tid[64];
    double t0 = now_s();
    for (unsigned k = 0; k < threads; k++) {
        r[k] = (struct reader){.dir = dir, .n = n, .first = k, .step = threads};
        if (pthread_create(&tid[k], NULL, reader_run, &r[k]) != 0)
            return 1;
    }
    long long bytes = 0;
    int failed = 0;
    for (unsigned k = 0; k < threads; k++) {
        pthread_join(tid[k], NULL);
        bytes += r[k].bytes;
        failed |= r[k].failed;
    }
    double dt = now_s() - t0;
    if (failed)
        return 1;
    printf("files %" PRIu64 " bytes %lld secs %.4f files_per_s %.0f mib_per_s %.1f\n", n,
           bytes, dt, (double)n / dt, (double)bytes / dt / 1048576.0);
    return 0;
}

/* posix_fadvise(DONTNEED) on every regular file under the given paths:
 * the kernel drops their clean pages, so the next read goes to the disk.
 * The driver drops the files behind a mount (the plain files, the store's
 * chunks, the squashfs image) and mounts afresh, so that a first read
 * through FUSE starts with nothing cached anywhere. */
static int drop_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (type != FTW_F)
        return 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        fprintf(stderr, "fsbench: %s: %s\n", path, strerror(errno));
        return 1;
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    return 0;
}

static int cmd_drop(int argc, char **argv)
{
    for (int k = 0; k < argc; k++)
        if (nftw(argv[k], drop_one, 64, FTW_PHYS) != 0)
            return 1;
    return 0;
}

static int cmd_sums(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    uint64_t n = strtoull(argv[1], NULL, 10);
    char path[4096];
    char *buf = read_buffer();
    if (!buf)
        return 1;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t sum = fnv_seed;
        path_of(path, sizeof path, argv[0], i);
        long long got = read_file(path, buf, &sum);
        if (got < 0) {
            fprintf(stderr, "fsbench: %s: %s\n", path, strerror(errno));
            free(buf);
            return 1;
        }
        printf("%" PRIu64 " %lld %016" PRIx64 "\n", i, got, sum);
    }
    free(buf);
    return 0;
}

/* xorshift64*: the same index lists for both gathers, given the seed. */
static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

struct gather_args {
    const char *target;
    uint64_t n, batch, iters, seed;
};

static int parse_gather(int argc, char **argv, struct gather_args *g)
{
    if (argc != 5)
        return -1;
    g->target = argv[0];
    g->n = strtoull(argv[1], NULL, 10);
    g->batch = strtoull(argv[2], NULL, 10);
    g->iters = strtoull(argv[3], NULL, 10);
    g->seed = strtoull(argv[4], NULL, 10) | 1;
    return g->n && g->batch && g->iters ? 0 : -1;
}

static void report_gather(const struct gather_args *g, long long bytes, double dt, uint64_t sum)
{
    double recs = (double)(g->batch * g->iters);
    printf("records %.0f bytes %lld secs %.4f recs_per_s %.0f mib_per_s %.1f sum %016" PRIx64
           "\n",
           recs, bytes, dt, recs / dt, (double)bytes / dt / 1048576.0, sum);
}

/* The width of a record of the store whose .gather is at target: the
 * size of record 0 beside it. */
static long long record_width(const char *target)
{
    char dir[4096], path[4096 + 8];
    struct stat st;
    snprintf(dir, sizeof dir, "%s", target);
    snprintf(path, sizeof path, "%s/0", dirname(dir));
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* One descriptor for the whole run, as a loader would keep it: each batch
 * is one write of the index list, then one read of the whole batch (or,
 * with -s, reads until end of file). */
static int cmd_gather(int argc, char **argv)
{
    bool stream = argc > 0 && strcmp(argv[0], "-s") == 0;
    struct gather_args g;
    if (parse_gather(argc - stream, argv + stream, &g) != 0)
        return 2;
    int rc = 1, fd = -1;
    char *text = malloc(g.batch * 24 + 1);
    char *buf = NULL;
    uint64_t sum = fnv_seed, seed = g.seed;
    long long bytes = 0, width = record_width(g.target);
    size_t cap = stream ? BUF_BYTES : (size_t)(g.batch * (uint64_t)(width > 0 ? width : 0));
    if (width <= 0 || cap == 0) {
        fprintf(stderr, "fsbench: %s: no record 0 beside it to size a batch\n", g.target);
        goto out;
    }
    void *p = NULL;
    if (posix_memalign(&p, 4096, cap) != 0)
        goto out;
    buf = p;
    fd = open(g.target, O_RDWR | (stream ? 0 : O_DIRECT));
    if (!text || fd < 0) {
        fprintf(stderr, "fsbench: %s: %s\n", g.target, strerror(errno));
        goto out;
    }
    /* The first VERIFY_BATCHES batches are checksummed and not timed; the
     * timed batches that follow touch every byte but sum none of them. */
    double t0 = 0;
    for (uint64_t it = 0; it < VERIFY_BATCHES + g.iters; it++) {
        if (it == VERIFY_BATCHES) {
            t0 = now_s();
            bytes = 0;
        }
        size_t len = 0;
        for (uint64_t k = 0; k < g.batch; k++)
            len += (size_t)sprintf(text + len, "%" PRIu64 " ", next_rand(&seed) % g.n);
        if (write(fd, text, len) != (ssize_t)len) {
            fprintf(stderr, "fsbench: write %s: %s\n", g.target, strerror(errno));
            goto out;
        }
        for (;;) {
            ssize_t got = read(fd, buf, cap);
            if (got < 0) {
                fprintf(stderr, "fsbench: read %s: %s\n", g.target, strerror(errno));
                goto out;
            }
            if (!stream && got != (ssize_t)cap) {
                fprintf(stderr, "fsbench: read %s: %zd bytes of a %zu-byte batch\n", g.target,
                        got, cap);
                goto out;
            }
            if (got == 0)
                break;
            if (it < VERIFY_BATCHES)
                sum = fnv1a(sum, (const unsigned char *)buf, (size_t)got);
            bytes += got;
            if (!stream)
                break;
        }
    }
    report_gather(&g, bytes, now_s() - t0, sum);
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    free(text);
    free(buf);
    return rc;
}

static int cmd_libgather(int argc, char **argv)
{
    struct gather_args g;
    if (parse_gather(argc, argv, &g) != 0)
        return 2;
    int rc = 1;
    zr_store *s = NULL;
    uint64_t *idx = malloc(g.batch * sizeof *idx);
    char *buf = NULL;
    uint64_t sum = fnv_seed, seed = g.seed;
    if (!idx || zr_open(&s, g.target, ZR_RDONLY) != 0) {
        fprintf(stderr, "fsbench: %s: %s\n", g.target, zr_last_error());
        goto out;
    }
    uint64_t width = zr_record_width(s);
    if (!(buf = malloc(g.batch * width)))
        goto out;
    double t0 = 0;
    for (uint64_t it = 0; it < VERIFY_BATCHES + g.iters; it++) {
        if (it == VERIFY_BATCHES)
            t0 = now_s();
        for (uint64_t k = 0; k < g.batch; k++)
            idx[k] = next_rand(&seed) % g.n;
        if (zr_gather_dense(s, idx, g.batch, buf) != 0) {
            fprintf(stderr, "fsbench: gather: %s\n", zr_last_error());
            goto out;
        }
        if (it < VERIFY_BATCHES)
            sum = fnv1a(sum, (const unsigned char *)buf, g.batch * width);
    }
    report_gather(&g, (long long)(g.batch * g.iters * width), now_s() - t0, sum);
    rc = 0;
out:
    zr_close(s);
    free(idx);
    free(buf);
    return rc;
}

/* The read pattern of gather without anything to gather: how fast the
 * kernel and a FUSE server move one large O_DIRECT read. */
static int cmd_direct(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int rc = 1;
    size_t n = (size_t)strtoull(argv[1], NULL, 10);
    uint64_t iters = strtoull(argv[2], NULL, 10);
    void *p = NULL;
    int fd = open(argv[0], O_RDONLY | O_DIRECT);
    if (n == 0 || iters == 0 || fd < 0 || posix_memalign(&p, 4096, n) != 0) {
        fprintf(stderr, "fsbench: %s: %s\n", argv[0], strerror(errno));
        goto out;
    }
    double t0 = 0;
    for (uint64_t it = 0; it <= iters; it++) {
        if (it == 1)
            t0 = now_s(); /* the first read faults the buffer in */
        ssize_t got = pread(fd, p, n, 0);
        if (got != (ssize_t)n) {
            fprintf(stderr, "fsbench: read %s: %zd of %zu bytes: %s\n", argv[0], got, n,
                    got < 0 ? strerror(errno) : "short");
            goto out;
        }
    }
    double dt = now_s() - t0;
    printf("reads %" PRIu64 " bytes %llu secs %.4f mib_per_s %.1f\n", iters,
           (unsigned long long)(n * iters), dt, (double)(n * iters) / dt / 1048576.0);
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    free(p);
    return rc;
}

int main(int argc, char **argv)
{
    int rc = 2;
    if (argc >= 2) {
        if (strcmp(argv[1], "read") == 0)
            rc = cmd_read(argc - 2, argv + 2);
        else if (strcmp(argv[1], "drop") == 0)
            rc = cmd_drop(argc - 2, argv + 2);
        else if (strcmp(argv[1], "sums") == 0)
            rc = cmd_sums(argc - 2, argv + 2);
        else if (strcmp(argv[1], "gather") == 0)
            rc = cmd_gather(argc - 2, argv + 2);
        else if (strcmp(argv[1], "libgather") == 0)
            rc = cmd_libgather(argc - 2, argv + 2);
        else if (strcmp(argv[1], "direct") == 0)
            rc = cmd_direct(argc - 2, argv + 2);
    }
    if (rc == 2)
        fprintf(stderr, "usage: fsbench read [-j T] DIR N | drop PATH... | sums DIR N |\n"
                        "       gather [-s] FILE N BATCH ITERS SEED | "
                        "libgather STORE N BATCH ITERS SEED |\n"
                        "       direct FILE BYTES ITERS\n");
    return rc;
}

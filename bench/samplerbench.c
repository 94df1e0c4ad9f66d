/*
 * samplerbench: the cost of the sampler and of the prefetching loader.
 *
 * Two measurements, printed as plain "key value" lines that
 * bench/samplerbench.sh turns into doc/loader-benchmarks.md:
 *
 *  - sampler: nanoseconds per index of zr_sampler_batch for each mode at
 *    batch 256, 1024 and 8192 over an index space of 1,000,000. Each
 *    repetition times enough steps to draw several million indices, and the
 *    median of the repetitions is reported, because the machine this runs
 *    on is shared and a single timing says more about the neighbours than
 *    about the code.
 *  - loader: batches per second of a loader with no transform over a Dense
 *    uint8 3x224x224 store (raw and zstd), batch 256, depth 2 and 4,
 *    against the plainest possible loop doing the same work on the calling
 *    thread (zr_sampler_batch, then zr_gather_dense into one reused
 *    buffer, and into two in turn). The loader's job is to cost nothing over that loop, so the
 *    ratio between the two is the number that matters. The process's peak
 *    resident size is reported after each loader so it can be held against
 *    the batch buffers the loader keeps in flight.
 *
 * The stores are written by this program into a fresh folder under $TMPDIR
 * (or /tmp) and removed at the end.
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "lib/loaderx/loaderx.h"

#define SPACE 1000000u
#define REPS 7
#define RECORDS 1000u
#define LOADER_BATCH 256u
#define LOADER_REP_NS 500e6 /* each loader repetition runs for at least this long */
#define LOADER_REPS 5

static const uint64_t item_shape[3] = {3, 224, 224};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* The process's current resident memory in KiB from /proc/self/status:
 * anonymous (heap, buffers) and file-backed (mapped store chunks, which the
 * kernel may drop at any time and which ru_maxrss counts as well). */
static void current_rss_kib(long *anon, long *file)
{
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    *anon = *file = -1;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "RssAnon:", 8) == 0)
            *anon = strtol(line + 8, NULL, 10);
        else if (strncmp(line, "RssFile:", 8) == 0)
            *file = strtol(line + 8, NULL, 10);
    }
    if (f)
        fclose(f);
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "samplerbench: %s: %s (%s)\n", what, zr_strerror(rc), zr_last_error());
    return 1;
}

/* Times one mode at one batch size. The step numbers keep growing across
 * repetitions so that no two repetitions draw the same batches. */
static int bench_sampler(int mode, const char *name, uint64_t batch)
{
    zr_sampler *sm;
    int rc = zr_sampler_create(&sm, SPACE, batch, mode, 0, 0, 1);
    if (rc != 0)
        return fail("zr_sampler_create", rc);
    uint64_t *out = malloc(batch * sizeof *out);
    if (!out) {
        zr_sampler_free(sm);
        return fail("malloc", ZR_ENOMEM);
    }
    uint64_t steps = (4u << 20) / batch;
    uint64_t step = 0, sink = 0;
    double ns[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = now_ns();
        for (uint64_t k = 0; k < steps; k++, step++) {
            zr_sampler_batch(sm, step, out);
            sink += out[batch - 1];
        }
        ns[r] = (now_ns() - t0) / (double)(steps * batch);
    }
    printf("sampler %s %llu %.3f\n", name, (unsigned long long)batch, median(ns, REPS));
    /* The sink keeps the compiler from dropping the calls; it is printed
     * to stderr so the report does not depend on it. */
    fprintf(stderr, "sink %llu\n", (unsigned long long)sink);
    free(out);
    zr_sampler_free(sm);
    return 0;
}

/* Smooth synthetic images: a few slow gradients per channel with a little
 * noise, so zstd finds real but imperfect redundancy, as in photographs. */
static void fill_records(uint8_t *buf, uint64_t first, uint64_t n)
{
    uint32_t noise = 2463534242u ^ (uint32_t)first;
    for (uint64_t r = 0; r < n; r++) {
        uint8_t *p = buf + r * 3 * 224 * 224;
        uint32_t rec = (uint32_t)(first + r);
        for (uint32_t c = 0; c < 3; c++)
            for (uint32_t y = 0; y < 224; y++)
                for (uint32_t x = 0; x < 224; x++) {
                    noise ^= noise << 13;
                    noise ^= noise >> 17;
                    noise ^= noise << 5;
                    uint32_t v = (x * (c + 1) + y * 2 + rec * 37 + c * 80) / 3 + (noise & 7);
                    *p++ = (uint8_t)v;
                }
    }
}

static int write_store(const char *path, int codec)
{
    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = codec};
    zr_store *s = NULL;
    const uint64_t chunk = 50;
    uint8_t *buf = malloc(chunk * 3 * 224 * 224);
    int rc = buf ? zr_dense_create(&s, path, "|u1", item_shape, 3, &opts) : ZR_ENOMEM;
    for (uint64_t first = 0; rc == 0 && first < RECORDS; first += chunk) {
        fill_records(buf, first, chunk);
        rc = zr_append_dense(s, "|u1", item_shape, 3, buf, chunk, NULL);
    }
    if (rc == 0)
        rc = zr_sync(s);
    zr_close(s);
    free(buf);
    return rc == 0 ? 0 : fail("writing the store", rc);
}

/* The baseline: what a caller would write without the loader. */
struct plain {
    zr_store *s;
    zr_sampler *sm;
    uint64_t step;
};

/* One repetition of the plain loop gathering into nbuf buffers in turn:
 * batches per second. The buffers are made for it and freed after it, so
 * that they are not counted in the loaders' resident sizes; one untimed
 * pass over them first faults them in. */
static int plain_rep(struct plain *p, unsigned nbuf, double *bps)
{
    const size_t bytes = LOADER_BATCH * (size_t)zr_record_width(p->s);
    uint64_t *idx = malloc(LOADER_BATCH * sizeof *idx);
    char *dst = malloc(nbuf * bytes);
    int rc = idx && dst ? 0 : ZR_ENOMEM;
    double t0 = 0, t = 0;
    unsigned k = 0;
    for (int warm = 1; rc == 0 && warm >= 0; warm--) {
        t0 = t = now_ns();
        for (k = 0; rc == 0 && (warm ? k < nbuf : t - t0 < LOADER_REP_NS);
             k++, p->step++, t = now_ns()) {
            rc = zr_sampler_batch(p->sm, p->step, idx);
            if (rc == 0)
                rc = zr_gather_dense(p->s, idx, LOADER_BATCH, dst + (k % nbuf) * bytes);
        }
    }
    free(idx);
    free(dst);
    *bps = k / ((t - t0) / 1e9);
    return rc == 0 ? 0 : fail("plain loop", rc);
}

/* One repetition of a fresh loader of this depth, after one untimed
 * repetition that fills its ring and faults its buffers in; anon and file
 * are raised to the resident sizes sampled while its workers still run. */
static int loader_rep(zr_store *s, unsigned depth, double *bps, long *anon, long *file)
{
    zr_loader_opts opts = {.size = sizeof(zr_loader_opts), .mode = ZR_IID, .batch = LOADER_BATCH,
                           .depth = depth};
    const char *names[1] = {"image"};
    zr_loader *ld = NULL;
    int rc = zr_loader_create(&ld, &s, names, 1, &opts);
    for (int r = -1; rc == 0 && r < 1; r++) {
        double t0 = now_ns(), t = t0;
        unsigned k = 0;
        for (; rc == 0 && t - t0 < LOADER_REP_NS; k++, t = now_ns()) {
            zr_batch *b = NULL;
            rc = zr_loader_next(ld, &b);
            zr_batch_release(b);
        }
        *bps = k / ((t - t0) / 1e9);
        long a, f;
        current_rss_kib(&a, &f);
        *anon = a > *anon ? a : *anon;
        *file = f > *file ? f : *file;
    }
    zr_loader_destroy(ld);
    return rc == 0 ? 0 : fail("loader", rc);
}

/* The plain loop (one buffer, and two in turn) and the loaders of depth 2
 * and 4, one repetition each per round, so that a slow spell of the shared
 * machine falls on all of them alike rather than on whichever ran then.
 * Peak RSS is taken in the first round, right after each one first ran.
 *
 * The plain loop with two buffers is what a caller needs to keep one batch
 * while it gathers the next, as the loader does: the loader's batches
 * rotate through at least two buffers. With one buffer, part of it is
 * still in the CPU's caches when the next gather writes it again. */
static int bench_loader_rounds(zr_store *s, const char *codec)
{
    static const unsigned depths[2] = {2, 4};
    struct plain p = {.s = s};
    double plain_bps[LOADER_REPS], plain2_bps[LOADER_REPS], ld_bps[2][LOADER_REPS], warm;
    long plain_rss = 0, ld_rss[2] = {0, 0}, anon[2] = {0, 0}, file[2] = {0, 0};
    int rc = zr_sampler_create(&p.sm, zr_len(s), LOADER_BATCH, ZR_IID, 0, 0, 1);
    if (rc != 0)
        return fail("zr_sampler_create", rc);
    /* Untimed: warms the page cache and the thread pool. */
    if (rc == 0)
        rc = plain_rep(&p, 1, &warm);
    for (int r = 0; rc == 0 && r < LOADER_REPS; r++) {
        rc = plain_rep(&p, 1, &plain_bps[r]);
        if (r == 0)
            plain_rss = peak_rss_kib();
        if (rc == 0)
            rc = plain_rep(&p, 2, &plain2_bps[r]);
        for (int d = 0; rc == 0 && d < 2; d++) {
            rc = loader_rep(s, depths[d], &ld_bps[d][r], &anon[d], &file[d]);
            if (r == 0)
                ld_rss[d] = peak_rss_kib();
        }
    }
    zr_sampler_free(p.sm);
    if (rc != 0)
        return rc;
    printf("plain %s %.3f %ld\n", codec, median(plain_bps, LOADER_REPS), plain_rss);
    printf("plain2 %s %.3f\n", codec, median(plain2_bps, LOADER_REPS));
    for (int d = 0; d < 2; d++)
        printf("loader %s %u %.3f %ld %ld %ld\n", codec, depths[d], median(ld_bps[d], LOADER_REPS),
               ld_rss[d], anon[d], file[d]);
    return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static int bench_loaders(void)
{
    const char *tmpdir = getenv("TMPDIR");
    char root[4096];
    snprintf(root, sizeof root, "%s/samplerbench.XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(root)) {
        fprintf(stderr, "samplerbench: mkdtemp %s: %s\n", root, strerror(errno));
        return 1;
    }
    static const struct {
        int codec;
        const char *name;
    } codecs[2] = {{ZR_CODEC_RAW, "raw"}, {ZR_CODEC_ZSTD, "zstd"}};
    int status = 0;
    for (int c = 0; status == 0 && c < 2; c++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", root, codecs[c].name);
        zr_store *s = NULL;
        status = write_store(path, codecs[c].codec);
        if (status == 0) {
            int rc = zr_open(&s, path, ZR_RDONLY);
            status = rc == 0 ? 0 : fail("zr_open", rc);
        }
        if (status == 0)
            printf("rss_written %s %ld\n", codecs[c].name, peak_rss_kib());
        if (status == 0)
            status = bench_loader_rounds(s, codecs[c].name);
        zr_close(s);
    }
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return status;
}

int main(int argc, char **argv)
{
    /* "sampler" or "loader" runs one half; no argument runs both. */
    const char *only = argc > 1 ? argv[1] : "";
    static const struct {
        int mode;
        const char *name;
    } modes[3] = {{ZR_SEQUENTIAL, "sequential"}, {ZR_IID, "iid"}, {ZR_CYCLIC, "cyclic"}};
    static const uint64_t batches[3] = {256, 1024, 8192};
    int status = 0;
    if (strcmp(only, "loader") != 0)
        for (int m = 0; status == 0 && m < 3; m++)
            for (int b = 0; status == 0 && b < 3; b++)
                status = bench_sampler(modes[m].mode, modes[m].name, batches[b]);
    if (status == 0 && strcmp(only, "sampler") != 0) {
        printf("rss_start %ld\n", peak_rss_kib());
        status = bench_loaders();
    }
    return status;
}

/*
 * coldio.c: what the cold-read benchmark needs from the system (see
 * cold.h). Everything here is measurement plumbing: the page cache is
 * dropped through /proc/sys/vm/drop_caches, the bytes the disk delivered
 * are the device's sectors read in /proc/diskstats (every reader's, so
 * other processes' reads count too) and, as a cross-check, the read_bytes
 * of the processes that made the reads (/proc/PID/io), and the device's
 * limit is fio's, run here on the store's own chunk files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/cold.h"

int cold_drop_caches(void)
{
    sync();
    int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "3\n", 2) != 2) {
        fprintf(stderr, "coldbench: cannot drop the page cache (/proc/sys/vm/drop_caches: %s); "
                        "run as root\n", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

int cold_cache_tables(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "coldbench: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    static char buf[1 << 20];
    int rc = 0, files = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".loc") != 0)
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC);
        ssize_t got = fd < 0 ? -1 : 1;
        while (got > 0)
            got = read(fd, buf, sizeof buf);
        if (got < 0) {
            fprintf(stderr, "coldbench: %s/%s: %s\n", dir, e->d_name, strerror(errno));
            rc = -1;
        }
        if (fd >= 0)
            close(fd);
        files++;
    }
    closedir(d);
    if (rc == 0 && files == 0) {
        fprintf(stderr, "coldbench: %s has no record table\n", dir);
        rc = -1;
    }
    return rc;
}

int cold_device_of(const char *dir, struct cold_device *d)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return -1;
    d->major = major(st.st_dev);
    d->minor = minor(st.st_dev);
    FILE *f = fopen("/proc/diskstats", "r");
    char line[512];
    int rc = -1;
    while (f && fgets(line, sizeof line, f)) {
        unsigned ma, mi;
        char name[64];
        if (sscanf(line, "%u %u %63s", &ma, &mi, name) == 3 && ma == d->major && mi == d->minor) {
            snprintf(d->name, sizeof d->name, "%s", name);
            rc = 0;
            break;
        }
    }
    if (f)
        fclose(f);
    if (rc != 0)
        fprintf(stderr, "coldbench: the device %u:%u of %s is not in /proc/diskstats\n", d->major,
                d->minor, dir);
    return rc;
}

uint64_t cold_device_read(const struct cold_device *d)
{
    FILE *f = fopen("/proc/diskstats", "r");
    char line[512];
    unsigned long long sectors = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned ma, mi;
        unsigned long long reads, merged, sec;
        if (sscanf(line, "%u %u %*s %llu %llu %llu", &ma, &mi, &reads, &merged, &sec) == 5 &&
            ma == d->major && mi == d->minor) {
            sectors = sec;
            break;
        }
    }
    if (f)
        fclose(f);
    return (uint64_t)sectors * 512;
}

static int read_small(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t k = read(fd, buf, n - 1);
    close(fd);
    if (k < 0)
        return -1;
    buf[k] = 0;
    buf[strcspn(buf, "\n")] = 0;
    return 0;
}

void cold_device_queue(const struct cold_device *d, const char *file, char *buf, size_t n)
{
    char path[512];
    /* A partition has no queue of its own: its disk's is one level up. */
    snprintf(path, sizeof path, "/sys/class/block/%s/queue/%s", d->name, file);
    if (read_small(path, buf, n) == 0)
        return;
    snprintf(path, sizeof path, "/sys/class/block/%s/../queue/%s", d->name, file);
    if (read_small(path, buf, n) != 0)
        snprintf(buf, n, "?");
}

uint64_t cold_proc_read(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/io", (int)pid);
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "read_bytes: %llu", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

pid_t cold_mount_daemon(const char *mnt)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t found = 0;
    while (d && !found && (e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || pid == getpid())
            continue;
        char path[64], cmd[4096];
        snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t k = read(fd, cmd, sizeof cmd - 1);
        close(fd);
        if (k <= 1)
            continue;
        /* The arguments are NUL-terminated: find the last one. */
        cmd[k] = 0;
        ssize_t at = k - 2;
        while (at >= 0 && cmd[at])
            at--;
        if (strcmp(cmd + at + 1, mnt) == 0)
            found = (pid_t)pid;
    }
    if (d)
        closedir(d);
    return found;
}

/* ---- fio ------------------------------------------------------------- */

int cold_fio_run(const char *file, uint64_t io_size, int seconds, uint64_t seed,
                 struct cold_fio *f)
{
    if (f->buffered && cold_drop_caches() != 0)
        return -1;
    char out[] = "/tmp/coldbench-fio-XXXXXX";
    int ofd = mkstemp(out);
    if (ofd < 0)
        return -1;
    close(ofd);
    char a_file[4200], a_bs[48], a_qd[32], a_size[48], a_rt[32], a_seed[48], a_out[64];
    snprintf(a_file, sizeof a_file, "--filename=%s", file);
    snprintf(a_bs, sizeof a_bs, "--bs=%llu", (unsigned long long)f->bs);
    snprintf(a_qd, sizeof a_qd, "--iodepth=%d", f->qd);
    snprintf(a_size, sizeof a_size, "--io_size=%llu", (unsigned long long)io_size);
    snprintf(a_rt, sizeof a_rt, "--runtime=%d", seconds);
    snprintf(a_seed, sizeof a_seed, "--randseed=%llu", (unsigned long long)seed);
    snprintf(a_out, sizeof a_out, "--output=%s", out);
    const char *argv[] = {"fio", "--name=cold", a_file, "--readonly",
                          f->buffered ? "--direct=0" : "--direct=1",
                          "--ioengine=io_uring", "--rw=randread", a_bs, a_qd, a_size, a_rt,
                          a_seed, "--output-format=terse", "--terse-version=3", a_out, NULL};
    /* The command for the report, without the output file. */
    size_t at = 0;
    for (int k = 0; argv[k] && argv[k] != a_out; k++)
        at += (size_t)snprintf(f->cmd + at, at < sizeof f->cmd ? sizeof f->cmd - at : 0, "%s%s",
                               k ? " " : "", argv[k]);
    int rc = bench_exec(argv);
    char line[8192] = "";
    FILE *in = rc == 0 ? fopen(out, "r") : NULL;
    while (in && fgets(line, sizeof line, in))
        if (strncmp(line, "3;", 2) == 0)
            break;
    if (in)
        fclose(in);
    unlink(out);
    if (rc != 0 || strncmp(line, "3;", 2) != 0) {
        fprintf(stderr, "coldbench: fio gave no result for %s\n", file);
        return -1;
    }
    /* Terse version 3: 6 read KiB, 7 KiB/s, 8 IOPS, 16 mean completion
     * latency (us), counting fields from 1. */
    double v[17] = {0};
    char *save = NULL, *tok = strtok_r(line, ";", &save);
    for (int k = 1; tok && k <= 16; k++, tok = strtok_r(NULL, ";", &save))
        v[k] = strtod(tok, NULL);
    f->bytes = (uint64_t)v[6] * 1024;
    f->mibs = v[7] / 1024.0;
    f->iops = v[8];
    f->lat_us = v[16];
    return f->iops > 0 ? 0 : -1;
}

/* ---- Checksums ------------------------------------------------------- */

static inline uint64_t rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t fmix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

/* Four independent lanes of multiply-rotate, so the multiplies overlap:
 * several GB/s, far faster than the disk, and any changed byte changes the
 * result with overwhelming odds. Not a cryptographic hash. */
uint64_t cold_hash(const void *p, size_t n, uint64_t seed)
{
    const uint8_t *s = p;
    const uint64_t k1 = 0x9e3779b97f4a7c15ull, k2 = 0xc2b2ae3d27d4eb4full;
    uint64_t a = seed ^ k1, b = seed + k2, c = ~seed, d = seed * k1 + (uint64_t)n;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        uint64_t w[4];
        memcpy(w, s + i, 32);
        a = rotl(a ^ (w[0] * k2), 31) * k1;
        b = rotl(b ^ (w[1] * k2), 29) * k1;
        c = rotl(c ^ (w[2] * k2), 27) * k1;
        d = rotl(d ^ (w[3] * k2), 33) * k1;
    }
    uint64_t t = 0;
    for (int sh = 0; i < n; i++, sh += 8) {
        t ^= (uint64_t)s[i] << (sh & 63);
        if (sh == 56 || i + 1 == n) {
            a = rotl(a ^ (t * k2), 31) * k1;
            t = 0;
            sh = -8;
        }
    }
    return fmix(a ^ rotl(b, 17) ^ rotl(c, 34) ^ rotl(d, 51) ^ (uint64_t)n);
}

uint64_t cold_shape_seed(const uint64_t *shape, uint32_t ndim)
{
    uint64_t h = 0x1234567 + ndim;
    for (uint32_t d = 0; d < ndim; d++)
        h = fmix(h ^ shape[d]) + d;
    return h;
}

uint64_t cold_record_hash(const struct workload *w, size_t k)
{
    uint64_t seed = w->ragged ? cold_shape_seed(w->shape + k * w->ndim, w->ndim) : 0;
    return cold_hash(wl_rec(w, k), wl_bytes(w, k), seed);
}

/* ---- Record files ----------------------------------------------------- */

struct readers {
    const struct workload *w;
    int dirfd;
    const uint64_t *idx;
    size_t n;
    int nthreads;
    uint64_t cap;
    uint64_t *check;
    pthread_barrier_t start;
    _Atomic uint64_t bytes;
    _Atomic int failed;
};

/* Each reader's own clock from the start to its last file: the time of a
 * pass runs from the first start to the last end, so that a main thread
 * scheduled late after the barrier (two CPUs, four readers) does not
 * shorten it. */
struct reader_arg {
    struct readers *r;
    int t;
    double start, end;
};

/* The checksum of a record file's bytes: a Dense file is the record, a
 * Ragged one an NPY header (the shape) and the payload. */
static uint64_t file_hash(const struct workload *w, const uint8_t *p, uint64_t len)
{
    if (!w->ragged)
        return cold_hash(p, len, 0);
    uint64_t shape[BENCH_MAX_NDIM];
    uint32_t ndim = 0;
    size_t h = npy_parse(p, len, w->dtype, shape, BENCH_MAX_NDIM, &ndim);
    if (h == 0 || ndim != w->ndim)
        return 0;
    return cold_hash(p + h, len - h, cold_shape_seed(shape, ndim));
}

static void *reader_main(void *arg)
{
    struct reader_arg *a = arg;
    struct readers *r = a->r;
    uint8_t *buf = bench_batch_alloc(r->cap);
    uint64_t bytes = 0;
    pthread_barrier_wait(&r->start);
    a->start = now_seconds();
    for (size_t k = (size_t)a->t; k < r->n && !r->failed; k += (size_t)r->nthreads) {
        char name[32];
        snprintf(name, sizeof name, r->w->ragged ? "%llu.npy" : "%llu",
                 (unsigned long long)r->idx[k]);
        int fd = openat(r->dirfd, name, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            r->failed = 1;
            break;
        }
        uint64_t got = 0;
        for (;;) {
            ssize_t m = read(fd, buf + got, r->cap - got);
            if (m < 0 && errno == EINTR)
                continue;
            if (m <= 0 || (got += (uint64_t)m) == r->cap) {
                if (m < 0)
                    r->failed = 1;
                break;
            }
        }
        close(fd);
        bytes += got;
        if (r->check)
            r->check[k] = file_hash(r->w, buf, got);
    }
    r->bytes += bytes;
    free(buf);
    a->end = now_seconds();
    return NULL;
}

int cold_read_files(const struct workload *w, const char *dir, const uint64_t *idx, size_t n,
                    int readers, uint64_t *check, double *seconds, uint64_t *bytes)
{
    struct readers r = {.w = w, .idx = idx, .n = n, .nthreads = readers, .check = check};
    uint64_t most = 0;
    for (size_t k = 0; k < n; k++)
        most = wl_bytes(w, idx[k]) > most ? wl_bytes(w, idx[k]) : most;
    /* Room for an NPY header, and one byte more than any file so that a
     * full buffer means a file longer than its record. */
    r.cap = most + NPY_HEADER_MAX + 1;
    r.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (r.dirfd < 0) {
        fprintf(stderr, "coldbench: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    pthread_t th[64];
    struct reader_arg args[64];
    if (readers < 1 || readers > 64)
        return -1;
    pthread_barrier_init(&r.start, NULL, (unsigned)readers + 1);
    int started = 0;
    for (int t = 0; t < readers; t++) {
        args[t] = (struct reader_arg){.r = &r, .t = t};
        if (pthread_create(&th[t], NULL, reader_main, &args[t]) != 0) {
            fprintf(stderr, "coldbench: cannot start a reader\n");
            exit(1);
        }
        started++;
    }
    pthread_barrier_wait(&r.start);
    double t0 = 0, t1 = 0;
    for (int t = 0; t < started; t++) {
        pthread_join(th[t], NULL);
        t0 = t == 0 || args[t].start < t0 ? args[t].start : t0;
        t1 = args[t].end > t1 ? args[t].end : t1;
    }
    *seconds = t1 - t0;
    *bytes = r.bytes;
    pthread_barrier_destroy(&r.start);
    close(r.dirfd);
    if (r.failed)
        fprintf(stderr, "coldbench: reading the record files in %s failed\n", dir);
    return r.failed ? -1 : 0;
}

void cold_sleep_until(double t)
{
    struct timespec ts;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* ---- Small helpers --------------------------------------------------- */

static double g_start = -1;

void cold_progress(const char *fmt, ...)
{
    if (g_start < 0)
        g_start = now_seconds();
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "coldbench: [%6.0f s] ", now_seconds() - g_start);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

bool cold_listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return true;
        p += len + (e ? 1 : 0);
    }
    return false;
}

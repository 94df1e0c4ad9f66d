/*
 * be_files.c: one file per record, and the mount points that serve such
 * files.
 *
 * The files-raw row is the simplest store there is: a folder on the local
 * disk holding record i as the file "i" (Dense: its bytes as they are) or
 * "i.npy" (Ragged: an NPY file, so that the shape travels with the
 * record, as a user saving arrays one by one would do). A gather opens,
 * reads and closes each file in batch order on one thread, the loop a
 * Python data set's __getitem__ runs; it pays three system calls per
 * record (four for Ragged, whose size is only known at the end of file).
 *
 * The same reader serves the rows that reach per-record files through a
 * FUSE mount (squashfuse_ll over a squashfs image of this folder,
 * zrecordfs over a zrecord store), so those rows differ only in what
 * answers the system calls. The helpers that run a program, mount and
 * unmount live here for them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"

static void record_name(const struct workload *w, uint64_t i, char *name, size_t n)
{
    snprintf(name, n, w->ragged ? "%llu.npy" : "%llu", (unsigned long long)i);
}

int perfile_write(const struct workload *w, const char *dir)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "zrbench: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < w->n; k++) {
        char name[32], hdr[NPY_HEADER_MAX];
        record_name(w, k, name, sizeof name);
        struct iovec v[2];
        int nv = 0;
        if (w->ragged) {
            size_t hlen = npy_header(hdr, w->dtype, w->shape + k * w->ndim, w->ndim);
            v[nv++] = (struct iovec){hdr, hlen};
        }
        v[nv++] = (struct iovec){(void *)wl_rec(w, k), wl_bytes(w, k)};
        size_t want = v[0].iov_len + (nv > 1 ? v[1].iov_len : 0);
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        /* Records are far below 2 GiB, so one writev writes all of it on
         * a local disk; anything else is a failure. */
        if (fd < 0 || writev(fd, v, nv) != (ssize_t)want)
            rc = -1;
        if (fd >= 0 && close(fd) != 0)
            rc = -1;
        if (rc != 0)
            fprintf(stderr, "zrbench: %s/%s: %s\n", dir, name, strerror(errno));
    }
    close(dfd);
    return rc;
}

int perfile_open(struct perfile *p, const struct workload *w, const char *dir)
{
    memset(p, 0, sizeof *p);
    p->w = w;
    p->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (p->dirfd < 0) {
        fprintf(stderr, "zrbench: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    p->cap = w->ragged ? bench_max_batch_bytes(w, NPY_HEADER_MAX) : w->batch * w->width;
    p->buf = bench_batch_alloc(p->cap);
    return 0;
}

/* Read from fd into p until end of file or until cap bytes; the count,
 * or -1. */
static int64_t read_to_end(int fd, uint8_t *p, uint64_t cap)
{
    uint64_t got = 0;
    for (;;) {
        ssize_t k = read(fd, p + got, cap - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0 || (got += (uint64_t)k) == cap)
            return (int64_t)got;
    }
}

int perfile_gather(struct perfile *p, const uint64_t *idx, size_t n, struct batch_out *o)
{
    const struct workload *w = p->w;
    uint64_t at = 0;
    o->buf = p->buf;
    for (size_t k = 0; k < n; k++) {
        char name[32];
        record_name(w, idx[k], name, sizeof name);
        int fd = openat(p->dirfd, name, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            fprintf(stderr, "zrbench: open %s: %s\n", name, strerror(errno));
            return -1;
        }
        /* Dense: exactly the record's width into its slot. Ragged: the
         * whole file, its header parsed for the shape. */
        uint64_t want = w->ragged ? p->cap - at : w->width;
        uint8_t *dst = w->ragged ? p->buf + at : p->buf + k * w->width;
        int64_t got = read_to_end(fd, dst, want);
        close(fd);
        if (got < 0 || (!w->ragged && (uint64_t)got != want)) {
            fprintf(stderr, "zrbench: read %s: %s\n", name, got < 0 ? strerror(errno) : "short");
            return -1;
        }
        if (!w->ragged)
            continue;
        uint32_t ndim = 0;
        size_t hlen = npy_parse(dst, (size_t)got, w->dtype, o->shape + k * w->ndim, w->ndim, &ndim);
        uint64_t count = 1;
        for (uint32_t d = 0; d < ndim; d++)
            count *= o->shape[k * w->ndim + d];
        if (hlen == 0 || ndim != w->ndim || count * w->itemsize != (uint64_t)got - hlen) {
            fprintf(stderr, "zrbench: %s: not the expected NPY record\n", name);
            return -1;
        }
        o->rec[k] = dst + hlen;
        o->bytes[k] = (uint64_t)got - hlen;
        at += ((uint64_t)got + 7) & ~(uint64_t)7;
    }
    return 0;
}

void perfile_close(struct perfile *p)
{
    if (p->dirfd > 0)
        close(p->dirfd);
    free(p->buf);
    memset(p, 0, sizeof *p);
}

/* ---- Programs and mounts ------------------------------------------- */

int bench_exec(const char *const argv[])
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* The benchmark's stdout is the report: the tool talks to stderr. */
        dup2(2, 1);
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "zrbench: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "zrbench: %s failed (status %d)\n", argv[0], status);
        return -1;
    }
    return 0;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Whether mnt is the root of a file system other than its parent's. */
static bool mounted(const char *mnt)
{
    struct stat a, b;
    char parent[4096];
    snprintf(parent, sizeof parent, "%s/..", mnt);
    return stat(mnt, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

int bench_mount(const char *const argv[], const char *mnt)
{
    if (mkdir(mnt, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "zrbench: %s: %s\n", mnt, strerror(errno));
        return -1;
    }
    if (bench_exec(argv) != 0)
        return -1;
    /* Both drivers mount before they go to the background; allow a
     * little time for either anyway. */
    for (int k = 0; k < 500; k++) {
        if (mounted(mnt))
            return 0;
        pause_ms(10);
    }
    fprintf(stderr, "zrbench: %s did not mount on %s\n", argv[0], mnt);
    return -1;
}

void bench_unmount(const char *mnt)
{
    if (!mounted(mnt))
        return;
    const char *argv[] = {"fusermount3", "-u", mnt, NULL};
    /* A busy mount point (a descriptor still closing) frees up soon. */
    for (int k = 0; k < 100 && mounted(mnt); k++) {
        if (bench_exec(argv) == 0)
            break;
        pause_ms(50);
    }
    if (mounted(mnt)) {
        const char *lazy[] = {"fusermount3", "-uz", mnt, NULL};
        bench_exec(lazy);
    }
    rmdir(mnt);
}

/* ---- files-raw ------------------------------------------------------ */

static int files_write(struct backend *b, const struct workload *w)
{
    return perfile_write(w, b->dir);
}

static int files_prepare(struct backend *b, const struct workload *w)
{
    return perfile_open(b->state, w, b->dir);
}

static int files_gather(struct backend *b, const uint64_t *idx, size_t n, struct batch_out *o)
{
    return perfile_gather(b->state, idx, n, o);
}

static uint64_t files_footprint(struct backend *b) { return dir_allocated(b->dir); }

static void files_release(struct backend *b)
{
    if (!b->state)
        return;
    perfile_close(b->state);
    free(b->state);
    b->state = NULL;
}

static const struct backend_ops files_ops = {
    .write = files_write,
    .prepare = files_prepare,
    .gather = files_gather,
    .footprint = files_footprint,
    .release = files_release,
};

int be_files_init(struct backend *b, enum backend_kind kind)
{
    (void)kind;
    b->state = calloc(1, sizeof(struct perfile));
    if (!b->state)
        return -1;
    b->name = "files-raw";
    b->threads = 1;
    b->write_once = true;
    b->many_files = true;
    b->ops = &files_ops;
    snprintf(b->note, sizeof b->note,
             "one file per record on the local disk (Ragged: an .npy file each), "
             "open/read/close in batch order on one thread");
    return 0;
}

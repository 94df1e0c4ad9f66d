/*
 * be_numpy.c: the numpy-fancy-raw row: NumPy's own fancy indexing,
 * np.load(path, mmap_mode='r')[idx], on the .npy file the npy-mmap-raw
 * row of the same run wrote (Dense workloads only).
 *
 * The gather runs in a /usr/bin/python3 process (bench/numpy_fancy.py)
 * that this row starts when it prepares and feeds over a pipe: per batch
 * the indices go down the pipe, Python times the indexing expression
 * alone, copies the result into a file both processes map (outside its
 * timing), and sends the seconds back. The harness uses those seconds as
 * the batch's latency (the row is self-timed), so the pipe and the copy
 * are not charged to NumPy, and validates the bytes in the mapped file
 * like any other row's. NumPy's fancy indexing runs on one thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"

#ifndef BENCH_SRCDIR
#define BENCH_SRCDIR "bench"
#endif

struct npfancy {
    pid_t pid;
    int to, from; /* pipes to the child's stdin and from its stdout */
    uint8_t *map;
    size_t maplen;
    uint64_t *msg;
};

static int io_all(int fd, void *p, size_t n, bool out)
{
    uint8_t *c = p;
    while (n > 0) {
        ssize_t k = out ? write(fd, c, n) : read(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

static int np_prepare(struct backend *b, const struct workload *w)
{
    struct npfancy *f = b->state;
    char npy[4096], batch[4096], script[4096];
    snprintf(npy, sizeof npy, "%s/data.npy", b->peer_dir ? b->peer_dir : "");
    snprintf(batch, sizeof batch, "%s/batch.bin", b->dir);
    const char *srcdir = getenv("ZRBENCH_SRCDIR");
    snprintf(script, sizeof script, "%s/numpy_fancy.py", srcdir ? srcdir : BENCH_SRCDIR);
    if (!b->peer_dir || w->ragged)
        return -1;

    f->maplen = w->batch * w->width;
    int fd = open(batch, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)f->maplen) != 0) {
        fprintf(stderr, "zrbench: %s: %s\n", batch, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    void *p = mmap(NULL, f->maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return -1;
    f->map = p;
    memset(f->map, 0, f->maplen);
    f->msg = bench_xmalloc((w->batch + 1) * sizeof *f->msg);

    int down[2], up[2];
    if (pipe2(down, O_CLOEXEC) != 0)
        return -1;
    if (pipe2(up, O_CLOEXEC) != 0) {
        close(down[0]);
        close(down[1]);
        return -1;
    }
    f->pid = fork();
    if (f->pid == 0) {
        dup2(down[0], 0);
        dup2(up[1], 1);
        execl("/usr/bin/python3", "python3", script, npy, batch, (char *)NULL);
        fprintf(stderr, "zrbench: cannot run /usr/bin/python3: %s\n", strerror(errno));
        _exit(127);
    }
    close(down[0]);
    close(up[1]);
    f->to = down[1];
    f->from = up[0];
    if (f->pid < 0) {
        fprintf(stderr, "zrbench: fork: %s\n", strerror(errno));
        return -1;
    }
    /* A dead child must fail the write, not end the benchmark. */
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static int np_gather(struct backend *b, const uint64_t *idx, size_t n, struct batch_out *o)
{
    struct npfancy *f = b->state;
    double secs;
    f->msg[0] = n;
    memcpy(f->msg + 1, idx, n * sizeof *idx); /* little-endian host */
    if (io_all(f->to, f->msg, (n + 1) * sizeof *f->msg, true) != 0 ||
        io_all(f->from, &secs, sizeof secs, false) != 0) {
        fprintf(stderr, "zrbench: numpy-fancy-raw: the python3 process failed\n");
        return -1;
    }
    b->inner_seconds = secs;
    o->buf = f->map;
    return 0;
}

static uint64_t np_footprint(struct backend *b)
{
    return b->peer_dir ? dir_allocated(b->peer_dir) : 0;
}

static void np_release(struct backend *b)
{
    struct npfancy *f = b->state;
    if (!f)
        return;
    if (f->to > 0) {
        uint64_t end = 0;
        io_all(f->to, &end, sizeof end, true);
        close(f->to);
    }
    if (f->from > 0)
        close(f->from);
    if (f->pid > 0)
        waitpid(f->pid, NULL, 0);
    if (f->map)
        munmap(f->map, f->maplen);
    free(f->msg);
    free(f);
    b->state = NULL;
}

static int np_write(struct backend *b, const struct workload *w)
{
    (void)w;
    return mkdir(b->dir, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

static const struct backend_ops np_ops = {
    .write = np_write,
    .prepare = np_prepare,
    .gather = np_gather,
    .footprint = np_footprint,
    .release = np_release,
};

int be_numpy_init(struct backend *b, enum backend_kind kind)
{
    (void)kind;
    b->state = calloc(1, sizeof(struct npfancy));
    if (!b->state)
        return -1;
    b->name = "numpy-fancy-raw";
    b->threads = 1;
    b->no_write = true;
    b->write_once = true;
    b->self_timed = true;
    b->ops = &np_ops;
    snprintf(b->note, sizeof b->note,
             "np.load(mmap_mode='r')[idx] in /usr/bin/python3 on the npy-mmap-raw file, timed "
             "inside Python around that expression (one thread)");
    return 0;
}

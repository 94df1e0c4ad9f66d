/*
 * loop.c: the single-threaded request loop, which polls for the next
 * request a little while before it sleeps.
 *
 * A tool reading record files sends the daemon one request at a time
 * (OPEN, then READs) and sleeps until each is answered. Between two
 * requests the daemon has nothing to do, and with libfuse's own loop it
 * sleeps in read(2) on /dev/fuse; the reader's next request must then
 * wake it. On an otherwise idle virtual machine that wake-up is the
 * largest cost of a small file: an idle virtual CPU halts, and waking it
 * goes through the host, which takes far longer than the request itself.
 * So after each request this loop keeps reading the device without
 * blocking for up to spin microseconds; a reader that comes back within
 * that time finds the daemon awake (doc/loop-benchmarks.md and
 * doc/fs-tuning.md have the measurements).
 *
 * Polling only pays while a CPU would otherwise stand idle. Beside a busy
 * process (a training job) the wake-ups are cheap, since no CPU halts,
 * and a polling daemon takes CPU time from the reader and from that
 * process, so that it serves fewer files. So the loop polls only while the other runnable tasks leave a CPU idle
 * (it counts them in /proc/loadavg every 10 ms) and the daemon's own
 * helper threads have no CPU work (the read-ahead thread decoding a
 * large record, the reply threads copying a .gather answer); it yields
 * its CPU between polls, so that a task woken there, such as the reader
 * itself, runs at once; and when other tasks still took more than half a
 * millisecond of its CPU during one wait, it stops polling for a while
 * (10 ms, doubling while that goes on, up to 1 s). When it does not poll
 * it waits in a blocking read, as libfuse's own loop does. With one CPU
 * there is nothing to gain, and the loop never polls.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "fs/loop.h"

#define BACKOFF_MIN_NS UINT64_C(10000000)
#define BACKOFF_MAX_NS UINT64_C(1000000000)
/* CPU time others may take from one polling episode before the loop
 * concludes that its CPU is wanted. */
#define LOST_MAX_NS UINT64_C(500000)
/* How often the loop counts the runnable tasks. */
#define COUNT_EVERY_NS UINT64_C(10000000)

atomic_uint zfs_loop_helpers;

static uint64_t ns_of(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (uint64_t)t.tv_sec * UINT64_C(1000000000) + (uint64_t)t.tv_nsec;
}

/* One polling episode runs from the end of a request to the next one (or
 * to the end of the spin time); resume is when the loop may poll again.
 * The device is non-blocking only while the loop polls: any other wait is
 * the plain blocking read of libfuse's loop, which costs no more than it. */
struct pacing {
    uint64_t spin, resume, backoff, last_lost;
    uint64_t wall0, cpu0; /* the clocks when this episode began */
    bool polling;
    int fd, flags;        /* the device and its flags without O_NONBLOCK */
    bool nonblock;        /* whether the device is non-blocking now */
    int loadavg;          /* /proc/loadavg, or -1 */
    long cpus;
    uint64_t next_count;  /* when to count the runnable tasks again */
    bool crowded;         /* at the last count, no CPU was left idle */
};

/* Whether the other runnable tasks fill every CPU, so that a poll could
 * only take time from them. The fourth field of /proc/loadavg counts the
 * runnable tasks now, this thread among them. */
static bool count_crowded(const struct pacing *p)
{
    char text[128];
    ssize_t n = p->loadavg < 0 ? -1 : pread(p->loadavg, text, sizeof text - 1, 0);
    if (n <= 0)
        return false;
    text[n] = '\0';
    long running;
    if (sscanf(text, "%*s %*s %*s %ld/", &running) != 1)
        return false;
    return running - 1 >= p->cpus;
}

/* Make reads of the device return at once (nonblock) or wait. */
static void set_nonblock(struct pacing *p, bool nonblock)
{
    if (nonblock == p->nonblock)
        return;
    if (fcntl(p->fd, F_SETFL, nonblock ? p->flags | O_NONBLOCK : p->flags) == 0)
        p->nonblock = nonblock;
}

static void episode_begin(struct pacing *p)
{
    p->wall0 = ns_of(CLOCK_MONOTONIC);
    if (p->wall0 >= p->next_count) {
        p->crowded = count_crowded(p);
        p->next_count = p->wall0 + COUNT_EVERY_NS;
    }
    p->polling = p->wall0 >= p->resume && !p->crowded && atomic_load(&zfs_loop_helpers) == 0;
    if (p->polling)
        p->cpu0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
    set_nonblock(p, p->polling);
}

/* Close an episode: the wall time it took that this thread did not run
 * is what other tasks on its CPU had. */
static void episode_end(struct pacing *p)
{
    if (!p->polling)
        return;
    p->polling = false;
    uint64_t wall = ns_of(CLOCK_MONOTONIC) - p->wall0, cpu = ns_of(CLOCK_THREAD_CPUTIME_ID) - p->cpu0;
    uint64_t t = p->wall0 + wall;
    if (wall < cpu || wall - cpu < LOST_MAX_NS) {
        if (t - p->last_lost > BACKOFF_MAX_NS)
            p->backoff = BACKOFF_MIN_NS;
        return;
    }
    p->last_lost = t;
    p->resume = t + p->backoff;
    p->backoff = p->backoff * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : p->backoff * 2;
}

int zfs_loop(struct fuse_session *se, unsigned spin_us)
{
    int fd = fuse_session_fd(se), fl = fcntl(fd, F_GETFL);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (spin_us == 0 || cpus < 2 || fl < 0)
        return fuse_session_loop(se);

    struct fuse_buf buf = {.mem = NULL};
    struct pacing p = {
        .spin = (uint64_t)spin_us * 1000,
        .backoff = BACKOFF_MIN_NS,
        .fd = fd,
        .flags = fl & ~O_NONBLOCK,
        .nonblock = (fl & O_NONBLOCK) != 0,
        .loadavg = open("/proc/loadavg", O_RDONLY | O_CLOEXEC),
        .cpus = cpus,
    };
    episode_begin(&p);
    int res = 0;
    while (!fuse_session_exited(se)) {
        /* Blocking, this returns a request, 0 once the file system is
         * unmounted or told to exit, or -EINTR on a signal. */
        res = fuse_session_receive_buf(se, &buf);
        if (res == -EINTR)
            continue;
        if (res == -EAGAIN) {
            if (p.polling && ns_of(CLOCK_MONOTONIC) - p.wall0 < p.spin &&
                atomic_load(&zfs_loop_helpers) == 0) {
                sched_yield();
                continue;
            }
            episode_end(&p);
            set_nonblock(&p, false);
            if (p.nonblock) /* the device would not change: wait in poll */
                poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, -1);
            continue;
        }
        if (res <= 0)
            break;
        episode_end(&p);
        fuse_session_process_buf(se, &buf);
        episode_begin(&p);
    }
    free(buf.mem);
    if (p.loadavg >= 0)
        close(p.loadavg);
    fuse_session_reset(se);
    return res == -EAGAIN || res == -EINTR || res > 0 ? 0 : res;
}

/*
 * loop.c: the single-threaded request loop, which polls for the next
 * request a little while before it sleeps.
 *
 * A tool reading record files sends the daemon one request at a time
 * (OPEN, then READs) and sleeps until each is answered. Between two
 * requests the daemon has nothing to do, and with libfuse's own loop it
 * sleeps in read(2) on /dev/fuse; the reader's next request must then
 * wake it. On an otherwise idle virtual machine that wake-up is the
 * largest cost of a small file: an idle virtual CPU halts (this
 * machine's guest halt-polling is off), and waking it goes through the
 * host, about 150-200 us, where the request itself takes a few. So after
 * each request this loop keeps reading the device without blocking for
 * up to spin microseconds; a reader that comes back within that time
 * finds the daemon awake. Measured with fuse_ceiling on an idle machine
 * (bench/loopbench.sh has the record-file figures): 2,300 warm 2 KiB
 * reads a second became 5,300-7,100, and 1,800 warm 147 KiB reads
 * 2,500-4,000.
 *
 * Polling only pays while a CPU would otherwise stand idle. Beside a busy
 * process (a training job) the wake-ups are cheap, since no CPU halts,
 * and a polling daemon takes CPU time from the reader and from that
 * process: there a loop that always polled served 25-50% fewer files. So
 * the loop yields its CPU between polls (a task woken on that CPU, such as
 * the reader itself, runs at once), and it watches how much CPU time it
 * got while it polled: when other tasks took more than half a millisecond
 * of it, its CPU is wanted, and the loop sleeps between requests for a
 * while (10 ms, doubling while that goes on, up to 1 s) before it polls
 * again. With one CPU there is nothing to gain, and the loop never polls.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "fs/loop.h"

#define BACKOFF_MIN_NS UINT64_C(10000000)
#define BACKOFF_MAX_NS UINT64_C(1000000000)
/* CPU time others may take from one polling episode before the loop
 * concludes that its CPU is wanted. */
#define LOST_MAX_NS UINT64_C(500000)

static uint64_t ns_of(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (uint64_t)t.tv_sec * UINT64_C(1000000000) + (uint64_t)t.tv_nsec;
}

/* One polling episode runs from the end of a request to the next one (or
 * to the end of the spin time); resume is when the loop may poll again. */
struct pacing {
    uint64_t spin, resume, backoff, last_lost;
    uint64_t wall0, cpu0; /* the clocks when this episode began */
    bool polling;
};

static void episode_begin(struct pacing *p)
{
    p->wall0 = ns_of(CLOCK_MONOTONIC);
    p->cpu0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
    p->polling = p->wall0 >= p->resume;
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
    if (spin_us == 0 || sysconf(_SC_NPROCESSORS_ONLN) < 2 || fl < 0 ||
        fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
        return fuse_session_loop(se);

    struct fuse_buf buf = {.mem = NULL};
    struct pacing p = {.spin = (uint64_t)spin_us * 1000, .backoff = BACKOFF_MIN_NS};
    episode_begin(&p);
    int res = 0;
    while (!fuse_session_exited(se)) {
        res = fuse_session_receive_buf(se, &buf);
        if (res == -EINTR)
            continue;
        if (res == -EAGAIN) {
            if (p.polling && ns_of(CLOCK_MONOTONIC) - p.wall0 < p.spin) {
                sched_yield();
                continue;
            }
            episode_end(&p);
            /* Sleep until a request comes, the device closes (poll then
             * reports an error, and the read after it ENODEV), or a
             * signal arrives. */
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            if (poll(&pfd, 1, -1) < 0 && errno != EINTR) {
                res = -errno;
                break;
            }
            continue;
        }
        if (res <= 0) /* 0: unmounted or told to exit */
            break;
        episode_end(&p);
        fuse_session_process_buf(se, &buf);
        episode_begin(&p);
    }
    free(buf.mem);
    fuse_session_reset(se);
    return res == -EAGAIN || res == -EINTR || res > 0 ? 0 : res;
}

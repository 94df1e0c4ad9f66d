/*
 * replies.c: the threads that send the data replies of .gather for the
 * single-threaded loop.
 *
 * An O_DIRECT read of a .gather batch reaches the daemon as all its
 * requests at once (gather.c), and the reader sleeps until the last one
 * is answered. Sending a reply is where the time goes: the kernel pins
 * the daemon's source pages one at a time and copies each into the
 * reader's pinned pages (doc/fs-tuning.md). On the single-threaded loop,
 * the default on two CPUs or fewer, those copies would run one after
 * another on one core while the other idles, so the loop hands each such
 * reply but the one that ends the batch (gather.c) to these threads and
 * goes back for the next request; everything else stays on the loop,
 * whose one thread keeps serving a reader of small files best. Under the
 * multi-threaded loop the threads that take the requests already copy in
 * parallel, and none of these is started.
 *
 * A reply is a list of pieces that must stay valid until it is sent; the
 * caller's callback then runs on the thread that sent it, to let them go.
 * The threads are a worker queue (lib/workq.c); stopping drains it, so
 * whatever is still queued is sent first.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/loop.h"
#include "fs/replies.h"
#include "lib/workq.h"

/* At most this many threads, whatever the number of CPUs: more only
 * share the same memory bandwidth. */
#define MAX_THREADS 8

struct job {
    struct zr_qitem item;
    fuse_req_t req;
    void (*done)(void *);
    void *arg;
    int cnt;
    struct iovec iov[];
};

static struct zr_workq queue = ZR_WORKQ_INIT;

static void send_job(void *arg, struct zr_qitem *it)
{
    (void)arg;
    struct job *j = ZR_WORKQ_ENTRY(it, struct job, item);
    atomic_fetch_add(&zfs_loop_helpers, 1);
    fuse_reply_iov(j->req, j->iov, j->cnt);
    j->done(j->arg);
    atomic_fetch_sub(&zfs_loop_helpers, 1);
    free(j);
}

int zfs_replies_start(unsigned n)
{
    return zr_workq_start(&queue, n < MAX_THREADS ? n : MAX_THREADS, send_job, NULL);
}

void zfs_replies_stop(void)
{
    zr_workq_stop(&queue, true);
}

void zfs_reply_iov(fuse_req_t req, const struct iovec *iov, int cnt, void (*done)(void *),
                   void *arg)
{
    struct job *j = NULL;
    /* Without threads, or without memory for the job, the reply goes out
     * now: slower, never lost. */
    if (cnt > 0 && (j = malloc(sizeof *j + (size_t)cnt * sizeof j->iov[0]))) {
        j->item = (struct zr_qitem){0};
        j->req = req;
        j->done = done;
        j->arg = arg;
        j->cnt = cnt;
        memcpy(j->iov, iov, (size_t)cnt * sizeof iov[0]);
    }
    if (j && zr_workq_push(&queue, &j->item))
        return;
    free(j);
    fuse_reply_iov(req, iov, cnt);
    done(arg);
}

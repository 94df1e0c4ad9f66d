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
 * Stopping sends whatever is still queued first.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/loop.h"
#include "fs/replies.h"

/* At most this many threads, whatever the number of CPUs: more only
 * share the same memory bandwidth. */
#define MAX_THREADS 8

struct job {
    struct job *next;
    fuse_req_t req;
    void (*done)(void *);
    void *arg;
    int cnt;
    struct iovec iov[];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
static struct job *head, *tail;
static bool stopping;
static unsigned nthreads, nidle;
static pthread_t threads[MAX_THREADS];

static void send_job(struct job *j)
{
    atomic_fetch_add(&zfs_loop_helpers, 1);
    fuse_reply_iov(j->req, j->iov, j->cnt);
    j->done(j->arg);
    atomic_fetch_sub(&zfs_loop_helpers, 1);
    free(j);
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!head && !stopping) {
            nidle++;
            pthread_cond_wait(&work_cv, &mu);
            nidle--;
        }
        if (!head)
            break;
        struct job *j = head;
        head = j->next;
        if (!head)
            tail = NULL;
        pthread_mutex_unlock(&mu);
        send_job(j);
        pthread_mutex_lock(&mu);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

int zfs_replies_start(unsigned n)
{
    int rc = 0;
    if (n > MAX_THREADS)
        n = MAX_THREADS;
    pthread_mutex_lock(&mu);
    stopping = false;
    while (nthreads < n && (rc = pthread_create(&threads[nthreads], NULL, worker, NULL)) == 0)
        nthreads++;
    pthread_mutex_unlock(&mu);
    return -rc;
}

void zfs_replies_stop(void)
{
    pthread_mutex_lock(&mu);
    stopping = true;
    pthread_cond_broadcast(&work_cv);
    unsigned n = nthreads;
    pthread_mutex_unlock(&mu);
    for (unsigned k = 0; k < n; k++)
        pthread_join(threads[k], NULL);
    pthread_mutex_lock(&mu);
    nthreads = 0;
    pthread_mutex_unlock(&mu);
}

void zfs_reply_iov(fuse_req_t req, const struct iovec *iov, int cnt, void (*done)(void *),
                   void *arg)
{
    struct job *j = NULL;
    /* Without threads, or without memory for the job, the reply goes out
     * now: slower, never lost. */
    if (cnt > 0 && (j = malloc(sizeof *j + (size_t)cnt * sizeof j->iov[0]))) {
        j->next = NULL;
        j->req = req;
        j->done = done;
        j->arg = arg;
        j->cnt = cnt;
        memcpy(j->iov, iov, (size_t)cnt * sizeof iov[0]);
    }
    pthread_mutex_lock(&mu);
    if (j && nthreads > 0 && !stopping) {
        if (tail)
            tail->next = j;
        else
            head = j;
        tail = j;
        if (nidle > 0)
            pthread_cond_signal(&work_cv);
        j = NULL;
        req = NULL;
    }
    pthread_mutex_unlock(&mu);
    free(j);
    if (req) {
        fuse_reply_iov(req, iov, cnt);
        done(arg);
    }
}

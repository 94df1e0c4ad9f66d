/*
 * workq.c: a few threads that run, one item at a time, what other threads
 * hand them: the one worker queue of this code base. zrecordfs sends its
 * invalidations, its .gather replies and its read-ahead through one, and
 * the library's gather pool keeps its jobs on its FIFO (pool.c says why
 * the pool's workers are not these). The source is compiled into the
 * library, hidden like all its private symbols, and again into zrecordfs,
 * which links only the library's public API.
 *
 * An item lives in its owner's memory; the queue never allocates. A
 * thread takes an item off the FIFO under the lock and runs the handler
 * without it, so pushing never waits for a handler. After the handler
 * the thread touches the item again only if a zr_workq_call waits for it,
 * since anyone else may have freed or reused it by then.
 */
#include <errno.h>

#include "workq.h"

static void *worker(void *arg)
{
    struct zr_workq *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->fifo.head && !q->stopping) {
            q->nidle++;
            pthread_cond_wait(&q->work_cv, &q->mu);
            q->nidle--;
        }
        /* A stop that drops items has emptied the FIFO already. */
        struct zr_qitem *it = zr_fifo_pop(&q->fifo);
        if (!it)
            break;
        bool waited = it->waited;
        pthread_mutex_unlock(&q->mu);
        q->fn(q->arg, it);
        pthread_mutex_lock(&q->mu);
        if (waited) {
            it->ran = it->done = true;
            pthread_cond_broadcast(&q->done_cv);
        }
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int zr_workq_start(struct zr_workq *q, unsigned n, void (*fn)(void *arg, struct zr_qitem *it),
                   void *arg)
{
    int rc = 0;
    if (n > ZR_WORKQ_MAX_THREADS)
        n = ZR_WORKQ_MAX_THREADS;
    pthread_mutex_lock(&q->mu);
    q->fn = fn;
    q->arg = arg;
    q->stopping = false;
    while (q->nthreads < n &&
           (rc = pthread_create(&q->threads[q->nthreads], NULL, worker, q)) == 0)
        q->nthreads++;
    pthread_mutex_unlock(&q->mu);
    return -rc;
}

void zr_workq_stop(struct zr_workq *q, bool drain)
{
    pthread_mutex_lock(&q->mu);
    q->stopping = true;
    if (!drain) {
        struct zr_qitem *it;
        while ((it = zr_fifo_pop(&q->fifo)))
            if (it->waited)
                it->done = true;
        pthread_cond_broadcast(&q->done_cv);
    }
    pthread_cond_broadcast(&q->work_cv);
    unsigned n = q->nthreads;
    pthread_mutex_unlock(&q->mu);
    for (unsigned k = 0; k < n; k++)
        pthread_join(q->threads[k], NULL);
    pthread_mutex_lock(&q->mu);
    q->nthreads = 0;
    pthread_mutex_unlock(&q->mu);
}

/* Queue it if the queue takes items; the caller holds the lock. */
static bool push_locked(struct zr_workq *q, struct zr_qitem *it, bool waited)
{
    if (q->nthreads == 0 || q->stopping)
        return false;
    if (!it->queued) {
        it->waited = waited;
        it->done = it->ran = false;
        zr_fifo_push(&q->fifo, it);
        /* A thread that is not idle looks at the FIFO before it sleeps. */
        if (q->nidle > 0)
            pthread_cond_signal(&q->work_cv);
    }
    return true;
}

bool zr_workq_push(struct zr_workq *q, struct zr_qitem *it)
{
    pthread_mutex_lock(&q->mu);
    bool ok = push_locked(q, it, false);
    pthread_mutex_unlock(&q->mu);
    return ok;
}

bool zr_workq_call(struct zr_workq *q, struct zr_qitem *it)
{
    pthread_mutex_lock(&q->mu);
    bool ok = push_locked(q, it, true);
    while (ok && !it->done)
        pthread_cond_wait(&q->done_cv, &q->mu);
    ok = ok && it->ran;
    pthread_mutex_unlock(&q->mu);
    return ok;
}

bool zr_workq_has_more(struct zr_workq *q)
{
    pthread_mutex_lock(&q->mu);
    bool more = q->fifo.head || q->stopping;
    pthread_mutex_unlock(&q->mu);
    return more;
}

/*
 * workq.h: a FIFO of intrusive items and a small worker queue built on it
 * (workq.c). Private: neither is part of the library's API.
 */
#ifndef ZR_WORKQ_H
#define ZR_WORKQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* The most threads one queue runs. */
#define ZR_WORKQ_MAX_THREADS 8

/* An item, embedded in the caller's own struct (ZR_WORKQ_ENTRY finds the
 * struct again), zeroed before first use. It is on at most one FIFO at a
 * time; queued says whether it is on one now. The fields are the FIFO's
 * and the queue's to change, under the lock that guards the FIFO. */
struct zr_qitem {
    struct zr_qitem *next;
    bool queued;
    bool waited; /* a zr_workq_call waits for it */
    bool done;   /* set for that caller once it has run, or been dropped */
    bool ran;
};

#define ZR_WORKQ_ENTRY(it, type, member) ((type *)(void *)((char *)(it) - offsetof(type, member)))

/* A FIFO of items; {NULL, NULL} is empty. Not locked: its owner's lock
 * guards it. */
struct zr_fifo {
    struct zr_qitem *head, *tail;
};

static inline void zr_fifo_push(struct zr_fifo *f, struct zr_qitem *it)
{
    it->next = NULL;
    it->queued = true;
    if (f->tail)
        f->tail->next = it;
    else
        f->head = it;
    f->tail = it;
}

/* The first item, taken off the FIFO, or NULL when it is empty. */
static inline struct zr_qitem *zr_fifo_pop(struct zr_fifo *f)
{
    struct zr_qitem *it = f->head;
    if (it) {
        f->head = it->next;
        if (!f->head)
            f->tail = NULL;
        it->queued = false;
    }
    return it;
}

/* Take it off the FIFO wherever it is. Returns whether it was on it. */
static inline bool zr_fifo_remove(struct zr_fifo *f, struct zr_qitem *it)
{
    struct zr_qitem **pp = &f->head, *prev = NULL;
    while (*pp && *pp != it) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (!*pp)
        return false;
    *pp = it->next;
    if (f->tail == it)
        f->tail = prev;
    it->queued = false;
    return true;
}

/* Worker threads that run a handler on each item pushed, in FIFO order
 * (with more than one thread, items start in order and may overlap). The
 * handler may free or reuse its item unless a zr_workq_call waits for
 * it. Set up with ZR_WORKQ_INIT; the fields are private to workq.c. */
struct zr_workq {
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    struct zr_fifo fifo;
    void (*fn)(void *arg, struct zr_qitem *it);
    void *arg;
    bool stopping;
    unsigned nthreads, nidle;
    pthread_t threads[ZR_WORKQ_MAX_THREADS];
};

#define ZR_WORKQ_INIT \
    { .mu = PTHREAD_MUTEX_INITIALIZER, .work_cv = PTHREAD_COND_INITIALIZER, \
      .done_cv = PTHREAD_COND_INITIALIZER }

/* Start threads until n run (at most ZR_WORKQ_MAX_THREADS), each calling
 * fn(arg, item) for the items pushed. Also restarts a stopped queue.
 * Returns 0 or a negative errno; the threads started before a failure
 * still run. Not to be called with another start or a stop. */
int zr_workq_start(struct zr_workq *q, unsigned n, void (*fn)(void *arg, struct zr_qitem *it),
                   void *arg);
/* Stop the threads and return once they have exited. drain: the items
 * still queued run first; otherwise they are dropped unrun, and a thread
 * finishes only the item it has. Safe when no thread runs. From then on
 * the queue takes no items, until started again. */
void zr_workq_stop(struct zr_workq *q, bool drain);
/* Queue it, unless it is queued already (then it stays where it is).
 * Returns false when the queue takes no items (no thread runs, or it is
 * stopping): the caller then does the work itself. Thread-safe. */
bool zr_workq_push(struct zr_workq *q, struct zr_qitem *it);
/* Queue it and wait until a thread has run it. Returns true when it ran,
 * false when the queue did not take it or a stop dropped it. it must not
 * be queued already. Thread-safe; never from the queue's own threads. */
bool zr_workq_call(struct zr_workq *q, struct zr_qitem *it);
/* Whether an item waits or the queue is stopping: a handler's cue to cut
 * long work short. Thread-safe. */
bool zr_workq_has_more(struct zr_workq *q);

#endif

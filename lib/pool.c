/*
 * pool.c: a process-wide pool of worker threads sized to the CPUs this
 * process may run on (LOADERX_THREADS overrides it), started on first use.
 *
 * A call publishes a job (a function and a shard count) on a queue and
 * then claims shards itself alongside the workers, each shard taken with an
 * atomic counter. Because the caller works too, concurrent jobs from many
 * threads, and jobs started from inside a worker, always make progress. A
 * job lives on its caller's stack: a worker touches it only while holding
 * the pool lock or while it owns an unfinished shard, and the caller
 * returns only after every shard is done and the job is off the queue.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "alloc.h"
#include "pool.h"

struct job {
    void (*fn)(void *ctx, size_t shard);
    void *ctx;
    size_t nshards;
    atomic_size_t next;
    atomic_size_t done;
    bool queued;
    struct job *qnext;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static struct job *queue_head, *queue_tail;
static int nthreads;      /* threads per call, caller included; 0 = not started */
static bool atfork_registered;
/* The workers are joinable and joined when the library is unloaded (or the
 * process exits), so no worker is left sleeping in code that dlclose is
 * about to unmap, and none outlives its thread-local storage. */
static pthread_t *workers;
static int nworkers;
static bool quitting;

static void dequeue_locked(struct job *j)
{
    struct job **pp = &queue_head, *prev = NULL;
    while (*pp && *pp != j) {
        prev = *pp;
        pp = &(*pp)->qnext;
    }
    if (*pp) {
        *pp = j->qnext;
        if (queue_tail == j)
            queue_tail = prev;
    }
    j->queued = false;
}

static void finish_shard(struct job *j, size_t n)
{
    if (atomic_fetch_add_explicit(&j->done, 1, memory_order_acq_rel) + 1 == n) {
        pthread_mutex_lock(&lock);
        pthread_cond_broadcast(&done_cv);
        pthread_mutex_unlock(&lock);
    }
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!queue_head && !quitting)
            pthread_cond_wait(&work_cv, &lock);
        if (quitting)
            break;
        struct job *j = queue_head;
        size_t n = j->nshards;
        size_t k = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (k + 1 >= n)
            dequeue_locked(j);
        if (k >= n)
            continue;
        pthread_mutex_unlock(&lock);
        j->fn(j->ctx, k);
        finish_shard(j, n);
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

static int cpu_count(void)
{
    const char *env = getenv("LOADERX_THREADS");
    if (env && *env) {
        long v = strtol(env, NULL, 10);
        if (v >= 1 && v <= 1024)
            return (int)v;
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = online > 0 ? (int)online : 1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int allowed = CPU_COUNT(&set);
        if (allowed > 0 && allowed < n)
            n = allowed;
    }
    return n;
}

/* In a child of fork() the workers do not exist: forget them, and start a
 * new pool on the child's first call. */
static void atfork_prepare(void) { pthread_mutex_lock(&lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&lock); }
static void atfork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&work_cv, NULL);
    pthread_cond_init(&done_cv, NULL);
    queue_head = queue_tail = NULL;
    nthreads = 0;
    zr_free(workers);
    workers = NULL;
    nworkers = 0;
}

static void start_locked(void)
{
    if (!atfork_registered) {
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
        atfork_registered = true;
    }
    int want = cpu_count();
    workers = zr_calloc((size_t)want, sizeof *workers);
    nworkers = 0;
    for (int i = 1; workers && i < want; i++) {
        if (pthread_create(&workers[nworkers], NULL, worker, NULL) != 0)
            break;
        nworkers++;
    }
    nthreads = 1 + nworkers;
}

__attribute__((destructor)) static void pool_stop(void)
{
    pthread_mutex_lock(&lock);
    quitting = true;
    pthread_cond_broadcast(&work_cv);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < nworkers; i++)
        pthread_join(workers[i], NULL);
    zr_free(workers);
    workers = NULL;
    nworkers = 0;
}

int zr_pool_threads(void)
{
    pthread_mutex_lock(&lock);
    if (nthreads == 0)
        start_locked();
    int n = nthreads;
    pthread_mutex_unlock(&lock);
    return n;
}

void zr_pool_run(size_t nshards, void (*fn)(void *ctx, size_t shard), void *ctx)
{
    if (nshards == 0)
        return;
    if (nshards == 1 || zr_pool_threads() == 1) {
        for (size_t k = 0; k < nshards; k++)
            fn(ctx, k);
        return;
    }
    struct job j = {.fn = fn, .ctx = ctx, .nshards = nshards, .queued = true};
    atomic_init(&j.next, 0);
    atomic_init(&j.done, 0);
    pthread_mutex_lock(&lock);
    if (queue_tail)
        queue_tail->qnext = &j;
    else
        queue_head = &j;
    queue_tail = &j;
    if (nshards - 1 >= (size_t)nthreads - 1)
        pthread_cond_broadcast(&work_cv);
    else
        for (size_t i = 1; i < nshards; i++)
            pthread_cond_signal(&work_cv);
    pthread_mutex_unlock(&lock);

    for (;;) {
        size_t k = atomic_fetch_add_explicit(&j.next, 1, memory_order_relaxed);
        if (k >= nshards)
            break;
        fn(ctx, k);
        atomic_fetch_add_explicit(&j.done, 1, memory_order_acq_rel);
    }
    pthread_mutex_lock(&lock);
    if (j.queued)
        dequeue_locked(&j);
    while (atomic_load_explicit(&j.done, memory_order_acquire) < nshards)
        pthread_cond_wait(&done_cv, &lock);
    pthread_mutex_unlock(&lock);
}

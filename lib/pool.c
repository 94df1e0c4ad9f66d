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
 *
 * Waking a sleeping thread is dear where an idle CPU halts: on a virtual
 * machine it can take as long as a whole small gather (doc/performance.md,
 * "Waking the pool"). So a
 * worker that runs out of work spins for a short while (SPIN_NS) before
 * it sleeps, and a call that finds a spinning worker hands it shards
 * without a wake-up at all. Calls too small to pay for a wake-up
 * (zr_pool_run_light) use only workers that are already awake, and run on
 * the caller alone when none is. Shards are claimed one at a time, so a
 * worker that arrives late takes only what is left.
 *
 * The jobs wait on the FIFO of workq.h, but these workers are not a
 * zr_workq's: a job stays at the head while workers claim its shards (a
 * worker queue hands each item to one thread), the caller runs shards
 * too, and the workers spin before they sleep, none of which that queue
 * does or should pay for.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "pool.h"
#include "workq.h"

/* How long an idle worker polls for new work before it sleeps. Back-to-back
 * batches (a loader's prefetch threads) find it awake; a process that
 * stops calling pays this much CPU once. */
#define SPIN_NS 200000L

struct job {
    void (*fn)(void *ctx, size_t shard);
    void *ctx;
    size_t nshards;
    atomic_size_t next;
    atomic_size_t done;
    struct zr_qitem item;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static struct zr_fifo queue;
static int nthreads;      /* threads per call, caller included; 0 = not started */
static bool atfork_registered;
/* The workers are joinable and joined when the library is unloaded (or the
 * process exits), so no worker is left sleeping in code that dlclose is
 * about to unmap, and none outlives its thread-local storage. */
static pthread_t *workers;
static int nworkers;
static bool quitting;
/* Jobs on the queue, and workers spinning idle; read without the lock by
 * spinners and by callers deciding whether a wake-up is needed. */
static atomic_size_t nqueued;
static atomic_int nspinning;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Poll for a queued job for up to SPIN_NS, without the lock. Returns
 * whether one appeared (the caller then takes the lock and looks). */
static bool spin_for_work(void)
{
    bool found = false;
    atomic_fetch_add_explicit(&nspinning, 1, memory_order_acq_rel);
    long until = now_ns() + SPIN_NS;
    for (unsigned k = 0;; k++) {
        if (atomic_load_explicit(&nqueued, memory_order_acquire) > 0) {
            found = true;
            break;
        }
        cpu_relax();
        if ((k & 63) == 63 && now_ns() >= until)
            break;
    }
    atomic_fetch_sub_explicit(&nspinning, 1, memory_order_acq_rel);
    return found;
}

static void dequeue_locked(struct job *j)
{
    if (zr_fifo_remove(&queue, &j->item))
        atomic_fetch_sub_explicit(&nqueued, 1, memory_order_acq_rel);
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
        if (!queue.head && !quitting) {
            pthread_mutex_unlock(&lock);
            spin_for_work();
            pthread_mutex_lock(&lock);
        }
        while (!queue.head && !quitting)
            pthread_cond_wait(&work_cv, &lock);
        if (quitting)
            break;
        struct job *j = ZR_WORKQ_ENTRY(queue.head, struct job, item);
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
    queue = (struct zr_fifo){0};
    atomic_store(&nqueued, 0);
    atomic_store(&nspinning, 0);
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

/* Queue j, wake up to wake workers for it, work on it alongside them, and
 * return once every shard is done. */
static void run_job(struct job *j, size_t wake)
{
    size_t nshards = j->nshards;
    pthread_mutex_lock(&lock);
    zr_fifo_push(&queue, &j->item);
    atomic_fetch_add_explicit(&nqueued, 1, memory_order_acq_rel);
    if (wake >= (size_t)nthreads - 1)
        pthread_cond_broadcast(&work_cv);
    else
        for (size_t i = 0; i < wake; i++)
            pthread_cond_signal(&work_cv);
    pthread_mutex_unlock(&lock);

    for (;;) {
        size_t k = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (k >= nshards)
            break;
        j->fn(j->ctx, k);
        atomic_fetch_add_explicit(&j->done, 1, memory_order_acq_rel);
    }
    /* A worker still on its last shard is waited for by spinning first:
     * sleeping would make it pay a wake-up of this thread as well. */
    long until = now_ns() + SPIN_NS;
    for (unsigned k = 0; atomic_load_explicit(&j->done, memory_order_acquire) < nshards; k++) {
        cpu_relax();
        if ((k & 63) == 63 && now_ns() >= until)
            break;
    }
    pthread_mutex_lock(&lock);
    if (j->item.queued)
        dequeue_locked(j);
    while (atomic_load_explicit(&j->done, memory_order_acquire) < nshards)
        pthread_cond_wait(&done_cv, &lock);
    pthread_mutex_unlock(&lock);
}

static void run_inline(size_t nshards, void (*fn)(void *ctx, size_t shard), void *ctx)
{
    for (size_t k = 0; k < nshards; k++)
        fn(ctx, k);
}

void zr_pool_run(size_t nshards, void (*fn)(void *ctx, size_t shard), void *ctx)
{
    if (nshards == 0)
        return;
    if (nshards == 1 || zr_pool_threads() == 1) {
        run_inline(nshards, fn, ctx);
        return;
    }
    struct job j = {.fn = fn, .ctx = ctx, .nshards = nshards};
    atomic_init(&j.next, 0);
    atomic_init(&j.done, 0);
    /* Spinning workers need no signal; the rest are woken, one a shard. */
    size_t awake = (size_t)atomic_load_explicit(&nspinning, memory_order_acquire);
    size_t want = nshards - 1;
    run_job(&j, want > awake ? want - awake : 0);
}

void zr_pool_run_light(size_t nshards, void (*fn)(void *ctx, size_t shard), void *ctx)
{
    if (nshards == 0)
        return;
    if (nshards == 1 || zr_pool_threads() == 1 ||
        atomic_load_explicit(&nspinning, memory_order_acquire) == 0) {
        run_inline(nshards, fn, ctx);
        return;
    }
    struct job j = {.fn = fn, .ctx = ctx, .nshards = nshards};
    atomic_init(&j.next, 0);
    atomic_init(&j.done, 0);
    run_job(&j, 0);
}

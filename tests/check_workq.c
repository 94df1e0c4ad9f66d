/* check_workq.c: the worker queue (lib/workq.c) that zrecordfs's
 * notify, reply and read-ahead threads run on: order, threads, the two
 * ways to stop, and waiting for an item. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "lib/workq.h"
#include "tests/suites.h"

#define NITEMS 64

struct item {
    struct zr_qitem q;
    int id;
    bool blocks; /* waits for the gate to open */
};

/* What the handler saw, shared by every test (each starts it afresh). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int order[4 * NITEMS];
    int nran;
    int inside;  /* handlers running now */
    int most;    /* the most that ever ran at once */
    bool gate;   /* blocking items may finish */
} seen = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void reset(void)
{
    pthread_mutex_lock(&seen.mu);
    seen.nran = seen.inside = seen.most = 0;
    seen.gate = false;
    pthread_mutex_unlock(&seen.mu);
}

static void handler(void *arg, struct zr_qitem *qi)
{
    int want_inside = *(int *)arg;
    struct item *it = ZR_WORKQ_ENTRY(qi, struct item, q);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&seen.mu);
    seen.order[seen.nran++] = it->id;
    if (++seen.inside > seen.most)
        seen.most = seen.inside;
    pthread_cond_broadcast(&seen.cv);
    /* Wait (within reason) until want_inside handlers run at once, or
     * the gate opens for a blocking item. */
    while ((seen.inside < want_inside && seen.most < want_inside) || (it->blocks && !seen.gate))
        if (pthread_cond_timedwait(&seen.cv, &seen.mu, &until) != 0)
            break;
    seen.inside--;
    pthread_mutex_unlock(&seen.mu);
}

static int ran(void)
{
    pthread_mutex_lock(&seen.mu);
    int n = seen.nran;
    pthread_mutex_unlock(&seen.mu);
    return n;
}

static void wait_ran(int n)
{
    pthread_mutex_lock(&seen.mu);
    while (seen.nran < n)
        pthread_cond_wait(&seen.cv, &seen.mu);
    pthread_mutex_unlock(&seen.mu);
}

static void open_gate(void)
{
    pthread_mutex_lock(&seen.mu);
    seen.gate = true;
    pthread_cond_broadcast(&seen.cv);
    pthread_mutex_unlock(&seen.mu);
}

static int one = 1;

START_TEST(one_thread_runs_items_in_the_order_pushed)
{
    static struct zr_workq q = ZR_WORKQ_INIT;
    static struct item items[NITEMS];
    reset();
    ck_assert_int_eq(zr_workq_start(&q, 1, handler, &one), 0);
    for (int k = 0; k < NITEMS; k++) {
        items[k] = (struct item){.id = k};
        ck_assert(zr_workq_push(&q, &items[k].q));
    }
    zr_workq_stop(&q, true);
    ck_assert_int_eq(ran(), NITEMS);
    for (int k = 0; k < NITEMS; k++)
        ck_assert_int_eq(seen.order[k], k);
}
END_TEST

START_TEST(n_threads_run_items_at_once_and_all_of_them)
{
    static struct zr_workq q = ZR_WORKQ_INIT;
    static struct item items[4 * NITEMS];
    /* Every handler waits until four run at once: fewer threads would
     * leave them waiting until the timeout, and most below four. */
    static int four = 4;
    reset();
    ck_assert_int_eq(zr_workq_start(&q, 4, handler, &four), 0);
    for (int k = 0; k < 4 * NITEMS; k++) {
        items[k] = (struct item){.id = k};
        ck_assert(zr_workq_push(&q, &items[k].q));
    }
    zr_workq_stop(&q, true);
    ck_assert_int_eq(ran(), 4 * NITEMS);
    ck_assert_int_eq(seen.most, 4);
}
END_TEST

START_TEST(a_queue_not_started_or_stopped_takes_no_items)
{
    static struct zr_workq q = ZR_WORKQ_INIT;
    struct item it = {.id = 0};
    reset();
    zr_workq_stop(&q, true);
    ck_assert(!zr_workq_push(&q, &it.q));
    ck_assert(!zr_workq_call(&q, &it.q));
    ck_assert_int_eq(zr_workq_start(&q, 1, handler, &one), 0);
    zr_workq_stop(&q, false);
    ck_assert(!zr_workq_push(&q, &it.q));
    ck_assert_int_eq(ran(), 0);
    ck_assert_int_eq(zr_workq_start(&q, 1, handler, &one), 0);
    ck_assert(zr_workq_call(&q, &it.q));
    zr_workq_stop(&q, true);
    ck_assert_int_eq(ran(), 1);
}
END_TEST

START_TEST(pushing_a_queued_item_again_runs_it_once)
{
    static struct zr_workq q = ZR_WORKQ_INIT;
    struct item block = {.id = 0, .blocks = true}, it = {.id = 1};
    reset();
    ck_assert_int_eq(zr_workq_start(&q, 1, handler, &one), 0);
    ck_assert(zr_workq_push(&q, &block.q));
    wait_ran(1);
    ck_assert(zr_workq_push(&q, &it.q));
    ck_assert(zr_workq_push(&q, &it.q));
    ck_assert(zr_workq_has_more(&q));
    open_gate();
    zr_workq_stop(&q, true);
    ck_assert_int_eq(ran(), 2);
}
END_TEST

static struct zr_workq stop_q = ZR_WORKQ_INIT;
static bool stop_drain;

static void *stopper(void *arg)
{
    (void)arg;
    zr_workq_stop(&stop_q, stop_drain);
    return NULL;
}

static struct item waited_item = {.id = 100};

/* Peeks at the queue's lock: the item is on the FIFO once the caller's
 * push has happened. */
static bool waited_item_queued(void)
{
    pthread_mutex_lock(&stop_q.mu);
    bool queued = waited_item.q.queued;
    pthread_mutex_unlock(&stop_q.mu);
    return queued;
}

static void *caller(void *arg)
{
    (void)arg;
    return zr_workq_call(&stop_q, &waited_item.q) ? &waited_item : NULL;
}

/* A thread busy with a blocking item; NITEMS more queued behind it, and
 * one more that a caller waits for; then a stop, drain or not. Returns
 * whether the caller's wait said its item ran. */
static bool stop_behind_a_busy_thread(bool drain)
{
    static struct item items[NITEMS];
    struct item block = {.id = -1, .blocks = true};
    pthread_t stop_th, call_th;
    void *called;
    reset();
    stop_drain = drain;
    ck_assert_int_eq(zr_workq_start(&stop_q, 1, handler, &one), 0);
    ck_assert(zr_workq_push(&stop_q, &block.q));
    wait_ran(1);
    for (int k = 0; k < NITEMS; k++) {
        items[k] = (struct item){.id = k};
        ck_assert(zr_workq_push(&stop_q, &items[k].q));
    }
    waited_item.q = (struct zr_qitem){0};
    ck_assert_int_eq(pthread_create(&call_th, NULL, caller, NULL), 0);
    while (!waited_item_queued())
        sched_yield();
    ck_assert_int_eq(pthread_create(&stop_th, NULL, stopper, NULL), 0);
    if (!drain) {
        /* The caller returns only once the stop has dropped its item,
         * while the thread is still held by the blocking one. */
        ck_assert_int_eq(pthread_join(call_th, &called), 0);
        ck_assert_int_eq(ran(), 1);
    }
    open_gate();
    ck_assert_int_eq(pthread_join(stop_th, NULL), 0);
    if (drain)
        ck_assert_int_eq(pthread_join(call_th, &called), 0);
    return called != NULL;
}

START_TEST(stop_with_drain_runs_every_queued_item_first)
{
    ck_assert(stop_behind_a_busy_thread(true));
    ck_assert_int_eq(ran(), 1 + NITEMS + 1);
    for (int k = 0; k < NITEMS; k++)
        ck_assert_int_eq(seen.order[1 + k], k);
}
END_TEST

START_TEST(stop_without_drain_drops_queued_items_and_frees_their_waiters)
{
    ck_assert(!stop_behind_a_busy_thread(false));
    ck_assert_int_eq(ran(), 1);
}
END_TEST

static void slow_handler(void *arg, struct zr_qitem *qi)
{
    (void)arg;
    struct timespec ms = {0, 5000000};
    nanosleep(&ms, NULL);
    ZR_WORKQ_ENTRY(qi, struct item, q)->id = -1;
}

START_TEST(call_returns_after_the_handler_has_run)
{
    static struct zr_workq q = ZR_WORKQ_INIT;
    ck_assert_int_eq(zr_workq_start(&q, 2, slow_handler, NULL), 0);
    for (int k = 0; k < 8; k++) {
        struct item it = {.id = k};
        ck_assert(zr_workq_call(&q, &it.q));
        ck_assert_int_eq(it.id, -1);
    }
    zr_workq_stop(&q, true);
}
END_TEST

Suite *suite_workq(void)
{
    Suite *s = suite_create("workq");
    TCase *tc = tcase_create("workq");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, one_thread_runs_items_in_the_order_pushed);
    tcase_add_test(tc, n_threads_run_items_at_once_and_all_of_them);
    tcase_add_test(tc, a_queue_not_started_or_stopped_takes_no_items);
    tcase_add_test(tc, pushing_a_queued_item_again_runs_it_once);
    tcase_add_test(tc, stop_with_drain_runs_every_queued_item_first);
    tcase_add_test(tc, stop_without_drain_drops_queued_items_and_frees_their_waiters);
    tcase_add_test(tc, call_returns_after_the_handler_has_run);
    suite_add_tcase(s, tc);
    return s;
}

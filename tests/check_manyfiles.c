/*
 * check_manyfiles.c: stores of more files than a process may keep open or
 * mapped. A handle opens and maps its chunk files and loc segments when it
 * uses them and holds a bounded number (lib/tables.c, "The cache"), so a
 * store of 100,000 chunks opens, gathers, verifies and appends under a
 * limit of 64 descriptors; a limit still hit is ZR_ELIMIT, not a crash;
 * and gathers from several threads stay exact while the cache gives
 * descriptors and mappings up under them.
 *
 * The large store is written by hand (tiny chunks, records where appends
 * lay them out), which takes seconds where appending through the engine
 * would sync every chunk it gives up. Expected bytes come from the
 * records.h generator, never from the engine. The limits are set in a
 * child process, whose failures come back through a pipe: Check's
 * assertions belong to the test's own process.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine.h"
#include "io.h"
#include "tests/helpers.h"
#include "tests/records.h"
#include "tests/suites.h"

#define SEED 7100
#define WIDTH 16                 /* Dense |u1 records of 16 bytes */
#define PER_CHUNK 3
#define CHUNK (PER_CHUNK * WIDTH) /* chunk capacity: three records */
#define SEG 256                  /* entries per loc segment */
#define BIG_CHUNKS 100000
#define BIG_RECORDS (BIG_CHUNKS * PER_CHUNK - 1) /* the last chunk holds two */
#define NOFILE 64
#define BATCH 256

static void put32(uint8_t *p, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        p[k] = (uint8_t)(v >> (8 * k));
}

static void write_file(const char *dir, const char *name, const void *buf, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
    ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
    ck_assert_int_eq(close(fd), 0);
}

/* A Dense raw store of n records of stream SEED at path, made empty by the
 * library (for store.zr) and filled by hand: record i at byte
 * (i % PER_CHUNK) * WIDTH of chunk i / PER_CHUNK, as appends lay them out,
 * its entry at i % SEG of segment i / SEG, and the header. The geometry
 * stays set for the test's handles. */
static void build_dense(const char *path, uint64_t n)
{
    zr_testing_set_geometry(CHUNK, SEG);
    uint64_t shape = WIDTH;
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, path, "|u1", &shape, 1, NULL));
    zr_close(s);
    uint8_t chunk[CHUNK], entries[SEG * 16];
    char name[32];
    uint64_t nchunks = (n + PER_CHUNK - 1) / PER_CHUNK;
    for (uint64_t c = 0; c < nchunks; c++) {
        uint64_t first = c * PER_CHUNK, k = 0;
        for (; k < PER_CHUNK && first + k < n; k++)
            zt_fill(chunk + k * WIDTH, "|u1", WIDTH, SEED, first + k);
        snprintf(name, sizeof name, "%llu.chunk", (unsigned long long)c);
        write_file(path, name, chunk, k * WIDTH);
    }
    for (uint64_t g = 0; g * SEG < n; g++) {
        uint64_t k = 0;
        for (; k < SEG && g * SEG + k < n; k++) {
            uint64_t i = g * SEG + k;
            uint8_t *e = entries + k * 16;
            put32(e, (uint32_t)(i % PER_CHUNK * WIDTH));
            put32(e + 4, WIDTH);
            put32(e + 8, WIDTH);
            put32(e + 12, (uint32_t)(i / PER_CHUNK));
        }
        snprintf(name, sizeof name, "%llu.loc", (unsigned long long)g);
        write_file(path, name, entries, k * 16);
    }
    uint64_t tail = (n - 1) / PER_CHUNK;
    zt_meta_write(path, (zt_meta){.length = n, .tail_chunk = (uint32_t)tail,
                                  .tail_offset = (uint32_t)((n - tail * PER_CHUNK) * WIDTH)});
}

/* Random indices below n with repeats and pairs that cross a chunk's end,
 * from the xorshift state *x. */
static void pick(uint64_t *x, uint64_t n, uint64_t *idx, size_t m)
{
    for (size_t k = 0; k < m; k++) {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        if (k % 8 == 7)
            idx[k] = idx[k / 2];                          /* a repeat */
        else if (k % 8 == 3 && idx[k - 1] % PER_CHUNK == PER_CHUNK - 1 && idx[k - 1] + 1 < n)
            idx[k] = idx[k - 1] + 1;                      /* the next chunk's first */
        else
            idx[k] = *x % n;
    }
}

/* What a child reports: the first failure, empty when all went well. */
struct report {
    char msg[1024];
};

static bool child_fail(struct report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool child_fail(struct report *r, const char *fmt, ...)
{
    if (r->msg[0])
        return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    return false;
}

/* Run fn(arg, report) in a child whose RLIMIT_NOFILE is nofile, and fail
 * the test with what it reports, or if it dies. */
static void in_child(rlim_t nofile, bool (*fn)(void *, struct report *), void *arg)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(p[0]);
        struct report r = {""};
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        rl.rlim_cur = nofile;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            child_fail(&r, "setrlimit(RLIMIT_NOFILE, %llu): %s", (unsigned long long)nofile,
                 strerror(errno));
        else if (!fn(arg, &r) && !r.msg[0])
            child_fail(&r, "failed without a message");
        ssize_t w = write(p[1], r.msg, strlen(r.msg));
        _exit(w >= 0 && !r.msg[0] ? 0 : 1);
    }
    close(p[1]);
    char buf[1024] = "";
    size_t got = 0;
    ssize_t k;
    while (got + 1 < sizeof buf && (k = read(p[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)k;
    close(p[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status), "the child died of signal %d", WTERMSIG(status));
    ck_assert_msg(WEXITSTATUS(status) == 0, "%s", buf);
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

/* How many of this process's descriptors and mappings are of files of the
 * folder dir. */
static int descriptors_of(const char *dir)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        char link[300], target[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(link, target, sizeof target - 1);
        if (len > 0) {
            target[len] = '\0';
            n += strncmp(target, dir, strlen(dir)) == 0 &&
                 (ends_with(target, ".chunk") || ends_with(target, ".loc"));
        }
    }
    if (d)
        closedir(d);
    return n;
}

static int mappings_of(const char *dir)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4352];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, dir) != NULL;
    if (f)
        fclose(f);
    return n;
}

static bool gather_batches(zr_store *s, uint64_t n, uint64_t seed, int batches, struct report *r)
{
    uint64_t x = seed, idx[BATCH];
    for (int b = 0; b < batches; b++) {
        pick(&x, n, idx, BATCH);
        int rc;
        if (!zt_dense_matches(s, SEED, idx, BATCH, &rc))
            return child_fail(r, "batch %d: rc %d (%s), or bytes differ from the generator", b, rc,
                        rc ? zr_last_error() : "");
    }
    return true;
}

/* Open the store under NOFILE descriptors, gather random batches, verify
 * it, append to it, and read the appends back after a reopen; the handle
 * holds no more descriptors and mappings than its bounds. */
static bool big_store(void *arg, struct report *r)
{
    const char *path = arg;
    char *real = realpath(path, NULL);
    zr_store *s;
    int rc = zr_open(&s, path, ZR_RDWR);
    if (rc != 0)
        return child_fail(r, "open: %d %s", rc, zr_last_error());
    if (zr_len(s) != BIG_RECORDS)
        return child_fail(r, "length %llu", (unsigned long long)zr_len(s));
    if (!gather_batches(s, BIG_RECORDS, 88172645463325252ull, 60, r))
        return false;
    int fds = descriptors_of(real), maps = mappings_of(real);
    if (fds > NOFILE / 4)
        return child_fail(r, "the handle holds %d descriptors of the store, more than %d", fds,
                    NOFILE / 4);
    if (maps > 2 * 1024)
        return child_fail(r, "the process maps %d windows of the store", maps);
    zr_verify_report *rep = NULL;
    rc = zr_verify(s, &rep);
    if (rc != 0 || rep->nproblems != 0)
        return child_fail(r, "verify: %d %s", rc, zr_last_error());
    zr_verify_report_free(rep);
    enum { ADD = 500 };
    uint64_t shape = WIDTH, first;
    void *data = zt_dense_gen("|u1", WIDTH, SEED, BIG_RECORDS, ADD);
    rc = zr_append_dense(s, "|u1", &shape, 1, data, ADD, &first);
    free(data);
    if (rc != 0 || first != BIG_RECORDS)
        return child_fail(r, "append: %d %s", rc, zr_last_error());
    if ((rc = zr_sync(s)) != 0)
        return child_fail(r, "sync: %d %s", rc, zr_last_error());
    zr_close(s);
    if ((rc = zr_open(&s, path, ZR_RDONLY)) != 0)
        return child_fail(r, "reopen: %d %s", rc, zr_last_error());
    uint64_t tail[ADD + 2];
    for (uint64_t k = 0; k < ADD; k++)
        tail[k] = BIG_RECORDS + ADD - 1 - k;
    tail[ADD] = 0;
    tail[ADD + 1] = BIG_RECORDS - 1;
    if (!zt_dense_matches(s, SEED, tail, ADD + 2, &rc))
        return child_fail(r, "the appended records after reopen: rc %d %s", rc, zr_last_error());
    if (!gather_batches(s, BIG_RECORDS + ADD, 2463534242ull, 10, r))
        return false;
    zr_close(s);
    free(real);
    return true;
}

START_TEST(store_of_100000_chunks_opens_gathers_verifies_and_appends_under_64_descriptors)
{
    char *path = zt_path("big");
    build_dense(path, BIG_RECORDS);
    in_child(NOFILE, big_store, path);
    free(path);
}
END_TEST

/* Leave this process room for exactly `room` more descriptors: a limit
 * just above the room-th free number. */
static bool leave_room(int room, struct report *r)
{
    int limit = 0;
    for (int free_ = 0; free_ < room || fcntl(limit, F_GETFD) != -1; limit++)
        free_ += fcntl(limit, F_GETFD) == -1;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = (rlim_t)limit;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        return child_fail(r, "setrlimit: %s", strerror(errno));
    return true;
}

/* A store opened before the process ran out of descriptors: a gather that
 * needs a chunk file fails with ZR_ELIMIT, saying which limit. */
static bool no_room_for_a_chunk(void *arg, struct report *r)
{
    zr_store *s;
    int rc = zr_open(&s, arg, ZR_RDONLY);
    if (rc != 0)
        return child_fail(r, "open: %d %s", rc, zr_last_error());
    if (!leave_room(0, r))
        return false;
    uint64_t idx = 4;
    uint8_t rec[WIDTH];
    rc = zr_gather_dense(s, &idx, 1, rec);
    if (rc != ZR_ELIMIT || !strstr(zr_last_error(), "RLIMIT_NOFILE"))
        return child_fail(r, "gather under no room: %d '%s'", rc, zr_last_error());
    zr_close(s);
    return true;
}

/* With no room at all, opening fails with ZR_ELIMIT. */
static bool no_room_at_all(void *arg, struct report *r)
{
    zr_store *s;
    if (!leave_room(0, r))
        return false;
    int rc = zr_open(&s, arg, ZR_RDONLY);
    if (rc != ZR_ELIMIT)
        return child_fail(r, "open under no room: %d '%s'", rc, zr_last_error());
    return true;
}

START_TEST(a_limit_still_hit_is_elimit)
{
    char *path = zt_path("small");
    build_dense(path, 30);
    in_child(NOFILE, no_room_for_a_chunk, path);
    in_child(NOFILE, no_room_at_all, path);
    free(path);
}
END_TEST

/* ---- concurrent gathers while the cache evicts ---------------------- */

#define RACE_CHUNKS 3000
#define RACE_RECORDS (RACE_CHUNKS * PER_CHUNK - 1)
#define THREADS 4

struct race {
    zr_store *s;
    uint64_t seed;
    _Atomic int *stop;
    struct report r;
};

/* Gather random batches; every fourth thread also takes records by
 * reference (zr_record_span), which keeps their chunks mapped while the
 * others' mappings come and go. */
static void *race_reader(void *arg)
{
    struct race *c = arg;
    uint64_t x = c->seed, idx[64];
    for (int b = 0; b < 150 && !atomic_load(c->stop); b++) {
        pick(&x, RACE_RECORDS, idx, 64);
        int rc;
        if (!zt_dense_matches(c->s, SEED, idx, 64, &rc)) {
            child_fail(&c->r, "batch %d: rc %d (%s), or bytes differ", b, rc, rc ? zr_last_error() : "");
            break;
        }
        if (c->seed % THREADS != 0)
            continue;
        const void *p;
        uint64_t size;
        uint8_t want[WIDTH];
        zt_fill(want, "|u1", WIDTH, SEED, idx[0]);
        if ((rc = zr_record_span(c->s, idx[0], &p, &size)) != 0 || size != WIDTH ||
            memcmp(p, want, WIDTH) != 0) {
            child_fail(&c->r, "span of %llu: rc %d (%s), or bytes differ",
                 (unsigned long long)idx[0], rc, rc ? zr_last_error() : "");
            break;
        }
    }
    if (c->r.msg[0])
        atomic_store(c->stop, 1);
    return NULL;
}

START_TEST(concurrent_gathers_are_exact_while_the_cache_evicts)
{
    char *path = zt_path("race");
    build_dense(path, RACE_RECORDS);
    zr_testing_set_cache(4, 4);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zr_testing_set_cache(0, 0);
    _Atomic int stop = 0;
    struct race c[THREADS];
    pthread_t th[THREADS];
    for (int k = 0; k < THREADS; k++) {
        c[k] = (struct race){.s = s, .seed = 0x9e3779b97f4a7c15ull * (uint64_t)(k + 1) + (uint64_t)k,
                             .stop = &stop};
        c[k].seed += (uint64_t)k - c[k].seed % THREADS; /* seed % THREADS == k */
        ck_assert_int_eq(pthread_create(&th[k], NULL, race_reader, &c[k]), 0);
    }
    for (int k = 0; k < THREADS; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < THREADS; k++)
        ck_assert_msg(!c[k].r.msg[0], "thread %d: %s", k, c[k].r.msg);
    zr_verify_report *rep;
    ZR_OK_CALL(zr_verify(s, &rep));
    zr_verify_report_free(rep);
    zr_close(s);
    free(path);
}
END_TEST

/* ---- a child of fork() ------------------------------------------------ */

#define FORK_CHUNKS 600
#define FORK_RECORDS (FORK_CHUNKS * PER_CHUNK - 1)

/* A parent thread that holds what a gather holds in the middle of its
 * work: a pinned descriptor and a read section, until told to stop. */
struct holder {
    zr_store *s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stage; /* 1: holding, 2: let go */
};

static void *hold(void *arg)
{
    struct holder *h = arg;
    int fd;
    int rc = zr_file_fd(h->s, &h->s->chunks, 0, ZR_FD_READ, &fd);
    unsigned rs = zr_read_enter(h->s);
    pthread_mutex_lock(&h->mu);
    h->stage = 1;
    pthread_cond_broadcast(&h->cv);
    while (h->stage != 2)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    zr_read_leave(h->s, rs);
    if (rc == 0)
        zr_file_put(h->s, &h->s->chunks, 0);
    return NULL;
}

struct forked {
    zr_store *s;
    const char *path;
};

/* In the child: the parent's holder thread is not there, but its pin and
 * read section were copied; gathers over every chunk must neither wait
 * for that pin nor keep every mapping they give up. */
static bool forked_gathers(void *arg, struct report *r)
{
    struct forked *f = arg;
    alarm(60); /* a child that waits for ever dies of SIGALRM: a failure */
    if (!gather_batches(f->s, FORK_RECORDS, 0xf0f0f0f0ull, 40, r))
        return false;
    int maps = mappings_of(f->path);
    if (maps > 64)
        return child_fail(r, "%d mappings of the store's files after the gathers (bound 4)", maps);
    return true;
}

/* A handle used in a child of fork() made while another thread of the
 * parent held a descriptor pinned and a read section open, through a cache
 * of one descriptor and four mappings. */
START_TEST(a_forked_child_gathers_through_the_cache)
{
    char *path = zt_path("forked");
    build_dense(path, FORK_RECORDS);
    zr_testing_set_cache(1, 4);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zr_testing_set_cache(0, 0);
    struct holder h = {.s = s, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, hold, &h), 0);
    pthread_mutex_lock(&h.mu);
    while (h.stage != 1)
        pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);
    struct forked f = {.s = s, .path = path};
    in_child(NOFILE, forked_gathers, &f);
    pthread_mutex_lock(&h.mu);
    h.stage = 2;
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.mu);
    pthread_join(th, NULL);
    zr_close(s);
    free(path);
}
END_TEST

/* ---- a failed sync of a descriptor the cache closed ------------------ */

static zr_store *sync_store;
static pthread_t sync_thread;
static int sync_armed, sync_failures;

static void *evicting_gather(void *arg)
{
    (void)arg;
    uint64_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    uint8_t out[8 * WIDTH];
    (void)zr_gather_dense(sync_store, idx, 8, out);
    return NULL;
}

/* fdatasync as the disk does it here: on the syncing thread it works, and
 * while it runs a gather on another thread opens files, closing a written
 * descriptor, whose fdatasync fails. */
static int failing_fdatasync(int fd)
{
    if (!pthread_equal(pthread_self(), sync_thread)) {
        sync_failures++;
        errno = EIO;
        return -1;
    }
    if (sync_armed) {
        sync_armed = 0;
        pthread_t t;
        if (pthread_create(&t, NULL, evicting_gather, NULL) == 0)
            pthread_join(t, NULL);
    }
    return zr_io_default.fdatasync(fd);
}

/* R14 through the cache: a written file whose descriptor a concurrent
 * gather closes during zr_sync, and whose fdatasync then fails, fails the
 * sync, which must not make the header durable, and the handle stops. */
START_TEST(a_failed_sync_at_eviction_fails_zr_sync)
{
    char *path = zt_path("evicted");
    zr_testing_set_geometry(4 * WIDTH, 16);
    zr_testing_set_cache(2, 64);
    const uint64_t shape = WIDTH;
    uint8_t rec[14 * WIDTH];
    for (size_t i = 0; i < sizeof rec; i++)
        rec[i] = (uint8_t)i;
    ZR_OK_CALL(zr_dense_create(&sync_store, path, "|u1", &shape, 1, NULL));
    zr_testing_set_cache(0, 0);
    ZR_OK_CALL(zr_append_dense(sync_store, "|u1", &shape, 1, rec, 8, NULL));
    ZR_OK_CALL(zr_sync(sync_store));
    ZR_OK_CALL(zr_append_dense(sync_store, "|u1", &shape, 1, rec + 8 * WIDTH, 4, NULL));
    ZR_OK_CALL(zr_append_dense(sync_store, "|u1", &shape, 1, rec + 12 * WIDTH, 2, NULL));
    sync_thread = pthread_self();
    sync_armed = 1;
    sync_failures = 0;
    zr_io.fdatasync = failing_fdatasync;
    int rc = zr_sync(sync_store);
    int again = zr_sync(sync_store);
    zr_io.fdatasync = zr_io_default.fdatasync;
    ck_assert_msg(sync_failures > 0, "the gather closed no written descriptor: nothing tested");
    ck_assert_int_eq(rc, ZR_EIO);
    ck_assert_int_eq(again, ZR_EIO);
    zr_close(sync_store);
    zr_testing_set_geometry(0, 0);
    free(path);
}
END_TEST

/* ---- a compressed Ragged store written through a small cache -------- */

#define RAGGED_RECORDS 6000
#define MAXNDIM 2
#define MAXDIM 9

static bool ragged_store(void *arg, struct report *r)
{
    const char *path = arg;
    zr_store *s;
    int rc = zr_open(&s, path, ZR_RDONLY);
    if (rc != 0)
        return child_fail(r, "open: %d %s", rc, zr_last_error());
    uint64_t x = 1181783497276652981ull, idx[BATCH];
    for (int b = 0; b < 30; b++) {
        pick(&x, RAGGED_RECORDS, idx, BATCH);
        if (!zt_ragged_matches(s, SEED, idx, BATCH, MAXNDIM, MAXDIM, &rc))
            return child_fail(r, "batch %d: rc %d (%s), or bytes differ", b, rc,
                        rc ? zr_last_error() : "");
    }
    zr_verify_report *rep = NULL;
    rc = zr_verify(s, &rep);
    if (rc != 0 || rep->nproblems != 0)
        return child_fail(r, "verify: %d %s", rc, zr_last_error());
    zr_verify_report_free(rep);
    zr_close(s);
    return true;
}

/* Appends through a cache of 8 descriptors close written chunks as they
 * go (each synced first); what they wrote reads back exactly in a process
 * of NOFILE descriptors. */
START_TEST(ragged_zstd_store_written_through_a_small_cache_reads_back)
{
    char *path = zt_path("ragged");
    zr_testing_set_geometry(512, 64);
    zr_testing_set_cache(8, 8);
    zr_create_opts o = ZR_CREATE_OPTS_INIT;
    o.codec = ZR_CODEC_ZSTD;
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, path, "<i2", &o));
    for (int k = 0; k < 6; k++)
        zt_append_ragged_gen(s, SEED, RAGGED_RECORDS / 6, MAXNDIM, MAXDIM);
    ZR_OK_CALL(zr_sync(s));
    zr_close(s);
    char *last = zt_path("ragged/200.chunk");
    ck_assert_msg(access(last, F_OK) == 0, "the store has fewer than 200 chunks");
    free(last);
    in_child(NOFILE, ragged_store, path);
    zr_testing_set_cache(0, 0);
    free(path);
}
END_TEST

Suite *suite_manyfiles(void)
{
    Suite *s = suite_create("manyfiles");
    TCase *tc = tcase_create("manyfiles");
    tcase_add_checked_fixture(tc, zt_setup, zt_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, store_of_100000_chunks_opens_gathers_verifies_and_appends_under_64_descriptors);
    tcase_add_test(tc, a_limit_still_hit_is_elimit);
    tcase_add_test(tc, concurrent_gathers_are_exact_while_the_cache_evicts);
    tcase_add_test(tc, ragged_zstd_store_written_through_a_small_cache_reads_back);
    tcase_add_test(tc, a_forked_child_gathers_through_the_cache);
    tcase_add_test(tc, a_failed_sync_at_eviction_fails_zr_sync);
    suite_add_tcase(s, tc);
    return s;
}

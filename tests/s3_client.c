/*
 * s3_client.c: the S3 client (lib/s3.c) against a real server and against
 * a scripted one. tests/s3/t_client.sh runs it under tests/s3/run.sh,
 * which starts radosgw and exports AWS_ENDPOINT_URL, the keys, AWS_REGION
 * and LOADERX_TEST_BUCKET; without them it skips (exit 77).
 *
 * The expectations are independent of the client: objects are written
 * by boto3 (tests/s3/peer.py, LOADERX_S3_PEER) and read by the client,
 * and the client's uploads are read back by boto3, byte for byte. The
 * scripted server (fake_*) is a thread answering with fixed statuses, for
 * what a real server does not do on demand: 503s, a 200 to a ranged GET,
 * silence.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "s3.h"

static const char *bucket;
static const char *peer_path;
static char run_prefix[64]; /* this run's keys start with it */
static char tmpdir[256];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)(x >> 24);
    }
}

static char *path_in_tmp(const char *name)
{
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(len ? (size_t)len : 1);
    ck_assert_uint_eq(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

/* Run peer.py with args (NULL-terminated after the bucket); its stdout
 * into out. */
static void peer(char *out, size_t outn, const char *cmd, ...)
{
    const char *argv[12] = {"python3", peer_path, cmd, bucket};
    int argc = 4;
    va_list ap;
    va_start(ap, cmd);
    const char *a;
    while ((a = va_arg(ap, const char *)) && argc < 11)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        execv("/usr/bin/python3", (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    size_t got = 0;
    ssize_t r;
    char sink[256];
    while ((r = read(pfd[0], out && got < outn - 1 ? out + got : sink,
                     out && got < outn - 1 ? outn - 1 - got : sizeof sink)) > 0)
        if (out && got < outn - 1)
            got += (size_t)r;
    if (out)
        out[got] = '\0';
    close(pfd[0]);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "peer.py %s failed", cmd);
}

static char *key(const char *name)
{
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/%s", run_prefix, name);
    return p;
}

/* A client for this run's prefix. */
static struct zr_s3 *client(void)
{
    char url[512];
    snprintf(url, sizeof url, "s3://%s/%s", bucket, run_prefix);
    struct zr_s3 *c = NULL;
    int rc = zr_s3_open(&c, url);
    ck_assert_msg(rc == 0, "zr_s3_open: %s", zr_last_error());
    return c;
}

/* An object of n bytes written by boto3, its bytes in *data. */
static void peer_object(const char *name, size_t n, uint64_t seed, uint8_t **data)
{
    uint8_t *p = malloc(n ? n : 1);
    fill(p, n, seed);
    const char *f = path_in_tmp("up.bin");
    write_file(f, p, n);
    peer(NULL, 0, "put", key(name), f, NULL);
    *data = p;
}

/* Whether the object written by the client is these bytes, read by boto3. */
static void peer_check(const char *name, const uint8_t *p, size_t n)
{
    const char *f = path_in_tmp("down.bin");
    peer(NULL, 0, "get", key(name), f, NULL);
    size_t m;
    uint8_t *q = read_file(f, &m);
    ck_assert_uint_eq(m, n);
    ck_assert_msg(memcmp(p, q, n) == 0, "%s differs as boto3 reads it", name);
    free(q);
}

/* Ranged reads. */

struct done_log {
    pthread_t thread;
    size_t calls;
    size_t fail_at; /* 0: never */
    uint8_t *seen;  /* per tag */
};

static int on_done(void *arg, const struct zr_s3_range *r)
{
    struct done_log *d = arg;
    ck_assert(pthread_equal(d->thread, pthread_self()));
    d->calls++;
    if (d->seen) {
        ck_assert_int_eq(d->seen[r->tag], 0);
        d->seen[r->tag] = 1;
    }
    if (d->fail_at && d->calls == d->fail_at)
        return zr_err(ZR_ERANGE, "stopped by the callback at %zu", d->calls);
    return 0;
}

/* n ranges of obj (size bytes) at random offsets, lengths up to maxlen,
 * plus the object's ends; their destinations in one buffer. */
static struct zr_s3_range *random_ranges(const char *name, size_t size, size_t n, size_t maxlen,
                                         uint64_t seed, uint8_t **buf)
{
    struct zr_s3_range *r = calloc(n, sizeof *r);
    uint64_t x = seed | 1;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t len = 1 + x % maxlen;
        if (len > size)
            len = size;
        uint64_t off = (x >> 20) % (size - len + 1);
        if (i == 0)
            off = 0; /* the first bytes */
        if (i == 1)
            off = size - len; /* the last bytes */
        if (i == 2) {
            off = size - 1; /* the last byte alone */
            len = 1;
        }
        r[i] = (struct zr_s3_range){.name = name, .off = off, .len = len, .tag = i};
        total += len;
    }
    *buf = malloc(total);
    total = 0;
    for (size_t i = 0; i < n; i++) {
        r[i].to = *buf + total;
        total += r[i].len;
    }
    return r;
}

static void check_ranges(const struct zr_s3_range *r, size_t n, const uint8_t *data)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(r[i].to, data + r[i].off, r[i].len) == 0,
                      "range %zu (%llu+%llu) differs", i, (unsigned long long)r[i].off,
                      (unsigned long long)r[i].len);
}

START_TEST(ranges_of_boto3_objects_match_byte_for_byte)
{
    const size_t n1 = (5u << 20) + 123, n2 = (20u << 20) + 7;
    uint8_t *d1, *d2;
    peer_object("r/single.bin", n1, 1, &d1);
    peer_object("r/multipart.bin", n2, 2, &d2); /* boto3 uploads it in 8 MiB parts */
    struct zr_s3 *c = client();
    uint8_t *b1, *b2;
    struct zr_s3_range *r1 = random_ranges("r/single.bin", n1, 200, 300000, 11, &b1);
    struct zr_s3_range *r2 = random_ranges("r/multipart.bin", n2, 100, 3u << 20, 12, &b2);
    uint8_t seen[200] = {0};
    struct done_log d = {.thread = pthread_self(), .seen = seen};
    int rc = zr_s3_get_ranges(c, r1, 200, 16, on_done, &d);
    ck_assert_msg(rc == 0, "%s", zr_last_error());
    ck_assert_uint_eq(d.calls, 200);
    check_ranges(r1, 200, d1);
    /* A whole object as one range. */
    r2[3].off = 0;
    r2[3].len = 0;
    uint8_t *whole = malloc(n2);
    struct zr_s3_range w = {.name = "r/multipart.bin", .off = 0, .len = n2, .to = whole};
    rc = zr_s3_get_ranges(c, &w, 1, 0, NULL, NULL);
    ck_assert_msg(rc == 0, "%s", zr_last_error());
    ck_assert(memcmp(whole, d2, n2) == 0);
    d = (struct done_log){.thread = pthread_self()};
    rc = zr_s3_get_ranges(c, r2, 100, 0, on_done, &d);
    ck_assert_msg(rc == 0, "%s", zr_last_error());
    ck_assert_uint_eq(d.calls, 100); /* the empty range too, without a request */
    check_ranges(r2, 100, d2);
    zr_s3_close(c);
    free(whole);
    free(r1);
    free(r2);
    free(b1);
    free(b2);
    free(d1);
    free(d2);
}
END_TEST

START_TEST(a_thousand_ranges_at_inflight_32_reuse_connections)
{
    const size_t size = 8u << 20, n = 1000;
    uint8_t *data;
    peer_object("r/many.bin", size, 3, &data);
    struct zr_s3 *c = client();
    struct zr_s3_stats st0, st1, st2;
    zr_s3_stats(c, &st0);
    for (int round = 0; round < 2; round++) {
        uint8_t *buf;
        struct zr_s3_range *r = random_ranges("r/many.bin", size, n, 4096, 20 + round, &buf);
        for (size_t i = 3; i < n; i++)
            r[i].len = ZR_MIN(r[i].len, 4096);
        struct done_log d = {.thread = pthread_self()};
        double t = now_s();
        int rc = zr_s3_get_ranges(c, r, n, 32, on_done, &d);
        t = now_s() - t;
        ck_assert_msg(rc == 0, "%s", zr_last_error());
        ck_assert_uint_eq(d.calls, n);
        check_ranges(r, n, data);
        zr_s3_stats(c, round ? &st2 : &st1);
        printf("%zu ranges of up to 4 KiB at inflight 32: %.3f s, %.0f/s\n", n, t, (double)n / t);
        free(r);
        free(buf);
    }
    printf("requests %llu, connections %llu, retries %llu\n",
           (unsigned long long)(st2.requests - st0.requests),
           (unsigned long long)(st2.connects - st0.connects),
           (unsigned long long)(st2.retries - st0.retries));
    ck_assert_uint_eq(st2.requests - st0.requests, 2 * n);
    /* The first batch opens at most one connection per transfer slot, the
     * second reuses them. */
    ck_assert_uint_le(st1.connects - st0.connects, 32);
    ck_assert_uint_le(st2.connects - st0.connects, 32);
    zr_s3_close(c);
    free(data);
}
END_TEST

struct thread_arg {
    struct zr_s3 *c;
    const uint8_t *data;
    size_t size;
    uint64_t seed;
    int rc;
};

static void *range_thread(void *p)
{
    struct thread_arg *a = p;
    uint8_t *buf;
    struct zr_s3_range *r = random_ranges("r/threads.bin", a->size, 300, 20000, a->seed, &buf);
    struct done_log d = {.thread = pthread_self()};
    for (int k = 0; k < 3 && a->rc == 0; k++)
        a->rc = zr_s3_get_ranges(a->c, r, 300, 8, on_done, &d);
    if (a->rc == 0) {
        for (size_t i = 0; i < 300; i++)
            if (memcmp(r[i].to, a->data + r[i].off, r[i].len) != 0)
                a->rc = -1000;
    }
    free(r);
    free(buf);
    return NULL;
}

START_TEST(threads_share_a_client)
{
    const size_t size = 3u << 20;
    uint8_t *data;
    peer_object("r/threads.bin", size, 4, &data);
    struct zr_s3 *c = client();
    pthread_t th[4];
    struct thread_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (struct thread_arg){.c = c, .data = data, .size = size, .seed = 100 + (uint64_t)i};
        pthread_create(&th[i], NULL, range_thread, &a[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(a[i].rc == 0, "thread %d: %d", i, a[i].rc);
    }
    struct zr_s3_stats st;
    zr_s3_stats(c, &st);
    ck_assert_uint_le(st.connects, 4 * 8);
    zr_s3_close(c);
    free(data);
}
END_TEST

START_TEST(short_and_missing_objects_are_corrupt_stores)
{
    uint8_t *data;
    peer_object("r/short.bin", 1000, 5, &data);
    struct zr_s3 *c = client();
    uint8_t buf[2000];
    struct zr_s3_range past = {.name = "r/short.bin", .off = 1000, .len = 10, .to = buf};
    ck_assert_int_eq(zr_s3_get_ranges(c, &past, 1, 0, NULL, NULL), ZR_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "r/short.bin"));
    ck_assert_ptr_nonnull(strstr(zr_last_error(), bucket));
    struct zr_s3_range across = {.name = "r/short.bin", .off = 900, .len = 200, .to = buf};
    ck_assert_int_eq(zr_s3_get_ranges(c, &across, 1, 0, NULL, NULL), ZR_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "r/short.bin"));
    struct zr_s3_range gone = {.name = "r/absent.bin", .off = 0, .len = 10, .to = buf};
    ck_assert_int_eq(zr_s3_get_ranges(c, &gone, 1, 0, NULL, NULL), ZR_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "r/absent.bin"));
    struct zr_s3_stats st;
    zr_s3_stats(c, &st);
    ck_assert_uint_eq(st.retries, 0); /* 404 and 416 are final */
    zr_s3_close(c);
    free(data);
}
END_TEST

START_TEST(a_failing_callback_stops_the_batch)
{
    const size_t size = 1u << 20;
    uint8_t *data;
    peer_object("r/stop.bin", size, 6, &data);
    struct zr_s3 *c = client();
    uint8_t *buf;
    struct zr_s3_range *r = random_ranges("r/stop.bin", size, 500, 4096, 7, &buf);
    struct done_log d = {.thread = pthread_self(), .fail_at = 10};
    ck_assert_int_eq(zr_s3_get_ranges(c, r, 500, 16, on_done, &d), ZR_ERANGE);
    ck_assert_uint_eq(d.calls, 10);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "stopped by the callback"));
    /* The client is still usable, its session clean. */
    d = (struct done_log){.thread = pthread_self()};
    ck_assert_int_eq(zr_s3_get_ranges(c, r, 500, 16, on_done, &d), 0);
    check_ranges(r, 500, data);
    zr_s3_close(c);
    free(r);
    free(buf);
    free(data);
}
END_TEST

/* Whole objects, PUT and DELETE. */

START_TEST(get_reads_small_objects_and_tells_missing_ones)
{
    uint8_t *data, *empty;
    peer_object("g/small.bin", 70000, 8, &data);
    peer_object("g/empty.bin", 0, 9, &empty);
    struct zr_s3 *c = client();
    void *buf;
    size_t len;
    ck_assert_int_eq(zr_s3_get(c, "g/small.bin", 70000, &buf, &len, false), 0);
    ck_assert_uint_eq(len, 70000);
    ck_assert(memcmp(buf, data, len) == 0);
    free(buf);
    ck_assert_int_eq(zr_s3_get(c, "g/small.bin", 69999, &buf, &len, false), ZR_ECORRUPT);
    ck_assert_ptr_null(buf);
    ck_assert_int_eq(zr_s3_get(c, "g/empty.bin", 10, &buf, &len, false), 0);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(len, 0);
    free(buf);
    ck_assert_int_eq(zr_s3_get(c, "g/absent", 10, &buf, &len, true), 0);
    ck_assert_ptr_null(buf);
    ck_assert_int_eq(zr_s3_get(c, "g/absent", 10, &buf, &len, false), ZR_ENOTSTORE);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "404"));
    zr_s3_close(c);
    free(data);
    free(empty);
}
END_TEST

START_TEST(put_and_delete_with_names_that_need_encoding)
{
    static const char *const names[] = {
        "p/a b+c.bin", "p/per%cent&amp;=?#.bin", "p/ünïcödé-日本-😀.bin", "p/tilde~star*(1).bin",
        "p/a/../b.bin",
    };
    struct zr_s3 *c = client();
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        uint8_t p[3000];
        fill(p, sizeof p, 30 + i);
        int rc = zr_s3_put(c, names[i], p, sizeof p);
        ck_assert_msg(rc == 0, "%s: %s", names[i], zr_last_error());
        peer_check(names[i], p, sizeof p);
        void *buf;
        size_t len;
        ck_assert_int_eq(zr_s3_get(c, names[i], 1u << 20, &buf, &len, false), 0);
        ck_assert_uint_eq(len, sizeof p);
        ck_assert(memcmp(buf, p, len) == 0);
        free(buf);
    }
    struct zr_s3_obj *o;
    size_t n;
    ck_assert_int_eq(zr_s3_list(c, "p/", false, &o, &n), 0);
    ck_assert_uint_eq(n, sizeof names / sizeof names[0]);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        bool found = false;
        for (size_t j = 0; j < n; j++)
            found |= strcmp(o[j].name, names[i]) == 0 && o[j].size == 3000 && !o[j].dir;
        ck_assert_msg(found, "%s is not listed", names[i]);
    }
    zr_s3_list_free(o, n);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_int_eq(zr_s3_delete(c, names[i]), 0);
    void *buf;
    size_t len;
    ck_assert_int_eq(zr_s3_get(c, names[0], 10, &buf, &len, false), ZR_ENOTSTORE);
    ck_assert_int_eq(zr_s3_delete(c, names[0]), 0); /* missing: no error */
    zr_s3_close(c);
}
END_TEST

static void upload_and_check(struct zr_s3 *c, const char *name, size_t size, unsigned inflight)
{
    uint8_t *p = malloc(size ? size : 1);
    fill(p, size, size);
    const char *f = path_in_tmp("putfile.bin");
    write_file(f, p, size);
    int fd = open(f, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    double t = now_s();
    int rc = zr_s3_put_file(c, name, fd, size, inflight);
    t = now_s() - t;
    ck_assert_msg(rc == 0, "%s: %s", name, zr_last_error());
    close(fd);
    printf("put_file %zu bytes: %.2f s\n", size, t);
    peer_check(name, p, size);
    free(p);
}

START_TEST(put_file_single_and_multipart_read_back_by_boto3)
{
    struct zr_s3 *c = client();
    const size_t mib = 1u << 20;
    upload_and_check(c, "u/empty.bin", 0, 0);
    upload_and_check(c, "u/1m.bin", mib + 3, 0);
    upload_and_check(c, "u/16m.bin", 16 * mib, 0);      /* the largest single PUT */
    upload_and_check(c, "u/16m1.bin", 16 * mib + 1, 0); /* two parts, the second of 1 byte */
    upload_and_check(c, "u/32m.bin", 32 * mib, 2);      /* two full parts */
    upload_and_check(c, "u/40m.bin", 40 * mib + 5, 0);  /* 16 + 16 + 8 MiB */
    char out[64];
    peer(out, sizeof out, "uploads", key("u/40m.bin"), NULL);
    ck_assert_int_eq(atoi(out), 0);
    zr_s3_close(c);
}
END_TEST

START_TEST(a_failed_multipart_upload_is_aborted)
{
    struct zr_s3 *c = client();
    const size_t size = 20u << 20;
    uint8_t *p = malloc(size);
    fill(p, size, 77);
    const char *f = path_in_tmp("short.bin");
    write_file(f, p, size);
    int fd = open(f, O_RDONLY);
    /* The file has 20 MiB, the call says 40: the second part runs dry. */
    int rc = zr_s3_put_file(c, "u/aborted.bin", fd, 2 * size, 0);
    ck_assert_int_eq(rc, ZR_EIO);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "ended before"));
    close(fd);
    char out[64];
    peer(out, sizeof out, "uploads", key("u/aborted.bin"), NULL);
    ck_assert_int_eq(atoi(out), 0);
    void *buf;
    size_t len;
    ck_assert_int_eq(zr_s3_get(c, "u/aborted.bin", 10, &buf, &len, false), ZR_ENOTSTORE);
    zr_s3_close(c);
    free(p);
}
END_TEST

START_TEST(list_follows_continuation_and_rolls_up_prefixes)
{
    peer(NULL, 0, "many", key("l/flat/o"), "1100", NULL);
    peer(NULL, 0, "many", key("l/d1/x"), "3", NULL);
    peer(NULL, 0, "many", key("l/d2/y"), "2", NULL);
    peer(NULL, 0, "many", key("l/top "), "2", NULL);
    struct zr_s3 *c = client();
    struct zr_s3_obj *o;
    size_t n;
    ck_assert_int_eq(zr_s3_list(c, "l/flat/", false, &o, &n), 0);
    ck_assert_uint_eq(n, 1100);
    uint8_t *seen = calloc(1100, 1);
    for (size_t i = 0; i < n; i++) {
        unsigned k;
        ck_assert_int_eq(sscanf(o[i].name, "l/flat/o%u", &k), 1);
        ck_assert_uint_lt(k, 1100);
        ck_assert_int_eq(seen[k], 0);
        seen[k] = 1;
        char body[32];
        ck_assert_uint_eq(o[i].size, (uint64_t)snprintf(body, sizeof body, "object %u", k));
    }
    free(seen);
    zr_s3_list_free(o, n);
    ck_assert_int_eq(zr_s3_list(c, "l/", true, &o, &n), 0);
    ck_assert_uint_eq(n, 5);
    int dirs = 0, files = 0;
    for (size_t i = 0; i < n; i++) {
        if (o[i].dir) {
            dirs++;
            ck_assert(strcmp(o[i].name, "l/flat") == 0 || strcmp(o[i].name, "l/d1") == 0 ||
                      strcmp(o[i].name, "l/d2") == 0);
        } else {
            files++;
            ck_assert(strcmp(o[i].name, "l/top 0") == 0 || strcmp(o[i].name, "l/top 1") == 0);
        }
    }
    ck_assert_int_eq(dirs, 3);
    ck_assert_int_eq(files, 2);
    zr_s3_list_free(o, n);
    ck_assert_int_eq(zr_s3_list(c, "l/nothing-here", false, &o, &n), 0);
    ck_assert_uint_eq(n, 0);
    zr_s3_list_free(o, n);
    zr_s3_close(c);
}
END_TEST

/* Refusals and failures. */

START_TEST(a_wrong_secret_is_eaccess_and_never_shown)
{
    uint8_t *data;
    peer_object("a/x.bin", 100, 10, &data);
    char real[256];
    snprintf(real, sizeof real, "%s", getenv("AWS_SECRET_ACCESS_KEY"));
    const char *wrong = "WRONGsecretWRONGsecretWRONGsecret0123456";
    setenv("AWS_SECRET_ACCESS_KEY", wrong, 1);
    struct zr_s3 *c = client();
    void *buf;
    size_t len;
    ck_assert_int_eq(zr_s3_get(c, "a/x.bin", 1000, &buf, &len, false), ZR_EACCESS);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "403"));
    ck_assert_ptr_null(strstr(zr_last_error(), wrong));
    ck_assert_ptr_null(strstr(zr_last_error(), real));
    uint8_t b[10];
    struct zr_s3_range r = {.name = "a/x.bin", .len = 10, .to = b};
    ck_assert_int_eq(zr_s3_get_ranges(c, &r, 1, 0, NULL, NULL), ZR_EACCESS);
    ck_assert_ptr_null(strstr(zr_last_error(), wrong));
    ck_assert_int_eq(zr_s3_put(c, "a/y.bin", b, 10), ZR_EACCESS);
    struct zr_s3_obj *o;
    size_t n;
    ck_assert_int_eq(zr_s3_list(c, "", false, &o, &n), ZR_EACCESS);
    struct zr_s3_stats st;
    zr_s3_stats(c, &st);
    ck_assert_uint_eq(st.retries, 0);
    zr_s3_close(c);
    free(data);
}
END_TEST

START_TEST(a_missing_bucket_is_enotstore)
{
    struct zr_s3 *c = NULL;
    ck_assert_int_eq(zr_s3_open(&c, "s3://loaderx-no-such-bucket-4711/p"), 0);
    void *buf;
    size_t len;
    ck_assert_int_eq(zr_s3_get(c, "x", 10, &buf, &len, true), ZR_ENOTSTORE);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "NoSuchBucket"));
    struct zr_s3_obj *o;
    size_t n;
    ck_assert_int_eq(zr_s3_list(c, "", true, &o, &n), ZR_ENOTSTORE);
    uint8_t b[10];
    struct zr_s3_range r = {.name = "x", .len = 10, .to = b};
    ck_assert_int_eq(zr_s3_get_ranges(c, &r, 1, 0, NULL, NULL), ZR_ECORRUPT);
    ck_assert_int_eq(zr_s3_delete(c, "x"), ZR_ENOTSTORE);
    zr_s3_close(c);
}
END_TEST

/* A port on 127.0.0.1 with nothing listening (a socket bound and closed). */
static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t al = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &al);
    close(s);
    return ntohs(a.sin_port);
}

static void point_at(int port)
{
    char ep[64];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", port);
    setenv("AWS_ENDPOINT_URL", ep, 1);
    unsetenv("AWS_ENDPOINT_URL_S3");
}

START_TEST(nothing_listening_is_eio_within_seconds)
{
    point_at(free_port());
    struct zr_s3 *c = client();
    void *buf;
    size_t len;
    double t = now_s();
    ck_assert_int_eq(zr_s3_get(c, "x", 10, &buf, &len, false), ZR_EIO);
    t = now_s() - t;
    printf("refused: %.2f s: %s\n", t, zr_last_error());
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "127.0.0.1"));
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "4 attempts"));
    ck_assert(t < 60);
    uint8_t b[10];
    struct zr_s3_range r[3] = {{.name = "x", .len = 10, .to = b},
                               {.name = "y", .len = 10, .to = b},
                               {.name = "z", .len = 10, .to = b}};
    ck_assert_int_eq(zr_s3_get_ranges(c, r, 3, 0, NULL, NULL), ZR_EIO);
    zr_s3_close(c);
}
END_TEST

/* The scripted server: answers each request on its own connection. */
enum fake_mode { FAKE_503_THEN_OK, FAKE_403, FAKE_WHOLE };
struct fake {
    int lfd;
    int port;
    enum fake_mode mode;
    int n503; /* 503s before the first good answer */
    int served;
    pthread_t th;
    const uint8_t *body;
    size_t len;
    char last[4096]; /* the last request's head */
    pthread_mutex_t lock;
};

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    for (;;) {
        int fd = accept(f->lfd, NULL, NULL);
        if (fd < 0)
            return NULL;
        char req[4096];
        size_t got = 0;
        ssize_t r;
        while (got < sizeof req - 1 && (r = read(fd, req + got, sizeof req - 1 - got)) > 0) {
            got += (size_t)r;
            req[got] = '\0';
            if (strstr(req, "\r\n\r\n"))
                break;
        }
        req[got] = '\0';
        pthread_mutex_lock(&f->lock);
        memcpy(f->last, req, got + 1);
        int k = f->served++;
        pthread_mutex_unlock(&f->lock);
        char head[256];
        const void *body = f->body;
        size_t blen = f->len;
        if (f->mode == FAKE_403 || (f->mode == FAKE_503_THEN_OK && k < f->n503)) {
            bool deny = f->mode == FAKE_403;
            body = deny ? "<Error><Code>AccessDenied</Code></Error>"
                        : "<Error><Code>SlowDown</Code></Error>";
            blen = strlen(body);
            snprintf(head, sizeof head, "HTTP/1.1 %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n", deny ? "403 Forbidden" : "503 Slow Down", blen);
        } else {
            snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n", blen);
        }
        send(fd, head, strlen(head), MSG_NOSIGNAL);
        send(fd, body, blen, MSG_NOSIGNAL);
        close(fd);
    }
}

static void fake_start(struct fake *f, enum fake_mode mode)
{
    f->mode = mode;
    pthread_mutex_init(&f->lock, NULL);
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t al = sizeof a;
    getsockname(f->lfd, (struct sockaddr *)&a, &al);
    f->port = ntohs(a.sin_port);
    ck_assert_int_eq(listen(f->lfd, 64), 0);
    if (mode != (enum fake_mode)-1)
        pthread_create(&f->th, NULL, fake_main, f);
    point_at(f->port);
}

static void fake_stop(struct fake *f)
{
    shutdown(f->lfd, SHUT_RDWR);
    if (f->mode != (enum fake_mode)-1)
        pthread_join(f->th, NULL);
    close(f->lfd);
}

START_TEST(a_503_is_retried_and_a_403_is_not)
{
    uint8_t data[5000];
    fill(data, sizeof data, 40);
    struct fake f = {.body = data, .len = sizeof data, .n503 = 2};
    fake_start(&f, FAKE_503_THEN_OK);
    struct zr_s3 *c = client();
    void *buf;
    size_t len;
    ck_assert_int_eq(zr_s3_get(c, "x", sizeof data, &buf, &len, false), 0);
    ck_assert_uint_eq(len, sizeof data);
    ck_assert(memcmp(buf, data, len) == 0);
    free(buf);
    struct zr_s3_stats st;
    zr_s3_stats(c, &st);
    ck_assert_uint_eq(st.retries, 2);
    ck_assert_uint_eq(st.requests, 3);
    /* Four 503s are one too many. */
    f.served = 0;
    f.n503 = 4;
    ck_assert_int_eq(zr_s3_get(c, "x", sizeof data, &buf, &len, false), ZR_EIO);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "503 SlowDown"));
    zr_s3_close(c);
    fake_stop(&f);

    struct fake g = {0};
    fake_start(&g, FAKE_403);
    c = client();
    ck_assert_int_eq(zr_s3_get(c, "x", 10, &buf, &len, false), ZR_EACCESS);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "AccessDenied"));
    zr_s3_stats(c, &st);
    ck_assert_uint_eq(st.requests, 1);
    zr_s3_close(c);
    fake_stop(&g);
}
END_TEST

START_TEST(a_200_to_a_ranged_get_is_cut_to_the_range)
{
    const size_t size = 300000;
    uint8_t *data = malloc(size);
    fill(data, size, 41);
    struct fake f = {.body = data, .len = size};
    fake_start(&f, FAKE_WHOLE);
    struct zr_s3 *c = client();
    uint8_t *buf;
    struct zr_s3_range *r = random_ranges("x", size, 20, 50000, 42, &buf);
    ck_assert_int_eq(zr_s3_get_ranges(c, r, 20, 4, NULL, NULL), 0);
    check_ranges(r, 20, data);
    struct zr_s3_range past = {.name = "x", .off = size - 10, .len = 20, .to = buf};
    ck_assert_int_eq(zr_s3_get_ranges(c, &past, 1, 0, NULL, NULL), ZR_ECORRUPT);
    zr_s3_close(c);
    fake_stop(&f);
    free(r);
    free(buf);
    free(data);
}
END_TEST

START_TEST(a_silent_server_times_out)
{
    struct fake f = {0};
    fake_start(&f, (enum fake_mode)-1); /* listens, never accepts */
    setenv("LOADERX_S3_TIMEOUT", "1", 1);
    struct zr_s3 *c = client();
    void *buf;
    size_t len;
    double t = now_s();
    ck_assert_int_eq(zr_s3_get(c, "x", 10, &buf, &len, false), ZR_EIO);
    t = now_s() - t;
    printf("silent server, LOADERX_S3_TIMEOUT=1: %.2f s: %s\n", t, zr_last_error());
    ck_assert(t < 60);
    zr_s3_close(c);
    fake_stop(&f);
}
END_TEST

START_TEST(requests_are_signed_only_with_credentials)
{
    uint8_t data[10] = "0123456789";
    struct fake f = {.body = data, .len = sizeof data};
    fake_start(&f, FAKE_WHOLE);
    setenv("AWS_SESSION_TOKEN", "the-session-token", 1);
    struct zr_s3 *c = client();
    void *buf;
    size_t len;
    ck_assert_int_eq(zr_s3_get(c, "k", 10, &buf, &len, false), 0);
    free(buf);
    zr_s3_close(c);
    ck_assert_ptr_nonnull(strstr(f.last, "Authorization: AWS4-HMAC-SHA256 Credential="));
    ck_assert_ptr_nonnull(strstr(f.last, "x-amz-security-token: the-session-token"));
    ck_assert_ptr_nonnull(strstr(f.last, "x-amz-content-sha256: UNSIGNED-PAYLOAD"));

    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_SESSION_TOKEN");
    unsetenv("AWS_PROFILE");
    setenv("AWS_SHARED_CREDENTIALS_FILE", path_in_tmp("none"), 1);
    setenv("AWS_CONFIG_FILE", path_in_tmp("none"), 1);
    c = client();
    ck_assert_int_eq(zr_s3_get(c, "k", 10, &buf, &len, false), 0);
    free(buf);
    zr_s3_close(c);
    ck_assert_ptr_null(strstr(f.last, "Authorization:"));
    fake_stop(&f);
}
END_TEST

/* Configuration. */

START_TEST(profile_files_configure_the_client)
{
    char ep[256], id[256], secret[256];
    snprintf(ep, sizeof ep, "%s", getenv("AWS_ENDPOINT_URL"));
    snprintf(id, sizeof id, "%s", getenv("AWS_ACCESS_KEY_ID"));
    snprintf(secret, sizeof secret, "%s", getenv("AWS_SECRET_ACCESS_KEY"));
    FILE *f = fopen(path_in_tmp("credentials"), "w");
    fprintf(f, "[default]\naws_access_key_id = WRONG\naws_secret_access_key = WRONG\n\n"
               "# the test's profile\n[zrtest]\naws_access_key_id=%s\n"
               "aws_secret_access_key = %s  \r\n",
            id, secret);
    fclose(f);
    f = fopen(path_in_tmp("config"), "w");
    fprintf(f, "[default]\nregion = eu-west-9\n[profile zrtest]\nregion = %s\n"
               "s3 =\n  addressing_style = path\nendpoint_url = %s\n",
            getenv("AWS_REGION") ? getenv("AWS_REGION") : "us-east-1", ep);
    fclose(f);
    setenv("AWS_SHARED_CREDENTIALS_FILE", path_in_tmp("credentials"), 1);
    setenv("AWS_CONFIG_FILE", path_in_tmp("config"), 1);
    setenv("AWS_PROFILE", "zrtest", 1);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_SESSION_TOKEN");
    unsetenv("AWS_ENDPOINT_URL");
    unsetenv("AWS_ENDPOINT_URL_S3");
    unsetenv("AWS_REGION");
    unsetenv("AWS_DEFAULT_REGION");
    struct zr_s3 *c = client();
    uint8_t p[100];
    fill(p, sizeof p, 50);
    int rc = zr_s3_put(c, "cfg/x.bin", p, sizeof p);
    ck_assert_msg(rc == 0, "%s", zr_last_error());
    void *buf;
    size_t len;
    ck_assert_int_eq(zr_s3_get(c, "cfg/x.bin", 100, &buf, &len, false), 0);
    ck_assert(len == sizeof p && memcmp(buf, p, len) == 0);
    free(buf);
    zr_s3_close(c);

    /* The environment wins over the files: a wrong key in it is refused. */
    setenv("AWS_ACCESS_KEY_ID", id, 1);
    setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret", 1);
    c = client();
    ck_assert_int_eq(zr_s3_get(c, "cfg/x.bin", 100, &buf, &len, false), ZR_EACCESS);
    zr_s3_close(c);

    /* The default profile is the file's [default]. */
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_PROFILE");
    setenv("AWS_ENDPOINT_URL", ep, 1);
    c = client();
    ck_assert_int_eq(zr_s3_get(c, "cfg/x.bin", 100, &buf, &len, false), ZR_EACCESS);
    zr_s3_close(c);
}
END_TEST

START_TEST(malformed_addresses_and_settings_are_einval)
{
    struct zr_s3 *c = NULL;
    ck_assert(zr_s3_is_url("s3://b"));
    ck_assert(!zr_s3_is_url("/s3://b"));
    ck_assert_int_eq(zr_s3_open(&c, "s3://"), ZR_EINVAL);
    ck_assert_int_eq(zr_s3_open(&c, "s3:///p"), ZR_EINVAL);
    ck_assert_int_eq(zr_s3_open(&c, "s3://a b/p"), ZR_EINVAL);
    ck_assert_int_eq(zr_s3_open(&c, "http://b/p"), ZR_EINVAL);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(zr_s3_open(&c, "s3://b//p/q//"), 0);
    ck_assert_str_eq(zr_s3_url(c), "s3://b/p/q");
    zr_s3_close(c);
    zr_s3_close(NULL);
    setenv("AWS_PROFILE", "loaderx-no-such-profile", 1);
    ck_assert_int_eq(zr_s3_open(&c, "s3://b"), ZR_EINVAL);
    unsetenv("AWS_PROFILE");
    setenv("LOADERX_S3_CONNECTIONS", "0", 1);
    ck_assert_int_eq(zr_s3_open(&c, "s3://b"), ZR_EINVAL);
    unsetenv("LOADERX_S3_CONNECTIONS");
    setenv("AWS_ENDPOINT_URL", "ftp://example.invalid", 1);
    ck_assert_int_eq(zr_s3_open(&c, "s3://b"), ZR_EINVAL);
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1/", 1);
    unsetenv("AWS_SECRET_ACCESS_KEY");
    setenv("AWS_ACCESS_KEY_ID", "AKIDONLY", 1);
    ck_assert_int_eq(zr_s3_open(&c, "s3://b"), ZR_EINVAL);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "AWS_SECRET_ACCESS_KEY"));
}
END_TEST

static Suite *suite_s3(void)
{
    Suite *s = suite_create("s3");
    TCase *t = tcase_create("config");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, malformed_addresses_and_settings_are_einval);
    tcase_add_test(t, requests_are_signed_only_with_credentials);
    suite_add_tcase(s, t);
    t = tcase_create("scripted");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, a_503_is_retried_and_a_403_is_not);
    tcase_add_test(t, a_200_to_a_ranged_get_is_cut_to_the_range);
    tcase_add_test(t, a_silent_server_times_out);
    tcase_add_test(t, nothing_listening_is_eio_within_seconds);
    suite_add_tcase(s, t);
    t = tcase_create("server");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, profile_files_configure_the_client);
    tcase_add_test(t, ranges_of_boto3_objects_match_byte_for_byte);
    tcase_add_test(t, a_thousand_ranges_at_inflight_32_reuse_connections);
    tcase_add_test(t, threads_share_a_client);
    tcase_add_test(t, short_and_missing_objects_are_corrupt_stores);
    tcase_add_test(t, a_failing_callback_stops_the_batch);
    tcase_add_test(t, get_reads_small_objects_and_tells_missing_ones);
    tcase_add_test(t, put_and_delete_with_names_that_need_encoding);
    tcase_add_test(t, put_file_single_and_multipart_read_back_by_boto3);
    tcase_add_test(t, a_failed_multipart_upload_is_aborted);
    tcase_add_test(t, list_follows_continuation_and_rolls_up_prefixes);
    tcase_add_test(t, a_wrong_secret_is_eaccess_and_never_shown);
    tcase_add_test(t, a_missing_bucket_is_enotstore);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    bucket = getenv("LOADERX_TEST_BUCKET");
    peer_path = getenv("LOADERX_S3_PEER");
    if (!bucket || !*bucket || !getenv("AWS_ENDPOINT_URL") || !peer_path) {
        fprintf(stderr, "s3_client: LOADERX_TEST_BUCKET, AWS_ENDPOINT_URL and LOADERX_S3_PEER "
                        "are needed (tests/s3/run.sh sets them): skipped\n");
        return 77;
    }
    signal(SIGPIPE, SIG_IGN);
    snprintf(run_prefix, sizeof run_prefix, "s3client-%d-%ld", (int)getpid(), (long)time(NULL));
    snprintf(tmpdir, sizeof tmpdir, "%s/s3client.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR")
                                                                           : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    SRunner *sr = srunner_create(suite_s3());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "s3_client: could not remove %s\n", tmpdir);
    return failed == 0 ? 0 : 1;
}

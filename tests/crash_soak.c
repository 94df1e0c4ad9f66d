/*
 * crash_soak.c: the kill soak. A child process runs appends, deletes and
 * compactions from several threads on one store (the operations are
 * serialised by the library; the child reports each one to the parent
 * through a pipe before it starts and after it is acknowledged). The
 * parent SIGKILLs the child at a random moment, reopens the store,
 * verifies it, and checks that it equals the state before or the state
 * after the operation that was in flight, every acknowledged record intact
 * bit for bit. Then it starts the next cycle on the same store.
 *
 * usage: crash_soak [--cycles N] [--seed S] [--dir DIR]
 * Exit status 0 when every cycle matched, 1 otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "tests/idrecords.h"
#include "tests/model.h"

#define MAXREC 2000
#define THREADS 3
#define OP_APPEND 1
#define OP_DELETE 2
#define OP_COMPACT 3
#define MAX_DEL 8

struct report {
    uint32_t end; /* 0 = about to start, 1 = acknowledged */
    uint32_t op;
    uint32_t n;
    int32_t rc;
    uint64_t first_id;
    uint64_t idx[MAX_DEL];
};

static const char *store_path;
static int report_fd;
static pthread_mutex_t op_lock = PTHREAD_MUTEX_INITIALIZER;
static zr_store *child_store;
static uint64_t cycle_no;

static void send_report(const struct report *r)
{
    /* Reports are smaller than PIPE_BUF, so each write is atomic. */
    if (write(report_fd, r, sizeof *r) != (ssize_t)sizeof *r)
        _exit(3);
}

static void *child_thread(void *arg)
{
    uint64_t t = (uint64_t)(uintptr_t)arg;
    for (uint64_t k = 0;; k++) {
        uint64_t r = zt_mix(cycle_no * 7919 + t * 104729 + k);
        pthread_mutex_lock(&op_lock);
        uint64_t len = zr_len(child_store);
        struct report rep = {0};
        int pick = (int)(r % 100);
        if (pick < (len > 3000 ? 20 : 65) || len < 10) {
            rep.op = OP_APPEND;
            rep.n = 1 + (uint32_t)((r >> 8) % 24);
            rep.first_id = (cycle_no << 32) | (t << 24) | (k << 5);
        } else if (pick < 93) {
            rep.op = OP_DELETE;
            rep.n = 1 + (uint32_t)((r >> 8) % MAX_DEL);
            for (uint32_t j = 0; j < rep.n; j++)
                rep.idx[j] = zt_mix(r + j) % len;
        } else {
            rep.op = OP_COMPACT;
        }
        send_report(&rep);
        if (rep.op == OP_APPEND) {
            uint64_t ids[32];
            for (uint32_t j = 0; j < rep.n; j++)
                ids[j] = rep.first_id + j;
            rep.rc = zt_append_ids(child_store, ids, rep.n, MAXREC);
        } else if (rep.op == OP_DELETE) {
            rep.rc = zr_delete(child_store, rep.idx, rep.n);
        } else {
            rep.rc = zr_compact(child_store, NULL);
        }
        rep.end = 1;
        send_report(&rep);
        pthread_mutex_unlock(&op_lock);
        if (rep.rc != 0)
            _exit(4);
    }
    return NULL;
}

static void run_child(int fd)
{
    report_fd = fd;
    if (zr_open(&child_store, store_path, ZR_RDWR) != 0) {
        fprintf(stderr, "crash_soak: child open: %s\n", zr_last_error());
        _exit(2);
    }
    pthread_t th[THREADS];
    for (uintptr_t t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, child_thread, (void *)t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    _exit(0);
}

static void apply(zt_model *m, const struct report *r)
{
    if (r->op == OP_APPEND) {
        uint64_t ids[32];
        for (uint32_t j = 0; j < r->n; j++)
            ids[j] = r->first_id + j;
        zt_model_append(m, ids, r->n);
    } else if (r->op == OP_DELETE) {
        zt_model_delete(m, r->idx, r->n);
    }
}

static long parse_long(const char *s)
{
    return strtol(s, NULL, 10);
}

int main(int argc, char **argv)
{
    long cycles = 20, seed = 1;
    const char *dir = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--cycles") == 0)
            cycles = parse_long(argv[i + 1]);
        else if (strcmp(argv[i], "--seed") == 0)
            seed = parse_long(argv[i + 1]);
        else if (strcmp(argv[i], "--dir") == 0)
            dir = argv[i + 1];
    }
    char tmpl[] = "/tmp/loaderx-soak-XXXXXX";
    if (!dir && !(dir = mkdtemp(tmpl))) {
        perror("mkdtemp");
        return 1;
    }
    static char path[4096];
    snprintf(path, sizeof path, "%s/store", dir);
    store_path = path;
    zr_testing_set_geometry(64 << 10, 256);
    zr_store *s;
    if (zr_ragged_create(&s, path, "|u1", &(zr_create_opts){.size = sizeof(zr_create_opts),
                                                            .codec = ZR_CODEC_ZSTD}) != 0) {
        fprintf(stderr, "crash_soak: create: %s\n", zr_last_error());
        return 1;
    }
    zr_close(s);
    zt_model model = {0}, after = {0};
    long in_flight = 0, finished_after = 0, ops_total = 0;
    for (long c = 0; c < cycles; c++) {
        cycle_no = (uint64_t)c + 1;
        int p[2];
        if (pipe(p) != 0) {
            perror("pipe");
            return 1;
        }
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            run_child(p[1]);
        }
        close(p[1]);
        fcntl(p[0], F_SETFL, O_NONBLOCK);
        size_t cap = 1 << 16, used = 0;
        uint8_t *buf = malloc(cap);
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        long delay_ms = 2 + (long)(zt_mix((uint64_t)seed * 31 + (uint64_t)c) % 80);
        for (int killed = 0, done = 0; !done;) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            long el = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
            if (!killed && el >= delay_ms) {
                kill(pid, SIGKILL);
                killed = 1;
            }
            struct pollfd pf = {.fd = p[0], .events = POLLIN};
            poll(&pf, 1, killed ? 100 : 1);
            for (;;) {
                if (used == cap)
                    buf = realloc(buf, cap *= 2);
                ssize_t r = read(p[0], buf + used, cap - used);
                if (r > 0) {
                    used += (size_t)r;
                    continue;
                }
                if (r == 0)
                    done = 1;
                break;
            }
        }
        close(p[0]);
        int status;
        waitpid(pid, &status, 0);
        if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
            fprintf(stderr, "crash_soak: cycle %ld: child ended on its own (status %d)\n", c, status);
            return 1;
        }
        const struct report *reps = (const struct report *)buf;
        size_t nrep = used / sizeof *reps;
        const struct report *pending = NULL;
        for (size_t k = 0; k < nrep; k++) {
            if (!reps[k].end) {
                pending = &reps[k];
                continue;
            }
            apply(&model, &reps[k]);
            pending = NULL;
            ops_total++;
        }
        zt_model_copy(&after, &model);
        if (pending) {
            apply(&after, pending);
            in_flight++;
        }
        if (zr_open(&s, path, ZR_RDWR) != 0) {
            fprintf(stderr, "crash_soak: cycle %ld: reopen: %s\n", c, zr_last_error());
            return 1;
        }
        zr_verify_report *rep;
        if (zr_verify(s, &rep) != 0) {
            fprintf(stderr, "crash_soak: cycle %ld: verify: %s\n", c, zr_last_error());
            return 1;
        }
        zr_verify_report_free(rep);
        char why1[256], why2[256] = "";
        if (zt_model_matches(s, &model, MAXREC, why1, sizeof why1) != 0) {
            if (!pending || zt_model_matches(s, &after, MAXREC, why2, sizeof why2) != 0) {
                fprintf(stderr, "crash_soak: cycle %ld: store is neither before (%s) nor after (%s)\n",
                        c, why1, why2);
                return 1;
            }
            zt_model_copy(&model, &after);
            finished_after++;
        }
        zr_close(s);
        free(buf);
    }
    printf("crash_soak: %ld kill cycles, %ld acknowledged operations, %ld killed in flight "
           "(%ld found finished), %llu records at the end: all intact\n",
           cycles, ops_total, in_flight, finished_after, (unsigned long long)model.len);
    zt_model_free(&model);
    zt_model_free(&after);
    if (dir == tmpl) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
        if (system(cmd) != 0)
            return 1;
    }
    return 0;
}

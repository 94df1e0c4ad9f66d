/*
 * check_lock.c: the store lock across processes. A forked child opens the
 * store and holds it while the parent tries its own opens; the two talk
 * through pipes (the child reports its open's result, the parent tells it
 * when to let go), so no test depends on timing. A conflicting open must
 * fail at once with ZR_EBUSY rather than wait.
 *
 * Children report only through pipes; the parent checks that they exited
 * rather than crashed, not their exit status, which a memory checker may
 * change when it reports the parent's heap copied into the child.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine.h"
#include "tests/helpers.h"
#include "tests/records.h"
#include "tests/suites.h"

#define SEED 300

struct holder {
    pid_t pid;
    int report; /* read end: the child's open result */
    int release; /* write end: a byte (or closing it) lets the child go */
};

/* Fork a child that opens path in mode, reports the result, and holds the
 * handle until released. The child uses no Check calls: it reports
 * through the pipe and its exit status. */
static struct holder hold(const char *path, int mode)
{
    int rep[2], rel[2];
    ck_assert_int_eq(pipe(rep), 0);
    ck_assert_int_eq(pipe(rel), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(rep[0]);
        close(rel[1]);
        zr_store *s;
        int rc = zr_open(&s, path, mode);
        if (write(rep[1], &rc, sizeof rc) != sizeof rc)
            _exit(2);
        char b;
        if (read(rel[0], &b, 1) < 0)
            _exit(3);
        zr_close(s);
        _exit(0);
    }
    close(rep[1]);
    close(rel[0]);
    struct holder h = {.pid = pid, .report = rep[0], .release = rel[1]};
    int rc = 1;
    ck_assert_int_eq(read(h.report, &rc, sizeof rc), (ssize_t)sizeof rc);
    ck_assert_msg(rc == 0, "the child's open gave %d", rc);
    return h;
}

static void let_go(struct holder *h)
{
    ck_assert_int_eq(write(h->release, "x", 1), 1);
    int status;
    ck_assert_int_eq(waitpid(h->pid, &status, 0), h->pid);
    ck_assert(WIFEXITED(status));
    close(h->report);
    close(h->release);
}

/* Fork a child that reports to the parent through a pipe. Returns 0 in
 * the child, with *fd the write end, and the child's pid in the parent,
 * with *fd the read end. */
static pid_t fork_reporting(int *fd)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    close(p[pid == 0 ? 0 : 1]);
    *fd = p[pid == 0 ? 1 : 0];
    return pid;
}

/* In the parent: read the child's report (len bytes), wait until every
 * process holding the pipe has gone (end of file), reap the child and
 * return its wait status, having checked it exited rather than crashed. */
static int collect(pid_t pid, int fd, void *report, size_t len)
{
    ck_assert_int_eq(read(fd, report, len), (ssize_t)len);
    char b;
    ck_assert_int_eq(read(fd, &b, 1), 0);
    close(fd);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    return status;
}

static char *make_store(void)
{
    char *path = zt_path("s");
    zr_store *s;
    const uint64_t shape[] = {16};
    ZR_OK_CALL(zr_dense_create(&s, path, "<u2", shape, 1, NULL));
    zt_append_dense_gen(s, SEED, 20);
    zr_close(s);
    return path;
}

/* Open a fresh store for writing, then fork_reporting. */
static pid_t open_writer_and_fork(char **path, zr_store **w, int *fd)
{
    *path = make_store();
    ZR_OK_CALL(zr_open(w, *path, ZR_RDWR));
    return fork_reporting(fd);
}

START_TEST(writer_in_another_process_excludes_every_open)
{
    char *path = make_store();
    struct holder w = hold(path, ZR_RDWR);
    zr_store *s = (zr_store *)&s;
    ZR_FAIL_CALL(zr_open(&s, path, ZR_RDWR), ZR_EBUSY);
    ck_assert_ptr_null(s);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), path));
    ZR_FAIL_CALL(zr_open(&s, path, ZR_RDONLY), ZR_EBUSY);
    ck_assert_ptr_null(s);
    let_go(&w);
    /* The writer is gone: its lock went with it. */
    ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
    zt_append_dense_gen(s, SEED, 1);
    zr_close(s);
    free(path);
}
END_TEST

START_TEST(readers_in_several_processes_share_the_store)
{
    char *path = make_store();
    struct holder r1 = hold(path, ZR_RDONLY);
    struct holder r2 = hold(path, ZR_RDONLY); /* hold asserts its open succeeded */
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zt_check_dense_all(s, SEED);
    zr_close(s);
    let_go(&r1);
    let_go(&r2);
    free(path);
}
END_TEST

START_TEST(reader_in_another_process_keeps_writers_out)
{
    char *path = make_store();
    struct holder r = hold(path, ZR_RDONLY);
    zr_store *s = (zr_store *)&s;
    ZR_FAIL_CALL(zr_open(&s, path, ZR_RDWR), ZR_EBUSY);
    ck_assert_ptr_null(s);
    /* Other readers are still welcome. */
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zr_close(s);
    let_go(&r);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
    zr_close(s);
    free(path);
}
END_TEST

/* The parent writes; a child's opens are refused. */
START_TEST(child_cannot_open_while_the_parent_writes)
{
    char *path;
    zr_store *w;
    int fd;
    pid_t pid = open_writer_and_fork(&path, &w, &fd);
    if (pid == 0) {
        zr_store *s;
        int rc[2] = {zr_open(&s, path, ZR_RDWR), zr_open(&s, path, ZR_RDONLY)};
        free(path);
        _exit(write(fd, rc, sizeof rc) == sizeof rc ? 0 : 2);
    }
    int rc[2] = {0, 0};
    collect(pid, fd, rc, sizeof rc);
    ck_assert_int_eq(rc[0], ZR_EBUSY);
    ck_assert_int_eq(rc[1], ZR_EBUSY);
    /* The parent's handle is unaffected. */
    zt_append_dense_gen(w, SEED, 2);
    zt_check_dense_all(w, SEED);
    zr_close(w);
    free(path);
}
END_TEST

/* A writer killed without closing releases the store. */
START_TEST(killed_writer_releases_the_store)
{
    char *path = make_store();
    struct holder w = hold(path, ZR_RDWR);
    zr_store *s;
    ZR_FAIL_CALL(zr_open(&s, path, ZR_RDWR), ZR_EBUSY);
    ck_assert_int_eq(kill(w.pid, SIGKILL), 0);
    int status;
    ck_assert_int_eq(waitpid(w.pid, &status, 0), w.pid);
    ck_assert(WIFSIGNALED(status));
    close(w.report);
    close(w.release);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
    zt_check_dense_all(s, SEED);
    zr_close(s);
    free(path);
}
END_TEST

/* Two handles in one process conflict like two processes do. */
START_TEST(second_handle_in_the_same_process_is_busy)
{
    char *path = make_store();
    zr_store *w, *r;
    ZR_OK_CALL(zr_open(&w, path, ZR_RDWR));
    ZR_FAIL_CALL(zr_open(&r, path, ZR_RDONLY), ZR_EBUSY);
    ZR_FAIL_CALL(zr_open(&r, path, ZR_RDWR), ZR_EBUSY);
    zr_close(w);
    ZR_OK_CALL(zr_open(&r, path, ZR_RDONLY));
    ZR_FAIL_CALL(zr_open(&w, path, ZR_RDWR), ZR_EBUSY);
    zr_close(r);
    free(path);
}
END_TEST

/* A child of fork() inherits a writable handle and its lock, but a write
 * by both processes would overwrite records: the child may gather through
 * it, and every change through it is refused with ZR_EBUSY. The parent
 * goes on writing, and no record of its is lost. */
START_TEST(forked_child_cannot_write_through_the_parents_handle)
{
    char *path;
    zr_store *s;
    int fd;
    pid_t pid = open_writer_and_fork(&path, &s, &fd);
    struct {
        int rc[6];
        bool named;
    } got = {{0}, false};
    if (pid == 0) {
        const uint64_t shape[] = {16};
        uint16_t rec[16] = {0};
        uint64_t idx[] = {3, 0}, del = 1, first = 0;
        uint16_t two[32];
        int rc[6] = {
            zr_append_dense(s, "<u2", shape, 1, rec, 1, &first),
            zr_delete(s, &del, 1),
            zr_compact(s, NULL),
            zr_sync(s),
            zr_gather_dense(s, idx, 2, two),
            (int)zr_len(s),
        };
        memcpy(got.rc, rc, sizeof rc);
        got.named = strstr(zr_last_error(), "fork") != NULL;
        /* no zr_close: the parent still owns the handle */
        _exit(write(fd, &got, sizeof got) == sizeof got ? 0 : 2);
    }
    collect(pid, fd, &got, sizeof got);
    for (int k = 0; k < 4; k++)
        ck_assert_int_eq(got.rc[k], ZR_EBUSY);
    ck_assert_msg(got.named, "the refusal does not say why (fork)");
    ck_assert_int_eq(got.rc[4], 0); /* reads are fine */
    ck_assert_int_eq(got.rc[5], 20);
    /* The parent's handle is intact and still the writer. */
    ck_assert_uint_eq(zr_len(s), 20);
    zt_append_dense_gen(s, SEED, 5);
    ZR_OK_CALL(zr_sync(s));
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    ck_assert_uint_eq(zr_len(s), 25);
    zt_check_dense_all(s, SEED);
    zr_close(s);
    free(path);
}
END_TEST

/* In a process that inherited a handle: wait (at most 10 s) until the
 * process that forked it has exited, which reparents it. */
static void wait_reparented(pid_t parent)
{
    for (int k = 0; k < 10000 && getppid() == parent; k++)
        usleep(1000);
}

/* What an inheriting process reports: an append's result, and whether
 * the message said what the test expects. */
struct attempt {
    int rc;
    bool said;
};

/* Append 5 generated records through an inherited handle and report. */
static struct attempt inherited_append(zr_store *s, const char *expect)
{
    uint32_t ndim;
    const uint64_t *shape = zr_item_shape(s, &ndim);
    void *buf = zt_dense_gen(zr_dtype(s), shape[0], SEED, zr_len(s), 5);
    struct attempt a = {zr_append_dense(s, zr_dtype(s), shape, ndim, buf, 5, NULL), false};
    if (a.rc == 0)
        a.rc = zr_sync(s);
    a.said = strstr(zr_last_error(), expect) != NULL;
    free(buf);
    return a;
}

/* Once every process has let go of path (a lock goes with the last
 * descriptor as its process exits), it holds n intact records. */
static void expect_intact(const char *path, uint64_t n)
{
    zr_store *s = NULL;
    for (int k = 0; zr_open(&s, path, ZR_RDONLY) == ZR_EBUSY && k < 1000; k++)
        usleep(1000);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(zr_len(s), n);
    zt_check_dense_all(s, SEED);
    zr_close(s);
}

/* The daemon pattern: a starter opens path for writing, forks a daemon,
 * reports how that went and exits. The daemon, reparented, appends five
 * records through the inherited handle and reports the result (expect:
 * text its message should hold). */
static struct attempt daemon_append(const char *path, const char *expect)
{
    int fd;
    pid_t starter = fork_reporting(&fd);
    if (starter == 0) {
        zr_store *s;
        int rc = zr_open(&s, path, ZR_RDWR);
        pid_t self = getpid(), daemon = rc == 0 ? fork() : -1;
        if (daemon != 0) {
            if (rc == 0 && daemon < 0)
                rc = -1000;
            _exit(write(fd, &rc, sizeof rc) == sizeof rc ? 0 : 2);
        }
        wait_reparented(self);
        struct attempt a = inherited_append(s, expect);
        _exit(write(fd, &a, sizeof a) == sizeof a ? 0 : 2);
    }
    int rc = 1;
    ck_assert_int_eq(read(fd, &rc, sizeof rc), (ssize_t)sizeof rc);
    ck_assert_msg(rc == 0, "the starter's open or fork gave %d", rc);
    struct attempt a = {1, false};
    /* End of file: the daemon, the last to hold the pipe, has exited. */
    collect(starter, fd, &a, sizeof a);
    return a;
}

/* A daemon whose starter opened the store for writing and has exited may
 * not write through the handle it inherited: every write gives ZR_EBUSY,
 * saying why, and the store keeps its records. */
START_TEST(daemon_cannot_write_through_a_handle_its_starter_opened)
{
    char *path = make_store();
    struct attempt a = daemon_append(path, "inherited the handle through fork()");
    ck_assert_int_eq(a.rc, ZR_EBUSY);
    ck_assert_msg(a.said, "the refusal does not say why");
    expect_intact(path, 20);
    free(path);
}
END_TEST

/* A child reads through an inherited writable handle what the owner's
 * changes left: the owner gathers every record (and so learns where they
 * lie), the child is forked, the owner deletes record 0 (the last record
 * takes its place); the child's gathers of record 0 give that last
 * record, not the deleted one whose bytes still lie where record 0 was. */
START_TEST(child_reads_what_the_owner_moved_after_the_fork)
{
    char *path = make_store();
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
    zt_check_dense_all(s, SEED);
    int go[2], fd;
    ck_assert_int_eq(pipe(go), 0);
    pid_t pid = fork_reporting(&fd);
    struct {
        int rc;
        uint16_t recs[3][16];
    } r = {1, {{0}}};
    if (pid == 0) {
        close(go[1]);
        char c;
        const uint64_t idx[] = {0, 1, 0};
        r.rc = read(go[0], &c, 1) == 1 ? zr_gather_dense(s, idx, 3, r.recs) : -1000;
        if (r.rc == 0)
            r.rc = zr_gather_dense(s, idx, 1, r.recs[2]);
        _exit(write(fd, &r, sizeof r) == sizeof r ? 0 : 2);
    }
    close(go[0]);
    /* The child is let go (or, closing go, told to give up) before any
     * assertion here can fail, so that none is left waiting. */
    const uint64_t del = 0;
    int drc = zr_delete(s, &del, 1);
    if (drc == 0)
        ck_assert_int_eq(write(go[1], "x", 1), 1);
    close(go[1]);
    collect(pid, fd, &r, sizeof r);
    ck_assert_msg(drc == 0, "the owner's delete gave %d", drc);
    ck_assert_int_eq(r.rc, 0);
    uint16_t *last = zt_dense_gen("<u2", 16, SEED, 19, 1);
    uint16_t *one = zt_dense_gen("<u2", 16, SEED, 1, 1);
    ck_assert_mem_eq(r.recs[0], last, sizeof r.recs[0]);
    ck_assert_mem_eq(r.recs[1], one, sizeof r.recs[1]);
    ck_assert_mem_eq(r.recs[2], last, sizeof r.recs[2]);
    free(last);
    free(one);
    zr_close(s);
    free(path);
}
END_TEST

/* A daemon gathers through an inherited writable handle the records where
 * they are now. The starter gathers every record (and so learns where
 * they lie), forks the daemon, deletes record 0, appends one record and
 * compacts, which moves every record inside the same chunk file and
 * leaves the length as at the fork, and exits; the daemon's gather of
 * every record must equal a fresh open's. */
START_TEST(daemon_gathers_records_where_its_starter_moved_them)
{
    char *path = make_store();
    const uint64_t shape[] = {16};
    uint64_t idx[20];
    for (uint64_t k = 0; k < 20; k++)
        idx[k] = k;
    struct {
        int rc;
        uint16_t recs[20][16];
    } r = {1, {{0}}};
    int fd;
    pid_t starter = fork_reporting(&fd);
    if (starter == 0) {
        zr_store *s;
        int rc = zr_open(&s, path, ZR_RDWR);
        free(path); /* the starter and the daemon need only the handle */
        if (rc == 0)
            rc = zr_gather_dense(s, idx, 20, r.recs);
        pid_t self = getpid(), daemon = rc == 0 ? fork() : -1;
        if (daemon != 0) {
            const uint64_t del = 0;
            void *rec = zt_dense_gen("<u2", 16, SEED + 1, 0, 1);
            if (rc == 0 && daemon < 0)
                rc = -1000;
            if (rc == 0)
                rc = zr_delete(s, &del, 1);
            if (rc == 0)
                rc = zr_append_dense(s, "<u2", shape, 1, rec, 1, NULL);
            if (rc == 0)
                rc = zr_compact(s, NULL);
            if (rc == 0)
                rc = zr_sync(s);
            _exit(write(fd, &rc, sizeof rc) == sizeof rc ? 0 : 2);
        }
        wait_reparented(self);
        r.rc = zr_gather_dense(s, idx, 20, r.recs);
        _exit(write(fd, &r, sizeof r) == sizeof r ? 0 : 2);
    }
    /* Both reports are read, and the starter reaped, before anything is
     * asserted about them. */
    int rc = 1;
    ssize_t got = read(fd, &rc, sizeof rc);
    collect(starter, fd, &r, sizeof r);
    ck_assert_int_eq(got, (ssize_t)sizeof rc);
    ck_assert_msg(rc == 0, "the starter's open, fork or changes gave %d", rc);
    ck_assert_msg(r.rc == 0, "the daemon's gather gave %d", r.rc);
    zr_store *s = NULL;
    for (int k = 0; zr_open(&s, path, ZR_RDONLY) == ZR_EBUSY && k < 1000; k++)
        usleep(1000);
    ck_assert_ptr_nonnull(s);
    uint16_t now[20][16];
    ZR_OK_CALL(zr_gather_dense(s, idx, 20, now));
    for (int k = 0; k < 20; k++)
        ck_assert_msg(memcmp(r.recs[k], now[k], sizeof now[k]) == 0,
                      "the daemon read record %d from where it was before the compaction", k);
    zr_close(s);
    free(path);
}
END_TEST

Suite *suite_lock(void)
{
    Suite *s = suite_create("lock");
    TCase *tc = tcase_create("lock");
    tcase_add_checked_fixture(tc, zt_setup, zt_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, writer_in_another_process_excludes_every_open);
    tcase_add_test(tc, readers_in_several_processes_share_the_store);
    tcase_add_test(tc, reader_in_another_process_keeps_writers_out);
    tcase_add_test(tc, child_cannot_open_while_the_parent_writes);
    tcase_add_test(tc, killed_writer_releases_the_store);
    tcase_add_test(tc, second_handle_in_the_same_process_is_busy);
    tcase_add_test(tc, forked_child_cannot_write_through_the_parents_handle);
    tcase_add_test(tc, daemon_cannot_write_through_a_handle_its_starter_opened);
    tcase_add_test(tc, child_reads_what_the_owner_moved_after_the_fork);
    tcase_add_test(tc, daemon_gathers_records_where_its_starter_moved_them);
    suite_add_tcase(s, tc);
    return s;
}

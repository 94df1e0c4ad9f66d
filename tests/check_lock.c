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
 * runs change on its own handle if given (change returns 0, given the
 * header at the fork), reports how that went and exits. The daemon,
 * reparented, appends five records through the inherited handle and
 * reports the result (expect: text its message should hold). The starter
 * is a zombie meanwhile: it counts as gone. */
static struct attempt daemon_append(const char *path, int (*change)(zr_store *, const zt_meta *),
                                    const char *expect)
{
    int fd;
    pid_t starter = fork_reporting(&fd);
    if (starter == 0) {
        zr_store *s;
        int rc = zr_open(&s, path, ZR_RDWR);
        zt_meta at_fork = {0};
        if (rc == 0)
            at_fork = zt_meta_read(path);
        pid_t self = getpid(), daemon = rc == 0 ? fork() : -1;
        if (daemon != 0) {
            if (rc == 0 && daemon < 0)
                rc = -1000;
            if (rc == 0 && change)
                rc = change(s, &at_fork) != 0 ? -1001 : zr_sync(s);
            _exit(write(fd, &rc, sizeof rc) == sizeof rc ? 0 : 2);
        }
        wait_reparented(self);
        struct attempt a = inherited_append(s, expect);
        _exit(write(fd, &a, sizeof a) == sizeof a ? 0 : 2);
    }
    int rc = 1;
    ck_assert_int_eq(read(fd, &rc, sizeof rc), (ssize_t)sizeof rc);
    ck_assert_msg(rc == 0, "the starter's open, fork or change gave %d", rc);
    struct attempt a = {1, false};
    /* End of file: the daemon, the last to hold the pipe, has exited. */
    collect(starter, fd, &a, sizeof a);
    return a;
}

/* The daemon takes the handle over and writes through it. */
START_TEST(daemon_takes_over_the_handle_once_its_starter_exits)
{
    char *path = make_store();
    struct attempt a = daemon_append(path, NULL, "");
    ck_assert_msg(a.rc == 0, "the daemon's append gave %d", a.rc);
    expect_intact(path, 25);
    free(path);
}
END_TEST

/* What a daemon whose view of the store is stale gets. */
static void expect_stale_takeover(const char *path, int (*change)(zr_store *, const zt_meta *),
                                  uint64_t n)
{
    struct attempt a = daemon_append(path, change, "changed after this process inherited");
    ck_assert_int_eq(a.rc, ZR_EBUSY);
    ck_assert_msg(a.said, "the refusal does not say the store changed");
    expect_intact(path, n);
}

static int append_five(zr_store *s, const zt_meta *at_fork)
{
    (void)at_fork;
    zt_append_dense_gen(s, SEED, 5);
    return 0;
}

/* The opener appends after it forked and then exits: the daemon's view of
 * the store is stale (it would write over those records), so it may not
 * take the handle over. */
START_TEST(takeover_is_refused_once_the_opener_wrote_after_the_fork)
{
    char *path = make_store();
    expect_stale_takeover(path, append_five, 25);
    free(path);
}
END_TEST

/* Delete the last six records, compact (chunk 1 is left one record short
 * of full, so the last chunk file goes) and append the same records again
 * (a new chunk file): the header and the bytes are as at the fork. */
static int replace_last_chunk(zr_store *s, const zt_meta *at_fork)
{
    const uint64_t last[] = {24, 23, 22, 21, 20, 19};
    int rc = zr_delete(s, last, 6);
    if (rc == 0)
        rc = zr_compact(s, NULL);
    if (rc == 0)
        zt_append_dense_gen(s, SEED, 6);
    zt_meta now = zt_meta_read(zr_path(s));
    bool same = now.length == at_fork->length && now.tail_chunk == at_fork->tail_chunk &&
                now.tail_offset == at_fork->tail_offset && now.tail_chunk == 2;
    return rc == 0 && same ? 0 : 1;
}

/* A header alone does not show every change: after replace_last_chunk
 * the daemon's descriptor of the last chunk names a removed file. */
START_TEST(takeover_is_refused_when_a_chunk_file_was_replaced)
{
    zr_testing_set_geometry(10 * 32, 0); /* ten 32-byte records a chunk */
    char *path = make_store();
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
    ck_assert_uint_eq(zr_record_width(s), 32);
    zt_append_dense_gen(s, SEED, 5); /* 25 records: chunk 2 holds 5 */
    zr_close(s);
    expect_stale_takeover(path, replace_last_chunk, 25);
    free(path);
}
END_TEST

/* What an opener killed in the middle of a delete leaves: intent.zr not
 * empty (here not even complete, which the next open clears), the header
 * and every file as at the fork. */
static int leave_an_intent(zr_store *s, const zt_meta *at_fork)
{
    (void)at_fork;
    char *name = zt_join(zr_path(s), "intent.zr");
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    free(name);
    int rc = fd >= 0 && write(fd, "zr", 2) == 2 ? 0 : 1;
    if (fd >= 0)
        close(fd);
    return rc;
}

START_TEST(takeover_is_refused_while_an_intent_is_pending)
{
    char *path = make_store();
    expect_stale_takeover(path, leave_an_intent, 20);
    free(path);
}
END_TEST

/* Close every end of the four pipes but keep1 and keep2. */
static void keep_ends(int *const ends[4], int keep1, int keep2)
{
    for (int p = 0; p < 4; p++)
        for (int e = 0; e < 2; e++)
            if (ends[p][e] != keep1 && ends[p][e] != keep2)
                close(ends[p][e]);
}

/* Two processes inherit the handle and outlive its opener: the first to
 * write takes it over; the other is refused while the first runs (the
 * takeover lock) and after it has exited (its writes changed the store).
 * A and B report through their own pipes; B makes an attempt each time
 * the test writes to go_b, and A exits when the test writes to quit_a. */
START_TEST(only_one_of_two_inheritors_takes_over)
{
    char *path = make_store();
    int rep_a[2], rep_b[2], go_b[2], quit_a[2];
    ck_assert_int_eq(pipe(rep_a), 0);
    ck_assert_int_eq(pipe(rep_b), 0);
    ck_assert_int_eq(pipe(go_b), 0);
    ck_assert_int_eq(pipe(quit_a), 0);
    pid_t starter = fork();
    ck_assert_int_ge(starter, 0);
    if (starter == 0) {
        zr_store *s;
        int rc = zr_open(&s, path, ZR_RDWR);
        free(path); /* the starter and its children need only the handle */
        if (rc != 0)
            _exit(2);
        /* Each process keeps only its own ends, so that a test that fails
         * half-way leaves no child waiting on a pipe for ever. */
        int *ends[4] = {rep_a, rep_b, go_b, quit_a};
        pid_t self = getpid(), a = fork();
        if (a == 0) {
            keep_ends(ends, rep_a[1], quit_a[0]);
            wait_reparented(self);
            struct attempt r = inherited_append(s, "");
            char c;
            bool ok = write(rep_a[1], &r, sizeof r) == sizeof r && read(quit_a[0], &c, 1) >= 0;
            zr_close(s); /* the takeover lock goes before the end of file */
            _exit(ok ? 0 : 5);
        }
        pid_t b = a > 0 ? fork() : -1;
        if (b == 0) {
            keep_ends(ends, rep_b[1], go_b[0]);
            wait_reparented(self);
            const char *expect[2] = {"also inherited the handle", "changed after this process"};
            for (int k = 0; k < 2; k++) {
                char c;
                if (read(go_b[0], &c, 1) != 1)
                    _exit(6);
                struct attempt r = inherited_append(s, expect[k]);
                if (write(rep_b[1], &r, sizeof r) != sizeof r)
                    _exit(5);
            }
            _exit(0);
        }
        keep_ends(ends, -1, -1);
        _exit(0); /* a failed fork shows as a report that never comes */
    }
    close(rep_a[1]);
    close(rep_b[1]);
    close(go_b[0]);
    close(quit_a[0]);
    int status;
    ck_assert_int_eq(waitpid(starter, &status, 0), starter);
    ck_assert(WIFEXITED(status));
    struct attempt first = {1, false}, busy = {0, false}, after = {0, false};
    ck_assert_int_eq(read(rep_a[0], &first, sizeof first), (ssize_t)sizeof first);
    ck_assert_msg(first.rc == 0, "the first inheritor's append gave %d", first.rc);
    /* A runs: B is refused by the takeover lock. */
    ck_assert_int_eq(write(go_b[1], "x", 1), 1);
    ck_assert_int_eq(read(rep_b[0], &busy, sizeof busy), (ssize_t)sizeof busy);
    ck_assert_int_eq(busy.rc, ZR_EBUSY);
    ck_assert_msg(busy.said, "the refusal does not name the other inheritor");
    /* A exits (end of file on its pipe); B is refused still. */
    ck_assert_int_eq(write(quit_a[1], "x", 1), 1);
    char c;
    ck_assert_int_eq(read(rep_a[0], &c, 1), 0);
    ck_assert_int_eq(write(go_b[1], "x", 1), 1);
    ck_assert_int_eq(read(rep_b[0], &after, sizeof after), (ssize_t)sizeof after);
    ck_assert_int_eq(after.rc, ZR_EBUSY);
    ck_assert_msg(after.said, "the refusal does not say the store changed");
    ck_assert_int_eq(read(rep_b[0], &c, 1), 0);
    close(rep_a[0]);
    close(rep_b[0]);
    close(go_b[1]);
    close(quit_a[1]);
    expect_intact(path, 25);
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

/* A daemon that takes a handle over reads the records where they are now.
 * The starter gathers every record, forks the daemon, deletes record 0,
 * appends one record and compacts, which moves every record but leaves
 * the header byte for byte as at the fork, so the takeover is allowed; the
 * daemon's gather of every record must equal a fresh open's. */
START_TEST(daemon_that_takes_over_reads_records_where_they_are_now)
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
        r.rc = zr_sync(s); /* takes the handle over */
        if (r.rc == 0)
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
    ck_assert_msg(r.rc == 0, "the daemon's takeover or gather gave %d", r.rc);
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
    tcase_add_test(tc, daemon_takes_over_the_handle_once_its_starter_exits);
    tcase_add_test(tc, takeover_is_refused_once_the_opener_wrote_after_the_fork);
    tcase_add_test(tc, takeover_is_refused_when_a_chunk_file_was_replaced);
    tcase_add_test(tc, takeover_is_refused_while_an_intent_is_pending);
    tcase_add_test(tc, only_one_of_two_inheritors_takes_over);
    tcase_add_test(tc, child_reads_what_the_owner_moved_after_the_fork);
    tcase_add_test(tc, daemon_that_takes_over_reads_records_where_they_are_now);
    suite_add_tcase(s, tc);
    return s;
}

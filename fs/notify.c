/*
 * notify.c: telling the kernel to forget what it cached about a store
 * that a read-write mount changed.
 *
 * After a delete, record i may hold what was the last record, and the
 * last names are gone; the kernel may still hold their pages, sizes and
 * names. fuse_lowlevel_notify_inval_* fix that, but such a notification
 * may have to wait for kernel locks (a page's, the folder's) that another
 * request holds while it waits for the daemon: a READ of the record keeps
 * its page locked until it is answered. So a notification must never
 * hold up the threads that serve requests, and libfuse forbids sending one
 * from a request handler of the one-thread loop. They go out from this
 * module's own thread, which serves no request, and a request handler
 * only queues them and returns to its loop.
 *
 * The request that made the change (the close of .delete, the write to
 * .compact) is not answered by its handler either: its answer is queued
 * behind the notifications and sent by this thread once they are done.
 * So by the time the user's close or write returns, no stale page or
 * name is left, and meanwhile the loop's threads serve whatever the
 * kernel sends, the READs a notification waits for among it. The thread
 * is a one-thread worker queue (lib/workq.c), which runs its items in
 * the order queued and drains them when it stops.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/base.h"
#include "fs/notify.h"
#include "lib/workq.h"

/* Invalidations after a change (st set), or an answer to send (req set). */
struct job {
    struct zr_qitem item;
    struct zfs_store *st;
    uint64_t new_len, old_len;
    fuse_req_t req;
    int err;
    bool write;
    size_t written;
    size_t n;
    uint64_t changed[];
};

static struct zr_workq queue = ZR_WORKQ_INIT;
/* The mount the thread serves, set before it starts. */
static struct zfs_fs *notify_fs;

/* ENOENT only says the kernel had nothing cached: not a failure. */
static void check(int rc, const char *what, const struct zfs_store *st)
{
    if (rc != 0 && rc != -ENOENT)
        fuse_log(FUSE_LOG_ERR, "zrecordfs: %s: invalidating %s: %s\n", st->path, what,
                 strerror(-rc));
}

static void invalidate(struct zfs_fs *fs, const struct job *j)
{
    struct fuse_session *se = fs->se;
    const struct zfs_store *st = j->st;
    for (size_t k = 0; k < j->n; k++)
        check(fuse_lowlevel_notify_inval_inode(se, zfs_ino(st->sid, ZFS_RECORD_SLOT0 + j->changed[k]),
                                               0, 0),
              "a record", st);
    for (uint64_t i = j->new_len; i < j->old_len; i++) {
        char name[64];
        zfs_record_name(fs, i, name, sizeof name);
        check(fuse_lowlevel_notify_inval_entry(se, st->dir_ino, name, strlen(name)), "a name", st);
        check(fuse_lowlevel_notify_inval_inode(se, zfs_ino(st->sid, ZFS_RECORD_SLOT0 + i), 0, 0),
              "a record", st);
    }
    check(fuse_lowlevel_notify_inval_inode(se, st->dir_ino, 0, 0), "the folder", st);
    check(fuse_lowlevel_notify_inval_inode(se, zfs_ino(st->sid, ZFS_CTL_STATS), 0, 0), ".stats", st);
    check(fuse_lowlevel_notify_inval_inode(se, zfs_ino(st->sid, ZFS_CTL_COMPACT), 0, 0), ".compact",
          st);
}

static void answer(const struct job *j)
{
    if (j->write && j->err == 0)
        fuse_reply_write(j->req, j->written);
    else
        fuse_reply_err(j->req, j->err);
}

static void run(void *arg, struct zr_qitem *it)
{
    struct job *j = ZR_WORKQ_ENTRY(it, struct job, item);
    struct zfs_fs *fs = arg;
    /* Once the loop has ended (a signal while mounted) no read is served
     * any more, and an invalidation could wait for one for ever: the
     * queue is drained of its answers alone. */
    if (j->st && !fuse_session_exited(fs->se))
        invalidate(fs, j);
    if (j->req)
        answer(j);
    free(j);
}

int zfs_notify_start(struct zfs_fs *fs)
{
    notify_fs = fs;
    return zr_workq_start(&queue, 1, run, fs);
}

void zfs_notify_stop(void)
{
    zr_workq_stop(&queue, true);
}

void zfs_notify_change(struct zfs_fs *fs, struct zfs_store *st, const uint64_t *changed,
                       size_t n, uint64_t new_len, uint64_t old_len)
{
    if (notify_fs != fs)
        return;
    struct job *j = n > (SIZE_MAX - sizeof *j) / sizeof *changed
                        ? NULL
                        : calloc(1, sizeof *j + n * sizeof *changed);
    if (!j) {
        /* Names and attributes still time out within fs->timeout, and an
         * open of a record drops its pages (-o rw). */
        fuse_log(FUSE_LOG_ERR, "zrecordfs: %s: no memory to invalidate the kernel's caches\n",
                 st->path);
        return;
    }
    j->st = st;
    j->n = n;
    j->new_len = new_len;
    j->old_len = old_len;
    if (n)
        memcpy(j->changed, changed, n * sizeof *changed);
    /* The queue takes items from before the loop starts until after it
     * ends, so this only fails while nothing can be cached. */
    if (!zr_workq_push(&queue, &j->item))
        free(j);
}

static void reply_after(fuse_req_t req, int err, bool write, size_t written)
{
    struct job *j = calloc(1, sizeof *j);
    if (j) {
        *j = (struct job){.req = req, .err = err, .write = write, .written = written};
        if (zr_workq_push(&queue, &j->item))
            return;
        free(j);
    }
    /* Answered at once: the caller may then meet a stale page or name
     * for as long as the notifications before take, but is not left
     * without an answer. */
    answer(&(struct job){.req = req, .err = err, .write = write, .written = written});
}

void zfs_notify_reply_err(fuse_req_t req, int err)
{
    reply_after(req, err, false, 0);
}

void zfs_notify_reply_write(fuse_req_t req, size_t written)
{
    reply_after(req, 0, true, written);
}

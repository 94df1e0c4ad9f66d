/*
 * notify.c: telling the kernel to forget what it cached about a store
 * that a read-write mount changed.
 *
 * After a delete, record i may hold what was the last record, and the
 * last names are gone; the kernel may still hold their pages, sizes and
 * names. fuse_lowlevel_notify_inval_* fix that, but such a notification
 * may have to wait for kernel locks (the folder's, a page's) that another
 * request holds while it waits for the daemon, so libfuse forbids sending
 * one from the request it concerns. The notifications therefore go out
 * from this module's own thread. The request that changed the store (the
 * close of .delete, the write to .compact) waits for that thread before
 * it is answered, so by the time the user's close or write returns, no
 * stale page or name is left; it waits without holding any lock that a
 * request needs, so the other worker threads serve whatever the kernel
 * sends meanwhile. The thread is a one-thread worker queue (lib/workq.c)
 * that drains what is queued when it stops.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fs/base.h"
#include "fs/notify.h"
#include "lib/workq.h"

struct job {
    struct zfs_store *st;
    const uint64_t *changed;
    size_t n;
    uint64_t new_len, old_len;
    struct zr_qitem item;
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

static void run(void *arg, struct zr_qitem *it)
{
    struct zfs_fs *fs = arg;
    const struct job *j = ZR_WORKQ_ENTRY(it, struct job, item);
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
    struct job j = {.st = st, .changed = changed, .n = n, .new_len = new_len, .old_len = old_len};
    if (notify_fs == fs)
        zr_workq_call(&queue, &j.item);
}

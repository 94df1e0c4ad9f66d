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
 * sends meanwhile.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fs/base.h"
#include "fs/notify.h"

struct job {
    struct zfs_store *st;
    const uint64_t *changed;
    size_t n;
    uint64_t new_len, old_len;
    bool done;
    struct job *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static struct job *head, *tail;
static bool running, stopping;
static pthread_t thread;
static struct zfs_fs *notify_fs;

/* ENOENT only says the kernel had nothing cached: not a failure. */
static void check(int rc, const char *what, const struct zfs_store *st)
{
    if (rc != 0 && rc != -ENOENT)
        fuse_log(FUSE_LOG_ERR, "zrecordfs: %s: invalidating %s: %s\n", st->path, what,
                 strerror(-rc));
}

static void run(struct zfs_fs *fs, const struct job *j)
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

static void *worker(void *arg)
{
    struct zfs_fs *fs = arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!head && !stopping)
            pthread_cond_wait(&work_cv, &mu);
        if (!head)
            break;
        struct job *j = head;
        head = j->next;
        if (!head)
            tail = NULL;
        pthread_mutex_unlock(&mu);
        run(fs, j);
        pthread_mutex_lock(&mu);
        j->done = true;
        pthread_cond_broadcast(&done_cv);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

int zfs_notify_start(struct zfs_fs *fs)
{
    pthread_mutex_lock(&mu);
    notify_fs = fs;
    stopping = false;
    int rc = pthread_create(&thread, NULL, worker, fs);
    running = rc == 0;
    pthread_mutex_unlock(&mu);
    return -rc;
}

void zfs_notify_stop(void)
{
    pthread_mutex_lock(&mu);
    if (!running) {
        pthread_mutex_unlock(&mu);
        return;
    }
    stopping = true;
    pthread_cond_broadcast(&work_cv);
    pthread_mutex_unlock(&mu);
    pthread_join(thread, NULL);
    pthread_mutex_lock(&mu);
    running = false;
    pthread_mutex_unlock(&mu);
}

void zfs_notify_change(struct zfs_fs *fs, struct zfs_store *st, const uint64_t *changed,
                       size_t n, uint64_t new_len, uint64_t old_len)
{
    struct job j = {.st = st, .changed = changed, .n = n, .new_len = new_len, .old_len = old_len};
    pthread_mutex_lock(&mu);
    if (!running || stopping || notify_fs != fs) {
        pthread_mutex_unlock(&mu);
        return;
    }
    if (tail)
        tail->next = &j;
    else
        head = &j;
    tail = &j;
    pthread_cond_signal(&work_cv);
    while (!j.done)
        pthread_cond_wait(&done_cv, &mu);
    pthread_mutex_unlock(&mu);
}

/*
 * fileops.c: the FUSE requests on open files. OPEN makes a handle of the
 * file's kind (a record, or one of the control files) and says how the
 * kernel is to treat it; READ, WRITE, FLUSH and RELEASE pass each request
 * to the module of that kind: record.c for records, gather.c for .gather,
 * ctl.c for the other control files. ops.c puts these in the operations
 * table, and they keep its rules: each request is answered exactly once.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "fs/base.h"
#include "fs/cold.h"
#include "fs/ctl.h"
#include "fs/fileops.h"
#include "fs/gather.h"
#include "fs/inode.h"
#include "fs/notify.h"
#include "fs/record.h"

static struct zfs_fs *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

void zfs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct zfs_fs *fs = fs_of(req);
    if (fs->cfg.noopen) {
        /* The kernel then skips OPEN and RELEASE for the whole mount and
         * serves warm reads from its page cache. */
        fuse_reply_err(req, ENOSYS);
        return;
    }
    struct zfs_target t;
    struct zfs_handle *h = NULL;
    int rc = zfs_resolve(fs, ino, &t);
    bool writing = (fi->flags & O_ACCMODE) != O_RDONLY;
    if (rc == 0 && t.node)
        rc = -EISDIR;
    else if (rc == 0 && !t.st->zs)
        rc = -EIO;
    if (rc != 0)
        goto out;
    switch (t.slot) {
    case ZFS_CTL_GATHER:
        if (!(h = zfs_handle_new(t.st, ZFS_H_GATHER))) {
            rc = -ENOMEM;
            break;
        }
        /* Without O_DIRECT: a stream, each read(2) one request after
         * another. With O_DIRECT the kernel sends the requests of one
         * large read(2) at once and the reader waits once (gather.c);
         * the file is then seekable, so threads may pread parts of a
         * batch. */
        h->gather.odirect = (fi->flags & O_DIRECT) != 0;
        fi->direct_io = !h->gather.odirect;
        fi->nonseekable = !h->gather.odirect;
        break;
    case ZFS_CTL_COMPACT:
        if (writing && !fs->cfg.rw) {
            rc = -EROFS;
            break;
        }
        if (!(h = zfs_handle_new(t.st, ZFS_H_COMPACT))) {
            rc = -ENOMEM;
            break;
        }
        fi->direct_io = 1;
        fi->nonseekable = 1;
        break;
    case ZFS_CTL_DELETE:
        if (!writing || (fi->flags & O_ACCMODE) != O_WRONLY) {
            rc = -EACCES; /* an index list goes in, nothing comes out */
            break;
        }
        if (!(h = zfs_handle_new(t.st, ZFS_H_DELETE))) {
            rc = -ENOMEM;
            break;
        }
        fi->direct_io = 1;
        fi->nonseekable = 1;
        break;
    case ZFS_CTL_STATS:
        if (writing || (fi->flags & O_TRUNC)) {
            rc = fs->cfg.rw ? -EACCES : -EROFS;
            break;
        }
        if (!(h = zfs_handle_new(t.st, ZFS_H_STATS))) {
            rc = -ENOMEM;
            break;
        }
        rc = zfs_stats_text(fs, t.st, &h->stats.text, &h->stats.len);
        fi->direct_io = 1;
        break;
    default:
        if (writing || (fi->flags & O_TRUNC)) {
            rc = fs->cfg.rw ? -EACCES : -EROFS;
            break;
        }
        if (t.slot - ZFS_RECORD_SLOT0 >= zr_len(t.st->zs)) {
            rc = -ENOENT;
            break;
        }
        if (!(h = zfs_handle_new(t.st, ZFS_H_RECORD))) {
            rc = -ENOMEM;
            break;
        }
        h->record.index = t.slot - ZFS_RECORD_SLOT0;
        /* A read-only mount's records never change: the kernel may keep
         * their pages across opens. */
        fi->keep_cache = !fs->cfg.rw;
        break;
    }
out:
    if (rc != 0) {
        zfs_handle_put(h);
        fuse_reply_err(req, -rc);
        return;
    }
    fi->fh = (uint64_t)(uintptr_t)h;
    if (fuse_reply_open(req, fi) != 0)
        zfs_handle_put(h); /* the opener is gone: no RELEASE will follow */
}

static void reply_slice(fuse_req_t req, const char *buf, size_t len, size_t size, off_t off)
{
    if ((uint64_t)off >= len)
        fuse_reply_buf(req, NULL, 0);
    else
        fuse_reply_buf(req, buf + off, len - (size_t)off < size ? len - (size_t)off : size);
}

/* A record file's bytes without a handle: from the mapping (direct
 * stores) or through the shared cache of decoded records. */
static void read_record(fuse_req_t req, struct zfs_fs *fs, struct zfs_store *st, uint64_t i,
                        size_t size, off_t off)
{
    int rc;
    if (st->direct) {
        struct zfs_rec d;
        rc = zfs_rec_span(fs, st, i, &d);
        if (rc == 0)
            zfs_rec_reply(req, &d, size, off);
    } else {
        struct zfs_rec *r;
        rc = zfs_rec_get(fs, st, i, &r);
        if (rc == 0) {
            zfs_rec_reply(req, r, size, off);
            zfs_rec_put(r);
        }
    }
    if (rc != 0)
        fuse_reply_err(req, -rc);
}

/* A read without a handle (-o noopen): records through the shared cache,
 * .stats and .compact from the store's texts. */
static void read_unopened(fuse_req_t req, struct zfs_fs *fs, fuse_ino_t ino, size_t size,
                          off_t off)
{
    struct zfs_target t;
    int rc = zfs_resolve(fs, ino, &t);
    if (rc == 0 && t.node)
        rc = -EISDIR;
    if (rc == 0 && t.slot == ZFS_CTL_STATS) {
        char *text = NULL;
        size_t len = 0;
        rc = zfs_stats_text(fs, t.st, &text, &len);
        if (rc == 0)
            reply_slice(req, text, len, size, off);
        free(text);
    } else if (rc == 0 && t.slot == ZFS_CTL_COMPACT) {
        char *text = NULL;
        size_t len = 0;
        rc = zfs_compact_text(t.st, &text, &len);
        if (rc == 0)
            reply_slice(req, text, len, size, off);
        free(text);
    } else if (rc == 0 && t.slot >= ZFS_RECORD_SLOT0) {
        uint64_t i = t.slot - ZFS_RECORD_SLOT0;
        if (off == 0)
            zfs_rec_ahead(fs, t.st, i);
        if (zfs_cold_read(fs, req, t.st, NULL, i, size, off))
            return;
        read_record(req, fs, t.st, i, size, off);
        return;
    } else if (rc == 0) {
        rc = -EBADF;
    }
    if (rc != 0)
        fuse_reply_err(req, -rc);
}

void zfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    struct zfs_fs *fs = fs_of(req);
    struct zfs_handle *h = (struct zfs_handle *)(uintptr_t)fi->fh;
    if (!h) {
        read_unopened(req, fs, ino, size, off);
        return;
    }
    int rc = 0;
    switch (h->type) {
    case ZFS_H_RECORD: {
        struct zfs_hrecord *hr = &h->record;
        if (h->st->direct) {
            /* Served from the mapping: no decode, no per-handle state. */
            struct zfs_rec d;
            if (off == 0)
                zfs_rec_ahead(fs, h->st, hr->index);
            if (zfs_cold_read(fs, req, h->st, h, hr->index, size, off))
                return;
            rc = zfs_rec_span(fs, h->st, hr->index, &d);
            if (rc == 0)
                zfs_rec_reply(req, &d, size, off);
            break;
        }
        /* A record the handle holds decoded needs no disk. */
        pthread_mutex_lock(&h->mu);
        bool held = hr->rec && hr->rec->gen == atomic_load(&h->st->gen);
        pthread_mutex_unlock(&h->mu);
        if (!held && zfs_cold_read(fs, req, h->st, h, hr->index, size, off))
            return;
        struct zfs_rec *r = NULL;
        rc = zfs_rec_hold(fs, h, &r);
        if (rc == 0) {
            zfs_rec_reply(req, r, size, off);
            zfs_rec_put(r);
        }
        break;
    }
    case ZFS_H_STATS:
        /* Once the reply is written, the kernel may end the read and a
         * RELEASE on another thread of the multi-threaded loop drop the
         * handle: the reference keeps the text alive until the write has
         * returned. */
        atomic_fetch_add(&h->refs, 1);
        reply_slice(req, h->stats.text, h->stats.len, size, off);
        zfs_handle_put(h);
        break;
    case ZFS_H_GATHER:
        /* A read the kernel makes for its page cache carries no lock
         * owner, unlike one a reader makes. The reply holds its own
         * reference to h. */
        rc = zfs_gather_read(fs, h, req, size, (uint64_t)off, fi->lock_owner == 0);
        break;
    case ZFS_H_COMPACT: {
        const char *p;
        size_t n;
        /* The reply is sent under mu (it points into the handle's
         * buffer), and the reference keeps h alive through the unlock. */
        atomic_fetch_add(&h->refs, 1);
        pthread_mutex_lock(&h->mu);
        rc = zfs_compact_read(fs, h, size, &p, &n);
        if (rc == 0)
            fuse_reply_buf(req, p, n);
        pthread_mutex_unlock(&h->mu);
        zfs_handle_put(h);
        break;
    }
    case ZFS_H_DELETE:
        rc = -EBADF;
        break;
    }
    if (rc != 0)
        fuse_reply_err(req, -rc);
}

void zfs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    (void)ino;
    struct zfs_fs *fs = fs_of(req);
    struct zfs_handle *h = (struct zfs_handle *)(uintptr_t)fi->fh;
    int rc;
    if (!h) {
        rc = -zfs_deny(fs);
    } else if (h->type == ZFS_H_GATHER || h->type == ZFS_H_COMPACT || h->type == ZFS_H_DELETE) {
        pthread_mutex_lock(&h->mu);
        if (h->type == ZFS_H_GATHER)
            rc = zfs_gather_write(fs, h, buf, size, (uint64_t)off);
        else if (h->type == ZFS_H_COMPACT)
            rc = zfs_compact_run(fs, h); /* what was written does not matter */
        else
            rc = zfs_delete_write(fs, h, buf, size);
        pthread_mutex_unlock(&h->mu);
        /* A compaction is answered once the kernel has heard of it. */
        if (h->type == ZFS_H_COMPACT) {
            if (rc != 0)
                zfs_notify_reply_err(req, -rc);
            else
                zfs_notify_reply_write(req, size);
            return;
        }
    } else {
        rc = -EBADF;
    }
    if (rc != 0)
        fuse_reply_err(req, -rc);
    else
        fuse_reply_write(req, size);
}

/* A list written to .delete and not yet applied, or one that failed. */
static bool delete_pending(const struct zfs_handle *h)
{
    return h && h->type == ZFS_H_DELETE &&
           (h->del.list.n > 0 || h->del.list.intok || h->del.list.err != 0);
}

void zfs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    struct zfs_handle *h = (struct zfs_handle *)(uintptr_t)fi->fh;
    int rc = 0;
    /* A read-only mount has nothing to do at close: ENOSYS tells the
     * kernel to stop sending FLUSH for the whole mount, saving a round
     * trip per close(2). */
    if (!fs_of(req)->cfg.rw) {
        fuse_reply_err(req, ENOSYS);
        return;
    }
    /* close(2) of .delete applies the list, and returns its outcome once
     * the kernel has been told what changed (notify.c). */
    if (h && h->type == ZFS_H_DELETE) {
        pthread_mutex_lock(&h->mu);
        bool pending = delete_pending(h);
        if (pending)
            rc = zfs_delete_commit(fs_of(req), h);
        pthread_mutex_unlock(&h->mu);
        if (pending) {
            zfs_notify_reply_err(req, -rc);
            return;
        }
    }
    fuse_reply_err(req, -rc);
}

void zfs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    struct zfs_handle *h = (struct zfs_handle *)(uintptr_t)fi->fh;
    /* Normally FLUSH applied the list already; a descriptor passed to
     * another process and closed there may leave one behind. A failed
     * list was reported to its writes and closes, and is never applied. */
    if (delete_pending(h) && h->del.list.err == 0) {
        int rc = zfs_delete_commit(fs_of(req), h);
        if (rc != 0)
            fuse_log(FUSE_LOG_ERR, "zrecordfs: %s: .delete on release: %s\n", h->st->path,
                     strerror(-rc));
    }
    /* A closed .gather needs no size any more; replies still in flight
     * hold their own references to h. */
    if (h && h->type == ZFS_H_GATHER)
        zfs_gather_release(h);
    zfs_handle_put(h);
    fuse_reply_err(req, 0);
}

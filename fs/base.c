/*
 * base.c: the bottom of zrecordfs, what every other module uses and which
 * uses none of them: the one mapping of library status codes to errno
 * (and the refusal of changes the view never allows), the names of
 * record files, and the reference counts that keep a decoded
 * record and an open file's handle alive until their last user lets go.
 *
 * Keeping these here, rather than in the module that uses them most, is
 * what makes the driver's calls go one way: record.c, notify.c, tree.c,
 * gather.c, ctl.c and inode.c call down into this file and each other,
 * ops.c (the dispatcher) calls them all, and nothing calls back up.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fs/base.h"

int zfs_errno(int zr_code)
{
    switch (zr_code) {
    case ZR_OK:
        return 0;
    case ZR_ENOMEM:
        return ENOMEM;
    case ZR_ENOTSTORE:
        return ENOENT;
    case ZR_EEXIST:
        return EEXIST;
    case ZR_EBUSY:
        return EBUSY;
    case ZR_EINVAL:
    case ZR_ERANGE:
    case ZR_EDTYPE:
    case ZR_ESHAPE:
    case ZR_EEMPTY:
    case ZR_EKIND:
        return EINVAL;
    case ZR_ETOOBIG:
        return EFBIG;
    case ZR_EROFS:
        return EROFS;
    case ZR_ENOSPC:
        return ENOSPC;
    case ZR_ELIMIT:
        return EMFILE;
    case ZR_EACCESS:
        return EACCES;
    case ZR_EIO:
    case ZR_ECORRUPT:
    case ZR_ECODEC:
    default:
        return EIO;
    }
}

int zfs_deny(const struct zfs_fs *fs)
{
    return fs->cfg.rw ? EPERM : EROFS;
}

void zfs_record_name(const struct zfs_fs *fs, uint64_t i, char *buf, size_t cap)
{
    snprintf(buf, cap, "%llu%s", (unsigned long long)i, fs->cfg.ext);
}

void zfs_rec_put(struct zfs_rec *r)
{
    if (r && atomic_fetch_sub(&r->refs, 1) == 1) {
        free(r->buf);
        free(r);
    }
}

struct zfs_handle *zfs_handle_new(struct zfs_store *st, enum zfs_htype type)
{
    struct zfs_handle *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->type = type;
    h->st = st;
    atomic_init(&h->refs, 1);
    pthread_mutex_init(&h->mu, NULL);
    if (type == ZFS_H_GATHER) {
        pthread_cond_init(&h->gather.unpinned, NULL);
        zfs_idxlist_init(&h->gather.list, 0, ZFS_LIST_MAX);
    } else if (type == ZFS_H_DELETE) {
        zfs_idxlist_init(&h->del.list, 0, ZFS_LIST_MAX);
    }
    return h;
}

/* Free h and what its kind holds. A .gather handle has left the size of
 * .gather when its file was closed (zfs_gather_release). */
static void handle_free(struct zfs_handle *h)
{
    switch (h->type) {
    case ZFS_H_RECORD:
        zfs_rec_put(h->record.rec);
        break;
    case ZFS_H_STATS:
        free(h->stats.text);
        break;
    case ZFS_H_GATHER:
        zfs_idxlist_free(&h->gather.list);
        free(h->gather.buf);
        pthread_cond_destroy(&h->gather.unpinned);
        break;
    case ZFS_H_COMPACT:
        free(h->compact.text);
        break;
    case ZFS_H_DELETE:
        zfs_idxlist_free(&h->del.list);
        break;
    }
    pthread_mutex_destroy(&h->mu);
    free(h);
}

void zfs_handle_put(struct zfs_handle *h)
{
    if (h && atomic_fetch_sub(&h->refs, 1) == 1)
        handle_free(h);
}

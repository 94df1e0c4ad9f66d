/* notify.h: invalidations sent to the kernel after a change (notify.c). */
#ifndef ZFS_NOTIFY_H
#define ZFS_NOTIFY_H

#include "fs/zrfs.h"

/* Start and stop the thread that passes invalidations to the kernel. */
int zfs_notify_start(struct zfs_fs *fs);
void zfs_notify_stop(void);
/* Queue word for the kernel that records changed[0..n) of st now hold
 * other bytes, that the names of records [new_len, old_len) are gone, and
 * that the store folder's listing and .stats changed. Returns at once:
 * the notification thread sends it, in the order queued. */
void zfs_notify_change(struct zfs_fs *fs, struct zfs_store *st, const uint64_t *changed,
                       size_t n, uint64_t new_len, uint64_t old_len);
/* Answer req once every change queued before has been sent: with err
 * (0 or a positive errno), or for a WRITE without error, with written
 * bytes. The request that made a change answers this way, so that its
 * caller sees nothing stale once it returns. */
void zfs_notify_reply_err(fuse_req_t req, int err);
void zfs_notify_reply_write(fuse_req_t req, size_t written);

#endif

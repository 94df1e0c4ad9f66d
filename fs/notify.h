/* notify.h: invalidations sent to the kernel after a change (notify.c). */
#ifndef ZFS_NOTIFY_H
#define ZFS_NOTIFY_H

#include "fs/zrfs.h"

/* Start and stop the thread that passes invalidations to the kernel. */
int zfs_notify_start(struct zfs_fs *fs);
void zfs_notify_stop(void);
/* Tell the kernel that records changed[0..n) of st now hold other bytes,
 * that the names of records [new_len, old_len) are gone, and that the
 * store folder's listing and .stats changed. Returns when it is done. */
void zfs_notify_change(struct zfs_fs *fs, struct zfs_store *st, const uint64_t *changed,
                       size_t n, uint64_t new_len, uint64_t old_len);

#endif

/* ctl.h: the control files .stats, .compact and .delete (ctl.c). */
#ifndef ZFS_CTL_H
#define ZFS_CTL_H

#include "fs/zrfs.h"

/* A copy of the .stats text (malloc'd) and its length. */
int zfs_stats_text(struct zfs_fs *fs, struct zfs_store *st, char **out, size_t *len);
/* The length of the .stats text. */
int zfs_stats_size(struct zfs_fs *fs, struct zfs_store *st, uint64_t *len);
/* A copy of the .compact text, and its length. */
int zfs_compact_text(struct zfs_store *st, char **out, size_t *len);
int zfs_compact_size(struct zfs_store *st, uint64_t *len);
/* Compact h's store; the next read of h gives the result. */
int zfs_compact_run(struct zfs_fs *fs, struct zfs_handle *h);
int zfs_compact_read(struct zfs_fs *fs, struct zfs_handle *h, size_t size, const char **p,
                     size_t *n);
int zfs_delete_write(struct zfs_fs *fs, struct zfs_handle *h, const char *buf, size_t len);
/* Delete the list written to h so far, if any, as one batch. A list that
 * failed is never applied: its error comes back from every call. */
int zfs_delete_commit(struct zfs_fs *fs, struct zfs_handle *h);

#endif

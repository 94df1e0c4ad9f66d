/* gather.h: the .gather control file (gather.c). */
#ifndef ZFS_GATHER_H
#define ZFS_GATHER_H

#include "fs/zrfs.h"

/* Take len bytes of an index list written to .gather on h at file
 * offset off. The caller holds h->mu. */
int zfs_gather_write(struct zfs_fs *fs, struct zfs_handle *h, const char *buf, size_t len,
                     uint64_t off);
/* Answer a READ of up to size bytes at file offset off of .gather on h
 * (the caller does not hold h->mu). page_cache tells a read the kernel
 * makes to fill its page cache from one a reader makes. Returns 0 once
 * req has been answered, or a negative errno for the caller to reply
 * with. */
int zfs_gather_read(struct zfs_fs *fs, struct zfs_handle *h, fuse_req_t req, size_t size,
                    uint64_t off, bool page_cache);
/* The size .gather shows: the largest batch end any O_DIRECT handle of
 * st needs. When h is not NULL (a GETATTR carrying an open .gather),
 * h's list is ended and its batch prepared first, so that the size
 * covers it. Returns 0 or a negative errno (a bad list, a failed
 * gather). */
int zfs_gather_size(struct zfs_fs *fs, struct zfs_store *st, struct zfs_handle *h,
                    uint64_t *size);
/* Forget h's part in .gather's size; when its file is closed. */
void zfs_gather_release(struct zfs_handle *h);

#endif

/* cold.h: record files whose bytes are not in the page cache (cold.c). */
#ifndef ZFS_COLD_H
#define ZFS_COLD_H

#include "fs/zrfs.h"

/* Start the threads that read cold record files for the single-threaded
 * loop; call after daemonizing. Returns 0 or a negative errno (then
 * zfs_cold_read reads on the caller's thread). */
int zfs_cold_start(void);
/* Answer the requests still queued, then stop the threads. Safe when
 * none runs. */
void zfs_cold_stop(void);
/* A READ of bytes [off, off + size) of record file i of st, through
 * handle h (NULL without one): when the record's stored bytes are not all
 * in the page cache, read them (a thread of this module, or the caller's
 * thread if none runs) and answer req; returns true, and req is then
 * answered or about to be. Returns false, req untouched, when the record
 * is cached (or the question failed): the caller serves it as usual.
 * Takes a reference to h while the request is in flight. */
bool zfs_cold_read(struct zfs_fs *fs, fuse_req_t req, struct zfs_store *st, struct zfs_handle *h,
                   uint64_t i, size_t size, off_t off);

/* A LOOKUP of slot of st: when it names a Ragged record whose size must be
 * read from the disk (its table entry or its bytes are not in the page
 * cache), a thread of this module reads it and answers req, and this
 * returns true; false, req untouched, when the answer needs no disk (or
 * no thread runs): the caller answers. */
bool zfs_cold_lookup(struct zfs_fs *fs, fuse_req_t req, struct zfs_store *st, uint64_t slot);

#endif

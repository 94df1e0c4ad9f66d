/* record.h: record files' bytes and sizes, and the read-ahead (record.c). */
#ifndef ZFS_RECORD_H
#define ZFS_RECORD_H

#include "fs/zrfs.h"

/* Load record i of st (or take it from the cache); *out holds a
 * reference to drop with zfs_rec_put. Returns 0 or a negative errno
 * (-ENOENT past the end, -EIO when it fails to decode). */
int zfs_rec_get(struct zfs_fs *fs, struct zfs_store *st, uint64_t i, struct zfs_rec **out);
/* For a direct store (st->direct): fill *r, a caller-owned record that is
 * neither cached nor counted, with record i pointing into the mapping.
 * Returns 0 or a negative errno (-ENOENT past the end). */
int zfs_rec_span(struct zfs_fs *fs, struct zfs_store *st, uint64_t i, struct zfs_rec *r);

/* Map the pages of [p, p + size) of a mapping into this process now
 * (MADV_POPULATE_READ), reading them from the disk if they must be, so
 * that a later copy out of them takes no page fault. Advice only. */
void zfs_populate(const void *p, uint64_t size);
/* Reply to req with bytes [off, off + size) of the file of r: the NPY
 * header (if any) followed by the payload. */
void zfs_rec_reply(fuse_req_t req, const struct zfs_rec *r, size_t size, off_t off);
/* The decoded record that record handle h reads, loaded on its first
 * read (which also tells the read-ahead) and kept with the handle; *out
 * holds a reference to drop with zfs_rec_put. Takes h->mu. Returns 0 or a
 * negative errno (-ESTALE: the record was deleted while open). */
int zfs_rec_hold(struct zfs_fs *fs, struct zfs_handle *h, struct zfs_rec **out);
/* The file size of record i and its stored size (for st_blocks). Dense
 * records and Ragged records seen before cost nothing; any other Ragged
 * record is decoded once. If may_decode is false and the size is unknown,
 * returns -EAGAIN. Otherwise 0 or a negative errno. */
int zfs_rec_size(struct zfs_fs *fs, struct zfs_store *st, uint64_t i, bool may_decode,
                 uint64_t *size, uint64_t *stored);
/* After a delete (caller holds st->lock exclusively): forget sizes and
 * decoded records of st. */
void zfs_rec_store_changed(struct zfs_store *st);
void zfs_sizes_free(struct zfs_sizes *z);
void zfs_stored_free(struct zfs_stored *z);
void zfs_rec_cache_clear(void);
/* A reader is about to read record i of st: when it read record i - 1
 * just before, have the read-ahead thread decode record i + 1 into the
 * cache (a raw store on a read-only mount: fault its pages of the mapping
 * in; a remote store: fetch a window of the next records with one
 * gather), so that a tool reading the files in order finds it ready.
 * Cheap, never blocks on a decode, the disk or the network. */
void zfs_rec_ahead(struct zfs_fs *fs, struct zfs_store *st, uint64_t i);
/* The read-ahead thread: started after daemonizing, stopped before the
 * stores are freed. Without it zfs_rec_ahead does nothing. */
int zfs_ahead_start(void);
void zfs_ahead_stop(void);
/* The threads that fetch remote stores' windows of records (record.c):
 * started after daemonizing when the mount shows remote stores, stopped
 * (once the windows asked for are in) before the stores are freed.
 * Without them a sequential reader of a remote store reads one record
 * per GET. */
int zfs_remote_ahead_start(void);
void zfs_remote_ahead_stop(void);
/* Counters of the remote read-ahead, for the log at unmount: windows
 * fetched, records they brought, and records loaded one at a time. */
void zfs_remote_ahead_counts(uint64_t *windows, uint64_t *records, uint64_t *singles);

#endif

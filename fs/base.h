/* base.h: what every module of zrecordfs uses (base.c). */
#ifndef ZFS_BASE_H
#define ZFS_BASE_H

#include "fs/zrfs.h"

/* The errno for a libloaderx status code: the one place they are mapped. */
int zfs_errno(int zr_code);
/* The refusal for changes the view never allows: EROFS on a read-only
 * mount, EPERM on a read-write one (only the control files change it). */
int zfs_deny(const struct zfs_fs *fs);
/* Format the name of record i (with the mount's suffix) into buf. */
void zfs_record_name(const struct zfs_fs *fs, uint64_t i, char *buf, size_t cap);
/* Drop a reference to a decoded record; the last one frees it. Accepts
 * NULL. */
void zfs_rec_put(struct zfs_rec *r);
/* A handle of the given kind on st, holding one reference (the open
 * file's), or NULL when out of memory. */
struct zfs_handle *zfs_handle_new(struct zfs_store *st, enum zfs_htype type);
/* Drop a reference to an open file's handle; the last one frees it and
 * what it holds. Accepts NULL. */
void zfs_handle_put(struct zfs_handle *h);

#endif

/*
 * mount.h: what the daemon asks of the kernel for its mount beyond
 * libfuse's defaults (mount.c).
 */
#ifndef ZFS_MOUNT_H
#define ZFS_MOUNT_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>

/* The kernel's read-ahead for files of a mount, which is also the most a
 * FUSE READ of a file read from its start asks for. The kernel's default,
 * 128 KiB, splits a 147 KiB record file into two READs where one does;
 * libfuse lets a READ carry up to 1 MiB. Raised by the daemon at mount
 * time (zfs_raise_read_ahead) and kept by its INIT reply (ops.c). */
#define ZFS_READ_AHEAD_KB 1024u

/* Route se's device reads and writes through functions that add
 * FUSE_PARALLEL_DIROPS to the INIT reply when the kernel offers it, which
 * libfuse before 3.17 leaves out. Call after fuse_session_mount and
 * before the loop. 0, or a negative errno (the session then goes on as
 * it was). */
int zfs_dirops_io(struct fuse_session *se);

/* Raise the read-ahead of the mount at mnt to ZFS_READ_AHEAD_KB (root
 * only; the kernel's default stays otherwise). Call after
 * fuse_session_mount and before the loop answers INIT, whose reply must
 * offer the same (ZFS_READ_AHEAD_KB in op_init). */
void zfs_raise_read_ahead(const char *mnt);

#endif

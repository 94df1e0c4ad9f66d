/* fileops.h: the FUSE requests on open files (fileops.c), for the
 * operations table in ops.c. */
#ifndef ZFS_FILEOPS_H
#define ZFS_FILEOPS_H

#include "fs/zrfs.h"

void zfs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void zfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                 struct fuse_file_info *fi);
void zfs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                  struct fuse_file_info *fi);
void zfs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void zfs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

#endif

/* ops.h: the FUSE operations (ops.c). */
#ifndef ZFS_OPS_H
#define ZFS_OPS_H

#include "fs/zrfs.h"

/* The operations table handed to fuse_session_new. */
const struct fuse_lowlevel_ops *zfs_lowlevel_ops(void);

#endif

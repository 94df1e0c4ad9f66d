/* tree.h: the folders the mount shows and the stores in them (tree.c). */
#ifndef ZFS_TREE_H
#define ZFS_TREE_H

#include "fs/zrfs.h"

/* Scan cfg->root and open every store found (read-only or read-write as
 * cfg says). Returns 0, or -1 after printing why to stderr (no store, a
 * store in use under -o rw, an unreadable ROOT). */
int zfs_tree_build(struct zfs_fs *fs);
void zfs_tree_free(struct zfs_fs *fs);
/* The node of a folder inode, or NULL. */
struct zfs_node *zfs_tree_node(struct zfs_fs *fs, fuse_ino_t ino);
/* The child folder called name, or NULL. */
struct zfs_node *zfs_tree_child(struct zfs_fs *fs, struct zfs_node *n, const char *name);

#endif

/* inode.h: what inode numbers and names stand for, and the attributes and
 * listing entries shown for them (inode.c). */
#ifndef ZFS_INODE_H
#define ZFS_INODE_H

#include "fs/zrfs.h"

/* What an inode number names: a folder (node), or a slot of a store. */
struct zfs_target {
    struct zfs_node *node;
    struct zfs_store *st;
    uint64_t slot;
};

/* Fill *t for ino. Returns 0, or -ENOENT when ino names nothing shown. */
int zfs_resolve(struct zfs_fs *fs, fuse_ino_t ino, struct zfs_target *t);
/* The slot that name stands for in store st (a control file or a record
 * below the record count), or 0 when it names nothing. */
uint64_t zfs_name_slot(const struct zfs_fs *fs, struct zfs_store *st, const char *name);
/* The attributes of folder n, whose inode is ino. */
void zfs_dir_attr(const struct zfs_node *n, fuse_ino_t ino, struct stat *a);
/* The attributes of slot of st. Ragged records of unknown size are
 * decoded only when may_decode; otherwise -EAGAIN. Returns 0 or a
 * negative errno. */
int zfs_file_attr(struct zfs_fs *fs, struct zfs_store *st, uint64_t slot, bool may_decode,
                  struct stat *a);
/* An empty entry with the mount's timeouts. */
void zfs_entry_init(struct zfs_fs *fs, struct fuse_entry_param *e);
/* Answer a LOOKUP of a name that names nothing. */
void zfs_reply_missing(fuse_req_t req, struct zfs_fs *fs);
/* Answer a LOOKUP of slot of st with its attributes (decoding a Ragged
 * record for its size if need be). */
void zfs_reply_slot_entry(struct zfs_fs *fs, fuse_req_t req, struct zfs_store *st, uint64_t slot);
/* How long the kernel may keep the attributes of slot. */
double zfs_attr_timeout(const struct zfs_fs *fs, uint64_t slot);
/* Entry pos of the listing of folder n (inode ino): its name into
 * name[0..cap) and, with plus, its attributes. Returns false past the
 * end. */
bool zfs_dir_entry(struct zfs_fs *fs, fuse_ino_t ino, struct zfs_node *n, uint64_t pos,
                   bool plus, char *name, size_t cap, struct fuse_entry_param *e);

#endif

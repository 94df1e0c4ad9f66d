/*
 * ops.c: the FUSE low-level operations, the edge where kernel requests
 * become calls into the tree, the record cache and the control files. It
 * is the top of the driver: it calls every other module, and none calls
 * it.
 *
 * Rules kept by every function here: each request is answered exactly
 * once, on every path (an early return is always a reply); library status
 * codes become errno values only through zfs_errno; nothing here blocks
 * on anything but the library and the store locks. What inode numbers and
 * names stand for, and the attributes shown for them, is inode.c's; the
 * requests on open files are fileops.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fs/base.h"
#include "fs/cold.h"
#include "fs/fileops.h"
#include "fs/gather.h"
#include "fs/inode.h"
#include "fs/mount.h"
#include "fs/ops.h"
#include "fs/tree.h"

static struct zfs_fs *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    /* O_TRUNC arrives with OPEN instead of as a separate SETATTR, so
     * `echo 3 1 4 > .gather` needs no truncation support. */
    if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
        conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
    /* One large O_DIRECT read becomes concurrent requests, answered at
     * their offsets (gather.c); libfuse asks for it by default. */
    if (conn->capable & FUSE_CAP_ASYNC_DIO)
        conn->want |= FUSE_CAP_ASYNC_DIO;
    /* The read-ahead the daemon set for this mount (zrecordfs.c): the
     * kernel keeps the smaller of it and this, and libfuse offers the
     * kernel's value from before the mount, 128 KiB by default. */
    if (conn->max_readahead < ZFS_READ_AHEAD_KB * 1024)
        conn->max_readahead = ZFS_READ_AHEAD_KB * 1024;
    /* Cold record files are answered by splicing from the chunk file
     * (cold.c); other replies are written as before. */
    if (conn->capable & FUSE_CAP_SPLICE_WRITE)
        conn->want |= FUSE_CAP_SPLICE_WRITE;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct zfs_fs *fs = fs_of(req);
    struct zfs_node *n = zfs_tree_node(fs, parent);
    struct fuse_entry_param e;
    zfs_entry_init(fs, &e);
    if (!n) {
        fuse_reply_err(req, parent >= (UINT64_C(1) << ZFS_STORE_SHIFT) ? ENOTDIR : ENOENT);
        return;
    }
    if (!n->store) {
        struct zfs_node *k = zfs_tree_child(fs, n, name);
        if (!k) {
            zfs_reply_missing(req, fs);
            return;
        }
        e.ino = (fuse_ino_t)(k - fs->nodes) + 1;
        zfs_dir_attr(k, e.ino, &e.attr);
        fuse_reply_entry(req, &e);
        return;
    }
    struct zfs_store *st = n->store;
    if (!st->zs) {
        fuse_reply_err(req, EIO);
        return;
    }
    uint64_t slot = zfs_name_slot(fs, st, name);
    if (slot == 0) {
        zfs_reply_missing(req, fs);
        return;
    }
    /* A Ragged record's size is in its bytes: when they are not in
     * memory, a cold thread reads them (cold.c) and the loop goes on. */
    if (zfs_cold_lookup(fs, req, st, slot))
        return;
    zfs_reply_slot_entry(fs, req, st, slot);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    /* Inodes are computed from their numbers: nothing to release. */
    (void)ino;
    (void)nlookup;
    fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    (void)count;
    (void)forgets;
    fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct zfs_fs *fs = fs_of(req);
    struct zfs_handle *h = fi ? (struct zfs_handle *)(uintptr_t)fi->fh : NULL;
    struct zfs_target t;
    struct stat a;
    int rc = zfs_resolve(fs, ino, &t);
    if (rc == 0 && t.node) {
        zfs_dir_attr(t.node, ino, &a);
    } else if (rc == 0 && h && h->type == ZFS_H_GATHER) {
        /* Before an O_DIRECT read the kernel asks for the size with the
         * reader's handle: its list ends here, and the size covers its
         * batch. */
        rc = zfs_file_attr(fs, t.st, t.slot, true, &a);
        uint64_t size;
        if (rc == 0 && (rc = zfs_gather_size(fs, t.st, h, &size)) == 0)
            a.st_size = (off_t)size;
    } else if (rc == 0) {
        rc = zfs_file_attr(fs, t.st, t.slot, true, &a);
    }
    if (rc != 0)
        fuse_reply_err(req, -rc);
    else
        fuse_reply_attr(req, &a, t.node ? fs->timeout : zfs_attr_timeout(fs, t.slot));
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    (void)fi;
    struct zfs_fs *fs = fs_of(req);
    struct zfs_target t;
    struct stat a;
    int rc = zfs_resolve(fs, ino, &t);
    /* Truncating a writable control file to nothing is what a shell's
     * `>` asks for; it is accepted and means nothing. Every other change
     * is refused. */
    if (rc == 0 && t.st && to_set == FUSE_SET_ATTR_SIZE && attr->st_size == 0 &&
        (t.slot == ZFS_CTL_GATHER || (fs->cfg.rw && (t.slot == ZFS_CTL_COMPACT ||
                                                     t.slot == ZFS_CTL_DELETE))))
        rc = zfs_file_attr(fs, t.st, t.slot, true, &a);
    else if (rc == 0)
        rc = -zfs_deny(fs);
    if (rc != 0)
        fuse_reply_err(req, -rc);
    else
        fuse_reply_attr(req, &a, zfs_attr_timeout(fs, t.slot));
}

static void op_refuse_entry(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                            dev_t rdev)
{
    (void)parent;
    (void)name;
    (void)mode;
    (void)rdev;
    fuse_reply_err(req, zfs_deny(fs_of(req)));
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    op_refuse_entry(req, parent, name, mode, 0);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    /* Deleting one record would move the last record into its place
     * (swap-last), silently renaming another file: rm is never allowed.
     * .delete takes index lists instead. */
    (void)parent;
    (void)name;
    fuse_reply_err(req, EPERM);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    (void)parent;
    (void)name;
    fuse_reply_err(req, zfs_deny(fs_of(req)));
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    (void)link;
    op_refuse_entry(req, parent, name, 0, 0);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                      const char *newname, unsigned int flags)
{
    (void)newparent;
    (void)newname;
    (void)flags;
    op_refuse_entry(req, parent, name, 0, 0);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    (void)ino;
    op_refuse_entry(req, newparent, newname, 0, 0);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
    (void)fi;
    op_refuse_entry(req, parent, name, mode, 0);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct zfs_fs *fs = fs_of(req);
    if (!zfs_tree_node(fs, ino)) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    /* A read-only mount's listings never change: the kernel may cache
     * them. */
    fi->cache_readdir = !fs->cfg.rw;
    fi->keep_cache = !fs->cfg.rw;
    fuse_reply_open(req, fi);
}

static void list_dir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
    struct zfs_fs *fs = fs_of(req);
    struct zfs_node *n = zfs_tree_node(fs, ino);
    if (!n) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    /* The kernel asks for a page at a time: no allocation for that. */
    char small[8192];
    char *buf = size <= sizeof small ? small : malloc(size);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    size_t used = 0;
    char name[300];
    struct fuse_entry_param e;
    for (uint64_t pos = (uint64_t)off; zfs_dir_entry(fs, ino, n, pos, plus, name, sizeof name, &e);
         pos++) {
        size_t room = size - used, need;
        if (plus)
            need = fuse_add_direntry_plus(req, buf + used, room, name, &e, (off_t)(pos + 1));
        else
            need = fuse_add_direntry(req, buf + used, room, name, &e.attr, (off_t)(pos + 1));
        if (need > room)
            break;
        used += need;
    }
    fuse_reply_buf(req, buf, used);
    if (buf != small)
        free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)fi;
    list_dir(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    (void)fi;
    list_dir(req, ino, size, off, true);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    struct statvfs sv;
    if (statvfs(fs_of(req)->cfg.root, &sv) != 0)
        fuse_reply_err(req, errno);
    else
        fuse_reply_statfs(req, &sv);
}

static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
    struct zfs_fs *fs = fs_of(req);
    struct zfs_target t;
    int rc = zfs_resolve(fs, ino, &t);
    bool writable = t.st && (t.slot == ZFS_CTL_GATHER ||
                             (fs->cfg.rw && (t.slot == ZFS_CTL_COMPACT || t.slot == ZFS_CTL_DELETE)));
    if (rc == 0 && (mask & W_OK) && !writable)
        rc = fs->cfg.rw ? -EACCES : -EROFS;
    if (rc == 0 && (mask & R_OK) && t.st && t.slot == ZFS_CTL_DELETE)
        rc = -EACCES;
    if (rc == 0 && (mask & X_OK) && !t.node)
        rc = -EACCES;
    fuse_reply_err(req, -rc);
}

static const struct fuse_lowlevel_ops ops = {
    .init = op_init,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .setattr = op_setattr,
    .mknod = op_refuse_entry,
    .mkdir = op_mkdir,
    .unlink = op_unlink,
    .rmdir = op_rmdir,
    .symlink = op_symlink,
    .rename = op_rename,
    .link = op_link,
    .create = op_create,
    .open = zfs_op_open,
    .read = zfs_op_read,
    .write = zfs_op_write,
    .flush = zfs_op_flush,
    .release = zfs_op_release,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .statfs = op_statfs,
    .access = op_access,
};

const struct fuse_lowlevel_ops *zfs_lowlevel_ops(void)
{
    return &ops;
}

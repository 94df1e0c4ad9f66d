/*
 * inode.c: what each inode number and each name of the mount stands for,
 * and the attributes and listing entries shown for it.
 *
 * Nothing here is a table: an inode number is computed from a folder's
 * position or a store's number and a slot (zrfs.h), and a name is parsed.
 * A record name is a canonical decimal number (no sign, no leading zero,
 * no spaces) followed by the mount's suffix, and is checked against the
 * record count, so lookup costs the same in a store of ten records or ten
 * million. Listings are generated from the directory offset, so nothing
 * dataset-sized is built to answer them.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/decimal.h"
#include "fs/base.h"
#include "fs/ctl.h"
#include "fs/gather.h"
#include "fs/inode.h"
#include "fs/record.h"
#include "fs/tree.h"

/* What st_blksize advertises: large, so cp and cat read in big pieces. */
#define BLKSIZE 131072

static const char *const ctl_names[] = {
    [ZFS_CTL_STATS] = ".stats",
    [ZFS_CTL_GATHER] = ".gather",
    [ZFS_CTL_COMPACT] = ".compact",
    [ZFS_CTL_DELETE] = ".delete",
};

/* A record name: canonical decimal digits, then the suffix. */
static bool parse_record_name(const struct zfs_fs *fs, const char *name, uint64_t *out)
{
    size_t len = strnlen(name, 256), elen = strlen(fs->cfg.ext);
    if (len <= elen || memcmp(name + len - elen, fs->cfg.ext, elen) != 0)
        return false;
    return dec_parse(name, len - elen, true, out);
}

static bool ctl_shown(const struct zfs_fs *fs, uint64_t slot)
{
    for (int k = 0; k < fs->nctl; k++)
        if ((uint64_t)fs->ctl[k] == slot)
            return true;
    return false;
}

static int parse_ctl_name(const struct zfs_fs *fs, const char *name)
{
    for (int k = 0; k < fs->nctl; k++)
        if (strcmp(name, ctl_names[fs->ctl[k]]) == 0)
            return (int)fs->ctl[k];
    return 0;
}

uint64_t zfs_name_slot(const struct zfs_fs *fs, struct zfs_store *st, const char *name)
{
    uint64_t i;
    int ctl = parse_ctl_name(fs, name);
    if (ctl != 0)
        return (uint64_t)ctl;
    if (parse_record_name(fs, name, &i) && i < zr_len(st->zs))
        return ZFS_RECORD_SLOT0 + i;
    return 0;
}

int zfs_resolve(struct zfs_fs *fs, fuse_ino_t ino, struct zfs_target *t)
{
    memset(t, 0, sizeof *t);
    if (ino < (UINT64_C(1) << ZFS_STORE_SHIFT)) {
        t->node = zfs_tree_node(fs, ino);
        return t->node ? 0 : -ENOENT;
    }
    uint64_t sid = (ino >> ZFS_STORE_SHIFT) - 1;
    if (sid >= fs->nstores)
        return -ENOENT;
    t->st = fs->stores[sid];
    t->slot = ino & ZFS_SLOT_MASK;
    if (t->slot < ZFS_RECORD_SLOT0 && !ctl_shown(fs, t->slot))
        return -ENOENT;
    return 0;
}

/* Clear *a and give it the owner and times of the real folder from. */
static void attr_init(struct stat *a, const struct stat *from)
{
    memset(a, 0, sizeof *a);
    a->st_uid = from->st_uid;
    a->st_gid = from->st_gid;
    a->st_blksize = BLKSIZE;
    a->st_atim = from->st_atim;
    a->st_mtim = from->st_mtim;
    a->st_ctim = from->st_ctim;
}

void zfs_dir_attr(const struct zfs_node *n, fuse_ino_t ino, struct stat *a)
{
    attr_init(a, &n->st);
    a->st_ino = ino;
    a->st_mode = S_IFDIR | 0555;
    a->st_nlink = 2 + n->nkids;
}

int zfs_file_attr(struct zfs_fs *fs, struct zfs_store *st, uint64_t slot, bool may_decode,
                  struct stat *a)
{
    attr_init(a, &st->st);
    a->st_ino = zfs_ino(st->sid, slot);
    a->st_nlink = 1;
    uint64_t size = 0, stored = 0;
    int rc = 0;
    switch (slot) {
    case ZFS_CTL_STATS:
        a->st_mode = S_IFREG | 0444;
        /* A remote store's stats read its whole record table, a
         * request per 64 Ki records: not for a listing (readdirplus),
         * only for a reader of the file. */
        if (!may_decode && st->remote)
            return -EAGAIN;
        rc = zfs_stats_size(fs, st, &size);
        stored = size;
        break;
    case ZFS_CTL_GATHER:
        a->st_mode = S_IFREG | 0666;
        rc = zfs_gather_size(fs, st, NULL, &size);
        break;
    case ZFS_CTL_COMPACT:
        a->st_mode = S_IFREG | (fs->cfg.rw ? 0644 : 0444);
        rc = zfs_compact_size(st, &size);
        stored = size;
        break;
    case ZFS_CTL_DELETE:
        a->st_mode = S_IFREG | 0200;
        break;
    default:
        a->st_mode = S_IFREG | 0444;
        rc = zfs_rec_size(fs, st, slot - ZFS_RECORD_SLOT0, may_decode, &size, &stored);
        break;
    }
    a->st_size = (off_t)size;
    a->st_blocks = (blkcnt_t)((stored + 511) / 512);
    return rc;
}

void zfs_entry_init(struct zfs_fs *fs, struct fuse_entry_param *e)
{
    memset(e, 0, sizeof *e);
    e->attr_timeout = fs->timeout;
    e->entry_timeout = fs->timeout;
}

void zfs_reply_missing(fuse_req_t req, struct zfs_fs *fs)
{
    /* ENOENT, remembered by the kernel on read-only mounts (nothing
     * appears there while mounted). */
    if (fs->cfg.rw) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    struct fuse_entry_param e;
    zfs_entry_init(fs, &e);
    fuse_reply_entry(req, &e);
}

void zfs_reply_slot_entry(struct zfs_fs *fs, fuse_req_t req, struct zfs_store *st, uint64_t slot)
{
    struct fuse_entry_param e;
    zfs_entry_init(fs, &e);
    int rc = zfs_file_attr(fs, st, slot, true, &e.attr);
    if (rc == -ENOENT) {
        zfs_reply_missing(req, fs);
        return;
    }
    if (rc != 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    e.ino = e.attr.st_ino;
    e.attr_timeout = zfs_attr_timeout(fs, slot);
    fuse_reply_entry(req, &e);
}

/* The size of .gather follows the batches being read (gather.c), so the
 * kernel asks again before every read. */
double zfs_attr_timeout(const struct zfs_fs *fs, uint64_t slot)
{
    return slot == ZFS_CTL_GATHER ? 0.0 : fs->timeout;
}

bool zfs_dir_entry(struct zfs_fs *fs, fuse_ino_t ino, struct zfs_node *n, uint64_t pos,
                   bool plus, char *name, size_t cap, struct fuse_entry_param *e)
{
    zfs_entry_init(fs, e);
    if (pos < 2) {
        /* The kernel ignores the attributes of "." and "..". */
        snprintf(name, cap, pos == 0 ? "." : "..");
        e->attr.st_ino = pos == 0 ? ino : n->parent;
        e->attr.st_mode = S_IFDIR;
        return true;
    }
    pos -= 2;
    if (!n->store) {
        if (pos >= n->nkids)
            return false;
        struct zfs_node *k = &fs->nodes[n->kids[pos]];
        snprintf(name, cap, "%s", k->name);
        e->ino = n->kids[pos] + 1;
        zfs_dir_attr(k, e->ino, &e->attr);
        return true;
    }
    struct zfs_store *st = n->store;
    if (!st->zs)
        return false;
    uint64_t slot;
    if (pos < (uint64_t)fs->nctl) {
        slot = fs->ctl[pos];
        snprintf(name, cap, "%s", ctl_names[slot]);
    } else {
        uint64_t i = pos - (uint64_t)fs->nctl;
        if (i >= zr_len(st->zs))
            return false;
        slot = ZFS_RECORD_SLOT0 + i;
        zfs_record_name(fs, i, name, cap);
    }
    if (!plus) {
        e->attr.st_ino = zfs_ino(st->sid, slot);
        e->attr.st_mode = S_IFREG;
    } else if (zfs_file_attr(fs, st, slot, false, &e->attr) == 0) {
        e->ino = e->attr.st_ino;
        e->attr_timeout = zfs_attr_timeout(fs, slot);
    } else {
        /* Size unknown without decoding (a Ragged record not seen yet),
         * or unreadable: list the name only, and let a lookup find out
         * when someone asks. */
        e->ino = 0;
        e->attr.st_ino = zfs_ino(st->sid, slot);
        e->attr.st_mode = S_IFREG;
    }
    return true;
}

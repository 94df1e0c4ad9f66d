/*
 * ops.c: the FUSE low-level operations, the edge where kernel requests
 * become calls into the tree, the record cache and the control files.
 *
 * Rules kept by every function here: each request is answered exactly
 * once, on every path (an early return is always a reply); library status
 * codes become errno values only through zfs_errno; nothing here blocks
 * on anything but the library and the store locks. Names are parsed
 * without any table: a record name is a canonical decimal number (no
 * sign, no leading zero, no spaces) followed by the mount's suffix, and
 * is checked against the record count, so lookup costs the same in a
 * store of ten records or ten million. Listings are generated from the
 * directory offset, so nothing dataset-sized is built to answer them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fs/zrfs.h"

/* What st_blksize advertises: large, so cp and cat read in big pieces. */
#define BLKSIZE 131072

static const char *const ctl_names[] = {
    [ZFS_CTL_STATS] = ".stats",
    [ZFS_CTL_GATHER] = ".gather",
    [ZFS_CTL_COMPACT] = ".compact",
    [ZFS_CTL_DELETE] = ".delete",
};

static struct zfs_fs *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

int zfs_errno(int zr_code)
{
    switch (zr_code) {
    case ZR_OK:
        return 0;
    case ZR_ENOMEM:
        return ENOMEM;
    case ZR_ENOTSTORE:
        return ENOENT;
    case ZR_EEXIST:
        return EEXIST;
    case ZR_EBUSY:
        return EBUSY;
    case ZR_EINVAL:
    case ZR_ERANGE:
    case ZR_EDTYPE:
    case ZR_ESHAPE:
    case ZR_EEMPTY:
    case ZR_EKIND:
        return EINVAL;
    case ZR_ETOOBIG:
        return EFBIG;
    case ZR_EROFS:
        return EROFS;
    case ZR_ENOSPC:
        return ENOSPC;
    case ZR_EIO:
    case ZR_ECORRUPT:
    case ZR_ECODEC:
    default:
        return EIO;
    }
}

void zfs_record_name(const struct zfs_fs *fs, uint64_t i, char *buf, size_t cap)
{
    snprintf(buf, cap, "%llu%s", (unsigned long long)i, fs->cfg.ext);
}

/* The refusal for changes the view never allows: EROFS on a read-only
 * mount, EPERM on a read-write one (only the control files change it). */
static int deny(const struct zfs_fs *fs)
{
    return fs->cfg.rw ? EPERM : EROFS;
}

/* A record name: canonical decimal digits, then the suffix. */
static bool parse_record_name(const struct zfs_fs *fs, const char *name, uint64_t *out)
{
    size_t len = strnlen(name, 256), elen = strlen(fs->cfg.ext);
    if (len <= elen || len - elen > 20 || memcmp(name + len - elen, fs->cfg.ext, elen) != 0)
        return false;
    size_t nd = len - elen;
    if (name[0] == '0' && nd > 1)
        return false;
    uint64_t v = 0;
    for (size_t k = 0; k < nd; k++) {
        if (name[k] < '0' || name[k] > '9')
            return false;
        uint64_t d = (uint64_t)(name[k] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
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

/* What an inode number names: a folder, or a slot of a store. */
struct target {
    struct zfs_node *node;
    struct zfs_store *st;
    uint64_t slot;
};

static int resolve(struct zfs_fs *fs, fuse_ino_t ino, struct target *t)
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

static void dir_attr(const struct zfs_node *n, fuse_ino_t ino, struct stat *a)
{
    memset(a, 0, sizeof *a);
    a->st_ino = ino;
    a->st_mode = S_IFDIR | 0555;
    a->st_nlink = 2 + n->nkids;
    a->st_uid = n->st.st_uid;
    a->st_gid = n->st.st_gid;
    a->st_blksize = BLKSIZE;
    a->st_atim = n->st.st_atim;
    a->st_mtim = n->st.st_mtim;
    a->st_ctim = n->st.st_ctim;
}

/* Attributes of a file of a store. Ragged records of unknown size are
 * decoded only when may_decode; otherwise -EAGAIN. */
static int file_attr(struct zfs_fs *fs, struct zfs_store *st, uint64_t slot, bool may_decode,
                     struct stat *a)
{
    memset(a, 0, sizeof *a);
    a->st_ino = zfs_ino(st->sid, slot);
    a->st_nlink = 1;
    a->st_uid = st->st.st_uid;
    a->st_gid = st->st.st_gid;
    a->st_blksize = BLKSIZE;
    a->st_atim = st->st.st_atim;
    a->st_mtim = st->st.st_mtim;
    a->st_ctim = st->st.st_ctim;
    uint64_t size = 0, stored = 0;
    int rc = 0;
    switch (slot) {
    case ZFS_CTL_STATS:
        a->st_mode = S_IFREG | 0444;
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

static void entry_init(struct zfs_fs *fs, struct fuse_entry_param *e)
{
    memset(e, 0, sizeof *e);
    e->attr_timeout = fs->timeout;
    e->entry_timeout = fs->timeout;
}

/* How long the kernel may keep the attributes of a file of a store: the
 * size of .gather follows the batches being read (ctl.c), so the kernel
 * asks again before every read. */
static double attr_timeout(const struct zfs_fs *fs, uint64_t slot)
{
    return slot == ZFS_CTL_GATHER ? 0.0 : fs->timeout;
}

/* ENOENT, remembered by the kernel on read-only mounts (nothing appears
 * there while mounted). */
static void reply_missing(fuse_req_t req, struct zfs_fs *fs)
{
    if (fs->cfg.rw) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    struct fuse_entry_param e;
    entry_init(fs, &e);
    fuse_reply_entry(req, &e);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    /* O_TRUNC arrives with OPEN instead of as a separate SETATTR, so
     * `echo 3 1 4 > .gather` needs no truncation support. */
    if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
        conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
    /* One large O_DIRECT read becomes concurrent requests, answered at
     * their offsets (ctl.c); libfuse asks for it by default. */
    if (conn->capable & FUSE_CAP_ASYNC_DIO)
        conn->want |= FUSE_CAP_ASYNC_DIO;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct zfs_fs *fs = fs_of(req);
    struct zfs_node *n = zfs_tree_node(fs, parent);
    struct fuse_entry_param e;
    entry_init(fs, &e);
    if (!n) {
        fuse_reply_err(req, parent >= (UINT64_C(1) << ZFS_STORE_SHIFT) ? ENOTDIR : ENOENT);
        return;
    }
    if (!n->store) {
        struct zfs_node *k = zfs_tree_child(fs, n, name);
        if (!k) {
            reply_missing(req, fs);
            return;
        }
        e.ino = (fuse_ino_t)(k - fs->nodes) + 1;
        dir_attr(k, e.ino, &e.attr);
        fuse_reply_entry(req, &e);
        return;
    }
    struct zfs_store *st = n->store;
    if (!st->zs) {
        fuse_reply_err(req, EIO);
        return;
    }
    uint64_t slot, i;
    int ctl = parse_ctl_name(fs, name);
    if (ctl != 0)
        slot = (uint64_t)ctl;
    else if (parse_record_name(fs, name, &i) && i < zr_len(st->zs))
        slot = ZFS_RECORD_SLOT0 + i;
    else {
        reply_missing(req, fs);
        return;
    }
    int rc = file_attr(fs, st, slot, true, &e.attr);
    if (rc == -ENOENT) {
        reply_missing(req, fs);
        return;
    }
    if (rc != 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    e.ino = e.attr.st_ino;
    e.attr_timeout = attr_timeout(fs, slot);
    fuse_reply_entry(req, &e);
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
    struct target t;
    struct stat a;
    int rc = resolve(fs, ino, &t);
    if (rc == 0 && t.node) {
        dir_attr(t.node, ino, &a);
    } else if (rc == 0 && h && h->type == ZFS_H_GATHER) {
        /* Before an O_DIRECT read the kernel asks for the size with the
         * reader's handle: its list ends here, and the size covers its
         * batch. */
        rc = file_attr(fs, t.st, t.slot, true, &a);
        uint64_t size;
        if (rc == 0 && (rc = zfs_gather_size(fs, t.st, h, &size)) == 0)
            a.st_size = (off_t)size;
    } else if (rc == 0) {
        rc = file_attr(fs, t.st, t.slot, true, &a);
    }
    if (rc != 0)
        fuse_reply_err(req, -rc);
    else
        fuse_reply_attr(req, &a, t.node ? fs->timeout : attr_timeout(fs, t.slot));
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    (void)fi;
    struct zfs_fs *fs = fs_of(req);
    struct target t;
    struct stat a;
    int rc = resolve(fs, ino, &t);
    /* Truncating a writable control file to nothing is what a shell's
     * `>` asks for; it is accepted and means nothing. Every other change
     * is refused. */
    if (rc == 0 && t.st && to_set == FUSE_SET_ATTR_SIZE && attr->st_size == 0 &&
        (t.slot == ZFS_CTL_GATHER || (fs->cfg.rw && (t.slot == ZFS_CTL_COMPACT ||
                                                     t.slot == ZFS_CTL_DELETE))))
        rc = file_attr(fs, t.st, t.slot, true, &a);
    else if (rc == 0)
        rc = -deny(fs);
    if (rc != 0)
        fuse_reply_err(req, -rc);
    else
        fuse_reply_attr(req, &a, attr_timeout(fs, t.slot));
}

static void op_refuse_entry(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                            dev_t rdev)
{
    (void)parent;
    (void)name;
    (void)mode;
    (void)rdev;
    fuse_reply_err(req, deny(fs_of(req)));
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
    fuse_reply_err(req, deny(fs_of(req)));
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

static struct zfs_handle *handle_new(struct zfs_store *st, enum zfs_htype type)
{
    struct zfs_handle *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->type = type;
    h->st = st;
    atomic_init(&h->refs, 1);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->unpinned, NULL);
    zfs_idxlist_init(&h->list, 0, ZFS_LIST_MAX);
    return h;
}

static void handle_free(struct zfs_handle *h)
{
    if (!h)
        return;
    if (h->type == ZFS_H_GATHER)
        zfs_gather_release(h);
    zfs_rec_put(h->rec);
    zfs_idxlist_free(&h->list);
    if (h->out != h->gbuf)
        free(h->out);
    free(h->gbuf);
    pthread_cond_destroy(&h->unpinned);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

void zfs_handle_put(struct zfs_handle *h)
{
    if (h && atomic_fetch_sub(&h->refs, 1) == 1)
        handle_free(h);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct zfs_fs *fs = fs_of(req);
    if (fs->cfg.noopen) {
        /* The kernel then skips OPEN and RELEASE for the whole mount and
         * serves warm reads from its page cache. */
        fuse_reply_err(req, ENOSYS);
        return;
    }
    struct target t;
    struct zfs_handle *h = NULL;
    int rc = resolve(fs, ino, &t);
    bool writing = (fi->flags & O_ACCMODE) != O_RDONLY;
    if (rc == 0 && t.node)
        rc = -EISDIR;
    else if (rc == 0 && !t.st->zs)
        rc = -EIO;
    if (rc != 0)
        goto out;
    switch (t.slot) {
    case ZFS_CTL_GATHER:
        if (!(h = handle_new(t.st, ZFS_H_GATHER))) {
            rc = -ENOMEM;
            break;
        }
        /* Without O_DIRECT: a stream, each read(2) one request after
         * another. With O_DIRECT the kernel sends the requests of one
         * large read(2) at once and the reader waits once (ctl.c); the
         * file is then seekable, so threads may pread parts of a batch. */
        h->odirect = (fi->flags & O_DIRECT) != 0;
        fi->direct_io = !h->odirect;
        fi->nonseekable = !h->odirect;
        break;
    case ZFS_CTL_COMPACT:
        if (writing && !fs->cfg.rw) {
            rc = -EROFS;
            break;
        }
        if (!(h = handle_new(t.st, ZFS_H_COMPACT))) {
            rc = -ENOMEM;
            break;
        }
        fi->direct_io = 1;
        fi->nonseekable = 1;
        break;
    case ZFS_CTL_DELETE:
        if (!writing || (fi->flags & O_ACCMODE) != O_WRONLY) {
            rc = -EACCES; /* an index list goes in, nothing comes out */
            break;
        }
        if (!(h = handle_new(t.st, ZFS_H_DELETE))) {
            rc = -ENOMEM;
            break;
        }
        fi->direct_io = 1;
        fi->nonseekable = 1;
        break;
    case ZFS_CTL_STATS:
        if (writing || (fi->flags & O_TRUNC)) {
            rc = fs->cfg.rw ? -EACCES : -EROFS;
            break;
        }
        if (!(h = handle_new(t.st, ZFS_H_STATS))) {
            rc = -ENOMEM;
            break;
        }
        rc = zfs_stats_text(fs, t.st, &h->out, &h->outlen);
        fi->direct_io = 1;
        break;
    default:
        if (writing || (fi->flags & O_TRUNC)) {
            rc = fs->cfg.rw ? -EACCES : -EROFS;
            break;
        }
        if (t.slot - ZFS_RECORD_SLOT0 >= zr_len(t.st->zs)) {
            rc = -ENOENT;
            break;
        }
        if (!(h = handle_new(t.st, ZFS_H_RECORD))) {
            rc = -ENOMEM;
            break;
        }
        h->index = t.slot - ZFS_RECORD_SLOT0;
        /* A read-only mount's records never change: the kernel may keep
         * their pages across opens. */
        fi->keep_cache = !fs->cfg.rw;
        break;
    }
out:
    if (rc != 0) {
        handle_free(h);
        fuse_reply_err(req, -rc);
        return;
    }
    fi->fh = (uint64_t)(uintptr_t)h;
    if (fuse_reply_open(req, fi) != 0)
        handle_free(h); /* the opener is gone: no RELEASE will follow */
}

/* Reply with bytes [off, off + size) of a record file: the NPY header
 * (if any) followed by the payload. */
static void reply_record(fuse_req_t req, const struct zfs_rec *r, size_t size, off_t off)
{
    uint64_t total = r->hdr_len + r->payload_len;
    uint64_t start = (uint64_t)off;
    if (start >= total || size == 0) {
        fuse_reply_buf(req, NULL, 0);
        return;
    }
    uint64_t end = total - start < size ? total : start + size;
    struct iovec iov[2];
    int cnt = 0;
    if (start < r->hdr_len) {
        uint64_t hend = end < r->hdr_len ? end : r->hdr_len;
        iov[cnt].iov_base = (void *)(r->hdr + start);
        iov[cnt++].iov_len = (size_t)(hend - start);
    }
    if (end > r->hdr_len) {
        uint64_t p0 = (start > r->hdr_len ? start : r->hdr_len) - r->hdr_len;
        iov[cnt].iov_base = (void *)(r->payload + p0);
        iov[cnt++].iov_len = (size_t)(end - r->hdr_len - p0);
    }
    fuse_reply_iov(req, iov, cnt);
}

static void reply_slice(fuse_req_t req, const char *buf, size_t len, size_t size, off_t off)
{
    if ((uint64_t)off >= len)
        fuse_reply_buf(req, NULL, 0);
    else
        fuse_reply_buf(req, buf + off, len - (size_t)off < size ? len - (size_t)off : size);
}

/* A read without a handle (-o noopen): records through the shared cache,
 * .stats and .compact from the store's texts. */
static void read_unopened(fuse_req_t req, struct zfs_fs *fs, fuse_ino_t ino, size_t size,
                          off_t off)
{
    struct target t;
    int rc = resolve(fs, ino, &t);
    if (rc == 0 && t.node)
        rc = -EISDIR;
    if (rc == 0 && t.slot == ZFS_CTL_STATS) {
        char *text = NULL;
        size_t len = 0;
        rc = zfs_stats_text(fs, t.st, &text, &len);
        if (rc == 0)
            reply_slice(req, text, len, size, off);
        free(text);
    } else if (rc == 0 && t.slot == ZFS_CTL_COMPACT) {
        char *text = NULL;
        size_t len = 0;
        rc = zfs_compact_text(t.st, &text, &len);
        if (rc == 0)
            reply_slice(req, text, len, size, off);
        free(text);
    } else if (rc == 0 && t.slot >= ZFS_RECORD_SLOT0 && t.st->direct) {
        struct zfs_rec d;
        if (off == 0)
            zfs_rec_ahead(fs, t.st, t.slot - ZFS_RECORD_SLOT0);
        rc = zfs_rec_span(fs, t.st, t.slot - ZFS_RECORD_SLOT0, &d);
        if (rc == 0)
            reply_record(req, &d, size, off);
    } else if (rc == 0 && t.slot >= ZFS_RECORD_SLOT0) {
        struct zfs_rec *r;
        if (off == 0)
            zfs_rec_ahead(fs, t.st, t.slot - ZFS_RECORD_SLOT0);
        rc = zfs_rec_get(fs, t.st, t.slot - ZFS_RECORD_SLOT0, &r);
        if (rc == 0) {
            reply_record(req, r, size, off);
            zfs_rec_put(r);
        }
    } else if (rc == 0) {
        rc = -EBADF;
    }
    if (rc != 0)
        fuse_reply_err(req, -rc);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    struct zfs_fs *fs = fs_of(req);
    struct zfs_handle *h = (struct zfs_handle *)(uintptr_t)fi->fh;
    if (!h) {
        read_unopened(req, fs, ino, size, off);
        return;
    }
    int rc = 0;
    switch (h->type) {
    case ZFS_H_RECORD: {
        if (h->st->direct) {
            /* Served from the mapping: no decode, no per-handle state. */
            struct zfs_rec d;
            if (off == 0)
                zfs_rec_ahead(fs, h->st, h->index);
            rc = zfs_rec_span(fs, h->st, h->index, &d);
            if (rc == 0)
                reply_record(req, &d, size, off);
            break;
        }
        struct zfs_rec *r = NULL;
        pthread_mutex_lock(&h->mu);
        if (h->rec && h->rec->gen != atomic_load(&h->st->gen)) {
            /* The store changed under this handle (a delete): its record
             * number now names other bytes. */
            zfs_rec_put(h->rec);
            h->rec = NULL;
        }
        if (!h->rec) {
            zfs_rec_ahead(fs, h->st, h->index);
            rc = zfs_rec_get(fs, h->st, h->index, &h->rec);
        }
        if (rc == -ENOENT)
            rc = -ESTALE; /* deleted while open */
        if (rc == 0) {
            r = h->rec;
            atomic_fetch_add(&r->refs, 1);
        }
        pthread_mutex_unlock(&h->mu);
        if (rc == 0) {
            reply_record(req, r, size, off);
            zfs_rec_put(r);
        }
        break;
    }
    case ZFS_H_STATS:
        reply_slice(req, h->out, h->outlen, size, off);
        break;
    case ZFS_H_GATHER:
        /* A read the kernel makes for its page cache carries no lock
         * owner, unlike one a reader makes. The reply holds its own
         * reference to h. */
        rc = zfs_gather_read(fs, h, req, size, (uint64_t)off, fi->lock_owner == 0);
        break;
    case ZFS_H_COMPACT: {
        const char *p;
        size_t n;
        /* The reply is sent under mu (it points into the handle's
         * buffer), and the reference keeps h alive through the unlock. */
        atomic_fetch_add(&h->refs, 1);
        pthread_mutex_lock(&h->mu);
        rc = zfs_compact_read(fs, h, size, &p, &n);
        if (rc == 0)
            fuse_reply_buf(req, p, n);
        pthread_mutex_unlock(&h->mu);
        zfs_handle_put(h);
        break;
    }
    case ZFS_H_DELETE:
        rc = -EBADF;
        break;
    }
    if (rc != 0)
        fuse_reply_err(req, -rc);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    (void)ino;
    struct zfs_fs *fs = fs_of(req);
    struct zfs_handle *h = (struct zfs_handle *)(uintptr_t)fi->fh;
    int rc;
    if (!h) {
        rc = -deny(fs);
    } else if (h->type == ZFS_H_GATHER || h->type == ZFS_H_COMPACT || h->type == ZFS_H_DELETE) {
        pthread_mutex_lock(&h->mu);
        if (h->type == ZFS_H_GATHER)
            rc = zfs_gather_write(fs, h, buf, size, (uint64_t)off);
        else if (h->type == ZFS_H_COMPACT)
            rc = zfs_compact_run(fs, h); /* what was written does not matter */
        else
            rc = zfs_delete_write(fs, h, buf, size);
        pthread_mutex_unlock(&h->mu);
    } else {
        rc = -EBADF;
    }
    if (rc != 0)
        fuse_reply_err(req, -rc);
    else
        fuse_reply_write(req, size);
}

/* A list written to .delete and not yet applied. */
static bool delete_pending(const struct zfs_handle *h)
{
    return h && h->type == ZFS_H_DELETE && (h->list.n > 0 || h->list.intok);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    struct zfs_handle *h = (struct zfs_handle *)(uintptr_t)fi->fh;
    int rc = 0;
    /* A read-only mount has nothing to do at close: ENOSYS tells the
     * kernel to stop sending FLUSH for the whole mount, saving a round
     * trip per close(2). */
    if (!fs_of(req)->cfg.rw) {
        fuse_reply_err(req, ENOSYS);
        return;
    }
    /* close(2) of .delete applies the list, and returns its outcome. */
    if (h && h->type == ZFS_H_DELETE) {
        pthread_mutex_lock(&h->mu);
        if (delete_pending(h))
            rc = zfs_delete_commit(fs_of(req), h);
        pthread_mutex_unlock(&h->mu);
    }
    fuse_reply_err(req, -rc);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    struct zfs_handle *h = (struct zfs_handle *)(uintptr_t)fi->fh;
    /* Normally FLUSH applied the list already; a descriptor passed to
     * another process and closed there may leave one behind. */
    if (delete_pending(h)) {
        int rc = zfs_delete_commit(fs_of(req), h);
        if (rc != 0)
            fuse_log(FUSE_LOG_ERR, "zrecordfs: %s: .delete on release: %s\n", h->st->path,
                     strerror(-rc));
    }
    zfs_handle_put(h);
    fuse_reply_err(req, 0);
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

/* One listing entry: its name and attributes. Returns false past the end. */
static bool dir_entry(struct zfs_fs *fs, fuse_ino_t ino, struct zfs_node *n, uint64_t pos,
                      bool plus, char *name, size_t cap, struct fuse_entry_param *e)
{
    entry_init(fs, e);
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
        dir_attr(k, e->ino, &e->attr);
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
    } else if (file_attr(fs, st, slot, false, &e->attr) == 0) {
        e->ino = e->attr.st_ino;
        e->attr_timeout = attr_timeout(fs, slot);
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
    for (uint64_t pos = (uint64_t)off; dir_entry(fs, ino, n, pos, plus, name, sizeof name, &e);
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
    struct target t;
    int rc = resolve(fs, ino, &t);
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
    .open = op_open,
    .read = op_read,
    .write = op_write,
    .flush = op_flush,
    .release = op_release,
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

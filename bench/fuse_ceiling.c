/*
 * fuse_ceiling.c: a do-nothing low-level FUSE server for the file system
 * benchmark. It shows one folder of files named 0 .. count-1, each `size`
 * bytes long, whose bytes all come from one buffer in memory, and answers
 * every request with the same choices zrecordfs makes on a read-only
 * mount (long entry and attribute timeouts, keep_cache on open, and under
 * -o noopen an ENOSYS answer to OPEN), on the same loop (-s: zrecordfs's
 * one-thread loop of fs/loop.c, polling -o spin=USEC as zrecordfs does).
 * Whatever it reaches is therefore the cost of FUSE itself on this
 * machine, the ceiling any driver that does real work can approach but
 * not pass.
 *
 * With -o dir=PATH it shows instead the files of PATH named <i><ext>
 * (i below count), and serves their bytes from those files: attributes
 * from fstatat at LOOKUP, a descriptor opened at OPEN, each READ spliced
 * from it to the device, as zrecordfs answers a cold record file.
 * Cold (page cache dropped), the files read through it against the same
 * files read directly give FUSE's own cost for cold files: what a FUSE
 * driver that reads what ext4 reads can get from them at best.
 * It also asks the kernel for what zrecordfs does (fs/mount.c): parallel
 * lookups in a folder, a read-ahead of 1 MiB, spliced replies.
 *
 * usage: fuse_ceiling [-f] [-s] -o count=N,size=BYTES[,noopen][,spin=USEC]
 *        MOUNTPOINT
 *        fuse_ceiling [-f] [-s] -o count=N,dir=PATH[,ext=SUFFIX][,spin=USEC]
 *        MOUNTPOINT
 */
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/loop.h"
#include "fs/mount.h"

struct ceiling {
    unsigned long count;
    unsigned long size;
    int noopen;
    unsigned spin;
    char *data;
    char *dir, *ext; /* -o dir=PATH: files of PATH named <i><ext> */
    int dirfd;
};

static const struct fuse_opt ceiling_opts[] = {
    {"count=%lu", offsetof(struct ceiling, count), 0},
    {"size=%lu", offsetof(struct ceiling, size), 0},
    {"noopen", offsetof(struct ceiling, noopen), 1},
    {"spin=%u", offsetof(struct ceiling, spin), 0},
    {"dir=%s", offsetof(struct ceiling, dir), 0},
    {"ext=%s", offsetof(struct ceiling, ext), 0},
    FUSE_OPT_END,
};

/* Inode 1 is the folder; file i has inode i + 2. */
static const double ceiling_timeout = 86400.0;

static struct ceiling *ceiling_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

/* The attributes of inode ino: 0, or -1 when a file of -o dir is
 * missing. */
static int fill_attr(const struct ceiling *c, fuse_ino_t ino, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    if (ino == FUSE_ROOT_ID) {
        st->st_mode = S_IFDIR | 0555;
        st->st_nlink = 2;
        return 0;
    }
    off_t size = (off_t)c->size;
    if (c->dir) {
        char name[64];
        struct stat b;
        snprintf(name, sizeof name, "%lu%s", (unsigned long)ino - 2, c->ext ? c->ext : "");
        if (fstatat(c->dirfd, name, &b, 0) != 0)
            return -1;
        size = b.st_size;
    }
    st->st_mode = S_IFREG | 0444;
    st->st_nlink = 1;
    st->st_size = size;
    st->st_blocks = (blkcnt_t)((size + 511) / 512);
    return 0;
}

/* A name is a file only in canonical decimal form below count, as in
 * zrecordfs, so lookups cost the same parse. */
static int parse_name(const struct ceiling *c, const char *name, unsigned long *out)
{
    unsigned long v = 0;
    size_t len = strlen(name), ext = c->ext ? strlen(c->ext) : 0;
    if (len <= ext || strcmp(name + len - ext, c->ext ? c->ext : "") != 0)
        return -1;
    len -= ext;
    if (name[0] == '0' && len > 1)
        return -1;
    for (const char *p = name; p < name + len; p++) {
        if (*p < '0' || *p > '9' || v > (c->count / 10) + 1)
            return -1;
        v = v * 10 + (unsigned long)(*p - '0');
    }
    if (v >= c->count)
        return -1;
    *out = v;
    return 0;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct ceiling *c = ceiling_of(req);
    struct fuse_entry_param e;
    unsigned long i;
    memset(&e, 0, sizeof e);
    e.attr_timeout = ceiling_timeout;
    e.entry_timeout = ceiling_timeout;
    if (parent != FUSE_ROOT_ID || parse_name(c, name, &i) != 0) {
        fuse_reply_entry(req, &e); /* a remembered negative entry */
        return;
    }
    if (fill_attr(c, i + 2, &e.attr) != 0) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    e.ino = i + 2;
    fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    struct stat st;
    if (fill_attr(ceiling_of(req), ino, &st) != 0)
        fuse_reply_err(req, ENOENT);
    else
        fuse_reply_attr(req, &st, ceiling_timeout);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct ceiling *c = ceiling_of(req);
    if (c->noopen) {
        fuse_reply_err(req, ENOSYS);
        return;
    }
    if (ino == FUSE_ROOT_ID) {
        fuse_reply_err(req, EISDIR);
        return;
    }
    fi->keep_cache = 1;
    if (c->dir) {
        char name[64];
        snprintf(name, sizeof name, "%lu%s", (unsigned long)ino - 2, c->ext ? c->ext : "");
        int fd = openat(c->dirfd, name, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            fuse_reply_err(req, errno);
            return;
        }
        fi->fh = (uint64_t)fd;
    }
    fuse_reply_open(req, fi);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    if (ceiling_of(req)->dir)
        close((int)fi->fh);
    fuse_reply_err(req, 0);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)ino;
    struct ceiling *c = ceiling_of(req);
    if (c->dir) {
        /* Spliced from the file to the device, as zrecordfs answers a
         * cold record (fs/cold.c); libfuse replies with what the file
         * holds when it ends before size. */
        struct fuse_bufvec v = FUSE_BUFVEC_INIT(size);
        v.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
        v.buf[0].fd = (int)fi->fh;
        v.buf[0].pos = off;
        fuse_reply_data(req, &v, 0);
        return;
    }
    if ((unsigned long)off >= c->size) {
        fuse_reply_buf(req, NULL, 0);
        return;
    }
    if (size > c->size - (unsigned long)off)
        size = c->size - (unsigned long)off;
    fuse_reply_buf(req, c->data + off, size);
}

/* Entries are produced on the fly from the offset: "." and ".." at 0 and
 * 1, file i at i + 2. With plus (READDIRPLUS, which zrecordfs answers
 * too), each file's entry carries its attributes, so `ls -l` needs no
 * LOOKUP per name. */
static void list_dir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
    struct ceiling *c = ceiling_of(req);
    if (ino != FUSE_ROOT_ID) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    char *buf = malloc(size);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    size_t used = 0;
    for (unsigned long k = (unsigned long)off; k < c->count + 2; k++) {
        char name[24];
        struct fuse_entry_param e;
        memset(&e, 0, sizeof e);
        if (k < 2) {
            snprintf(name, sizeof name, "%s", k == 0 ? "." : "..");
            e.attr.st_ino = FUSE_ROOT_ID;
            e.attr.st_mode = S_IFDIR;
        } else {
            snprintf(name, sizeof name, "%lu%s", k - 2, c->ext ? c->ext : "");
            e.ino = k;
            e.attr_timeout = ceiling_timeout;
            e.entry_timeout = ceiling_timeout;
            (void)fill_attr(c, k, &e.attr); /* a missing file: size 0 */
        }
        /* "." and ".." carry no entry of their own (ino 0): the kernel
         * neither looks them up nor counts a reference. */
        size_t need = plus ? fuse_add_direntry_plus(req, buf + used, size - used, name, &e,
                                                    (off_t)(k + 1))
                           : fuse_add_direntry(req, buf + used, size - used, name, &e.attr,
                                               (off_t)(k + 1));
        if (need > size - used)
            break;
        used += need;
    }
    fuse_reply_buf(req, buf, used);
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

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    if (conn->max_readahead < ZFS_READ_AHEAD_KB * 1024)
        conn->max_readahead = ZFS_READ_AHEAD_KB * 1024;
    if (conn->capable & FUSE_CAP_SPLICE_WRITE)
        conn->want |= FUSE_CAP_SPLICE_WRITE;
}

static const struct fuse_lowlevel_ops ceiling_ops = {
    .init = op_init,
    .release = op_release,
    .lookup = op_lookup,
    .getattr = op_getattr,
    .open = op_open,
    .read = op_read,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
};

int main(int argc, char **argv)
{
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct fuse_cmdline_opts opts;
    struct ceiling c = {.spin = ZFS_SPIN_DEFAULT_US, .dirfd = -1};
    struct fuse_session *se = NULL;
    int rc = 1;

    memset(&opts, 0, sizeof opts);
    if (fuse_opt_parse(&args, &c, ceiling_opts, NULL) != 0 ||
        fuse_parse_cmdline(&args, &opts) != 0)
        goto out;
    if (!opts.mountpoint || c.count == 0 || (c.size == 0) == !c.dir || (c.dir && c.noopen)) {
        fprintf(stderr, "usage: fuse_ceiling [-f] [-s] -o count=N,size=BYTES[,noopen][,spin=USEC] "
                        "MOUNTPOINT\n"
                        "       fuse_ceiling [-f] [-s] -o count=N,dir=PATH[,ext=SUFFIX][,spin=USEC] "
                        "MOUNTPOINT\n");
        goto out;
    }
    if (c.dir) {
        if ((c.dirfd = open(c.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
            perror(c.dir);
            goto out;
        }
    } else {
        if (!(c.data = malloc(c.size)))
            goto out;
        for (unsigned long k = 0; k < c.size; k++)
            c.data[k] = (char)(k * 131u + 7u);
    }
    se = fuse_session_new(&args, &ceiling_ops, sizeof ceiling_ops, &c);
    if (!se)
        goto out;
    if (fuse_set_signal_handlers(se) != 0)
        goto out;
    if (fuse_session_mount(se, opts.mountpoint) != 0)
        goto out_signals;
    zfs_raise_read_ahead(opts.mountpoint);
    if (zfs_dirops_io(se) != 0)
        fprintf(stderr, "fuse_ceiling: lookups in one folder will be sent one at a time\n");
    /* Mounted before going to the background, so the caller can use the
     * mount as soon as this command returns. */
    fuse_daemonize(opts.foreground);
    if (opts.singlethread) {
        rc = zfs_loop(se, c.spin) != 0;
    } else {
        struct fuse_loop_config *cfg = fuse_loop_cfg_create();
        if (!cfg) {
            fuse_session_unmount(se);
            goto out_signals;
        }
        fuse_loop_cfg_set_max_threads(cfg, opts.max_threads);
        rc = fuse_session_loop_mt(se, cfg) != 0;
        fuse_loop_cfg_destroy(cfg);
    }
    fuse_session_unmount(se);
out_signals:
    fuse_remove_signal_handlers(se);
out:
    if (se)
        fuse_session_destroy(se);
    free(c.data);
    free(c.dir);
    free(c.ext);
    if (c.dirfd >= 0)
        close(c.dirfd);
    free(opts.mountpoint);
    fuse_opt_free_args(&args);
    return rc;
}

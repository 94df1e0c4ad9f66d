/*
 * tree.c: the scan of ROOT into the folders the mount shows, and the
 * opening of every store found.
 *
 * The mount shows a fixed tree decided once at start-up: ROOT itself when
 * it is a store, otherwise every folder below ROOT that is a store or has
 * one somewhere beneath it. A folder is a store when it holds store.zr
 * (the file written last at creation, so a half-created store is not one)
 * and the library agrees to open it. A store folder is a leaf: its own
 * files are the store's internals and are never shown, and folders inside
 * it are not scanned. Symbolic links are not followed, so the scan cannot
 * loop. Files of plain folders are not shown either: the view is of
 * stores only.
 *
 * Every store is opened here, before the mount exists, so that -o rw can
 * refuse to mount while another process holds a store, with a message on
 * the terminal that started it. Any other failure to open (a corrupt
 * store, one locked by a writer under -o ro) is reported once, and the
 * store's folder stays in the tree with nothing readable inside, so one
 * bad store never hides the others.
 *
 * ROOT may also be an object-store address, s3://bucket/prefix (fs->remote).
 * The tree is then made the same way from prefixes instead of folders: a
 * prefix is a store when the library opens it (its listing holds
 * store.zr), otherwise its sub-prefixes (zr_remote_folders: one listing,
 * rolled up at '/') are scanned as subfolders are. Every failure of ROOT
 * itself but "no store here" stops the mount with the library's message
 * (credentials refused, server unreachable): those would fail every
 * store alike. Remote folders have no owner or times of their own; they
 * take the daemon's and the time of the mount.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/npyheader.h"
#include "fs/record.h"
#include "fs/tree.h"

/* Deeper trees than this are not scanned further. */
#define MAX_DEPTH 128

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Append a node; returns its position or -1 when out of memory. */
static long add_node(struct zfs_fs *fs, const char *name, fuse_ino_t parent,
                     const struct stat *st, size_t *cap)
{
    if (fs->nnodes == *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        struct zfs_node *p = realloc(fs->nodes, ncap * sizeof *p);
        if (!p)
            return -1;
        fs->nodes = p;
        *cap = ncap;
    }
    struct zfs_node *n = &fs->nodes[fs->nnodes];
    memset(n, 0, sizeof *n);
    if (!(n->name = strdup(name)))
        return -1;
    n->parent = parent;
    n->st = *st;
    return (long)fs->nnodes++;
}

static void free_node(struct zfs_node *n)
{
    free(n->name);
    free(n->kids);
}

static void free_store(struct zfs_store *st)
{
    if (!st)
        return;
    zr_close(st->zs);
    zfs_sizes_free(&st->sizes);
    zfs_stored_free(&st->stored);
    pthread_rwlock_destroy(&st->lock);
    pthread_mutex_destroy(&st->ctl_mu);
    pthread_mutex_destroy(&st->gsize_mu);
    pthread_mutex_destroy(&st->ahead_mu);
    free(st->stats_json);
    free(st->compact_json);
    free(st->path);
    free(st);
}

/* Open the store at path for node position pos. Returns 1 when it is a
 * store (opened or shown broken), 0 when the library says it is not one,
 * -1 when the mount must not go ahead: out of memory, a store in use
 * under -o rw, or any failure when fatal is set (the root of a remote
 * tree). */
static int open_store(struct zfs_fs *fs, const char *path, size_t pos, bool fatal)
{
    if (fs->nstores >= ZFS_MAX_STORES) {
        fprintf(stderr, "zrecordfs: more than %lu stores under %s\n",
                (unsigned long)ZFS_MAX_STORES, fs->cfg.root);
        return -1;
    }
    struct zfs_store *st = calloc(1, sizeof *st);
    struct zfs_store **grown = realloc(fs->stores, (fs->nstores + 1) * sizeof *grown);
    if (grown)
        fs->stores = grown;
    if (!st || !grown || !(st->path = strdup(path))) {
        fprintf(stderr, "zrecordfs: out of memory\n");
        free(st);
        return -1;
    }
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    /* Prefer the writer, so a compaction is not starved by a stream of
     * readers. */
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&st->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    pthread_mutex_init(&st->ctl_mu, NULL);
    pthread_mutex_init(&st->gsize_mu, NULL);
    pthread_mutex_init(&st->ahead_mu, NULL);
    st->sid = (uint32_t)fs->nstores;
    st->dir_ino = pos + 1;
    st->st = fs->nodes[pos].st;

    int rc = zr_open(&st->zs, path, fs->cfg.rw ? ZR_RDWR : ZR_RDONLY);
    if (rc == ZR_ENOTSTORE) {
        free_store(st);
        return 0;
    }
    if (rc == ZR_EBUSY && fs->cfg.rw) {
        fprintf(stderr, "zrecordfs: %s is in use by another process; -o rw needs it alone (%s)\n",
                path, zr_last_error());
        free_store(st);
        return -1;
    }
    if (rc != 0 && fatal) {
        fprintf(stderr, "zrecordfs: cannot open %s: %s (%s)\n", path, zr_last_error(),
                zr_strerror(rc));
        free_store(st);
        return -1;
    }
    if (rc != 0) {
        fprintf(stderr, "zrecordfs: %s cannot be opened, its files will give EIO: %s\n", path,
                zr_last_error());
        st->zs = NULL;
    } else if (zr_len(st->zs) > ZFS_MAX_RECORDS) {
        fprintf(stderr, "zrecordfs: %s has more records than can be shown; its files will give EIO\n",
                path);
        zr_close(st->zs);
        st->zs = NULL;
    }
    if (st->zs) {
        st->kind = zr_kind(st->zs);
        st->itemsize = zr_itemsize(st->zs);
        st->width = zr_record_width(st->zs);
        /* A remote store has no mapping to serve from: its records
         * are gathered, like a compressed store's (record.c). */
        st->remote = fs->remote;
        st->direct = !fs->cfg.rw && !st->remote && zr_codec(st->zs) == ZR_CODEC_RAW;
        if (st->kind == ZR_DENSE && fs->cfg.npy) {
            uint32_t ndim;
            const uint64_t *shape = zr_item_shape(st->zs, &ndim);
            st->dense_hdr_len = npy_format_header(zr_dtype(st->zs), shape, ndim, st->dense_hdr,
                                                  sizeof st->dense_hdr);
        }
        uint64_t n = zr_len(st->zs);
        if (st->kind == ZR_RAGGED && n > 0) {
            st->sizes.npages = (size_t)((n + ZFS_SIZES_PAGE - 1) / ZFS_SIZES_PAGE);
            st->sizes.pages = calloc(st->sizes.npages, sizeof *st->sizes.pages);
            if (st->remote) {
                st->stored.npages = st->sizes.npages;
                st->stored.pages = calloc(st->stored.npages, sizeof *st->stored.pages);
            }
            if (!st->sizes.pages || (st->remote && !st->stored.pages)) {
                fprintf(stderr, "zrecordfs: out of memory\n");
                free_store(st);
                return -1;
            }
        }
    }
    fs->stores[fs->nstores++] = st;
    fs->nodes[pos].store = st;
    return 1;
}

static int is_store_folder(const char *path)
{
    char *p = NULL;
    if (asprintf(&p, "%s/store.zr", path) < 0)
        return 0;
    struct stat sb;
    int yes = lstat(p, &sb) == 0 && S_ISREG(sb.st_mode);
    free(p);
    return yes;
}

/* Read the names of the subfolders of path (not following links),
 * sorted. Unreadable folders are reported and give no names. */
static int list_subfolders(const char *path, char ***names, size_t *count)
{
    *names = NULL;
    *count = 0;
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "zrecordfs: skipping %s: %s\n", path, strerror(errno));
        return 0;
    }
    size_t cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        int isdir = e->d_type == DT_DIR;
        if (e->d_type == DT_UNKNOWN) {
            struct stat sb;
            isdir = fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISDIR(sb.st_mode);
        }
        if (!isdir)
            continue;
        if (*count == cap) {
            cap = cap ? cap * 2 : 16;
            char **p = realloc(*names, cap * sizeof *p);
            if (!p) {
                rc = -1;
                break;
            }
            *names = p;
        }
        if (!((*names)[*count] = strdup(e->d_name))) {
            rc = -1;
            break;
        }
        (*count)++;
    }
    closedir(d);
    if (rc != 0)
        fprintf(stderr, "zrecordfs: out of memory\n");
    else if (*count > 1)
        qsort(*names, *count, sizeof **names, cmp_names);
    return rc;
}

/* The sub-prefixes of the remote prefix url, sorted, as list_subfolders
 * gives subfolders. A failure at the root (depth 0) stops the mount;
 * deeper down it is reported and the prefix gives no names. */
static int list_prefixes(const char *url, int depth, char ***names, size_t *count)
{
    char **got;
    size_t n;
    *names = NULL;
    *count = 0;
    int rc = zr_remote_folders(url, &got, &n);
    if (rc == ZR_ENOMEM) {
        fprintf(stderr, "zrecordfs: out of memory\n");
        return -1;
    }
    if (rc != 0) {
        fprintf(stderr, "zrecordfs: %s %s: %s (%s)\n", depth == 0 ? "cannot list" : "skipping",
                url, zr_last_error(), zr_strerror(rc));
        return depth == 0 ? -1 : 0;
    }
    /* Copied, so that both kinds of listing are freed alike. Keys may
     * hold what no file name can: "." and ".." and names longer than
     * NAME_MAX are not shown. */
    char **out = n ? calloc(n, sizeof *out) : NULL;
    size_t kept = 0;
    for (size_t k = 0; out && k < n; k++) {
        if (strcmp(got[k], ".") == 0 || strcmp(got[k], "..") == 0 || strlen(got[k]) > NAME_MAX) {
            fprintf(stderr, "zrecordfs: skipping %s/%s: not a possible folder name\n", url,
                    got[k]);
            continue;
        }
        if (!(out[kept++] = strdup(got[k]))) {
            for (size_t j = 0; j < kept; j++)
                free(out[j]);
            free(out);
            out = NULL;
        }
    }
    zr_remote_folders_free(got, n);
    if (n && !out) {
        fprintf(stderr, "zrecordfs: out of memory\n");
        return -1;
    }
    if (kept > 1)
        qsort(out, kept, sizeof *out, cmp_names);
    *names = out;
    *count = kept;
    return 0;
}

/* Scan the folder (or remote prefix) at path, to become node pos (already
 * added). Returns 1 when it is or holds a store, 0 when not, -1 to give
 * up the mount. */
static int scan(struct zfs_fs *fs, const char *path, size_t pos, int depth, size_t *cap)
{
    /* A remote prefix is asked directly: whether it holds store.zr is
     * what the library's open lists first. */
    if (fs->remote || is_store_folder(path)) {
        int rc = open_store(fs, path, pos, fs->remote && depth == 0);
        if (rc != 0)
            return rc;
    }
    if (depth >= MAX_DEPTH) {
        fprintf(stderr, "zrecordfs: not scanning below %s: deeper than %d folders\n", path,
                MAX_DEPTH);
        return 0;
    }
    char **names;
    size_t count;
    if ((fs->remote ? list_prefixes(path, depth, &names, &count)
                    : list_subfolders(path, &names, &count)) != 0)
        return -1;
    int rc = 0;
    for (size_t k = 0; k < count && rc >= 0; k++) {
        char *sub = NULL;
        struct stat sb = fs->nodes[pos].st;
        if (asprintf(&sub, "%s/%s", path, names[k]) < 0) {
            rc = -1;
            break;
        }
        if (!fs->remote && (lstat(sub, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
            free(sub);
            continue;
        }
        long child = add_node(fs, names[k], pos + 1, &sb, cap);
        if (child < 0) {
            free(sub);
            rc = -1;
            break;
        }
        int r = scan(fs, sub, (size_t)child, depth + 1, cap);
        free(sub);
        if (r < 0) {
            rc = -1;
            break;
        }
        if (r == 0) {
            /* Nothing below it is shown: drop it and whatever it added. */
            while (fs->nnodes > (size_t)child)
                free_node(&fs->nodes[--fs->nnodes]);
            continue;
        }
        struct zfs_node *n = &fs->nodes[pos];
        uint32_t *kids = realloc(n->kids, (n->nkids + 1) * sizeof *kids);
        if (!kids) {
            rc = -1;
            break;
        }
        n->kids = kids;
        n->kids[n->nkids++] = (uint32_t)child;
        rc = 1;
    }
    for (size_t k = 0; k < count; k++)
        free(names[k]);
    free(names);
    return rc;
}

int zfs_tree_build(struct zfs_fs *fs)
{
    struct stat sb;
    size_t cap = 0;
    if (fs->remote) {
        memset(&sb, 0, sizeof sb);
        sb.st_mode = S_IFDIR | 0555;
        sb.st_uid = getuid();
        sb.st_gid = getgid();
        clock_gettime(CLOCK_REALTIME, &sb.st_mtim);
        sb.st_atim = sb.st_ctim = sb.st_mtim;
    } else if (stat(fs->cfg.root, &sb) != 0) {
        fprintf(stderr, "zrecordfs: %s: %s\n", fs->cfg.root, strerror(errno));
        return -1;
    }
    if (!fs->remote && !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "zrecordfs: %s: not a folder\n", fs->cfg.root);
        return -1;
    }
    if (add_node(fs, "", FUSE_ROOT_ID, &sb, &cap) < 0) {
        fprintf(stderr, "zrecordfs: out of memory\n");
        return -1;
    }
    int rc = scan(fs, fs->cfg.root, 0, 0, &cap);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        fprintf(stderr, "zrecordfs: no store found under %s\n", fs->cfg.root);
        return -1;
    }
    if (fs->nnodes >= (UINT64_C(1) << ZFS_STORE_SHIFT)) {
        fprintf(stderr, "zrecordfs: too many folders under %s\n", fs->cfg.root);
        return -1;
    }
    return 0;
}

void zfs_tree_free(struct zfs_fs *fs)
{
    for (size_t i = 0; i < fs->nstores; i++)
        free_store(fs->stores[i]);
    free(fs->stores);
    for (size_t i = 0; i < fs->nnodes; i++)
        free_node(&fs->nodes[i]);
    free(fs->nodes);
    fs->stores = NULL;
    fs->nodes = NULL;
    fs->nstores = fs->nnodes = 0;
}

struct zfs_node *zfs_tree_node(struct zfs_fs *fs, fuse_ino_t ino)
{
    if (ino == 0 || ino > fs->nnodes)
        return NULL;
    return &fs->nodes[ino - 1];
}

struct zfs_node *zfs_tree_child(struct zfs_fs *fs, struct zfs_node *n, const char *name)
{
    size_t lo = 0, hi = n->nkids;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        struct zfs_node *k = &fs->nodes[n->kids[mid]];
        int c = strcmp(name, k->name);
        if (c == 0)
            return k;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/*
 * engine.c: the life of a store handle: making one, creating a store,
 * syncing, closing, the rule of who may write through a handle, and the
 * identity accessors. Opening is in open.c, the files of a handle in
 * tables.c, what a handle knows of a Dense store's layout in layout.c.
 *
 * Rules enforced here (numbered as in doc/format.md):
 *  R1. store.zr is written last at creation, after meta.zr, 0.loc,
 *      0.chunk and any dict.zr are durable; a folder without it is not a
 *      store. store.zr never changes afterwards.
 *  R2. A read-write handle holds an exclusive flock on meta.zr for its
 *      life, a read-only handle a shared one; a conflict fails at once.
 *      One process at a time writes through a handle (zr_engine_writer).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec.h"
#include "engine.h"
#include "intent.h"
#include "io.h"
#include "pool.h"
#include "s3.h"

zr_store *zr_store_alloc(const char *path, bool writable)
{
    zr_store *s = zr_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->path = zr_strdup(path);
    if (!s->path || zr_tables_init(s) != 0) {
        zr_free(s->path);
        zr_free(s);
        return NULL;
    }
    s->dirfd = -1;
    s->metafd = -1;
    s->writable = writable;
    s->owner = getpid();
    atomic_init(&s->length, 0);
    pthread_mutex_init(&s->append_lock, NULL);
    pthread_mutex_init(&s->frontier_lock, NULL);
    pthread_mutex_init(&s->layout_lock, NULL);
    pthread_mutex_init(&s->use_lock, NULL);
    pthread_cond_init(&s->use_cv, NULL);
    return s;
}

/* Atomics rather than the mutex on the way in and out: a by-reference
 * .gather of zrecordfs makes one call per record from every FUSE thread.
 * Both sides write their own flag and then read the other's (sequentially
 * consistent), so a call and zr_close never both miss each other. */
int zr_store_enter(zr_store *s, const char *call)
{
    if (!s)
        return 0;
    atomic_fetch_add(&s->users, 1);
    if (!atomic_load(&s->closing))
        return 0;
    zr_store_leave(s);
    return zr_err(ZR_EINVAL, "%s: the handle of %s is being closed", call, s->path);
}

void zr_store_leave(zr_store *s)
{
    if (!s)
        return;
    if (atomic_fetch_sub(&s->users, 1) == 1 && atomic_load(&s->closing)) {
        pthread_mutex_lock(&s->use_lock);
        pthread_cond_broadcast(&s->use_cv);
        pthread_mutex_unlock(&s->use_lock);
    }
}

ZR_API void zr_close(zr_store *s)
{
    if (!s)
        return;
    /* A gather on another thread finishes before anything it reads is
     * freed; a call that starts meanwhile is refused. Nothing can guard a
     * call that starts after this returns: the handle is gone. In a child
     * of fork() the calls counted were the parent's threads', which the
     * child does not have: it waits for none. */
    atomic_store(&s->closing, true);
    if (getpid() == s->owner) {
        pthread_mutex_lock(&s->use_lock);
        while (atomic_load(&s->users) > 0)
            pthread_cond_wait(&s->use_cv, &s->use_lock);
        pthread_mutex_unlock(&s->use_lock);
    }
    zr_tables_free(s);
    if (s->remote)
        zr_remote_close(s);
    ZSTD_freeDDict(s->ddict);
    ZSTD_freeCDict(s->cdict);
    zr_free(s->dict);
    if (s->metafd >= 0)
        zr_io.close(s->metafd); /* releases the flock */
    if (s->dirfd >= 0)
        zr_io.close(s->dirfd);
    pthread_mutex_destroy(&s->append_lock);
    pthread_mutex_destroy(&s->frontier_lock);
    pthread_mutex_destroy(&s->layout_lock);
    pthread_mutex_destroy(&s->use_lock);
    pthread_cond_destroy(&s->use_cv);
    zr_free(s->path);
    zr_free(s);
}

/* Take the handle's lock on meta.zr: shared or exclusive, never waiting. */
int zr_take_lock(zr_store *s)
{
    if (zr_io.flock(s->metafd, (s->writable ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0)
        return 0;
    if (errno == EWOULDBLOCK)
        return zr_err(ZR_EBUSY, "%s is %s by another handle or process (%s)", s->path,
                      s->writable ? "open" : "open for writing",
                      s->writable ? "a reader, a writer or a zrecordfs mount"
                                  : "a writer such as zr, or a zrecordfs -o rw mount");
    return zr_err_sys(errno, "locking %s/meta.zr", s->path);
}

/* A Dense store's record width, from its identity, and how many records
 * a chunk holds in the layout appends give them (0 when none fits: a
 * corrupt store or a wrong test geometry). */
void zr_set_width(zr_store *s)
{
    if (s->id.kind != ZR_DENSE)
        return;
    s->width = s->id.itemsize;
    for (uint32_t i = 0; i < s->id.ndim; i++)
        s->width *= s->id.shape[i];
    s->per_chunk = s->width && s->width <= s->chunk_cap ? s->chunk_cap / s->width : 0;
}

int zr_open_dir(zr_store *s, const char *path)
{
    s->dirfd = zr_io.openat(AT_FDCWD, path, O_RDONLY | O_DIRECTORY, 0);
    if (s->dirfd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return zr_err(ZR_ENOTSTORE, "%s is not a store folder", path);
        return zr_err_sys(errno, "opening %s", path);
    }
    return 0;
}

/* Create every missing folder of path (not empty), like mkdir -p. */
static int make_dirs(const char *path)
{
    char *p = zr_strdup(path);
    if (!p)
        return zr_err(ZR_ENOMEM, "creating %s", path);
    int rc = 0;
    for (char *q = p + 1;; q++) {
        if (*q != '/' && *q != '\0')
            continue;
        char saved = *q;
        *q = '\0';
        if (zr_io.mkdirat(AT_FDCWD, p, 0755) != 0 && errno != EEXIST) {
            rc = zr_err_sys(errno, "creating folder %s", p);
            break;
        }
        *q = saved;
        if (saved == '\0')
            break;
    }
    zr_free(p);
    return rc;
}

/* Whether name is one a store's own files have (doc/format.md), or the
 * temporary name one is written under: what a creation that died before
 * store.zr may have left. */
static bool is_store_file(const char *name)
{
    static const char *const fixed[] = {ZR_STORE_FILE, ZR_META_FILE, ZR_DICT_FILE, ZR_INTENT_FILE};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        size_t len = strlen(fixed[i]);
        if (strncmp(name, fixed[i], len) == 0 && (!name[len] || strcmp(name + len, ".tmp") == 0))
            return true;
    }
    size_t digits = strspn(name, "0123456789");
    return digits > 0 && (strcmp(name + digits, ".chunk") == 0 || strcmp(name + digits, ".loc") == 0);
}

/* A store is a folder of its own: creation refuses a folder that holds
 * anything else (a later listing of it, or a tool taking its files as
 * data, would mix the two). */
static int check_folder_is_free(int dirfd, const char *path)
{
    int fd = zr_io.openat(dirfd, ".", O_RDONLY | O_DIRECTORY, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        int e = errno;
        if (fd >= 0)
            zr_io.close(fd);
        return zr_err_sys(e, "listing %s", path);
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && !is_store_file(e->d_name))
            rc = zr_err(ZR_EEXIST, "%s is a folder that holds other files (%s); give a new or "
                        "empty folder for the store", path, e->d_name);
    closedir(d);
    return rc;
}

static int sync_fd(int fd, const char *what, const char *path)
{
    if (zr_io.fsync(fd) != 0)
        return zr_err_sys(errno, "syncing %s/%s", path, what);
    return 0;
}

int zr_engine_create(zr_store **out, const char *path, const struct zr_identity *id,
                     const zr_create_opts *opts)
{
    zr_create_opts none = {0};
    if (!opts)
        opts = &none;
    *out = NULL;
    if (zr_s3_is_url(path))
        return zr_err(ZR_EINVAL, "%s: a store in an object store is read-only; create it locally "
                      "and publish it with zr push", path);
    int codec = opts->codec;
    if (codec < ZR_CODEC_RAW || codec > ZR_CODEC_ZSTD_DICT)
        return zr_err(ZR_EINVAL, "unknown codec %d", codec);
    if (codec == ZR_CODEC_ZSTD_DICT && (!opts->dict || opts->dict_len == 0))
        return zr_err(ZR_EINVAL, "a zstd_dict store needs its dictionary at creation");
    if (codec == ZR_CODEC_ZSTD_DICT && opts->dict_len > ZR_DICT_MAX)
        return zr_err(ZR_EINVAL, "dictionary of %zu bytes exceeds %u", opts->dict_len,
                      ZR_DICT_MAX);
    if (codec != ZR_CODEC_ZSTD_DICT && opts->dict)
        return zr_err(ZR_EINVAL, "a dictionary is only used by zstd_dict stores");
    if (!path[0])
        return zr_err(ZR_EINVAL, "the store path is empty");
    struct stat st;
    if (zr_io.fstatat(AT_FDCWD, path, &st, 0) == 0 && !S_ISDIR(st.st_mode))
        return zr_err(ZR_EEXIST, "%s exists and is not a folder; give a new or empty folder for "
                      "the store", path);
    int rc = make_dirs(path);
    if (rc != 0)
        return rc;
    zr_store *s = zr_store_alloc(path, true);
    void *idbuf = NULL;
    size_t idlen = 0;
    if (!s)
        return zr_err(ZR_ENOMEM, "creating %s", path);
    s->id = *id;
    s->codec = codec;
    if ((rc = zr_open_dir(s, path)) != 0)
        goto fail;
    /* An existing store is ZR_EEXIST whether or not someone has it open;
     * the check is made again under the lock. */
    if (zr_io.fstatat(s->dirfd, ZR_STORE_FILE, &st, 0) == 0) {
        rc = zr_err(ZR_EEXIST, "%s already holds a store", path);
        goto fail;
    }
    if ((rc = check_folder_is_free(s->dirfd, path)) != 0)
        goto fail;
    s->metafd = zr_io.openat(s->dirfd, ZR_META_FILE, O_RDWR | O_CREAT, 0644);
    if (s->metafd < 0) {
        rc = zr_err_sys(errno, "creating %s/meta.zr", path);
        goto fail;
    }
    if ((rc = zr_take_lock(s)) != 0)
        goto fail;
    if (zr_io.fstatat(s->dirfd, ZR_STORE_FILE, &st, 0) == 0) {
        rc = zr_err(ZR_EEXIST, "%s already holds a store", path);
        goto fail;
    }
    /* Leftovers of an unfinished creation are replaced (R1). */
    if (zr_io.ftruncate(s->metafd, 0) != 0) {
        rc = zr_err_sys(errno, "truncating %s/meta.zr", path);
        goto fail;
    }
    zr_io.unlinkat(s->dirfd, ZR_DICT_FILE, 0);
    zr_io.unlinkat(s->dirfd, ZR_INTENT_FILE, 0);
    s->hdr = (struct zr_header){.codec = (uint8_t)codec};
    uint8_t raw[ZR_HEADER_SIZE];
    zr_header_encode(&s->hdr, raw);
    if ((rc = zr_write_all(s->metafd, raw, sizeof raw, 0, "meta.zr")) != 0)
        goto fail;
    if ((rc = sync_fd(s->metafd, "meta.zr", path)) != 0)
        goto fail;
    static const char *const first_files[] = {"0.chunk", "0.loc"};
    for (int i = 0; i < 2; i++) {
        const char *name = first_files[i];
        int fd = zr_io.openat(s->dirfd, name, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) {
            rc = zr_err_sys(errno, "creating %s/%s", path, name);
            goto fail;
        }
        rc = sync_fd(fd, name, path);
        zr_io.close(fd);
        if (rc != 0)
            goto fail;
    }
    if (codec == ZR_CODEC_ZSTD_DICT) {
        s->dict = zr_malloc(opts->dict_len);
        if (!s->dict) {
            rc = zr_err(ZR_ENOMEM, "copying the dictionary");
            goto fail;
        }
        memcpy(s->dict, opts->dict, opts->dict_len);
        s->dict_len = opts->dict_len;
        s->ddict = ZSTD_createDDict_byReference(s->dict, s->dict_len);
        if (!s->ddict) {
            rc = zr_err(ZR_ECODEC, "the dictionary is not usable by zstd");
            goto fail;
        }
        if ((rc = zr_write_file_atomic(s->dirfd, ZR_DICT_FILE, s->dict, s->dict_len)) != 0)
            goto fail;
    }
    if ((rc = zr_ftable_add(s, &s->chunks, 0, false)) != 0)
        goto fail;
    if ((rc = zr_ftable_add(s, &s->segs, 0, false)) != 0)
        goto fail;
    if ((rc = sync_fd(s->dirfd, ".", path)) != 0)
        goto fail;
    if ((rc = zr_identity_encode(&s->id, &idbuf, &idlen)) != 0)
        goto fail;
    if ((rc = zr_write_file_atomic(s->dirfd, ZR_STORE_FILE, idbuf, idlen)) != 0)
        goto fail;
    if ((rc = sync_fd(s->dirfd, ".", path)) != 0)
        goto fail;
    zr_free(idbuf);
    zr_set_width(s);
    s->dir_dirty = false;
    *out = s;
    return 0;
fail:
    zr_free(idbuf);
    zr_close(s);
    return rc;
}

/* Sync order: chunks, then loc segments, then the folder, then meta.zr.
 * Called with append_lock held. */
int zr_engine_sync_locked(zr_store *s)
{
    if (s->failed)
        return zr_err(ZR_EIO, "%s: an earlier sync failed; reopen the store", s->path);
    if (!s->dirty && !s->dir_dirty && atomic_load(&s->cache.sync_errno) == 0)
        return 0;
    int rc = zr_tables_sync_error(s);
    uint32_t nchunks = atomic_load(&s->chunks.count);
    for (uint32_t c = s->sync_chunk_lo; rc == 0 && c < nchunks; c++)
        rc = zr_file_sync(s, &s->chunks, c);
    uint32_t nsegs = atomic_load(&s->segs.count);
    for (uint32_t g = s->sync_seg_lo; rc == 0 && g < nsegs; g++)
        rc = zr_file_sync(s, &s->segs, g);
    /* A gather may have closed a written descriptor meanwhile, syncing it
     * on the way (the loop above then found it clean): its failure must
     * stop the header from being made durable. */
    if (rc == 0)
        rc = zr_tables_sync_error(s);
    if (rc == 0 && s->dir_dirty && zr_io.fsync(s->dirfd) != 0)
        rc = zr_err_sys(errno, "syncing folder %s", s->path);
    if (rc == 0 && zr_io.fdatasync(s->metafd) != 0)
        rc = zr_err_sys(errno, "syncing %s/meta.zr", s->path);
    if (rc != 0) {
        /* After a failed fsync the kernel may have dropped the dirty
         * pages; retrying would report success for lost data. */
        s->failed = true;
        return rc;
    }
    s->dirty = false;
    s->dir_dirty = false;
    s->sync_chunk_lo = s->hdr.tail_chunk;
    s->sync_seg_lo = (uint32_t)(s->hdr.length >> s->seg_shift);
    return 0;
}

/* A child of fork() inherits the handle and its lock (one open file
 * description, shared), but not the parent's knowledge of the frontier
 * from then on: a write by both would overwrite each other's records. So
 * only the process that opened a handle writes through it; any other,
 * even once the opener has exited, may gather but not write (R2). */
int zr_engine_writer(zr_store *s, const char *op)
{
    if (!s)
        return zr_err(ZR_EINVAL, "%s: NULL handle", op);
    if (!s->writable)
        return zr_err(ZR_EROFS, "%s: %s is open read-only", op, s->path);
    if (getpid() != s->owner)
        return zr_err(ZR_EBUSY, "%s: %s was opened for writing by process %ld; a process that "
                      "inherited the handle through fork() may gather through it but not write",
                      op, s->path, (long)s->owner);
    return 0;
}

static int sync_in(zr_store *s)
{
    int rc = zr_engine_writer(s, "zr_sync");
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&s->append_lock);
    rc = zr_engine_sync_locked(s);
    pthread_mutex_unlock(&s->append_lock);
    return rc;
}

ZR_API int zr_sync(zr_store *s)
{
    int rc = zr_store_enter(s, "zr_sync");
    return rc != 0 ? rc : zr_store_leave_rc(s, sync_in(s));
}

/* A NULL handle gets an answer that cannot be mistaken for a store's:
 * ZR_EINVAL, 0 or NULL. */
ZR_API int zr_kind(const zr_store *s) { return s ? s->id.kind : ZR_EINVAL; }
ZR_API uint64_t zr_len(const zr_store *s)
{
    return s ? atomic_load_explicit(&s->length, memory_order_acquire) : 0;
}
ZR_API const char *zr_dtype(const zr_store *s) { return s ? s->id.dtype : NULL; }
ZR_API uint64_t zr_itemsize(const zr_store *s) { return s ? s->id.itemsize : 0; }
ZR_API const uint64_t *zr_item_shape(const zr_store *s, uint32_t *ndim)
{
    bool dense = s && s->id.kind == ZR_DENSE;
    if (ndim)
        *ndim = dense ? s->id.ndim : 0;
    return dense ? s->id.shape : NULL;
}
ZR_API uint64_t zr_record_width(const zr_store *s) { return s ? s->width : 0; }
ZR_API int zr_codec(const zr_store *s) { return s ? s->codec : ZR_EINVAL; }
ZR_API const char *zr_path(const zr_store *s) { return s ? s->path : NULL; }
ZR_API int zr_writable(const zr_store *s) { return s ? s->writable : 0; }

ZR_API const char *zr_codec_name(int codec)
{
    switch (codec) {
    case ZR_CODEC_RAW: return "raw";
    case ZR_CODEC_ZSTD: return "zstd";
    case ZR_CODEC_ZSTD_DICT: return "zstd_dict";
    default: return "unknown";
    }
}

ZR_API int64_t zr_dtype_itemsize(const char *dtype)
{
    int64_t n = zr_dtype_parse(dtype);
    if (n < 0)
        return zr_err(ZR_EINVAL, "'%s' is not a supported dtype spelling", dtype ? dtype : "(null)");
    return n;
}

ZR_API int zr_threads(void) { return zr_pool_threads(); }

ZR_API void zr_set_progress(zr_store *s, zr_progress_fn fn, void *user)
{
    if (!s)
        return;
    s->progress = fn;
    s->progress_user = user;
}

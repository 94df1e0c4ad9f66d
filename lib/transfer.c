/*
 * transfer.c: zr_push and zr_pull, a store copied between a local folder
 * and an object store (s3://bucket/prefix). A store's objects are its
 * files, byte for byte (remote.c reads them so), and a copy is only
 * useful if no reader can ever take half of one for a store. These rules
 * keep that promise; each is repeated where it is enforced.
 *
 *  T1. Push opens the local store read-only first and keeps it open to
 *      the end: its shared lock keeps every writer out, so the files sent
 *      are the files of one committed state. A store with a pending
 *      intent.zr (an interrupted delete or compaction, R10) is refused,
 *      before the open and again under the lock; an empty intent.zr is
 *      not sent (a reader refuses a prefix that holds one).
 *  T2. meta.zr goes up last, after every other object is in place and the
 *      objects of a replaced store are gone. Until then the prefix has no
 *      header, and remote.c refuses it as an upload that has not finished,
 *      so a reader never sees a header counting records that are not there.
 *  T3. Push refuses a prefix that holds anything. With ZR_PUSH_FORCE it
 *      first deletes the old meta.zr, so that the old store stops being a
 *      store at once, then uploads, then deletes the objects of the old
 *      store the new one does not have, then sends meta.zr (T2). Only the
 *      objects directly under the prefix are the store's; deeper "folders"
 *      are left alone.
 *  T4. Push then checks what moved: a listing must hold every file with
 *      its local size and its ETag (the MD5 push computed of the local
 *      bytes, s3etag.c) and nothing else, and the remote store must open
 *      with the local store's length, kind, dtype, item shape and codec.
 *      So a push returns 0 only if, after its last write, the prefix
 *      held exactly its store. A server whose answer to the header's PUT
 *      is not its MD5 (one that encrypts with its own keys) makes other
 *      ETags: there the sizes and the open are what is checked.
 *  T6. Of pushes without ZR_PUSH_FORCE racing to one prefix exactly one
 *      succeeds. Checking that the prefix is empty and uploading cannot
 *      be one step, and the body objects of stores of the same sizes
 *      have the same names, so a loser that uploaded at all could
 *      overwrite the winner's bytes, even after the winner's check.
 *      Hence the prefix is claimed before any byte of the store is sent:
 *      push.claim is created with If-None-Match: *, which the server
 *      grants to one caller only; the others fail with ZR_EEXIST having
 *      written nothing. (The claim's text is the push's own, so that a
 *      retry answered 412 after its first try was stored is not taken
 *      for a loss.) The holder lists again (a push that finished and let
 *      go of its claim in between leaves its store there: refused, the
 *      claim given back), uploads, sends meta.zr, again only if there is
 *      none (a --force push may have published meanwhile: the claim is
 *      given back, nothing else deleted), checks (T4) and then gives back
 *      the claim. A push that fails before it sends a byte of the store
 *      gives back its claim; one that fails after keeps it, as it keeps
 *      its other objects (T2): --force clears both. A --force push
 *      neither claims nor honours a claim; it is for a prefix that one
 *      writer owns, and T4 alone tells whether it won.
 *  T5. Pull refuses a prefix without meta.zr (an unfinished upload, T2).
 *      It writes into a new folder beside the target, syncs every file and
 *      the folder, lists the prefix again to check that nothing changed
 *      meanwhile, opens the copy, and only then renames it into place:
 *      a pulled store appears whole or not at all. A target that exists
 *      is refused, or with ZR_PULL_FORCE exchanged atomically for the new
 *      one when it is a store (or an empty folder) that no handle holds.
 *  T7. A pulled store's files get the mode asked for, 0600 by default,
 *      set exactly (the umask does not apply), and its folder that mode
 *      with x added beside each r (0600 -> 0700, 0644 -> 0755): a cache
 *      keeps the same bytes 0600, and a pull should not publish them to
 *      every user of the machine unless asked.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "format.h"
#include "intent.h"
#include "s3.h"

/* Files uploaded at once; each is a multipart upload of its own with its
 * parts in flight, so a few keep the connections busy without one large
 * file holding up the small ones. */
#define PUSH_FILES 4
/* A pull fetches files in ranged GETs of this many bytes, all of them
 * through one batch, so large files come down many parts at once. */
#define PULL_PART ((uint64_t)8 << 20)
/* The object a push without force holds while it uploads (T6). */
#define PUSH_CLAIM "push.claim"

/* A file of a store: its name (short: "store.zr", "123.chunk"), size and,
 * while it is being copied, its descriptor and mapping. */
struct xfile {
    char name[32];
    char etag[ZR_S3_ETAG_MAX]; /* of the object as listed, or the one a local
                                * file's upload gives (T4) */
    uint64_t size;
    int fd;
    uint8_t *map;
};

/* Whether name is one of the files a store consists of (intent.zr aside):
 * the three fixed ones, or N.chunk and N.loc in canonical decimal. */
static bool store_file_name(const char *name)
{
    if (strcmp(name, ZR_STORE_FILE) == 0 || strcmp(name, ZR_META_FILE) == 0 ||
        strcmp(name, ZR_DICT_FILE) == 0)
        return true;
    if (name[0] < '0' || name[0] > '9' || (name[0] == '0' && name[1] != '.'))
        return false;
    char *end;
    errno = 0;
    unsigned long long id = strtoull(name, &end, 10);
    if (errno != 0 || id >= ZR_MAX_FILES || strlen(name) >= sizeof ((struct xfile *)0)->name)
        return false;
    return strcmp(end, ".chunk") == 0 || strcmp(end, ".loc") == 0;
}

static void xfiles_close(struct xfile *f, size_t n)
{
    for (size_t k = 0; f && k < n; k++) {
        if (f[k].map)
            munmap(f[k].map, (size_t)f[k].size);
        if (f[k].fd >= 0)
            close(f[k].fd);
    }
    zr_free(f);
}

static int xfile_add(struct xfile **f, size_t *n, size_t *cap, const char *name, uint64_t size)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        struct xfile *g = zr_realloc(*f, c * sizeof *g);
        if (!g)
            return zr_err(ZR_ENOMEM, "a list of %zu files", c);
        *f = g;
        *cap = c;
    }
    struct xfile *x = &(*f)[(*n)++];
    *x = (struct xfile){.size = size, .fd = -1};
    snprintf(x->name, sizeof x->name, "%s", name);
    return 0;
}

static const struct xfile *xfile_find(const struct xfile *f, size_t n, const char *name)
{
    for (size_t k = 0; k < n; k++)
        if (strcmp(f[k].name, name) == 0)
            return &f[k];
    return NULL;
}

/* Largest first, so that the long uploads start at once and the small
 * ones fill in beside them. */
static int by_size_desc(const void *x, const void *y)
{
    const struct xfile *a = x, *b = y;
    return a->size < b->size ? 1 : a->size > b->size ? -1 : strcmp(a->name, b->name);
}

/* ---- push --------------------------------------------------------------- */

/* The store files of the local folder dir, open for reading, with their
 * sizes; meta.zr among them. A non-empty intent.zr is refused (T1). */
static int scan_local(const char *dir, struct xfile **out, size_t *nout)
{
    struct xfile *f = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    DIR *d = opendir(dir);
    if (!d)
        return zr_err_sys(errno, "%s", dir);
    struct dirent *e;
    errno = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        bool intent = strcmp(e->d_name, ZR_INTENT_FILE) == 0;
        if (!intent && !store_file_name(e->d_name))
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            rc = zr_err_sys(errno, "%s/%s", dir, e->d_name);
        } else if (!S_ISREG(st.st_mode)) {
            rc = zr_err(ZR_ECORRUPT, "%s/%s is not a regular file", dir, e->d_name);
        } else if (intent) {
            if (st.st_size > 0)
                rc = zr_err(ZR_EBUSY, "%s holds a pending delete or compaction (intent.zr): "
                            "open it once (zr info) to finish it, then push it", dir);
        } else if ((rc = xfile_add(&f, &n, &cap, e->d_name, (uint64_t)st.st_size)) == 0) {
            f[n - 1].fd = fd;
            fd = -1;
        }
        if (fd >= 0)
            close(fd);
        errno = 0;
    }
    if (rc == 0 && errno != 0)
        rc = zr_err_sys(errno, "reading the folder %s", dir);
    closedir(d);
    if (rc == 0 && !xfile_find(f, n, ZR_META_FILE))
        rc = zr_err(ZR_ENOTSTORE, "%s has no meta.zr", dir);
    if (rc != 0) {
        xfiles_close(f, n);
        return rc;
    }
    qsort(f, n, sizeof *f, by_size_desc);
    *out = f;
    *nout = n;
    return 0;
}

/* T1: a store whose intent.zr is not empty has a delete or compaction
 * to finish (R10), which any open does. */
static int refuse_intent(const char *dir)
{
    char *p;
    struct stat st;
    if (asprintf(&p, "%s/%s", dir, ZR_INTENT_FILE) < 0)
        return zr_err(ZR_ENOMEM, "%s", dir);
    bool pending = stat(p, &st) == 0 && st.st_size > 0;
    free(p);
    if (pending)
        return zr_err(ZR_EBUSY, "%s holds a pending delete or compaction (intent.zr): "
                      "open it once (zr info) to finish it, then push it", dir);
    return 0;
}

/* The uploads of a push, shared by its threads. */
struct push_job {
    struct zr_s3 *c;
    const struct xfile *f;
    size_t n, next;
    unsigned running;
    uint64_t bytes_done;
    int rc;
    char msg[512];
    pthread_mutex_t lock;
    pthread_cond_t changed;
};

static void *push_worker(void *arg)
{
    struct push_job *j = arg;
    pthread_mutex_lock(&j->lock);
    while (j->rc == 0 && j->next < j->n) {
        const struct xfile *f = &j->f[j->next++];
        pthread_mutex_unlock(&j->lock);
        int rc = zr_s3_put_file(j->c, f->name, f->fd, f->size, 0);
        pthread_mutex_lock(&j->lock);
        if (rc != 0 && j->rc == 0) {
            /* The message is this thread's: the caller's thread reports it. */
            j->rc = rc;
            snprintf(j->msg, sizeof j->msg, "%s", zr_last_error());
        }
        if (rc == 0)
            j->bytes_done += f->size;
        pthread_cond_signal(&j->changed);
    }
    j->running--;
    pthread_cond_signal(&j->changed);
    pthread_mutex_unlock(&j->lock);
    return NULL;
}

/* Upload files f[0..n) a few at once, reporting bytes done out of total
 * on this thread as each one completes. */
static int upload(struct zr_s3 *c, const struct xfile *f, size_t n, uint64_t total,
                  zr_progress_fn fn, void *user)
{
    struct push_job j = {.c = c, .f = f, .n = n};
    pthread_t tid[PUSH_FILES];
    unsigned nt = 0;
    pthread_mutex_init(&j.lock, NULL);
    pthread_cond_init(&j.changed, NULL);
    pthread_mutex_lock(&j.lock);
    for (; nt < PUSH_FILES && nt < n; nt++) {
        if (pthread_create(&tid[nt], NULL, push_worker, &j) != 0)
            break;
        j.running++;
    }
    if (nt == 0 && n > 0) {
        j.rc = zr_err(ZR_ELIMIT, "%s: no thread for the uploads", zr_s3_url(c));
        snprintf(j.msg, sizeof j.msg, "%s", zr_last_error());
    }
    uint64_t reported = 0;
    if (fn) {
        pthread_mutex_unlock(&j.lock);
        fn(user, 0, total);
        pthread_mutex_lock(&j.lock);
    }
    while (j.running > 0) {
        pthread_cond_wait(&j.changed, &j.lock);
        if (fn && j.bytes_done != reported) {
            reported = j.bytes_done;
            pthread_mutex_unlock(&j.lock);
            fn(user, reported, total);
            pthread_mutex_lock(&j.lock);
        }
    }
    pthread_mutex_unlock(&j.lock);
    for (unsigned k = 0; k < nt; k++)
        pthread_join(tid[k], NULL);
    pthread_cond_destroy(&j.changed);
    pthread_mutex_destroy(&j.lock);
    if (j.rc != 0)
        zr_err_restore(j.rc, j.msg);
    return j.rc;
}

/* T4: the listing holds exactly the local files, at their sizes and,
 * where the server's ETags are MD5s (md5), with the ETags computed of
 * them. A claim beside them is a push that will find the store and let
 * go (T6). */
static int check_listing(struct zr_s3 *c, const struct xfile *f, size_t n, bool md5,
                         const char *when)
{
    struct zr_s3_obj *o;
    size_t m;
    int rc = zr_s3_list(c, "", true, &o, &m);
    if (rc != 0)
        return rc;
    size_t seen = 0;
    for (size_t k = 0; rc == 0 && k < m; k++) {
        if (o[k].dir || strcmp(o[k].name, PUSH_CLAIM) == 0)
            continue;
        const struct xfile *x = xfile_find(f, n, o[k].name);
        if (!x)
            rc = zr_err(ZR_ECORRUPT, "%s/%s appeared %s: another writer?", zr_s3_url(c),
                        o[k].name, when);
        else if (x->size != o[k].size)
            rc = zr_err(ZR_ECORRUPT, "%s/%s is %llu bytes %s, not %llu", zr_s3_url(c),
                        o[k].name, (unsigned long long)o[k].size, when,
                        (unsigned long long)x->size);
        /* A listing without ETags leaves the sizes and the open to check. */
        else if (md5 && o[k].etag[0] && strcasecmp(o[k].etag, x->etag) != 0)
            rc = zr_err(ZR_ECORRUPT, "%s/%s is not the bytes pushed %s (ETag %s, not %s): "
                        "another push wrote it", zr_s3_url(c), o[k].name, when, o[k].etag,
                        x->etag);
        else
            seen++;
    }
    if (rc == 0 && seen != n)
        for (size_t k = 0; rc == 0 && k < n; k++) {
            size_t j = 0;
            while (j < m && (o[j].dir || strcmp(o[j].name, f[k].name) != 0))
                j++;
            if (j == m)
                rc = zr_err(ZR_ECORRUPT, "%s/%s is missing %s", zr_s3_url(c), f[k].name, when);
        }
    zr_s3_list_free(o, m);
    return rc;
}

/* T4: the remote store opens and is the local one. */
static int check_opens(zr_store *s, const char *url)
{
    zr_store *r;
    int rc = zr_open(&r, url, ZR_RDONLY);
    if (rc != 0)
        return rc;
    uint32_t nd, rnd;
    const uint64_t *shape = zr_item_shape(s, &nd), *rshape = zr_item_shape(r, &rnd);
    bool same = zr_len(r) == zr_len(s) && zr_kind(r) == zr_kind(s) &&
                strcmp(zr_dtype(r), zr_dtype(s)) == 0 && zr_codec(r) == zr_codec(s) &&
                nd == rnd && (nd == 0 || memcmp(shape, rshape, nd * sizeof *shape) == 0);
    if (!same)
        rc = zr_err(ZR_ECORRUPT, "%s opens as a store other than %s (%llu records of %s, "
                    "not %llu of %s)", url, s->path, (unsigned long long)zr_len(r),
                    zr_dtype(r), (unsigned long long)zr_len(s), zr_dtype(s));
    zr_close(r);
    return rc;
}

/* Give back a claim, keeping the error that made us. */
static void unclaim(struct zr_s3 *c)
{
    char msg[512];
    int code = zr_last_error_code();
    snprintf(msg, sizeof msg, "%s", zr_last_error());
    (void)zr_s3_delete(c, PUSH_CLAIM);
    zr_err_restore(code, msg);
}

static int refuse_held(struct zr_s3 *c, const struct zr_s3_obj *o, size_t n)
{
    return zr_err(ZR_EEXIST, "%s already holds %zu object%s (%s%s): push --force "
                  "replaces it", zr_s3_url(c), n, n == 1 ? "" : "s", o[0].name,
                  o[0].dir ? "/..." : "");
}

/* T6: make the empty prefix this push's, or refuse. The note is this
 * push's own (host, process, time, a counter), so that a retried PUT
 * whose first try was stored, answered 412, is told from a loss; and a
 * 409 (another conditional write under way, which may fail) from one. */
static int claim(struct zr_s3 *c)
{
    static _Atomic unsigned seq;
    char note[192], host[64] = "";
    gethostname(host, sizeof host - 1);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int len = snprintf(note, sizeof note, "zr push from %s, process %ld, at %lld.%09ld, #%u\n",
                       host, (long)getpid(), (long long)now.tv_sec, now.tv_nsec,
                       atomic_fetch_add(&seq, 1));
    int rc = ZR_EEXIST;
    for (int tries = 0; rc == ZR_EEXIST && tries < 4; tries++) {
        if (tries > 0)
            nanosleep(&(struct timespec){0, 100000000L * tries}, NULL);
        if ((rc = zr_s3_put_new(c, PUSH_CLAIM, note, (size_t)len)) != ZR_EEXIST)
            break;
        void *held = NULL;
        size_t hl = 0;
        int g = zr_s3_get(c, PUSH_CLAIM, sizeof note, &held, &hl, true);
        bool ours = g == 0 && held && hl == (size_t)len && memcmp(held, note, hl) == 0;
        bool missing = g == 0 && !held;
        zr_free(held);
        if (ours)
            rc = 0;
        else if (!missing) /* held by another push, or unreadable */
            break;
        /* else no one holds it after all: try again */
    }
    if (rc == ZR_EEXIST)
        return zr_err(ZR_EEXIST, "another push to %s is under way (it holds %s): if none "
                      "is, push --force replaces what is there", zr_s3_url(c), PUSH_CLAIM);
    if (rc != 0)
        return rc;
    /* A push that finished between our listing and our claim let go of
     * its claim, and left its store. */
    struct zr_s3_obj *o;
    size_t n;
    if ((rc = zr_s3_list(c, "", true, &o, &n)) != 0) {
        unclaim(c);
        return rc;
    }
    size_t k = 0;
    while (k < n && !o[k].dir && strcmp(o[k].name, PUSH_CLAIM) == 0)
        k++;
    if (k < n || n == 0) {
        rc = n == 0 ? zr_err(ZR_EIO, "%s: the new %s is not listed", zr_s3_url(c), PUSH_CLAIM)
                    : refuse_held(c, &o[k], n - k);
        unclaim(c);
    }
    zr_s3_list_free(o, n);
    return rc;
}

/* T3: what the prefix holds now. Refused unless force, else claimed (T6);
 * with force the old header goes first, and *old keeps the listing to
 * clear later. */
static int clear_header(struct zr_s3 *c, bool force, struct zr_s3_obj **old, size_t *nold)
{
    int rc = zr_s3_list(c, "", true, old, nold);
    if (rc != 0)
        return rc;
    if (!force)
        return *nold ? refuse_held(c, *old, *nold) : claim(c);
    for (size_t k = 0; k < *nold; k++)
        if (!(*old)[k].dir && strcmp((*old)[k].name, ZR_META_FILE) == 0)
            return zr_s3_delete(c, ZR_META_FILE);
    return 0;
}

ZR_API int zr_push(const char *path, const char *url, unsigned flags, zr_progress_fn fn,
                   void *user)
{
    if (!path || !url || (flags & ~ZR_PUSH_FORCE))
        return zr_err(ZR_EINVAL, "zr_push: a NULL path or url, or an unknown flag");
    if (!zr_s3_is_url(url) || zr_s3_is_url(path))
        return zr_err(ZR_EINVAL, "zr_push copies a local store to an s3:// address, "
                      "not %s to %s", path, url);
    zr_store *s = NULL;
    struct zr_s3 *c = NULL;
    struct xfile *f = NULL;
    struct zr_s3_obj *old = NULL;
    size_t n = 0, nold = 0;
    uint8_t meta[ZR_HEADER_SIZE];
    /* T1: a pending intent is refused before the open would apply it: a
     * push changes nothing of the local store. Then the shared lock, held
     * to the end. */
    int rc = refuse_intent(path);
    if (rc == 0)
        rc = zr_open(&s, path, ZR_RDONLY);
    if (rc == 0)
        rc = scan_local(path, &f, &n);
    const struct xfile *mf = rc == 0 ? xfile_find(f, n, ZR_META_FILE) : NULL;
    if (rc == 0 && mf->size != ZR_HEADER_SIZE)
        rc = zr_err(ZR_ECORRUPT, "%s/meta.zr is %llu bytes, not %d", path,
                    (unsigned long long)mf->size, ZR_HEADER_SIZE);
    /* A regular file of 32 bytes reads whole or fails. */
    if (rc == 0 && pread(mf->fd, meta, ZR_HEADER_SIZE, 0) != ZR_HEADER_SIZE)
        rc = zr_err_sys(errno ? errno : EIO, "reading %s/meta.zr", path);
    uint64_t total = 0;
    for (size_t k = 0; k < n; k++)
        total += f[k].size;
    bool force = flags & ZR_PUSH_FORCE, claimed = false;
    if (rc == 0)
        rc = zr_s3_open(&c, url);
    if (rc == 0 && (rc = clear_header(c, force, &old, &nold)) == 0)
        claimed = !force;
    /* T4: the ETags the uploads must give, from the bytes under the lock. */
    for (size_t k = 0; rc == 0 && k < n; k++)
        rc = &f[k] == mf ? zr_s3_etag_mem(meta, ZR_HEADER_SIZE, f[k].etag)
                         : zr_s3_etag_file(f[k].fd, f[k].size, f[k].etag);
    /* T2: every file but the header, which by_size_desc put last of all
     * the files of its size; it is sent from memory at the end. */
    struct xfile *body = NULL;
    size_t nbody = 0;
    if (rc == 0 && (body = zr_calloc(n, sizeof *body)) == NULL)
        rc = zr_err(ZR_ENOMEM, "a list of %zu files", n);
    for (size_t k = 0; rc == 0 && k < n; k++)
        if (&f[k] != mf)
            body[nbody++] = f[k];
    /* A claim is kept once a byte of the store may be on the server (T6);
     * before that, a failure gives it back. */
    if (rc != 0 && claimed) {
        unclaim(c);
        claimed = false;
    }
    if (rc == 0)
        rc = upload(c, body, nbody, total, fn, user);
    zr_free(body);
    /* T3: the old store's leftovers go before the new header comes. */
    for (size_t k = 0; rc == 0 && k < nold; k++)
        if (!old[k].dir && !xfile_find(f, n, old[k].name))
            rc = zr_s3_delete(c, old[k].name);
    char answer[ZR_S3_ETAG_MAX] = "";
    if (rc == 0)
        rc = zr_s3_put_etag(c, ZR_META_FILE, meta, ZR_HEADER_SIZE, !force, answer);
    /* T6: a 412 to the header of a push holding the claim is a retry whose
     * first try was stored, when the header listed is this one's; else a
     * --force push published meanwhile, and the objects are its: the
     * loser gives back its claim and deletes nothing else. */
    if (rc == ZR_EEXIST && claimed) {
        struct zr_s3_obj *o = NULL;
        size_t m = 0;
        bool ours = false;
        if (zr_s3_list(c, ZR_META_FILE, true, &o, &m) == 0)
            for (size_t k = 0; k < m; k++)
                ours |= !o[k].dir && strcmp(o[k].name, ZR_META_FILE) == 0 &&
                        strcasecmp(o[k].etag, mf->etag) == 0;
        zr_s3_list_free(o, m);
        if (ours) {
            rc = 0;
            snprintf(answer, sizeof answer, "%s", mf->etag);
        } else {
            rc = zr_err(ZR_EEXIST, "another push published a store at %s first: this one "
                        "failed, and left it as it is", zr_s3_url(c));
            unclaim(c);
            claimed = false;
        }
    }
    /* A server that answers the header with an ETag other than its MD5
     * (SSE-KMS, SSE-C) makes ETags of its own: only sizes and the open
     * are checked there. */
    bool md5 = !answer[0] || strcasecmp(answer, mf->etag) == 0;
    if (rc == 0 && fn)
        fn(user, total, total);
    /* Checked before the claim is given back: a push that claims the
     * prefix after that finds the store and lets go, but its claim would
     * be in the listing. */
    if (rc == 0)
        rc = check_listing(c, f, n, md5, "after the upload");
    if (rc == 0 && claimed)
        rc = zr_s3_delete(c, PUSH_CLAIM);
    if (rc == 0)
        rc = check_opens(s, zr_s3_url(c));
    zr_s3_list_free(old, nold);
    zr_s3_close(c);
    xfiles_close(f, n);
    zr_close(s);
    return rc;
}

/* ---- pull --------------------------------------------------------------- */

/* The store's objects under the prefix; T5 refuses an unfinished one. */
static int list_remote(struct zr_s3 *c, struct xfile **out, size_t *nout)
{
    struct zr_s3_obj *o;
    size_t m, n = 0, cap = 0;
    struct xfile *f = NULL;
    bool intent = false;
    int rc = zr_s3_list(c, "", true, &o, &m);
    if (rc != 0)
        return rc;
    for (size_t k = 0; rc == 0 && k < m; k++) {
        if (o[k].dir)
            continue;
        intent |= strcmp(o[k].name, ZR_INTENT_FILE) == 0;
        if (store_file_name(o[k].name) && (rc = xfile_add(&f, &n, &cap, o[k].name, o[k].size)) == 0)
            memcpy(f[n - 1].etag, o[k].etag, sizeof f[n - 1].etag);
    }
    zr_s3_list_free(o, m);
    if (rc == 0 && !xfile_find(f, n, ZR_STORE_FILE))
        rc = zr_err(ZR_ENOTSTORE, "%s holds no store (no store.zr)", zr_s3_url(c));
    else if (rc == 0 && !xfile_find(f, n, ZR_META_FILE))
        rc = zr_err(ZR_ENOTSTORE, "%s has no meta.zr: its upload has not finished "
                    "(zr push sends the header last)", zr_s3_url(c));
    else if (rc == 0 && intent)
        rc = zr_err(ZR_ECORRUPT, "%s holds an interrupted delete or compaction (intent.zr)",
                    zr_s3_url(c));
    if (rc != 0) {
        zr_free(f);
        return rc;
    }
    *out = f;
    *nout = n;
    return 0;
}

struct pull_job {
    uint64_t done, total;
    zr_progress_fn fn;
    void *user;
};

static int range_done(void *arg, const struct zr_s3_range *r)
{
    struct pull_job *j = arg;
    j->done += r->len;
    if (j->fn)
        j->fn(j->user, j->done, j->total);
    return 0;
}

/* Fetch every file into the folder dir: each is created at its full size
 * (so a full disk fails here, not as a fault in a mapping), mapped, and
 * filled in place by ranged GETs of all files at once, then synced. */
static int download(struct zr_s3 *c, const char *dir, struct xfile *f, size_t n,
                    mode_t mode, zr_progress_fn fn, void *user)
{
    struct pull_job j = {.fn = fn, .user = user};
    size_t nr = 0;
    int rc = 0;
    for (size_t k = 0; k < n; k++) {
        j.total += f[k].size;
        nr += (size_t)((f[k].size + PULL_PART - 1) / PULL_PART);
    }
    struct zr_s3_range *r = zr_calloc(nr ? nr : 1, sizeof *r);
    if (!r)
        return zr_err(ZR_ENOMEM, "%zu ranges", nr);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        rc = zr_err_sys(errno, "%s", dir);
    size_t m = 0;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        struct xfile *x = &f[k];
        x->fd = openat(dfd, x->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (x->fd < 0 || fchmod(x->fd, mode) != 0) {
            rc = zr_err_sys(errno, "%s/%s", dir, x->name);
            break;
        }
        if (x->size == 0)
            continue;
        if (x->size > SIZE_MAX) {
            rc = zr_err(ZR_ENOMEM, "%s/%s: %llu bytes", dir, x->name,
                        (unsigned long long)x->size);
            break;
        }
        int e = posix_fallocate(x->fd, 0, (off_t)x->size);
        if (e != 0) {
            rc = zr_err_sys(e, "%s/%s: reserving %llu bytes", dir, x->name,
                            (unsigned long long)x->size);
            break;
        }
        void *p = mmap(NULL, (size_t)x->size, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0);
        if (p == MAP_FAILED) {
            rc = zr_err_sys(errno, "%s/%s: mapping %llu bytes", dir, x->name,
                            (unsigned long long)x->size);
            break;
        }
        x->map = p;
        for (uint64_t off = 0; off < x->size; off += PULL_PART)
            r[m++] = (struct zr_s3_range){.name = x->name, .off = off,
                                          .len = ZR_MIN(PULL_PART, x->size - off),
                                          .to = x->map + off, .tag = k};
    }
    if (rc == 0)
        rc = zr_s3_get_ranges(c, r, m, 0, range_done, &j);
    for (size_t k = 0; rc == 0 && k < n; k++) {
        if (f[k].map)
            munmap(f[k].map, (size_t)f[k].size);
        f[k].map = NULL;
        if (fsync(f[k].fd) != 0)
            rc = zr_err_sys(errno, "syncing %s/%s", dir, f[k].name);
    }
    if (rc == 0 && fsync(dfd) != 0)
        rc = zr_err_sys(errno, "syncing the folder %s", dir);
    if (dfd >= 0)
        close(dfd);
    zr_free(r);
    return rc;
}

/* Remove the store files of folder dir, then the folder; a folder holding
 * anything else stays. */
static void remove_store_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        size_t len = strlen(name);
        bool tmp = len > 4 && strcmp(name + len - 4, ".tmp") == 0;
        if (store_file_name(name) || strcmp(name, ZR_INTENT_FILE) == 0 || tmp)
            unlinkat(dirfd(d), name, 0);
    }
    closedir(d);
    rmdir(dir);
}

/* Whether the folder path may be replaced (T5): it holds nothing but a
 * store's files. */
static int check_replaceable(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return zr_err_sys(errno, "%s", path);
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        size_t len = strlen(name);
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || store_file_name(name) ||
            strcmp(name, ZR_INTENT_FILE) == 0 || (len > 4 && strcmp(name + len - 4, ".tmp") == 0))
            continue;
        rc = zr_err(ZR_EEXIST, "%s holds %s, which is not a store's file: not replacing it",
                    path, name);
    }
    closedir(d);
    return rc;
}

static int sync_parent(const char *path)
{
    char *dup = strdup(path);
    if (!dup)
        return zr_err(ZR_ENOMEM, "%s", path);
    char *slash = strrchr(dup, '/');
    const char *parent = !slash ? "." : slash == dup ? "/" : (*slash = '\0', dup);
    int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = fd < 0 || fsync(fd) != 0 ? zr_err_sys(errno, "syncing the folder %s", parent) : 0;
    if (fd >= 0)
        close(fd);
    free(dup);
    return rc;
}

/* T5: the finished copy tmp becomes path. A new path is taken only if it
 * still does not exist; an old one (force) is exchanged for the copy in
 * one step, under its exclusive lock, and then removed. */
static int put_in_place(const char *tmp, const char *path, bool exists)
{
    if (!exists) {
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) != 0)
            return errno == EEXIST ? zr_err(ZR_EEXIST, "%s appeared during the pull", path)
                                   : zr_err_sys(errno, "renaming %s to %s", tmp, path);
        return sync_parent(path);
    }
    char *meta;
    if (asprintf(&meta, "%s/%s", path, ZR_META_FILE) < 0)
        return zr_err(ZR_ENOMEM, "%s", path);
    int fd = open(meta, O_RDONLY | O_CLOEXEC);
    free(meta);
    int rc = 0;
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0)
        rc = zr_err(ZR_EBUSY, "%s is open (locked): not replacing it", path);
    if (rc == 0 && renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) != 0)
        rc = zr_err_sys(errno, "exchanging %s and %s", tmp, path);
    if (fd >= 0)
        close(fd);
    if (rc == 0)
        rc = sync_parent(path);
    /* The old store, now under the temporary name, is the caller's to
     * remove (remove_store_dir). */
    return rc;
}

ZR_API int zr_pull_mode(const char *url, const char *path, unsigned flags, unsigned mode,
                        zr_progress_fn fn, void *user)
{
    if (!url || !path || !*path || (flags & ~ZR_PULL_FORCE))
        return zr_err(ZR_EINVAL, "zr_pull: a NULL url or path, or an unknown flag");
    if (mode == 0)
        mode = ZR_PULL_MODE_DEFAULT;
    if ((mode & ~0777u) || (mode & 0600) != 0600)
        return zr_err(ZR_EINVAL, "zr_pull: mode %#o is not a file mode of 0600 to 0777 "
                      "that lets the owner read and write", mode);
    /* T7: the folder's x bits follow its r bits. */
    mode_t dmode = (mode_t)(mode | ((mode & 0444) >> 2));
    if (!zr_s3_is_url(url) || zr_s3_is_url(path))
        return zr_err(ZR_EINVAL, "zr_pull copies a store at an s3:// address to a local "
                      "folder, not %s to %s", url, path);
    struct zr_s3 *c = NULL;
    struct xfile *f = NULL, *again = NULL;
    size_t n = 0, nagain = 0;
    char *dst = NULL, *tmp = NULL;
    bool made = false;
    struct stat st;
    int rc = zr_s3_open(&c, url);
    if (rc == 0)
        rc = list_remote(c, &f, &n);
    /* The target without trailing slashes, so its temporary sibling is
     * LOCAL.part-XXXXXX and not LOCAL/.part-XXXXXX. */
    if (rc == 0 && (dst = strdup(path)) == NULL)
        rc = zr_err(ZR_ENOMEM, "%s", path);
    for (size_t len = dst ? strlen(dst) : 0; len > 1 && dst[len - 1] == '/';)
        dst[--len] = '\0';
    bool exists = rc == 0 && lstat(dst, &st) == 0;
    if (rc == 0 && !exists && errno != ENOENT)
        rc = zr_err_sys(errno, "%s", dst);
    if (rc == 0 && exists && !(flags & ZR_PULL_FORCE))
        rc = zr_err(ZR_EEXIST, "%s already exists (--force replaces a store)", dst);
    if (rc == 0 && exists && !S_ISDIR(st.st_mode))
        rc = zr_err(ZR_EEXIST, "%s exists and is not a folder: not replacing it", dst);
    if (rc == 0 && exists)
        rc = check_replaceable(dst);
    if (rc == 0 && asprintf(&tmp, "%s.part-XXXXXX", dst) < 0) {
        tmp = NULL;
        rc = zr_err(ZR_ENOMEM, "%s", dst);
    }
    if (rc == 0 && !(made = mkdtemp(tmp) != NULL))
        rc = zr_err_sys(errno, "making a folder beside %s", dst);
    if (rc == 0 && chmod(tmp, dmode) != 0)
        rc = zr_err_sys(errno, "%s", tmp);
    if (rc == 0)
        rc = download(c, tmp, f, n, (mode_t)mode, fn, user);
    /* T5: the objects did not change while they came down. */
    if (rc == 0)
        rc = list_remote(c, &again, &nagain);
    for (size_t k = 0; rc == 0 && k < n; k++) {
        const struct xfile *x = xfile_find(again, nagain, f[k].name);
        if (!x || x->size != f[k].size || strcmp(x->etag, f[k].etag) != 0 || nagain != n)
            rc = zr_err(ZR_ECORRUPT, "%s changed during the pull (%s): pull it again",
                        zr_s3_url(c), f[k].name);
    }
    if (rc == 0) {
        zr_store *s;
        if ((rc = zr_open(&s, tmp, ZR_RDONLY)) == 0)
            zr_close(s);
    }
    if (rc == 0)
        rc = put_in_place(tmp, dst, exists);
    /* On success tmp holds the replaced store, if any; else the copy. */
    if (made)
        remove_store_dir(tmp);
    xfiles_close(f, n);
    zr_free(again);
    zr_s3_close(c);
    free(tmp);
    free(dst);
    return rc;
}

ZR_API int zr_pull(const char *url, const char *path, unsigned flags, zr_progress_fn fn,
                   void *user)
{
    return zr_pull_mode(url, path, flags, 0, fn, user);
}

/*
 * rcache.c: the local cache of remote stores (rcache.h).
 *
 * The cache folder holds a folder per store, named after a hash of its
 * endpoint and address, header, identity, its objects' names, sizes and
 * ETags (a store pushed again under the same address is another store)
 * and the block size (bits of one size never read as blocks of another),
 * and in it a sparse file per chunk
 * file and segment, of the same bytes at the same offsets: once the
 * blocks a batch needs are there, the batch is read from the mappings of
 * these files exactly as a local store's (gather.c), which is what makes
 * a store that fits in the cache read at a local store's speed after its
 * first epoch. Blocks are fetched whole (LOADERX_CACHE_BLOCK bytes, 2 MiB
 * by default): a store that fits is then fetched in a request per block,
 * not one per record, and a block written whole lands in the page cache
 * as one huge folio, which the mappings then map with one entry (with
 * 1 MiB blocks, random 2 KiB records read a third slower).
 *
 * Which blocks a file holds is a bitmap in the same file, past the bytes
 * a handle maps, so that bits and bytes always come from one inode. A
 * block is written, made durable (fdatasync), and only then marked, so
 * that a bit never outlives its bytes in a power cut; bits are set with
 * atomic or, which other processes see through their shared mappings.
 *
 * Several processes share the folder. A handle keeps each cache file it
 * opened for its lifetime, with a shared lock on it, and its cache of
 * descriptors (tables.c) gets copies of that descriptor, so the
 * descriptor it reads through and the bitmap it checks are always of the
 * same inode. Space is bounded by evicting whole files that no handle
 * holds, least recently used first (their mtime, touched on use), under
 * an exclusive lock that a holder's shared one refuses: an unlinked file
 * still open would keep its bytes on the disk, unseen by the count. When
 * the folder is past its bound and what is left is all held, a handle
 * adds no more blocks (its misses are read without the cache) until a
 * later look finds room.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gather.h"
#include "io.h"
#include "rcache.h"
#include "s3.h"

#define DEFAULT_BLOCK (2u << 20)
/* Bytes fetched in one round of a fill, at most (one block may be more). */
#define ROUND_BYTES (64u << 20)
/* A file in use is touched (its mtime, the eviction's clock) this often. */
#define TOUCH_NS (5ull * 1000000000ull)
/* Times a shared lock on a cache file is asked for, a millisecond apart. */
#define LOCK_ATTEMPTS 100
/* A handle that found the cache full looks again this often. */
#define FULL_RECHECK_NS (10ull * 1000000000ull)

struct rfile {
    int fd;                  /* -1 until opened */
    _Atomic bool gone;       /* evicted, or unwritable: no more blocks go to it */
    uint8_t *_Atomic bits;   /* the bitmap, mapped shared; set once fd is */
    size_t bits_len;         /* bytes mapped for it */
    _Atomic uint64_t touched; /* when it was last touched (ns) */
};

struct zr_rcache {
    int rootfd;           /* the cache folder */
    int storefd;          /* its folder for this store */
    uint64_t max;
    uint64_t block;
    pthread_mutex_t lock; /* opening files, touching them */
    struct rfile *files[2]; /* by table (chunks, segments), by id */
    uint32_t count[2];
    _Atomic uint64_t since_evict; /* bytes written since the folder was last measured */
    _Atomic bool full;            /* the folder was past the bound with nothing to evict */
    _Atomic uint64_t measured;    /* when it was (ns) */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int table_no(const zr_store *s, const struct zr_ftable *t)
{
    return t == &s->chunks ? 0 : 1;
}

/* Where the bitmap of a file of t starts: past the bytes mapped. */
static uint64_t bits_at(const struct zr_ftable *t)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    return (t->cap + page - 1) / page * page;
}

static uint64_t file_size(const struct zr_ftable *t, uint32_t id)
{
    return atomic_load_explicit(&zr_ftable_at(t, id)->size, memory_order_acquire);
}

/* Open (creating it if needed) the cache file of file id of t, with the
 * cache's lock held. */
static int open_locked(zr_store *s, struct zr_ftable *t, uint32_t id, struct rfile **out)
{
    struct zr_rcache *rc = s->rcache;
    struct rfile *f = &rc->files[table_no(s, t)][id];
    *out = f;
    if (atomic_load(&f->bits))
        return 0;
    char name[32];
    snprintf(name, sizeof name, "%u.%s", id, t->suffix);
    uint64_t nbits = (file_size(t, id) + rc->block - 1) / rc->block;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    size_t len = (size_t)(((nbits + 7) / 8 + page - 1) / page * page);
    if (len == 0)
        len = (size_t)page;
    /* The cache holds objects of buckets that may be private: only this
     * user reads it. */
    int fd = -1, tries = 0;
    for (int reopen = 0; fd < 0; reopen++) {
        fd = zr_io.openat(rc->storefd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            int e = errno;
            zr_err_sys(e, "opening the cache file %s of %s", name, s->path);
            errno = e;
            return zr_last_error_code();
        }
        /* Held for the handle's life: eviction leaves a held file alone
         * (evict). An evictor holds its exclusive lock only to unlink, so
         * a shared one is asked for a few times, never waited for under
         * the cache's mutex; a file system without flock has no cache. One
         * that eviction unlinked between the open and the lock is not the
         * file of that name any more: open it again. */
        struct stat st;
        int e;
        for (;;) {
            e = flock(fd, LOCK_SH | LOCK_NB) == 0 ? 0 : errno;
            if (e != EWOULDBLOCK || ++tries >= LOCK_ATTEMPTS)
                break;
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
        if (e == 0 && zr_io.fstat(fd, &st) != 0)
            e = errno;
        /* Only a file of this user's is trusted to hold the store's bytes;
         * one the umask or another mode left other than 0600 is made so. */
        if (e == 0 && (!S_ISREG(st.st_mode) || st.st_uid != geteuid())) {
            zr_io.close(fd);
            errno = EPERM; /* for zr_rcache_dup's callers, which read errno */
            return zr_err(ZR_EINVAL, "the cache file %s of %s is not a file of this user's "
                          "(uid %u, mode %06o)", name, s->path, (unsigned)st.st_uid,
                          (unsigned)st.st_mode);
        }
        if (e == 0 && (st.st_mode & 0777) != 0600 && fchmod(fd, 0600) != 0)
            e = errno;
        if (e == 0 && st.st_nlink > 0)
            break;
        zr_io.close(fd);
        fd = -1;
        if (e != 0 || reopen >= LOCK_ATTEMPTS) {
            e = e ? e : EAGAIN;
            zr_err_sys(e, "locking the cache file %s of %s", name, s->path);
            errno = e;
            return zr_last_error_code();
        }
    }
    /* The bitmap's blocks are allocated now: a store through its mapping
     * into a hole of a full disk would be a SIGBUS, not an error. */
    uint64_t want = bits_at(t) + len;
    int e = posix_fallocate(fd, (off_t)bits_at(t), (off_t)len);
    void *m = e == 0 ? zr_io.mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                                  (off_t)bits_at(t))
                     : MAP_FAILED;
    if (m == MAP_FAILED) {
        e = e ? e : errno;
        zr_io.close(fd);
        zr_err_sys(e, "making the cache file %s of %s (%llu bytes)", name, s->path,
                   (unsigned long long)want);
        errno = e;
        return zr_last_error_code();
    }
    f->bits_len = len;
    f->fd = fd;
    atomic_store(&f->touched, now_ns());
    atomic_store_explicit(&f->bits, m, memory_order_release);
    return 0;
}

/* The cache file of file id of t, opened if needed; NULL with the error
 * set when it cannot be. A file opened is looked up without a lock: its
 * descriptor and bitmap never change until the handle is closed. A file
 * in use is touched now and then (now: the caller's clock; 0 touches
 * nothing), so that eviction sees it used. */
static struct rfile *get_file(zr_store *s, struct zr_ftable *t, uint32_t id, uint64_t now,
                              int *err)
{
    struct zr_rcache *rc = s->rcache;
    struct rfile *f = &rc->files[table_no(s, t)][id];
    *err = 0;
    if (!atomic_load_explicit(&f->bits, memory_order_acquire)) {
        pthread_mutex_lock(&rc->lock);
        *err = open_locked(s, t, id, &f);
        pthread_mutex_unlock(&rc->lock);
        if (*err != 0)
            return NULL;
    }
    uint64_t was = atomic_load_explicit(&f->touched, memory_order_relaxed);
    if (now > was + TOUCH_NS && atomic_compare_exchange_strong(&f->touched, &was, now))
        (void)futimens(f->fd, NULL);
    return f;
}

/* The cache file of file id of t if this handle has opened it, else
 * NULL: for questions that must not create files. */
static struct rfile *peek_file(zr_store *s, struct zr_ftable *t, uint32_t id)
{
    struct rfile *f = &s->rcache->files[table_no(s, t)][id];
    return atomic_load_explicit(&f->bits, memory_order_acquire) ? f : NULL;
}

static bool has_block(const struct rfile *f, uint64_t b)
{
    const uint8_t *bits = atomic_load_explicit(&f->bits, memory_order_relaxed);
    return (__atomic_load_n(&bits[b / 8], __ATOMIC_ACQUIRE) >> (b % 8)) & 1;
}

int zr_rcache_dup(zr_store *s, struct zr_ftable *t, uint32_t id)
{
    int err;
    struct rfile *f = get_file(s, t, id, now_ns(), &err);
    if (!f)
        return -1; /* errno from the open */
    /* Opened again read-only, through /proc, rather than duplicated: the
     * same inode, and a read-only shared mapping of it may be made of
     * huge pages (the kernel maps a file's large folios whole only where
     * the mapping cannot write), which a mapping through the cache's own
     * read-write descriptor may not: random small records read a third
     * faster. */
    char path[40];
    snprintf(path, sizeof path, "/proc/self/fd/%d", f->fd);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd >= 0 ? fd : fcntl(f->fd, F_DUPFD_CLOEXEC, 0);
}

/* ---- names ------------------------------------------------------------ */

/* A store's folder: 16 lowercase hex digits (zr_rcache_attach). */
static bool is_store_name(const char *n)
{
    size_t k = 0;
    for (; n[k]; k++)
        if (!((n[k] >= '0' && n[k] <= '9') || (n[k] >= 'a' && n[k] <= 'f')))
            return false;
    return k == 16;
}

/* A cache file: a file id without leading zeros, then .chunk or .loc. */
static bool is_cache_file_name(const char *n)
{
    size_t k = 0;
    while (n[k] >= '0' && n[k] <= '9')
        k++;
    if (k == 0 || k > 10 || (n[0] == '0' && k > 1) || n[k] != '.')
        return false;
    return strcmp(n + k + 1, "chunk") == 0 || strcmp(n + k + 1, "loc") == 0;
}

/* Whether the folder name under dirfd is one the cache could have made:
 * a store's folder holding nothing but cache files. A folder of local
 * stores named by hashes holds meta.zr and store.zr beside its chunks. */
static bool is_cache_folder(int dirfd, const char *name)
{
    if (!is_store_name(name))
        return false;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return false;
    }
    bool only = true;
    struct dirent *e;
    while (only && (e = readdir(d)) != NULL)
        only = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
               is_cache_file_name(e->d_name);
    closedir(d);
    return only;
}

/* ---- eviction ---------------------------------------------------------- */

struct held {
    int dirfd;
    char name[40];
    char store[40];
    uint64_t bytes;
    struct timespec mtime;
};

static int held_cmp(const void *x, const void *y)
{
    const struct held *a = x, *b = y;
    if (a->mtime.tv_sec != b->mtime.tv_sec)
        return a->mtime.tv_sec < b->mtime.tv_sec ? -1 : 1;
    return a->mtime.tv_nsec < b->mtime.tv_nsec ? -1 : a->mtime.tv_nsec > b->mtime.tv_nsec;
}

/* Measure the whole cache folder and, past the bound, unlink the least
 * recently used files until it holds 90% of it. One process at a time
 * does this (a lock file); others skip it meanwhile. */
/* flock locks belong to open files, which a child of fork() shares: one
 * forked while an eviction holds its locks would hold them for as long
 * as it lives. Evictions and fork() therefore exclude each other. */
static pthread_mutex_t evicting = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t evicting_once = PTHREAD_ONCE_INIT;

static void evicting_lock(void) { pthread_mutex_lock(&evicting); }
static void evicting_unlock(void) { pthread_mutex_unlock(&evicting); }
static void evicting_setup(void)
{
    (void)pthread_atfork(evicting_lock, evicting_unlock, evicting_unlock);
}

static void evict_locked(struct zr_rcache *rc);

static void evict(struct zr_rcache *rc)
{
    pthread_once(&evicting_once, evicting_setup);
    evicting_lock();
    evict_locked(rc);
    evicting_unlock();
}

static void evict_locked(struct zr_rcache *rc)
{
    int lk = openat(rc->rootfd, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lk < 0)
        return;
    if (flock(lk, LOCK_EX | LOCK_NB) != 0) {
        close(lk);
        return;
    }
    struct held *h = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    int rd = openat(rc->rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *root = rd >= 0 ? fdopendir(rd) : NULL;
    struct dirent *e;
    /* Only what the cache makes is counted and evicted: its stores'
     * folders and, in them, its files, all of this user's. Anything else
     * in the folder (it has the cache's marker) is left alone. */
    uid_t me = geteuid();
    while (root && (e = readdir(root)) != NULL) {
        if (!is_store_name(e->d_name) || strlen(e->d_name) >= sizeof h->store)
            continue;
        struct stat st;
        int sd = openat(rc->rootfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sd >= 0 && (fstat(sd, &st) != 0 || st.st_uid != me)) {
            close(sd);
            sd = -1;
        }
        DIR *d = sd >= 0 ? fdopendir(sd) : NULL;
        struct dirent *fe;
        size_t first = n;
        uint64_t before = total;
        while (d && (fe = readdir(d)) != NULL) {
            /* A folder with a store's header in it is a local store that
             * someone put here, whose chunks have the cache's names. */
            if (strcmp(fe->d_name, "meta.zr") == 0 || strcmp(fe->d_name, "store.zr") == 0) {
                n = first;
                total = before;
                break;
            }
            if (!is_cache_file_name(fe->d_name) || strlen(fe->d_name) >= sizeof h->name ||
                fstatat(sd, fe->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
                !S_ISREG(st.st_mode) || st.st_uid != me)
                continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                struct held *g = realloc(h, cap * sizeof *h);
                if (!g)
                    break;
                h = g;
            }
            h[n] = (struct held){.bytes = (uint64_t)st.st_blocks * 512, .mtime = st.st_mtim};
            snprintf(h[n].name, sizeof h[n].name, "%s", fe->d_name);
            snprintf(h[n].store, sizeof h[n].store, "%s", e->d_name);
            total += h[n].bytes;
            n++;
        }
        if (d)
            closedir(d);
        else if (sd >= 0)
            close(sd);
    }
    if (root)
        closedir(root);
    else if (rd >= 0)
        close(rd);
    if (total > rc->max) {
        qsort(h, n, sizeof *h, held_cmp);
        for (size_t k = 0; k < n && total > rc->max / 10 * 9; k++) {
            char path[96];
            snprintf(path, sizeof path, "%s/%s", h[k].store, h[k].name);
            /* A file a handle holds (its shared lock) stays: its bytes are
             * in use, and an unlinked file would keep them on the disk,
             * out of the folder's count, for as long as the handle lives. */
            int fd = openat(rc->rootfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0)
                continue;
            if (flock(fd, LOCK_EX | LOCK_NB) == 0 && unlinkat(rc->rootfd, path, 0) == 0)
                total -= h[k].bytes;
            close(fd);
        }
    }
    /* Past the bound with nothing left to evict: the files held are what
     * the cache holds, and this handle adds no more until there is room. */
    atomic_store(&rc->full, total > rc->max);
    atomic_store(&rc->measured, now_ns());
    free(h);
    close(lk); /* releases the lock */
}

/* ---- filling ----------------------------------------------------------- */

/* A block to fetch: block b of file id of the table. */
struct want {
    uint32_t id;
    uint64_t b;
    struct rfile *f;
    uint8_t *buf;
};

static int want_cmp(const void *x, const void *y)
{
    const struct want *a = x, *c = y;
    if (a->id != c->id)
        return a->id < c->id ? -1 : 1;
    return a->b < c->b ? -1 : a->b > c->b;
}

struct round {
    zr_store *s;
    struct zr_ftable *t;
    struct want *w;
};

/* A block arrived: write it to its cache file (durable and marked once
 * the round is over). A file that cannot take it (a full disk) takes no
 * more blocks: its pieces are then read without the cache. */
static int block_arrived(void *arg, const struct zr_s3_range *r)
{
    struct round *rd = arg;
    struct want *w = &rd->w[r->tag];
    char name[48];
    snprintf(name, sizeof name, "the cache file %u.%s", w->id, rd->t->suffix);
    if (atomic_load(&w->f->gone) ||
        zr_write_all(w->f->fd, r->to, (size_t)r->len, r->off, name) != 0)
        atomic_store(&w->f->gone, true);
    return 0;
}

/* Fetch blocks w[0..n) (sorted, distinct) of t, write them, make them
 * durable and mark them. */
static int fetch_round(zr_store *s, struct zr_ftable *t, struct want *w, size_t n)
{
    struct zr_rcache *rc = s->rcache;
    struct zr_s3_range *r = zr_calloc(n, sizeof *r);
    char (*names)[32] = zr_malloc(n * sizeof *names);
    int err = r && names ? 0 : zr_err(ZR_ENOMEM, "%s: fetching %zu blocks", s->path, n);
    uint64_t bytes = 0;
    for (size_t k = 0; err == 0 && k < n; k++) {
        uint64_t off = w[k].b * rc->block;
        uint64_t len = ZR_MIN(rc->block, file_size(t, w[k].id) - off);
        snprintf(names[k], sizeof names[k], "%u.%s", w[k].id, t->suffix);
        if (!(w[k].buf = zr_malloc((size_t)len)))
            err = zr_err(ZR_ENOMEM, "%s: a block of %llu bytes", s->path, (unsigned long long)len);
        r[k] = (struct zr_s3_range){.name = names[k], .off = off, .len = len, .to = w[k].buf,
                                    .tag = k, .etag = zr_remote_etag(s, t, w[k].id)};
        bytes += len;
    }
    struct round rd = {.s = s, .t = t, .w = w};
    if (err == 0)
        err = zr_s3_get_ranges(s->remote, r, n, 0, block_arrived, &rd);
    for (size_t k = 0; err == 0 && k < n; k++) {
        if ((k > 0 && w[k].f == w[k - 1].f) || atomic_load(&w[k].f->gone))
            continue;
        if (zr_io.fdatasync(w[k].f->fd) != 0)
            atomic_store(&w[k].f->gone, true);
    }
    for (size_t k = 0; err == 0 && k < n; k++)
        if (!atomic_load(&w[k].f->gone))
            __atomic_fetch_or(&atomic_load(&w[k].f->bits)[w[k].b / 8],
                          (uint8_t)(1u << (w[k].b % 8)), __ATOMIC_RELEASE);
    for (size_t k = 0; k < n; k++)
        zr_free(w[k].buf);
    zr_free(r);
    zr_free(names);
    if (err == 0 && atomic_fetch_add(&rc->since_evict, bytes) + bytes > rc->max / 16) {
        atomic_store(&rc->since_evict, 0);
        evict(rc);
    }
    return err;
}

/* Whether file f still takes blocks: not after eviction unlinked it
 * (what this handle wrote there would be held by no bound) or after a
 * write to it failed. */
static bool takes_blocks(struct rfile *f)
{
    struct stat st;
    if (atomic_load(&f->gone))
        return false;
    if (zr_io.fstat(f->fd, &st) == 0 && st.st_nlink == 0)
        atomic_store(&f->gone, true);
    return !atomic_load(&f->gone);
}

/* Whether every block of piece q is in its cache file (NULL: the file
 * cannot be opened). */
/* Whether blocks of [off, off + len) are all set in f. */
static bool has_range(const struct rfile *f, uint64_t block, uint64_t off, uint64_t len)
{
    for (uint64_t b = off / block; len && b <= (off + len - 1) / block; b++)
        if (!has_block(f, b))
            return false;
    return true;
}

static bool piece_held(const struct zr_rcache *rc, const struct rfile *f,
                       const struct zr_piece *q)
{
    return f && has_range(f, rc->block, q->off, q->len);
}

int zr_rcache_fill(zr_store *s, struct zr_ftable *t, struct zr_piece *p, size_t n,
                   size_t *direct)
{
    struct zr_rcache *rc = s->rcache;
    size_t m = 0, cap = 0;
    struct want *w = NULL;
    int err = 0;
    uint64_t now = now_ns();
    struct rfile *checked = NULL;
    bool takes = false;
    if (atomic_load(&rc->full) && now > atomic_load(&rc->measured) + FULL_RECHECK_NS)
        evict(rc);
    bool full = atomic_load(&rc->full);
    for (size_t k = 0; err == 0 && k < n; k++) {
        /* A full cache opens no new file (a file costs its bitmap). */
        int open_err;
        struct rfile *f = full ? peek_file(s, t, p[k].file)
                               : get_file(s, t, p[k].file, now, &open_err);
        if (!f || full || piece_held(rc, f, &p[k]))
            continue;
        if (f != checked) {
            checked = f;
            takes = takes_blocks(f);
        }
        if (!takes)
            continue;
        for (uint64_t b = p[k].off / rc->block; b <= (p[k].off + p[k].len - 1) / rc->block; b++) {
            if (has_block(f, b))
                continue;
            if (m == cap) {
                cap = cap ? 2 * cap : 64;
                struct want *g = zr_realloc(w, cap * sizeof *w);
                if (!g) {
                    err = zr_err(ZR_ENOMEM, "%s: planning the cache's fetches", s->path);
                    break;
                }
                w = g;
            }
            w[m++] = (struct want){.id = p[k].file, .b = b, .f = f};
        }
    }
    if (err == 0 && m > 0) {
        qsort(w, m, sizeof *w, want_cmp);
        size_t u = 0;
        for (size_t k = 0; k < m; k++)
            if (u == 0 || want_cmp(&w[u - 1], &w[k]) != 0)
                w[u++] = w[k];
        size_t per_round = ZR_MAX(1, ROUND_BYTES / rc->block);
        for (size_t a = 0; err == 0 && a < u; a += per_round)
            err = fetch_round(s, t, w + a, ZR_MIN(per_round, u - a));
    }
    zr_free(w);
    /* What the cache could not take goes first, to be read without it. */
    size_t d = 0;
    for (size_t k = 0; err == 0 && k < n; k++) {
        if (!piece_held(rc, peek_file(s, t, p[k].file), &p[k])) {
            struct zr_piece q = p[d];
            p[d++] = p[k];
            p[k] = q;
        }
    }
    *direct = d;
    return err;
}

/* Whether bytes [off, off + len) of file id of t are all in the cache. */
static bool holds_range(zr_store *s, struct zr_ftable *t, uint32_t id, uint64_t off, uint64_t len,
                        uint64_t now)
{
    int err;
    struct rfile *f = peek_file(s, t, id);
    if (f)
        f = get_file(s, t, id, now, &err); /* touches it */
    return f && has_range(f, s->rcache->block, off, len);
}

bool zr_rcache_has_entry(zr_store *s, uint64_t i)
{
    uint64_t in_seg = ((uint64_t)1 << s->seg_shift) - 1;
    return s->rcache && holds_range(s, &s->segs, (uint32_t)(i >> s->seg_shift),
                                    (i & in_seg) * ZR_LOC_SIZE, ZR_LOC_SIZE, 0);
}

bool zr_rcache_holds(zr_store *s, const uint64_t *idx, size_t n, uint64_t laid_out)
{
    bool all = true;
    uint64_t now = now_ns();
    /* The chunk file of the record before: records of a batch are often
     * of one file, which is then looked up (and touched) once. */
    const struct rfile *last = NULL;
    uint32_t last_id = UINT32_MAX;
    int err;
    unsigned rs = zr_read_enter(s);
    for (size_t k = 0; all && k < n; k++) {
        uint64_t i = idx[k];
        struct zr_loc l;
        if (i < laid_out) {
            zr_layout_loc(s, i, &l);
        } else {
            if (k % ZR_PAUSE_EVERY == 0)
                zr_read_pause(s, &rs);
            /* zr_loc_get reads the entry only where the cache holds its
             * block (zr_rcache_has_entry), and fails elsewhere. */
            all = zr_loc_get(s, i, &l) == 0;
        }
        if (all && l.chunk_id != last_id) {
            last_id = l.chunk_id;
            last = peek_file(s, &s->chunks, l.chunk_id);
            if (last)
                last = get_file(s, &s->chunks, l.chunk_id, now, &err);
        }
        all = all && last && has_range(last, s->rcache->block, l.offset, l.phys_length);
    }
    zr_read_leave(s, rs);
    return all;
}

/* ---- attaching --------------------------------------------------------- */

/* ---- the cache folder's rules ------------------------------------------ */

/* The cache folder is the cache's alone: eviction deletes files in it, and
 * what its files hold is served as the store's records. A marker at its
 * root (the Cache Directory Tagging format, which backup tools also
 * honour) says that this cache made it; a folder that holds anything else
 * and no marker is someone's data, never evicted from. */
#define TAG_NAME "CACHEDIR.TAG"
#define TAG_TEMP ".tag-"
static const char tag_text[] =
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This folder is the block cache of loaderx's remote stores\n"
    "# (LOADERX_CACHE_DIR): any file in it may be deleted at any time.\n";
/* The part of tag_text a marker must start with: its first two lines. */
#define TAG_KEY (sizeof "Signature: 8a477f597d28d172789f06886806bc55\n" - 1 + \
                 sizeof "# This folder is the block cache of loaderx's remote stores\n" - 1)

/* Another user who may write to a folder of the cache, or who owns it,
 * can plant files in it that read as records; so only this user's own
 * folders, writable by no one else, are used (what ssh asks of ~/.ssh). */
static int check_folder(const struct stat *st, const char *what, const char *path)
{
    if (!S_ISDIR(st->st_mode))
        return zr_err(ZR_EINVAL, "%s %s is not a folder", what, path);
    if (st->st_uid != geteuid())
        return zr_err(ZR_EINVAL, "%s %s belongs to uid %u, not to this user (uid %u): "
                      "give LOADERX_CACHE_DIR a folder of your own",
                      what, path, (unsigned)st->st_uid, (unsigned)geteuid());
    if (st->st_mode & (S_IWGRP | S_IWOTH))
        return zr_err(ZR_EINVAL, "%s %s is writable by %s (mode %04o): other users could "
                      "plant records in it; chmod go-w it", what, path,
                      (st->st_mode & S_IWOTH) ? "others" : "its group",
                      (unsigned)(st->st_mode & 07777));
    return 0;
}

/* The folders above the cache folder: one another user may write to
 * could have the cache folder renamed away and replaced, unless it is
 * sticky (as /tmp is), where only a name's owner may do that. Each must
 * belong to this user or to root. */
static int check_parents(char *real, const char *dir)
{
    int rc = 0;
    for (char *slash = strrchr(real, '/'); slash && rc == 0; slash = strrchr(real, '/')) {
        slash[slash == real] = '\0'; /* "/a/b" -> "/a" -> "/" */
        struct stat st;
        if (stat(real, &st) != 0)
            rc = zr_err_sys(errno, "checking %s, above the cache folder %s", real, dir);
        else if (st.st_uid != 0 && st.st_uid != geteuid())
            rc = zr_err(ZR_EINVAL, "%s, above the cache folder %s, belongs to uid %u, who "
                        "could replace the cache folder: give LOADERX_CACHE_DIR a folder "
                        "under folders of your own", real, dir, (unsigned)st.st_uid);
        else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
            rc = zr_err(ZR_EINVAL, "%s, above the cache folder %s, is writable by other "
                        "users and not sticky (mode %04o): they could replace the cache "
                        "folder", real, dir, (unsigned)(st.st_mode & 07777));
        if (real[1] == '\0')
            break;
    }
    return rc;
}

/* Make folder dir and the folders above it that are missing (mkdir -p),
 * for this user alone: the cache holds objects of buckets that may be
 * private. A symbolic link on the way that another user made points where
 * they choose, now or at the next open, so it is refused before anything
 * is made through it; one of root's or this user's is as trusted as a
 * folder of theirs. */
static int make_folders(const char *dir)
{
    char path[4096];
    size_t len = strlen(dir);
    if (len == 0 || len >= sizeof path)
        return zr_err(ZR_EINVAL, "the cache folder '%s': the name is empty or too long", dir);
    memcpy(path, dir, len + 1);
    for (size_t k = 1; k <= len; k++) {
        if (path[k] != '/' && path[k] != '\0')
            continue;
        char c = path[k];
        path[k] = '\0';
        struct stat st;
        int r = lstat(path, &st);
        if (r != 0 && errno == ENOENT &&
            (zr_io.mkdirat(AT_FDCWD, path, 0700) == 0 || errno == EEXIST))
            r = lstat(path, &st);
        if (r != 0)
            return zr_err_sys(errno, "creating %s, on the way to the cache folder %s", path,
                              dir);
        if (S_ISLNK(st.st_mode) && st.st_uid != geteuid() && st.st_uid != 0)
            return zr_err(ZR_EINVAL, "%s, on the way to the cache folder %s, is a symbolic "
                          "link of uid %u, not of this user (uid %u)", path, dir,
                          (unsigned)st.st_uid, (unsigned)geteuid());
        path[k] = c;
    }
    return 0;
}

/* The folders above the one open at fd, found where it is now (not where
 * the name dir led when it was checked), checked as check_parents says. */
static int check_open_parents(int fd, const struct stat *st, const char *dir)
{
    char proc[64], real[4096];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, real, sizeof real - 1);
    if (n <= 0 || real[0] != '/') {
        char *r = realpath(dir, NULL);
        if (!r)
            return zr_err_sys(errno, "resolving the cache folder %s", dir);
        n = (ssize_t)snprintf(real, sizeof real, "%s", r);
        free(r);
    }
    real[n] = '\0';
    struct stat now;
    if (stat(real, &now) != 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino)
        return zr_err(ZR_EINVAL, "the cache folder %s was moved or replaced while it was "
                      "checked", dir);
    return check_parents(real, dir);
}

/* 1 if the marker at the root of rootfd is this cache's, 0 if there is
 * none, or the error. */
static int read_tag(int rootfd, const char *dir)
{
    int fd = zr_io.openat(rootfd, TAG_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0)
        return zr_err_sys(errno, "opening %s/%s", dir, TAG_NAME);
    struct stat st;
    char buf[sizeof tag_text];
    ssize_t got = zr_io.fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid()
                      ? pread(fd, buf, sizeof buf, 0)
                      : -1;
    zr_io.close(fd);
    if (got < (ssize_t)TAG_KEY || memcmp(buf, tag_text, TAG_KEY) != 0)
        return zr_err(ZR_EEXIST, "%s/%s was not written by loaderx's cache (or not by this "
                      "user): %s is not a loaderx cache folder", dir, TAG_NAME, dir);
    return 1;
}

/* Write the marker: in full under a temporary name, then linked to its
 * name, so that a process that finds one finds all of it. */
static int write_tag(int rootfd, const char *dir)
{
    /* Threads of one process, and processes of containers that share the
     * folder, may write it at once: each under a name of its own. */
    static _Atomic unsigned seq;
    char tmp[64];
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        snprintf(tmp, sizeof tmp, TAG_TEMP "%ld-%u-%" PRIx64, (long)getpid(),
                 atomic_fetch_add(&seq, 1), now_ns());
        fd = zr_io.openat(rootfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                          0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0)
        return zr_err_sys(errno, "creating %s/%s", dir, tmp);
    int rc = zr_write_all(fd, tag_text, sizeof tag_text - 1, 0, "the cache folder's marker");
    /* Durable before it has its name: a marker found empty after a power
     * cut would have the folder refused. */
    if (rc == 0 && fsync(fd) != 0)
        rc = zr_err_sys(errno, "syncing %s/%s", dir, tmp);
    zr_io.close(fd);
    if (rc == 0 && linkat(rootfd, tmp, rootfd, TAG_NAME, 0) != 0 && errno != EEXIST)
        rc = zr_err_sys(errno, "writing %s/%s", dir, TAG_NAME);
    (void)unlinkat(rootfd, tmp, 0);
    if (rc != 0)
        return rc;
    return read_tag(rootfd, dir) == 1 ? 0 : zr_last_error_code();
}

/* A cache folder without a marker is taken only if it holds nothing but
 * what the cache makes (a folder made by hand, or one of an older
 * release); then it gets one. */
static int claim_root(int rootfd, const char *dir)
{
    int rc = read_tag(rootfd, dir);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    int d = zr_io.openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    DIR *dp = d >= 0 ? fdopendir(d) : NULL;
    if (!dp) {
        int e = errno;
        if (d >= 0)
            zr_io.close(d);
        return zr_err_sys(e, "listing the cache folder %s", dir);
    }
    struct dirent *e;
    while (rc == 0 && (e = readdir(dp)) != NULL) {
        const char *n = e->d_name;
        struct stat st;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strcmp(n, ".lock") == 0 ||
            strcmp(n, TAG_NAME) == 0 || strncmp(n, TAG_TEMP, strlen(TAG_TEMP)) == 0)
            continue;
        if (fstatat(rootfd, n, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
            is_cache_folder(rootfd, n))
            continue;
        rc = zr_err(ZR_EEXIST, "the cache folder %s holds %s, which the cache did not make, "
                    "and no %s of loaderx's: LOADERX_CACHE_DIR must name a new or empty "
                    "folder, kept for the cache alone", dir, n, TAG_NAME);
    }
    closedir(dp);
    return rc == 0 ? write_tag(rootfd, dir) : rc;
}

/* Open the cache folder dir, made if missing, after checking that no
 * other user can write to it or replace it, and that it is the cache's. */
static int open_root(const char *dir, int *out)
{
    *out = -1;
    /* A link that another user made (in a shared /tmp, say) points where
     * they chose: one of this user's folders, to be filled and evicted. */
    int rc = make_folders(dir);
    if (rc != 0)
        return rc;
    struct stat st;
    int fd = zr_io.openat(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0)
        return zr_err_sys(errno, "opening the cache folder %s", dir);
    if (zr_io.fstat(fd, &st) != 0)
        rc = zr_err_sys(errno, "checking the cache folder %s", dir);
    if (rc == 0)
        rc = check_folder(&st, "the cache folder", dir);
    if (rc == 0)
        rc = check_open_parents(fd, &st, dir);
    if (rc == 0)
        rc = claim_root(fd, dir);
    /* Made 0700 whatever the umask; an older release's may be 0755. */
    if (rc == 0 && (st.st_mode & 0777) != 0700 && fchmod(fd, 0700) != 0)
        rc = zr_err_sys(errno, "making the cache folder %s 0700", dir);
    if (rc != 0) {
        zr_io.close(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

int zr_rcache_attach(zr_store *s, const char *dir, uint64_t max_bytes, uint64_t version)
{
    struct zr_rcache *rc = zr_calloc(1, sizeof *rc);
    if (!rc)
        return zr_err(ZR_ENOMEM, "%s: the cache", s->path);
    rc->rootfd = rc->storefd = -1;
    pthread_mutex_init(&rc->lock, NULL);
    /* Under the cache's lock, which the fork handlers hold (tables.c). */
    pthread_mutex_lock(&s->cache.lock);
    s->rcache = rc;
    pthread_mutex_unlock(&s->cache.lock);
    rc->max = max_bytes;
    const char *env = getenv("LOADERX_CACHE_BLOCK");
    char *end = NULL;
    rc->block = DEFAULT_BLOCK;
    if (env && *env)
        rc->block = env[0] >= '0' && env[0] <= '9' ? strtoull(env, &end, 10) : 0;
    if ((end && *end) || rc->block < 4096 || rc->block > (1u << 30) ||
        (rc->block & (rc->block - 1)))
        return zr_err(ZR_EINVAL, "LOADERX_CACHE_BLOCK must be a power of two from 4096 to "
                      "2^30 bytes, not %s", env);
    for (int k = 0; k < 2; k++) {
        struct zr_ftable *t = k == 0 ? &s->chunks : &s->segs;
        rc->count[k] = atomic_load(&t->count);
        rc->files[k] = zr_malloc((rc->count[k] + 1) * sizeof *rc->files[k]);
        if (!rc->files[k])
            return zr_err(ZR_ENOMEM, "%s: the cache", s->path);
        for (uint32_t i = 0; i <= rc->count[k]; i++)
            rc->files[k][i] = (struct rfile){.fd = -1, .bits = NULL};
    }
    int e = open_root(dir, &rc->rootfd);
    if (e != 0)
        return e;
    /* The folder of this store: a hash of what makes it this store. */
    uint64_t h = 1469598103934665603ull;
#define MIX(p, n)                                                                  \
    for (size_t q_ = 0; q_ < (n); q_++)                                            \
        h = (h ^ ((const uint8_t *)(p))[q_]) * 1099511628211ull
    const char *url = zr_s3_url(s->remote), *endpoint = zr_s3_endpoint(s->remote);
    MIX(url, strlen(url));
    MIX(endpoint, strlen(endpoint));
    uint8_t raw[ZR_HEADER_SIZE];
    zr_header_encode(&s->hdr, raw);
    MIX(raw, sizeof raw);
    MIX(&s->id.kind, sizeof s->id.kind);
    MIX(s->id.dtype, strlen(s->id.dtype));
    MIX(&s->id.ndim, sizeof s->id.ndim);
    MIX(s->id.shape, s->id.ndim * sizeof s->id.shape[0]);
    MIX(&version, sizeof version);
    MIX(&rc->block, sizeof rc->block);
    MIX(&s->chunk_cap, sizeof s->chunk_cap);
    MIX(&s->seg_shift, sizeof s->seg_shift);
#undef MIX
    char name[24];
    snprintf(name, sizeof name, "%016" PRIx64, h);
    if (zr_io.mkdirat(rc->rootfd, name, 0700) != 0 && errno != EEXIST)
        return zr_err_sys(errno, "creating the cache folder %s/%s", dir, name);
    rc->storefd = zr_io.openat(rc->rootfd, name,
                               O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (rc->storefd < 0)
        return zr_err_sys(errno, "opening the cache folder %s/%s", dir, name);
    struct stat st;
    if (zr_io.fstat(rc->storefd, &st) != 0)
        return zr_err_sys(errno, "checking the cache folder %s/%s", dir, name);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int err = check_folder(&st, "the cache folder", path);
    if (err == 0 && (st.st_mode & 0777) != 0700 && fchmod(rc->storefd, 0700) != 0)
        err = zr_err_sys(errno, "making the cache folder %s 0700", path);
    return err;
}

void zr_rcache_fork_prepare(zr_store *s)
{
    pthread_mutex_lock(&s->rcache->lock);
}

void zr_rcache_fork_done(zr_store *s)
{
    pthread_mutex_unlock(&s->rcache->lock);
}

void zr_rcache_free(zr_store *s)
{
    struct zr_rcache *rc = s->rcache;
    if (!rc)
        return;
    for (int k = 0; k < 2; k++)
        for (uint32_t i = 0; rc->files[k] && i <= rc->count[k]; i++) {
            struct rfile *f = &rc->files[k][i];
            uint8_t *bits = atomic_load(&f->bits);
            if (bits)
                zr_io.munmap(bits, f->bits_len);
            if (f->fd >= 0)
                zr_io.close(f->fd);
        }
    zr_free(rc->files[0]);
    zr_free(rc->files[1]);
    if (rc->storefd >= 0)
        zr_io.close(rc->storefd);
    if (rc->rootfd >= 0)
        zr_io.close(rc->rootfd);
    pthread_mutex_destroy(&rc->lock);
    zr_free(rc);
    s->rcache = NULL;
}

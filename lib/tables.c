/*
 * tables.c: the files of a handle. A store's record bytes live in chunk
 * files and its record table in loc segments; this file owns their
 * geometry, the two tables of files (added in order, never moved, so
 * gathers index them without a lock while an append adds files), the
 * cache of their descriptors and mappings, and the checked reading of
 * table entries.
 *
 * The cache. The format allows 2^20 chunk files and as many segments,
 * far more than a process may keep open (RLIMIT_NOFILE) or mapped (the
 * address space at 4 GiB a window, vm.max_map_count). A handle opens a
 * file when it is first used and maps it when it is first read, and holds
 * at most fds.cap descriptors and maps.cap mappings: past these, the
 * oldest one that nobody is using is given up for the new one. A store
 * within the bounds (a few thousand files, the common case) keeps each
 * file open and mapped from its first use on, as if there were no cache.
 *
 * Readers take no lock for a file already open or mapped:
 *  - A descriptor is pinned while it is used (zr_file_fd, zr_file_put).
 *    The reader counts its pin, then loads the descriptor; eviction
 *    clears the descriptor, then looks at the pins, and puts it back if
 *    there are any. Both are sequentially consistent, so one of the two
 *    sees the other, and a descriptor is never closed (and its number
 *    reused for another file) while a read may still be given it.
 *  - A mapping is read inside a read section (zr_read_enter, counted by
 *    the parity of the epoch at entry). Eviction unpublishes a mapping
 *    and retires it with the epoch of the time; the epoch moves on once
 *    no reader of the epoch before it is left, and a mapping retired at
 *    epoch e is unmapped from epoch e + 2 on, when every reader that
 *    might have loaded it has left. Eviction never waits for readers
 *    (the evicting thread may be one), so the retired mappings are the
 *    only ones past the bound: those that readers inside might still use.
 *
 * Rules enforced here (numbered as in doc/format.md):
 *  R5. Every table entry is checked against the files before the bytes it
 *      names are touched (zr_loc_get, zr_loc_fits), so a damaged entry is
 *      reported, and the read-only mappings are never read past a file's
 *      end.
 *  R7. A frontier at the very end of a chunk is written as offset 0 of
 *      the next chunk (zr_frontier_settle).
 *  R14. A written file is fdatasynced before the cache closes its
 *      descriptor, or by the next sync; a failure there fails that sync.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"
#include "io.h"
#include "rcache.h"
#include "s3.h"

/* The most descriptors and mappings a handle holds. 1024 windows are
 * 4 TiB of address space for 4 GiB chunks (a 47-bit address space holds
 * 32 times that) and 1024 of the kernel's 65530 mappings a process, so
 * that several large handles fit in one process beside its other
 * mappings. */
#define CACHE_FDS 1024
#define CACHE_MAPS 1024

static uint32_t g_cache_fds, g_cache_maps;

void zr_testing_set_cache(uint32_t fds, uint32_t maps)
{
    g_cache_fds = fds;
    g_cache_maps = maps;
}

/* The descriptors a handle may hold: at most a quarter of the process's
 * limit, so that a few handles, the pool's rings and the caller's own
 * files fit beside it. */
static uint32_t fd_bound(void)
{
    struct rlimit rl;
    if (g_cache_fds)
        return g_cache_fds;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return CACHE_FDS;
    return (uint32_t)ZR_MAX(1, ZR_MIN((rlim_t)CACHE_FDS, rl.rlim_cur / 4));
}

static void ftable_init(struct zr_ftable *t, uint64_t cap, const char *suffix)
{
    for (int i = 0; i < ZR_DIR_SLOTS; i++)
        atomic_init(&t->blocks[i], NULL);
    atomic_init(&t->count, 0);
    atomic_init(&t->huge, false);
    t->cap = cap;
    t->suffix = suffix;
}

/* Close and unmap files from..count-1 of t (no reader may be inside). */
static void ftable_close(struct zr_ftable *t, uint32_t from, uint32_t count)
{
    for (uint32_t i = from; i < count; i++) {
        struct zr_file *f = zr_ftable_at(t, i);
        const uint8_t *map = atomic_exchange(&f->map, NULL);
        int fd = atomic_exchange(&f->fd, -1);
        if (map)
            zr_io.munmap((void *)map, t->cap);
        if (fd >= 0)
            zr_io.close(fd);
        atomic_store(&f->state, 0);
    }
}

static void ftable_free(struct zr_ftable *t)
{
    ftable_close(t, 0, atomic_load(&t->count));
    for (int i = 0; i < ZR_DIR_SLOTS; i++)
        zr_free(atomic_load(&t->blocks[i]));
}

static uint64_t g_chunk_cap = ZR_CHUNK_CAPACITY;
static uint64_t g_seg_entries = ZR_SEGMENT_ENTRIES;

void zr_testing_set_geometry(uint64_t chunk_capacity, uint64_t segment_entries)
{
    g_chunk_cap = chunk_capacity ? chunk_capacity : ZR_CHUNK_CAPACITY;
    g_seg_entries = segment_entries ? segment_entries : ZR_SEGMENT_ENTRIES;
}

/* ---- fork ----
 *
 * A child of fork() has one thread: the parent's other threads, their
 * pins, their read sections and any lock they held are not there. The
 * handles' cache locks are taken around fork() so that none is copied in
 * the middle of a change, and the child forgets the pins and readers it
 * inherited (their descriptors and mappings are its own copies), so that
 * it can gather, give files up and unmap as the parent does. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static zr_store *live;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* A remote handle's client and cache have locks too, and the client's
 * connections must not be shared with the child (s3.h). */
static void fork_prepare(void)
{
    pthread_mutex_lock(&live_lock);
    for (zr_store *s = live; s; s = s->cache.next) {
        pthread_mutex_lock(&s->cache.lock);
        if (s->rcache)
            zr_rcache_fork_prepare(s);
        zr_tcache_fork(s, true);
        if (s->remote)
            zr_s3_fork_prepare(s->remote);
    }
}

static void fork_parent(void)
{
    for (zr_store *s = live; s; s = s->cache.next) {
        if (s->remote)
            zr_s3_fork_parent(s->remote);
        zr_tcache_fork(s, false);
        if (s->rcache)
            zr_rcache_fork_done(s);
        pthread_mutex_unlock(&s->cache.lock);
    }
    pthread_mutex_unlock(&live_lock);
}

static void forget_pins(struct zr_ftable *t)
{
    uint32_t n = atomic_load(&t->count);
    for (uint32_t i = 0; i < n; i++)
        atomic_fetch_and(&zr_ftable_at(t, i)->state, ~ZR_PINS);
}

static void fork_child(void)
{
    for (zr_store *s = live; s; s = s->cache.next) {
        struct zr_cache *c = &s->cache;
        forget_pins(&s->chunks);
        forget_pins(&s->segs);
        atomic_store(&c->readers[0], 0);
        atomic_store(&c->readers[1], 0);
        atomic_store(&c->waiting, 0);
        pthread_cond_init(&c->unpinned, NULL);
        if (s->remote)
            zr_s3_fork_child(s->remote);
        zr_tcache_fork(s, false);
        if (s->rcache)
            zr_rcache_fork_done(s);
        pthread_mutex_unlock(&c->lock);
    }
    pthread_mutex_unlock(&live_lock);
}

static void fork_setup(void)
{
    (void)pthread_atfork(fork_prepare, fork_parent, fork_child);
}

int zr_tables_init(zr_store *s)
{
    struct zr_cache *c = &s->cache;
    c->fds = (struct zr_ring){.cap = fd_bound()};
    c->maps = (struct zr_ring){.cap = g_cache_maps ? g_cache_maps : CACHE_MAPS};
    /* Room for as many retired mappings as held ones: the list grows
     * only while readers hold back more than that. */
    c->fds.slot = zr_calloc(c->fds.cap, sizeof *c->fds.slot);
    c->maps.slot = zr_calloc(c->maps.cap, sizeof *c->maps.slot);
    c->retired_cap = c->maps.cap;
    c->retired = zr_malloc(c->retired_cap * sizeof *c->retired);
    if (!c->fds.slot || !c->maps.slot || !c->retired) {
        zr_free(c->fds.slot);
        zr_free(c->maps.slot);
        zr_free(c->retired);
        return -1;
    }
    s->chunk_cap = g_chunk_cap;
    s->seg_shift = (uint32_t)__builtin_ctzll(g_seg_entries);
    ftable_init(&s->chunks, s->chunk_cap, "chunk");
    ftable_init(&s->segs, (uint64_t)ZR_LOC_SIZE << s->seg_shift, "loc");
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->unpinned, NULL);
    atomic_init(&c->waiting, 0);
    atomic_init(&c->epoch, 0);
    atomic_init(&c->readers[0], 0);
    atomic_init(&c->readers[1], 0);
    atomic_init(&c->nretired, 0);
    atomic_init(&c->sync_errno, 0);
    pthread_once(&fork_once, fork_setup);
    pthread_mutex_lock(&live_lock);
    c->prev = NULL;
    c->next = live;
    if (live)
        live->cache.prev = s;
    live = s;
    pthread_mutex_unlock(&live_lock);
    return 0;
}

void zr_tables_free(zr_store *s)
{
    struct zr_cache *c = &s->cache;
    pthread_mutex_lock(&live_lock);
    if (c->prev)
        c->prev->cache.next = c->next;
    else
        live = c->next;
    if (c->next)
        c->next->cache.prev = c->prev;
    pthread_mutex_unlock(&live_lock);
    ftable_free(&s->chunks);
    ftable_free(&s->segs);
    size_t n = atomic_load(&c->nretired);
    for (size_t k = 0; k < n; k++)
        zr_io.munmap((void *)c->retired[k].map, c->retired[k].len);
    zr_free(c->retired);
    zr_free(c->fds.slot);
    zr_free(c->maps.slot);
    pthread_cond_destroy(&c->unpinned);
    pthread_mutex_destroy(&c->lock);
}

/* The size of file name, created empty first if asked. Nothing stays
 * open: a store of a million files is opened by asking a million sizes. */
static int file_size_at(zr_store *s, const char *name, bool create, uint64_t *size)
{
    struct stat st;
    if (create) {
        int fd = zr_io.openat(s->dirfd, name, O_RDWR | O_CREAT, 0644);
        if (fd < 0)
            return zr_err_sys(errno, "creating %s/%s", s->path, name);
        int rc = zr_io.fstat(fd, &st);
        int e = errno;
        zr_io.close(fd);
        if (rc != 0)
            return zr_err_sys(e, "stat %s/%s", s->path, name);
    } else if (zr_io.fstatat(s->dirfd, name, &st, 0) != 0) {
        if (errno == ENOENT)
            return zr_err(ZR_ECORRUPT, "%s/%s is missing", s->path, name);
        return zr_err_sys(errno, "stat %s/%s", s->path, name);
    }
    if (!S_ISREG(st.st_mode))
        return zr_err(ZR_ECORRUPT, "%s/%s is not a regular file", s->path, name);
    *size = (uint64_t)st.st_size;
    return 0;
}

int zr_ftable_add(zr_store *s, struct zr_ftable *t, uint32_t id, bool create)
{
    char name[32];
    snprintf(name, sizeof name, "%u.%s", id, t->suffix);
    uint64_t size = 0;
    int rc = file_size_at(s, name, create, &size);
    if (rc == 0)
        rc = zr_ftable_add_sized(t, id, size);
    if (rc == 0 && create)
        s->dir_dirty = true;
    return rc;
}

int zr_ftable_add_sized(struct zr_ftable *t, uint32_t id, uint64_t size)
{
    char name[32];
    snprintf(name, sizeof name, "%u.%s", id, t->suffix);
    if (id != atomic_load(&t->count))
        return zr_err(ZR_EINVAL, "%s: files must be added in order", name);
    if (id >= ZR_MAX_FILES)
        return zr_err(ZR_ENOSPC, "%s: the store has reached its file limit", name);
    struct zr_file *block = atomic_load(&t->blocks[id / ZR_DIR_BLOCK]);
    if (!block) {
        block = zr_calloc(ZR_DIR_BLOCK, sizeof *block);
        if (!block)
            return zr_err(ZR_ENOMEM, "%s", name);
        atomic_store_explicit(&t->blocks[id / ZR_DIR_BLOCK], block, memory_order_release);
    }
    struct zr_file *f = &block[id % ZR_DIR_BLOCK];
    atomic_init(&f->fd, -1);
    atomic_init(&f->state, 0);
    atomic_init(&f->map, NULL);
    atomic_init(&f->size, ZR_MIN(size, t->cap));
    f->wend = 0;
    atomic_store_explicit(&t->count, id + 1, memory_order_release);
    return 0;
}

/* ---- the cache ------------------------------------------------------- */

/* A free place in ring r: a new one, an empty one, or that of a holder
 * that evict gives up; NULL when every holder refuses (is pinned). */
static struct zr_slot *ring_take(zr_store *s, struct zr_ring *r,
                                 bool (*evict)(zr_store *, struct zr_slot *))
{
    if (r->fill < r->cap)
        return &r->slot[r->fill++];
    for (uint32_t k = 0; k < r->cap; k++) {
        struct zr_slot *sl = &r->slot[r->hand];
        r->hand = (r->hand + 1) % r->cap;
        if (!sl->t || evict(s, sl))
            return sl;
    }
    return NULL;
}

/* Give up one holder of ring r that evict accepts; false if none does. */
static bool ring_evict(zr_store *s, struct zr_ring *r, bool (*evict)(zr_store *, struct zr_slot *))
{
    for (uint32_t k = 0; k < r->fill; k++) {
        struct zr_slot *sl = &r->slot[r->hand];
        r->hand = (r->hand + 1) % r->fill;
        if (sl->t && evict(s, sl))
            return true;
    }
    return false;
}

/* Take files of t with ids from..to-1 out of ring r (their place empties). */
static void ring_drop(struct zr_ring *r, const struct zr_ftable *t, uint32_t from, uint32_t to)
{
    for (uint32_t k = 0; k < r->fill; k++)
        if (r->slot[k].t == t && r->slot[k].id >= from && r->slot[k].id < to)
            r->slot[k].t = NULL;
}

static bool ring_holds_any(const struct zr_ring *r)
{
    for (uint32_t k = 0; k < r->fill; k++)
        if (r->slot[k].t)
            return true;
    return false;
}

/* Close the descriptor held in place sl unless it is pinned. A written
 * one is fdatasynced first, and a failure kept for the next sync (R14). */
static bool fd_evict(zr_store *s, struct zr_slot *sl)
{
    struct zr_file *f = zr_ftable_at(sl->t, sl->id);
    int fd = atomic_exchange(&f->fd, -1);
    if ((atomic_load(&f->state) & ZR_PINS) != 0) {
        atomic_store(&f->fd, fd);
        return false;
    }
    if (atomic_load(&f->state) & ZR_DIRTY) {
        if (zr_io.fdatasync(fd) != 0) {
            int none = 0;
            atomic_compare_exchange_strong(&s->cache.sync_errno, &none, errno ? errno : EIO);
        }
        atomic_fetch_and(&f->state, ~ZR_DIRTY);
    }
    zr_io.close(fd);
    sl->t = NULL;
    return true;
}

static int open_error(zr_store *s, const struct zr_ftable *t, uint32_t id, int e)
{
    if (e == ENOENT)
        return zr_err(ZR_ECORRUPT, "%s/%u.%s is missing", s->path, id, t->suffix);
    if (e == EMFILE || e == ENFILE)
        return zr_err(ZR_ELIMIT, "%s/%u.%s: the process can open no more files (%s), and "
                      "none of the %u the store may hold is free",
                      s->path, id, t->suffix, e == EMFILE ? "RLIMIT_NOFILE" : "the system's limit",
                      s->cache.fds.cap);
    return zr_err_sys(e, "opening %s/%u.%s", s->path, id, t->suffix);
}

/* Open file id of t if it is not (lock held; the caller has pinned it),
 * giving up another descriptor when the ring is full. With wait, a call
 * that finds every descriptor pinned waits for one to be put back;
 * without, it returns ZR_FD_BUSY. */
static int fd_open_locked(zr_store *s, struct zr_ftable *t, uint32_t id, bool wait)
{
    struct zr_cache *c = &s->cache;
    struct zr_file *f = zr_ftable_at(t, id);
    int rc = 0;
    /* Every read of a remote store is a planned one (remote.c): what
     * reaches here asked for something only a local file has. */
    if (s->remote && !s->rcache)
        return zr_err(ZR_EINVAL, "%s/%u.%s: a store in an object store is read by ranges; "
                      "it has no file to open or map", s->path, id, t->suffix);
    if (wait)
        atomic_fetch_add(&c->waiting, 1);
    while (rc == 0 && atomic_load(&f->fd) < 0) {
        struct zr_slot *sl = ring_take(s, &c->fds, fd_evict);
        if (sl) {
            char name[32];
            snprintf(name, sizeof name, "%u.%s", id, t->suffix);
            int fd = s->rcache ? zr_rcache_dup(s, t, id)
                               : zr_io.openat(s->dirfd, name, s->writable ? O_RDWR : O_RDONLY, 0);
            if (fd >= 0) {
                *sl = (struct zr_slot){t, id};
                atomic_store(&f->fd, fd);
                break;
            }
            int e = errno;
            if (e != EMFILE && e != ENFILE) {
                rc = open_error(s, t, id, e);
                break;
            }
            /* The process is out of descriptors: give up one more of
             * ours and try again, or wait for one to be put back. */
            if (ring_evict(s, &c->fds, fd_evict))
                continue;
            if (!ring_holds_any(&c->fds)) {
                rc = open_error(s, t, id, e);
                break;
            }
        }
        if (!wait) {
            rc = ZR_FD_BUSY;
            break;
        }
        pthread_cond_wait(&c->unpinned, &c->lock);
    }
    if (wait)
        atomic_fetch_sub(&c->waiting, 1);
    return rc;
}

static void wake_waiters(struct zr_cache *c, bool locked)
{
    if (atomic_load(&c->waiting) == 0)
        return;
    if (!locked)
        pthread_mutex_lock(&c->lock);
    pthread_cond_broadcast(&c->unpinned);
    if (!locked)
        pthread_mutex_unlock(&c->lock);
}

int zr_file_fd(zr_store *s, struct zr_ftable *t, uint32_t id, int how, int *out)
{
    struct zr_file *f = zr_ftable_at(t, id);
    atomic_fetch_add(&f->state, 1);
    int fd = atomic_load(&f->fd);
    if (fd < 0) {
        pthread_mutex_lock(&s->cache.lock);
        int rc = fd_open_locked(s, t, id, !(how & ZR_FD_TRY));
        fd = atomic_load(&f->fd);
        pthread_mutex_unlock(&s->cache.lock);
        if (rc != 0) {
            zr_file_put(s, t, id);
            return rc;
        }
    }
    if ((how & ZR_FD_WRITE) && !(atomic_load(&f->state) & ZR_DIRTY))
        atomic_fetch_or(&f->state, ZR_DIRTY);
    *out = fd;
    return 0;
}

void zr_file_put(zr_store *s, struct zr_ftable *t, uint32_t id)
{
    atomic_fetch_sub(&zr_ftable_at(t, id)->state, 1);
    wake_waiters(&s->cache, false);
}

int zr_file_sync(zr_store *s, struct zr_ftable *t, uint32_t id)
{
    struct zr_file *f = zr_ftable_at(t, id);
    if (!(atomic_load(&f->state) & ZR_DIRTY))
        return 0;
    int fd;
    int rc = zr_file_fd(s, t, id, ZR_FD_READ, &fd);
    if (rc != 0)
        return rc;
    atomic_fetch_and(&f->state, ~ZR_DIRTY);
    if (zr_io.fdatasync(fd) != 0) {
        rc = zr_err_sys(errno, "syncing %s/%u.%s", s->path, id, t->suffix);
        atomic_fetch_or(&f->state, ZR_DIRTY);
    }
    zr_file_put(s, t, id);
    return rc;
}

int zr_tables_sync_error(zr_store *s)
{
    int e = atomic_exchange(&s->cache.sync_errno, 0);
    if (e == 0)
        return 0;
    return zr_err_sys(e, "syncing a file of %s before closing its descriptor", s->path);
}

unsigned zr_read_enter(zr_store *s)
{
    struct zr_cache *c = &s->cache;
    for (;;) {
        uint64_t e = atomic_load(&c->epoch);
        atomic_fetch_add(&c->readers[e & 1], 1);
        if (atomic_load(&c->epoch) == e)
            return (unsigned)(e & 1);
        atomic_fetch_sub(&c->readers[e & 1], 1);
    }
}

/* Unmap the retired mappings that no reader can hold any more, moving the
 * epoch on as far as the readers inside allow (lock held). */
static void reclaim(struct zr_cache *c)
{
    size_t n = atomic_load(&c->nretired);
    if (n == 0)
        return;
    for (int step = 0; step < 2; step++) {
        uint64_t e = atomic_load(&c->epoch);
        if (atomic_load(&c->readers[(e + 1) & 1]) != 0)
            break;
        atomic_store(&c->epoch, e + 1);
    }
    uint64_t e = atomic_load(&c->epoch);
    size_t left = 0;
    for (size_t k = 0; k < n; k++) {
        if (c->retired[k].epoch + 2 <= e)
            zr_io.munmap((void *)c->retired[k].map, c->retired[k].len);
        else
            c->retired[left++] = c->retired[k];
    }
    atomic_store(&c->nretired, left);
}

void zr_read_leave(zr_store *s, unsigned slot)
{
    struct zr_cache *c = &s->cache;
    atomic_fetch_sub(&c->readers[slot], 1);
    if (atomic_load_explicit(&c->nretired, memory_order_relaxed) != 0 &&
        pthread_mutex_trylock(&c->lock) == 0) {
        reclaim(c);
        pthread_mutex_unlock(&c->lock);
    }
}

/* Give up the mapping held in place sl: unpublish it and retire it until
 * the readers that may hold it have left. The caller made room in the
 * retired list. */
static bool map_evict(zr_store *s, struct zr_slot *sl)
{
    struct zr_cache *c = &s->cache;
    struct zr_file *f = zr_ftable_at(sl->t, sl->id);
    const uint8_t *map = atomic_exchange(&f->map, NULL);
    size_t n = atomic_load(&c->nretired);
    c->retired[n] = (struct zr_retired){map, sl->t->cap, atomic_load(&c->epoch)};
    atomic_store(&c->nretired, n + 1);
    sl->t = NULL;
    return true;
}

static int retire_room(zr_store *s)
{
    struct zr_cache *c = &s->cache;
    size_t n = atomic_load(&c->nretired);
    if (n < c->retired_cap)
        return 0;
    size_t cap = 2 * c->retired_cap;
    struct zr_retired *r = zr_realloc(c->retired, cap * sizeof *r);
    if (!r)
        return zr_err(ZR_ENOMEM, "%s: the list of mappings to unmap", s->path);
    c->retired = r;
    c->retired_cap = cap;
    return 0;
}

/* Map file id of t (lock held), through a pinned descriptor. The mapping
 * takes a place in the ring, giving up another, unless it is to be kept. */
static int map_locked(zr_store *s, struct zr_ftable *t, uint32_t id, bool kept,
                      const uint8_t **out)
{
    struct zr_cache *c = &s->cache;
    struct zr_file *f = zr_ftable_at(t, id);
    atomic_fetch_add(&f->state, 1);
    int rc = fd_open_locked(s, t, id, true);
    const uint8_t *map = atomic_load(&f->map);
    struct zr_slot *sl = NULL;
    reclaim(c);
    if (rc == 0 && !map && !kept && (rc = retire_room(s)) == 0)
        sl = ring_take(s, &c->maps, map_evict);
    if (rc == 0 && !map) {
        void *m = zr_io.mmap(NULL, t->cap, PROT_READ, MAP_SHARED, atomic_load(&f->fd), 0);
        if (m == MAP_FAILED && errno == ENOMEM) {
            rc = zr_err(ZR_ELIMIT, "%s/%u.%s: no address space or mapping is left to map it "
                        "(vm.max_map_count, RLIMIT_AS; the store holds %u and waits to unmap "
                        "%zu)", s->path, id, t->suffix, c->maps.cap, atomic_load(&c->nretired));
        } else if (m == MAP_FAILED) {
            rc = zr_err_sys(errno, "mapping %s/%u.%s", s->path, id, t->suffix);
        } else {
            if (atomic_load(&s->read_mode) == ZR_READ_MAPPED && atomic_load(&t->huge))
                (void)madvise(m, t->cap, MADV_HUGEPAGE);
            map = m;
            atomic_store_explicit(&f->map, map, memory_order_release);
            if (sl)
                *sl = (struct zr_slot){t, id};
        }
    }
    atomic_fetch_sub(&f->state, 1);
    wake_waiters(c, true);
    *out = map;
    return rc;
}

const uint8_t *zr_file_map_slow(zr_store *s, struct zr_ftable *t, uint32_t id)
{
    const uint8_t *map;
    pthread_mutex_lock(&s->cache.lock);
    int rc = map_locked(s, t, id, false, &map);
    pthread_mutex_unlock(&s->cache.lock);
    return rc == 0 ? map : NULL;
}

int zr_file_keep(zr_store *s, struct zr_ftable *t, uint32_t id, uint32_t what,
                 const uint8_t **map, int *fd)
{
    struct zr_cache *c = &s->cache;
    struct zr_file *f = zr_ftable_at(t, id);
    int rc = 0;
    if ((atomic_load(&f->state) & what) != what) {
        pthread_mutex_lock(&c->lock);
        if (what & ZR_KEEP_FD) {
            atomic_fetch_add(&f->state, 1);
            rc = fd_open_locked(s, t, id, true);
            if (rc == 0)
                ring_drop(&c->fds, t, id, id + 1);
            if (rc == 0)
                atomic_fetch_or(&f->state, ZR_KEEP_FD);
            atomic_fetch_sub(&f->state, 1);
            wake_waiters(c, true);
        }
        if (rc == 0 && (what & ZR_KEEP_MAP)) {
            const uint8_t *m = atomic_load(&f->map);
            if (m)
                ring_drop(&c->maps, t, id, id + 1);
            else if (!m)
                rc = map_locked(s, t, id, true, &m);
            if (rc == 0)
                atomic_fetch_or(&f->state, ZR_KEEP_MAP);
        }
        pthread_mutex_unlock(&c->lock);
    }
    if (map)
        *map = atomic_load(&f->map);
    if (fd)
        *fd = atomic_load(&f->fd);
    return rc;
}

int zr_frontier_settle(zr_store *s, uint32_t *chunk, uint64_t *offset)
{
    if (*offset < s->chunk_cap)
        return 0;
    uint32_t next = *chunk + 1;
    if (next >= atomic_load(&s->chunks.count)) {
        int rc = zr_ftable_add(s, &s->chunks, next, true);
        if (rc != 0)
            return rc;
    }
    *chunk = next;
    *offset = 0;
    return 0;
}

uint64_t zr_table_bytes(const struct zr_ftable *t, uint32_t n)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += atomic_load_explicit(&zr_ftable_at(t, i)->size, memory_order_relaxed);
    return total;
}

/* Whether the table's files (the first n) ask for huge pages while they
 * are in memory: when they fit in a quarter of the memory the process may
 * use (zr_memory_limit). A copy out of a
 * mapping touches each of its pages through the TLB, which the kernel
 * empties on every system call where page-table isolation is on, and
 * 2 MiB pages take 512 times fewer misses than 4 KiB ones
 * (doc/performance.md). Pages already in the page cache keep the size
 * they were written or read with. */
static bool table_wants_huge_pages(const struct zr_ftable *t, uint32_t n)
{
    uint64_t memory = zr_memory_limit();
    return memory != UINT64_MAX && zr_table_bytes(t, n) <= memory / 4;
}

/* A file counts as in memory when at most this share of its pages
 * (1 / RESIDENT_SLACK) is not. */
#define RESIDENT_SLACK 100

/* Tables of more files than this have a sample of this many looked at:
 * the answer steers a heuristic, and a call a file costs tens of
 * microseconds plus, past the cache's bounds, an open. */
#define RESIDENT_SAMPLE 64

int zr_tables_resident(zr_store *s)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        page = 4096;
    /* A Dense raw store whose records all lie where appends laid them
     * out is read without its record table, which may leave memory. */
    bool entries = atomic_load(&s->laid_out) < atomic_load(&s->length);
    struct zr_ftable *tables[] = {&s->chunks, &s->segs};
    for (int k = 0; k < (entries ? 2 : 1); k++) {
        struct zr_ftable *t = tables[k];
        uint32_t n = atomic_load_explicit(&t->count, memory_order_acquire);
        uint32_t looks = n <= s->cache.fds.cap ? n : RESIDENT_SAMPLE;
        for (uint32_t j = 0; j < looks; j++) {
            uint32_t i = (uint32_t)((uint64_t)j * n / looks);
            const struct zr_file *f = zr_ftable_at(t, i);
            uint64_t size = atomic_load_explicit(&f->size, memory_order_relaxed);
            uint64_t pages = (size + (uint64_t)page - 1) / (uint64_t)page;
            struct zr_cachestat cs;
            int fd;
            if (zr_file_fd(s, t, i, ZR_FD_READ, &fd) != 0)
                return -1;
            int rc = zr_cachestat(fd, 0, 0, &cs);
            zr_file_put(s, t, i);
            if (rc != 0)
                return -1;
            if (cs.nr_cache < pages - pages / RESIDENT_SLACK)
                return 0;
        }
    }
    return 1;
}

/* Huge pages pay only while the pages are in memory: MADV_HUGEPAGE makes
 * the kernel read a missing page 2 MiB at a time, which a store read at
 * random from the disk pays on nearly every record. Advice only: a kernel
 * without transparent huge pages refuses it, and the mappings work as
 * they are. The mode changes under the cache's lock, and mappings made
 * later take the table's choice (map_locked), so that the advice never
 * lags the mode. */
void zr_tables_set_mode(zr_store *s, int mode)
{
    pthread_mutex_lock(&s->cache.lock);
    int was = atomic_exchange(&s->read_mode, mode);
    if (was != mode && (was == ZR_READ_MAPPED || mode == ZR_READ_MAPPED)) {
        bool resident = mode == ZR_READ_MAPPED;
        struct zr_ftable *tables[] = {&s->chunks, &s->segs};
        for (int k = 0; k < 2; k++) {
            struct zr_ftable *t = tables[k];
            uint32_t n = atomic_load_explicit(&t->count, memory_order_acquire);
            bool huge = resident && table_wants_huge_pages(t, n);
            atomic_store(&t->huge, huge);
            for (uint32_t i = 0; i < n; i++) {
                const uint8_t *map = atomic_load(&zr_ftable_at(t, i)->map);
                if (map)
                    (void)madvise((void *)map, t->cap, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
            }
        }
    }
    pthread_mutex_unlock(&s->cache.lock);
}

void zr_ftable_truncate(zr_store *s, struct zr_ftable *t, uint32_t count)
{
    uint32_t n = atomic_load(&t->count);
    if (count >= n)
        return;
    pthread_mutex_lock(&s->cache.lock);
    atomic_store_explicit(&t->count, count, memory_order_release);
    ring_drop(&s->cache.fds, t, count, n);
    ring_drop(&s->cache.maps, t, count, n);
    ftable_close(t, count, n);
    pthread_mutex_unlock(&s->cache.lock);
}

int zr_loc_error(const zr_store *s, uint64_t index, const char *why)
{
    return zr_err(ZR_ECORRUPT, "%s/%llu.loc entry %llu (record %llu): %s", s->path,
                  (unsigned long long)(index >> s->seg_shift),
                  (unsigned long long)(index & (((uint64_t)1 << s->seg_shift) - 1)),
                  (unsigned long long)index, why);
}

int zr_loc_place(const zr_store *s, uint64_t i, uint32_t *seg, uint64_t *off)
{
    uint32_t g = (uint32_t)(i >> s->seg_shift);
    uint64_t at = (i & (((uint64_t)1 << s->seg_shift) - 1)) * ZR_LOC_SIZE;
    uint32_t nsegs = atomic_load_explicit(&s->segs.count, memory_order_acquire);
    if (g >= nsegs || at + ZR_LOC_SIZE > atomic_load_explicit(&zr_ftable_at(&s->segs, g)->size,
                                                              memory_order_acquire))
        return zr_loc_error(s, i, "entry is out of bounds or inconsistent");
    *seg = g;
    *off = at;
    return 0;
}

bool zr_loc_fits(const zr_store *s, const struct zr_loc *l, uint32_t nchunks)
{
    if (l->chunk_id >= nchunks)
        return false;
    const struct zr_file *ch = zr_ftable_at(&s->chunks, l->chunk_id);
    if ((uint64_t)l->offset + l->phys_length > atomic_load_explicit(&ch->size, memory_order_acquire))
        return false;
    if (l->phys_length == 0 || l->logic_length == 0 || l->logic_length > ZR_MAX_RECORD)
        return false;
    if (s->codec == ZR_CODEC_RAW && l->phys_length != l->logic_length)
        return false;
    if (s->width && l->logic_length != s->width)
        return false;
    return true;
}

int zr_loc_get(zr_store *s, uint64_t index, struct zr_loc *loc)
{
    uint32_t g = (uint32_t)(index >> s->seg_shift);
    uint64_t off = (index & (((uint64_t)1 << s->seg_shift) - 1)) * ZR_LOC_SIZE;
    if (g >= atomic_load_explicit(&s->segs.count, memory_order_acquire))
        return ZR_ECORRUPT;
    const struct zr_file *seg = zr_ftable_at(&s->segs, g);
    if (off + ZR_LOC_SIZE > atomic_load_explicit(&seg->size, memory_order_acquire))
        return ZR_ECORRUPT;
    /* A remote store's entries come through its cache files only where
     * the cache holds them: elsewhere they are holes. */
    if (__builtin_expect(s->remote != NULL, 0) && !zr_rcache_has_entry(s, index))
        return zr_err(ZR_EINVAL, "%s: the entry of record %llu is read by ranges (planned reads), "
                      "not through a mapping", s->path, (unsigned long long)index);
    const uint8_t *map = zr_file_map(s, &s->segs, g);
    if (!map)
        return zr_last_error_code();
    zr_loc_decode(map + off, loc);
    uint32_t nchunks = atomic_load_explicit(&s->chunks.count, memory_order_acquire);
    return zr_loc_fits(s, loc, nchunks) ? 0 : ZR_ECORRUPT;
}

int zr_loc_read(zr_store *s, uint64_t index, struct zr_loc *loc)
{
    int rc = zr_loc_get(s, index, loc);
    if (rc == ZR_ECORRUPT)
        return zr_loc_error(s, index, "entry is out of bounds or inconsistent");
    return rc;
}

int zr_check_indices(zr_store *s, const uint64_t *idx, size_t n, uint64_t *length)
{
    uint64_t len = atomic_load_explicit(&s->length, memory_order_acquire);
    for (size_t k = 0; k < n; k++)
        if (idx[k] >= len)
            return zr_err(ZR_ERANGE, "%s: index %llu (position %zu) is out of range for %llu records",
                          s->path, (unsigned long long)idx[k], k, (unsigned long long)len);
    *length = len;
    return 0;
}

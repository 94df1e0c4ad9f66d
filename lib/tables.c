/*
 * tables.c: the files of a handle. A store's record bytes live in chunk
 * files and its record table in loc segments; this file owns their
 * geometry, the two tables of open files (added in order, never moved,
 * so gathers index them without a lock while an append adds files), the
 * policy for mapping them, and the checked reading of table entries.
 *
 * Rules enforced here (numbered as in doc/format.md):
 *  R5. Every table entry is checked against the files before the bytes it
 *      names are touched (zr_loc_get, zr_loc_fits), so a damaged entry is
 *      reported, and the read-only mappings are never read past a file's
 *      end.
 *  R7. A frontier at the very end of a chunk is written as offset 0 of
 *      the next chunk (zr_frontier_settle).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "engine.h"
#include "io.h"

static void ftable_init(struct zr_ftable *t, uint64_t cap, const char *suffix)
{
    for (int i = 0; i < ZR_DIR_SLOTS; i++)
        atomic_init(&t->blocks[i], NULL);
    atomic_init(&t->count, 0);
    atomic_init(&t->mapped, 0);
    t->cap = cap;
    t->suffix = suffix;
}

static void ftable_free(struct zr_ftable *t)
{
    uint32_t n = atomic_load(&t->count);
    for (uint32_t i = 0; i < n; i++) {
        struct zr_file *f = zr_ftable_at(t, i);
        if (f->map)
            zr_io.munmap((void *)f->map, t->cap);
        if (f->fd >= 0)
            zr_io.close(f->fd);
    }
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

void zr_tables_init(zr_store *s)
{
    s->chunk_cap = g_chunk_cap;
    s->seg_shift = (uint32_t)__builtin_ctzll(g_seg_entries);
    ftable_init(&s->chunks, s->chunk_cap, "chunk");
    ftable_init(&s->segs, (uint64_t)ZR_LOC_SIZE << s->seg_shift, "loc");
}

void zr_tables_free(zr_store *s)
{
    ftable_free(&s->chunks);
    ftable_free(&s->segs);
}

int zr_ftable_add(zr_store *s, struct zr_ftable *t, uint32_t id, bool create)
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
    int flags = s->writable ? O_RDWR : O_RDONLY;
    if (create)
        flags |= O_CREAT;
    int fd = zr_io.openat(s->dirfd, name, flags, 0644);
    if (fd < 0) {
        if (errno == ENOENT)
            return zr_err(ZR_ECORRUPT, "%s/%s is missing", s->path, name);
        return zr_err_sys(errno, "opening %s/%s", s->path, name);
    }
    uint64_t size;
    int rc = zr_file_size(fd, &size, name);
    if (rc != 0) {
        zr_io.close(fd);
        return rc;
    }
    f->fd = fd;
    f->map = NULL;
    f->wend = 0;
    atomic_store_explicit(&f->size, ZR_MIN(size, t->cap), memory_order_relaxed);
    if (create)
        s->dir_dirty = true;
    atomic_store_explicit(&t->count, id + 1, memory_order_release);
    return 0;
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

/* Whether the table's files (the first n) ask for huge pages while they
 * are in memory: when they fit in a quarter of the RAM. A copy out of a
 * mapping touches each of its pages through the TLB, which the kernel
 * empties on every system call where page-table isolation is on, and
 * 2 MiB pages take 512 times fewer misses than 4 KiB ones
 * (doc/performance.md). Pages already in the page cache keep the size
 * they were written or read with. */
static bool table_wants_huge_pages(const struct zr_ftable *t, uint32_t n)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return false;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += atomic_load_explicit(&zr_ftable_at(t, i)->size, memory_order_relaxed);
    return total <= (uint64_t)pages / 4 * (uint64_t)page;
}

static int map_table(zr_store *s, struct zr_ftable *t)
{
    uint32_t n = atomic_load_explicit(&t->count, memory_order_acquire);
    for (uint32_t i = atomic_load(&t->mapped); i < n; i++) {
        struct zr_file *f = zr_ftable_at(t, i);
        void *map = zr_io.mmap(NULL, t->cap, PROT_READ, MAP_SHARED, f->fd, 0);
        if (map == MAP_FAILED)
            return zr_err_sys(errno, "mapping %s/%u.%s", s->path, i, t->suffix);
        if (atomic_load(&s->read_mode) == ZR_READ_MAPPED && table_wants_huge_pages(t, n))
            (void)madvise(map, t->cap, MADV_HUGEPAGE);
        f->map = map;
        atomic_store_explicit(&t->mapped, i + 1, memory_order_release);
    }
    return 0;
}

/* cachestat(2), Linux 6.5: how many pages of a file range are cached. C
 * libraries older than the call lack its number and structures. */
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif
struct zr_cachestat_range {
    uint64_t off, len;
};
struct zr_cachestat {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* A file counts as in memory when at most this share of its pages
 * (1 / RESIDENT_SLACK) is not. */
#define RESIDENT_SLACK 100

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
        for (uint32_t i = 0; i < n; i++) {
            const struct zr_file *f = zr_ftable_at(t, i);
            uint64_t size = atomic_load_explicit(&f->size, memory_order_relaxed);
            uint64_t pages = (size + (uint64_t)page - 1) / (uint64_t)page;
            struct zr_cachestat_range r = {0, 0};
            struct zr_cachestat cs;
            if (syscall(SYS_cachestat, f->fd, &r, &cs, 0) != 0)
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
 * they are. The mode changes under map_lock, which map_table holds while
 * it advises new mappings by the mode. */
void zr_tables_set_mode(zr_store *s, int mode)
{
    pthread_mutex_lock(&s->map_lock);
    int was = atomic_exchange(&s->read_mode, mode);
    if (was != mode && (was == ZR_READ_MAPPED || mode == ZR_READ_MAPPED)) {
        bool resident = mode == ZR_READ_MAPPED;
        struct zr_ftable *tables[] = {&s->chunks, &s->segs};
        for (int k = 0; k < 2; k++) {
            struct zr_ftable *t = tables[k];
            uint32_t n = atomic_load_explicit(&t->mapped, memory_order_acquire);
            bool huge = resident && table_wants_huge_pages(t, n);
            for (uint32_t i = 0; i < n; i++)
                (void)madvise((void *)zr_ftable_at(t, i)->map, t->cap,
                              huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
        }
    }
    pthread_mutex_unlock(&s->map_lock);
}

int zr_ensure_mapped(zr_store *s)
{
    if (atomic_load_explicit(&s->chunks.mapped, memory_order_acquire) ==
            atomic_load_explicit(&s->chunks.count, memory_order_acquire) &&
        atomic_load_explicit(&s->segs.mapped, memory_order_acquire) ==
            atomic_load_explicit(&s->segs.count, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&s->map_lock);
    int rc = map_table(s, &s->chunks);
    if (rc == 0)
        rc = map_table(s, &s->segs);
    pthread_mutex_unlock(&s->map_lock);
    return rc;
}

void zr_ftable_truncate(struct zr_ftable *t, uint32_t count)
{
    uint32_t n = atomic_load(&t->count);
    if (count >= n)
        return;
    atomic_store_explicit(&t->count, count, memory_order_release);
    if (atomic_load(&t->mapped) > count)
        atomic_store_explicit(&t->mapped, count, memory_order_release);
    for (uint32_t i = count; i < n; i++) {
        struct zr_file *f = zr_ftable_at(t, i);
        if (f->map)
            zr_io.munmap((void *)f->map, t->cap);
        if (f->fd >= 0)
            zr_io.close(f->fd);
        f->map = NULL;
        f->fd = -1;
    }
}

int zr_loc_error(const zr_store *s, uint64_t index, const char *why)
{
    return zr_err(ZR_ECORRUPT, "%s/%llu.loc entry %llu (record %llu): %s", s->path,
                  (unsigned long long)(index >> s->seg_shift),
                  (unsigned long long)(index & (((uint64_t)1 << s->seg_shift) - 1)),
                  (unsigned long long)index, why);
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

int zr_loc_get(const zr_store *s, uint64_t index, struct zr_loc *loc)
{
    uint32_t g = (uint32_t)(index >> s->seg_shift);
    uint64_t off = (index & (((uint64_t)1 << s->seg_shift) - 1)) * ZR_LOC_SIZE;
    if (g >= atomic_load_explicit(&s->segs.mapped, memory_order_acquire))
        return ZR_ECORRUPT;
    const struct zr_file *seg = zr_ftable_at(&s->segs, g);
    if (off + ZR_LOC_SIZE > atomic_load_explicit(&seg->size, memory_order_acquire))
        return ZR_ECORRUPT;
    zr_loc_decode(seg->map + off, loc);
    uint32_t mapped = atomic_load_explicit(&s->chunks.mapped, memory_order_acquire);
    return zr_loc_fits(s, loc, mapped) ? 0 : ZR_ECORRUPT;
}

int zr_check_indices(zr_store *s, const uint64_t *idx, size_t n, uint64_t *length)
{
    uint64_t len = atomic_load_explicit(&s->length, memory_order_acquire);
    /* Every file an entry below len names was added before len was
     * published, so mapping now covers them all. */
    int rc = zr_ensure_mapped(s);
    if (rc != 0)
        return rc;
    for (size_t k = 0; k < n; k++)
        if (idx[k] >= len)
            return zr_err(ZR_ERANGE, "%s: index %llu (position %zu) is out of range for %llu records",
                          s->path, (unsigned long long)idx[k], k, (unsigned long long)len);
    *length = len;
    return 0;
}

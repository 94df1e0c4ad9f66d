/*
 * engine.c: the life of a store handle: create, open, sync, close, the
 * identity accessors, and the tables of chunk files and record-table
 * segments.
 *
 * Rules enforced here (numbered as in doc/format.md):
 *  R1. store.zr is written last at creation, after meta.zr, 0.loc,
 *      0.chunk and any dict.zr are durable; a folder without it is not a
 *      store. store.zr never changes afterwards.
 *  R2. A read-write handle holds an exclusive flock on meta.zr for its
 *      life, a read-only handle a shared one; a conflict fails at once.
 *      One process at a time writes through a handle (zr_engine_writer).
 *  R3. Chunks 0..tail_chunk exist; the loc segments cover entries
 *      0..length-1. A store that breaks either does not open.
 *  R4. A zstd_dict store has a non-empty dict.zr that zstd accepts; any
 *      other store has none.
 *  R5. Every table entry is checked against the files before the bytes it
 *      names are touched (zr_loc_get), so a damaged entry is reported, and
 *      the read-only mappings are never read past a file's end.
 *  R15. Records a header counts past the end of the files are appends a
 *      power cut lost: a writer opens with the longest prefix the files
 *      hold and makes that durable; a reader refuses them on read.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "codec.h"
#include "engine.h"
#include "intent.h"
#include "io.h"
#include "pool.h"

static uint64_t g_chunk_cap = ZR_CHUNK_CAPACITY;
static uint64_t g_seg_entries = ZR_SEGMENT_ENTRIES;

void zr_testing_set_geometry(uint64_t chunk_capacity, uint64_t segment_entries)
{
    g_chunk_cap = chunk_capacity ? chunk_capacity : ZR_CHUNK_CAPACITY;
    g_seg_entries = segment_entries ? segment_entries : ZR_SEGMENT_ENTRIES;
}

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

static zr_store *store_alloc(const char *path, bool writable)
{
    zr_store *s = zr_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->path = zr_strdup(path);
    if (!s->path) {
        zr_free(s);
        return NULL;
    }
    s->dirfd = -1;
    s->metafd = -1;
    s->writable = writable;
    s->owner = getpid();
    s->chunk_cap = g_chunk_cap;
    s->seg_shift = (uint32_t)__builtin_ctzll(g_seg_entries);
    ftable_init(&s->chunks, s->chunk_cap, "chunk");
    ftable_init(&s->segs, (uint64_t)ZR_LOC_SIZE << s->seg_shift, "loc");
    atomic_init(&s->length, 0);
    pthread_mutex_init(&s->append_lock, NULL);
    pthread_mutex_init(&s->frontier_lock, NULL);
    pthread_mutex_init(&s->map_lock, NULL);
    pthread_mutex_init(&s->canon_lock, NULL);
    return s;
}

ZR_API void zr_close(zr_store *s)
{
    if (!s)
        return;
    ftable_free(&s->chunks);
    ftable_free(&s->segs);
    ZSTD_freeDDict(s->ddict);
    ZSTD_freeCDict(s->cdict);
    zr_free(s->dict);
    if (s->metafd >= 0)
        zr_io.close(s->metafd); /* releases the flock */
    if (s->dirfd >= 0)
        zr_io.close(s->dirfd);
    pthread_mutex_destroy(&s->append_lock);
    pthread_mutex_destroy(&s->frontier_lock);
    pthread_mutex_destroy(&s->map_lock);
    pthread_mutex_destroy(&s->canon_lock);
    zr_free(s->path);
    zr_free(s);
}

/* Take the handle's lock on meta.zr: shared or exclusive, never waiting. */
static int take_lock(zr_store *s)
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

static int load_dict(zr_store *s)
{
    void *buf;
    size_t len;
    int rc = zr_read_small_file(s->dirfd, ZR_DICT_FILE, ZR_DICT_MAX, &buf, &len, 1);
    if (rc != 0)
        return rc;
    if (s->codec != ZR_CODEC_ZSTD_DICT) {
        zr_free(buf);
        if (buf)
            return zr_err(ZR_ECORRUPT, "%s: dict.zr present in a %s store", s->path,
                          zr_codec_name(s->codec));
        return 0;
    }
    if (!buf)
        return zr_err(ZR_ECORRUPT, "%s: dict.zr is missing from a zstd_dict store", s->path);
    if (len == 0) {
        zr_free(buf);
        return zr_err(ZR_ECORRUPT, "%s: dict.zr is empty", s->path);
    }
    s->dict = buf;
    s->dict_len = len;
    s->ddict = ZSTD_createDDict_byReference(s->dict, s->dict_len);
    if (!s->ddict)
        return zr_err(ZR_ECORRUPT, "%s: dict.zr is not a usable zstd dictionary", s->path);
    return 0;
}

/* A Dense store's record width, from its identity, and how many records
 * a chunk holds in the layout appends give them (0 when none fits: a
 * corrupt store or a wrong test geometry). */
static void set_width(zr_store *s)
{
    if (s->id.kind != ZR_DENSE)
        return;
    s->width = s->id.itemsize;
    for (uint32_t i = 0; i < s->id.ndim; i++)
        s->width *= s->id.shape[i];
    s->canon_per = s->width && s->width <= s->chunk_cap ? s->chunk_cap / s->width : 0;
}

static int open_dir(zr_store *s, const char *path)
{
    s->dirfd = zr_io.openat(AT_FDCWD, path, O_RDONLY | O_DIRECTORY, 0);
    if (s->dirfd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return zr_err(ZR_ENOTSTORE, "%s is not a store folder", path);
        return zr_err_sys(errno, "opening %s", path);
    }
    return 0;
}

/* Whether file id of a table is in the store folder. */
static bool file_exists(const zr_store *s, const struct zr_ftable *t, uint32_t id)
{
    char name[32];
    struct stat st;
    snprintf(name, sizeof name, "%u.%s", id, t->suffix);
    return zr_io.fstatat(s->dirfd, name, &st, 0) == 0;
}

/* Whether entry l is sound and names bytes inside the first nchunks chunk
 * files: the checks zr_loc_get makes on every read (R5). */
static bool loc_fits(const zr_store *s, const struct zr_loc *l, uint32_t nchunks)
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

/* Open the chunk files 0..tail_chunk and the loc segments that cover the
 * header's length, as far as they exist. *covered receives how many
 * entries from 0 on the segments hold. A missing file other than
 * 0.chunk and 0.loc ends its table; whether that is allowed is decided by
 * the caller (R15). */
static int open_files(zr_store *s, uint64_t *covered)
{
    int rc;
    uint64_t per_seg = (uint64_t)1 << s->seg_shift;
    for (uint32_t c = 0; c <= s->hdr.tail_chunk; c++) {
        if (c > 0 && !file_exists(s, &s->chunks, c))
            break;
        if ((rc = zr_ftable_add(s, &s->chunks, c, false)) != 0)
            return rc;
    }
    uint64_t nseg = (s->hdr.length + per_seg - 1) >> s->seg_shift;
    /* A writer always has segment 0 open, even for an empty store. */
    if (s->writable && nseg == 0)
        nseg = 1;
    *covered = 0;
    for (uint64_t g = 0; g < nseg; g++) {
        if (g > 0 && !file_exists(s, &s->segs, (uint32_t)g))
            break;
        if ((rc = zr_ftable_add(s, &s->segs, (uint32_t)g, s->writable && g == 0)) != 0)
            return rc;
        uint64_t have = atomic_load(&zr_ftable_at(&s->segs, (uint32_t)g)->size) / ZR_LOC_SIZE;
        *covered = g * per_seg + ZR_MIN(have, per_seg);
        if (have < per_seg)
            break;
    }
    return 0;
}

/* Whether a file N.suffix with first <= N <= last is in the store folder.
 * The folder is listed once: a damaged header can name a range of up to
 * 2^20 files. */
static int any_file_in(const zr_store *s, const char *suffix, uint64_t first, uint64_t last,
                       bool *found)
{
    *found = false;
    if (first > last)
        return 0;
    int fd = zr_io.openat(s->dirfd, ".", O_RDONLY | O_DIRECTORY, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        int e = errno;
        if (fd >= 0)
            zr_io.close(fd);
        return zr_err_sys(e, "listing %s", s->path);
    }
    struct dirent *e;
    while (!*found && (e = readdir(d)) != NULL) {
        char *end;
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        unsigned long long id = strtoull(e->d_name, &end, 10);
        *found = *end == '.' && strcmp(end + 1, suffix) == 0 && id >= first && id <= last;
    }
    closedir(d);
    return 0;
}

/* R15. A power cut can leave the header of an append that was never
 * synced on disk without its table entries or record bytes: the files
 * then end before records the header counts. Those records are the lost
 * tail of the appends since the last sync (everything a completed sync
 * covers is on disk, and unsynced appends are laid out in index order).
 * A writer opens the store without them: the length becomes the largest
 * n for which record n-1 is held by the segments and lies inside the
 * chunk files, the frontier moves back to the end of the last chunk file
 * present, and that header is made durable before anything else, so that
 * later appends, which fill the gap the lost records leave, can never
 * bring their entries back. A reader changes nothing: it counts the
 * records the header counts that have an entry, and those whose bytes are
 * missing fail their reads with ZR_ECORRUPT (R5) and are listed by
 * zr_verify. Files that end
 * early in any other way (no record lost, or a missing file with a later
 * one present) are damage and refuse to open, as before. */
/* The length of the longest prefix of records 0..covered-1 whose
 * entries are sound and name bytes inside the chunk files (R15). The
 * segments are read in blocks through their descriptors (nothing is
 * mapped yet). Records are not laid out in index order inside a batch
 * (compressed groups take offsets as they finish), so the scan starts
 * at record 0. */
static int longest_prefix(zr_store *s, uint64_t covered, uint64_t *out)
{
    enum { BLOCK = 4096 };
    uint8_t *buf = zr_malloc(BLOCK * ZR_LOC_SIZE);
    if (!buf)
        return zr_err(ZR_ENOMEM, "reading the record table of %s", s->path);
    uint32_t nchunks = atomic_load(&s->chunks.count);
    uint64_t per_seg = (uint64_t)1 << s->seg_shift;
    uint64_t i = 0;
    int rc = 0;
    *out = covered;
    while (rc == 0 && i < covered) {
        uint32_t g = (uint32_t)(i >> s->seg_shift);
        uint64_t in_seg = i & (per_seg - 1);
        uint64_t run = ZR_MIN(ZR_MIN((uint64_t)BLOCK, covered - i), per_seg - in_seg);
        char name[32];
        snprintf(name, sizeof name, "%u.loc", g);
        rc = zr_read_exact(zr_ftable_at(&s->segs, g)->fd, buf, run * ZR_LOC_SIZE,
                           in_seg * ZR_LOC_SIZE, name);
        for (uint64_t k = 0; rc == 0 && k < run; k++) {
            struct zr_loc l;
            zr_loc_decode(buf + k * ZR_LOC_SIZE, &l);
            if (!loc_fits(s, &l, nchunks)) {
                *out = i + k;
                i = covered;
                break;
            }
        }
        i += run;
    }
    zr_free(buf);
    return rc;
}

/* Create the empty tail chunk a full chunk hands the frontier to, when a
 * power cut took it (R7, R15), and make its name durable. */
static int recreate_tail(zr_store *s)
{
    int rc = zr_ftable_add(s, &s->chunks, s->hdr.tail_chunk, true);
    if (rc == 0 && zr_io.fsync(s->dirfd) != 0)
        rc = zr_err_sys(errno, "syncing folder %s", s->path);
    s->dir_dirty = false;
    return rc;
}

static int cut_lost_tail(zr_store *s, uint64_t covered)
{
    uint32_t nchunks = atomic_load(&s->chunks.count);
    uint64_t n = s->hdr.length;
    /* Only a store whose files end before the header says can have lost
     * records; any other store opens without a scan. */
    if (nchunks <= s->hdr.tail_chunk || covered < s->hdr.length ||
        atomic_load(&zr_ftable_at(&s->chunks, s->hdr.tail_chunk)->size) < s->hdr.tail_offset) {
        int rc = longest_prefix(s, ZR_MIN(s->hdr.length, covered), &n);
        if (rc != 0)
            return rc;
    }
    if (n == s->hdr.length) {
        /* Nothing lost: the files must match the header exactly (R3),
         * except that the empty chunk a full one hands the frontier to
         * (R7) may have been lost with the folder's last sync. */
        if (nchunks == s->hdr.tail_chunk && s->hdr.tail_offset == 0 &&
            atomic_load(&zr_ftable_at(&s->chunks, nchunks - 1)->size) == s->chunk_cap)
            return s->writable ? recreate_tail(s) : 0;
        if (nchunks <= s->hdr.tail_chunk)
            return zr_err(ZR_ECORRUPT, "%s/%u.chunk is missing", s->path, nchunks);
        struct zr_file *tail = zr_ftable_at(&s->chunks, s->hdr.tail_chunk);
        if (s->writable && atomic_load(&tail->size) < s->hdr.tail_offset)
            return zr_err(ZR_ECORRUPT, "%s/%u.chunk is shorter than the header's frontier %u",
                          s->path, s->hdr.tail_chunk, s->hdr.tail_offset);
        return 0;
    }
    /* Records were lost; the files that end early must be the last ones. */
    bool later;
    int rc = any_file_in(s, "chunk", (uint64_t)nchunks + 1, s->hdr.tail_chunk, &later);
    if (rc != 0)
        return rc;
    if (later)
        return zr_err(ZR_ECORRUPT, "%s/%u.chunk is missing", s->path, nchunks);
    uint64_t last_seg = (s->hdr.length - 1) >> s->seg_shift;
    if (covered < s->hdr.length &&
        (rc = any_file_in(s, "loc", (covered >> s->seg_shift) + 1, last_seg, &later)) != 0)
        return rc;
    if (covered < s->hdr.length && later)
        return zr_err(ZR_ECORRUPT, "%s/%llu.loc is missing or short", s->path,
                      (unsigned long long)(covered >> s->seg_shift));
    struct zr_file *last = zr_ftable_at(&s->chunks, nchunks - 1);
    uint64_t end = atomic_load(&last->size);
    if (nchunks - 1 == s->hdr.tail_chunk)
        end = ZR_MIN(end, s->hdr.tail_offset);
    if (!s->writable) {
        /* A record without an entry cannot be read at all: a reader counts
         * only those the segments hold. */
        s->hdr.length = ZR_MIN(s->hdr.length, covered);
        return 0;
    }
    uint32_t tail = nchunks - 1;
    if ((rc = zr_frontier_settle(s, &tail, &end)) != 0)
        return rc;
    if (s->dir_dirty && zr_io.fsync(s->dirfd) != 0)
        return zr_err_sys(errno, "syncing folder %s", s->path);
    s->dir_dirty = false;
    s->hdr.length = n;
    s->hdr.tail_chunk = tail;
    s->hdr.tail_offset = (uint32_t)end;
    uint8_t raw[ZR_HEADER_SIZE];
    zr_header_encode(&s->hdr, raw);
    rc = zr_write_all(s->metafd, raw, sizeof raw, 0, "meta.zr");
    if (rc == 0 && zr_io.fdatasync(s->metafd) != 0)
        rc = zr_err_sys(errno, "syncing %s/meta.zr", s->path);
    return rc;
}

/* Open the store's files and check them against the header (R3, R4, R15). */
static int load_tables(zr_store *s)
{
    uint8_t raw[ZR_HEADER_SIZE];
    uint64_t size;
    int rc = zr_file_size(s->metafd, &size, "meta.zr");
    if (rc != 0)
        return rc;
    if (size != ZR_HEADER_SIZE)
        return zr_err(ZR_ECORRUPT, "%s/meta.zr is %llu bytes, not %d", s->path,
                      (unsigned long long)size, ZR_HEADER_SIZE);
    if ((rc = zr_read_exact(s->metafd, raw, sizeof raw, 0, "meta.zr")) != 0)
        return rc;
    if ((rc = zr_header_decode(raw, &s->hdr)) != 0)
        return rc;
    s->codec = s->hdr.codec;
    if ((rc = load_dict(s)) != 0)
        return rc;
    if (s->hdr.tail_offset > s->chunk_cap)
        return zr_err(ZR_ECORRUPT, "%s/meta.zr: tail offset %u exceeds the chunk capacity",
                      s->path, s->hdr.tail_offset);
    if ((uint64_t)s->hdr.tail_chunk >= ZR_MAX_FILES)
        return zr_err(ZR_ECORRUPT, "%s/meta.zr: tail chunk %u is out of range", s->path,
                      s->hdr.tail_chunk);
    uint64_t per_seg = (uint64_t)1 << s->seg_shift;
    if (s->hdr.length > ZR_MAX_FILES * per_seg)
        return zr_err(ZR_ECORRUPT, "%s/meta.zr: length %llu is out of range", s->path,
                      (unsigned long long)s->hdr.length);
    uint64_t covered;
    if ((rc = open_files(s, &covered)) != 0)
        return rc;
    if ((rc = cut_lost_tail(s, covered)) != 0)
        return rc;
    /* A reader of a store that lost records may have fewer chunk files
     * open than the header names (R15); a writer has them all. */
    uint32_t nchunks = atomic_load(&s->chunks.count);
    for (uint32_t c = 0; c < nchunks; c++) {
        struct zr_file *f = zr_ftable_at(&s->chunks, c);
        f->wend = c == s->hdr.tail_chunk ? s->hdr.tail_offset : atomic_load(&f->size);
    }
    s->fr_chunk = s->hdr.tail_chunk;
    s->fr_offset = s->hdr.tail_offset;
    s->sync_chunk_lo = s->hdr.tail_chunk;
    s->sync_seg_lo = (uint32_t)(s->hdr.length >> s->seg_shift);
    atomic_store_explicit(&s->length, s->hdr.length, memory_order_release);
    return 0;
}

/* A read-only opener that finds a pending intent (a writer died in the
 * middle of a delete or compact) finishes it under an exclusive lock, then
 * goes back to a shared one. Other openers in the same situation wait for
 * it briefly; a live writer cannot be holding the store, or the shared
 * lock would not have been granted. */
static int recover_shared(zr_store *s)
{
    for (int attempt = 0; attempt < 2000; attempt++) {
        int pending, applied;
        int rc = zr_intent_pending(s, &pending);
        if (rc != 0 || !pending)
            return rc;
        if (zr_io.flock(s->metafd, LOCK_EX | LOCK_NB) == 0) {
            rc = zr_intent_recover(s, &applied);
            if (zr_io.flock(s->metafd, LOCK_SH) != 0 && rc == 0)
                rc = zr_err_sys(errno, "locking %s/meta.zr", s->path);
            if (rc != 0)
                return zr_err(rc, "%s needs an interrupted delete or compact finished and "
                              "it could not be: %s", s->path, zr_last_error());
            return 0;
        }
        /* The failed conversion may have dropped the shared lock. */
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
        if (zr_io.flock(s->metafd, LOCK_SH | LOCK_NB) != 0 && errno != EWOULDBLOCK)
            return zr_err_sys(errno, "locking %s/meta.zr", s->path);
    }
    return zr_err(ZR_EBUSY, "%s: another process is finishing an interrupted operation", s->path);
}

static int recover(zr_store *s)
{
    if (!s->writable)
        return recover_shared(s);
    int applied;
    return zr_intent_recover(s, &applied);
}

ZR_API int zr_open(zr_store **out, const char *path, int mode)
{
    int access = mode & ~ZR_NOMAP;
    if (!out || !path || (access != ZR_RDONLY && access != ZR_RDWR))
        return zr_err(ZR_EINVAL, "zr_open: bad arguments");
    *out = NULL;
    if (!path[0])
        return zr_err(ZR_EINVAL, "zr_open: the store path is empty");
    zr_store *s = store_alloc(path, access == ZR_RDWR);
    if (!s)
        return zr_err(ZR_ENOMEM, "opening %s", path);
    s->nomap = (mode & ZR_NOMAP) != 0;
    int rc = open_dir(s, path);
    if (rc != 0)
        goto fail;
    s->metafd = zr_io.openat(s->dirfd, ZR_META_FILE, s->writable ? O_RDWR : O_RDONLY, 0);
    if (s->metafd < 0) {
        int e = errno;
        struct stat st;
        if (e == ENOENT && zr_io.fstatat(s->dirfd, ZR_STORE_FILE, &st, 0) != 0)
            rc = zr_err(ZR_ENOTSTORE, "%s holds no store", path);
        else if (e == ENOENT)
            rc = zr_err(ZR_ECORRUPT, "%s/meta.zr is missing", path);
        else
            rc = zr_err_sys(e, "opening %s/meta.zr", path);
        goto fail;
    }
    if ((rc = take_lock(s)) != 0)
        goto fail;
    void *idbuf;
    size_t idlen;
    rc = zr_read_small_file(s->dirfd, ZR_STORE_FILE, ZR_IDENTITY_MAX, &idbuf, &idlen, 0);
    if (rc == ZR_ENOTSTORE)
        rc = zr_err(ZR_ENOTSTORE, "%s has no store.zr (not a store, or its creation never finished)",
                    path);
    if (rc != 0)
        goto fail;
    rc = zr_identity_decode(idbuf, idlen, &s->id);
    zr_free(idbuf);
    if (rc != 0)
        goto fail;
    set_width(s);
    if ((rc = recover(s)) != 0)
        goto fail;
    if ((rc = load_tables(s)) != 0)
        goto fail;
    *out = s;
    return 0;
fail:
    zr_close(s);
    return rc;
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
    zr_store *s = store_alloc(path, true);
    void *idbuf = NULL;
    size_t idlen = 0;
    if (!s)
        return zr_err(ZR_ENOMEM, "creating %s", path);
    s->id = *id;
    s->codec = codec;
    if ((rc = open_dir(s, path)) != 0)
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
    if ((rc = take_lock(s)) != 0)
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
    set_width(s);
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
    if (!s->dirty && !s->dir_dirty)
        return 0;
    int rc = 0;
    uint32_t nchunks = atomic_load(&s->chunks.count);
    for (uint32_t c = s->sync_chunk_lo; rc == 0 && c < nchunks; c++)
        if (zr_io.fdatasync(zr_ftable_at(&s->chunks, c)->fd) != 0)
            rc = zr_err_sys(errno, "syncing %s/%u.chunk", s->path, c);
    uint32_t nsegs = atomic_load(&s->segs.count);
    for (uint32_t g = s->sync_seg_lo; rc == 0 && g < nsegs; g++)
        if (zr_io.fdatasync(zr_ftable_at(&s->segs, g)->fd) != 0)
            rc = zr_err_sys(errno, "syncing %s/%u.loc", s->path, g);
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

ZR_API int zr_sync(zr_store *s)
{
    int rc = zr_engine_writer(s, "zr_sync");
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&s->append_lock);
    rc = zr_engine_sync_locked(s);
    pthread_mutex_unlock(&s->append_lock);
    return rc;
}

/* Whether the table's files (the first n) ask for huge pages: when they
 * fit in a quarter of the RAM. A copy out of a mapping touches each of
 * its pages through the TLB, which the kernel empties on every system
 * call where page-table isolation is on; 2 MiB pages take 512 times fewer
 * misses than 4 KiB ones (on a two-core virtual machine, 2 KiB records
 * gathered at random from a 59 MiB store went from 0.5-0.7 GiB/s to
 * 1.8-6.1 GiB/s). With MADV_HUGEPAGE the kernel reads pages that are not
 * yet cached 2 MiB at a time and maps them whole; the cost is that read
 * size, which a store much larger than the RAM, read at random, would pay
 * on nearly every record. Pages already in the page cache keep the size
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
    uint32_t i = atomic_load(&t->mapped);
    bool huge = i < n && table_wants_huge_pages(t, n);
    for (; i < n; i++) {
        struct zr_file *f = zr_ftable_at(t, i);
        void *map = zr_io.mmap(NULL, t->cap, PROT_READ, MAP_SHARED, f->fd, 0);
        if (map == MAP_FAILED)
            return zr_err_sys(errno, "mapping %s/%u.%s", s->path, i, t->suffix);
        /* Advice only: a kernel without transparent huge pages refuses it,
         * and the mapping works as it is. */
        if (huge)
            (void)madvise(map, t->cap, MADV_HUGEPAGE);
        f->map = map;
        atomic_store_explicit(&t->mapped, i + 1, memory_order_release);
    }
    return 0;
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
    if (loc->chunk_id >= atomic_load_explicit(&s->chunks.mapped, memory_order_acquire))
        return ZR_ECORRUPT;
    const struct zr_file *ch = zr_ftable_at(&s->chunks, loc->chunk_id);
    if ((uint64_t)loc->offset + loc->phys_length >
        atomic_load_explicit(&ch->size, memory_order_acquire))
        return ZR_ECORRUPT;
    if (loc->phys_length == 0 || loc->logic_length == 0 || loc->logic_length > ZR_MAX_RECORD)
        return ZR_ECORRUPT;
    if (s->codec == ZR_CODEC_RAW && loc->phys_length != loc->logic_length)
        return ZR_ECORRUPT;
    if (s->width && loc->logic_length != s->width)
        return ZR_ECORRUPT;
    return 0;
}

/* Entries canon_grow checks per record of the gather that calls it,
 * and at most in one call (256 KiB of the table): the first gathers of a
 * large store share the scan in proportion to their own work, so a
 * gather of one record (a file read through zrecordfs) adds little. */
#define CANON_PER_RECORD 64
#define CANON_STEP 16384

/* Whether this process may rely on what s knows of the layout: the
 * entries of a read-only handle change in no process (no writer can hold
 * the store beside it); those of a writable one change only through the
 * process that opened it, whose own deletes and compactions forget what
 * they change. A process that inherited a writable handle through fork()
 * does not see that forgetting, and reads every entry. */
static bool canon_trusted(const zr_store *s)
{
    return !s->writable || getpid() == s->owner;
}

static void canon_grow(zr_store *s, uint64_t len, size_t n)
{
    if (s->codec != ZR_CODEC_RAW || s->canon_per == 0 ||
        atomic_load_explicit(&s->canon, memory_order_acquire) >= len ||
        atomic_load_explicit(&s->canon_broken, memory_order_relaxed) ||
        pthread_mutex_trylock(&s->canon_lock) != 0)
        return;
    uint64_t i = atomic_load_explicit(&s->canon, memory_order_relaxed);
    uint64_t end = ZR_MIN(len, i + ZR_MIN((uint64_t)n * CANON_PER_RECORD, CANON_STEP));
    for (; i < end; i++) {
        struct zr_loc l, want;
        zr_canon_loc(s, i, &want);
        if (zr_loc_get(s, i, &l) != 0 || l.chunk_id != want.chunk_id || l.offset != want.offset) {
            atomic_store_explicit(&s->canon_broken, true, memory_order_relaxed);
            break;
        }
    }
    atomic_store_explicit(&s->canon, i, memory_order_release);
    pthread_mutex_unlock(&s->canon_lock);
}

uint64_t zr_canon_known(zr_store *s, uint64_t len, size_t n)
{
    if (!canon_trusted(s))
        return 0;
    canon_grow(s, len, n);
    return atomic_load_explicit(&s->canon, memory_order_acquire);
}

void zr_canon_forget(zr_store *s, uint64_t i)
{
    if (i < atomic_load_explicit(&s->canon, memory_order_relaxed))
        atomic_store_explicit(&s->canon, i, memory_order_release);
    atomic_store_explicit(&s->canon_broken, false, memory_order_relaxed);
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

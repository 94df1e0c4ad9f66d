/*
 * engine.h: the store handle shared by the engine's modules (engine.c
 * makes handles, creates stores and syncs; open.c opens them; tables.c
 * owns their files; layout.c what a handle knows of a Dense store's
 * layout; append.c and gather.c move records; dense.c and ragged.c are
 * the typed front doors).
 */
#ifndef ZR_ENGINE_H
#define ZR_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <zstd.h>

#include "format.h"
#include "internal.h"

/* Chunk files and loc segments live in a two-level directory of fixed
 * blocks that never move, so a gather can index them without a lock while
 * an append adds files: ZR_DIR_SLOTS blocks of ZR_DIR_BLOCK files. */
#define ZR_DIR_SLOTS 1024
#define ZR_DIR_BLOCK 1024
#define ZR_MAX_FILES ((uint64_t)ZR_DIR_SLOTS * ZR_DIR_BLOCK)

/* A chunk file or loc segment of a handle. Its descriptor and its mapping
 * are made when first needed and may be given up again when the handle
 * holds more than its bounds allow (tables.c, "The cache"): fd and map
 * are read without a lock, through zr_file_fd and zr_file_map only. */
struct zr_file {
    _Atomic int fd;             /* -1 while closed */
    _Atomic uint32_t state;     /* users of fd right now (ZR_PINS), and ZR_DIRTY, ZR_KEEP_* */
    const uint8_t *_Atomic map; /* read-only mapping of the table's capacity, or NULL */
    _Atomic uint64_t size;      /* bytes known to exist in the file: safe to read */
    uint64_t wend;              /* writer: end of the bytes reserved in this file */
};

/* The bits of zr_file.state: the count of pins (zr_file_fd), and flags
 * kept in the same word so that a file takes 32 bytes, a shift's worth of
 * indexing on the gather's path. ZR_DIRTY: written through fd since its
 * last fdatasync. ZR_KEEP_*: never given up (zr_file_keep). */
#define ZR_PINS 0x00ffffffu
#define ZR_DIRTY (1u << 24)
#define ZR_KEEP_FD (1u << 25)
#define ZR_KEEP_MAP (1u << 26)

struct zr_ftable {
    struct zr_file *_Atomic blocks[ZR_DIR_SLOTS];
    _Atomic uint32_t count; /* files 0..count-1 exist (open or not) */
    _Atomic bool huge;      /* new mappings ask for huge pages */
    uint64_t cap;           /* bytes mapped per file */
    const char *suffix;     /* "chunk" or "loc" */
};

static inline struct zr_file *zr_ftable_at(const struct zr_ftable *t, uint32_t id)
{
    struct zr_file *b = atomic_load_explicit(&t->blocks[id / ZR_DIR_BLOCK], memory_order_acquire);
    return &b[id % ZR_DIR_BLOCK];
}

/* A place in one of the cache's rings: file id of table t, or empty. */
struct zr_slot {
    struct zr_ftable *t;
    uint32_t id;
};

/* The descriptors or the mappings a handle holds, up to cap of them, given
 * up in the order they were made (the hand goes round). */
struct zr_ring {
    struct zr_slot *slot; /* cap places */
    uint32_t cap;
    uint32_t fill;        /* places used at least once */
    uint32_t hand;        /* where the next search for a victim starts */
};

/* A mapping given up while gathers may still read it: unmapped once every
 * reader that entered before epoch + 1 has left (tables.c). */
struct zr_retired {
    const uint8_t *map;
    uint64_t len;
    uint64_t epoch;
};

struct zr_cache {
    pthread_mutex_t lock;     /* the rings, the retired list, opening and mapping */
    pthread_cond_t unpinned;  /* a pinned descriptor was put back */
    _Atomic unsigned waiting; /* threads waiting on unpinned */
    struct zr_ring fds;
    struct zr_ring maps;
    _Atomic uint64_t epoch;
    _Atomic uint64_t readers[2]; /* readers inside, by the parity of the epoch they entered */
    struct zr_retired *retired;
    _Atomic size_t nretired;
    size_t retired_cap;
    _Atomic int sync_errno;   /* an evicted descriptor's fdatasync failed */
    struct zr_store *next, *prev; /* the live handles, for fork (tables.c) */
};

struct zr_store {
    char *path;
    int dirfd;
    int metafd; /* holds the flock for the handle's lifetime */
    bool writable;
    pid_t owner; /* the process that opened it, the only one that writes */
    bool nomap; /* ZR_NOMAP: gathers pread records instead of mapping them */
    struct zr_s3 *remote; /* a store in an object store (remote.c), or NULL */
    struct zr_rcache *rcache; /* its local cache (rcache.c), or NULL */
    char (*etags)[72];        /* remote: the ETags of its chunk files, then of its segments */
    struct zr_tcache *tcache; /* remote without a cache folder: its record table, kept (remote.c) */

    struct zr_identity id;
    uint64_t width; /* Dense record bytes; 0 for Ragged */
    int codec;
    void *dict;
    size_t dict_len;
    ZSTD_DDict *ddict; /* refers to dict's bytes */
    ZSTD_CDict *cdict; /* made on first compressed append */

    _Atomic uint64_t length; /* committed records; release-published */

    /* How gathers read (gather.c): ZR_READ_PROBE until a planned batch
     * shows whether the store's pages are in memory, then ZR_READ_MAPPED
     * (they are: copy from the mappings) or ZR_READ_PLANNED (they are not:
     * plan the reads, plan.h). cached_streak counts planned batches in a
     * row that found every page cached; probe_at is when a mapped handle
     * probes again (ns of CLOCK_MONOTONIC). */
    _Atomic int read_mode;
    _Atomic unsigned cached_streak;
    _Atomic unsigned streak_needed; /* grows while the files are not resident */
    _Atomic uint64_t probe_at;
    /* Whether planned reads of large runs bypass the page cache
     * (zr_read_direct), and for how many chunk files that was worked out:
     * (files + 1) << 1 | answer, 0 before the first time. */
    _Atomic uint64_t direct;

    /* Dense raw stores: records 0..laid_out-1 are known to lie where
     * appends lay them out, record j at byte (j % per_chunk) * width of
     * chunk j / per_chunk, so a gather finds them without reading their
     * entries (layout.c). */
    _Atomic uint64_t laid_out;
    uint64_t per_chunk;          /* records a chunk holds: chunk_cap / width */
    _Atomic bool layout_broken;  /* the entry at laid_out is elsewhere */
    pthread_mutex_t layout_lock; /* serialises the growth of laid_out */

    uint64_t chunk_cap;    /* logical chunk capacity in bytes */
    uint32_t seg_shift;    /* log2 of entries per loc segment */
    struct zr_ftable chunks;
    struct zr_ftable segs;
    struct zr_cache cache;    /* the descriptors and mappings held (tables.c) */
    zr_progress_fn progress;  /* zr_set_progress */
    void *progress_user;

    /* Writer state, guarded by append_lock. */
    pthread_mutex_t append_lock;
    struct zr_header hdr;     /* the committed header */
    uint32_t sync_chunk_lo;   /* lowest chunk written since the last sync */
    uint32_t sync_seg_lo;     /* lowest segment written since the last sync */
    bool dirty;               /* something was written since the last sync */
    bool dir_dirty;           /* files were created since the last sync */
    bool failed;              /* an fsync failed: refuse further writes */

    /* The write frontier during an append, guarded by frontier_lock. */
    pthread_mutex_t frontier_lock;
    uint32_t fr_chunk;
    uint64_t fr_offset;

    /* The public calls in flight on the handle, which zr_close waits for;
     * once it has begun, closing refuses new ones (engine.c). */
    _Atomic unsigned users;
    _Atomic bool closing;
    pthread_mutex_t use_lock; /* with use_cv, only for close's wait */
    pthread_cond_t use_cv;
};

/* Making a handle (engine.c): allocate one for path, with its locks and
 * empty file tables; open the store folder; take the flock of R2 on
 * meta.zr; set a Dense store's width and per_chunk from its identity. */
zr_store *zr_store_alloc(const char *path, bool writable);
int zr_open_dir(zr_store *s, const char *path);
int zr_take_lock(zr_store *s);
void zr_set_width(zr_store *s);

/* Bracket a public call on s: zr_store_enter counts it in flight, or
 * refuses it with ZR_EINVAL once zr_close has begun; zr_store_leave ends
 * it. Both accept NULL (the call itself then refuses it). */
int zr_store_enter(zr_store *s, const char *call);
void zr_store_leave(zr_store *s);
/* zr_store_leave, then rc: a public call's last line. */
static inline int zr_store_leave_rc(zr_store *s, int rc)
{
    zr_store_leave(s);
    return rc;
}

/* Opening (open.c): finish an interrupted delete or compaction (R10),
 * then read the header and dictionary and open the files it names,
 * checked against it (R3, R4, R15). */
int zr_recover(zr_store *s);
int zr_load_tables(zr_store *s);
/* The steps of zr_load_tables that a store read from elsewhere (remote.c)
 * shares: decode and check the header's bytes; take the dictionary's
 * bytes (malloc'd, or NULL when the store has none; owned by s from then
 * on, even on failure); and, once the files are added, settle the
 * frontier and publish the length. */
int zr_header_load(zr_store *s, const uint8_t raw[ZR_HEADER_SIZE]);
int zr_dict_load(zr_store *s, void *buf, size_t len);
int zr_tables_settle(zr_store *s);
/* Whether the header names an empty tail chunk, after a full one, whose
 * file a power cut removed: a sound store (R7) that a reader opens
 * without that file. */
bool zr_lost_empty_tail(const zr_store *s);

/* The file tables of a handle (tables.c): set up with the geometry and
 * cache bounds in force (-1 when out of memory), and closed and unmapped. */
int zr_tables_init(zr_store *s);
void zr_tables_free(zr_store *s);

/* Geometry overrides for tests, so that chunk and segment rollover can be
 * exercised without 4 GiB files. Applies to stores created or opened
 * afterwards in this process; a store must always be opened with the
 * geometry it was written with. segment_entries must be a power of two.
 * Passing zeros restores the defaults. */
void zr_testing_set_geometry(uint64_t chunk_capacity, uint64_t segment_entries);
/* For tests: how many bytes at the start of a store a ZR_NOMAP handle
 * maps for its small raw records (gather.c); 0 restores the default. */
void zr_testing_set_nomap_mapped(uint64_t bytes);

int zr_engine_create(zr_store **out, const char *path, const struct zr_identity *id,
                     const zr_create_opts *opts);

/* Add file id to a table and make it visible: its size is asked for (a
 * new file is created empty first); it is opened and mapped only when
 * used (zr_file_fd, zr_file_map). */
int zr_ftable_add(zr_store *s, struct zr_ftable *t, uint32_t id, bool create);
/* The same for a file whose size is known (a remote store's listing). */
int zr_ftable_add_sized(struct zr_ftable *t, uint32_t id, uint64_t size);

/* A store in an object store (remote.c). zr_remote_open fills handle s,
 * made for the address s->path, from the store's objects: it reads the
 * small files and lists the others, reading nothing of the records.
 * zr_remote_read reads pieces as zr_plan_read does, with ranged GETs. */
int zr_remote_open(zr_store *s);
void zr_remote_close(zr_store *s);
/* Around fork() (tables.c): take (before) and give back the lock of a
 * remote handle's kept record table. */
void zr_tcache_fork(zr_store *s, bool before);
/* The ETag the listing gave file id of table t of remote handle s. */
const char *zr_remote_etag(const zr_store *s, const struct zr_ftable *t, uint32_t id);

/* Cache bounds for tests: handles opened afterwards in this process hold
 * at most fds descriptors and maps mappings (0 restores the defaults),
 * so that eviction can be exercised on a few hundred files. */
void zr_testing_set_cache(uint32_t fds, uint32_t maps);

/* ---- Descriptors and mappings (tables.c) ----
 *
 * A thread that uses a file's descriptor pins it: zr_file_fd gives the
 * descriptor, opening it if needed, and zr_file_put gives it back; a
 * pinned descriptor is never closed. A caller that waits must hold no
 * other pin (ZR_FD_TRY never waits: a thread that keeps reads in flight
 * asks with it and finishes some of them when it is refused). */
enum {
    ZR_FD_READ = 0,
    ZR_FD_WRITE = 1, /* the file will be written: fdatasync it before it is closed or synced */
    ZR_FD_TRY = 2,   /* do not wait for a pinned descriptor to be put back */
};
/* Returned by zr_file_fd with ZR_FD_TRY when every descriptor the handle
 * may hold is pinned. Not an error: no message is set. */
#define ZR_FD_BUSY 1
int zr_file_fd(zr_store *s, struct zr_ftable *t, uint32_t id, int how, int *fd);
void zr_file_put(zr_store *s, struct zr_ftable *t, uint32_t id);

/* fdatasync file id if it was written since its last one (R14). */
int zr_file_sync(zr_store *s, struct zr_ftable *t, uint32_t id);

/* 0, or the error of an fdatasync the cache made when it closed a written
 * descriptor since the last call (the next sync reports it). */
int zr_tables_sync_error(zr_store *s);

/* Mapped bytes are read between zr_read_enter and zr_read_leave: a
 * mapping given up meanwhile is unmapped only once every thread that was
 * inside has left. A long reader calls zr_read_pause now and then, where
 * it holds no pointer into a mapping, so that the mappings given up while
 * it reads can go. */
unsigned zr_read_enter(zr_store *s);
void zr_read_leave(zr_store *s, unsigned slot);

static inline void zr_read_pause(zr_store *s, unsigned *slot)
{
    if (atomic_load_explicit(&s->cache.nretired, memory_order_relaxed) != 0) {
        zr_read_leave(s, *slot);
        *slot = zr_read_enter(s);
    }
}

const uint8_t *zr_file_map_slow(zr_store *s, struct zr_ftable *t, uint32_t id);

/* Whether every file of the store fits in the cache's bound of mappings,
 * so that none is ever given up (while no file is added). */
static inline bool zr_tables_fit(const zr_store *s)
{
    return (uint64_t)atomic_load_explicit(&s->chunks.count, memory_order_relaxed) +
               atomic_load_explicit(&s->segs.count, memory_order_relaxed) <=
           s->cache.maps.cap;
}

/* The mapping of file id of t, made if needed; NULL when it cannot be
 * made, with this thread's error set (zr_last_error_code: ZR_ELIMIT,
 * ZR_EIO, ZR_ENOMEM, or ZR_ECORRUPT when the file is gone). Only between
 * zr_read_enter and zr_read_leave. */
static inline const uint8_t *zr_file_map(zr_store *s, struct zr_ftable *t, uint32_t id)
{
    const uint8_t *map = atomic_load_explicit(&zr_ftable_at(t, id)->map, memory_order_acquire);
    return __builtin_expect(map != NULL, 1) ? map : zr_file_map_slow(s, t, id);
}

/* The mapping of file id of t if it is made, else NULL (for prefetches). */
static inline const uint8_t *zr_file_mapped(const struct zr_ftable *t, uint32_t id)
{
    return atomic_load_explicit(&zr_ftable_at(t, id)->map, memory_order_acquire);
}

/* Keep file id's mapping (ZR_KEEP_MAP, *map) or descriptor (ZR_KEEP_FD,
 * *fd) until the table is truncated or the handle closed, for the records
 * handed out by zr_record_span and zr_record_extent. Kept files do not
 * count against the bounds; a process that keeps more than the system
 * allows gets ZR_ELIMIT. */
int zr_file_keep(zr_store *s, struct zr_ftable *t, uint32_t id, uint32_t what,
                 const uint8_t **map, int *fd);

/* Settle a write frontier for the header: one at the very end of a chunk
 * becomes offset 0 of the next chunk, whose file is created empty if it
 * does not exist, because tail_offset (a u32) cannot hold a chunk's full
 * 2^32 bytes (R7). ZR_ENOSPC when that chunk would pass the file limit. */
int zr_frontier_settle(zr_store *s, uint32_t *chunk, uint64_t *offset);

/* Sync with append_lock held (zr_sync without the lock). */
int zr_engine_sync_locked(zr_store *s);
/* 0 if s may change the store (op names the call in the message):
 * ZR_EINVAL for NULL, ZR_EROFS for a read-only handle, ZR_EBUSY in any
 * process other than the one that opened it (R2). */
int zr_engine_writer(zr_store *s, const char *op);

/* Read modes of a handle (zr_store.read_mode). */
enum { ZR_READ_PROBE, ZR_READ_MAPPED, ZR_READ_PLANNED };

/* Fill locs[k] with the checked entry of record idx[k] (all below the
 * committed length): made from the layout where it is known, else read
 * from the record table, through the mappings or, with planned, with
 * planned reads (plan.h). */
int zr_batch_locs(zr_store *s, const uint64_t *idx, size_t n, struct zr_loc *locs, bool planned);
/* zr_batch_locs of records first..first+n-1. */
int zr_range_locs(zr_store *s, uint64_t first, size_t n, struct zr_loc *locs, bool planned);

/* Whether the next gather of s plans its reads (readmode.c). */
bool zr_gather_plans(zr_store *s);

/* The memory the process may use: the RAM, or its cgroup's limit where
 * that is lower; UINT64_MAX where neither can be read (readmode.c). */
uint64_t zr_memory_limit(void);
/* The bytes of the first n files of table t (tables.c). */
uint64_t zr_table_bytes(const struct zr_ftable *t, uint32_t n);

/* Whether planned reads of the chunks of local store s read their large
 * runs with O_DIRECT: when its files are many times the memory the
 * process may use (readmode.c). */
bool zr_read_direct(zr_store *s);
/* For tests: 1 reads every local store so, 0 none, -1 decides as above
 * (the default; LOADERX_DIRECT=0 or 1 in the environment sets the same). */
void zr_testing_set_direct(int direct);
/* For tests: how many reads this process made with O_DIRECT (plan.c). */
uint64_t zr_testing_direct_reads(void);

/* Whether the files of s are (1) or are not (0) nearly all in the page
 * cache, -1 where the kernel cannot tell (tables.c). */
int zr_tables_resident(zr_store *s);

/* Set the read mode of s (ZR_READ_MAPPED or ZR_READ_PLANNED) and give
 * the mappings the page-size advice that suits it, together, so that the
 * advice never lags the mode (tables.c). */
void zr_tables_set_mode(zr_store *s, int mode);

/* Forget the files count.. of a table: close and unmap them (exclusive use
 * only). */
void zr_ftable_truncate(zr_store *s, struct zr_ftable *t, uint32_t count);

/* Report progress if the caller asked for it. */
static inline void zr_report(zr_store *s, uint64_t done, uint64_t total)
{
    if (s->progress)
        s->progress(s->progress_user, done, total);
}

/* Check a record-table entry against the store's files; on success fills
 * *loc. ZR_ECORRUPT for a bad entry sets no message (callers name the
 * entry, or use zr_loc_read); other errors (the record table could not
 * be mapped) set theirs. Between zr_read_enter and zr_read_leave. */
int zr_loc_get(zr_store *s, uint64_t index, struct zr_loc *loc);

/* zr_loc_get with the message of a bad entry set. */
int zr_loc_read(zr_store *s, uint64_t index, struct zr_loc *loc);

/* Whether entry l is sound and names bytes inside the first nchunks chunk
 * files: the checks zr_loc_get makes on every read (R5). */
bool zr_loc_fits(const zr_store *s, const struct zr_loc *l, uint32_t nchunks);

/* How many leading records a gather of n records (all below len) may
 * find through zr_layout_loc: for a Dense raw store, laid_out, after checking
 * entries past it (a number bounded by n) against the layout and
 * advancing it over those that match (a call that finds another thread
 * doing so skips that); 0 for other stores, and in a process that
 * inherited a writable handle through fork(). */
uint64_t zr_layout_known(zr_store *s, uint64_t len, size_t n);

/* Forget what is known about the layout from record i on (a delete or
 * compaction is about to rewrite entries; exclusive use only). */
void zr_layout_forget(zr_store *s, uint64_t i);

/* The entry of record i < laid_out, made from the layout. */
static inline void zr_layout_loc(const zr_store *s, uint64_t i, struct zr_loc *l)
{
    l->chunk_id = (uint32_t)(i / s->per_chunk);
    l->offset = (uint32_t)((i % s->per_chunk) * s->width);
    l->phys_length = l->logic_length = (uint32_t)s->width;
}

/* 1 when every page of bytes [off, off + len) of chunk file `chunk` is
 * cached, 0 when one is not, -1 (errno set) when the kernel cannot tell,
 * or a negative code when the file cannot be opened (cached.c). */
int zr_range_cached(zr_store *s, uint32_t chunk, uint64_t off, uint64_t len);

/* Format a message for a bad entry into this thread's last error. */
int zr_loc_error(const zr_store *s, uint64_t index, const char *why);
/* Where record i's entry lies: segment *seg, byte *off of it. Returns 0,
 * or ZR_ECORRUPT when the segment does not hold the entry. */
int zr_loc_place(const zr_store *s, uint64_t i, uint32_t *seg, uint64_t *off);

/* A record source for append: Dense records back to back, or Ragged
 * records whose shape prefix is produced on the fly. */
struct zr_src {
    int kind;
    const uint8_t *base;  /* Dense */
    uint64_t width;       /* Dense */
    const zr_rec *recs;   /* Ragged */
    uint64_t itemsize;    /* Ragged */
};

static inline uint64_t zr_src_payload(const struct zr_src *src, uint64_t k)
{
    if (src->kind == ZR_DENSE)
        return src->width;
    uint64_t n = src->itemsize;
    for (uint32_t d = 0; d < src->recs[k].ndim; d++)
        n *= src->recs[k].shape[d];
    return n;
}

static inline uint64_t zr_src_prefix(const struct zr_src *src, uint64_t k)
{
    return src->kind == ZR_DENSE ? 0 : 8 * (1 + (uint64_t)src->recs[k].ndim);
}

/* Write the prefix of Ragged record k (8 * (1 + ndim) bytes) to out. */
void zr_src_fill_prefix(const struct zr_src *src, uint64_t k, uint8_t *out);

int zr_engine_append(zr_store *s, const struct zr_src *src, uint64_t n, uint64_t *first);

/* Gather records idx[0..n) to dst + offsets[k] (or dst + k * width when
 * offsets is NULL), each exactly sizes expected by the entry. */
int zr_engine_gather(zr_store *s, const uint64_t *idx, size_t n, uint8_t *dst,
                     const uint64_t *offsets);

/* Check every index is below the committed length. */
int zr_check_indices(zr_store *s, const uint64_t *idx, size_t n, uint64_t *length);

#endif

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

struct zr_file {
    int fd;
    const uint8_t *map;     /* read-only mapping of the table's capacity, made on
                               first read (see zr_ensure_mapped) */
    _Atomic uint64_t size;  /* bytes known to exist in the file: safe to read */
    uint64_t wend;          /* writer: end of the bytes reserved in this file */
};

struct zr_ftable {
    struct zr_file *_Atomic blocks[ZR_DIR_SLOTS];
    _Atomic uint32_t count; /* files 0..count-1 are open */
    _Atomic uint32_t mapped; /* files 0..mapped-1 are also mapped */
    uint64_t cap;           /* bytes mapped per file */
    const char *suffix;     /* "chunk" or "loc" */
};

static inline struct zr_file *zr_ftable_at(const struct zr_ftable *t, uint32_t id)
{
    struct zr_file *b = atomic_load_explicit(&t->blocks[id / ZR_DIR_BLOCK], memory_order_acquire);
    return &b[id % ZR_DIR_BLOCK];
}

struct zr_store {
    char *path;
    int dirfd;
    int metafd; /* holds the flock for the handle's lifetime */
    bool writable;
    pid_t owner; /* the process that opened it, the only one that writes */
    bool nomap; /* ZR_NOMAP: gathers pread records instead of mapping them */

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
    pthread_mutex_t map_lock; /* serialises zr_ensure_mapped */
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
};

/* Making a handle (engine.c): allocate one for path, with its locks and
 * empty file tables; open the store folder; take the flock of R2 on
 * meta.zr; set a Dense store's width and per_chunk from its identity. */
zr_store *zr_store_alloc(const char *path, bool writable);
int zr_open_dir(zr_store *s, const char *path);
int zr_take_lock(zr_store *s);
void zr_set_width(zr_store *s);

/* Opening (open.c): finish an interrupted delete or compaction (R10),
 * then read the header and dictionary and open the files it names,
 * checked against it (R3, R4, R15). */
int zr_recover(zr_store *s);
int zr_load_tables(zr_store *s);
/* Whether the header names an empty tail chunk, after a full one, whose
 * file a power cut removed: a sound store (R7) that a reader opens
 * without that file. */
bool zr_lost_empty_tail(const zr_store *s);

/* The file tables of a handle (tables.c): set up with the geometry in
 * force, and closed and unmapped. */
void zr_tables_init(zr_store *s);
void zr_tables_free(zr_store *s);

/* Geometry overrides for tests, so that chunk and segment rollover can be
 * exercised without 4 GiB files. Applies to stores created or opened
 * afterwards in this process; a store must always be opened with the
 * geometry it was written with. segment_entries must be a power of two.
 * Passing zeros restores the defaults. */
void zr_testing_set_geometry(uint64_t chunk_capacity, uint64_t segment_entries);

int zr_engine_create(zr_store **out, const char *path, const struct zr_identity *id,
                     const zr_create_opts *opts);

/* Open (or create) file id of a table, map it and make it visible. */
int zr_ftable_add(zr_store *s, struct zr_ftable *t, uint32_t id, bool create);

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

/* Whether the next gather of s plans its reads (gather.c). */
bool zr_gather_plans(zr_store *s);

/* Whether the files of s are (1) or are not (0) nearly all in the page
 * cache, -1 where the kernel cannot tell (tables.c). */
int zr_tables_resident(zr_store *s);

/* Set the read mode of s (ZR_READ_MAPPED or ZR_READ_PLANNED) and give
 * the mappings the page-size advice that suits it, together, so that the
 * advice never lags the mode (tables.c). */
void zr_tables_set_mode(zr_store *s, int mode);

/* Close and unmap the files count.. of a table (exclusive use only). */
void zr_ftable_truncate(struct zr_ftable *t, uint32_t count);

/* Report progress if the caller asked for it. */
static inline void zr_report(zr_store *s, uint64_t done, uint64_t total)
{
    if (s->progress)
        s->progress(s->progress_user, done, total);
}

/* Map every open chunk and loc segment that is not mapped yet. Reads call
 * it once per call before touching entries or bytes, so a handle that only
 * appends (an import) never reserves the mappings' address space. */
int zr_ensure_mapped(zr_store *s);

/* Check a record-table entry against the store's files; on success fills
 * *loc. Sets no message (callers name the entry). */
int zr_loc_get(const zr_store *s, uint64_t index, struct zr_loc *loc);

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

/* Format a message for a bad entry into this thread's last error. */
int zr_loc_error(const zr_store *s, uint64_t index, const char *why);

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

/* Check every index is below the committed length (and map the files
 * the entries below it may name). */
int zr_check_indices(zr_store *s, const uint64_t *idx, size_t n, uint64_t *length);

#endif

/*
 * loaderx.h: the public API of libloaderx.
 *
 * If a name is not declared in this header (or in a header it includes), it
 * is not part of the published API and may change without notice.
 *
 * Conventions used by every function below:
 *  - Fallible calls return int: 0 on success, a negative ZR_E* code on
 *    failure, never a negative errno value. The codes are pinned forever.
 *  - After a failure, zr_last_error() gives a message naming the file, the
 *    entry and the detail, and zr_last_error_code() its code. Both are per
 *    thread, like errno.
 *  - Handles are opaque and created through out-parameters. Close and free
 *    functions return void and accept NULL.
 *  - The structs that may gain fields (options, results, reports) begin
 *    with size_t size, so that a program compiled against one version of
 *    this header runs against a later library, and against an earlier one
 *    while it leaves the newer fields at zero. See "Sized structs" below.
 *  - Nothing here prints, exits or aborts on bad input or a corrupt store.
 *  - Everything read from disk is validated before use: a damaged store gives
 *    ZR_ECORRUPT, never a crash or a silently wrong record.
 */
#ifndef LOADERX_H
#define LOADERX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(ZR_BUILDING_LIBRARY)
#define ZR_API __attribute__((visibility("default")))
#else
#define ZR_API
#endif

/* ZR_VERSION_MAJOR, _MINOR, _PATCH, _NUMBER and _STRING: the version of
 * these headers, which configure writes. */
#include "loaderx/version.h"

/* Status codes. The failure codes lie in a range of their own, -30700
 * down to -30779: clear of negative errno values (-1 to -4095), which a
 * caller such as a FUSE driver may carry in the same int, and of LMDB's
 * codes (-30780 to -30799). The values are pinned from now on: a code is
 * never renumbered, and a new one takes the next number down. */
#define ZR_OK 0
#define ZR_EINVAL (-30700)    /* a bad argument (NULL pointer, bad flag, bad dtype string) */
#define ZR_ENOMEM (-30701)    /* an allocation failed */
#define ZR_EIO (-30702)       /* the operating system reported an I/O error */
#define ZR_ECORRUPT (-30703)  /* the store on disk is damaged or malformed */
#define ZR_ENOTSTORE (-30704) /* the path does not hold a store */
#define ZR_EEXIST (-30705)    /* create: the path holds a store or other files */
#define ZR_EBUSY (-30706)     /* the store is locked by another handle or process */
#define ZR_ERANGE (-30707)    /* an index is out of range */
#define ZR_EDTYPE (-30708)    /* the data's dtype differs from the store's */
#define ZR_ESHAPE (-30709)    /* the data's item shape differs from the store's */
#define ZR_ETOOBIG (-30710)   /* a record is larger than ZR_MAX_RECORD bytes */
#define ZR_EEMPTY (-30711)    /* a record has zero bytes */
#define ZR_EROFS (-30712)     /* a write through a read-only handle */
#define ZR_EKIND (-30713)     /* a Dense call on a Ragged store or the reverse */
#define ZR_ECODEC (-30714)    /* compression, decompression setup or dictionary training failed */
#define ZR_ENOSPC (-30715)    /* the disk is full */
#define ZR_ELIMIT (-30716)    /* a limit of the process or system was reached: open files or mappings */
#define ZR_EACCESS (-30717)   /* a remote store refused access: wrong or missing credentials (403) */

/* Largest physical record (a Ragged record counts its shape prefix). */
#define ZR_MAX_RECORD ((uint64_t)1 << 31)
/* Largest number of dimensions of an item shape or a Ragged record shape. */
#define ZR_MAX_NDIM 32

/* Store kinds. */
#define ZR_DENSE 1
#define ZR_RAGGED 2

/* Codecs; the values are the codec byte stored in meta.zr. */
#define ZR_CODEC_RAW 0
#define ZR_CODEC_ZSTD 1
#define ZR_CODEC_ZSTD_DICT 2

/* Open modes. */
#define ZR_RDONLY 0
#define ZR_RDWR 1
/* Or'd into zr_open's mode: gathers read records with pread(2) instead of
 * through a mapping of the chunks, so that the process's resident set does
 * not grow with the records it reads (the pages stay in the kernel's page
 * cache, shared). Raw records under 64 KiB that lie in the store's first
 * GiB are the exception: the kernel's read of one costs about twice a copy
 * from the mapping, so they are still copied from it, and the handle maps
 * at most that GiB. A chunk file cut short behind the handle (which no
 * writer does: only damage from outside) then kills the process with
 * SIGBUS on such a record, as on any mapped handle, where pread reports
 * ZR_ECORRUPT. Without ZR_NOMAP, raw records of 64 KiB or more are
 * read with pread all the same (the kernel's copy does not take a TLB miss
 * per page); smaller and compressed records are read through the
 * mapping. */
#define ZR_NOMAP 2

/* Dictionary training tiers: dictionary size / training sample budget. */
#define ZR_TIER_FAST 0     /* 32 KiB dictionary, 4 MiB sample */
#define ZR_TIER_BALANCED 1 /* 128 KiB dictionary, 16 MiB sample (the default) */
#define ZR_TIER_MAX 2      /* 1 MiB dictionary, 64 MiB sample */

typedef struct zr_store zr_store;

/*
 * Sized structs. A struct a caller passes in (options) or has filled
 * (results) begins with size_t size, which the caller sets to the struct's
 * sizeof in the header it was compiled against; the ZR_*_INIT macros do
 * that and zero every other field:
 *
 *     zr_create_opts o = ZR_CREATE_OPTS_INIT;
 *     o.codec = ZR_CODEC_ZSTD;
 *
 * Fields are only ever added at the end, and a field's zero is its
 * default. So the library accepts a smaller size, from a caller built
 * against an older header: the fields past it take their defaults, or are
 * not written. It accepts a larger size, from a newer header, when every
 * byte past the fields it knows is zero (the newer fields are left at
 * their defaults), and refuses it with ZR_EINVAL when one is not, since
 * the caller asked for something this library cannot do. A size too small
 * to hold the first field after size, 0 in particular, is ZR_EINVAL too.
 *
 * A struct the library allocates (zr_verify_report, zr_problem) carries
 * the size the library gave it: a caller checks that size covers a field
 * before reading it, in case the library is older than its header.
 */

/* Options for creating a store. The defaults (every field 0) mean raw, no
 * dictionary, and a NULL opts means the same: a C caller gets nothing it
 * did not ask for. zr create, zr import and the Python binding default to
 * zstd instead; set codec to ZR_CODEC_ZSTD here for the same. */
typedef struct zr_create_opts {
    size_t size;       /* sizeof(zr_create_opts), as ZR_CREATE_OPTS_INIT sets it */
    int codec;         /* ZR_CODEC_* */
    const void *dict;  /* ZR_CODEC_ZSTD_DICT only: the trained dictionary */
    size_t dict_len;   /* its size in bytes; must be > 0 for zstd_dict */
} zr_create_opts;

#define ZR_CREATE_OPTS_INIT {.size = sizeof(zr_create_opts)}

/* One Ragged record to append: its bytes and its shape (host order). */
typedef struct zr_rec {
    const void *data;      /* itemsize * prod(shape) bytes */
    const uint64_t *shape; /* ndim dimensions; may be NULL when ndim is 0 */
    uint32_t ndim;         /* 0 for a scalar record */
} zr_rec;

/* A Ragged record in memory after a gather: its shape and its payload. */
typedef struct zr_view {
    const void *data;              /* the payload, after the shape prefix */
    uint64_t nbytes;               /* payload bytes */
    uint32_t ndim;                 /* number of dimensions */
    uint64_t shape[ZR_MAX_NDIM];   /* the first ndim entries are valid */
} zr_view;

/* The result of zr_gather_ragged_alloc: n views into one buffer. */
typedef struct zr_ragged_batch {
    size_t n;
    zr_view *recs;
    void *buf;
} zr_ragged_batch;

/* ---- Errors ---------------------------------------------------------- */

/* The name and meaning of a code, e.g. "ZR_EBUSY: store is locked".
 * Never NULL; unknown codes give a generic text. Thread-safe. */
ZR_API const char *zr_strerror(int code);

/* The message of the last failed call made by this thread: what went
 * wrong, naming the file, the entry and the detail, without the code's
 * name (zr_last_error_code and zr_strerror give that), e.g. "data/0.loc
 * entry 7 (record 7): entry is out of bounds or inconsistent". A failure
 * without more to say gives the meaning of its code ("store is corrupt").
 * Valid until this thread's next failing call. Never NULL (empty before
 * any failure). */
ZR_API const char *zr_last_error(void);

/* The code of the failure zr_last_error describes: ZR_OK before any
 * failure on this thread, and like errno left as it is by a call that
 * succeeds. */
ZR_API int zr_last_error_code(void);

/* ---- Version --------------------------------------------------------- */

/* The version of the library that is running, as MAJOR * 10000 + MINOR *
 * 100 + PATCH: the ZR_VERSION_NUMBER it was built with, which may be newer
 * than the one a caller was compiled against. Thread-safe. */
ZR_API int zr_version(void);

/* The same version as "MAJOR.MINOR.PATCH". Never NULL. Thread-safe. */
ZR_API const char *zr_version_string(void);

/* ---- dtype helpers --------------------------------------------------- */

/* The item size in bytes of a NumPy dtype.str spelling such as "<f4",
 * "|u1", "|b1", "<c16", "|S10", "|V16", "<U3". Returns the size (> 0), or
 * ZR_EINVAL if the spelling is not one loaderx accepts. Thread-safe. */
ZR_API int64_t zr_dtype_itemsize(const char *dtype);

/* ---- Creating, opening, closing -------------------------------------- */

/* Create a new Dense store at path whose records all have the given dtype
 * and item shape (ndim may be 0 for scalar records). path must be a new
 * folder (missing parent folders are created) or an empty one: a store has
 * its folder to itself. The store is returned open read-write. opts may
 * be NULL for the defaults.
 * Errors: ZR_EEXIST (path holds a store, holds other files, or is not a
 * folder), ZR_EINVAL (empty path, bad dtype, zero dimension, bad codec,
 * zstd_dict without a dictionary, an opts size refused as "Sized structs"
 * says), ZR_ETOOBIG (record width over ZR_MAX_RECORD), ZR_EBUSY, ZR_EIO,
 * ZR_ENOSPC, ZR_ECODEC (the dictionary is not usable), ZR_ENOMEM. */
ZR_API int zr_dense_create(zr_store **out, const char *path, const char *dtype,
                           const uint64_t *item_shape, uint32_t ndim,
                           const zr_create_opts *opts);

/* Create a new Ragged store at path: every record has the dtype and its own
 * shape. Same errors as zr_dense_create. */
ZR_API int zr_ragged_create(zr_store **out, const char *path, const char *dtype,
                            const zr_create_opts *opts);

/* Open an existing store. mode is ZR_RDONLY (shared lock: many readers) or
 * ZR_RDWR (exclusive lock: one writer), optionally or'd with ZR_NOMAP. A
 * conflicting lock fails at once. A handle belongs to the process that
 * opened it: a child of fork() may gather through an inherited handle,
 * but append, delete, compact and sync through it give ZR_EBUSY, always,
 * even once the opener has exited (doc/format.md, R2). A daemon opens its
 * stores after it has gone to the background.
 * The store's chunk files and loc segments are opened when first used and
 * mapped when first read, not at open. A handle keeps at most 1024 of
 * them open (fewer under a low RLIMIT_NOFILE: a quarter of the soft
 * limit) and 1024 mapped, and past that closes or unmaps the oldest one
 * not in use for each new one, so that a store of any number of files opens
 * (doc/cold-reads.md, "What is kept, what is bounded").
 * Errors: ZR_ENOTSTORE, ZR_EBUSY, ZR_ECORRUPT, ZR_EIO, ZR_ENOMEM, ZR_EINVAL,
 * ZR_ELIMIT (the process is out of descriptors for the store folder and
 * meta.zr). */
ZR_API int zr_open(zr_store **out, const char *path, int mode);

/* The folders directly below an object-store address url ("s3://bucket"
 * or "s3://bucket/prefix"): the names of its sub-prefixes, rolled up at
 * '/', in the order the server lists them (byte order, for S3), each a
 * candidate store to give zr_open as url + "/" + name. For a program that
 * shows a prefix holding several stores, as zrecordfs does. Sends one
 * listing (following its continuation tokens) configured as zr_open's.
 * *names is an array of *n malloc'd strings (NULL when none): free it
 * with zr_remote_folders_free.
 * Errors: ZR_EINVAL (not an s3:// address, a bad configuration),
 * ZR_EACCESS (credentials refused), ZR_ENOTSTORE (no such bucket), ZR_EIO
 * (the server cannot be reached or keeps failing), ZR_ENOMEM.
 * Thread-safe. */
ZR_API int zr_remote_folders(const char *url, char ***names, size_t *n);

/* Free what zr_remote_folders gave. Accepts NULL. */
ZR_API void zr_remote_folders_free(char **names, size_t n);

/* Close the handle and release its lock. Accepts NULL.
 * Does not sync: appends since the last zr_sync are in the page cache,
 * readable by the next open, but a crash or power cut may lose them. To
 * make a writable store durable, call zr_sync before zr_close and check
 * its result (zr's writing commands and the Python binding's close() do).
 *
 * Thread rules: calls on the handle already running on other threads
 * (gathers, appends, zr_sync, zr_verify and the rest) finish before the
 * handle is freed, and any that begins while zr_close waits for them gets
 * ZR_EINVAL. Once zr_close has returned the handle is freed memory: any
 * later use, a second zr_close included, is undefined, as for free().
 * The mappings and descriptors zr_record_span and zr_record_extent gave
 * out end with it. zr_close must not be called from inside a call on the
 * same handle (a progress callback of zr_compact or zr_verify): it would
 * wait for that call for ever. In a child of fork() it waits for none of
 * the parent's calls, whose threads the child does not have. */
ZR_API void zr_close(zr_store *s);

/* Make every committed append durable: record data first, then the record
 * table, then the header. Errors: ZR_EIO, ZR_EROFS (read-only handle),
 * ZR_EBUSY (a handle inherited through fork(), as zr_open says), ZR_ELIMIT
 * (a written file whose descriptor was closed cannot be opened again).
 * Must not run concurrently with an append on the same handle. */
ZR_API int zr_sync(zr_store *s);

/* ---- Identity accessors (thread-safe, never fail on an open handle) ---
 * Given NULL: zr_kind and zr_codec give ZR_EINVAL, the pointers NULL, the
 * numbers 0. */

ZR_API int zr_kind(const zr_store *s);          /* ZR_DENSE or ZR_RAGGED */
ZR_API uint64_t zr_len(const zr_store *s);      /* committed record count */
ZR_API const char *zr_dtype(const zr_store *s); /* e.g. "<f4" */
ZR_API uint64_t zr_itemsize(const zr_store *s); /* bytes per element */
/* Dense: the item shape and its ndim; Ragged: ndim 0 and NULL. */
ZR_API const uint64_t *zr_item_shape(const zr_store *s, uint32_t *ndim);
/* Dense: bytes per record; Ragged: 0. */
ZR_API uint64_t zr_record_width(const zr_store *s);
ZR_API int zr_codec(const zr_store *s);          /* ZR_CODEC_* */
ZR_API const char *zr_codec_name(int codec);     /* "raw", "zstd", "zstd_dict" */
ZR_API const char *zr_path(const zr_store *s);
ZR_API int zr_writable(const zr_store *s);       /* 1 for ZR_RDWR handles */

/* ---- Append ---------------------------------------------------------- */

/* Append n Dense records held back to back in data (n * width bytes). The
 * caller states the data's dtype and item shape, which must equal the
 * store's. The batch is one commit: after a failure nothing of it is
 * visible. *first (may be NULL) receives the index of the first new record.
 * Errors: ZR_EROFS, ZR_EBUSY (as zr_sync), ZR_EKIND, ZR_EDTYPE, ZR_ESHAPE,
 * ZR_EINVAL, ZR_EIO, ZR_ENOSPC, ZR_ECODEC, ZR_ENOMEM, ZR_ELIMIT.
 * Thread rules: one append at a time per handle (concurrent calls are
 * serialised); gathers may run concurrently from any number of threads. */
ZR_API int zr_append_dense(zr_store *s, const char *dtype,
                           const uint64_t *item_shape, uint32_t ndim,
                           const void *data, uint64_t n, uint64_t *first);

/* Append n Ragged records, each with its own shape, all of dtype. A record
 * with zero bytes gives ZR_EEMPTY, one over ZR_MAX_RECORD (shape prefix
 * included) gives ZR_ETOOBIG; either rejects the whole batch before
 * anything is written. Other errors and thread rules as zr_append_dense. */
ZR_API int zr_append_ragged(zr_store *s, const char *dtype, const zr_rec *recs,
                            uint64_t n, uint64_t *first);

/* ---- Gather ---------------------------------------------------------- */

/* Copy the Dense records idx[0..n) into dst, back to back, in request
 * order (repeats allowed). dst must hold n * zr_record_width(s) bytes.
 * Errors: ZR_ERANGE (checked for every index before anything is read),
 * ZR_EKIND, ZR_ECORRUPT, ZR_ENOMEM, ZR_EINVAL, ZR_EIO (a read of a store
 * not in memory failed), ZR_ELIMIT (a file cannot be opened or mapped: the
 * process is out of descriptors, even after the handle gave up its own, or
 * out of address space or mappings).
 * Thread-safe: any number of concurrent gathers, and one concurrent append. */
ZR_API int zr_gather_dense(zr_store *s, const uint64_t *idx, size_t n, void *dst);

/* The stored size of each Ragged record idx[k]: its shape prefix
 * (8 * (1 + ndim) bytes) plus its payload, read from the record table
 * without decoding anything. Errors: ZR_ERANGE, ZR_EKIND, ZR_ECORRUPT,
 * ZR_EIO, ZR_ENOMEM. */
ZR_API int zr_ragged_sizes(zr_store *s, const uint64_t *idx, size_t n, uint64_t *sizes);

/* Copy each Ragged record idx[k] (shape prefix and payload, sizes[k] bytes
 * as given by zr_ragged_sizes) to dst + offsets[k]. Offsets that are
 * multiples of 8 keep every payload 8-byte aligned. Each record's prefix is
 * validated; read it with zr_ragged_view. Errors: as zr_gather_dense.
 * The sizes must come from zr_ragged_sizes on the same indices with no
 * delete in between (a delete moves records): the call writes each record
 * at its offset whatever dst's size, which it cannot know. */
ZR_API int zr_gather_ragged(zr_store *s, const uint64_t *idx, size_t n, void *dst,
                            const uint64_t *offsets);

/* Decode a gathered Ragged record of size bytes at rec into *view, checking
 * that its prefix is consistent with size and itemsize. Returns 0,
 * ZR_ECORRUPT (the prefix does not fit size and itemsize) or ZR_EINVAL
 * (NULL pointer, itemsize 0). Thread-safe; touches no store. */
ZR_API int zr_ragged_view(const void *rec, uint64_t size, uint64_t itemsize, zr_view *view);

/* Gather Ragged records into one freshly allocated batch: sizes, a buffer,
 * the gather and the views in one call. Free with zr_ragged_batch_free.
 * Errors: as zr_gather_ragged. */
ZR_API int zr_gather_ragged_alloc(zr_store *s, const uint64_t *idx, size_t n,
                                  zr_ragged_batch **out);
ZR_API void zr_ragged_batch_free(zr_ragged_batch *b);

/* Layouts of a Ragged batch made dense, for models that take tensors. A
 * record of shape (L, *row) is L rows of shape row (a scalar record is one
 * row of shape ()); for ZR_PADDED and ZR_PACKED every record of a batch
 * must have the same row shape.
 *  - ZR_PADDED: shape (n, R, *row), record k in rows [0, lengths[k]) of
 *    slice k and the pad item in the rest; R is the longest record's
 *    rows, or the fixed number of rows asked for.
 *  - ZR_PACKED: shape (sum of lengths, *row), the records back to back,
 *    record k in rows [offsets[k], offsets[k + 1]) (what variable-length
 *    attention kernels call cu_seqlens). Nothing is padded.
 *  - ZR_PACKED_FLAT: the payloads back to back whatever their shapes, as
 *    one dimension of items: shape (sum of lengths), record k in items
 *    [offsets[k], offsets[k + 1]), lengths[k] its items, and its shape in
 *    shapes[k * rec_ndim ..]. The records must have the same number of
 *    dimensions (rec_ndim), any sizes: images of different heights and
 *    widths, token matrices of different widths. */
#define ZR_PADDED 1
#define ZR_PACKED 2
#define ZR_PACKED_FLAT 3

/* A Ragged batch made dense. Allocated by the library, freed with
 * zr_ragged_dense_free. */
typedef struct zr_ragged_dense {
    size_t n;                         /* records */
    int layout;                       /* ZR_PADDED, ZR_PACKED or ZR_PACKED_FLAT */
    uint32_t ndim;                    /* dimensions of data */
    uint64_t shape[ZR_MAX_NDIM + 1];  /* the first ndim entries are valid */
    uint64_t nbytes;                  /* bytes of data */
    void *data;                       /* the items, C order */
    int64_t *lengths;                 /* n entries: the rows of each record */
    int64_t *offsets;                 /* n + 1 entries: the first row of each
                                       * record when packed, offsets[n] the
                                       * total (set for every layout); in
                                       * items for ZR_PACKED_FLAT */
    uint32_t rec_ndim;                /* ZR_PACKED_FLAT: the records'
                                       * dimensions; 0 otherwise */
    int64_t *shapes;                  /* ZR_PACKED_FLAT: n * rec_ndim
                                       * entries, record k's shape from
                                       * shapes[k * rec_ndim]; NULL for the
                                       * other layouts */
} zr_ragged_dense;

/* Make n gathered Ragged records (views, as zr_gather_ragged_alloc or a
 * loader's column gives them, of items of itemsize bytes) into one dense
 * batch of the given layout in *out. rows is for ZR_PADDED: 0 pads to the
 * longest record, a positive number to exactly that many rows. pad is one
 * item (itemsize bytes) to fill the padding with, or NULL for zero bytes.
 * n may be 0 (shape (0, rows) or (0)).
 * Errors: ZR_EINVAL (NULL argument, unknown layout, rows with a packed
 * layout, a view whose bytes do not match its shape), ZR_ESHAPE (records
 * of different row shapes for ZR_PADDED and ZR_PACKED, of different
 * numbers of dimensions for ZR_PACKED_FLAT, a record longer than rows),
 * ZR_ETOOBIG (the batch would not fit in memory's address range),
 * ZR_ENOMEM. Thread-safe; touches no store. */
ZR_API int zr_ragged_densify(const zr_view *recs, size_t n, uint64_t itemsize, int layout,
                             uint64_t rows, const void *pad, zr_ragged_dense **out);

/* Gather the Ragged records idx[0..n) of s and make them dense, as
 * zr_ragged_densify says, in one call. The packed layouts are gathered
 * in place: each record's payload is decoded or copied straight to its
 * place in data and its shape prefix into the gap a neighbour leaves
 * for it, so the batch is written once (zr_gather_ragged then
 * zr_ragged_densify write it twice). Records with payloads shorter than
 * their shape prefix, or whose numbers of dimensions differ, take the
 * two-step path. Errors: those of zr_gather_ragged and of
 * zr_ragged_densify. Thread rules: as a gather. */
ZR_API int zr_gather_ragged_dense(zr_store *s, const uint64_t *idx, size_t n, int layout,
                                  uint64_t rows, const void *pad, zr_ragged_dense **out);

ZR_API void zr_ragged_dense_free(zr_ragged_dense *d);

/* Where record i of a raw store lies in the library's read-only mapping of
 * its chunk: *data and *size (Ragged: the shape prefix and the payload, as
 * zr_gather_ragged would copy them), without copying. The entry is checked
 * as a gather checks it. The bytes stay readable until the next delete,
 * compact or close of this handle (appends leave them in place): the
 * chunk's mapping is kept from then on, outside the handle's bound of
 * mappings, so a process that takes spans from more chunks than it can
 * map (address space, vm.max_map_count) gets ZR_ELIMIT. For serving
 * records by reference, as zrecordfs does on read-only mounts.
 * Errors: ZR_EINVAL (a compressed store: there is nothing to point at),
 * ZR_ERANGE, ZR_ECORRUPT, ZR_EIO, ZR_ELIMIT. Thread-safe like a gather. */
ZR_API int zr_record_span(zr_store *s, uint64_t i, const void **data, uint64_t *size);

/* The same record as a file extent: a descriptor of its chunk file (owned
 * by the store: do not close it), the byte offset and the size, for
 * splice(2) or sendfile(2). Valid and errors as zr_record_span: the
 * chunk's descriptor is kept, outside the handle's bound of descriptors,
 * and a process that runs out of them gets ZR_ELIMIT. */
ZR_API int zr_record_extent(zr_store *s, uint64_t i, int *fd, uint64_t *offset, uint64_t *size);

/* Whether the stored bytes of records idx[0..n) are all in the page cache:
 * returns 1 when every page of every record is, 0 when one is not (it stops
 * at the first that is not), or a negative code. Any codec. A reader that
 * serves single records can use it to choose between the mapping (cached:
 * no system call per byte) and a read (not cached: a page fault on a
 * mapping reads up to read_ahead_kb around its page). The answer may be
 * stale by the time the caller acts on it (pages come and go). It reads
 * nothing from the disk: a record whose table entry is not in the page
 * cache counts as not cached. Costs a system call per record (cachestat(2);
 * two, and a read of the cached entry, where the record table is needed),
 * or from Linux 6.5 back, mincore(2), which answers only the file's owner
 * or a privileged caller, and the entry is then read, from the disk if
 * need be. Errors: ZR_EINVAL,
 * ZR_ERANGE, ZR_ECORRUPT, ZR_EIO (the kernel cannot tell), ZR_ELIMIT.
 * Thread-safe like a gather. */
ZR_API int zr_records_cached(zr_store *s, const uint64_t *idx, size_t n);

/* Ask the kernel to start reading the stored bytes of records first,
 * first + 1, ... into the page cache, without waiting for them
 * (posix_fadvise POSIX_FADV_WILLNEED, records adjacent in a chunk file
 * asked for together): for a reader that will read records in index order,
 * one at a time, and wants the disk to work ahead of it. Stops after
 * max_records records, after the record that reaches max_bytes stored
 * bytes, or at the end of the store; *records is set to the number asked
 * for (0 past the end). Any codec. Returns 0 or a negative code: ZR_EINVAL,
 * ZR_ECORRUPT, ZR_ELIMIT. Advice only: the kernel may read less. Thread-safe like a
 * gather. */
ZR_API int zr_prefetch(zr_store *s, uint64_t first, uint64_t max_records, uint64_t max_bytes,
                       uint64_t *records);

/* ---- Maintenance: delete, compact, stats, verify ----------------------- */

/* Progress of a long call: done units out of total (records). */
typedef void (*zr_progress_fn)(void *user, uint64_t done, uint64_t total);

/* Have zr_compact, zr_verify and zr_train_dict_store on this handle report
 * their progress to fn (NULL turns it off). fn runs on the thread that made
 * the call, a few times a second at most for large stores, and last with
 * done == total. Not thread-safe against a concurrent long call. */
ZR_API void zr_set_progress(zr_store *s, zr_progress_fn fn, void *user);

/* Space accounting of a store. */
typedef struct zr_stats {
    size_t size;          /* set by the caller: sizeof(zr_store_stats) */
    uint64_t records;     /* committed records */
    uint64_t live_bytes;  /* stored bytes of live records */
    uint64_t chunk_bytes; /* bytes held by chunk files */
    uint64_t reclaimable; /* chunk_bytes - live_bytes: what compaction may free */
    int codec;            /* ZR_CODEC_* */
    uint64_t dict_bytes;  /* size of dict.zr, 0 without one */
} zr_store_stats;

#define ZR_STORE_STATS_INIT {.size = sizeof(zr_store_stats)}

/* Fill the fields of *st that st->size covers (set it first, with
 * ZR_STORE_STATS_INIT). Reads the whole record table (O(records)).
 * Errors: ZR_ECORRUPT, ZR_EINVAL (also a size refused as "Sized structs"
 * says). Thread rules: as a gather. */
ZR_API int zr_stats(zr_store *s, zr_store_stats *st);

/* Delete the records idx[0..n) by swap-last: the batch is applied in
 * descending index order and each hole is filled by the current last
 * record, so the live records stay exactly 0..length-1 (indices held
 * elsewhere become stale). Repeated indices count once. Every index is
 * checked before anything changes. Errors: ZR_EROFS, ZR_EBUSY (as
 * zr_sync), ZR_ERANGE, ZR_EINVAL, ZR_EIO, ZR_ENOSPC, ZR_ENOMEM. Thread rules: the handle must
 * not be used by any other thread during the call. */
ZR_API int zr_delete(zr_store *s, const uint64_t *idx, size_t n);

/* What a compaction did. */
typedef struct zr_compact_result {
    size_t size;           /* set by the caller: sizeof(zr_compact_result) */
    uint64_t records_moved;
    uint64_t bytes_before; /* chunk bytes before */
    uint64_t bytes_after;  /* chunk bytes after */
} zr_compact_result;

#define ZR_COMPACT_RESULT_INIT {.size = sizeof(zr_compact_result)}

/* Rewrite the live records in place in physical order so that the chunks
 * hold no garbage, then remove surplus chunks and table segments. A record
 * never moves to a higher address, so an interrupted compaction leaves a
 * valid store and running it again finishes the work. res may be NULL;
 * otherwise the fields res->size covers are filled (set it first, with
 * ZR_COMPACT_RESULT_INIT), and a size refused as "Sized structs" says
 * gives ZR_EINVAL before anything moves.
 * Errors: ZR_EROFS, ZR_EBUSY (as zr_sync), ZR_ECORRUPT, ZR_EIO, ZR_ENOSPC,
 * ZR_ENOMEM, ZR_EINVAL. Thread rules: as zr_delete. */
ZR_API int zr_compact(zr_store *s, zr_compact_result *res);

/* One problem found by zr_verify. */
typedef struct zr_problem {
    size_t size;      /* set by the library: the sizeof it knows */
    char file[64];    /* e.g. "0.loc", "3.chunk", "meta.zr" */
    uint64_t entry;   /* record index, or UINT64_MAX when not about a record */
    char what[192];   /* what is wrong */
} zr_problem;

/* What zr_verify found. The problems it lists are read through
 * zr_verify_problem, which steps through them by the library's sizeof,
 * whatever the caller's. */
typedef struct zr_verify_report {
    size_t size;            /* set by the library: the sizeof it knows */
    uint64_t records_checked;
    uint64_t nproblems;     /* problems found */
    size_t nlisted;         /* problems listed (at most 1000) */
} zr_verify_report;

/* Scan the whole store: every table entry in bounds, every record decodes
 * to its logical length, every Ragged prefix consistent, no two live
 * records overlapping. *out receives the report (free it with
 * zr_verify_report_free) whether or not problems were found, and on every
 * return but ZR_EINVAL and ZR_ENOMEM before the scan began. Returns 0
 * when the store is sound, ZR_ECORRUPT when problems were found. When a
 * file cannot be read (an I/O error; a remote object deleted, shortened
 * or replaced after the open: ZR_ECORRUPT) the scan stops and returns that
 * error, its report listing the file and the error as its last problem
 * (file "" where the message names the object) and counting in
 * records_checked only the records checked before it. Thread rules: as a
 * gather. */
ZR_API int zr_verify(zr_store *s, zr_verify_report **out);
ZR_API void zr_verify_report_free(zr_verify_report *r);

/* Listed problem k of r (k < r->nlisted), or NULL for a NULL r or a k out
 * of range. Valid until zr_verify_report_free. Thread-safe. */
ZR_API const zr_problem *zr_verify_problem(const zr_verify_report *r, size_t k);

/* ---- Publishing to an object store: push and pull -------------------- */

#define ZR_PUSH_FORCE 1u /* zr_push: replace what the prefix holds */
#define ZR_PULL_FORCE 1u /* zr_pull: replace a local store */

/* Upload the local store at path to url ("s3://bucket/prefix", configured
 * as zr_open's remote stores are), its files as objects, byte for byte,
 * several at once. The store is held open read-only (its shared lock keeps
 * writers out) to the end; meta.zr is sent last, so that until the upload
 * is complete the prefix is not a store to any reader. A prefix holding
 * any object is refused unless flags has ZR_PUSH_FORCE; then the old
 * header is deleted first, the old store's other objects the new one
 * lacks after the upload. Without ZR_PUSH_FORCE the prefix is first
 * claimed with a conditional write (If-None-Match: *) of push.claim and
 * meta.zr is sent only if none exists, so of pushes racing to one prefix
 * one succeeds and the others fail with ZR_EEXIST, the losers writing no
 * byte of their stores. Afterwards the listing is checked against the
 * local sizes and ETags (the MD5s of the local bytes, multipart ones as
 * S3 makes them) and the remote store opened and compared with the local
 * one.
 * fn (may be NULL) receives bytes done out of total on the calling
 * thread as files complete, last with done == total.
 * Errors: ZR_EINVAL (NULL, an unknown flag, url not s3://), those of
 * zr_open for path (ZR_EBUSY for a store being written), ZR_EBUSY (a
 * pending delete or compaction), ZR_EEXIST (the prefix holds objects,
 * another push holds it or published first), ZR_EACCESS, ZR_ENOTSTORE
 * (no bucket), ZR_EIO, ZR_ECORRUPT (the check after the upload failed:
 * an object is not the bytes sent), ZR_ENOMEM, ZR_ELIMIT. An upload that fails
 * leaves a prefix without meta.zr. Thread-safe. */
ZR_API int zr_push(const char *path, const char *url, unsigned flags, zr_progress_fn fn,
                   void *user);

/* Download the store at url into the local folder path: its files come
 * into a new folder beside path ("path.part-XXXXXX"), many ranges at
 * once, are synced and checked against a second listing, the copy is
 * opened, and only then is it renamed to path, so that path holds the
 * whole store or nothing. An existing path is refused unless flags has
 * ZR_PULL_FORCE, and even then replaced (in one atomic exchange) only
 * when it is a folder of nothing but a store's files that no handle has
 * open. Its files are 0600 and its folder 0700, whatever the umask
 * (zr_pull_mode sets others). fn as zr_push's.
 * Errors: ZR_EINVAL, ZR_ENOTSTORE (no store at url, or an upload without
 * its meta.zr), ZR_EEXIST (path exists), ZR_EBUSY (the store at path is
 * open), ZR_ECORRUPT (the objects changed meanwhile, or the copy does not
 * open), ZR_EACCESS, ZR_EIO, ZR_ENOSPC, ZR_ENOMEM. A pull that fails
 * removes its folder (one killed leaves path.part-XXXXXX). Thread-safe. */
ZR_API int zr_pull(const char *url, const char *path, unsigned flags, zr_progress_fn fn,
                   void *user);

/* The mode of a pulled store's files unless zr_pull_mode is told another:
 * the owner's only, as the cache keeps the same bytes. */
#define ZR_PULL_MODE_DEFAULT 0600u

/* zr_pull, with the pulled files' permission bits: mode (0 for
 * ZR_PULL_MODE_DEFAULT, which zr_pull uses) exactly, the umask not
 * applied, and the folder's the same with x added where r is set (0644
 * gives a 0755 folder). mode must lie within 0777 and hold 0600 (a store
 * its owner cannot read and write is of no use to the owner); another is
 * ZR_EINVAL before anything is sent. Errors and thread rules as zr_pull's. */
ZR_API int zr_pull_mode(const char *url, const char *path, unsigned flags, unsigned mode,
                        zr_progress_fn fn, void *user);

/* ---- Dictionary training --------------------------------------------- */

/* Train a zstd dictionary for ZR_CODEC_ZSTD_DICT stores on a strided sample
 * of records sized by tier. On success *dict is a malloc'd buffer of
 * *dict_len bytes that the caller frees with free(). Errors: ZR_EINVAL (bad
 * tier, no records), ZR_ECODEC (training failed, e.g. too little data),
 * ZR_ENOMEM. Thread-safe. */

/* From n records of width bytes each, back to back in buf. */
ZR_API int zr_train_dict_buffer(const void *buf, size_t width, size_t n, int tier,
                                void **dict, size_t *dict_len);
/* From n records, record k being sizes[k] bytes at recs[k]. */
ZR_API int zr_train_dict_records(const void *const *recs, const size_t *sizes, size_t n,
                                 int tier, void **dict, size_t *dict_len);
/* From the physical records of an open store (Ragged: shape prefix included,
 * as the codec sees them). Also ZR_ECORRUPT from the gather. */
ZR_API int zr_train_dict_store(zr_store *s, int tier, void **dict, size_t *dict_len);

/* The dictionary size and sample budget of a tier, in bytes. */
ZR_API int zr_tier_sizes(int tier, size_t *dict_bytes, size_t *sample_bytes);

/* The number of threads a batched call fans out to (the online CPUs). */
ZR_API int zr_threads(void);

#include "loader.h"

#ifdef __cplusplus
}
#endif

#endif /* LOADERX_H */

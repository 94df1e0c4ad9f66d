/*
 * loader.h: the index sampler and the prefetching loader of libloaderx.
 *
 * Included by loaderx.h; include that header, not this one. The
 * conventions stated at the top of loaderx.h hold here too: int status
 * codes, messages through zr_last_error(), destroy functions that accept
 * NULL, nothing printed and nothing aborted.
 */
#ifndef LOADERX_LOADER_H
#define LOADERX_LOADER_H

#ifndef LOADERX_H
#error "include <loaderx/loaderx.h> rather than <loaderx/loader.h>"
#endif

/* ---- Sampler ---------------------------------------------------------- */

/* Sampling modes. */
#define ZR_SEQUENTIAL 1 /* a window sliding over the index space, wrapping around */
#define ZR_IID 2        /* uniform with replacement */
#define ZR_CYCLIC 3     /* without replacement: a fresh permutation every cycle */
#define ZR_QUASI 4      /* without replacement, shuffling blocks of consecutive records */

/* ZR_QUASI's defaults: records per block and blocks per shuffle window. */
#define ZR_QUASI_BLOCK 64
#define ZR_QUASI_WINDOW 16

/* Largest index space a sampler accepts. */
#define ZR_SAMPLER_MAX_N ((uint64_t)1 << 63)

/*
 * A sampler turns a step number into a batch of record indices in [0, n).
 * Every batch is a pure function of the sampler's parameters and the step:
 * nothing is carried from one step to the next, so resuming a run is
 * seeking to its step and any number of threads may draw from one sampler.
 *
 * Sharding: a global batch holds batch * world indices, and rank r receives
 * the positions [r * batch, (r + 1) * batch) of it. The world ranks' shards
 * are disjoint slices whose concatenation in rank order is exactly the batch
 * a sampler with world 1 and batch * world indices draws at the same step
 * and seed, so processes agree on the global batch without talking.
 *
 * The modes, for a global batch of G = batch * world indices:
 *  - ZR_SEQUENTIAL: step s covers (s * G + p) mod n for p in [0, G); the
 *    window wraps circularly, so no batch is ever short.
 *  - ZR_IID: each position is an independent, exactly uniform draw from
 *    [0, n) (with replacement): a keyed counter-based generator hashes
 *    (seed, step, position) to 64 bits, and Lemire's multiply-shift with
 *    rejection maps them to [0, n) without bias.
 *  - ZR_CYCLIC: without replacement. Cycle c is a keyed pseudorandom
 *    permutation of [0, n) (a Feistel network over the smallest power of
 *    two covering n, brought into range by cycle-walking, with a key derived
 *    from the seed and c), consumed G indices per step. A cycle has
 *    per_cycle = n / G steps; every batch is full and the last n mod G
 *    positions of each permutation are dropped, which are different
 *    records every cycle because the permutation changes. Nothing the size
 *    of the index space is ever held in memory.
 *  - ZR_QUASI: without replacement, like ZR_CYCLIC (same per_cycle, full
 *    batches, a remainder of n mod G dropped per cycle), but each cycle's
 *    order keeps records of a block together, so that a batch touches few
 *    blocks: the index space is cut into blocks of `block` consecutive
 *    records (block k holds [k * block, (k + 1) * block), the last one may
 *    be shorter); cycle c lays the blocks out in a keyed pseudorandom order,
 *    cuts that sequence into windows of `window` blocks, and shuffles the
 *    records within each window by a second keyed permutation. A run of m
 *    consecutive positions, such as one rank's batch, therefore draws from
 *    at most window * (2 + floor((m + block - 3) / (window * block))) blocks
 *    (m >= 2), about m / block + 2 * window, against up to m for ZR_CYCLIC;
 *    doc/sampler.md gives the bound's reasoning and what the order gives up
 *    in randomness. Set block and window through zr_sampler_create_opts or
 *    zr_loader_opts.
 *
 * A sampler is an opaque handle: zr_sampler_create or
 * zr_sampler_create_opts makes one and zr_sampler_free frees it;
 * zr_sampler_get_info tells its parameters.
 */
typedef struct zr_sampler zr_sampler;

/* What a sampler was made with and what follows from it: a sized struct
 * (loaderx.h), filled by zr_sampler_get_info. */
typedef struct zr_sampler_info {
    size_t size;        /* set by the caller: sizeof(zr_sampler_info) */
    uint64_t n;         /* the index space: indices are in [0, n) */
    uint64_t batch;     /* indices per batch on this rank */
    uint64_t global;    /* indices per global batch: batch * world */
    uint64_t per_cycle; /* ZR_CYCLIC, ZR_QUASI: steps per cycle (n / global); 0 otherwise */
    uint64_t seed;
    uint32_t rank;
    uint32_t world;
    int mode;           /* ZR_SEQUENTIAL, ZR_IID, ZR_CYCLIC or ZR_QUASI */
    uint64_t block;     /* ZR_QUASI: records per block; 0 otherwise */
    uint64_t window;    /* ZR_QUASI: blocks per shuffle window; 0 otherwise */
} zr_sampler_info;

#define ZR_SAMPLER_INFO_INIT {.size = sizeof(zr_sampler_info)}

/* Make a sampler in *out. n is the index space (1 <= n <=
 * ZR_SAMPLER_MAX_N), batch the indices per step on this rank, mode one of
 * the ZR_* modes above (ZR_QUASI with its default block and window),
 * rank in [0, world). The global batch, batch *
 * world, must be at least 1 and at most n, in every mode. Returns 0,
 * ZR_EINVAL for a NULL out or any parameter out of range, or ZR_ENOMEM;
 * on failure *out is NULL. Thread-safe. */
ZR_API int zr_sampler_create(zr_sampler **out, uint64_t n, uint64_t batch, int mode,
                             uint64_t seed, uint32_t rank, uint32_t world);

/* The parameters of a sampler, a sized struct (loaderx.h) for
 * zr_sampler_create_opts. Start from ZR_SAMPLER_OPTS_INIT: mode and batch
 * must be set. */
typedef struct zr_sampler_opts {
    size_t size;        /* sizeof(zr_sampler_opts), as ZR_SAMPLER_OPTS_INIT sets it */
    int mode;           /* ZR_SEQUENTIAL, ZR_IID, ZR_CYCLIC or ZR_QUASI */
    uint64_t batch;     /* indices per batch on this rank */
    uint64_t seed;
    uint32_t rank;      /* this process's shard, in [0, world) */
    uint32_t world;     /* processes sharing each global batch; 0 means 1 */
    uint64_t block;     /* ZR_QUASI: records per block; 0 means ZR_QUASI_BLOCK */
    uint64_t window;    /* ZR_QUASI: blocks per window; 0 means ZR_QUASI_WINDOW */
} zr_sampler_opts;

#define ZR_SAMPLER_OPTS_INIT {.size = sizeof(zr_sampler_opts)}

/* Make a sampler over the index space [0, n) in *out from opts: the same
 * sampler zr_sampler_create makes from the same parameters, and the one
 * way to choose ZR_QUASI's block and window (any values from 1 up; a block
 * larger than n is one block of n records, a window of more blocks than
 * there are is one window). block and window must be 0 in the other modes.
 * Returns 0, ZR_EINVAL for a NULL argument, a parameter out of range or an
 * opts size refused as loaderx.h's "Sized structs" says, or ZR_ENOMEM; on
 * failure *out is NULL. Thread-safe. */
ZR_API int zr_sampler_create_opts(zr_sampler **out, uint64_t n, const zr_sampler_opts *opts);

/* Free a sampler made by zr_sampler_create or zr_sampler_create_opts.
 * Accepts NULL. */
ZR_API void zr_sampler_free(zr_sampler *sm);

/* Write this rank's batch indices of step into out. Any step from 0 to
 * UINT64_MAX may be asked for, in any order. Returns 0, or ZR_EINVAL if sm
 * or out is NULL. Thread-safe: it only reads *sm, so any number of threads
 * may call it at once. */
ZR_API int zr_sampler_batch(const zr_sampler *sm, uint64_t step, uint64_t *out);

/* Fill the fields of *info that info->size covers (set it first, with
 * ZR_SAMPLER_INFO_INIT). Returns 0, or ZR_EINVAL for a NULL argument or a
 * size refused as loaderx.h's "Sized structs" says. Thread-safe. */
ZR_API int zr_sampler_get_info(const zr_sampler *sm, zr_sampler_info *info);

/* ---- Loader ----------------------------------------------------------- */

typedef struct zr_loader zr_loader;

/* One stream of a batch: the records of one store at the batch's indices,
 * in the order of the indices. */
typedef struct zr_column {
    const char *name;  /* the stream's name, as given to zr_loader_create */
    zr_store *store;   /* the store it was gathered from */
    int kind;          /* ZR_DENSE or ZR_RAGGED */
    void *data;        /* Dense: the records back to back, size * width bytes.
                        * Ragged: each record's shape prefix and payload, at
                        * offsets that are multiples of 8; read them through
                        * views. The buffer is 64-byte aligned. */
    uint64_t nbytes;   /* bytes of data in use */
    uint64_t width;    /* Dense: bytes per record; Ragged: 0 */
    zr_view *views;    /* Ragged: one view per record, pointing into data;
                        * Dense: NULL */
} zr_column;

/* A batch handed out by zr_loader_next. The loader owns it and every buffer
 * it points to; the caller gives it back with zr_batch_release. */
typedef struct zr_batch {
    uint64_t step;            /* the sampler step this batch is */
    size_t size;              /* records per stream: the sampler's batch */
    const uint64_t *indices;  /* the size record indices of this step */
    size_t nstreams;
    zr_column *streams;       /* one per stream, in creation order */
    void *aux;                /* the transform's own per-buffer state (below) */
} zr_batch;

/* A transform runs on a worker thread after every stream of a batch has
 * been gathered. It may change the bytes of any column in place (it must
 * not replace the pointers or change the sizes) and it may keep state of
 * its own in b->aux: aux starts NULL for each of the loader's batch
 * buffers and is kept while the buffer is recycled, so a transform can
 * allocate its output once per buffer rather than once per step; the
 * loader passes every non-NULL aux to aux_free when it is destroyed.
 * Return 0, or a negative code: zr_loader_next then returns that code for
 * this batch (a positive return counts as ZR_EINVAL). A transform must not
 * call zr_loader_next on its own loader (ZR_EINVAL). Transforms run on several batches at once when threads > 1. */
typedef int (*zr_transform_fn)(zr_batch *b, void *user);

/* How a loader samples and prefetches, a sized struct (loaderx.h). Start
 * from ZR_LOADER_OPTS_INIT: the defaults are not enough, mode and batch
 * must be set. */
typedef struct zr_loader_opts {
    size_t size;              /* sizeof(zr_loader_opts), as ZR_LOADER_OPTS_INIT sets it */
    int mode;                 /* ZR_SEQUENTIAL, ZR_IID, ZR_CYCLIC or ZR_QUASI */
    uint64_t batch;           /* records per batch on this rank */
    uint64_t seed;
    uint32_t rank;            /* this process's shard, in [0, world) */
    uint32_t world;           /* processes sharing each global batch; 0 means 1 */
    uint64_t start_step;      /* the first step zr_loader_next returns */
    unsigned depth;           /* batches prepared ahead of the caller; 0 means 2 */
    unsigned threads;         /* worker threads; 0 means 1 */
    zr_transform_fn transform;            /* may be NULL */
    void *user;                           /* passed to transform and aux_free */
    void (*aux_free)(void *aux, void *user); /* may be NULL */
    uint64_t block;           /* ZR_QUASI: records per block; 0 means ZR_QUASI_BLOCK */
    uint64_t window;          /* ZR_QUASI: blocks per window; 0 means ZR_QUASI_WINDOW */
} zr_loader_opts;

#define ZR_LOADER_OPTS_INIT {.size = sizeof(zr_loader_opts)}

/* Largest depth and number of worker threads a loader accepts. */
#define ZR_LOADER_MAX_DEPTH 1024
#define ZR_LOADER_MAX_THREADS 256

/*
 * Create a loader over nstreams named streams: stores[k] is read under the
 * name names[k] (names are copied and must be distinct). Stores of both
 * kinds may be mixed; they must all hold the same number of records, which
 * becomes the sampler's index space. The stores stay the caller's: they
 * must remain open, and must not be the target of zr_delete or zr_compact,
 * until the loader is destroyed (records appended meanwhile are not
 * sampled).
 *
 * The loader draws step after step from a sampler built from opts with
 * n = the streams' length, gathers every stream at the step's indices,
 * runs the transform, and keeps up to depth batches ready on its worker
 * threads. It never ends: there is no epoch and no last batch. Each worker
 * gather fans out over the library's thread pool, so one worker is often
 * enough unless the transform is heavy. The depth + 1 batch buffers of the
 * steady state (depth prepared, one held by the caller) are made here,
 * their Dense pages faulted in, so that the first steps of a run do not
 * pay for them.
 *
 * Errors: ZR_EINVAL (NULL argument, no streams, duplicate name, streams of
 * different lengths, empty streams, a sampler parameter out of range,
 * depth or threads over their limits, an opts size refused as loaderx.h's
 * "Sized structs" says), ZR_ENOMEM, ZR_EIO (a thread could not be
 * started). On failure *out is NULL.
 */
ZR_API int zr_loader_create(zr_loader **out, zr_store *const *stores, const char *const *names,
                            size_t nstreams, const zr_loader_opts *opts);

/*
 * Wait for the batch of the next step and hand it to the caller in *out.
 * Steps come in order, one per call, starting at opts.start_step: the batch
 * of step k always holds the sampler's indices for step k, however many
 * workers prefetch. The caller reads (and may modify) the batch until it
 * passes it to zr_batch_release; it may hold several batches at once, at
 * the cost of one extra batch buffer each.
 *
 * A failure while preparing a step (a gather error such as ZR_ECORRUPT or
 * ZR_ERANGE, the transform's code, ZR_ENOMEM) is returned by the call that
 * would have handed out that step, with its message in zr_last_error() on
 * the calling thread naming the stream and step; *out is then NULL and that
 * step is consumed, so the next call returns the following step. To retry
 * a failed step, create a loader with start_step set to it.
 *
 * Step UINT64_MAX is the last: the call after it returns ZR_ERANGE (and
 * zr_loader_step stays at UINT64_MAX).
 *
 * Thread rules: one thread at a time may call zr_loader_next on a loader;
 * a second thread that calls it while the first waits gets ZR_EBUSY.
 */
ZR_API int zr_loader_next(zr_loader *ld, zr_batch **out);

/* Give a batch back to its loader, whose workers reuse its buffers.
 * Accepts NULL; a second release of the same batch before the loader hands
 * it out again does nothing. May be called from any thread, but not after
 * the loader is destroyed. */
ZR_API void zr_batch_release(zr_batch *b);

/* The column of b named name, or NULL if there is none. Thread-safe. */
ZR_API zr_column *zr_batch_column(zr_batch *b, const char *name);

/* The step the next zr_loader_next call will return: the step to resume
 * from (as start_step) to continue exactly where this loader stands.
 * Call it from the thread that calls zr_loader_next. */
ZR_API uint64_t zr_loader_step(const zr_loader *ld);

/* The sampler the loader draws from, for zr_sampler_batch and
 * zr_sampler_get_info (not zr_sampler_free). Valid until
 * zr_loader_destroy. */
ZR_API const zr_sampler *zr_loader_sampler(const zr_loader *ld);

/* Stop the workers, wait for the ones busy with a batch to finish their
 * current gather or transform, and free everything: the buffers in flight
 * and also every batch the caller still holds (those must not be used or
 * released afterwards). Accepts NULL. Must not run concurrently with any
 * other call on the loader. */
ZR_API void zr_loader_destroy(zr_loader *ld);

#endif /* LOADERX_LOADER_H */

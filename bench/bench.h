/*
 * bench.h: the pieces of the engine benchmark (zrbench) and the interface
 * between them: workloads (the records and the index plans every backend
 * receives), backends (a way to store the records and gather a batch
 * back), a small thread team for the in-memory limits, and timing.
 */
#ifndef ZR_BENCH_H
#define ZR_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BENCH_BATCH 256
#define BENCH_MAX_NDIM 3

/* One workload: every record back to back in one buffer, and the index
 * plan (nbatches batches of `batch` indices drawn with replacement). */
struct workload {
    const char *name;   /* "dense-vision", "ragged-vision", ... */
    const char *title;  /* a heading for the report */
    bool ragged;
    const char *dtype;  /* NumPy spelling, "|u1" or "<i4" */
    uint32_t itemsize;
    uint32_t ndim;      /* Dense: item ndim; Ragged: every record's ndim */
    uint64_t item_shape[BENCH_MAX_NDIM]; /* Dense only */
    uint64_t width;     /* Dense: bytes per record; Ragged: 0 */

    size_t n;           /* records */
    uint8_t *data;      /* all payloads, back to back */
    uint64_t *off;      /* n + 1 payload offsets into data */
    uint64_t *shape;    /* Ragged: n * ndim dimensions */
    uint64_t logical;   /* payload bytes of all records */

    size_t batch, nbatches;
    uint64_t *plan;     /* nbatches * batch indices */
    uint64_t plan_logical; /* payload bytes returned by the whole plan */
    uint64_t plan_paged;   /* the same, each record rounded up to 4 KiB pages */

    char note[1024];    /* how the data was made, for the report */
};

static inline const uint8_t *wl_rec(const struct workload *w, size_t k)
{
    return w->data + w->off[k];
}

static inline uint64_t wl_bytes(const struct workload *w, size_t k)
{
    return w->off[k + 1] - w->off[k];
}

/* Ragged records as the store holds them: an 8 * (1 + ndim) byte shape
 * prefix, then the payload. */
static inline uint64_t wl_prefix(const struct workload *w)
{
    return w->ragged ? 8 * (1 + (uint64_t)w->ndim) : 0;
}

/* Sizes of the workloads; --quick shrinks them. */
struct sizes {
    size_t images;       /* records of each vision workload */
    size_t tokens;       /* records of each token workload */
    size_t vision_batches, token_batches;
    uint64_t bytes;      /* if not 0: each workload has as many records as
                          * make this many payload bytes (images and tokens
                          * are then ignored; the cold benchmark's stores) */
};

/* Build the four workloads. The image workloads are generated from seed
 * (on every CPU, through the thread team below); the token workloads come
 * from the text corpus (see workloads.c). Each returns 0 or -1 with a
 * message on stderr. */
int wl_dense_vision(struct workload *w, const struct sizes *sz, uint64_t seed);
int wl_ragged_vision(struct workload *w, const struct sizes *sz, uint64_t seed);
/* Both token workloads share one read of the corpus; either may be NULL. */
int wl_tokens(struct workload *dense, struct workload *ragged, const struct sizes *sz,
              uint64_t seed, char *corpus_note, size_t note_len);
void wl_free(struct workload *w);

/* What a gather hands back. Dense backends fill buf with the records back
 * to back; Ragged backends also fill, for each record k, a pointer to its
 * payload, its byte count and its shape (ndim entries at shape + k*ndim). */
struct batch_out {
    uint8_t *buf;
    const uint8_t **rec;
    uint64_t *bytes;
    uint64_t *shape;
};

/* A backend: one row of a table. */
struct backend {
    const char *name;
    int threads;          /* threads it gathers with */
    bool in_ram;          /* a limit: the footprint is RAM, not disk */
    bool write_once;      /* too slow to write more than once */
    bool no_write;        /* its "write" copies another row's store: not a rate */
    bool many_files;      /* its write creates a file per record (zrbench drops the
                           * clean caches first, see fresh_inodes) */
    const struct backend_ops *ops;
    void *state;
    const char *dir;      /* its folder (stores live here) */
    const char *peer_dir; /* zstd limits: the folder of the store whose frames they mirror */
    char note[512];       /* anything the report should say about this row */
    /* A backend whose gather runs in another process (NumPy) times the
     * gather itself and leaves the seconds here; the harness then uses
     * them instead of its own clock, which would include the hand-over. */
    bool self_timed;
    double inner_seconds;
};

struct backend_ops {
    /* Optional, untimed, once before the writes: set up what a write
     * reuses (the limits allocate and touch their RAM here). */
    int (*setup)(struct backend *b, const struct workload *w);
    /* Store every record of w (the timed write; may run several times). */
    int (*write)(struct backend *b, const struct workload *w);
    /* Get ready to gather (untimed): open, allocate batch buffers. */
    int (*prepare)(struct backend *b, const struct workload *w);
    /* Gather idx[0..n) into out. */
    int (*gather)(struct backend *b, const uint64_t *idx, size_t n, struct batch_out *out);
    /* Bytes the records occupy: allocated disk blocks, or RAM for limits. */
    uint64_t (*footprint)(struct backend *b);
    /* Release everything (files are left to the harness). */
    void (*release)(struct backend *b);
};

/* The rows, by kind. threads 0 means all online CPUs. */
enum backend_kind {
    BK_ZRECORD_RAW,
    BK_ZRECORD_ZSTD,
    BK_ZRECORD_ZSTDICT,
    BK_MEMCPY_LIMIT,
    BK_ZSTD_LIMIT,
    BK_ZSTD_DICT_LIMIT,
    BK_ZRECORDFS_RAW,        /* per-record files of the zrecord-raw store, mounted */
    BK_ZRECORDFS_ZSTD,       /* the same over the zrecord-zstd store */
    BK_ZRECORDFS_GATHER_RAW, /* .gather of the zrecord-raw store, mounted */
    BK_ZRECORDFS_GATHER_ZSTD,
    BK_NPY_MMAP_RAW,         /* Dense only: one .npy, mapped, memcpy gather */
    BK_NUMPY_FANCY_RAW,      /* Dense only: np.load(mmap_mode='r')[idx] in python3 */
    BK_FILES_RAW,            /* one file per record on the local disk */
    BK_SQUASHFUSE_RAW,       /* those files in an uncompressed squashfs image */
    BK_SQUASHFUSE_ZSTD,      /* ... in a zstd squashfs image */
    BK_LMDB_RAW,
    BK_HDF5_RAW,
    BK_HDF5_GZIP,
    BK_SQLITE_RAW,
    BK_KIND_COUNT
};
int backend_init(struct backend *b, enum backend_kind kind, int threads, const char *dir,
                 const char *peer_dir);

/* The constructors of the rows in the be_*.c files; backend_init calls
 * them after filling b->dir, b->peer_dir and b->threads. */
int be_zrecordfs_init(struct backend *b, enum backend_kind kind);
int be_npy_init(struct backend *b, enum backend_kind kind);
int be_numpy_init(struct backend *b, enum backend_kind kind);
int be_files_init(struct backend *b, enum backend_kind kind);
int be_squashfuse_init(struct backend *b, enum backend_kind kind);
int be_lmdb_init(struct backend *b, enum backend_kind kind);
int be_hdf5_init(struct backend *b, enum backend_kind kind);
int be_sqlite_init(struct backend *b, enum backend_kind kind);

/* A team of threads for the limits: run fn(ctx, k) for k in [0, nshards)
 * on `threads` threads (the caller is one of them). */
struct team;
struct team *team_get(int threads);
void team_run(struct team *t, size_t nshards, void (*fn)(void *ctx, size_t k), void *ctx);
void team_shutdown(void);

/* A large buffer (records, frames, batches): 2 MiB-aligned and advised
 * for transparent huge pages, the same for every row. Free with free(). */
void *big_alloc(size_t n);

/* malloc that ends the program on failure (the benchmark has no use for
 * a half-made row). */
void *bench_xmalloc(size_t n);

/* A batch buffer from big_alloc, touched once so that page faults stay
 * out of the timed gathers. */
uint8_t *bench_batch_alloc(size_t n);

/* The largest number of bytes any planned batch (or any batch of the
 * validation sweep) needs when each record takes its payload plus extra
 * bytes, rounded up to 8. */
uint64_t bench_max_batch_bytes(const struct workload *w, uint64_t extra);

/* How many blocks a batch of n records and `bytes` bytes is split into
 * over `threads` threads (none under 64 KiB), and where the cuts fall for
 * blocks of about equal bytes (end_bytes: running totals). */
size_t bench_block_count(int threads, size_t n, uint64_t bytes);
void bench_split_bytes(const uint64_t *end_bytes, size_t n, size_t parts, size_t *cut);

/* Ragged records framed as the zrecord store holds them, for the stores
 * that keep one value per record (LMDB, SQLite, per-record files of the
 * squashfs image): [u64 ndim][u64 dims...][payload], little-endian. */
static inline uint64_t bench_frame_size(const struct workload *w, size_t k)
{
    return wl_prefix(w) + wl_bytes(w, k);
}
void bench_frame(const struct workload *w, size_t k, uint8_t *dst);
/* Check a framed record of len bytes against the workload's dtype and
 * ndim and hand it out as record k of o. Returns 0 or -1. */
int bench_unframe(const struct workload *w, const uint8_t *src, uint64_t len,
                  struct batch_out *o, size_t k);

/* NPY version 1.0 (be_npy.c). npy_header writes the header of an array of
 * dtype and shape into buf (NPY_HEADER_MAX bytes) and returns its length,
 * a multiple of 64, so the data after it stays aligned. npy_parse reads a
 * header (any version-1.0 header NumPy or zrecordfs writes) and returns
 * its length and the shape, or 0 if it is not one. */
#define NPY_HEADER_MAX 256
size_t npy_header(char *buf, const char *dtype, const uint64_t *shape, uint32_t ndim);
size_t npy_parse(const uint8_t *p, size_t len, const char *dtype, uint64_t *shape,
                 uint32_t maxdim, uint32_t *ndim);

/* One file per record (be_files.c): record i is the file "i" (Dense: its
 * bytes) or "i.npy" (Ragged: an NPY file with its shape). The reader
 * opens, reads and closes each file of a batch in order, on one thread. */
int perfile_write(const struct workload *w, const char *dir);
struct perfile {
    const struct workload *w;
    int dirfd;
    uint8_t *buf;
    uint64_t cap;
};
int perfile_open(struct perfile *p, const struct workload *w, const char *dir);
int perfile_gather(struct perfile *p, const uint64_t *idx, size_t n, struct batch_out *o);
void perfile_close(struct perfile *p);

/* Run a program and wait for it; 0 if it exited with status 0 (its
 * output goes to stderr). Mount points: bench_mount runs a command that
 * mounts on mnt and returns 0 once mnt is a different file system;
 * bench_unmount takes it off again (fusermount3 -u) and waits until it is. */
int bench_exec(const char *const argv[]);
int bench_mount(const char *const argv[], const char *mnt);
void bench_unmount(const char *mnt);

/* Monotonic seconds. */
double now_seconds(void);

/* Allocated blocks (st_blocks * 512) of the regular files in dir. */
uint64_t dir_allocated(const char *dir);

/* Seeded generators. */
uint64_t splitmix64(uint64_t *state);
/* Uniform in [0, n), unbiased. */
uint64_t rng_below(uint64_t *state, uint64_t n);

#endif

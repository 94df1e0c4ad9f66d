/*
 * cold.h: the pieces of the cold-read benchmark (bench/coldbench) that
 * talk to the system rather than to a store: dropping the page cache,
 * counting the bytes the disk delivered, running fio for the device's own
 * limit, reading record files with several readers, and the record
 * checksums that every row's bytes are checked against.
 */
#ifndef ZR_COLD_H
#define ZR_COLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bench/bench.h"

/* Write the dirty pages and drop the clean page cache, dentries and inodes
 * (sync; echo 3 > /proc/sys/vm/drop_caches). Returns 0, or -1 with a
 * message when the file cannot be written (not root). */
int cold_drop_caches(void);
/* Read every record table (.loc file) of the store in dir, so that its
 * pages are cached. Returns 0 or -1. */
int cold_cache_tables(const char *dir);

/* The block device that holds a folder, as /proc/diskstats names it. */
struct cold_device {
    unsigned major, minor;
    char name[64];
};
/* Find the device of dir (its st_dev in /proc/diskstats). Returns 0 or -1. */
int cold_device_of(const char *dir, struct cold_device *d);
/* Bytes read from the device since boot: its sectors read (the sixth
 * field of its /proc/diskstats line) times 512, whoever read them. */
uint64_t cold_device_read(const struct cold_device *d);
/* A queue setting of the device (or of the disk a partition is on) from
 * /sys/block/NAME/queue/FILE, into buf; "?" when there is none. */
void cold_device_queue(const struct cold_device *d, const char *file, char *buf, size_t n);

/* Bytes that process pid caused to be read from storage (read_bytes of
 * /proc/PID/io, all its threads); 0 when that cannot be read. */
uint64_t cold_proc_read(pid_t pid);
/* The process serving the FUSE mount at mnt: the one whose command line
 * ends with mnt. 0 when none is found. */
pid_t cold_mount_daemon(const char *mnt);

/* One fio job: random O_DIRECT reads of bs bytes at queue depth qd,
 * through io_uring, of at most io_size bytes or seconds, whichever ends
 * first. */
struct cold_fio {
    uint64_t bs;
    int qd;
    bool buffered;     /* through the page cache (dropped first), not O_DIRECT */
    double mibs, iops;
    double lat_us;     /* mean completion latency */
    uint64_t bytes;    /* read */
    char cmd[1024];    /* the command line, for the report */
};
/* Run fio on file (read-only: --readonly). Returns 0 or -1. */
int cold_fio_run(const char *file, uint64_t io_size, int seconds, uint64_t seed,
                 struct cold_fio *f);

/* Record checksums: a 64-bit hash of a record's bytes; Ragged records
 * hash their payload with a seed made from their shape, so a record with
 * the right bytes and a wrong shape does not match. */
/* Bytes of n rounded up to whole 4 KiB pages: the least a disk reads to
 * deliver a record of n bytes, the unit the read amplification counts. */
static inline uint64_t cold_pages(uint64_t n)
{
    return (n + 4095) / 4096 * 4096;
}

uint64_t cold_hash(const void *p, size_t n, uint64_t seed);
uint64_t cold_shape_seed(const uint64_t *shape, uint32_t ndim);
/* The checksum of record k of w, from its bytes in memory. */
uint64_t cold_record_hash(const struct workload *w, size_t k);

/* Reading record files (one file per record, named as bench/be_files.c
 * names them: "i", or "i.npy" for Ragged records) with `readers` threads,
 * each taking every readers-th file of idx in order: open, read to end of
 * file into its own buffer, close. With check (n entries), each file's
 * checksum is stored there (untimed passes only: hashing is not part of
 * a reader's work). Returns 0 or -1; *seconds is the wall time from the
 * readers' start to the last one's end, *bytes what they read. */
int cold_read_files(const struct workload *w, const char *dir, const uint64_t *idx, size_t n,
                    int readers, uint64_t *check, double *seconds, uint64_t *bytes);

/* Sleep until the monotonic clock reaches t (seconds, as now_seconds). */
void cold_sleep_until(double t);

/* ---- The benchmark (coldrun.c measures, coldbench.c reports) -------- */

/* The stores of one workload, in its folder. */
enum cold_store { ST_RAW, ST_ZSTD, ST_LMDB, ST_NPY, ST_FILES, ST_COUNT };
extern const char *const COLD_STORE_DIRS[ST_COUNT];

struct cold_opts {
    bool quick;
    uint64_t size;            /* payload bytes of each workload's records */
    const char *only;         /* workloads and parts, or NULL for all */
    const char *stores;       /* folder that keeps the stores between runs, or NULL */
    const char *dir;          /* where a run without --stores makes them */
    size_t vision_batches, token_batches;
    int passes;               /* cold passes per row (median) */
    double step_ms;           /* the loader's step; 0: chosen per store */
    unsigned depth;           /* the loader's depth; 0: the library's default */
    int fio_seconds;
    int settle;               /* seconds of quiet after writing stores */
    size_t fs_files;          /* record files read by the file rows */
    uint64_t seed;
};

/* One timed pass of a row. */
struct cold_meas {
    double secs;              /* all batches (or files, or steps) */
    double first;             /* the first batch's latency */
    uint64_t dev, proc;       /* bytes read: the device, and the row's processes */
};

struct cold_row {
    char name[64];
    int threads;
    const char *part;         /* "gather", "loader", "files" */
    bool valid;
    struct cold_meas cold, warm;
    /* The zrecord-raw row: its cold rate over that of a fio job (queue
     * depth 32) run just before each cold pass, the median over the
     * passes (MiB/s, or records/s over IOPS for the tokens); 0: none. */
    double paired;
    uint64_t gathered;        /* logical bytes one pass returns */
    uint64_t paged;           /* the same, each record rounded up to 4 KiB pages */
    size_t recs;              /* records one pass returns */
    size_t batches;
    double step;              /* loader: the simulated step, seconds */
    char note[256];
};

#define COLD_MAX_ROWS 32

struct cold_wl {
    const char *name;
    struct workload w;        /* sizes, shapes and the plan; records only while building */
    uint64_t *hash;           /* each record's checksum */
    char *dir;                /* its stores */
    bool temporary;           /* made by this run, removed at its end */
    bool reused;              /* taken from the --stores folder */
    bool has[ST_COUNT];
    double build_seconds;
    uint64_t footprint[ST_COUNT];
    uint64_t chunk_bytes[2];  /* raw, zstd: the largest chunk file (fio's file) */
    char chunk[2][4096];
    uint64_t plan_stored[2];  /* stored bytes of the plan's records: raw; zstd in 4 KiB pages */
    double mean_stored[2];    /* stored bytes per record over the store */
    char note[1024], corpus[1024];
    /* fio before the rows and after them: [round][raw, zstd][QD1, QD32,
     * QD32 buffered (raw only)]; the limit is the faster of the two rounds. */
    struct cold_fio fio[2][2][3];
    struct cold_fio limit[2][3];
    int fio_rounds;
    struct cold_row rows[COLD_MAX_ROWS];
    size_t nrows;
};

bool cold_listed(const char *list, const char *name);

/* coldstores.c: the stores, their facts and the plan. */
char *cold_path(const char *a, const char *b); /* "a/b", malloc'd */
void cold_rmtree(const char *path);
void cold_settle(const char *dir);             /* syncfs of dir's file system */
bool cold_is_tokens(const char *name);
bool cold_is_ragged(const char *name);
int cold_ready_stores(const struct cold_opts *o, struct cold_wl *cws, size_t n, size_t k);
/* The plan's stored bytes, the mean stored record, the chunk files for
 * fio and the stores' footprints; read before the first drop. */
int cold_store_facts(struct cold_wl *c);
/* The plan: nbatches batches of the library's cyclic sampler. */
void cold_make_plan(struct cold_wl *c, size_t nbatches, uint64_t seed);
/* Name the folders of the workloads cws[0..n) (their names set by the
 * caller): under --stores, or under tmp for this run alone. */
void cold_place_stores(const struct cold_opts *o, struct cold_wl *cws, size_t n, const char *tmp);
/* Make ready the stores of cws[k] (reuse them, or make the records and
 * write them; one read of the corpus makes both token workloads, the
 * other one's records then wait in memory for its turn), then measure it:
 * fio, the gathers, the loader and the record files, as --only selects.
 * Returns 0 or -1. */
int cold_run_workload(const struct cold_opts *o, struct cold_wl *cws, size_t n, size_t k,
                      const struct cold_device *dev);
/* Remove a workload's stores if this run made them for itself. */
void cold_cleanup(struct cold_wl *c);
const struct cold_row *cold_find(const struct cold_wl *c, const char *part, const char *name,
                                 int threads);

/* Progress on stderr, stamped with the seconds since the start. */
void cold_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

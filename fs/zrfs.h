/*
 * zrfs.h: the types the modules of zrecordfs share. Private to fs/. Each
 * module declares its functions in a header of its own (fs/<module>.h),
 * so a file's includes name the modules it calls: base.h at the bottom,
 * ops.h, the dispatcher, on top, and no module calls one above it.
 *
 * Inode numbers are computed, never allocated: a folder of the scanned
 * tree is its position in the node array plus one (the root is 1), and a
 * file inside a store is (store number + 1) << 40 plus a slot, where slots
 * below 16 are control files and slot 16 + i is record i. So lookup and
 * getattr need no table, forget has nothing to do, and a store of 10^7
 * records costs no memory per record.
 */
#ifndef ZFS_ZRFS_H
#define ZFS_ZRFS_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include <loaderx/loaderx.h>

#include "fs/indexlist.h"

#define ZFS_STORE_SHIFT 40
#define ZFS_SLOT_MASK ((UINT64_C(1) << ZFS_STORE_SHIFT) - 1)
#define ZFS_RECORD_SLOT0 16
/* Largest record count a store may have to be shown. */
#define ZFS_MAX_RECORDS (ZFS_SLOT_MASK - ZFS_RECORD_SLOT0)
/* Largest number of stores in one mount. */
#define ZFS_MAX_STORES ((UINT32_C(1) << (64 - ZFS_STORE_SHIFT - 1)) - 1)

/* The control files, by slot. */
enum zfs_ctl {
    ZFS_CTL_STATS = 1,
    ZFS_CTL_GATHER = 2,
    ZFS_CTL_COMPACT = 3,
    ZFS_CTL_DELETE = 4,
};

/* Room for the NPY header of a record under -o npy: a store's longest
 * dtype and ZR_MAX_NDIM dimensions of 20 digits each fit. */
#define ZFS_NPY_MAX 1024

/* Limits on what .gather builds for one request and what a list holds. */
#define ZFS_LIST_MAX ((size_t)1 << 24)
#define ZFS_GATHER_MAX ((uint64_t)1 << 30)

/* The command line, after parsing. */
struct zfs_config {
    int rw;           /* -o rw: exclusive lock, .compact and .delete work */
    int npy;          /* -o npy: records are complete NPY files */
    int noopen;       /* -o noopen: OPEN answered with ENOSYS */
    int mt;           /* -o mt: the multi-threaded loop on any machine */
    char *spin_arg;   /* -o spin=USEC as given, or NULL */
    unsigned spin;    /* microseconds the one-thread loop polls (loop.c) */
    int foreground;
    int debug;
    char *ext;        /* suffix of record names; "" for none */
    char *root;       /* ROOT, made absolute */
    char *mnt_arg;    /* MOUNTPOINT as given (libfuse parses it too) */
};

/*
 * What is known about the payload size of Ragged records, which the record
 * table cannot tell (it knows the stored size, shape prefix included, but
 * not the prefix length). One 16-bit word per record, in pages allocated
 * when first touched: 0 means unknown, otherwise bits 0-5 hold ndim + 1
 * and bits 6-15 the NPY header length / 64 (0 without -o npy).
 */
#define ZFS_SIZES_PAGE 65536
struct zfs_sizes {
    _Atomic(_Atomic uint16_t *) *pages;
    size_t npages;
};

/*
 * The stored sizes of a remote Ragged store's records (record.c), which
 * its record table holds a GET away: fetched for 512 records at a time
 * (one request of 8 KiB of entries) and kept, one 32-bit word per record
 * (0: not fetched yet), in pages of ZFS_SIZES_PAGE records allocated when
 * first touched.
 */
struct zfs_stored {
    _Atomic(_Atomic uint32_t *) *pages;
    size_t npages;
};

/* One store shown as a folder. */
struct zfs_store {
    char *path;              /* absolute path of the store folder */
    zr_store *zs;            /* NULL when it failed to open */
    uint32_t sid;            /* position in zfs_fs.stores */
    fuse_ino_t dir_ino;      /* inode of its folder */
    int kind;                /* ZR_DENSE or ZR_RAGGED */
    uint64_t itemsize;
    uint64_t width;          /* Dense record bytes */
    /* Raw store on a read-only mount: records are served straight from
     * the library's mapping (zr_record_span), never decoded into a copy;
     * nothing can move them while the mount lives. */
    bool direct;
    /* In an object store: every read is a ranged GET, planned by the
     * library; a reader in index order gets the next records in one
     * gather (record.c, "Remote read-ahead"). */
    bool remote;
    uint8_t dense_hdr[ZFS_NPY_MAX]; /* Dense under -o npy: the header every record shares */
    size_t dense_hdr_len;
    /* Readers (record reads, gathers, stats) hold it shared; delete and
     * compact, which need the library handle to themselves, exclusive. */
    pthread_rwlock_t lock;
    /* Bumped by every delete, so decoded records cached before it are
     * never served after it. */
    _Atomic uint64_t gen;
    struct zfs_sizes sizes;
    struct zfs_stored stored; /* remote Ragged stores only */
    /* One past the record a reader last asked to load (0: none yet): a
     * read of the record after it starts the read-ahead (record.c). */
    _Atomic uint64_t next_read;
    /* The window of a raw store's records the read-ahead last asked the
     * disk for: [ra_until - ra_count, ra_until). Read-ahead thread only. */
    uint64_t ra_until, ra_count;
    /* Remote stores: the readers that read records in index order, as
     * far as the read-ahead can tell (record.c), guarded by ahead_mu. */
    pthread_mutex_t ahead_mu;
    struct zfs_stream {
        uint64_t next;       /* the record after the one it read last */
        uint64_t until;      /* records before it are fetched or being fetched */
        uint64_t used;       /* when it last read, for replacing the oldest */
        bool pending;        /* a window is being sized: ask for no other */
    } streams[8];
    uint64_t stream_tick;
    pthread_mutex_t ctl_mu;  /* guards the two texts below */
    char *stats_json;        /* the .stats text, built on first use */
    size_t stats_len;
    char *compact_json;      /* the .compact text: the last compaction */
    size_t compact_len;
    uint64_t ncompactions;   /* compactions run through this mount */
    /* The .gather handles opened with O_DIRECT that have a batch written
     * or being read, linked through zfs_handle.gnext, guarded by
     * gsize_mu. The kernel keeps one size for .gather, and an O_DIRECT
     * read stops at it, so the size shown is the largest end among them
     * (see gather.c). */
    pthread_mutex_t gsize_mu;
    struct zfs_handle *gsized;
    uint64_t ghwm;           /* at least every size the kernel may hold for .gather */
    struct stat st;          /* owner and times of the store folder */
    _Atomic unsigned nfailures; /* records that failed to decode, for the log */
};

/* One folder of the scanned tree. */
struct zfs_node {
    char *name;              /* folder name; "" for the root */
    fuse_ino_t parent;
    uint32_t *kids;          /* node positions, sorted by name */
    size_t nkids;
    struct zfs_store *store; /* non-NULL when the folder is a store */
    struct stat st;          /* owner and times of the real folder */
};

/* The whole mount. */
struct zfs_fs {
    struct zfs_config cfg;
    struct zfs_node *nodes;
    size_t nnodes;
    struct zfs_store **stores;
    size_t nstores;
    bool remote;             /* ROOT is an s3:// address */
    struct fuse_session *se;
    double timeout;          /* entry and attribute timeout, seconds */
    int nctl;                /* control files shown in a store folder */
    enum zfs_ctl ctl[4];     /* which, in listing order */
};

/* A decoded record, shared by the handles and the small cache that hold
 * references to it. Immutable once loaded. */
struct zfs_rec {
    _Atomic int refs;
    struct zfs_store *st;
    uint64_t index;
    uint64_t gen;
    bool ready;              /* loaded (or failed); guarded by the cache lock */
    uint64_t cost;           /* bytes it counts in the cache (record.c); cache lock */
    int err;                 /* negative errno when the load failed */
    void *buf;               /* what the library gathered */
    uint64_t stored;         /* its size: the record as stored, before compression */
    const uint8_t *payload;  /* the record's bytes (Ragged: after the prefix) */
    uint64_t payload_len;
    size_t hdr_len;          /* NPY header length under -o npy, else 0 */
    uint8_t hdr[ZFS_NPY_MAX];
};

/* What an open file is: a record, or one of the control files. */
enum zfs_htype { ZFS_H_RECORD = 1, ZFS_H_STATS, ZFS_H_GATHER, ZFS_H_COMPACT, ZFS_H_DELETE };

/* A record file: its number, and the decoded record once read. */
struct zfs_hrecord {
    uint64_t index;
    struct zfs_rec *rec;
};

/* .stats: the text as it was when the file was opened. */
struct zfs_hstats {
    char *text;
    size_t len;
};

/* .gather: the list being written, then the batch being read (gather.c). */
struct zfs_hgather {
    struct zfs_idxlist list; /* the list; by_ref: also the batch */
    char *buf;               /* the batch buffer, kept and reused */
    size_t cap;              /* its capacity in bytes */
    size_t len;              /* the batch's length in bytes */
    bool by_ref;             /* the batch is the records of list, in the mapping */
    bool serving;            /* a batch is ready and being read */
    /* The file offset at which the batch begins (where the last write of
     * its list ended), and whether the file was opened with O_DIRECT
     * (then the kernel may send the requests of one read(2) at once, and
     * stops reads at the file size). */
    uint64_t base;
    bool odirect;
    /* Replies in flight that read buf without holding h->mu, and the
     * condition a change of the batch waits on until they end. */
    unsigned pins;
    pthread_cond_t unpinned;
    /* With O_DIRECT: membership of st->gsized and the end the handle
     * needs the size to reach (guarded by st->gsize_mu). */
    bool sized;
    uint64_t end;
    struct zfs_handle *prev, *next;
};

/* .compact: the answer being read, and how far it has been read. */
struct zfs_hcompact {
    char *text;
    size_t len, pos;
    bool serving;
};

/* .delete: the list being written, applied at close. */
struct zfs_hdelete {
    struct zfs_idxlist list;
};

/* Per open file: the part every kind has, and that of its kind. */
struct zfs_handle {
    enum zfs_htype type;
    struct zfs_store *st;
    pthread_mutex_t mu;      /* one request at a time on this handle's state */
    /* The open file's reference, plus one per request that replies while
     * holding mu: once a reply is sent the reader may close, and RELEASE,
     * served on another thread, must not free the handle under it. */
    _Atomic int refs;
    union {
        struct zfs_hrecord record;
        struct zfs_hstats stats;
        struct zfs_hgather gather;
        struct zfs_hcompact compact;
        struct zfs_hdelete del;
    };
};

/* The inode number of a slot of store sid. */
static inline fuse_ino_t zfs_ino(uint32_t sid, uint64_t slot)
{
    return ((uint64_t)sid + 1) << ZFS_STORE_SHIFT | slot;
}

#endif

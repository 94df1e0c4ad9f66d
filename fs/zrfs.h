/*
 * zrfs.h: what the modules of zrecordfs share. Private to fs/.
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
#include "fs/npy.h"

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
    char dense_hdr[ZFS_NPY_MAX]; /* Dense under -o npy: the header every record shares */
    size_t dense_hdr_len;
    /* Readers (record reads, gathers, stats) hold it shared; delete and
     * compact, which need the library handle to themselves, exclusive. */
    pthread_rwlock_t lock;
    /* Bumped by every delete, so decoded records cached before it are
     * never served after it. */
    _Atomic uint64_t gen;
    struct zfs_sizes sizes;
    /* One past the record a reader last asked to load (0: none yet): a
     * read of the record after it starts the read-ahead (record.c). */
    _Atomic uint64_t next_read;
    /* The window of a raw store's records the read-ahead last asked the
     * disk for: [ra_until - ra_count, ra_until). Read-ahead thread only. */
    uint64_t ra_until, ra_count;
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
     * (see ctl.c). */
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
    int err;                 /* negative errno when the load failed */
    void *buf;               /* what the library gathered */
    uint64_t stored;         /* its size: the record as stored, before compression */
    const uint8_t *payload;  /* the record's bytes (Ragged: after the prefix) */
    uint64_t payload_len;
    size_t hdr_len;          /* NPY header length under -o npy, else 0 */
    char hdr[ZFS_NPY_MAX];
};

/* Per open file. */
enum zfs_htype { ZFS_H_RECORD = 1, ZFS_H_STATS, ZFS_H_GATHER, ZFS_H_COMPACT, ZFS_H_DELETE };
struct zfs_handle {
    enum zfs_htype type;
    struct zfs_store *st;
    uint64_t index;          /* ZFS_H_RECORD */
    pthread_mutex_t mu;      /* one request at a time on this handle's state */
    /* The open file's reference, plus one per request that replies while
     * holding mu: once a reply is sent the reader may close, and RELEASE,
     * served on another thread, must not free the handle under it. */
    _Atomic int refs;
    struct zfs_rec *rec;     /* ZFS_H_RECORD: the decoded record, once read */
    struct zfs_idxlist list; /* .gather and .delete: the list being written */
    char *out;               /* .stats, .gather, .compact: the answer */
    size_t outlen;
    char *gbuf;              /* .gather: the batch buffer, kept and reused */
    size_t gcap;             /* its capacity in bytes */
    bool by_ref;             /* .gather: the batch in h->list, served from the mapping */
    size_t outpos;           /* .compact: next byte to hand out */
    bool serving;            /* .gather, .compact: an answer is being read */
    /* .gather: the file offset at which the batch begins (where the last
     * write of its list ended), and whether the file was opened with
     * O_DIRECT (then the kernel may send the requests of one read(2) at
     * once, and stops reads at the file size). */
    uint64_t base;
    bool odirect;
    /* .gather: replies in flight that read h->gbuf without holding mu,
     * and the condition a change of the answer waits on until they end. */
    unsigned pins;
    pthread_cond_t unpinned;
    /* .gather with O_DIRECT: membership of st->gsized and the end the
     * handle needs the size to reach (guarded by st->gsize_mu). */
    bool sized;
    uint64_t gend;
    struct zfs_handle *gprev, *gnext;
};

/* ---- inode numbers ---- */

static inline fuse_ino_t zfs_ino(uint32_t sid, uint64_t slot)
{
    return ((uint64_t)sid + 1) << ZFS_STORE_SHIFT | slot;
}

/* ---- tree.c ---- */

/* Scan cfg->root and open every store found (read-only or read-write as
 * cfg says). Returns 0, or -1 after printing why to stderr (no store, a
 * store in use under -o rw, an unreadable ROOT). */
int zfs_tree_build(struct zfs_fs *fs);
void zfs_tree_free(struct zfs_fs *fs);
/* The node of a folder inode, or NULL. */
struct zfs_node *zfs_tree_node(struct zfs_fs *fs, fuse_ino_t ino);
/* The child folder called name, or NULL. */
struct zfs_node *zfs_tree_child(struct zfs_fs *fs, struct zfs_node *n, const char *name);

/* ---- record.c ---- */

/* Load record i of st (or take it from the cache); *out holds a
 * reference to drop with zfs_rec_put. Returns 0 or a negative errno
 * (-ENOENT past the end, -EIO when it fails to decode). */
int zfs_rec_get(struct zfs_fs *fs, struct zfs_store *st, uint64_t i, struct zfs_rec **out);
void zfs_rec_put(struct zfs_rec *r);
/* For a direct store (st->direct): fill *r, a caller-owned record that is
 * neither cached nor counted, with record i pointing into the mapping.
 * Returns 0 or a negative errno (-ENOENT past the end). */
int zfs_rec_span(struct zfs_fs *fs, struct zfs_store *st, uint64_t i, struct zfs_rec *r);
/* The file size of record i and its stored size (for st_blocks). Dense
 * records and Ragged records seen before cost nothing; any other Ragged
 * record is decoded once. If may_decode is false and the size is unknown,
 * returns -EAGAIN. Otherwise 0 or a negative errno. */
int zfs_rec_size(struct zfs_fs *fs, struct zfs_store *st, uint64_t i, bool may_decode,
                 uint64_t *size, uint64_t *stored);
/* After a delete (caller holds st->lock exclusively): forget sizes and
 * decoded records of st. */
void zfs_rec_store_changed(struct zfs_store *st);
void zfs_sizes_free(struct zfs_sizes *z);
void zfs_rec_cache_clear(void);
/* A reader is about to read record i of st: when it read record i - 1
 * just before, have the read-ahead thread decode record i + 1 into the
 * cache (a raw store on a read-only mount: fault its pages of the mapping
 * in), so that a tool reading the files in order finds it ready. Cheap,
 * never blocks on a decode or the disk. */
void zfs_rec_ahead(struct zfs_fs *fs, struct zfs_store *st, uint64_t i);
/* The read-ahead thread: started after daemonizing, stopped before the
 * stores are freed. Without it zfs_rec_ahead does nothing. */
int zfs_ahead_start(void);
void zfs_ahead_stop(void);

/* ---- ctl.c ---- */

/* A copy of the .stats text (malloc'd) and its length. */
int zfs_stats_text(struct zfs_fs *fs, struct zfs_store *st, char **out, size_t *len);
/* The length of the .stats text. */
int zfs_stats_size(struct zfs_fs *fs, struct zfs_store *st, uint64_t *len);
/* Take len bytes of an index list written to .gather on h at file
 * offset off. The caller holds h->mu. */
int zfs_gather_write(struct zfs_fs *fs, struct zfs_handle *h, const char *buf, size_t len,
                     uint64_t off);
/* Answer a READ of up to size bytes at file offset off of .gather on h
 * (the caller does not hold h->mu). page_cache tells a read the kernel
 * makes to fill its page cache from one a reader makes. Returns 0 once
 * req has been answered, or a negative errno for the caller to reply
 * with. */
int zfs_gather_read(struct zfs_fs *fs, struct zfs_handle *h, fuse_req_t req, size_t size,
                    uint64_t off, bool page_cache);
/* The size .gather shows: the largest batch end any O_DIRECT handle of
 * st needs. When h is not NULL (a GETATTR carrying an open .gather),
 * h's list is ended and its batch prepared first, so that the size
 * covers it. Returns 0 or a negative errno (a bad list, a failed
 * gather). */
int zfs_gather_size(struct zfs_fs *fs, struct zfs_store *st, struct zfs_handle *h,
                    uint64_t *size);
/* Forget h's part in .gather's size; before a .gather handle is freed. */
void zfs_gather_release(struct zfs_handle *h);
/* A copy of the .compact text, and its length. */
int zfs_compact_text(struct zfs_store *st, char **out, size_t *len);
int zfs_compact_size(struct zfs_store *st, uint64_t *len);
/* Compact h's store; the next read of h gives the result. */
int zfs_compact_run(struct zfs_fs *fs, struct zfs_handle *h);
int zfs_compact_read(struct zfs_fs *fs, struct zfs_handle *h, size_t size, const char **p,
                     size_t *n);
int zfs_delete_write(struct zfs_fs *fs, struct zfs_handle *h, const char *buf, size_t len);
/* Delete the list written to h so far, if any, as one batch. */
int zfs_delete_commit(struct zfs_fs *fs, struct zfs_handle *h);

/* ---- notify.c ---- */

/* Start and stop the thread that passes invalidations to the kernel. */
int zfs_notify_start(struct zfs_fs *fs);
void zfs_notify_stop(void);
/* Tell the kernel that records changed[0..n) of st now hold other bytes,
 * that the names of records [new_len, old_len) are gone, and that the
 * store folder's listing and .stats changed. Returns when it is done. */
void zfs_notify_change(struct zfs_fs *fs, struct zfs_store *st, const uint64_t *changed,
                       size_t n, uint64_t new_len, uint64_t old_len);

/* ---- replies.c ---- */

/* Start n threads (at most 8) that send .gather's data replies for the
 * single-threaded loop; call after the process has daemonized. Returns 0
 * or a negative errno (the threads started before it still run). */
int zfs_replies_start(unsigned n);
/* Send what is queued, then stop the threads. Safe when none runs. */
void zfs_replies_stop(void);
/* Reply to req with iov[0..cnt) on a reply thread, or at once if none
 * runs, then call done(arg); what iov points to must stay valid until
 * done runs. Thread-safe. */
void zfs_reply_iov(fuse_req_t req, const struct iovec *iov, int cnt, void (*done)(void *),
                   void *arg);

/* ---- ops.c ---- */

/* Drop a reference to an open file's handle; the last one frees it. */
void zfs_handle_put(struct zfs_handle *h);
/* The operations table handed to fuse_session_new. */
const struct fuse_lowlevel_ops *zfs_lowlevel_ops(void);
/* The errno for a libloaderx status code: the one place they are mapped. */
int zfs_errno(int zr_code);
/* Format the name of record i (with the mount's suffix) into buf. */
void zfs_record_name(const struct zfs_fs *fs, uint64_t i, char *buf, size_t cap);

#endif

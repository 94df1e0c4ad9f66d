/*
 * cold.c: reading record files whose bytes are not in the page cache.
 *
 * A raw store on a read-only mount serves a record file from the library's
 * mapping (record.c): the kernel copies the reply out of it. When the
 * record is not cached, that copy page-faults on the loop's thread, and
 * each fault reads up to read_ahead_kb around its page, one fault at a
 * time: random record files then read far slower than plain files do
 * (doc/fs-benchmarks.md, "Cold reads"). A compressed store, or any store
 * on a read-write mount, decodes the record on the loop's thread, which
 * waits for the disk there too, so that a second reader waits for the
 * first one's disk read.
 *
 * So before a record file's read is served the usual way, the loop asks
 * whether the record's stored bytes are cached (zr_records_cached: one
 * cachestat(2), a microsecond or two). When they are, nothing changes:
 * the mapping, zero-copy. When they are not, the request goes to one of
 * these threads, and the loop goes back for the next request:
 *
 *   - A Dense raw record on a read-only mount is spliced from its chunk
 *     file (zr_record_extent) to the device: the loop first asks the disk
 *     for the record (POSIX_FADV_WILLNEED), so that the read is under way
 *     while a thread wakes up, and the thread's splice copies the pages to
 *     the reader's as they arrive, with no copy through this process. A
 *     read at a random offset reads only the record's pages; a stream of
 *     reads in order gets the kernel's read-ahead on the chunk file.
 *   - Any other record (Ragged, compressed, read-write mounts) is decoded
 *     by the library's gather (zfs_rec_get), which plans the reads of a
 *     handle whose files are not in memory (doc/cold-reads.md), and is
 *     then served as a decoded record is.
 *
 * A LOOKUP of a Ragged record needs its size, which is in the record (its
 * shape prefix): when the record or its table entry is not cached, a
 * thread reads the entry and the prefix, asks the disk for the rest of
 * the record (record.c), and answers the LOOKUP, so that several
 * readers' lookups wait for the disk at once rather than one after
 * another on the loop.
 *
 * Each thread waits for one read at a time, so THREADS readers' files are
 * read at once, which is what plain files on a disk give THREADS readers.
 * A decoded record is freed once its reply is sent, and a splice needs
 * only its thread's pipe (libfuse's, up to 1 MiB): nothing is kept.
 * Under the multi-threaded loop the request's own thread reads, since
 * libfuse already runs one per waiting request.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/base.h"
#include "fs/cold.h"
#include "fs/inode.h"
#include "fs/record.h"
#include "lib/workq.h"

/* Reads in flight at once (ZR_WORKQ_MAX_THREADS at most). */
#define THREADS 8
/* The most a cold read of a Dense record reads past the request. */
#define READ_MORE ((uint64_t)1 << 20)

struct job {
    struct zr_qitem item;
    struct zfs_fs *fs;
    fuse_req_t req;
    struct zfs_store *st;
    struct zfs_handle *h; /* NULL: a read without a handle (-o noopen) */
    uint64_t index;
    size_t size;
    off_t off;
    uint64_t slot; /* a LOOKUP of this slot; 0: a READ */
};

static struct zr_workq queue = ZR_WORKQ_INIT;
static bool running;

/* A reply of a memory piece (the NPY header) and a file piece: a
 * fuse_bufvec with room for two buffers (it declares one). */
union reply_bufs {
    struct fuse_bufvec v;
    unsigned char room[offsetof(struct fuse_bufvec, buf) + 2 * sizeof(struct fuse_buf)];
};

/* Bytes [off, off + size) of Dense raw record j->index, sent from its
 * chunk file; the reply is sent here. Returns 0 once sent, or a negative
 * errno for the caller to reply with. */
static int read_dense(const struct job *j)
{
    struct zfs_store *st = j->st;
    uint64_t hdr = st->dense_hdr_len, total = hdr + st->width;
    uint64_t start = (uint64_t)j->off;
    if (start >= total || j->size == 0) {
        fuse_reply_buf(j->req, NULL, 0);
        return 0;
    }
    uint64_t end = total - start < j->size ? total : start + j->size;
    union reply_bufs rb = {.v = FUSE_BUFVEC_INIT(0)};
    rb.v.count = 0;
    struct fuse_buf *bufs = rb.v.buf;
    if (start < hdr) {
        bufs[rb.v.count++] = (struct fuse_buf){
            .size = (size_t)((end < hdr ? end : hdr) - start),
            .mem = st->dense_hdr + start,
        };
    }
    const void *span = NULL;
    int rc = 0;
    pthread_rwlock_rdlock(&st->lock);
    if (end > hdr) {
        int fd;
        uint64_t at, size;
        int zrc = zr_record_extent(st->zs, j->index, &fd, &at, &size);
        if (zrc != 0) {
            fuse_log(FUSE_LOG_ERR, "zrecordfs: %s: record %llu: %s\n", st->path,
                     (unsigned long long)j->index, zr_last_error());
            rc = -zfs_errno(zrc);
        } else if (size != st->width) {
            rc = -EIO; /* the library checked the entry: never seen */
        } else {
            uint64_t p0 = (start > hdr ? start : hdr) - hdr, n = end - hdr - p0;
            bufs[rb.v.count++] = (struct fuse_buf){
                .size = (size_t)n,
                .flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY,
                .fd = fd,
                .pos = (off_t)(at + p0),
            };
            if (zr_record_span(st->zs, j->index, &span, &size) != 0)
                span = NULL;
        }
    }
    if (rc == 0) {
        /* The reply is spliced from the chunk file to the device
         * (FUSE_CAP_SPLICE_WRITE, asked for in op_init): the kernel
         * copies from the page cache to the reader's pages, where a
         * pread into a buffer and a write from it went through this
         * process (the write of a 128 KiB reply alone took 57-300 us).
         * libfuse falls back to a read and a write when it cannot
         * splice, and answers the request with the error itself when
         * both fail. A read-only mount keeps the descriptor valid. */
        fuse_reply_data(j->req, &rb.v, 0);
    }
    pthread_rwlock_unlock(&st->lock);
    /* The pages just read are cached but not mapped: the next read of
     * this record, served from the mapping, would take a page fault per
     * 16 pages, dear on a virtual machine (doc/cold-reads.md). Mapping
     * them now, after the reply, keeps that off the loop's thread. A
     * read-only mount's mapping stays valid (nothing deletes or
     * compacts). */
    if (span)
        zfs_populate(span, st->width);
    return rc;
}

/* Serve j: its reply is sent before this returns. */
static void serve(const struct job *j)
{
    struct zfs_store *st = j->st;
    struct zfs_rec *r = NULL;
    int rc;
    if (j->slot) {
        zfs_reply_slot_entry(j->fs, j->req, st, j->slot);
        /* The record whose size was read is cached, or on its way from
         * the disk, but not mapped: the READ that follows is served from
         * the mapping on the loop's thread, which would take a fault per
         * 16 pages there. Mapping it here waits for the rest of its
         * bytes off the loop. A READ that comes before they are all in
         * counts them cached (the kernel does) and waits for them on the
         * loop: sending it to a thread instead was slower, with one
         * reader and with four (doc/cold-reads.md). Only a record whose
         * pages are all in the
         * page cache is mapped (the size may have come from the table
         * alone, and a fault on a missing page reads megabytes around
         * it). */
        const void *span = NULL;
        uint64_t size = 0, i = j->index;
        pthread_rwlock_rdlock(&st->lock);
        if (!st->direct || zr_records_cached(st->zs, &i, 1) != 1 ||
            zr_record_span(st->zs, i, &span, &size) != 0)
            span = NULL;
        pthread_rwlock_unlock(&st->lock);
        if (span)
            zfs_populate(span, size);
        return;
    }
    if (st->direct && st->kind == ZR_DENSE) {
        rc = read_dense(j);
    } else {
        rc = j->h ? zfs_rec_hold(j->fs, j->h, &r) : zfs_rec_get(j->fs, st, j->index, &r);
        if (rc == 0)
            zfs_rec_reply(j->req, r, j->size, j->off);
        zfs_rec_put(r);
    }
    if (rc != 0)
        fuse_reply_err(j->req, -rc);
}

static void run(void *arg, struct zr_qitem *it)
{
    (void)arg;
    struct job *j = ZR_WORKQ_ENTRY(it, struct job, item);
    serve(j);
    zfs_handle_put(j->h);
    free(j);
}

int zfs_cold_start(void)
{
    int rc = zr_workq_start(&queue, THREADS, run, NULL);
    running = rc == 0;
    return rc;
}

void zfs_cold_stop(void)
{
    /* The requests still queued are answered before the threads go. */
    zr_workq_stop(&queue, true);
    running = false;
}

/* Ask the disk for bytes [off, off + size) of Dense raw record i of st,
 * and the rest of the record up to READ_MORE, without waiting. Called by
 * the loop before it hands the request on, so the disk read starts while
 * a cold thread wakes up (tens of microseconds on an idle virtual CPU:
 * doc/cold-reads.md), and the
 * splice in read_dense finds the pages on their way. The rest of the
 * record is asked for though the request may want less: the kernel may
 * ask for a file in pieces (its read-ahead window), and a read that
 * starts where the last one on the chunk file ended looks sequential to
 * the chunk's own read-ahead, which would then read far past the record
 * (measured: twice the bytes of random 147 KiB records). The caller
 * holds st->lock shared. */
static void start_dense(struct zfs_store *st, uint64_t i, size_t size, off_t off)
{
    uint64_t hdr = st->dense_hdr_len, start = (uint64_t)off;
    if (size == 0 || start >= hdr + st->width)
        return;
    uint64_t p0 = start > hdr ? start - hdr : 0;
    uint64_t want = st->width - p0 < READ_MORE ? st->width - p0 : READ_MORE;
    int fd;
    uint64_t at, n;
    if (want > 0 && zr_record_extent(st->zs, i, &fd, &at, &n) == 0 && n == st->width)
        posix_fadvise(fd, (off_t)(at + p0), (off_t)want, POSIX_FADV_WILLNEED);
}

/* Whether record i of st is not in the page cache; cached, or unknown (an
 * error the usual path reports), is not cold. For a read (size > 0) of a
 * Dense raw record on a read-only mount, the disk is asked for it at once
 * (start_dense). The store lock keeps a delete from moving the record
 * while the kernel is asked. */
static bool record_cold(struct zfs_store *st, uint64_t i, size_t size, off_t off)
{
    pthread_rwlock_rdlock(&st->lock);
    bool cold = i < zr_len(st->zs) && zr_records_cached(st->zs, &i, 1) == 0;
    if (cold && size > 0 && st->direct && st->kind == ZR_DENSE)
        start_dense(st, i, size, off);
    pthread_rwlock_unlock(&st->lock);
    return cold;
}

bool zfs_cold_read(struct zfs_fs *fs, fuse_req_t req, struct zfs_store *st, struct zfs_handle *h,
                   uint64_t i, size_t size, off_t off)
{
    if (!st->zs || !record_cold(st, i, size, off))
        return false;
    struct job *j = malloc(sizeof *j);
    if (!j)
        return false; /* served from the mapping: slower, never lost */
    *j = (struct job){.fs = fs, .req = req, .st = st, .h = h, .index = i, .size = size, .off = off};
    if (h)
        atomic_fetch_add(&h->refs, 1); /* the reply may outlive RELEASE */
    if (!running || !zr_workq_push(&queue, &j->item))
        run(NULL, &j->item); /* the multi-threaded loop: this thread reads */
    return true;
}

bool zfs_cold_lookup(struct zfs_fs *fs, fuse_req_t req, struct zfs_store *st, uint64_t slot)
{
    /* Under the multi-threaded loop the request's own thread may wait;
     * a remote store's lookups have their own read-ahead (record.c). */
    if (!running || !st->zs || st->remote || st->kind != ZR_RAGGED || slot < ZFS_RECORD_SLOT0)
        return false;
    uint64_t i = slot - ZFS_RECORD_SLOT0;
    if (!record_cold(st, i, 0, 0))
        return false;
    struct job *j = malloc(sizeof *j);
    if (!j)
        return false; /* answered on the loop: slower, never lost */
    *j = (struct job){.fs = fs, .req = req, .st = st, .index = i, .slot = slot};
    if (!zr_workq_push(&queue, &j->item)) {
        free(j);
        return false;
    }
    return true;
}

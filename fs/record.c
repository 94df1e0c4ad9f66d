/*
 * record.c: turning a record index into the bytes and the size of its
 * file, with as little decoding as possible.
 *
 * A record file's bytes are the record decoded whole by the library (the
 * public API has no partial read), so the decoded record is shared: each
 * open handle keeps a reference to the one it reads (a reader asking for
 * 4 KiB at a time never makes the daemon decode twice), and a small cache
 * of the most recently decoded records serves the requests that come
 * without a handle (-o noopen) and a read right after a stat of the same
 * record.
 *
 * Raw stores on read-only mounts skip all of that: their records are
 * served straight from the library's read-only mapping (zr_record_span),
 * so a read costs one copy, made by the kernel into the reader's buffer,
 * and nothing is cached here (the page cache already holds the bytes).
 *
 * Sizes: a Dense record's size is the store's record width. A Ragged
 * record's file holds its payload, without the shape prefix, and the
 * record table tells only the stored size (prefix included): the prefix
 * length depends on the record's ndim, which only the record itself
 * holds. So the first stat of a Ragged record decodes it once; the ndim
 * (and, under -o npy, the header length) is then kept in a compact
 * per-store table of 16-bit words, in 128 KiB pages allocated on first
 * touch. `ls -l` of a compressed Ragged store therefore costs one decode
 * per record the first time, and nothing afterwards.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/npyheader.h"
#include "fs/base.h"
#include "fs/loop.h"
#include "fs/record.h"
#include "lib/workq.h"

/* Decoded records kept for requests without a handle, and the records a
 * remote store's read-ahead fetched (at most REMOTE_STREAMS readers with
 * two windows each in flight). */
#define CACHE_SLOTS 256
/* What they may hold at most, in decoded bytes: past it the least
 * recently used are dropped. */
#define CACHE_BYTES ((uint64_t)128 << 20)
/* Records larger than this are handed to their reader but not cached. */
#define CACHE_MAX_RECORD ((uint64_t)64 << 20)
/* Decode failures logged per store; later ones only give EIO. */
#define MAX_LOGGED_FAILURES 8

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cache_cv = PTHREAD_COND_INITIALIZER;
static struct zfs_rec *slots[CACHE_SLOTS];
static uint64_t slot_used[CACHE_SLOTS];
static uint64_t cache_tick;
/* The bytes of the ready records in slots (each counts r->cost). */
static uint64_t cache_bytes;

/* The slot of record i of st as of gen, or -1. Under cache_mu. */
static int slot_find(const struct zfs_store *st, uint64_t i, uint64_t gen)
{
    for (int k = 0; k < CACHE_SLOTS; k++) {
        const struct zfs_rec *c = slots[k];
        if (c && c->st == st && c->index == i && c->gen == gen)
            return k;
    }
    return -1;
}

/* Empty slot k, dropping the slot's reference. Under cache_mu: the
 * reference dropped is never the last one of a record being loaded
 * (its loader holds one), and freeing a loaded one there is short. */
static void slot_drop(int k)
{
    struct zfs_rec *r = slots[k];
    if (!r)
        return;
    cache_bytes -= r->cost;
    r->cost = 0;
    slots[k] = NULL;
    slot_used[k] = 0;
    zfs_rec_put(r);
}

/* Put r, which holds a reference for the slot, into the empty or least
 * recently used slot. Returns the slot. Under cache_mu. */
static int slot_take(struct zfs_rec *r)
{
    int victim = 0;
    for (int k = 0; k < CACHE_SLOTS; k++) {
        if (!slots[k]) {
            victim = k;
            break;
        }
        if (slot_used[k] < slot_used[victim])
            victim = k;
    }
    slot_drop(victim);
    slots[victim] = r;
    slot_used[victim] = ++cache_tick;
    return victim;
}

/* A handle holds r from now on: its slot is the first to go, so that
 * the read-ahead's windows push out the records their readers have
 * taken, not those they have yet to read (a handle keeps its own
 * reference). Takes cache_mu. */
static void slot_demote(const struct zfs_rec *r)
{
    pthread_mutex_lock(&cache_mu);
    int k = slot_find(r->st, r->index, r->gen);
    if (k >= 0 && slots[k] == r)
        slot_used[k] = 0;
    pthread_mutex_unlock(&cache_mu);
}

/* r, in slot k, has loaded (rc: 0 or a negative errno): tell its
 * waiters, and account for its bytes, dropping the least recently used
 * records while the cache holds more than CACHE_BYTES. Failures are not
 * remembered (the next read tries again), and huge records would crowd
 * out everything else: they leave their slot. Under cache_mu. */
static void slot_ready(int k, struct zfs_rec *r, int rc)
{
    r->err = rc;
    r->ready = true;
    pthread_cond_broadcast(&cache_cv);
    if (k < 0 || slots[k] != r)
        return; /* evicted while it loaded */
    if (rc != 0 || r->payload_len > CACHE_MAX_RECORD) {
        slot_drop(k);
        return;
    }
    r->cost = r->payload_len + r->hdr_len;
    cache_bytes += r->cost;
    while (cache_bytes > CACHE_BYTES) {
        int lru = -1;
        for (int j = 0; j < CACHE_SLOTS; j++)
            if (j != k && slots[j] && slots[j]->cost && (lru < 0 || slot_used[j] < slot_used[lru]))
                lru = j;
        if (lru < 0)
            break;
        slot_drop(lru);
    }
}

static uint16_t sizes_get(struct zfs_sizes *z, uint64_t i)
{
    uint64_t p = i / ZFS_SIZES_PAGE;
    if (p >= z->npages)
        return 0;
    _Atomic uint16_t *page = atomic_load_explicit(&z->pages[p], memory_order_acquire);
    return page ? atomic_load_explicit(&page[i % ZFS_SIZES_PAGE], memory_order_relaxed) : 0;
}

static void sizes_set(struct zfs_sizes *z, uint64_t i, uint16_t v)
{
    uint64_t p = i / ZFS_SIZES_PAGE;
    if (p >= z->npages)
        return;
    _Atomic uint16_t *page = atomic_load_explicit(&z->pages[p], memory_order_acquire);
    if (!page) {
        _Atomic uint16_t *fresh = calloc(ZFS_SIZES_PAGE, sizeof *fresh);
        if (!fresh)
            return; /* only a cache: the size is found again next time */
        _Atomic uint16_t *expected = NULL;
        if (atomic_compare_exchange_strong(&z->pages[p], &expected, fresh)) {
            page = fresh;
        } else {
            free(fresh);
            page = expected;
        }
    }
    atomic_store_explicit(&page[i % ZFS_SIZES_PAGE], v, memory_order_relaxed);
}

static void sizes_clear(struct zfs_sizes *z)
{
    for (size_t p = 0; p < z->npages; p++)
        free(atomic_exchange(&z->pages[p], NULL));
}

void zfs_sizes_free(struct zfs_sizes *z)
{
    if (!z->pages)
        return;
    sizes_clear(z);
    free(z->pages);
    z->pages = NULL;
    z->npages = 0;
}

/* Records whose stored sizes one request fetches (remote Ragged). */
#define STORED_BLOCK 512

void zfs_stored_free(struct zfs_stored *z)
{
    for (size_t p = 0; z->pages && p < z->npages; p++)
        free(atomic_load(&z->pages[p]));
    free(z->pages);
    z->pages = NULL;
    z->npages = 0;
}

/* The page of z holding record i, allocated if it must be; NULL when
 * out of memory (then the sizes are fetched but not kept). */
static _Atomic uint32_t *stored_page(struct zfs_stored *z, uint64_t i)
{
    uint64_t p = i / ZFS_SIZES_PAGE;
    if (p >= z->npages)
        return NULL;
    _Atomic uint32_t *page = atomic_load_explicit(&z->pages[p], memory_order_acquire);
    if (!page) {
        _Atomic uint32_t *fresh = calloc(ZFS_SIZES_PAGE, sizeof *fresh);
        if (!fresh)
            return NULL;
        _Atomic uint32_t *expected = NULL;
        if (atomic_compare_exchange_strong(&z->pages[p], &expected, fresh)) {
            page = fresh;
        } else {
            free(fresh);
            page = expected;
        }
    }
    return page;
}

/* The stored sizes of records idx[0..n) of a Ragged store, as
 * zr_ragged_sizes gives them. A remote store's are taken from
 * st->stored, and the blocks of STORED_BLOCK records not there yet are
 * fetched whole (a request each): a random reader's record then costs
 * the requests of its gather alone, and a sequential one's sizes come a
 * block at a time. The caller holds st->lock shared. */
static int ragged_sizes(struct zfs_store *st, const uint64_t *idx, size_t n, uint64_t *sizes)
{
    if (!st->remote || !st->stored.pages)
        return zr_ragged_sizes(st->zs, idx, n, sizes);
    uint64_t len = zr_len(st->zs);
    for (size_t k = 0; k < n; k++) {
        uint64_t i = idx[k];
        if (i >= len)
            return zr_ragged_sizes(st->zs, idx, n, sizes); /* it says why */
        _Atomic uint32_t *page = stored_page(&st->stored, i);
        uint32_t v = page ? atomic_load_explicit(&page[i % ZFS_SIZES_PAGE],
                                                 memory_order_relaxed) : 0;
        if (v != 0) {
            sizes[k] = v;
            continue;
        }
        uint64_t b0 = i - i % STORED_BLOCK;
        uint64_t bn = len - b0 < STORED_BLOCK ? len - b0 : STORED_BLOCK;
        uint64_t bidx[STORED_BLOCK], bsz[STORED_BLOCK];
        for (uint64_t j = 0; j < bn; j++)
            bidx[j] = b0 + j;
        int zrc = zr_ragged_sizes(st->zs, bidx, (size_t)bn, bsz);
        if (zrc != 0)
            return zrc;
        /* A block never straddles a page: STORED_BLOCK divides it. */
        for (uint64_t j = 0; page && j < bn; j++)
            if (bsz[j] > 0 && bsz[j] <= UINT32_MAX)
                atomic_store_explicit(&page[(b0 + j) % ZFS_SIZES_PAGE], (uint32_t)bsz[j],
                                      memory_order_relaxed);
        sizes[k] = bsz[i - b0];
    }
    return 0;
}

static void log_failure(struct zfs_store *st, uint64_t i, const char *msg)
{
    unsigned k = atomic_fetch_add(&st->nfailures, 1);
    if (k < MAX_LOGGED_FAILURES)
        fuse_log(FUSE_LOG_ERR, "zrecordfs: %s: record %llu: %s%s\n", st->path,
                 (unsigned long long)i, msg,
                 k + 1 == MAX_LOGGED_FAILURES ? " (further failures in this store are not logged)"
                                              : "");
}

/* Fill r's payload (and NPY header) from a Ragged record's stored bytes
 * rec of size bytes: the view, the header, the size table. */
static int describe_ragged(struct zfs_fs *fs, struct zfs_rec *r, const void *rec, uint64_t size)
{
    struct zfs_store *st = r->st;
    zr_view v;
    int rc = zr_ragged_view(rec, size, st->itemsize, &v);
    if (rc != 0) {
        log_failure(st, r->index, zr_last_error());
        return -zfs_errno(rc);
    }
    r->payload = v.data;
    r->payload_len = v.nbytes;
    r->stored = size;
    if (fs->cfg.npy) {
        r->hdr_len = npy_format_header(zr_dtype(st->zs), v.shape, v.ndim, r->hdr, sizeof r->hdr);
        if (r->hdr_len == 0) {
            log_failure(st, r->index, "its shape does not fit an NPY header");
            return -EIO;
        }
    }
    sizes_set(&st->sizes, r->index, (uint16_t)((v.ndim + 1) | (r->hdr_len / 64) << 6));
    return 0;
}

int zfs_rec_span(struct zfs_fs *fs, struct zfs_store *st, uint64_t i, struct zfs_rec *r)
{
    r->st = st;
    r->index = i;
    r->hdr_len = 0;
    if (!st->zs)
        return -EIO;
    if (i >= zr_len(st->zs))
        return -ENOENT;
    const void *p;
    uint64_t size;
    int rc = zr_record_span(st->zs, i, &p, &size);
    if (rc != 0) {
        log_failure(st, i, zr_last_error());
        return -zfs_errno(rc);
    }
    if (st->kind == ZR_RAGGED)
        return describe_ragged(fs, r, p, size);
    r->payload = p;
    r->payload_len = r->stored = size;
    r->hdr_len = st->dense_hdr_len;
    memcpy(r->hdr, st->dense_hdr, st->dense_hdr_len);
    return 0;
}

/* Records of remote stores loaded one at a time, and windows fetched. */
static _Atomic uint64_t remote_singles, remote_windows, remote_window_records;

/* Decode record r->index into r. The caller holds st->lock shared. */
static int load(struct zfs_fs *fs, struct zfs_rec *r)
{
    struct zfs_store *st = r->st;
    uint64_t i = r->index;
    int rc;
    if (i >= zr_len(st->zs))
        return -ENOENT;
    if (st->remote)
        atomic_fetch_add_explicit(&remote_singles, 1, memory_order_relaxed);
    if (st->kind == ZR_DENSE) {
        if (!(r->buf = malloc(st->width ? st->width : 1)))
            return -ENOMEM;
        rc = zr_gather_dense(st->zs, &i, 1, r->buf);
        if (rc != 0)
            goto fail;
        r->payload = r->buf;
        r->payload_len = r->stored = st->width;
        r->hdr_len = st->dense_hdr_len;
        memcpy(r->hdr, st->dense_hdr, st->dense_hdr_len);
        return 0;
    }
    uint64_t size;
    const uint64_t zero = 0;
    rc = ragged_sizes(st, &i, 1, &size);
    if (rc != 0)
        goto fail;
    if (size > SIZE_MAX || !(r->buf = malloc(size)))
        return -ENOMEM;
    rc = zr_gather_ragged(st->zs, &i, 1, r->buf, &zero);
    if (rc != 0)
        goto fail;
    return describe_ragged(fs, r, r->buf, size);
fail:
    log_failure(st, i, zr_last_error());
    return -zfs_errno(rc);
}

int zfs_rec_get(struct zfs_fs *fs, struct zfs_store *st, uint64_t i, struct zfs_rec **out)
{
    *out = NULL;
    if (!st->zs)
        return -EIO;
    pthread_rwlock_rdlock(&st->lock);
    uint64_t gen = atomic_load(&st->gen);
    struct zfs_rec *r = NULL;
    int rc = 0;

    pthread_mutex_lock(&cache_mu);
    int k = slot_find(st, i, gen);
    if (k >= 0) {
        r = slots[k];
        slot_used[k] = ++cache_tick;
        atomic_fetch_add(&r->refs, 1);
        while (!r->ready)
            pthread_cond_wait(&cache_cv, &cache_mu);
        rc = r->err;
        pthread_mutex_unlock(&cache_mu);
        if (rc == -EAGAIN) {
            /* A remote read-ahead window that could not hold it has
             * left it to its reader (and left its slot). */
            pthread_rwlock_unlock(&st->lock);
            zfs_rec_put(r);
            return zfs_rec_get(fs, st, i, out);
        }
    } else if (!(r = calloc(1, sizeof *r))) {
        pthread_mutex_unlock(&cache_mu);
        rc = -ENOMEM;
    } else {
        /* One reference for the caller, one for the slot. Other readers
         * of the same record wait for this load instead of repeating it. */
        r->st = st;
        r->index = i;
        r->gen = gen;
        atomic_store(&r->refs, 2);
        k = slot_take(r);
        pthread_mutex_unlock(&cache_mu);

        rc = load(fs, r);

        pthread_mutex_lock(&cache_mu);
        slot_ready(k, r, rc);
        pthread_mutex_unlock(&cache_mu);
    }
    pthread_rwlock_unlock(&st->lock);
    if (rc != 0) {
        zfs_rec_put(r);
        return rc;
    }
    *out = r;
    return 0;
}

/* The size of a Ragged record file whose bytes are not cached needs only
 * the record's shape prefix: zr_record_extent reads its entry and, when
 * the prefix's pages are not cached, the prefix with small reads of
 * their own (a fault on the mapping would read megabytes around them),
 * unless the handle reads from memory, and the disk is asked for the
 * rest of the record without waiting. A LOOKUP is then answered after one small read
 * instead of the whole record's, and the rest arrives while the kernel
 * sends OPEN and READ (doc/cold-reads.md). Raw stores on read-only
 * mounts only (st->direct), whose files the mapping serves. */
static int ask_ragged(struct zfs_store *st, uint64_t i)
{
    pthread_rwlock_rdlock(&st->lock);
    int fd;
    uint64_t at, n;
    int rc = zr_record_extent(st->zs, i, &fd, &at, &n);
    if (rc == 0) {
        /* The pages zr_record_extent read: those of the prefix, at most
         * 8 * (1 + ZR_MAX_NDIM) bytes. */
        const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), pre = 8 * (1 + ZR_MAX_NDIM);
        uint64_t head = (at + (n < pre ? n : pre) + page - 1) / page * page;
        if (head < at + n)
            (void)posix_fadvise(fd, (off_t)head, (off_t)(at + n - head), POSIX_FADV_WILLNEED);
    } else {
        log_failure(st, i, zr_last_error());
    }
    pthread_rwlock_unlock(&st->lock);
    return rc == 0 ? 0 : -zfs_errno(rc);
}

int zfs_rec_size(struct zfs_fs *fs, struct zfs_store *st, uint64_t i, bool may_decode,
                 uint64_t *size, uint64_t *stored)
{
    if (!st->zs)
        return -EIO;
    int rc = 0;
    uint64_t phys = 0;
    uint16_t v = 0;
    if (st->remote && st->kind == ZR_RAGGED && i < zr_len(st->zs)) {
        /* The record table's entry would cost a GET of its own: the
         * record, which holds the size, is fetched instead, and the
         * read-ahead brings the next ones with it for a reader that
         * looks them up in order (ls -l, cp -r). */
        if (!may_decode)
            return -EAGAIN;
        zfs_rec_ahead(fs, st, i);
        struct zfs_rec *r;
        rc = zfs_rec_get(fs, st, i, &r);
        if (rc != 0)
            return rc;
        *size = r->hdr_len + r->payload_len;
        *stored = r->stored;
        zfs_rec_put(r);
        return 0;
    }
    pthread_rwlock_rdlock(&st->lock);
    if (i >= zr_len(st->zs)) {
        rc = -ENOENT;
    } else if (st->kind == ZR_DENSE) {
        *size = st->width + st->dense_hdr_len;
        *stored = st->width;
    } else {
        int zrc = zr_ragged_sizes(st->zs, &i, 1, &phys);
        if (zrc != 0) {
            log_failure(st, i, zr_last_error());
            rc = -zfs_errno(zrc);
        } else {
            v = sizes_get(&st->sizes, i);
        }
    }
    pthread_rwlock_unlock(&st->lock);
    if (rc != 0 || st->kind == ZR_DENSE)
        return rc;
    if (v != 0) {
        uint64_t ndim = (uint64_t)(v & 63) - 1, hdr = (uint64_t)(v >> 6) * 64;
        *size = phys - 8 * (1 + ndim) + hdr;
        *stored = phys;
        return 0;
    }
    *stored = phys;
    bool in_memory = true;
    if (st->direct) {
        pthread_rwlock_rdlock(&st->lock);
        in_memory = zr_records_cached(st->zs, &i, 1) != 0;
        pthread_rwlock_unlock(&st->lock);
    }
    if (st->direct && !in_memory) {
        if (!may_decode)
            return -EAGAIN;
        if ((rc = ask_ragged(st, i)) != 0)
            return rc;
        in_memory = true; /* its prefix, which the size needs */
    }
    if (st->direct && in_memory) {
        /* The prefix is in the mapping: reading it decodes nothing. */
        struct zfs_rec d;
        rc = zfs_rec_span(fs, st, i, &d);
        if (rc == 0)
            *size = d.hdr_len + d.payload_len;
        return rc;
    }
    if (!may_decode)
        return -EAGAIN;
    struct zfs_rec *r;
    rc = zfs_rec_get(fs, st, i, &r);
    if (rc != 0)
        return rc;
    *size = r->hdr_len + r->payload_len;
    *stored = r->stored;
    zfs_rec_put(r);
    return 0;
}

void zfs_rec_reply(fuse_req_t req, const struct zfs_rec *r, size_t size, off_t off)
{
    uint64_t total = r->hdr_len + r->payload_len;
    uint64_t start = (uint64_t)off;
    if (start >= total || size == 0) {
        fuse_reply_buf(req, NULL, 0);
        return;
    }
    uint64_t end = total - start < size ? total : start + size;
    struct iovec iov[2];
    int cnt = 0;
    if (start < r->hdr_len) {
        uint64_t hend = end < r->hdr_len ? end : r->hdr_len;
        iov[cnt].iov_base = (void *)(r->hdr + start);
        iov[cnt++].iov_len = (size_t)(hend - start);
    }
    if (end > r->hdr_len) {
        uint64_t p0 = (start > r->hdr_len ? start : r->hdr_len) - r->hdr_len;
        iov[cnt].iov_base = (void *)(r->payload + p0);
        iov[cnt++].iov_len = (size_t)(end - r->hdr_len - p0);
    }
    fuse_reply_iov(req, iov, cnt);
}

int zfs_rec_hold(struct zfs_fs *fs, struct zfs_handle *h, struct zfs_rec **out)
{
    struct zfs_hrecord *hr = &h->record;
    int rc = 0;
    *out = NULL;
    pthread_mutex_lock(&h->mu);
    if (hr->rec && hr->rec->gen != atomic_load(&h->st->gen)) {
        /* The store changed under this handle (a delete): its record
         * number now names other bytes. */
        zfs_rec_put(hr->rec);
        hr->rec = NULL;
    }
    if (!hr->rec) {
        zfs_rec_ahead(fs, h->st, hr->index);
        rc = zfs_rec_get(fs, h->st, hr->index, &hr->rec);
        if (rc == 0 && h->st->remote)
            slot_demote(hr->rec);
    }
    if (rc == -ENOENT)
        rc = -ESTALE; /* deleted while open */
    if (rc == 0) {
        *out = hr->rec;
        atomic_fetch_add(&hr->rec->refs, 1);
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

void zfs_rec_store_changed(struct zfs_store *st)
{
    sizes_clear(&st->sizes);
    atomic_fetch_add(&st->gen, 1);
    pthread_mutex_lock(&cache_mu);
    for (int k = 0; k < CACHE_SLOTS; k++) {
        /* Entries still loading belong to readers that hold the store
         * lock, which the caller holds exclusively: there are none. */
        if (slots[k] && slots[k]->st == st)
            slot_drop(k);
    }
    pthread_mutex_unlock(&cache_mu);
}

void zfs_rec_cache_clear(void)
{
    pthread_mutex_lock(&cache_mu);
    for (int k = 0; k < CACHE_SLOTS; k++)
        slot_drop(k);
    pthread_mutex_unlock(&cache_mu);
}

/* ---- Read-ahead ------------------------------------------------------- */

/*
 * A tool that reads a folder's files in order (cp -r, tar, a checksum of
 * every file) asks for record i + 1 right after record i, and between the
 * two its requests make several round trips through the kernel (LOOKUP,
 * OPEN, READ, RELEASE). Decoding the next records on a thread of its own
 * in the meantime takes the decode off the reader's path, into the cache,
 * where the reader's load finds it ready (or waits for the decode under
 * way instead of repeating it). A raw store served from the mapping has
 * nothing to decode, but a first read of it waits for the disk on the
 * loop's thread, inside the kernel's copy out of the mapping; there the
 * thread faults the next records' pages in instead. For every store it
 * first asks the disk, without waiting, for up to AHEAD_WINDOW_BYTES of the
 * stored bytes of the records after them (zr_prefetch), so that the disk
 * reads a sequential reader's records in large requests, and a compressed
 * record's decode finds its frame cached. A random reader never starts
 * it: only a read of the record after the last one read does. The
 * thread works two records ahead (i + 1, then i + 2): waking it on an idle
 * CPU can take as long as the decode, and one record ahead then left the
 * reader waiting for a large record's decode. doc/fs-tuning.md has the
 * measurements behind both. It only takes the newest request, and drops
 * what is left of an older one: that is a record the reader has passed.
 * The thread is a one-thread worker queue (lib/workq.c) with a single
 * item, the request: pushing it while it waits only updates it, and
 * stopping drops it.
 */
/* Records at least this large take tens of microseconds or more to
 * decode. The size is the width for Dense and, for Ragged, whose decoded
 * size only the record itself holds, the stored size (a lower bound). */
#define AHEAD_HEAVY_BYTES ((uint64_t)32 << 10)
/* Records decoded ahead of the one read. */
#define AHEAD_DEPTH 2
/* How far ahead a sequential reader has the disk read (at most): the
 * page cache this takes is bounded by it. */
#define AHEAD_WINDOW_BYTES ((uint64_t)4 << 20)
#define AHEAD_WINDOW_RECORDS 4096

static struct zr_workq ahead_queue = ZR_WORKQ_INIT;
/* The newest request; ahead_mu guards its fields, which a reader may
 * change while the item waits or runs. seq counts the requests, so that
 * the thread can tell one it has taken already: a request made after the
 * thread took the item off the queue but before it read the fields is
 * read then, and its push queues the item once more. */
static pthread_mutex_t ahead_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    struct zr_qitem item;
    struct zfs_fs *fs;
    struct zfs_store *st;
    uint64_t index, seq;
} ahead_req;
static uint64_t ahead_taken; /* the thread's own: the last seq it took */

static void remote_ahead(struct zfs_fs *fs, struct zfs_store *st, uint64_t i);

void zfs_rec_ahead(struct zfs_fs *fs, struct zfs_store *st, uint64_t i)
{
    if (st->remote) {
        remote_ahead(fs, st, i);
        return;
    }
    uint64_t prev = atomic_exchange(&st->next_read, i + 1);
    if (prev != i || !st->zs)
        return;
    pthread_mutex_lock(&ahead_mu);
    ahead_req.fs = fs;
    ahead_req.st = st;
    ahead_req.index = i + 1;
    ahead_req.seq++;
    pthread_mutex_unlock(&ahead_mu);
    zr_workq_push(&ahead_queue, &ahead_req.item);
}

/* A raw store's record i, read from the disk into the page cache and
 * mapped here, so that the kernel's copy out of the mapping for the
 * reader's request does not wait for the disk on the loop's thread. */
static void populate(struct zfs_store *st, uint64_t i)
{
    const void *p;
    uint64_t size;
    if (zr_record_span(st->zs, i, &p, &size) == 0)
        zfs_populate(p, size);
}

void zfs_populate(const void *p, uint64_t size)
{
    if (size == 0)
        return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(page - 1), b = (uintptr_t)p + (uintptr_t)size;
    madvise((void *)a, b - a, MADV_POPULATE_READ);
}

/* Ask the disk for the records after i, up to AHEAD_WINDOW_BYTES of their
 * stored bytes, without waiting (zr_prefetch): populate() or the decode
 * then finds them read or on their way. The window is asked for again
 * only when the reader has used half of it, or has left it. */
static void prefetch_window(struct zfs_store *st, uint64_t i)
{
    uint64_t from = i + 1;
    if (st->ra_until > i && st->ra_until - i <= 2 * st->ra_count + 2) {
        if (st->ra_until - i > st->ra_count / 2)
            return; /* enough is on its way */
        from = st->ra_until;
    }
    uint64_t n = 0;
    pthread_rwlock_rdlock(&st->lock);
    if (zr_prefetch(st->zs, from, AHEAD_WINDOW_RECORDS, AHEAD_WINDOW_BYTES, &n) != 0)
        n = 0; /* advice only: the reads report what is wrong */
    pthread_rwlock_unlock(&st->lock);
    st->ra_until = from + n;
    st->ra_count = from + n - (i + 1);
}

/* Record i of st decoded into the cache, or its pages read in. */
static void ahead_one(struct zfs_fs *fs, struct zfs_store *st, uint64_t i)
{
    /* Past the end there is nothing to decode, and a failed load
     * would take a cache slot from a record that is there. */
    pthread_rwlock_rdlock(&st->lock);
    bool inside = i < zr_len(st->zs);
    uint64_t bytes = st->width;
    if (inside && !st->direct && st->kind != ZR_DENSE &&
        zr_ragged_sizes(st->zs, &i, 1, &bytes) != 0)
        inside = false; /* the reader's own load reports it */
    pthread_rwlock_unlock(&st->lock);
    struct zfs_rec *r;
    if (inside && st->direct) {
        populate(st, i); /* mostly waiting for the disk, not the CPU */
    } else if (inside) {
        /* A long decode takes a CPU: the loop does not poll meanwhile.
         * A short one is over before polling beside it costs much,
         * and the reader's next request comes sooner than a wake-up. */
        bool heavy = bytes >= AHEAD_HEAVY_BYTES;
        if (heavy)
            atomic_fetch_add(&zfs_loop_helpers, 1);
        if (zfs_rec_get(fs, st, i, &r) == 0)
            zfs_rec_put(r); /* the cache keeps its own reference */
        if (heavy)
            atomic_fetch_sub(&zfs_loop_helpers, 1);
    }
}

static void ahead_run(void *arg, struct zr_qitem *it)
{
    (void)arg;
    (void)it;
    pthread_mutex_lock(&ahead_mu);
    struct zfs_fs *fs = ahead_req.fs;
    struct zfs_store *st = ahead_req.st;
    uint64_t first = ahead_req.index, seq = ahead_req.seq;
    pthread_mutex_unlock(&ahead_mu);
    if (seq == ahead_taken)
        return;
    ahead_taken = seq;
    prefetch_window(st, first - 1);
    for (uint64_t i = first; i < first + AHEAD_DEPTH; i++) {
        if (i > first && zr_workq_has_more(&ahead_queue))
            break; /* a newer request, or the stop */
        ahead_one(fs, st, i);
    }
}

int zfs_ahead_start(void)
{
    return zr_workq_start(&ahead_queue, 1, ahead_run, NULL);
}

void zfs_ahead_stop(void)
{
    zr_workq_stop(&ahead_queue, false);
}

/* ---- Remote read-ahead -------------------------------------------------- */

/*
 * Every read of a remote store is a ranged GET, and a GET costs a round
 * trip and the server's work on a request, whatever its size: a reader
 * that reads record files one at a time (cp -r, tar, a checksum of each
 * file) would pay one, or two (the record table's entries, then the
 * record) for a compressed store, per record. So when a reader reads
 * the record after the one it read last, the records after it are
 * fetched in windows: one gather of up to REMOTE_WINDOW_RECORDS records
 * and REMOTE_WINDOW_BYTES decoded bytes, which the library plans as one
 * ranged GET of the adjacent stored bytes (lib/remote.c merges them),
 * decoded into the cache of records above. The records of a window wait
 * in the cache as loading from the moment it is asked for, so their
 * readers wait for it instead of sending GETs of their own. A Dense
 * window's size is known then; a Ragged one claims REMOTE_WINDOW_RECORDS
 * and, once its thread has read their sizes (one request for their
 * table entries), gives back those past REMOTE_WINDOW_BYTES, whose
 * readers then load them alone. The next window is asked for when the
 * reader has less than half a window left, so that a steady reader
 * finds its records fetched.
 *
 * Several readers may read one store at once (cp of several folders, a
 * parallel copy), each in order: each store keeps up to REMOTE_STREAMS
 * of them, a new reader taking the place of the one that read longest
 * ago. A random reader never starts a window: only a read of record i
 * right after i - 1 does. Memory is bounded by the cache (CACHE_BYTES);
 * the windows of REMOTE_STREAMS readers fit it twice.
 */
#define REMOTE_STREAMS 8
#define REMOTE_WINDOW_RECORDS 16
#define REMOTE_WINDOW_BYTES ((uint64_t)4 << 20)
/* Windows fetched at once, across the stores of the mount: one per
 * reader a store follows. */
#define REMOTE_THREADS 8

struct window {
    struct zr_qitem item;
    struct zfs_fs *fs;
    struct zfs_store *st;
    struct zfs_stream *s; /* the reader it is for */
    uint64_t first, n;    /* records [first, first + n) */
    /* Those not cached when it was asked for, placeholders in slots ks. */
    struct zfs_rec *recs[REMOTE_WINDOW_RECORDS];
    int ks[REMOTE_WINDOW_RECORDS];
    size_t m;
};

static struct zr_workq remote_queue = ZR_WORKQ_INIT;

/* Put records [w->first, w->first + w->n) not cached yet into the cache
 * as loading, for window w to load: their readers wait for it from now
 * on. */
static void window_claim(struct window *w)
{
    struct zfs_store *st = w->st;
    uint64_t gen = atomic_load(&st->gen);
    pthread_mutex_lock(&cache_mu);
    for (uint64_t i = w->first; i < w->first + w->n; i++) {
        if (slot_find(st, i, gen) >= 0)
            continue; /* a reader's own load got there first */
        struct zfs_rec *r = calloc(1, sizeof *r);
        if (!r)
            break;
        r->st = st;
        r->index = i;
        r->gen = gen;
        atomic_store(&r->refs, 2); /* the slot's and this window's */
        w->ks[w->m] = slot_take(r);
        w->recs[w->m++] = r;
    }
    pthread_mutex_unlock(&cache_mu);
}

/* Gather the first records of w->recs that fit REMOTE_WINDOW_BYTES
 * (a Dense window was cut to fit when asked for; a Ragged one is cut
 * here, its sizes being in the record table) with one call, each copied
 * into a buffer of its own. Sets *loaded to how many were; the rest
 * are left to their readers. Returns 0 or a negative errno for the
 * records loaded. The caller holds st->lock shared. */
static int window_load(struct window *w, size_t *loaded)
{
    struct zfs_store *st = w->st;
    struct zfs_rec **recs = w->recs;
    size_t n = w->m;
    uint64_t idx[REMOTE_WINDOW_RECORDS] = {0}, sizes[REMOTE_WINDOW_RECORDS],
        offs[REMOTE_WINDOW_RECORDS];
    uint64_t total = 0;
    uint8_t *buf = NULL;
    int zrc = 0, rc = 0;
    *loaded = n;
    for (size_t k = 0; k < n; k++)
        idx[k] = recs[k]->index;
    if (st->kind == ZR_DENSE) {
        for (size_t k = 0; k < n; k++) {
            sizes[k] = st->width;
            offs[k] = k * st->width;
        }
        total = n * st->width;
    } else {
        if ((zrc = ragged_sizes(st, idx, n, sizes)) != 0)
            goto out;
        for (size_t k = 0; k < n; k++) {
            if (k > 0 && total + sizes[k] > REMOTE_WINDOW_BYTES) {
                *loaded = n = k;
                break;
            }
            offs[k] = total;
            total += (sizes[k] + 7) & ~(uint64_t)7;
        }
    }
    if (total > SIZE_MAX || !(buf = malloc(total ? (size_t)total : 1))) {
        rc = -ENOMEM;
        goto out;
    }
    zrc = st->kind == ZR_DENSE ? zr_gather_dense(st->zs, idx, n, buf)
                               : zr_gather_ragged(st->zs, idx, n, buf, offs);
    for (size_t k = 0; zrc == 0 && rc == 0 && k < n; k++) {
        struct zfs_rec *r = recs[k];
        if (!(r->buf = malloc(sizes[k] ? (size_t)sizes[k] : 1))) {
            rc = -ENOMEM;
            break;
        }
        memcpy(r->buf, buf + offs[k], (size_t)sizes[k]);
        if (st->kind == ZR_DENSE) {
            r->payload = r->buf;
            r->payload_len = r->stored = st->width;
            r->hdr_len = st->dense_hdr_len;
            memcpy(r->hdr, st->dense_hdr, st->dense_hdr_len);
        } else {
            rc = describe_ragged(w->fs, r, r->buf, sizes[k]);
        }
    }
out:
    free(buf);
    /* A window that failed says nothing of any one record: its readers
     * load their records alone (window_run), and report their own. */
    if (zrc != 0)
        rc = -zfs_errno(zrc);
    return rc;
}

/* Fetch window w and tell its reader where it ended. Its records past
 * what fitted are withdrawn: their readers, woken with -EAGAIN, load
 * them themselves (zfs_rec_get). */
static void window_run(void *arg, struct zr_qitem *it)
{
    (void)arg;
    struct window *w = ZR_WORKQ_ENTRY(it, struct window, item);
    struct zfs_store *st = w->st;
    size_t loaded = 0;

    pthread_rwlock_rdlock(&st->lock);
    int rc = w->m ? window_load(w, &loaded) : 0;
    pthread_mutex_lock(&st->ahead_mu);
    if (w->s->pending && w->s->until == w->first + w->n) {
        if (loaded < w->m)
            w->s->until = w->recs[loaded]->index;
        w->s->pending = false;
    }
    pthread_mutex_unlock(&st->ahead_mu);
    if (loaded) {
        atomic_fetch_add_explicit(&remote_windows, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&remote_window_records, loaded, memory_order_relaxed);
    }
    pthread_mutex_lock(&cache_mu);
    for (size_t k = 0; k < w->m; k++)
        slot_ready(w->ks[k], w->recs[k], k < loaded && rc == 0 ? 0 : -EAGAIN);
    pthread_mutex_unlock(&cache_mu);
    pthread_rwlock_unlock(&st->lock);
    for (size_t k = 0; k < w->m; k++)
        zfs_rec_put(w->recs[k]);
    free(w);
}

/* Record i of remote store st is about to be read: find its reader among
 * the store's streams, and ask for the next window when it is one that
 * reads in order and has less than half a window fetched ahead. */
static void remote_ahead(struct zfs_fs *fs, struct zfs_store *st, uint64_t i)
{
    struct window *w = NULL;
    uint64_t len = zr_len(st->zs);
    pthread_mutex_lock(&st->ahead_mu);
    struct zfs_stream *s = NULL, *oldest = &st->streams[0];
    for (int k = 0; k < REMOTE_STREAMS; k++) {
        struct zfs_stream *c = &st->streams[k];
        if (c->used && c->next == i + 1) {
            /* The same record again (a Ragged record's lookup, then
             * its read): no step forward. */
            c->used = ++st->stream_tick;
            pthread_mutex_unlock(&st->ahead_mu);
            return;
        }
        if (c->used && c->next == i) {
            s = c;
            break;
        }
        if (c->used < oldest->used)
            oldest = c;
    }
    if (!s) {
        /* A reader not seen before, or one that jumped: no window yet. */
        *oldest = (struct zfs_stream){.next = i + 1, .until = i + 1, .used = ++st->stream_tick};
        pthread_mutex_unlock(&st->ahead_mu);
        return;
    }
    s->next = i + 1;
    s->used = ++st->stream_tick;
    if (s->until < i + 1 && !s->pending)
        s->until = i + 1; /* it passed what was fetched */
    if (!s->pending && s->until - (i + 1) <= REMOTE_WINDOW_RECORDS / 2 && s->until < len &&
        (w = calloc(1, sizeof *w))) {
        /* Claimed now, so that the reader, which may be there before a
         * thread takes the window, waits for it instead of sending
         * GETs of its own. A Dense window is sized by the width alone;
         * a Ragged one takes as many records as it may hold, and is cut
         * to REMOTE_WINDOW_BYTES once their sizes are read. */
        uint64_t n = len - s->until < REMOTE_WINDOW_RECORDS ? len - s->until
                                                             : REMOTE_WINDOW_RECORDS;
        if (st->kind == ZR_DENSE) {
            uint64_t fit = REMOTE_WINDOW_BYTES / (st->width ? st->width : 1);
            n = n < fit ? n : (fit ? fit : 1);
        }
        *w = (struct window){.fs = fs, .st = st, .s = s, .first = s->until, .n = n};
        s->until += n;
        s->pending = st->kind != ZR_DENSE;
        window_claim(w);
    }
    pthread_mutex_unlock(&st->ahead_mu);
    if (w && !zr_workq_push(&remote_queue, &w->item)) {
        /* No threads: the reader fetches the window itself. */
        window_run(NULL, &w->item);
    }
}

int zfs_remote_ahead_start(void)
{
    return zr_workq_start(&remote_queue, REMOTE_THREADS, window_run, NULL);
}

void zfs_remote_ahead_stop(void)
{
    /* Windows asked for are fetched, so that none is left loading. */
    zr_workq_stop(&remote_queue, true);
}

void zfs_remote_ahead_counts(uint64_t *windows, uint64_t *records, uint64_t *singles)
{
    *windows = atomic_load(&remote_windows);
    *records = atomic_load(&remote_window_records);
    *singles = atomic_load(&remote_singles);
}

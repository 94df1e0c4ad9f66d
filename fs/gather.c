/*
 * gather.c: .gather, the control file through which a reader gets a batch
 * of records in one request: it writes an index list, then reads the
 * batch back, Dense records back to back, Ragged records each as stored
 * ([u64 ndim][u64 dims][payload], little-endian) and padded with zero
 * bytes to a multiple of 8.
 *
 * The list is per open handle. The first read after it (with O_DIRECT,
 * the size request the kernel makes before that read) ends the list and
 * gathers the whole batch in one library call, and reads hand it out
 * until a write starts a new list. A list refused (EINVAL, E2BIG) after
 * some of it was taken fails every write after it as well, up to that
 * read, which fails too and discards it: the kernel passes a long
 * write(2) on in several requests, and the rest of one must not become a
 * batch of its own (indexlist.h). The batch buffer stays with the handle
 * and is reused by the next batch, so a training loop's steady state
 * neither allocates nor page-faults. A Dense raw store of wide records on
 * a read-only mount needs no buffer at all: each read is answered with the
 * records' bytes in the library's mapping, so the kernel's copy into the
 * reader is the only one. doc/fs-tuning.md has the measurements.
 *
 * Where a batch is. A shell opens one descriptor for both directions
 * (exec 3<>.gather), so after the write the file position is past the
 * written text. A batch therefore begins at the file offset where the last
 * write of its list ended, its base: a read at offset o gets the batch
 * from byte o - base, a read starting below the base fails with EINVAL
 * (nothing is there), and one at or past the batch's end gets end of file.
 * A reader that writes and then reads on, as a shell or a loop on one
 * descriptor does, reads the batch from its first byte, whatever it read
 * before.
 *
 * What this file relies on in the kernel's FUSE client (tests/fs/gather.sh
 * tests what is built on it, with one descriptor and several, O_DIRECT
 * and not, from several threads):
 *
 *   K1. Opened without O_DIRECT, .gather is answered with FOPEN_DIRECT_IO
 *       and FOPEN_NONSEEKABLE (ops.c): a stream that bypasses the page
 *       cache, each read(2) sent as one request after another at the
 *       reader's position.
 *   K2. Opened with O_DIRECT it is a seekable file without
 *       FOPEN_DIRECT_IO. With FUSE_CAP_ASYNC_DIO (ops.c asks for it) the
 *       kernel cuts one large read(2) into requests of at most 1 MiB
 *       (256 pages, libfuse's largest request), sends them all at once
 *       and sleeps once for them; each carries its own file offset, so
 *       the daemon may answer them back to back or on several threads.
 *   K3. Such a read stops at the size the kernel holds for the inode: no
 *       request is sent past it, and a read starting there returns end
 *       of file without asking the daemon. The kernel holds one size per
 *       inode, shared by every descriptor of .gather.
 *   K4. The attributes of .gather are given with a timeout of 0 (ops.c),
 *       so before each O_DIRECT read the kernel asks for them again, with
 *       a GETATTR that carries the reader's handle.
 *   K5. The kernel drops a GETATTR answer when another change of the
 *       inode's attributes (a WRITE, another GETATTR) finished while it
 *       was being asked for: its attribute version is older.
 *   K6. fuse_lowlevel_notify_store of bytes past the size raises the size
 *       to their end, and never lowers it. It takes the lock of each page
 *       it stores into, and marks a page up to date only when the store
 *       begins at the start of the page.
 *   K7. A read the kernel makes to fill its page cache (for mmap, after
 *       O_DIRECT is turned off, or when an O_DIRECT read falls short of a
 *       size that another descriptor's batch makes larger) carries no
 *       lock owner; a reader's read does.
 *
 * The size of .gather. By K3 one descriptor's O_DIRECT read would be cut
 * at whatever size the kernel last heard, which may come from another
 * descriptor's batch, or, by K5, from before this descriptor's write.
 * These rules keep every read whole:
 *
 *   1. The size answered is the largest end that an O_DIRECT handle of
 *      the store needs; a handle needs its batch's end from the write of
 *      its list until its next list or its close.
 *   2. The need is registered when the write is taken, before the write
 *      is answered, so a size computed without it was asked for before
 *      the write finished, and the kernel drops it if it lands after the
 *      write (K5).
 *   3. The kernel also drops an up-to-date size when any other change of
 *      the file's attributes came while it was being asked for (K5),
 *      keeping a size from before the need. So each O_DIRECT write also
 *      raises the kernel's size to its need at once, before the write is
 *      answered, by storing one byte into the file's cache there (K6).
 *   4. That byte lands in a page above every size the kernel may have
 *      held (ghwm), never at the start of a page: so no page there is
 *      locked by a read waiting for this daemon (which would deadlock
 *      it), and the page is never marked up to date, so nothing reads it
 *      (K6).
 *   5. .gather is never read through the page cache: every read the
 *      kernel makes to fill it is refused (K7), so nothing is served from
 *      it, and the kernel never lowers the size after a short page read.
 *
 * The size can still fall under a need if .gather is truncated (O_TRUNC,
 * truncate(2)) while an O_DIRECT read is about to start.
 *
 * zfs_gather_write expects its caller to hold h->mu; zfs_gather_read and
 * zfs_gather_size take it themselves, and a reply that reads the batch
 * buffer after mu is released pins it (h->gather.pins) until it is sent.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fs/base.h"
#include "fs/gather.h"
#include "fs/replies.h"

/* Drop the batch h is serving; the buffer is kept for reuse. The caller
 * holds h->mu and has waited for the pins to end. */
static void drop_answer(struct zfs_handle *h)
{
    struct zfs_hgather *g = &h->gather;
    g->len = 0;
    g->serving = false;
    if (g->by_ref) {
        g->by_ref = false;
        zfs_idxlist_reset(&g->list);
    }
}

/* Wait until no reply reads h's batch outside h->mu. */
static void wait_unpinned(struct zfs_handle *h)
{
    while (h->gather.pins > 0)
        pthread_cond_wait(&h->gather.unpinned, &h->mu);
}

/* ---- the size of .gather ---- */

/* base + len, kept within what a file offset can hold. */
static uint64_t clamp_end(uint64_t base, uint64_t len)
{
    return len > (uint64_t)INT64_MAX - base ? (uint64_t)INT64_MAX : base + len;
}

/* Rules 1 and 2: h (O_DIRECT) needs the size to reach end. */
static void size_need(struct zfs_handle *h, uint64_t end)
{
    struct zfs_store *st = h->st;
    struct zfs_hgather *g = &h->gather;
    if (!g->odirect)
        return;
    pthread_mutex_lock(&st->gsize_mu);
    if (end > st->ghwm)
        st->ghwm = end;
    if (!g->sized) {
        g->prev = NULL;
        g->next = st->gsized;
        if (g->next)
            g->next->gather.prev = h;
        st->gsized = h;
        g->sized = true;
    }
    g->end = end;
    pthread_mutex_unlock(&st->gsize_mu);
}

static void size_forget(struct zfs_handle *h)
{
    struct zfs_store *st = h->st;
    struct zfs_hgather *g = &h->gather;
    pthread_mutex_lock(&st->gsize_mu);
    if (g->sized) {
        if (g->prev)
            g->prev->gather.next = g->next;
        else
            st->gsized = g->next;
        if (g->next)
            g->next->gather.prev = g->prev;
        g->sized = false;
    }
    pthread_mutex_unlock(&st->gsize_mu);
}

/* Rules 3 and 4: raise the kernel's size of st's .gather to at least
 * end, and note a write that ended at wrote (either may be 0). */
static void size_raise(struct zfs_fs *fs, struct zfs_store *st, uint64_t end, uint64_t wrote)
{
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t at = 0;
    pthread_mutex_lock(&st->gsize_mu);
    if (wrote > st->ghwm)
        st->ghwm = wrote;
    if (end > 0) {
        uint64_t above = st->ghwm > (uint64_t)INT64_MAX - 2 * page
                             ? (uint64_t)INT64_MAX - 2 * page
                             : (st->ghwm + page - 1) / page * page + 1;
        at = end - 1 > above ? end - 1 : above;
        if (at % page == 0)
            at++;
        st->ghwm = at + 1;
    }
    pthread_mutex_unlock(&st->gsize_mu);
    if (end == 0)
        return;
    static const char zero;
    struct fuse_bufvec bv = FUSE_BUFVEC_INIT(1);
    bv.buf[0].mem = (void *)&zero;
    int rc = fuse_lowlevel_notify_store(fs->se, zfs_ino(st->sid, ZFS_CTL_GATHER), (off_t)at, &bv,
                                        0);
    if (rc != 0)
        fuse_log(FUSE_LOG_ERR, "zrecordfs: %s: .gather: cannot raise the file size: %s\n",
                 st->path, strerror(-rc));
}

/* Rule 1: the size to answer. */
static uint64_t size_max(struct zfs_store *st)
{
    uint64_t m = 0;
    pthread_mutex_lock(&st->gsize_mu);
    for (const struct zfs_handle *h = st->gsized; h; h = h->gather.next)
        if (h->gather.end > m)
            m = h->gather.end;
    pthread_mutex_unlock(&st->gsize_mu);
    return m;
}

void zfs_gather_release(struct zfs_handle *h)
{
    size_forget(h);
}

/* ---- the batch ---- */

/* Make the batch buffer hold at least size bytes. Its old contents need
 * not survive, so a short buffer is replaced rather than reallocated. */
static int reserve_gather(struct zfs_hgather *g, uint64_t size)
{
    if (size == 0)
        size = 1;
    if (g->cap >= size)
        return 0;
    free(g->buf);
    g->cap = 0;
    if (!(g->buf = malloc(size)))
        return -ENOMEM;
    g->cap = size;
    return 0;
}

/* Gather the list written to h into its batch buffer, in the layout the
 * opening comment gives. */
static int build_gather(struct zfs_store *st, struct zfs_handle *h)
{
    struct zfs_hgather *g = &h->gather;
    const uint64_t *idx = g->list.idx;
    size_t n = g->list.n;
    uint64_t *sizes = NULL, *offsets = NULL;
    uint64_t total = 0;
    int zrc = 0, rc = 0;
    pthread_rwlock_rdlock(&st->lock);
    if (st->kind == ZR_DENSE) {
        if (st->width != 0 && n > ZFS_GATHER_MAX / st->width) {
            rc = -EFBIG;
            goto out;
        }
        total = n * st->width;
        if ((rc = reserve_gather(g, total)) != 0)
            goto out;
        zrc = zr_gather_dense(st->zs, idx, n, g->buf);
        goto out;
    }
    sizes = malloc(n * sizeof *sizes);
    offsets = malloc(n * sizeof *offsets);
    if (!sizes || !offsets) {
        rc = -ENOMEM;
        goto out;
    }
    zrc = zr_ragged_sizes(st->zs, idx, n, sizes);
    if (zrc != 0)
        goto out;
    for (size_t k = 0; k < n; k++) {
        offsets[k] = total;
        total += (sizes[k] + 7) & ~(uint64_t)7;
        if (total > ZFS_GATHER_MAX) {
            rc = -EFBIG;
            goto out;
        }
    }
    if ((rc = reserve_gather(g, total)) != 0)
        goto out;
    zrc = zr_gather_ragged(st->zs, idx, n, g->buf, offsets);
    /* The padding after each record is zero, whatever the buffer held. */
    for (size_t k = 0; zrc == 0 && k < n; k++) {
        uint64_t end = k + 1 < n ? offsets[k + 1] : total;
        memset(g->buf + offsets[k] + sizes[k], 0, end - offsets[k] - sizes[k]);
    }
out:
    if (zrc != 0) {
        fuse_log(FUSE_LOG_ERR, "zrecordfs: %s: .gather: %s\n", st->path, zr_last_error());
        rc = -zfs_errno(zrc);
    }
    pthread_rwlock_unlock(&st->lock);
    free(sizes);
    free(offsets);
    if (rc == 0)
        g->len = (size_t)total;
    return rc;
}

/* Records at least this wide are served by reference (each reply taken
 * from the store's mapping, no copy in the daemon); narrower ones are
 * gathered into the handle's buffer first, on every core, since a 1 MiB
 * reply would need hundreds of pieces and the pieces cost more than the
 * copy. A reply never exceeds 1 MiB (K2), so one touches at most
 * 1 MiB / BYREF_WIDTH + 1 records. */
#define BYREF_WIDTH 8192
/* Pieces of one by-reference reply: enough for 1 MiB of BYREF_WIDTH
 * records; a longer request is copied into a buffer of its own. */
#define SPAN_IOVS 160

/* Whether every record of a batch is in the page cache. A batch that is
 * not is gathered by the library instead of served by reference: replies
 * copied out of the mapping would fault its pages in one at a time, each
 * fault reading read_ahead_kb around its page, where the library plans
 * the batch's reads, many in flight (doc/cold-reads.md). One cachestat a
 * record, and it stops at the first that is not cached. */
static bool batch_cached(struct zfs_store *st, const struct zfs_idxlist *list)
{
    pthread_rwlock_rdlock(&st->lock);
    int c = zr_records_cached(st->zs, list->idx, list->n);
    pthread_rwlock_unlock(&st->lock);
    return c != 0; /* an error is the mapping's to report, as before */
}

/* End the list written to h and make its batch ready to be read: built
 * into the batch buffer, or kept as the list for a raw Dense store on a
 * read-only mount (served by reference). The caller holds h->mu. */
static int gather_prepare(struct zfs_handle *h)
{
    struct zfs_store *st = h->st;
    struct zfs_hgather *g = &h->gather;
    if (g->serving)
        return 0;
    zfs_idxlist_set_limit(&g->list, zr_len(st->zs));
    int rc = zfs_idxlist_finish(&g->list);
    if (rc != 0) {
        zfs_idxlist_reset(&g->list);
        size_forget(h);
        return rc;
    }
    if (g->list.n == 0) {
        g->len = 0;
    } else if (st->direct && st->kind == ZR_DENSE && st->width >= BYREF_WIDTH &&
               g->list.n <= ZFS_GATHER_MAX / st->width && batch_cached(st, &g->list)) {
        g->by_ref = true;
        g->len = (size_t)(g->list.n * st->width);
    } else {
        rc = build_gather(st, h);
        zfs_idxlist_reset(&g->list);
        if (rc != 0) {
            size_forget(h);
            return rc;
        }
    }
    g->serving = true;
    size_need(h, clamp_end(g->base, g->len));
    return 0;
}

int zfs_gather_write(struct zfs_fs *fs, struct zfs_handle *h, const char *buf, size_t len,
                     uint64_t off)
{
    struct zfs_store *st = h->st;
    struct zfs_hgather *g = &h->gather;
    if (!st->zs)
        return -EIO;
    if (g->serving) {
        /* A new list: whatever was left of the last batch is dropped. */
        wait_unpinned(h);
        drop_answer(h);
        zfs_idxlist_reset(&g->list);
    }
    /* A failed list stays failed (indexlist.h) until the read that
     * reports it discards it (gather_prepare). */
    zfs_idxlist_set_limit(&g->list, zr_len(st->zs));
    int rc = zfs_idxlist_feed(&g->list, buf, len);
    if (rc != 0) {
        size_forget(h);
        return rc;
    }
    g->base = clamp_end(off, len);
    /* What the batch will need: exact for Dense (a number cut by this
     * write counts), the largest possible answer for Ragged, whose sizes
     * are only known once the list is complete. */
    uint64_t need = ZFS_GATHER_MAX;
    if (st->kind == ZR_DENSE) {
        uint64_t n = g->list.n + (g->list.intok ? 1 : 0);
        if (st->width == 0 || n <= ZFS_GATHER_MAX / st->width)
            need = n * st->width;
    }
    need = clamp_end(g->base, need);
    size_need(h, need);
    size_raise(fs, st, g->odirect ? need : 0, g->base);
    return 0;
}

int zfs_gather_size(struct zfs_fs *fs, struct zfs_store *st, struct zfs_handle *h,
                    uint64_t *size)
{
    (void)fs;
    /* A size asked for with an O_DIRECT handle comes before its read (K4). */
    if (h && h->gather.odirect && st->zs) {
        pthread_mutex_lock(&h->mu);
        int rc = gather_prepare(h);
        pthread_mutex_unlock(&h->mu);
        if (rc != 0)
            return rc;
    }
    *size = size_max(st);
    return 0;
}

/* Fill iov with bytes [pos, end) of the by-reference batch of h, taken
 * from the store's mapping. Returns the number of pieces, 0 if more than
 * cap are needed, or a negative errno. The caller holds h->mu. */
static int span_iov(struct zfs_handle *h, uint64_t pos, uint64_t end, struct iovec *iov, int cap)
{
    struct zfs_store *st = h->st;
    const uint64_t w = st->width;
    uint64_t k0 = pos / w, k1 = (end - 1) / w;
    if (k1 - k0 >= (uint64_t)cap)
        return 0;
    for (uint64_t k = k0; k <= k1; k++) {
        const void *p;
        uint64_t size;
        int zrc = zr_record_span(st->zs, h->gather.list.idx[k], &p, &size);
        if (zrc != 0) {
            fuse_log(FUSE_LOG_ERR, "zrecordfs: %s: .gather: %s\n", st->path, zr_last_error());
            return -zfs_errno(zrc);
        }
        uint64_t a = k == k0 ? pos - k * w : 0;
        uint64_t b = k == k1 ? end - k * w : w;
        iov[k - k0].iov_base = (char *)p + a;
        iov[k - k0].iov_len = (size_t)(b - a);
    }
    return (int)(k1 - k0 + 1);
}

/* Bytes [pos, end) of the by-reference batch of h copied into a buffer
 * of their own (*out, malloc'd): for a request too long for span_iov.
 * The caller holds h->mu. */
static int span_copy(struct zfs_handle *h, uint64_t pos, uint64_t end, char **out)
{
    struct zfs_store *st = h->st;
    const uint64_t w = st->width;
    uint64_t k0 = pos / w, k1 = (end - 1) / w;
    char *buf = malloc((size_t)((k1 - k0 + 1) * w));
    if (!buf)
        return -ENOMEM;
    int zrc = zr_gather_dense(st->zs, h->gather.list.idx + k0, (size_t)(k1 - k0 + 1), buf);
    if (zrc != 0) {
        fuse_log(FUSE_LOG_ERR, "zrecordfs: %s: .gather: %s\n", st->path, zr_last_error());
        free(buf);
        return -zfs_errno(zrc);
    }
    memmove(buf, buf + (pos - k0 * w), (size_t)(end - pos));
    *out = buf;
    return 0;
}

/* What a reply of zfs_gather_read holds until it has been sent. */
struct sent {
    struct zfs_handle *h;
    char *copy;  /* span_copy's buffer, if any */
    bool pinned; /* the reply reads the batch buffer */
};

static void sent_done(void *arg)
{
    struct sent *s = arg;
    struct zfs_handle *h = s->h;
    free(s->copy);
    if (s->pinned) {
        pthread_mutex_lock(&h->mu);
        if (--h->gather.pins == 0)
            pthread_cond_broadcast(&h->gather.unpinned);
        pthread_mutex_unlock(&h->mu);
    }
    zfs_handle_put(h);
    free(s);
}

int zfs_gather_read(struct zfs_fs *fs, struct zfs_handle *h, fuse_req_t req, size_t size,
                    uint64_t off, bool page_cache)
{
    (void)fs;
    struct zfs_store *st = h->st;
    struct zfs_hgather *g = &h->gather;
    struct iovec iov[SPAN_IOVS];
    struct sent *s = NULL;
    int cnt = 0, rc = 0;
    bool last = false; /* the reply reaches the batch's end (read under mu) */
    if (!st->zs)
        return -EIO;
    /* A batch never enters the page cache (rule 5): pages cached at one
     * batch's offsets would be served stale for a later one. */
    if (page_cache)
        return -EIO;
    if (!(s = malloc(sizeof *s)))
        return -ENOMEM;
    *s = (struct sent){.h = h};
    pthread_mutex_lock(&h->mu);
    if ((rc = gather_prepare(h)) != 0)
        goto out;
    if (off < g->base) {
        /* Nothing is there: the batch begins where its list ended. */
        rc = -EINVAL;
        goto out;
    }
    uint64_t pos = off - g->base, len = g->len;
    uint64_t end = pos < len ? (len - pos < size ? len : pos + size) : pos;
    last = end == len;
    if (end == pos) {
        cnt = 0;
    } else if (g->by_ref) {
        cnt = span_iov(h, pos, end, iov, SPAN_IOVS);
        if (cnt == 0 && (rc = span_copy(h, pos, end, &s->copy)) == 0) {
            iov[0].iov_base = s->copy;
            iov[0].iov_len = (size_t)(end - pos);
            cnt = 1;
        } else if (cnt < 0) {
            rc = cnt;
        }
    } else {
        /* The reply reads the buffer after mu is released, so that
         * replies to the requests of one read(2), queued at once (K2),
         * may copy on several threads; a new list waits for them. */
        iov[0].iov_base = g->buf + pos;
        iov[0].iov_len = (size_t)(end - pos);
        cnt = 1;
        g->pins++;
        s->pinned = true;
    }
out:
    pthread_mutex_unlock(&h->mu);
    if (rc != 0) {
        free(s);
        return rc;
    }
    /* Sent from a reply thread under the single-threaded loop; the reply
     * keeps h alive until then. The piece that reaches the batch's end
     * is sent here: when it is the whole batch (up to 1 MiB, one
     * request), handing it to a thread would only add that thread's
     * wake-up (doc/fs-tuning.md), and otherwise it is the last
     * request of the read, which this thread copies while the reply
     * threads copy the others. */
    atomic_fetch_add(&h->refs, 1);
    if (last) {
        fuse_reply_iov(req, iov, cnt);
        sent_done(s);
        return 0;
    }
    zfs_reply_iov(req, iov, cnt, sent_done, s);
    return 0;
}

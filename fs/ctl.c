/*
 * ctl.c: the control files of a store folder, which answer in the
 * store's terms rather than per record.
 *
 *   .stats    one JSON object describing the store, built once and kept
 *             until a mutation (a read-only mount's store cannot change).
 *   .gather   per open handle: the text written is an index list; the
 *             first read after it (with O_DIRECT, the size request the
 *             kernel makes before that read) ends the list and gathers
 *             the whole batch in one library call, and reads hand it out
 *             until a write starts a new list. The batch buffer stays
 *             with the handle and is reused by the next batch, so a
 *             training loop's steady state neither allocates nor
 *             page-faults (a fresh 37 MiB buffer per batch cost more than
 *             the gather itself). A Dense raw store of wide records on a
 *             read-only mount needs no buffer at all: each read is
 *             answered with the records' bytes in the library's mapping,
 *             so the kernel's copy into the reader is the only one.
 *   .compact  writing compacts the store (read-write mounts); reading
 *             gives the last result as JSON.
 *   .delete   (read-write mounts) the text written is an index list,
 *             deleted (swap-last) as one batch when the file is closed,
 *             so a list may take several writes and still be one batch;
 *             close(2) reports the outcome.
 *
 * Delete and compact take the store lock exclusively (the library needs
 * the handle to itself for them); after a delete, the kernel is told to
 * forget the records whose bytes changed and the names that are gone
 * before the close returns, so no reader sees a stale record.
 *
 * A shell opens one descriptor for both directions (exec 3<>.gather), so
 * after the write the file position is past the written text. A batch
 * therefore begins at the file offset where the last write of its list
 * ended, its base: a read at offset o gets the batch from byte o - base, a
 * read starting below the base fails with EINVAL (nothing is there), and
 * one at or past the batch's end gets end of file. A reader that writes
 * and then reads on, as a shell or a loop on one descriptor does, reads
 * the batch from its first byte, whatever it read before.
 *
 * Opened without O_DIRECT, .gather is a stream served with FOPEN_DIRECT_IO:
 * not seekable, each read(2) sent as one request after another, so the
 * offsets are always the reader's position. Opened with O_DIRECT it is a
 * seekable file without FOPEN_DIRECT_IO, and the kernel sends all the
 * requests of one large read(2) at once (one per MiB, FUSE_CAP_ASYNC_DIO)
 * and sleeps once for them, instead of one sleep and wake-up per MiB: the
 * daemon answers them back to back, or on several threads at once, each
 * at its offset. The kernel then cuts such reads at the size it holds for
 * .gather, so that size follows the batches (see "the size of .gather").
 *
 * .compact and .delete are streams that ignore offsets. The functions
 * here that take a handle expect their caller to hold h->mu and to reply
 * before releasing it (the bytes handed out live in the handle), except
 * zfs_gather_read and zfs_gather_size, which take it themselves.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "fs/zrfs.h"

/* A growing text buffer. */
struct text {
    char *s;
    size_t len, cap;
    bool failed;
};

static void add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add(struct text *t, const char *fmt, ...)
{
    if (t->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(t->s ? t->s + t->len : NULL, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (w < 0) {
            t->failed = true;
            return;
        }
        if ((size_t)w < t->cap - t->len) {
            t->len += (size_t)w;
            return;
        }
        size_t cap = (t->cap + (size_t)w + 1) * 2;
        char *p = realloc(t->s, cap);
        if (!p) {
            t->failed = true;
            return;
        }
        t->s = p;
        t->cap = cap;
    }
}

/* A JSON string literal; only the characters JSON requires are escaped. */
static void add_json_string(struct text *t, const char *s)
{
    add(t, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            add(t, "\\%c", c);
        else if (c < 0x20)
            add(t, "\\u%04x", c);
        else
            add(t, "%c", c);
    }
    add(t, "\"");
}

static int text_done(struct text *t, char **out, size_t *len)
{
    if (t->failed) {
        free(t->s);
        return -ENOMEM;
    }
    *out = t->s;
    *len = t->len;
    return 0;
}

/* Build the .stats text. The caller holds st->lock shared. */
static int build_stats(struct zfs_store *st, char **out, size_t *len)
{
    struct text t = {0};
    zr_store *zs = st->zs;
    add(&t, "{\"kind\": \"%s\", \"dtype\": ", st->kind == ZR_DENSE ? "dense" : "ragged");
    add_json_string(&t, zr_dtype(zs));
    add(&t, ", \"item_shape\": ");
    if (st->kind == ZR_DENSE) {
        uint32_t ndim;
        const uint64_t *shape = zr_item_shape(zs, &ndim);
        add(&t, "[");
        for (uint32_t d = 0; d < ndim; d++)
            add(&t, "%s%llu", d ? ", " : "", (unsigned long long)shape[d]);
        add(&t, "]");
    } else {
        add(&t, "null");
    }
    add(&t, ", \"codec\": ");
    add_json_string(&t, zr_codec_name(zr_codec(zs)));
    zr_store_stats ss = ZR_STORE_STATS_INIT;
    int zrc = zr_stats(zs, &ss);
    if (zrc != 0) {
        fuse_log(FUSE_LOG_ERR, "zrecordfs: %s: .stats: %s\n", st->path, zr_last_error());
        free(t.s);
        return -zfs_errno(zrc);
    }
    add(&t, ", \"records\": %llu, \"live_bytes\": %llu, \"chunk_bytes\": %llu, "
            "\"reclaimable\": %llu, \"dict_bytes\": %llu}\n",
        (unsigned long long)ss.records, (unsigned long long)ss.live_bytes,
        (unsigned long long)ss.chunk_bytes, (unsigned long long)ss.reclaimable,
        (unsigned long long)ss.dict_bytes);
    return text_done(&t, out, len);
}

/* Make sure st->stats_json exists. The caller holds st->lock (shared)
 * and st->ctl_mu. */
static int ensure_stats(struct zfs_store *st)
{
    if (st->stats_json)
        return 0;
    return build_stats(st, &st->stats_json, &st->stats_len);
}

int zfs_stats_text(struct zfs_fs *fs, struct zfs_store *st, char **out, size_t *len)
{
    (void)fs;
    if (!st->zs)
        return -EIO;
    pthread_rwlock_rdlock(&st->lock);
    pthread_mutex_lock(&st->ctl_mu);
    int rc = ensure_stats(st);
    if (rc == 0) {
        if ((*out = malloc(st->stats_len ? st->stats_len : 1))) {
            memcpy(*out, st->stats_json, st->stats_len);
            *len = st->stats_len;
        } else {
            rc = -ENOMEM;
        }
    }
    pthread_mutex_unlock(&st->ctl_mu);
    pthread_rwlock_unlock(&st->lock);
    return rc;
}

int zfs_stats_size(struct zfs_fs *fs, struct zfs_store *st, uint64_t *len)
{
    (void)fs;
    if (!st->zs)
        return -EIO;
    pthread_rwlock_rdlock(&st->lock);
    pthread_mutex_lock(&st->ctl_mu);
    int rc = ensure_stats(st);
    if (rc == 0)
        *len = st->stats_len;
    pthread_mutex_unlock(&st->ctl_mu);
    pthread_rwlock_unlock(&st->lock);
    return rc;
}

int zfs_compact_text(struct zfs_store *st, char **out, size_t *len)
{
    static const char none[] = "{\"compactions\": 0}\n";
    pthread_mutex_lock(&st->ctl_mu);
    const char *src = st->compact_json ? st->compact_json : none;
    size_t n = st->compact_json ? st->compact_len : sizeof none - 1;
    int rc = 0;
    if ((*out = malloc(n)))
        memcpy(*out, src, n);
    else
        rc = -ENOMEM;
    *len = n;
    pthread_mutex_unlock(&st->ctl_mu);
    return rc;
}

int zfs_compact_size(struct zfs_store *st, uint64_t *len)
{
    pthread_mutex_lock(&st->ctl_mu);
    *len = st->compact_json ? st->compact_len : strlen("{\"compactions\": 0}\n");
    pthread_mutex_unlock(&st->ctl_mu);
    return 0;
}

/* Drop the answer h is serving. The .gather buffer is kept for reuse.
 * For .gather the caller has waited for h->pins to reach 0. */
static void drop_answer(struct zfs_handle *h)
{
    if (h->out != h->gbuf)
        free(h->out);
    h->out = NULL;
    h->outlen = h->outpos = 0;
    h->serving = false;
    if (h->by_ref) {
        h->by_ref = false;
        zfs_idxlist_reset(&h->list);
    }
}

/* Hand out the next bytes of h->out (.compact); at its end, drop it and
 * give 0. */
static void serve(struct zfs_handle *h, size_t size, const char **p, size_t *n)
{
    size_t left = h->outlen - h->outpos;
    size_t k = size < left ? size : left;
    *p = h->out + h->outpos;
    *n = k;
    h->outpos += k;
    if (k == 0)
        drop_answer(h);
}

/* Wait until no reply reads h's answer outside h->mu. */
static void wait_unpinned(struct zfs_handle *h)
{
    while (h->pins > 0)
        pthread_cond_wait(&h->unpinned, &h->mu);
}

/* ---- the size of .gather ----
 *
 * An O_DIRECT read of a FUSE file stops at the size the kernel holds for
 * it (a read starting there returns end of file without asking the
 * daemon), and the kernel holds one size per inode, shared by every
 * descriptor of .gather. Before each read it asks for the size again
 * (GETATTR, with the reader's handle), as the attributes of .gather never
 * stay valid. These rules keep one descriptor's read from being cut by
 * another's batch:
 *
 *   1. The size answered is the largest end that an O_DIRECT handle of
 *      the store needs; a handle needs its batch's end from the write of
 *      its list until its next list or its close.
 *   2. The need is registered when the write is taken, before the write
 *      is answered, so a size computed without it was asked for before
 *      the write finished, and the kernel drops it if it lands after the
 *      write (its attribute version is older).
 *   3. The kernel also drops an up-to-date size when any other change of
 *      the file's attributes (another descriptor's write or GETATTR) came
 *      while it was being asked for, keeping a size from before the need.
 *      So each O_DIRECT write also raises the kernel's size to its need
 *      at once, before the write is answered, by storing one byte into the
 *      file's cache there (a store only ever raises the size).
 *   4. That byte lands in a page above every size the kernel may have
 *      held (ghwm), never at the start of a page: so no page there is
 *      locked by a read waiting for this daemon (which would deadlock it),
 *      and the page is never marked up to date, so nothing reads it.
 *   5. .gather is never read through the page cache (ctl.c refuses every
 *      read the kernel makes to fill it), so nothing is served from it,
 *      and the kernel never lowers the size after a short page read.
 *
 * The size can still fall under a need if .gather is truncated (O_TRUNC,
 * truncate(2)) while an O_DIRECT read is about to start. */

/* base + len, kept within what a file offset can hold. */
static uint64_t clamp_end(uint64_t base, uint64_t len)
{
    return len > (uint64_t)INT64_MAX - base ? (uint64_t)INT64_MAX : base + len;
}

/* Rules 1 and 2: h (O_DIRECT) needs the size to reach end. */
static void size_need(struct zfs_handle *h, uint64_t end)
{
    struct zfs_store *st = h->st;
    if (!h->odirect)
        return;
    pthread_mutex_lock(&st->gsize_mu);
    if (end > st->ghwm)
        st->ghwm = end;
    if (!h->sized) {
        h->gprev = NULL;
        h->gnext = st->gsized;
        if (h->gnext)
            h->gnext->gprev = h;
        st->gsized = h;
        h->sized = true;
    }
    h->gend = end;
    pthread_mutex_unlock(&st->gsize_mu);
}

static void size_forget(struct zfs_handle *h)
{
    struct zfs_store *st = h->st;
    pthread_mutex_lock(&st->gsize_mu);
    if (h->sized) {
        if (h->gprev)
            h->gprev->gnext = h->gnext;
        else
            st->gsized = h->gnext;
        if (h->gnext)
            h->gnext->gprev = h->gprev;
        h->sized = false;
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
    for (const struct zfs_handle *h = st->gsized; h; h = h->gnext)
        if (h->gend > m)
            m = h->gend;
    pthread_mutex_unlock(&st->gsize_mu);
    return m;
}

void zfs_gather_release(struct zfs_handle *h)
{
    size_forget(h);
}

/* ---- the batch ---- */

/* Make h->gbuf hold at least size bytes. Its old contents need not
 * survive, so a short buffer is replaced rather than reallocated. */
static int reserve_gather(struct zfs_handle *h, uint64_t size)
{
    if (size == 0)
        size = 1;
    if (h->gcap >= size)
        return 0;
    free(h->gbuf);
    h->gcap = 0;
    if (!(h->gbuf = malloc(size)))
        return -ENOMEM;
    h->gcap = size;
    return 0;
}

/* Gather the list written to h into h->gbuf. Dense: the records back to
 * back. Ragged: each record as stored, [u64 ndim][u64 dims][payload]
 * little-endian, followed by zero bytes up to a multiple of 8. */
static int build_gather(struct zfs_store *st, struct zfs_handle *h)
{
    const uint64_t *idx = h->list.idx;
    size_t n = h->list.n;
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
        if ((rc = reserve_gather(h, total)) != 0)
            goto out;
        zrc = zr_gather_dense(st->zs, idx, n, h->gbuf);
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
    if ((rc = reserve_gather(h, total)) != 0)
        goto out;
    zrc = zr_gather_ragged(st->zs, idx, n, h->gbuf, offsets);
    /* The padding after each record is zero, whatever the buffer held. */
    for (size_t k = 0; zrc == 0 && k < n; k++) {
        uint64_t end = k + 1 < n ? offsets[k + 1] : total;
        memset(h->gbuf + offsets[k] + sizes[k], 0, end - offsets[k] - sizes[k]);
    }
out:
    if (zrc != 0) {
        fuse_log(FUSE_LOG_ERR, "zrecordfs: %s: .gather: %s\n", st->path, zr_last_error());
        rc = -zfs_errno(zrc);
    }
    pthread_rwlock_unlock(&st->lock);
    free(sizes);
    free(offsets);
    if (rc == 0) {
        h->out = h->gbuf;
        h->outlen = (size_t)total;
    }
    return rc;
}

/* Records at least this wide are served by reference (each reply taken
 * from the store's mapping, no copy in the daemon); narrower ones are
 * gathered into the handle's buffer first, on every core, since a 1 MiB
 * reply would need hundreds of pieces and the pieces cost more than the
 * copy. A reply never exceeds 1 MiB (libfuse's 256-page limit), so one
 * touches at most 1 MiB / BYREF_WIDTH + 1 records. */
#define BYREF_WIDTH 8192
/* Pieces of one by-reference reply: enough for 1 MiB of BYREF_WIDTH
 * records; a longer request is copied into a buffer of its own. */
#define SPAN_IOVS 160

/* End the list written to h and make its batch ready to be read: built
 * into h->gbuf, or kept as the list for a raw Dense store on a
 * read-only mount (served by reference). The caller holds h->mu. */
static int gather_prepare(struct zfs_handle *h)
{
    struct zfs_store *st = h->st;
    if (h->serving)
        return 0;
    zfs_idxlist_set_limit(&h->list, zr_len(st->zs));
    int rc = zfs_idxlist_finish(&h->list);
    if (rc != 0) {
        zfs_idxlist_reset(&h->list);
        size_forget(h);
        return rc;
    }
    if (h->list.n == 0) {
        h->out = NULL;
        h->outlen = 0;
    } else if (st->direct && st->kind == ZR_DENSE && st->width >= BYREF_WIDTH &&
               h->list.n <= ZFS_GATHER_MAX / st->width) {
        h->by_ref = true;
        h->out = NULL;
        h->outlen = (size_t)(h->list.n * st->width);
    } else {
        rc = build_gather(st, h);
        zfs_idxlist_reset(&h->list);
        if (rc != 0) {
            size_forget(h);
            return rc;
        }
    }
    h->serving = true;
    size_need(h, clamp_end(h->base, h->outlen));
    return 0;
}

int zfs_gather_write(struct zfs_fs *fs, struct zfs_handle *h, const char *buf, size_t len,
                     uint64_t off)
{
    struct zfs_store *st = h->st;
    if (!st->zs)
        return -EIO;
    if (h->serving) {
        /* A new list: whatever was left of the last answer is dropped. */
        wait_unpinned(h);
        drop_answer(h);
        zfs_idxlist_reset(&h->list);
    }
    zfs_idxlist_set_limit(&h->list, zr_len(st->zs));
    int rc = zfs_idxlist_feed(&h->list, buf, len);
    if (rc != 0) {
        zfs_idxlist_reset(&h->list);
        size_forget(h);
        return rc;
    }
    h->base = clamp_end(off, len);
    /* What the batch will need: exact for Dense (a number cut by this
     * write counts), the largest possible answer for Ragged, whose sizes
     * are only known once the list is complete. */
    uint64_t need = ZFS_GATHER_MAX;
    if (st->kind == ZR_DENSE) {
        uint64_t n = h->list.n + (h->list.intok ? 1 : 0);
        if (st->width == 0 || n <= ZFS_GATHER_MAX / st->width)
            need = n * st->width;
    }
    need = clamp_end(h->base, need);
    size_need(h, need);
    size_raise(fs, st, h->odirect ? need : 0, h->base);
    return 0;
}

int zfs_gather_size(struct zfs_fs *fs, struct zfs_store *st, struct zfs_handle *h,
                    uint64_t *size)
{
    (void)fs;
    /* A size asked for with an O_DIRECT handle comes before its read. */
    if (h && h->odirect && st->zs) {
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
        int zrc = zr_record_span(st->zs, h->list.idx[k], &p, &size);
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
    int zrc = zr_gather_dense(st->zs, h->list.idx + k0, (size_t)(k1 - k0 + 1), buf);
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
    bool pinned; /* the reply reads h->gbuf */
};

static void sent_done(void *arg)
{
    struct sent *s = arg;
    struct zfs_handle *h = s->h;
    free(s->copy);
    if (s->pinned) {
        pthread_mutex_lock(&h->mu);
        if (--h->pins == 0)
            pthread_cond_broadcast(&h->unpinned);
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
    struct iovec iov[SPAN_IOVS];
    struct sent *s = NULL;
    int cnt = 0, rc = 0;
    if (!st->zs)
        return -EIO;
    /* A batch never enters the page cache (rule 5): pages cached at one
     * batch's offsets would be served stale for a later one. The kernel
     * reads through it for mmap, after O_DIRECT is turned off, or when an
     * O_DIRECT read falls short of a size that another descriptor's
     * batch makes larger. */
    if (page_cache)
        return -EIO;
    if (!(s = malloc(sizeof *s)))
        return -ENOMEM;
    *s = (struct sent){.h = h};
    pthread_mutex_lock(&h->mu);
    if ((rc = gather_prepare(h)) != 0)
        goto out;
    if (off < h->base) {
        /* Nothing is there: the batch begins where its list ended. */
        rc = -EINVAL;
        goto out;
    }
    uint64_t pos = off - h->base, len = h->outlen;
    uint64_t end = pos < len ? (len - pos < size ? len : pos + size) : pos;
    if (end == pos) {
        cnt = 0;
    } else if (h->by_ref) {
        cnt = span_iov(h, pos, end, iov, SPAN_IOVS);
        if (cnt == 0 && (rc = span_copy(h, pos, end, &s->copy)) == 0) {
            iov[0].iov_base = s->copy;
            iov[0].iov_len = (size_t)(end - pos);
            cnt = 1;
        } else if (cnt < 0) {
            rc = cnt;
        }
    } else {
        /* The reply reads h->gbuf after mu is released, so that replies
         * to the requests of one read(2), queued at once, may copy on
         * several threads; a new list waits for them. */
        iov[0].iov_base = h->out + pos;
        iov[0].iov_len = (size_t)(end - pos);
        cnt = 1;
        h->pins++;
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
     * wake-up (token batches of 512 KiB: 121,000 -> 175,000 records/s),
     * and otherwise it is the last request of the read, which this
     * thread copies while the reply threads copy the others. */
    atomic_fetch_add(&h->refs, 1);
    if (end == h->outlen) {
        fuse_reply_iov(req, iov, cnt);
        sent_done(s);
        return 0;
    }
    zfs_reply_iov(req, iov, cnt, sent_done, s);
    return 0;
}

int zfs_compact_read(struct zfs_fs *fs, struct zfs_handle *h, size_t size, const char **p,
                     size_t *n)
{
    (void)fs;
    if (!h->serving) {
        int rc = zfs_compact_text(h->st, &h->out, &h->outlen);
        if (rc != 0)
            return rc;
        h->outpos = 0;
        h->serving = true;
    }
    serve(h, size, p, n);
    return 0;
}

int zfs_compact_run(struct zfs_fs *fs, struct zfs_handle *h)
{
    struct zfs_store *st = h->st;
    if (!fs->cfg.rw)
        return -EROFS;
    if (!st->zs)
        return -EIO;
    zr_compact_result res = ZR_COMPACT_RESULT_INIT;
    struct text t = {0};
    pthread_rwlock_wrlock(&st->lock);
    int zrc = zr_compact(st->zs, &res);
    if (zrc != 0)
        fuse_log(FUSE_LOG_ERR, "zrecordfs: %s: compaction failed: %s\n", st->path, zr_last_error());
    pthread_mutex_lock(&st->ctl_mu);
    /* Even a failed compaction may have moved records and freed space. */
    free(st->stats_json);
    st->stats_json = NULL;
    if (zrc == 0) {
        st->ncompactions++;
        add(&t, "{\"compactions\": %llu, \"records_moved\": %llu, \"bytes_before\": %llu, "
                "\"bytes_after\": %llu}\n",
            (unsigned long long)st->ncompactions, (unsigned long long)res.records_moved,
            (unsigned long long)res.bytes_before, (unsigned long long)res.bytes_after);
        char *text;
        size_t len;
        if (text_done(&t, &text, &len) == 0) {
            free(st->compact_json);
            st->compact_json = text;
            st->compact_len = len;
        }
    }
    pthread_mutex_unlock(&st->ctl_mu);
    pthread_rwlock_unlock(&st->lock);
    /* The records' bytes did not change; the listing's .stats did. */
    zfs_notify_change(fs, st, NULL, 0, 0, 0);
    /* The next read of this handle gives this result. */
    drop_answer(h);
    return -zfs_errno(zrc);
}

int zfs_delete_write(struct zfs_fs *fs, struct zfs_handle *h, const char *buf, size_t len)
{
    if (!fs->cfg.rw)
        return -EROFS;
    if (!h->st->zs)
        return -EIO;
    zfs_idxlist_set_limit(&h->list, zr_len(h->st->zs));
    int rc = zfs_idxlist_feed(&h->list, buf, len);
    if (rc != 0)
        zfs_idxlist_reset(&h->list);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int zfs_delete_commit(struct zfs_fs *fs, struct zfs_handle *h)
{
    struct zfs_store *st = h->st;
    if (!st->zs)
        return -EIO;
    zfs_idxlist_set_limit(&h->list, zr_len(st->zs));
    int rc = zfs_idxlist_finish(&h->list);
    if (rc != 0 || h->list.n == 0) {
        zfs_idxlist_reset(&h->list);
        return rc;
    }
    uint64_t *idx = h->list.idx;
    size_t n = h->list.n;
    pthread_rwlock_wrlock(&st->lock);
    uint64_t old_len = zr_len(st->zs);
    int zrc = zr_delete(st->zs, idx, n);
    uint64_t new_len = zr_len(st->zs);
    if (zrc != 0)
        fuse_log(FUSE_LOG_ERR, "zrecordfs: %s: delete failed: %s\n", st->path, zr_last_error());
    if (new_len != old_len) {
        zfs_rec_store_changed(st);
        pthread_mutex_lock(&st->ctl_mu);
        free(st->stats_json);
        st->stats_json = NULL;
        pthread_mutex_unlock(&st->ctl_mu);
    }
    pthread_rwlock_unlock(&st->lock);
    if (new_len != old_len) {
        /* Swap-last: every deleted index below the new length now holds
         * what was the last record; the names from the new length up are
         * gone. */
        qsort(idx, n, sizeof *idx, cmp_u64);
        size_t k = 0;
        for (size_t j = 0; j < n; j++)
            if (idx[j] < new_len && (k == 0 || idx[k - 1] != idx[j]))
                idx[k++] = idx[j];
        zfs_notify_change(fs, st, idx, k, new_len, old_len);
    }
    zfs_idxlist_reset(&h->list);
    return -zfs_errno(zrc);
}

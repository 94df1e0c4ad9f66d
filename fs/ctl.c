/*
 * ctl.c: the control files of a store folder, which answer in the
 * store's terms rather than per record.
 *
 *   .stats    one JSON object describing the store, built once and kept
 *             until a mutation (a read-only mount's store cannot change).
 *   .gather   per open handle: the text written is an index list; the
 *             first read after it gathers the whole batch in one library
 *             call and the reads hand it out; the read after the last
 *             byte returns end of file and the handle takes a new list.
 *             The batch buffer stays with the handle and is reused by the
 *             next batch, so a training loop's steady state neither
 *             allocates nor page-faults (a fresh 37 MiB buffer per batch
 *             cost more than the gather itself). A Dense raw store on a
 *             read-only mount needs no buffer at all: each read is answered
 *             with the records' bytes in the library's mapping, so the
 *             kernel's copy into the reader is the only one.
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
 * .gather, .compact and .delete are streams, not files: a shell opens one
 * descriptor for both directions (exec 3<>.gather), so after the write
 * the file position is past the written text. Offsets are therefore
 * ignored and each handle keeps its own read position. Every function
 * here that takes a handle expects its caller to hold h->mu, and to
 * reply to the request before releasing it (the bytes handed out live in
 * the handle).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

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
    zr_store_stats ss;
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

/* Drop the answer h is serving. The .gather buffer is kept for reuse. */
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
        h->outpos = 0;
    }
    return rc;
}

/* Hand out the next bytes of h->out; at its end, drop it and give 0. */
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

int zfs_gather_write(struct zfs_fs *fs, struct zfs_handle *h, const char *buf, size_t len)
{
    (void)fs;
    if (!h->st->zs)
        return -EIO;
    if (h->serving) {
        /* A new list: whatever was left of the last answer is dropped. */
        drop_answer(h);
        zfs_idxlist_reset(&h->list);
    }
    zfs_idxlist_set_limit(&h->list, zr_len(h->st->zs));
    int rc = zfs_idxlist_feed(&h->list, buf, len);
    if (rc != 0)
        zfs_idxlist_reset(&h->list);
    return rc;
}

/* A read of a by-reference batch touching more records than this is
 * copied into the handle's buffer instead: writev takes at most IOV_MAX
 * pieces, and for records this small the copy costs less than the
 * bookkeeping. */
#define SPAN_IOVS 256

/* Answer a read of a by-reference Dense batch: bytes [pos, end) of the
 * records h->list names, back to back, taken from the store's mapping.
 * Nothing can move them: the store is raw and the mount read-only. */
static int reply_by_ref(struct zfs_store *st, struct zfs_handle *h, fuse_req_t req,
                        uint64_t pos, uint64_t end)
{
    const uint64_t w = st->width;
    const uint64_t *idx = h->list.idx;
    uint64_t k0 = pos / w, k1 = (end - 1) / w;
    size_t count = (size_t)(k1 - k0 + 1);
    if (count > SPAN_IOVS) {
        int rc = reserve_gather(h, count * w);
        if (rc != 0)
            return rc;
        int zrc = zr_gather_dense(st->zs, idx + k0, count, h->gbuf);
        if (zrc != 0) {
            fuse_log(FUSE_LOG_ERR, "zrecordfs: %s: .gather: %s\n", st->path, zr_last_error());
            return -zfs_errno(zrc);
        }
        fuse_reply_buf(req, h->gbuf + (pos - k0 * w), (size_t)(end - pos));
        return 0;
    }
    struct iovec iov[SPAN_IOVS];
    for (size_t j = 0; j < count; j++) {
        uint64_t k = k0 + j;
        const void *p;
        uint64_t size;
        int zrc = zr_record_span(st->zs, idx[k], &p, &size);
        if (zrc != 0) {
            fuse_log(FUSE_LOG_ERR, "zrecordfs: %s: .gather: %s\n", st->path, zr_last_error());
            return -zfs_errno(zrc);
        }
        uint64_t a = k == k0 ? pos - k * w : 0;
        uint64_t b = k == k1 ? end - k * w : w;
        iov[j].iov_base = (char *)p + a;
        iov[j].iov_len = (size_t)(b - a);
    }
    fuse_reply_iov(req, iov, (int)count);
    return 0;
}

int zfs_gather_reply(struct zfs_fs *fs, struct zfs_handle *h, fuse_req_t req, size_t size)
{
    (void)fs;
    struct zfs_store *st = h->st;
    if (!st->zs)
        return -EIO;
    if (!h->serving) {
        zfs_idxlist_set_limit(&h->list, zr_len(st->zs));
        int rc = zfs_idxlist_finish(&h->list);
        if (rc != 0 || h->list.n == 0) {
            zfs_idxlist_reset(&h->list);
            if (rc == 0)
                fuse_reply_buf(req, NULL, 0);
            return rc;
        }
        if (st->direct && st->kind == ZR_DENSE && st->width > 0 &&
            h->list.n <= ZFS_GATHER_MAX / st->width) {
            /* Kept as the list: each read takes its records by reference. */
            h->by_ref = true;
            h->out = NULL;
            h->outlen = (size_t)(h->list.n * st->width);
            h->outpos = 0;
        } else {
            rc = build_gather(st, h);
            zfs_idxlist_reset(&h->list);
            if (rc != 0)
                return rc;
        }
        h->serving = true;
    }
    if (h->by_ref) {
        uint64_t pos = h->outpos, left = h->outlen - pos;
        uint64_t end = pos + (size < left ? size : left);
        if (end == pos) {
            drop_answer(h);
            fuse_reply_buf(req, NULL, 0);
            return 0;
        }
        int rc = reply_by_ref(st, h, req, pos, end);
        if (rc != 0) {
            drop_answer(h);
            return rc;
        }
        h->outpos = (size_t)end;
        return 0;
    }
    const char *p;
    size_t n;
    serve(h, size, &p, &n);
    fuse_reply_buf(req, p, n);
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
    zr_compact_result res;
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

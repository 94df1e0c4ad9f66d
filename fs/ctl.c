/*
 * ctl.c: the control files of a store folder that answer in the store's
 * terms rather than per record; .gather, which has rules of its own, is
 * gather.c's.
 *
 *   .stats    one JSON object describing the store, built once and kept
 *             until a mutation (a read-only mount's store cannot change).
 *   .compact  writing compacts the store (read-write mounts); reading
 *             gives the last result as JSON.
 *   .delete   (read-write mounts) the text written is an index list,
 *             deleted (swap-last) as one batch when the file is closed,
 *             so a list may take several writes and still be one batch;
 *             close(2) reports the outcome. A refused list fails every
 *             later write to the handle and its close as well, and
 *             nothing written to the handle is deleted.
 *
 * Delete and compact take the store lock exclusively (the library needs
 * the handle to itself for them); after a delete, the kernel is told to
 * forget the records whose bytes changed and the names that are gone
 * before the close returns, so no reader sees a stale record.
 *
 * .compact and .delete are streams that ignore offsets. The functions
 * here that take a handle expect their caller to hold h->mu and to reply
 * before releasing it (the bytes handed out live in the handle).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/base.h"
#include "fs/ctl.h"
#include "fs/notify.h"
#include "fs/record.h"

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

/* The length of the .stats text, and a copy of it (malloc'd) when out is
 * not NULL. */
static int stats_get(struct zfs_store *st, char **out, size_t *len)
{
    if (!st->zs)
        return -EIO;
    pthread_rwlock_rdlock(&st->lock);
    pthread_mutex_lock(&st->ctl_mu);
    int rc = ensure_stats(st);
    if (rc == 0 && out && !(*out = malloc(st->stats_len ? st->stats_len : 1)))
        rc = -ENOMEM;
    if (rc == 0 && out)
        memcpy(*out, st->stats_json, st->stats_len);
    if (rc == 0)
        *len = st->stats_len;
    pthread_mutex_unlock(&st->ctl_mu);
    pthread_rwlock_unlock(&st->lock);
    return rc;
}

int zfs_stats_text(struct zfs_fs *fs, struct zfs_store *st, char **out, size_t *len)
{
    (void)fs;
    return stats_get(st, out, len);
}

int zfs_stats_size(struct zfs_fs *fs, struct zfs_store *st, uint64_t *len)
{
    (void)fs;
    size_t n;
    int rc = stats_get(st, NULL, &n);
    if (rc == 0)
        *len = n;
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

/* Drop the .compact answer h is serving. */
static void drop_answer(struct zfs_handle *h)
{
    struct zfs_hcompact *c = &h->compact;
    free(c->text);
    c->text = NULL;
    c->len = c->pos = 0;
    c->serving = false;
}

/* Hand out the next bytes of h's .compact answer; at its end, drop it
 * and give 0. */
static void serve(struct zfs_handle *h, size_t size, const char **p, size_t *n)
{
    struct zfs_hcompact *c = &h->compact;
    size_t left = c->len - c->pos;
    size_t k = size < left ? size : left;
    *p = c->text + c->pos;
    *n = k;
    c->pos += k;
    if (k == 0)
        drop_answer(h);
}

int zfs_compact_read(struct zfs_fs *fs, struct zfs_handle *h, size_t size, const char **p,
                     size_t *n)
{
    (void)fs;
    struct zfs_hcompact *c = &h->compact;
    if (!c->serving) {
        int rc = zfs_compact_text(h->st, &c->text, &c->len);
        if (rc != 0)
            return rc;
        c->pos = 0;
        c->serving = true;
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
    /* A failed list stays failed until the handle closes, even when it
     * failed at its first write: every later write and the close report
     * it, and nothing written to the handle is deleted. A careless
     * writer that goes on after an error must not delete a list of its
     * tail. */
    struct zfs_idxlist *list = &h->del.list;
    zfs_idxlist_set_limit(list, zr_len(h->st->zs));
    int rc = zfs_idxlist_feed(list, buf, len);
    if (rc < 0)
        list->err = rc;
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
    struct zfs_idxlist *list = &h->del.list;
    if (!st->zs)
        return -EIO;
    zfs_idxlist_set_limit(list, zr_len(st->zs));
    int rc = zfs_idxlist_finish(list);
    if (rc != 0)
        return rc; /* kept failed: every close of the descriptor says so */
    if (list->n == 0)
        return 0;
    uint64_t *idx = list->idx;
    size_t n = list->n;
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
    zfs_idxlist_reset(list);
    return -zfs_errno(zrc);
}

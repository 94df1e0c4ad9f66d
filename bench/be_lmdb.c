/*
 * be_lmdb.c: the lmdb-raw row (liblmdb): one key-value pair per record,
 * the key the record's index (an integer key, MDB_INTEGERKEY), the value
 * the record's bytes (Ragged: framed with its shape, as the zrecord store
 * holds it).
 *
 * The write puts every record in index order (MDB_APPEND) in one write
 * transaction of an environment opened with MDB_NOSYNC, so durability is
 * deferred to the file system as for every other row. A gather runs one
 * read-only transaction per batch (reset and renewed, the library's
 * idiom for a reader that comes back) and copies each value out of the
 * memory map with memcpy, on the calling thread: LMDB does no parallel
 * reads of its own.
 */
#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/bench.h"

struct lmdb {
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    const struct workload *w;
    uint8_t *buf;
    uint64_t cap;
};

static int lmdb_fail(const char *what, int rc)
{
    fprintf(stderr, "zrbench: lmdb %s: %s\n", what, mdb_strerror(rc));
    return -1;
}

static int open_env(struct backend *b, const struct workload *w, unsigned flags, MDB_env **out)
{
    MDB_env *env = NULL;
    /* Room for every record with its page overhead: values over a page
     * take whole overflow pages, so a 2 KiB record may take two pages. */
    uint64_t per = (w->ragged ? 0 : w->width) + wl_prefix(w) + 4096;
    size_t map = (size_t)(2 * w->logical + w->n * per + (64u << 20));
    int rc = mdb_env_create(&env);
    if (rc == 0)
        rc = mdb_env_set_mapsize(env, map);
    if (rc == 0)
        rc = mdb_env_open(env, b->dir, flags, 0600);
    if (rc != 0) {
        mdb_env_close(env);
        return lmdb_fail(b->dir, rc);
    }
    *out = env;
    return 0;
}

static int lmdb_write(struct backend *b, const struct workload *w)
{
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    MDB_dbi dbi;
    uint8_t *frame = NULL;
    int rc;
    if (mkdir(b->dir, 0700) != 0 && errno != EEXIST)
        return -1;
    if (open_env(b, w, MDB_NOSYNC, &env) != 0)
        return -1;
    rc = mdb_txn_begin(env, NULL, 0, &txn);
    if (rc == 0)
        rc = mdb_dbi_open(txn, NULL, MDB_INTEGERKEY, &dbi);
    if (w->ragged) {
        uint64_t most = 0;
        for (size_t k = 0; k < w->n; k++)
            most = bench_frame_size(w, k) > most ? bench_frame_size(w, k) : most;
        frame = bench_xmalloc(most);
    }
    for (size_t k = 0; rc == 0 && k < w->n; k++) {
        size_t key = k;
        MDB_val kv = {sizeof key, &key}, v;
        if (w->ragged) {
            bench_frame(w, k, frame);
            v = (MDB_val){bench_frame_size(w, k), frame};
        } else {
            v = (MDB_val){w->width, (void *)wl_rec(w, k)};
        }
        rc = mdb_put(txn, dbi, &kv, &v, MDB_APPEND);
    }
    if (rc == 0) {
        rc = mdb_txn_commit(txn);
        txn = NULL;
    }
    if (txn)
        mdb_txn_abort(txn);
    free(frame);
    mdb_env_close(env);
    return rc ? lmdb_fail("write", rc) : 0;
}

static int lmdb_prepare(struct backend *b, const struct workload *w)
{
    struct lmdb *l = b->state;
    if (open_env(b, w, MDB_RDONLY, &l->env) != 0)
        return -1;
    int rc = mdb_txn_begin(l->env, NULL, MDB_RDONLY, &l->txn);
    if (rc == 0)
        rc = mdb_dbi_open(l->txn, NULL, MDB_INTEGERKEY, &l->dbi);
    if (rc != 0)
        return lmdb_fail("open", rc);
    mdb_txn_reset(l->txn);
    l->w = w;
    l->cap = w->ragged ? bench_max_batch_bytes(w, wl_prefix(w)) : w->batch * w->width;
    l->buf = bench_batch_alloc(l->cap);
    return 0;
}

static int lmdb_gather(struct backend *b, const uint64_t *idx, size_t n, struct batch_out *o)
{
    struct lmdb *l = b->state;
    const struct workload *w = l->w;
    int rc = mdb_txn_renew(l->txn);
    if (rc != 0)
        return lmdb_fail("renew", rc);
    uint64_t at = 0;
    o->buf = l->buf;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        size_t key = (size_t)idx[k];
        MDB_val kv = {sizeof key, &key}, v;
        rc = mdb_get(l->txn, l->dbi, &kv, &v);
        if (rc != 0)
            break;
        if (!w->ragged) {
            if (v.mv_size != w->width) {
                rc = MDB_CORRUPTED;
                break;
            }
            memcpy(l->buf + k * w->width, v.mv_data, w->width);
            continue;
        }
        if (at + v.mv_size > l->cap) {
            rc = MDB_CORRUPTED;
            break;
        }
        memcpy(l->buf + at, v.mv_data, v.mv_size);
        if (bench_unframe(w, l->buf + at, v.mv_size, o, k) != 0)
            rc = MDB_CORRUPTED;
        at += (v.mv_size + 7) & ~(uint64_t)7;
    }
    mdb_txn_reset(l->txn);
    return rc ? lmdb_fail("get", rc) : 0;
}

static uint64_t lmdb_footprint(struct backend *b) { return dir_allocated(b->dir); }

static void lmdb_release(struct backend *b)
{
    struct lmdb *l = b->state;
    if (!l)
        return;
    if (l->txn)
        mdb_txn_abort(l->txn);
    if (l->env)
        mdb_env_close(l->env);
    free(l->buf);
    free(l);
    b->state = NULL;
}

static const struct backend_ops lmdb_ops = {
    .write = lmdb_write,
    .prepare = lmdb_prepare,
    .gather = lmdb_gather,
    .footprint = lmdb_footprint,
    .release = lmdb_release,
};

int be_lmdb_init(struct backend *b, enum backend_kind kind)
{
    (void)kind;
    b->state = calloc(1, sizeof(struct lmdb));
    if (!b->state)
        return -1;
    b->name = "lmdb-raw";
    b->threads = 1;
    b->ops = &lmdb_ops;
    snprintf(b->note, sizeof b->note,
             "key = index (MDB_INTEGERKEY), one read transaction per batch, values copied out "
             "of the map on one thread");
    return 0;
}

/*
 * be_sqlite.c: the sqlite-raw row (libsqlite3): one table, one row per
 * record, the index as the INTEGER PRIMARY KEY (the rowid, so a lookup is
 * one B-tree descent) and the record's bytes as a BLOB (Ragged: framed
 * with its shape, as the zrecord store holds it).
 *
 * The write inserts every record in index order with one prepared
 * statement inside one transaction, with synchronous=OFF so durability is
 * deferred to the file system as for every other row. A gather steps one
 * prepared SELECT per record and copies the blob into the batch, on the
 * calling thread: SQLite reads on the thread that asks. The connection
 * keeps SQLite's defaults (page cache of 2 MiB, no memory map), which is
 * what a user who opens the file gets.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/bench.h"

struct sql {
    char *path;
    sqlite3 *db;
    sqlite3_stmt *get;
    const struct workload *w;
    uint8_t *buf;
    uint64_t cap;
};

static int sql_fail(sqlite3 *db, const char *what)
{
    fprintf(stderr, "zrbench: sqlite %s: %s\n", what, db ? sqlite3_errmsg(db) : "out of memory");
    return -1;
}

static int sql_write(struct backend *b, const struct workload *w)
{
    struct sql *s = b->state;
    sqlite3 *db = NULL;
    sqlite3_stmt *put = NULL;
    uint8_t *frame = NULL;
    int rc = -1;
    if (mkdir(b->dir, 0700) != 0 && errno != EEXIST)
        return -1;
    if (sqlite3_open(s->path, &db) != SQLITE_OK ||
        sqlite3_exec(db, "PRAGMA synchronous=OFF; CREATE TABLE r(id INTEGER PRIMARY KEY, v BLOB); "
                         "BEGIN",
                     NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "INSERT INTO r(id, v) VALUES(?1, ?2)", -1, &put, NULL) != SQLITE_OK) {
        sql_fail(db, "create");
        goto out;
    }
    if (w->ragged) {
        uint64_t most = 0;
        for (size_t k = 0; k < w->n; k++)
            most = bench_frame_size(w, k) > most ? bench_frame_size(w, k) : most;
        frame = bench_xmalloc(most);
    }
    for (size_t k = 0; k < w->n; k++) {
        const void *v = wl_rec(w, k);
        uint64_t len = w->width;
        if (w->ragged) {
            bench_frame(w, k, frame);
            v = frame;
            len = bench_frame_size(w, k);
        }
        if (sqlite3_bind_int64(put, 1, (sqlite3_int64)k) != SQLITE_OK ||
            sqlite3_bind_blob64(put, 2, v, len, SQLITE_STATIC) != SQLITE_OK ||
            sqlite3_step(put) != SQLITE_DONE || sqlite3_reset(put) != SQLITE_OK) {
            sql_fail(db, "insert");
            goto out;
        }
    }
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        sql_fail(db, "commit");
        goto out;
    }
    rc = 0;
out:
    sqlite3_finalize(put);
    if (sqlite3_close(db) != SQLITE_OK)
        rc = -1;
    free(frame);
    return rc;
}

static int sql_prepare(struct backend *b, const struct workload *w)
{
    struct sql *s = b->state;
    if (sqlite3_open_v2(s->path, &s->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->db, "SELECT v FROM r WHERE id = ?1", -1, &s->get, NULL) != SQLITE_OK)
        return sql_fail(s->db, "open");
    s->w = w;
    s->cap = w->ragged ? bench_max_batch_bytes(w, wl_prefix(w)) : w->batch * w->width;
    s->buf = bench_batch_alloc(s->cap);
    return 0;
}

static int sql_gather(struct backend *b, const uint64_t *idx, size_t n, struct batch_out *o)
{
    struct sql *s = b->state;
    const struct workload *w = s->w;
    uint64_t at = 0;
    o->buf = s->buf;
    for (size_t k = 0; k < n; k++) {
        if (sqlite3_bind_int64(s->get, 1, (sqlite3_int64)idx[k]) != SQLITE_OK ||
            sqlite3_step(s->get) != SQLITE_ROW)
            return sql_fail(s->db, "select");
        const void *v = sqlite3_column_blob(s->get, 0);
        uint64_t len = (uint64_t)sqlite3_column_bytes(s->get, 0);
        int bad = 0;
        if (!w->ragged) {
            bad = len != w->width;
            if (!bad)
                memcpy(s->buf + k * w->width, v, len);
        } else {
            bad = at + len > s->cap;
            if (!bad) {
                memcpy(s->buf + at, v, len);
                bad = bench_unframe(w, s->buf + at, len, o, k) != 0;
                at += (len + 7) & ~(uint64_t)7;
            }
        }
        sqlite3_reset(s->get);
        if (bad) {
            fprintf(stderr, "zrbench: sqlite: row %llu is not the expected record\n",
                    (unsigned long long)idx[k]);
            return -1;
        }
    }
    return 0;
}

static uint64_t sql_footprint(struct backend *b) { return dir_allocated(b->dir); }

static void sql_release(struct backend *b)
{
    struct sql *s = b->state;
    if (!s)
        return;
    sqlite3_finalize(s->get);
    sqlite3_close(s->db);
    free(s->buf);
    free(s->path);
    free(s);
    b->state = NULL;
}

static const struct backend_ops sql_ops = {
    .write = sql_write,
    .prepare = sql_prepare,
    .gather = sql_gather,
    .footprint = sql_footprint,
    .release = sql_release,
};

int be_sqlite_init(struct backend *b, enum backend_kind kind)
{
    (void)kind;
    struct sql *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    size_t n = strlen(b->dir) + 16;
    s->path = bench_xmalloc(n);
    snprintf(s->path, n, "%s/data.sqlite", b->dir);
    b->name = "sqlite-raw";
    b->threads = 1;
    b->ops = &sql_ops;
    b->state = s;
    snprintf(b->note, sizeof b->note,
             "one BLOB row per record, id INTEGER PRIMARY KEY, one prepared SELECT per record "
             "on one thread, default page cache, no mmap");
    return 0;
}

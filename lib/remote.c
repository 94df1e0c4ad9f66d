/*
 * remote.c: a store in an object store (s3://bucket/prefix), read-only.
 * Its objects are its files, byte for byte: opening lists them (one
 * request for the sizes of every chunk file and segment), reads the
 * three small ones (store.zr, meta.zr, dict.zr) and checks them as a
 * local open does; no record, and no entry, is read until asked for.
 *
 * Every read of a remote handle is a planned one (plan.h): gather.c and
 * ragged.c hand their pieces to zr_plan_read, which sends them here.
 * Pieces are sorted by file and offset, and pieces of a file closer than
 * MERGE_GAP become one ranged GET (a request costs the server far more
 * than a few KiB more of its answer); a range of one piece lands in
 * place, a merged one in a buffer from which its pieces are copied.
 * zr push (src/) writes meta.zr last, so a prefix whose upload has not
 * finished has no header and no reader takes it for a store.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "intent.h"
#include "plan.h"
#include "rcache.h"
#include "s3.h"

/* Pieces of one file this close are fetched by one request. */
#define MERGE_GAP (64u << 10)
/* A merged request asks for at most this many bytes. */
#define RANGE_MAX (8u << 20)
/* The bound of a cache folder unless LOADERX_CACHE_SIZE says otherwise. */
#define DEFAULT_CACHE_BYTES ((uint64_t)8 << 30)

/* The record table kept in memory (below). */
static int tcache_make(zr_store *s);
static void tcache_free(zr_store *s);

/* The id N of a name "N.suffix" in canonical decimal, or -1. */
static int64_t file_id(const char *name, const char *suffix)
{
    if (name[0] < '0' || name[0] > '9' || (name[0] == '0' && name[1] != '.'))
        return -1;
    char *end;
    unsigned long long id = strtoull(name, &end, 10);
    if (*end != '.' || strcmp(end + 1, suffix) != 0 || id >= ZR_MAX_FILES)
        return -1;
    return (int64_t)id;
}

/* What a listing of the store's prefix found. */
struct listing {
    uint64_t *chunk; /* sizes by id; UINT64_MAX where absent */
    uint64_t *loc;
    char (*chunk_etag)[72], (*loc_etag)[72]; /* ETags by id */
    uint32_t nchunk, nloc; /* one past the highest id seen */
    bool meta, store, dict, intent;
    uint64_t version; /* a hash of every object's name, size and ETag */
    bool etags;       /* every object of the store has an ETag */
};

/* FNV-1a, folded over n bytes at p into h. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    for (size_t k = 0; k < n; k++)
        h = (h ^ ((const uint8_t *)p)[k]) * 1099511628211ull;
    return h;
}

static int list_store(zr_store *s, struct listing *ls)
{
    struct zr_s3_obj *objs;
    size_t n;
    int rc = zr_s3_list(s->remote, "", true, &objs, &n);
    if (rc != 0)
        return rc;
    for (size_t k = 0; k < n; k++) {
        int64_t c = file_id(objs[k].name, "chunk"), g = file_id(objs[k].name, "loc");
        if (c >= 0 && (uint32_t)c + 1 > ls->nchunk)
            ls->nchunk = (uint32_t)c + 1;
        if (g >= 0 && (uint32_t)g + 1 > ls->nloc)
            ls->nloc = (uint32_t)g + 1;
    }
    ls->chunk = zr_malloc((ls->nchunk + 1) * sizeof *ls->chunk);
    ls->loc = zr_malloc((ls->nloc + 1) * sizeof *ls->loc);
    ls->chunk_etag = zr_calloc(ls->nchunk + 1, sizeof *ls->chunk_etag);
    ls->loc_etag = zr_calloc(ls->nloc + 1, sizeof *ls->loc_etag);
    if (!ls->chunk || !ls->loc || !ls->chunk_etag || !ls->loc_etag) {
        zr_s3_list_free(objs, n);
        return zr_err(ZR_ENOMEM, "listing %s", s->path);
    }
    memset(ls->chunk, 0xff, (ls->nchunk + 1) * sizeof *ls->chunk);
    memset(ls->loc, 0xff, (ls->nloc + 1) * sizeof *ls->loc);
    ls->version = 1469598103934665603ull;
    ls->etags = true;
    for (size_t k = 0; k < n; k++) {
        const struct zr_s3_obj *o = &objs[k];
        int64_t c = file_id(o->name, "chunk"), g = file_id(o->name, "loc");
        if (o->dir)
            continue;
        ls->version = fnv(ls->version, o->name, strlen(o->name) + 1);
        ls->version = fnv(ls->version, &o->size, sizeof o->size);
        ls->version = fnv(ls->version, o->etag, strlen(o->etag) + 1);
        ls->etags &= o->etag[0] != '\0';
        if (c >= 0) {
            ls->chunk[c] = o->size;
            memcpy(ls->chunk_etag[c], o->etag, sizeof ls->chunk_etag[c]);
        } else if (g >= 0) {
            ls->loc[g] = o->size;
            memcpy(ls->loc_etag[g], o->etag, sizeof ls->loc_etag[g]);
        }
        ls->meta |= strcmp(o->name, ZR_META_FILE) == 0;
        ls->store |= strcmp(o->name, ZR_STORE_FILE) == 0;
        ls->dict |= strcmp(o->name, ZR_DICT_FILE) == 0;
        ls->intent |= strcmp(o->name, ZR_INTENT_FILE) == 0;
    }
    zr_s3_list_free(objs, n);
    return 0;
}

/* Read the identity, the header and the dictionary. */
static int load_small_files(zr_store *s, const struct listing *ls)
{
    if (!ls->store)
        return zr_err(ZR_ENOTSTORE, "%s holds no store (no store.zr)", s->path);
    if (!ls->meta)
        return zr_err(ZR_ENOTSTORE, "%s has no meta.zr: its upload has not finished "
                      "(zr push sends the header last)", s->path);
    if (ls->intent)
        return zr_err(ZR_ECORRUPT, "%s holds an interrupted delete or compaction (intent.zr): "
                      "open the store locally to finish it, then push it again", s->path);
    void *buf;
    size_t len;
    int rc = zr_s3_get(s->remote, ZR_STORE_FILE, ZR_IDENTITY_MAX, &buf, &len, false);
    if (rc != 0)
        return rc;
    rc = zr_identity_decode(buf, len, &s->id);
    zr_free(buf);
    if (rc != 0)
        return rc;
    zr_set_width(s);
    if ((rc = zr_s3_get(s->remote, ZR_META_FILE, ZR_HEADER_SIZE + 1, &buf, &len, false)) != 0)
        return rc;
    if (len != ZR_HEADER_SIZE)
        rc = zr_err(ZR_ECORRUPT, "%s/meta.zr is %zu bytes, not %d", s->path, len, ZR_HEADER_SIZE);
    else
        rc = zr_header_load(s, buf);
    zr_free(buf);
    if (rc != 0)
        return rc;
    buf = NULL;
    len = 0;
    if (ls->dict && (rc = zr_s3_get(s->remote, ZR_DICT_FILE, ZR_DICT_MAX, &buf, &len, false)) != 0)
        return rc;
    return zr_dict_load(s, buf, len);
}

/* Add the chunk files and segments the header names, which must all be
 * there in full (R3): a store is pushed whole, so files that end early
 * are an upload that went wrong, not records a power cut lost. */
static int add_files(zr_store *s, const struct listing *ls)
{
    int rc;
    for (uint32_t c = 0; c <= s->hdr.tail_chunk; c++) {
        if (c >= ls->nchunk || ls->chunk[c] == UINT64_MAX) {
            /* The empty chunk a full one hands the frontier to (R7). */
            if (c > 0 && c == s->hdr.tail_chunk && zr_lost_empty_tail(s))
                break;
            return zr_err(ZR_ECORRUPT, "%s/%u.chunk is missing", s->path, c);
        }
        if ((rc = zr_ftable_add_sized(&s->chunks, c, ls->chunk[c])) != 0)
            return rc;
    }
    /* The tail chunk holds the bytes up to the frontier. */
    if (s->hdr.tail_chunk < ls->nchunk && ls->chunk[s->hdr.tail_chunk] != UINT64_MAX &&
        ls->chunk[s->hdr.tail_chunk] < s->hdr.tail_offset)
        return zr_err(ZR_ECORRUPT, "%s/%u.chunk is shorter than the header's frontier %u",
                      s->path, s->hdr.tail_chunk, s->hdr.tail_offset);
    uint64_t per_seg = (uint64_t)1 << s->seg_shift;
    uint64_t nseg = (s->hdr.length + per_seg - 1) >> s->seg_shift;
    for (uint64_t g = 0; g < nseg; g++) {
        uint64_t need = ZR_MIN(per_seg, s->hdr.length - g * per_seg) * ZR_LOC_SIZE;
        if (g >= ls->nloc || ls->loc[g] == UINT64_MAX)
            return zr_err(ZR_ECORRUPT, "%s/%llu.loc is missing", s->path, (unsigned long long)g);
        if (ls->loc[g] < need)
            return zr_err(ZR_ECORRUPT, "%s/%llu.loc ends before the entries the header counts",
                          s->path, (unsigned long long)g);
        if ((rc = zr_ftable_add_sized(&s->segs, (uint32_t)g, ls->loc[g])) != 0)
            return rc;
    }
    /* Each read checks that its object is the one listed. */
    uint32_t nc = atomic_load(&s->chunks.count), ns = atomic_load(&s->segs.count);
    if (!(s->etags = zr_calloc((size_t)nc + ns + 1, sizeof *s->etags)))
        return zr_err(ZR_ENOMEM, "%s: the ETags of %u files", s->path, nc + ns);
    for (uint32_t c = 0; c < nc; c++)
        memcpy(s->etags[c], ls->chunk_etag[c], sizeof s->etags[c]);
    for (uint32_t g = 0; g < ns; g++)
        memcpy(s->etags[nc + g], ls->loc_etag[g], sizeof s->etags[nc + g]);
    return 0;
}

const char *zr_remote_etag(const zr_store *s, const struct zr_ftable *t, uint32_t id)
{
    uint32_t nc = atomic_load_explicit(&s->chunks.count, memory_order_relaxed);
    return s->etags ? s->etags[t == &s->chunks ? id : nc + id] : NULL;
}

/* The cache's bound: LOADERX_CACHE_SIZE, in bytes or with a suffix K, M,
 * G or T (powers of 1024). */
static int cache_bound(uint64_t *max)
{
    const char *env = getenv("LOADERX_CACHE_SIZE");
    *max = DEFAULT_CACHE_BYTES;
    if (!env || !*env)
        return 0;
    char *end;
    unsigned long long v = env[0] >= '0' && env[0] <= '9' ? strtoull(env, &end, 10) : 0;
    if (v == 0)
        end = (char *)env;
    unsigned shift = 0;
    switch (*end) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    case 'T': case 't': shift = 40; end++; break;
    default: break;
    }
    if (end == env || *end != '\0' || v == 0 || v > (UINT64_MAX >> shift))
        return zr_err(ZR_EINVAL, "LOADERX_CACHE_SIZE must be a number of bytes, with K, M, G "
                      "or T after it if you like, not \"%s\"", env);
    *max = (uint64_t)v << shift;
    return 0;
}

int zr_remote_open(zr_store *s)
{
    if (s->writable)
        return zr_err(ZR_EROFS, "%s: a store in an object store opens read-only (ZR_RDONLY); "
                      "write it locally and publish it with zr push", s->path);
    struct zr_s3 *c;
    int rc = zr_s3_open(&c, s->path);
    if (rc != 0)
        return rc;
    /* Under the cache's lock, which the fork handlers hold (tables.c). */
    pthread_mutex_lock(&s->cache.lock);
    s->remote = c;
    pthread_mutex_unlock(&s->cache.lock);
    struct listing ls = {0};
    rc = list_store(s, &ls);
    if (rc == 0)
        rc = load_small_files(s, &ls);
    if (rc == 0)
        rc = add_files(s, &ls);
    zr_free(ls.chunk);
    zr_free(ls.loc);
    zr_free(ls.chunk_etag);
    zr_free(ls.loc_etag);
    /* Without ETags a store pushed again with the same sizes could not be
     * told from the one cached: such a store is read without the cache. */
    const char *dir = getenv("LOADERX_CACHE_DIR");
    if (rc == 0 && dir && *dir && ls.etags) {
        uint64_t max;
        if ((rc = cache_bound(&max)) == 0)
            rc = zr_rcache_attach(s, dir, max, ls.version);
    }
    if (rc == 0 && !s->rcache)
        rc = tcache_make(s);
    if (rc != 0)
        return rc;
    /* A remote handle always plans its reads (readmode.c asks no more);
     * with a cache, the batches the cache holds are copied from its
     * files' mappings, which then ask for huge pages as a resident local
     * store's do. */
    if (s->rcache)
        zr_tables_set_mode(s, ZR_READ_MAPPED);
    else
        atomic_store(&s->read_mode, ZR_READ_PLANNED);
    return zr_tables_settle(s);
}

void zr_remote_close(zr_store *s)
{
    tcache_free(s);
    zr_free(s->etags);
    s->etags = NULL;
    zr_rcache_free(s);
    zr_s3_close(s->remote);
    s->remote = NULL;
}

/* ---- reading pieces ---------------------------------------------------- */

/* A request: pieces [first, first + count) of the sorted pieces, which
 * lie in bytes [off, off + len) of their file. */
struct request {
    size_t first, count;
    uint8_t *buf; /* the merged answer; NULL when a single piece takes it in place */
    char name[32];
};

struct remote_read {
    struct zr_piece *p;
    struct request *req;
    zr_piece_fn done;
    void *arg;
};

static int piece_cmp(const void *x, const void *y)
{
    const struct zr_piece *a = x, *b = y;
    if (a->file != b->file)
        return a->file < b->file ? -1 : 1;
    return a->off < b->off ? -1 : a->off > b->off;
}

/* A request's bytes are in: hand each of its pieces over. */
static int request_done(void *arg, const struct zr_s3_range *r)
{
    struct remote_read *rr = arg;
    const struct request *q = &rr->req[r->tag];
    for (size_t k = q->first; k < q->first + q->count; k++) {
        struct zr_piece *p = &rr->p[k];
        if (q->buf)
            memcpy(p->to, q->buf + (p->off - r->off), p->len);
        int rc = rr->done ? rr->done(rr->arg, p) : 0;
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Bytes of merged requests' buffers one round of fetch_direct holds at
 * most: pieces close enough to merge may be far apart, so that a batch's
 * buffers could be many times its bytes. */
#define ROUND_BUFFERS (64u << 20)

/* Read pieces p[0..n) of t from the object store, in requests of merged
 * pieces, a round of requests at a time; *reads counts the requests. */
static int fetch_direct(zr_store *s, struct zr_ftable *t, struct zr_piece *p, size_t n,
                        zr_piece_fn done, void *arg, size_t *reads)
{
    qsort(p, n, sizeof *p, piece_cmp);
    struct request *req = zr_calloc(n, sizeof *req);
    struct zr_s3_range *r = zr_calloc(n, sizeof *r);
    size_t m = 0;
    int rc = 0;
    if (!req || !r) {
        rc = zr_err(ZR_ENOMEM, "%s: planning the reads of %zu pieces", s->path, n);
        goto out;
    }
    for (size_t k = 0; k < n; k++) {
        uint64_t end = p[k].off + p[k].len;
        struct zr_s3_range *last = m ? &r[m - 1] : NULL;
        /* Pieces do not overlap, except in a damaged store that zr_verify
         * reads: a piece inside the range before it leaves it as it is. */
        if (last && p[k].file == p[k - 1].file && p[k].off <= last->off + last->len + MERGE_GAP &&
            end - last->off <= RANGE_MAX) {
            last->len = ZR_MAX(last->len, end - last->off);
            req[m - 1].count++;
            continue;
        }
        req[m] = (struct request){.first = k, .count = 1};
        snprintf(req[m].name, sizeof req[m].name, "%u.%s", p[k].file, t->suffix);
        r[m] = (struct zr_s3_range){.name = req[m].name, .off = p[k].off, .len = p[k].len,
                                    .to = p[k].to, .tag = m,
                                    .etag = zr_remote_etag(s, t, p[k].file)};
        m++;
    }
    *reads = m;
    struct remote_read rr = {.p = p, .req = req, .done = done, .arg = arg};
    for (size_t a = 0; rc == 0 && a < m;) {
        size_t b = a;
        uint64_t held = 0;
        for (; b < m && (b == a || req[b].count == 1 || held + r[b].len <= ROUND_BUFFERS); b++) {
            if (req[b].count == 1)
                continue;
            if (r[b].len > SIZE_MAX || !(req[b].buf = zr_malloc((size_t)r[b].len))) {
                rc = zr_err(ZR_ENOMEM, "%s: a buffer of %llu bytes for merged reads", s->path,
                            (unsigned long long)r[b].len);
                break;
            }
            r[b].to = req[b].buf;
            held += r[b].len;
        }
        if (rc == 0)
            rc = zr_s3_get_ranges(s->remote, r + a, b - a, 0, request_done, &rr);
        for (size_t j = a; j < b; j++) {
            zr_free(req[j].buf);
            req[j].buf = NULL;
        }
        a = b;
    }
out:
    zr_free(req);
    zr_free(r);
    return rc;
}

/* ---- the record table, kept in memory ---------------------------------- */

/* Without a cache folder, a remote store's record table is kept in
 * memory in blocks of TABLE_BLOCK bytes, fetched whole as entries in them
 * are first asked for, in a direct-mapped table of LOADERX_S3_TABLE_CACHE
 * bytes (64 MiB by default, 0: none): the entries of later batches then
 * come without a request, so that a random batch of a Ragged or
 * compressed store costs a request per record, not two. */
#define TABLE_BLOCK (64u << 10)
#define DEFAULT_TABLE_CACHE ((uint64_t)64 << 20)

struct tslot {
    uint64_t key; /* segment << 32 | block, + 1; 0: empty */
    uint8_t *bytes;
};

struct zr_tcache {
    pthread_mutex_t lock;
    struct tslot *slot;
    size_t nslots;
};

static int tcache_make(zr_store *s)
{
    const char *env = getenv("LOADERX_S3_TABLE_CACHE");
    uint64_t bytes = DEFAULT_TABLE_CACHE;
    if (env && *env) {
        char *end;
        bytes = env[0] >= '0' && env[0] <= '9' ? strtoull(env, &end, 10) : 1;
        if (env[0] < '0' || env[0] > '9' || *end)
            return zr_err(ZR_EINVAL, "LOADERX_S3_TABLE_CACHE must be a number of bytes, not "
                          "\"%s\"", env);
    }
    /* Kept only where the whole table fits: a table many times the bound
     * would have each entry cost a block's bytes, for little reuse. */
    uint64_t table = 0;
    uint32_t nsegs = atomic_load(&s->segs.count);
    for (uint32_t g = 0; g < nsegs; g++)
        table += atomic_load(&zr_ftable_at(&s->segs, g)->size);
    size_t n = (size_t)(bytes / TABLE_BLOCK);
    if (n == 0 || table > bytes)
        return 0;
    struct zr_tcache *tc = zr_calloc(1, sizeof *tc);
    if (!tc || !(tc->slot = zr_calloc(n, sizeof *tc->slot))) {
        zr_free(tc);
        return zr_err(ZR_ENOMEM, "%s: a table of %zu blocks", s->path, n);
    }
    tc->nslots = n;
    pthread_mutex_init(&tc->lock, NULL);
    /* Under the cache's lock, which the fork handlers hold (tables.c). */
    pthread_mutex_lock(&s->cache.lock);
    s->tcache = tc;
    pthread_mutex_unlock(&s->cache.lock);
    return 0;
}

static void tcache_free(zr_store *s)
{
    struct zr_tcache *tc = s->tcache;
    if (!tc)
        return;
    for (size_t k = 0; k < tc->nslots; k++)
        zr_free(tc->slot[k].bytes);
    zr_free(tc->slot);
    pthread_mutex_destroy(&tc->lock);
    zr_free(tc);
    s->tcache = NULL;
}

static uint64_t tkey(const struct zr_piece *p)
{
    return ((uint64_t)p->file << 32 | p->off / TABLE_BLOCK) + 1;
}

static struct tslot *tslot_of(struct zr_tcache *tc, uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    h ^= h >> 32; /* the segment is in the key's high half */
    return &tc->slot[h % tc->nslots];
}

/* Copy piece p (inside one block) out of the kept table; false if its
 * block is not kept. Under the table's lock. */
static bool tcache_copy(struct zr_tcache *tc, const struct zr_piece *p)
{
    uint64_t key = tkey(p);
    struct tslot *sl = tslot_of(tc, key);
    if (sl->key != key)
        return false;
    memcpy(p->to, sl->bytes + p->off % TABLE_BLOCK, p->len);
    return true;
}

void zr_tcache_fork(zr_store *s, bool before)
{
    if (!s->tcache)
        return;
    if (before)
        pthread_mutex_lock(&s->tcache->lock);
    else
        pthread_mutex_unlock(&s->tcache->lock);
}

/* Read the entries p[0..n) (each inside one block) through the kept
 * table: those of kept blocks copied, the blocks of the others fetched
 * whole, kept, and copied from. */
static int read_table(zr_store *s, struct zr_piece *p, size_t n, size_t *reads)
{
    struct zr_tcache *tc = s->tcache;
    struct zr_piece *blk = zr_malloc((n ? n : 1) * sizeof *blk);
    size_t *miss = zr_malloc((n ? n : 1) * sizeof *miss);
    size_t m = 0, nb = 0;
    int rc = blk && miss ? 0 : zr_err(ZR_ENOMEM, "%s: reading %zu entries", s->path, n);
    pthread_mutex_lock(&tc->lock);
    for (size_t k = 0; rc == 0 && k < n; k++)
        if (!tcache_copy(tc, &p[k]))
            miss[m++] = k;
    pthread_mutex_unlock(&tc->lock);
    /* The distinct blocks of the missing entries, by segment and offset. */
    for (size_t j = 0; rc == 0 && j < m; j++) {
        const struct zr_piece *q = &p[miss[j]];
        uint64_t off = q->off / TABLE_BLOCK * TABLE_BLOCK;
        uint64_t size = atomic_load(&zr_ftable_at(&s->segs, q->file)->size);
        blk[nb++] = (struct zr_piece){.file = q->file, .off = off,
                                      .len = (uint32_t)ZR_MIN((uint64_t)TABLE_BLOCK, size - off)};
    }
    qsort(blk, nb, sizeof *blk, piece_cmp);
    size_t u = 0;
    for (size_t j = 0; j < nb; j++)
        if (u == 0 || piece_cmp(&blk[u - 1], &blk[j]) != 0)
            blk[u++] = blk[j];
    nb = u;
    for (size_t j = 0; rc == 0 && j < nb; j++)
        if (!(blk[j].to = zr_malloc(TABLE_BLOCK)))
            rc = zr_err(ZR_ENOMEM, "%s: a block of the record table", s->path);
    if (rc == 0 && nb > 0)
        rc = fetch_direct(s, &s->segs, blk, nb, NULL, NULL, reads);
    if (rc == 0 && nb > 0) {
        /* fetch_direct keeps them sorted by segment and offset. */
        for (size_t j = 0; j < m; j++) {
            const struct zr_piece *q = &p[miss[j]];
            struct zr_piece key = {.file = q->file, .off = q->off / TABLE_BLOCK * TABLE_BLOCK};
            const struct zr_piece *b = bsearch(&key, blk, nb, sizeof *blk, piece_cmp);
            memcpy(q->to, b->to + q->off % TABLE_BLOCK, q->len);
        }
        pthread_mutex_lock(&tc->lock);
        for (size_t j = 0; j < nb; j++) {
            uint64_t key = tkey(&blk[j]);
            struct tslot *sl = tslot_of(tc, key);
            zr_free(sl->bytes);
            *sl = (struct tslot){.key = key, .bytes = blk[j].to};
            blk[j].to = NULL;
        }
        pthread_mutex_unlock(&tc->lock);
    }
    for (size_t j = 0; blk && j < nb; j++)
        zr_free(blk[j].to);
    zr_free(blk);
    zr_free(miss);
    return rc;
}

int zr_remote_read(zr_store *s, struct zr_ftable *t, struct zr_piece *p, size_t n,
                   zr_piece_fn done, void *arg, struct zr_plan_stats *st)
{
    if (st)
        *st = (struct zr_plan_stats){0};
    if (n == 0)
        return 0;
    size_t reads = 0;
    /* Entries (the planned reads' pieces of the table are single ones)
     * come through the kept table; larger pieces, a scan's, do not. */
    bool entries = !s->rcache && s->tcache && t == &s->segs;
    for (size_t k = 0; entries && k < n; k++)
        entries = p[k].len == ZR_LOC_SIZE && p[k].off % ZR_LOC_SIZE == 0;
    if (entries) {
        int rc = read_table(s, p, n, &reads);
        for (size_t k = 0; rc == 0 && done && k < n; k++)
            rc = done(arg, &p[k]);
        if (st)
            st->reads = reads;
        return rc;
    }
    if (!s->rcache) {
        int rc = fetch_direct(s, t, p, n, done, arg, &reads);
        if (st)
            st->reads = reads;
        return rc;
    }
    /* With a cache, the blocks come to the cache files, and the pieces
     * are read from there as a local store's are; those the cache cannot
     * hold now are fetched as without it. */
    size_t direct = 0;
    int rc = zr_rcache_fill(s, t, p, n, &direct);
    if (rc == 0 && direct > 0)
        rc = fetch_direct(s, t, p, direct, done, arg, &reads);
    if (rc == 0 && direct < n)
        rc = zr_plan_read_local(s, t, p + direct, n - direct, done, arg, st);
    if (st)
        st->reads += reads;
    return rc;
}

/* ---- the folders of a prefix ------------------------------------------ */

ZR_API int zr_remote_folders(const char *url, char ***names, size_t *n)
{
    if (!url || !names || !n)
        return zr_err(ZR_EINVAL, "zr_remote_folders: NULL argument");
    *names = NULL;
    *n = 0;
    if (!zr_s3_is_url(url))
        return zr_err(ZR_EINVAL, "%s is not an s3:// address", url);
    struct zr_s3 *c = NULL;
    struct zr_s3_obj *objs = NULL;
    size_t nobj = 0, k = 0;
    char **out = NULL;
    int rc = zr_s3_open(&c, url);
    if (rc == 0)
        rc = zr_s3_list(c, "", true, &objs, &nobj);
    if (rc != 0)
        goto out;
    size_t ndir = 0;
    for (size_t j = 0; j < nobj; j++)
        ndir += objs[j].dir;
    if (ndir > 0 && !(out = zr_calloc(ndir, sizeof *out))) {
        rc = zr_err(ZR_ENOMEM, "listing %s", url);
        goto out;
    }
    for (size_t j = 0; j < nobj; j++) {
        if (!objs[j].dir || !objs[j].name[0])
            continue;
        size_t len = strlen(objs[j].name) + 1;
        if (!(out[k] = zr_malloc(len))) {
            rc = zr_err(ZR_ENOMEM, "listing %s", url);
            goto out;
        }
        memcpy(out[k++], objs[j].name, len);
    }
    *names = out;
    *n = k;
    out = NULL;
out:
    zr_remote_folders_free(out, k);
    zr_s3_list_free(objs, nobj);
    zr_s3_close(c);
    return rc;
}

ZR_API void zr_remote_folders_free(char **names, size_t n)
{
    if (!names)
        return;
    for (size_t k = 0; k < n; k++)
        zr_free(names[k]);
    zr_free(names);
}

/*
 * verify.c: the full integrity scan. Unlike a gather, which stops at the
 * first bad record, verify looks at everything and lists what it found:
 * every table entry against the files and the committed frontier, every
 * record decoded to its logical length (and its shape prefix checked for
 * Ragged stores), and every pair of live records for overlap. Decoding
 * is spread over the pool; each block keeps one scratch buffer and one
 * zstd context.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "engine.h"
#include "plan.h"
#include "pool.h"

#define MAX_LISTED 1000
#define BLOCK 4096
#define ROUND 64

/* A report as the library allocates it: the public part, then the list,
 * which callers reach through zr_verify_problem so that zr_problem may
 * grow without moving their indexing. */
struct report {
    zr_verify_report pub;
    zr_problem *problems;
};

struct scan {
    zr_store *s;
    uint64_t len;
    struct report *r;
    pthread_mutex_t lock;
    uint8_t *ok; /* per record: 1 when its entry is in bounds */
    size_t first; /* the round's first block */
    _Atomic int err; /* a file could not be read at all: the scan stops */
    char errmsg[512];
    char errfile[64];
};

/* A file could not be opened, mapped or fetched (a limit, an I/O error,
 * a remote object deleted or replaced after the open): the scan cannot
 * go on, so it stops and returns that error. The report still lists it,
 * as its last problem, so that every caller can say which file failed.
 * file is the file's name where the caller knows it, else "" (a remote
 * read's message names the object). */
static void scan_error(struct scan *c, int rc, const char *file)
{
    pthread_mutex_lock(&c->lock);
    if (c->err == 0) {
        c->err = rc;
        snprintf(c->errmsg, sizeof c->errmsg, "%s", zr_last_error());
        snprintf(c->errfile, sizeof c->errfile, "%s", file);
    }
    pthread_mutex_unlock(&c->lock);
}

/* Where msg, a remote read's error ("GET URL/3.chunk: why"), names a
 * store file: its name to file and the offset of the why, else 0. */
static size_t named_file(const char *msg, char *file, size_t cap)
{
    for (const char *q = strchr(msg, '/'); q; q = strchr(q + 1, '/')) {
        const char *d = q + 1;
        while (*d >= '0' && *d <= '9')
            d++;
        size_t sl = strncmp(d, ".chunk: ", 8) == 0 ? 6 : strncmp(d, ".loc: ", 6) == 0 ? 4 : 0;
        if (d == q + 1 || sl == 0 || (size_t)(d - q) + sl > cap)
            continue;
        snprintf(file, cap, "%.*s", (int)(d - q - 1 + sl), q + 1);
        return (size_t)(d + sl + 2 - msg);
    }
    return 0;
}

static void problem(struct scan *c, const char *file, uint64_t entry, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void problem(struct scan *c, const char *file, uint64_t entry, const char *fmt, ...)
{
    pthread_mutex_lock(&c->lock);
    struct report *r = c->r;
    if (r->pub.nlisted < MAX_LISTED) {
        zr_problem *p = &r->problems[r->pub.nlisted++];
        p->size = sizeof *p;
        snprintf(p->file, sizeof p->file, "%s", file);
        p->entry = entry;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->what, sizeof p->what, fmt, ap);
        va_end(ap);
    }
    r->pub.nproblems++;
    pthread_mutex_unlock(&c->lock);
}

/* Whether entry i lies inside the record table: a reader of a store that
 * lost the tail of its appends in a power cut has segments that end
 * before the header's length (R15). */
static bool entry_exists(struct scan *c, uint64_t i)
{
    zr_store *s = c->s;
    uint32_t g = (uint32_t)(i >> s->seg_shift);
    uint64_t off = (i & (((uint64_t)1 << s->seg_shift) - 1)) * ZR_LOC_SIZE;
    if (g >= atomic_load(&s->segs.count) ||
        off + ZR_LOC_SIZE > atomic_load(&zr_ftable_at(&s->segs, g)->size)) {
        char file[64];
        snprintf(file, sizeof file, "%u.loc", g);
        problem(c, file, i, "the entry lies past the end of the record table");
        return false;
    }
    return true;
}

/* The bytes of entry i from the mapping of its segment, or NULL (a scan
 * error set). Inside a read section. */
static const uint8_t *entry_mapped(struct scan *c, uint64_t i)
{
    zr_store *s = c->s;
    const uint8_t *map = zr_file_map(s, &s->segs, (uint32_t)(i >> s->seg_shift));
    if (!map) {
        char file[64];
        snprintf(file, sizeof file, "%u.loc", (unsigned)(i >> s->seg_shift));
        scan_error(c, zr_last_error_code(), file);
        return NULL;
    }
    return map + (i & (((uint64_t)1 << s->seg_shift) - 1)) * ZR_LOC_SIZE;
}

/* Check entry i, whose bytes are raw, against the files; returns 1 when
 * it can be decoded. */
static int check_entry(struct scan *c, uint64_t i, const uint8_t *raw, struct zr_loc *l)
{
    zr_store *s = c->s;
    char file[64];
    snprintf(file, sizeof file, "%llu.loc", (unsigned long long)(i >> s->seg_shift));
    zr_loc_decode(raw, l);
    uint32_t nchunks = atomic_load(&s->chunks.count);
    if (l->chunk_id > s->hdr.tail_chunk || l->chunk_id >= nchunks) {
        problem(c, file, i, "names chunk %u, past the last chunk %u", l->chunk_id, s->hdr.tail_chunk);
        return 0;
    }
    uint64_t end = (uint64_t)l->offset + l->phys_length;
    uint64_t size = atomic_load(&zr_ftable_at(&s->chunks, l->chunk_id)->size);
    if (end > size) {
        problem(c, file, i, "bytes %u..%llu lie past the end of %u.chunk (%llu bytes)", l->offset,
                (unsigned long long)end, l->chunk_id, (unsigned long long)size);
        return 0;
    }
    if (l->chunk_id == s->hdr.tail_chunk && end > s->hdr.tail_offset)
        problem(c, file, i, "bytes %u..%llu of %u.chunk lie past the committed frontier %u",
                l->offset, (unsigned long long)end, l->chunk_id, s->hdr.tail_offset);
    if (l->phys_length == 0 || l->logic_length == 0 || l->logic_length > ZR_MAX_RECORD) {
        problem(c, file, i, "impossible lengths: stored %u, logical %u", l->phys_length,
                l->logic_length);
        return 0;
    }
    if (s->codec == ZR_CODEC_RAW && l->phys_length != l->logic_length) {
        problem(c, file, i, "raw record with stored length %u but logical length %u",
                l->phys_length, l->logic_length);
        return 0;
    }
    if (s->width && l->logic_length != s->width) {
        problem(c, file, i, "logical length %u, but Dense records are %llu bytes", l->logic_length,
                (unsigned long long)s->width);
        return 0;
    }
    return 1;
}

struct scratch {
    uint8_t *buf;
    size_t cap;
    ZSTD_DCtx *dctx;
};

/* Decode record i (checked entry l), whose stored bytes are at src, and
 * check what it decodes to. */
static void check_record(struct scan *c, struct scratch *w, uint64_t i, const struct zr_loc *l,
                         const uint8_t *src)
{
    zr_store *s = c->s;
    char file[32];
    snprintf(file, sizeof file, "%u.chunk", l->chunk_id);
    if (l->logic_length > w->cap) {
        zr_free(w->buf);
        w->cap = l->logic_length;
        if (!(w->buf = zr_malloc(w->cap))) {
            w->cap = 0;
            problem(c, file, i, "out of memory decoding the record");
            return;
        }
    }
    if (s->codec == ZR_CODEC_RAW) {
        memcpy(w->buf, src, l->logic_length);
    } else if (!w->dctx) {
        problem(c, file, i, "out of memory for a zstd context");
        return;
    } else {
        size_t r = s->ddict ? ZSTD_decompress_usingDDict(w->dctx, w->buf, l->logic_length, src,
                                                          l->phys_length, s->ddict)
                            : ZSTD_decompressDCtx(w->dctx, w->buf, l->logic_length, src,
                                                  l->phys_length);
        if (ZSTD_isError(r)) {
            problem(c, file, i, "does not decode: %s", ZSTD_getErrorName(r));
            return;
        }
        if (r != l->logic_length) {
            problem(c, file, i, "decodes to %zu bytes, its entry says %u", r, l->logic_length);
            return;
        }
    }
    uint32_t nd;
    uint64_t poff;
    if (s->id.kind == ZR_RAGGED &&
        zr_prefix_check(w->buf, l->logic_length, s->id.itemsize, &nd, &poff) != 0)
        problem(c, file, i, "shape prefix is inconsistent with the record's %u bytes",
                l->logic_length);
}

/* Block k of a local store: entries and records read from the mappings. */
static void decode_mapped(struct scan *c, struct scratch *w, uint64_t a, uint64_t b)
{
    zr_store *s = c->s;
    unsigned rs = zr_read_enter(s);
    for (uint64_t i = a; i < b && !c->err; i++) {
        struct zr_loc l;
        zr_read_pause(s, &rs);
        const uint8_t *raw = entry_exists(c, i) ? entry_mapped(c, i) : NULL;
        if (!raw || !check_entry(c, i, raw, &l))
            continue;
        c->ok[i] = 1;
        const uint8_t *src = zr_file_map(s, &s->chunks, l.chunk_id);
        if (!src) {
            char file[64];
            snprintf(file, sizeof file, "%u.chunk", l.chunk_id);
            scan_error(c, zr_last_error_code(), file);
            break;
        }
        check_record(c, w, i, &l, src + l.offset);
    }
    zr_read_leave(s, rs);
}

/* Read entries a..b-1 of a remote store (all inside its record table,
 * which a remote open checks) to raw. */
static int fetch_entries(zr_store *s, uint64_t a, uint64_t b, uint8_t *raw)
{
    uint64_t per_seg = (uint64_t)1 << s->seg_shift;
    size_t np = 0;
    struct zr_piece *pc = zr_malloc((size_t)(b - a) * sizeof *pc);
    if (!pc)
        return zr_err(ZR_ENOMEM, "verifying %s", s->path);
    for (uint64_t i = a; i < b; np++) {
        uint64_t end = ZR_MIN(b, (i / per_seg + 1) * per_seg);
        pc[np] = (struct zr_piece){.file = (uint32_t)(i >> s->seg_shift),
                                   .len = (uint32_t)((end - i) * ZR_LOC_SIZE),
                                   .off = (i & (per_seg - 1)) * ZR_LOC_SIZE,
                                   .to = raw + (i - a) * ZR_LOC_SIZE};
        i = end;
    }
    int rc = zr_remote_read(s, &s->segs, pc, np, NULL, NULL, NULL);
    zr_free(pc);
    return rc;
}

/* Stored bytes a remote block fetches at once, at most (one record may
 * be larger). */
#define REMOTE_ROUND_BYTES (32u << 20)

/* Block a..b-1 of a remote store: its entries with one request a
 * segment, then its records in rounds of REMOTE_ROUND_BYTES. */
static void decode_remote(struct scan *c, struct scratch *w, uint64_t a, uint64_t b)
{
    zr_store *s = c->s;
    uint8_t *raw = zr_malloc((size_t)(b - a) * ZR_LOC_SIZE);
    struct zr_loc *locs = zr_calloc((size_t)(b - a), sizeof *locs);
    struct zr_piece *pc = zr_malloc((size_t)(b - a) * sizeof *pc);
    uint8_t *stage = NULL;
    int rc = raw && locs && pc ? 0 : zr_err(ZR_ENOMEM, "verifying %s", s->path);
    if (rc == 0)
        rc = fetch_entries(s, a, b, raw);
    for (uint64_t i = a; rc == 0 && i < b; i++)
        if (entry_exists(c, i) && check_entry(c, i, raw + (i - a) * ZR_LOC_SIZE, &locs[i - a]))
            c->ok[i] = 1;
    for (uint64_t i = a; rc == 0 && i < b && !c->err;) {
        uint64_t bytes = 0;
        size_t np = 0;
        for (; i < b; i++) {
            const struct zr_loc *l = &locs[i - a];
            if (!c->ok[i])
                continue;
            if (np > 0 && bytes + l->phys_length > REMOTE_ROUND_BYTES)
                break;
            pc[np++] = (struct zr_piece){.file = l->chunk_id, .len = l->phys_length,
                                         .off = l->offset, .tag = (size_t)(i - a)};
            bytes += l->phys_length;
        }
        zr_free(stage);
        if (!(stage = zr_malloc(bytes ? bytes : 1))) {
            rc = zr_err(ZR_ENOMEM, "verifying %s", s->path);
            break;
        }
        uint64_t at = 0;
        for (size_t j = 0; j < np; j++) {
            pc[j].to = stage + at;
            at += pc[j].len;
        }
        if ((rc = zr_remote_read(s, &s->chunks, pc, np, NULL, NULL, NULL)) != 0)
            break;
        for (size_t j = 0; j < np; j++)
            check_record(c, w, a + pc[j].tag, &locs[pc[j].tag], pc[j].to);
    }
    if (rc != 0)
        scan_error(c, rc, "");
    zr_free(stage);
    zr_free(pc);
    zr_free(locs);
    zr_free(raw);
}

static void decode_block(void *arg, size_t k)
{
    struct scan *c = arg;
    zr_store *s = c->s;
    uint64_t a = (uint64_t)(c->first + k) * BLOCK, b = ZR_MIN(c->len, a + BLOCK);
    struct scratch w = {.dctx = s->codec != ZR_CODEC_RAW ? zr_dctx_get() : NULL};
    if (s->remote)
        decode_remote(c, &w, a, b);
    else
        decode_mapped(c, &w, a, b);
    zr_free(w.buf);
    zr_dctx_put(w.dctx);
}

struct span {
    uint32_t chunk, offset, phys;
    uint64_t index;
};

static int cmp_span(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    if (x->chunk != y->chunk)
        return x->chunk < y->chunk ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static void check_overlaps(struct scan *c)
{
    zr_store *s = c->s;
    uint64_t m = 0;
    for (uint64_t i = 0; i < c->len; i++)
        m += c->ok[i];
    struct span *v = zr_malloc((m ? m : 1) * sizeof *v);
    if (!v) {
        problem(c, "", UINT64_MAX, "out of memory for the overlap check");
        return;
    }
    uint64_t j = 0;
    uint8_t *block = s->remote ? zr_malloc(BLOCK * ZR_LOC_SIZE) : NULL;
    if (s->remote && !block)
        scan_error(c, zr_err(ZR_ENOMEM, "verifying %s", s->path), "");
    unsigned rs = zr_read_enter(s);
    for (uint64_t i = 0; i < c->len && !c->err; i++) {
        if (s->remote && i % BLOCK == 0) {
            int rc = fetch_entries(s, i, ZR_MIN(c->len, i + BLOCK), block);
            if (rc != 0) {
                scan_error(c, rc, "");
                break;
            }
        }
        if (!c->ok[i])
            continue;
        struct zr_loc l;
        zr_read_pause(s, &rs);
        const uint8_t *raw = s->remote ? block + (i % BLOCK) * ZR_LOC_SIZE : entry_mapped(c, i);
        if (!raw)
            break;
        zr_loc_decode(raw, &l);
        v[j++] = (struct span){l.chunk_id, l.offset, l.phys_length, i};
    }
    zr_read_leave(s, rs);
    zr_free(block);
    m = j;
    qsort(v, m, sizeof *v, cmp_span);
    for (uint64_t k = 1; k < m; k++)
        if (v[k].chunk == v[k - 1].chunk && (uint64_t)v[k - 1].offset + v[k - 1].phys > v[k].offset) {
            char file[32];
            snprintf(file, sizeof file, "%u.chunk", v[k].chunk);
            problem(c, file, v[k].index, "overlaps record %llu", (unsigned long long)v[k - 1].index);
        }
    zr_free(v);
}

ZR_API void zr_verify_report_free(zr_verify_report *pub)
{
    if (!pub)
        return;
    struct report *r = (struct report *)pub;
    zr_free(r->problems);
    zr_free(r);
}

ZR_API const zr_problem *zr_verify_problem(const zr_verify_report *pub, size_t k)
{
    if (!pub || k >= pub->nlisted)
        return NULL;
    return &((const struct report *)pub)->problems[k];
}

static int verify_in(zr_store *s, zr_verify_report **out)
{
    if (out)
        *out = NULL;
    if (!s || !out)
        return zr_err(ZR_EINVAL, "zr_verify: NULL argument");
    struct scan c = {.s = s, .len = zr_len(s)};
    c.r = zr_calloc(1, sizeof *c.r);
    if (c.r) {
        c.r->pub.size = sizeof c.r->pub;
        c.r->problems = zr_calloc(MAX_LISTED, sizeof *c.r->problems);
    }
    c.ok = zr_calloc(c.len ? c.len : 1, 1);
    if (!c.r || !c.r->problems || !c.ok) {
        zr_verify_report_free(c.r ? &c.r->pub : NULL);
        zr_free(c.ok);
        return zr_err(ZR_ENOMEM, "verifying %s", s->path);
    }
    pthread_mutex_init(&c.lock, NULL);
    if (s->hdr.tail_chunk >= atomic_load(&s->chunks.count) && !zr_lost_empty_tail(s))
        problem(&c, "meta.zr", UINT64_MAX, "the frontier lies in %u.chunk, which is missing",
                s->hdr.tail_chunk);
    else if (s->hdr.tail_chunk < atomic_load(&s->chunks.count) &&
             atomic_load(&zr_ftable_at(&s->chunks, s->hdr.tail_chunk)->size) < s->hdr.tail_offset)
        problem(&c, "meta.zr", UINT64_MAX, "frontier %u lies past the end of %u.chunk",
                s->hdr.tail_offset, s->hdr.tail_chunk);
    /* Decode in rounds of ROUND blocks so progress is reported from the
     * calling thread between them. */
    size_t nblocks = (size_t)((c.len + BLOCK - 1) / BLOCK);
    uint64_t checked = 0;
    for (size_t b0 = 0; b0 < nblocks && !c.err; b0 += ROUND) {
        c.first = b0;
        zr_pool_run(ZR_MIN(ROUND, nblocks - b0), decode_block, &c);
        if (!c.err) {
            checked = ZR_MIN(c.len, (uint64_t)(b0 + ROUND) * BLOCK);
            zr_report(s, checked, c.len);
        }
    }
    if (c.len == 0)
        zr_report(s, 0, 0);
    if (!c.err)
        check_overlaps(&c);
    c.r->pub.records_checked = c.err ? checked : c.len;
    pthread_mutex_destroy(&c.lock);
    zr_free(c.ok);
    *out = &c.r->pub;
    if (c.err) {
        /* The file that stopped the scan matters more than a finding
         * past the first thousand, so it takes the last place if the
         * list is full. */
        struct report *r = c.r;
        if (r->pub.nlisted == MAX_LISTED)
            r->pub.nlisted--;
        zr_problem *p = &r->problems[r->pub.nlisted++];
        *p = (zr_problem){.size = sizeof *p, .entry = UINT64_MAX};
        size_t at = c.errfile[0] ? 0 : named_file(c.errmsg, p->file, sizeof p->file);
        if (c.errfile[0])
            snprintf(p->file, sizeof p->file, "%s", c.errfile);
        snprintf(p->what, sizeof p->what, "%.*s", (int)sizeof p->what - 1, c.errmsg + at);
        r->pub.nproblems++;
        zr_err_restore(c.err, c.errmsg);
        return c.err;
    }
    if (c.r->pub.nproblems == 0)
        return 0;
    const zr_problem *p = &c.r->problems[0];
    return zr_err(ZR_ECORRUPT, "%s: %llu problem(s); first: %s entry %llu: %s", s->path,
                  (unsigned long long)c.r->pub.nproblems, p->file, (unsigned long long)p->entry,
                  p->what);
}

ZR_API int zr_verify(zr_store *s, zr_verify_report **out)
{
    if (out)
        *out = NULL; /* refused while closing too */
    int rc = zr_store_enter(s, "zr_verify");
    return rc != 0 ? rc : zr_store_leave_rc(s, verify_in(s, out));
}

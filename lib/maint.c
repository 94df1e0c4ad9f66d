/*
 * maint.c: the maintenance operations: stats, swap-last delete and
 * in-place compaction.
 *
 * Rules enforced here (doc/format.md):
 *  R9.  Delete and compact first sync every earlier append, so their own
 *       syncs never make an unsynced append's header durable ahead of its
 *       data.
 *  R10. Neither changes a live table entry, live record bytes or the
 *       header in place before a complete intent describing the final
 *       values is durable (lib/intent.c); each ends by syncing what it
 *       changed and clearing the intent.
 *  R11. Delete applies its batch in descending index order, each hole
 *       filled by the then-last record, so the live records stay exactly
 *       0..length-1.
 *  R12. Compaction visits live records in physical order and packs them
 *       greedily from chunk 0 offset 0, so no record moves to a higher
 *       address and no destination overlaps a record not yet moved;
 *       records already in place are skipped. Moves go in batches of at
 *       most BATCH_BYTES, one intent each.
 *  R13. Only after the packed state and its header are durable are the
 *       surplus chunk and loc files removed and the last ones truncated;
 *       files past the header's frontier are never read, so a crash in
 *       between leaves only garbage that the next compaction removes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "intent.h"
#include "io.h"

#define BATCH_BYTES ((uint64_t)64 << 20)
#define BATCH_ENTRIES 65536

/* The raw entry i, without the checks of zr_loc_get: delete moves entries
 * as they are. Segment coverage was checked at open. Inside a read
 * section. */
static int loc_raw(zr_store *s, uint64_t i, struct zr_loc *l)
{
    const uint8_t *map = zr_file_map(s, &s->segs, (uint32_t)(i >> s->seg_shift));
    if (!map)
        return zr_last_error_code();
    zr_loc_decode(map + (i & (((uint64_t)1 << s->seg_shift) - 1)) * ZR_LOC_SIZE, l);
    return 0;
}

/* Write len bytes at off of file id of table t, through its pinned
 * descriptor. */
static int write_file(zr_store *s, struct zr_ftable *t, uint32_t id, const void *buf,
                      size_t len, uint64_t off)
{
    char name[32];
    int fd;
    snprintf(name, sizeof name, "%u.%s", id, t->suffix);
    int rc = zr_file_fd(s, t, id, ZR_FD_WRITE, &fd);
    if (rc != 0)
        return rc;
    rc = zr_write_all(fd, buf, len, off, name);
    zr_file_put(s, t, id);
    return rc;
}

/* Cut file id of table t to len bytes, if it holds more (or always, with
 * always). The file's own size is asked for: the table's stops at the
 * table's capacity. */
static int cut_file(zr_store *s, struct zr_ftable *t, uint32_t id, uint64_t len, bool always)
{
    char name[32];
    int fd;
    uint64_t size = 0;
    snprintf(name, sizeof name, "%u.%s", id, t->suffix);
    int rc = zr_file_fd(s, t, id, ZR_FD_WRITE, &fd);
    if (rc != 0)
        return rc;
    if (!always)
        rc = zr_file_size(fd, &size, name);
    if (rc == 0 && (always || size > len) && zr_io.ftruncate(fd, (off_t)len) != 0)
        rc = zr_err_sys(errno, "truncating %s/%s", s->path, name);
    zr_file_put(s, t, id);
    if (rc == 0 && (always || size > len))
        atomic_store(&zr_ftable_at(t, id)->size, len);
    return rc;
}

static int write_entry(zr_store *s, uint64_t i, const struct zr_loc *l)
{
    uint8_t raw[ZR_LOC_SIZE];
    zr_loc_encode(l, raw);
    return write_file(s, &s->segs, (uint32_t)(i >> s->seg_shift), raw, sizeof raw,
                      (i & (((uint64_t)1 << s->seg_shift) - 1)) * ZR_LOC_SIZE);
}

static int write_header(zr_store *s, const struct zr_header *h)
{
    uint8_t raw[ZR_HEADER_SIZE];
    zr_header_encode(h, raw);
    int rc = zr_write_all(s->metafd, raw, sizeof raw, 0, "meta.zr");
    if (rc == 0 && zr_io.fdatasync(s->metafd) != 0)
        rc = zr_err_sys(errno, "syncing %s/meta.zr", s->path);
    return rc;
}

static int sync_all_segs(zr_store *s)
{
    uint32_t n = atomic_load(&s->segs.count);
    int rc = zr_tables_sync_error(s);
    for (uint32_t g = 0; rc == 0 && g < n; g++)
        rc = zr_file_sync(s, &s->segs, g);
    if (rc == 0)
        rc = zr_tables_sync_error(s); /* see zr_engine_sync_locked */
    return rc;
}

/* Write an intent; if that fails, make sure no complete intent is left
 * behind for a later open to apply on top of newer state. */
static int write_intent(zr_store *s, int kind, const struct zr_header *h,
                        const struct zr_intent_entry *e, uint64_t n, const uint8_t *data,
                        uint64_t len)
{
    int rc = zr_intent_write(s, kind, h, e, n, data, len);
    if (rc != 0 && zr_intent_clear(s) != 0)
        s->failed = true;
    return rc;
}

static int begin(zr_store *s, const char *op)
{
    return zr_engine_writer(s, op);
}

/* Entries a remote store's zr_stats reads a request at a time. */
#define REMOTE_STATS_BLOCK 65536

/* zr_stats of a remote store: its entries read in blocks of adjacent
 * ones (one request each), its chunk sizes those its listing gave. */
static int remote_stats(zr_store *s, uint64_t len, zr_store_stats *st)
{
    struct zr_loc *locs = zr_malloc(REMOTE_STATS_BLOCK * sizeof *locs);
    int rc = locs ? 0 : zr_err(ZR_ENOMEM, "%s: reading the record table", s->path);
    for (uint64_t a = 0; rc == 0 && a < len; a += REMOTE_STATS_BLOCK) {
        size_t n = (size_t)ZR_MIN((uint64_t)REMOTE_STATS_BLOCK, len - a);
        rc = zr_range_locs(s, a, n, locs, true);
        for (size_t k = 0; rc == 0 && k < n; k++)
            st->live_bytes += locs[k].phys_length;
    }
    zr_free(locs);
    uint32_t n = atomic_load(&s->chunks.count);
    for (uint32_t c = 0; c < n; c++)
        st->chunk_bytes += atomic_load(&zr_ftable_at(&s->chunks, c)->size);
    return rc;
}

/* The whole of zr_stats, into the library's own struct. */
static int stats(zr_store *s, zr_store_stats *st)
{
    *st = (zr_store_stats)ZR_STORE_STATS_INIT;
    uint64_t len = zr_len(s);
    int rc = 0;
    if (s->remote) {
        rc = remote_stats(s, len, st);
        goto done;
    }
    unsigned rs = zr_read_enter(s);
    for (uint64_t i = 0; rc == 0 && i < len; i++) {
        struct zr_loc l;
        zr_read_pause(s, &rs);
        rc = zr_loc_read(s, i, &l);
        st->live_bytes += l.phys_length;
    }
    zr_read_leave(s, rs);
    if (rc != 0)
        return rc;
    /* Asked by name: a store of many chunks would churn the cache. */
    uint32_t n = atomic_load(&s->chunks.count);
    for (uint32_t c = 0; c < n; c++) {
        struct stat sb;
        char name[32];
        snprintf(name, sizeof name, "%u.chunk", c);
        if (zr_io.fstatat(s->dirfd, name, &sb, 0) != 0)
            return zr_err_sys(errno, "stat %s/%s", s->path, name);
        st->chunk_bytes += (uint64_t)sb.st_size;
    }
done:
    if (rc != 0)
        return rc;
    st->records = len;
    st->reclaimable = st->chunk_bytes > st->live_bytes ? st->chunk_bytes - st->live_bytes : 0;
    st->codec = s->codec;
    st->dict_bytes = s->dict_len;
    return 0;
}

static int stats_in(zr_store *s, zr_store_stats *st)
{
    if (!s || !st)
        return zr_err(ZR_EINVAL, "zr_stats: NULL argument");
    size_t n;
    int rc = zr_abi_check(st, sizeof *st, ZR_ABI_MIN(zr_store_stats, records), "zr_store_stats",
                          &n);
    zr_store_stats full;
    if (rc == 0)
        rc = stats(s, &full);
    if (rc == 0)
        zr_abi_write(st, &full, n);
    return rc;
}

ZR_API int zr_stats(zr_store *s, zr_store_stats *st)
{
    int rc = zr_store_enter(s, "zr_stats");
    return rc != 0 ? rc : zr_store_leave_rc(s, stats_in(s, st));
}

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Position of index p among the descending targets t[0..m), or -1. */
static long find_target(const uint64_t *t, size_t m, uint64_t p)
{
    size_t lo = 0, hi = m;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t[mid] == p)
            return (long)mid;
        if (t[mid] > p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static int delete_in(zr_store *s, const uint64_t *idx, size_t n)
{
    int rc = begin(s, "zr_delete");
    if (rc != 0)
        return rc;
    if (n > 0 && !idx)
        return zr_err(ZR_EINVAL, "zr_delete: NULL indices");
    if (n == 0)
        return 0;
    pthread_mutex_lock(&s->append_lock);
    uint64_t *t = NULL;
    struct zr_intent_entry *val = NULL;
    bool *mod = NULL;
    uint64_t len = s->hdr.length;
    for (size_t k = 0; k < n && rc == 0; k++)
        if (idx[k] >= len)
            rc = zr_err(ZR_ERANGE, "%s: index %llu (position %zu) is out of range for %llu records",
                        s->path, (unsigned long long)idx[k], k, (unsigned long long)len);
    if (rc == 0 && (!(t = zr_malloc(n * sizeof *t)) || !(val = zr_malloc(n * sizeof *val)) ||
                    !(mod = zr_calloc(n, sizeof *mod))))
        rc = zr_err(ZR_ENOMEM, "delete of %zu records", n);
    size_t m = 0;
    if (rc == 0) {
        memcpy(t, idx, n * sizeof *t);
        qsort(t, n, sizeof *t, cmp_desc);
        for (size_t k = 0; k < n; k++)
            if (m == 0 || t[m - 1] != t[k])
                t[m++] = t[k];
        rc = zr_engine_sync_locked(s);
    }
    uint64_t cur = len;
    if (rc == 0) {
        /* Simulate the swaps; only target positions ever change. */
        unsigned rs = zr_read_enter(s);
        for (size_t k = 0; rc == 0 && k < m; k++) {
            uint64_t last = cur - 1;
            zr_read_pause(s, &rs);
            if (t[k] != last) {
                long j = find_target(t, m, last);
                struct zr_loc l;
                if (j >= 0 && mod[j])
                    l = val[j].loc;
                else
                    rc = loc_raw(s, last, &l);
                val[k] = (struct zr_intent_entry){.index = t[k], .loc = l};
                mod[k] = true;
            }
            cur--;
        }
        zr_read_leave(s, rs);
        if (rc != 0)
            goto out;
        size_t e = 0;
        for (size_t k = 0; k < m; k++)
            if (mod[k] && t[k] < cur)
                val[e++] = val[k];
        struct zr_header h = s->hdr;
        h.length = cur;
        rc = write_intent(s, ZR_INTENT_DELETE, &h, val, e, NULL, 0);
        if (rc != 0)
            goto out;
        /* Entries from the lowest deleted index on change. */
        zr_layout_forget(s, t[m - 1]);
        for (size_t k = 0; k < e && rc == 0; k++)
            rc = write_entry(s, val[k].index, &val[k].loc);
        if (rc == 0)
            rc = sync_all_segs(s);
        if (rc == 0)
            rc = write_header(s, &h);
        if (rc == 0) {
            s->hdr = h;
            atomic_store_explicit(&s->length, cur, memory_order_release);
            rc = zr_intent_clear(s);
        } else {
            /* The intent may be complete on disk: the next open finishes
             * the delete; this handle must not write on top of it. */
            s->failed = true;
        }
    }
out:
    zr_free(t);
    zr_free(val);
    zr_free(mod);
    pthread_mutex_unlock(&s->append_lock);
    return rc;
}

ZR_API int zr_delete(zr_store *s, const uint64_t *idx, size_t n)
{
    int rc = zr_store_enter(s, "zr_delete");
    return rc != 0 ? rc : zr_store_leave_rc(s, delete_in(s, idx, n));
}

struct live {
    uint32_t chunk, offset, phys, logic;
    uint64_t index;
};

static int cmp_phys(const void *a, const void *b)
{
    const struct live *x = a, *y = b;
    if (x->chunk != y->chunk)
        return x->chunk < y->chunk ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

struct batch {
    struct zr_intent_entry *e;
    size_t n;
    uint8_t *data;
    uint64_t used, cap;
};

/* Make one batch of moves durable through an intent, then apply it. */
static int flush_batch(zr_store *s, struct batch *b)
{
    if (b->n == 0)
        return 0;
    int rc = write_intent(s, ZR_INTENT_COMPACT, &s->hdr, b->e, b->n, b->data, b->used);
    if (rc != 0)
        return rc;
    uint64_t off = 0;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (size_t k = 0; k < b->n && rc == 0; k++) {
        const struct zr_loc *l = &b->e[k].loc;
        rc = write_file(s, &s->chunks, l->chunk_id, b->data + off, l->phys_length, l->offset);
        off += l->phys_length;
        if (rc == 0) {
            /* Packing may fill a chunk further than its old layout did. */
            struct zr_file *f = zr_ftable_at(&s->chunks, l->chunk_id);
            uint64_t end = (uint64_t)l->offset + l->phys_length;
            if (end > atomic_load(&f->size))
                atomic_store_explicit(&f->size, end, memory_order_release);
            rc = write_entry(s, b->e[k].index, l);
        }
        lo = ZR_MIN(lo, l->chunk_id);
        hi = ZR_MAX(hi, l->chunk_id);
    }
    for (uint32_t c = lo; rc == 0 && c <= hi; c++)
        rc = zr_file_sync(s, &s->chunks, c);
    if (rc == 0)
        rc = sync_all_segs(s);
    if (rc == 0)
        rc = zr_intent_clear(s);
    if (rc != 0)
        s->failed = true; /* the next open finishes the batch */
    b->n = 0;
    b->used = 0;
    return rc;
}

/* Cut chunk c to end bytes, if it holds more. */
static int trim_chunk(zr_store *s, uint32_t c, uint64_t end)
{
    zr_ftable_at(&s->chunks, c)->wend = end;
    return cut_file(s, &s->chunks, c, end, false);
}

/* Remove files past the packed frontier and cut every chunk kept to the
 * end of its packed records, ends[c] for those before the tail (R13). */
static int trim_files(zr_store *s, const uint64_t *ends)
{
    int rc = 0;
    char name[32];
    uint32_t keep = s->hdr.tail_chunk + 1;
    uint32_t have = atomic_load(&s->chunks.count);
    zr_ftable_truncate(s, &s->chunks, keep);
    for (uint32_t c = have; c-- > keep;) {
        snprintf(name, sizeof name, "%u.chunk", c);
        if (zr_io.unlinkat(s->dirfd, name, 0) != 0 && errno != ENOENT)
            return zr_err_sys(errno, "removing %s/%s", s->path, name);
    }
    for (uint32_t c = 0; c < keep; c++)
        if ((rc = trim_chunk(s, c, c == s->hdr.tail_chunk ? s->hdr.tail_offset : ends[c])) != 0)
            return rc;

    uint64_t per = (uint64_t)1 << s->seg_shift;
    uint32_t segs = (uint32_t)ZR_MAX(1, (s->hdr.length + per - 1) >> s->seg_shift);
    have = atomic_load(&s->segs.count);
    zr_ftable_truncate(s, &s->segs, segs);
    for (uint32_t g = have; g-- > segs;) {
        snprintf(name, sizeof name, "%u.loc", g);
        if (zr_io.unlinkat(s->dirfd, name, 0) != 0 && errno != ENOENT)
            return zr_err_sys(errno, "removing %s/%s", s->path, name);
    }
    uint64_t last_len = (s->hdr.length - (uint64_t)(segs - 1) * per) * ZR_LOC_SIZE;
    if ((rc = cut_file(s, &s->segs, segs - 1, last_len, true)) != 0)
        return rc;
    if (rc == 0 && zr_io.fsync(s->dirfd) != 0)
        rc = zr_err_sys(errno, "syncing folder %s", s->path);
    return rc;
}

static uint64_t chunk_bytes(zr_store *s)
{
    zr_store_stats st;
    return stats(s, &st) == 0 ? st.chunk_bytes : 0;
}

static int compact_in(zr_store *s, zr_compact_result *res)
{
    size_t nres = 0;
    int rc = begin(s, "zr_compact");
    if (rc == 0 && res)
        rc = zr_abi_check(res, sizeof *res, ZR_ABI_MIN(zr_compact_result, records_moved),
                          "zr_compact_result", &nres);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&s->append_lock);
    uint64_t len = s->hdr.length;
    struct live *v = NULL;
    uint64_t *ends = NULL; /* where the packed records of each chunk end */
    struct batch b = {0};
    zr_compact_result r = ZR_COMPACT_RESULT_INIT;
    if (len > SIZE_MAX / sizeof *v)
        rc = zr_err(ZR_ENOMEM, "compaction of %llu records", (unsigned long long)len);
    if (rc == 0)
        rc = zr_engine_sync_locked(s);
    /* Records move and chunk files go. Those the layout already covers
     * are in place and stay, but the layout is learned again rather than
     * kept on that argument. */
    zr_layout_forget(s, 0);
    if (rc == 0 && (!(v = zr_malloc((len ? len : 1) * sizeof *v)) ||
                    !(ends = zr_calloc(atomic_load(&s->chunks.count) + 1, sizeof *ends)) ||
                    !(b.e = zr_malloc(BATCH_ENTRIES * sizeof *b.e)) ||
                    !(b.data = zr_malloc(BATCH_BYTES))))
        rc = zr_err(ZR_ENOMEM, "compaction of %llu records", (unsigned long long)len);
    b.cap = BATCH_BYTES;
    unsigned rs = zr_read_enter(s);
    for (uint64_t i = 0; i < len && rc == 0; i++) {
        struct zr_loc l;
        zr_read_pause(s, &rs);
        rc = zr_loc_get(s, i, &l);
        if (rc == ZR_ECORRUPT)
            rc = zr_loc_error(s, i, "entry is out of bounds or inconsistent; compaction refused");
        v[i] = (struct live){l.chunk_id, l.offset, l.phys_length, l.logic_length, i};
    }
    if (rc == 0) {
        r.bytes_before = chunk_bytes(s);
        qsort(v, len, sizeof *v, cmp_phys);
    }
    for (uint64_t k = 1; k < len && rc == 0; k++)
        if (v[k].chunk == v[k - 1].chunk && v[k - 1].offset + (uint64_t)v[k - 1].phys > v[k].offset)
            rc = zr_err(ZR_ECORRUPT, "%s: records %llu and %llu overlap in %u.chunk; compaction refused",
                        s->path, (unsigned long long)v[k - 1].index,
                        (unsigned long long)v[k].index, v[k].chunk);
    uint32_t wc = 0;
    uint64_t wo = 0;
    for (uint64_t k = 0; k < len && rc == 0; k++) {
        if (wo + v[k].phys > s->chunk_cap) {
            ends[wc++] = wo;
            wo = 0;
        }
        uint32_t dc = wc;
        uint64_t doff = wo;
        wo += v[k].phys;
        if (dc == v[k].chunk && doff == v[k].offset)
            continue;
        if (b.n == BATCH_ENTRIES || (b.n > 0 && b.used + v[k].phys > b.cap)) {
            if ((rc = flush_batch(s, &b)) != 0)
                break;
            zr_report(s, k, len);
        }
        if (v[k].phys > b.cap) {
            uint8_t *bigger = zr_realloc(b.data, v[k].phys);
            if (!bigger) {
                rc = zr_err(ZR_ENOMEM, "compaction buffer");
                break;
            }
            b.data = bigger;
            b.cap = v[k].phys;
        }
        zr_read_pause(s, &rs);
        const uint8_t *map = zr_file_map(s, &s->chunks, v[k].chunk);
        if (!map) {
            rc = zr_last_error_code();
            break;
        }
        memcpy(b.data + b.used, map + v[k].offset, v[k].phys);
        b.used += v[k].phys;
        b.e[b.n++] = (struct zr_intent_entry){
            .index = v[k].index,
            .loc = {.offset = (uint32_t)doff, .phys_length = v[k].phys,
                    .logic_length = v[k].logic, .chunk_id = dc}};
        r.records_moved++;
    }
    zr_read_leave(s, rs);
    if (rc == 0)
        rc = flush_batch(s, &b);
    if (rc == 0) {
        ends[wc] = wo;
        rc = zr_frontier_settle(s, &wc, &wo);
    }
    if (rc == 0) {
        struct zr_header h = s->hdr;
        h.tail_chunk = wc;
        h.tail_offset = (uint32_t)wo;
        rc = write_header(s, &h);
        if (rc == 0) {
            s->hdr = h;
            s->fr_chunk = wc;
            s->fr_offset = wo;
            s->sync_chunk_lo = wc;
            s->sync_seg_lo = (uint32_t)(h.length >> s->seg_shift);
            rc = trim_files(s, ends);
        }
        if (rc != 0)
            s->failed = true;
    }
    if (rc == 0) {
        r.bytes_after = chunk_bytes(s);
        zr_report(s, len, len);
    }
    if (res)
        zr_abi_write(res, &r, nres);
    zr_free(v);
    zr_free(ends);
    zr_free(b.e);
    zr_free(b.data);
    pthread_mutex_unlock(&s->append_lock);
    return rc;
}

ZR_API int zr_compact(zr_store *s, zr_compact_result *res)
{
    int rc = zr_store_enter(s, "zr_compact");
    return rc != 0 ? rc : zr_store_leave_rc(s, compact_in(s, res));
}

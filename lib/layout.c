/*
 * layout.c: what a handle knows of the layout of a raw Dense store. An
 * append lays records out back to back, a chunk holding per_chunk of
 * them, so record j of a store never deleted from or compacted lies at
 * byte (j % per_chunk) * width of chunk j / per_chunk. A gather finds
 * the records known to be laid out so without reading their table
 * entries; the handle learns how many are, checking their entries once,
 * a little with each gather, and forgets from where a delete or a
 * compaction changes them.
 */
#include <unistd.h>

#include "engine.h"
#include "plan.h"

/* Entries layout_grow checks per record of the gather that calls it,
 * and at most in one call (256 KiB of the table): the first gathers of a
 * large store share the scan in proportion to their own work, so a
 * gather of one record (a file read through zrecordfs) adds little. */
#define LAYOUT_PER_RECORD 64
#define LAYOUT_STEP 16384

/* Whether this process may rely on what s knows of the layout: the
 * entries of a read-only handle change in no process (no writer can hold
 * the store beside it); those of a writable one change only through the
 * process that opened it, whose own deletes and compactions forget what
 * they change. A process that inherited a writable handle through fork()
 * does not see that forgetting, and reads every entry. */
static bool layout_trusted(const zr_store *s)
{
    return !s->writable || getpid() == s->owner;
}

/* How far entries i..end-1 of a remote store lie where appends lay them
 * out: they are fetched with one request (they stay in one segment), not
 * mapped. Returns the first that does not, or i when they cannot be read
 * now (the gather reads its entries itself and reports what it finds). */
static uint64_t remote_grow(zr_store *s, uint64_t i, uint64_t end)
{
    uint64_t per_seg = (uint64_t)1 << s->seg_shift;
    end = ZR_MIN(end, (i / per_seg + 1) * per_seg);
    uint8_t *raw = zr_malloc((size_t)(end - i) * ZR_LOC_SIZE);
    if (!raw)
        return i;
    struct zr_piece p = {.file = (uint32_t)(i >> s->seg_shift),
                         .len = (uint32_t)((end - i) * ZR_LOC_SIZE),
                         .off = (i & (per_seg - 1)) * ZR_LOC_SIZE, .to = raw};
    uint64_t at = i;
    int rc = zr_remote_read(s, &s->segs, &p, 1, NULL, NULL, NULL);
    /* A read that failed is not tried again with every gather: the
     * gathers read their entries themselves, and report what fails. */
    if (rc != 0)
        atomic_store_explicit(&s->layout_broken, true, memory_order_relaxed);
    if (rc == 0) {
        uint32_t nchunks = atomic_load_explicit(&s->chunks.count, memory_order_acquire);
        for (; at < end; at++) {
            struct zr_loc l, want;
            zr_loc_decode(raw + (at - i) * ZR_LOC_SIZE, &l);
            zr_layout_loc(s, at, &want);
            if (!zr_loc_fits(s, &l, nchunks) || l.chunk_id != want.chunk_id ||
                l.offset != want.offset) {
                atomic_store_explicit(&s->layout_broken, true, memory_order_relaxed);
                break;
            }
        }
    }
    zr_free(raw);
    return at;
}

static void layout_grow(zr_store *s, uint64_t len, size_t n)
{
    if (s->codec != ZR_CODEC_RAW || s->per_chunk == 0 ||
        atomic_load_explicit(&s->laid_out, memory_order_acquire) >= len ||
        atomic_load_explicit(&s->layout_broken, memory_order_relaxed) ||
        pthread_mutex_trylock(&s->layout_lock) != 0)
        return;
    uint64_t i = atomic_load_explicit(&s->laid_out, memory_order_relaxed);
    uint64_t end = ZR_MIN(len, i + ZR_MIN((uint64_t)n * LAYOUT_PER_RECORD, LAYOUT_STEP));
    if (s->remote) {
        atomic_store_explicit(&s->laid_out, remote_grow(s, i, end), memory_order_release);
        pthread_mutex_unlock(&s->layout_lock);
        return;
    }
    unsigned rs = zr_read_enter(s);
    for (; i < end; i++) {
        struct zr_loc l, want;
        zr_layout_loc(s, i, &want);
        zr_read_pause(s, &rs);
        int rc = zr_loc_get(s, i, &l);
        /* A segment that cannot be mapped now says nothing of the layout:
         * the gather reads that entry itself, and reports what it finds. */
        if (rc != 0 && rc != ZR_ECORRUPT)
            break;
        if (rc != 0 || l.chunk_id != want.chunk_id || l.offset != want.offset) {
            atomic_store_explicit(&s->layout_broken, true, memory_order_relaxed);
            break;
        }
    }
    zr_read_leave(s, rs);
    atomic_store_explicit(&s->laid_out, i, memory_order_release);
    pthread_mutex_unlock(&s->layout_lock);
}

uint64_t zr_layout_known(zr_store *s, uint64_t len, size_t n)
{
    if (!layout_trusted(s))
        return 0;
    layout_grow(s, len, n);
    return atomic_load_explicit(&s->laid_out, memory_order_acquire);
}

void zr_layout_forget(zr_store *s, uint64_t i)
{
    if (i < atomic_load_explicit(&s->laid_out, memory_order_relaxed))
        atomic_store_explicit(&s->laid_out, i, memory_order_release);
    atomic_store_explicit(&s->layout_broken, false, memory_order_relaxed);
}

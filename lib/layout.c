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

static void layout_grow(zr_store *s, uint64_t len, size_t n)
{
    if (s->codec != ZR_CODEC_RAW || s->per_chunk == 0 ||
        atomic_load_explicit(&s->laid_out, memory_order_acquire) >= len ||
        atomic_load_explicit(&s->layout_broken, memory_order_relaxed) ||
        pthread_mutex_trylock(&s->layout_lock) != 0)
        return;
    uint64_t i = atomic_load_explicit(&s->laid_out, memory_order_relaxed);
    uint64_t end = ZR_MIN(len, i + ZR_MIN((uint64_t)n * LAYOUT_PER_RECORD, LAYOUT_STEP));
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

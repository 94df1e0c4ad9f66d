/*
 * readmode.c: which path a handle's gathers take.
 *
 * A gather copies records out of the mappings when their pages are in
 * memory (ZR_READ_MAPPED), and plans its reads (plan.h) when they are
 * not (ZR_READ_PLANNED): page faults read one page at a time per thread,
 * where planned reads keep the device's queue full and read no more than
 * the records. Asking the kernel which pages are cached costs a system
 * call per record, more than copying a small cached record, so the choice
 * is made per handle from what batches show: a planned batch learns, for
 * free, how many of its reads the kernel completed from the page cache;
 * a mapped batch that takes far longer than a copy of its bytes can
 * (page faults that went to the disk) has the handle look again at once,
 * and a mapped handle looks again once a second anyway: whether its files
 * are still in memory, which the kernel tells in one call a file.
 */
#include <time.h>

#include "gather.h"

/* A planned batch that finds every page cached this many times in a row
 * (once for a handle's first batch) has the handle look whether its files
 * are in memory as a whole (cachestat), and move to the mappings if so. */
#define CACHED_STREAK 2
#define MAX_STREAK 1024

/* How often a mapped handle plans a batch to see whether its pages are
 * still in memory. */
#define PROBE_EVERY_NS 1000000000ull

uint64_t zr_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The longest a mapped block of `records` records and `bytes` decoded
 * bytes may take before it counts as having waited for the disk: far
 * above what copying or decoding its bytes costs, with room per record
 * and for a thread switched out meanwhile, and below a read from the
 * disk per record (the figures are in doc/cold-reads.md). */
static uint64_t slow_limit(const zr_store *s, size_t records, uint64_t bytes)
{
    uint64_t per_byte = s->codec == ZR_CODEC_RAW ? 1 : 5;
    return 1000000 + 20000 * (uint64_t)records + per_byte * bytes;
}

void zr_note_mapped(zr_store *s, size_t records, uint64_t bytes, uint64_t ns)
{
    /* A block that took that long waited for the disk: plan the next
     * batch to see why. */
    if (ns > slow_limit(s, records, bytes))
        atomic_store_explicit(&s->probe_at, 0, memory_order_relaxed);
}

/* Read from the mappings from now on. */
static void read_mapped(zr_store *s)
{
    atomic_store(&s->probe_at, zr_now_ns() + PROBE_EVERY_NS);
    atomic_store(&s->streak_needed, CACHED_STREAK);
    zr_tables_set_mode(s, ZR_READ_MAPPED);
}

static void read_planned(zr_store *s)
{
    atomic_store(&s->cached_streak, 0);
    zr_tables_set_mode(s, ZR_READ_PLANNED);
}

bool zr_gather_plans(zr_store *s)
{
    if (s->remote)
        return true;
    if (atomic_load_explicit(&s->read_mode, memory_order_relaxed) != ZR_READ_MAPPED)
        return true;
    uint64_t at = atomic_load_explicit(&s->probe_at, memory_order_relaxed);
    uint64_t now = zr_now_ns();
    if (now < at)
        return false;
    /* One caller looks; the others keep copying meanwhile. */
    if (!atomic_compare_exchange_strong(&s->probe_at, &at, now + PROBE_EVERY_NS))
        return false;
    int resident = zr_tables_resident(s);
    if (resident == 1)
        return false;
    if (resident == 0)
        read_planned(s);
    return true; /* a planned batch tells where the kernel cannot */
}

/* Move the handle between the modes after a planned batch whose reads
 * st found cached or not. Batches that found everything cached move it
 * to the mappings once the files are found in memory as a whole (a batch
 * can be cached where the store is not); while they are not, the batches
 * asked for before the next look double, up to MAX_STREAK. */
void zr_note_planned(zr_store *s, const struct zr_plan_stats *st)
{
    int mode = atomic_load(&s->read_mode);
    if (st->reads == 0 || s->remote)
        return;
    if (st->cached < st->reads) {
        read_planned(s);
        return;
    }
    if (mode == ZR_READ_MAPPED)
        return;
    unsigned streak = atomic_fetch_add(&s->cached_streak, 1) + 1;
    unsigned need = ZR_MAX(CACHED_STREAK, atomic_load(&s->streak_needed));
    if (mode == ZR_READ_PLANNED && streak < need)
        return;
    int resident = zr_tables_resident(s);
    if (resident == 0) {
        atomic_store(&s->streak_needed, ZR_MIN(2 * need, MAX_STREAK));
        read_planned(s);
        return;
    }
    read_mapped(s);
}

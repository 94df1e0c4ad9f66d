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
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* ---- reads that bypass the page cache ---------------------------------
 *
 * At random over a store many times the memory, the page cache can hold
 * only a small share of what is read, and a buffered read pays for
 * inserting pages and evicting others without that paying back: the
 * kernel's buffered reads reach about two thirds of what the device gives
 * to O_DIRECT (doc/cold-reads.md). Such a store's planned reads of large
 * runs go around the page cache. A store that fits, or nearly, keeps
 * buffered reads: its next epoch then finds it in memory. */
#define DIRECT_FACTOR 4

static int g_direct = -1; /* zr_testing_set_direct; -1: decide */
static uint64_t g_memory; /* what the process may use, bytes */
static pthread_once_t direct_once = PTHREAD_ONCE_INIT;

/* The lowest memory limit on this process's cgroup and its ancestors (v2
 * memory.max, v1 memory.limit_in_bytes), or UINT64_MAX where none is set
 * or readable. A container may see only its own part of the hierarchy:
 * a group missing from the folders is read as its nearest ancestor there,
 * down to the mount's root. */
static uint64_t cgroup_limit(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return UINT64_MAX;
    char line[4096], path[4200];
    uint64_t limit = UINT64_MAX;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        const char *file, *mount;
        char *group;
        if (strncmp(line, "0::", 3) == 0) {
            mount = "/sys/fs/cgroup";
            file = "memory.max";
            group = line + 3;
        } else {
            char *c = strchr(line, ':');
            char *d = c ? strchr(c + 1, ':') : NULL;
            if (!d || strncmp(c + 1, "memory", 6) != 0 || c + 7 != d)
                continue;
            mount = "/sys/fs/cgroup/memory";
            file = "memory.limit_in_bytes";
            group = d + 1;
        }
        /* The group, then each ancestor, the root last. */
        for (;;) {
            snprintf(path, sizeof path, "%s%s/%s", mount, group, file);
            FILE *g = fopen(path, "r");
            uint64_t v;
            if (g && fscanf(g, "%" SCNu64, &v) == 1 && v < limit)
                limit = v;
            if (g)
                fclose(g);
            char *slash = strrchr(group, '/');
            if (!slash)
                break;
            *slash = 0;
        }
    }
    fclose(f);
    return limit;
}

static void direct_setup(void)
{
    const char *env = getenv("LOADERX_DIRECT");
    if (env && (strcmp(env, "0") == 0 || strcmp(env, "1") == 0) && g_direct < 0)
        g_direct = env[0] - '0';
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    g_memory = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
    uint64_t cg = cgroup_limit();
    if (cg < g_memory)
        g_memory = cg;
}

uint64_t zr_memory_limit(void)
{
    pthread_once(&direct_once, direct_setup);
    return g_memory;
}

void zr_testing_set_direct(int direct)
{
    pthread_once(&direct_once, direct_setup);
    g_direct = direct;
}

bool zr_read_direct(zr_store *s)
{
    pthread_once(&direct_once, direct_setup);
    if (s->remote || g_direct == 0)
        return false;
    if (g_direct == 1)
        return true;
    /* Worked out again when the store gains a chunk file: the answer and
     * the count it was made for are one word, (count + 1) << 1 | answer. */
    uint32_t n = atomic_load_explicit(&s->chunks.count, memory_order_acquire);
    uint64_t known = atomic_load_explicit(&s->direct, memory_order_relaxed);
    if (known >> 1 == (uint64_t)n + 1)
        return known & 1;
    bool direct = g_memory != UINT64_MAX && zr_table_bytes(&s->chunks, n) / DIRECT_FACTOR > g_memory;
    atomic_store_explicit(&s->direct, ((uint64_t)n + 1) << 1 | direct, memory_order_relaxed);
    return direct;
}

/*
 * gather.c: reading a batch of records, in request order, into the
 * caller's memory.
 *
 * zr_engine_gather checks the indices and asks the handle's read mode
 * (readmode.c) which path the batch takes. A store whose pages are not in
 * memory goes to planned.c, which plans the batch's reads (plan.h). A
 * store in memory is copied here, from the read-only shared mappings, so
 * that a warm gather of small records makes no system call per record:
 * each record's entry is checked (R5), then the record is copied (raw)
 * or decompressed (zstd) straight from the page cache into the
 * destination. Raw records of PREAD_MIN_RAW bytes or more are read with
 * pread instead (see there). The batch is cut into contiguous blocks of
 * requests that the pool's threads claim; each block takes one zstd
 * context and reuses it for all of its records. Dense blocks hold equal
 * record counts; Ragged blocks are cut at equal shares of the batch's
 * decoded bytes (read from the entries first), so that a few large
 * records do not leave one thread working while the others wait. A batch
 * of one record, or one too small to be worth splitting, runs on the
 * caller's thread. doc/cold-reads.md follows a batch through both paths.
 *
 * zr_record_span and zr_record_extent hand out where one raw record lies
 * (in the mapping, in the chunk file) instead of copying it, after the
 * same checks.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codec.h"
#include "gather.h"
#include "rcache.h"
#include "io.h"
#include "plan.h"
#include "pool.h"

/* Below this many output bytes per block, splitting costs more than it
 * saves: a raw block is a copy, a compressed one a decode that takes
 * tens of times longer per byte. */
#define MIN_BLOCK_RAW (64u << 10)
#define MIN_BLOCK_ZSTD (4u << 10)

/* Batches smaller than this (in output bytes) take too little time to be
 * worth waking a sleeping worker for (a wake-up can cost as much as a
 * whole small batch); they use only workers that are already awake
 * (doc/performance.md, "Waking the pool"). */
#define WAKE_RAW (1u << 20)
#define WAKE_ZSTD (256u << 10)

/* At most this many blocks a thread: blocks are claimed one at a time, so
 * small ones let a worker that arrives late take only what is left. */
#define BLOCKS_PER_THREAD 16

/* Ragged batches up to this many records keep their entries on the
 * stack while the blocks are cut. */
#define STACK_LOCS 512

static void gather_error(struct gather_ctx *c, int rc)
{
    pthread_mutex_lock(&c->err_lock);
    if (c->err == 0) {
        c->err = rc;
        snprintf(c->errmsg, sizeof c->errmsg, "%s", zr_last_error());
    }
    pthread_mutex_unlock(&c->err_lock);
    atomic_store(&c->failed, 1);
}

/* How many entries ahead of the one in use a gather asks the CPU for.
 * Random records mean a cache miss per table entry; asking early lets
 * several misses overlap instead of stalling each copy in turn. */
#define PREFETCH_AHEAD 8

static inline void prefetch_loc(const zr_store *s, uint64_t i)
{
    uint32_t g = (uint32_t)(i >> s->seg_shift);
    if (g < atomic_load_explicit(&s->segs.count, memory_order_acquire)) {
        const uint8_t *map = zr_file_mapped(&s->segs, g);
        if (map)
            __builtin_prefetch(map + (i & (((uint64_t)1 << s->seg_shift) - 1)) * ZR_LOC_SIZE);
    }
}

/* How many records ahead of the one being copied its entry is checked and
 * its bytes asked for (prefetch_record). */
#define DATA_AHEAD 4
#define RING (2 * DATA_AHEAD)
_Static_assert(DATA_AHEAD > 1, "gather_shard reads the next record's staged entry");

/* Raw records this large are copied by the kernel (pread), not from the
 * mapping. A copy from the mapping touches the record's pages through the
 * process's page tables: after the thread has been switched out (the
 * training step between two batches, another process, a wait on the
 * pool) the TLB is cold, and on a virtual machine that shadows the guest's
 * page tables each 4 KiB page can then cost a trip to the hypervisor. The
 * kernel copies through its own huge-page mapping of memory instead, for
 * one system call per record (doc/performance.md, "pread or the mapping"). */
#define PREAD_MIN_RAW (64u << 10)

/* A ZR_NOMAP handle still copies raw records under PREAD_MIN_RAW from the
 * mapping when they lie in the store's first NOMAP_MAPPED bytes: the
 * kernel's read costs about twice a copy from mapped pages for records of
 * 4-32 KiB, system call or io_uring alike, and the bound keeps what the
 * handle maps, hence its resident set, from growing with the store
 * (doc/performance.md, "pread or the mapping"). */
#define NOMAP_MAPPED ((uint64_t)1 << 30)
static uint64_t g_nomap_mapped = NOMAP_MAPPED;

void zr_testing_set_nomap_mapped(uint64_t bytes)
{
    g_nomap_mapped = bytes ? bytes : NOMAP_MAPPED;
}

/* Whether record l is read with pread rather than from the mapping. */
static inline bool by_pread(const zr_store *s, const struct zr_loc *l)
{
    if (s->codec != ZR_CODEC_RAW)
        return s->nomap;
    if (l->phys_length >= PREAD_MIN_RAW)
        return true;
    return s->nomap && (uint64_t)l->chunk_id * s->chunk_cap + l->offset + l->phys_length > g_nomap_mapped;
}

/* How much of a record is asked for ahead of its copy. A small record
 * whole: the CPU then fetches all of its cache lines at once, where a
 * copy that finds them cold waits for the first few before the hardware
 * prefetcher takes over (doc/performance.md, "Prefetch distance"). */
#define PREFETCH_BYTES 4096

/* Ask the CPU for the first PREFETCH_BYTES of the record a checked entry
 * names, and return where its bytes are in its chunk's mapping: NULL for
 * a record read with pread (its pages are not touched through the
 * mapping) or one whose chunk is not mapped yet. The pointer stays good
 * while the read section it was taken in lasts, whatever the cache gives
 * up meanwhile. The prefetches of a chunk not mapped are of addresses
 * near 0, which the CPU drops, as it drops any it cannot reach. */
static inline const uint8_t *prefetch_record(const zr_store *s, const struct zr_loc *l)
{
    if (by_pread(s, l))
        return NULL;
    const uint8_t *map = zr_file_mapped(&s->chunks, l->chunk_id);
    const uint8_t *src = (const uint8_t *)((uintptr_t)map + l->offset);
    uint32_t n = l->phys_length < PREFETCH_BYTES ? l->phys_length : PREFETCH_BYTES;
    for (uint32_t k = 0; k < n; k += 64)
        __builtin_prefetch(src + k);
    return map ? src : NULL;
}

/* A record of a block on its way through the pipeline: its checked entry
 * and where its bytes are mapped (prefetch_record). */
struct staged {
    struct zr_loc l;
    const uint8_t *src;
};

/* Read and check the entry of record i into st, and prefetch the record it
 * names. Returns zr_loc_get's result. */
static inline int stage_loc(zr_store *s, uint64_t i, struct staged *st)
{
    int rc = zr_loc_get(s, i, &st->l);
    if (rc == 0)
        st->src = prefetch_record(s, &st->l);
    return rc;
}

/* stage_loc for a gather that knows records below laid_out to lie where
 * appends lay them out: their entries are made, not read. */
static inline int stage(const struct gather_ctx *c, uint64_t i, struct staged *st)
{
    if (i >= c->laid_out)
        return stage_loc(c->s, i, st);
    zr_layout_loc(c->s, i, &st->l);
    st->src = prefetch_record(c->s, &st->l);
    return 0;
}

static inline void prefetch_entry(const struct gather_ctx *c, uint64_t i)
{
    if (i >= c->laid_out)
        prefetch_loc(c->s, i);
}

/* A thread's first shard of a gather call, when it has at least this many
 * records, asks the CPU for the whole dictionary before it decodes. */
#define WARM_DICT_RECORDS 8

/* Numbers gather calls, so that a thread warms the dictionary once a call
 * (warmed_for) however many of its shards it takes. */
static atomic_uint_fast64_t calls;
static _Thread_local uint64_t warmed_for;

/* Bring the dictionary's bytes into the cache, and ask the CPU for the
 * decoder's tables made from it. A record's matches read the dictionary
 * at random places; when other work has evicted it since the last batch,
 * each of those reads is a cache miss that the decoder waits for in turn,
 * where reading a byte of every line in a row keeps many misses in flight
 * at once. Prefetch instructions alone fetched less of it: the CPU drops
 * those it has no room for (doc/performance.md, "Warming the dictionary").
 * The tables live inside zstd's object, so they are only prefetched,
 * never read. */
static void warm_dict(const zr_store *s)
{
    const volatile uint8_t *d = s->dict;
    for (size_t k = 0; k < s->dict_len; k += 64)
        (void)d[k];
    const uint8_t *t = (const uint8_t *)s->ddict;
    size_t tables = ZSTD_sizeof_DDict(s->ddict);
    for (size_t k = 0; k < tables; k += 64)
        __builtin_prefetch(t + k);
}

/* A shard's scratch buffer for compressed records read with pread
 * (ZR_NOMAP handles), grown to the largest frame it has read. */
struct scratch {
    uint8_t *p;
    size_t cap;
};

/* Read the stored bytes of record i (entry l) with pread: to out for a raw
 * record, else into the scratch buffer; *src is where they are. */
static int pread_loc(zr_store *s, uint64_t i, const struct zr_loc *l, uint8_t *out,
                     struct scratch *sc, const uint8_t **src)
{
    uint8_t *to = out;
    if (s->codec != ZR_CODEC_RAW) {
        if (sc->cap < l->phys_length) {
            uint8_t *p = zr_realloc(sc->p, l->phys_length);
            if (!p)
                return zr_err(ZR_ENOMEM, "%s: reading record %llu", s->path,
                              (unsigned long long)i);
            sc->p = p;
            sc->cap = l->phys_length;
        }
        to = sc->p;
    }
    int fd;
    int rc = zr_file_fd(s, &s->chunks, l->chunk_id, ZR_FD_READ, &fd);
    if (rc != 0)
        return rc;
    uint64_t done = 0;
    while (rc == 0 && done < l->phys_length) {
        ssize_t r = zr_io.pread(fd, to + done, l->phys_length - done, (off_t)(l->offset + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            rc = zr_err_sys(errno, "%s: reading record %llu from %u.chunk", s->path,
                            (unsigned long long)i, l->chunk_id);
        else if (r == 0)
            rc = zr_loc_error(s, i, "the chunk ends before the record");
        done += r > 0 ? (uint64_t)r : 0;
    }
    zr_file_put(s, &s->chunks, l->chunk_id);
    *src = to;
    return rc;
}

/* zstd's decoder takes a slow, byte-careful path for what it writes
 * within 32 bytes of the end of its output buffer. A record that the
 * next record of the batch follows directly, written next by the same
 * thread, is decoded with up to this many of that record's bytes as room
 * (they are overwritten with the right bytes next); a small record
 * without such room is decoded into a buffer that has it, then copied. On
 * records of a few hundred bytes the slow path cost about a tenth of the
 * decode. */
#define DECODE_ROOM 64

/* Records up to this size that have no room after them are decoded into
 * a buffer on the stack. */
#define TAIL_MAX 4096

/* Decode the frame src of record i (entry l) to out, which may be written
 * up to room bytes past the record. */
int zr_decode_record(zr_store *s, ZSTD_DCtx *dctx, uint64_t i, const struct zr_loc *l,
                     const uint8_t *src, uint8_t *out, size_t room)
{
    uint8_t tail[TAIL_MAX + DECODE_ROOM];
    uint8_t *to = out;
    if (room < DECODE_ROOM && l->logic_length <= TAIL_MAX) {
        to = tail;
        room = DECODE_ROOM;
    }
    size_t cap = l->logic_length + ZR_MIN(room, DECODE_ROOM);
    size_t r = s->ddict ? ZSTD_decompress_usingDDict(dctx, to, cap, src, l->phys_length, s->ddict)
                        : ZSTD_decompressDCtx(dctx, to, cap, src, l->phys_length);
    if (ZSTD_isError(r))
        return zr_loc_error(s, i, ZSTD_getErrorName(r));
    if (r != l->logic_length)
        return zr_loc_error(s, i, "record decodes to a length other than its entry's");
    if (to != out)
        memcpy(out, to, r);
    return 0;
}

/* Check the shape prefix of Ragged record i (entry l), now at out. */
int zr_check_prefix(const zr_store *s, uint64_t i, const struct zr_loc *l, const uint8_t *out)
{
    uint32_t nd;
    uint64_t poff;
    if (s->id.kind == ZR_RAGGED &&
        zr_prefix_check(out, l->logic_length, s->id.itemsize, &nd, &poff) != 0)
        return zr_loc_error(s, i, "shape prefix does not match the record's length");
    return 0;
}

/* Where the bytes of record l are in its chunk's mapping, mapping the
 * chunk now (in a read section). Out of line: a gather over chunks already
 * mapped never comes here. */
static __attribute__((noinline, cold)) int map_loc(zr_store *s, const struct zr_loc *l,
                                                   const uint8_t **src)
{
    const uint8_t *map = zr_file_map_slow(s, &s->chunks, l->chunk_id);
    if (!map)
        return zr_last_error_code();
    *src = map + l->offset;
    return 0;
}

/* Copy or decode record i (entry l, stored bytes at src) to out; room as
 * zr_decode_record. */
static inline int copy_loc(zr_store *s, ZSTD_DCtx *dctx, uint64_t i, const struct zr_loc *l,
                           const uint8_t *src, uint8_t *out, size_t room)
{
    if (s->codec == ZR_CODEC_RAW) {
        if (src != out)
            memcpy(out, src, l->logic_length);
    } else {
        int rc = zr_decode_record(s, dctx, i, l, src, out, room);
        if (rc != 0)
            return rc;
    }
    return zr_check_prefix(s, i, l, out);
}

/* Copy or decode record i, whose entry st->l has been checked, to out;
 * room as zr_decode_record. st->src is where its bytes are mapped
 * (prefetch_record), or NULL to read them with pread or map its chunk
 * now. */
static int read_loc(zr_store *s, ZSTD_DCtx *dctx, struct scratch *sc, uint64_t i,
                    const struct staged *st, uint8_t *out, size_t room)
{
    const struct zr_loc *l = &st->l;
    const uint8_t *src = st->src;
    if (__builtin_expect(!src, 0)) {
        int rc = by_pread(s, l) ? pread_loc(s, i, l, out, sc, &src)
                                : map_loc(s, l, &src);
        if (rc != 0)
            return rc;
    }
    return copy_loc(s, dctx, i, l, src, out, room);
}

/* How many bytes after block record j (len bytes) a decode may write:
 * up to DECODE_ROOM of record j + 1 (entry next, when known) if it starts
 * where j ends and this thread writes it next (j + 1 < b). */
static inline size_t room_after(const struct gather_ctx *c, size_t j, size_t b, uint64_t len,
                                const struct zr_loc *next)
{
    if (j + 1 >= b || !next || zr_gather_out(c, j + 1) != zr_gather_out(c, j) + len)
        return 0;
    return (size_t)ZR_MIN(next->logic_length, DECODE_ROOM);
}

/* Copy or decode block records [a, b) from the mappings (or with pread),
 * inside one read section: the pipeline keeps pointers into the mappings
 * from one record to the next. */
static void copy_block(struct gather_ctx *c, size_t a, size_t b)
{
    zr_store *s = c->s;
    ZSTD_DCtx *dctx = NULL;
    struct scratch sc = {0};
    if (s->codec != ZR_CODEC_RAW && !(dctx = zr_dctx_get())) {
        gather_error(c, zr_err(ZR_ENOMEM, "creating a zstd context"));
        return;
    }
    if (s->ddict && b - a >= WARM_DICT_RECORDS && warmed_for != c->call) {
        warmed_for = c->call;
        warm_dict(s);
    }
    if (c->locs) {
        /* The entries are checked already; only the records' bytes
         * are asked for ahead of the copy. */
        struct staged ring[RING];
        for (size_t j = a; j < b && j < a + DATA_AHEAD; j++)
            ring[j % RING] = (struct staged){c->locs[j], prefetch_record(s, &c->locs[j])};
        for (size_t j = a; j < b; j++) {
            if (atomic_load_explicit(&c->failed, memory_order_relaxed))
                break;
            size_t ahead = j + DATA_AHEAD;
            if (ahead < b)
                ring[ahead % RING] = (struct staged){c->locs[ahead], prefetch_record(s, &c->locs[ahead])};
            const struct zr_loc *l = &c->locs[j];
            size_t room = room_after(c, j, b, l->logic_length, j + 1 < b ? l + 1 : NULL);
            int rc = read_loc(s, dctx, &sc, c->idx[j], &ring[j % RING], zr_gather_out(c, j), room);
            if (rc != 0) {
                gather_error(c, rc);
                break;
            }
        }
        zr_free(sc.p);
        zr_dctx_put(dctx);
        return;
    }
    /* Two-stage pipeline over random records: the entry of record
     * j + PREFETCH_AHEAD is asked for, the entry of record j + DATA_AHEAD
     * (asked for earlier, so now in cache) is checked and its record's
     * bytes asked for, and record j is copied. The CPU then has the
     * misses of several entries and records in flight at once, as a plain
     * memcpy loop over computed addresses does. Records below c->laid_out
     * skip the first stage: their entries are computed (stage). The ring
     * holds twice the records in flight, so that a record is read in its
     * place while a later one is staged. */
    struct staged ring[RING];
    int ring_rc[RING];
    for (size_t j = a; j < b && j < a + PREFETCH_AHEAD; j++)
        prefetch_entry(c, c->idx[j]);
    for (size_t j = a; j < b && j < a + DATA_AHEAD; j++)
        ring_rc[j % RING] = stage(c, c->idx[j], &ring[j % RING]);
    for (size_t j = a; j < b; j++) {
        if (atomic_load_explicit(&c->failed, memory_order_relaxed))
            break;
        if (j + PREFETCH_AHEAD < b)
            prefetch_entry(c, c->idx[j + PREFETCH_AHEAD]);
        const struct staged *st = &ring[j % RING];
        int rc = ring_rc[j % RING];
        if (j + DATA_AHEAD < b)
            ring_rc[(j + DATA_AHEAD) % RING] =
                stage(c, c->idx[j + DATA_AHEAD], &ring[(j + DATA_AHEAD) % RING]);
        if (rc != 0) {
            if (rc == ZR_ECORRUPT)
                rc = zr_loc_error(s, c->idx[j], "entry is out of bounds or inconsistent");
        } else {
            /* Record j + 1's entry is staged already (DATA_AHEAD > 1). */
            size_t nx = (j + 1) % RING;
            size_t room = room_after(c, j, b, st->l.logic_length,
                                     j + 1 < b && ring_rc[nx] == 0 ? &ring[nx].l : NULL);
            rc = read_loc(s, dctx, &sc, c->idx[j], st, zr_gather_out(c, j), room);
        }
        if (rc != 0) {
            gather_error(c, rc);
            break;
        }
    }
    zr_free(sc.p);
    zr_dctx_put(dctx);
}

/* Copy block k, timing it (zr_note_mapped). */
static void gather_shard(void *arg, size_t k)
{
    struct gather_ctx *c = arg;
    size_t a, b;
    if (c->cut) {
        a = c->cut[k];
        b = c->cut[k + 1];
    } else {
        a = c->n * k / c->nshards;
        b = c->n * (k + 1) / c->nshards;
    }
    if (a == b)
        return;
    uint64_t t0 = zr_now_ns();
    unsigned rs = zr_read_enter(c->s);
    copy_block(c, a, b);
    zr_read_leave(c->s, rs);
    uint64_t bytes = c->locs ? 0 : (b - a) * c->s->width;
    for (size_t j = a; c->locs && j < b; j++)
        bytes += c->locs[j].logic_length;
    zr_note_mapped(c->s, b - a, bytes, zr_now_ns() - t0);
}

/* A block of a store with more files than the handle may keep mapped
 * copies at most this many records: its read section holds back the
 * mappings given up while it runs (tables.c), and a long block over many
 * chunks would pile up one for each. */
#define MAX_BLOCK_EVICTING 256

/* How many blocks a batch of total decoded bytes is cut into: none under
 * the codec's minimum, at most one a record and BLOCKS_PER_THREAD a
 * thread, and blocks of at most MAX_BLOCK_EVICTING records where the
 * cache gives mappings up. */
static size_t block_count(const zr_store *s, size_t n, uint64_t total)
{
    uint64_t threads = (uint64_t)zr_pool_threads();
    uint64_t min_block = s->codec == ZR_CODEC_RAW ? MIN_BLOCK_RAW : MIN_BLOCK_ZSTD;
    uint64_t shards = ZR_MIN((uint64_t)n, threads * BLOCKS_PER_THREAD);
    shards = ZR_MIN(shards, ZR_MAX(1, total / min_block));
    if (!zr_tables_fit(s))
        shards = ZR_MAX(shards, (n + MAX_BLOCK_EVICTING - 1) / MAX_BLOCK_EVICTING);
    return (size_t)shards;
}

/* Run the blocks, waking sleeping workers only for a batch big enough. */
static void run_blocks(struct gather_ctx *c, uint64_t total)
{
    uint64_t wake = c->s->codec == ZR_CODEC_RAW ? WAKE_RAW : WAKE_ZSTD;
    if (total >= wake)
        zr_pool_run(c->nshards, gather_shard, c);
    else
        zr_pool_run_light(c->nshards, gather_shard, c);
}

/* Ragged: check every entry first, then cut the batch at equal shares of
 * its decoded bytes and run the blocks. */
static int gather_ragged(struct gather_ctx *c)
{
    zr_store *s = c->s;
    struct zr_loc stack_locs[STACK_LOCS];
    size_t stack_cut[STACK_LOCS + 1];
    struct zr_loc *locs = stack_locs;
    size_t *cut = stack_cut;
    int rc = 0;
    if (c->n > STACK_LOCS) {
        locs = zr_malloc(c->n * sizeof *locs);
        cut = zr_malloc((c->n + 1) * sizeof *cut);
        if (!locs || !cut) {
            rc = zr_err(ZR_ENOMEM, "gathering %zu records", c->n);
            goto out;
        }
    }
    uint64_t total = 0;
    unsigned rs = zr_read_enter(s);
    for (size_t j = 0; j < c->n && j < PREFETCH_AHEAD; j++)
        prefetch_loc(s, c->idx[j]);
    for (size_t j = 0; rc == 0 && j < c->n; j++) {
        if (j % ZR_PAUSE_EVERY == 0)
            zr_read_pause(s, &rs);
        if (j + PREFETCH_AHEAD < c->n)
            prefetch_loc(s, c->idx[j + PREFETCH_AHEAD]);
        rc = zr_loc_read(s, c->idx[j], &locs[j]);
        total += locs[j].logic_length;
    }
    zr_read_leave(s, rs);
    if (rc != 0)
        goto out;
    size_t shards = block_count(s, c->n, total);
    /* Block k starts at the first record that begins at or after k/shards
     * of the bytes; a block may come out empty, never overlapping. */
    uint64_t seen = 0;
    size_t j = 0;
    cut[0] = 0;
    if (zr_tables_fit(s)) {
        for (size_t k = 1; k < shards; k++) {
            uint64_t goal = total * k / shards;
            while (j < c->n && seen < goal)
                seen += locs[j++].logic_length;
            cut[k] = j;
        }
        cut[shards] = c->n;
    } else {
        /* Where the cache gives mappings up, a block also ends after
         * MAX_BLOCK_EVICTING records, however few their bytes (see
         * block_count): blocks end at a share of the bytes or at that
         * many records, whichever comes first. */
        uint64_t share = ZR_MAX(1, total / shards);
        size_t start = 0;
        shards = 0;
        for (j = 0; j < c->n; j++) {
            seen += locs[j].logic_length;
            if (j + 1 < c->n && (seen >= share || j + 1 - start == MAX_BLOCK_EVICTING)) {
                cut[++shards] = start = j + 1;
                seen = 0;
            }
        }
        cut[++shards] = c->n;
    }
    c->locs = locs;
    c->cut = cut;
    c->nshards = shards;
    run_blocks(c, total);
out:
    if (locs != stack_locs)
        zr_free(locs);
    if (cut != stack_cut)
        zr_free(cut);
    return rc;
}

int zr_engine_gather(zr_store *s, const uint64_t *idx, size_t n, uint8_t *dst,
                     const uint64_t *offsets)
{
    uint64_t len;
    int rc = zr_check_indices(s, idx, n, &len);
    if (rc != 0 || n == 0)
        return rc;
    struct gather_ctx c = {.s = s, .idx = idx, .n = n, .dst = dst, .offsets = offsets};
    if (s->ddict)
        c.call = atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed) + 1;
    if (s->width)
        c.laid_out = zr_layout_known(s, len, n);
    /* A remote store's batch that its cache holds whole is read from the
     * cache files as a local store's is; other batches plan their reads. */
    bool cached = s->rcache && zr_rcache_holds(s, idx, n, c.laid_out);
    if (!cached && zr_gather_plans(s))
        return zr_gather_planned(&c);
    pthread_mutex_init(&c.err_lock, NULL);
    if (n == 1) {
        c.nshards = 1;
        gather_shard(&c, 0);
    } else if (s->id.kind == ZR_RAGGED) {
        rc = gather_ragged(&c);
    } else {
        c.nshards = block_count(s, n, s->width * n);
        run_blocks(&c, s->width * n);
    }
    pthread_mutex_destroy(&c.err_lock);
    if (rc != 0)
        return rc;
    if (c.err != 0) {
        zr_err_restore(c.err, c.errmsg);
        return c.err;
    }
    return 0;
}

/* Check raw record i for zr_record_span and zr_record_extent: its entry,
 * and for Ragged stores its shape prefix; then keep its chunk's mapping
 * or descriptor (what, ZR_KEEP_*) until the next delete, compact or close
 * of the handle, and give it in *map or *fd. */
static int span_loc(zr_store *s, uint64_t i, const char *fn, uint32_t what, struct zr_loc *l,
                    const uint8_t **map, int *fd)
{
    if (s->codec != ZR_CODEC_RAW)
        return zr_err(ZR_EINVAL, "%s: %s needs a raw store, not %s", s->path, fn,
                      zr_codec_name(s->codec));
    if (s->remote)
        return zr_err(ZR_EINVAL, "%s: %s needs a local store: a remote one has no file to "
                      "map; gather the record instead", s->path, fn);
    uint64_t len;
    int rc = zr_check_indices(s, &i, 1, &len);
    if (rc != 0)
        return rc;
    /* A handle not reading from memory reads the entry, and a Ragged
     * record's shape prefix, with reads of their own: a fault on a
     * mapping reads megabytes around the page (read_ahead_kb), where the
     * caller may want nothing of the record yet (zrecordfs asks for a
     * file's size) or only some of it. */
    bool planned = atomic_load(&s->read_mode) != ZR_READ_MAPPED;
    if (planned && (rc = zr_batch_locs(s, &i, 1, l, true)) != 0)
        return rc;
    uint8_t head[8 * (1 + ZR_MAX_NDIM)];
    uint32_t hlen = 0;
    if (planned && s->id.kind == ZR_RAGGED)
        hlen = (uint32_t)(l->logic_length < sizeof head ? l->logic_length : sizeof head);
    /* A prefix whose pages are cached is read from the mapping: a
     * cachestat costs less than a planned read. */
    bool head_read = hlen > 0 && zr_range_cached(s, l->chunk_id, l->offset, hlen) != 1;
    if (head_read) {
        struct zr_piece pc = {.file = l->chunk_id, .len = hlen, .off = l->offset, .to = head};
        struct zr_plan_stats st;
        rc = zr_plan_read(s, &s->chunks, &pc, 1, NULL, NULL, &st);
        if (rc == ZR_ECORRUPT && st.ended)
            rc = zr_loc_error(s, i, "the chunk file ends before the record");
        if (rc != 0)
            return rc;
    }
    unsigned rs = zr_read_enter(s);
    const uint8_t *src = NULL;
    if (!planned)
        rc = zr_loc_read(s, i, l);
    if (rc == 0 && s->id.kind == ZR_RAGGED && !(src = zr_file_map(s, &s->chunks, l->chunk_id)))
        rc = zr_last_error_code();
    uint32_t nd;
    uint64_t poff;
    if (rc == 0 && src &&
        zr_prefix_check(head_read ? head : src + l->offset, l->logic_length, s->id.itemsize,
                        &nd, &poff) != 0)
        rc = zr_loc_error(s, i, "shape prefix does not match the record's length");
    zr_read_leave(s, rs);
    if (rc == 0)
        rc = zr_file_keep(s, &s->chunks, l->chunk_id, what, map, fd);
    return rc;
}

static int record_span_in(zr_store *s, uint64_t i, const void **data, uint64_t *size)
{
    if (!s || !data || !size)
        return zr_err(ZR_EINVAL, "zr_record_span: NULL argument");
    struct zr_loc l;
    const uint8_t *map;
    int rc = span_loc(s, i, "zr_record_span", ZR_KEEP_MAP, &l, &map, NULL);
    if (rc != 0)
        return rc;
    *data = map + l.offset;
    *size = l.logic_length;
    return 0;
}

ZR_API int zr_record_span(zr_store *s, uint64_t i, const void **data, uint64_t *size)
{
    int rc = zr_store_enter(s, "zr_record_span");
    return rc != 0 ? rc : zr_store_leave_rc(s, record_span_in(s, i, data, size));
}

static int record_extent_in(zr_store *s, uint64_t i, int *fd, uint64_t *offset, uint64_t *size)
{
    if (!s || !fd || !offset || !size)
        return zr_err(ZR_EINVAL, "zr_record_extent: NULL argument");
    struct zr_loc l;
    int rc = span_loc(s, i, "zr_record_extent", ZR_KEEP_FD, &l, NULL, fd);
    if (rc != 0)
        return rc;
    *offset = l.offset;
    *size = l.logic_length;
    return 0;
}

ZR_API int zr_record_extent(zr_store *s, uint64_t i, int *fd, uint64_t *offset, uint64_t *size)
{
    int rc = zr_store_enter(s, "zr_record_extent");
    return rc != 0 ? rc : zr_store_leave_rc(s, record_extent_in(s, i, fd, offset, size));
}

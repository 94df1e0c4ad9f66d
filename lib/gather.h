/*
 * gather.h: what the two read paths of a gather share. gather.c takes a
 * batch, copies it from the mappings when the store is in memory, and
 * otherwise hands it to planned.c, which plans its reads (plan.h);
 * readmode.c keeps each handle's choice between the two.
 */
#ifndef ZR_GATHER_H
#define ZR_GATHER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

#include "engine.h"
#include "plan.h"

/* One gather call. */
struct gather_ctx {
    zr_store *s;
    const uint64_t *idx;
    size_t n;
    uint8_t *dst;
    const uint64_t *offsets;
    size_t nshards;
    const struct zr_loc *locs; /* Ragged: the entries, already checked */
    const size_t *cut;         /* Ragged: block k is [cut[k], cut[k+1]) */
    uint64_t laid_out;         /* Dense raw: records below it need no entry */
    uint64_t call;             /* this call's number, from 1 (see calls) */
    _Atomic int failed;
    pthread_mutex_t err_lock;
    int err;
    char errmsg[512];
};


/* Where request j of the batch goes. */
static inline uint8_t *zr_gather_out(const struct gather_ctx *c, size_t j)
{
    return c->dst + (c->offsets ? c->offsets[j] : j * c->s->width);
}

/* Records a loop over entries reads between two looks whether its read
 * section holds mappings back from being unmapped (zr_read_pause). */
#define ZR_PAUSE_EVERY 64

/* Decode the frame src of record i (entry l) to out, which may be written
 * up to room bytes past the record (gather.c). */
int zr_decode_record(zr_store *s, ZSTD_DCtx *dctx, uint64_t i, const struct zr_loc *l,
                     const uint8_t *src, uint8_t *out, size_t room);

/* Check the shape prefix of Ragged record i (entry l), now at out
 * (gather.c); 0 for Dense records. */
int zr_check_prefix(const zr_store *s, uint64_t i, const struct zr_loc *l, const uint8_t *out);

/* Gather c's batch with planned reads (planned.c). */
int zr_gather_planned(struct gather_ctx *c);

/* The handle's choice of path (readmode.c). zr_gather_plans says whether
 * the next gather plans its reads; a planned batch reports what its reads
 * found (zr_note_planned) and a mapped block how long it took
 * (zr_note_mapped), which may move the handle to the other path. */
bool zr_gather_plans(zr_store *s);
void zr_note_planned(zr_store *s, const struct zr_plan_stats *st);
void zr_note_mapped(zr_store *s, size_t records, uint64_t bytes, uint64_t ns);
uint64_t zr_now_ns(void);

#endif

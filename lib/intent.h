/*
 * intent.h: the redo record (intent.zr) that makes delete and compact
 * atomic under crashes. See lib/intent.c and doc/format.md.
 */
#ifndef ZR_INTENT_H
#define ZR_INTENT_H

#include <stdint.h>

#include "engine.h"

#define ZR_INTENT_FILE "intent.zr"
#define ZR_INTENT_DELETE 1
#define ZR_INTENT_COMPACT 2

/* One table entry the intent sets. */
struct zr_intent_entry {
    uint64_t index;
    struct zr_loc loc;
};

/* Write a complete intent durably: kind, the header to commit, the
 * entries, and (compact) the stored bytes of each entry's record back to
 * back in data. Replaces any previous intent. */
int zr_intent_write(zr_store *s, int kind, const struct zr_header *h,
                    const struct zr_intent_entry *e, uint64_t n, const uint8_t *data,
                    uint64_t data_len);

/* Mark the intent done: truncate intent.zr to zero bytes, durably. */
int zr_intent_clear(zr_store *s);

/* At open, before the tables are loaded: if intent.zr holds a complete
 * intent, apply it (record bytes, entries, header), sync, and clear it;
 * an incomplete one is cleared. The handle's lock must be exclusive.
 * *applied is set when something was applied. */
int zr_intent_recover(zr_store *s, int *applied);

/* Whether intent.zr exists and is not empty (a pending intent). */
int zr_intent_pending(zr_store *s, int *pending);

/* A 64-bit checksum of a byte range, continuing from seed. */
uint64_t zr_hash64(const void *p, uint64_t n, uint64_t seed);

#endif

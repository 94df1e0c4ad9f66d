/*
 * plan.h: the batch read planner. A gather of records that are not in the
 * page cache hands it the pieces to read (file, offset, length,
 * destination); it sorts them by file and offset, merges pieces that
 * follow each other in a file into one read, and keeps as many reads in
 * flight as the device takes, through an io_uring per thread.
 */
#ifndef ZR_PLAN_H
#define ZR_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

/* One piece of a batch: len bytes at offset off of file `file` of a
 * table, read to `to`. tag is the caller's (which record it is). */
struct zr_piece {
    uint32_t file;
    uint32_t len;
    uint64_t off;
    uint8_t *to;
    size_t tag;
};

/* Called, on whichever thread read it, once a piece's bytes are in
 * place; returns 0 or an error code with this thread's message set.
 * Callbacks of different pieces may run at the same time. */
typedef int (*zr_piece_fn)(void *arg, const struct zr_piece *p);

/* What a planned read found: how many reads it made, and how many of
 * them the kernel completed at once because their pages were cached. */
struct zr_plan_stats {
    size_t reads;
    size_t cached;
    bool ended;       /* a file ended before a piece: ZR_ECORRUPT */
    size_t ended_tag; /* that piece's tag */
};

/* Read pieces p[0..n) of table t (reordered in place) with the pool's
 * threads, calling done (if not NULL) for each. Pieces must name bytes
 * inside their files (checked entries) and must not overlap one another.
 * Returns 0, or the first error: ZR_ECORRUPT when a file ends before a
 * piece (it shrank since it was checked; st says which piece), ZR_EIO
 * for a failed read. */
int zr_plan_read(zr_store *s, struct zr_ftable *t, struct zr_piece *p, size_t n,
                 zr_piece_fn done, void *arg, struct zr_plan_stats *st);

/* zr_plan_read of the local files of s: those of a local store, or the
 * cache files of a remote one (rcache.h). */
int zr_plan_read_local(zr_store *s, struct zr_ftable *t, struct zr_piece *p, size_t n,
                       zr_piece_fn done, void *arg, struct zr_plan_stats *st);

/* zr_plan_read for a store in an object store: ranged GETs (remote.c). */
int zr_remote_read(zr_store *s, struct zr_ftable *t, struct zr_piece *p, size_t n,
                   zr_piece_fn done, void *arg, struct zr_plan_stats *st);

#endif

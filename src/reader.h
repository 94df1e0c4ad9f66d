/*
 * reader.h: reading the records of a store in bounded batches, for the
 * commands that stream them out (export, cat, recode).
 */
#ifndef ZR_READER_H
#define ZR_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli.h"

struct reader {
    zr_store *s;
    bool ragged;
    uint64_t width; /* Dense record bytes */
    const struct cli_range *ranges;
    size_t nranges, range;
    uint64_t next;  /* the next index to read in ranges[range] */
    size_t cap;     /* indices per batch */
    uint64_t *idx, *sizes, *offsets;
    uint8_t *buf;
    size_t buf_cap;
    zr_view *views; /* Ragged: the records of the batch */
};

/* Read the records of the ranges [lo, hi) in order. */
int reader_init(struct reader *rd, zr_store *s, const struct cli_range *ranges, size_t nranges);
/* The next batch: *n records (0 at the end). Dense record k is at
 * rd->buf + k * rd->width; Ragged record k is rd->views[k]. EXIT_OK or
 * EXIT_FAIL with the message printed. */
int reader_next(struct reader *rd, size_t *n);
void reader_free(struct reader *rd);

#endif

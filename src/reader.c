/*
 * reader.c: a store's records in order, a bounded batch at a time.
 *
 * export, cat and recode may be asked for every record of a store larger
 * than memory, so they read through this: a batch is at most
 * CLI_BATCH_RECORDS records and, unless one record is larger on its own,
 * at most CLI_BATCH_BYTES bytes. For a Ragged store the sizes are read
 * from the record table first (no decoding), which is how the batch is cut
 * before anything is gathered.
 */
#include <stdlib.h>
#include <string.h>

#include "reader.h"

int reader_init(struct reader *rd, zr_store *s, const struct cli_range *ranges, size_t nranges)
{
    *rd = (struct reader){.s = s, .ranges = ranges, .nranges = nranges};
    rd->ragged = zr_kind(s) == ZR_RAGGED;
    rd->width = zr_record_width(s);
    rd->next = nranges ? ranges[0].lo : 0;
    rd->cap = CLI_BATCH_RECORDS;
    if (!rd->ragged && rd->width > 0 && CLI_BATCH_BYTES / rd->width < rd->cap)
        rd->cap = CLI_BATCH_BYTES / rd->width ? (size_t)(CLI_BATCH_BYTES / rd->width) : 1;
    rd->idx = malloc(rd->cap * sizeof *rd->idx);
    rd->sizes = malloc(rd->cap * sizeof *rd->sizes);
    rd->offsets = malloc(rd->cap * sizeof *rd->offsets);
    rd->views = rd->ragged ? malloc(rd->cap * sizeof *rd->views) : NULL;
    if (!rd->idx || !rd->sizes || !rd->offsets || (rd->ragged && !rd->views)) {
        reader_free(rd);
        return cli_fail("out of memory");
    }
    return EXIT_OK;
}

/* Up to max of the next indices, without consuming them. */
static size_t peek(const struct reader *rd, uint64_t *idx, size_t max)
{
    size_t n = 0, r = rd->range;
    uint64_t next = rd->next;
    while (n < max && r < rd->nranges) {
        if (next >= rd->ranges[r].hi) {
            if (++r < rd->nranges)
                next = rd->ranges[r].lo;
            continue;
        }
        idx[n++] = next++;
    }
    return n;
}

static void consume(struct reader *rd, size_t n)
{
    while (n > 0 && rd->range < rd->nranges) {
        uint64_t left = rd->ranges[rd->range].hi - rd->next;
        if (left == 0) {
            if (++rd->range < rd->nranges)
                rd->next = rd->ranges[rd->range].lo;
            continue;
        }
        uint64_t take = left < n ? left : n;
        rd->next += take;
        n -= (size_t)take;
    }
}

static int reserve(struct reader *rd, uint64_t bytes)
{
    if (bytes <= rd->buf_cap)
        return EXIT_OK;
    if (bytes > SIZE_MAX)
        return cli_fail("a batch of %llu bytes does not fit in memory", (unsigned long long)bytes);
    free(rd->buf);
    rd->buf = malloc((size_t)bytes);
    rd->buf_cap = rd->buf ? (size_t)bytes : 0;
    if (!rd->buf)
        return cli_fail("out of memory for a batch of %llu bytes", (unsigned long long)bytes);
    return EXIT_OK;
}

int reader_next(struct reader *rd, size_t *n)
{
    *n = 0;
    size_t m = peek(rd, rd->idx, rd->cap);
    if (m == 0)
        return EXIT_OK;
    int rc;
    if (!rd->ragged) {
        if ((rc = reserve(rd, (uint64_t)m * rd->width)) != EXIT_OK)
            return rc;
        if (zr_gather_dense(rd->s, rd->idx, m, rd->buf) != 0)
            return cli_fail_lib(NULL);
    } else {
        if (zr_ragged_sizes(rd->s, rd->idx, m, rd->sizes) != 0)
            return cli_fail_lib(NULL);
        /* Cut the batch at the byte budget; offsets stay 8-byte aligned so
         * that every payload is aligned for its dtype. */
        uint64_t total = 0;
        size_t k = 0;
        for (; k < m; k++) {
            uint64_t padded = (rd->sizes[k] + 7) & ~(uint64_t)7;
            if (k > 0 && total + padded > CLI_BATCH_BYTES)
                break;
            rd->offsets[k] = total;
            total += padded;
        }
        m = k;
        if ((rc = reserve(rd, total)) != EXIT_OK)
            return rc;
        if (zr_gather_ragged(rd->s, rd->idx, m, rd->buf, rd->offsets) != 0)
            return cli_fail_lib(NULL);
        for (k = 0; k < m; k++)
            if (zr_ragged_view(rd->buf + rd->offsets[k], rd->sizes[k], zr_itemsize(rd->s),
                               &rd->views[k]) != 0)
                return cli_fail_lib(NULL);
    }
    consume(rd, m);
    *n = m;
    return EXIT_OK;
}

void reader_free(struct reader *rd)
{
    free(rd->idx);
    free(rd->sizes);
    free(rd->offsets);
    free(rd->views);
    free(rd->buf);
    *rd = (struct reader){0};
}

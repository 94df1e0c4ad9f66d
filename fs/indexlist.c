/*
 * indexlist.c: parsing the index lists that users write to the control
 * files .gather and .delete.
 *
 * The text comes from shells (echo, printf, seq) and from programs calling
 * write(2), so it arrives in pieces of arbitrary size: a number may be
 * split between two writes, and only the end of input (a read of .gather,
 * a close of .delete) says that the last number is complete. The parser
 * therefore keeps the value of a half-read number between calls and checks
 * each index against the record count as soon as it is complete, so a bad
 * list is refused at the write that carries the mistake whenever possible.
 * A list refused after some of it was taken stays refused until its
 * owner resets it: the kernel cuts one long write(2) into several
 * requests and reports the pieces before a refused one written, so the
 * writer's loop then sends the rest, which is no list of its own.
 * Leading zeros are accepted (seq -w writes them); signs, spaces inside a
 * number and anything else are not.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/decimal.h"
#include "fs/indexlist.h"

void zfs_idxlist_init(struct zfs_idxlist *l, uint64_t limit, size_t max)
{
    l->n = 0;
    l->limit = limit;
    l->max = max;
    l->cur = 0;
    l->intok = false;
    l->taken = false;
    l->err = 0;
}

void zfs_idxlist_reset(struct zfs_idxlist *l)
{
    l->n = 0;
    l->cur = 0;
    l->intok = false;
    l->taken = false;
    l->err = 0;
}

void zfs_idxlist_set_limit(struct zfs_idxlist *l, uint64_t limit)
{
    l->limit = limit;
}

void zfs_idxlist_free(struct zfs_idxlist *l)
{
    free(l->idx);
    l->idx = NULL;
    l->n = l->cap = 0;
    l->intok = false;
    l->taken = false;
    l->err = 0;
}

/* An error: the list fails with rc from now on once some of it was
 * taken, and is discarded otherwise (see zfs_idxlist_feed). */
static int fail(struct zfs_idxlist *l, int rc)
{
    if (l->taken)
        l->err = rc;
    else
        zfs_idxlist_reset(l);
    return rc;
}

/* Append the completed number in l->cur. */
static int push(struct zfs_idxlist *l)
{
    l->intok = false;
    if (l->cur >= l->limit)
        return -EINVAL;
    if (l->n >= l->max)
        return -E2BIG;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        if (cap > l->max)
            cap = l->max;
        uint64_t *p = realloc(l->idx, cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        l->idx = p;
        l->cap = cap;
    }
    l->idx[l->n++] = l->cur;
    l->cur = 0;
    return 0;
}

int zfs_idxlist_feed(struct zfs_idxlist *l, const char *buf, size_t len)
{
    if (l->err)
        return l->err;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c >= '0' && c <= '9') {
            /* The digits from here on, after those of a number that the
             * last write cut. */
            size_t n = dec_take(buf + i, len - i, &l->cur);
            if (n == DEC_TOO_BIG)
                return fail(l, -EINVAL);
            l->intok = true;
            i += n - 1;
        } else if (c == ' ' || c == '\t' || c == ',' || c == '\n' || c == '\r') {
            if (l->intok) {
                int rc = push(l);
                if (rc != 0)
                    return fail(l, rc);
            }
        } else {
            return fail(l, -EINVAL);
        }
    }
    if (len > 0)
        l->taken = true;
    return 0;
}

int zfs_idxlist_finish(struct zfs_idxlist *l)
{
    if (l->err)
        return l->err;
    int rc = l->intok ? push(l) : 0;
    if (rc != 0)
        l->err = rc; /* a number was cut, so some of the list was taken */
    return rc;
}

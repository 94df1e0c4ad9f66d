/* indexlist.h: the incremental parser of index lists written to the
 * control files .gather and .delete. */
#ifndef ZFS_INDEXLIST_H
#define ZFS_INDEXLIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A list of record indices being parsed from text that may arrive in
 * several writes. Zero-initialise it, then call zfs_idxlist_init. */
struct zfs_idxlist {
    uint64_t *idx;   /* the complete indices, in the order written */
    size_t n;        /* how many */
    size_t cap;      /* allocated entries */
    uint64_t limit;  /* every index must be below this (the record count) */
    size_t max;      /* at most this many indices in one list */
    uint64_t cur;    /* value of the number still being read */
    bool intok;      /* a number was cut by the end of the last write */
    bool taken;      /* an earlier call fed the list without error */
    int err;         /* the error the list failed with, or 0 */
};

/* Prepare an empty list accepting indices below limit, at most max of them. */
void zfs_idxlist_init(struct zfs_idxlist *l, uint64_t limit, size_t max);

/* Drop every index, any half-read number and a failure; keeps the memory. */
void zfs_idxlist_reset(struct zfs_idxlist *l);

/* Change the bound for indices still to come (after the store shrank). */
void zfs_idxlist_set_limit(struct zfs_idxlist *l, uint64_t limit);

/* Release the memory. The list may be initialised again afterwards. */
void zfs_idxlist_free(struct zfs_idxlist *l);

/* Parse len bytes of text: decimal numbers separated by any run of
 * spaces, tabs, commas, carriage returns or newlines. A number may be cut
 * between two calls. Returns 0, -EINVAL (a character that is neither a
 * digit nor a separator, a number over 2^64-1, or an index at or above
 * the limit), -E2BIG (more than max indices) or -ENOMEM.
 *
 * An error in the list's first piece of text discards the list: its
 * writer was refused all it sent, so what it sends next is a new list.
 * An error after a piece was taken sticks: until the list is reset, every
 * later call returns it again and the indices are not to be used, since
 * what follows may be the rest of the same list (a write(2) that the
 * kernel passed on in several requests, and whose first ones it reported
 * written) and must not be taken for a list of its own. */
int zfs_idxlist_feed(struct zfs_idxlist *l, const char *buf, size_t len);

/* End of input: completes a number cut by the end of the last write.
 * Returns 0 or an error as zfs_idxlist_feed; an error sticks. */
int zfs_idxlist_finish(struct zfs_idxlist *l);

#endif

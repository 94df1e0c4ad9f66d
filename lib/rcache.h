/*
 * rcache.h: the local cache of a remote store's files (rcache.c), kept
 * in the folder LOADERX_CACHE_DIR names and shared by the processes of a
 * host. Each chunk file and segment of a remote store has a sparse file
 * of the same size there, filled block by block as reads need them, with
 * the bitmap of the blocks it holds after the bytes the handle maps.
 */
#ifndef ZR_RCACHE_H
#define ZR_RCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "plan.h"

/* Attach the cache folder dir to remote handle s, whose header, identity
 * and files are loaded: its files go to a folder of dir named after the
 * store's address and version (a hash of its objects' names, sizes and
 * ETags: a store pushed again is another one), with at most max_bytes
 * held in the whole of dir. */
int zr_rcache_attach(zr_store *s, const char *dir, uint64_t max_bytes, uint64_t version);
void zr_rcache_free(zr_store *s);

/* Around fork() (tables.c): the cache's lock is taken before and given
 * back after, in both processes; the child keeps its files, which are
 * the same inodes as the parent's. */
void zr_rcache_fork_prepare(zr_store *s);
void zr_rcache_fork_done(zr_store *s);

/* A descriptor of the cache file of file id of t, for the handle's own
 * cache of descriptors (tables.c), or -1 with errno set. */
int zr_rcache_dup(zr_store *s, struct zr_ftable *t, uint32_t id);

/* Have the blocks that pieces p[0..n) of t lie in fetched into the cache
 * files: those missing are fetched with ranged GETs. Pieces the cache
 * cannot hold now (its file evicted while this handle had it, a file that
 * cannot be opened or written) are moved to the front of p: *direct of
 * them, for the caller to read without the cache. */
int zr_rcache_fill(zr_store *s, struct zr_ftable *t, struct zr_piece *p, size_t n,
                   size_t *direct);

/* Whether the cache of remote handle s holds the entry of record i
 * (false without a cache). */
bool zr_rcache_has_entry(zr_store *s, uint64_t i);

/* Whether every record of the batch idx[0..n) (entries of records from
 * laid_out on included) is in the cache, so that it may be read as a
 * local store is, from the mappings of the cache files. */
bool zr_rcache_holds(zr_store *s, const uint64_t *idx, size_t n, uint64_t laid_out);

#endif

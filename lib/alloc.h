/*
 * alloc.h: every heap allocation of libloaderx goes through the table
 * zr_alloc, so that tests can make allocation number k fail and check
 * that the library reports ZR_ENOMEM, leaks nothing and leaves the store
 * intact. Memory allocated inside libzstd and msgpack-c does not pass
 * through this table.
 */
#ifndef ZR_ALLOC_H
#define ZR_ALLOC_H

#include <stddef.h>

struct zr_alloc_ops {
    void *(*malloc)(size_t n);
    void *(*calloc)(size_t n, size_t size);
    void *(*realloc)(void *p, size_t n);
    void (*free)(void *p);
};

/* The table in use; tests may replace entries and must restore them.
 * Every entry must stay compatible with free(), since callers release some
 * of the library's results (documented in loaderx.h) with free(). */
extern struct zr_alloc_ops zr_alloc;
/* The C library's functions, for restoring zr_alloc. */
extern const struct zr_alloc_ops zr_alloc_default;

static inline void *zr_malloc(size_t n) { return zr_alloc.malloc(n); }
static inline void *zr_calloc(size_t n, size_t size) { return zr_alloc.calloc(n, size); }
static inline void *zr_realloc(void *p, size_t n) { return zr_alloc.realloc(p, n); }
static inline void zr_free(void *p) { zr_alloc.free(p); }

/* strdup through the table. */
char *zr_strdup(const char *s);

#endif

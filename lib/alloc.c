/*
 * alloc.c: the allocation table (see alloc.h). It holds the C library's
 * functions unless a test has swapped them for failing ones.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

#define ZR_ALLOC_SYSTEM {.malloc = malloc, .calloc = calloc, .realloc = realloc, .free = free}

const struct zr_alloc_ops zr_alloc_default = ZR_ALLOC_SYSTEM;
struct zr_alloc_ops zr_alloc = ZR_ALLOC_SYSTEM;

char *zr_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = zr_malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

/*
 * internal.h: helpers shared by every module of libloaderx and never
 * exported: error reporting, little-endian encoding, checked arithmetic.
 */
#ifndef ZR_INTERNAL_H
#define ZR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "loaderx/loaderx.h"

#define ZR_UNUSED(x) ((void)(x))
#define ZR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ZR_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Set this thread's last-error message to the code's text followed by the
 * formatted detail, and return code (so callers can write
 * `return zr_err(ZR_EIO, "...")`). */
int zr_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Like zr_err, for a failed system call: maps errno to a ZR_E* code
 * (ENOSPC/EDQUOT to ZR_ENOSPC, ENOMEM to ZR_ENOMEM, the rest to ZR_EIO) and
 * appends strerror(errnum). */
int zr_err_sys(int errnum, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Copy a message produced on another thread into this thread's slot. */
void zr_err_restore(int code, const char *msg);

static inline uint32_t zr_load32(const void *p)
{
    const uint8_t *b = p;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static inline uint64_t zr_load64(const void *p)
{
    const uint8_t *b = p;
    return (uint64_t)zr_load32(b) | (uint64_t)zr_load32(b + 4) << 32;
}

static inline void zr_store32(void *p, uint32_t v)
{
    uint8_t *b = p;
    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
    b[2] = (uint8_t)(v >> 16);
    b[3] = (uint8_t)(v >> 24);
}

static inline void zr_store64(void *p, uint64_t v)
{
    zr_store32(p, (uint32_t)v);
    zr_store32((uint8_t *)p + 4, (uint32_t)(v >> 32));
}

/* a * b into *out; false on overflow. */
static inline bool zr_mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

static inline bool zr_add_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

#endif

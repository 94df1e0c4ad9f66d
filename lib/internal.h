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

/* Sized structs (loaderx.h): the smallest size a caller may give struct T,
 * one that holds its first field after size. */
#define ZR_ABI_MIN(T, first) (offsetof(T, first) + sizeof(((T *)0)->first))

/* Check the size a caller gave the sized struct at p, of which this
 * library knows `known` bytes: ZR_EINVAL (naming what) if it is below min,
 * or above known with a byte past known set. Otherwise *n receives the
 * bytes both sides know, the smaller of the two sizes. */
int zr_abi_check(const void *p, size_t known, size_t min, const char *what, size_t *n);

/* Read a caller's sized struct src into *dst, which holds the defaults of
 * all known bytes: the bytes both sides know are copied and dst's size
 * becomes known. Errors as zr_abi_check. */
int zr_abi_read(void *dst, size_t known, const void *src, size_t min, const char *what);

/* A caller's creation options (NULL for the defaults) as this library's
 * struct. Errors as zr_abi_check. */
int zr_create_opts_read(const zr_create_opts *opts, zr_create_opts *out);

/* Write the library's struct src into a caller's dst, the n bytes
 * zr_abi_check gave, leaving the caller's size as it set it. */
void zr_abi_write(void *dst, const void *src, size_t n);

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

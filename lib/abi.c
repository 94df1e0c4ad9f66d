/*
 * abi.c: what lets a compiled caller and the library differ in version.
 * It owns the version the library reports and the checks on the size a
 * caller gives a sized struct (loaderx.h, "Sized structs").
 *
 * A struct's size says which of its fields the caller's header had.
 * Fields are only appended and zero is every field's default, so the
 * bytes both sides know are exchanged as they are, a field the caller
 * lacks keeps its default, and a field the library lacks is harmless
 * only while it is zero: anything else is a request this library cannot
 * honour, which is refused rather than ignored.
 */
#include "internal.h"

ZR_API int zr_version(void)
{
    return ZR_VERSION_NUMBER;
}

ZR_API const char *zr_version_string(void)
{
    return ZR_VERSION_STRING;
}

/* How far past the fields it knows a struct from a newer header may
 * reach: room for many fields, and a bound on the bytes checked. */
#define ZR_ABI_GROWTH 4096

int zr_abi_check(const void *p, size_t known, size_t min, const char *what, size_t *n)
{
    size_t size = *(const size_t *)p;
    /* A size far past any struct a newer header could define is not a
     * size at all: its tail is not read. */
    if (size > known + ZR_ABI_GROWTH)
        return zr_err(ZR_EINVAL, "%s: size %zu is not a size this library knows (set it to "
                      "sizeof(%s))", what, size, what);
    if (size < min)
        return zr_err(ZR_EINVAL, "%s: size %zu is too small (set it to sizeof(%s))", what, size,
                      what);
    for (size_t k = known; k < size; k++)
        if (((const unsigned char *)p)[k] != 0)
            return zr_err(ZR_EINVAL,
                          "%s: byte %zu of its %zu is set, past the %zu this library "
                          "knows (the caller's header is newer than the library)",
                          what, k, size, known);
    *n = ZR_MIN(size, known);
    return 0;
}

int zr_abi_read(void *dst, size_t known, const void *src, size_t min, const char *what)
{
    size_t n;
    int rc = zr_abi_check(src, known, min, what, &n);
    if (rc != 0)
        return rc;
    memcpy(dst, src, n);
    *(size_t *)dst = known;
    return 0;
}

int zr_create_opts_read(const zr_create_opts *opts, zr_create_opts *out)
{
    *out = (zr_create_opts)ZR_CREATE_OPTS_INIT;
    if (!opts)
        return 0;
    return zr_abi_read(out, sizeof *out, opts, ZR_ABI_MIN(zr_create_opts, codec), "zr_create_opts");
}

void zr_abi_write(void *dst, const void *src, size_t n)
{
    memcpy((unsigned char *)dst + sizeof(size_t), (const unsigned char *)src + sizeof(size_t),
           n - sizeof(size_t));
}

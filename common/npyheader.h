/*
 * npyheader.h: the NPY header as zr writes it into exported .npy files
 * and zrecordfs serves it in front of records under -o npy
 * (common/libzrcommon, never installed).
 */
#ifndef ZR_COMMON_NPYHEADER_H
#define ZR_COMMON_NPYHEADER_H

#include <stddef.h>
#include <stdint.h>

/* Every NPY file begins with these 6 bytes. */
#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* NumPy itself allows at most 64 dimensions. */
#define NPY_MAX_NDIM 64
/* The longest descr string kept; a longer one is no dtype loaderx stores. */
#define NPY_DESCR_MAX 32
/* magic (6) + version (2) + header length (2) of format version 1.0 */
#define NPY_PREAMBLE_V1 10
/* Enough room for any header npy_format_header makes. */
#define NPY_FORMAT_CAP 2048

/* Format the header of a C-order array of descr (NumPy's dtype.str) and
 * shape as NumPy writes it: version 1.0, the dict padded with spaces and
 * a newline so that the data starts at a multiple of 64 bytes. Writes at
 * most cap bytes to out; returns the header length, or 0 if cap is too
 * small or the arguments are invalid (descr of NPY_DESCR_MAX characters
 * or more, ndim above NPY_MAX_NDIM). Thread-safe. */
size_t npy_format_header(const char *descr, const uint64_t *shape, uint32_t ndim, uint8_t *out,
                         size_t cap);

#endif

/*
 * npy.h: reading the NumPy .npy header (format versions 1.0, 2.0 and
 * 3.0) for zr; writing one is common/npyheader.h's.
 */
#ifndef ZR_NPY_H
#define ZR_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/npyheader.h"

/* The largest header accepted. Headers of the plain arrays loaderx stores
 * are far below a kilobyte; the limit bounds what a hostile file can make
 * the reader allocate. */
#define NPY_HEADER_MAX (1u << 20)
/* magic (6) + version (2) + header length (4) of versions 2.0 and 3.0 */
#define NPY_PREAMBLE_V2 12

/* Results. NPY_EFORMAT: the bytes are not a well-formed NPY header;
 * NPY_EUNSUPPORTED: a well-formed header that zr refuses (Fortran order,
 * object or structured dtype, a dtype loaderx does not store); NPY_EIO:
 * reading the file failed. A message goes to the caller's buffer. */
#define NPY_OK 0
#define NPY_EFORMAT -1
#define NPY_EUNSUPPORTED -2
#define NPY_EIO -3

struct npy_header {
    int major, minor;          /* format version */
    char descr[NPY_DESCR_MAX]; /* the dtype as NumPy spells dtype.str */
    bool fortran_order;
    bool structured;           /* descr was a list of fields (descr is empty) */
    uint32_t ndim;
    uint64_t shape[NPY_MAX_NDIM];
    uint64_t data_offset;      /* bytes from the start of the file to the data */
};

/* Read the preamble of a file whose first len bytes are at buf: check the
 * magic and version and compute where the array data starts. Needs at
 * least NPY_PREAMBLE_V2 bytes (or the whole file if it is shorter). */
int npy_preamble(const uint8_t *buf, size_t len, struct npy_header *h, char *err, size_t errlen);

/* Parse a complete header: buf holds the first len bytes of the file,
 * len >= h->data_offset as npy_preamble computes it. Every byte is
 * treated as hostile: nothing outside buf[0..len) is read, every number is
 * checked for overflow. Fills *h; a structured descr sets h->structured
 * and is otherwise not interpreted. Returns NPY_OK or NPY_EFORMAT. */
int npy_parse(const uint8_t *buf, size_t len, struct npy_header *h, char *err, size_t errlen);

/* The policy of zr on a parsed header: C order, a plain dtype that
 * libloaderx stores. On success *itemsize and *nbytes (the array's data
 * size) are set. Returns NPY_OK or NPY_EUNSUPPORTED (with the reason) or
 * NPY_EFORMAT (sizes overflow). */
int npy_check_supported(const struct npy_header *h, uint64_t *itemsize, uint64_t *nbytes,
                        char *err, size_t errlen);

/* Read and parse the header of the open file fd of file_size bytes, apply
 * npy_check_supported and check the data is all present in the file. */
int npy_read_header(int fd, uint64_t file_size, struct npy_header *h, uint64_t *itemsize,
                    uint64_t *nbytes, char *err, size_t errlen);

#endif

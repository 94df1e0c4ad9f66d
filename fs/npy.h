/* npy.h: the NPY v1.0 header served in front of records under -o npy. */
#ifndef ZFS_NPY_H
#define ZFS_NPY_H

#include <stddef.h>
#include <stdint.h>

/* Room for the longest header: 32 dimensions of 20 digits each fit. */
#define ZFS_NPY_MAX 1024

/* Write the NPY v1.0 header (magic, version, length, dictionary, padding)
 * for an array of the given NumPy dtype spelling and C-order shape into
 * buf, which holds cap bytes. Returns the header length, a multiple of 64
 * as numpy.save writes it, or 0 when it does not fit. */
size_t zfs_npy_header(char *buf, size_t cap, const char *dtype, const uint64_t *shape,
                      uint32_t ndim);

#endif

/*
 * npy.c: the NPY format's header, so that under -o npy every record file is
 * a complete .npy file that numpy.load (or any NPY reader) opens as is.
 *
 * Version 1.0 of the format is a 6-byte magic string, the version bytes
 * 1 and 0, a little-endian u16 giving the length of what follows, and a
 * Python dict literal naming the dtype, the order and the shape, padded
 * with spaces and ended by a newline so that the data starts at a multiple
 * of 64 bytes (what numpy itself writes, and what keeps the payload
 * aligned for memory mapping). The dtype spelling stored in store.zr is
 * already NumPy's dtype.str, so it is used verbatim as 'descr'.
 */
#include <stdio.h>
#include <string.h>

#include "fs/npy.h"

size_t zfs_npy_header(char *buf, size_t cap, const char *dtype, const uint64_t *shape,
                      uint32_t ndim)
{
    char dict[ZFS_NPY_MAX];
    size_t len = 0;
    int w = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", dtype);
    if (w < 0 || (size_t)w >= sizeof dict)
        return 0;
    len = (size_t)w;
    for (uint32_t d = 0; d < ndim; d++) {
        /* A one-element tuple needs its trailing comma: (5,). */
        w = snprintf(dict + len, sizeof dict - len, d + 1 < ndim ? "%llu, " : ndim == 1 ? "%llu,"
                                                                                        : "%llu",
                     (unsigned long long)shape[d]);
        if (w < 0 || (size_t)w >= sizeof dict - len)
            return 0;
        len += (size_t)w;
    }
    w = snprintf(dict + len, sizeof dict - len, "), }");
    if (w < 0 || (size_t)w >= sizeof dict - len)
        return 0;
    len += (size_t)w;
    /* The preamble (10 bytes), the dict and the closing newline, rounded up
     * to 64 with spaces before the newline. */
    size_t total = (10 + len + 1 + 63) / 64 * 64;
    if (total > cap || total - 10 > 65535)
        return 0;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)((total - 10) & 0xff);
    buf[9] = (char)((total - 10) >> 8);
    memcpy(buf + 10, dict, len);
    memset(buf + 10 + len, ' ', total - 10 - len - 1);
    buf[total - 1] = '\n';
    return total;
}

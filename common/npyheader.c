/*
 * npyheader.c: writing the header of an NPY file, the one place that
 * knows how NumPy lays it out: zr export writes it before a store's
 * records, and zrecordfs -o npy serves it in front of each record so that
 * every record file is a complete .npy file.
 *
 * Version 1.0 of the format is the 6-byte magic string, the version bytes
 * 1 and 0, a little-endian u16 giving the length of what follows, and a
 * Python dict literal naming the dtype, the order and the shape, padded
 * with spaces and ended by a newline so that the data starts at a multiple
 * of 64 bytes: what numpy.save writes, and what keeps the data aligned for
 * memory mapping. The dtype spelling a store keeps is already NumPy's
 * dtype.str, so it is used verbatim as 'descr'. Reading a header back is
 * zr's alone (src/npy.c).
 */
#include <stdio.h>
#include <string.h>

#include "common/npyheader.h"

size_t npy_format_header(const char *descr, const uint64_t *shape, uint32_t ndim, uint8_t *out,
                         size_t cap)
{
    if (!descr || strlen(descr) >= NPY_DESCR_MAX || ndim > NPY_MAX_NDIM || (ndim && !shape))
        return 0;
    char dict[NPY_FORMAT_CAP];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr);
    for (uint32_t d = 0; d < ndim && n > 0 && (size_t)n < sizeof dict; d++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%llu", d ? ", " : "",
                      (unsigned long long)shape[d]);
    /* A one-element tuple needs its trailing comma: (5,). */
    if (n > 0 && (size_t)n < sizeof dict)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", ndim == 1 ? "," : "");
    if (n <= 0 || (size_t)n >= sizeof dict)
        return 0;
    /* The dict, its padding and the newline make the data start at a
     * multiple of 64 bytes, as NumPy aligns it. The dict is far below the
     * 64 KiB limit of version 1.0, which every NPY reader understands. */
    size_t pre = NPY_PREAMBLE_V1;
    size_t total = (pre + (size_t)n + 1 + 63) / 64 * 64;
    if (total > cap)
        return 0;
    size_t hlen = total - pre;
    memcpy(out, NPY_MAGIC, NPY_MAGIC_LEN);
    out[6] = 1;
    out[7] = 0;
    out[8] = (uint8_t)hlen;
    out[9] = (uint8_t)(hlen >> 8);
    memcpy(out + pre, dict, (size_t)n);
    memset(out + pre + (size_t)n, ' ', total - pre - (size_t)n - 1);
    out[total - 1] = '\n';
    return total;
}

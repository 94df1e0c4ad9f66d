/*
 * readfull.c: the one loop that reads a range of a file to its end, for
 * the readers of zr that take whole headers or records from files (NPY
 * headers, imported files, dictionaries). pread may return fewer bytes
 * than asked, or fail with EINTR when a signal arrives (zr catches SIGINT
 * to stop cleanly), and neither is the file's end; the callers only need
 * to tell the end, which is a truncated file, from an error.
 */
#include <errno.h>
#include <unistd.h>

#include "common/readfull.h"

int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    unsigned char *p = buf;
    while (len > 0) {
        ssize_t r = pread(fd, p, len, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            return 1;
        p += r;
        off += (uint64_t)r;
        len -= (size_t)r;
    }
    return 0;
}

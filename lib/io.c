/*
 * io.c: the table of file-system calls and the retry/short-I/O loops
 * around them. Nothing else in the library calls the system directly, so
 * fault-injection tests can swap an entry of zr_io and reach every path.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <limits.h>
#include <sys/uio.h>
#include <unistd.h>

#include "internal.h"
#include "io.h"

static int sys_openat(int dirfd, const char *path, int flags, mode_t mode)
{
    return openat(dirfd, path, flags | O_CLOEXEC, mode);
}

#define ZR_IO_SYSTEM                                                                 \
    {                                                                                \
        .openat = sys_openat, .close = close, .pread = pread, .pwrite = pwrite,      \
        .preadv = preadv, .pwritev = pwritev, .fstatat = fstatat,                                      \
        .fdatasync = fdatasync, .fsync = fsync, .ftruncate = ftruncate,              \
        .fstat = fstat, .mkdirat = mkdirat, .renameat = renameat,                    \
        .unlinkat = unlinkat, .flock = flock, .mmap = mmap, .munmap = munmap,        \
    }

const struct zr_io_ops zr_io_default = ZR_IO_SYSTEM;
struct zr_io_ops zr_io = ZR_IO_SYSTEM;

int zr_read_exact(int fd, void *buf, size_t n, uint64_t off, const char *what)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = zr_io.pread(fd, p, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return zr_err_sys(errno, "reading %s", what);
        }
        if (r == 0)
            return zr_err(ZR_ECORRUPT, "%s: unexpected end of file at byte %llu", what,
                          (unsigned long long)off);
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

int zr_write_all(int fd, const void *buf, size_t n, uint64_t off, const char *what)
{
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = zr_io.pwrite(fd, p, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return zr_err_sys(errno, "writing %s", what);
        }
        if (r == 0)
            return zr_err(ZR_EIO, "writing %s: no progress", what);
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

int zr_writev_all(int fd, struct iovec *iov, int iovcnt, uint64_t off, const char *what)
{
    while (iovcnt > 0) {
        ssize_t r = zr_io.pwritev(fd, iov, iovcnt > IOV_MAX ? IOV_MAX : iovcnt, (off_t)off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return zr_err_sys(errno, "writing %s", what);
        }
        if (r == 0)
            return zr_err(ZR_EIO, "writing %s: no progress", what);
        off += (uint64_t)r;
        while (iovcnt > 0 && (size_t)r >= iov->iov_len) {
            r -= (ssize_t)iov->iov_len;
            iov++;
            iovcnt--;
        }
        if (iovcnt > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + r;
            iov->iov_len -= (size_t)r;
        }
    }
    return 0;
}

int zr_file_size(int fd, uint64_t *size, const char *what)
{
    struct stat st;
    if (zr_io.fstat(fd, &st) != 0)
        return zr_err_sys(errno, "stat %s", what);
    *size = (uint64_t)st.st_size;
    return 0;
}

int zr_read_small_file(int dirfd, const char *name, size_t max, void **buf, size_t *len,
                       int missing_ok)
{
    *buf = NULL;
    *len = 0;
    int fd = zr_io.openat(dirfd, name, O_RDONLY, 0);
    if (fd < 0) {
        if (errno == ENOENT && missing_ok)
            return 0;
        if (errno == ENOENT)
            return zr_err(ZR_ENOTSTORE, "%s is missing", name);
        return zr_err_sys(errno, "opening %s", name);
    }
    uint64_t size;
    int rc = zr_file_size(fd, &size, name);
    void *data = NULL;
    if (rc == 0 && size > max)
        rc = zr_err(ZR_ECORRUPT, "%s is %llu bytes, more than the %zu allowed", name,
                    (unsigned long long)size, max);
    if (rc == 0) {
        data = zr_malloc(size ? size : 1);
        if (!data)
            rc = zr_err(ZR_ENOMEM, "reading %s", name);
    }
    if (rc == 0)
        rc = zr_read_exact(fd, data, size, 0, name);
    zr_io.close(fd);
    if (rc != 0) {
        zr_free(data);
        return rc;
    }
    *buf = data;
    *len = size;
    return 0;
}

int zr_write_file_atomic(int dirfd, const char *name, const void *buf, size_t len)
{
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    int fd = zr_io.openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return zr_err_sys(errno, "creating %s", tmp);
    int rc = zr_write_all(fd, buf, len, 0, tmp);
    if (rc == 0 && zr_io.fsync(fd) != 0)
        rc = zr_err_sys(errno, "syncing %s", tmp);
    if (zr_io.close(fd) != 0 && rc == 0)
        rc = zr_err_sys(errno, "closing %s", tmp);
    if (rc == 0 && zr_io.renameat(dirfd, tmp, dirfd, name) != 0)
        rc = zr_err_sys(errno, "renaming %s to %s", tmp, name);
    if (rc != 0)
        zr_io.unlinkat(dirfd, tmp, 0);
    return rc;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14; older C libraries lack the names */
#define MADV_POPULATE_WRITE 23
#endif

void zr_populate(const void *p, size_t n, bool write)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p / page * page;
    if (n >= 2 * page)
        madvise((void *)a, (uintptr_t)p + n - a, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
}

/* C libraries older than cachestat(2) lack its number. */
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif

int zr_cachestat(int fd, uint64_t off, uint64_t len, struct zr_cachestat *out)
{
    struct {
        uint64_t off, len;
    } range = {off, len};
    return syscall(SYS_cachestat, fd, &range, out, 0) == 0 ? 0 : -1;
}

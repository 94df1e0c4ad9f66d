/*
 * io.h: every file-system call of libloaderx goes through the table zr_io,
 * so that tests can make any call fail (EIO, ENOSPC, a short write) and
 * check that the store survives. The helpers below add the loops and the
 * error messages that the engine needs around the raw calls.
 */
#ifndef ZR_IO_H
#define ZR_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

struct zr_io_ops {
    int (*openat)(int dirfd, const char *path, int flags, mode_t mode);
    int (*close)(int fd);
    ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
    ssize_t (*preadv)(int fd, const struct iovec *iov, int iovcnt, off_t off);
    ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
    ssize_t (*pwritev)(int fd, const struct iovec *iov, int iovcnt, off_t off);
    int (*fdatasync)(int fd);
    int (*fsync)(int fd);
    int (*ftruncate)(int fd, off_t len);
    int (*fstat)(int fd, struct stat *st);
    int (*fstatat)(int dirfd, const char *path, struct stat *st, int flags);
    int (*mkdirat)(int dirfd, const char *path, mode_t mode);
    int (*renameat)(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
    int (*unlinkat)(int dirfd, const char *path, int flags);
    int (*flock)(int fd, int op);
    void *(*mmap)(void *addr, size_t len, int prot, int flags, int fd, off_t off);
    int (*munmap)(void *addr, size_t len);
};

/* The table in use; tests may replace entries and must restore them. */
extern struct zr_io_ops zr_io;
/* The real system calls, for restoring zr_io. */
extern const struct zr_io_ops zr_io_default;

/* Read exactly n bytes at off. A short read (end of file) gives
 * ZR_ECORRUPT naming what, other failures ZR_EIO. */
int zr_read_exact(int fd, void *buf, size_t n, uint64_t off, const char *what);

/* Write all n bytes at off, retrying on EINTR and short writes. */
int zr_write_all(int fd, const void *buf, size_t n, uint64_t off, const char *what);

/* Write the iovecs (total bytes) at off, retrying on EINTR and short
 * writes. iov is modified. */
int zr_writev_all(int fd, struct iovec *iov, int iovcnt, uint64_t off, const char *what);

/* The size of an open file. */
int zr_file_size(int fd, uint64_t *size, const char *what);

/* Read a whole small file (at most max bytes) into a malloc'd buffer.
 * A missing file gives ZR_ENOTSTORE unless missing_ok is set, in which
 * case *buf is NULL and 0 is returned. Too large a file is ZR_ECORRUPT. */
int zr_read_small_file(int dirfd, const char *name, size_t max, void **buf, size_t *len,
                       int missing_ok);

/* Write a small file durably under a temporary name, fsync it and rename
 * it into place (the directory is not synced here). */
int zr_write_file_atomic(int dirfd, const char *name, const void *buf, size_t len);

/* Fault the pages of [p, p + n) into this process's page tables, for
 * reading (write false) or writing, with madvise MADV_POPULATE_READ or
 * _WRITE; ranges under two pages are left alone. A kernel before 5.14
 * refuses the advice, which changes nothing. */
void zr_populate(const void *p, size_t n, bool write);

/* What cachestat(2) (Linux 6.5) says of pages [off, off + len) of the
 * open file fd (len 0: to the end): pages in the page cache, and of them
 * dirty and under write-back. Returns 0, or -1 with errno set (ENOSYS
 * where the kernel, or valgrind, does not know the call). */
struct zr_cachestat {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
int zr_cachestat(int fd, uint64_t off, uint64_t len, struct zr_cachestat *out);

#endif

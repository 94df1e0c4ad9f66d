/*
 * readfull.h: reading a whole range of a file, shared by zr's NPY reader
 * and its file helpers (common/libzrcommon, never installed).
 */
#ifndef ZR_COMMON_READFULL_H
#define ZR_COMMON_READFULL_H

#include <stddef.h>
#include <stdint.h>

/* Read len bytes at offset off of fd into buf, going on after a short or
 * interrupted read. Returns 0, 1 when the file ends first, or -1 when
 * pread fails (errno says why). Thread-safe: the file offset of fd is
 * not used. */
int pread_full(int fd, void *buf, size_t len, uint64_t off);

#endif

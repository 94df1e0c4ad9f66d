/*
 * cached.c: whether records are in the page cache, for a reader that
 * chooses between copying from the mappings and reading with read(2)
 * before it reads (zrecordfs serves a record file from the mapping when
 * its bytes are cached, and reads it when they are not: a page fault on a
 * mapping reads up to read_ahead_kb around the missing page, where a
 * read of a random range reads only its pages).
 *
 * The gathers make this choice themselves, per handle (doc/cold-reads.md);
 * this answers it for given records, at a system call per record: cheap
 * next to a FUSE request, too dear for every record of a gather.
 *
 * zr_prefetch is the other half for a reader of single records: one that
 * reads records in index order (cp -r of a zrecordfs folder) has the disk
 * read the next ones while it handles this one, in requests as large as
 * the records lie together in their chunk files.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "engine.h"

/* cachestat(2), Linux 6.5; C libraries older than the call lack it. */
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif
struct cs_range {
    uint64_t off, len;
};
struct cs_stat {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* Pages mincore checks per call where cachestat is missing. */
#define MINCORE_PAGES 64

/* 1 when every page of bytes [off, off + len) of chunk f is cached, 0 when
 * one is not, -1 when the kernel cannot tell. */
static int range_cached(const struct zr_file *f, uint64_t off, uint64_t len)
{
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t a = off / page * page, b = (off + len + page - 1) / page * page;
    struct cs_range r = {a, b - a};
    struct cs_stat cs;
    if (syscall(SYS_cachestat, f->fd, &r, &cs, 0) == 0)
        return cs.nr_cache >= (b - a) / page;
    if (errno != ENOSYS || !f->map)
        return -1;
    /* Before Linux 6.5: ask the mapping, which for a file reports the page
     * cache (to the file's owner, or with CAP_SYS_ADMIN). */
    unsigned char vec[MINCORE_PAGES];
    for (uint64_t p = a; p < b; p += MINCORE_PAGES * page) {
        uint64_t n = (b - p) / page < MINCORE_PAGES ? (b - p) / page : MINCORE_PAGES;
        if (mincore((void *)(f->map + p), n * page, vec) != 0)
            return -1;
        for (uint64_t k = 0; k < n; k++)
            if (!(vec[k] & 1))
                return 0;
    }
    return 1;
}

ZR_API int zr_records_cached(zr_store *s, const uint64_t *idx, size_t n)
{
    if (!s || (!idx && n > 0))
        return zr_err(ZR_EINVAL, "zr_records_cached: NULL argument");
    uint64_t len;
    int rc = zr_check_indices(s, idx, n, &len);
    if (rc != 0)
        return rc;
    for (size_t k = 0; k < n; k++) {
        struct zr_loc l;
        if (zr_loc_get(s, idx[k], &l) != 0)
            return zr_loc_error(s, idx[k], "entry is out of bounds or inconsistent");
        int c = range_cached(zr_ftable_at(&s->chunks, l.chunk_id), l.offset, l.phys_length);
        if (c < 0)
            return zr_err_sys(errno, "%s: cachestat of record %llu", s->path,
                              (unsigned long long)idx[k]);
        if (c == 0)
            return 0;
    }
    return 1;
}

/* Adjacent records of one chunk file are asked for in one call, up to
 * this many bytes a call. */
#define PREFETCH_RUN ((uint64_t)8 << 20)

ZR_API int zr_prefetch(zr_store *s, uint64_t first, uint64_t max_records, uint64_t max_bytes,
                       uint64_t *records)
{
    if (!s || !records)
        return zr_err(ZR_EINVAL, "zr_prefetch: NULL argument");
    *records = 0;
    uint64_t len;
    int rc = zr_check_indices(s, NULL, 0, &len);
    if (rc != 0)
        return rc;
    uint64_t end = first < len ? (len - first < max_records ? len : first + max_records) : first;
    uint64_t bytes = 0, k = first;
    int run_fd = -1;
    uint64_t run_off = 0, run_len = 0;
    for (; k < end && bytes < max_bytes; k++) {
        struct zr_loc l;
        if (zr_loc_get(s, k, &l) != 0)
            return zr_loc_error(s, k, "entry is out of bounds or inconsistent");
        int fd = zr_ftable_at(&s->chunks, l.chunk_id)->fd;
        if (fd != run_fd || l.offset != run_off + run_len || run_len >= PREFETCH_RUN) {
            if (run_fd >= 0)
                (void)posix_fadvise(run_fd, (off_t)run_off, (off_t)run_len, POSIX_FADV_WILLNEED);
            run_fd = fd;
            run_off = l.offset;
            run_len = 0;
        }
        run_len += l.phys_length;
        bytes += l.phys_length;
    }
    if (run_fd >= 0)
        (void)posix_fadvise(run_fd, (off_t)run_off, (off_t)run_len, POSIX_FADV_WILLNEED);
    *records = k - first;
    return 0;
}

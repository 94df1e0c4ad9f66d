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
#include <unistd.h>

#include "engine.h"
#include "io.h"

/* Pages mincore checks per call where cachestat is missing. */
#define MINCORE_PAGES 64

/* Where record i lies: from the layout when it is known (no read of the
 * record table), else from its checked entry, read from the mapping when
 * the handle reads from memory and with a read of its own when not (a
 * fault on a mapping of a table not in memory reads megabytes around the
 * entry). */
static int record_loc(zr_store *s, uint64_t i, struct zr_loc *l)
{
    if (i < atomic_load_explicit(&s->laid_out, memory_order_acquire)) {
        zr_layout_loc(s, i, l);
        return 0;
    }
    return zr_batch_locs(s, &i, 1, l, atomic_load(&s->read_mode) != ZR_READ_MAPPED);
}

/* Where record i lies, without reading the disk: 1 with *l filled (from
 * the layout, or from its entry when the entry's page is cached), 0 when
 * the entry is not cached, or a negative code. A reader asking whether a
 * record is cached wants the answer at once, and a record whose entry
 * must come from the disk is not in memory either. Where the kernel
 * cannot tell (no cachestat), the entry is read as a gather reads it. */
static int cached_loc(zr_store *s, uint64_t i, struct zr_loc *l)
{
    if (i < atomic_load_explicit(&s->laid_out, memory_order_acquire)) {
        zr_layout_loc(s, i, l);
        return 1;
    }
    uint32_t g;
    uint64_t off;
    int rc = zr_loc_place(s, i, &g, &off);
    if (rc != 0)
        return rc;
    int fd;
    rc = zr_file_fd(s, &s->segs, g, ZR_FD_READ, &fd);
    if (rc != 0)
        return rc;
    /* An entry never straddles a page: 16 divides the page size. */
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    struct zr_cachestat cs;
    int got = zr_cachestat(fd, off / page * page, page, &cs);
    int err = errno;
    uint8_t raw[ZR_LOC_SIZE];
    ssize_t n = -1;
    if (got == 0 && cs.nr_cache > 0)
        n = zr_io.pread(fd, raw, sizeof raw, (off_t)off);
    zr_file_put(s, &s->segs, g);
    if (got != 0 && err == ENOSYS) {
        rc = zr_batch_locs(s, &i, 1, l, atomic_load(&s->read_mode) != ZR_READ_MAPPED);
        return rc == 0 ? 1 : rc;
    }
    if (got != 0)
        return zr_err_sys(err, "%s: cachestat of the entry of record %llu", s->path,
                          (unsigned long long)i);
    /* Not cached, or cut short since it was checked (which the reader's
     * own read reports). */
    if (n != ZR_LOC_SIZE)
        return 0;
    zr_loc_decode(raw, l);
    if (!zr_loc_fits(s, l, atomic_load_explicit(&s->chunks.count, memory_order_acquire)))
        return zr_loc_error(s, i, "entry is out of bounds or inconsistent");
    return 1;
}

int zr_range_cached(zr_store *s, uint32_t chunk, uint64_t off, uint64_t len)
{
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t a = off / page * page, b = (off + len + page - 1) / page * page;
    struct zr_cachestat cs;
    int fd;
    int rc = zr_file_fd(s, &s->chunks, chunk, ZR_FD_READ, &fd);
    if (rc != 0)
        return rc;
    int got = zr_cachestat(fd, a, b - a, &cs);
    int err = errno;
    zr_file_put(s, &s->chunks, chunk);
    if (got == 0)
        return cs.nr_cache >= (b - a) / page;
    errno = err;
    if (err != ENOSYS)
        return -1;
    /* Before Linux 6.5: ask the mapping, which for a file reports the page
     * cache (to the file's owner, or with CAP_SYS_ADMIN). */
    unsigned rs = zr_read_enter(s);
    const uint8_t *map = zr_file_map(s, &s->chunks, chunk);
    int answer = map ? 1 : zr_last_error_code();
    unsigned char vec[MINCORE_PAGES];
    for (uint64_t p = a; map && answer == 1 && p < b; p += MINCORE_PAGES * page) {
        uint64_t n = (b - p) / page < MINCORE_PAGES ? (b - p) / page : MINCORE_PAGES;
        if (mincore((void *)(map + p), n * page, vec) != 0)
            answer = -1;
        for (uint64_t k = 0; answer == 1 && k < n; k++)
            if (!(vec[k] & 1))
                answer = 0;
    }
    zr_read_leave(s, rs);
    return answer;
}

static int records_cached_in(zr_store *s, const uint64_t *idx, size_t n)
{
    if (!s || (!idx && n > 0))
        return zr_err(ZR_EINVAL, "zr_records_cached: NULL argument");
    uint64_t len;
    int rc = zr_check_indices(s, idx, n, &len);
    if (rc != 0 || s->remote)
        return rc; /* a remote store is never in this machine's page cache */
    for (size_t k = 0; k < n; k++) {
        struct zr_loc l;
        rc = cached_loc(s, idx[k], &l);
        if (rc <= 0)
            return rc;
        int c = zr_range_cached(s, l.chunk_id, l.offset, l.phys_length);
        if (c < -1)
            return c;
        if (c < 0)
            return zr_err_sys(errno, "%s: cachestat of record %llu", s->path,
                              (unsigned long long)idx[k]);
        if (c == 0)
            return 0;
    }
    return 1;
}

ZR_API int zr_records_cached(zr_store *s, const uint64_t *idx, size_t n)
{
    int rc = zr_store_enter(s, "zr_records_cached");
    return rc != 0 ? rc : zr_store_leave_rc(s, records_cached_in(s, idx, n));
}

/* Adjacent records of one chunk file are asked for in one call, up to
 * this many bytes a call. */
#define PREFETCH_RUN ((uint64_t)8 << 20)

/* Ask for bytes [off, off + len) of chunk file `chunk`. */
static void advise_run(zr_store *s, uint32_t chunk, uint64_t off, uint64_t len)
{
    int fd;
    if (zr_file_fd(s, &s->chunks, chunk, ZR_FD_READ, &fd) != 0)
        return; /* advice only */
    (void)posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_WILLNEED);
    zr_file_put(s, &s->chunks, chunk);
}

static int prefetch_in(zr_store *s, uint64_t first, uint64_t max_records, uint64_t max_bytes,
                       uint64_t *records)
{
    if (!s || !records)
        return zr_err(ZR_EINVAL, "zr_prefetch: NULL argument");
    *records = 0;
    uint64_t len;
    int rc = zr_check_indices(s, NULL, 0, &len);
    if (rc != 0 || s->remote)
        return rc; /* no page cache to fill for a remote store */
    uint64_t end = first < len ? (len - first < max_records ? len : first + max_records) : first;
    uint64_t bytes = 0, k = first;
    uint32_t run_chunk = UINT32_MAX;
    uint64_t run_off = 0, run_len = 0;
    for (; k < end && bytes < max_bytes; k++) {
        struct zr_loc l;
        rc = record_loc(s, k, &l);
        if (rc != 0)
            return rc;
        if (l.chunk_id != run_chunk || l.offset != run_off + run_len || run_len >= PREFETCH_RUN) {
            if (run_chunk != UINT32_MAX)
                advise_run(s, run_chunk, run_off, run_len);
            run_chunk = l.chunk_id;
            run_off = l.offset;
            run_len = 0;
        }
        run_len += l.phys_length;
        bytes += l.phys_length;
    }
    if (run_chunk != UINT32_MAX)
        advise_run(s, run_chunk, run_off, run_len);
    *records = k - first;
    return 0;
}

ZR_API int zr_prefetch(zr_store *s, uint64_t first, uint64_t max_records, uint64_t max_bytes,
                       uint64_t *records)
{
    int rc = zr_store_enter(s, "zr_prefetch");
    return rc != 0 ? rc : zr_store_leave_rc(s, prefetch_in(s, first, max_records, max_bytes, records));
}

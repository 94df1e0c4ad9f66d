/*
 * open.c: opening a store, and what opening checks and repairs: the
 * header, the dictionary, the chunk files and loc segments against the
 * header, the lost tail a power cut can leave, and a delete or compaction
 * a crash interrupted (finished through the intent, lib/intent.c).
 *
 * Rules enforced here (numbered as in doc/format.md):
 *  R3. Chunks 0..tail_chunk exist; the loc segments cover entries
 *      0..length-1. A store that breaks either does not open.
 *  R4. A zstd_dict store has a non-empty dict.zr that zstd accepts; any
 *      other store has none.
 *  R15. Records a header counts past the end of the files are appends a
 *      power cut lost: a writer opens with the longest prefix the files
 *      hold and makes that durable; a reader refuses them on read.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "codec.h"
#include "engine.h"
#include "intent.h"
#include "io.h"
#include "s3.h"

int zr_dict_load(zr_store *s, void *buf, size_t len)
{
    if (s->codec != ZR_CODEC_ZSTD_DICT) {
        zr_free(buf);
        if (buf)
            return zr_err(ZR_ECORRUPT, "%s: dict.zr present in a %s store", s->path,
                          zr_codec_name(s->codec));
        return 0;
    }
    if (!buf)
        return zr_err(ZR_ECORRUPT, "%s: dict.zr is missing from a zstd_dict store", s->path);
    if (len == 0) {
        zr_free(buf);
        return zr_err(ZR_ECORRUPT, "%s: dict.zr is empty", s->path);
    }
    s->dict = buf;
    s->dict_len = len;
    s->ddict = ZSTD_createDDict_byReference(s->dict, s->dict_len);
    if (!s->ddict)
        return zr_err(ZR_ECORRUPT, "%s: dict.zr is not a usable zstd dictionary", s->path);
    return 0;
}

static int load_dict(zr_store *s)
{
    void *buf;
    size_t len;
    int rc = zr_read_small_file(s->dirfd, ZR_DICT_FILE, ZR_DICT_MAX, &buf, &len, 1);
    return rc != 0 ? rc : zr_dict_load(s, buf, len);
}

/* Whether file id of a table is in the store folder. */
static bool file_exists(const zr_store *s, const struct zr_ftable *t, uint32_t id)
{
    char name[32];
    struct stat st;
    snprintf(name, sizeof name, "%u.%s", id, t->suffix);
    return zr_io.fstatat(s->dirfd, name, &st, 0) == 0;
}

/* Open the chunk files 0..tail_chunk and the loc segments that cover the
 * header's length, as far as they exist. *covered receives how many
 * entries from 0 on the segments hold. A missing file other than
 * 0.chunk and 0.loc ends its table; whether that is allowed is decided by
 * the caller (R15). */
static int open_files(zr_store *s, uint64_t *covered)
{
    int rc;
    uint64_t per_seg = (uint64_t)1 << s->seg_shift;
    for (uint32_t c = 0; c <= s->hdr.tail_chunk; c++) {
        if (c > 0 && !file_exists(s, &s->chunks, c))
            break;
        if ((rc = zr_ftable_add(s, &s->chunks, c, false)) != 0)
            return rc;
    }
    uint64_t nseg = (s->hdr.length + per_seg - 1) >> s->seg_shift;
    /* A writer always has segment 0 open, even for an empty store. */
    if (s->writable && nseg == 0)
        nseg = 1;
    *covered = 0;
    for (uint64_t g = 0; g < nseg; g++) {
        if (g > 0 && !file_exists(s, &s->segs, (uint32_t)g))
            break;
        if ((rc = zr_ftable_add(s, &s->segs, (uint32_t)g, s->writable && g == 0)) != 0)
            return rc;
        uint64_t have = atomic_load(&zr_ftable_at(&s->segs, (uint32_t)g)->size) / ZR_LOC_SIZE;
        *covered = g * per_seg + ZR_MIN(have, per_seg);
        if (have < per_seg)
            break;
    }
    return 0;
}

/* Whether a file N.suffix with first <= N <= last is in the store folder.
 * The folder is listed once: a damaged header can name a range of up to
 * 2^20 files. */
static int any_file_in(const zr_store *s, const char *suffix, uint64_t first, uint64_t last,
                       bool *found)
{
    *found = false;
    if (first > last)
        return 0;
    int fd = zr_io.openat(s->dirfd, ".", O_RDONLY | O_DIRECTORY, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        int e = errno;
        if (fd >= 0)
            zr_io.close(fd);
        return zr_err_sys(e, "listing %s", s->path);
    }
    struct dirent *e;
    while (!*found && (e = readdir(d)) != NULL) {
        char *end;
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        unsigned long long id = strtoull(e->d_name, &end, 10);
        *found = *end == '.' && strcmp(end + 1, suffix) == 0 && id >= first && id <= last;
    }
    closedir(d);
    return 0;
}

/* R15. A power cut can leave the header of an append that was never
 * synced on disk without its table entries or record bytes: the files
 * then end before records the header counts. Those records are the lost
 * tail of the appends since the last sync (everything a completed sync
 * covers is on disk, and unsynced appends are laid out in index order).
 * A writer opens the store without them: the length becomes the largest
 * n for which record n-1 is held by the segments and lies inside the
 * chunk files, the frontier moves back to the end of the last chunk file
 * present, and that header is made durable before anything else, so that
 * later appends, which fill the gap the lost records leave, can never
 * bring their entries back. A reader changes nothing: it counts the
 * records the header counts that have an entry, and those whose bytes are
 * missing fail their reads with ZR_ECORRUPT (R5) and are listed by
 * zr_verify. Files that end
 * early in any other way (no record lost, or a missing file with a later
 * one present) are damage and refuse to open, as before. */
/* The length of the longest prefix of records 0..covered-1 whose
 * entries are sound and name bytes inside the chunk files (R15). The
 * segments are read in blocks through their descriptors (nothing is
 * mapped yet). Records are not laid out in index order inside a batch
 * (compressed groups take offsets as they finish), so the scan starts
 * at record 0. */
static int longest_prefix(zr_store *s, uint64_t covered, uint64_t *out)
{
    enum { BLOCK = 4096 };
    uint8_t *buf = zr_malloc(BLOCK * ZR_LOC_SIZE);
    if (!buf)
        return zr_err(ZR_ENOMEM, "reading the record table of %s", s->path);
    uint32_t nchunks = atomic_load(&s->chunks.count);
    uint64_t per_seg = (uint64_t)1 << s->seg_shift;
    uint64_t i = 0;
    int rc = 0;
    *out = covered;
    while (rc == 0 && i < covered) {
        uint32_t g = (uint32_t)(i >> s->seg_shift);
        uint64_t in_seg = i & (per_seg - 1);
        uint64_t run = ZR_MIN(ZR_MIN((uint64_t)BLOCK, covered - i), per_seg - in_seg);
        char name[32];
        snprintf(name, sizeof name, "%u.loc", g);
        int fd;
        if ((rc = zr_file_fd(s, &s->segs, g, ZR_FD_READ, &fd)) != 0)
            break;
        rc = zr_read_exact(fd, buf, run * ZR_LOC_SIZE, in_seg * ZR_LOC_SIZE, name);
        zr_file_put(s, &s->segs, g);
        for (uint64_t k = 0; rc == 0 && k < run; k++) {
            struct zr_loc l;
            zr_loc_decode(buf + k * ZR_LOC_SIZE, &l);
            if (!zr_loc_fits(s, &l, nchunks)) {
                *out = i + k;
                i = covered;
                break;
            }
        }
        i += run;
    }
    zr_free(buf);
    return rc;
}

bool zr_lost_empty_tail(const zr_store *s)
{
    uint32_t nchunks = atomic_load(&s->chunks.count);
    return nchunks > 0 && nchunks == s->hdr.tail_chunk && s->hdr.tail_offset == 0 &&
           atomic_load(&zr_ftable_at(&s->chunks, nchunks - 1)->size) == s->chunk_cap;
}

/* Create the empty tail chunk a full chunk hands the frontier to, when a
 * power cut took it (R7, R15), and make its name durable. */
static int recreate_tail(zr_store *s)
{
    int rc = zr_ftable_add(s, &s->chunks, s->hdr.tail_chunk, true);
    if (rc == 0 && zr_io.fsync(s->dirfd) != 0)
        rc = zr_err_sys(errno, "syncing folder %s", s->path);
    s->dir_dirty = false;
    return rc;
}

static int cut_lost_tail(zr_store *s, uint64_t covered)
{
    uint32_t nchunks = atomic_load(&s->chunks.count);
    uint64_t n = s->hdr.length;
    /* Only a store whose files end before the header says can have lost
     * records; any other store opens without a scan. */
    if (nchunks <= s->hdr.tail_chunk || covered < s->hdr.length ||
        atomic_load(&zr_ftable_at(&s->chunks, s->hdr.tail_chunk)->size) < s->hdr.tail_offset) {
        int rc = longest_prefix(s, ZR_MIN(s->hdr.length, covered), &n);
        if (rc != 0)
            return rc;
    }
    if (n == s->hdr.length) {
        /* Nothing lost: the files must match the header exactly (R3),
         * except that the empty chunk a full one hands the frontier to
         * (R7) may have been lost with the folder's last sync. */
        if (zr_lost_empty_tail(s))
            return s->writable ? recreate_tail(s) : 0;
        if (nchunks <= s->hdr.tail_chunk)
            return zr_err(ZR_ECORRUPT, "%s/%u.chunk is missing", s->path, nchunks);
        struct zr_file *tail = zr_ftable_at(&s->chunks, s->hdr.tail_chunk);
        if (s->writable && atomic_load(&tail->size) < s->hdr.tail_offset)
            return zr_err(ZR_ECORRUPT, "%s/%u.chunk is shorter than the header's frontier %u",
                          s->path, s->hdr.tail_chunk, s->hdr.tail_offset);
        return 0;
    }
    /* Records were lost; the files that end early must be the last ones. */
    bool later;
    int rc = any_file_in(s, "chunk", (uint64_t)nchunks + 1, s->hdr.tail_chunk, &later);
    if (rc != 0)
        return rc;
    if (later)
        return zr_err(ZR_ECORRUPT, "%s/%u.chunk is missing", s->path, nchunks);
    uint64_t last_seg = (s->hdr.length - 1) >> s->seg_shift;
    if (covered < s->hdr.length &&
        (rc = any_file_in(s, "loc", (covered >> s->seg_shift) + 1, last_seg, &later)) != 0)
        return rc;
    if (covered < s->hdr.length && later)
        return zr_err(ZR_ECORRUPT, "%s/%llu.loc is missing or short", s->path,
                      (unsigned long long)(covered >> s->seg_shift));
    struct zr_file *last = zr_ftable_at(&s->chunks, nchunks - 1);
    uint64_t end = atomic_load(&last->size);
    if (nchunks - 1 == s->hdr.tail_chunk)
        end = ZR_MIN(end, s->hdr.tail_offset);
    if (!s->writable) {
        /* A record without an entry cannot be read at all: a reader counts
         * only those the segments hold. */
        s->hdr.length = ZR_MIN(s->hdr.length, covered);
        return 0;
    }
    uint32_t tail = nchunks - 1;
    if ((rc = zr_frontier_settle(s, &tail, &end)) != 0)
        return rc;
    if (s->dir_dirty && zr_io.fsync(s->dirfd) != 0)
        return zr_err_sys(errno, "syncing folder %s", s->path);
    s->dir_dirty = false;
    s->hdr.length = n;
    s->hdr.tail_chunk = tail;
    s->hdr.tail_offset = (uint32_t)end;
    uint8_t raw[ZR_HEADER_SIZE];
    zr_header_encode(&s->hdr, raw);
    rc = zr_write_all(s->metafd, raw, sizeof raw, 0, "meta.zr");
    if (rc == 0 && zr_io.fdatasync(s->metafd) != 0)
        rc = zr_err_sys(errno, "syncing %s/meta.zr", s->path);
    return rc;
}

/* Open the store's files and check them against the header (R3, R4, R15). */
int zr_load_tables(zr_store *s)
{
    uint8_t raw[ZR_HEADER_SIZE];
    uint64_t size;
    int rc = zr_file_size(s->metafd, &size, "meta.zr");
    if (rc != 0)
        return rc;
    if (size != ZR_HEADER_SIZE)
        return zr_err(ZR_ECORRUPT, "%s/meta.zr is %llu bytes, not %d", s->path,
                      (unsigned long long)size, ZR_HEADER_SIZE);
    if ((rc = zr_read_exact(s->metafd, raw, sizeof raw, 0, "meta.zr")) != 0)
        return rc;
    if ((rc = zr_header_load(s, raw)) != 0 || (rc = load_dict(s)) != 0)
        return rc;
    uint64_t covered;
    if ((rc = open_files(s, &covered)) != 0)
        return rc;
    if ((rc = cut_lost_tail(s, covered)) != 0)
        return rc;
    return zr_tables_settle(s);
}

int zr_header_load(zr_store *s, const uint8_t raw[ZR_HEADER_SIZE])
{
    int rc = zr_header_decode(raw, &s->hdr);
    if (rc != 0)
        return rc;
    s->codec = s->hdr.codec;
    if (s->hdr.tail_offset > s->chunk_cap)
        return zr_err(ZR_ECORRUPT, "%s/meta.zr: tail offset %u exceeds the chunk capacity",
                      s->path, s->hdr.tail_offset);
    if ((uint64_t)s->hdr.tail_chunk >= ZR_MAX_FILES)
        return zr_err(ZR_ECORRUPT, "%s/meta.zr: tail chunk %u is out of range", s->path,
                      s->hdr.tail_chunk);
    uint64_t per_seg = (uint64_t)1 << s->seg_shift;
    if (s->hdr.length > ZR_MAX_FILES * per_seg)
        return zr_err(ZR_ECORRUPT, "%s/meta.zr: length %llu is out of range", s->path,
                      (unsigned long long)s->hdr.length);
    return 0;
}

int zr_tables_settle(zr_store *s)
{
    /* A full tail chunk behind a frontier of 0 is what versions that
     * stored a chunk's end as offset 0 left (R7): its records are live,
     * so a writer appends from the next chunk. A store whose tail chunk
     * is full of garbage only loses that space until a compaction. */
    if (s->hdr.tail_offset == 0 && s->hdr.tail_chunk < atomic_load(&s->chunks.count) &&
        atomic_load(&zr_ftable_at(&s->chunks, s->hdr.tail_chunk)->size) == s->chunk_cap) {
        uint64_t end = s->chunk_cap;
        /* A reader sees the state of a lost empty tail chunk (R7). */
        if (!s->writable && (uint64_t)s->hdr.tail_chunk + 1 < ZR_MAX_FILES)
            s->hdr.tail_chunk++;
        else if (s->writable) {
            int rc = zr_frontier_settle(s, &s->hdr.tail_chunk, &end);
            if (rc != 0)
                return rc;
        }
    }
    /* A reader of a store that lost records may have fewer chunk files
     * open than the header names (R15); a writer has them all. */
    uint32_t nchunks = atomic_load(&s->chunks.count);
    for (uint32_t c = 0; c < nchunks; c++) {
        struct zr_file *f = zr_ftable_at(&s->chunks, c);
        f->wend = c == s->hdr.tail_chunk ? s->hdr.tail_offset : atomic_load(&f->size);
    }
    s->fr_chunk = s->hdr.tail_chunk;
    s->fr_offset = s->hdr.tail_offset;
    s->sync_chunk_lo = s->hdr.tail_chunk;
    s->sync_seg_lo = (uint32_t)(s->hdr.length >> s->seg_shift);
    /* The files past the frontier may hold appends an earlier handle
     * never synced: the first sync of this one covers them too. */
    for (uint32_t c = s->sync_chunk_lo; s->writable && c < nchunks; c++)
        atomic_fetch_or(&zr_ftable_at(&s->chunks, c)->state, ZR_DIRTY);
    uint32_t nsegs = atomic_load(&s->segs.count);
    for (uint32_t g = s->sync_seg_lo; s->writable && g < nsegs; g++)
        atomic_fetch_or(&zr_ftable_at(&s->segs, g)->state, ZR_DIRTY);
    atomic_store_explicit(&s->length, s->hdr.length, memory_order_release);
    return 0;
}

/* A read-only opener that finds a pending intent (a writer died in the
 * middle of a delete or compact) finishes it under an exclusive lock, then
 * goes back to a shared one. Other openers in the same situation wait for
 * it briefly; a live writer cannot be holding the store, or the shared
 * lock would not have been granted. */
static int recover_shared(zr_store *s)
{
    for (int attempt = 0; attempt < 2000; attempt++) {
        int pending, applied;
        int rc = zr_intent_pending(s, &pending);
        if (rc != 0 || !pending)
            return rc;
        if (zr_io.flock(s->metafd, LOCK_EX | LOCK_NB) == 0) {
            rc = zr_intent_recover(s, &applied);
            if (zr_io.flock(s->metafd, LOCK_SH) != 0 && rc == 0)
                rc = zr_err_sys(errno, "locking %s/meta.zr", s->path);
            if (rc != 0)
                return zr_err(rc, "%s needs an interrupted delete or compact finished and "
                              "it could not be: %s", s->path, zr_last_error());
            return 0;
        }
        /* The failed conversion may have dropped the shared lock. */
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
        if (zr_io.flock(s->metafd, LOCK_SH | LOCK_NB) != 0 && errno != EWOULDBLOCK)
            return zr_err_sys(errno, "locking %s/meta.zr", s->path);
    }
    return zr_err(ZR_EBUSY, "%s: another process is finishing an interrupted operation", s->path);
}

int zr_recover(zr_store *s)
{
    if (!s->writable)
        return recover_shared(s);
    int applied;
    return zr_intent_recover(s, &applied);
}

ZR_API int zr_open(zr_store **out, const char *path, int mode)
{
    int access = mode & ~ZR_NOMAP;
    if (out)
        *out = NULL;
    if (!out || !path || (access != ZR_RDONLY && access != ZR_RDWR))
        return zr_err(ZR_EINVAL, "zr_open: bad arguments");
    if (!path[0])
        return zr_err(ZR_EINVAL, "zr_open: the store path is empty");
    zr_store *s = zr_store_alloc(path, access == ZR_RDWR);
    if (!s)
        return zr_err(ZR_ENOMEM, "opening %s", path);
    s->nomap = (mode & ZR_NOMAP) != 0;
    int rc;
    if (zr_s3_is_url(path)) {
        if ((rc = zr_remote_open(s)) != 0)
            goto fail;
        *out = s;
        return 0;
    }
    rc = zr_open_dir(s, path);
    if (rc != 0)
        goto fail;
    s->metafd = zr_io.openat(s->dirfd, ZR_META_FILE, s->writable ? O_RDWR : O_RDONLY, 0);
    if (s->metafd < 0) {
        int e = errno;
        struct stat st;
        if (e == ENOENT && zr_io.fstatat(s->dirfd, ZR_STORE_FILE, &st, 0) != 0)
            rc = zr_err(ZR_ENOTSTORE, "%s holds no store", path);
        else if (e == ENOENT)
            rc = zr_err(ZR_ECORRUPT, "%s/meta.zr is missing", path);
        else
            rc = zr_err_sys(e, "opening %s/meta.zr", path);
        goto fail;
    }
    if ((rc = zr_take_lock(s)) != 0)
        goto fail;
    void *idbuf;
    size_t idlen;
    rc = zr_read_small_file(s->dirfd, ZR_STORE_FILE, ZR_IDENTITY_MAX, &idbuf, &idlen, 0);
    if (rc == ZR_ENOTSTORE)
        rc = zr_err(ZR_ENOTSTORE, "%s has no store.zr (not a store, or its creation never finished)",
                    path);
    if (rc != 0)
        goto fail;
    rc = zr_identity_decode(idbuf, idlen, &s->id);
    zr_free(idbuf);
    if (rc != 0)
        goto fail;
    zr_set_width(s);
    if ((rc = zr_recover(s)) != 0)
        goto fail;
    if ((rc = zr_load_tables(s)) != 0)
        goto fail;
    *out = s;
    return 0;
fail:
    zr_close(s);
    return rc;
}

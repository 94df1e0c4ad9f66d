/*
 * intent.c: the redo record that makes delete and compact atomic.
 *
 * Both operations overwrite live state in place (table entries, record
 * bytes during compaction, the header). Before any of that, the final
 * values are written to intent.zr with a checksum and synced; only then
 * are they applied in place, synced, and the intent cleared (truncated to
 * zero bytes, synced). A crash therefore leaves either an incomplete
 * intent, whose checksum fails and which is discarded because nothing was
 * changed in place yet (the state before), or a complete one, which the
 * next open applies again from the start (the state after). Applying is
 * idempotent: it writes fixed values to fixed places.
 *
 * Layout, little-endian (doc/format.md, "intent.zr"):
 *   0  8  magic "ZRINTENT"
 *   8  4  kind (1 delete, 2 compact)
 *  12  4  entry count n
 *  16 32  the header to commit
 *  48  8  data length d
 *  56 24n entries: index u64, then the 16-byte table entry to set
 *  .. d   compact: the stored bytes of each entry's record, in entry order
 *  .. 8   checksum of every byte before it
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "intent.h"
#include "io.h"

#define MAGIC "ZRINTENT"
#define HEAD_SIZE 56
#define ENTRY_SIZE 24

uint64_t zr_hash64(const void *p, uint64_t n, uint64_t seed)
{
    const uint64_t k1 = 0x9E3779B185EBCA87ull, k2 = 0xC2B2AE3D27D4EB4Full;
    const uint8_t *b = p;
    uint64_t h = seed ^ (n * k1);
    while (n >= 8) {
        uint64_t w = zr_load64(b);
        h ^= w * k2;
        h = (h << 31 | h >> 33) * k1;
        b += 8;
        n -= 8;
    }
    uint64_t tail = 0;
    for (uint64_t i = 0; i < n; i++)
        tail |= (uint64_t)b[i] << (8 * i);
    h ^= (tail + n) * k2;
    h ^= h >> 29;
    h *= k1;
    h ^= h >> 32;
    return h;
}

static int open_intent(zr_store *s, int flags, int *fd)
{
    *fd = zr_io.openat(s->dirfd, ZR_INTENT_FILE, flags, 0644);
    if (*fd < 0 && !(errno == ENOENT && !(flags & O_CREAT)))
        return zr_err_sys(errno, "opening %s/%s", s->path, ZR_INTENT_FILE);
    return 0;
}

int zr_intent_write(zr_store *s, int kind, const struct zr_header *h,
                    const struct zr_intent_entry *e, uint64_t n, const uint8_t *data,
                    uint64_t data_len)
{
    /* The count is a u32 on disk: a larger one would wrap and read back
     * as an incomplete intent, dropping a half-applied change. */
    if (n > UINT32_MAX)
        return zr_err(ZR_EINVAL, "an operation that changes %llu table entries at once; "
                      "at most %u can be, so split it", (unsigned long long)n, UINT32_MAX);
    uint64_t elen = n * ENTRY_SIZE;
    uint8_t *buf = zr_malloc(HEAD_SIZE + elen);
    if (!buf)
        return zr_err(ZR_ENOMEM, "intent of %llu entries", (unsigned long long)n);
    memcpy(buf, MAGIC, 8);
    zr_store32(buf + 8, (uint32_t)kind);
    zr_store32(buf + 12, (uint32_t)n);
    zr_header_encode(h, buf + 16);
    zr_store64(buf + 48, data_len);
    for (uint64_t k = 0; k < n; k++) {
        zr_store64(buf + HEAD_SIZE + k * ENTRY_SIZE, e[k].index);
        zr_loc_encode(&e[k].loc, buf + HEAD_SIZE + k * ENTRY_SIZE + 8);
    }
    uint64_t sum = zr_hash64(buf, HEAD_SIZE + elen, 0);
    sum = zr_hash64(data, data_len, sum);
    uint8_t tail[8];
    zr_store64(tail, sum);
    int fd = -1;
    char name[600];
    snprintf(name, sizeof name, "%s/%s", s->path, ZR_INTENT_FILE);
    int rc = open_intent(s, O_RDWR | O_CREAT, &fd);
    if (rc == 0 && zr_io.ftruncate(fd, 0) != 0)
        rc = zr_err_sys(errno, "truncating %s", name);
    if (rc == 0)
        rc = zr_write_all(fd, buf, HEAD_SIZE + elen, 0, name);
    if (rc == 0 && data_len)
        rc = zr_write_all(fd, data, data_len, HEAD_SIZE + elen, name);
    if (rc == 0)
        rc = zr_write_all(fd, tail, 8, HEAD_SIZE + elen + data_len, name);
    /* A failed fsync is never retried and trusted: the handle stops
     * writing (the kernel may have dropped the pages it could not write). */
    if (rc == 0 && zr_io.fdatasync(fd) != 0) {
        rc = zr_err_sys(errno, "syncing %s", name);
        s->failed = true;
    }
    /* The folder entry of a new intent.zr must be durable too. */
    if (rc == 0 && zr_io.fsync(s->dirfd) != 0) {
        rc = zr_err_sys(errno, "syncing folder %s", s->path);
        s->failed = true;
    }
    if (fd >= 0)
        zr_io.close(fd);
    zr_free(buf);
    return rc;
}

int zr_intent_clear(zr_store *s)
{
    int fd;
    int rc = open_intent(s, O_RDWR, &fd);
    if (rc != 0 || fd < 0)
        return rc;
    if (zr_io.ftruncate(fd, 0) != 0)
        rc = zr_err_sys(errno, "clearing %s/%s", s->path, ZR_INTENT_FILE);
    else if (zr_io.fdatasync(fd) != 0) {
        rc = zr_err_sys(errno, "syncing %s/%s", s->path, ZR_INTENT_FILE);
        s->failed = true;
    }
    zr_io.close(fd);
    return rc;
}

int zr_intent_pending(zr_store *s, int *pending)
{
    *pending = 0;
    int fd;
    int rc = open_intent(s, O_RDONLY, &fd);
    if (rc != 0 || fd < 0)
        return rc;
    uint64_t size;
    rc = zr_file_size(fd, &size, ZR_INTENT_FILE);
    zr_io.close(fd);
    *pending = rc == 0 && size > 0;
    return rc;
}

/* The files touched while applying an intent, kept open so that each is
 * synced once at the end rather than after every write. */
struct touched {
    char names[64][32];
    int fds[64];
    int n;
};

static int write_named(zr_store *s, struct touched *t, const char *name, const void *p, size_t n,
                       uint64_t off)
{
    int i = 0;
    while (i < t->n && strcmp(t->names[i], name) != 0)
        i++;
    if (i == t->n) {
        if (t->n == 64) {
            /* Sync and forget the oldest file to make room. */
            if (zr_io.fdatasync(t->fds[0]) != 0)
                return zr_err_sys(errno, "syncing %s/%s", s->path, t->names[0]);
            zr_io.close(t->fds[0]);
            memmove(t->fds, t->fds + 1, 63 * sizeof t->fds[0]);
            memmove(t->names, t->names + 1, 63 * sizeof t->names[0]);
            t->n--;
            i = t->n;
        }
        int fd = zr_io.openat(s->dirfd, name, O_RDWR, 0);
        if (fd < 0) {
            if (errno == ENOENT)
                return zr_err(ZR_ECORRUPT, "%s/%s named by intent.zr is missing", s->path, name);
            return zr_err_sys(errno, "opening %s/%s", s->path, name);
        }
        snprintf(t->names[i], sizeof t->names[i], "%s", name);
        t->fds[i] = fd;
        t->n++;
    }
    return zr_write_all(t->fds[i], p, n, off, name);
}

static int sync_touched(zr_store *s, struct touched *t)
{
    int rc = 0;
    for (int i = 0; i < t->n; i++) {
        if (rc == 0 && zr_io.fdatasync(t->fds[i]) != 0)
            rc = zr_err_sys(errno, "syncing %s/%s", s->path, t->names[i]);
        zr_io.close(t->fds[i]);
    }
    t->n = 0;
    return rc;
}

/* Check and apply a complete intent held in buf (size bytes). */
static int apply(zr_store *s, const uint8_t *buf, uint64_t size)
{
    uint32_t kind = zr_load32(buf + 8);
    uint64_t n = zr_load32(buf + 12);
    struct zr_header h;
    int rc = zr_header_decode(buf + 16, &h);
    if (rc != 0)
        return zr_err(ZR_ECORRUPT, "%s/intent.zr: bad header", s->path);
    uint64_t data_len = zr_load64(buf + 48);
    const uint8_t *data = buf + HEAD_SIZE + n * ENTRY_SIZE;
    if (kind != ZR_INTENT_DELETE && kind != ZR_INTENT_COMPACT)
        return zr_err(ZR_ECORRUPT, "%s/intent.zr: unknown kind %u", s->path, kind);
    if (HEAD_SIZE + n * ENTRY_SIZE + data_len + 8 != size)
        return zr_err(ZR_ECORRUPT, "%s/intent.zr: sizes do not add up", s->path);
    if (h.tail_offset > s->chunk_cap)
        return zr_err(ZR_ECORRUPT, "%s/intent.zr: frontier beyond the chunk capacity", s->path);
    uint64_t used = 0;
    char name[32];
    struct touched t = {.n = 0};
    for (uint64_t k = 0; k < n && rc == 0; k++) {
        const uint8_t *p = buf + HEAD_SIZE + k * ENTRY_SIZE;
        uint64_t index = zr_load64(p);
        struct zr_loc l;
        zr_loc_decode(p + 8, &l);
        if (index >= h.length || l.chunk_id > h.tail_chunk ||
            (uint64_t)l.offset + l.phys_length > s->chunk_cap) {
            rc = zr_err(ZR_ECORRUPT, "%s/intent.zr: entry %llu is out of bounds", s->path,
                        (unsigned long long)k);
            break;
        }
        if (kind == ZR_INTENT_COMPACT) {
            if (l.phys_length > data_len - used) {
                rc = zr_err(ZR_ECORRUPT, "%s/intent.zr: record bytes missing", s->path);
                break;
            }
            snprintf(name, sizeof name, "%u.chunk", l.chunk_id);
            rc = write_named(s, &t, name, data + used, l.phys_length, l.offset);
            used += l.phys_length;
        }
        if (rc == 0) {
            uint8_t raw[ZR_LOC_SIZE];
            zr_loc_encode(&l, raw);
            snprintf(name, sizeof name, "%llu.loc", (unsigned long long)(index >> s->seg_shift));
            uint64_t off = (index & (((uint64_t)1 << s->seg_shift) - 1)) * ZR_LOC_SIZE;
            rc = write_named(s, &t, name, raw, sizeof raw, off);
        }
    }
    int src = sync_touched(s, &t);
    if (rc == 0)
        rc = src;
    if (rc == 0) {
        /* The handle may be read-only: write the header through a
         * descriptor of its own, after everything it covers is durable. */
        uint8_t raw[ZR_HEADER_SIZE];
        zr_header_encode(&h, raw);
        rc = write_named(s, &t, ZR_META_FILE, raw, sizeof raw, 0);
        src = sync_touched(s, &t);
        if (rc == 0)
            rc = src;
    }
    return rc;
}

int zr_intent_recover(zr_store *s, int *applied)
{
    *applied = 0;
    int fd;
    int rc = open_intent(s, O_RDONLY, &fd);
    if (rc != 0 || fd < 0)
        return rc;
    uint64_t size;
    uint8_t *buf = NULL;
    rc = zr_file_size(fd, &size, ZR_INTENT_FILE);
    if (rc == 0 && size > 0 && size < ((uint64_t)1 << 40) && (buf = zr_malloc(size)) == NULL)
        rc = zr_err(ZR_ENOMEM, "reading %s/intent.zr", s->path);
    if (rc == 0 && buf)
        rc = zr_read_exact(fd, buf, size, 0, ZR_INTENT_FILE);
    zr_io.close(fd);
    if (rc == 0 && buf) {
        bool complete = false;
        if (size >= HEAD_SIZE + 8 && memcmp(buf, MAGIC, 8) == 0) {
            uint64_t elen = (uint64_t)zr_load32(buf + 12) * ENTRY_SIZE;
            if (HEAD_SIZE + elen + 8 <= size) {
                uint64_t sum = zr_hash64(buf, HEAD_SIZE + elen, 0);
                sum = zr_hash64(buf + HEAD_SIZE + elen, size - 8 - HEAD_SIZE - elen, sum);
                complete = sum == zr_load64(buf + size - 8);
            }
        }
        if (complete) {
            rc = apply(s, buf, size);
            *applied = rc == 0;
        }
    }
    zr_free(buf);
    if (rc == 0 && size > 0)
        rc = zr_intent_clear(s);
    return rc;
}

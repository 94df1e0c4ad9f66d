/*
 * format.c: encoding and validation of the store's small structures.
 *
 * Every function that decodes bytes from disk treats them as hostile: it
 * checks each field against the limits in doc/format.md before the engine
 * uses it, and reports ZR_ECORRUPT with a message rather than trusting it.
 * All multi-byte integers are little-endian whatever the host.
 */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

void zr_header_encode(const struct zr_header *h, uint8_t out[ZR_HEADER_SIZE])
{
    memset(out, 0, ZR_HEADER_SIZE);
    zr_store64(out, h->length);
    zr_store32(out + 8, h->tail_chunk);
    zr_store32(out + 12, h->tail_offset);
    out[16] = h->codec;
}

int zr_header_decode(const uint8_t in[ZR_HEADER_SIZE], struct zr_header *h)
{
    h->length = zr_load64(in);
    h->tail_chunk = zr_load32(in + 8);
    h->tail_offset = zr_load32(in + 12);
    h->codec = in[16];
    if (h->codec > ZR_CODEC_ZSTD_DICT)
        return zr_err(ZR_ECORRUPT, "meta.zr: unknown codec byte %u", h->codec);
    for (int i = 17; i < ZR_HEADER_SIZE; i++)
        if (in[i] != 0)
            return zr_err(ZR_ECORRUPT, "meta.zr: reserved byte %d is not zero", i);
    return 0;
}

static int64_t parse_decimal(const char *s)
{
    if (*s < '1' || *s > '9')
        return -1;
    int64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > 100000000)
            return -1;
        v = v * 10 + (*s - '0');
    }
    return v;
}

int64_t zr_dtype_parse(const char *dtype)
{
    if (!dtype)
        return ZR_EINVAL;
    size_t len = strnlen(dtype, ZR_DTYPE_MAX);
    if (len < 3 || len >= ZR_DTYPE_MAX)
        return ZR_EINVAL;
    char order = dtype[0], kind = dtype[1];
    int64_t n = parse_decimal(dtype + 2);
    if (n <= 0)
        return ZR_EINVAL;
    int64_t size;
    switch (kind) {
    case 'b':
        size = n == 1 ? 1 : -1;
        break;
    case 'i':
    case 'u':
        size = (n == 1 || n == 2 || n == 4 || n == 8) ? n : -1;
        break;
    case 'f':
        size = (n == 2 || n == 4 || n == 8) ? n : -1;
        break;
    case 'c':
        size = (n == 8 || n == 16) ? n : -1;
        break;
    case 'S':
    case 'V':
        size = n;
        break;
    case 'U':
        size = n * 4;
        break;
    default:
        size = -1;
    }
    if (size < 0)
        return ZR_EINVAL;
    /* NumPy spells one-byte and byte-string types with '|', wider numbers
     * with their byte order; anything else is not a dtype.str. */
    bool no_order = size == 1 || kind == 'S' || kind == 'V';
    if (kind == 'U')
        no_order = false;
    if (no_order ? order != '|' : (order != '<' && order != '>'))
        return ZR_EINVAL;
    return size;
}

int zr_identity_encode(const struct zr_identity *id, void **buf, size_t *len)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    size_t dlen = strlen(id->dtype);
    int bad = msgpack_pack_map(&pk, id->kind == ZR_DENSE ? 2 : 1);
    bad |= msgpack_pack_str(&pk, 5);
    bad |= msgpack_pack_str_body(&pk, "dtype", 5);
    bad |= msgpack_pack_str(&pk, dlen);
    bad |= msgpack_pack_str_body(&pk, id->dtype, dlen);
    if (id->kind == ZR_DENSE) {
        bad |= msgpack_pack_str(&pk, 10);
        bad |= msgpack_pack_str_body(&pk, "item_shape", 10);
        bad |= msgpack_pack_array(&pk, id->ndim);
        for (uint32_t i = 0; i < id->ndim; i++)
            bad |= msgpack_pack_uint64(&pk, id->shape[i]);
    }
    if (bad) {
        msgpack_sbuffer_destroy(&sb);
        return zr_err(ZR_ENOMEM, "encoding store.zr");
    }
    *buf = sb.data;
    *len = sb.size;
    return 0;
}

static bool key_is(const msgpack_object *o, const char *name)
{
    size_t n = strlen(name);
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
           memcmp(o->via.str.ptr, name, n) == 0;
}

static int decode_map(const msgpack_object *root, struct zr_identity *id)
{
    if (root->type != MSGPACK_OBJECT_MAP)
        return zr_err(ZR_ECORRUPT, "store.zr: not a msgpack map");
    const msgpack_object_map *m = &root->via.map;
    const msgpack_object *dtype = NULL, *shape = NULL;
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
        if (key_is(k, "dtype") && !dtype)
            dtype = v;
        else if (key_is(k, "item_shape") && !shape)
            shape = v;
        else
            return zr_err(ZR_ECORRUPT, "store.zr: unexpected or repeated key");
    }
    if (!dtype)
        return zr_err(ZR_ECORRUPT, "store.zr: no dtype");
    if (dtype->type != MSGPACK_OBJECT_STR || dtype->via.str.size >= ZR_DTYPE_MAX)
        return zr_err(ZR_ECORRUPT, "store.zr: dtype is not a short string");
    memset(id, 0, sizeof *id);
    memcpy(id->dtype, dtype->via.str.ptr, dtype->via.str.size);
    if (memchr(id->dtype, '\0', dtype->via.str.size))
        return zr_err(ZR_ECORRUPT, "store.zr: dtype holds a NUL byte");
    int64_t itemsize = zr_dtype_parse(id->dtype);
    if (itemsize <= 0)
        return zr_err(ZR_ECORRUPT, "store.zr: unsupported dtype '%s'", id->dtype);
    id->itemsize = (uint64_t)itemsize;
    id->kind = shape ? ZR_DENSE : ZR_RAGGED;
    /* The smallest Ragged record is one item after an 8-byte prefix. */
    if (!shape && id->itemsize + 8 > ZR_MAX_RECORD)
        return zr_err(ZR_ECORRUPT, "store.zr: no record of dtype '%s' fits in 2 GiB", id->dtype);
    if (!shape)
        return 0;
    if (shape->type != MSGPACK_OBJECT_ARRAY || shape->via.array.size > ZR_MAX_NDIM)
        return zr_err(ZR_ECORRUPT, "store.zr: item_shape is not an array of at most %d dims",
                      ZR_MAX_NDIM);
    id->ndim = shape->via.array.size;
    uint64_t width = id->itemsize;
    for (uint32_t i = 0; i < id->ndim; i++) {
        const msgpack_object *d = &shape->via.array.ptr[i];
        if (d->type != MSGPACK_OBJECT_POSITIVE_INTEGER || d->via.u64 == 0)
            return zr_err(ZR_ECORRUPT, "store.zr: item_shape[%u] is not a positive integer", i);
        id->shape[i] = d->via.u64;
        if (!zr_mul_ok(width, d->via.u64, &width) || width > ZR_MAX_RECORD)
            return zr_err(ZR_ECORRUPT, "store.zr: record width exceeds 2 GiB");
    }
    /* A scalar item skips the loop: its width is the item size alone. */
    if (width > ZR_MAX_RECORD)
        return zr_err(ZR_ECORRUPT, "store.zr: record width exceeds 2 GiB");
    return 0;
}

/* A big-endian length field of n bytes (msgpack's byte order). */
static uint64_t load_be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* msgpack-c allocates a container's elements before reading them, so a
 * few bytes declaring 2^32 elements would make it ask for hundreds of GiB.
 * Walk the encoding once without allocating: every element takes at least
 * one byte, so a container declaring more elements than bytes remain, or
 * a length running past the end, marks the bytes as malformed. */
static bool msgpack_counts_fit(const uint8_t *p, size_t len)
{
    uint64_t pending = 1, pos = 0;
    while (pending > 0) {
        if (pos >= len)
            return false;
        uint8_t b = p[pos++];
        uint64_t skip = 0, count = 0; /* data bytes to skip; entries declared */
        int lenbytes = 0;             /* size of a length or count field */
        int per = 0;                  /* objects per entry: 1 array, 2 map */
        if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
            /* fixint, nil, bool: the type byte is all */
        } else if (b <= 0x8f) {
            count = b & 0x0f;
            per = 2;
        } else if (b <= 0x9f) {
            count = b & 0x0f;
            per = 1;
        } else if (b <= 0xbf) {
            skip = b & 0x1f;
        } else if (b == 0xc4 || b == 0xc5 || b == 0xc6) {
            lenbytes = 1 << (b - 0xc4); /* bin 8/16/32 */
        } else if (b == 0xd9 || b == 0xda || b == 0xdb) {
            lenbytes = 1 << (b - 0xd9); /* str 8/16/32 */
        } else if (b == 0xc7 || b == 0xc8 || b == 0xc9) {
            lenbytes = 1 << (b - 0xc7); /* ext 8/16/32: length, type, data */
            skip = 1;
        } else if (b == 0xca || b == 0xcb) {
            skip = b == 0xca ? 4 : 8;
        } else if (b >= 0xcc && b <= 0xd3) {
            skip = (uint64_t)1 << ((b - 0xcc) % 4); /* uint and int 8..64 */
        } else if (b >= 0xd4 && b <= 0xd8) {
            skip = 1 + ((uint64_t)1 << (b - 0xd4)); /* fixext: type, data */
        } else if (b == 0xdc || b == 0xdd) {
            lenbytes = b == 0xdc ? 2 : 4;
            per = 1;
        } else if (b == 0xde || b == 0xdf) {
            lenbytes = b == 0xde ? 2 : 4;
            per = 2;
        } else {
            return false; /* 0xc1 is never used */
        }
        if (lenbytes > 0) {
            if (len - pos < (uint64_t)lenbytes)
                return false;
            uint64_t n = load_be(p + pos, lenbytes);
            pos += (uint64_t)lenbytes;
            if (per > 0)
                count = n;
            else
                skip += n;
        }
        if (skip > len - pos)
            return false;
        pos += skip;
        pending = pending - 1 + count * (uint64_t)per;
        if (pending > len - pos)
            return false;
    }
    return true;
}

int zr_identity_decode(const void *buf, size_t len, struct zr_identity *id)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    int rc;
    msgpack_unpack_return r = msgpack_counts_fit(buf, len)
                                  ? msgpack_unpack_next(&u, buf, len, &off)
                                  : MSGPACK_UNPACK_PARSE_ERROR;
    if (r != MSGPACK_UNPACK_SUCCESS)
        rc = zr_err(ZR_ECORRUPT, "store.zr: not valid msgpack");
    else if (off != len)
        rc = zr_err(ZR_ECORRUPT, "store.zr: %zu trailing bytes after the map", len - off);
    else
        rc = decode_map(&u.data, id);
    msgpack_unpacked_destroy(&u);
    return rc;
}

int zr_prefix_check(const uint8_t *rec, uint64_t size, uint64_t itemsize, uint32_t *ndim,
                    uint64_t *payload_off)
{
    if (size < 8)
        return ZR_ECORRUPT;
    uint64_t nd = zr_load64(rec);
    if (nd > ZR_MAX_NDIM)
        return ZR_ECORRUPT;
    uint64_t prefix = 8 * (1 + nd);
    if (prefix >= size)
        return ZR_ECORRUPT;
    uint64_t count = itemsize;
    for (uint64_t i = 0; i < nd; i++) {
        uint64_t d = zr_load64(rec + 8 + 8 * i);
        if (!zr_mul_ok(count, d, &count) || count > ZR_MAX_RECORD)
            return ZR_ECORRUPT;
    }
    if (count != size - prefix)
        return ZR_ECORRUPT;
    *ndim = (uint32_t)nd;
    *payload_off = prefix;
    return 0;
}

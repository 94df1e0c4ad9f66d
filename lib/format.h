/*
 * format.h: the bytes of a store on disk (see doc/format.md) and their
 * validation: the 32-byte header of meta.zr, the 16-byte record-table
 * entry, the dtype spelling and the msgpack identity of store.zr.
 */
#ifndef ZR_FORMAT_H
#define ZR_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define ZR_HEADER_SIZE 32
#define ZR_LOC_SIZE 16
#define ZR_STORE_FILE "store.zr"
#define ZR_META_FILE "meta.zr"
#define ZR_DICT_FILE "dict.zr"
/* store.zr is a tiny map; anything larger is not one of ours. */
#define ZR_IDENTITY_MAX 4096
/* A dictionary larger than this is not one zr_train_dict made. */
#define ZR_DICT_MAX (64u << 20)
#define ZR_DTYPE_MAX 24

/* Default geometry: a chunk holds 2^32 bytes, a loc segment 2^28 entries. */
#define ZR_CHUNK_CAPACITY ((uint64_t)1 << 32)
#define ZR_SEGMENT_ENTRIES ((uint64_t)1 << 28)

struct zr_header {
    uint64_t length;      /* committed record count */
    uint32_t tail_chunk;  /* the chunk holding the write frontier */
    uint32_t tail_offset; /* the frontier inside tail_chunk */
    uint8_t codec;        /* ZR_CODEC_* */
};

struct zr_loc {
    uint32_t offset;       /* byte offset inside the chunk */
    uint32_t phys_length;  /* stored (possibly compressed) bytes */
    uint32_t logic_length; /* decoded bytes */
    uint32_t chunk_id;
};

void zr_header_encode(const struct zr_header *h, uint8_t out[ZR_HEADER_SIZE]);
/* Decode and validate: codec known, reserved bytes zero. */
int zr_header_decode(const uint8_t in[ZR_HEADER_SIZE], struct zr_header *h);

static inline void zr_loc_decode(const uint8_t *p, struct zr_loc *l)
{
    l->offset = zr_load32(p);
    l->phys_length = zr_load32(p + 4);
    l->logic_length = zr_load32(p + 8);
    l->chunk_id = zr_load32(p + 12);
}

static inline void zr_loc_encode(const struct zr_loc *l, uint8_t *p)
{
    zr_store32(p, l->offset);
    zr_store32(p + 4, l->phys_length);
    zr_store32(p + 8, l->logic_length);
    zr_store32(p + 12, l->chunk_id);
}

/* The type identity of store.zr. */
struct zr_identity {
    int kind; /* ZR_DENSE or ZR_RAGGED */
    char dtype[ZR_DTYPE_MAX];
    uint64_t itemsize;
    uint32_t ndim; /* Dense item shape */
    uint64_t shape[ZR_MAX_NDIM];
};

/* Validate a dtype spelling; returns the item size or a negative code
 * (without setting the last-error message). */
int64_t zr_dtype_parse(const char *dtype);

/* Encode to a malloc'd msgpack buffer. */
int zr_identity_encode(const struct zr_identity *id, void **buf, size_t *len);
/* Decode and validate store.zr bytes; ZR_ECORRUPT with a message. */
int zr_identity_decode(const void *buf, size_t len, struct zr_identity *id);

/* Validate a Ragged shape prefix at rec (size bytes) against itemsize. */
int zr_prefix_check(const uint8_t *rec, uint64_t size, uint64_t itemsize, uint32_t *ndim,
                    uint64_t *payload_off);

#endif

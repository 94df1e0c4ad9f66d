/*
 * codec.h: zstd contexts, reused rather than created per record.
 */
#ifndef ZR_CODEC_H
#define ZR_CODEC_H

/* ZSTD_c_literalCompressionMode and ZSTD_frameHeaderSize are in the
 * experimental part of the API; Debian's shared libzstd exports them. */
#define ZSTD_STATIC_LINKING_ONLY
#include <stdbool.h>
#include <stddef.h>
#include <zstd.h>

#define ZR_ZSTD_LEVEL 3
#define ZR_ZSTD_DICT_LEVEL 19

/* The literal rule (zstd stores without a dictionary, lib/append.c): the
 * frame of a record of at most ZR_LIT_SMALL bytes carries a Huffman table
 * for its literals only if the table saves at least ZR_LIT_MIN_GAIN bytes
 * or a ZR_LIT_MIN_SHARE-th of the record; otherwise its literals are
 * stored raw. The decoder builds that table (up to 2,048 entries) for
 * every frame before its first literal: on a record of a few hundred
 * bytes it is most of the read (doc/performance.md, "The literal rule"),
 * while records of a few KiB, where the table saves hundreds of bytes,
 * keep it. */
#define ZR_LIT_SMALL 16384
#define ZR_LIT_MIN_GAIN 128
#define ZR_LIT_MIN_SHARE 3
#define ZR_LIT_ALT ZSTD_COMPRESSBOUND(ZR_LIT_SMALL)

/* Take a context from the process-wide cache (or make one); NULL when out
 * of memory. Give it back with the matching put. */
ZSTD_DCtx *zr_dctx_get(void);
void zr_dctx_put(ZSTD_DCtx *d);
ZSTD_CCtx *zr_cctx_get(void);
void zr_cctx_put(ZSTD_CCtx *c);

/* The bytes a frame's first block saves by its Huffman-coded literals
 * (regenerated size minus compressed size, the table included), or 0 when
 * that block carries no Huffman table of its own (raw, RLE or repeated
 * literals, or a block that is not compressed). */
size_t zr_frame_literal_gain(const void *frame, size_t len);

/* The literals of a frame's first block when they are stored raw (or the
 * block is stored whole): *lit points at them in frame and their count is
 * returned; 0 when that block has none or codes them. */
size_t zr_frame_raw_literals(const void *frame, size_t len, const void **lit);

/* About the most a Huffman table could save on the size bytes at in if
 * all of them were literals: their size less their order-0 entropy (at
 * least a bit per byte) and a table of half a byte per symbol. A frame's
 * literals are a part of those bytes, so their table saves less, as a
 * rule. */
size_t zr_literal_gain_bound(const void *in, size_t size);

/* The rule above: does a table that saves gain bytes of a size-byte
 * record pay for itself? */
static inline bool zr_literal_table_pays(size_t gain, size_t size)
{
    return gain >= ZR_LIT_MIN_GAIN || gain * ZR_LIT_MIN_SHARE >= size;
}

#endif

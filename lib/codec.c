/*
 * codec.c: a process-wide cache of zstd compression and decompression
 * contexts. A batched call takes one context per shard and returns it at
 * the end, so each worker reuses one context across all of its records
 * and no call pays context setup per record. The cache is bounded; extra
 * contexts are freed on return, and all are freed when the library unloads.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "codec.h"

#define CACHE_MAX 64

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static ZSTD_DCtx *dcache[CACHE_MAX];
static ZSTD_CCtx *ccache[CACHE_MAX];
static int ndc, ncc;

ZSTD_DCtx *zr_dctx_get(void)
{
    ZSTD_DCtx *d = NULL;
    pthread_mutex_lock(&cache_lock);
    if (ndc > 0)
        d = dcache[--ndc];
    pthread_mutex_unlock(&cache_lock);
    return d ? d : ZSTD_createDCtx();
}

void zr_dctx_put(ZSTD_DCtx *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&cache_lock);
    if (ndc < CACHE_MAX) {
        dcache[ndc++] = d;
        d = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
    ZSTD_freeDCtx(d);
}

ZSTD_CCtx *zr_cctx_get(void)
{
    ZSTD_CCtx *c = NULL;
    pthread_mutex_lock(&cache_lock);
    if (ncc > 0)
        c = ccache[--ncc];
    pthread_mutex_unlock(&cache_lock);
    return c ? c : ZSTD_createCCtx();
}

void zr_cctx_put(ZSTD_CCtx *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&cache_lock);
    if (ncc < CACHE_MAX) {
        ccache[ncc++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
    ZSTD_freeCCtx(c);
}

/* The first block of a frame: *type (0 raw, 1 RLE, 2 compressed), *size
 * (its stored bytes), and the offset of its content; 0 when the frame is
 * too short to hold one. */
static size_t first_block(const uint8_t *p, size_t len, unsigned *type, size_t *size)
{
    size_t pos = ZSTD_frameHeaderSize(p, len);
    if (ZSTD_isError(pos) || len < pos + 3)
        return 0;
    /* Block header: bit 0 last block, bits 1-2 the type, then the size. */
    uint32_t block = (uint32_t)p[pos] | (uint32_t)p[pos + 1] << 8 | (uint32_t)p[pos + 2] << 16;
    *type = (block >> 1) & 3;
    *size = *type == 1 ? 1 : block >> 3;
    pos += 3;
    return len - pos >= *size ? pos : 0;
}

size_t zr_frame_literal_gain(const void *frame, size_t len)
{
    const uint8_t *p = frame;
    unsigned type;
    size_t size, pos = first_block(p, len, &type, &size);
    if (pos == 0 || type != 2 || size < 5)
        return 0;
    /* Literals section header (RFC 8878, 3.1.1.3.1.1): type 2 is Huffman
     * with its own tree; the size format picks 10, 14 or 18 bits for the
     * regenerated and the compressed size. */
    if ((p[pos] & 3) != 2)
        return 0;
    unsigned format = (p[pos] >> 2) & 3;
    unsigned bits = format < 2 ? 10 : format == 2 ? 14 : 18;
    uint64_t h = 0;
    for (int k = 0; k < 5; k++)
        h |= (uint64_t)p[pos + k] << (8 * k);
    uint64_t mask = ((uint64_t)1 << bits) - 1;
    uint64_t regen = (h >> 4) & mask, comp = (h >> (4 + bits)) & mask;
    return regen > comp ? (size_t)(regen - comp) : 0;
}

size_t zr_frame_raw_literals(const void *frame, size_t len, const void **lit)
{
    const uint8_t *p = frame;
    unsigned type;
    size_t size, pos = first_block(p, len, &type, &size);
    if (pos == 0 || type == 1 || size == 0)
        return 0;
    if (type == 0) {
        *lit = p + pos;
        return size;
    }
    /* Raw literals (type 0): a 1, 2 or 3 byte header of 5, 12 or 20 bits. */
    if ((p[pos] & 3) != 0)
        return 0;
    unsigned format = (p[pos] >> 2) & 3;
    size_t head = format == 1 ? 2 : format == 3 ? 3 : 1, n;
    if (head > size)
        return 0;
    if (head == 1)
        n = p[pos] >> 3;
    else if (head == 2)
        n = (size_t)(p[pos] >> 4) | (size_t)p[pos + 1] << 4;
    else
        n = (size_t)(p[pos] >> 4) | (size_t)p[pos + 1] << 4 | (size_t)p[pos + 2] << 12;
    if (head + n > size)
        return 0;
    *lit = p + pos + head;
    return n;
}

/* log2(x) in sixteenths, for x >= 1, within a sixteenth. */
static uint32_t log2_16ths(uint64_t x)
{
    /* 16 * log2(1 + m / 16) for m = 0..15, rounded down. */
    static const uint8_t frac[16] = {0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 12, 13, 14, 15};
    int e = 63 - __builtin_clzll(x);
    uint32_t m = e >= 4 ? (uint32_t)(x >> (e - 4)) & 15 : (uint32_t)(x << (4 - e)) & 15;
    return (uint32_t)e * 16 + frac[m];
}

size_t zr_literal_gain_bound(const void *in, size_t size)
{
    const uint8_t *p = in;
    /* Four tables, so runs of one byte value do not wait on one counter. */
    uint32_t lane[4][256] = {{0}}, count[256];
    size_t i = 0;
    for (; i + 4 <= size; i += 4) {
        lane[0][p[i]]++;
        lane[1][p[i + 1]]++;
        lane[2][p[i + 2]]++;
        lane[3][p[i + 3]]++;
    }
    for (; i < size; i++)
        lane[0][p[i]]++;
    for (int b = 0; b < 256; b++)
        count[b] = lane[0][b] + lane[1][b] + lane[2][b] + lane[3][b];
    /* The entropy bound: a symbol seen c times needs log2(size / c) bits,
     * and a Huffman code gives it at least one. */
    uint32_t total = log2_16ths(size | 1);
    uint64_t sixteenths = 0;
    size_t symbols = 0;
    for (int b = 0; b < 256; b++) {
        if (!count[b])
            continue;
        symbols++;
        uint32_t len = total - log2_16ths(count[b]);
        sixteenths += (uint64_t)count[b] * (len > 16 ? len : 16);
    }
    size_t coded = (size_t)(sixteenths / 128) + symbols / 2;
    return coded < size ? size - coded : 0;
}

__attribute__((destructor)) static void codec_cache_free(void)
{
    pthread_mutex_lock(&cache_lock);
    while (ndc > 0)
        ZSTD_freeDCtx(dcache[--ndc]);
    while (ncc > 0)
        ZSTD_freeCCtx(ccache[--ncc]);
    pthread_mutex_unlock(&cache_lock);
}

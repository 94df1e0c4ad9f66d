/* idrecords.c: reproducible test records (see idrecords.h). */
#include <string.h>

#include "tests/idrecords.h"

uint64_t zt_mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

size_t zt_record_size(uint64_t r, size_t max_size)
{
    return 8 + (size_t)(zt_mix(r) % (max_size - 7));
}

void zt_record_fill(uint64_t r, uint8_t *out, size_t size)
{
    for (size_t i = 0; i < 8 && i < size; i++)
        out[i] = (uint8_t)(r >> (8 * i));
    /* Text-like bytes: compressible but not constant. */
    uint64_t h = zt_mix(r ^ 0xabcdef);
    for (size_t i = 8; i < size; i++) {
        if (i % 16 == 8)
            h = zt_mix(h + i);
        out[i] = (uint8_t)('a' + (h >> (4 * (i % 16))) % 8);
    }
}

int zt_record_is(uint64_t r, const uint8_t *p, size_t size, size_t max_size)
{
    if (size != zt_record_size(r, max_size))
        return 0;
    uint8_t buf[8];
    for (size_t i = 0; i < 8; i++)
        buf[i] = (uint8_t)(r >> (8 * i));
    if (memcmp(p, buf, 8) != 0)
        return 0;
    uint64_t h = zt_mix(r ^ 0xabcdef);
    for (size_t i = 8; i < size; i++) {
        if (i % 16 == 8)
            h = zt_mix(h + i);
        if (p[i] != (uint8_t)('a' + (h >> (4 * (i % 16))) % 8))
            return 0;
    }
    return 1;
}

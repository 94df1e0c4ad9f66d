/*
 * decimal.c: reading unsigned decimal numbers, for every caller outside
 * the library: zr's arguments, the integers of an NPY header, the record
 * names and mount options of zrecordfs, and the index lists written to its
 * control files.
 *
 * All of that text is untrusted, so there is one loop and it is strict:
 * ASCII digits only (no sign, no spaces, no locale), and a value past
 * 2^64 - 1 is refused rather than wrapped or clamped as strtoull does.
 * Callers differ only in what may stand around the digits and in whether
 * a leading zero is allowed, which is why the loop takes a length instead
 * of a string and reports how far it read.
 */
#include "common/decimal.h"

size_t dec_take(const char *s, size_t len, uint64_t *v)
{
    uint64_t x = *v;
    size_t n = 0;
    for (; n < len && s[n] >= '0' && s[n] <= '9'; n++) {
        uint64_t d = (uint64_t)(s[n] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return DEC_TOO_BIG;
        x = x * 10 + d;
    }
    *v = x;
    return n;
}

bool dec_parse(const char *s, size_t len, bool canonical, uint64_t *out)
{
    uint64_t v = 0;
    if (len == 0 || dec_take(s, len, &v) != len)
        return false;
    if (canonical && s[0] == '0' && len > 1)
        return false;
    *out = v;
    return true;
}

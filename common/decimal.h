/*
 * decimal.h: the one parser of unsigned decimal numbers shared by zr and
 * zrecordfs (common/libzrcommon, never installed).
 */
#ifndef ZR_COMMON_DECIMAL_H
#define ZR_COMMON_DECIMAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What dec_take returns when the number does not fit in 64 bits. */
#define DEC_TOO_BIG SIZE_MAX

/* Take the run of decimal digits at the start of s[0..len) onto *v: for
 * each digit d, *v = *v * 10 + d. Calling again with the value so far
 * reads a number cut between two buffers. It stops at the first byte that
 * is not an ASCII digit and takes nothing else: no sign, no space, no
 * underscore. Returns the number of digits taken (0 when s does not begin
 * with one), or DEC_TOO_BIG when *v would pass 2^64 - 1, leaving *v
 * unspecified. Thread-safe: it touches only its arguments. */
size_t dec_take(const char *s, size_t len, uint64_t *v);

/* s[0..len) as one whole number: one digit or more and nothing else, at
 * most 2^64 - 1, and when canonical no leading zero either ("0" is the
 * only canonical spelling that begins with one, so every number has one
 * spelling). Returns true and sets *out, or false and leaves it alone. */
bool dec_parse(const char *s, size_t len, bool canonical, uint64_t *out);

#endif

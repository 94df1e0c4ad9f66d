/*
 * npy.c: the NumPy .npy header as zr reads it (writing one is
 * common/npyheader.c's).
 *
 * An .npy file is a magic string, a version, a little-endian header
 * length and a header that is a Python dict literal, followed by the raw
 * array data. NumPy reads that literal with a Python parser; zr must not
 * trust it that far, because the file may come from anywhere. So the
 * parser here accepts a strict subset of Python literal syntax, the subset
 * NumPy writes: a dict with exactly the keys 'descr', 'fortran_order' and
 * 'shape', strings without escapes, decimal integers and True/False. It
 * reads nothing outside the buffer it is given, checks every integer and
 * every product for overflow, bounds recursion and sizes, and reports the
 * first problem in one sentence. Structured descriptions (lists of
 * fields) are checked for syntax only, so that they can be refused with a
 * clear reason rather than called malformed.
 *
 * What zr accepts of a well-formed header (C order, one plain dtype that
 * libloaderx stores) is a separate step, npy_check_supported, so that the
 * parser can be tested and fuzzed on its own.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loaderx/loaderx.h>

#include "common/decimal.h"
#include "common/readfull.h"
#include "npy.h"

/* Nesting allowed inside a structured descr before it is called hostile. */
#define SKIP_DEPTH_MAX 16

__attribute__((format(printf, 4, 5))) static int fail(int code, char *err, size_t errlen,
                                                      const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

int npy_preamble(const uint8_t *buf, size_t len, struct npy_header *h, char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    if (len < NPY_MAGIC_LEN || memcmp(buf, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return fail(NPY_EFORMAT, err, errlen, "not an NPY file (no \\x93NUMPY magic)");
    if (len < 8)
        return fail(NPY_EFORMAT, err, errlen, "NPY file ends inside its version bytes");
    h->major = buf[6];
    h->minor = buf[7];
    uint64_t hlen;
    size_t pre;
    if (h->major == 1 && h->minor == 0) {
        pre = NPY_PREAMBLE_V1;
        if (len < pre)
            return fail(NPY_EFORMAT, err, errlen, "NPY file ends inside its header length");
        hlen = (uint64_t)buf[8] | (uint64_t)buf[9] << 8;
    } else if ((h->major == 2 || h->major == 3) && h->minor == 0) {
        pre = NPY_PREAMBLE_V2;
        if (len < pre)
            return fail(NPY_EFORMAT, err, errlen, "NPY file ends inside its header length");
        hlen = (uint64_t)buf[8] | (uint64_t)buf[9] << 8 | (uint64_t)buf[10] << 16 |
               (uint64_t)buf[11] << 24;
    } else {
        return fail(NPY_EUNSUPPORTED, err, errlen,
                    "NPY format version %d.%d is not supported (1.0, 2.0 and 3.0 are)", h->major,
                    h->minor);
    }
    if (hlen > NPY_HEADER_MAX)
        return fail(NPY_EFORMAT, err, errlen, "NPY header of %llu bytes exceeds the limit of %u",
                    (unsigned long long)hlen, NPY_HEADER_MAX);
    h->data_offset = pre + hlen;
    return NPY_OK;
}

/* A cursor over the header text, with room for the first error. */
struct cur {
    const uint8_t *p, *end;
    char *err;
    size_t errlen;
};

static int bad(struct cur *c, const char *what)
{
    return fail(NPY_EFORMAT, c->err, c->errlen, "malformed NPY header: %s", what);
}

static bool at_end(const struct cur *c)
{
    return c->p >= c->end;
}

static int peek(const struct cur *c)
{
    return at_end(c) ? -1 : *c->p;
}

static bool is_ws(int ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

static void skip_ws(struct cur *c)
{
    while (!at_end(c) && is_ws(*c->p))
        c->p++;
}

static bool accept(struct cur *c, int ch)
{
    if (peek(c) != ch)
        return false;
    c->p++;
    return true;
}

/* A quoted string without escapes, copied to out (cap bytes, NUL
 * terminated). Only printable ASCII is allowed inside. */
static int parse_string(struct cur *c, char *out, size_t cap)
{
    int q = peek(c);
    if (q != '\'' && q != '"')
        return bad(c, "expected a quoted string");
    c->p++;
    size_t n = 0;
    for (;;) {
        int ch = peek(c);
        if (ch < 0)
            return bad(c, "unterminated string");
        c->p++;
        if (ch == q)
            break;
        if (ch == '\\')
            return bad(c, "escape sequences are not allowed in strings");
        if (ch < 0x20 || ch > 0x7e)
            return bad(c, "non-printable or non-ASCII byte in a string");
        if (n + 1 >= cap)
            return bad(c, "string too long");
        out[n++] = (char)ch;
    }
    out[n] = '\0';
    return NPY_OK;
}

/* A non-negative decimal integer as Python writes it (no sign, no leading
 * zeros, no underscores); a trailing 'L' from Python 2 writers is
 * accepted. */
static int parse_uint(struct cur *c, uint64_t *out)
{
    uint64_t v = 0;
    size_t n = dec_take((const char *)c->p, (size_t)(c->end - c->p), &v);
    if (n == 0)
        return bad(c, "expected a non-negative integer");
    if (n == DEC_TOO_BIG)
        return bad(c, "integer too large");
    if (*c->p == '0' && n > 1)
        return bad(c, "integer with a leading zero");
    c->p += n;
    accept(c, 'L');
    int ch = peek(c);
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch == '.')
        return bad(c, "integer followed by an unexpected character");
    *out = v;
    return NPY_OK;
}

static bool accept_word(struct cur *c, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return false;
    const uint8_t *after = c->p + n;
    if (after < c->end) {
        int ch = *after;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '_')
            return false;
    }
    c->p = after;
    return true;
}

static int parse_bool(struct cur *c, bool *out)
{
    if (accept_word(c, "True"))
        *out = true;
    else if (accept_word(c, "False"))
        *out = false;
    else
        return bad(c, "expected True or False");
    return NPY_OK;
}

/* A shape tuple: (), (n,), (n, m), (n, m,) ... Python's (n) is an int,
 * not a tuple, and is refused. */
static int parse_shape(struct cur *c, struct npy_header *h)
{
    if (!accept(c, '('))
        return bad(c, "shape is not a tuple");
    h->ndim = 0;
    skip_ws(c);
    if (accept(c, ')'))
        return NPY_OK;
    for (;;) {
        if (h->ndim == NPY_MAX_NDIM)
            return bad(c, "shape has more than 64 dimensions");
        int rc = parse_uint(c, &h->shape[h->ndim]);
        if (rc != NPY_OK)
            return rc;
        h->ndim++;
        skip_ws(c);
        if (accept(c, ',')) {
            skip_ws(c);
            if (accept(c, ')'))
                return NPY_OK;
            continue;
        }
        if (accept(c, ')'))
            return h->ndim == 1 ? bad(c, "shape (n) lacks the comma of a one-element tuple")
                                : NPY_OK;
        return bad(c, "expected ',' or ')' in the shape");
    }
}

/* Check the syntax of any literal NumPy uses in a structured descr
 * (strings, integers, lists and tuples of them) without keeping it. */
static int skip_literal(struct cur *c, int depth)
{
    if (depth > SKIP_DEPTH_MAX)
        return bad(c, "descr nests too deeply");
    int ch = peek(c);
    if (ch == '\'' || ch == '"') {
        c->p++;
        for (;;) {
            int d = peek(c);
            if (d < 0 || d == '\n')
                return bad(c, "unterminated string");
            c->p++;
            if (d == ch)
                return NPY_OK;
            if (d == '\\') {
                if (at_end(c))
                    return bad(c, "unterminated string");
                c->p++;
            }
        }
    }
    if (ch >= '0' && ch <= '9') {
        uint64_t v;
        return parse_uint(c, &v);
    }
    if (ch == '[' || ch == '(') {
        int close = ch == '[' ? ']' : ')';
        c->p++;
        skip_ws(c);
        while (!accept(c, close)) {
            int rc = skip_literal(c, depth + 1);
            if (rc != NPY_OK)
                return rc;
            skip_ws(c);
            if (accept(c, ','))
                skip_ws(c);
            else if (peek(c) != close)
                return bad(c, "expected ',' or a closing bracket in the descr");
        }
        return NPY_OK;
    }
    return bad(c, "unexpected value in the descr");
}

static int parse_descr(struct cur *c, struct npy_header *h)
{
    if (peek(c) == '[') {
        h->structured = true;
        h->descr[0] = '\0';
        return skip_literal(c, 0);
    }
    return parse_string(c, h->descr, sizeof h->descr);
}

int npy_parse(const uint8_t *buf, size_t len, struct npy_header *h, char *err, size_t errlen)
{
    int rc = npy_preamble(buf, len, h, err, errlen);
    if (rc != NPY_OK)
        return rc;
    if (h->data_offset > len)
        return fail(NPY_EFORMAT, err, errlen, "NPY file ends inside its header");
    size_t pre = h->major == 1 ? NPY_PREAMBLE_V1 : NPY_PREAMBLE_V2;
    struct cur c = {.p = buf + pre, .end = buf + h->data_offset, .err = err, .errlen = errlen};
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    skip_ws(&c);
    if (!accept(&c, '{'))
        return bad(&c, "the header is not a dict");
    for (;;) {
        skip_ws(&c);
        if (accept(&c, '}'))
            break;
        char key[32];
        if ((rc = parse_string(&c, key, sizeof key)) != NPY_OK)
            return rc;
        skip_ws(&c);
        if (!accept(&c, ':'))
            return bad(&c, "expected ':' after a key");
        skip_ws(&c);
        bool *seen;
        if (strcmp(key, "descr") == 0) {
            seen = &seen_descr;
            rc = parse_descr(&c, h);
        } else if (strcmp(key, "fortran_order") == 0) {
            seen = &seen_fortran;
            rc = parse_bool(&c, &h->fortran_order);
        } else if (strcmp(key, "shape") == 0) {
            seen = &seen_shape;
            rc = parse_shape(&c, h);
        } else {
            return bad(&c, "unexpected key (only descr, fortran_order and shape are allowed)");
        }
        if (rc != NPY_OK)
            return rc;
        if (*seen)
            return bad(&c, "repeated key");
        *seen = true;
        skip_ws(&c);
        if (accept(&c, ','))
            continue;
        if (accept(&c, '}'))
            break;
        return bad(&c, "expected ',' or '}' after a value");
    }
    skip_ws(&c);
    if (!at_end(&c))
        return bad(&c, "unexpected bytes after the dict");
    if (!seen_descr || !seen_fortran || !seen_shape)
        return bad(&c, "a key is missing (descr, fortran_order and shape are required)");
    return NPY_OK;
}

int npy_check_supported(const struct npy_header *h, uint64_t *itemsize, uint64_t *nbytes,
                        char *err, size_t errlen)
{
    if (h->structured)
        return fail(NPY_EUNSUPPORTED, err, errlen,
                    "structured dtypes (arrays with named fields) are not supported: a store "
                    "holds one plain dtype; save each field as its own array");
    if (strchr(h->descr, 'O'))
        return fail(NPY_EUNSUPPORTED, err, errlen,
                    "object arrays are not supported: they hold pointers to Python objects, "
                    "not data");
    if (h->fortran_order)
        return fail(NPY_EUNSUPPORTED, err, errlen,
                    "Fortran-order arrays are not supported: records must be contiguous rows; "
                    "save numpy.ascontiguousarray(a) instead");
    int64_t size = zr_dtype_itemsize(h->descr);
    if (size <= 0)
        return fail(NPY_EUNSUPPORTED, err, errlen, "dtype '%s' is not one loaderx stores",
                    h->descr);
    uint64_t total = (uint64_t)size;
    for (uint32_t d = 0; d < h->ndim; d++)
        if (__builtin_mul_overflow(total, h->shape[d], &total))
            return fail(NPY_EFORMAT, err, errlen, "malformed NPY header: the array size overflows");
    *itemsize = (uint64_t)size;
    *nbytes = total;
    return NPY_OK;
}

static int read_at(int fd, void *buf, size_t len, uint64_t off, char *err, size_t errlen)
{
    int r = pread_full(fd, buf, len, off);
    if (r < 0)
        return fail(NPY_EIO, err, errlen, "reading the NPY header: %s", strerror(errno));
    if (r > 0)
        return fail(NPY_EFORMAT, err, errlen, "NPY file ends inside its header");
    return NPY_OK;
}

int npy_read_header(int fd, uint64_t file_size, struct npy_header *h, uint64_t *itemsize,
                    uint64_t *nbytes, char *err, size_t errlen)
{
    uint8_t pre[NPY_PREAMBLE_V2];
    size_t n = file_size < sizeof pre ? (size_t)file_size : sizeof pre;
    int rc = read_at(fd, pre, n, 0, err, errlen);
    if (rc == NPY_OK)
        rc = npy_preamble(pre, n, h, err, errlen);
    if (rc != NPY_OK)
        return rc;
    if (h->data_offset > file_size)
        return fail(NPY_EFORMAT, err, errlen, "NPY file ends inside its header");
    uint8_t *buf = malloc((size_t)h->data_offset);
    if (!buf)
        return fail(NPY_EIO, err, errlen, "out of memory reading the NPY header");
    rc = read_at(fd, buf, (size_t)h->data_offset, 0, err, errlen);
    if (rc == NPY_OK)
        rc = npy_parse(buf, (size_t)h->data_offset, h, err, errlen);
    free(buf);
    if (rc == NPY_OK)
        rc = npy_check_supported(h, itemsize, nbytes, err, errlen);
    if (rc == NPY_OK && *nbytes > file_size - h->data_offset)
        rc = fail(NPY_EFORMAT, err, errlen,
                  "NPY file is truncated: its header promises %llu bytes of data, it holds %llu",
                  (unsigned long long)*nbytes,
                  (unsigned long long)(file_size - h->data_offset));
    return rc;
}

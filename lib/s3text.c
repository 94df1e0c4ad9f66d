/*
 * s3text.c: the text the S3 client writes and reads: request URLs, whose
 * encoding must be the one SigV4 signs (libcurl signs the path and query
 * as they are written, so they are written canonical here), and the XML
 * of S3's answers. That XML has a fixed schema whose elements below the
 * root carry no attributes and whose text has no markup, so finding an
 * element is finding its opening and closing tags; the text's entities
 * are decoded here. s3int.h has the contracts.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "s3int.h"

/* Make room for n more bytes and the NUL. */
static bool sbuf_room(struct zr_sbuf *b, size_t n)
{
    if (b->failed)
        return false;
    if (n < b->cap - b->len && b->p)
        return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len <= n) {
        if (cap > SIZE_MAX / 2) {
            b->failed = true;
            return false;
        }
        cap *= 2;
    }
    char *p = zr_realloc(b->p, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void zr_sbuf_add(struct zr_sbuf *b, const void *s, size_t n)
{
    if (!sbuf_room(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void zr_sbuf_str(struct zr_sbuf *b, const char *s)
{
    zr_sbuf_add(b, s, strlen(s));
}

void zr_sbuf_fmt(struct zr_sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if (!sbuf_room(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static bool unreserved(unsigned char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '.' || ch == '_' || ch == '~';
}

void zr_sbuf_uri(struct zr_sbuf *b, const char *s, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (unreserved(*p) || (keep_slash && *p == '/')) {
            zr_sbuf_add(b, p, 1);
        } else {
            char esc[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            zr_sbuf_add(b, esc, 3);
        }
    }
}

void zr_sbuf_xml(struct zr_sbuf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': zr_sbuf_str(b, "&amp;"); break;
        case '<': zr_sbuf_str(b, "&lt;"); break;
        case '>': zr_sbuf_str(b, "&gt;"); break;
        default: zr_sbuf_add(b, s, 1);
        }
    }
}

char *zr_sbuf_take(struct zr_sbuf *b)
{
    if (!b->failed && !b->p)
        sbuf_room(b, 0);
    if (b->failed) {
        zr_sbuf_free(b);
        return NULL;
    }
    b->p[b->len] = '\0';
    char *p = b->p;
    *b = (struct zr_sbuf){0};
    return p;
}

void zr_sbuf_free(struct zr_sbuf *b)
{
    zr_free(b->p);
    *b = (struct zr_sbuf){0};
}

/* The first occurrence of the n bytes of needle in [p, end), or NULL. */
static const char *find(const char *p, const char *end, const char *needle, size_t n)
{
    while ((size_t)(end - p) >= n) {
        const char *q = memchr(p, needle[0], (size_t)(end - p) - n + 1);
        if (!q)
            return NULL;
        if (memcmp(q, needle, n) == 0)
            return q;
        p = q + 1;
    }
    return NULL;
}

bool zr_xml_find(const char **pos, const char *end, const char *tag, const char **s,
                 const char **e)
{
    char open[64], close[64];
    int no = snprintf(open, sizeof open, "<%s>", tag);
    int nc = snprintf(close, sizeof close, "</%s>", tag);
    if (no <= 0 || (size_t)no >= sizeof open || nc <= 0 || (size_t)nc >= sizeof close)
        return false;
    const char *a = find(*pos, end, open, (size_t)no);
    if (!a)
        return false;
    const char *b = find(a + no, end, close, (size_t)nc);
    if (!b)
        return false;
    *s = a + no;
    *e = b;
    *pos = b + nc;
    return true;
}

/* Append code point cp as UTF-8; false if it is not a character. */
static bool put_utf8(struct zr_sbuf *b, unsigned long cp)
{
    unsigned char u[4];
    size_t n;
    if (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
        return false;
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (unsigned char)(0xc0 | cp >> 6);
        u[1] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (unsigned char)(0xe0 | cp >> 12);
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (unsigned char)(0xf0 | cp >> 18);
        u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    zr_sbuf_add(b, u, n);
    return true;
}

/* Decode the entity [s, e) (without '&' and ';') into b. */
static bool entity(struct zr_sbuf *b, const char *s, const char *e)
{
    static const struct {
        const char *name;
        char ch;
    } named[] = {{"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
    size_t n = (size_t)(e - s);
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        if (strlen(named[i].name) == n && memcmp(s, named[i].name, n) == 0) {
            zr_sbuf_add(b, &named[i].ch, 1);
            return true;
        }
    }
    if (n < 2 || s[0] != '#')
        return false;
    s++;
    int base = 10;
    if (*s == 'x') {
        base = 16;
        s++;
    }
    if (s == e || e - s > 8)
        return false;
    unsigned long cp = 0;
    for (; s < e; s++) {
        int d;
        if (*s >= '0' && *s <= '9')
            d = *s - '0';
        else if (base == 16 && *s >= 'a' && *s <= 'f')
            d = *s - 'a' + 10;
        else if (base == 16 && *s >= 'A' && *s <= 'F')
            d = *s - 'A' + 10;
        else
            return false;
        cp = cp * (unsigned long)base + (unsigned long)d;
    }
    return put_utf8(b, cp);
}

int zr_xml_text(const char *s, const char *e, const char *what, char **out)
{
    struct zr_sbuf b = {0};
    *out = NULL;
    while (s < e) {
        const char *amp = memchr(s, '&', (size_t)(e - s));
        const char *stop = amp ? amp : e;
        if (memchr(s, '\0', (size_t)(stop - s))) {
            zr_sbuf_free(&b);
            return zr_err(ZR_EIO, "%s: a NUL byte in the server's XML", what);
        }
        zr_sbuf_add(&b, s, (size_t)(stop - s));
        if (!amp)
            break;
        const char *semi = memchr(amp, ';', (size_t)(e - amp));
        if (!semi || semi - amp > 12 || !entity(&b, amp + 1, semi)) {
            zr_sbuf_free(&b);
            return zr_err(ZR_EIO, "%s: a malformed entity in the server's XML", what);
        }
        s = semi + 1;
    }
    *out = zr_sbuf_take(&b);
    if (!*out)
        return zr_err(ZR_ENOMEM, "%s: decoding the server's XML", what);
    return 0;
}

/*
 * s3int.h: what the modules of the S3 client share and nobody else uses:
 * the configuration as the AWS tools read it (s3conf.c), and the text
 * helpers for URLs and the fixed XML of S3's answers (s3text.c).
 */
#ifndef ZR_S3INT_H
#define ZR_S3INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where to send requests and how to sign them. Every string is malloc'd;
 * key_id, secret and token are NULL for unsigned requests (token also
 * when the credentials have none). */
struct zr_s3_conf {
    char *endpoint; /* "http(s)://host[:port][/path]", without a trailing '/' */
    char *region;
    char *key_id;
    char *secret;
    char *token;
};

/* Read the configuration from the environment and the profile files.
 * ZR_EINVAL (naming the variable or file, never a credential) for a
 * malformed one. conf is left empty on failure. */
int zr_s3_conf_load(struct zr_s3_conf *conf);

/* Free conf's strings, wiping the secret ones first. Accepts an empty
 * conf. */
void zr_s3_conf_free(struct zr_s3_conf *conf);

/* Split "s3://bucket[/prefix]" into a malloc'd bucket and prefix (""
 * when none; no leading or trailing '/'). ZR_EINVAL when url is not
 * such an address. */
int zr_s3_parse_url(const char *url, char **bucket, char **prefix);

/* A growing NUL-terminated string. An allocation failure is remembered
 * in failed and makes every later call do nothing, so that a caller
 * checks once, at the end. */
struct zr_sbuf {
    char *p;
    size_t len;
    size_t cap;
    bool failed;
};

void zr_sbuf_add(struct zr_sbuf *b, const void *s, size_t n);
void zr_sbuf_str(struct zr_sbuf *b, const char *s);
void zr_sbuf_fmt(struct zr_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s percent-encoded the way SigV4 canonicalises S3 paths and queries:
 * every byte but A-Z a-z 0-9 - . _ ~ (and '/', when keep_slash) as %XX. */
void zr_sbuf_uri(struct zr_sbuf *b, const char *s, bool keep_slash);
/* s with & < > escaped, for an XML element's text. */
void zr_sbuf_xml(struct zr_sbuf *b, const char *s);
/* The string, which the caller frees with zr_free; NULL after an
 * allocation failure (the buffer is freed either way). */
char *zr_sbuf_take(struct zr_sbuf *b);
void zr_sbuf_free(struct zr_sbuf *b);

/* Find the next element <tag>text</tag> in [*pos, end) of a document
 * whose elements carry no attributes (S3's answers below their root):
 * on success the text is [*s, *e) and *pos moves past the element. */
bool zr_xml_find(const char **pos, const char *end, const char *tag, const char **s,
                 const char **e);

/* The text [s, e) with its entities (&amp; &lt; &gt; &quot; &apos; &#N;
 * &#xH;) decoded, as a malloc'd string. ZR_EIO naming what for a
 * malformed entity or a NUL, ZR_ENOMEM. */
int zr_xml_text(const char *s, const char *e, const char *what, char **out);

#endif

/*
 * s3int.h: what the modules of the S3 client share and nobody else uses:
 * the configuration as the AWS tools read it (s3conf.c), the text
 * helpers for URLs and the fixed XML of S3's answers (s3text.c), and the
 * client, its sessions and the request engine (s3.c, s3run.c).
 */
#ifndef ZR_S3INT_H
#define ZR_S3INT_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "s3.h"

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

/* The client (s3.c), its sessions and the request engine (s3run.c),
 * which s3list.c and s3upload.c use too. */

/* An operation's finish asks for another attempt with this (with x->why
 * set), besides 0 and an error code. */
#define ZR_S3_RETRY 1

/* A multi handle, its connections and its easy handles: used by one call
 * at a time (s3run.c, rule 2). */
struct session {
    CURLM *multi;
    CURL **easy;
    unsigned neasy;
    long maxconnects;
    struct session *next;
};

struct zr_s3 {
    char *url; /* "s3://bucket[/prefix]" */
    char *bucket;
    char *prefix; /* "" or without slashes at either end */
    struct zr_s3_conf conf;
    char *sigv4; /* "aws:amz:<region>:s3", NULL for unsigned requests */
    struct curl_slist *hdrs;
    struct curl_slist *xml_hdrs;
    struct curl_slist *new_hdrs; /* hdrs and If-None-Match: * */
    CURLSH *share;
    pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
    bool locks_made;
    pthread_mutex_t pool_lock;
    struct session *idle;
    unsigned inflight;
    long timeout;
    _Atomic uint64_t requests, connects, retries;
};

enum method { M_GET, M_PUT, M_POST, M_DELETE };

/* One transfer slot of a run: its job's request and the current
 * attempt's answer. */
struct xfer {
    CURL *easy;
    bool held;    /* holds a job */
    bool active;  /* in the multi handle */
    bool waiting; /* for its retry's time */
    size_t job;
    unsigned attempt;
    uint64_t due; /* when to retry, monotonic ns */
    char why[CURL_ERROR_SIZE + 64]; /* what went wrong with the last attempt */

    /* The request, set by the operation's start. */
    enum method method;
    char *url;  /* encoded, with the query */
    char *disp; /* endpoint/bucket/key, for messages */
    const struct curl_slist *hdrs;
    const uint8_t *body; /* the body from memory, or */
    int fd;              /* from this file (-1: none) */
    uint64_t body_off;
    uint64_t body_len;
    bool ranged; /* write the answer to `to` */
    uint8_t *to;
    uint64_t off;
    uint64_t len;
    size_t resp_max; /* else keep up to this many bytes in resp */

    /* The answer of the current attempt. */
    long status;
    uint64_t body_pos;
    int read_errno;
    bool read_short;
    uint64_t got;  /* bytes placed in `to` */
    uint64_t seen; /* bytes of a 200's body */
    bool early;    /* the range is complete and the rest of a 200 was refused */
    bool too_long;
    bool resp_over;
    bool cr_seen; /* a Content-Range header, which starts at cr_start */
    uint64_t cr_start;
    char etag[256];
    char range[48];
    struct zr_sbuf resp;
    struct zr_sbuf errbody;
    char errbuf[CURL_ERROR_SIZE];
};

/* An operation: njobs requests made by start and judged by finish. */
struct op {
    struct zr_s3 *c;
    size_t njobs;
    int (*start)(struct op *op, struct xfer *x);
    int (*finish)(struct op *op, struct xfer *x);
    void *arg;
};

/* Take an idle session of the client's pool with at least n easy
 * handles, or make one; give it back with zr_s3_session_put. */
int zr_s3_session_get(struct zr_s3 *c, unsigned n, struct session **out);
void zr_s3_session_put(struct zr_s3 *c, struct session *s);
void zr_s3_session_free(struct session *s);

/* Set x's url and disp for key (NULL: the bucket itself) and query (NULL:
 * none; written canonical by the caller). */
int zr_s3_target(struct zr_s3 *c, struct xfer *x, const char *key, const char *query);

/* The object key of name: the client's prefix joined to it (malloc'd;
 * NULL with ZR_ENOMEM set). */
char *zr_s3_full_key(struct zr_s3 *c, const char *name);

/* Make op's requests in session s, up to inflight at once, each retried
 * on its own. Returns 0 once every job is done, or the first error with
 * no transfer left running. zr_s3_run_op does it in a session of the
 * pool. */
int zr_s3_run(struct op *op, struct session *s, unsigned inflight);
int zr_s3_run_op(struct op *op, unsigned inflight);

/* The bytes per part of zr_s3_put_file's multipart upload of a file of
 * size bytes, or 0 when it is one PUT (s3upload.c; s3etag.c computes the
 * ETag of the same parts). */
uint64_t zr_s3_part_size(uint64_t size);

/* S3's error code (<Code>...</Code>) from an answer's body, or "". */
void zr_s3_code(const struct zr_sbuf *body, char *out, size_t n);

/* The error for an answer that is not the one expected: ZR_EACCESS for
 * 403, ZR_ENOTSTORE for 404, ZR_EIO for others, naming the request. */
int zr_s3_http_fail(const struct xfer *x);

/* Whether a 404 said the bucket is missing (rather than the key). */
bool zr_s3_no_bucket(const struct xfer *x);

#endif

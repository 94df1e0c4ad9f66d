/*
 * s3.c: the S3 client (s3.h): requests to an S3-compatible object store
 * through libcurl, many at once, retried, with connections kept alive.
 * The configuration is read by s3conf.c, URLs and XML are written and
 * read by s3text.c.
 *
 * Every call runs its requests through one engine (run()): a job list,
 * up to `inflight` transfers in a curl multi handle, each attempt judged
 * when it ends. The rules it keeps:
 *
 *  1. Requests are signed by libcurl (CURLOPT_AWS_SIGV4) with the
 *     payload declared UNSIGNED-PAYLOAD in x-amz-content-sha256, which
 *     libcurl 7.88 neither sends nor derives for uploads but S3 (and
 *     radosgw) require. libcurl signs the path and the query as written,
 *     without sorting or re-encoding them, so they are written here in
 *     the canonical form: every byte but the unreserved ones
 *     percent-encoded ('/' kept in paths), parameters sorted by name,
 *     each with its '='.
 *  2. Connections are kept alive across calls by sessions: a session is
 *     a multi handle (whose connection cache holds the connections) with
 *     its easy handles. A call takes an idle session from the client's
 *     pool, or makes one, and gives it back when it returns, so calls on
 *     several threads use different sessions and a thread's next call
 *     reuses the connections of its last. libcurl 7.88 documents sharing
 *     a connection cache between concurrent threads (CURLSH with
 *     CURL_LOCK_DATA_CONNECT) as unsafe, so only the DNS cache and the
 *     TLS sessions are shared, through a CURLSH with one mutex each.
 *  3. An attempt that fails with a broken, refused or timed-out
 *     connection, 5xx or 429 is retried after 0.2, 0.6 and 1.8 s (with
 *     jitter), ATTEMPTS in all; 403, 404, 416 and other answers are
 *     final. A stalled transfer (under 1 byte/s) ends after the timeout,
 *     10 s or LOADERX_S3_TIMEOUT; a connection attempt after half of it.
 *     A dead server is therefore an error within seconds, not a hang.
 *  4. Ranged GETs write straight into the caller's memory and must give
 *     exactly the bytes asked for: a 206 for another start or with more
 *     bytes is an error; a 200 (a server that ignores Range) is read up
 *     to the range's end and cut; fewer bytes mean the object is shorter
 *     than the store says (ZR_ECORRUPT).
 *  5. Messages name the request (method and endpoint/bucket/key) and the
 *     HTTP status with S3's error code, or libcurl's error text; never
 *     the credentials.
 */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "internal.h"
#include "io.h"
#include "s3.h"
#include "s3int.h"

#define ATTEMPTS 4
#define BACKOFF_MS 200 /* the first retry's delay; each next one is 3 times longer */
#define DEFAULT_INFLIGHT 32
#define MAX_INFLIGHT 1024
#define DEFAULT_TIMEOUT 10 /* seconds a transfer may stall */
#define MAX_TIMEOUT 3600
/* A file up to SINGLE_PUT_MAX is one PUT, a larger one parts of
 * PART_SIZE (doubled until there are at most MAX_PARTS, S3's limit). */
#define SINGLE_PUT_MAX (16u << 20)
#define PART_SIZE (16u << 20)
#define MAX_PARTS 10000
#define ERRBODY_MAX 4096        /* the part of an error's body kept for its <Code> */
#define SMALL_ANSWER_MAX (1u << 20) /* an answer to Create/CompleteMultipartUpload */
#define LIST_PAGE_MAX (64u << 20)   /* a page of 1000 keys of up to 1 KiB, escaped */
#define RETRY 1                     /* judge()'s verdict besides 0 and an error */

/* A multi handle, its connections and its easy handles: used by one call
 * at a time (rule 2). */
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
static const char *const method_names[] = {"GET", "PUT", "POST", "DELETE"};

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

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

bool zr_s3_is_url(const char *path)
{
    return path && strncmp(path, "s3://", 5) == 0;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void share_lock(CURL *h, curl_lock_data d, curl_lock_access a, void *arg)
{
    struct zr_s3 *c = arg;
    if ((unsigned)d < CURL_LOCK_DATA_LAST)
        pthread_mutex_lock(&c->locks[d]);
}

static void share_unlock(CURL *h, curl_lock_data d, void *arg)
{
    struct zr_s3 *c = arg;
    if ((unsigned)d < CURL_LOCK_DATA_LAST)
        pthread_mutex_unlock(&c->locks[d]);
}

/* An environment variable holding a whole number in [lo, hi], or dflt
 * when it is unset. */
static int env_number(const char *name, long lo, long hi, long dflt, long *out)
{
    const char *v = getenv(name);
    *out = dflt;
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < lo || n > hi)
        return zr_err(ZR_EINVAL, "%s=\"%s\" is not a number from %ld to %ld", name, v, lo, hi);
    *out = n;
    return 0;
}

int zr_s3_open(struct zr_s3 **out, const char *url)
{
    *out = NULL;
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK)
        return zr_err(ZR_EIO, "initialising libcurl: %s", curl_easy_strerror(global_rc));
    if (!url)
        return zr_err(ZR_EINVAL, "no s3:// address");
    struct zr_s3 *c = zr_calloc(1, sizeof *c);
    if (!c)
        return zr_err(ZR_ENOMEM, "opening %s", url);
    long inflight = 0;
    int rc = zr_s3_parse_url(url, &c->bucket, &c->prefix);
    if (rc == 0)
        rc = env_number("LOADERX_S3_CONNECTIONS", 1, MAX_INFLIGHT, DEFAULT_INFLIGHT, &inflight);
    if (rc == 0)
        rc = env_number("LOADERX_S3_TIMEOUT", 1, MAX_TIMEOUT, DEFAULT_TIMEOUT, &c->timeout);
    if (rc == 0)
        rc = zr_s3_conf_load(&c->conf);
    if (rc != 0)
        goto fail;
    c->inflight = (unsigned)inflight;

    struct zr_sbuf b = {0};
    zr_sbuf_fmt(&b, "s3://%s%s%s", c->bucket, *c->prefix ? "/" : "", c->prefix);
    c->url = zr_sbuf_take(&b);
    if (c->conf.key_id) {
        zr_sbuf_fmt(&b, "aws:amz:%s:s3", c->conf.region);
        c->sigv4 = zr_sbuf_take(&b);
    }
    /* The token goes in a header, which libcurl copies into each request
     * but never into a message. */
    struct curl_slist *h = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (h && c->conf.token) {
        zr_sbuf_fmt(&b, "x-amz-security-token: %s", c->conf.token);
        char *line = zr_sbuf_take(&b);
        struct curl_slist *h2 = line ? curl_slist_append(h, line) : NULL;
        if (line) {
            explicit_bzero(line, strlen(line));
            zr_free(line);
        }
        if (!h2) {
            curl_slist_free_all(h);
            h = NULL;
        }
    }
    c->hdrs = h;
    /* The XML bodies get their own type, in a copy of the list (a
     * curl_slist's nodes cannot be shared). */
    if (h) {
        struct curl_slist *x = NULL, *y = NULL;
        for (struct curl_slist *q = h; q; q = q->next) {
            if (!(y = curl_slist_append(x, q->data)))
                break;
            x = y;
        }
        y = y ? curl_slist_append(x, "Content-Type: application/xml") : NULL;
        if (!y)
            curl_slist_free_all(x);
        c->xml_hdrs = y;
    }
    if (!c->url || (c->conf.key_id && !c->sigv4) || !c->hdrs || !c->xml_hdrs) {
        rc = zr_err(ZR_ENOMEM, "opening %s", url);
        goto fail;
    }

    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&c->locks[i], NULL);
    pthread_mutex_init(&c->pool_lock, NULL);
    c->locks_made = true;
    c->share = curl_share_init();
    if (!c->share || curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock) ||
        curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock) ||
        curl_share_setopt(c->share, CURLSHOPT_USERDATA, c) ||
        curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) ||
        curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION)) {
        rc = zr_err(ZR_ENOMEM, "opening %s: making libcurl's share handle", url);
        goto fail;
    }
    *out = c;
    return 0;

fail:
    zr_s3_close(c);
    return rc;
}

static void session_free(struct session *s)
{
    if (!s)
        return;
    if (s->multi)
        curl_multi_cleanup(s->multi);
    for (unsigned i = 0; i < s->neasy; i++)
        curl_easy_cleanup(s->easy[i]);
    zr_free(s->easy);
    zr_free(s);
}

void zr_s3_close(struct zr_s3 *c)
{
    if (!c)
        return;
    while (c->idle) {
        struct session *s = c->idle;
        c->idle = s->next;
        session_free(s);
    }
    if (c->share)
        curl_share_cleanup(c->share);
    if (c->locks_made) {
        for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
            pthread_mutex_destroy(&c->locks[i]);
        pthread_mutex_destroy(&c->pool_lock);
    }
    curl_slist_free_all(c->hdrs);
    curl_slist_free_all(c->xml_hdrs);
    zr_s3_conf_free(&c->conf);
    zr_free(c->sigv4);
    zr_free(c->url);
    zr_free(c->bucket);
    zr_free(c->prefix);
    zr_free(c);
}

const char *zr_s3_url(const struct zr_s3 *c)
{
    return c->url;
}

void zr_s3_stats(const struct zr_s3 *c, struct zr_s3_stats *st)
{
    st->requests = atomic_load(&c->requests);
    st->connects = atomic_load(&c->connects);
    st->retries = atomic_load(&c->retries);
}

/* Take an idle session with at least n easy handles, or make one. */
static int session_get(struct zr_s3 *c, unsigned n, struct session **out)
{
    pthread_mutex_lock(&c->pool_lock);
    struct session *s = c->idle;
    if (s)
        c->idle = s->next;
    pthread_mutex_unlock(&c->pool_lock);
    if (!s) {
        s = zr_calloc(1, sizeof *s);
        if (!s || !(s->multi = curl_multi_init())) {
            session_free(s);
            return zr_err(ZR_ENOMEM, "%s: making a libcurl multi handle", c->url);
        }
    }
    s->next = NULL;
    if (s->neasy < n) {
        CURL **e = zr_realloc(s->easy, n * sizeof *e);
        if (!e)
            goto nomem;
        s->easy = e;
        while (s->neasy < n) {
            if (!(s->easy[s->neasy] = curl_easy_init()))
                goto nomem;
            s->neasy++;
        }
    }
    /* Keep every connection a run may open, so that the next call finds
     * them (libcurl's default keeps 4 per easy handle in the multi). */
    if (s->maxconnects < (long)n * 2) {
        s->maxconnects = ZR_MAX((long)n * 2, 64);
        curl_multi_setopt(s->multi, CURLMOPT_MAXCONNECTS, s->maxconnects);
    }
    *out = s;
    return 0;
nomem:
    session_free(s);
    return zr_err(ZR_ENOMEM, "%s: making libcurl easy handles", c->url);
}

static void session_put(struct zr_s3 *c, struct session *s)
{
    pthread_mutex_lock(&c->pool_lock);
    s->next = c->idle;
    c->idle = s;
    pthread_mutex_unlock(&c->pool_lock);
}

/* Set x's url and disp for key (NULL: the bucket itself) and query (NULL:
 * none). */
static int target(struct zr_s3 *c, struct xfer *x, const char *key, const char *query)
{
    struct zr_sbuf u = {0}, d = {0};
    zr_sbuf_fmt(&u, "%s/", c->conf.endpoint);
    zr_sbuf_uri(&u, c->bucket, false);
    zr_sbuf_fmt(&d, "%s/%s", c->conf.endpoint, c->bucket);
    if (key) {
        zr_sbuf_str(&u, "/");
        zr_sbuf_uri(&u, key, true);
        zr_sbuf_fmt(&d, "/%s", key);
    }
    if (query)
        zr_sbuf_fmt(&u, "?%s", query);
    x->url = zr_sbuf_take(&u);
    x->disp = zr_sbuf_take(&d);
    if (!x->url || !x->disp)
        return zr_err(ZR_ENOMEM, "%s: making a request", c->url);
    return 0;
}

/* The object key of name: the client's prefix joined to it. */
static char *full_key(struct zr_s3 *c, const char *name)
{
    struct zr_sbuf b = {0};
    zr_sbuf_fmt(&b, "%s%s%s", c->prefix, *c->prefix ? "/" : "", name);
    char *k = zr_sbuf_take(&b);
    if (!k)
        zr_err(ZR_ENOMEM, "%s: naming %s", c->url, name);
    return k;
}

/* Forget x's job. */
static void xfer_clear(struct xfer *x)
{
    CURL *e = x->easy;
    zr_free(x->url);
    zr_free(x->disp);
    zr_sbuf_free(&x->resp);
    zr_sbuf_free(&x->errbody);
    memset(x, 0, sizeof *x);
    x->easy = e;
    x->fd = -1;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *arg)
{
    struct xfer *x = arg;
    size_t n = size * nmemb;
    if (x->status == 0)
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
    if (x->status < 200 || x->status > 299) {
        if (x->errbody.len < ERRBODY_MAX)
            zr_sbuf_add(&x->errbody, p, ZR_MIN(n, ERRBODY_MAX - x->errbody.len));
        return n;
    }
    if (!x->ranged) {
        if (n > x->resp_max - x->resp.len) {
            x->resp_over = true;
            return 0;
        }
        zr_sbuf_add(&x->resp, p, n);
        return x->resp.failed ? 0 : n;
    }
    if (x->status == 206) {
        if (n > x->len - x->got) {
            x->too_long = true;
            return 0;
        }
        memcpy(x->to + x->got, p, n);
        x->got += n;
        return n;
    }
    /* A 200 carries the whole object: keep [off, off + len) of it. */
    uint64_t a = x->seen, b = a + n;
    uint64_t lo = ZR_MAX(a, x->off), hi = ZR_MIN(b, x->off + x->len);
    x->seen = b;
    if (lo < hi) {
        memcpy(x->to + (lo - x->off), p + (lo - a), hi - lo);
        x->got += hi - lo;
    }
    if (x->got == x->len) {
        x->early = true;
        return 0;
    }
    return n;
}

static bool header_is(const char *line, size_t n, const char *name, const char **val)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return false;
    *val = line + k + 1;
    return true;
}

static size_t on_header(char *line, size_t size, size_t nmemb, void *arg)
{
    struct xfer *x = arg;
    size_t n = size * nmemb;
    const char *v;
    if (n >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        /* A new answer (after a 100 Continue): forget the last one's. */
        x->etag[0] = '\0';
        x->cr_seen = false;
    } else if (header_is(line, n, "etag", &v)) {
        const char *e = line + n;
        while (v < e && (*v == ' ' || *v == '\t'))
            v++;
        while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if ((size_t)(e - v) < sizeof x->etag) {
            memcpy(x->etag, v, (size_t)(e - v));
            x->etag[e - v] = '\0';
        }
    } else if (header_is(line, n, "content-range", &v)) {
        char buf[96];
        size_t k = ZR_MIN((size_t)(line + n - v), sizeof buf - 1);
        memcpy(buf, v, k);
        buf[k] = '\0';
        unsigned long long start;
        if (sscanf(buf, " bytes %llu-", &start) == 1) {
            x->cr_seen = true;
            x->cr_start = start;
        }
    }
    return n;
}

static size_t on_read(char *buf, size_t size, size_t nmemb, void *arg)
{
    struct xfer *x = arg;
    size_t n = (size_t)ZR_MIN((uint64_t)size * nmemb, x->body_len - x->body_pos);
    if (n == 0)
        return 0;
    if (x->fd < 0) {
        memcpy(buf, x->body + x->body_pos, n);
    } else {
        ssize_t r;
        do
            r = zr_io.pread(x->fd, buf, n, (off_t)(x->body_off + x->body_pos));
        while (r < 0 && errno == EINTR);
        if (r < 0) {
            x->read_errno = errno;
            return CURL_READFUNC_ABORT;
        }
        if (r == 0) {
            x->read_short = true;
            return CURL_READFUNC_ABORT;
        }
        n = (size_t)r;
    }
    x->body_pos += n;
    return n;
}

static int on_seek(void *arg, curl_off_t off, int origin)
{
    struct xfer *x = arg;
    if (origin != SEEK_SET || off < 0 || (uint64_t)off > x->body_len)
        return CURL_SEEKFUNC_FAIL;
    x->body_pos = (uint64_t)off;
    return CURL_SEEKFUNC_OK;
}

/* Set up x's easy handle for an attempt at its request and add it to the
 * multi handle. */
static int launch(struct zr_s3 *c, struct session *s, struct xfer *x)
{
    CURL *e = x->easy;
    x->status = 0;
    x->body_pos = 0;
    x->read_errno = 0;
    x->read_short = false;
    x->got = x->seen = 0;
    x->early = x->too_long = x->resp_over = x->cr_seen = false;
    x->etag[0] = '\0';
    x->errbuf[0] = '\0';
    zr_sbuf_free(&x->resp);
    zr_sbuf_free(&x->errbody);

    curl_easy_reset(e);
    bool bad = false;
#define SET(opt, val) (bad |= curl_easy_setopt(e, opt, val) != CURLE_OK)
    SET(CURLOPT_URL, x->url);
    SET(CURLOPT_PRIVATE, x);
    SET(CURLOPT_SHARE, c->share);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_ERRORBUFFER, x->errbuf);
#if LIBCURL_VERSION_NUM >= 0x075500
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
#else
    SET(CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    /* The key is sent as written: "a/../b" is a key, not a path to
     * simplify. */
    SET(CURLOPT_PATH_AS_IS, 1L);
    SET(CURLOPT_HTTPHEADER, x->hdrs ? x->hdrs : c->hdrs);
    if (c->sigv4) {
        SET(CURLOPT_AWS_SIGV4, c->sigv4);
        SET(CURLOPT_USERNAME, c->conf.key_id);
        SET(CURLOPT_PASSWORD, c->conf.secret);
    }
    SET(CURLOPT_CONNECTTIMEOUT, (c->timeout + 1) / 2);
    SET(CURLOPT_LOW_SPEED_LIMIT, 1L);
    SET(CURLOPT_LOW_SPEED_TIME, c->timeout);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, x);
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, x);
    switch (x->method) {
    case M_GET:
        if (x->ranged) {
            snprintf(x->range, sizeof x->range, "%llu-%llu", (unsigned long long)x->off,
                     (unsigned long long)(x->off + x->len - 1));
            SET(CURLOPT_RANGE, x->range);
        }
        break;
    case M_PUT:
        SET(CURLOPT_UPLOAD, 1L);
        SET(CURLOPT_INFILESIZE_LARGE, (curl_off_t)x->body_len);
        break;
    case M_POST:
        SET(CURLOPT_POST, 1L);
        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body_len);
        break;
    case M_DELETE:
        SET(CURLOPT_CUSTOMREQUEST, "DELETE");
        break;
    }
    if (x->method == M_PUT || x->method == M_POST) {
        SET(CURLOPT_READFUNCTION, on_read);
        SET(CURLOPT_READDATA, x);
        SET(CURLOPT_SEEKFUNCTION, on_seek);
        SET(CURLOPT_SEEKDATA, x);
    }
#undef SET
    if (bad)
        return zr_err(ZR_ENOMEM, "%s %s: setting up the request", method_names[x->method],
                      x->disp);
    CURLMcode mc = curl_multi_add_handle(s->multi, e);
    if (mc != CURLM_OK)
        return zr_err(ZR_EIO, "%s %s: %s", method_names[x->method], x->disp,
                      curl_multi_strerror(mc));
    x->active = true;
    return 0;
}

/* S3's error code from an error's body (<Code>...</Code>), or "". */
static void s3_code(const struct xfer *x, const struct zr_sbuf *body, char *out, size_t n)
{
    const char *pos = body->p, *s, *e;
    out[0] = '\0';
    if (pos && zr_xml_find(&pos, pos + body->len, "Code", &s, &e)) {
        size_t k = ZR_MIN((size_t)(e - s), n - 1);
        for (size_t i = 0; i < k; i++)
            out[i] = (s[i] >= 0x21 && s[i] < 0x7f) ? s[i] : '?';
        out[k] = '\0';
    }
}

/* The error for an answer that is not the one expected: ZR_EACCESS for
 * 403, ZR_ENOTSTORE for 404, ZR_EIO for others. */
static int http_fail(const struct xfer *x)
{
    char code[64];
    s3_code(x, &x->errbody, code, sizeof code);
    int zc = x->status == 403 ? ZR_EACCESS : x->status == 404 ? ZR_ENOTSTORE : ZR_EIO;
    return zr_err(zc, "%s %s: HTTP %ld%s%s", method_names[x->method], x->disp, x->status,
                  *code ? " " : "", code);
}

/* Whether a 404 said the bucket is missing (as opposed to the key). */
static bool no_bucket(const struct xfer *x)
{
    char code[64];
    s3_code(x, &x->errbody, code, sizeof code);
    return strcmp(code, "NoSuchBucket") == 0;
}

static bool retryable(CURLcode res)
{
    switch (res) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return true;
    default:
        return false;
    }
}

/* The verdict on an attempt that ended with res: 0 (the job is done),
 * RETRY (with x->why set) or an error. */
static int judge(struct op *op, struct xfer *x, CURLcode res)
{
    const char *m = method_names[x->method];
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
    if (x->read_errno)
        return zr_err_sys(x->read_errno, "reading the file to upload to %s", x->disp);
    if (x->read_short)
        return zr_err(ZR_EIO, "uploading to %s: the file ended before byte %llu", x->disp,
                      (unsigned long long)(x->body_off + x->body_len));
    if (x->too_long)
        return zr_err(ZR_EIO, "%s %s: HTTP 206 with more than the %llu bytes asked for", m,
                      x->disp, (unsigned long long)x->len);
    if (x->resp_over)
        return zr_err(ZR_ECORRUPT, "%s %s: the answer is larger than the %zu bytes allowed", m,
                      x->disp, x->resp_max);
    if (x->resp.failed || x->errbody.failed)
        return zr_err(ZR_ENOMEM, "%s %s: keeping the answer", m, x->disp);
    if (res != CURLE_OK && !(res == CURLE_WRITE_ERROR && x->early)) {
        const char *text = x->errbuf[0] ? x->errbuf : curl_easy_strerror(res);
        if (retryable(res)) {
            snprintf(x->why, sizeof x->why, "%s", text);
            return RETRY;
        }
        return zr_err(ZR_EIO, "%s %s: %s", m, x->disp, text);
    }
    if (x->status >= 500 || x->status == 429) {
        char code[64];
        s3_code(x, &x->errbody, code, sizeof code);
        snprintf(x->why, sizeof x->why, "HTTP %ld%s%s", x->status, *code ? " " : "", code);
        return RETRY;
    }
    return op->finish(op, x);
}

/* Make `op`'s requests, up to inflight at once, retrying each on its own
 * (rule 3). Returns 0 once every job is done, or the first error with no
 * transfer left running. */
static int run(struct op *op, struct session *s, unsigned inflight)
{
    struct zr_s3 *c = op->c;
    if (op->njobs == 0)
        return 0;
    unsigned nx = (unsigned)ZR_MIN((size_t)inflight, op->njobs);
    struct xfer *xs = zr_calloc(nx, sizeof *xs);
    if (!xs)
        return zr_err(ZR_ENOMEM, "%s: making %u transfers", c->url, nx);
    for (unsigned i = 0; i < nx; i++) {
        xs[i].easy = s->easy[i];
        xs[i].fd = -1;
    }
    size_t next = 0, held = 0;
    int rc = 0;
    uint64_t seed = now_ns() ^ (uintptr_t)xs;
    for (;;) {
        for (unsigned i = 0; i < nx && next < op->njobs; i++) {
            struct xfer *x = &xs[i];
            if (x->held)
                continue;
            x->held = true;
            x->job = next++;
            held++;
            rc = op->start(op, x);
            if (rc == 0)
                rc = launch(c, s, x);
            if (rc != 0)
                goto out;
        }
        if (held == 0)
            break;
        int running = 0;
        CURLMcode mc = curl_multi_perform(s->multi, &running);
        if (mc != CURLM_OK) {
            rc = zr_err(ZR_EIO, "%s: %s", c->url, curl_multi_strerror(mc));
            goto out;
        }
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(s->multi, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            CURL *e = msg->easy_handle;
            CURLcode res = msg->data.result;
            struct xfer *x = NULL;
            curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&x);
            long conns = 0;
            curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &conns);
            atomic_fetch_add(&c->connects, (uint64_t)conns);
            atomic_fetch_add(&c->requests, 1);
            curl_multi_remove_handle(s->multi, e);
            x->active = false;
            rc = judge(op, x, res);
            if (rc == RETRY) {
                rc = 0;
                if (++x->attempt >= ATTEMPTS) {
                    rc = zr_err(ZR_EIO, "%s %s: %s (%d attempts)", method_names[x->method],
                                x->disp, x->why, ATTEMPTS);
                    goto out;
                }
                atomic_fetch_add(&c->retries, 1);
                uint64_t ms = BACKOFF_MS;
                for (unsigned k = 1; k < x->attempt; k++)
                    ms *= 3;
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                ms = ms * 3 / 4 + seed % (ms / 2 + 1);
                x->waiting = true;
                x->due = now_ns() + ms * 1000000u;
            } else if (rc != 0) {
                goto out;
            } else {
                xfer_clear(x);
                held--;
            }
        }
        uint64_t now = now_ns(), wake = UINT64_MAX;
        for (unsigned i = 0; i < nx; i++) {
            struct xfer *x = &xs[i];
            if (!x->waiting)
                continue;
            if (x->due <= now) {
                x->waiting = false;
                rc = launch(c, s, x);
                if (rc != 0)
                    goto out;
                running++;
            } else {
                wake = ZR_MIN(wake, x->due);
            }
        }
        /* A finished transfer's slot takes the next job at once. */
        if (held == 0 || (held < nx && next < op->njobs))
            continue;
        int ms = 1000;
        if (wake != UINT64_MAX)
            ms = (int)ZR_MIN((wake - now) / 1000000u + 1, 1000u);
        mc = curl_multi_poll(s->multi, NULL, 0, ms, NULL);
        if (mc != CURLM_OK) {
            rc = zr_err(ZR_EIO, "%s: %s", c->url, curl_multi_strerror(mc));
            goto out;
        }
    }
out:
    for (unsigned i = 0; i < nx; i++) {
        if (xs[i].active)
            curl_multi_remove_handle(s->multi, xs[i].easy);
        xfer_clear(&xs[i]);
    }
    zr_free(xs);
    return rc;
}

/* Run op in a session of the client's pool. */
static int run_op(struct op *op, unsigned inflight)
{
    struct session *s;
    unsigned n = (unsigned)ZR_MIN((size_t)inflight, op->njobs);
    int rc = session_get(op->c, ZR_MAX(n, 1u), &s);
    if (rc != 0)
        return rc;
    rc = run(op, s, inflight);
    session_put(op->c, s);
    return rc;
}

/* Ranged GETs. */

struct ranges {
    struct zr_s3_range *r;
    size_t *idx; /* job i is range r[idx[i]] */
    zr_s3_range_fn done;
    void *arg;
};

static int range_start(struct op *op, struct xfer *x)
{
    struct ranges *g = op->arg;
    const struct zr_s3_range *r = &g->r[g->idx[x->job]];
    char *key = full_key(op->c, r->name);
    if (!key)
        return ZR_ENOMEM;
    x->method = M_GET;
    x->ranged = true;
    x->to = r->to;
    x->off = r->off;
    x->len = r->len;
    int rc = target(op->c, x, key, NULL);
    zr_free(key);
    return rc;
}

static int range_finish(struct op *op, struct xfer *x)
{
    struct ranges *g = op->arg;
    const struct zr_s3_range *r = &g->r[g->idx[x->job]];
    unsigned long long a = r->off, b = r->off + r->len - 1;
    if (x->status == 404) {
        char code[64];
        s3_code(x, &x->errbody, code, sizeof code);
        return zr_err(ZR_ECORRUPT, "GET %s: HTTP 404%s%s: the %s is missing", x->disp,
                      *code ? " " : "", code, no_bucket(x) ? "bucket" : "object");
    }
    if (x->status == 416)
        return zr_err(ZR_ECORRUPT, "GET %s: HTTP 416: the object is shorter than %llu bytes",
                      x->disp, b + 1);
    if (x->status != 206 && x->status != 200)
        return http_fail(x);
    if (x->status == 206 && (!x->cr_seen || x->cr_start != r->off))
        return zr_err(ZR_EIO, "GET %s: HTTP 206 for another range than bytes %llu-%llu", x->disp,
                      a, b);
    if (x->got != r->len)
        return zr_err(ZR_ECORRUPT, "GET %s: the object is shorter than %llu bytes (%llu of "
                                   "bytes %llu-%llu)",
                      x->disp, b + 1, (unsigned long long)x->got, a, b);
    return g->done ? g->done(g->arg, r) : 0;
}

int zr_s3_get_ranges(struct zr_s3 *c, struct zr_s3_range *r, size_t n, unsigned inflight,
                     zr_s3_range_fn done, void *arg)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t end;
        if (!r[i].name || (r[i].len && !r[i].to) || !zr_add_ok(r[i].off, r[i].len, &end))
            return zr_err(ZR_EINVAL, "%s: range %zu is malformed", c->url, i);
        m += r[i].len > 0;
    }
    struct ranges g = {.r = r, .done = done, .arg = arg};
    g.idx = zr_malloc(ZR_MAX(m, (size_t)1) * sizeof *g.idx);
    if (!g.idx)
        return zr_err(ZR_ENOMEM, "%s: %zu ranges", c->url, n);
    int rc = 0;
    m = 0;
    /* An empty range needs no request. */
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (r[i].len > 0)
            g.idx[m++] = i;
        else if (done)
            rc = done(arg, &r[i]);
    }
    struct op op = {.c = c, .njobs = m, .start = range_start, .finish = range_finish, .arg = &g};
    if (rc == 0)
        rc = run_op(&op, inflight ? inflight : c->inflight);
    zr_free(g.idx);
    return rc;
}

/* Whole small objects. */

struct get_ctx {
    const char *name;
    size_t max;
    bool missing_ok;
    void **buf;
    size_t *len;
};

static int get_start(struct op *op, struct xfer *x)
{
    struct get_ctx *g = op->arg;
    char *key = full_key(op->c, g->name);
    if (!key)
        return ZR_ENOMEM;
    x->method = M_GET;
    x->resp_max = g->max;
    int rc = target(op->c, x, key, NULL);
    zr_free(key);
    return rc;
}

static int get_finish(struct op *op, struct xfer *x)
{
    struct get_ctx *g = op->arg;
    if (x->status == 404 && g->missing_ok && !no_bucket(x))
        return 0;
    if (x->status != 200)
        return http_fail(x);
    size_t len = x->resp.len;
    char *p = zr_sbuf_take(&x->resp);
    if (!p)
        return zr_err(ZR_ENOMEM, "GET %s", x->disp);
    *g->buf = p;
    *g->len = len;
    return 0;
}

int zr_s3_get(struct zr_s3 *c, const char *name, size_t max, void **buf, size_t *len,
              bool missing_ok)
{
    *buf = NULL;
    *len = 0;
    struct get_ctx g = {.name = name, .max = max, .missing_ok = missing_ok, .buf = buf,
                        .len = len};
    struct op op = {.c = c, .njobs = 1, .start = get_start, .finish = get_finish, .arg = &g};
    int rc = run_op(&op, 1);
    if (rc != 0 && *buf) {
        zr_free(*buf);
        *buf = NULL;
        *len = 0;
    }
    return rc;
}

/* Single requests without an answer to keep: PUT from memory or a file,
 * DELETE. */

struct simple {
    enum method method;
    const char *name;
    const void *body;
    int fd;
    uint64_t len;
};

static int simple_start(struct op *op, struct xfer *x)
{
    struct simple *q = op->arg;
    char *key = full_key(op->c, q->name);
    if (!key)
        return ZR_ENOMEM;
    x->method = q->method;
    x->body = q->body;
    x->fd = q->fd;
    x->body_len = q->len;
    int rc = target(op->c, x, key, NULL);
    zr_free(key);
    return rc;
}

static int simple_finish(struct op *op, struct xfer *x)
{
    if (x->method == M_DELETE && (x->status == 204 || x->status == 200 ||
                                  (x->status == 404 && !no_bucket(x))))
        return 0;
    if (x->method == M_PUT && x->status == 200)
        return 0;
    return http_fail(x);
}

static int simple(struct zr_s3 *c, struct simple *q)
{
    struct op op = {.c = c, .njobs = 1, .start = simple_start, .finish = simple_finish,
                    .arg = q};
    return run_op(&op, 1);
}

int zr_s3_put(struct zr_s3 *c, const char *name, const void *buf, size_t len)
{
    struct simple q = {.method = M_PUT, .name = name, .body = buf, .fd = -1, .len = len};
    return simple(c, &q);
}

int zr_s3_delete(struct zr_s3 *c, const char *name)
{
    struct simple q = {.method = M_DELETE, .name = name, .fd = -1};
    return simple(c, &q);
}

/* Listing. */

struct list_ctx {
    const char *query;
    struct zr_sbuf page;
};

static int list_start(struct op *op, struct xfer *x)
{
    struct list_ctx *l = op->arg;
    x->method = M_GET;
    x->resp_max = LIST_PAGE_MAX;
    return target(op->c, x, NULL, l->query);
}

static int list_finish(struct op *op, struct xfer *x)
{
    struct list_ctx *l = op->arg;
    if (x->status != 200)
        return http_fail(x);
    l->page = x->resp;
    x->resp = (struct zr_sbuf){0};
    return 0;
}

/* Append the object or common prefix full (a key under base) to the
 * listing, as a name relative to the client's prefix. */
static int list_add(struct zr_s3 *c, const char *full, const char *base, bool dir, uint64_t size,
                    struct zr_s3_obj **objs, size_t *n, size_t *cap)
{
    size_t bl = strlen(base), fl = strlen(full);
    if (fl < bl || memcmp(full, base, bl) != 0)
        return zr_err(ZR_EIO, "listing %s: the server listed \"%s\", outside the prefix", c->url,
                      full);
    if (dir && fl > bl && full[fl - 1] == '/')
        fl--;
    if (fl == bl)
        return 0;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        struct zr_s3_obj *o = zr_realloc(*objs, nc * sizeof *o);
        if (!o)
            return zr_err(ZR_ENOMEM, "listing %s", c->url);
        *objs = o;
        *cap = nc;
    }
    char *name = zr_malloc(fl - bl + 1);
    if (!name)
        return zr_err(ZR_ENOMEM, "listing %s", c->url);
    memcpy(name, full + bl, fl - bl);
    name[fl - bl] = '\0';
    (*objs)[(*n)++] = (struct zr_s3_obj){.name = name, .size = size, .dir = dir};
    return 0;
}

/* Read one page of ListObjectsV2 into the listing; *token becomes the
 * next page's continuation token, or NULL after the last page. */
static int list_page(struct zr_s3 *c, const struct zr_sbuf *page, const char *base,
                     struct zr_s3_obj **objs, size_t *n, size_t *cap, char **token)
{
    const char *start = page->p ? page->p : "", *end = start + page->len;
    const char *pos, *s, *e, *s2, *e2;
    char *text = NULL;
    int rc = 0;
    *token = NULL;
    if (!strstr(start, "<ListBucketResult"))
        return zr_err(ZR_EIO, "listing %s: the answer is not a ListBucketResult", c->url);
    for (pos = start; rc == 0 && zr_xml_find(&pos, end, "Contents", &s, &e);) {
        const char *in = s;
        if (!zr_xml_find(&in, e, "Key", &s2, &e2))
            return zr_err(ZR_EIO, "listing %s: an object without a Key", c->url);
        rc = zr_xml_text(s2, e2, c->url, &text);
        if (rc != 0)
            return rc;
        in = s;
        unsigned long long size = 0;
        char num[24];
        if (!zr_xml_find(&in, e, "Size", &s2, &e2) || e2 - s2 < 1 ||
            (size_t)(e2 - s2) >= sizeof num) {
            rc = zr_err(ZR_EIO, "listing %s: \"%s\" has no Size", c->url, text);
        } else {
            memcpy(num, s2, (size_t)(e2 - s2));
            num[e2 - s2] = '\0';
            char *stop;
            errno = 0;
            size = strtoull(num, &stop, 10);
            if (errno || *stop || num[0] == '-')
                rc = zr_err(ZR_EIO, "listing %s: \"%s\" has a malformed Size", c->url, text);
        }
        if (rc == 0)
            rc = list_add(c, text, base, false, size, objs, n, cap);
        zr_free(text);
    }
    for (pos = start; rc == 0 && zr_xml_find(&pos, end, "CommonPrefixes", &s, &e);) {
        const char *in = s;
        if (!zr_xml_find(&in, e, "Prefix", &s2, &e2))
            return zr_err(ZR_EIO, "listing %s: a CommonPrefixes without a Prefix", c->url);
        rc = zr_xml_text(s2, e2, c->url, &text);
        if (rc == 0)
            rc = list_add(c, text, base, true, 0, objs, n, cap);
        zr_free(text);
    }
    if (rc != 0)
        return rc;
    pos = start;
    if (zr_xml_find(&pos, end, "IsTruncated", &s, &e) && e - s == 4 && memcmp(s, "true", 4) == 0) {
        pos = start;
        if (!zr_xml_find(&pos, end, "NextContinuationToken", &s, &e) || s == e)
            return zr_err(ZR_EIO, "listing %s: a truncated page without a continuation token",
                          c->url);
        return zr_xml_text(s, e, c->url, token);
    }
    return 0;
}

void zr_s3_list_free(struct zr_s3_obj *objs, size_t n)
{
    if (!objs)
        return;
    for (size_t i = 0; i < n; i++)
        zr_free(objs[i].name);
    zr_free(objs);
}

int zr_s3_list(struct zr_s3 *c, const char *sub, bool delim, struct zr_s3_obj **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    struct zr_s3_obj *objs = NULL;
    size_t count = 0, cap = 0;
    char *base = full_key(c, ""), *token = NULL;
    if (!base)
        return ZR_ENOMEM;
    struct session *s = NULL;
    int rc = session_get(c, 1, &s);
    while (rc == 0) {
        /* The parameters in SigV4's order (rule 1). */
        struct zr_sbuf q = {0};
        if (token) {
            zr_sbuf_str(&q, "continuation-token=");
            zr_sbuf_uri(&q, token, false);
            zr_sbuf_str(&q, "&");
        }
        if (delim)
            zr_sbuf_str(&q, "delimiter=%2F&");
        zr_sbuf_str(&q, "list-type=2&prefix=");
        zr_sbuf_uri(&q, base, false);
        zr_sbuf_uri(&q, sub ? sub : "", false);
        struct list_ctx l = {.query = zr_sbuf_take(&q)};
        if (!l.query) {
            rc = zr_err(ZR_ENOMEM, "listing %s", c->url);
            break;
        }
        struct op op = {.c = c, .njobs = 1, .start = list_start, .finish = list_finish, .arg = &l};
        rc = run(&op, s, 1);
        zr_free((char *)l.query);
        zr_free(token);
        token = NULL;
        if (rc == 0)
            rc = list_page(c, &l.page, base, &objs, &count, &cap, &token);
        zr_sbuf_free(&l.page);
        if (rc != 0 || !token)
            break;
    }
    if (s)
        session_put(c, s);
    zr_free(token);
    zr_free(base);
    if (rc != 0) {
        zr_s3_list_free(objs, count);
        return rc;
    }
    *out = objs;
    *n = count;
    return 0;
}

/* Uploads of files. */

struct upload {
    const char *name;
    char *key;
    int fd;
    uint64_t size;
    uint64_t part;   /* bytes per part */
    size_t nparts;
    char *upload_id; /* of the multipart upload */
    char **etags;    /* of each part */
    char *xml;       /* the CompleteMultipartUpload body */
    enum { U_CREATE, U_PART, U_COMPLETE, U_ABORT } step;
};

static int upload_start(struct op *op, struct xfer *x)
{
    struct upload *u = op->arg;
    struct zr_sbuf q = {0};
    x->resp_max = SMALL_ANSWER_MAX;
    switch (u->step) {
    case U_CREATE:
        x->method = M_POST;
        zr_sbuf_str(&q, "uploads=");
        break;
    case U_PART:
        x->method = M_PUT;
        x->fd = u->fd;
        x->body_off = x->job * u->part;
        x->body_len = ZR_MIN(u->part, u->size - x->body_off);
        zr_sbuf_fmt(&q, "partNumber=%zu&uploadId=", x->job + 1);
        zr_sbuf_uri(&q, u->upload_id, false);
        break;
    case U_COMPLETE:
        x->method = M_POST;
        x->hdrs = op->c->xml_hdrs;
        x->body = (const uint8_t *)u->xml;
        x->body_len = strlen(u->xml);
        zr_sbuf_str(&q, "uploadId=");
        zr_sbuf_uri(&q, u->upload_id, false);
        break;
    case U_ABORT:
        x->method = M_DELETE;
        zr_sbuf_str(&q, "uploadId=");
        zr_sbuf_uri(&q, u->upload_id, false);
        break;
    }
    char *query = zr_sbuf_take(&q);
    if (!query)
        return zr_err(ZR_ENOMEM, "uploading %s", u->name);
    int rc = target(op->c, x, u->key, query);
    zr_free(query);
    return rc;
}

static int upload_finish(struct op *op, struct xfer *x)
{
    struct upload *u = op->arg;
    const char *p = x->resp.p ? x->resp.p : "", *end = p + x->resp.len, *s, *e;
    switch (u->step) {
    case U_CREATE:
        if (x->status != 200)
            return http_fail(x);
        if (!zr_xml_find(&p, end, "UploadId", &s, &e) || s == e)
            return zr_err(ZR_EIO, "POST %s?uploads: no UploadId in the answer", x->disp);
        return zr_xml_text(s, e, x->disp, &u->upload_id);
    case U_PART:
        if (x->status != 200)
            return http_fail(x);
        if (!x->etag[0])
            return zr_err(ZR_EIO, "PUT %s part %zu: no ETag in the answer", x->disp, x->job + 1);
        u->etags[x->job] = zr_strdup(x->etag);
        return u->etags[x->job] ? 0 : zr_err(ZR_ENOMEM, "uploading %s", x->disp);
    case U_COMPLETE:
        if (x->status != 200)
            return http_fail(x);
        /* A 200 may still carry an error, sent once the server has
         * finished (S3 keeps the connection alive with whitespace until
         * then); InternalError and SlowDown are worth another try. */
        if (zr_xml_find(&p, end, "Code", &s, &e)) {
            char code[64];
            s3_code(x, &x->resp, code, sizeof code);
            if (strcmp(code, "InternalError") == 0 || strcmp(code, "SlowDown") == 0) {
                snprintf(x->why, sizeof x->why, "HTTP 200 with the error %s", code);
                return RETRY;
            }
            return zr_err(ZR_EIO, "POST %s?uploadId: HTTP 200 with the error %s", x->disp, code);
        }
        if (!strstr(x->resp.p ? x->resp.p : "", "<CompleteMultipartUploadResult"))
            return zr_err(ZR_EIO, "POST %s?uploadId: the answer is not a "
                                  "CompleteMultipartUploadResult",
                          x->disp);
        return 0;
    case U_ABORT:
        if (x->status == 204 || x->status == 200 || x->status == 404)
            return 0;
        return http_fail(x);
    }
    return 0;
}

/* Make the CompleteMultipartUpload body from the parts' ETags, in order. */
static int upload_xml(struct upload *u)
{
    struct zr_sbuf b = {0};
    zr_sbuf_str(&b, "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
    for (size_t i = 0; i < u->nparts; i++) {
        zr_sbuf_fmt(&b, "<Part><PartNumber>%zu</PartNumber><ETag>", i + 1);
        zr_sbuf_xml(&b, u->etags[i]);
        zr_sbuf_str(&b, "</ETag></Part>");
    }
    zr_sbuf_str(&b, "</CompleteMultipartUpload>");
    u->xml = zr_sbuf_take(&b);
    return u->xml ? 0 : zr_err(ZR_ENOMEM, "uploading %s", u->name);
}

static int multipart(struct zr_s3 *c, struct upload *u, unsigned inflight)
{
    struct session *s;
    int rc = session_get(c, inflight, &s);
    if (rc != 0)
        return rc;
    struct op op = {.c = c, .njobs = 1, .start = upload_start, .finish = upload_finish, .arg = u};
    u->step = U_CREATE;
    rc = run(&op, s, 1);
    if (rc == 0) {
        u->etags = zr_calloc(u->nparts, sizeof *u->etags);
        if (!u->etags)
            rc = zr_err(ZR_ENOMEM, "uploading %s", u->name);
    }
    if (rc == 0) {
        u->step = U_PART;
        op.njobs = u->nparts;
        rc = run(&op, s, inflight);
    }
    if (rc == 0)
        rc = upload_xml(u);
    if (rc == 0) {
        u->step = U_COMPLETE;
        op.njobs = 1;
        rc = run(&op, s, 1);
    }
    if (rc != 0 && u->upload_id) {
        /* Abort, so that the parts stop taking space, but report the
         * error that made us. */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", zr_last_error());
        u->step = U_ABORT;
        op.njobs = 1;
        run(&op, s, 1);
        zr_err_restore(rc, msg);
    }
    session_put(c, s);
    return rc;
}

int zr_s3_put_file(struct zr_s3 *c, const char *name, int fd, uint64_t size, unsigned inflight)
{
    if (fd < 0)
        return zr_err(ZR_EINVAL, "uploading %s to %s: no file", name, c->url);
    if (size <= SINGLE_PUT_MAX) {
        struct simple q = {.method = M_PUT, .name = name, .fd = fd, .len = size};
        return simple(c, &q);
    }
    struct upload u = {.name = name, .fd = fd, .size = size, .part = PART_SIZE};
    while ((size + u.part - 1) / u.part > MAX_PARTS)
        u.part *= 2;
    u.nparts = (size_t)((size + u.part - 1) / u.part);
    u.key = full_key(c, name);
    if (!u.key)
        return ZR_ENOMEM;
    unsigned n = inflight ? inflight : c->inflight;
    int rc = multipart(c, &u, (unsigned)ZR_MIN((size_t)n, u.nparts));
    if (u.etags)
        for (size_t i = 0; i < u.nparts; i++)
            zr_free(u.etags[i]);
    zr_free(u.etags);
    zr_free(u.xml);
    zr_free(u.upload_id);
    zr_free(u.key);
    return rc;
}

/*
 * s3.c: the S3 client (s3.h): a client's configuration and its pool of
 * sessions, and the reads and small writes: ranged GETs in batches,
 * whole small objects, PUT from memory, DELETE. The requests go through
 * the engine of s3run.c, whose header has the rules they keep; listings
 * are s3list.c's, uploads of files s3upload.c's, the configuration
 * s3conf.c's.
 *
 * A ranged GET must give exactly the bytes asked for. Fewer (the object
 * is shorter than the store says) and a missing object are ZR_ECORRUPT
 * naming the object: the caller's store lost a file. A 206 that starts
 * elsewhere is ZR_EIO.
 */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "s3int.h"

#define DEFAULT_INFLIGHT 32
#define MAX_INFLIGHT 1024
#define DEFAULT_TIMEOUT 10 /* seconds a transfer may stall */
#define MAX_TIMEOUT 3600

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

/* A copy of the header list h with one more line; NULL when h is NULL or
 * memory runs out. */
static struct curl_slist *hdrs_plus(const struct curl_slist *h, const char *line)
{
    struct curl_slist *x = NULL, *y = NULL;
    for (const struct curl_slist *q = h; q; q = q->next) {
        if (!(y = curl_slist_append(x, q->data)))
            break;
        x = y;
    }
    y = y ? curl_slist_append(x, line) : NULL;
    if (!y)
        curl_slist_free_all(x);
    return y;
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
    /* The XML bodies get their own type, and conditional PUTs their
     * condition, each in a copy of the list (a curl_slist's nodes cannot
     * be shared). */
    c->xml_hdrs = hdrs_plus(h, "Content-Type: application/xml");
    c->new_hdrs = hdrs_plus(h, "If-None-Match: *");
    if (!c->url || (c->conf.key_id && !c->sigv4) || !c->hdrs || !c->xml_hdrs || !c->new_hdrs) {
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

void zr_s3_close(struct zr_s3 *c)
{
    if (!c)
        return;
    while (c->idle) {
        struct session *s = c->idle;
        c->idle = s->next;
        zr_s3_session_free(s);
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
    curl_slist_free_all(c->new_hdrs);
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

const char *zr_s3_endpoint(const struct zr_s3 *c)
{
    return c->conf.endpoint;
}

void zr_s3_fork_prepare(struct zr_s3 *c)
{
    pthread_mutex_lock(&c->pool_lock);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_lock(&c->locks[i]);
}

void zr_s3_fork_parent(struct zr_s3 *c)
{
    for (int i = CURL_LOCK_DATA_LAST - 1; i >= 0; i--)
        pthread_mutex_unlock(&c->locks[i]);
    pthread_mutex_unlock(&c->pool_lock);
}

void zr_s3_fork_child(struct zr_s3 *c)
{
    /* The idle sessions hold the parent's connections: dropped, not
     * cleaned up (a cleanup could write to them), their memory and
     * descriptors left to the child's exit. */
    c->idle = NULL;
    zr_s3_fork_parent(c);
}

void zr_s3_stats(const struct zr_s3 *c, struct zr_s3_stats *st)
{
    st->requests = atomic_load(&c->requests);
    st->connects = atomic_load(&c->connects);
    st->retries = atomic_load(&c->retries);
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
    char *key = zr_s3_full_key(op->c, r->name);
    if (!key)
        return ZR_ENOMEM;
    x->method = M_GET;
    x->ranged = true;
    x->to = r->to;
    x->off = r->off;
    x->len = r->len;
    int rc = zr_s3_target(op->c, x, key, NULL);
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
        zr_s3_code(&x->errbody, code, sizeof code);
        return zr_err(ZR_ECORRUPT, "GET %s: HTTP 404%s%s: the %s is missing", x->disp,
                      *code ? " " : "", code, zr_s3_no_bucket(x) ? "bucket" : "object");
    }
    if (x->status == 416)
        return zr_err(ZR_ECORRUPT, "GET %s: HTTP 416: the object is shorter than %llu bytes",
                      x->disp, b + 1);
    if (x->status != 206 && x->status != 200)
        return zr_s3_http_fail(x);
    if (x->status == 206 && (!x->cr_seen || x->cr_start != r->off))
        return zr_err(ZR_EIO, "GET %s: HTTP 206 for another range than bytes %llu-%llu", x->disp,
                      a, b);
    if (x->got != r->len)
        return zr_err(ZR_ECORRUPT, "GET %s: the object is shorter than %llu bytes (%llu of "
                                   "bytes %llu-%llu)",
                      x->disp, b + 1, (unsigned long long)x->got, a, b);
    /* An answer without an ETag is not checked; a weak one (W/"...", as
     * proxies make them) is compared by its value; a listed ETag cut to
     * its field's length is compared as far as it goes. */
    if (r->etag && r->etag[0] && x->etag[0]) {
        const char *t = x->etag;
        if (strncmp(t, "W/", 2) == 0)
            t += 2;
        size_t tl = strlen(t), el = strlen(r->etag);
        if (tl >= 2 && t[0] == '"' && t[tl - 1] == '"') {
            t++;
            tl -= 2;
        }
        bool cut = el + 1 == sizeof ((struct zr_s3_obj *)0)->etag;
        if ((cut ? tl < el : tl != el) || memcmp(t, r->etag, el) != 0)
            return zr_err(ZR_ECORRUPT, "GET %s: the object changed since it was listed (ETag %s, "
                          "not %s): a store pushed again is opened again", x->disp, x->etag,
                          r->etag);
    }
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
        rc = zr_s3_run_op(&op, inflight ? inflight : c->inflight);
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
    char *key = zr_s3_full_key(op->c, g->name);
    if (!key)
        return ZR_ENOMEM;
    x->method = M_GET;
    x->resp_max = g->max;
    int rc = zr_s3_target(op->c, x, key, NULL);
    zr_free(key);
    return rc;
}

static int get_finish(struct op *op, struct xfer *x)
{
    struct get_ctx *g = op->arg;
    if (x->status == 404 && g->missing_ok && !zr_s3_no_bucket(x))
        return 0;
    if (x->status != 200)
        return zr_s3_http_fail(x);
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
    int rc = zr_s3_run_op(&op, 1);
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
    bool only_new; /* PUT with If-None-Match: * */
    const char *name;
    const void *body;
    int fd;
    uint64_t len;
    char *etag; /* the PUT's answer's ETag, no quotes ("" if none), or NULL */
};

static int simple_start(struct op *op, struct xfer *x)
{
    struct simple *q = op->arg;
    char *key = zr_s3_full_key(op->c, q->name);
    if (!key)
        return ZR_ENOMEM;
    x->method = q->method;
    x->hdrs = q->only_new ? op->c->new_hdrs : NULL;
    x->body = q->body;
    x->fd = q->fd;
    x->body_len = q->len;
    int rc = zr_s3_target(op->c, x, key, NULL);
    zr_free(key);
    return rc;
}

static int simple_finish(struct op *op, struct xfer *x)
{
    if (x->method == M_DELETE && (x->status == 204 || x->status == 200 ||
                                  (x->status == 404 && !zr_s3_no_bucket(x))))
        return 0;
    struct simple *q = op->arg;
    if (x->method == M_PUT && x->status == 200) {
        if (q->etag) {
            const char *t = x->etag;
            size_t tl = strlen(t);
            if (tl >= 2 && t[0] == '"' && t[tl - 1] == '"') {
                t++;
                tl -= 2;
            }
            tl = tl < ZR_S3_ETAG_MAX ? tl : 0;
            memcpy(q->etag, t, tl);
            q->etag[tl] = '\0';
        }
        return 0;
    }
    /* 412: the object exists; 409: another conditional write of it is
     * under way (AWS's ConditionalRequestConflict). */
    if (q->only_new && (x->status == 412 || x->status == 409))
        return zr_err(ZR_EEXIST, "PUT %s: HTTP %ld: it exists, or another client is "
                      "creating it", x->disp, x->status);
    return zr_s3_http_fail(x);
}

static int simple(struct zr_s3 *c, struct simple *q)
{
    struct op op = {.c = c, .njobs = 1, .start = simple_start, .finish = simple_finish,
                    .arg = q};
    return zr_s3_run_op(&op, 1);
}

int zr_s3_put(struct zr_s3 *c, const char *name, const void *buf, size_t len)
{
    struct simple q = {.method = M_PUT, .name = name, .body = buf, .fd = -1, .len = len};
    return simple(c, &q);
}

int zr_s3_put_new(struct zr_s3 *c, const char *name, const void *buf, size_t len)
{
    return zr_s3_put_etag(c, name, buf, len, true, NULL);
}

int zr_s3_put_etag(struct zr_s3 *c, const char *name, const void *buf, size_t len,
                   bool only_new, char etag[ZR_S3_ETAG_MAX])
{
    struct simple q = {.method = M_PUT, .only_new = only_new, .name = name, .body = buf,
                       .fd = -1, .len = len, .etag = etag};
    if (etag)
        etag[0] = '\0';
    return simple(c, &q);
}

int zr_s3_delete(struct zr_s3 *c, const char *name)
{
    struct simple q = {.method = M_DELETE, .name = name, .fd = -1};
    return simple(c, &q);
}


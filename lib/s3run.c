/*
 * s3run.c: the request engine of the S3 client. Every call of s3.h is an
 * operation (struct op): a list of jobs, each a request that the
 * operation's start describes and its finish judges. zr_s3_run keeps up
 * to `inflight` of them in a curl multi handle and judges each attempt
 * when it ends. The rules it keeps:
 *
 *  1. Requests are signed by libcurl (CURLOPT_AWS_SIGV4) with the
 *     payload declared UNSIGNED-PAYLOAD in x-amz-content-sha256, which
 *     libcurl 7.88 neither sends nor derives but S3 (and radosgw)
 *     require. libcurl signs the path and the query as written, without
 *     sorting or re-encoding them, so callers write them canonical
 *     (s3text.c): every byte but the unreserved ones percent-encoded ('/'
 *     kept in paths), parameters sorted by name, each with its '='.
 *  2. Connections are kept alive by sessions: a session is a multi handle
 *     (whose connection cache holds the connections) with its easy
 *     handles. A call takes an idle session from the client's pool, or
 *     makes one, and gives it back when it returns, so calls on several
 *     threads use different sessions and the next call reuses the
 *     connections of the last. libcurl 7.88 documents a connection cache
 *     shared between concurrent threads (CURLSH with
 *     CURL_LOCK_DATA_CONNECT) as unsafe, so only the DNS cache and the
 *     TLS sessions are shared, through the client's CURLSH.
 *  3. An attempt that fails with a broken, refused or timed-out
 *     connection, 5xx or 429 is retried after 0.2, 0.6 and 1.8 s (with
 *     jitter), ATTEMPTS in all; 403, 404, 416 and other answers are final.
 *     A stalled transfer (under 1 byte/s) ends after the client's
 *     timeout, a connection attempt after half of it: a dead server is an
 *     error within seconds, not a hang.
 *  4. A ranged GET writes straight into the caller's memory and must give
 *     exactly the bytes asked for: a 206 with more bytes is an error; a
 *     200 (a server that ignores Range) is read up to the range's end and
 *     cut there.
 *  5. Messages name the request (method and endpoint/bucket/key) and the
 *     HTTP status with S3's error code, or libcurl's error text; never
 *     the credentials.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "internal.h"
#include "io.h"
#include "s3int.h"

#define ATTEMPTS 4
#define BACKOFF_MS 200   /* the first retry's delay; each next one is 3 times longer */
#define ERRBODY_MAX 4096 /* the part of an error's body kept for its <Code> */

static const char *const method_names[] = {"GET", "PUT", "POST", "DELETE"};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void zr_s3_session_free(struct session *s)
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

/* Take an idle session with at least n easy handles, or make one. */
int zr_s3_session_get(struct zr_s3 *c, unsigned n, struct session **out)
{
    pthread_mutex_lock(&c->pool_lock);
    struct session *s = c->idle;
    if (s)
        c->idle = s->next;
    pthread_mutex_unlock(&c->pool_lock);
    if (!s) {
        s = zr_calloc(1, sizeof *s);
        if (!s || !(s->multi = curl_multi_init())) {
            zr_s3_session_free(s);
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
    zr_s3_session_free(s);
    return zr_err(ZR_ENOMEM, "%s: making libcurl easy handles", c->url);
}

void zr_s3_session_put(struct zr_s3 *c, struct session *s)
{
    pthread_mutex_lock(&c->pool_lock);
    s->next = c->idle;
    c->idle = s;
    pthread_mutex_unlock(&c->pool_lock);
}

/* Set x's url and disp for key (NULL: the bucket itself) and query (NULL:
 * none). */
int zr_s3_target(struct zr_s3 *c, struct xfer *x, const char *key, const char *query)
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
char *zr_s3_full_key(struct zr_s3 *c, const char *name)
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
void zr_s3_code(const struct zr_sbuf *body, char *out, size_t n)
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
int zr_s3_http_fail(const struct xfer *x)
{
    char code[64];
    zr_s3_code(&x->errbody, code, sizeof code);
    int zc = x->status == 403 ? ZR_EACCESS : x->status == 404 ? ZR_ENOTSTORE : ZR_EIO;
    return zr_err(zc, "%s %s: HTTP %ld%s%s", method_names[x->method], x->disp, x->status,
                  *code ? " " : "", code);
}

/* Whether a 404 said the bucket is missing (as opposed to the key). */
bool zr_s3_no_bucket(const struct xfer *x)
{
    char code[64];
    zr_s3_code(&x->errbody, code, sizeof code);
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
 * ZR_S3_RETRY (with x->why set) or an error. */
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
            return ZR_S3_RETRY;
        }
        return zr_err(ZR_EIO, "%s %s: %s", m, x->disp, text);
    }
    if (x->status >= 500 || x->status == 429) {
        char code[64];
        zr_s3_code(&x->errbody, code, sizeof code);
        snprintf(x->why, sizeof x->why, "HTTP %ld%s%s", x->status, *code ? " " : "", code);
        return ZR_S3_RETRY;
    }
    return op->finish(op, x);
}

/* Make `op`'s requests, up to inflight at once, retrying each on its own
 * (rule 3). Returns 0 once every job is done, or the first error with no
 * transfer left running. */
int zr_s3_run(struct op *op, struct session *s, unsigned inflight)
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
            if (rc == ZR_S3_RETRY) {
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
int zr_s3_run_op(struct op *op, unsigned inflight)
{
    struct session *s;
    unsigned n = (unsigned)ZR_MIN((size_t)inflight, op->njobs);
    int rc = zr_s3_session_get(op->c, ZR_MAX(n, 1u), &s);
    if (rc != 0)
        return rc;
    rc = zr_s3_run(op, s, inflight);
    zr_s3_session_put(op->c, s);
    return rc;
}


/*
 * s3upload.c: zr_s3_put_file. A file up to SINGLE_PUT_MAX is one PUT;
 * a larger one a multipart upload: CreateMultipartUpload, the parts
 * read with pread and sent `inflight` at once, CompleteMultipartUpload
 * with their ETags in order, whose 200 may still carry an error; a
 * failed upload is aborted so that its parts stop taking space.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "s3int.h"

/* A file up to SINGLE_PUT_MAX is one PUT, a larger one parts of
 * PART_SIZE (doubled until there are at most MAX_PARTS, S3's limit). */
#define SINGLE_PUT_MAX (16u << 20)
#define PART_SIZE (16u << 20)
#define MAX_PARTS 10000
/* Parts in flight by default: 8 parts of 16 MiB keep a link busy, and
 * more make each part wait longer for the server to store it, with no
 * byte moving, which the stall timeout would take for a dead server. */
#define UPLOAD_INFLIGHT 8u
#define SMALL_ANSWER_MAX (1u << 20) /* an answer to Create/CompleteMultipartUpload */

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
    enum { U_SINGLE, U_CREATE, U_PART, U_COMPLETE, U_ABORT } step;
};

static int upload_start(struct op *op, struct xfer *x)
{
    struct upload *u = op->arg;
    struct zr_sbuf q = {0};
    x->resp_max = SMALL_ANSWER_MAX;
    switch (u->step) {
    case U_SINGLE:
        x->method = M_PUT;
        x->fd = u->fd;
        x->body_len = u->size;
        return zr_s3_target(op->c, x, u->key, NULL);
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
    int rc = zr_s3_target(op->c, x, u->key, query);
    zr_free(query);
    return rc;
}

static int upload_finish(struct op *op, struct xfer *x)
{
    struct upload *u = op->arg;
    const char *p = x->resp.p ? x->resp.p : "", *end = p + x->resp.len, *s, *e;
    switch (u->step) {
    case U_SINGLE:
        return x->status == 200 ? 0 : zr_s3_http_fail(x);
    case U_CREATE:
        if (x->status != 200)
            return zr_s3_http_fail(x);
        if (!zr_xml_find(&p, end, "UploadId", &s, &e) || s == e)
            return zr_err(ZR_EIO, "POST %s?uploads: no UploadId in the answer", x->disp);
        return zr_xml_text(s, e, x->disp, &u->upload_id);
    case U_PART:
        if (x->status != 200)
            return zr_s3_http_fail(x);
        if (!x->etag[0])
            return zr_err(ZR_EIO, "PUT %s part %zu: no ETag in the answer", x->disp, x->job + 1);
        u->etags[x->job] = zr_strdup(x->etag);
        return u->etags[x->job] ? 0 : zr_err(ZR_ENOMEM, "uploading %s", x->disp);
    case U_COMPLETE:
        if (x->status != 200)
            return zr_s3_http_fail(x);
        /* A 200 may still carry an error, sent once the server has
         * finished (S3 keeps the connection alive with whitespace until
         * then); InternalError and SlowDown are worth another try. */
        if (zr_xml_find(&p, end, "Code", &s, &e)) {
            char code[64];
            zr_s3_code(&x->resp, code, sizeof code);
            if (strcmp(code, "InternalError") == 0 || strcmp(code, "SlowDown") == 0) {
                snprintf(x->why, sizeof x->why, "HTTP 200 with the error %s", code);
                return ZR_S3_RETRY;
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
        return zr_s3_http_fail(x);
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
    int rc = zr_s3_session_get(c, inflight, &s);
    if (rc != 0)
        return rc;
    struct op op = {.c = c, .njobs = 1, .start = upload_start, .finish = upload_finish, .arg = u};
    u->step = U_CREATE;
    rc = zr_s3_run(&op, s, 1);
    if (rc == 0) {
        u->etags = zr_calloc(u->nparts, sizeof *u->etags);
        if (!u->etags)
            rc = zr_err(ZR_ENOMEM, "uploading %s", u->name);
    }
    if (rc == 0) {
        u->step = U_PART;
        op.njobs = u->nparts;
        rc = zr_s3_run(&op, s, inflight);
    }
    if (rc == 0)
        rc = upload_xml(u);
    if (rc == 0) {
        u->step = U_COMPLETE;
        op.njobs = 1;
        rc = zr_s3_run(&op, s, 1);
    }
    if (rc != 0 && u->upload_id) {
        /* Abort, so that the parts stop taking space, but report the
         * error that made us. */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", zr_last_error());
        u->step = U_ABORT;
        op.njobs = 1;
        zr_s3_run(&op, s, 1);
        zr_err_restore(rc, msg);
    }
    zr_s3_session_put(c, s);
    return rc;
}

uint64_t zr_s3_part_size(uint64_t size)
{
    if (size <= SINGLE_PUT_MAX)
        return 0;
    uint64_t part = PART_SIZE;
    while ((size + part - 1) / part > MAX_PARTS)
        part *= 2;
    return part;
}

int zr_s3_put_file(struct zr_s3 *c, const char *name, int fd, uint64_t size, unsigned inflight)
{
    if (fd < 0)
        return zr_err(ZR_EINVAL, "uploading %s to %s: no file", name, c->url);
    struct upload u = {.name = name, .fd = fd, .size = size};
    u.key = zr_s3_full_key(c, name);
    if (!u.key)
        return ZR_ENOMEM;
    int rc;
    u.part = zr_s3_part_size(size);
    if (u.part == 0) {
        struct op op = {.c = c, .njobs = 1, .start = upload_start, .finish = upload_finish,
                        .arg = &u};
        u.step = U_SINGLE;
        rc = zr_s3_run_op(&op, 1);
    } else {
        u.nparts = (size_t)((size + u.part - 1) / u.part);
        unsigned n = inflight ? inflight : ZR_MIN(c->inflight, UPLOAD_INFLIGHT);
        rc = multipart(c, &u, (unsigned)ZR_MIN((size_t)n, u.nparts));
    }
    if (u.etags)
        for (size_t i = 0; i < u.nparts; i++)
            zr_free(u.etags[i]);
    zr_free(u.etags);
    zr_free(u.xml);
    zr_free(u.upload_id);
    zr_free(u.key);
    return rc;
}

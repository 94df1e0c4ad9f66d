/*
 * s3list.c: zr_s3_list, ListObjectsV2 page by page (list-type=2, with a
 * continuation token after the first page), the names made relative to
 * the client's prefix and the common prefixes rolled up without their
 * trailing '/'. The query is written in SigV4's order (s3run.c, rule 1).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "s3int.h"

#define LIST_PAGE_MAX (64u << 20) /* a page of 1000 keys of up to 1 KiB, escaped */

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
    return zr_s3_target(op->c, x, NULL, l->query);
}

static int list_finish(struct op *op, struct xfer *x)
{
    struct list_ctx *l = op->arg;
    if (x->status != 200)
        return zr_s3_http_fail(x);
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
    char *base = zr_s3_full_key(c, ""), *token = NULL;
    if (!base)
        return ZR_ENOMEM;
    struct session *s = NULL;
    int rc = zr_s3_session_get(c, 1, &s);
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
        rc = zr_s3_run(&op, s, 1);
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
        zr_s3_session_put(c, s);
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


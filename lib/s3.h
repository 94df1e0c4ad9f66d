/*
 * s3.h: the objects of an S3-compatible object store, through libcurl.
 * A client is made from an `s3://bucket/prefix` address and configured
 * the way the AWS tools are (environment, then ~/.aws/credentials and
 * ~/.aws/config for AWS_PROFILE); requests are signed with SigV4 by
 * libcurl (CURLOPT_AWS_SIGV4) and addressed path-style. Object names
 * below are relative to the prefix: "meta.zr" is the key prefix/meta.zr.
 *
 * Errors (with this thread's message set, naming the URL, never the
 * credentials): ZR_EACCESS for 403, ZR_ENOTSTORE for 404 of the bucket
 * or an object that must exist, ZR_EIO for anything else that still
 * fails after the retries (5xx, 429, broken or refused connections,
 * timeouts), ZR_EINVAL for a malformed address or configuration.
 */
#ifndef ZR_S3_H
#define ZR_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A client: its endpoint, credentials and kept-alive connections. Safe to
 * use from several threads at once: each call takes a session (a set of
 * connections) from the client's pool and gives it back, so that later
 * calls reuse its connections; concurrent calls use different sessions.
 * LOADERX_S3_CONNECTIONS (default 32) is the transfers a batch keeps in
 * flight by default; LOADERX_S3_TIMEOUT (seconds, default 10) how long a
 * transfer may stall before it is retried, a connection attempt taking
 * half of it. */
struct zr_s3;

/* Whether path is an s3:// address. */
bool zr_s3_is_url(const char *path);

/* Make a client for url ("s3://bucket" or "s3://bucket/prefix", trailing
 * slashes ignored). Reads the configuration (AWS_ENDPOINT_URL_S3,
 * AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN, AWS_REGION / AWS_DEFAULT_REGION, AWS_PROFILE,
 * AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE) but sends nothing. */
int zr_s3_open(struct zr_s3 **out, const char *url);
/* Close a client (NULL is fine) once none of its calls is running. */
void zr_s3_close(struct zr_s3 *c);

/* The address the client was made for, normalised ("s3://b/p"), for
 * messages. */
const char *zr_s3_url(const struct zr_s3 *c);

/* The endpoint it sends requests to ("http(s)://host[:port]"). */
const char *zr_s3_endpoint(const struct zr_s3 *c);

/* fork() and a client (called by the fork handlers of tables.c for the
 * clients of live handles): prepare takes the client's locks, so that
 * none is copied held; parent gives them back; child gives them back and
 * lets go of the connections it inherited, without closing them, since
 * the parent goes on using them: two processes on one connection would
 * read each other's answers. The child's next calls open their own. */
void zr_s3_fork_prepare(struct zr_s3 *c);
void zr_s3_fork_parent(struct zr_s3 *c);
void zr_s3_fork_child(struct zr_s3 *c);

/* What a client has done since it was made, summed over its calls on
 * every thread: attempts at requests, connections opened for them (a
 * reused one is not counted) and attempts repeated after a failure. For
 * tests and benchmarks; safe to call at any time. */
struct zr_s3_stats {
    uint64_t requests;
    uint64_t connects;
    uint64_t retries;
};
void zr_s3_stats(const struct zr_s3 *c, struct zr_s3_stats *st);

/* An object or, for a listing with a delimiter, a common prefix (dir set,
 * size 0, name without the trailing delimiter). */
struct zr_s3_obj {
    char *name; /* relative to the client's prefix */
    uint64_t size;
    bool dir;
    char etag[72]; /* the object's ETag without its quotes, "" when the listing has none */
};

/* List the objects whose names start with sub ("" for all), following
 * continuation tokens. With delim set ("/"), names holding it after sub
 * are rolled up into common prefixes. *out is malloc'd (free with
 * zr_s3_list_free); a missing bucket is ZR_ENOTSTORE. */
int zr_s3_list(struct zr_s3 *c, const char *sub, bool delim, struct zr_s3_obj **out,
               size_t *n);
void zr_s3_list_free(struct zr_s3_obj *objs, size_t n);

/* GET a whole object of at most max bytes into a malloc'd buffer. A
 * missing object gives ZR_ENOTSTORE, or 0 with *buf NULL when missing_ok;
 * a larger object ZR_ECORRUPT. */
int zr_s3_get(struct zr_s3 *c, const char *name, size_t max, void **buf, size_t *len,
              bool missing_ok);

/* One ranged GET of a batch: len bytes at off of object name, to `to`.
 * tag is the caller's. */
struct zr_s3_range {
    const char *name;
    uint64_t off;
    uint64_t len;
    uint8_t *to;
    size_t tag;
    const char *etag; /* the object's ETag as listed (no quotes), checked against the
                       * answer's: another is ZR_ECORRUPT; NULL or "": not checked */
};

/* Called on the calling thread once range r's bytes are all in place;
 * returns 0 or an error code with this thread's message set, which stops
 * the batch. */
typedef int (*zr_s3_range_fn)(void *arg, const struct zr_s3_range *r);

/* Fetch ranges r[0..n) with up to `inflight` requests at once (0: the
 * client's default, LOADERX_S3_CONNECTIONS or 32), in any order, each
 * retried with back-off on 5xx, 429, a broken connection or a timeout,
 * a few times within a few seconds. An object shorter than a range is
 * ZR_ECORRUPT naming it; a missing object ZR_ECORRUPT too (a store whose
 * file is gone). Returns 0 or the first error; no range is in flight
 * when it returns. */
int zr_s3_get_ranges(struct zr_s3 *c, struct zr_s3_range *r, size_t n, unsigned inflight,
                     zr_s3_range_fn done, void *arg);

/* Upload size bytes of the open file fd (from offset 0) as object name:
 * one PUT up to 16 MiB, else a multipart upload of 16 MiB parts (larger
 * past 10000 parts), read with pread and sent up to `inflight` at once
 * (0: 8, or the client's default if lower); a failed multipart upload is
 * aborted. A file shorter than size is ZR_EIO. */
int zr_s3_put_file(struct zr_s3 *c, const char *name, int fd, uint64_t size,
                   unsigned inflight);

/* PUT a small object from memory. */
int zr_s3_put(struct zr_s3 *c, const char *name, const void *buf, size_t len);

/* The same, only if no object of that name exists (If-None-Match: *): the
 * server creates it for exactly one of several racing callers. One that
 * exists already, or is created by another at the same time, gives
 * ZR_EEXIST (412 Precondition Failed, or 409 ConditionalRequestConflict)
 * with the message naming the object. A server that ignores the header
 * (one without conditional writes) replaces the object, as zr_s3_put. */
int zr_s3_put_new(struct zr_s3 *c, const char *name, const void *buf, size_t len);

/* The ETag (lower-case hex, no quotes) that S3 gives the object which
 * zr_s3_put_file makes of size bytes of fd, or zr_s3_put of buf: the MD5
 * of the bytes, or for a multipart upload the MD5 of its parts' MD5s
 * followed by "-" and the number of parts. Servers that encrypt with
 * their own keys (SSE-KMS, SSE-C) give other ETags. ZR_EIO or the read's
 * error when fd has fewer bytes, ZR_ENOMEM. */
#define ZR_S3_ETAG_MAX 72
int zr_s3_etag_file(int fd, uint64_t size, char out[ZR_S3_ETAG_MAX]);
int zr_s3_etag_mem(const void *buf, size_t len, char out[ZR_S3_ETAG_MAX]);

/* zr_s3_put (only_new: zr_s3_put_new), with the ETag the server answered
 * (no quotes; "" when it gave none) to etag when not NULL. */
int zr_s3_put_etag(struct zr_s3 *c, const char *name, const void *buf, size_t len,
                   bool only_new, char etag[ZR_S3_ETAG_MAX]);

/* DELETE an object (a missing one is not an error). */
int zr_s3_delete(struct zr_s3 *c, const char *name);

#endif

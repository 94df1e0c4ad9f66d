/*
 * s3etag.c: the ETag S3 gives an object that zr_s3_put_file or zr_s3_put
 * uploaded, computed from the local bytes, so that a caller can tell from
 * a listing whether an object still holds the bytes it sent. A single PUT
 * gets the hex MD5 of its bytes; a multipart upload the hex MD5 of its
 * parts' binary MD5s, concatenated, followed by "-" and the number of
 * parts. The parts are those zr_s3_put_file makes (zr_s3_part_size). The
 * MD5 is libcrypto's.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "io.h"
#include "s3int.h"

#define READ_BLOCK (1u << 20)

static void hex(const unsigned char *d, unsigned n, char *out)
{
    for (unsigned k = 0; k < n; k++)
        snprintf(out + 2 * k, 3, "%02x", d[k]);
}

/* The MD5 of len bytes of fd at off into md, reading through buf. */
static int md5_range(EVP_MD_CTX *ctx, int fd, uint64_t off, uint64_t len, uint8_t *buf,
                     unsigned char md[EVP_MAX_MD_SIZE])
{
    if (EVP_DigestInit_ex(ctx, EVP_md5(), NULL) != 1)
        return zr_err(ZR_ENOMEM, "starting an MD5");
    while (len > 0) {
        size_t want = (size_t)ZR_MIN(len, (uint64_t)READ_BLOCK);
        ssize_t r = zr_io.pread(fd, buf, want, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return zr_err_sys(errno, "reading a file for its MD5");
        if (r == 0)
            return zr_err(ZR_EIO, "a file ended before byte %llu, reading it for its MD5",
                          (unsigned long long)(off + len));
        if (EVP_DigestUpdate(ctx, buf, (size_t)r) != 1)
            return zr_err(ZR_ENOMEM, "an MD5");
        off += (uint64_t)r;
        len -= (uint64_t)r;
    }
    unsigned n;
    return EVP_DigestFinal_ex(ctx, md, &n) == 1 ? 0 : zr_err(ZR_ENOMEM, "an MD5");
}

int zr_s3_etag_file(int fd, uint64_t size, char out[ZR_S3_ETAG_MAX])
{
    uint64_t part = zr_s3_part_size(size);
    uint8_t *buf = zr_malloc(READ_BLOCK);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new(), *all = EVP_MD_CTX_new();
    unsigned char md[EVP_MAX_MD_SIZE];
    int rc = 0;
    if (!buf || !ctx || !all) {
        rc = zr_err(ZR_ENOMEM, "an MD5");
    } else if (part == 0) {
        if ((rc = md5_range(ctx, fd, 0, size, buf, md)) == 0)
            hex(md, 16, out);
    } else if (EVP_DigestInit_ex(all, EVP_md5(), NULL) != 1) {
        rc = zr_err(ZR_ENOMEM, "starting an MD5");
    } else {
        uint64_t nparts = (size + part - 1) / part;
        for (uint64_t k = 0; rc == 0 && k < nparts; k++) {
            rc = md5_range(ctx, fd, k * part, ZR_MIN(part, size - k * part), buf, md);
            if (rc == 0 && EVP_DigestUpdate(all, md, 16) != 1)
                rc = zr_err(ZR_ENOMEM, "an MD5");
        }
        unsigned n;
        if (rc == 0 && EVP_DigestFinal_ex(all, md, &n) != 1)
            rc = zr_err(ZR_ENOMEM, "an MD5");
        if (rc == 0) {
            hex(md, 16, out);
            snprintf(out + 32, ZR_S3_ETAG_MAX - 32, "-%llu", (unsigned long long)nparts);
        }
    }
    EVP_MD_CTX_free(all);
    EVP_MD_CTX_free(ctx);
    zr_free(buf);
    return rc;
}

int zr_s3_etag_mem(const void *buf, size_t len, char out[ZR_S3_ETAG_MAX])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n;
    if (EVP_Digest(buf, len, md, &n, EVP_md5(), NULL) != 1)
        return zr_err(ZR_ENOMEM, "an MD5");
    hex(md, 16, out);
    return 0;
}

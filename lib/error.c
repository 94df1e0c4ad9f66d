/*
 * error.c: the status codes' names and the per-thread last-error message.
 *
 * Messages are per thread (like errno) because gathers run from many
 * threads on one handle; a handle-wide message would be overwritten by a
 * neighbour before its caller could read it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define ZR_ERRMSG_MAX 512

static _Thread_local char last_error[ZR_ERRMSG_MAX];

ZR_API const char *zr_strerror(int code)
{
    switch (code) {
    case ZR_OK: return "ZR_OK: success";
    case ZR_EINVAL: return "ZR_EINVAL: invalid argument";
    case ZR_ENOMEM: return "ZR_ENOMEM: out of memory";
    case ZR_EIO: return "ZR_EIO: input/output error";
    case ZR_ECORRUPT: return "ZR_ECORRUPT: store is corrupt";
    case ZR_ENOTSTORE: return "ZR_ENOTSTORE: not a store";
    case ZR_EEXIST: return "ZR_EEXIST: store already exists";
    case ZR_EBUSY: return "ZR_EBUSY: store is locked by another handle or process";
    case ZR_ERANGE: return "ZR_ERANGE: index out of range";
    case ZR_EDTYPE: return "ZR_EDTYPE: dtype does not match the store";
    case ZR_ESHAPE: return "ZR_ESHAPE: item shape does not match the store";
    case ZR_ETOOBIG: return "ZR_ETOOBIG: record larger than 2 GiB";
    case ZR_EEMPTY: return "ZR_EEMPTY: zero-byte record";
    case ZR_EROFS: return "ZR_EROFS: store is open read-only";
    case ZR_EKIND: return "ZR_EKIND: wrong store kind for this call";
    case ZR_ECODEC: return "ZR_ECODEC: codec error";
    case ZR_ENOSPC: return "ZR_ENOSPC: no space left on device";
    default: return "ZR_E?: unknown error code";
    }
}

ZR_API const char *zr_last_error(void)
{
    return last_error;
}

static int vset(int code, const char *suffix, const char *fmt, va_list ap)
{
    int n = snprintf(last_error, sizeof last_error, "%s", zr_strerror(code));
    if (n < 0 || (size_t)n >= sizeof last_error)
        return code;
    if (fmt && *fmt) {
        int m = snprintf(last_error + n, sizeof last_error - (size_t)n, ": ");
        if (m > 0 && (size_t)(n + m) < sizeof last_error) {
            n += m;
            m = vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
            if (m > 0)
                n = (size_t)(n + m) < sizeof last_error ? n + m : (int)sizeof last_error - 1;
        }
    }
    if (suffix && (size_t)n < sizeof last_error)
        snprintf(last_error + n, sizeof last_error - (size_t)n, ": %s", suffix);
    return code;
}

int zr_err(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(code, NULL, fmt, ap);
    va_end(ap);
    return code;
}

int zr_err_sys(int errnum, const char *fmt, ...)
{
    int code = ZR_EIO;
    if (errnum == ENOSPC || errnum == EDQUOT)
        code = ZR_ENOSPC;
    else if (errnum == ENOMEM)
        code = ZR_ENOMEM;
    char buf[128];
    const char *text = strerror_r(errnum, buf, sizeof buf);
    va_list ap;
    va_start(ap, fmt);
    vset(code, text, fmt, ap);
    va_end(ap);
    return code;
}

void zr_err_restore(int code, const char *msg)
{
    (void)code;
    snprintf(last_error, sizeof last_error, "%s", msg);
}

/*
 * error.c: the status codes' names and the per-thread last error.
 *
 * Messages are per thread (like errno) because gathers run from many
 * threads on one handle; a handle-wide message would be overwritten by a
 * neighbour before its caller could read it. A message says what went
 * wrong without the code's name, which travels beside it as a number, so
 * a caller that shows the message need not take it apart.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define ZR_ERRMSG_MAX 512

static _Thread_local char last_error[ZR_ERRMSG_MAX];
static _Thread_local int last_code;

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
    case ZR_ELIMIT: return "ZR_ELIMIT: a limit of the process or system was reached: open files or mappings";
    case ZR_EACCESS: return "ZR_EACCESS: access denied by the object store";
    default: return "ZR_E?: unknown error code";
    }
}

ZR_API const char *zr_last_error(void)
{
    return last_error;
}

ZR_API int zr_last_error_code(void)
{
    return last_code;
}

/* The meaning of a code without its name: the text after "ZR_E...: ". */
static const char *meaning(int code)
{
    const char *text = zr_strerror(code);
    const char *colon = strstr(text, ": ");
    return colon ? colon + 2 : text;
}

/* Set the message to the formatted detail followed by ": suffix" (either
 * may be absent), or to the code's meaning when there is neither. It is
 * built apart and copied in, because a caller may pass zr_last_error()
 * itself as an argument of the detail. */
static int vset(int code, const char *suffix, const char *fmt, va_list ap)
{
    char msg[ZR_ERRMSG_MAX] = "";
    int n = 0;
    if (fmt && *fmt) {
        n = vsnprintf(msg, sizeof msg, fmt, ap);
        if (n < 0) {
            msg[0] = '\0';
            n = 0;
        } else if ((size_t)n >= sizeof msg) {
            n = (int)sizeof msg - 1;
        }
    }
    if (suffix)
        snprintf(msg + n, sizeof msg - (size_t)n, "%s%s", n ? ": " : "", suffix);
    else if (n == 0)
        snprintf(msg, sizeof msg, "%s", meaning(code));
    memcpy(last_error, msg, sizeof last_error);
    last_code = code;
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
    else if (errnum == EMFILE || errnum == ENFILE)
        code = ZR_ELIMIT;
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
    last_code = code;
    snprintf(last_error, sizeof last_error, "%s", msg);
}

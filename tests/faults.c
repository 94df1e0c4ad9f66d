/*
 * faults.c: fault injection through the zr_io table (see faults.h). The
 * counter covers every mutating call so a loop over k reaches each one;
 * errors are injected by not making the call at all, short writes by
 * making it with fewer bytes, as a full disk or a signal would.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "io.h"
#include "tests/faults.h"

static atomic_long calls;
static long fail_at;
static int fail_err, fail_persistent;
static atomic_int fired;
static atomic_int fired_call;
static int nosync;
/* A persistent EINTR lets the retry of an interrupted write through: the
 * writing thread remembers the arming (generation) it was interrupted in. */
static atomic_long generation;
static _Thread_local long interrupted_in;

/* What the next call of the given kind should do: 0 proceed, 1 fail with
 * errno set, 2 write short. */
static int decide(enum zt_call kind)
{
    long n = atomic_fetch_add(&calls, 1) + 1;
    if (fail_at <= 0 || !(n == fail_at || (fail_persistent && n > fail_at)))
        return 0;
    bool write = kind == ZT_CALL_WRITE;
    if ((fail_err == EINTR || fail_err == ZT_SHORT) && !write)
        return 0;
    long g = atomic_load(&generation);
    if (fail_err == EINTR && interrupted_in == g) {
        interrupted_in = 0;
        return 0;
    }
    int expected = 0;
    atomic_compare_exchange_strong(&fired_call, &expected, (int)kind);
    atomic_store(&fired, 1);
    if (fail_err == ZT_SHORT)
        return 2;
    if (fail_err == EINTR)
        interrupted_in = g;
    errno = fail_err;
    return 1;
}

static ssize_t f_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    switch (decide(ZT_CALL_WRITE)) {
    case 1: return -1;
    case 2: return zr_io_default.pwrite(fd, buf, n > 1 ? n / 2 : n, off);
    default: return zr_io_default.pwrite(fd, buf, n, off);
    }
}

static ssize_t f_pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    switch (decide(ZT_CALL_WRITE)) {
    case 1: return -1;
    case 2: break;
    default: return zr_io_default.pwritev(fd, iov, cnt, off);
    }
    /* Short: half the bytes, cut inside an iovec when the half falls in
     * one, which is where the library's resume logic is exercised. */
    size_t total = 0;
    for (int i = 0; i < cnt; i++)
        total += iov[i].iov_len;
    size_t want = total > 1 ? total / 2 : total;
    struct iovec cut[64];
    int m = 0;
    for (int i = 0; i < cnt && want > 0 && m < 64; i++) {
        size_t len = iov[i].iov_len < want ? iov[i].iov_len : want;
        cut[m++] = (struct iovec){.iov_base = iov[i].iov_base, .iov_len = len};
        want -= len;
    }
    return zr_io_default.pwritev(fd, cut, m, off);
}

static int f_fdatasync(int fd)
{
    if (decide(ZT_CALL_SYNC) == 1)
        return -1;
    return nosync ? 0 : zr_io_default.fdatasync(fd);
}
static int f_fsync(int fd)
{
    if (decide(ZT_CALL_SYNC) == 1)
        return -1;
    return nosync ? 0 : zr_io_default.fsync(fd);
}
static int f_ftruncate(int fd, off_t len)
{
    return decide(ZT_CALL_TRUNCATE) == 1 ? -1 : zr_io_default.ftruncate(fd, len);
}
static int f_renameat(int a, const char *b, int c, const char *d)
{
    return decide(ZT_CALL_NAME) == 1 ? -1 : zr_io_default.renameat(a, b, c, d);
}
static int f_unlinkat(int d, const char *p, int f)
{
    return decide(ZT_CALL_NAME) == 1 ? -1 : zr_io_default.unlinkat(d, p, f);
}

void zt_faults_arm(long k, int err, int persistent)
{
    atomic_store(&calls, 0);
    atomic_store(&fired, 0);
    atomic_store(&fired_call, ZT_CALL_NONE);
    atomic_fetch_add(&generation, 1);
    fail_at = k;
    fail_err = err;
    fail_persistent = persistent;
    zr_io.pwrite = f_pwrite;
    zr_io.pwritev = f_pwritev;
    zr_io.fdatasync = f_fdatasync;
    zr_io.fsync = f_fsync;
    zr_io.ftruncate = f_ftruncate;
    zr_io.renameat = f_renameat;
    zr_io.unlinkat = f_unlinkat;
}

long zt_faults_disarm(void)
{
    fail_at = 0;
    if (!nosync)
        zr_io = zr_io_default;
    return atomic_load(&calls);
}

void zt_nosync(int on)
{
    nosync = on;
    if (on) {
        zr_io.fdatasync = f_fdatasync;
        zr_io.fsync = f_fsync;
    } else {
        zr_io = zr_io_default;
    }
}

int zt_faults_fired(void) { return atomic_load(&fired); }

enum zt_call zt_faults_fired_call(void) { return (enum zt_call)atomic_load(&fired_call); }

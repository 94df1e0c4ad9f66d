/* faults.c: fault injection through the zr_io table (see faults.h). */
#include <errno.h>
#include <stdatomic.h>

#include "io.h"
#include "tests/faults.h"

static atomic_long calls;
static long fail_at;
static int fail_err, fail_persistent;
static atomic_int fired;
static int nosync;

static int should_fail(void)
{
    long n = atomic_fetch_add(&calls, 1) + 1;
    if (fail_at > 0 && (n == fail_at || (fail_persistent && n > fail_at))) {
        atomic_store(&fired, 1);
        errno = fail_err;
        return 1;
    }
    return 0;
}

static ssize_t f_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    return should_fail() ? -1 : zr_io_default.pwrite(fd, buf, n, off);
}
static ssize_t f_pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return should_fail() ? -1 : zr_io_default.pwritev(fd, iov, cnt, off);
}
static int f_fdatasync(int fd)
{
    if (should_fail())
        return -1;
    return nosync ? 0 : zr_io_default.fdatasync(fd);
}
static int f_fsync(int fd)
{
    if (should_fail())
        return -1;
    return nosync ? 0 : zr_io_default.fsync(fd);
}
static int f_ftruncate(int fd, off_t len)
{
    return should_fail() ? -1 : zr_io_default.ftruncate(fd, len);
}
static int f_renameat(int a, const char *b, int c, const char *d)
{
    return should_fail() ? -1 : zr_io_default.renameat(a, b, c, d);
}
static int f_unlinkat(int d, const char *p, int f)
{
    return should_fail() ? -1 : zr_io_default.unlinkat(d, p, f);
}

void zt_faults_arm(long k, int err, int persistent)
{
    atomic_store(&calls, 0);
    atomic_store(&fired, 0);
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

/*
 * mount.c: what the daemon asks of the kernel for its mount beyond
 * libfuse's defaults: parallel lookups in one folder, and a read-ahead
 * that reads a record file in one READ. The benchmark's fuse_ceiling asks
 * the same, so that it pays FUSE as zrecordfs does.
 *
 * Parallel lookups: without FUSE_PARALLEL_DIROPS in the INIT reply, the kernel sends the
 * LOOKUPs (and READDIRs) of one folder one at a time. A folder of Ragged
 * record files then serves several readers one after another when it is
 * not in memory: a file's LOOKUP must read the record's first bytes for
 * its size, and each reader's LOOKUP waits for the one before to come
 * back from the disk. libfuse documents the flag as on by default and
 * sets it among the wanted capabilities, but before 3.17 its INIT reply
 * leaves it out. So the daemon passes the device's reads and writes
 * through its own functions (fuse_session_custom_io, on the descriptor
 * fuse_session_mount opened) and adds the flag to the INIT reply when the
 * kernel offered it. Every other request and reply goes through
 * unchanged, splices included. The daemon already answers lookups of one
 * folder from several threads at once (the cold threads, the
 * multi-threaded loop).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fs/mount.h"

/* The INIT request's id while its reply is due and the kernel offered
 * the flag; 0 otherwise. Requests are read on several threads only
 * after INIT, which the kernel sends first and alone. */
static _Atomic uint64_t init_unique;

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
    (void)userdata;
    ssize_t n = read(fd, buf, len);
    const size_t at = sizeof(struct fuse_in_header) + offsetof(struct fuse_init_in, flags);
    if (n >= (ssize_t)(at + sizeof(uint32_t))) {
        struct fuse_in_header in;
        uint32_t flags;
        memcpy(&in, buf, sizeof in);
        memcpy(&flags, (const char *)buf + at, sizeof flags);
        if (in.opcode == FUSE_INIT && (flags & FUSE_PARALLEL_DIROPS))
            atomic_store(&init_unique, in.unique);
    }
    return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
    (void)userdata;
    uint64_t want = atomic_load(&init_unique);
    struct fuse_out_header out;
    if (want == 0 || count != 2 || iov[0].iov_len != sizeof out ||
        iov[1].iov_len < offsetof(struct fuse_init_out, flags) + sizeof(uint32_t))
        return writev(fd, iov, count);
    memcpy(&out, iov[0].iov_base, sizeof out);
    if (out.unique != want || out.error != 0)
        return writev(fd, iov, count);
    atomic_store(&init_unique, 0);
    /* A copy of the reply's arguments with the flag set: the INIT reply
     * is written once, so the copy costs nothing that matters. The
     * flags' place is fixed since the protocol's first version. */
    unsigned char init[256];
    if (iov[1].iov_len > sizeof init)
        return writev(fd, iov, count);
    memcpy(init, iov[1].iov_base, iov[1].iov_len);
    uint32_t flags;
    memcpy(&flags, init + offsetof(struct fuse_init_out, flags), sizeof flags);
    flags |= FUSE_PARALLEL_DIROPS;
    memcpy(init + offsetof(struct fuse_init_out, flags), &flags, sizeof flags);
    struct iovec patched[2] = {iov[0], {.iov_base = init, .iov_len = iov[1].iov_len}};
    return writev(fd, patched, 2);
}

static ssize_t io_splice(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
                         unsigned flags, void *userdata)
{
    (void)userdata;
    return splice(fdin, offin, fdout, offout, len, flags);
}

int zfs_dirops_io(struct fuse_session *se)
{
    static const struct fuse_custom_io io = {
        .read = io_read,
        .writev = io_writev,
        .splice_receive = io_splice,
        .splice_send = io_splice,
    };
    return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

/* Raise the read-ahead of the mount at mnt (an absolute path, as libfuse
 * made it) to ZFS_READ_AHEAD_KB, through its backing device's sysfs file,
 * which /proc/self/mountinfo names ("major:minor"). The INIT request,
 * already queued, offers the old value, and the kernel takes the smaller
 * of the file's value and the INIT reply's (ops.c); so this must run
 * before the loop answers INIT. Looking the mount up in mountinfo sends
 * the file system no request, which a stat would while nothing answers
 * yet. Only root may write the file: for anyone else, or when the mount
 * is not found, the kernel's default stays. */
void zfs_raise_read_ahead(const char *mnt)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return;
    char line[4096], dev[32] = "", point[PATH_MAX];
    while (fgets(line, sizeof line, f)) {
        unsigned maj, min;
        char esc[PATH_MAX];
        if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &min, esc) != 3)
            continue;
        /* mountinfo writes space, tab, newline and backslash as \ooo. */
        size_t k = 0;
        for (const char *c = esc; *c && k + 1 < sizeof point; k++) {
            if (c[0] == '\\' && c[1] >= '0' && c[1] <= '3' && c[2] >= '0' && c[2] <= '7' &&
                c[3] >= '0' && c[3] <= '7') {
                point[k] = (char)((c[1] - '0') << 6 | (c[2] - '0') << 3 | (c[3] - '0'));
                c += 4;
            } else {
                point[k] = *c++;
            }
        }
        point[k] = '\0';
        if (strcmp(point, mnt) == 0) /* the last one: mounts stack */
            snprintf(dev, sizeof dev, "%u:%u", maj, min);
    }
    fclose(f);
    if (!dev[0])
        return;
    char path[64];
    snprintf(path, sizeof path, "/sys/class/bdi/%s/read_ahead_kb", dev);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return;
    char cur[32];
    ssize_t n = read(fd, cur, sizeof cur - 1);
    if (n > 0) {
        cur[n] = '\0';
        if (strtoul(cur, NULL, 10) < ZFS_READ_AHEAD_KB) {
            int len = snprintf(cur, sizeof cur, "%u\n", ZFS_READ_AHEAD_KB);
            if (pwrite(fd, cur, (size_t)len, 0) != len)
                fuse_log(FUSE_LOG_DEBUG, "%s: %s\n", path, strerror(errno));
        }
    }
    close(fd);
}

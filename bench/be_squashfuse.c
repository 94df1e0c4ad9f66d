/*
 * be_squashfuse.c: the squashfuse rows: the per-record files of files-raw
 * packed into a squashfs image by mksquashfs (squashfs-tools) and read
 * back through squashfuse_ll, the low-level, multi-threaded FUSE driver
 * Debian's squashfuse package ships, on a real mount.
 *
 * squashfuse-raw builds the image without any compression (-noI -noD -noF
 * -noX); squashfuse-zstd compresses data, fragments and metadata with
 * zstd at mksquashfs's default level (15) and block size (128 KiB), what
 * a user typing `mksquashfs dir image -comp zstd` gets. The image is made
 * from the folder the files-raw row of the same run wrote, so the write
 * column is mksquashfs alone (on all CPUs, its default), turning files
 * already on the disk into an image. Both pass -no-duplicates: mksquashfs
 * 4.5 compares each file with every earlier file of the same size, which
 * for 200,000 records of one size is quadratic (measured here: 140 s for
 * 40,000 files of 2 KiB, 5.5 s without the search); records of a dataset
 * are not duplicates of one another, so the image is the same.
 *
 * A gather is the files-raw loop (open, read, close per record on one
 * thread) on the mounted image: with one reader, the driver's threads add
 * no parallelism, which is what a single-process data loader sees.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/bench.h"

struct sqfs {
    bool zstd;
    char *image, *mnt;
    struct perfile pf;
    bool is_mounted;
};

static char *path_in(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = bench_xmalloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int sqfs_write(struct backend *b, const struct workload *w)
{
    struct sqfs *q = b->state;
    (void)w;
    if (!b->peer_dir || (mkdir(b->dir, 0700) != 0 && errno != EEXIST))
        return -1;
    const char *raw[] = {"mksquashfs", b->peer_dir, q->image, "-noappend", "-no-progress",
                         "-quiet", "-no-duplicates", "-noI", "-noD", "-noF", "-noX", NULL};
    const char *zstd[] = {"mksquashfs", b->peer_dir, q->image, "-noappend", "-no-progress",
                          "-quiet", "-no-duplicates", "-comp", "zstd", NULL};
    return bench_exec(q->zstd ? zstd : raw);
}

static int sqfs_prepare(struct backend *b, const struct workload *w)
{
    struct sqfs *q = b->state;
    const char *argv[] = {"squashfuse_ll", q->image, q->mnt, NULL};
    if (bench_mount(argv, q->mnt) != 0)
        return -1;
    q->is_mounted = true;
    return perfile_open(&q->pf, w, q->mnt);
}

static int sqfs_gather(struct backend *b, const uint64_t *idx, size_t n, struct batch_out *o)
{
    struct sqfs *q = b->state;
    return perfile_gather(&q->pf, idx, n, o);
}

/* The image alone. */
static uint64_t sqfs_footprint(struct backend *b)
{
    struct sqfs *q = b->state;
    struct stat st;
    return stat(q->image, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

static void sqfs_release(struct backend *b)
{
    struct sqfs *q = b->state;
    if (!q)
        return;
    perfile_close(&q->pf);
    if (q->is_mounted)
        bench_unmount(q->mnt);
    free(q->image);
    free(q->mnt);
    free(q);
    b->state = NULL;
}

static const struct backend_ops sqfs_ops = {
    .write = sqfs_write,
    .prepare = sqfs_prepare,
    .gather = sqfs_gather,
    .footprint = sqfs_footprint,
    .release = sqfs_release,
};

int be_squashfuse_init(struct backend *b, enum backend_kind kind)
{
    struct sqfs *q = calloc(1, sizeof *q);
    if (!q)
        return -1;
    q->zstd = kind == BK_SQUASHFUSE_ZSTD;
    q->image = path_in(b->dir, "image.sqfs");
    q->mnt = path_in(b->dir, "mnt");
    b->name = q->zstd ? "squashfuse-zstd" : "squashfuse-raw";
    b->threads = 1;
    b->write_once = true;
    b->ops = &sqfs_ops;
    b->state = q;
    snprintf(b->note, sizeof b->note,
             "squashfuse_ll mount of a squashfs image of the files-raw files (%s), read with "
             "open/read/close on one thread; write = mksquashfs of that folder on all CPUs",
             q->zstd ? "mksquashfs -comp zstd: level 15, 128 KiB blocks"
                     : "mksquashfs -noI -noD -noF -noX: nothing compressed");
    return 0;
}

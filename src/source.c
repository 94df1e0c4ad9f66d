/*
 * source.c: the inputs of import, append and train-dict.
 *
 * An .npy file may be larger than memory (and than the address space a
 * process is allowed), so it is never mapped or read whole: records are
 * appended from a window of about CLI_BATCH_BYTES mapped over the file,
 * moved along it and unmapped, so the pages of finished windows leave the
 * process. Dictionary training reads its strided sample with pread.
 *
 * A --files import stores one file per record. The list is collected and
 * every file checked (regular, non-empty, within the record limit) before
 * anything is written, and a folder is walked in full and sorted by path
 * bytewise, so the same tree always gives the same indices.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "source.h"

int npy_src_open(struct npy_src *src, const char *path)
{
    *src = (struct npy_src){.fd = -1, .path = path};
    struct stat st;
    char err[256];
    int rc = EXIT_OK;
    src->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (src->fd < 0)
        return cli_fail("%s: %s", path, strerror(errno));
    if (fstat(src->fd, &st) != 0)
        rc = cli_fail("%s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = cli_fail("%s: not a regular file (an .npy file is needed)", path);
    else if (npy_read_header(src->fd, (uint64_t)st.st_size, &src->h, &src->itemsize,
                             &(uint64_t){0}, err, sizeof err) != NPY_OK)
        rc = cli_fail("%s: %s", path, err);
    else if (src->h.ndim == 0)
        rc = cli_fail("%s: a 0-d array holds no records (the first axis indexes the records)",
                      path);
    else if (src->h.ndim - 1 > ZR_MAX_NDIM)
        rc = cli_fail("%s: items of %u dimensions exceed the limit of %d", path,
                      src->h.ndim - 1, ZR_MAX_NDIM);
    if (rc != EXIT_OK) {
        npy_src_close(src);
        return rc;
    }
    src->n = src->h.shape[0];
    src->item_shape = src->h.shape + 1;
    src->item_ndim = src->h.ndim - 1;
    src->width = src->itemsize;
    for (uint32_t d = 0; d < src->item_ndim && rc == EXIT_OK; d++) {
        if (src->item_shape[d] == 0)
            rc = cli_fail("%s: the item shape has a zero dimension, so records would be empty",
                          path);
        else if (__builtin_mul_overflow(src->width, src->item_shape[d], &src->width) ||
                 src->width > ZR_MAX_RECORD)
            rc = cli_fail("%s: one record would exceed the 2 GiB record limit", path);
    }
    /* A scalar item skips the loop: its width is the item size alone. */
    if (rc == EXIT_OK && src->width > ZR_MAX_RECORD)
        rc = cli_fail("%s: one record would exceed the 2 GiB record limit", path);
    if (rc != EXIT_OK)
        npy_src_close(src);
    return rc;
}

void npy_src_close(struct npy_src *src)
{
    if (src->fd >= 0)
        close(src->fd);
    src->fd = -1;
}

uint64_t npy_src_batch(const struct npy_src *src)
{
    uint64_t k = CLI_BATCH_BYTES / src->width;
    return k ? k : 1;
}

int npy_src_map(const struct npy_src *src, uint64_t first, uint64_t count, struct npy_window *w)
{
    *w = (struct npy_window){0};
    if (count == 0)
        return EXIT_OK;
    uint64_t off = src->h.data_offset + first * src->width;
    uint64_t len = count * src->width;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = off / page * page;
    w->map_len = (size_t)(off + len - start);
    w->map = mmap(NULL, w->map_len, PROT_READ, MAP_SHARED, src->fd, (off_t)start);
    if (w->map == MAP_FAILED) {
        w->map = NULL;
        return cli_fail("%s: mapping %llu bytes: %s", src->path, (unsigned long long)len,
                        strerror(errno));
    }
    madvise(w->map, w->map_len, MADV_SEQUENTIAL);
    w->data = (const uint8_t *)w->map + (off - start);
    return EXIT_OK;
}

void npy_src_unmap(struct npy_window *w)
{
    if (w->map)
        munmap(w->map, w->map_len);
    *w = (struct npy_window){0};
}

int npy_src_train_dict(const struct npy_src *src, int tier, void **dict, size_t *dict_len)
{
    size_t budget;
    zr_tier_sizes(tier, NULL, &budget);
    if (src->n == 0)
        return cli_fail("%s holds no records to train a dictionary on", src->path);
    /* Records that fit are sampled whole, evenly spaced over the file; a
     * record larger than the budget contributes its head, from a few
     * records, as the library does for stores. */
    uint64_t k, per;
    if (src->width <= budget) {
        per = src->width;
        k = budget / per < src->n ? budget / per : src->n;
    } else {
        k = src->n < 16 ? src->n : 16;
        per = budget / k;
    }
    uint8_t *buf = malloc((size_t)(k * per));
    if (!buf)
        return cli_fail("out of memory for a %llu-byte training sample",
                        (unsigned long long)(k * per));
    int rc = EXIT_OK;
    for (uint64_t j = 0; j < k && rc == EXIT_OK; j++) {
        uint64_t rec = (uint64_t)((unsigned __int128)j * src->n / k);
        rc = cli_pread_all(src->fd, buf + j * per, (size_t)per,
                       src->h.data_offset + rec * src->width, src->path);
    }
    if (rc == EXIT_OK && zr_train_dict_buffer(buf, (size_t)per, (size_t)k, tier, dict, dict_len))
        rc = cli_fail_lib("training the dictionary");
    free(buf);
    return rc;
}

static int add_file(struct file_list *fl, const char *path, uint64_t size)
{
    if (size == 0)
        return cli_fail("%s: empty file (a record holds at least one byte)", path);
    /* A Ragged record carries its shape, 16 bytes for one dimension. */
    if (size > ZR_MAX_RECORD - 16)
        return cli_fail("%s: %llu bytes exceed the 2 GiB record limit", path,
                        (unsigned long long)size);
    if (fl->n == fl->cap) {
        size_t cap = fl->cap ? fl->cap * 2 : 256;
        struct file_ent *e = realloc(fl->e, cap * sizeof *e);
        if (!e)
            return cli_fail("out of memory listing files");
        fl->e = e;
        fl->cap = cap;
    }
    char *copy = strdup(path);
    if (!copy)
        return cli_fail("out of memory listing files");
    fl->e[fl->n++] = (struct file_ent){copy, size};
    return EXIT_OK;
}

/* Regular files, and symbolic links to regular files, are taken; links
 * to folders are not followed (so a link cannot make the walk loop), and
 * other kinds of entry (sockets, devices, fifos) are skipped. */
static int walk(struct file_list *fl, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return cli_fail("%s: %s", dir, strerror(errno));
    size_t dlen = strlen(dir);
    bool slash = dlen > 0 && dir[dlen - 1] == '/';
    int rc = EXIT_OK;
    struct dirent *e;
    errno = 0;
    while (rc == EXIT_OK && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *path = NULL;
        if (asprintf(&path, "%s%s%s", dir, slash ? "" : "/", e->d_name) < 0) {
            rc = cli_fail("out of memory listing files");
            break;
        }
        struct stat st;
        if (lstat(path, &st) != 0)
            rc = cli_fail("%s: %s", path, strerror(errno));
        else if (S_ISDIR(st.st_mode))
            rc = walk(fl, path);
        else if (S_ISLNK(st.st_mode) && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            rc = add_file(fl, path, (uint64_t)st.st_size);
        else if (S_ISREG(st.st_mode))
            rc = add_file(fl, path, (uint64_t)st.st_size);
        free(path);
        errno = 0;
    }
    if (rc == EXIT_OK && errno != 0)
        rc = cli_fail("%s: %s", dir, strerror(errno));
    closedir(d);
    return rc;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const struct file_ent *)a)->path, ((const struct file_ent *)b)->path);
}

static int read_list(struct file_list *fl, bool nul_sep)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = EXIT_OK;
    while (rc == EXIT_OK && (len = getdelim(&line, &cap, nul_sep ? '\0' : '\n', stdin)) >= 0) {
        if (len > 0 && line[len - 1] == (nul_sep ? '\0' : '\n'))
            line[--len] = '\0';
        if (len == 0)
            continue;
        if ((size_t)len != strlen(line)) {
            rc = cli_fail("a path on stdin holds a NUL byte (use --null for NUL-separated lists)");
            break;
        }
        struct stat st;
        if (stat(line, &st) != 0)
            rc = cli_fail("%s: %s", line, strerror(errno));
        else if (!S_ISREG(st.st_mode))
            rc = cli_fail("%s: not a regular file", line);
        else
            rc = add_file(fl, line, (uint64_t)st.st_size);
    }
    if (rc == EXIT_OK && ferror(stdin))
        rc = cli_fail("reading the list of files on stdin: %s", strerror(errno));
    free(line);
    return rc;
}

int file_list_collect(struct file_list *fl, const char *spec, bool nul_sep)
{
    *fl = (struct file_list){0};
    int rc;
    if (strcmp(spec, "-") == 0) {
        rc = read_list(fl, nul_sep);
        if (rc == EXIT_OK && fl->n == 0)
            rc = cli_fail("no paths on stdin");
    } else {
        struct stat st;
        if (stat(spec, &st) != 0)
            rc = cli_fail("%s: %s", spec, strerror(errno));
        else if (!S_ISDIR(st.st_mode))
            rc = cli_fail("%s is not a folder (use '--files -' to read paths from stdin)", spec);
        else
            rc = walk(fl, spec);
        if (rc == EXIT_OK && fl->n == 0)
            rc = cli_fail("%s holds no files", spec);
        if (rc == EXIT_OK)
            qsort(fl->e, fl->n, sizeof *fl->e, by_path);
    }
    if (rc != EXIT_OK)
        file_list_free(fl);
    return rc;
}

void file_list_free(struct file_list *fl)
{
    for (size_t k = 0; k < fl->n; k++)
        free(fl->e[k].path);
    free(fl->e);
    *fl = (struct file_list){0};
}

static int read_head(const char *path, uint8_t *buf, uint64_t len, uint64_t expect_size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cli_fail("%s: %s", path, strerror(errno));
    int rc = cli_pread_all(fd, buf, (size_t)len, 0, path);
    /* A file that grew since it was listed would be stored cut short. */
    uint8_t extra;
    if (rc == EXIT_OK && len == expect_size && pread(fd, &extra, 1, (off_t)len) != 0)
        rc = cli_fail("%s: the file changed while being read", path);
    close(fd);
    return rc;
}

int file_list_read(const struct file_list *fl, size_t k, uint8_t *buf)
{
    return read_head(fl->e[k].path, buf, fl->e[k].size, fl->e[k].size);
}

int file_list_train_dict(const struct file_list *fl, int tier, void **dict, size_t *dict_len)
{
    size_t budget;
    zr_tier_sizes(tier, NULL, &budget);
    uint64_t total = 0;
    for (size_t k = 0; k < fl->n; k++)
        total += fl->e[k].size;
    /* Every stride-th file while the budget lasts, so the sample spans the
     * whole list rather than its first folder. */
    uint64_t stride = total > budget ? (total + budget - 1) / budget : 1;
    size_t m = 0, used = 0, cap = (size_t)((fl->n + stride - 1) / stride);
    uint8_t *buf = malloc(budget);
    const void **recs = malloc(cap * sizeof *recs);
    size_t *lens = malloc(cap * sizeof *lens);
    int rc = EXIT_OK;
    if (!buf || !recs || !lens)
        rc = cli_fail("out of memory for the training sample");
    for (uint64_t k = 0; rc == EXIT_OK && k < fl->n && used < budget; k += stride) {
        uint64_t len = fl->e[k].size < budget - used ? fl->e[k].size : budget - used;
        rc = read_head(fl->e[k].path, buf + used, len, fl->e[k].size);
        recs[m] = buf + used;
        lens[m++] = (size_t)len;
        used += (size_t)len;
    }
    if (rc == EXIT_OK && zr_train_dict_records(recs, lens, m, tier, dict, dict_len) != 0)
        rc = cli_fail_lib("training the dictionary");
    free(lens);
    free(recs);
    free(buf);
    return rc;
}

/* Append s to the line buffer, escaping what would break the format. */
static size_t escape_path(const char *s, char *out)
{
    size_t n = 0;
    for (; *s; s++) {
        if (*s == '\t' || *s == '\n' || *s == '\\') {
            out[n++] = '\\';
            out[n++] = *s == '\t' ? 't' : *s == '\n' ? 'n' : '\\';
        } else {
            out[n++] = *s;
        }
    }
    return n;
}

int file_list_write_map(const struct file_list *fl, uint64_t first, const char *path)
{
    struct cli_out out;
    int rc = cli_out_open(&out, path);
    if (rc != EXIT_OK)
        return rc;
    /* Lines are gathered in a buffer and written when it fills. */
    size_t cap = 1 << 16, used = 0;
    char *buf = malloc(cap);
    if (!buf)
        rc = cli_fail("out of memory");
    for (size_t k = 0; k < fl->n && rc == EXIT_OK; k++) {
        size_t need = 2 * strlen(fl->e[k].path) + 32;
        if (used + need > cap) {
            rc = cli_write_all(out.fd, buf, used, path);
            used = 0;
        }
        if (rc == EXIT_OK && need > cap) {
            char *bigger = realloc(buf, need);
            if (!bigger)
                rc = cli_fail("out of memory");
            else
                buf = bigger, cap = need;
        }
        if (rc != EXIT_OK)
            break;
        used += (size_t)snprintf(buf + used, cap - used, "%llu\t", (unsigned long long)(first + k));
        used += escape_path(fl->e[k].path, buf + used);
        buf[used++] = '\n';
    }
    if (rc == EXIT_OK)
        rc = cli_write_all(out.fd, buf, used, path);
    free(buf);
    if (rc == EXIT_OK)
        return cli_out_commit(&out);
    cli_out_abort(&out);
    return rc;
}

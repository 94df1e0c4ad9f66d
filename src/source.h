/*
 * source.h: where zr reads records from: an .npy file, streamed through
 * a sliding memory map, or a list of files, one record per file.
 */
#ifndef ZR_SOURCE_H
#define ZR_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npy.h"

/* An .npy file seen as records: the first axis indexes the records, the
 * remaining axes are the item shape. */
struct npy_src {
    int fd;
    const char *path;
    struct npy_header h;
    uint64_t itemsize;
    uint64_t n;     /* records: shape[0] */
    uint64_t width; /* bytes per record */
    const uint64_t *item_shape;
    uint32_t item_ndim;
};

/* Open path and validate its header and size; EXIT_OK or EXIT_FAIL with
 * the message printed (naming the file). */
int npy_src_open(struct npy_src *src, const char *path);
void npy_src_close(struct npy_src *src);

/* A mapped window over records [first, first + count). */
struct npy_window {
    void *map;
    size_t map_len;
    const uint8_t *data; /* record first */
};
int npy_src_map(const struct npy_src *src, uint64_t first, uint64_t count, struct npy_window *w);
void npy_src_unmap(struct npy_window *w);

/* Records per window: about CLI_BATCH_BYTES of them, at least one. */
uint64_t npy_src_batch(const struct npy_src *src);

/* Train a zstd dictionary on a strided sample of the records, read with
 * pread so that the whole file is never mapped or held. */
int npy_src_train_dict(const struct npy_src *src, int tier, void **dict, size_t *dict_len);

/* A list of input files and their sizes (the --files operand). */
struct file_ent {
    char *path;
    uint64_t size;
};
struct file_list {
    struct file_ent *e;
    size_t n, cap;
};

/* Collect the files of a folder (recursively, sorted by path bytewise) or
 * of a list on stdin (spec "-", one path per line, or NUL-separated with
 * nul_sep) in the given order. Every file must be a non-empty regular
 * file that fits in a record; EXIT_OK or EXIT_FAIL with a message. */
int file_list_collect(struct file_list *fl, const char *spec, bool nul_sep);
void file_list_free(struct file_list *fl);

/* Read file k whole into buf (fl->e[k].size bytes). */
int file_list_read(const struct file_list *fl, size_t k, uint8_t *buf);

/* Train a dictionary on a strided sample of the files. */
int file_list_train_dict(const struct file_list *fl, int tier, void **dict, size_t *dict_len);

/* Write the index<TAB>path mapping, the first file having index first.
 * Tabs, newlines and backslashes in paths are escaped as \t, \n, \\. */
int file_list_write_map(const struct file_list *fl, uint64_t first, const char *out);

#endif

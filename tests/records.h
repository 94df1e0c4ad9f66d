/*
 * records.h: what the engine suites share: reproducible record contents,
 * appending and checking generated records, and reading a store's files
 * directly so that tests compare the engine against an expectation the
 * engine did not compute.
 */
#ifndef ZR_TEST_RECORDS_H
#define ZR_TEST_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <loaderx/loaderx.h>

/* The temporary folder of the running test, made by zt_setup and removed
 * by zt_teardown (which also restores the default geometry). */
extern char *zt_dir;
void zt_setup(void);
void zt_teardown(void);
/* zt_dir/name in a malloc'd string. */
char *zt_path(const char *name);

/* The item size of a dtype spelling, computed here rather than by the
 * library: the number after the kind, times four for 'U' (UCS-4). */
uint64_t zt_itemsize(const char *dtype);

/* Fill nelem elements of dtype for record rec of the stream seed. Values
 * are valid numbers of their kind (0/1 for bool, finite floats), in the
 * dtype's byte order, share a pattern across records (so that zstd and
 * dictionaries have something to find) and vary from record to record
 * and element to element. */
void zt_fill(void *dst, const char *dtype, uint64_t nelem, uint64_t seed, uint64_t rec);

/* The shape of Ragged record rec of stream seed: 0 to maxndim dimensions,
 * each 1..maxdim. Returns ndim. */
uint32_t zt_shape(uint64_t seed, uint64_t rec, uint32_t maxndim, uint64_t maxdim,
                  uint64_t shape[ZR_MAX_NDIM]);

/* Generated records in memory, ready for zr_append_ragged. */
typedef struct zt_ragged {
    uint64_t n;
    zr_rec *recs;
    uint64_t (*shapes)[ZR_MAX_NDIM];
    void **data;
    uint64_t *nbytes; /* payload bytes of each record */
} zt_ragged;

/* Records first..first+n-1 of stream seed, shapes from zt_shape. */
zt_ragged *zt_ragged_gen(const char *dtype, uint64_t seed, uint64_t first, uint64_t n,
                         uint32_t maxndim, uint64_t maxdim);
void zt_ragged_free(zt_ragged *r);

/* Dense records first..first+n-1 of stream seed, back to back (width
 * bytes each, nelem elements of dtype per record). */
void *zt_dense_gen(const char *dtype, uint64_t nelem, uint64_t seed, uint64_t first, uint64_t n);

/* Append n generated records to s, checking that they land at index
 * zr_len(s) (asserts). */
void zt_append_dense_gen(zr_store *s, uint64_t seed, uint64_t n);
void zt_append_ragged_gen(zr_store *s, uint64_t seed, uint64_t n, uint32_t maxndim,
                          uint64_t maxdim);

/* Gather idx[0..n) and compare every byte with the generator. Returns
 * true when all match; never asserts, so threads may call them. */
bool zt_dense_matches(zr_store *s, uint64_t seed, const uint64_t *idx, size_t n, int *rc);
bool zt_ragged_matches(zr_store *s, uint64_t seed, const uint64_t *idx, size_t n,
                       uint32_t maxndim, uint64_t maxdim, int *rc);

/* Asserting forms: every record 0..zr_len(s)-1 in order, and idx[0..n). */
void zt_check_dense_all(zr_store *s, uint64_t seed);
void zt_check_dense_idx(zr_store *s, uint64_t seed, const uint64_t *idx, size_t n);
void zt_check_ragged_all(zr_store *s, uint64_t seed, uint32_t maxndim, uint64_t maxdim);
void zt_check_ragged_idx(zr_store *s, uint64_t seed, const uint64_t *idx, size_t n,
                         uint32_t maxndim, uint64_t maxdim);

/* Whole files. zt_slurp asserts the file exists; zt_file_size gives -1
 * for a missing file. */
void *zt_slurp(const char *path, size_t *len);
void zt_spit(const char *path, const void *buf, size_t len);
int64_t zt_file_size(const char *path);
/* Overwrite len bytes at off inside an existing file. */
void zt_patch(const char *path, uint64_t off, const void *buf, size_t len);

/* A record-table entry as the test reads it from N.loc (little-endian). */
typedef struct zt_loc {
    uint32_t offset, phys, logic, chunk;
} zt_loc;
/* Entry number entry of segment seg of the store at dir. */
zt_loc zt_loc_read(const char *dir, uint64_t seg, uint64_t entry);
/* Byte offset of record i's entry inside its segment, and the segment. */
void zt_loc_where(uint64_t i, uint64_t seg_entries, uint64_t *seg, uint64_t *entry);
/* The 32-byte header fields of meta.zr as the test reads them. */
typedef struct zt_meta {
    uint64_t length;
    uint32_t tail_chunk, tail_offset;
    uint8_t codec;
} zt_meta;
zt_meta zt_meta_read(const char *dir);
/* Write the header fields of meta.zr (reserved bytes zero), and entry
 * number entry of segment seg (its file is created if missing), for
 * stores built by hand. */
void zt_meta_write(const char *dir, zt_meta m);
void zt_loc_write(const char *dir, uint64_t seg, uint64_t entry, zt_loc l);
/* Set the size of a file, creating it if missing; growing it leaves a
 * hole, so a 4 GiB chunk costs nothing until its bytes are written. */
void zt_resize(const char *path, uint64_t size);

/* Every file of a folder (names, sizes, bytes) in one buffer, in name
 * order, to check that a failed call left a store exactly as it was. */
void *zt_snapshot(const char *dir, size_t *len);
/* Assert that dir still matches a snapshot (frees it). */
void zt_assert_unchanged(const char *dir, void *snap, size_t len);

uint64_t zt_le64(const void *p);
uint32_t zt_le32(const void *p);

#endif

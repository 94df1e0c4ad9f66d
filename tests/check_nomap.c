/*
 * check_nomap.c: records read with pread instead of through the chunk
 * mappings: every record of a handle opened with ZR_NOMAP (but small raw
 * records in the store's first GiB, which it maps: the suite sets that
 * bound to nothing but where it tests it), and raw records of 64 KiB or
 * more on any handle. They must come back exactly as a mapped handle
 * returns them, for every kind and codec, leave the chunk mappings
 * untouched (nothing of the store resident in the process, read from
 * /proc/self/smaps, not from the library), and report a chunk that shrank
 * under them as corrupt. Also here: how the mappings themselves are made
 * (huge pages for a store that fits in memory).
 */
#include <check.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine.h"
#include "tests/helpers.h"
#include "tests/records.h"
#include "tests/suites.h"

static const int codecs[] = {ZR_CODEC_RAW, ZR_CODEC_ZSTD, ZR_CODEC_ZSTD_DICT};
#define NCODECS (sizeof codecs / sizeof codecs[0])

/* Options for a store of codec; a dictionary is trained on records of
 * the same generator in a scratch zstd store. */
static zr_create_opts opts_for(int codec, bool ragged, uint64_t seed, void **dict)
{
    zr_create_opts o = {.size = sizeof(zr_create_opts), .codec = codec};
    *dict = NULL;
    if (codec != ZR_CODEC_ZSTD_DICT)
        return o;
    char *tpath = zt_path("train");
    zr_create_opts zo = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD};
    zr_store *t;
    const uint64_t shape[] = {64, 8};
    if (ragged) {
        ZR_OK_CALL(zr_ragged_create(&t, tpath, "<i4", &zo));
        zt_append_ragged_gen(t, seed, 300, 2, 40);
    } else {
        ZR_OK_CALL(zr_dense_create(&t, tpath, "<i4", shape, 2, &zo));
        zt_append_dense_gen(t, seed, 300);
    }
    size_t len;
    ZR_OK_CALL(zr_train_dict_store(t, ZR_TIER_FAST, dict, &len));
    zr_close(t);
    zt_rmtree(tpath);
    free(tpath);
    o.dict = *dict;
    o.dict_len = len;
    return o;
}

/* A store of kind (Dense: records of rows x 8 int32; Ragged: up to
 * maxdim x maxdim) and codec with n generated records. */
static char *make_sized_store(bool ragged, int codec, uint64_t seed, uint64_t n, uint64_t rows,
                              uint64_t maxdim)
{
    void *dict;
    zr_create_opts o = opts_for(codec, ragged, seed, &dict);
    char *path = zt_path("s");
    zr_store *s;
    const uint64_t shape[] = {rows, 8};
    if (ragged) {
        ZR_OK_CALL(zr_ragged_create(&s, path, "<i4", &o));
        zt_append_ragged_gen(s, seed, n, 2, maxdim);
    } else {
        ZR_OK_CALL(zr_dense_create(&s, path, "<i4", shape, 2, &o));
        zt_append_dense_gen(s, seed, n);
    }
    zr_close(s);
    free(dict);
    return path;
}

/* Records of 2 KiB (Dense) or up to 6.4 KiB (Ragged). */
static char *make_store(bool ragged, int codec, uint64_t seed, uint64_t n)
{
    return make_sized_store(ragged, codec, seed, n, 64, 40);
}

/* Dense records of 2,100 x 8 int32 (65.6 KiB), just over the size from
 * which raw records are read with pread. */
#define BIG_ROWS 2100

START_TEST(nomap_gathers_what_a_mapped_handle_gathers)
{
    bool ragged = _i >= (int)NCODECS;
    int codec = codecs[_i % NCODECS];
    char *path = make_store(ragged, codec, 70 + (uint64_t)_i, 500);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY | ZR_NOMAP));
    uint64_t idx[700];
    for (size_t k = 0; k < 700; k++)
        idx[k] = (k * 389 + 7) % 500;
    if (ragged) {
        zt_check_ragged_all(s, 70 + (uint64_t)_i, 2, 40);
        zt_check_ragged_idx(s, 70 + (uint64_t)_i, idx, 700, 2, 40);
    } else {
        zt_check_dense_all(s, 70 + (uint64_t)_i);
        zt_check_dense_idx(s, 70 + (uint64_t)_i, idx, 700);
    }
    zr_close(s);
    free(path);
}
END_TEST

/* Read this process's mappings of file (the header line of a mapping in
 * /proc/self/smaps ends with its path): the sum of field (as "Rss", in
 * kB) over them, -1 when there is none; and, with flag, whether one has
 * that VmFlags code (as "hg" for MADV_HUGEPAGE). */
static long mapping_scan(const char *file, const char *field, const char *flag, bool *has)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    bool in = false;
    long sum = -1;
    size_t flen = strlen(field);
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        if (n && line[n - 1] == '\n')
            line[--n] = 0;
        if (n > strlen(file) && strcmp(line + n - strlen(file), file) == 0) {
            in = true;
            continue;
        }
        long kb;
        if (in && strncmp(line, field, flen) == 0 && line[flen] == ':' &&
            sscanf(line + flen + 1, "%ld kB", &kb) == 1)
            sum = sum < 0 ? kb : sum + kb;
        if (in && strncmp(line, "VmFlags:", 8) == 0) {
            for (char *t = strtok(line + 8, " "); t && flag; t = strtok(NULL, " "))
                *has |= strcmp(t, flag) == 0;
            in = false; /* the last line of a mapping's block */
        }
    }
    fclose(f);
    return sum;
}

static long mapping_rss_kb(const char *file)
{
    return mapping_scan(file, "Rss", NULL, NULL);
}

static bool mapping_has_flag(const char *file, const char *flag)
{
    bool has = false;
    mapping_scan(file, "Rss", flag, &has);
    return has;
}

/* A store that fits in a quarter of the RAM is mapped with MADV_HUGEPAGE
 * (its chunks and its record table), so that the kernel maps its pages
 * 2 MiB at a time. The first gather plans its reads and finds the store
 * in memory; the files are mapped by the second. Needs a kernel with
 * transparent huge pages. */
START_TEST(small_store_is_mapped_with_huge_pages)
{
    if (access("/sys/kernel/mm/transparent_hugepage", F_OK) != 0)
        return;
    char *path = make_store(false, ZR_CODEC_RAW, 140, 50);
    char *chunk = zt_join(path, "0.chunk"), *loc = zt_join(path, "0.loc");
    char *rchunk = realpath(chunk, NULL), *rloc = realpath(loc, NULL);
    ck_assert_ptr_nonnull(rchunk);
    ck_assert_ptr_nonnull(rloc);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zt_check_dense_all(s, 140);
    zt_check_dense_all(s, 140);
    ck_assert(mapping_has_flag(rchunk, "hg"));
    ck_assert(mapping_has_flag(rloc, "hg"));
    zr_close(s);
    free(rchunk);
    free(rloc);
    free(chunk);
    free(loc);
    free(path);
}
END_TEST

/* The kilobytes of this process's mapping of a Dense store's first chunk
 * that are mapped as 2 MiB pages, once every record has been gathered and
 * checked (records under 64 KiB are read through the mapping). */
static long gathered_pmd_kb(const char *path, uint64_t seed)
{
    char *chunk = zt_join(path, "0.chunk"), *real = realpath(chunk, NULL);
    ck_assert_ptr_nonnull(real);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    /* A handle's first gather reads with planned reads, to learn whether
     * the pages are cached; the second copies from the mapping. */
    zt_check_dense_all(s, seed);
    zt_check_dense_all(s, seed);
    long kb = mapping_scan(real, "FilePmdMapped", NULL, NULL);
    zr_close(s);
    free(real);
    free(chunk);
    return kb;
}

/* Whether this folder's file system keeps a file written in one 4 MiB
 * write in 2 MiB page-cache folios (tmpfs, or a kernel without large
 * folios for it, does not): the file mapped with MADV_HUGEPAGE at a 2 MiB
 * boundary is then mapped in 2 MiB pages once read. */
static bool folder_keeps_huge_folios(const char *probe)
{
    const size_t mib2 = (size_t)2 << 20, len = 2 * mib2;
    char *buf = malloc(len);
    ck_assert_ptr_nonnull(buf);
    memset(buf, 7, len);
    zt_spit(probe, buf, len);
    free(buf);
    int fd = open(probe, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    char *area = mmap(NULL, len + mib2, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(area, MAP_FAILED);
    char *at = (char *)(((uintptr_t)area + mib2 - 1) & ~(uintptr_t)(mib2 - 1));
    char *map = mmap(at, len, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
    ck_assert_ptr_ne(map, MAP_FAILED);
    madvise(map, len, MADV_HUGEPAGE);
    long sum = 0;
    for (size_t o = 0; o < len; o += 4096)
        sum += map[o];
    char *real = realpath(probe, NULL);
    long kb = mapping_scan(real, "FilePmdMapped", NULL, NULL);
    free(real);
    munmap(area, len + mib2);
    close(fd);
    return sum > 0 && kb >= 2048;
}

#define PMD_RECORDS 8192 /* 16 MiB of 2 KiB records */

/* A Dense append leaves its chunk in 2 MiB page-cache folios, which the
 * huge-page mapping then maps whole: the writes of the pool's threads
 * are cut on 2 MiB boundaries of the chunk (whatever the thread count:
 * tests/hugefolio.sh runs this suite with 16), and each piece of the
 * caller's buffer is faulted in before its write, so an append from a
 * mapped file whose pages are not cached (an .npy opened with mmap) does
 * as well as one from memory. */
START_TEST(dense_append_lands_in_huge_pages)
{
    char *probe = zt_path("probe.bin");
    if (access("/sys/kernel/mm/transparent_hugepage", F_OK) != 0 ||
        !folder_keeps_huge_folios(probe)) {
        fprintf(stderr, "dense_append_lands_in_huge_pages: skipped: the file system here "
                        "keeps no 2 MiB page-cache folios\n");
        free(probe);
        return;
    }
    const uint64_t shape[] = {64, 8};
    const size_t bytes = PMD_RECORDS * 64 * 8 * 4;
    void *recs = zt_dense_gen("<i4", 64 * 8, 150, 0, PMD_RECORDS);
    char *from_memory = zt_path("memory"), *from_file = zt_path("file");
    char *src = zt_path("src.bin");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, from_memory, "<i4", shape, 2, NULL));
    ZR_OK_CALL(zr_append_dense(s, "<i4", shape, 2, recs, PMD_RECORDS, NULL));
    zr_close(s);
    zt_spit(src, recs, bytes);
    int fd = open(src, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fdatasync(fd), 0);
    ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    void *map = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(map, MAP_FAILED);
    ZR_OK_CALL(zr_dense_create(&s, from_file, "<i4", shape, 2, NULL));
    ZR_OK_CALL(zr_append_dense(s, "<i4", shape, 2, map, PMD_RECORDS, NULL));
    zr_close(s);
    munmap(map, bytes);
    close(fd);
    const char *paths[2] = {from_memory, from_file};
    for (int k = 0; k < 2; k++) {
        long kb = gathered_pmd_kb(paths[k], 150);
        ck_assert_msg(kb > 0 && (size_t)kb * 1024 >= bytes / 2,
                      "append from %s, %d threads: %ld of %zu KiB of the chunk are mapped as "
                      "2 MiB pages", k ? "a mapped file" : "memory", zr_threads(), kb,
                      bytes / 1024);
    }
    free(recs);
    free(src);
    free(from_file);
    free(from_memory);
    free(probe);
}
END_TEST

/* A ZR_NOMAP handle maps small raw records only in the store's first
 * bytes (1 GiB, set lower here): case 0 is a mapped handle, 1 a ZR_NOMAP
 * handle whose bound holds the whole store (4,000 records of 2 KiB), 2
 * one whose bound ends at record 512, 3 one that maps nothing. */
START_TEST(nomap_gather_maps_no_more_than_its_bound)
{
    static const uint64_t bound[] = {0, 0, 512 * 2048, 1};
    bool nomap = _i > 0;
    char *path = make_store(false, ZR_CODEC_RAW, 81, 4000);
    char *chunk = zt_join(path, "0.chunk");
    char *real = realpath(chunk, NULL);
    ck_assert_ptr_nonnull(real);
    zr_testing_set_nomap_mapped(bound[_i]);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY | (nomap ? ZR_NOMAP : 0)));
    /* The first gather probes with planned reads (no mapping); the second
     * copies from the mapping what the handle maps. */
    zt_check_dense_all(s, 81);
    zt_check_dense_all(s, 81);
    long rss = mapping_rss_kb(real);
    /* Resident through a mapping of the chunk, in kB (-1: no mapping at
     * all): the 8,000 KiB of records, or those below the bound and the
     * rest of the page-cache folio (up to 2 MiB) that the last of them
     * lies in, which the kernel maps whole. */
    if (_i < 2)
        ck_assert_int_ge(rss, 8000 / 2);
    else if (_i == 2)
        ck_assert_msg(rss >= 512 && rss <= 1024 + 2048, "%ld kB resident", rss);
    else
        ck_assert_int_le(rss, 0);
    zr_close(s);
    free(real);
    free(chunk);
    free(path);
}
END_TEST

START_TEST(nomap_reports_a_chunk_shorter_than_its_entries_as_corrupt)
{
    bool ragged = _i == 1;
    char *path = make_store(ragged, ZR_CODEC_RAW, 90, 300);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY | ZR_NOMAP));
    uint64_t first = 0;
    uint8_t one[4096];
    if (!ragged)
        ZR_OK_CALL(zr_gather_dense(s, &first, 1, one));
    /* The chunk loses its second half after the handle checked its size. */
    char *chunk = zt_join(path, "0.chunk");
    int64_t size = zt_file_size(chunk);
    ck_assert_int_eq(truncate(chunk, size / 2), 0);
    uint64_t last = 299;
    if (ragged) {
        uint64_t bytes;
        ZR_OK_CALL(zr_ragged_sizes(s, &last, 1, &bytes));
        uint8_t *buf = malloc(bytes);
        uint64_t off = 0;
        ZR_FAIL_CALL(zr_gather_ragged(s, &last, 1, buf, &off), ZR_ECORRUPT);
        free(buf);
    } else {
        ZR_FAIL_CALL(zr_gather_dense(s, &last, 1, one), ZR_ECORRUPT);
    }
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "record 299"));
    zr_close(s);
    free(chunk);
    free(path);
}
END_TEST

START_TEST(open_rejects_unknown_mode_bits)
{
    char *path = make_store(false, ZR_CODEC_RAW, 95, 3);
    zr_store *s = NULL;
    ZR_FAIL_CALL(zr_open(&s, path, ZR_RDONLY | ZR_NOMAP | 8), ZR_EINVAL);
    ck_assert_ptr_null(s);
    ZR_OK_CALL(zr_open(&s, path, ZR_RDWR | ZR_NOMAP));
    ck_assert_int_eq(zr_writable(s), 1);
    zt_append_dense_gen(s, 95, 2);
    zt_check_dense_all(s, 95);
    zr_close(s);
    free(path);
}
END_TEST

/* Raw records of 64 KiB or more are read with pread on a mapped handle
 * too. Dense: all of them; Ragged: records of 4 bytes to 156 KiB, so a
 * batch mixes records copied from the mapping and records read with
 * pread. */
START_TEST(large_raw_records_gather_exactly_on_a_mapped_handle)
{
    bool ragged = _i == 1;
    uint64_t seed = 110 + (uint64_t)_i, n = ragged ? 200 : 60;
    char *path = make_sized_store(ragged, ZR_CODEC_RAW, seed, n, BIG_ROWS, 200);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    uint64_t idx[300];
    for (size_t k = 0; k < 300; k++)
        idx[k] = (k * 37 + 11) % n;
    if (ragged) {
        zt_check_ragged_all(s, seed, 2, 200);
        zt_check_ragged_idx(s, seed, idx, 300, 2, 200);
    } else {
        zt_check_dense_all(s, seed);
        zt_check_dense_idx(s, seed, idx, 300);
    }
    zr_close(s);
    free(path);
}
END_TEST

START_TEST(large_raw_records_stay_out_of_the_mapping)
{
    char *path = make_sized_store(false, ZR_CODEC_RAW, 120, 40, BIG_ROWS, 0);
    char *chunk = zt_join(path, "0.chunk");
    char *real = realpath(chunk, NULL);
    ck_assert_ptr_nonnull(real);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    zt_check_dense_all(s, 120);
    /* 40 records of 65.6 KiB were gathered; not one of their pages is
     * resident through this process's mapping of the chunk. */
    ck_assert_int_le(mapping_rss_kb(real), 0);
    zr_close(s);
    free(real);
    free(chunk);
    free(path);
}
END_TEST

/* Where a mapped copy would have died of SIGBUS, pread sees the end of
 * the file. */
START_TEST(large_raw_record_past_a_shrunk_chunk_is_corrupt)
{
    char *path = make_sized_store(false, ZR_CODEC_RAW, 130, 30, BIG_ROWS, 0);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, path, ZR_RDONLY));
    size_t width = (size_t)BIG_ROWS * 8 * 4;
    uint8_t *one = malloc(width);
    uint64_t first = 0, last = 29;
    ZR_OK_CALL(zr_gather_dense(s, &first, 1, one));
    char *chunk = zt_join(path, "0.chunk");
    ck_assert_int_eq(truncate(chunk, zt_file_size(chunk) / 2), 0);
    ZR_FAIL_CALL(zr_gather_dense(s, &last, 1, one), ZR_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "record 29"));
    zr_close(s);
    free(one);
    free(chunk);
    free(path);
}
END_TEST

static void setup(void)
{
    zt_setup();
    zr_testing_set_nomap_mapped(1);
}

static void teardown(void)
{
    zr_testing_set_nomap_mapped(0);
    zt_teardown();
}

Suite *suite_nomap(void)
{
    Suite *s = suite_create("nomap");
    TCase *tc = tcase_create("nomap");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, nomap_gathers_what_a_mapped_handle_gathers, 0, 2 * NCODECS);
    tcase_add_loop_test(tc, nomap_gather_maps_no_more_than_its_bound, 0, 4);
    tcase_add_loop_test(tc, nomap_reports_a_chunk_shorter_than_its_entries_as_corrupt, 0, 2);
    tcase_add_test(tc, open_rejects_unknown_mode_bits);
    tcase_add_loop_test(tc, large_raw_records_gather_exactly_on_a_mapped_handle, 0, 2);
    tcase_add_test(tc, large_raw_records_stay_out_of_the_mapping);
    tcase_add_test(tc, large_raw_record_past_a_shrunk_chunk_is_corrupt);
    tcase_add_test(tc, small_store_is_mapped_with_huge_pages);
    tcase_add_test(tc, dense_append_lands_in_huge_pages);
    suite_add_tcase(s, tc);
    return s;
}

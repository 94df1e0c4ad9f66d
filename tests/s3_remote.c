/*
 * s3_remote.c: stores in an object store, against a real S3 server
 * (tests/s3/run.sh starts radosgw and sets AWS_* and LOADERX_TEST_BUCKET).
 * Stores are written locally with a small geometry (chunks of 64 KiB,
 * segments of 64 entries, so that batches cross chunk and segment ends),
 * their files uploaded as objects, and the remote store read back: every
 * record against the generator that wrote it (not against the library's
 * own local reads), batches with repeats, verify and stats; then what a
 * reader must refuse: a write mode, an upload without its header, a
 * missing object, a wrong secret, a missing bucket, a server that is not
 * there.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/engine.h"
#include "lib/s3.h"
#include "tests/helpers.h"
#include "tests/records.h"

#define CHUNK (64u << 10)
#define SEG 64

static const char *bucket(void)
{
    const char *b = getenv("LOADERX_TEST_BUCKET");
    ck_assert_msg(b && *b, "LOADERX_TEST_BUCKET is not set (tests/s3/run.sh sets it)");
    return b;
}

/* A prefix of its own for each store a test uploads. */
static char *remote_url(const char *name)
{
    static unsigned seq;
    char *url;
    ck_assert_int_ge(asprintf(&url, "s3://%s/remote-%d-%u-%s", bucket(), (int)getpid(), seq++,
                              name), 0);
    return url;
}

/* Upload every file of the store folder dir as an object under url,
 * except the file named skip (NULL: none). */
static void upload(const char *dir, const char *url, const char *skip)
{
    struct zr_s3 *c;
    ZR_OK_CALL(zr_s3_open(&c, url));
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || (skip && strcmp(e->d_name, skip) == 0))
            continue;
        char *path = zt_join(dir, e->d_name);
        int fd = open(path, O_RDONLY);
        ck_assert_int_ge(fd, 0);
        struct stat st;
        ck_assert_int_eq(fstat(fd, &st), 0);
        ZR_OK_CALL(zr_s3_put_file(c, e->d_name, fd, (uint64_t)st.st_size, 0));
        close(fd);
        free(path);
    }
    closedir(d);
    zr_s3_close(c);
}

static const int codecs[] = {ZR_CODEC_RAW, ZR_CODEC_ZSTD, ZR_CODEC_ZSTD_DICT};

/* A local store of n generated records (Dense 64 x 8 int32, 2 KiB; Ragged
 * up to 40 x 40 int32) with codec, in zt_dir/name. */
static char *make_store(const char *name, bool ragged, int codec, uint64_t seed, uint64_t n)
{
    zr_create_opts o = {.size = sizeof(zr_create_opts), .codec = codec};
    void *dict = NULL;
    const uint64_t shape[] = {64, 8};
    zr_store *s;
    if (codec == ZR_CODEC_ZSTD_DICT) {
        char *tpath = zt_path("train");
        zr_create_opts zo = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD};
        if (ragged) {
            ZR_OK_CALL(zr_ragged_create(&s, tpath, "<i4", &zo));
            zt_append_ragged_gen(s, seed, 300, 2, 40);
        } else {
            ZR_OK_CALL(zr_dense_create(&s, tpath, "<i4", shape, 2, &zo));
            zt_append_dense_gen(s, seed, 300);
        }
        ZR_OK_CALL(zr_train_dict_store(s, ZR_TIER_FAST, &dict, &o.dict_len));
        o.dict = dict;
        zr_close(s);
        zt_rmtree(tpath);
        free(tpath);
    }
    char *path = zt_path(name);
    if (ragged) {
        ZR_OK_CALL(zr_ragged_create(&s, path, "<i4", &o));
        zt_append_ragged_gen(s, seed, n, 2, 40);
    } else {
        ZR_OK_CALL(zr_dense_create(&s, path, "<i4", shape, 2, &o));
        zt_append_dense_gen(s, seed, n);
    }
    zr_close(s);
    free(dict);
    return path;
}

static void setup(void)
{
    zt_setup();
    zr_testing_set_geometry(CHUNK, SEG);
}

/* Every record, batches with repeats across chunk and segment ends,
 * verify and stats, for each kind and codec (_i: kind * 3 + codec). */
START_TEST(remote_reads_what_was_written)
{
    bool ragged = _i >= 3;
    int codec = codecs[_i % 3];
    uint64_t seed = 500 + (uint64_t)_i, n = 700;
    char *dir = make_store("s", ragged, codec, seed, n);
    char *url = remote_url("whole");
    upload(dir, url, NULL);

    zr_store *r, *l;
    ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
    ZR_OK_CALL(zr_open(&l, dir, ZR_RDONLY));
    ck_assert_uint_eq(zr_len(r), n);
    ck_assert_int_eq(zr_kind(r), ragged ? ZR_RAGGED : ZR_DENSE);
    ck_assert_int_eq(zr_codec(r), codec);
    ck_assert_str_eq(zr_path(r), url);
    ck_assert_int_eq(zr_writable(r), 0);

    /* Repeats, and neighbours across the ends of chunks (32 Dense
     * records each) and of segments (64 entries). */
    uint64_t idx[300];
    size_t m = 0;
    for (uint64_t e = 31; e + 1 < n && m + 4 <= 200; e += 32) {
        idx[m++] = e;
        idx[m++] = e + 1;
        idx[m++] = e;
        idx[m++] = (e * 7919) % n;
    }
    for (; m < 300; m++)
        idx[m] = (m * 389 + 11) % n;
    if (ragged) {
        zt_check_ragged_all(r, seed, 2, 40);
        zt_check_ragged_idx(r, seed, idx, m, 2, 40);
    } else {
        zt_check_dense_all(r, seed);
        zt_check_dense_idx(r, seed, idx, m);
    }

    zr_verify_report *rep;
    ZR_OK_CALL(zr_verify(r, &rep));
    ck_assert_uint_eq(rep->nproblems, 0);
    ck_assert_uint_eq(rep->records_checked, n);
    zr_verify_report_free(rep);

    zr_store_stats rs = ZR_STORE_STATS_INIT, ls = ZR_STORE_STATS_INIT;
    ZR_OK_CALL(zr_stats(r, &rs));
    ZR_OK_CALL(zr_stats(l, &ls));
    ck_assert_uint_eq(rs.records, ls.records);
    ck_assert_uint_eq(rs.live_bytes, ls.live_bytes);
    ck_assert_uint_eq(rs.chunk_bytes, ls.chunk_bytes);
    ck_assert_uint_eq(rs.dict_bytes, ls.dict_bytes);

    /* What needs a local file says so. */
    const void *p;
    uint64_t size;
    if (codec == ZR_CODEC_RAW)
        ZR_FAIL_CALL(zr_record_span(r, 0, &p, &size), ZR_EINVAL);
    ck_assert_int_eq(zr_records_cached(r, idx, 4), 0);
    zr_close(r);
    zr_close(l);
    free(url);
    free(dir);
}
END_TEST

START_TEST(remote_opens_read_only)
{
    char *dir = make_store("s", false, ZR_CODEC_RAW, 1, 40);
    char *url = remote_url("ro");
    upload(dir, url, NULL);
    zr_store *r;
    ZR_FAIL_CALL(zr_open(&r, url, ZR_RDWR), ZR_EROFS);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "read-only"));
    ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
    const char *dt = "<i4";
    const uint64_t shape[] = {64, 8};
    void *rec = calloc(1, 2048);
    ZR_FAIL_CALL(zr_append_dense(r, dt, shape, 2, rec, 1, NULL), ZR_EROFS);
    free(rec);
    zr_close(r);
    free(url);
    free(dir);
}
END_TEST

/* An upload stopped before its header (zr push sends meta.zr last) is
 * not a store; neither is an empty prefix. */
START_TEST(remote_without_header_is_not_a_store)
{
    char *dir = make_store("s", false, ZR_CODEC_RAW, 2, 40);
    char *url = remote_url("nohdr");
    upload(dir, url, "meta.zr");
    zr_store *r;
    ZR_FAIL_CALL(zr_open(&r, url, ZR_RDONLY), ZR_ENOTSTORE);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "meta.zr"));
    char *empty = remote_url("empty");
    ZR_FAIL_CALL(zr_open(&r, empty, ZR_RDONLY), ZR_ENOTSTORE);
    free(empty);
    free(url);
    free(dir);
}
END_TEST

/* A missing chunk object refuses to open; a chunk object shorter than
 * its records gives ZR_ECORRUPT on the records past its end, and verify
 * lists them. */
START_TEST(remote_damage_is_reported)
{
    char *dir = make_store("s", false, ZR_CODEC_RAW, 3, 100);
    char *url = remote_url("damage");
    upload(dir, url, NULL);
    struct zr_s3 *c;
    ZR_OK_CALL(zr_s3_open(&c, url));
    ZR_OK_CALL(zr_s3_delete(c, "1.chunk"));
    zr_store *r;
    ZR_FAIL_CALL(zr_open(&r, url, ZR_RDONLY), ZR_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "1.chunk"));
    /* 1.chunk back, but only its first half: records 32..47 remain. */
    char *chunk = zt_join(dir, "1.chunk");
    size_t len;
    void *bytes = zt_slurp(chunk, &len);
    ZR_OK_CALL(zr_s3_put(c, "1.chunk", bytes, len / 2));
    ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
    uint64_t ok[] = {32, 47, 0, 99}, bad[] = {10, 48};
    zt_check_dense_idx(r, 3, ok, 4);
    uint8_t out[2 * 2048];
    ZR_FAIL_CALL(zr_gather_dense(r, bad, 2, out), ZR_ECORRUPT);
    zr_verify_report *rep;
    ZR_FAIL_CALL(zr_verify(r, &rep), ZR_ECORRUPT);
    ck_assert_uint_eq(rep->nproblems, 16);
    zr_verify_report_free(rep);
    zr_close(r);
    zr_s3_close(c);
    free(bytes);
    free(chunk);
    free(url);
    free(dir);
}
END_TEST

/* Errors of access, each with its code, promptly, and no secret in the
 * message. */
START_TEST(remote_access_errors)
{
    char *dir = make_store("s", false, ZR_CODEC_RAW, 4, 10);
    char *url = remote_url("access");
    upload(dir, url, NULL);
    zr_store *r;
    char *secret = strdup(getenv("AWS_SECRET_ACCESS_KEY"));
    setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-do-not-print", 1);
    ZR_FAIL_CALL(zr_open(&r, url, ZR_RDONLY), ZR_EACCESS);
    ck_assert_ptr_null(strstr(zr_last_error(), "wrong-secret"));
    ck_assert_ptr_null(strstr(zr_last_error(), secret));
    setenv("AWS_SECRET_ACCESS_KEY", secret, 1);

    char *nobucket;
    ck_assert_int_ge(asprintf(&nobucket, "s3://no-such-bucket-%d/x", (int)getpid()), 0);
    ZR_FAIL_CALL(zr_open(&r, nobucket, ZR_RDONLY), ZR_ENOTSTORE);

    char *endpoint = strdup(getenv("AWS_ENDPOINT_URL"));
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9", 1);
    ZR_FAIL_CALL(zr_open(&r, url, ZR_RDONLY), ZR_EIO);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "127.0.0.1:9"));
    setenv("AWS_ENDPOINT_URL", endpoint, 1);

    ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
    zt_check_dense_all(r, 4);
    zr_close(r);
    free(endpoint);
    free(nobucket);
    free(secret);
    free(url);
    free(dir);
}
END_TEST

/* Bytes the files under dir take on the disk (sparse files count what
 * they hold). */
static uint64_t disk_bytes(const char *dir)
{
    uint64_t total = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *path = zt_join(dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0)
            total += S_ISDIR(st.st_mode) ? disk_bytes(path) : (uint64_t)st.st_blocks * 512;
        free(path);
    }
    closedir(d);
    return total;
}

/* Replace every chunk object of the store at url with bytes of the same
 * size that are not its records: the listing (and so the cache's name
 * for the store) stays the same, and only a cache can still give the
 * records. */
static void spoil_chunks(const char *dir, const char *url)
{
    struct zr_s3 *c;
    ZR_OK_CALL(zr_s3_open(&c, url));
    for (unsigned k = 0;; k++) {
        char name[32];
        snprintf(name, sizeof name, "%u.chunk", k);
        char *path = zt_join(dir, name);
        int64_t size = zt_file_size(path);
        free(path);
        if (size < 0)
            break;
        uint8_t *junk = malloc((size_t)size + 1);
        memset(junk, 0xa5, (size_t)size + 1);
        ZR_OK_CALL(zr_s3_put(c, name, junk, (size_t)size));
        free(junk);
    }
    zr_s3_close(c);
}

/* A cache folder: after one pass over a store every record comes from it
 * (the objects are spoiled afterwards and the records still read right),
 * for a second handle and for two processes at once; a handle without
 * the cache sees the spoiled objects. _i: kind * 3 + codec. */
START_TEST(cache_serves_what_it_fetched)
{
    bool ragged = _i >= 3;
    int codec = codecs[_i % 3];
    uint64_t seed = 600 + (uint64_t)_i, n = 500;
    char *dir = make_store("s", ragged, codec, seed, n);
    char *url = remote_url("cache");
    upload(dir, url, NULL);
    char *cache = zt_path("cache");
    setenv("LOADERX_CACHE_DIR", cache, 1);
    setenv("LOADERX_CACHE_BLOCK", "4096", 1);
    zr_store *r;
    ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
    if (ragged)
        zt_check_ragged_all(r, seed, 2, 40);
    else
        zt_check_dense_all(r, seed);
    zr_close(r);
    ck_assert_uint_gt(disk_bytes(cache), 0);
    spoil_chunks(dir, url);

    uint64_t idx[200];
    for (size_t k = 0; k < 200; k++)
        idx[k] = (k * 263 + 5) % n;
    for (int proc = 0; proc < 2; proc++) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            zr_store *c;
            int ok = zr_open(&c, url, ZR_RDONLY) == 0;
            int rc = 0;
            for (int round = 0; ok && round < 5; round++)
                ok = ragged ? zt_ragged_matches(c, seed, idx, 200, 2, 40, &rc)
                            : zt_dense_matches(c, seed, idx, 200, &rc);
            zr_close(c);
            _exit(ok ? 0 : 1);
        }
    }
    for (int proc = 0; proc < 2; proc++) {
        int status;
        ck_assert_int_gt(wait(&status), 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "a process reading through the cache got other records");
    }
    ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
    if (ragged)
        zt_check_ragged_idx(r, seed, idx, 200, 2, 40);
    else
        zt_check_dense_idx(r, seed, idx, 200);
    zr_close(r);

    unsetenv("LOADERX_CACHE_DIR");
    ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
    int rc = 0;
    bool same = ragged ? zt_ragged_matches(r, seed, idx, 200, 2, 40, &rc)
                       : zt_dense_matches(r, seed, idx, 200, &rc);
    ck_assert_msg(!same, "without the cache, the spoiled objects should show");
    zr_close(r);
    unsetenv("LOADERX_CACHE_BLOCK");
    free(cache);
    free(url);
    free(dir);
}
END_TEST

/* A cache bounded below the store evicts files and still reads right. */
START_TEST(cache_stays_near_its_bound)
{
    uint64_t n = 2000;
    char *dir = make_store("s", false, ZR_CODEC_RAW, 9, n); /* 4 MB, 63 chunks */
    char *url = remote_url("bound");
    upload(dir, url, NULL);
    char *cache = zt_path("cache");
    setenv("LOADERX_CACHE_DIR", cache, 1);
    setenv("LOADERX_CACHE_BLOCK", "4096", 1);
    setenv("LOADERX_CACHE_SIZE", "512K", 1);
    zr_store *r;
    ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
    for (int pass = 0; pass < 2; pass++)
        zt_check_dense_all(r, 9);
    zr_close(r);
    /* Each fill past a sixteenth of the bound measures the folder and
     * evicts to 90% of it; what is left is at most that plus a fill. */
    uint64_t held = disk_bytes(cache);
    ck_assert_msg(held < 2 * 512 * 1024, "the cache holds %llu bytes, bound 512 KiB",
                  (unsigned long long)held);
    ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
    zt_check_dense_all(r, 9);
    zr_close(r);
    setenv("LOADERX_CACHE_SIZE", "12X", 1);
    ZR_FAIL_CALL(zr_open(&r, url, ZR_RDONLY), ZR_EINVAL);
    unsetenv("LOADERX_CACHE_SIZE");
    unsetenv("LOADERX_CACHE_BLOCK");
    unsetenv("LOADERX_CACHE_DIR");
    free(cache);
    free(url);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("s3_remote");
    TCase *tc = tcase_create("remote");
    tcase_add_checked_fixture(tc, setup, zt_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, remote_reads_what_was_written, 0, 6);
    tcase_add_test(tc, remote_opens_read_only);
    tcase_add_test(tc, remote_without_header_is_not_a_store);
    tcase_add_test(tc, remote_damage_is_reported);
    tcase_add_test(tc, remote_access_errors);
    tcase_add_loop_test(tc, cache_serves_what_it_fetched, 0, 6);
    tcase_add_test(tc, cache_stays_near_its_bound);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

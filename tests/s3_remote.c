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
#include <sys/resource.h>
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

/* A store made by make_store (its folder in *dir) and uploaded under a
 * prefix of its own; its s3:// address. */
static char *pushed(const char *name, bool ragged, int codec, uint64_t seed, uint64_t n,
                    char **dir)
{
    *dir = make_store("s", ragged, codec, seed, n);
    char *url = remote_url(name);
    upload(*dir, url, NULL);
    return url;
}

static void setup(void)
{
    zt_setup();
    zr_testing_set_geometry(CHUNK, SEG);
}

/* The settings a test may have made go with it. */
static void teardown(void)
{
    unsetenv("LOADERX_CACHE_DIR");
    unsetenv("LOADERX_CACHE_BLOCK");
    unsetenv("LOADERX_CACHE_SIZE");
    unsetenv("LOADERX_S3_TABLE_CACHE");
    zt_teardown();
}

/* Every record, batches with repeats across chunk and segment ends,
 * verify and stats, for each kind and codec (_i: kind * 3 + codec). */
START_TEST(remote_reads_what_was_written)
{
    bool ragged = _i >= 3;
    int codec = codecs[_i % 3];
    uint64_t seed = 500 + (uint64_t)_i, n = 700;
    char *dir;
    char *url = pushed("whole", ragged, codec, seed, n, &dir);

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
    char *dir;
    char *url = pushed("ro", false, ZR_CODEC_RAW, 1, 40, &dir);
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
    char *dir;
    char *url = pushed("damage", false, ZR_CODEC_RAW, 3, 100, &dir);
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
    char *dir;
    char *url = pushed("access", false, ZR_CODEC_RAW, 4, 10, &dir);
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

/* Requests the client of remote handle r has sent. */
static uint64_t requests(const zr_store *r)
{
    struct zr_s3_stats st;
    zr_s3_stats(r->remote, &st);
    return st.requests;
}

/* Upload the files of the store folder dir, rewritten with every byte
 * of its chunk files inverted: the same names and sizes, other records. */
static void upload_inverted(const char *dir, const char *url)
{
    struct zr_s3 *c;
    ZR_OK_CALL(zr_s3_open(&c, url));
    for (unsigned k = 0;; k++) {
        char name[32];
        snprintf(name, sizeof name, "%u.chunk", k);
        char *path = zt_join(dir, name);
        int64_t size = zt_file_size(path);
        if (size < 0) {
            free(path);
            break;
        }
        size_t len;
        uint8_t *bytes = zt_slurp(path, &len);
        for (size_t j = 0; j < len; j++)
            bytes[j] = (uint8_t)~bytes[j];
        ZR_OK_CALL(zr_s3_put(c, name, bytes, len));
        free(bytes);
        free(path);
    }
    zr_s3_close(c);
}

/* A cache folder: after one pass over a store a second pass sends no
 * request, through the same handle or another, in this process or two
 * others at once, and returns the same records; the cache also holds
 * for blocks of another size read into it before. _i: kind * 3 + codec. */
START_TEST(cache_serves_what_it_fetched)
{
    bool ragged = _i >= 3;
    int codec = codecs[_i % 3];
    uint64_t seed = 600 + (uint64_t)_i, n = 500;
    char *dir;
    char *url = pushed("cache", ragged, codec, seed, n, &dir);
    char *cache = zt_path("cache");
    setenv("LOADERX_CACHE_DIR", cache, 1);
    setenv("LOADERX_CACHE_BLOCK", "4096", 1);
    zr_store *r;
    ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
    for (int pass = 0; pass < 2; pass++) {
        uint64_t sent = requests(r);
        if (ragged)
            zt_check_ragged_all(r, seed, 2, 40);
        else
            zt_check_dense_all(r, seed);
        if (pass == 0)
            ck_assert_uint_gt(requests(r), sent);
        else
            ck_assert_uint_eq(requests(r), sent);
    }
    zr_close(r);
    ck_assert_uint_gt(disk_bytes(cache), 0);

    uint64_t idx[200];
    for (size_t k = 0; k < 200; k++)
        idx[k] = (k * 263 + 5) % n;
    for (int proc = 0; proc < 2; proc++) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            zr_store *c;
            int ok = zr_open(&c, url, ZR_RDONLY) == 0;
            uint64_t sent = ok ? requests(c) : 0;
            int rc = 0;
            for (int round = 0; ok && round < 5; round++)
                ok = ragged ? zt_ragged_matches(c, seed, idx, 200, 2, 40, &rc)
                            : zt_dense_matches(c, seed, idx, 200, &rc);
            ok = ok && requests(c) == sent;
            zr_close(c);
            _exit(ok ? 0 : 1);
        }
    }
    for (int proc = 0; proc < 2; proc++) {
        int status;
        ck_assert_int_gt(wait(&status), 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "a process reading through the warm cache got other records or "
                      "sent requests for them");
    }
    /* Blocks of 4 KiB in the cache, read with blocks of 1 MiB: another
     * folder, the right records. */
    setenv("LOADERX_CACHE_BLOCK", "1048576", 1);
    ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
    if (ragged)
        zt_check_ragged_idx(r, seed, idx, 200, 2, 40);
    else
        zt_check_dense_idx(r, seed, idx, 200);
    zr_close(r);
    free(cache);
    free(url);
    free(dir);
}
END_TEST

/* A store pushed again under the same address, with the same sizes and
 * other records, is another store to the cache: its records are read,
 * not the cached ones of the first. */
START_TEST(cache_sees_a_store_pushed_again)
{
    uint64_t n = 300;
    char *dir;
    char *url = pushed("again", false, ZR_CODEC_RAW, 7, n, &dir);
    char *cache = zt_path("cache");
    setenv("LOADERX_CACHE_DIR", cache, 1);
    zr_store *r, *before;
    ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
    zt_check_dense_all(r, 7);
    zr_close(r);
    /* A handle without the cache, opened before the push, finds the
     * objects changed under it instead of mixing two stores. */
    unsetenv("LOADERX_CACHE_DIR");
    ZR_OK_CALL(zr_open(&before, url, ZR_RDONLY));
    setenv("LOADERX_CACHE_DIR", cache, 1);
    upload_inverted(dir, url);
    uint64_t some[] = {5, 250};
    uint8_t two[2 * 2048];
    ZR_FAIL_CALL(zr_gather_dense(before, some, 2, two), ZR_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(zr_last_error(), "changed"));
    zr_close(before);
    ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
    uint64_t idx[] = {0, 1, 150, 299};
    uint8_t got[4 * 2048];
    ZR_OK_CALL(zr_gather_dense(r, idx, 4, got));
    void *want = zt_dense_gen("<i4", 512, 7, 0, n);
    for (size_t k = 0; k < 4; k++)
        for (size_t j = 0; j < 2048; j++)
            ck_assert_uint_eq(got[k * 2048 + j], (uint8_t)~((uint8_t *)want)[idx[k] * 2048 + j]);
    free(want);
    zr_close(r);
    free(cache);
    free(url);
    free(dir);
}
END_TEST

/* Bytes held by descriptors of this process whose files under dir were
 * unlinked. */
static uint64_t unlinked_held(const char *dir)
{
    uint64_t total = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        struct stat st;
        char link[300], target[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(link, target, sizeof target - 1);
        if (e->d_name[0] == '.' || len <= 0)
            continue;
        target[len] = '\0';
        if (strncmp(target, dir, strlen(dir)) == 0 && fstat(atoi(e->d_name), &st) == 0 &&
            st.st_nlink == 0)
            total += (uint64_t)st.st_blocks * 512;
    }
    if (d)
        closedir(d);
    return total;
}

/* A cache bounded below the store evicts files and still reads right. */
START_TEST(cache_stays_near_its_bound)
{
    uint64_t n = 2000;
    char *dir;
    char *url = pushed("bound", false, ZR_CODEC_RAW, 9, n, &dir); /* 4 MB, 63 chunks */
    char *cache = zt_path("cache");
    setenv("LOADERX_CACHE_DIR", cache, 1);
    setenv("LOADERX_CACHE_BLOCK", "4096", 1);
    setenv("LOADERX_CACHE_SIZE", "512K", 1);
    /* Two handles, one open while the other reads the store through in
     * batches of 32 records, then reads it again. */
    zr_store *r, *other;
    ZR_OK_CALL(zr_open(&other, url, ZR_RDONLY));
    uint64_t first[32];
    for (size_t k = 0; k < 32; k++)
        first[k] = k;
    zt_check_dense_idx(other, 9, first, 32);
    ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
    for (int pass = 0; pass < 2; pass++)
        for (uint64_t a = 0; a < n; a += 32) {
            uint64_t idx[32];
            for (size_t k = 0; k < 32; k++)
                idx[k] = (a + k) % n;
            zt_check_dense_idx(r, 9, idx, 32);
        }
    /* Each fill past a sixteenth of the bound measures the folder and
     * evicts files no handle holds down to 90% of it; a handle that finds
     * nothing left to evict adds no more. Nothing is held on the disk out
     * of the folder's sight (unlinked files still open). */
    uint64_t held = disk_bytes(cache), hidden = unlinked_held(cache);
    ck_assert_uint_eq(hidden, 0);
    ck_assert_msg(held < 512 * 1024 + 128 * 1024, "the cache holds %llu bytes, bound 512 KiB",
                  (unsigned long long)held);
    zr_close(r);
    zr_close(other);
    ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
    zt_check_dense_all(r, 9);
    zr_close(r);
    setenv("LOADERX_CACHE_SIZE", "12X", 1);
    ZR_FAIL_CALL(zr_open(&r, url, ZR_RDONLY), ZR_EINVAL);
    free(cache);
    free(url);
    free(dir);
}
END_TEST

/* Without a cache folder, the record table is kept in memory: a batch of
 * a Ragged store gathered again sends a request per record only (its
 * entries are kept), where the first sent those and its entries' too;
 * LOADERX_S3_TABLE_CACHE=0 keeps nothing. */
START_TEST(remote_keeps_the_record_table)
{
    uint64_t n = 600;
    char *dir;
    char *url = pushed("table", true, ZR_CODEC_ZSTD, 14, n, &dir);
    /* Entries of other segments (64 entries each): none shares a request. */
    uint64_t idx[6] = {3, 130, 257, 384, 511, 599}, records = 0;
    for (int kept = 1; kept >= 0; kept--) {
        if (!kept)
            setenv("LOADERX_S3_TABLE_CACHE", "0", 1);
        zr_store *r;
        ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
        uint64_t a = requests(r);
        zt_check_ragged_idx(r, 14, idx, 6, 2, 40);
        uint64_t b = requests(r);
        zt_check_ragged_idx(r, 14, idx, 6, 2, 40);
        uint64_t c = requests(r);
        /* A Ragged batch reads its entries for its sizes, then for the
         * gather: kept, the second batch sends only the records' requests
         * (some records may share one); not kept, 6 more for the entries,
         * twice. */
        if (kept) {
            records = c - b;
            ck_assert_uint_ge(records, 1);
            ck_assert_uint_eq(b - a, records + 6);
        } else {
            ck_assert_uint_eq(c - b, records + 12);
        }
        zr_close(r);
    }
    free(url);
    free(dir);
}
END_TEST

/* A remote handle used on both sides of fork(): each process gets its
 * own records, over connections of its own (records at the same offset
 * of different chunks would come back swapped over shared ones). */
START_TEST(remote_handle_survives_fork)
{
    uint64_t n = 200;
    char *dir;
    char *url = pushed("fork", false, ZR_CODEC_RAW, 11, n, &dir);
    zr_store *r;
    ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
    uint64_t warm[] = {0, 100};
    zt_check_dense_idx(r, 11, warm, 2);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    uint64_t idx[16];
    for (size_t k = 0; k < 16; k++)
        idx[k] = (pid == 0 ? 16 : 32) + k;
    int rc = 0;
    bool ok = true;
    for (int round = 0; ok && round < 150; round++)
        ok = zt_dense_matches(r, 11, idx, 16, &rc);
    if (pid == 0)
        _exit(ok ? 0 : 1);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(ok, "the parent got other records after fork (%d %s)", rc, zr_last_error());
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the child got other records after fork");
    zr_close(r);
    free(url);
    free(dir);
}
END_TEST

/* A dictionary trained on a remote store, with and without a cache, is
 * the one trained on the same store locally (training is deterministic
 * on the same records). */
START_TEST(remote_trains_a_dictionary)
{
    char *dir;
    char *url = pushed("dict", false, ZR_CODEC_ZSTD, 12, 400, &dir);
    char *cache = zt_path("cache");
    zr_store *l;
    ZR_OK_CALL(zr_open(&l, dir, ZR_RDONLY));
    void *want;
    size_t want_len;
    ZR_OK_CALL(zr_train_dict_store(l, ZR_TIER_FAST, &want, &want_len));
    zr_close(l);
    for (int cached = 0; cached < 2; cached++) {
        if (cached)
            setenv("LOADERX_CACHE_DIR", cache, 1);
        zr_store *r;
        ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
        void *got;
        size_t got_len;
        ZR_OK_CALL(zr_train_dict_store(r, ZR_TIER_FAST, &got, &got_len));
        ck_assert_uint_eq(got_len, want_len);
        ck_assert(memcmp(got, want, got_len) == 0);
        free(got);
        zr_close(r);
    }
    free(want);
    free(cache);
    free(url);
    free(dir);
}
END_TEST

/* With a cache and a process limit of 64 descriptors, a store of 63
 * chunks reads right: what the cache cannot open is read without it. */
START_TEST(cache_under_a_descriptor_limit)
{
    uint64_t n = 2000;
    char *dir;
    char *url = pushed("fds", false, ZR_CODEC_RAW, 13, n, &dir);
    char *cache = zt_path("cache");
    setenv("LOADERX_CACHE_DIR", cache, 1);
    setenv("LOADERX_CACHE_BLOCK", "4096", 1);
    struct rlimit lim = {64, 64};
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
    zr_store *r;
    ZR_OK_CALL(zr_open(&r, url, ZR_RDONLY));
    for (int pass = 0; pass < 2; pass++)
        zt_check_dense_all(r, 13);
    zr_close(r);
    free(cache);
    free(url);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("s3_remote");
    TCase *tc = tcase_create("remote");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, remote_reads_what_was_written, 0, 6);
    tcase_add_test(tc, remote_opens_read_only);
    tcase_add_test(tc, remote_without_header_is_not_a_store);
    tcase_add_test(tc, remote_damage_is_reported);
    tcase_add_test(tc, remote_access_errors);
    tcase_add_loop_test(tc, cache_serves_what_it_fetched, 0, 6);
    tcase_add_test(tc, cache_stays_near_its_bound);
    tcase_add_test(tc, cache_sees_a_store_pushed_again);
    tcase_add_test(tc, remote_handle_survives_fork);
    tcase_add_test(tc, remote_keeps_the_record_table);
    tcase_add_test(tc, remote_trains_a_dictionary);
    tcase_add_test(tc, cache_under_a_descriptor_limit);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

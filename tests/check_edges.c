/*
 * check_edges.c: every size and count the format keeps in a fixed-width
 * field, tested at its limit, one below and one above (the table is in
 * doc/testing.md, "Edges of the format").
 *
 * Stores too large for the disk are built on sparse files with the real
 * geometry (chunks of 2^32 bytes, 2^28 entries a segment): the API creates
 * the store, then the test writes the few bytes that matter by hand (the
 * header, the table entries, each record's shape prefix and marked
 * stretches of its payload) and leaves the rest as holes. The API then
 * reopens, gathers, verifies, appends, deletes and compacts, and every
 * record it can see is checked against its source. A record's payload is
 * zero but for its first and last MARK bytes and MARK bytes at its middle,
 * which depend on the record's tag and on their position, so a record read
 * from the wrong place, or written over, is caught.
 *
 * Records of up to SMALL bytes are gathered whole. Larger ones (up to
 * 2 GiB) are checked through zr_record_span, which makes the checks of a
 * gather without the copy: a gather of 2 GiB writes 2 GiB of fresh memory
 * and reads 2 GiB of holes into the page cache, which takes tens of
 * seconds on a virtual machine whose page faults are slow, and for the
 * same reason zr_verify is not run on stores that hold such records.
 * Appends of records at the size limit are checked up to their first
 * write, which the test makes fail through the library's I/O table: the
 * call has passed every check by then, and no 2 GiB is copied.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine.h"
#include "tests/faults.h"
#include "tests/helpers.h"
#include "tests/records.h"
#include "tests/suites.h"

#define LIMIT ZR_MAX_RECORD        /* 2^31: the largest record */
#define CAP ((uint64_t)1 << 32)    /* the bytes of a chunk */
#define SEG ((uint64_t)1 << 28)    /* the entries of a loc segment */
#define MARK 4096                  /* marked bytes at each end and the middle */
#define SMALL ((uint64_t)64 << 10) /* records gathered whole */
#define MAXREC 40                  /* records a model holds */
#define SMALL_SEG 16               /* entries of a segment in small-geometry tests */

/* A record as the test wrote it. */
struct rec {
    uint64_t size; /* stored bytes, the shape prefix included */
    int ndim;      /* Ragged: 0, or 1 in a "|u1" store; Dense: -1 (no prefix) */
    uint8_t tag;
};

/* A 1-d record of a "|u1" store, size bytes with its 16-byte prefix. */
#define U1(size, tag) ((struct rec){(size), 1, (tag)})

/* The records 0..n-1 a store should hold. */
struct model {
    uint64_t n;
    struct rec r[MAXREC];
};

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Never zero: a hole where a mark belongs is caught. */
static uint8_t mark(uint8_t tag, uint64_t j)
{
    return (uint8_t)(1 + (tag * 131u + j * 7u + (j >> 9)) % 255);
}

/* The shape prefix of r into out (16 bytes); returns its length. */
static uint64_t prefix_of(const struct rec *r, uint8_t out[16])
{
    if (r->ndim < 0)
        return 0;
    uint64_t n = 8 * (1 + (uint64_t)r->ndim);
    put64(out, (uint64_t)r->ndim);
    if (r->ndim == 1)
        put64(out + 8, r->size - n);
    return n;
}

/* The marked stretches of a payload of n bytes: [at[k], at[k] + len[k]). */
static void stretches(uint64_t n, uint64_t at[3], uint64_t len[3])
{
    uint64_t m = n < MARK ? n : MARK;
    at[0] = 0;
    len[0] = m;
    at[1] = n / 2;
    len[1] = ZR_MIN(MARK, n - n / 2);
    at[2] = n - m;
    len[2] = m;
}

/* Every byte of a small record. */
static void rec_fill(const struct rec *r, uint8_t *out)
{
    memset(out, 0, r->size);
    uint64_t np = prefix_of(r, out), n = r->size - np, at[3], len[3];
    stretches(n, at, len);
    for (int k = 0; k < 3; k++)
        for (uint64_t j = at[k]; j < at[k] + len[k]; j++)
            out[np + j] = mark(r->tag, j);
}

/* Write the prefix and the marked stretches of r at off of the file. */
static void rec_write(const char *path, uint64_t off, const struct rec *r)
{
    uint8_t pre[16], buf[MARK];
    uint64_t np = prefix_of(r, pre), n = r->size - np, at[3], len[3];
    int fd = open(path, O_WRONLY);
    ck_assert_msg(fd >= 0, "cannot open %s", path);
    ck_assert_int_eq(pwrite(fd, pre, np, (off_t)off), (ssize_t)np);
    stretches(n, at, len);
    for (int k = 0; k < 3; k++) {
        for (uint64_t j = 0; j < len[k]; j++)
            buf[j] = mark(r->tag, at[k] + j);
        ck_assert_int_eq(pwrite(fd, buf, len[k], (off_t)(off + np + at[k])), (ssize_t)len[k]);
    }
    close(fd);
}

/* Check record i of s against r: a small record is gathered and compared
 * byte for byte; a large one is seen through zr_record_span, its prefix
 * and marked stretches compared and two of the bytes between them found
 * zero. */
static void check_rec(zr_store *s, uint64_t i, const struct rec *r)
{
    unsigned long long li = (unsigned long long)i;
    if (r->ndim >= 0) {
        uint64_t size = 0;
        ZR_OK_CALL(zr_ragged_sizes(s, &i, 1, &size));
        ck_assert_msg(size == r->size, "record %llu holds %llu bytes, its source %llu", li,
                      (unsigned long long)size, (unsigned long long)r->size);
    }
    uint8_t pre[16];
    uint64_t np = prefix_of(r, pre), n = r->size - np;
    if (r->size <= SMALL) {
        uint8_t *got = malloc(r->size), *want = malloc(r->size);
        ck_assert(got && want);
        const uint64_t at = 0;
        if (r->ndim < 0)
            ZR_OK_CALL(zr_gather_dense(s, &i, 1, got));
        else
            ZR_OK_CALL(zr_gather_ragged(s, &i, 1, got, &at));
        rec_fill(r, want);
        ck_assert_msg(memcmp(got, want, r->size) == 0, "record %llu differs from its source %u",
                      li, r->tag);
        free(got);
        free(want);
        return;
    }
    const void *span;
    uint64_t size, at[3], len[3];
    ZR_OK_CALL(zr_record_span(s, i, &span, &size));
    const uint8_t *p = span;
    ck_assert_msg(size == r->size, "record %llu spans %llu bytes, its source %llu", li,
                  (unsigned long long)size, (unsigned long long)r->size);
    ck_assert_msg(memcmp(p, pre, np) == 0, "record %llu has another shape prefix", li);
    stretches(n, at, len);
    for (int k = 0; k < 3; k++)
        for (uint64_t j = at[k]; j < at[k] + len[k]; j++)
            ck_assert_msg(p[np + j] == mark(r->tag, j), "record %llu differs from its source %u "
                          "at payload byte %llu", li, r->tag, (unsigned long long)j);
    ck_assert_msg(p[np + n / 4] == 0 && p[np + 3 * n / 4] == 0,
                  "record %llu holds bytes its source does not", li);
}

static void check_all(zr_store *s, const struct model *m)
{
    ck_assert_uint_eq(zr_len(s), m->n);
    for (uint64_t i = 0; i < m->n; i++)
        check_rec(s, i, &m->r[i]);
}

static void verify_ok(zr_store *s)
{
    zr_verify_report *rep = NULL;
    int rc = zr_verify(s, &rep);
    uint64_t problems = rep ? rep->nproblems : 0;
    zr_verify_report_free(rep);
    ck_assert_msg(rc == 0 && problems == 0, "zr_verify: %d %s", rc, zr_last_error());
}

/* Append r (a small "|u1" record) through the API, as record m->n. */
static void append_rec(zr_store *s, struct model *m, struct rec r)
{
    ck_assert(r.ndim == 1 && r.size <= SMALL);
    uint8_t *buf = malloc(r.size);
    ck_assert_ptr_nonnull(buf);
    rec_fill(&r, buf);
    const uint64_t shape[] = {r.size - 16};
    const zr_rec one = {.data = buf + 16, .shape = shape, .ndim = 1};
    uint64_t first = UINT64_MAX;
    ZR_OK_CALL(zr_append_ragged(s, "|u1", &one, 1, &first));
    ck_assert_uint_eq(first, m->n);
    m->r[m->n++] = r;
    free(buf);
}

/* Delete record i through the API and from the model (swap-last). */
static void delete_rec(zr_store *s, struct model *m, uint64_t i)
{
    ZR_OK_CALL(zr_delete(s, &i, 1));
    m->r[i] = m->r[--m->n];
}

static char *file_of(const char *dir, uint64_t id, const char *suffix)
{
    char name[48];
    snprintf(name, sizeof name, "%llu.%s", (unsigned long long)id, suffix);
    return zt_join(dir, name);
}

/* Write r at byte off of chunk c, and its entry as record i. */
static void place_at(const char *dir, uint32_t c, uint64_t off, uint64_t i, const struct rec *r)
{
    char *path = file_of(dir, c, "chunk");
    rec_write(path, off, r);
    free(path);
    zt_loc_write(dir, i / SEG, i % SEG,
                 (zt_loc){.offset = (uint32_t)off, .phys = (uint32_t)r->size,
                          .logic = (uint32_t)r->size, .chunk = c});
}

/* place_at for the next record of the model. */
static void place(const char *dir, uint32_t c, uint64_t off, struct model *m, struct rec r)
{
    place_at(dir, c, off, m->n, &r);
    m->r[m->n++] = r;
}

static void resize_file(const char *dir, uint64_t id, const char *suffix, uint64_t size)
{
    char *path = file_of(dir, id, suffix);
    zt_resize(path, size);
    free(path);
}

static void expect_meta(const char *dir, uint64_t length, uint32_t chunk, uint64_t offset)
{
    zt_meta h = zt_meta_read(dir);
    ck_assert_msg(h.length == length && h.tail_chunk == chunk && h.tail_offset == offset,
                  "meta.zr holds length %llu, frontier (%u, %u); expected %llu, (%u, %llu)",
                  (unsigned long long)h.length, h.tail_chunk, h.tail_offset,
                  (unsigned long long)length, chunk, (unsigned long long)offset);
}

/* The size of file id.suffix, -1 when it must not exist. */
static void expect_size(const char *dir, uint64_t id, const char *suffix, int64_t size)
{
    char *path = file_of(dir, id, suffix);
    int64_t got = zt_file_size(path);
    ck_assert_msg(got == size, "%s is %lld bytes, expected %lld", path, (long long)got,
                  (long long)size);
    free(path);
}

static void expect_entry(const char *dir, uint64_t i, uint32_t chunk, uint64_t off, uint64_t size)
{
    zt_loc l = zt_loc_read(dir, i / SEG, i % SEG);
    ck_assert_msg(l.chunk == chunk && l.offset == off && l.phys == size && l.logic == size,
                  "entry %llu names (%u, %u, %u bytes); expected (%u, %llu, %llu bytes)",
                  (unsigned long long)i, l.chunk, l.offset, l.phys, chunk,
                  (unsigned long long)off, (unsigned long long)size);
}

/* Opening must fail with ZR_ECORRUPT in both modes, naming what. */
static void expect_open_corrupt(const char *dir, const char *what)
{
    for (int mode = ZR_RDONLY; mode <= ZR_RDWR; mode++) {
        zr_store *s = (zr_store *)&s;
        int rc = zr_open(&s, dir, mode);
        ck_assert_msg(rc == ZR_ECORRUPT, "open (%s) returned %d: %s", mode ? "rw" : "ro", rc,
                      zr_last_error());
        ck_assert_ptr_null(s);
        ck_assert_msg(strstr(zr_last_error(), what) != NULL, "message '%s' does not name %s",
                      zr_last_error(), what);
    }
}

/* A new, empty raw Ragged store at zt_dir/name, closed. */
static char *new_ragged(const char *name, const char *dtype)
{
    char *dir = zt_path(name);
    zr_store *s;
    ZR_OK_CALL(zr_ragged_create(&s, dir, dtype, NULL));
    zr_close(s);
    return dir;
}

static void edges_teardown(void)
{
    zt_faults_disarm();
    zt_teardown();
}

/* The chunk ends of the tests below: one byte short of the chunk's 2^32
 * bytes, exactly at them, and one byte past (the last record does not
 * fit and starts the next chunk). */
static const int64_t end_delta[] = {-1, 0, 1};

/* An append whose record ends at 2^32: tail_offset (a u32) cannot hold
 * that frontier, which is committed as offset 0 of chunk 1, created
 * empty (R7). The bytes between records 0 and 1 are garbage (records
 * deleted long ago), left as a hole. */
START_TEST(append_that_ends_a_chunk_hands_the_frontier_to_the_next)
{
    int64_t d = end_delta[_i];
    char *dir = new_ragged("s", "|u1");
    struct model m = {0};
    resize_file(dir, 0, "chunk", CAP - 4096);
    place(dir, 0, 0, &m, U1(100, 1));
    place(dir, 0, CAP - 8192, &m, U1(4096, 2));
    zt_meta_write(dir, (zt_meta){.length = 2, .tail_offset = (uint32_t)(CAP - 4096)});
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    check_all(s, &m);
    append_rec(s, &m, U1((uint64_t)(4096 + d), 3));
    if (d < 0) {
        expect_entry(dir, 2, 0, CAP - 4096, 4095);
        expect_meta(dir, 3, 0, CAP - 1);
        expect_size(dir, 1, "chunk", -1);
    } else if (d == 0) {
        expect_entry(dir, 2, 0, CAP - 4096, 4096);
        expect_meta(dir, 3, 1, 0);
        expect_size(dir, 0, "chunk", (int64_t)CAP);
        expect_size(dir, 1, "chunk", 0);
    } else {
        expect_entry(dir, 2, 1, 0, 4097);
        expect_meta(dir, 3, 1, 4097);
    }
    zr_close(s);
    /* After a reopen the next record lands past record 2, never over
     * record 0. */
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    append_rec(s, &m, U1(200, 4));
    expect_entry(dir, 3, 1, d > 0 ? 4097 : 0, 200);
    check_all(s, &m);
    verify_ok(s);
    delete_rec(s, &m, 0);
    ZR_OK_CALL(zr_compact(s, NULL));
    uint64_t packed = 4096 + (uint64_t)(4096 + d) + 200;
    expect_meta(dir, 3, 0, packed);
    expect_size(dir, 0, "chunk", (int64_t)packed);
    expect_size(dir, 1, "chunk", -1);
    check_all(s, &m);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    verify_ok(s);
    zr_close(s);
    free(dir);
}
END_TEST

/* A compaction whose live records pack chunk 0 to 2^32 - 1, 2^32 or one
 * byte past (the last record stays in chunk 1): records of 2 GiB and of
 * 2 GiB - 8 KiB fill most of it. At 2^32 the frontier is offset 0 of
 * chunk 1, kept empty; chunk 0 is never cut below its records, and one
 * byte past, chunk 0 is cut to the end of its packed records. zr_verify
 * is not run: it would read 4 GiB. */
START_TEST(compaction_that_fills_a_chunk_hands_the_frontier_to_the_next)
{
    int64_t d = end_delta[_i];
    uint64_t c_size = (uint64_t)(4096 + d);
    char *dir = new_ragged("s", "|u1");
    struct model m = {0};
    resize_file(dir, 0, "chunk", CAP);
    resize_file(dir, 1, "chunk", c_size);
    place(dir, 0, 0, &m, U1(LIMIT, 1));
    place(dir, 0, LIMIT, &m, U1(LIMIT - 8192, 2));
    place(dir, 0, CAP - 8192, &m, U1(4096, 3));
    place(dir, 0, CAP - 4096, &m, U1(4096, 4));
    place(dir, 1, 0, &m, U1(c_size, 5));
    zt_meta_write(dir, (zt_meta){.length = 5, .tail_chunk = 1, .tail_offset = (uint32_t)c_size});
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    check_all(s, &m);
    /* Record 4 (in chunk 1) takes index 2; compaction moves record 3 down
     * by 4 KiB and record 2 after it, if it fits. */
    delete_rec(s, &m, 2);
    zr_compact_result r = ZR_COMPACT_RESULT_INIT;
    ZR_OK_CALL(zr_compact(s, &r));
    expect_entry(dir, 3, 0, CAP - 8192, 4096);
    if (d < 0) {
        expect_entry(dir, 2, 0, CAP - 4096, c_size);
        expect_meta(dir, 4, 0, CAP - 1);
        expect_size(dir, 0, "chunk", (int64_t)(CAP - 1));
        expect_size(dir, 1, "chunk", -1);
    } else if (d == 0) {
        expect_entry(dir, 2, 0, CAP - 4096, c_size);
        expect_meta(dir, 4, 1, 0);
        expect_size(dir, 0, "chunk", (int64_t)CAP);
        expect_size(dir, 1, "chunk", 0);
    } else {
        expect_entry(dir, 2, 1, 0, c_size);
        expect_meta(dir, 4, 1, (uint32_t)c_size);
        expect_size(dir, 0, "chunk", (int64_t)(CAP - 4096));
        expect_size(dir, 1, "chunk", (int64_t)c_size);
    }
    ck_assert_uint_eq(r.records_moved, d > 0 ? 1 : 2);
    zr_store_stats st = ZR_STORE_STATS_INIT;
    ZR_OK_CALL(zr_stats(s, &st));
    ck_assert_uint_eq(st.reclaimable, 0);
    check_all(s, &m);
    append_rec(s, &m, U1(100, 6));
    expect_entry(dir, 4, 1, d > 0 ? c_size : 0, 100);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    zr_close(s);
    free(dir);
}
END_TEST

/* A power cut took chunk 1 (record 2 lived there); chunk 0 ends at
 * 2^32 - 1, 2^32, or one byte past the capacity (a byte no record
 * names). A reader changes nothing; a writer cuts record 2 and moves the
 * frontier to the end of chunk 0, which at 2^32 is offset 0 of chunk 1,
 * created empty (R15, R7). */
START_TEST(recovery_to_a_full_chunk_hands_the_frontier_to_the_next)
{
    int64_t d = end_delta[_i];
    uint64_t end = d < 0 ? CAP - 1 : CAP;
    char *dir = new_ragged("s", "|u1");
    struct model m = {0};
    resize_file(dir, 0, "chunk", (uint64_t)((int64_t)CAP + d));
    place(dir, 0, 0, &m, U1(100, 1));
    place(dir, 0, end - 4096, &m, U1(4096, 2));
    zt_loc_write(dir, 0, 2, (zt_loc){.offset = 0, .phys = 4096, .logic = 4096, .chunk = 1});
    zt_meta_write(dir, (zt_meta){.length = 3, .tail_chunk = 1, .tail_offset = 4096});
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    ck_assert_uint_eq(zr_len(s), 3);
    check_rec(s, 0, &m.r[0]);
    check_rec(s, 1, &m.r[1]);
    uint64_t lost = 2, size;
    ZR_FAIL_CALL(zr_ragged_sizes(s, &lost, 1, &size), ZR_ECORRUPT);
    zr_close(s);
    expect_meta(dir, 3, 1, 4096);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    check_all(s, &m);
    if (d < 0) {
        expect_meta(dir, 2, 0, CAP - 1);
        expect_size(dir, 1, "chunk", -1);
    } else {
        expect_meta(dir, 2, 1, 0);
        expect_size(dir, 1, "chunk", 0);
    }
    append_rec(s, &m, U1(100, 3));
    expect_entry(dir, 2, 1, 0, 100);
    check_all(s, &m);
    verify_ok(s);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    check_all(s, &m);
    delete_rec(s, &m, 0);
    ZR_OK_CALL(zr_compact(s, NULL));
    expect_meta(dir, 2, 0, 4196);
    expect_size(dir, 0, "chunk", 4196);
    expect_size(dir, 1, "chunk", -1);
    check_all(s, &m);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    verify_ok(s);
    zr_close(s);
    free(dir);
}
END_TEST

/* Chunk 0 is full and the header names the empty chunk 1, whose file a
 * power cut removed before the folder was synced: nothing was lost. A
 * reader opens without it, a writer creates it again (R7). */
START_TEST(lost_empty_tail_chunk_after_a_full_one_is_recreated)
{
    char *dir = new_ragged("s", "|u1");
    struct model m = {0};
    resize_file(dir, 0, "chunk", CAP);
    place(dir, 0, 0, &m, U1(100, 1));
    place(dir, 0, CAP - 4096, &m, U1(4096, 2));
    zt_meta_write(dir, (zt_meta){.length = 2, .tail_chunk = 1, .tail_offset = 0});
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    zr_close(s);
    expect_size(dir, 1, "chunk", -1);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    expect_size(dir, 1, "chunk", 0);
    expect_meta(dir, 2, 1, 0);
    check_all(s, &m);
    verify_ok(s);
    append_rec(s, &m, U1(300, 3));
    expect_entry(dir, 2, 1, 0, 300);
    expect_meta(dir, 3, 1, 300);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    check_all(s, &m);
    delete_rec(s, &m, 0);
    ZR_OK_CALL(zr_compact(s, NULL));
    expect_meta(dir, 2, 0, 4396);
    expect_size(dir, 1, "chunk", -1);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    verify_ok(s);
    zr_close(s);
    free(dir);
}
END_TEST

/* The state of the test above reached through the API (4 KiB chunks):
 * two records fill chunk 0 exactly, which hands the frontier to chunk 1,
 * created empty; a power cut before the folder was synced took 1.chunk.
 * R7 says nothing was lost and a reader opens without the file, so a full
 * scan through that reader must find nothing wrong either. */
START_TEST(verify_through_a_reader_accepts_a_lost_empty_tail_chunk)
{
    zr_testing_set_geometry(4096, SMALL_SEG);
    char *dir = new_ragged("s", "|u1");
    struct model m = {0};
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    append_rec(s, &m, U1(1000, 1));
    append_rec(s, &m, U1(3096, 2));
    zr_close(s);
    expect_meta(dir, 2, 1, 0);
    char *c1 = file_of(dir, 1, "chunk");
    ck_assert_int_eq(unlink(c1), 0);
    free(c1);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    verify_ok(s);
    zr_close(s);
    free(dir);
}
END_TEST

/* Record sizes around ZR_MAX_RECORD in a Ragged store, the shape prefix
 * counted: 1-d "|u1" records (16-byte prefix) and 0-d records (8-byte
 * prefix) of "<U" dtypes whose item size makes the record. */
static const struct {
    const char *dtype;
    int ndim;
    uint64_t size; /* the record, prefix included */
} ragged_limits[] = {
    {"|u1", 1, LIMIT - 1},        {"|u1", 1, LIMIT},        {"|u1", 1, LIMIT + 1},
    {"<U536870909", 0, LIMIT - 4}, {"<U536870910", 0, LIMIT},
    /* A 0-d record above the limit needs a dtype that makes no store:
     * ragged_dtype_with_no_room_for_a_record_is_refused. */
};

/* A source no one may read: the bytes of a refused record are never
 * looked at, and those of an accepted one are not copied before the
 * first write, which the test makes fail. */
static void *unreadable(uint64_t size)
{
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ck_assert(p != MAP_FAILED);
    return p;
}

/* Append the record of ragged_limits[_i]: at or below the limit it passes
 * every check and reaches its write (failed by the test, so nothing of it
 * is committed); above, ZR_ETOOBIG before anything is written. */
START_TEST(ragged_append_at_the_record_limit_is_accepted_and_above_refused)
{
    const char *dtype = ragged_limits[_i].dtype;
    uint64_t size = ragged_limits[_i].size;
    int ndim = ragged_limits[_i].ndim;
    char *dir = new_ragged("s", dtype);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    uint64_t payload = size - 8 * (1 + (uint64_t)ndim);
    void *data = unreadable(payload);
    const uint64_t shape[] = {payload};
    const zr_rec one = {.data = data, .shape = shape, .ndim = (uint32_t)ndim};
    zt_faults_arm(1, ENOSPC, 0);
    int rc = zr_append_ragged(s, dtype, &one, 1, NULL);
    bool wrote = zt_faults_fired() && zt_faults_fired_call() == ZT_CALL_WRITE;
    zt_faults_disarm();
    if (size <= LIMIT) {
        ck_assert_msg(rc == ZR_ENOSPC && wrote, "append of %llu bytes returned %d (%s) before "
                      "its write", (unsigned long long)size, rc, zr_last_error());
    } else {
        ck_assert_msg(rc == ZR_ETOOBIG && !zt_faults_fired(), "append of %llu bytes returned "
                      "%d (%s)", (unsigned long long)size, rc, zr_last_error());
    }
    ck_assert_uint_eq(zr_len(s), 0);
    zr_close(s);
    expect_meta(dir, 0, 0, 0);
    expect_size(dir, 0, "loc", 0);
    munmap(data, payload);
    free(dir);
}
END_TEST

/* A record of ragged_limits[_i] written by hand at the start of chunk 0,
 * a small one after it in "|u1" stores. At or below the limit it reads
 * (its size, its span, its bytes); deleting it and compacting moves the
 * small record to offset 0. Above, every read of it is ZR_ECORRUPT and
 * zr_verify lists it; the small record still reads. */
START_TEST(ragged_entry_at_the_record_limit_reads_and_above_is_corrupt)
{
    const char *dtype = ragged_limits[_i].dtype;
    uint64_t size = ragged_limits[_i].size;
    bool u1 = ragged_limits[_i].ndim == 1;
    char *dir = new_ragged("s", dtype);
    struct model m = {0};
    uint64_t end = size + (u1 ? 100 : 0);
    resize_file(dir, 0, "chunk", end);
    place(dir, 0, 0, &m, (struct rec){size, ragged_limits[_i].ndim, 1});
    if (u1)
        place(dir, 0, size, &m, U1(100, 2));
    zt_meta_write(dir, (zt_meta){.length = m.n, .tail_offset = (uint32_t)end});
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    if (size > LIMIT) {
        uint64_t i = 0, got;
        const void *span;
        uint8_t dst[16];
        const uint64_t at = 0;
        ZR_FAIL_CALL(zr_ragged_sizes(s, &i, 1, &got), ZR_ECORRUPT);
        ZR_FAIL_CALL(zr_gather_ragged(s, &i, 1, dst, &at), ZR_ECORRUPT);
        ZR_FAIL_CALL(zr_record_span(s, i, &span, &got), ZR_ECORRUPT);
        zr_verify_report *rep;
        ZR_FAIL_CALL(zr_verify(s, &rep), ZR_ECORRUPT);
        ck_assert_uint_eq(rep->nproblems, 1);
        ck_assert_uint_eq(zr_verify_problem(rep, 0)->entry, 0);
        zr_verify_report_free(rep);
        if (u1)
            check_rec(s, 1, &m.r[1]);
        ZR_FAIL_CALL(zr_compact(s, NULL), ZR_ECORRUPT);
        zr_close(s);
        free(dir);
        return;
    }
    check_all(s, &m);
    int fd;
    uint64_t off, got;
    ZR_OK_CALL(zr_record_extent(s, 0, &fd, &off, &got));
    ck_assert_uint_eq(off, 0);
    ck_assert_uint_eq(got, size);
    delete_rec(s, &m, 0);
    ZR_OK_CALL(zr_compact(s, NULL));
    expect_meta(dir, m.n, 0, u1 ? 100 : 0);
    expect_size(dir, 0, "chunk", u1 ? 100 : 0);
    if (u1)
        append_rec(s, &m, U1(300, 3));
    check_all(s, &m);
    verify_ok(s);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    zr_close(s);
    free(dir);
}
END_TEST

/* Dense record widths around ZR_MAX_RECORD (no shape prefix): by the item
 * shape, one byte at a time, and by the dtype alone with a 0-d shape,
 * where "<U" steps by four bytes. */
static const struct {
    const char *dtype;
    uint32_t ndim;
    uint64_t dim;
    uint64_t width;
} dense_limits[] = {
    {"|u1", 1, LIMIT - 1, LIMIT - 1},       {"|u1", 1, LIMIT, LIMIT},
    {"|u1", 1, LIMIT + 1, LIMIT + 1},       {"<U536870911", 0, 0, LIMIT - 4},
    {"<U536870912", 0, 0, LIMIT},           {"<U536870913", 0, 0, LIMIT + 4},
};

/* Creation accepts a width up to the limit, and an append of one such
 * record reaches its write; above, ZR_ETOOBIG and no folder. */
START_TEST(dense_width_at_the_record_limit_is_accepted_and_above_refused)
{
    const char *dtype = dense_limits[_i].dtype;
    uint32_t ndim = dense_limits[_i].ndim;
    uint64_t width = dense_limits[_i].width;
    const uint64_t shape[] = {dense_limits[_i].dim};
    char *dir = zt_path("d");
    zr_store *s = (zr_store *)&s;
    int rc = zr_dense_create(&s, dir, dtype, ndim ? shape : NULL, ndim, NULL);
    if (width > LIMIT) {
        ck_assert_msg(rc == ZR_ETOOBIG, "creating records of %llu bytes returned %d (%s)",
                      (unsigned long long)width, rc, zr_last_error());
        ck_assert_ptr_null(s);
        ck_assert_int_eq(zt_file_size(dir), -1);
        free(dir);
        return;
    }
    ZR_OK_CALL(rc);
    ck_assert_uint_eq(zr_record_width(s), width);
    void *data = unreadable(width);
    zt_faults_arm(1, ENOSPC, 0);
    rc = zr_append_dense(s, dtype, ndim ? shape : NULL, ndim, data, 1, NULL);
    bool wrote = zt_faults_fired() && zt_faults_fired_call() == ZT_CALL_WRITE;
    zt_faults_disarm();
    ck_assert_msg(rc == ZR_ENOSPC && wrote, "append of %llu bytes returned %d (%s) before its "
                  "write", (unsigned long long)width, rc, zr_last_error());
    ck_assert_uint_eq(zr_len(s), 0);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    ck_assert_uint_eq(zr_record_width(s), width);
    zr_close(s);
    munmap(data, width);
    free(dir);
}
END_TEST

/* store.zr of a Dense store in the library's encoding: fixmap, fixstr
 * keys and dtype, the dimensions as the smallest unsigned integers. */
static size_t dense_identity(uint8_t *out, const char *dtype, const uint64_t *shape,
                             uint32_t ndim)
{
    size_t n = 0, dl = strlen(dtype);
    out[n++] = 0x82;
    out[n++] = 0xa5;
    memcpy(out + n, "dtype", 5);
    n += 5;
    out[n++] = (uint8_t)(0xa0 | dl);
    memcpy(out + n, dtype, dl);
    n += dl;
    out[n++] = 0xaa;
    memcpy(out + n, "item_shape", 10);
    n += 10;
    if (ndim < 16) {
        out[n++] = (uint8_t)(0x90 | ndim);
    } else {
        out[n++] = 0xdc;
        out[n++] = 0;
        out[n++] = (uint8_t)ndim;
    }
    for (uint32_t d = 0; d < ndim; d++) {
        if (shape[d] < 128) {
            out[n++] = (uint8_t)shape[d];
        } else {
            out[n++] = 0xcf;
            for (int b = 7; b >= 0; b--)
                out[n++] = (uint8_t)(shape[d] >> (8 * b));
        }
    }
    return n;
}

/* A Dense store with a hand-written identity of dense_limits[_i]: at or
 * below the limit it opens with that width; above, ZR_ECORRUPT (the 0-d
 * case used to open, with records no read accepts). */
START_TEST(dense_identity_at_the_record_limit_opens_and_above_is_corrupt)
{
    const uint64_t one[] = {1};
    char *dir = zt_path("d");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, dir, "|u1", one, 1, NULL));
    zr_close(s);
    uint8_t id[128];
    const uint64_t shape[] = {dense_limits[_i].dim};
    size_t len = dense_identity(id, dense_limits[_i].dtype, shape, dense_limits[_i].ndim);
    char *path = zt_join(dir, "store.zr");
    zt_spit(path, id, len);
    if (dense_limits[_i].width > LIMIT) {
        expect_open_corrupt(dir, "record width exceeds 2 GiB");
    } else {
        for (int mode = ZR_RDONLY; mode <= ZR_RDWR; mode++) {
            ZR_OK_CALL(zr_open(&s, dir, mode));
            ck_assert_uint_eq(zr_record_width(s), dense_limits[_i].width);
            zr_close(s);
        }
    }
    free(path);
    free(dir);
}
END_TEST

/* Dense records of exactly 2 GiB, two filling chunk 0 (the frontier is
 * then offset 0 of chunk 1): they read, the last is deleted, compaction
 * cuts chunk 0 to the one left and removes chunk 1, and the next append
 * goes after it. */
START_TEST(dense_records_at_the_limit_fill_a_chunk_and_compact)
{
    const uint64_t shape[] = {LIMIT};
    char *dir = zt_path("d");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, dir, "|u1", shape, 1, NULL));
    zr_close(s);
    struct model m = {0};
    resize_file(dir, 0, "chunk", CAP);
    resize_file(dir, 1, "chunk", 0);
    place(dir, 0, 0, &m, (struct rec){LIMIT, -1, 1});
    place(dir, 0, LIMIT, &m, (struct rec){LIMIT, -1, 2});
    zt_meta_write(dir, (zt_meta){.length = 2, .tail_chunk = 1});
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    check_all(s, &m);
    delete_rec(s, &m, 1);
    ZR_OK_CALL(zr_compact(s, NULL));
    expect_meta(dir, 1, 0, LIMIT);
    expect_size(dir, 0, "chunk", (int64_t)LIMIT);
    expect_size(dir, 1, "chunk", -1);
    check_all(s, &m);
    void *data = unreadable(LIMIT);
    zt_faults_arm(1, ENOSPC, 0);
    int rc = zr_append_dense(s, "|u1", shape, 1, data, 1, NULL);
    zt_faults_disarm();
    ck_assert_msg(rc == ZR_ENOSPC, "append returned %d (%s)", rc, zr_last_error());
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    zr_close(s);
    munmap(data, LIMIT);
    free(dir);
}
END_TEST

/* Appends around the first loc segment boundary (2^28 entries) with the
 * real geometry: the store holds L records, of which the test writes
 * only record 0 and record L-1; the entries between are holes of a
 * sparse 0.loc, which neither an open nor a gather of other records
 * reads. A batch of two and one more record then land at L, L+1, L+2.
 * zr_verify and zr_compact read every entry, so they are not run here;
 * the small-geometry tests below run them across a boundary. */
static const uint64_t seg_starts[] = {SEG - 2, SEG - 1, SEG, SEG + 1};

static void expect_segments(const char *dir, uint64_t length)
{
    expect_size(dir, 0, "loc", (int64_t)(ZR_MIN(length, SEG) * 16));
    expect_size(dir, 1, "loc", length > SEG ? (int64_t)((length - SEG) * 16) : -1);
}

START_TEST(appends_cross_the_first_record_table_segment)
{
    uint64_t L = seg_starts[_i];
    char *dir = new_ragged("s", "|u1");
    const struct rec first = U1(100, 1), last = U1(100, 2);
    const struct rec added[] = {U1(100, 3), U1(100, 4), U1(100, 5)};
    resize_file(dir, 0, "loc", ZR_MIN(L, SEG) * 16);
    resize_file(dir, 0, "chunk", 200);
    place_at(dir, 0, 0, 0, &first);
    place_at(dir, 0, 100, L - 1, &last);
    zt_meta_write(dir, (zt_meta){.length = L, .tail_offset = 200});
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    ck_assert_uint_eq(zr_len(s), L);
    check_rec(s, 0, &first);
    check_rec(s, L - 1, &last);
    uint8_t buf[3][100];
    zr_rec recs[3];
    const uint64_t shape[] = {84};
    for (int k = 0; k < 3; k++) {
        rec_fill(&added[k], buf[k]);
        recs[k] = (zr_rec){.data = buf[k] + 16, .shape = shape, .ndim = 1};
    }
    uint64_t at;
    ZR_OK_CALL(zr_append_ragged(s, "|u1", recs, 2, &at));
    ck_assert_uint_eq(at, L);
    expect_segments(dir, L + 2);
    ZR_OK_CALL(zr_append_ragged(s, "|u1", recs + 2, 1, &at));
    ck_assert_uint_eq(at, L + 2);
    expect_segments(dir, L + 3);
    for (uint64_t k = 0; k < 3; k++) {
        expect_entry(dir, L + k, 0, 200 + 100 * k, 100);
        check_rec(s, L + k, &added[k]);
    }
    expect_meta(dir, L + 3, 0, 500);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    ck_assert_uint_eq(zr_len(s), L + 3);
    check_rec(s, 0, &first);
    check_rec(s, L - 1, &last);
    for (uint64_t k = 0; k < 3; k++)
        check_rec(s, L + k, &added[k]);
    zr_close(s);
    /* Deleting record 0 moves the entry of record L + 2 into its place. */
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    const uint64_t zero = 0;
    ZR_OK_CALL(zr_delete(s, &zero, 1));
    expect_entry(dir, 0, 0, 400, 100);
    expect_meta(dir, L + 2, 0, 500);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    ck_assert_uint_eq(zr_len(s), L + 2);
    check_rec(s, 0, &added[2]);
    check_rec(s, L - 1, &last);
    check_rec(s, L, &added[0]);
    check_rec(s, L + 1, &added[1]);
    zr_close(s);
    free(dir);
}
END_TEST

/* Model records for the small-geometry tests: record k is 40 + k bytes. */
static struct rec small_rec(unsigned k)
{
    return U1(40 + k, (uint8_t)(10 + k));
}

static void expect_small_segments(const char *dir, uint64_t length)
{
    uint64_t segs = length ? (length + SMALL_SEG - 1) / SMALL_SEG : 1;
    for (uint64_t g = 0; g <= segs; g++) {
        int64_t want = g < segs ? (int64_t)(ZR_MIN(length - g * SMALL_SEG, SMALL_SEG) * 16) : -1;
        char *path = file_of(dir, g, "loc");
        ck_assert_msg(zt_file_size(path) == want, "%s is %lld bytes, expected %lld", path,
                      (long long)zt_file_size(path), (long long)want);
        free(path);
    }
}

/* With 16-entry segments: a segment filled exactly leaves no next one; the
 * next append makes it; deletes back across the boundary leave it, the
 * appends after them write over its stale entries; a compaction to
 * exactly one full segment removes the second. Every step is checked
 * against the model, through reopens and zr_verify. */
START_TEST(record_table_segments_fill_exactly_and_roll_over)
{
    zr_testing_set_geometry(0, SMALL_SEG);
    char *dir = new_ragged("s", "|u1");
    struct model m = {0};
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    unsigned next = 0;
    while (m.n < SMALL_SEG - 1)
        append_rec(s, &m, small_rec(next++));
    expect_small_segments(dir, 15);
    append_rec(s, &m, small_rec(next++));
    expect_small_segments(dir, 16);
    append_rec(s, &m, small_rec(next++));
    expect_small_segments(dir, 17);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    verify_ok(s);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    delete_rec(s, &m, 16);
    delete_rec(s, &m, 3);
    ck_assert_uint_eq(m.n, 15);
    append_rec(s, &m, small_rec(next++));
    append_rec(s, &m, small_rec(next++));
    check_all(s, &m);
    verify_ok(s);
    delete_rec(s, &m, 1);
    ZR_OK_CALL(zr_compact(s, NULL));
    expect_small_segments(dir, 16);
    check_all(s, &m);
    verify_ok(s);
    append_rec(s, &m, small_rec(next++));
    expect_small_segments(dir, 17);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    verify_ok(s);
    zr_close(s);
    free(dir);
}
END_TEST

/* A power cut lost the end of the record table at a segment boundary
 * (16-entry segments): the whole of 1.loc (17 records), all but its first
 * entry (18), or the last entry of 0.loc (16). A reader counts the
 * entries the segments hold; a writer cuts to them, and its next append
 * takes the first lost index. */
static const struct {
    uint64_t records, kept;
    uint64_t seg, seg_size; /* the segment cut, and its size after (-1: removed) */
} lost_entries[] = {
    {17, 16, 1, UINT64_MAX},
    {18, 17, 1, 16},
    {16, 15, 0, 15 * 16},
};

START_TEST(lost_tail_is_cut_at_a_record_table_segment_boundary)
{
    zr_testing_set_geometry(0, SMALL_SEG);
    char *dir = new_ragged("s", "|u1");
    struct model m = {0};
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    while (m.n < lost_entries[_i].records)
        append_rec(s, &m, small_rec((unsigned)m.n));
    ZR_OK_CALL(zr_sync(s));
    zr_close(s);
    char *cut = file_of(dir, lost_entries[_i].seg, "loc");
    if (lost_entries[_i].seg_size == UINT64_MAX)
        ck_assert_int_eq(unlink(cut), 0);
    else
        zt_resize(cut, lost_entries[_i].seg_size);
    free(cut);
    m.n = lost_entries[_i].kept;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    zr_close(s);
    ck_assert_uint_eq(zt_meta_read(dir).length, lost_entries[_i].records);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    check_all(s, &m);
    ck_assert_uint_eq(zt_meta_read(dir).length, m.n);
    append_rec(s, &m, small_rec(30));
    expect_small_segments(dir, m.n);
    check_all(s, &m);
    verify_ok(s);
    delete_rec(s, &m, 0);
    ZR_OK_CALL(zr_compact(s, NULL));
    expect_small_segments(dir, m.n);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    verify_ok(s);
    zr_close(s);
    free(dir);
}
END_TEST

/* A store of three small records, closed, for the header tests. */
static char *three_records(struct model *m)
{
    char *dir = new_ragged("s", "|u1");
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    for (unsigned k = 0; k < 3; k++)
        append_rec(s, m, small_rec(k));
    zr_close(s);
    return dir;
}

/* The largest length any table can hold is 2^20 segments of 2^28 entries
 * (2^48): a header saying so, over files that hold 3 records, is the lost
 * tail of R15 (a reader counts 3, a writer cuts to 3). One more is
 * damage. */
START_TEST(header_length_at_the_table_limit_is_cut_and_above_is_corrupt)
{
    struct model m = {0};
    char *dir = three_records(&m);
    const uint64_t max = ZR_MAX_FILES * SEG;
    zt_meta_write(dir, (zt_meta){.length = max + 1, .tail_offset = 40 + 41 + 42});
    expect_open_corrupt(dir, "meta.zr: length 281474976710657 is out of range");
    zt_meta_write(dir, (zt_meta){.length = UINT64_MAX, .tail_offset = 40 + 41 + 42});
    expect_open_corrupt(dir, "meta.zr: length");
    zt_meta_write(dir, (zt_meta){.length = max, .tail_offset = 40 + 41 + 42});
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    zr_close(s);
    ck_assert_uint_eq(zt_meta_read(dir).length, max);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    check_all(s, &m);
    expect_meta(dir, 3, 0, 40 + 41 + 42);
    append_rec(s, &m, small_rec(3));
    check_all(s, &m);
    verify_ok(s);
    zr_close(s);
    free(dir);
}
END_TEST

/* tail_chunk counts at most 2^20 chunk files (0 .. 2^20 - 1). At the last
 * one, over a store of one chunk, the files are missing; one above is out
 * of range; and chunk 1 with offset 0 is not R7's empty chunk unless
 * chunk 0 is full. */
START_TEST(header_tail_chunk_at_the_file_limit_is_corrupt)
{
    struct model m = {0};
    char *dir = three_records(&m);
    zt_meta_write(dir, (zt_meta){.length = 3, .tail_chunk = (uint32_t)(ZR_MAX_FILES - 1)});
    expect_open_corrupt(dir, "1.chunk is missing");
    zt_meta_write(dir, (zt_meta){.length = 3, .tail_chunk = (uint32_t)ZR_MAX_FILES});
    expect_open_corrupt(dir, "tail chunk 1048576 is out of range");
    zt_meta_write(dir, (zt_meta){.length = 3, .tail_chunk = 1});
    expect_open_corrupt(dir, "1.chunk is missing");
    zt_meta_write(dir, (zt_meta){.length = 3, .tail_offset = 40 + 41 + 42});
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    check_all(s, &m);
    zr_close(s);
    free(dir);
}
END_TEST

/* With 4 KiB chunks tail_offset can name the chunk's end itself, which the
 * library never writes (R7 hands it to the next chunk) but accepts: the
 * next append starts chunk 1. One byte more is damage. */
START_TEST(header_frontier_at_the_chunk_capacity_opens_and_above_is_corrupt)
{
    zr_testing_set_geometry(4096, SMALL_SEG);
    char *dir = new_ragged("s", "|u1");
    struct model m = {0};
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    append_rec(s, &m, U1(1000, 1));
    append_rec(s, &m, U1(1000, 2));
    append_rec(s, &m, U1(2096, 3));
    zr_close(s);
    expect_meta(dir, 3, 1, 0);
    expect_size(dir, 1, "chunk", 0);
    char *c1 = file_of(dir, 1, "chunk");
    ck_assert_int_eq(unlink(c1), 0);
    free(c1);
    zt_meta_write(dir, (zt_meta){.length = 3, .tail_offset = 4097});
    expect_open_corrupt(dir, "exceeds the chunk capacity");
    zt_meta_write(dir, (zt_meta){.length = 3, .tail_offset = 4096});
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    verify_ok(s);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    check_all(s, &m);
    append_rec(s, &m, U1(100, 4));
    expect_entry(dir, 3, 1, 0, 100);
    expect_meta(dir, 4, 1, 100);
    verify_ok(s);
    delete_rec(s, &m, 0);
    ZR_OK_CALL(zr_compact(s, NULL));
    check_all(s, &m);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    verify_ok(s);
    zr_close(s);
    free(dir);
}
END_TEST

/* The codec byte: 2 (zstd_dict) is the largest, and needs dict.zr; 3 and
 * above are unknown. The reserved bytes 17..31 must be zero, the first
 * and the last of them included. */
START_TEST(header_codec_and_reserved_bytes_at_their_limits)
{
    struct model m = {0};
    char *dir = three_records(&m);
    char *meta = zt_join(dir, "meta.zr");
    const uint8_t codec2 = 2, codec3 = 3, codec255 = 255, zero = 0, one = 1;
    zt_patch(meta, 16, &codec2, 1);
    expect_open_corrupt(dir, "dict.zr is missing");
    zt_patch(meta, 16, &codec3, 1);
    expect_open_corrupt(dir, "unknown codec byte 3");
    zt_patch(meta, 16, &codec255, 1);
    expect_open_corrupt(dir, "unknown codec byte 255");
    zt_patch(meta, 16, &zero, 1);
    zt_patch(meta, 17, &one, 1);
    expect_open_corrupt(dir, "reserved byte 17");
    zt_patch(meta, 17, &zero, 1);
    zt_patch(meta, 31, &one, 1);
    expect_open_corrupt(dir, "reserved byte 31");
    zt_patch(meta, 31, &zero, 1);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    zr_close(s);

    /* A zstd_dict store: codec 2 with its dictionary opens. */
    void *sample = zt_dense_gen("<u4", 8, 7, 0, 1000), *dict;
    size_t dict_len;
    ZR_OK_CALL(zr_train_dict_buffer(sample, 32, 1000, ZR_TIER_FAST, &dict, &dict_len));
    zr_create_opts o = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD_DICT,
                        .dict = dict, .dict_len = dict_len};
    char *zd = zt_path("zd");
    ZR_OK_CALL(zr_ragged_create(&s, zd, "|u1", &o));
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, zd, ZR_RDONLY));
    ck_assert_int_eq(zr_codec(s), ZR_CODEC_ZSTD_DICT);
    zr_close(s);
    free(zd);
    free(dict);
    free(sample);
    free(meta);
    free(dir);
}
END_TEST

/* Item shapes of 32 dimensions (the most allowed) round-trip through
 * appends, reopens, zr_verify, a delete and a compaction; 33 are
 * refused at creation. */
START_TEST(dense_item_shape_of_32_dimensions_round_trips_and_33_is_refused)
{
    uint64_t shape[ZR_MAX_NDIM + 1];
    for (int d = 0; d <= ZR_MAX_NDIM; d++)
        shape[d] = d == 0 ? 2 : d == 15 ? 3 : d == 31 ? 2 : 1;
    char *over = zt_path("over");
    zr_store *s = (zr_store *)&s;
    ZR_FAIL_CALL(zr_dense_create(&s, over, "<u2", shape, ZR_MAX_NDIM + 1, NULL), ZR_EINVAL);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(zt_file_size(over), -1);
    free(over);
    char *dir = zt_path("d");
    ZR_OK_CALL(zr_dense_create(&s, dir, "<u2", shape, ZR_MAX_NDIM, NULL));
    ck_assert_uint_eq(zr_record_width(s), 2 * 12);
    zt_append_dense_gen(s, 3, 20);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    uint32_t ndim;
    const uint64_t *got = zr_item_shape(s, &ndim);
    ck_assert_uint_eq(ndim, ZR_MAX_NDIM);
    ck_assert_mem_eq(got, shape, ZR_MAX_NDIM * sizeof *shape);
    zt_check_dense_all(s, 3);
    verify_ok(s);
    const uint64_t last = 19;
    ZR_OK_CALL(zr_delete(s, &last, 1));
    ZR_OK_CALL(zr_compact(s, NULL));
    zt_append_dense_gen(s, 3, 5);
    zt_check_dense_all(s, 3);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    zt_check_dense_all(s, 3);
    verify_ok(s);
    zr_close(s);
    free(dir);
}
END_TEST

/* Ragged records of 32 dimensions round-trip with their shapes; a record
 * of 33 is refused (ZR_ESHAPE) with the batch it is in, nothing written. */
START_TEST(ragged_record_shape_of_32_dimensions_round_trips_and_33_is_refused)
{
    char *dir = new_ragged("s", "|u1");
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    uint64_t shapes[4][ZR_MAX_NDIM + 1];
    uint8_t data[4][8];
    zr_rec recs[4];
    for (int k = 0; k < 4; k++) {
        for (int d = 0; d <= ZR_MAX_NDIM; d++)
            shapes[k][d] = d == 8 * k ? (uint64_t)k + 2 : 1;
        memset(data[k], 0x30 + k, sizeof data[k]);
        recs[k] = (zr_rec){.data = data[k], .shape = shapes[k], .ndim = ZR_MAX_NDIM};
    }
    ZR_OK_CALL(zr_append_ragged(s, "|u1", recs, 4, NULL));
    size_t len;
    void *snap = zt_snapshot(dir, &len);
    recs[2].ndim = ZR_MAX_NDIM + 1;
    ZR_FAIL_CALL(zr_append_ragged(s, "|u1", recs, 4, NULL), ZR_ESHAPE);
    recs[2].ndim = ZR_MAX_NDIM;
    zt_assert_unchanged(dir, snap, len);
    ck_assert_uint_eq(zr_len(s), 4);
    const uint64_t last = 3;
    ZR_OK_CALL(zr_delete(s, &last, 1));
    ZR_OK_CALL(zr_compact(s, NULL));
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    verify_ok(s);
    const uint64_t idx[] = {0, 1, 2};
    zr_ragged_batch *b;
    ZR_OK_CALL(zr_gather_ragged_alloc(s, idx, 3, &b));
    for (int k = 0; k < 3; k++) {
        ck_assert_uint_eq(b->recs[k].ndim, ZR_MAX_NDIM);
        ck_assert_mem_eq(b->recs[k].shape, shapes[k], ZR_MAX_NDIM * sizeof shapes[k][0]);
        ck_assert_uint_eq(b->recs[k].nbytes, (uint64_t)k + 2);
        ck_assert_mem_eq(b->recs[k].data, data[k], (size_t)k + 2);
    }
    zr_ragged_batch_free(b);
    zr_close(s);
    free(dir);
}
END_TEST

/* A hand-written store.zr with an item shape of 32 ones opens; with 33
 * it is ZR_ECORRUPT. */
START_TEST(identity_of_32_dimensions_opens_and_33_is_corrupt)
{
    const uint64_t one[] = {1};
    char *dir = zt_path("d");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, dir, "|u1", one, 1, NULL));
    zr_close(s);
    uint64_t ones[ZR_MAX_NDIM + 1];
    for (int d = 0; d <= ZR_MAX_NDIM; d++)
        ones[d] = 1;
    uint8_t id[128];
    char *path = zt_join(dir, "store.zr");
    zt_spit(path, id, dense_identity(id, "<f8", ones, ZR_MAX_NDIM + 1));
    expect_open_corrupt(dir, "item_shape is not an array of at most 32 dims");
    zt_spit(path, id, dense_identity(id, "<f8", ones, ZR_MAX_NDIM));
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    uint32_t ndim;
    zr_item_shape(s, &ndim);
    ck_assert_uint_eq(ndim, ZR_MAX_NDIM);
    ck_assert_uint_eq(zr_record_width(s), 8);
    zr_close(s);
    free(path);
    free(dir);
}
END_TEST

/* A record of 273 bytes written over by hand with a shape prefix of 32
 * dimensions (31 ones and 9: a 9-byte payload) reads back with that
 * shape; with 33 dimensions of one (a 1-byte payload) every read of it
 * is ZR_ECORRUPT and zr_verify lists it. The record after it is intact
 * either way. */
START_TEST(ragged_prefix_of_33_dimensions_is_corrupt_on_read)
{
    int ndim = ZR_MAX_NDIM + _i;
    char *dir = new_ragged("s", "|u1");
    struct model m = {0};
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    append_rec(s, &m, U1(273, 1));
    append_rec(s, &m, U1(100, 2));
    zr_close(s);
    uint8_t rec[273] = {0};
    put64(rec, (uint64_t)ndim);
    for (int d = 0; d < ndim; d++)
        put64(rec + 8 + 8 * d, d == ZR_MAX_NDIM - 1 && ndim == ZR_MAX_NDIM ? 9 : 1);
    uint64_t pre = 8 * (1 + (uint64_t)ndim);
    memset(rec + pre, 0x77, sizeof rec - pre);
    char *chunk = file_of(dir, 0, "chunk");
    zt_patch(chunk, 0, rec, sizeof rec);
    free(chunk);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_rec(s, 1, &m.r[1]);
    zr_view v;
    const uint64_t i = 0, at = 0;
    uint8_t got[273];
    if (ndim == ZR_MAX_NDIM) {
        ZR_OK_CALL(zr_gather_ragged(s, &i, 1, got, &at));
        ZR_OK_CALL(zr_ragged_view(got, sizeof got, 1, &v));
        ck_assert_uint_eq(v.ndim, ZR_MAX_NDIM);
        ck_assert_uint_eq(v.shape[ZR_MAX_NDIM - 1], 9);
        ck_assert_uint_eq(v.nbytes, 9);
        verify_ok(s);
    } else {
        const void *span;
        uint64_t size;
        ZR_FAIL_CALL(zr_gather_ragged(s, &i, 1, got, &at), ZR_ECORRUPT);
        ZR_FAIL_CALL(zr_record_span(s, 0, &span, &size), ZR_ECORRUPT);
        ZR_FAIL_CALL(zr_ragged_view(rec, sizeof rec, 1, &v), ZR_ECORRUPT);
        zr_verify_report *rep;
        ZR_FAIL_CALL(zr_verify(s, &rep), ZR_ECORRUPT);
        ck_assert_uint_eq(rep->nproblems, 1);
        ck_assert_uint_eq(zr_verify_problem(rep, 0)->entry, 0);
        zr_verify_report_free(rep);
    }
    zr_close(s);
    free(dir);
}
END_TEST

/* dict.zr may hold ZR_DICT_MAX (64 MiB) bytes: creation refuses one byte
 * more without reading it, and an open refuses a dict.zr of one byte more,
 * while one of exactly 64 MiB (a sparse file of zeros, which zstd takes
 * as raw content) opens. */
START_TEST(dictionary_at_64_mib_opens_and_above_is_refused)
{
    void *big = unreadable(ZR_DICT_MAX + 1);
    zr_create_opts over = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD_DICT,
                           .dict = big, .dict_len = ZR_DICT_MAX + 1};
    char *refused = zt_path("refused");
    zr_store *s = (zr_store *)&s;
    ZR_FAIL_CALL(zr_ragged_create(&s, refused, "|u1", &over), ZR_EINVAL);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(zt_file_size(refused), -1);
    munmap(big, ZR_DICT_MAX + 1);
    free(refused);

    void *sample = zt_dense_gen("<u4", 8, 7, 0, 1000), *dict;
    size_t dict_len;
    ZR_OK_CALL(zr_train_dict_buffer(sample, 32, 1000, ZR_TIER_FAST, &dict, &dict_len));
    zr_create_opts o = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD_DICT,
                        .dict = dict, .dict_len = dict_len};
    char *dir = zt_path("s");
    ZR_OK_CALL(zr_ragged_create(&s, dir, "|u1", &o));
    zr_close(s);
    char *path = zt_join(dir, "dict.zr");
    zt_resize(path, 0);
    zt_resize(path, (uint64_t)ZR_DICT_MAX + 1);
    expect_open_corrupt(dir, "dict.zr is 67108865 bytes");
    zt_resize(path, ZR_DICT_MAX);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    ck_assert_uint_eq(zr_len(s), 0);
    zr_close(s);
    free(path);
    free(dir);
    free(dict);
    free(sample);
}
END_TEST

/* store.zr may hold ZR_IDENTITY_MAX (4096) bytes. The largest identity
 * the format allows (every length in its widest msgpack encoding, 32
 * dimensions as uint64) is far below it and opens; 4096 bytes (that map
 * and nils after it) are read and refused for the trailing bytes; 4097
 * are refused unread. */
START_TEST(identity_file_at_4096_bytes_is_parsed_and_above_is_refused)
{
    const uint64_t one[] = {1};
    char *dir = zt_path("d");
    zr_store *s;
    ZR_OK_CALL(zr_dense_create(&s, dir, "|u1", one, 1, NULL));
    zr_close(s);
    uint8_t id[ZR_IDENTITY_MAX + 1];
    memset(id, 0xc0, sizeof id);
    size_t n = 0;
    const uint8_t map32[] = {0xdf, 0, 0, 0, 2};
    memcpy(id + n, map32, sizeof map32);
    n += sizeof map32;
    const char *strs[] = {"dtype", "|S100000000", "item_shape"};
    for (int k = 0; k < 3; k++) {
        size_t l = strlen(strs[k]);
        const uint8_t str32[] = {0xdb, 0, 0, 0, (uint8_t)l};
        memcpy(id + n, str32, sizeof str32);
        memcpy(id + n + sizeof str32, strs[k], l);
        n += sizeof str32 + l;
    }
    const uint8_t array32[] = {0xdd, 0, 0, 0, ZR_MAX_NDIM};
    memcpy(id + n, array32, sizeof array32);
    n += sizeof array32;
    for (int d = 0; d < ZR_MAX_NDIM; d++) {
        const uint8_t u64_one[] = {0xcf, 0, 0, 0, 0, 0, 0, 0, 1};
        memcpy(id + n, u64_one, sizeof u64_one);
        n += sizeof u64_one;
    }
    char *path = zt_join(dir, "store.zr");
    zt_spit(path, id, n);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    ck_assert_uint_eq(zr_record_width(s), 100000000);
    zr_close(s);
    zt_spit(path, id, ZR_IDENTITY_MAX);
    expect_open_corrupt(dir, "trailing bytes after the map");
    zt_spit(path, id, ZR_IDENTITY_MAX + 1);
    expect_open_corrupt(dir, "store.zr is 4097 bytes");
    free(path);
    free(dir);
}
END_TEST

/* Compaction cuts every chunk it keeps to the end of its packed records,
 * not only the last: with 4 KiB chunks, chunk 0 holds records of 1000,
 * 1000 and 2000 bytes, chunk 1 of 3000 and 1000, chunk 2 one of 100.
 * Deleting the second record (the last takes its index) and compacting
 * packs chunk 0 to 3000 bytes (the 3000-byte record does not fit after
 * them), which its file must then hold, with nothing reclaimable left. */
START_TEST(compaction_cuts_every_chunk_to_its_packed_records)
{
    zr_testing_set_geometry(4096, SMALL_SEG);
    char *dir = new_ragged("s", "|u1");
    struct model m = {0};
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    const uint64_t sizes[] = {1000, 1000, 2000, 3000, 1000, 100};
    for (unsigned k = 0; k < 6; k++)
        append_rec(s, &m, U1(sizes[k], (uint8_t)(k + 1)));
    expect_size(dir, 0, "chunk", 4000);
    expect_size(dir, 1, "chunk", 4000);
    expect_size(dir, 2, "chunk", 100);
    delete_rec(s, &m, 1);
    zr_compact_result r = ZR_COMPACT_RESULT_INIT;
    ZR_OK_CALL(zr_compact(s, &r));
    ck_assert_uint_eq(r.records_moved, 1);
    expect_entry(dir, 2, 0, 1000, 2000);
    expect_size(dir, 0, "chunk", 3000);
    expect_size(dir, 1, "chunk", 4000);
    expect_size(dir, 2, "chunk", 100);
    expect_meta(dir, 5, 2, 100);
    zr_store_stats st = ZR_STORE_STATS_INIT;
    ZR_OK_CALL(zr_stats(s, &st));
    ck_assert_uint_eq(st.chunk_bytes, 7100);
    ck_assert_uint_eq(st.reclaimable, 0);
    ck_assert_uint_eq(r.bytes_after, 7100);
    check_all(s, &m);
    verify_ok(s);
    append_rec(s, &m, U1(500, 7));
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    verify_ok(s);
    zr_close(s);
    free(dir);
}
END_TEST

/* A chunk file longer than the chunk capacity (only damage or another
 * writer makes one): the table reads no byte past the capacity, and a
 * compaction cuts the file to its packed records like any other chunk. */
START_TEST(compaction_cuts_a_chunk_longer_than_the_capacity)
{
    zr_testing_set_geometry(4096, SMALL_SEG);
    char *dir = new_ragged("s", "|u1");
    struct model m = {0};
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    append_rec(s, &m, U1(3000, 1));
    append_rec(s, &m, U1(1096, 2));
    append_rec(s, &m, U1(2000, 3));
    zr_close(s);
    resize_file(dir, 0, "chunk", 6000);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    check_all(s, &m);
    ZR_OK_CALL(zr_compact(s, NULL));
    expect_size(dir, 0, "chunk", 4096);
    expect_size(dir, 1, "chunk", 2000);
    check_all(s, &m);
    verify_ok(s);
    zr_close(s);
    free(dir);
}
END_TEST

/* What versions that stored a chunk's full end as offset 0 left behind:
 * records filling chunk 0 exactly, and a header whose frontier is
 * (0, 0). A writer must append after them, not over record 0. */
START_TEST(full_tail_chunk_behind_a_zero_frontier_is_not_overwritten)
{
    zr_testing_set_geometry(4096, SMALL_SEG);
    char *dir = new_ragged("s", "|u1");
    struct model m = {0};
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    append_rec(s, &m, U1(1000, 1));
    append_rec(s, &m, U1(3096, 2));
    zr_close(s);
    char *c1 = file_of(dir, 1, "chunk");
    ck_assert_int_eq(unlink(c1), 0);
    free(c1);
    zt_meta_write(dir, (zt_meta){.length = 2, .tail_chunk = 0, .tail_offset = 0});
    /* A reader takes the records as live, as a writer does. */
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    verify_ok(s);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDWR));
    check_all(s, &m);
    append_rec(s, &m, U1(500, 3));
    expect_entry(dir, 2, 1, 0, 500);
    expect_meta(dir, 3, 1, 500);
    zr_close(s);
    ZR_OK_CALL(zr_open(&s, dir, ZR_RDONLY));
    check_all(s, &m);
    verify_ok(s);
    zr_close(s);
    free(dir);
}
END_TEST

/* A Ragged record holds at least one item after an 8-byte prefix, so a
 * dtype whose item size leaves no room for one makes no store: refused at
 * creation (ZR_ETOOBIG) and corrupt in store.zr. */
START_TEST(ragged_dtype_with_no_room_for_a_record_is_refused)
{
    static const struct {
        const char *dtype;
        bool ok;
    } cases[] = {{"<U536870909", true}, {"<U536870910", true}, {"<U536870911", false}};
    for (unsigned k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char name[16];
        snprintf(name, sizeof name, "s%u", k);
        char *dir = zt_path(name);
        zr_store *s = NULL;
        int rc = zr_ragged_create(&s, dir, cases[k].dtype, NULL);
        ck_assert_msg(rc == (cases[k].ok ? 0 : ZR_ETOOBIG), "%s: create gave %d (%s)",
                      cases[k].dtype, rc, zr_last_error());
        zr_close(s);
        free(dir);
    }
    /* A store.zr naming such a dtype, written over a sound store's. */
    char *dir = new_ragged("t", "|u1");
    char *id = zt_join(dir, "store.zr");
    static const char doc[] = "\x81\xa5" "dtype" "\xab" "<U536870911";
    int fd = open(id, O_WRONLY | O_TRUNC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, doc, sizeof doc - 1), (ssize_t)(sizeof doc - 1));
    close(fd);
    free(id);
    expect_open_corrupt(dir, "fits in 2 GiB");
    free(dir);
}
END_TEST

Suite *suite_edges(void)
{
    Suite *s = suite_create("edges");
    TCase *chunk = tcase_create("chunk_end");
    tcase_add_checked_fixture(chunk, zt_setup, edges_teardown);
    tcase_set_timeout(chunk, 60);
    tcase_add_loop_test(chunk, append_that_ends_a_chunk_hands_the_frontier_to_the_next, 0, 3);
    tcase_add_loop_test(chunk, compaction_that_fills_a_chunk_hands_the_frontier_to_the_next, 0, 3);
    tcase_add_loop_test(chunk, recovery_to_a_full_chunk_hands_the_frontier_to_the_next, 0, 3);
    tcase_add_test(chunk, lost_empty_tail_chunk_after_a_full_one_is_recreated);
    tcase_add_test(chunk, verify_through_a_reader_accepts_a_lost_empty_tail_chunk);
    tcase_add_test(chunk, compaction_cuts_every_chunk_to_its_packed_records);
    tcase_add_test(chunk, compaction_cuts_a_chunk_longer_than_the_capacity);
    tcase_add_test(chunk, full_tail_chunk_behind_a_zero_frontier_is_not_overwritten);
    suite_add_tcase(s, chunk);

    TCase *size = tcase_create("record_size");
    tcase_add_checked_fixture(size, zt_setup, edges_teardown);
    tcase_set_timeout(size, 60);
    int nragged = sizeof ragged_limits / sizeof ragged_limits[0];
    int ndense = sizeof dense_limits / sizeof dense_limits[0];
    tcase_add_loop_test(size, ragged_append_at_the_record_limit_is_accepted_and_above_refused, 0,
                        nragged);
    tcase_add_loop_test(size, ragged_entry_at_the_record_limit_reads_and_above_is_corrupt, 0,
                        nragged);
    tcase_add_loop_test(size, dense_width_at_the_record_limit_is_accepted_and_above_refused, 0,
                        ndense);
    tcase_add_loop_test(size, dense_identity_at_the_record_limit_opens_and_above_is_corrupt, 0,
                        ndense);
    tcase_add_test(size, dense_records_at_the_limit_fill_a_chunk_and_compact);
    tcase_add_test(size, ragged_dtype_with_no_room_for_a_record_is_refused);
    suite_add_tcase(s, size);

    TCase *table = tcase_create("record_table");
    tcase_add_checked_fixture(table, zt_setup, edges_teardown);
    tcase_set_timeout(table, 60);
    tcase_add_loop_test(table, appends_cross_the_first_record_table_segment, 0,
                        sizeof seg_starts / sizeof seg_starts[0]);
    tcase_add_test(table, record_table_segments_fill_exactly_and_roll_over);
    tcase_add_loop_test(table, lost_tail_is_cut_at_a_record_table_segment_boundary, 0,
                        sizeof lost_entries / sizeof lost_entries[0]);
    suite_add_tcase(s, table);

    TCase *header = tcase_create("header");
    tcase_add_checked_fixture(header, zt_setup, edges_teardown);
    tcase_set_timeout(header, 60);
    tcase_add_test(header, header_length_at_the_table_limit_is_cut_and_above_is_corrupt);
    tcase_add_test(header, header_tail_chunk_at_the_file_limit_is_corrupt);
    tcase_add_test(header, header_frontier_at_the_chunk_capacity_opens_and_above_is_corrupt);
    tcase_add_test(header, header_codec_and_reserved_bytes_at_their_limits);
    suite_add_tcase(s, header);

    TCase *shape = tcase_create("shape_and_files");
    tcase_add_checked_fixture(shape, zt_setup, edges_teardown);
    tcase_set_timeout(shape, 60);
    tcase_add_test(shape, dense_item_shape_of_32_dimensions_round_trips_and_33_is_refused);
    tcase_add_test(shape, ragged_record_shape_of_32_dimensions_round_trips_and_33_is_refused);
    tcase_add_test(shape, identity_of_32_dimensions_opens_and_33_is_corrupt);
    tcase_add_loop_test(shape, ragged_prefix_of_33_dimensions_is_corrupt_on_read, 0, 2);
    tcase_add_test(shape, dictionary_at_64_mib_opens_and_above_is_refused);
    tcase_add_test(shape, identity_file_at_4096_bytes_is_parsed_and_above_is_refused);
    suite_add_tcase(s, shape);
    return s;
}

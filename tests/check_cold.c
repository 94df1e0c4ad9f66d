/*
 * check_cold.c: gathers from a store whose pages are not in memory. A
 * handle reads a batch either by copying from its mappings (or with pread,
 * ZR_NOMAP) or through the read planner (lib/plan.c), which sorts, merges
 * and batches the reads, reads each distinct record once and copies the
 * repeats after, and reads the table entries itself (doc/cold-reads.md).
 * The two paths must give the same bytes and the same errors. Here each
 * kind and codec is written with a small geometry (chunks of 60,000 bytes,
 * record-table segments of 32 entries), so that the batches cross many
 * chunk and segment ends; the store's pages are dropped from the page
 * cache; then the same batches (repeats, neighbours, both sides of chunk
 * ends, one record, the whole store) are gathered cold, warm, and once the
 * handle reads from its mappings, and compared with the record generator
 * of tests/records.c. The handle's read mode (lib/engine.h) says which
 * path a batch took. Damaged record tables and chunks cut short must give
 * ZR_ECORRUPT with the same message on both paths.
 *
 * Dropping pages needs a file system whose page cache is a cache: on
 * tmpfs (where pytest.sh and some setups put TMPDIR) the pages are the
 * files, and posix_fadvise(POSIX_FADV_DONTNEED) keeps them all. The tests
 * then move to a folder that drops them (/var/tmp, then the working
 * folder), or are skipped with a message when there is none.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "io.h"
#include "tests/faults.h"
#include "tests/helpers.h"
#include "tests/records.h"
#include "tests/suites.h"

/* Chunks of 60,000 bytes hold 29 Dense records of 2 KiB (608 bytes
 * unused) and a few dozen Ragged ones; 32 entries a record-table
 * segment. A store of 1,200 Dense records has 42 chunks and 38 segments. */
#define CHUNK_CAP 60000
#define SEG_ENTRIES 32
#define DENSE_ROWS 64 /* Dense records: 64 x 8 int32 */
#define DENSE_NELEM (DENSE_ROWS * 8)
#define DENSE_WIDTH (DENSE_NELEM * 4)
#define MAXNDIM 2 /* Ragged records: 0 to 2 dimensions of 1..40 */
#define MAXDIM 40

/* The chunk capacity build() writes with: CHUNK_CAP, but where a test
 * wants longer runs of neighbours. */
static uint64_t build_cap = CHUNK_CAP;

/* ---- the store's folder and its pages ------------------------------- */

/* Pages of the open file fd in the page cache, from cachestat(2), or -1
 * where it is missing (Linux before 6.5, and valgrind, which does not
 * know the call). mincore(2) on a mapping of the file is no substitute:
 * valgrind reads the start of every file a process maps, to see whether it
 * is a program, and so brings in the pages it was to look at. */
static int64_t cached_pages(int fd, uint64_t *dirty, uint64_t *writeback)
{
    struct zr_cachestat st;
    *dirty = *writeback = 0;
    if (zr_cachestat(fd, 0, 0, &st) != 0)
        return -1;
    *dirty = st.nr_dirty;
    *writeback = st.nr_writeback;
    return (int64_t)st.nr_cache;
}

/* Write back and drop the pages of every file of dir; returns the pages
 * still cached (-1: cannot tell), and names one file that keeps some in
 * `which`.
 *
 * Why the order matters (measured on ext4, Linux 6.18): DONTNEED starts
 * the write-back of dirty pages but does not wait for it, and skips every
 * page that is dirty, under write-back, locked for a read in flight, or
 * mapped into a process. A store just written has its last header page
 * dirty, so DONTNEED alone left that page; an open handle that had copied
 * from its mappings kept the pages it had touched. Hence: every handle
 * closed first (the callers' job), each file's pages written back and
 * waited for, then DONTNEED, and a second round for pages that a
 * read-ahead still held locked. The write-back is sync_file_range, not
 * fsync: clean pages are what DONTNEED needs, durability is not, and an
 * fsync of each of a store's hundred files costs a journal commit each.
 * On tmpfs nothing is ever dropped (cold_setup avoids it). */
#define WRITE_AND_WAIT                                                                     \
    (SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER)

static int64_t drop_round(const char *dir, char *which, size_t wlen)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int64_t left = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *p = zt_join(dir, e->d_name);
        int fd = open(p, O_RDONLY);
        ck_assert_msg(fd >= 0, "cannot open %s", p);
        ck_assert_int_eq(sync_file_range(fd, 0, 0, WRITE_AND_WAIT), 0);
        ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
        uint64_t dirty, wb;
        int64_t n = cached_pages(fd, &dirty, &wb);
        if (n > 0 && which)
            snprintf(which, wlen, "%s: %llu pages cached, %llu dirty, %llu under write-back",
                     e->d_name, (unsigned long long)n, (unsigned long long)dirty,
                     (unsigned long long)wb);
        left = n < 0 || left < 0 ? -1 : left + n;
        close(fd);
        free(p);
    }
    closedir(d);
    return left;
}

/* Drop the store's pages (no handle of it may be open) and check that
 * none is left, so that the next gathers read from the disk. Where the
 * kernel cannot tell, the check is left out (said once): the tests still
 * see the first cold batch leave its handle planning, which it does only
 * when some of its reads were not cached. */
static void drop_pages(const char *dir)
{
    static bool told;
    char which[512] = "";
    int64_t left = drop_round(dir, which, sizeof which);
    if (left < 0) {
        if (!told)
            fprintf(stderr, "check_cold: no cachestat(2) here (Linux before 6.5, or "
                            "valgrind): dropped pages are not counted\n");
        told = true;
        return;
    }
    for (int round = 0; left > 0 && round < 3; round++) {
        /* Reads in flight end within milliseconds; their pages are then
         * unlocked and can go. */
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
        left = drop_round(dir, which, sizeof which);
    }
    ck_assert_msg(left == 0, "pages of %s stay cached after DONTNEED (%s)", dir, which);
}

/* Read every byte of every file of dir, so that they are all cached. */
static void warm_files(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    char buf[65536];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *p = zt_join(dir, e->d_name);
        int fd = open(p, O_RDONLY);
        ck_assert_int_ge(fd, 0);
        while (read(fd, buf, sizeof buf) > 0)
            ;
        close(fd);
        free(p);
    }
    closedir(d);
}

/* Whether a file written in dir and synced leaves the page cache on
 * DONTNEED: not on tmpfs or ramfs, whose pages are the files. Where
 * cachestat is missing, the file system's type alone decides. */
static bool folder_drops_pages(const char *dir)
{
    struct statfs sf;
    if (statfs(dir, &sf) != 0 || sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC)
        return false;
    char *probe = zt_join(dir, "probe");
    static char buf[65536];
    memset(buf, 3, sizeof buf);
    int fd = open(probe, O_RDWR | O_CREAT | O_TRUNC, 0644);
    bool ok = fd >= 0 && write(fd, buf, sizeof buf) == (ssize_t)sizeof buf &&
              sync_file_range(fd, 0, 0, WRITE_AND_WAIT) == 0 &&
              posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
    uint64_t dirty, wb;
    ok = ok && cached_pages(fd, &dirty, &wb) <= 0;
    if (fd >= 0)
        close(fd);
    unlink(probe);
    free(probe);
    return ok;
}

/* Whether this test has a folder that drops pages (zt_dir, moved there),
 * and whether the kernel has cachestat. */
static bool cold_ok, have_cachestat;

/* zt_setup's folder, or one in a folder that drops pages. zt_teardown
 * removes whichever zt_dir is. The library's syncs are no-ops here
 * (tests/faults.c): drop_pages writes the pages back itself, and
 * durability is not what these tests check. */
static void cold_setup(void)
{
    zt_setup();
    zt_nosync(1);
    int fd = open(zt_dir, O_RDONLY | O_DIRECTORY);
    uint64_t dirty, wb;
    have_cachestat = fd >= 0 && cached_pages(fd, &dirty, &wb) >= 0;
    if (fd >= 0)
        close(fd);
    cold_ok = folder_drops_pages(zt_dir);
    const char *bases[] = {"/var/tmp", "."};
    for (size_t k = 0; !cold_ok && k < sizeof bases / sizeof bases[0]; k++) {
        char *tmpl = zt_join(bases[k], "loaderx-cold-XXXXXX");
        if (!mkdtemp(tmpl)) {
            free(tmpl);
            continue;
        }
        if (!folder_drops_pages(tmpl)) {
            zt_rmtree(tmpl);
            free(tmpl);
            continue;
        }
        zt_rmtree(zt_dir);
        free(zt_dir);
        zt_dir = tmpl;
        cold_ok = true;
    }
}

static void cold_teardown(void)
{
    zr_testing_set_direct(-1);
    zr_testing_set_nomap_mapped(0);
    build_cap = CHUNK_CAP;
    zt_nosync(0);
    zt_teardown();
}

static bool skipped(const char *test)
{
    if (!cold_ok)
        fprintf(stderr, "%s: skipped: no folder here drops its pages from the page cache "
                        "(TMPDIR, /var/tmp and . are all tmpfs or read-only)\n", test);
    return !cold_ok;
}

static int mode_of(zr_store *s)
{
    return atomic_load(&s->read_mode);
}

static const char *mode_name(int m)
{
    return m == ZR_READ_PROBE ? "probe" : m == ZR_READ_MAPPED ? "mapped" : "planned";
}

/* ---- stores ---------------------------------------------------------- */

struct cold_store {
    char *path;
    bool ragged;
    int codec;
    uint64_t seed, n;
    uint64_t *gen;    /* record i holds generated record gen[i] */
    zt_loc *locs;     /* the entries, read by the test from the .loc files */
    uint64_t *bounds; /* records that start a chunk other than their predecessor's */
    size_t nbounds;
};

/* What each configuration writes. */
struct config {
    const char *name;
    bool ragged;
    int codec;
    bool deletes; /* some records deleted: entries no longer where appends put them */
};

static const struct config configs[] = {
    {"dense raw", false, ZR_CODEC_RAW, false},
    {"dense raw after deletes", false, ZR_CODEC_RAW, true},
    {"dense zstd", false, ZR_CODEC_ZSTD, false},
    {"dense zstd dict", false, ZR_CODEC_ZSTD_DICT, false},
    {"ragged raw", true, ZR_CODEC_RAW, false},
    {"ragged zstd", true, ZR_CODEC_ZSTD, false},
    {"ragged zstd dict", true, ZR_CODEC_ZSTD_DICT, false},
};
#define NCONFIGS (sizeof configs / sizeof configs[0])

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* A store of config c with n records of stream seed, written with the
 * small geometry, closed, its entries and chunk starts read back. */
static struct cold_store build(const struct config *c, uint64_t seed, uint64_t n)
{
    struct cold_store cs = {.ragged = c->ragged, .codec = c->codec, .seed = seed};
    zr_testing_set_geometry(build_cap, SEG_ENTRIES);
    zr_create_opts o = {.size = sizeof(zr_create_opts), .codec = c->codec};
    const uint64_t shape[] = {DENSE_ROWS, 8};
    void *dict = NULL;
    if (c->codec == ZR_CODEC_ZSTD_DICT) {
        /* The dictionary is trained on records of the same stream in a
         * scratch store. */
        char *tpath = zt_path("train");
        zr_create_opts zo = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD};
        zr_store *t;
        if (c->ragged) {
            ZR_OK_CALL(zr_ragged_create(&t, tpath, "<i4", &zo));
            zt_append_ragged_gen(t, seed, 300, MAXNDIM, MAXDIM);
        } else {
            ZR_OK_CALL(zr_dense_create(&t, tpath, "<i4", shape, 2, &zo));
            zt_append_dense_gen(t, seed, 300);
        }
        size_t len;
        ZR_OK_CALL(zr_train_dict_store(t, ZR_TIER_FAST, &dict, &len));
        zr_close(t);
        zt_rmtree(tpath);
        free(tpath);
        o.dict = dict;
        o.dict_len = len;
    }
    cs.path = zt_path("store");
    zr_store *s;
    if (c->ragged) {
        ZR_OK_CALL(zr_ragged_create(&s, cs.path, "<i4", &o));
        zt_append_ragged_gen(s, seed, n, MAXNDIM, MAXDIM);
    } else {
        ZR_OK_CALL(zr_dense_create(&s, cs.path, "<i4", shape, 2, &o));
        zt_append_dense_gen(s, seed, n);
    }
    free(dict);
    cs.gen = malloc(n * sizeof *cs.gen);
    ck_assert_ptr_nonnull(cs.gen);
    for (uint64_t i = 0; i < n; i++)
        cs.gen[i] = i;
    cs.n = n;
    if (c->deletes) {
        /* Swap-last, as zr_delete documents: in descending order, each
         * hole takes the current last record. */
        uint64_t del[40];
        for (size_t k = 0; k < 40; k++)
            del[k] = (k * 37 + 5) % n;
        ZR_OK_CALL(zr_delete(s, del, 40));
        qsort(del, 40, sizeof del[0], cmp_desc);
        for (size_t k = 0; k < 40; k++) {
            if (k > 0 && del[k] == del[k - 1])
                continue;
            cs.gen[del[k]] = cs.gen[cs.n - 1];
            cs.n--;
        }
    }
    ck_assert_uint_eq(zr_len(s), cs.n);
    zr_close(s);
    cs.locs = malloc(cs.n * sizeof *cs.locs);
    cs.bounds = malloc(cs.n * sizeof *cs.bounds);
    ck_assert(cs.locs && cs.bounds);
    for (uint64_t i = 0; i < cs.n; i++) {
        uint64_t seg, entry;
        zt_loc_where(i, SEG_ENTRIES, &seg, &entry);
        cs.locs[i] = zt_loc_read(cs.path, seg, entry);
        if (i > 0 && cs.locs[i].chunk != cs.locs[i - 1].chunk)
            cs.bounds[cs.nbounds++] = i;
    }
    ck_assert_msg(cs.nbounds >= 2, "%s: only %zu chunk ends", c->name, cs.nbounds);
    return cs;
}

static void cold_store_free(struct cold_store *cs)
{
    free(cs->path);
    free(cs->gen);
    free(cs->locs);
    free(cs->bounds);
}

/* ---- batches --------------------------------------------------------- */

struct batch {
    const char *name;
    uint64_t *idx;
    size_t n;
};

static void push(struct batch *b, uint64_t i, uint64_t n)
{
    if (i < n)
        b->idx[b->n++] = i;
}

static uint64_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 33;
}

#define NBATCHES 7

/* The batches gathered cold, warm and mapped, first to last. The first
 * is a batch of one: it finds nothing cached, which shows the store cold.
 * The whole store comes last: it leaves every page cached. */
static void make_batches(const struct cold_store *cs, struct batch b[NBATCHES])
{
    uint64_t n = cs->n;
    for (int k = 0; k < NBATCHES; k++) {
        b[k].idx = malloc((n + 512) * sizeof *b[k].idx);
        ck_assert_ptr_nonnull(b[k].idx);
        b[k].n = 0;
    }
    const uint64_t *bd = cs->bounds;
    size_t nb = cs->nbounds;
    ck_assert_msg(nb >= 8, "only %zu chunk ends", nb);
    uint64_t x = cs->seed;

    /* A record from the middle of a chunk, not its start: valgrind reads
     * the first bytes of every file the library maps. */
    b[0].name = "one record from the middle of a chunk";
    uint32_t c0 = cs->locs[bd[nb / 2]].chunk;
    uint64_t mid = bd[nb / 2];
    for (uint64_t i = 0; i < n; i++)
        if (cs->locs[i].chunk == c0 &&
            llabs((long long)cs->locs[i].offset - CHUNK_CAP / 2) <
                llabs((long long)cs->locs[mid].offset - CHUNK_CAP / 2))
            mid = i;
    push(&b[0], mid, n);

    /* Each record twice or more, out of order, with both neighbours of
     * the chunk end (adjacent pieces in different files). */
    b[1].name = "repeats on both sides of chunk ends";
    for (size_t k = 0; k < nb && k < 12; k++) {
        uint64_t e = bd[k * nb / 12];
        push(&b[1], e - 1, n);
        push(&b[1], e, n);
        push(&b[1], e, n);
        push(&b[1], e - 1, n);
        push(&b[1], e + 1, n);
        push(&b[1], e, n);
    }

    /* One distinct record: everything after the first is a copy. */
    b[2].name = "one record eight times";
    for (int k = 0; k < 8; k++)
        push(&b[2], n / 2 + 3, n);

    /* Ascending runs of neighbours, which the planner merges into one
     * read up to a chunk's end, over chunk ends and table-segment ends. */
    b[3].name = "runs across chunk and segment ends";
    for (size_t k = 1; k < nb; k += nb / 6 + 1)
        for (uint64_t i = bd[k] - 3; i <= bd[k] + 3; i++)
            push(&b[3], i, n);
    for (uint64_t sgm = SEG_ENTRIES; sgm < n; sgm += 5 * SEG_ENTRIES)
        for (uint64_t i = sgm - 2; i <= sgm + 1; i++)
            push(&b[3], i, n);

    /* Random: half over the store, half inside a window of 24 records
     * around a chunk end, so that some records come several times. */
    b[4].name = "random with repeats";
    for (int k = 0; k < 400; k++) {
        if (k % 2)
            push(&b[4], lcg(&x) % n, n);
        else
            push(&b[4], bd[nb / 3] - 12 + lcg(&x) % 24, n);
    }

    b[5].name = "first and last records";
    push(&b[5], n - 1, n);
    push(&b[5], 0, n);
    push(&b[5], n - 1, n);
    push(&b[5], 1, n);

    b[6].name = "the whole store";
    for (uint64_t i = 0; i < n; i++)
        push(&b[6], i, n);
}

static void free_batches(struct batch b[NBATCHES])
{
    for (int k = 0; k < NBATCHES; k++)
        free(b[k].idx);
}

/* Gather batch b of a Dense store and compare every byte with the
 * generator; the byte after the last record must stay untouched. */
static void check_dense(zr_store *s, const struct cold_store *cs, const struct batch *b,
                        const char *pass)
{
    uint8_t *dst = malloc(b->n * DENSE_WIDTH + 1);
    uint8_t want[DENSE_WIDTH];
    ck_assert_ptr_nonnull(dst);
    memset(dst, 0xa5, b->n * DENSE_WIDTH + 1);
    ZR_OK_CALL(zr_gather_dense(s, b->idx, b->n, dst));
    ck_assert_uint_eq(dst[b->n * DENSE_WIDTH], 0xa5);
    for (size_t k = 0; k < b->n; k++) {
        zt_fill(want, "<i4", DENSE_NELEM, cs->seed, cs->gen[b->idx[k]]);
        ck_assert_msg(memcmp(dst + k * DENSE_WIDTH, want, DENSE_WIDTH) == 0,
                      "%s, batch \"%s\": record %llu (position %zu) differs", pass, b->name,
                      (unsigned long long)b->idx[k], k);
    }
    free(dst);
}

static void check_batch(zr_store *s, const struct cold_store *cs, const struct batch *b,
                        const char *pass)
{
    if (!cs->ragged) {
        check_dense(s, cs, b, pass);
        return;
    }
    /* Ragged stores here are never deleted from: record i is generated
     * record i. zt_ragged_matches checks sizes, prefixes, payloads and
     * the gaps between records. */
    int rc;
    bool ok = zt_ragged_matches(s, cs->seed, b->idx, b->n, MAXNDIM, MAXDIM, &rc);
    ck_assert_msg(rc == 0, "%s, batch \"%s\": %d %s", pass, b->name, rc, zr_last_error());
    ck_assert_msg(ok, "%s, batch \"%s\": gathered records differ from the generated ones",
                  pass, b->name);
}

/* ---- cold, warm and mapped gathers ----------------------------------- */

START_TEST(cold_warm_and_mapped_gathers_give_the_generated_bytes)
{
    if (skipped("cold_warm_and_mapped_gathers_give_the_generated_bytes"))
        return;
    const struct config *c = &configs[_i / 2];
    bool nomap = _i % 2;
    struct cold_store cs = build(c, 300 + (uint64_t)_i, c->ragged ? 3000 : 1200);
    struct batch b[NBATCHES];
    make_batches(&cs, b);
    drop_pages(cs.path);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, cs.path, ZR_RDONLY | (nomap ? ZR_NOMAP : 0)));
    ck_assert_int_eq(mode_of(s), ZR_READ_PROBE);

    /* Cold: no handle copies from its mappings before a batch has shown
     * the store in memory, so each of these is planned; the first finds
     * its record on the disk and leaves the handle planning. Without
     * cachestat (valgrind, Linux before 6.5) one batch that finds its
     * pages cached moves the handle to the mappings, so the modes are
     * checked only with it. */
    for (int k = 0; k < NBATCHES; k++) {
        ck_assert_msg(!have_cachestat || mode_of(s) != ZR_READ_MAPPED,
                      "%s: cold batch \"%s\" would be mapped", c->name, b[k].name);
        check_batch(s, &cs, &b[k], "cold");
        if (k == 0 && have_cachestat)
            ck_assert_msg(mode_of(s) == ZR_READ_PLANNED,
                          "%s: after the first cold batch the handle is %s, not planned: "
                          "its record was cached", c->name, mode_name(mode_of(s)));
    }

    /* Warm: the whole store was just read, so every batch finds its pages
     * cached, and two such batches in a row move the handle to the
     * mappings (cachestat: every file in memory). */
    for (int k = 0; k < NBATCHES; k++)
        check_batch(s, &cs, &b[k], "warm");
    ck_assert_msg(mode_of(s) == ZR_READ_MAPPED, "%s: a warm handle is %s, not mapped", c->name,
                  mode_name(mode_of(s)));

    /* Mapped: the same batches copied from the mappings (pread with
     * ZR_NOMAP). A mapped handle plans again only if its files leave
     * memory, which nothing here makes them do. */
    for (int k = 0; k < NBATCHES; k++) {
        check_batch(s, &cs, &b[k], "mapped");
        ck_assert_int_eq(mode_of(s), ZR_READ_MAPPED);
    }
    zr_close(s);
    free_batches(b);
    cold_store_free(&cs);
}
END_TEST

/* An index past the end is refused before anything is read, whatever the
 * handle's mode, and leaves the mode as it was. */
START_TEST(out_of_range_indices_are_refused_cold_and_mapped)
{
    if (skipped("out_of_range_indices_are_refused_cold_and_mapped"))
        return;
    const struct config *c = &configs[(const int[]){0, 2, 4, 5}[_i]];
    struct cold_store cs = build(c, 400 + (uint64_t)_i, c->ragged ? 600 : 300);
    drop_pages(cs.path);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, cs.path, ZR_RDONLY));
    uint64_t bad[] = {0, 5, cs.n, 5};
    uint64_t sizes[4], all[1] = {cs.n - 1};
    uint8_t out[4 * DENSE_WIDTH];
    uint64_t offs[4] = {0, 8192, 16384, 24576};
    uint8_t *rbuf = malloc(4 * 8192);
    ck_assert_ptr_nonnull(rbuf);
    for (int pass = 0; pass < 2; pass++) {
        int before = mode_of(s);
        if (c->ragged) {
            ZR_FAIL_CALL(zr_ragged_sizes(s, bad, 4, sizes), ZR_ERANGE);
            ZR_FAIL_CALL(zr_gather_ragged(s, bad, 4, rbuf, offs), ZR_ERANGE);
        } else {
            ZR_FAIL_CALL(zr_gather_dense(s, bad, 4, out), ZR_ERANGE);
        }
        ck_assert_ptr_nonnull(strstr(zr_last_error(), "position 2"));
        ck_assert_int_eq(mode_of(s), before);
        if (pass == 0) {
            /* Into the mappings: every page cached, then a good batch. */
            ck_assert_int_eq(before, ZR_READ_PROBE);
            warm_files(cs.path);
            if (c->ragged)
                ZR_OK_CALL(zr_ragged_sizes(s, all, 1, sizes));
            for (int k = 0; k < 4 && mode_of(s) != ZR_READ_MAPPED; k++) {
                if (c->ragged)
                    ZR_OK_CALL(zr_gather_ragged(s, all, 1, rbuf, offs));
                else
                    ZR_OK_CALL(zr_gather_dense(s, all, 1, out));
            }
            ck_assert_int_eq(mode_of(s), ZR_READ_MAPPED);
        }
    }
    free(rbuf);
    zr_close(s);
    cold_store_free(&cs);
}
END_TEST

/* ---- damaged stores -------------------------------------------------- */

/* The stored size of Ragged record i of the stream, from the generator:
 * the shape prefix and the payload. */
static uint64_t gen_size(uint64_t seed, uint64_t i)
{
    uint64_t shape[ZR_MAX_NDIM];
    uint32_t ndim = zt_shape(seed, i, MAXNDIM, MAXDIM, shape);
    uint64_t nelem = 1;
    for (uint32_t d = 0; d < ndim; d++)
        nelem *= shape[d];
    return 8 * (1 + (uint64_t)ndim) + 4 * nelem;
}

/* What a gather of idx[0..n) gives: its code, and its message in msg
 * (Ragged: zr_ragged_sizes's, then zr_gather_ragged's with the sizes the
 * generator gives, which a caller may know without asking the store). */
static int try_gather(zr_store *s, const struct cold_store *cs, const uint64_t *idx, size_t n,
                      char msg[2][512])
{
    msg[0][0] = msg[1][0] = 0;
    if (!cs->ragged) {
        uint8_t *dst = malloc(n * DENSE_WIDTH);
        ck_assert_ptr_nonnull(dst);
        int rc = zr_gather_dense(s, idx, n, dst);
        snprintf(msg[0], 512, "%s", zr_last_error());
        free(dst);
        return rc;
    }
    uint64_t *sizes = malloc(n * sizeof *sizes), *offs = malloc(n * sizeof *offs), total = 0;
    ck_assert(sizes && offs);
    int rc1 = zr_ragged_sizes(s, idx, n, sizes);
    snprintf(msg[0], 512, "%s", zr_last_error());
    for (size_t k = 0; k < n; k++) {
        offs[k] = total;
        total += (gen_size(cs->seed, idx[k]) + 7) / 8 * 8;
    }
    uint8_t *dst = malloc(total);
    ck_assert_ptr_nonnull(dst);
    int rc2 = zr_gather_ragged(s, idx, n, dst, offs);
    snprintf(msg[1], 512, "%s", zr_last_error());
    free(dst);
    free(sizes);
    free(offs);
    /* The entries are sound where the chunk was cut: only the gather
     * fails; a damaged entry fails both calls. */
    return rc2 != 0 ? rc2 : rc1;
}

/* Four configurations of the damage tests: each kind, raw and zstd. */
static const int damage_configs[] = {0, 2, 4, 5};

/* An entry that points past its chunk's end (variant 0) or at a chunk
 * that does not exist (variant 1) is found by the planner, which reads
 * the entry itself, as by the mapped path: ZR_ECORRUPT, the same message. */
START_TEST(damaged_entry_is_corrupt_planned_as_mapped)
{
    if (skipped("damaged_entry_is_corrupt_planned_as_mapped"))
        return;
    const struct config *c = &configs[damage_configs[_i / 2]];
    int variant = _i % 2;
    struct cold_store cs = build(c, 500 + (uint64_t)_i, c->ragged ? 600 : 300);
    uint64_t r = cs.n / 2;
    zt_loc l = cs.locs[r];
    if (variant == 0) {
        char name[32];
        snprintf(name, sizeof name, "%u.chunk", l.chunk);
        char *chunk = zt_join(cs.path, name);
        l.offset = (uint32_t)zt_file_size(chunk) - l.phys / 2;
        free(chunk);
    } else {
        l.chunk = 0;
        for (uint64_t i = 0; i < cs.n; i++)
            l.chunk = cs.locs[i].chunk >= l.chunk ? cs.locs[i].chunk + 1 : l.chunk;
    }
    uint64_t seg, entry;
    zt_loc_where(r, SEG_ENTRIES, &seg, &entry);
    zt_loc_write(cs.path, seg, entry, l);
    drop_pages(cs.path);

    zr_store *s;
    ZR_OK_CALL(zr_open(&s, cs.path, ZR_RDONLY));
    uint64_t batch[] = {r + 1, r - 1, r, r, r + 2};
    char planned[2][512], mapped[2][512];
    ck_assert_int_eq(mode_of(s), ZR_READ_PROBE);
    ck_assert_int_eq(try_gather(s, &cs, batch, 5, planned), ZR_ECORRUPT);
    /* A failed batch does not move the handle. */
    ck_assert_int_eq(mode_of(s), ZR_READ_PROBE);

    /* Into the mappings: every page cached, then a batch without r. */
    warm_files(cs.path);
    uint64_t good[] = {r - 1, r + 1};
    char ok[2][512];
    for (int k = 0; k < 4 && mode_of(s) != ZR_READ_MAPPED; k++)
        ck_assert_int_eq(try_gather(s, &cs, good, 2, ok), 0);
    ck_assert_int_eq(mode_of(s), ZR_READ_MAPPED);
    ck_assert_int_eq(try_gather(s, &cs, batch, 5, mapped), ZR_ECORRUPT);
    ck_assert_int_eq(mode_of(s), ZR_READ_MAPPED);

    char want[64];
    snprintf(want, sizeof want, "(record %llu)", (unsigned long long)r);
    for (int m = 0; m < (c->ragged ? 2 : 1); m++) {
        ck_assert_msg(strstr(planned[m], want), "planned: %s", planned[m]);
        ck_assert_str_eq(planned[m], mapped[m]);
    }
    zr_close(s);
    cold_store_free(&cs);
}
END_TEST

/* A chunk cut short after the handle opened: a planned read meets the
 * file's end, and the gather says ZR_ECORRUPT for the record whose bytes
 * are missing, as the pread path of a ZR_NOMAP handle does (a copy from
 * the mapping would die of SIGBUS, which is why the comparison is with
 * pread). Variant 0 cuts the middle of record r, gathered with the two
 * records before it in the file, which the planner merges into one read whose kernel read
 * comes back short and whose rest, read with preadv, finds the end: the
 * error must name r, not the run's first record. Variant 1 cuts at the
 * start of r and gathers r alone. */
START_TEST(chunk_cut_short_is_corrupt_planned_as_with_pread)
{
    if (skipped("chunk_cut_short_is_corrupt_planned_as_with_pread"))
        return;
    const struct config *c = &configs[damage_configs[_i / 2]];
    int variant = _i % 2;
    struct cold_store cs = build(c, 600 + (uint64_t)_i, c->ragged ? 600 : 300);
    /* r: the fourth record by offset in the chunk of the middle record,
     * and the two records before it in the file (q[1], q[2]). Records are
     * placed by the append's threads, so neighbours in the file need not
     * be neighbours by index (zstd stores interleave two threads' records). */
    uint32_t c0 = cs.locs[cs.n / 2].chunk;
    uint64_t q[4] = {UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX};
    for (int k = 0; k < 4; k++)
        for (uint64_t i = 0; i < cs.n; i++)
            if (cs.locs[i].chunk == c0 && (k == 0 || cs.locs[i].offset > cs.locs[q[k - 1]].offset) &&
                (q[k] == UINT64_MAX || cs.locs[i].offset < cs.locs[q[k]].offset))
                q[k] = i;
    ck_assert_uint_ne(q[3], UINT64_MAX);
    for (int k = 1; k < 3; k++)
        ck_assert_uint_eq(cs.locs[q[k]].offset + cs.locs[q[k]].phys, cs.locs[q[k + 1]].offset);
    uint64_t r = q[3];
    zt_loc l = cs.locs[r];
    uint64_t cut = l.offset + (variant == 0 ? l.phys / 2 : 0);
    char name[32];
    snprintf(name, sizeof name, "%u.chunk", l.chunk);
    char *chunk = zt_join(cs.path, name);

    zr_store *planned_h, *pread_h;
    ZR_OK_CALL(zr_open(&planned_h, cs.path, ZR_RDONLY));
    zr_testing_set_nomap_mapped(1); /* every record by pread */
    ZR_OK_CALL(zr_open(&pread_h, cs.path, ZR_RDONLY | ZR_NOMAP));
    /* The store is cached as written: a batch of it moves the NOMAP
     * handle to its pread path. */
    struct batch all = {.name = "the whole store", .n = cs.n};
    all.idx = malloc(cs.n * sizeof *all.idx);
    ck_assert_ptr_nonnull(all.idx);
    for (uint64_t i = 0; i < cs.n; i++)
        all.idx[i] = i;
    for (int k = 0; k < 4 && mode_of(pread_h) != ZR_READ_MAPPED; k++)
        check_batch(pread_h, &cs, &all, "warming");
    ck_assert_int_eq(mode_of(pread_h), ZR_READ_MAPPED);
    free(all.idx);

    ck_assert_int_eq(truncate(chunk, (off_t)cut), 0);
    /* r is the only record of the batch with bytes missing, so that both
     * paths name it whatever order their threads meet the end in. */
    uint64_t run[] = {q[1], r, q[2]};
    uint64_t *batch = variant == 0 ? run : &r;
    size_t n = variant == 0 ? 3 : 1;
    char by_pread[2][512], by_plan[2][512];
    ck_assert_int_eq(try_gather(pread_h, &cs, batch, n, by_pread), ZR_ECORRUPT);
    ck_assert_int_eq(mode_of(pread_h), ZR_READ_MAPPED);
    zr_close(pread_h);
    zr_testing_set_nomap_mapped(0);

    drop_pages(cs.path);
    ck_assert_int_eq(mode_of(planned_h), ZR_READ_PROBE);
    ck_assert_int_eq(try_gather(planned_h, &cs, batch, n, by_plan), ZR_ECORRUPT);
    ck_assert_int_ne(mode_of(planned_h), ZR_READ_MAPPED);

    char want[64];
    snprintf(want, sizeof want, "(record %llu)", (unsigned long long)r);
    int m = c->ragged ? 1 : 0; /* the sizes come from sound entries */
    ck_assert_msg(strstr(by_plan[m], want), "planned: %s", by_plan[m]);
    ck_assert_str_eq(by_plan[m], by_pread[m]);
    zr_close(planned_h);
    free(chunk);
    cold_store_free(&cs);
}
END_TEST

/* A record-table segment cut short after the handle opened: the planner,
 * which reads entries with the file's descriptor, meets its end and says
 * ZR_ECORRUPT for the record whose entry is missing. (The mapped path
 * reads entries from the mapping, so it has no such case to compare
 * with: it would die of SIGBUS.) */
START_TEST(record_table_cut_short_is_corrupt_when_planned)
{
    if (skipped("record_table_cut_short_is_corrupt_when_planned"))
        return;
    const struct config *c = &configs[_i == 0 ? 2 : 4]; /* entries always read */
    struct cold_store cs = build(c, 700 + (uint64_t)_i, c->ragged ? 600 : 300);
    uint64_t r = (cs.n / 2) / SEG_ENTRIES * SEG_ENTRIES + SEG_ENTRIES / 2 + 1;
    uint64_t seg, entry;
    zt_loc_where(r, SEG_ENTRIES, &seg, &entry);
    char name[32];
    snprintf(name, sizeof name, "%llu.loc", (unsigned long long)seg);
    char *loc = zt_join(cs.path, name);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, cs.path, ZR_RDONLY));
    ck_assert_int_eq(truncate(loc, (off_t)(SEG_ENTRIES / 2 * 16)), 0);
    drop_pages(cs.path);
    uint64_t batch[] = {r - SEG_ENTRIES / 2 - 1, r, r - 3};
    char msg[2][512];
    ck_assert_int_eq(try_gather(s, &cs, batch, 3, msg), ZR_ECORRUPT);
    char want[64];
    snprintf(want, sizeof want, "(record %llu)", (unsigned long long)r);
    ck_assert_msg(strstr(msg[0], want), "planned: %s", msg[0]);
    zr_close(s);
    free(loc);
    cold_store_free(&cs);
}
END_TEST

/* ---- reads around the page cache ------------------------------------- */

/* Pages of file `name` of dir in the page cache (-1: cannot tell), and in
 * *total the pages it has. */
static int64_t file_pages(const char *dir, const char *name, int64_t *total)
{
    char *p = zt_join(dir, name);
    int fd = open(p, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    *total = (int64_t)((zt_file_size(p) + 4095) / 4096);
    uint64_t dirty, wb;
    int64_t n = cached_pages(fd, &dirty, &wb);
    close(fd);
    free(p);
    return n;
}

/* Whether files of dir can be opened with O_DIRECT (not on tmpfs). */
static bool folder_takes_odirect(const char *dir)
{
    char *p = zt_join(dir, "0.chunk");
    int fd = open(p, O_RDONLY | O_DIRECT);
    free(p);
    if (fd >= 0)
        close(fd);
    return fd >= 0;
}

/* A store many times the memory reads its runs of 64 KiB or more with
 * O_DIRECT (lib/plan.c); zr_testing_set_direct(1) has every store do so.
 * Chunks of 600,000 bytes here, so that neighbours make such runs; single
 * records stay buffered. Every batch must give the generator's bytes;
 * the batch of the whole store, read so, must leave chunk 0's pages out
 * of the page cache (all but its last run's, which may be short), where
 * the same batch read buffered brings them in; and a chunk cut short must
 * be ZR_ECORRUPT, found when the short direct read is made again
 * buffered. */
START_TEST(direct_reads_give_the_generated_bytes)
{
    if (skipped("direct_reads_give_the_generated_bytes"))
        return;
    const struct config *c = &configs[damage_configs[_i]];
    build_cap = 600000;
    struct cold_store cs = build(c, 700 + (uint64_t)_i, c->ragged ? 12000 : 3000);
    struct batch b[NBATCHES];
    make_batches(&cs, b);
    /* The planner merges at most 256 neighbours a read: the page check
     * needs chunk 0's reads to be long enough to go direct (not so for
     * small compressed records). */
    uint64_t bytes0 = 0, count0 = 0;
    for (uint64_t i = 0; i < cs.n; i++)
        if (cs.locs[i].chunk == 0) {
            bytes0 += cs.locs[i].phys;
            count0++;
        }
    bool long_runs = bytes0 / ((count0 + 255) / 256) >= (128u << 10);
    bool odirect = folder_takes_odirect(cs.path);
    bool check_pages = have_cachestat && long_runs && odirect;
    for (int direct = 1; direct >= 0; direct--) {
        zr_testing_set_direct(direct);
        drop_pages(cs.path);
        zr_store *s;
        ZR_OK_CALL(zr_open(&s, cs.path, ZR_RDONLY));
        uint64_t before = zr_testing_direct_reads();
        check_batch(s, &cs, &b[NBATCHES - 1], direct ? "direct" : "buffered");
        uint64_t made = zr_testing_direct_reads() - before;
        zr_close(s);
        if (odirect && direct && long_runs)
            ck_assert_msg(made > 0, "%s: no read of the whole store was direct", c->name);
        else if (!direct)
            ck_assert_uint_eq(made, 0);
        int64_t total, in = file_pages(cs.path, "0.chunk", &total);
        if (check_pages && direct)
            ck_assert_msg(in <= total / 4, "%s: %lld of %lld pages of 0.chunk cached after "
                          "direct reads", c->name, (long long)in, (long long)total);
        else if (check_pages)
            ck_assert_msg(in >= total * 3 / 4, "%s: %lld of %lld pages of 0.chunk cached "
                          "after buffered reads", c->name, (long long)in, (long long)total);
    }

    zr_testing_set_direct(1);
    drop_pages(cs.path);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, cs.path, ZR_RDONLY));
    for (int k = 0; k < NBATCHES; k++)
        check_batch(s, &cs, &b[k], "direct");
    zr_close(s);

    /* Cut after the open, which checks entries against the files' sizes. */
    char *chunk = zt_join(cs.path, "1.chunk");
    drop_pages(cs.path);
    ZR_OK_CALL(zr_open(&s, cs.path, ZR_RDONLY));
    ck_assert_int_eq(truncate(chunk, (off_t)(zt_file_size(chunk) / 2)), 0);
    char msg[2][512];
    ck_assert_int_eq(try_gather(s, &cs, b[NBATCHES - 1].idx, b[NBATCHES - 1].n, msg),
                     ZR_ECORRUPT);
    ck_assert_msg(strstr(msg[cs.ragged], "the chunk ends before the record"), "%s",
                  msg[cs.ragged]);
    zr_close(s);
    free(chunk);
    free_batches(b);
    cold_store_free(&cs);
}
END_TEST

/* Where io_uring is refused (Docker's default seccomp profile refuses
 * it, as this test does), the planner reads with preadv, each read tried
 * first without waiting so that a batch still tells what was cached: a
 * store wholly in memory moves to its mappings. Needs Check's fork mode:
 * the filter stays on the process. */
START_TEST(warm_store_goes_mapped_where_io_uring_is_refused)
{
    const char *fork_mode = getenv("CK_FORK");
    if (skipped("warm_store_goes_mapped_where_io_uring_is_refused") ||
        (fork_mode && strcmp(fork_mode, "no") == 0))
        return;
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    ck_assert_int_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
    ck_assert_int_eq(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
                             &prog), 0);
    struct cold_store cs = build(&configs[0], 800, 300);
    warm_files(cs.path);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, cs.path, ZR_RDONLY));
    for (int k = 0; k < 8 && mode_of(s) != ZR_READ_MAPPED; k++)
        zt_check_dense_all(s, 800);
    ck_assert_msg(mode_of(s) == ZR_READ_MAPPED,
                  "a store wholly in the page cache is still read %s after 8 batches",
                  mode_name(mode_of(s)));
    zr_close(s);
    cold_store_free(&cs);
}
END_TEST

/* Pages in the page cache of the files 0<ext>, 1<ext>, ... of dir (".loc":
 * the record table, ".chunk": the records), or -1 where the kernel
 * cannot tell. */
static int64_t files_pages(const char *dir, const char *ext)
{
    int64_t sum = 0;
    for (unsigned g = 0;; g++) {
        char name[32];
        snprintf(name, sizeof name, "%u%s", g, ext);
        char *p = zt_join(dir, name);
        bool there = access(p, F_OK) == 0;
        free(p);
        if (!there)
            return sum;
        int64_t total, n = file_pages(dir, name, &total);
        if (n < 0)
            return -1;
        sum += n;
    }
}

/* Read every chunk file of dir, so that the records' bytes are cached
 * and the record table is not. */
static void warm_chunks(const char *dir)
{
    char buf[65536];
    for (unsigned k = 0;; k++) {
        char name[32];
        snprintf(name, sizeof name, "%u.chunk", k);
        char *p = zt_join(dir, name);
        int fd = open(p, O_RDONLY);
        free(p);
        if (fd < 0)
            return;
        while (read(fd, buf, sizeof buf) > 0)
            ;
        close(fd);
    }
}

/* zr_records_cached answers at once: a record whose table entry is not
 * in the page cache is not cached, and asking reads nothing (zrecordfs
 * asks on its one-thread loop before it hands a cold request to a
 * thread). Once the files are read back, the same record is cached. */
static const int asked_configs[] = {0, 2, 4, 5};

START_TEST(records_cached_reads_no_table)
{
    if (skipped("records_cached_reads_no_table") || !have_cachestat)
        return;
    const struct config *c = &configs[asked_configs[_i]];
    struct cold_store cs = build(c, 900 + (uint64_t)_i, c->ragged ? 600 : 300);
    drop_pages(cs.path);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, cs.path, ZR_RDONLY));
    uint64_t idx[] = {cs.n / 2, 3, cs.n - 1};
    for (size_t k = 0; k < 3; k++) {
        ck_assert_int_eq(zr_records_cached(s, &idx[k], 1), 0);
        ck_assert_msg(files_pages(cs.path, ".loc") == 0, "%s: asking about record %llu read the table",
                      c->name, (unsigned long long)idx[k]);
    }
    /* The records' bytes cached and their entries not: still not cached
     * (where reading the entry found them so), and still nothing read. */
    warm_chunks(cs.path);
    for (size_t k = 0; k < 3; k++)
        ck_assert_int_eq(zr_records_cached(s, &idx[k], 1), 0);
    ck_assert_msg(files_pages(cs.path, ".loc") == 0, "%s: asking read the table", c->name);
    warm_files(cs.path);
    ck_assert_int_eq(zr_records_cached(s, idx, 3), 1);
    zr_close(s);
    cold_store_free(&cs);
}
END_TEST

/* zr_record_span and zr_record_extent of a Ragged record whose pages are
 * not cached check its shape prefix from a read of the prefix alone: a
 * fault on the chunk's mapping read read_ahead_kb around it (128 KiB by
 * default, megabytes on some machines) for a caller that may want no
 * byte of the record yet (zrecordfs asks for a record file's size). The
 * span and the extent still give the generated record. */
START_TEST(span_of_a_cold_ragged_record_reads_its_prefix_alone)
{
    if (skipped("span_of_a_cold_ragged_record_reads_its_prefix_alone") || !have_cachestat)
        return;
    build_cap = 1u << 20; /* chunks far larger than a read-around */
    const struct config *c = &configs[4];
    ck_assert(c->ragged && c->codec == ZR_CODEC_RAW);
    struct cold_store cs = build(c, 960, 8000);
    drop_pages(cs.path);
    zr_store *s;
    ZR_OK_CALL(zr_open(&s, cs.path, ZR_RDONLY));
    const uint64_t idx[] = {cs.n / 2, cs.n / 3 + 1, cs.n - 7};
    for (size_t k = 0; k < 3; k++) {
        int64_t before = files_pages(cs.path, ".chunk");
        ck_assert_int_ge(before, 0);
        const void *p;
        uint64_t size, at, n;
        int fd;
        ZR_OK_CALL(zr_record_span(s, idx[k], &p, &size));
        ZR_OK_CALL(zr_record_extent(s, idx[k], &fd, &at, &n));
        int64_t read = files_pages(cs.path, ".chunk") - before;
        ck_assert_msg(read <= 2, "record %llu: %lld chunk pages read for its prefix",
                      (unsigned long long)idx[k], (long long)read);
        ck_assert_uint_eq(n, size);
        uint8_t *buf = malloc(n);
        ck_assert_ptr_nonnull(buf);
        ck_assert_int_eq(pread(fd, buf, n, (off_t)at), (ssize_t)n);
        zt_ragged *g = zt_ragged_gen("<i4", cs.seed, cs.gen[idx[k]], 1, MAXNDIM, MAXDIM);
        uint32_t nd = g->recs[0].ndim;
        ck_assert_uint_eq(n, 8 * (1 + (uint64_t)nd) + g->nbytes[0]);
        uint64_t word;
        memcpy(&word, buf, 8);
        ck_assert_uint_eq(word, nd);
        for (uint32_t d = 0; d < nd; d++) {
            memcpy(&word, buf + 8 + 8 * d, 8);
            ck_assert_uint_eq(word, g->shapes[0][d]);
        }
        ck_assert(memcmp(buf + 8 * (1 + nd), g->data[0], g->nbytes[0]) == 0);
        ck_assert(memcmp(p, buf, n) == 0);
        zt_ragged_free(g);
        free(buf);
    }
    zr_close(s);
    cold_store_free(&cs);
}
END_TEST

Suite *suite_cold(void)
{
    Suite *s = suite_create("cold");
    TCase *tc = tcase_create("cold");
    tcase_add_checked_fixture(tc, cold_setup, cold_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, cold_warm_and_mapped_gathers_give_the_generated_bytes, 0,
                        2 * NCONFIGS);
    tcase_add_loop_test(tc, out_of_range_indices_are_refused_cold_and_mapped, 0, 4);
    tcase_add_loop_test(tc, damaged_entry_is_corrupt_planned_as_mapped, 0, 8);
    tcase_add_loop_test(tc, chunk_cut_short_is_corrupt_planned_as_with_pread, 0, 8);
    tcase_add_loop_test(tc, record_table_cut_short_is_corrupt_when_planned, 0, 2);
    tcase_add_test(tc, warm_store_goes_mapped_where_io_uring_is_refused);
    tcase_add_loop_test(tc, direct_reads_give_the_generated_bytes, 0, 4);
    tcase_add_loop_test(tc, records_cached_reads_no_table, 0, 4);
    tcase_add_test(tc, span_of_a_cold_ragged_record_reads_its_prefix_alone);
    suite_add_tcase(s, tc);
    return s;
}

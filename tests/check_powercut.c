/*
 * check_powercut.c: power cuts at every point of a workload. The zr_io
 * table is wrapped to record every write, truncation, sync, creation,
 * unlink and rename of a workload of appends, syncs, deletes and a
 * compaction, with the data written. For every point of that record two
 * disk states a power cut could leave are built in a fresh folder:
 *  - only what a completed fsync covers survives (a write or truncation
 *    needs a later sync of its file, a creation, unlink or rename a later
 *    sync of the folder), and
 *  - everything before the point reached the disk,
 * each with the write at the cut point torn at a 512-byte boundary. The
 * store in each state must open, pass zr_verify, and hold exactly one of
 * the states its API calls went through since the last completed zr_sync,
 * delete or compaction (those are durable), or the state after the call
 * in progress: so nothing durable is lost, what is kept is a valid prefix
 * of the appends, and a torn record is never returned as valid.
 *
 * Two more states model a disk that writes an unsynced append's header
 * ahead of its records: the synced writes plus every write of meta.zr
 * and the loc segments, and the synced writes plus every write of meta.zr
 * alone. There an append may be cut inside its batch, so the store must
 * open, verify, and hold a prefix of one of those states at least as long
 * as the last durable one, every record gathered intact.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include "engine.h"
#include "io.h"
#include "tests/faults.h"
#include "tests/helpers.h"
#include "tests/idrecords.h"
#include "tests/model.h"
#include "tests/records.h"
#include "tests/suites.h"

#define MAXREC 300
#define SECTOR 512

enum kind { W_WRITE, W_TRUNC, W_SYNC, W_CREATE, W_UNLINK, W_RENAME };

struct op {
    enum kind kind;
    char name[64], name2[64];
    uint64_t off; /* W_WRITE: offset; W_TRUNC: length */
    uint8_t *data;
    size_t len;
};

struct mark {
    size_t at; /* operations done when the call returned */
    zt_model m;
    int durable;
};

struct file {
    char name[64];
    uint8_t *data;
    size_t len;
};

static struct op *ops;
static size_t nops, capops;
static struct mark marks[32];
static size_t nmarks;
static char *fdname[4096];
static char root[PATH_MAX];
static struct file snap[64];
static size_t nsnap;
static char *dir, *path;

/* The library writes from its pool threads: the record and the names of
 * the descriptors are changed under this lock only. */
static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;

/* A new operation at the end of the record; called with rec_lock held. */
static struct op *new_op(enum kind k, const char *name)
{
    if (nops == capops) {
        capops = capops * 2 + 64;
        ops = realloc(ops, capops * sizeof *ops);
        ck_assert_ptr_nonnull(ops);
    }
    struct op *o = &ops[nops++];
    memset(o, 0, sizeof *o);
    o->kind = k;
    snprintf(o->name, sizeof o->name, "%s", name);
    return o;
}

/* The name of fd inside the store folder ("." for the folder itself);
 * called with rec_lock held. */
static const char *name_of(int fd)
{
    return fd >= 0 && fd < 4096 && fdname[fd] ? fdname[fd] : "?";
}

static int r_openat(int dirfd, const char *p, int flags, mode_t mode)
{
    struct stat st;
    int existed = !(flags & O_CREAT) || fstatat(dirfd, p, &st, 0) == 0;
    int fd = zr_io_default.openat(dirfd, p, flags, mode);
    if (fd < 0 || fd >= 4096)
        return fd;
    char link[64], abs[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, abs, sizeof abs - 1);
    abs[n > 0 ? n : 0] = '\0';
    size_t rl = strlen(root);
    const char *rel = strcmp(abs, root) == 0 ? "."
                      : strncmp(abs, root, rl) == 0 && abs[rl] == '/' ? abs + rl + 1
                                                                     : "?";
    pthread_mutex_lock(&rec_lock);
    free(fdname[fd]);
    fdname[fd] = strdup(rel);
    if (!existed)
        new_op(W_CREATE, rel);
    if (flags & O_TRUNC)
        new_op(W_TRUNC, rel)->off = 0;
    pthread_mutex_unlock(&rec_lock);
    return fd;
}

static int r_close(int fd)
{
    if (fd >= 0 && fd < 4096) {
        pthread_mutex_lock(&rec_lock);
        free(fdname[fd]);
        fdname[fd] = NULL;
        pthread_mutex_unlock(&rec_lock);
    }
    return zr_io_default.close(fd);
}

static void log_write(int fd, const struct iovec *iov, int cnt, off_t off, size_t total)
{
    pthread_mutex_lock(&rec_lock);
    struct op *o = new_op(W_WRITE, name_of(fd));
    o->off = (uint64_t)off;
    o->len = total;
    o->data = malloc(total ? total : 1);
    ck_assert_ptr_nonnull(o->data);
    size_t at = 0;
    for (int i = 0; i < cnt && at < total; i++) {
        size_t n = iov[i].iov_len < total - at ? iov[i].iov_len : total - at;
        memcpy(o->data + at, iov[i].iov_base, n);
        at += n;
    }
    pthread_mutex_unlock(&rec_lock);
}

static ssize_t r_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    ssize_t r = zr_io_default.pwrite(fd, buf, n, off);
    if (r > 0) {
        struct iovec v = {.iov_base = (void *)buf, .iov_len = (size_t)r};
        log_write(fd, &v, 1, off, (size_t)r);
    }
    return r;
}

static ssize_t r_pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    ssize_t r = zr_io_default.pwritev(fd, iov, cnt, off);
    if (r > 0)
        log_write(fd, iov, cnt, off, (size_t)r);
    return r;
}

/* Syncs are recorded, not made: the disk states are built from the record. */
static int r_sync(int fd)
{
    pthread_mutex_lock(&rec_lock);
    new_op(W_SYNC, name_of(fd));
    pthread_mutex_unlock(&rec_lock);
    return 0;
}

static int r_ftruncate(int fd, off_t len)
{
    int r = zr_io_default.ftruncate(fd, len);
    if (r == 0) {
        pthread_mutex_lock(&rec_lock);
        new_op(W_TRUNC, name_of(fd))->off = (uint64_t)len;
        pthread_mutex_unlock(&rec_lock);
    }
    return r;
}

static int r_unlinkat(int d, const char *p, int f)
{
    int r = zr_io_default.unlinkat(d, p, f);
    if (r == 0) {
        pthread_mutex_lock(&rec_lock);
        new_op(W_UNLINK, p);
        pthread_mutex_unlock(&rec_lock);
    }
    return r;
}

static int r_renameat(int a, const char *b, int c, const char *d)
{
    int r = zr_io_default.renameat(a, b, c, d);
    if (r == 0) {
        pthread_mutex_lock(&rec_lock);
        snprintf(new_op(W_RENAME, b)->name2, 64, "%s", d);
        pthread_mutex_unlock(&rec_lock);
    }
    return r;
}

static void record_start(void)
{
    zr_io.openat = r_openat;
    zr_io.close = r_close;
    zr_io.pwrite = r_pwrite;
    zr_io.pwritev = r_pwritev;
    zr_io.fdatasync = r_sync;
    zr_io.fsync = r_sync;
    zr_io.ftruncate = r_ftruncate;
    zr_io.unlinkat = r_unlinkat;
    zr_io.renameat = r_renameat;
}

static void mark(const zt_model *m, int durable)
{
    ck_assert_uint_lt(nmarks, 32);
    struct mark *k = &marks[nmarks++];
    k->at = nops;
    k->m = (zt_model){0};
    zt_model_copy(&k->m, m);
    k->durable = durable;
}

static uint8_t *read_all(const char *p, size_t *len)
{
    FILE *f = fopen(p, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void take_snapshot(void)
{
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        ck_assert_uint_lt(nsnap, 64);
        struct file *f = &snap[nsnap++];
        snprintf(f->name, sizeof f->name, "%.63s", e->d_name);
        char *p = zt_join(path, e->d_name);
        f->data = read_all(p, &f->len);
        free(p);
    }
    closedir(d);
}

/* A folder's worth of files being rebuilt. */
struct disk {
    struct file f[64];
    size_t n;
};

static struct file *find(struct disk *d, const char *name)
{
    for (size_t i = 0; i < d->n; i++)
        if (strcmp(d->f[i].name, name) == 0)
            return &d->f[i];
    return NULL;
}

static void resize(struct file *f, size_t len)
{
    if (len > f->len) {
        f->data = realloc(f->data, len);
        ck_assert_ptr_nonnull(f->data);
        memset(f->data + f->len, 0, len - f->len);
    }
    f->len = len;
}

static void remove_file(struct disk *d, struct file *f)
{
    free(f->data);
    *f = d->f[--d->n];
}

/* Apply op o, of which only the first len bytes when it is a write. */
static void apply(struct disk *d, const struct op *o, size_t len)
{
    struct file *f = find(d, o->name);
    switch (o->kind) {
    case W_WRITE:
        if (f) {
            if (o->off + len > f->len)
                resize(f, (size_t)o->off + len);
            memcpy(f->data + o->off, o->data, len);
        }
        break;
    case W_TRUNC:
        if (f)
            resize(f, (size_t)o->off);
        break;
    case W_CREATE:
        if (!f) {
            ck_assert_uint_lt(d->n, 64);
            f = &d->f[d->n++];
            *f = (struct file){0};
            snprintf(f->name, sizeof f->name, "%s", o->name);
        }
        break;
    case W_UNLINK:
        if (f)
            remove_file(d, f);
        break;
    case W_RENAME:
        if (f) {
            struct file *g = find(d, o->name2);
            if (g) {
                remove_file(d, g);
                f = find(d, o->name);
            }
            snprintf(f->name, sizeof f->name, "%s", o->name2);
        }
        break;
    case W_SYNC:
        break;
    }
}

/* Whether op i, done before the cut at p, is covered by a completed sync. */
static int covered(size_t i, size_t p)
{
    const char *need = ops[i].kind == W_WRITE || ops[i].kind == W_TRUNC ? ops[i].name : ".";
    if (ops[i].kind == W_SYNC)
        return 1;
    for (size_t j = i + 1; j < p; j++)
        if (ops[j].kind == W_SYNC && strcmp(ops[j].name, need) == 0)
            return 1;
    return 0;
}

enum cut { CUT_ALL, CUT_SYNCED, CUT_HEADER, CUT_META };
static const char *const cut_names[] = {"all writes", "synced writes only",
                                        "synced writes and every table and header write",
                                        "synced writes and every header write"};

/* The store a cut at p leaves, into folder out: CUT_ALL keeps every write
 * before p, CUT_SYNCED only those a completed sync covers, CUT_HEADER adds
 * to those the writes of meta.zr and the loc segments, as if the disk had
 * written the table and header of an unsynced append before its records,
 * and CUT_META only the writes of meta.zr. */
static void build(size_t p, enum cut how, const char *out)
{
    struct disk d = {0};
    for (size_t i = 0; i < nsnap; i++) {
        d.f[d.n] = snap[i];
        d.f[d.n].data = malloc(snap[i].len + 1);
        memcpy(d.f[d.n].data, snap[i].data, snap[i].len);
        d.n++;
    }
    for (size_t i = 0; i < p; i++)
        if (how == CUT_ALL || covered(i, p) ||
            (how == CUT_HEADER && ops[i].kind == W_WRITE &&
             (strcmp(ops[i].name, ZR_META_FILE) == 0 || strstr(ops[i].name, ".loc"))) ||
            (how == CUT_META && ops[i].kind == W_WRITE && strcmp(ops[i].name, ZR_META_FILE) == 0))
            apply(&d, &ops[i], ops[i].len);
    if (p < nops && ops[p].kind == W_WRITE) {
        /* The write at the cut reaches the disk up to a sector boundary. */
        uint64_t mid = (ops[p].off + ops[p].len / 2) / SECTOR * SECTOR;
        if (mid > ops[p].off)
            apply(&d, &ops[p], (size_t)(mid - ops[p].off));
    }
    ck_assert_int_eq(mkdir(out, 0755), 0);
    for (size_t i = 0; i < d.n; i++) {
        char *fp = zt_join(out, d.f[i].name);
        FILE *f = fopen(fp, "wb");
        ck_assert_ptr_nonnull(f);
        if (d.f[i].len > 0) /* a file just created has no buffer yet */
            ck_assert_uint_eq(fwrite(d.f[i].data, 1, d.f[i].len, f), d.f[i].len);
        fclose(f);
        free(fp);
        free(d.f[i].data);
    }
}

/* Whether the store holds a prefix of state k at least min records long,
 * every record gathered intact; why says what differs otherwise. */
static int holds_prefix(zr_store *s, const zt_model *m, uint64_t min, char *why, size_t whylen)
{
    uint64_t len = zr_len(s);
    if (len < min || len > m->len) {
        snprintf(why, whylen, "%llu records, the state has %llu and %llu are durable",
                 (unsigned long long)len, (unsigned long long)m->len, (unsigned long long)min);
        return 0;
    }
    for (uint64_t i = 0; i < len; i++) {
        zr_ragged_batch *b;
        int rc = zr_gather_ragged_alloc(s, &i, 1, &b);
        if (rc != 0) {
            snprintf(why, whylen, "record %llu: %s", (unsigned long long)i, zr_last_error());
            return 0;
        }
        int ok = zt_record_is(m->ids[i], b->recs[0].data, b->recs[0].nbytes, MAXREC);
        zr_ragged_batch_free(b);
        if (!ok) {
            snprintf(why, whylen, "record %llu is not the state's", (unsigned long long)i);
            return 0;
        }
    }
    return 1;
}

/* A reader of the state changes nothing and hides nothing (R15): it
 * opens, and each record either fails with ZR_ECORRUPT or is the record
 * one of the states marks[first..last] has at that index. Returns the
 * records refused. */
static uint64_t check_reader(const char *out, size_t p, enum cut how, size_t first, size_t last)
{
    zr_store *s;
    ck_assert_msg(zr_open(&s, out, ZR_RDONLY) == 0, "cut before operation %zu (%s): read-only "
                  "open failed: %s", p, cut_names[how], zr_last_error());
    uint64_t refused = 0;
    for (uint64_t i = 0; i < zr_len(s); i++) {
        zr_ragged_batch *b;
        int rc = zr_gather_ragged_alloc(s, &i, 1, &b);
        if (rc == ZR_ECORRUPT) {
            refused++;
            continue;
        }
        ck_assert_msg(rc == 0, "gather of %llu: %s", (unsigned long long)i, zr_last_error());
        int ok = 0;
        for (size_t k = first; k <= last && !ok; k++)
            ok = i < marks[k].m.len &&
                 zt_record_is(marks[k].m.ids[i], b->recs[0].data, b->recs[0].nbytes, MAXREC);
        zr_ragged_batch_free(b);
        ck_assert_msg(ok, "cut before operation %zu (%s): a reader got a wrong record %llu", p,
                      cut_names[how], (unsigned long long)i);
    }
    zr_close(s);
    return refused;
}

/* The records the header of the state in folder out counts: meta.zr's
 * length, or the smaller one of the delete an intent.zr holds (the open
 * applies it before anything else). */
static uint64_t counted_records(const char *out)
{
    uint64_t n = zt_meta_read(out).length;
    char *ip = zt_join(out, "intent.zr");
    FILE *f = fopen(ip, "rb");
    uint8_t head[56];
    if (f && fread(head, 1, sizeof head, f) == sizeof head && memcmp(head, "ZRINTENT", 8) == 0) {
        uint64_t len = 0;
        for (int b = 7; b >= 0; b--)
            len = len << 8 | head[16 + b];
        n = len < n ? len : n;
    }
    if (f)
        fclose(f);
    free(ip);
    return n;
}

/* Open the store a cut at p leaves and compare it with the states it may
 * hold: exactly one of them for CUT_SYNCED and CUT_ALL, a prefix of one
 * no shorter than the durable state for CUT_HEADER and CUT_META. Returns
 * the number of records the open cut off (the header counted more). */
static uint64_t check_cut(size_t p, enum cut how)
{
    char *out = zt_join(dir, "cut");
    zt_rmtree(out);
    build(p, how, out);
    size_t first = 0;
    for (size_t k = 0; k < nmarks; k++)
        if (marks[k].at <= p && marks[k].durable)
            first = k;
    size_t last = first;
    while (last + 1 < nmarks && marks[last].at <= p)
        last++;
    uint64_t counted = counted_records(out);
    uint64_t refused = check_reader(out, p, how, first, last);
    zr_store *s;
    int rc = zr_open(&s, out, ZR_RDWR);
    ck_assert_msg(rc == 0, "cut before operation %zu of %zu (%s): open failed: %s", p, nops,
                  cut_names[how], zr_last_error());
    int found = 0;
    char why[256] = "";
    for (size_t k = first; k <= last && !found; k++)
        found = how == CUT_HEADER || how == CUT_META
                    ? holds_prefix(s, &marks[k].m, marks[first].m.len, why, sizeof why)
                    : zt_model_matches(s, &marks[k].m, MAXREC, why, sizeof why) == 0;
    ck_assert_msg(found, "cut before operation %zu of %zu (%s): the store (%llu records) holds "
                  "none of the states %zu..%zu (last: %s)", p, nops, cut_names[how],
                  (unsigned long long)zr_len(s), first, last, why);
    zr_verify_report *rep;
    ck_assert_msg(zr_verify(s, &rep) == 0, "cut before operation %zu (%s): verify: %s", p,
                  cut_names[how], zr_last_error());
    zr_verify_report_free(rep);
    uint64_t len = zr_len(s);
    uint64_t cut = counted > len ? counted - len : 0;
    /* The reader refused no more records than the writer cut off (the
     * writer keeps only a prefix; the reader also leaves out records that
     * have no entry). */
    ck_assert_uint_le(refused, cut);
    zr_close(s);
    /* The open made its cut durable: the header on disk agrees. */
    ck_assert_uint_eq(zt_meta_read(out).length, len);
    zt_rmtree(out);
    free(out);
    return cut;
}

static void setup(void)
{
    dir = zt_tempdir();
    path = zt_join(dir, "store");
    zr_testing_set_geometry(4096, 16);
}

static void teardown(void)
{
    zr_io = zr_io_default;
    zr_testing_set_geometry(0, 0);
    for (size_t i = 0; i < nops; i++)
        free(ops[i].data);
    free(ops);
    ops = NULL;
    nops = capops = 0;
    for (size_t k = 0; k < nmarks; k++)
        zt_model_free(&marks[k].m);
    nmarks = 0;
    for (size_t i = 0; i < nsnap; i++)
        free(snap[i].data);
    nsnap = 0;
    for (int fd = 0; fd < 4096; fd++) {
        free(fdname[fd]);
        fdname[fd] = NULL;
    }
    zt_rmtree(dir);
    free(path);
    free(dir);
}

static void append_range(zr_store *s, zt_model *m, uint64_t first, uint64_t n)
{
    uint64_t ids[64];
    for (uint64_t k = 0; k < n; k++)
        ids[k] = first + k;
    ZR_OK_CALL(zt_append_ids(s, ids, n, MAXREC));
    zt_model_append(m, ids, n);
}

/* Record the workload on a store of the given codec, then cut at every
 * point; returns the number of cuts. */
static size_t power_cuts(int codec)
{
    zr_store *s;
    zr_create_opts o = {.size = sizeof(zr_create_opts), .codec = codec};
    zt_model m = {0};
    ZR_OK_CALL(zr_ragged_create(&s, path, "|u1", &o));
    append_range(s, &m, 0, 10);
    ZR_OK_CALL(zr_sync(s));
    zr_close(s);
    ck_assert_ptr_nonnull(realpath(path, root));
    take_snapshot();
    mark(&m, 1);

    record_start();
    ZR_OK_CALL(zr_open(&s, path, ZR_RDWR));
    append_range(s, &m, 100, 20);
    mark(&m, 0);
    ZR_OK_CALL(zr_sync(s));
    mark(&m, 1);
    append_range(s, &m, 200, 15);
    mark(&m, 0);
    uint64_t del[] = {3, 7, 44, 20};
    ZR_OK_CALL(zr_delete(s, del, 4));
    zt_model_delete(&m, del, 4);
    mark(&m, 1);
    append_range(s, &m, 300, 12);
    mark(&m, 0);
    ZR_OK_CALL(zr_compact(s, NULL));
    mark(&m, 1);
    append_range(s, &m, 400, 25);
    mark(&m, 0);
    ZR_OK_CALL(zr_sync(s));
    mark(&m, 1);
    append_range(s, &m, 500, 8);
    mark(&m, 0);
    zr_close(s);
    zr_io = zr_io_default;
    zt_model_free(&m);

    /* Building and opening the states needs no durability. */
    zt_nosync(1);
    uint64_t lost[4] = {0};
    size_t cuts[4] = {0};
    for (size_t p = 0; p <= nops; p++)
        for (int how = CUT_ALL; how <= CUT_META; how++) {
            uint64_t n = check_cut(p, (enum cut)how);
            lost[how] += n;
            cuts[how] += n > 0;
        }
    zt_nosync(0);
    if (getenv("ZT_FAULT_COUNTS"))
        fprintf(stderr, "powercut: %s: %zu operations, %zu cut states; states where the open "
                "cut off records the header counted: %zu all writes, %zu synced, %zu table "
                "and header, %zu header only (%llu records in all)\n",
                zr_codec_name(codec), nops, 4 * (nops + 1), cuts[CUT_ALL], cuts[CUT_SYNCED],
                cuts[CUT_HEADER], cuts[CUT_META],
                (unsigned long long)(lost[0] + lost[1] + lost[2] + lost[3]));
    /* The states with the header ahead of the records must have made the
     * open cut records off, or they did not test the cut. */
    ck_assert_uint_gt(cuts[CUT_HEADER], 0);
    ck_assert_uint_gt(cuts[CUT_META], 0);
    /* With the writes in order nothing the header counts is ever lost. */
    ck_assert_uint_eq(cuts[CUT_ALL], 0);
    ck_assert_uint_eq(cuts[CUT_SYNCED], 0);
    return nops;
}

START_TEST(a_power_cut_at_any_point_keeps_what_was_synced_zstd)
{
    ck_assert_uint_gt(power_cuts(ZR_CODEC_ZSTD), 0);
}
END_TEST

START_TEST(a_power_cut_at_any_point_keeps_what_was_synced_raw)
{
    ck_assert_uint_gt(power_cuts(ZR_CODEC_RAW), 0);
}
END_TEST

Suite *suite_powercut(void)
{
    Suite *su = suite_create("powercut");
    TCase *tc = tcase_create("powercut");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, a_power_cut_at_any_point_keeps_what_was_synced_zstd);
    tcase_add_test(tc, a_power_cut_at_any_point_keeps_what_was_synced_raw);
    suite_add_tcase(su, tc);
    return su;
}

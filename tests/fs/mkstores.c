/*
 * mkstores.c: builds the stores that the zrecordfs integration scripts
 * mount, through the public API, and writes what each record must read
 * as through the mount into a separate folder, computed from the same
 * generator and never read back from a store, so the scripts compare the
 * mount against an independent expectation.
 *
 *   zrfs-mkstores tree DIR EXPECT    a tree of stores of every kind and
 *                                    codec, plus folders that must stay
 *                                    hidden, a store that fails to open
 *                                    and a store with one damaged record
 *   zrfs-mkstores files STORE CODEC  a Ragged |u1 store of the files named
 *                                    on standard input, one per line
 *   zrfs-mkstores count STORE N      a Dense |u1 store of N one-byte records
 *   zrfs-mkstores hold STORE ro|rw   open the store (taking its lock), say
 *                                    "held" on standard output, and keep it
 *                                    open until standard input ends
 *
 * For each store of the tree, EXPECT/<store path>/ holds one file per
 * record (its payload bytes) and a manifest: a first line "KIND DTYPE",
 * then one line per record, "INDEX NDIM DIM...".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <loaderx/loaderx.h>

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "zrfs-mkstores: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}

static void check(int rc, const char *what)
{
    if (rc != 0)
        die("%s: %s", what, zr_last_error());
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        die("out of memory");
    return p;
}

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = xmalloc(n);
    snprintf(p, n, "%s/%s", a, b);
    return p;
}

static void mkdirs(const char *path)
{
    char *p = strdup(path);
    if (!p)
        die("out of memory");
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            die("mkdir %s: %s", p, strerror(errno));
        *s = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        die("mkdir %s: %s", p, strerror(errno));
    free(p);
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0)
        die("writing %s: %s", path, strerror(errno));
}

/* xorshift64*: a fixed, seedable sequence, the same on every machine. */
static uint64_t rng_state;

static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

/* One generated record. */
struct rec {
    uint32_t ndim;
    uint64_t shape[4];
    size_t nbytes;
    unsigned char *data;
};

/* The expectation folder of one store. */
struct expect {
    char *dir;
    FILE *manifest;
};

static void expect_open(struct expect *x, const char *root, const char *rel, const char *kind,
                        const char *dtype)
{
    x->dir = join(root, rel);
    mkdirs(x->dir);
    char *m = join(x->dir, "manifest");
    if (!(x->manifest = fopen(m, "w")))
        die("%s: %s", m, strerror(errno));
    free(m);
    fprintf(x->manifest, "%s %s\n", kind, dtype);
}

static void expect_record(struct expect *x, uint64_t i, const struct rec *r)
{
    char name[32];
    snprintf(name, sizeof name, "%llu", (unsigned long long)i);
    char *p = join(x->dir, name);
    write_file(p, r->data, r->nbytes);
    free(p);
    fprintf(x->manifest, "%llu %u", (unsigned long long)i, r->ndim);
    for (uint32_t d = 0; d < r->ndim; d++)
        fprintf(x->manifest, " %llu", (unsigned long long)r->shape[d]);
    fprintf(x->manifest, "\n");
}

static void expect_close(struct expect *x)
{
    if (fclose(x->manifest) != 0)
        die("writing the manifest in %s", x->dir);
    free(x->dir);
}

/* Fill r with a record of the given shape: values from the generator,
 * small (so codecs find something to compress) but never all alike. */
static void fill(struct rec *r, uint64_t itemsize)
{
    uint64_t n = itemsize;
    for (uint32_t d = 0; d < r->ndim; d++)
        n *= r->shape[d];
    r->nbytes = (size_t)n;
    r->data = xmalloc(r->nbytes);
    for (size_t k = 0; k < r->nbytes; k++)
        r->data[k] = (unsigned char)(k % itemsize == 0 ? rnd() % 16 : (k % itemsize == 1 ? k / itemsize : 0));
}

static void dense_store(const char *dir, const char *exp, const char *rel, const char *dtype,
                        const uint64_t *shape, uint32_t ndim, int codec, uint64_t n)
{
    char *path = join(dir, rel);
    zr_store *s;
    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = codec};
    check(zr_dense_create(&s, path, dtype, shape, ndim, &opts), path);
    uint64_t itemsize = (uint64_t)zr_dtype_itemsize(dtype);
    struct expect x;
    expect_open(&x, exp, rel, "dense", dtype);
    uint64_t width = zr_record_width(s);
    unsigned char *all = xmalloc(width * n);
    for (uint64_t i = 0; i < n; i++) {
        struct rec r = {.ndim = ndim};
        if (ndim > 0)
            memcpy(r.shape, shape, ndim * sizeof *shape);
        fill(&r, itemsize);
        memcpy(all + i * width, r.data, width);
        expect_record(&x, i, &r);
        free(r.data);
    }
    check(zr_append_dense(s, dtype, shape, ndim, all, n, NULL), path);
    check(zr_sync(s), path);
    zr_close(s);
    expect_close(&x);
    free(all);
    free(path);
}

static void ragged_store(const char *dir, const char *exp, const char *rel, const char *dtype,
                         int codec, uint64_t n, uint64_t maxdim)
{
    char *path = join(dir, rel);
    uint64_t itemsize = (uint64_t)zr_dtype_itemsize(dtype);
    struct rec *recs = xmalloc(n * sizeof *recs);
    zr_rec *zrecs = xmalloc(n * sizeof *zrecs);
    for (uint64_t i = 0; i < n; i++) {
        /* Every ndim from scalar to 3-D, with varied dimensions. */
        recs[i].ndim = (uint32_t)(i % 4);
        for (uint32_t d = 0; d < recs[i].ndim; d++)
            recs[i].shape[d] = 1 + rnd() % maxdim;
        fill(&recs[i], itemsize);
        zrecs[i] = (zr_rec){.data = recs[i].data, .shape = recs[i].shape, .ndim = recs[i].ndim};
    }
    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = codec};
    void *dict = NULL;
    if (codec == ZR_CODEC_ZSTD_DICT) {
        /* Train on many more records of the same kind than are stored. */
        size_t ntrain = 4000;
        const void **samples = xmalloc(ntrain * sizeof *samples);
        size_t *sizes = xmalloc(ntrain * sizeof *sizes);
        struct rec *train = xmalloc(ntrain * sizeof *train);
        for (size_t k = 0; k < ntrain; k++) {
            train[k].ndim = 2;
            train[k].shape[0] = 4 + k % 5;
            train[k].shape[1] = 8;
            fill(&train[k], itemsize);
            samples[k] = train[k].data;
            sizes[k] = train[k].nbytes;
        }
        check(zr_train_dict_records(samples, sizes, ntrain, ZR_TIER_FAST, &dict, &opts.dict_len),
              "training a dictionary");
        opts.dict = dict;
        for (size_t k = 0; k < ntrain; k++)
            free(train[k].data);
        free(train);
        free(samples);
        free(sizes);
    }
    zr_store *s;
    check(zr_ragged_create(&s, path, dtype, &opts), path);
    check(zr_append_ragged(s, dtype, zrecs, n, NULL), path);
    check(zr_sync(s), path);
    zr_close(s);
    struct expect x;
    expect_open(&x, exp, rel, "ragged", dtype);
    for (uint64_t i = 0; i < n; i++) {
        expect_record(&x, i, &recs[i]);
        free(recs[i].data);
    }
    expect_close(&x);
    free(dict);
    free(recs);
    free(zrecs);
    free(path);
}

/* Damage record i of the store at path so that it no longer decodes:
 * overwrite the first 8 bytes of its stored form (the zstd frame magic,
 * or a Ragged record's ndim), found through the record table (16-byte
 * little-endian entries: offset, stored length, length, chunk). */
static void damage(const char *path, uint64_t i)
{
    char *loc = join(path, "0.loc");
    int fd = open(loc, O_RDONLY);
    unsigned char e[16];
    if (fd < 0 || pread(fd, e, sizeof e, (off_t)(i * 16)) != (ssize_t)sizeof e)
        die("reading %s: %s", loc, strerror(errno));
    close(fd);
    uint32_t off = e[0] | e[1] << 8 | e[2] << 16 | (uint32_t)e[3] << 24;
    uint32_t chunk = e[12] | e[13] << 8 | e[14] << 16 | (uint32_t)e[15] << 24;
    char name[32];
    snprintf(name, sizeof name, "%u.chunk", chunk);
    char *cp = join(path, name);
    static const unsigned char junk[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    fd = open(cp, O_WRONLY);
    if (fd < 0 || pwrite(fd, junk, sizeof junk, off) != (ssize_t)sizeof junk || close(fd) != 0)
        die("writing %s: %s", cp, strerror(errno));
    free(cp);
    free(loc);
}

static void make_tree(const char *dir, const char *exp)
{
    rng_state = 0x9e3779b97f4a7c15ull;
    mkdirs(dir);
    const uint64_t s34[] = {3, 4}, s7[] = {7}, s100[] = {100}, sbig[] = {96, 512};
    dense_store(dir, exp, "dense/raw_f4", "<f4", s34, 2, ZR_CODEC_RAW, 50);
    dense_store(dir, exp, "dense/zstd_u2", "<u2", s7, 1, ZR_CODEC_ZSTD, 40);
    dense_store(dir, exp, "scalar_i8", "<i8", NULL, 0, ZR_CODEC_RAW, 5);
    ragged_store(dir, exp, "ragged_raw", "|u1", ZR_CODEC_RAW, 30, 6);
    ragged_store(dir, exp, "ragged_zstd", "<f8", ZR_CODEC_ZSTD, 25, 6);
    ragged_store(dir, exp, "deep/a/b/ragged_dict", "<i4", ZR_CODEC_ZSTD_DICT, 60, 6);
    /* Records of tens of KiB: raw stores on read-only mounts splice reads
     * this large from the chunk files instead of writing them. */
    dense_store(dir, exp, "dense/raw_big", "|u1", sbig, 2, ZR_CODEC_RAW, 12);
    ragged_store(dir, exp, "ragged_big", "<u2", ZR_CODEC_RAW, 16, 40);

    /* Record 4 of this one is damaged; the others read fine. */
    dense_store(dir, exp, "damaged/zstd_u1", "|u1", s100, 1, ZR_CODEC_ZSTD, 10);
    char *p = join(dir, "damaged/zstd_u1");
    damage(p, 4);
    free(p);

    /* A store whose identity is garbage: it must not open. */
    ragged_store(dir, exp, "damaged/bad_identity", "|u1", ZR_CODEC_RAW, 3, 6);
    p = join(dir, "damaged/bad_identity/store.zr");
    write_file(p, "not msgpack", 11);
    free(p);

    /* Folders and files that the mount must not show. */
    p = join(dir, "empty");
    mkdirs(p);
    free(p);
    p = join(dir, "nostore/sub/deeper");
    mkdirs(p);
    free(p);
    p = join(dir, "dense/notes.txt");
    write_file(p, "a plain file\n", 13);
    free(p);
}

static void make_files(const char *path, const char *codec)
{
    zr_create_opts opts = {.size = sizeof(zr_create_opts),
                           .codec = strcmp(codec, "zstd") == 0 ? ZR_CODEC_ZSTD : ZR_CODEC_RAW};
    zr_store *s;
    check(zr_ragged_create(&s, path, "|u1", &opts), path);
    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        FILE *f = fopen(line, "rb");
        if (!f)
            die("%s: %s", line, strerror(errno));
        struct stat sb;
        if (fstat(fileno(f), &sb) != 0 || sb.st_size == 0)
            die("%s: empty or unreadable", line);
        unsigned char *buf = xmalloc((size_t)sb.st_size);
        if (fread(buf, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size)
            die("%s: short read", line);
        fclose(f);
        uint64_t shape[1] = {(uint64_t)sb.st_size};
        zr_rec r = {.data = buf, .shape = shape, .ndim = 1};
        check(zr_append_ragged(s, "|u1", &r, 1, NULL), path);
        free(buf);
    }
    check(zr_sync(s), path);
    zr_close(s);
}

static void make_count(const char *path, uint64_t n)
{
    zr_store *s;
    zr_create_opts opts = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_RAW};
    const uint64_t shape[1] = {1};
    check(zr_dense_create(&s, path, "|u1", shape, 1, &opts), path);
    const uint64_t batch = 1 << 20;
    unsigned char *buf = xmalloc(batch);
    for (uint64_t done = 0; done < n;) {
        uint64_t k = n - done < batch ? n - done : batch;
        for (uint64_t j = 0; j < k; j++)
            buf[j] = (unsigned char)((done + j) % 251);
        check(zr_append_dense(s, "|u1", shape, 1, buf, k, NULL), path);
        done += k;
    }
    check(zr_sync(s), path);
    zr_close(s);
    free(buf);
}

static void hold(const char *path, const char *mode)
{
    zr_store *s;
    check(zr_open(&s, path, strcmp(mode, "rw") == 0 ? ZR_RDWR : ZR_RDONLY), path);
    printf("held\n");
    fflush(stdout);
    while (getchar() != EOF)
        ;
    zr_close(s);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "tree") == 0)
        make_tree(argv[2], argv[3]);
    else if (argc == 4 && strcmp(argv[1], "files") == 0)
        make_files(argv[2], argv[3]);
    else if (argc == 4 && strcmp(argv[1], "count") == 0)
        make_count(argv[2], strtoull(argv[3], NULL, 10));
    else if (argc == 4 && strcmp(argv[1], "hold") == 0)
        hold(argv[2], argv[3]);
    else
        die("usage: zrfs-mkstores tree DIR EXPECT | files STORE raw|zstd | count STORE N | "
            "hold STORE ro|rw");
    return 0;
}

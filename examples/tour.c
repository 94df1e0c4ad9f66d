/*
 * tour.c: a first look at libloaderx. It packs PNG files (one record per
 * file) into a Ragged store of bytes and their pixel sizes into a Dense
 * store, reopens both read-only, gathers one random batch from each at the
 * same indices and prints what came back, checking that every gathered
 * PNG still carries the size recorded for it.
 *
 * usage: tour OUTDIR < LIST       (LIST: paths of PNG images, one a line)
 */
#include <loaderx/loaderx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 8

/* The message says what went wrong; zr_strerror names the code. */
static int fail(const char *what, int rc)
{
    fprintf(stderr, "tour: %s: %s (%s)\n", what, zr_last_error(), zr_strerror(rc));
    return 1;
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    unsigned char *buf = n > 0 ? malloc((size_t)n) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = buf ? (size_t)n : 0;
    return buf;
}

/* Width and height from a PNG's IHDR chunk, big-endian at bytes 16..23. */
static int png_size(const unsigned char *p, size_t n, uint32_t wh[2])
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n < 24 || memcmp(p, sig, 8) != 0)
        return -1;
    for (int k = 0; k < 2; k++)
        wh[k] = (uint32_t)p[16 + 4 * k] << 24 | (uint32_t)p[17 + 4 * k] << 16 |
                (uint32_t)p[18 + 4 * k] << 8 | p[19 + 4 * k];
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: tour OUTDIR < LIST\n");
        return 2;
    }
    char images_path[4096], sizes_path[4096];
    snprintf(images_path, sizeof images_path, "%s/images", argv[1]);
    snprintf(sizes_path, sizeof sizes_path, "%s/sizes", argv[1]);

    /* Read the PNGs named on stdin; skip files that are not PNG. */
    size_t cap = 1 << 16, n = 0;
    zr_rec *recs = calloc(cap, sizeof *recs);
    uint64_t *lens = calloc(cap, sizeof *lens);
    uint32_t *wh = calloc(2 * cap, sizeof *wh);
    char line[4096];
    if (!recs || !lens || !wh)
        return 1;
    while (n < cap && fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        size_t len;
        unsigned char *buf = slurp(line, &len);
        if (!buf || png_size(buf, len, &wh[2 * n]) != 0) {
            free(buf);
            continue;
        }
        lens[n] = len;
        recs[n] = (zr_rec){.data = buf, .shape = &lens[n], .ndim = 1};
        n++;
    }
    printf("read %zu PNG files\n", n);

    /* Create both stores and append each as one batch. */
    zr_store *images, *sizes;
    zr_create_opts zstd = {.size = sizeof(zr_create_opts), .codec = ZR_CODEC_ZSTD};
    uint64_t pair[1] = {2};
    if (zr_ragged_create(&images, images_path, "|u1", &zstd) != 0)
        return fail(images_path, 1);
    if (zr_dense_create(&sizes, sizes_path, "<u4", pair, 1, NULL) != 0)
        return fail(sizes_path, 1);
    if (zr_append_ragged(images, "|u1", recs, n, NULL) != 0 ||
        zr_append_dense(sizes, "<u4", pair, 1, wh, n, NULL) != 0)
        return fail("append", 1);
    if (zr_sync(images) != 0 || zr_sync(sizes) != 0)
        return fail("sync", 1);
    zr_close(images);
    zr_close(sizes);

    /* Reopen read-only and gather one random batch from both streams. */
    if (zr_open(&images, images_path, ZR_RDONLY) != 0 || zr_open(&sizes, sizes_path, ZR_RDONLY) != 0)
        return fail("open", 1);
    printf("%s: %llu records, codec %s\n", images_path, (unsigned long long)zr_len(images),
           zr_codec_name(zr_codec(images)));
    uint64_t idx[BATCH];
    srand(42);
    for (int k = 0; k < BATCH; k++)
        idx[k] = (uint64_t)rand() % zr_len(images);
    uint32_t got_wh[2 * BATCH];
    zr_ragged_batch *batch;
    if (zr_gather_dense(sizes, idx, BATCH, got_wh) != 0 ||
        zr_gather_ragged_alloc(images, idx, BATCH, &batch) != 0)
        return fail("gather", 1);
    int bad = 0;
    for (int k = 0; k < BATCH; k++) {
        const zr_view *v = &batch->recs[k];
        uint32_t png_wh[2];
        int ok = png_size(v->data, v->nbytes, png_wh) == 0 && png_wh[0] == got_wh[2 * k] &&
                 png_wh[1] == got_wh[2 * k + 1];
        bad += !ok;
        printf("record %6llu: %7llu bytes, %ux%u pixels %s\n", (unsigned long long)idx[k],
               (unsigned long long)v->nbytes, got_wh[2 * k], got_wh[2 * k + 1],
               ok ? "(matches the PNG header)" : "(MISMATCH)");
    }
    zr_ragged_batch_free(batch);
    zr_close(images);
    zr_close(sizes);
    for (size_t k = 0; k < n; k++)
        free((void *)recs[k].data);
    free(recs);
    free(lens);
    free(wh);
    return bad ? 1 : 0;
}

/*
 * fuzz_store.c: a store whose files are the fuzz input. The input is cut
 * into store.zr, meta.zr, 0.loc, 0.chunk and dict.zr, each preceded by its
 * length (4 bytes, little-endian; 0 leaves the file out, a length past
 * the end takes the rest). The files are written to a temporary folder,
 * the store is opened read-only, every record (up to a bound) is
 * gathered and the store is verified. Any outcome but a crash, a
 * sanitizer report or a hang is fine: errors are what damaged files
 * should give.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loaderx/loaderx.h>

#include "tests/fuzz/fuzz.h"

static const char *const names[] = {"store.zr", "meta.zr", "0.loc", "0.chunk", "dict.zr"};
#define NFILES (sizeof names / sizeof names[0])
#define MAX_GATHER 256

static char dir[64];

static void gather_all(zr_store *s)
{
    uint64_t n = zr_len(s);
    if (n > MAX_GATHER)
        n = MAX_GATHER;
    for (uint64_t i = 0; i < n; i++) {
        if (zr_kind(s) == ZR_RAGGED) {
            zr_ragged_batch *b;
            if (zr_gather_ragged_alloc(s, &i, 1, &b) == 0)
                zr_ragged_batch_free(b);
        } else {
            void *buf = malloc(zr_record_width(s));
            if (buf)
                zr_gather_dense(s, &i, 1, buf);
            free(buf);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/zr-fuzz-store.XXXXXX");
        if (!mkdtemp(dir))
            abort();
    }
    char p[128];
    for (size_t f = 0; f < NFILES; f++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[f]);
        unlink(p);
        uint32_t len = 0;
        if (size >= 4) {
            len = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
                  (uint32_t)data[3] << 24;
            data += 4;
            size -= 4;
        } else {
            size = 0;
        }
        if (len > size)
            len = (uint32_t)size;
        if (len == 0)
            continue;
        FILE *fp = fopen(p, "wb");
        if (!fp)
            abort();
        fwrite(data, 1, len, fp);
        fclose(fp);
        data += len;
        size -= len;
    }
    zr_store *s;
    if (zr_open(&s, dir, ZR_RDONLY) == 0) {
        gather_all(s);
        /* The report comes back whether or not problems were found. */
        zr_verify_report *rep = NULL;
        zr_verify(s, &rep);
        zr_verify_report_free(rep);
        zr_close(s);
    }
    /* An interrupted delete or compaction may have been finished. */
    snprintf(p, sizeof p, "%s/intent.zr", dir);
    unlink(p);
    return 0;
}

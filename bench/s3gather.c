/*
 * s3gather: how fast a Dense store gathers batches drawn by a sampler,
 * for bench/s3bench.sh, which runs it on the same store kept locally and
 * in an object store (s3://), with and without a cache.
 *
 *   s3gather STORE MODE BATCH RECORDS [SEED]
 *
 * MODE is sequential, cyclic or quasi (the sampler's modes); the program
 * gathers batches of BATCH records from step 0 until RECORDS records are
 * read, and prints one line: "records SECONDS RECORDS_PER_S MIB_PER_S".
 */
#define _DEFAULT_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/loaderx/loaderx.h"
#include "lib/loaderx/loader.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: s3gather STORE sequential|cyclic|quasi BATCH RECORDS [SEED]\n");
        return 2;
    }
    const char *mname = argv[2];
    int mode = strcmp(mname, "sequential") == 0 ? ZR_SEQUENTIAL
               : strcmp(mname, "cyclic") == 0   ? ZR_CYCLIC
               : strcmp(mname, "quasi") == 0    ? ZR_QUASI
                                                : -1;
    uint64_t batch = strtoull(argv[3], NULL, 10), want = strtoull(argv[4], NULL, 10);
    uint64_t seed = argc > 5 ? strtoull(argv[5], NULL, 10) : 1;
    if (mode < 0 || batch == 0) {
        fprintf(stderr, "s3gather: bad mode or batch\n");
        return 2;
    }
    zr_store *s;
    if (zr_open(&s, argv[1], ZR_RDONLY) != 0) {
        fprintf(stderr, "s3gather: %s\n", zr_last_error());
        return 1;
    }
    zr_sampler *sm;
    if (zr_sampler_create(&sm, zr_len(s), batch, mode, seed, 0, 1) != 0) {
        fprintf(stderr, "s3gather: %s\n", zr_last_error());
        return 1;
    }
    uint64_t width = zr_record_width(s);
    uint64_t *idx = malloc(batch * sizeof *idx);
    uint8_t *dst = malloc(batch * width);
    if (!idx || !dst)
        return 1;
    double t0 = now_s();
    uint64_t done = 0;
    for (uint64_t step = 0; done < want; step++) {
        if (zr_sampler_batch(sm, step, idx) != 0 || zr_gather_dense(s, idx, batch, dst) != 0) {
            fprintf(stderr, "s3gather: step %" PRIu64 ": %s\n", step, zr_last_error());
            return 1;
        }
        done += batch;
    }
    double t = now_s() - t0;
    printf("%" PRIu64 " %.3f %.0f %.1f\n", done, t, (double)done / t,
           (double)done * (double)width / t / 1048576.0);
    zr_sampler_free(sm);
    zr_close(s);
    free(idx);
    free(dst);
    return 0;
}

/*
 * s3ranges.c: ranged GETs per second through the S3 client (lib/s3.c),
 * for comparison with `curl --parallel` on the same server
 * (bench/s3ranges.sh runs both).
 *
 *   s3ranges s3://bucket/prefix NAME SIZE LEN COUNT INFLIGHT [ROUNDS]
 *
 * reads COUNT ranges of LEN bytes at random LEN-aligned offsets of the
 * object NAME (SIZE bytes), INFLIGHT at a time, ROUNDS times (default 3),
 * and prints each round's rate and the connections it opened.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"
#include "s3.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: s3ranges s3://bucket/prefix NAME SIZE LEN COUNT INFLIGHT [ROUNDS]\n");
        return 2;
    }
    uint64_t size = strtoull(argv[3], NULL, 10), len = strtoull(argv[4], NULL, 10);
    size_t count = strtoull(argv[5], NULL, 10);
    unsigned inflight = (unsigned)atoi(argv[6]);
    int rounds = argc > 7 ? atoi(argv[7]) : 3;
    if (len == 0 || len > size || count == 0) {
        fprintf(stderr, "s3ranges: LEN must be 1..SIZE and COUNT at least 1\n");
        return 2;
    }
    struct zr_s3 *c;
    if (zr_s3_open(&c, argv[1]) != 0) {
        fprintf(stderr, "s3ranges: %s\n", zr_last_error());
        return 1;
    }
    struct zr_s3_range *r = calloc(count, sizeof *r);
    uint8_t *buf = malloc(count * len);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < count; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r[i] = (struct zr_s3_range){.name = argv[2], .off = (x % (size / len)) * len, .len = len,
                                    .to = buf + i * len, .tag = i};
    }
    int rc = 0;
    for (int k = 0; k < rounds && rc == 0; k++) {
        struct zr_s3_stats a, b;
        zr_s3_stats(c, &a);
        double t = now_s();
        rc = zr_s3_get_ranges(c, r, count, inflight, NULL, NULL);
        t = now_s() - t;
        zr_s3_stats(c, &b);
        if (rc != 0)
            fprintf(stderr, "s3ranges: %s\n", zr_last_error());
        else
            printf("round %d: %zu x %llu B, inflight %u: %.3f s, %.0f req/s, %.1f MiB/s, "
                   "%llu connections, %llu retries\n",
                   k + 1, count, (unsigned long long)len, inflight, t, (double)count / t,
                   (double)count * (double)len / t / (1 << 20),
                   (unsigned long long)(b.connects - a.connects),
                   (unsigned long long)(b.retries - a.retries));
    }
    free(r);
    free(buf);
    zr_s3_close(c);
    return rc == 0 ? 0 : 1;
}

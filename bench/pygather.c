/*
 * pygather: the C side of bench/pybench.py, the rate at which libloaderx
 * gathers a Dense store when no Python is involved at all.
 *
 * The Python benchmark compares the binding's gather with the library's
 * own, so the library's figure has to come from a program that makes the
 * same calls on the same store with the same batches: this one. It opens
 * the store read-only, reads the batch plan that pybench.py wrote (the
 * indices of every batch, as native uint64), gathers each batch with one
 * zr_gather_dense call into a single buffer allocated and touched once,
 * and answers pybench.py's requests on stdin, one per line, so that the
 * two can take turns within one run and share the machine's state:
 *
 *   run FIRST COUNT   gather batches FIRST .. FIRST+COUNT-1 and print the
 *                     nanoseconds each one took, on one line;
 *   dump K PATH       gather batch K and write its bytes to PATH, so that
 *                     pybench.py can check them against the source.
 *
 * Every reply is one line; an error is a line starting with "error".
 */
#define _DEFAULT_SOURCE
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "lib/loaderx/loaderx.h"

/* The alignment of the gather buffer: one huge page. */
#define HUGE_ALIGN ((size_t)2 << 20)

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Read the whole plan file: nbatch * batch indices. Returns NULL (and
 * says why on stderr) when the file is unreadable or not a whole number
 * of batches. */
static uint64_t *read_plan(const char *path, size_t batch, size_t *nbatch)
{
    uint64_t *plan = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    rewind(f);
    size_t per = batch * sizeof *plan;
    if (size <= 0 || (size_t)size % per != 0) {
        fprintf(stderr, "%s: not a whole number of batches of %zu\n", path, batch);
        goto out;
    }
    plan = malloc((size_t)size);
    if (!plan || fread(plan, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "%s: cannot read the plan\n", path);
        free(plan);
        plan = NULL;
        goto out;
    }
    *nbatch = (size_t)size / per;
out:
    fclose(f);
    return plan;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: pygather STORE PLAN BATCH\n");
        return 2;
    }
    int status = 1;
    zr_store *s = NULL;
    uint8_t *buf = NULL;
    uint64_t *plan = NULL;
    size_t batch = (size_t)strtoull(argv[3], NULL, 10);
    size_t nbatch = 0;

    if (batch == 0) {
        fprintf(stderr, "pygather: BATCH must be positive\n");
        return 2;
    }
    if (zr_open(&s, argv[1], ZR_RDONLY) != 0) {
        fprintf(stderr, "pygather: %s\n", zr_last_error());
        goto out;
    }
    plan = read_plan(argv[2], batch, &nbatch);
    if (!plan)
        goto out;
    size_t bytes = batch * zr_record_width(s);
    /* The buffer asks for transparent huge pages, as NumPy does for a
     * large array, so that the C and the Python gathers write into the
     * same kind of memory; and it is touched once
     * here, so that no timed gather pays the page faults of fresh memory:
     * it is reused, as a training loop reuses its own. */
    void *mem = NULL;
    if (posix_memalign(&mem, HUGE_ALIGN, bytes) != 0) {
        fprintf(stderr, "pygather: cannot allocate %zu bytes\n", bytes);
        goto out;
    }
    buf = mem;
    madvise(buf, bytes, MADV_HUGEPAGE); /* a hint: refused is fine too */
    memset(buf, 0, bytes);
    printf("ready %zu\n", nbatch);
    fflush(stdout);

    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        size_t first, count, k;
        char path[4000];
        if (sscanf(line, "run %zu %zu", &first, &count) == 2) {
            if (first > nbatch || count > nbatch - first) {
                printf("error: batches %zu..%zu are not in the plan\n", first, first + count);
            } else {
                for (size_t b = first; b < first + count; b++) {
                    double t0 = now_ns();
                    if (zr_gather_dense(s, plan + b * batch, batch, buf) != 0) {
                        printf("error: %s\n", zr_last_error());
                        break;
                    }
                    printf("%s%.0f", b == first ? "" : " ", now_ns() - t0);
                }
                printf("\n");
            }
        } else if (sscanf(line, "dump %zu %3999s", &k, path) == 2) {
            FILE *f = k < nbatch ? fopen(path, "wb") : NULL;
            if (!f) {
                printf("error: cannot dump batch %zu to %s\n", k, path);
            } else if (zr_gather_dense(s, plan + k * batch, batch, buf) != 0) {
                printf("error: %s\n", zr_last_error());
                fclose(f);
            } else {
                int ok = fwrite(buf, 1, bytes, f) == bytes;
                ok = fclose(f) == 0 && ok;
                if (ok)
                    printf("dumped\n");
                else
                    printf("error: cannot write %s\n", path);
            }
        } else {
            printf("error: unknown request\n");
        }
        fflush(stdout);
    }
    status = 0;
out:
    free(buf);
    free(plan);
    zr_close(s);
    return status;
}

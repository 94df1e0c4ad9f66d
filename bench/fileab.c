/*
 * fileab.c: one cold pass of record files read from several folders at
 * once, the folders taken in turn file by file, for bench/fileab.sh.
 *
 * bench/coldbench reads plain files and then zrecordfs one row after the
 * other, so on a disk shared with other jobs the two rows of one run see
 * different loads: its ratios moved by 3x between runs an hour apart.
 * Here every reader opens, reads whole and closes one file of the first
 * folder, then one of the second, and so on (the first folder of each
 * round rotating), so that all of them meet the same contention; the
 * ratio of their mean times per file is then steady to a few percent
 * within a pass. Each folder gets records of its own (disjoint random
 * sets), so that none finds another's pages cached. The page cache,
 * dentries and inodes are dropped before the pass (root).
 *
 * usage: fileab READERS FILES RECORDS DIR[:SUFFIX]...
 * reads FILES files of each DIR, named <record><SUFFIX> for records below
 * RECORDS, with READERS threads; prints one line: the mean microseconds a
 * file took in each DIR, tab-separated, in the order given.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_DIRS 8
#define MAX_READERS 64
/* Larger than any record file the benchmarks make: one read takes the
 * file whole, as coldbench's readers do. */
#define BUF_BYTES ((size_t)4 << 20)

static int ndirs, nreaders, nfiles;
static const char *dirs[MAX_DIRS], *suffix[MAX_DIRS];
static uint32_t *plan[MAX_DIRS];
static double spent[MAX_READERS][MAX_DIRS];
static pthread_barrier_t start;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *reader(void *arg)
{
    int t = (int)(intptr_t)arg;
    char *buf = malloc(BUF_BYTES), path[4096];
    if (!buf)
        exit(1);
    pthread_barrier_wait(&start);
    for (int k = t; k < nfiles; k += nreaders) {
        for (int r = 0; r < ndirs; r++) {
            int d = (r + k) % ndirs;
            snprintf(path, sizeof path, "%s/%u%s", dirs[d], plan[d][k], suffix[d]);
            double t0 = now();
            int fd = open(path, O_RDONLY);
            if (fd < 0) {
                perror(path);
                exit(1);
            }
            while (read(fd, buf, BUF_BYTES) > 0)
                ;
            close(fd);
            spent[t][d] += now() - t0;
        }
    }
    free(buf);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: fileab READERS FILES RECORDS DIR[:SUFFIX]...\n");
        return 2;
    }
    nreaders = atoi(argv[1]);
    nfiles = atoi(argv[2]);
    long records = atol(argv[3]);
    ndirs = argc - 4;
    if (nreaders < 1 || nreaders > MAX_READERS || nfiles < 1 || ndirs > MAX_DIRS ||
        records < (long)nfiles * ndirs) {
        fprintf(stderr, "fileab: 1-%d readers, 1-%d folders, RECORDS >= FILES x folders\n",
                MAX_READERS, MAX_DIRS);
        return 2;
    }
    for (int d = 0; d < ndirs; d++) {
        char *s = strdup(argv[4 + d]), *c = strrchr(s, ':');
        suffix[d] = "";
        if (c) {
            *c = '\0';
            suffix[d] = c + 1;
        }
        dirs[d] = s;
    }
    uint32_t *perm = malloc((size_t)records * sizeof *perm);
    if (!perm)
        return 1;
    for (long i = 0; i < records; i++)
        perm[i] = (uint32_t)i;
    srand48((long)time(NULL) ^ (long)getpid());
    for (long i = records - 1; i > 0; i--) {
        long j = (long)(drand48() * (double)(i + 1));
        uint32_t x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (int d = 0; d < ndirs; d++)
        plan[d] = perm + (size_t)d * (size_t)nfiles;

    sync();
    int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
    if (fd < 0 || write(fd, "3", 1) != 1) {
        perror("fileab: /proc/sys/vm/drop_caches");
        return 1;
    }
    close(fd);

    pthread_t th[MAX_READERS];
    pthread_barrier_init(&start, NULL, (unsigned)nreaders);
    for (int t = 0; t < nreaders; t++)
        pthread_create(&th[t], NULL, reader, (void *)(intptr_t)t);
    for (int t = 0; t < nreaders; t++)
        pthread_join(th[t], NULL);
    for (int d = 0; d < ndirs; d++) {
        double s = 0;
        for (int t = 0; t < nreaders; t++)
            s += spent[t][d];
        printf("%s%.1f", d ? "\t" : "", s / nfiles * 1e6);
    }
    printf("\n");
    free(perm);
    return 0;
}

/*
 * cmd_maint.c: `zr delete`, `zr compact` and `zr verify`, the
 * maintenance of a store in place.
 *
 * Deletion is swap-last: each deleted record's place is taken by the then
 * last record, so the records stay numbered 0..length-1 and indices held
 * elsewhere go stale. verify prints what it found on stdout and fails
 * (exit 1) when anything is wrong, so it fits in scripts and cron jobs.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

static int run_delete(int argc, char **argv)
{
    const struct cli_opt opts[] = {{0}};
    int prc = cli_parse(argc, argv, opts, "STORE INDEX...");
    if (prc != EXIT_OK)
        return prc == CLI_HELP ? EXIT_OK : prc;
    const char *store = argv[optind];
    zr_store *s = NULL;
    struct cli_range *r = NULL;
    size_t nr = 0;
    uint64_t *idx = NULL;
    int rc = cli_open(&s, store, ZR_RDWR);
    if (rc == EXIT_OK)
        rc = cli_parse_ranges((const char *const *)argv + optind + 1, argc - optind - 1,
                              zr_len(s), &r, &nr);
    uint64_t n = 0;
    for (size_t k = 0; rc == EXIT_OK && k < nr; k++)
        n += r[k].hi - r[k].lo;
    if (rc == EXIT_OK && !(idx = malloc((size_t)(n ? n : 1) * sizeof *idx)))
        rc = cli_fail("out of memory for %llu indices", (unsigned long long)n);
    uint64_t m = 0;
    for (size_t k = 0; rc == EXIT_OK && k < nr; k++)
        for (uint64_t i = r[k].lo; i < r[k].hi; i++)
            idx[m++] = i;
    if (rc == EXIT_OK && zr_delete(s, idx, (size_t)n) != 0)
        rc = cli_fail_lib(NULL);
    if (rc == EXIT_OK && zr_sync(s) != 0)
        rc = cli_fail_lib(NULL);
    free(idx);
    free(r);
    zr_close(s);
    return rc;
}

static int run_compact(int argc, char **argv)
{
    bool quiet = false;
    const struct cli_opt opts[] = {{"quiet", 'q', &quiet, NULL}, {0}};
    int prc = cli_parse(argc, argv, opts, "STORE");
    if (prc != EXIT_OK)
        return prc == CLI_HELP ? EXIT_OK : prc;
    const char *store = argv[optind];
    zr_store *s = NULL;
    zr_compact_result res = ZR_COMPACT_RESULT_INIT;
    struct progress prog;
    int rc = cli_open(&s, store, ZR_RDWR);
    if (rc == EXIT_OK) {
        progress_start(&prog, quiet, "records", zr_len(s));
        zr_set_progress(s, progress_callback, &prog);
        if (zr_compact(s, &res) != 0)
            rc = cli_fail_lib(NULL);
        progress_end(&prog);
    }
    /* zr_compact ends by syncing what it changed; the command syncs all
     * the same, as every writing command does before it reports success,
     * so that its durability does not rest on that detail of the library. */
    if (rc == EXIT_OK && zr_sync(s) != 0)
        rc = cli_fail_lib(NULL);
    if (rc == EXIT_OK && !quiet)
        printf("%s: %llu records moved, chunk bytes %llu -> %llu\n", store,
               (unsigned long long)res.records_moved, (unsigned long long)res.bytes_before,
               (unsigned long long)res.bytes_after);
    if (rc == EXIT_OK && fflush(stdout) != 0)
        rc = cli_fail("writing stdout failed");
    zr_close(s);
    return rc;
}

static int run_verify(int argc, char **argv)
{
    bool quiet = false;
    const struct cli_opt opts[] = {{"quiet", 'q', &quiet, NULL}, {0}};
    int prc = cli_parse(argc, argv, opts, "STORE");
    if (prc != EXIT_OK)
        return prc == CLI_HELP ? EXIT_OK : prc;
    const char *store = argv[optind];
    zr_store *s = NULL;
    int rc = cli_open(&s, store, ZR_RDONLY);
    if (rc == EXIT_OK)
        rc = cli_verify(s, store, quiet);
    zr_close(s);
    return rc;
}

const struct cli_cmd cmd_delete = {
    "delete", run_delete,
    "delete STORE INDEX...",
    "Delete records; the last records move into the holes",
    "Each INDEX is a record index or a range A:B. Deletion is swap-last: the batch\n"
    "is applied from the highest index down and each hole is filled by the then\n"
    "last record, so the records stay numbered 0..length-1 and indices kept\n"
    "elsewhere become stale. Every index is checked before anything changes. The\n"
    "space is reclaimed by 'zr compact'.\n"
    "\n"
    "Options:\n"
    "  -h, --help        show this help\n",
};

const struct cli_cmd cmd_compact = {
    "compact", run_compact,
    "compact STORE [-q]",
    "Reclaim the space of deleted records",
    "Live records are moved down in place, in physical order, and surplus chunk\n"
    "files are removed. An interrupted compaction leaves a valid store; running it\n"
    "again finishes the work. Prints what it did unless -q.\n"
    "\n"
    "Options:\n"
    "  -q, --quiet       print nothing on success\n"
    "  -h, --help        show this help\n",
};

const struct cli_cmd cmd_verify = {
    "verify", run_verify,
    "verify STORE [-q]",
    "Check a whole store; exit 1 if anything is wrong",
    "Every record-table entry is checked against the files, every record decoded\n"
    "to its length, every Ragged shape checked, and no two records may overlap.\n"
    "Problems are listed on stdout (at most 1000), one per line; the exit status\n"
    "is 1 when there are any.\n"
    "\n"
    "Options:\n"
    "  -q, --quiet       print nothing for a sound store\n"
    "  -h, --help        show this help\n",
};

/*
 * cmd_recode.c: `zr recode`, a copy of a store under another codec.
 *
 * The copy keeps the order, dtype and shapes of the records and is made in
 * bounded batches, one commit each. Like import, it creates the target
 * and removes it again if anything fails, so a half copy never remains.
 */
#include <stdlib.h>

#include "cli.h"
#include "reader.h"

static int copy_records(zr_store *src, zr_store *dst, bool quiet)
{
    struct cli_range all = {0, zr_len(src)};
    struct reader rd;
    int rc = reader_init(&rd, src, &all, 1);
    if (rc != EXIT_OK)
        return rc;
    zr_rec *recs = rd.ragged ? malloc(rd.cap * sizeof *recs) : NULL;
    if (rd.ragged && !recs)
        rc = cli_fail("out of memory");
    uint32_t ndim;
    const uint64_t *shape = zr_item_shape(src, &ndim);
    struct progress pg;
    progress_start(&pg, quiet, "records", all.hi);
    uint64_t done = 0, bytes = 0;
    while (rc == EXIT_OK) {
        size_t n;
        rc = reader_next(&rd, &n);
        if (rc != EXIT_OK || n == 0)
            break;
        int zrc;
        if (rd.ragged) {
            for (size_t k = 0; k < n; k++) {
                recs[k] = (zr_rec){.data = rd.views[k].data,
                                   .shape = rd.views[k].shape,
                                   .ndim = rd.views[k].ndim};
                bytes += rd.views[k].nbytes;
            }
            zrc = zr_append_ragged(dst, zr_dtype(src), recs, n, NULL);
        } else {
            zrc = zr_append_dense(dst, zr_dtype(src), shape, ndim, rd.buf, n, NULL);
            bytes += n * rd.width;
        }
        rc = zrc != 0 ? cli_fail_lib(NULL) : cli_check_interrupt();
        done += n;
        progress_update(&pg, done, bytes);
    }
    progress_end(&pg);
    free(recs);
    reader_free(&rd);
    return rc;
}

static int run_recode(int argc, char **argv)
{
    const char *codec_arg = NULL, *tier_arg = NULL, *dict_path = NULL;
    bool quiet = false;
    const struct cli_opt opts[] = {{"codec", 'c', NULL, &codec_arg}, {"tier", 't', NULL, &tier_arg},
                                   {"dict", 'd', NULL, &dict_path},  {"quiet", 'q', &quiet, NULL},
                                   {0}};
    int codec = -1, tier = ZR_TIER_BALANCED;
    int prc = cli_parse(argc, argv, opts, "SRC DST");
    if (prc == EXIT_OK)
        prc = cli_codec_option(codec_arg, &codec);
    if (prc == EXIT_OK)
        prc = cli_tier_option(tier_arg, &tier);
    if (prc != EXIT_OK)
        return prc == CLI_HELP ? EXIT_OK : prc;
    bool tier_set = tier_arg != NULL;
    if (codec < 0)
        return cli_usage("missing --codec (raw, zstd or zstd_dict)");
    if ((tier_set || dict_path) && codec != ZR_CODEC_ZSTD_DICT)
        return cli_usage("--tier and --dict only apply to --codec zstd_dict");
    if (tier_set && dict_path)
        return cli_usage("give either --tier (train a dictionary) or --dict FILE, not both");
    const char *src_path = argv[optind], *dst_path = argv[optind + 1];

    zr_store *src = NULL, *dst = NULL;
    struct cli_created created = {0};
    bool attempted = false;
    void *dict = NULL;
    size_t dict_len = 0;
    cli_catch_signals();
    int rc = cli_open(&src, src_path, ZR_RDONLY);
    if (rc == EXIT_OK)
        rc = cli_create_begin(&created, dst_path);
    if (rc == EXIT_OK && codec == ZR_CODEC_ZSTD_DICT) {
        if (dict_path)
            rc = cli_read_file(dict_path, (uint64_t)64 << 20, &dict, &dict_len);
        else if (zr_train_dict_store(src, tier, &dict, &dict_len) != 0)
            rc = cli_fail_lib("training the dictionary");
    }
    if (rc == EXIT_OK) {
        zr_create_opts copts = {.size = sizeof(zr_create_opts), .codec = codec, .dict = dict,
                                .dict_len = dict_len};
        uint32_t ndim;
        const uint64_t *shape = zr_item_shape(src, &ndim);
        int zrc = zr_kind(src) == ZR_RAGGED
                      ? zr_ragged_create(&dst, dst_path, zr_dtype(src), &copts)
                      : zr_dense_create(&dst, dst_path, zr_dtype(src), shape, ndim, &copts);
        /* ZR_EEXIST: refused before anything was written */
        attempted = zrc != ZR_EEXIST;
        if (zrc != 0)
            rc = cli_fail_lib(NULL);
    }
    if (rc == EXIT_OK)
        rc = copy_records(src, dst, quiet);
    if (rc == EXIT_OK && zr_sync(dst) != 0)
        rc = cli_fail_lib(NULL);
    zr_close(dst);
    if (rc != EXIT_OK && attempted)
        cli_create_undo(&created);
    cli_create_end(&created);
    zr_close(src);
    free(dict);
    return rc;
}

const struct cli_cmd cmd_recode = {
    "recode", run_recode,
    "recode SRC DST --codec C [--tier T | --dict FILE] [-q]",
    "Copy a store into a new one with another codec, keeping the order",
    "DST must be a new or empty folder; if the copy fails, what was created is\n"
    "removed. With --codec zstd_dict the dictionary is trained on SRC (sized by\n"
    "--tier) unless --dict gives one.\n"
    "\n"
    "Options:\n"
    "  -c, --codec C     raw, zstd or zstd_dict\n"
    "  -t, --tier T      zstd_dict: fast, balanced (default) or max\n"
    "  -d, --dict FILE   zstd_dict: use this dictionary instead of training one\n"
    "  -q, --quiet       no progress on stderr\n"
    "  -h, --help        show this help\n",
};

/*
 * cmd_create.c: `zr create`, an empty store of a given type.
 *
 * The dtype, item shape and codec are fixed at creation and never change,
 * so they are all validated here, before the library makes any folder; a
 * creation that fails after that removes what it made.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int run_create(int argc, char **argv)
{
    const char *dtype = NULL, *shape_arg = NULL, *dict_path = NULL, *codec_arg = NULL;
    bool ragged = false;
    const struct cli_opt opts[] = {
        {"dtype", 't', NULL, &dtype},     {"shape", 's', NULL, &shape_arg},
        {"ragged", 'r', &ragged, NULL},   {"codec", 'c', NULL, &codec_arg},
        {"dict", 'd', NULL, &dict_path}, {0}};
    int prc = cli_parse(argc, argv, opts, "STORE");
    if (prc != EXIT_OK)
        return prc == CLI_HELP ? EXIT_OK : prc;
    /* zstd unless told otherwise: decoding it costs a gather little and
     * most data takes less room, so it suits a user who did not choose
     * (the library's zeroed zr_create_opts stays raw, for C callers). */
    int codec = ZR_CODEC_ZSTD;
    if ((prc = cli_codec_option(codec_arg, &codec)) != EXIT_OK)
        return prc;
    const char *store = argv[optind];
    if (!dtype)
        return cli_usage("missing --dtype (a NumPy dtype.str such as '<f4' or '|u1')");
    if (zr_dtype_itemsize(dtype) <= 0)
        return cli_usage("'%s' is not a dtype loaderx stores (NumPy dtype.str spelling, e.g. "
                         "'<f4', '|u1', '<i8')", dtype);
    uint64_t shape[ZR_MAX_NDIM];
    uint32_t ndim = 0;
    if (ragged && shape_arg)
        return cli_usage("--shape applies to Dense stores; Ragged records have their own shapes");
    if (shape_arg && !cli_parse_shape(shape_arg, shape, &ndim, ZR_MAX_NDIM))
        return cli_usage("'%s' is not an item shape (D0,D1,... with at most %d dimensions)",
                         shape_arg, ZR_MAX_NDIM);
    for (uint32_t d = 0; d < ndim; d++)
        if (shape[d] == 0)
            return cli_usage("item shape '%s' has a zero dimension", shape_arg);
    if (codec == ZR_CODEC_ZSTD_DICT && !dict_path)
        return cli_usage("--codec zstd_dict needs --dict FILE (see 'zr train-dict')");
    if (codec != ZR_CODEC_ZSTD_DICT && dict_path)
        return cli_usage("--dict only applies to --codec zstd_dict");

    void *dict = NULL;
    size_t dict_len = 0;
    struct cli_created created = {0};
    bool attempted = false;
    int rc = EXIT_OK;
    if (dict_path)
        rc = cli_read_file(dict_path, (uint64_t)64 << 20, &dict, &dict_len);
    if (rc == EXIT_OK)
        rc = cli_create_begin(&created, store);
    zr_store *s = NULL;
    if (rc == EXIT_OK) {
        zr_create_opts copts = {.size = sizeof(zr_create_opts), .codec = codec, .dict = dict,
                                .dict_len = dict_len};
        int zrc = ragged ? zr_ragged_create(&s, store, dtype, &copts)
                         : zr_dense_create(&s, store, dtype, shape, ndim, &copts);
        /* ZR_EEXIST: refused before anything was written */
        attempted = zrc != ZR_EEXIST;
        if (zrc != 0)
            rc = cli_fail_lib(NULL);
    }
    if (rc == EXIT_OK && zr_sync(s) != 0)
        rc = cli_fail_lib(NULL);
    zr_close(s);
    /* A creation that failed halfway leaves nothing behind. */
    if (rc != EXIT_OK && attempted)
        cli_create_undo(&created);
    cli_create_end(&created);
    free(dict);
    return rc;
}

const struct cli_cmd cmd_create = {
    "create", run_create,
    "create STORE --dtype DT [--shape D0,D1,...] [--ragged] [--codec C [--dict FILE]]",
    "Create an empty store",
    "A Dense store holds records of one dtype and one item shape (--shape, omitted\n"
    "for scalars); a Ragged store (--ragged) holds records of one dtype, each with its\n"
    "own shape. DT is NumPy's dtype.str spelling: |u1, <i4, <f4, <f8, |b1, <c8, |S10...\n"
    "STORE must be a new or empty folder.\n"
    "\n"
    "Options:\n"
    "  -t, --dtype DT    the dtype of every element\n"
    "  -s, --shape DIMS  Dense item shape, comma-separated (e.g. 3,224,224)\n"
    "  -r, --ragged      create a Ragged store\n"
    "  -c, --codec C     raw, zstd (default), or zstd_dict\n"
    "  -d, --dict FILE   zstd_dict (required): the dictionary (made by 'zr train-dict')\n"
    "  -h, --help        show this help\n",
};

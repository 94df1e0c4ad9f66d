/*
 * cmd_import.c: `zr import` and `zr append`, filling a store from an .npy
 * file or from files.
 *
 * Both commands check everything they can before the first byte is
 * written: the input is parsed and validated in full (the NPY header, or
 * every file of the list), and the target's dtype and item shape are
 * compared with the input's. import creates the store and, if anything
 * fails afterwards, removes what it created, so it either makes a complete
 * store or leaves nothing. append adds in batches, each one commit, and if
 * a later batch fails it deletes the records of the earlier ones, so it
 * too is all or nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "source.h"

/* Files per batch of a --files import. */
#define FILES_PER_BATCH 4096

struct fill_opts {
    const char *store;
    const char *npy;
    const char *files;
    const char *map;
    bool nul_sep;
    bool quiet;
    int codec;
    int tier;
    bool tier_set;
    const char *dict;
};

static int parse_fill_args(int argc, char **argv, bool creating, struct fill_opts *o)
{
    /* zstd by default, as zr create: see the comment there. */
    *o = (struct fill_opts){.codec = ZR_CODEC_ZSTD, .tier = ZR_TIER_BALANCED};
    const char *codec = NULL, *tier = NULL;
    const struct cli_opt import_opts[] = {
        {"codec", 'c', NULL, &codec},   {"tier", 't', NULL, &tier},
        {"dict", 'd', NULL, &o->dict},  {"files", 'f', NULL, &o->files},
        {"map", 'm', NULL, &o->map},    {"null", '0', &o->nul_sep, NULL},
        {"quiet", 'q', &o->quiet, NULL}, {0}};
    /* append takes the options that do not make a store. */
    const struct cli_opt *opts = creating ? import_opts : import_opts + 3;
    int prc = cli_parse(argc, argv, opts, "STORE ...");
    if (prc == EXIT_OK)
        prc = cli_codec_option(codec, &o->codec);
    if (prc == EXIT_OK)
        prc = cli_tier_option(tier, &o->tier);
    if (prc != EXIT_OK)
        return prc;
    o->tier_set = tier != NULL;
    int nops = argc - optind;
    o->store = argv[optind];
    if (o->files && nops > 1)
        return cli_usage("give either FILE.npy or --files, not both");
    if (!o->files && nops != 2)
        return cli_usage(nops < 2 ? "missing FILE.npy (or --files DIR|-)" : "too many operands");
    if (!o->files)
        o->npy = argv[optind + 1];
    if (o->map && !o->files)
        return cli_usage("--map only applies to --files");
    if (o->nul_sep && (!o->files || strcmp(o->files, "-") != 0))
        return cli_usage("--null only applies to --files -");
    if ((o->tier_set || o->dict) && o->codec != ZR_CODEC_ZSTD_DICT)
        return cli_usage("--tier and --dict only apply to --codec zstd_dict");
    if (o->tier_set && o->dict)
        return cli_usage("give either --tier (train a dictionary) or --dict FILE, not both");
    return EXIT_OK;
}

static int append_npy(zr_store *s, const struct npy_src *src, bool quiet)
{
    uint64_t batch = npy_src_batch(src);
    bool ragged = zr_kind(s) == ZR_RAGGED;
    zr_rec *recs = NULL;
    int rc = EXIT_OK;
    if (ragged) {
        if (batch > CLI_BATCH_RECORDS)
            batch = CLI_BATCH_RECORDS;
        if (!(recs = malloc((size_t)batch * sizeof *recs)))
            return cli_fail("out of memory");
    }
    struct progress pg;
    progress_start(&pg, quiet, "records", src->n);
    for (uint64_t i = 0; i < src->n && rc == EXIT_OK; i += batch) {
        uint64_t k = src->n - i < batch ? src->n - i : batch;
        struct npy_window w;
        if ((rc = npy_src_map(src, i, k, &w)) != EXIT_OK)
            break;
        int zrc;
        if (ragged) {
            /* Each row becomes one record of the item shape. */
            for (uint64_t j = 0; j < k; j++)
                recs[j] = (zr_rec){.data = w.data + j * src->width,
                                   .shape = src->item_shape,
                                   .ndim = src->item_ndim};
            zrc = zr_append_ragged(s, src->h.descr, recs, k, NULL);
        } else {
            zrc = zr_append_dense(s, src->h.descr, src->item_shape, src->item_ndim, w.data, k,
                                  NULL);
        }
        npy_src_unmap(&w);
        if (zrc != 0)
            rc = cli_fail_lib(NULL);
        else
            rc = cli_check_interrupt();
        progress_update(&pg, i + k, (i + k) * src->width);
    }
    progress_end(&pg);
    free(recs);
    return rc;
}

static int append_files(zr_store *s, const struct file_list *fl, bool quiet)
{
    uint64_t largest = 0, total = 0;
    for (size_t k = 0; k < fl->n; k++) {
        largest = fl->e[k].size > largest ? fl->e[k].size : largest;
        total += fl->e[k].size;
    }
    size_t cap = (size_t)(largest > CLI_BATCH_BYTES ? largest : CLI_BATCH_BYTES);
    uint8_t *buf = malloc(cap);
    zr_rec *recs = malloc(FILES_PER_BATCH * sizeof *recs);
    uint64_t *shapes = malloc(FILES_PER_BATCH * sizeof *shapes);
    int rc = EXIT_OK;
    if (!buf || !recs || !shapes)
        rc = cli_fail("out of memory");
    struct progress pg;
    progress_start(&pg, quiet, "files", fl->n);
    uint64_t bytes = 0;
    for (size_t k = 0; k < fl->n && rc == EXIT_OK;) {
        size_t m = 0, used = 0;
        while (k + m < fl->n && m < FILES_PER_BATCH &&
               (m == 0 || used + fl->e[k + m].size <= cap) && rc == EXIT_OK) {
            rc = file_list_read(fl, k + m, buf + used);
            shapes[m] = fl->e[k + m].size;
            recs[m] = (zr_rec){.data = buf + used, .shape = &shapes[m], .ndim = 1};
            used += (size_t)fl->e[k + m].size;
            m++;
        }
        if (rc == EXIT_OK && zr_append_ragged(s, "|u1", recs, m, NULL) != 0)
            rc = cli_fail_lib(NULL);
        if (rc == EXIT_OK)
            rc = cli_check_interrupt();
        k += m;
        bytes += used;
        progress_update(&pg, k, bytes);
    }
    progress_end(&pg);
    free(shapes);
    free(recs);
    free(buf);
    return rc;
}

/* Check the target store accepts the input before anything is written. */
static int check_target(zr_store *s, const struct fill_opts *o, const struct npy_src *src)
{
    const char *dtype = zr_dtype(s);
    if (o->files) {
        if (zr_kind(s) != ZR_RAGGED)
            return cli_fail("%s is a Dense store; --files appends to a Ragged |u1 store",
                            o->store);
        if (strcmp(dtype, "|u1") != 0)
            return cli_fail("%s holds %s records; --files stores bytes (|u1)", o->store, dtype);
        return EXIT_OK;
    }
    if (zr_kind(s) == ZR_RAGGED) {
        if (strcmp(dtype, src->h.descr) != 0)
            return cli_fail("%s holds %s records, %s holds %s", o->store, dtype, o->npy,
                            src->h.descr);
        return EXIT_OK;
    }
    uint32_t ndim;
    const uint64_t *shape = zr_item_shape(s, &ndim);
    bool same_shape = ndim == src->item_ndim &&
                      (ndim == 0 || memcmp(shape, src->item_shape, ndim * sizeof *shape) == 0);
    if (strcmp(dtype, src->h.descr) != 0 || !same_shape) {
        char want[512], have[512];
        cli_format_shape(want, sizeof want, shape, ndim);
        cli_format_shape(have, sizeof have, src->item_shape, src->item_ndim);
        return cli_fail("%s holds %s items of shape %s, %s holds %s items of shape %s", o->store,
                        dtype, want, o->npy, src->h.descr, have);
    }
    return EXIT_OK;
}

static int fill(zr_store *s, const struct fill_opts *o, const struct npy_src *src,
                const struct file_list *fl)
{
    int rc = o->files ? append_files(s, fl, o->quiet) : append_npy(s, src, o->quiet);
    if (rc == EXIT_OK && zr_sync(s) != 0)
        rc = cli_fail_lib(NULL);
    return rc;
}

/* Take back the batches a failed append committed. Deleting the last
 * records is a truncation (each hole is filled by itself), so the store
 * returns to its state before the append; the message of the failure has
 * been printed, only a failed rollback adds one. */
static void rollback(zr_store *s, const char *store, uint64_t before)
{
    uint64_t added = zr_len(s) - before;
    if (added == 0)
        return;
    uint64_t *idx = malloc((size_t)added * sizeof *idx);
    for (uint64_t k = 0; idx && k < added; k++)
        idx[k] = before + k;
    if (!idx || zr_delete(s, idx, (size_t)added) != 0 || zr_sync(s) != 0)
        cli_fail("%s: %llu records appended before the failure remain (indices %llu..%llu)",
                 store, (unsigned long long)added, (unsigned long long)before,
                 (unsigned long long)(before + added - 1));
    free(idx);
}

static int run_import(int argc, char **argv)
{
    struct fill_opts o;
    int rc = parse_fill_args(argc, argv, true, &o);
    if (rc != EXIT_OK)
        return rc == CLI_HELP ? EXIT_OK : rc;
    struct npy_src src = {.fd = -1};
    struct file_list fl = {0};
    struct cli_created created = {0};
    void *dict = NULL;
    size_t dict_len = 0;
    zr_store *s = NULL;
    bool attempted = false;
    cli_catch_signals();
    rc = o.files ? file_list_collect(&fl, o.files, o.nul_sep) : npy_src_open(&src, o.npy);
    if (rc == EXIT_OK)
        rc = cli_create_begin(&created, o.store);
    if (rc == EXIT_OK && o.codec == ZR_CODEC_ZSTD_DICT) {
        if (o.dict)
            rc = cli_read_file(o.dict, (uint64_t)64 << 20, &dict, &dict_len);
        else if (o.files)
            rc = file_list_train_dict(&fl, o.tier, &dict, &dict_len);
        else
            rc = npy_src_train_dict(&src, o.tier, &dict, &dict_len);
    }
    if (rc == EXIT_OK) {
        zr_create_opts copts = {.size = sizeof(zr_create_opts), .codec = o.codec, .dict = dict,
                                .dict_len = dict_len};
        int zrc = o.files ? zr_ragged_create(&s, o.store, "|u1", &copts)
                          : zr_dense_create(&s, o.store, src.h.descr, src.item_shape,
                                            src.item_ndim, &copts);
        /* ZR_EEXIST: refused before anything was written */
        attempted = zrc != ZR_EEXIST;
        if (zrc != 0)
            rc = cli_fail_lib(NULL);
    }
    if (rc == EXIT_OK)
        rc = fill(s, &o, &src, &fl);
    if (rc == EXIT_OK && o.map)
        rc = file_list_write_map(&fl, 0, o.map);
    zr_close(s);
    /* Whatever creation made goes on failure: a half-made folder as much
     * as a complete store that could not be filled. */
    if (rc != EXIT_OK && attempted)
        cli_create_undo(&created);
    cli_create_end(&created);
    free(dict);
    file_list_free(&fl);
    npy_src_close(&src);
    return rc;
}

static int run_append(int argc, char **argv)
{
    struct fill_opts o;
    int rc = parse_fill_args(argc, argv, false, &o);
    if (rc != EXIT_OK)
        return rc == CLI_HELP ? EXIT_OK : rc;
    struct npy_src src = {.fd = -1};
    struct file_list fl = {0};
    zr_store *s = NULL;
    uint64_t before = 0;
    cli_catch_signals();
    rc = o.files ? file_list_collect(&fl, o.files, o.nul_sep) : npy_src_open(&src, o.npy);
    if (rc == EXIT_OK)
        rc = cli_open(&s, o.store, ZR_RDWR);
    if (rc == EXIT_OK)
        rc = check_target(s, &o, &src);
    if (rc == EXIT_OK) {
        before = zr_len(s);
        rc = fill(s, &o, &src, &fl);
        if (rc != EXIT_OK)
            rollback(s, o.store, before);
    }
    if (rc == EXIT_OK && o.map)
        rc = file_list_write_map(&fl, before, o.map);
    zr_close(s);
    file_list_free(&fl);
    npy_src_close(&src);
    return rc;
}

const struct cli_cmd cmd_import = {
    "import", run_import,
    "import STORE FILE.npy [--codec C] [--tier T | --dict FILE] [-q]\n"
    "       zr import STORE --files DIR|- [--map FILE] [--null] [--codec C] [--tier T | --dict FILE]",
    "Create a store from an .npy file, or from files (one record per file)",
    "With FILE.npy, a Dense store is created whose records are the rows of the array\n"
    "(its first axis): dtype and item shape come from the file. The file is streamed\n"
    "through a sliding memory map, so it may be larger than memory. NPY versions 1.0,\n"
    "2.0 and 3.0 are read; Fortran-order, object and structured arrays are refused.\n"
    "\n"
    "With --files, a Ragged store of bytes (|u1) is created, one record per file:\n"
    "DIR is walked recursively and its files sorted by path (bytewise), or '-' reads\n"
    "a list of paths from stdin, one per line, in the order given.\n"
    "\n"
    "STORE must be a new or empty folder. If anything fails, what import created is\n"
    "removed.\n"
    "\n"
    "Options:\n"
    "  -c, --codec C     raw, zstd (default), or zstd_dict\n"
    "  -t, --tier T      zstd_dict: train the dictionary on a sample sized by tier\n"
    "                    fast, balanced (default) or max\n"
    "  -d, --dict FILE   zstd_dict: use this dictionary instead of training one\n"
    "  -f, --files SRC   import files from folder SRC, or from a list on stdin (-)\n"
    "  -m, --map FILE    write 'index<TAB>path' lines for the imported files ('-': stdout)\n"
    "  -0, --null        the list on stdin is NUL-separated\n"
    "  -q, --quiet       no progress on stderr\n"
    "  -h, --help        show this help\n",
};

const struct cli_cmd cmd_append = {
    "append", run_append,
    "append STORE FILE.npy [-q]\n"
    "       zr append STORE --files DIR|- [--map FILE] [--null] [-q]",
    "Append the rows of an .npy file, or files, to an existing store",
    "The dtype and item shape of FILE.npy must equal the store's (a Ragged store takes\n"
    "each row as one record). --files appends to a Ragged |u1 store. Nothing is\n"
    "written when they do not match. Records go in batches; if one fails, those\n"
    "already appended are deleted again, so the store is left as it was.\n"
    "\n"
    "Options:\n"
    "  -f, --files SRC   append files from folder SRC, or from a list on stdin (-)\n"
    "  -m, --map FILE    write 'index<TAB>path' lines for the appended files\n"
    "  -0, --null        the list on stdin is NUL-separated\n"
    "  -q, --quiet       no progress on stderr\n"
    "  -h, --help        show this help\n",
};

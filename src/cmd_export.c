/*
 * cmd_export.c: `zr export`, a Dense store (or a range of it) to one .npy
 * file.
 *
 * The file is written under a temporary name and renamed when complete,
 * so a failure leaves no partial .npy behind and never clobbers an
 * existing one. Records are gathered a bounded batch at a time, so a store
 * larger than memory exports.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "npy.h"
#include "reader.h"

static int run_export(int argc, char **argv)
{
    const char *range = NULL;
    bool quiet = false;
    const struct cli_opt opts[] = {{"range", 'r', NULL, &range}, {"quiet", 'q', &quiet, NULL}, {0}};
    int prc = cli_parse(argc, argv, opts, "STORE OUT.npy");
    if (prc != EXIT_OK)
        return prc == CLI_HELP ? EXIT_OK : prc;
    const char *store = argv[optind], *out_path = argv[optind + 1];
    if (range && !strchr(range, ':'))
        return cli_usage("--range takes A:B (either side may be omitted)");

    zr_store *s = NULL;
    struct cli_range *r = NULL;
    size_t nr = 0;
    struct cli_out out = {.fd = -1};
    struct reader rd = {0};
    bool opened = false;
    cli_catch_signals();
    int rc = cli_open(&s, store, ZR_RDONLY);
    if (rc == EXIT_OK && zr_kind(s) == ZR_RAGGED)
        rc = cli_fail("%s is a Ragged store: its records have different shapes and make no "
                      "single array; use 'zr cat %s INDEX --npy' for single records",
                      store, store);
    const char *all = ":";
    if (rc == EXIT_OK)
        rc = cli_parse_ranges(range ? &range : &all, 1, zr_len(s), &r, &nr);
    uint64_t shape[1 + ZR_MAX_NDIM];
    uint32_t ndim = 0;
    if (rc == EXIT_OK) {
        const uint64_t *item = zr_item_shape(s, &ndim);
        shape[0] = r[0].hi - r[0].lo;
        memcpy(shape + 1, item, ndim * sizeof *item);
        ndim++;
        rc = cli_out_open(&out, out_path);
        opened = rc == EXIT_OK;
    }
    if (rc == EXIT_OK) {
        uint8_t header[NPY_FORMAT_CAP];
        size_t hlen = npy_format_header(zr_dtype(s), shape, ndim, header, sizeof header);
        rc = hlen ? cli_write_all(out.fd, header, hlen, out_path)
                  : cli_fail("cannot format an NPY header for dtype %s", zr_dtype(s));
    }
    if (rc == EXIT_OK)
        rc = reader_init(&rd, s, r, nr);
    struct progress pg;
    progress_start(&pg, quiet, "records", shape[0]);
    uint64_t done = 0;
    while (rc == EXIT_OK) {
        size_t n;
        rc = reader_next(&rd, &n);
        if (rc != EXIT_OK || n == 0)
            break;
        rc = cli_write_all(out.fd, rd.buf, n * rd.width, out_path);
        if (rc == EXIT_OK)
            rc = cli_check_interrupt();
        done += n;
        progress_update(&pg, done, done * rd.width);
    }
    progress_end(&pg);
    if (rc == EXIT_OK && opened)
        rc = cli_out_commit(&out);
    else if (opened)
        cli_out_abort(&out);
    reader_free(&rd);
    free(r);
    zr_close(s);
    return rc;
}

const struct cli_cmd cmd_export = {
    "export", run_export,
    "export STORE OUT.npy [--range A:B] [-q]",
    "Write a Dense store, or a range of its records, to an .npy file",
    "OUT.npy ('-' for stdout) holds an array of shape (records, *item_shape) that\n"
    "numpy.load reads back. It is written under a temporary name and renamed when\n"
    "complete; a symlink is followed, and a FIFO or character device is written\n"
    "into. A Ragged store cannot be one array: use 'zr cat --npy' instead.\n"
    "\n"
    "Options:\n"
    "  -r, --range A:B   only records A..B-1 (A defaults to 0, B to the length)\n"
    "  -q, --quiet       no progress on stderr\n"
    "  -h, --help        show this help\n",
};

/*
 * cmd_cat.c: `zr cat`, records to stdout.
 *
 * Raw output is exactly the records' bytes back to back (a Ragged record's
 * payload, without its shape), so that a store of files gives the files
 * back byte for byte. With --npy every record becomes a complete .npy
 * file, its shape the item shape (Dense) or its own (Ragged).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "npy.h"
#include "reader.h"

static int write_record(const char *dtype, bool npy, const uint64_t *shape, uint32_t ndim,
                        const void *data, uint64_t nbytes)
{
    if (npy) {
        uint8_t header[NPY_FORMAT_CAP];
        size_t hlen = npy_format_header(dtype, shape, ndim, header, sizeof header);
        if (hlen == 0)
            return cli_fail("cannot format an NPY header for dtype %s", dtype);
        int rc = cli_write_all(STDOUT_FILENO, header, hlen, "stdout");
        if (rc != EXIT_OK)
            return rc;
    }
    return cli_write_all(STDOUT_FILENO, data, (size_t)nbytes, "stdout");
}

static int run_cat(int argc, char **argv)
{
    bool npy = false;
    const struct cli_opt opts[] = {{"npy", 'n', &npy, NULL}, {0}};
    int prc = cli_parse(argc, argv, opts, "STORE INDEX...");
    if (prc != EXIT_OK)
        return prc == CLI_HELP ? EXIT_OK : prc;
    const char *store = argv[optind];
    zr_store *s = NULL;
    struct cli_range *r = NULL;
    size_t nr = 0;
    struct reader rd = {0};
    cli_catch_signals();
    int rc = cli_open(&s, store, ZR_RDONLY);
    if (rc == EXIT_OK)
        rc = cli_parse_ranges((const char *const *)argv + optind + 1, argc - optind - 1,
                              zr_len(s), &r, &nr);
    if (rc == EXIT_OK)
        rc = reader_init(&rd, s, r, nr);
    uint32_t item_ndim = 0;
    const uint64_t *item_shape = rc == EXIT_OK ? zr_item_shape(s, &item_ndim) : NULL;
    while (rc == EXIT_OK) {
        size_t n;
        rc = reader_next(&rd, &n);
        if (rc != EXIT_OK || n == 0)
            break;
        if (!rd.ragged && !npy) {
            rc = cli_write_all(STDOUT_FILENO, rd.buf, n * rd.width, "stdout");
            continue;
        }
        for (size_t k = 0; k < n && rc == EXIT_OK; k++) {
            if (rd.ragged)
                rc = write_record(zr_dtype(s), npy, rd.views[k].shape, rd.views[k].ndim,
                                  rd.views[k].data, rd.views[k].nbytes);
            else
                rc = write_record(zr_dtype(s), npy, item_shape, item_ndim,
                                  rd.buf + k * rd.width, rd.width);
        }
        if (rc == EXIT_OK)
            rc = cli_check_interrupt();
    }
    reader_free(&rd);
    free(r);
    zr_close(s);
    return rc;
}

const struct cli_cmd cmd_cat = {
    "cat", run_cat,
    "cat STORE INDEX... [--npy]",
    "Write records to stdout",
    "Each INDEX is a record index or a range A:B (records A..B-1; either side may be\n"
    "omitted). Records are written in the order given. Without --npy the output is\n"
    "the records' raw bytes (for a Ragged record, its payload without the shape);\n"
    "with --npy each record is a complete .npy file.\n"
    "\n"
    "Options:\n"
    "  -n, --npy         write each record as an .npy file\n"
    "  -h, --help        show this help\n",
};

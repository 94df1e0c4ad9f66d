/*
 * cmd_train.c: `zr train-dict`, a zstd dictionary trained on a store or
 * an .npy file, for creating zstd_dict stores.
 */
#include <stdlib.h>
#include <sys/stat.h>

#include "cli.h"
#include "source.h"

static int run_train(int argc, char **argv)
{
    const char *tier_arg = NULL, *out_path = NULL;
    bool quiet = false;
    const struct cli_opt opts[] = {{"tier", 't', NULL, &tier_arg}, {"output", 'o', NULL, &out_path},
                                   {"quiet", 'q', &quiet, NULL}, {0}};
    int tier = ZR_TIER_BALANCED;
    int prc = cli_parse(argc, argv, opts, "SOURCE");
    if (prc == EXIT_OK)
        prc = cli_tier_option(tier_arg, &tier);
    if (prc != EXIT_OK)
        return prc == CLI_HELP ? EXIT_OK : prc;
    if (!out_path)
        return cli_usage("missing -o FILE");
    const char *source = argv[optind];
    void *dict = NULL;
    size_t dict_len = 0;
    int rc;
    struct stat st;
    if (stat(source, &st) == 0 && S_ISDIR(st.st_mode)) {
        zr_store *s = NULL;
        struct progress prog;
        rc = cli_open(&s, source, ZR_RDONLY);
        if (rc == EXIT_OK) {
            progress_start(&prog, quiet, "sample records", 0);
            zr_set_progress(s, progress_callback, &prog);
            if (zr_train_dict_store(s, tier, &dict, &dict_len) != 0)
                rc = cli_fail_lib(source);
            progress_end(&prog);
        }
        zr_close(s);
    } else {
        struct npy_src src;
        rc = npy_src_open(&src, source);
        if (rc == EXIT_OK)
            rc = npy_src_train_dict(&src, tier, &dict, &dict_len);
        npy_src_close(&src);
    }
    struct cli_out out;
    if (rc == EXIT_OK)
        rc = cli_out_open(&out, out_path);
    if (rc == EXIT_OK) {
        rc = cli_write_all(out.fd, dict, dict_len, out_path);
        if (rc == EXIT_OK)
            rc = cli_out_commit(&out);
        else
            cli_out_abort(&out);
    }
    free(dict);
    return rc;
}

const struct cli_cmd cmd_train_dict = {
    "train-dict", run_train,
    "train-dict SOURCE [--tier T] -o FILE",
    "Train a zstd dictionary on a store or an .npy file",
    "SOURCE is a store folder or an .npy file. The dictionary is trained on an evenly\n"
    "spread sample of its records whose size the tier sets: fast (32 KiB dictionary,\n"
    "4 MiB sample), balanced (128 KiB, 16 MiB; the default) or max (1 MiB, 64 MiB).\n"
    "Use it with 'zr create --codec zstd_dict --dict FILE' or 'zr import --dict FILE'.\n"
    "\n"
    "Options:\n"
    "  -t, --tier T      fast, balanced or max\n"
    "  -o, --output FILE where to write the dictionary ('-' for stdout)\n"
    "  -q, --quiet       no progress on stderr (shown for a store SOURCE on a terminal)\n"
    "  -h, --help        show this help\n",
};

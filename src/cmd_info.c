/*
 * cmd_info.c: `zr info`, what a store is and holds, for people or (with
 * --json) for programs: its identity and its space accounting. The
 * accounting reads the whole record table, so a damaged entry makes info
 * fail (and 'zr verify' says more) rather than print numbers that lie.
 */
#include <stdio.h>

#include "cli.h"

/* A JSON string: quotes, backslashes and control bytes escaped. */
static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

static void print_json(zr_store *s, const char *store, const zr_store_stats *st)
{
    uint32_t ndim;
    const uint64_t *shape = zr_item_shape(s, &ndim);
    printf("{\"store\": ");
    json_string(store);
    printf(", \"kind\": \"%s\", \"dtype\": ", zr_kind(s) == ZR_DENSE ? "dense" : "ragged");
    json_string(zr_dtype(s));
    printf(", \"item_shape\": ");
    if (zr_kind(s) == ZR_DENSE) {
        printf("[");
        for (uint32_t d = 0; d < ndim; d++)
            printf("%s%llu", d ? ", " : "", (unsigned long long)shape[d]);
        printf("]");
    } else {
        printf("null");
    }
    printf(", \"codec\": \"%s\", \"records\": %llu, \"live_bytes\": %llu, "
           "\"chunk_bytes\": %llu, \"reclaimable\": %llu, \"dict_bytes\": %llu}\n",
           zr_codec_name(st->codec), (unsigned long long)st->records,
           (unsigned long long)st->live_bytes, (unsigned long long)st->chunk_bytes,
           (unsigned long long)st->reclaimable, (unsigned long long)st->dict_bytes);
}

static void print_text(zr_store *s, const char *store, const zr_store_stats *st)
{
    uint32_t ndim;
    const uint64_t *shape = zr_item_shape(s, &ndim);
    char buf[1024] = "(per record)";
    if (zr_kind(s) == ZR_DENSE)
        cli_format_shape(buf, sizeof buf, shape, ndim);
    printf("store:       %s\n", store);
    printf("kind:        %s\n", zr_kind(s) == ZR_DENSE ? "dense" : "ragged");
    printf("dtype:       %s\n", zr_dtype(s));
    printf("item shape:  %s\n", buf);
    printf("codec:       %s\n", zr_codec_name(st->codec));
    printf("records:     %llu\n", (unsigned long long)st->records);
    printf("live bytes:  %llu\n", (unsigned long long)st->live_bytes);
    printf("chunk bytes: %llu\n", (unsigned long long)st->chunk_bytes);
    printf("reclaimable: %llu\n", (unsigned long long)st->reclaimable);
    if (st->codec == ZR_CODEC_ZSTD_DICT)
        printf("dict bytes:  %llu\n", (unsigned long long)st->dict_bytes);
}

static int run_info(int argc, char **argv)
{
    bool json = false;
    const struct cli_opt opts[] = {{"json", 'j', &json, NULL}, {0}};
    int prc = cli_parse(argc, argv, opts, "STORE");
    if (prc != EXIT_OK)
        return prc == CLI_HELP ? EXIT_OK : prc;
    const char *store = argv[optind];
    zr_store *s = NULL;
    zr_store_stats st = ZR_STORE_STATS_INIT;
    int rc = cli_open(&s, store, ZR_RDONLY);
    if (rc == EXIT_OK && zr_stats(s, &st) != 0)
        rc = cli_fail_lib(NULL);
    if (rc == EXIT_OK) {
        if (json)
            print_json(s, store, &st);
        else
            print_text(s, store, &st);
        if (fflush(stdout) != 0)
            rc = cli_fail("writing stdout failed");
    }
    zr_close(s);
    return rc;
}

const struct cli_cmd cmd_info = {
    "info", run_info,
    "info STORE [--json]",
    "Describe a store: kind, dtype, item shape, codec, records, space",
    "Space: live bytes are what the records occupy (compressed), chunk bytes what\n"
    "the chunk files hold; the difference is reclaimable by 'zr compact'.\n"
    "\n"
    "Options:\n"
    "  -j, --json        one JSON object instead of text\n"
    "  -h, --help        show this help\n",
};

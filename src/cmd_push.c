/*
 * cmd_push.c: `zr push` and `zr pull`, a store copied to and from an
 * object store (s3://bucket/prefix). The copying, its order and its
 * checks are the library's (zr_push, zr_pull in lib/transfer.c); this
 * file parses the command line, shows the progress in MiB, and after a
 * pull opens the store and, with --verify, checks every record.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

/* The progress meter fed in bytes, shown in MiB. */
struct xfer {
    struct progress prog;
    uint64_t total;
    /* Tests only: LOADERX_TEST_PUSH_KILL_AFTER=BYTES kills zr (SIGKILL)
     * once that many bytes are up and the header is not, the state a
     * push killed half-way leaves (tests/s3/t_push.sh). 0: off. */
    uint64_t kill_after;
};

static void on_progress(void *user, uint64_t done, uint64_t total)
{
    struct xfer *x = user;
    if (x->kill_after && done >= x->kill_after && done < total)
        raise(SIGKILL);
    x->total = total;
    x->prog.total = total >> 20;
    progress_update(&x->prog, done >> 20, done);
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void report(bool quiet, const char *verb, const char *from, const char *to,
                   const struct xfer *x, double t0)
{
    if (quiet)
        return;
    double secs = seconds() - t0, mib = (double)x->total / (1024.0 * 1024.0);
    printf("%s %s to %s: %.1f MiB in %.2f s (%.1f MiB/s)\n", verb, from, to, mib, secs,
           secs > 0 ? mib / secs : 0.0);
}

/* The URL operand: an s3:// address, or a usage error. */
static bool is_s3(const char *url)
{
    return strncmp(url, "s3://", 5) == 0;
}

static int run_push(int argc, char **argv)
{
    bool force = false, quiet = false;
    const struct cli_opt opts[] = {{"force", 'f', &force, NULL}, {"quiet", 'q', &quiet, NULL},
                                   {0}};
    int prc = cli_parse(argc, argv, opts, "STORE URL");
    if (prc != EXIT_OK)
        return prc == CLI_HELP ? EXIT_OK : prc;
    const char *store = argv[optind], *url = argv[optind + 1];
    if (!is_s3(url) || is_s3(store))
        return cli_usage("push takes a local STORE and an s3://bucket/prefix URL");
    struct xfer x = {0};
    const char *kill = getenv("LOADERX_TEST_PUSH_KILL_AFTER");
    if (kill && !cli_parse_u64(kill, &x.kill_after))
        return cli_usage("LOADERX_TEST_PUSH_KILL_AFTER='%s' is not a byte count", kill);
    double t0 = seconds();
    progress_start(&x.prog, quiet, "MiB", 0);
    int zrc = zr_push(store, url, force ? ZR_PUSH_FORCE : 0, on_progress, &x);
    progress_end(&x.prog);
    if (zrc != 0)
        return cli_fail_lib(NULL);
    report(quiet, "pushed", store, url, &x, t0);
    return fflush(stdout) == 0 ? EXIT_OK : cli_fail("writing stdout failed");
}

/* --mode OCTAL: one to four octal digits within 0777 that let the owner
 * read and write (zr_pull_mode refuses others too; this names the option). */
static bool parse_mode(const char *s, unsigned *out)
{
    size_t n = strspn(s, "01234567");
    if (n == 0 || n > 4 || s[n] != '\0')
        return false;
    unsigned m = (unsigned)strtoul(s, NULL, 8);
    if ((m & ~0777u) || (m & 0600) != 0600)
        return false;
    *out = m;
    return true;
}

static int run_pull(int argc, char **argv)
{
    bool force = false, quiet = false, verify = false;
    const char *mode_arg = NULL;
    const struct cli_opt opts[] = {{"force", 'f', &force, NULL},
                                   {"verify", 'v', &verify, NULL},
                                   {"quiet", 'q', &quiet, NULL},
                                   {"mode", 'm', NULL, &mode_arg},
                                   {0}};
    int prc = cli_parse(argc, argv, opts, "URL STORE");
    if (prc != EXIT_OK)
        return prc == CLI_HELP ? EXIT_OK : prc;
    const char *url = argv[optind], *store = argv[optind + 1];
    if (!is_s3(url) || is_s3(store))
        return cli_usage("pull takes an s3://bucket/prefix URL and a local STORE");
    unsigned mode = ZR_PULL_MODE_DEFAULT;
    if (mode_arg && !parse_mode(mode_arg, &mode))
        return cli_usage("--mode '%s' is not an octal file mode of 0600 to 0777 that "
                         "lets the owner read and write", mode_arg);
    struct xfer x = {0};
    double t0 = seconds();
    progress_start(&x.prog, quiet, "MiB", 0);
    int zrc = zr_pull_mode(url, store, force ? ZR_PULL_FORCE : 0, mode, on_progress, &x);
    progress_end(&x.prog);
    if (zrc != 0)
        return cli_fail_lib(NULL);
    report(quiet, "pulled", url, store, &x, t0);
    zr_store *s = NULL;
    int rc = cli_open(&s, store, ZR_RDONLY);
    if (rc == EXIT_OK && verify)
        rc = cli_verify(s, store, quiet);
    zr_close(s);
    if (rc == EXIT_OK && fflush(stdout) != 0)
        rc = cli_fail("writing stdout failed");
    return rc;
}

const struct cli_cmd cmd_push = {
    "push", run_push,
    "push STORE URL [-f] [-q]",
    "Upload a store to an object store (URL is s3://bucket/prefix)",
    "The store's files become objects under the prefix, byte for byte, several at\n"
    "once (large ones as multipart uploads). The store stays open read-only to the\n"
    "end, so no writer changes it meanwhile; one with an unfinished delete or\n"
    "compaction is refused. meta.zr goes up last, after every other object: until\n"
    "then the prefix is no store to any reader, so a push that fails or is killed\n"
    "leaves nothing a reader takes for one (push --force again finishes it).\n"
    "Afterwards the listing is checked against the local sizes and MD5s (the ETags)\n"
    "and the remote store is opened and compared with the local one.\n"
    "\n"
    "Of pushes racing to one prefix, one wins: each first claims the empty prefix\n"
    "by creating push.claim only if it does not exist (If-None-Match: *), and\n"
    "sends meta.zr the same way; a push that loses fails, sending nothing of its\n"
    "store. A push that fails leaves its claim; --force clears it.\n"
    "\n"
    "A prefix holding any object is refused unless --force: then the old meta.zr\n"
    "is deleted first, the store uploaded, the old store's other objects removed,\n"
    "and meta.zr sent last. Objects deeper under the prefix (prefix/sub/...) are\n"
    "left alone. Readers that have the old store open must open it again.\n"
    "\n"
    "The S3 configuration is the AWS tools' (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,\n"
    "AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_PROFILE and ~/.aws): see zr(1).\n"
    "Prints the bytes sent and the rate unless -q; a progress meter on stderr when\n"
    "it is a terminal.\n"
    "\n"
    "Options:\n"
    "  -f, --force       replace what the prefix holds\n"
    "  -q, --quiet       print nothing on success, no progress\n"
    "  -h, --help        show this help\n",
};

const struct cli_cmd cmd_pull = {
    "pull", run_pull,
    "pull URL STORE [-f] [--verify] [-m OCTAL] [-q]",
    "Download a store from an object store into a local folder",
    "The objects come down into a new folder beside STORE (STORE.part-XXXXXX),\n"
    "many ranges at once, are synced and checked against a second listing, the\n"
    "copy is opened, and only then is the folder renamed to STORE: STORE holds the\n"
    "whole store or nothing. A prefix without meta.zr is refused (its upload has\n"
    "not finished). An existing STORE is refused unless --force, and even then is\n"
    "replaced (in one atomic exchange) only when it holds nothing but a store's\n"
    "files and no one has it open. The pulled store is opened; --verify then checks\n"
    "every record as 'zr verify' does.\n"
    "\n"
    "A pull that fails removes its folder; one killed leaves STORE.part-XXXXXX,\n"
    "which may be removed.\n"
    "\n"
    "The pulled files are 0600 and STORE 0700, whatever the umask, as the cache\n"
    "keeps the same bytes; --mode sets the files' mode exactly (0600 to 0777, the\n"
    "owner's rw included), and STORE's is the same with x added where r is set\n"
    "(--mode 0644 gives a 0755 folder).\n"
    "\n"
    "Options:\n"
    "  -f, --force       replace an existing local store\n"
    "  -v, --verify      check every record after the pull\n"
    "  -m, --mode OCTAL  the files' mode (default 0600)\n"
    "  -q, --quiet       print nothing on success, no progress\n"
    "  -h, --help        show this help\n",
};

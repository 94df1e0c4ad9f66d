/*
 * cli.c: the plumbing every zr subcommand shares.
 *
 * zr promises the same behaviour everywhere: one-line messages of the form
 * "zr: <command>: <message>" on stderr, exit status 1 for failures and 2
 * for usage errors, strict parsing of every argument, outputs that appear
 * whole or not at all, and stores that a failed creation takes back. This
 * file is where those promises are kept, so the commands can stay about
 * their own work.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "common/decimal.h"
#include "common/readfull.h"

const struct cli_cmd *cli_current;
volatile sig_atomic_t cli_interrupted;

static void vmessage(const char *fmt, va_list ap)
{
    fprintf(stderr, "zr: ");
    if (cli_current)
        fprintf(stderr, "%s: ", cli_current->name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int cli_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
    return EXIT_FAIL;
}

int cli_fail_lib(const char *context)
{
    /* The library's message names the file and says what is wrong; only
     * corruption gets a word of the code's meaning, because the message
     * alone may not say it. */
    const char *prefix = zr_last_error_code() == ZR_ECORRUPT ? "corrupt store: " : "";
    if (context)
        return cli_fail("%s: %s%s", context, prefix, zr_last_error());
    return cli_fail("%s%s", prefix, zr_last_error());
}

int cli_usage(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (cli_current)
        fprintf(stderr, "zr: %s: %s (see 'zr %s --help')\n", cli_current->name, buf,
                cli_current->name);
    else
        fprintf(stderr, "zr: %s (see 'zr --help')\n", buf);
    return EXIT_USAGE;
}

int cli_print_help(const struct cli_cmd *cmd)
{
    printf("Usage: zr %s\n\n%s.\n", cmd->synopsis, cmd->summary);
    if (cmd->help && *cmd->help)
        printf("\n%s", cmd->help);
    printf("\nExit status: 0 on success, 1 on failure, 2 on a usage error.\n");
    return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
}

int cli_help(void)
{
    return cli_print_help(cli_current);
}

/* getopt_long over argv, permuting options after operands. Returns the
 * option, -1 at the end, CLI_HELP for -h/--help (the help printed), or
 * EXIT_USAGE after printing a usage error. */
static int next_option(int argc, char **argv, const char *shortopts,
                       const struct option *longopts)
{
    /* The leading ':' makes getopt report a missing value apart from an
     * unknown option; opterr = 0 leaves every message to us. */
    opterr = 0;
    int c = getopt_long(argc, argv, shortopts, longopts, NULL);
    const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
    switch (c) {
    case 'h':
        cli_help();
        return CLI_HELP;
    case ':':
        return cli_usage("option '%s' needs a value", arg);
    case '?':
        if (optopt && optopt != '?')
            return cli_usage("unknown option '-%c'", optopt);
        return cli_usage("unknown option '%s'", arg);
    default:
        return c;
    }
}

/* Check the operands argv[optind..argc) against the words of names. */
static int check_operands(int argc, const char *names)
{
    int have = argc - optind, want = 0;
    bool more = false;
    char word[32];
    for (const char *p = names; *p;) {
        size_t n = strcspn(p, " ");
        more = n >= 3 && strncmp(p + n - 3, "...", 3) == 0;
        /* A bare "..." names nothing that must be there. */
        if (!(more && n == 3)) {
            if (want == have) {
                snprintf(word, sizeof word, "%.*s", (int)(more ? n - 3 : n), p);
                return cli_usage("missing %s", word);
            }
            want++;
        }
        p += n + (p[n] == ' ');
    }
    return have > want && !more ? cli_usage("too many operands") : EXIT_OK;
}

int cli_parse(int argc, char **argv, const struct cli_opt *opts, const char *operands)
{
    enum { MAX_OPTS = 16 };
    struct option longopts[MAX_OPTS + 2];
    char shortopts[3 * MAX_OPTS + 4] = ":h";
    size_t n = 0, len = 2;
    for (; opts[n].name; n++) {
        assert(n < MAX_OPTS);
        longopts[n] = (struct option){opts[n].name, opts[n].value ? required_argument : no_argument,
                                      NULL, opts[n].key};
        shortopts[len++] = opts[n].key;
        if (opts[n].value)
            shortopts[len++] = ':';
    }
    shortopts[len] = '\0';
    longopts[n] = (struct option){"help", no_argument, NULL, 'h'};
    longopts[n + 1] = (struct option){NULL, 0, NULL, 0};
    int c;
    while ((c = next_option(argc, argv, shortopts, longopts)) != -1) {
        if (c == CLI_HELP || c == EXIT_USAGE)
            return c;
        for (size_t k = 0; k < n; k++)
            if (opts[k].key == c) {
                if (opts[k].value)
                    *opts[k].value = optarg;
                else
                    *opts[k].flag = true;
            }
    }
    return check_operands(argc, operands);
}

bool cli_parse_u64(const char *s, uint64_t *out)
{
    /* Leading zeros are allowed: seq -w and printf %05d write them. */
    return s && dec_parse(s, strlen(s), false, out);
}

bool cli_parse_codec(const char *s, int *codec)
{
    static const int codecs[] = {ZR_CODEC_RAW, ZR_CODEC_ZSTD, ZR_CODEC_ZSTD_DICT};
    for (size_t i = 0; i < sizeof codecs / sizeof codecs[0]; i++)
        if (strcmp(s, zr_codec_name(codecs[i])) == 0) {
            *codec = codecs[i];
            return true;
        }
    return false;
}

bool cli_parse_tier(const char *s, int *tier)
{
    static const char *const names[] = {"fast", "balanced", "max"};
    static const int tiers[] = {ZR_TIER_FAST, ZR_TIER_BALANCED, ZR_TIER_MAX};
    for (size_t i = 0; i < 3; i++)
        if (strcmp(s, names[i]) == 0) {
            *tier = tiers[i];
            return true;
        }
    return false;
}

int cli_codec_option(const char *arg, int *codec)
{
    if (arg && !cli_parse_codec(arg, codec))
        return cli_usage("unknown codec '%s' (raw, zstd or zstd_dict)", arg);
    return EXIT_OK;
}

int cli_tier_option(const char *arg, int *tier)
{
    if (arg && !cli_parse_tier(arg, tier))
        return cli_usage("unknown tier '%s' (fast, balanced or max)", arg);
    return EXIT_OK;
}

bool cli_parse_shape(const char *s, uint64_t *shape, uint32_t *ndim, uint32_t max)
{
    *ndim = 0;
    if (*s == '\0')
        return true;
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (*ndim == max || !dec_parse(s, len, false, &shape[*ndim]))
            return false;
        (*ndim)++;
        if (!comma)
            return true;
        s = comma + 1;
    }
}

int cli_parse_ranges(const char *const *ops, int nops, uint64_t length, struct cli_range **out,
                     size_t *n)
{
    struct cli_range *r = malloc((nops > 0 ? (size_t)nops : 1) * sizeof *r);
    if (!r)
        return cli_fail("out of memory");
    int rc = EXIT_OK;
    for (int i = 0; i < nops && rc == EXIT_OK; i++) {
        const char *op = ops[i];
        const char *colon = strchr(op, ':');
        uint64_t lo = 0, hi = length;
        if (!colon) {
            if (!cli_parse_u64(op, &lo))
                rc = cli_usage("'%s' is not an index (INDEX or A:B)", op);
            else if (lo >= length)
                rc = cli_fail("index %s is out of range: the store holds %llu records", op,
                              (unsigned long long)length);
            hi = lo + 1;
        } else {
            size_t alen = (size_t)(colon - op);
            bool ok = alen == 0 || dec_parse(op, alen, false, &lo);
            if (ok && colon[1] != '\0')
                ok = cli_parse_u64(colon + 1, &hi);
            if (!ok)
                rc = cli_usage("'%s' is not an index (INDEX or A:B)", op);
            else if (lo > hi)
                rc = cli_usage("range %s is reversed", op);
            else if (hi > length)
                rc = cli_fail("range %s is out of range: the store holds %llu records", op,
                              (unsigned long long)length);
        }
        r[i] = (struct cli_range){lo, hi};
    }
    if (rc != EXIT_OK) {
        free(r);
        return rc;
    }
    *out = r;
    *n = (size_t)nops;
    return EXIT_OK;
}

int cli_write_all(int fd, const void *buf, size_t len, const char *what)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return cli_fail("writing %s: %s", what, strerror(errno));
        p += w;
        len -= (size_t)w;
    }
    return EXIT_OK;
}

int cli_read_file(const char *path, uint64_t max, void **buf, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    uint8_t *data = NULL;
    int rc = EXIT_OK;
    struct stat st;
    if (fd < 0)
        return cli_fail("%s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0)
        rc = cli_fail("%s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = cli_fail("%s: not a regular file", path);
    else if ((uint64_t)st.st_size > max)
        rc = cli_fail("%s: %llu bytes is more than the %llu allowed", path,
                      (unsigned long long)st.st_size, (unsigned long long)max);
    else if (!(data = malloc(st.st_size ? (size_t)st.st_size : 1)))
        rc = cli_fail("%s: out of memory", path);
    if (rc == EXIT_OK)
        rc = cli_pread_all(fd, data, (size_t)st.st_size, 0, path);
    close(fd);
    if (rc != EXIT_OK) {
        free(data);
        return rc;
    }
    *buf = data;
    *len = (size_t)st.st_size;
    return EXIT_OK;
}

int cli_pread_all(int fd, void *buf, size_t len, uint64_t off, const char *path)
{
    int r = pread_full(fd, buf, len, off);
    if (r < 0)
        return cli_fail("%s: %s", path, strerror(errno));
    if (r > 0)
        return cli_fail("%s: the file shrank while being read", path);
    return EXIT_OK;
}

/* Where an existing OUT is a FIFO or a character device, the output is
 * written into it as cp would: renaming a temporary file over it would
 * replace the device itself (run as root, /dev/full became a plain file).
 * A symlink is followed, so the file it names is the one replaced. */
static int out_open_stream(struct cli_out *o, const char *path, const struct stat *st)
{
    if (S_ISDIR(st->st_mode))
        return cli_fail("%s is a directory; name the .npy file to write", path);
    if (!S_ISCHR(st->st_mode) && !S_ISFIFO(st->st_mode))
        return cli_fail("%s is a %s; only a regular file, a FIFO or a character device "
                        "can be written",
                        path, S_ISBLK(st->st_mode) ? "block device" : "socket or special file");
    o->path = strdup(path);
    if (!o->path)
        return cli_fail("out of memory");
    o->fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (o->fd < 0) {
        int e = errno;
        free(o->path);
        *o = (struct cli_out){.fd = -1};
        return cli_fail("%s: %s", path, strerror(e));
    }
    struct stat now;
    if (fstat(o->fd, &now) != 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
        cli_out_abort(o);
        return cli_fail("%s changed while it was opened", path);
    }
    return EXIT_OK;
}

int cli_out_open(struct cli_out *o, const char *path)
{
    *o = (struct cli_out){.fd = -1};
    if (strcmp(path, "-") == 0) {
        o->fd = STDOUT_FILENO;
        return EXIT_OK;
    }
    struct stat st;
    char *target = NULL;
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT)
            return cli_fail("%s: %s", path, strerror(errno));
        st.st_mode = S_IFREG; /* nothing there yet: a new file */
    } else if (S_ISLNK(st.st_mode)) {
        /* stat follows the link: /dev/stdout to a pipe names no path that
         * realpath could give, but opens as the pipe. Only a regular file
         * is renamed over, so only its path is needed. */
        if (stat(path, &st) != 0)
            return cli_fail("%s is a symlink whose target cannot be reached: %s", path,
                            strerror(errno));
        if (S_ISREG(st.st_mode) && !(target = realpath(path, NULL)))
            return cli_fail("%s: %s", path, strerror(errno));
    }
    if (!S_ISREG(st.st_mode))
        return out_open_stream(o, path, &st);
    const char *dest = target ? target : path;
    size_t n = strlen(dest) + 16;
    o->path = target ? target : strdup(path);
    o->tmp = malloc(n);
    if (!o->path || !o->tmp) {
        cli_out_abort(o);
        return cli_fail("out of memory");
    }
    snprintf(o->tmp, n, "%s.tmp-XXXXXX", dest);
    o->fd = mkostemp(o->tmp, O_CLOEXEC);
    if (o->fd < 0) {
        int e = errno;
        free(o->tmp);
        o->tmp = NULL;
        cli_out_abort(o);
        return cli_fail("%s: %s", path, strerror(e));
    }
    /* mkstemp makes the file 0600; give it the mode a plain creat would. */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(o->fd, 0666 & ~mask);
    return EXIT_OK;
}

int cli_out_commit(struct cli_out *o)
{
    int rc = EXIT_OK;
    if (!o->path)
        return EXIT_OK;
    /* A FIFO or a device has nothing to make durable, and no name to
     * rename: its close is the end of the output. */
    if (o->tmp && fsync(o->fd) != 0)
        rc = cli_fail("%s: %s", o->path, strerror(errno));
    if (close(o->fd) != 0 && rc == EXIT_OK)
        rc = cli_fail("%s: %s", o->path, strerror(errno));
    o->fd = -1;
    /* What was a regular file or nothing at open may have been replaced
     * since: a device or FIFO put there meanwhile is left alone. */
    struct stat now;
    if (rc == EXIT_OK && o->tmp && lstat(o->path, &now) == 0 && !S_ISREG(now.st_mode))
        rc = cli_fail("%s was replaced by something other than a regular file while it "
                      "was written; it is left as it is",
                      o->path);
    if (rc == EXIT_OK && o->tmp && rename(o->tmp, o->path) != 0)
        rc = cli_fail("%s: %s", o->path, strerror(errno));
    if (rc != EXIT_OK) {
        cli_out_abort(o);
        return rc;
    }
    free(o->tmp);
    free(o->path);
    *o = (struct cli_out){.fd = -1};
    return EXIT_OK;
}

void cli_out_abort(struct cli_out *o)
{
    if (o->path && o->fd >= 0)
        close(o->fd);
    if (o->tmp)
        unlink(o->tmp);
    free(o->tmp);
    free(o->path);
    *o = (struct cli_out){.fd = -1};
}

int cli_create_begin(struct cli_created *c, const char *store)
{
    *c = (struct cli_created){0};
    char *marker = NULL;
    struct stat st;
    if (asprintf(&marker, "%s/store.zr", store) < 0)
        return cli_fail("out of memory");
    bool exists = stat(marker, &st) == 0;
    free(marker);
    if (exists)
        return cli_fail("%s already holds a store", store);
    c->store = strdup(store);
    if (!c->store)
        return cli_fail("out of memory");
    /* Find the highest folder of the path that does not exist yet: creation
     * makes it and everything below, so undoing removes exactly that. */
    char *p = strdup(store);
    if (!p) {
        cli_create_end(c);
        return cli_fail("out of memory");
    }
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/')
        p[--len] = '\0';
    for (;;) {
        if (lstat(p, &st) == 0 || errno != ENOENT)
            break;
        free(c->remove_root);
        c->remove_root = strdup(p);
        char *slash = strrchr(p, '/');
        if (!slash || slash == p)
            break;
        *slash = '\0';
    }
    free(p);
    return EXIT_OK;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* Inside a folder that existed before, remove only the store's own files,
 * store.zr first so that the store stops existing before anything else
 * goes. */
static void remove_store_files(const char *store)
{
    static const char *const fixed[] = {"store.zr", "meta.zr", "dict.zr", "intent.zr"};
    char path[4096];
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", store, fixed[i]);
        unlink(path);
    }
    static const char *const suffixes[] = {"chunk", "loc"};
    for (size_t k = 0; k < 2; k++)
        for (unsigned id = 0;; id++) {
            snprintf(path, sizeof path, "%s/%u.%s", store, id, suffixes[k]);
            if (unlink(path) != 0)
                break;
        }
}

void cli_create_undo(struct cli_created *c)
{
    if (!c->store)
        return;
    if (c->remove_root)
        nftw(c->remove_root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    else
        remove_store_files(c->store);
}

void cli_create_end(struct cli_created *c)
{
    free(c->store);
    free(c->remove_root);
    *c = (struct cli_created){0};
}

int cli_open(zr_store **s, const char *path, int mode)
{
    if (zr_open(s, path, mode) != 0)
        return cli_fail_lib(NULL);
    return EXIT_OK;
}

static void on_signal(int sig)
{
    (void)sig;
    cli_interrupted = 1;
}

void cli_catch_signals(void)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

int cli_check_interrupt(void)
{
    return cli_interrupted ? cli_fail("interrupted") : EXIT_OK;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void progress_start(struct progress *p, bool quiet, const char *unit, uint64_t total)
{
    *p = (struct progress){.on = !quiet && isatty(STDERR_FILENO), .unit = unit, .total = total};
    p->start = p->last = now();
}

void progress_update(struct progress *p, uint64_t done, uint64_t bytes)
{
    if (!p->on)
        return;
    double t = now();
    /* A few redraws a second are plenty and cost nothing measurable. */
    if (t - p->last < 0.25 && done < p->total)
        return;
    p->last = t;
    double secs = t - p->start;
    double rate = secs > 0 ? (double)bytes / secs / (1024.0 * 1024.0) : 0.0;
    fprintf(stderr, "\rzr %s: %llu", cli_current->name, (unsigned long long)done);
    if (p->total)
        fprintf(stderr, "/%llu", (unsigned long long)p->total);
    fprintf(stderr, " %s", p->unit);
    if (bytes > 0)
        fprintf(stderr, ", %.1f MiB/s", rate);
    if (p->total && done > 0 && done < p->total) {
        double eta = secs * (double)(p->total - done) / (double)done;
        fprintf(stderr, ", ETA %d:%02d", (int)(eta / 60), (int)eta % 60);
    }
    fprintf(stderr, "\033[K");
}

void progress_callback(void *user, uint64_t done, uint64_t total)
{
    struct progress *p = user;
    p->total = total;
    progress_update(p, done, 0);
}

void progress_end(struct progress *p)
{
    if (p->on)
        fputc('\n', stderr);
    p->on = false;
}

void cli_format_shape(char *buf, size_t cap, const uint64_t *shape, uint32_t ndim)
{
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (uint32_t d = 0; d < ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%llu", d ? ", " : "",
                              (unsigned long long)shape[d]);
    if (n < cap)
        snprintf(buf + n, cap - n, "%s)", ndim == 1 ? "," : "");
}

int cli_verify(zr_store *s, const char *store, bool quiet)
{
    zr_verify_report *rep = NULL;
    struct progress prog;
    progress_start(&prog, quiet, "records", zr_len(s));
    zr_set_progress(s, progress_callback, &prog);
    int zrc = zr_verify(s, &rep);
    progress_end(&prog);
    zr_set_progress(s, NULL, NULL);
    /* A report comes back whenever the scan ran, even one a file stopped
     * (it lists that file last); without one, the error says it all. */
    if (!rep)
        return cli_fail_lib(NULL);
    int rc = EXIT_OK;
    for (size_t k = 0; k < rep->nlisted; k++) {
        const zr_problem *p = zr_verify_problem(rep, k);
        if (!p->file[0])
            printf("%s: %s\n", store, p->what);
        else if (p->entry == UINT64_MAX)
            printf("%s/%s: %s\n", store, p->file, p->what);
        else
            printf("%s/%s: record %llu: %s\n", store, p->file, (unsigned long long)p->entry,
                   p->what);
    }
    if (rep->nproblems > rep->nlisted)
        printf("%s: %llu more problems not listed\n", store,
               (unsigned long long)(rep->nproblems - rep->nlisted));
    if (rep->nproblems == 0 && !quiet)
        printf("%s: %llu records checked, no problems\n", store,
               (unsigned long long)rep->records_checked);
    if (fflush(stdout) != 0)
        rc = cli_fail("writing stdout failed");
    else if (zrc != 0 && zrc != ZR_ECORRUPT)
        rc = cli_fail_lib(NULL);
    else if (rep->nproblems > 0 || zrc == ZR_ECORRUPT)
        rc = cli_fail("%s: %llu problem%s found in %llu records", store,
                      (unsigned long long)rep->nproblems, rep->nproblems == 1 ? "" : "s",
                      (unsigned long long)rep->records_checked);
    zr_verify_report_free(rep);
    return rc;
}

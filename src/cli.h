/*
 * cli.h: what the subcommands of zr share: the command table, messages
 * and exit codes, option parsing, argument parsers, file helpers, store
 * creation that can be undone, and the progress meter.
 */
#ifndef ZR_CLI_H
#define ZR_CLI_H

#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <loaderx/loaderx.h>

/* Exit codes (documented in zr(1)). */
#define EXIT_OK 0
#define EXIT_FAIL 1  /* the command failed, or verify found problems */
#define EXIT_USAGE 2 /* the command line is wrong */

/* Records or bytes handled per batch by the streaming commands: large
 * enough to keep every core busy, small enough to bound memory. */
#define CLI_BATCH_BYTES ((uint64_t)32 << 20)
#define CLI_BATCH_RECORDS 65536

struct cli_cmd {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
    const char *synopsis;              /* the usage line(s), without "zr " */
    const char *summary;               /* one line for `zr --help` */
    const char *help;                  /* the options and details */
};

extern const struct cli_cmd *const cli_commands[];
extern const size_t cli_ncommands;

/* The subcommands, each defined in its src/cmd_*.c. */
extern const struct cli_cmd cmd_create, cmd_import, cmd_append, cmd_export, cmd_cat, cmd_info,
    cmd_delete, cmd_compact, cmd_verify, cmd_train_dict, cmd_recode, cmd_mount, cmd_push,
    cmd_pull;
/* The command running now; messages name it. */
extern const struct cli_cmd *cli_current;

/* Print "zr: <command>: <message>" on stderr and return EXIT_FAIL. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same for a failed libloaderx call: its last-error message,
 * optionally prefixed by what was being done. */
int cli_fail_lib(const char *context);
/* A usage error: the message, a pointer to --help; returns EXIT_USAGE. */
int cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print the help of the current command on stdout; returns EXIT_OK. */
int cli_help(void);
int cli_print_help(const struct cli_cmd *cmd);

/* One option of a command: --name and -key, and what it does: set *flag,
 * or keep its value in *value (the last one given wins). */
struct cli_opt {
    const char *name;
    char key;
    bool *flag;
    const char **value;
};

/* Parse a command's argv: its options (opts ends with a zeroed entry;
 * -h and --help are added), permuted with its operands, which must then
 * match the words of operands: "STORE OUT.npy" takes exactly two, and a
 * last word ending in "..." any number more ("STORE INDEX..." at least
 * two, "STORE ..." at least one). The operands start at argv[optind].
 * Returns EXIT_OK, CLI_HELP after printing the command's help (the
 * command then returns EXIT_OK), or EXIT_USAGE after a usage message
 * (an unknown option, a missing value, the first missing operand, or too
 * many operands). */
#define CLI_HELP -100
int cli_parse(int argc, char **argv, const struct cli_opt *opts, const char *operands);

/* Strict parsers for arguments; false (and no message) on bad input. */
bool cli_parse_u64(const char *s, uint64_t *out);
bool cli_parse_codec(const char *s, int *codec);
bool cli_parse_tier(const char *s, int *tier);
/* The value of --codec or --tier: EXIT_OK (a NULL arg leaves *out as it
 * is) or a usage error naming the choices. */
int cli_codec_option(const char *arg, int *codec);
int cli_tier_option(const char *arg, int *tier);
/* "D0,D1,..." ("" for a scalar item shape) into shape[], at most max. */
bool cli_parse_shape(const char *s, uint64_t *shape, uint32_t *ndim, uint32_t max);

/* An index operand: INDEX or A:B (either side may be omitted), checked
 * against the store's length. A list of them, as ranges [lo, hi). */
struct cli_range {
    uint64_t lo, hi;
};
/* Parse operands; returns EXIT_OK, or EXIT_USAGE for bad syntax, or
 * EXIT_FAIL for an index out of range (messages printed). */
int cli_parse_ranges(const char *const *ops, int nops, uint64_t length, struct cli_range **out,
                     size_t *n);

/* Writing: every byte or a message. fd 1 errors are reported as stdout. */
int cli_write_all(int fd, const void *buf, size_t len, const char *what);
/* Read a whole regular file of at most max bytes into a malloc'd buffer. */
int cli_read_file(const char *path, uint64_t max, void **buf, size_t *len);
/* Read len bytes at offset off of fd (the file at path), or say why not:
 * a failed read, or a file that ends first. */
int cli_pread_all(int fd, void *buf, size_t len, uint64_t off, const char *path);

/* An output file written under a temporary name and renamed into place
 * when complete, so a failure never leaves a partial file (or clobbers an
 * existing one). "-" means stdout; a FIFO or character device is written
 * into, a symlink is followed, and nothing else but a regular file is
 * ever replaced. */
struct cli_out {
    int fd;
    char *path; /* NULL for stdout */
    char *tmp;
};
int cli_out_open(struct cli_out *o, const char *path);
int cli_out_commit(struct cli_out *o); /* fsync, rename; EXIT_OK or EXIT_FAIL */
void cli_out_abort(struct cli_out *o); /* remove the temporary file */

/* Creating a store so that a failure can take it back: cli_create_begin
 * notes which part of the path does not exist yet (and refuses a path
 * that already holds a store); cli_create_undo removes what creation
 * made; cli_create_end forgets the notes. */
struct cli_created {
    char *store;
    char *remove_root; /* the first missing folder of the path, or NULL */
};
int cli_create_begin(struct cli_created *c, const char *store);
void cli_create_undo(struct cli_created *c);
void cli_create_end(struct cli_created *c);

/* Open a store, reporting a failure. */
int cli_open(zr_store **s, const char *path, int mode);

/* zr verify of an open store: a progress meter, the problems on stdout,
 * one line of summary (unless quiet); EXIT_FAIL when there are problems
 * or the scan could not run. */
int cli_verify(zr_store *s, const char *store, bool quiet);

/* SIGINT and SIGTERM set cli_interrupted instead of killing the process,
 * so the long commands stop cleanly (and import removes its store). */
extern volatile sig_atomic_t cli_interrupted;
void cli_catch_signals(void);
int cli_check_interrupt(void);

/* A progress meter on stderr: records done, MiB/s, ETA. Silent unless
 * stderr is a terminal, and silent with -q. */
struct progress {
    bool on;
    const char *unit;
    uint64_t total;
    double start, last;
};
void progress_start(struct progress *p, bool quiet, const char *unit, uint64_t total);
void progress_update(struct progress *p, uint64_t done, uint64_t bytes);
void progress_end(struct progress *p);
/* A zr_progress_fn that feeds a struct progress (records only, no bytes). */
void progress_callback(void *user, uint64_t done, uint64_t total);

/* Human-readable shape "(3, 224, 224)" into buf. */
void cli_format_shape(char *buf, size_t cap, const uint64_t *shape, uint32_t ndim);

#endif

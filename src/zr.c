/*
 * zr.c: the entry point of zr, the command-line tool for loaderx stores.
 *
 * zr is a dispatcher in the manner of git: the first word picks a
 * subcommand, which parses the rest itself. This file holds the table of
 * subcommands, the global help and version, and nothing else; each
 * subcommand lives in its own src/cmd_*.c.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* The subcommands, in the order `zr --help` lists them. */
const struct cli_cmd *const cli_commands[] = {
    &cmd_create, &cmd_import, &cmd_append,     &cmd_export, &cmd_cat,    &cmd_info,
    &cmd_delete, &cmd_compact, &cmd_verify, &cmd_train_dict, &cmd_recode, &cmd_mount,
    &cmd_push,   &cmd_pull,
};
const size_t cli_ncommands = sizeof cli_commands / sizeof cli_commands[0];

static const struct cli_cmd *find_command(const char *name)
{
    for (size_t i = 0; i < cli_ncommands; i++)
        if (strcmp(cli_commands[i]->name, name) == 0)
            return cli_commands[i];
    return NULL;
}

static int global_help(void)
{
    printf("Usage: zr COMMAND [ARGS...]\n"
           "       zr COMMAND --help\n"
           "       zr --version\n\n"
           "zr creates, fills, reads and checks loaderx record stores.\n\n"
           "Commands:\n");
    for (size_t i = 0; i < cli_ncommands; i++)
        printf("  %-11s %s\n", cli_commands[i]->name, cli_commands[i]->summary);
    printf("\n'zr help COMMAND' or 'zr COMMAND --help' describes a command; zr(1) has\n"
           "the details.\n\n"
           "Exit status: 0 on success, 1 on failure (including problems found by\n"
           "verify), 2 on a usage error.\n");
    return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
}

/* zr's version, and the library's when the one it runs against is not
 * the one it was built with. */
static int version(void)
{
    if (strcmp(zr_version_string(), ZR_VERSION_STRING) == 0)
        printf("zr (loaderx) %s\n", ZR_VERSION_STRING);
    else
        printf("zr (loaderx) %s, running libloaderx %s\n", ZR_VERSION_STRING,
               zr_version_string());
    return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage("no command given");
    const char *word = argv[1];
    if (strcmp(word, "--help") == 0 || strcmp(word, "-h") == 0)
        return global_help();
    if (strcmp(word, "--version") == 0 || strcmp(word, "-V") == 0)
        return version();
    if (strcmp(word, "help") == 0) {
        if (argc == 2)
            return global_help();
        const struct cli_cmd *cmd = find_command(argv[2]);
        if (!cmd || argc > 3)
            return cli_usage("'help' takes one command name");
        return cli_print_help(cmd);
    }
    if (word[0] == '-')
        return cli_usage("unknown option '%s'", word);
    cli_current = find_command(word);
    if (!cli_current)
        return cli_usage("'%s' is not a zr command", word);
    return cli_current->run(argc - 1, argv + 1);
}

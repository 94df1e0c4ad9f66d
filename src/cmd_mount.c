/*
 * cmd_mount.c: `zr mount`, the same as running zrecordfs.
 *
 * zr does not link libfuse; it hands its arguments to the zrecordfs
 * program, looked for first next to the zr binary (the two are installed
 * together) and then on PATH.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static int run_mount(int argc, char **argv)
{
    /* Only --help is zr's own; every other argument belongs to zrecordfs,
     * whose options (-o ro, -o npy, -f ...) zr does not second-guess. */
    int operands = 0;
    bool version = false; /* zrecordfs's --version needs no operands */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return cli_help();
        if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-V") == 0)
            version = true;
        else if (strcmp(argv[i], "-o") == 0)
            i++;
        else if (argv[i][0] != '-')
            operands++;
    }
    if (operands < 2 && !version)
        return cli_usage("missing ROOT or MOUNTPOINT");

    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args)
        return cli_fail("out of memory");
    args[0] = (char *)"zrecordfs";
    for (int i = 1; i < argc; i++)
        args[i] = argv[i];

    char self[PATH_MAX], beside[PATH_MAX + 16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            snprintf(beside, sizeof beside, "%s/zrecordfs", self);
            if (access(beside, X_OK) == 0) {
                execv(beside, args);
                int e = errno;
                free(args);
                return cli_fail("running %s: %s", beside, strerror(e));
            }
        }
    }
    execvp("zrecordfs", args);
    int e = errno;
    free(args);
    if (e == ENOENT)
        return cli_fail("zrecordfs was not found next to zr%s%s or on PATH; install loaderx's "
                        "zrecordfs to mount stores",
                        n > 0 ? " in " : "", n > 0 ? self : "");
    return cli_fail("running zrecordfs: %s", strerror(e));
}

const struct cli_cmd cmd_mount = {
    "mount", run_mount,
    "mount ROOT MOUNTPOINT [-o OPTIONS] [zrecordfs options...]",
    "Mount stores as folders of per-record files (runs zrecordfs)",
    "ROOT is a store or a folder holding stores. Every argument is passed on to\n"
    "zrecordfs, found next to zr or on PATH; see zrecordfs(1) for its options\n"
    "(-o ro, -o rw, -o npy, -o ext=.jpg, -o noopen). Unmount with\n"
    "'fusermount3 -u MOUNTPOINT'.\n"
    "\n"
    "Options:\n"
    "  -o OPTIONS        mount options, passed to zrecordfs\n"
    "  -h, --help        show this help\n",
};

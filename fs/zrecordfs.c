/*
 * zrecordfs.c: the program. Parses the command line, goes to the
 * background, scans ROOT and opens its stores, mounts, and runs the FUSE
 * loop (on two CPUs or fewer one thread, loop.c; otherwise libfuse's
 * multi-threaded loop) until the file system is unmounted (fusermount3 -u,
 * umount) or a signal (SIGTERM, SIGINT, SIGHUP) asks it to stop, then
 * unmounts and releases the stores.
 *
 * The order matters. A handle belongs to the process that opened it (a
 * forked child may not write through it), so the daemon opens the stores
 * itself, after the fork. The starter waits on a pipe until the daemon
 * has opened them and mounted, and exits with the daemon's status: a
 * refusal (no store under ROOT, a store in use under -o rw) is printed on
 * the terminal and reflected in the exit status, no mount is left behind,
 * and when `zrecordfs ROOT MNT` returns, MNT is ready to use.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "common/decimal.h"
#include "config.h"
#include "fs/cold.h"
#include "fs/loop.h"
#include "fs/mount.h"
#include "fs/notify.h"
#include "fs/ops.h"
#include "fs/record.h"
#include "fs/replies.h"
#include "fs/tree.h"

static const struct fuse_opt opt_spec[] = {
    {"ro", offsetof(struct zfs_config, rw), 0},
    {"rw", offsetof(struct zfs_config, rw), 1},
    {"npy", offsetof(struct zfs_config, npy), 1},
    {"noopen", offsetof(struct zfs_config, noopen), 1},
    {"ext=%s", offsetof(struct zfs_config, ext), 0},
    {"mt", offsetof(struct zfs_config, mt), 1},
    {"spin=%s", offsetof(struct zfs_config, spin_arg), 0},
    FUSE_OPT_END,
};

/* The first operand is ROOT; the second (MOUNTPOINT) is noted and left
 * for fuse_parse_cmdline, and so is every option not ours. */
static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
    (void)outargs;
    struct zfs_config *cfg = data;
    if (key == FUSE_OPT_KEY_NONOPT && !cfg->root) {
        cfg->root = strdup(arg);
        return cfg->root ? 0 : -1;
    }
    if (key == FUSE_OPT_KEY_NONOPT && !cfg->mnt_arg && !(cfg->mnt_arg = strdup(arg)))
        return -1;
    return 1;
}

static void usage(void)
{
    printf("usage: zrecordfs [options] ROOT MOUNTPOINT\n"
           "\n"
           "Shows every loaderx store under ROOT (a store, or a folder holding\n"
           "stores at any depth) as a folder of per-record files. ROOT may be\n"
           "an object-store address, s3://BUCKET/PREFIX (read-only), configured\n"
           "as the AWS tools are (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...).\n"
           "\n"
           "zrecordfs options:\n"
           "    -o ro                  read-only view, shared store lock (default)\n"
           "    -o rw                  exclusive store lock; .compact and .delete work\n"
           "    -o npy                 records are complete NPY files named N.npy\n"
           "    -o ext=SUFFIX          add SUFFIX to record names (e.g. -o ext=.png)\n"
           "    -o noopen              no OPEN round trips: fastest warm reads, no\n"
           "                           .gather (read-only mounts only)\n"
           "    -o mt                  the multi-threaded loop even on 2 CPUs or fewer\n"
           "                           (it is the default above 2; -s: one thread)\n"
           "    -o spin=USEC           the one-thread loop polls for the next request\n"
           "                           this long before it sleeps (default %u; 0: never)\n"
           "\n", ZFS_SPIN_DEFAULT_US);
}

static void syslog_func(enum fuse_log_level level, const char *fmt, va_list ap)
{
    vsyslog((int)level, fmt, ap);
}

/* Check the combination of options and settle the record name suffix. */
static int settle_options(struct zfs_config *cfg)
{
    if (cfg->noopen && cfg->rw) {
        fprintf(stderr, "zrecordfs: -o noopen is for read-only mounts; it cannot be used with -o rw\n");
        return -1;
    }
    if (cfg->npy && cfg->ext) {
        fprintf(stderr, "zrecordfs: -o npy names records N.npy; it cannot be used with -o ext\n");
        return -1;
    }
    cfg->spin = ZFS_SPIN_DEFAULT_US;
    if (cfg->spin_arg) {
        uint64_t v;
        if (!dec_parse(cfg->spin_arg, strlen(cfg->spin_arg), false, &v) || v > ZFS_SPIN_MAX_US) {
            fprintf(stderr, "zrecordfs: -o spin=%s: give the microseconds to poll, 0 to %u\n",
                    cfg->spin_arg, ZFS_SPIN_MAX_US);
            return -1;
        }
        cfg->spin = (unsigned)v;
    }
    if (cfg->ext) {
        size_t len = strlen(cfg->ext);
        /* A suffix starting with a digit would make names ambiguous
         * ("1" + "2x" against "12" + "x"). */
        if (len == 0 || len > 32 || strchr(cfg->ext, '/') || (cfg->ext[0] >= '0' && cfg->ext[0] <= '9')) {
            fprintf(stderr, "zrecordfs: -o ext=%s: a suffix is 1 to 32 characters, without '/', "
                            "not starting with a digit\n", cfg->ext);
            return -1;
        }
    } else if (!(cfg->ext = strdup(cfg->npy ? ".npy" : ""))) {
        return -1;
    }
    return 0;
}

/* Add "-o fsname=ROOT", escaping what the option parser would split on. */
static int add_fsname(struct fuse_args *args, const char *root)
{
    size_t len = strlen(root);
    char *opt = malloc(2 * len + 16);
    if (!opt)
        return -1;
    char *p = opt + sprintf(opt, "-ofsname=");
    for (const char *s = root; *s; s++) {
        if (*s == ',' || *s == '\\')
            *p++ = '\\';
        *p++ = *s;
    }
    *p = '\0';
    int rc = fuse_opt_add_arg(args, opt);
    free(opt);
    return rc;
}

/* Every store holds a few descriptors open for the life of the mount. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* Fork: the starter waits for the daemon's one-byte verdict on a pipe and
 * exits with it (1 if the daemon died without one); the daemon leaves
 * the terminal's session and gets the pipe's write end in *ready. */
static int go_background(int *ready)
{
    int p[2];
    /* Close-on-exec: the fusermount3 that mounting may run must not hold
     * the write end, or the starter would wait for it too. */
    if (pipe2(p, O_CLOEXEC) != 0) {
        fprintf(stderr, "zrecordfs: cannot make a pipe: %s\n", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "zrecordfs: cannot fork: %s\n", strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid > 0) {
        close(p[1]);
        unsigned char status = 1;
        ssize_t n;
        do
            n = read(p[0], &status, 1);
        while (n < 0 && errno == EINTR);
        _exit(n == 1 ? status : 1);
    }
    close(p[0]);
    setsid();
    *ready = p[1];
    if (chdir("/") != 0) {
        fprintf(stderr, "zrecordfs: cannot change to /: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

/* Tell the starter the daemon's status. A daemon that is up lets go of
 * the terminal first: its messages go to syslog from then on. */
static void report_ready(int *ready, int status)
{
    if (*ready < 0)
        return;
    if (status == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
            if (null > STDERR_FILENO)
                close(null);
        }
    }
    unsigned char b = (unsigned char)status;
    /* A failed write means the starter has gone: nobody is left to tell. */
    ssize_t n = write(*ready, &b, 1);
    (void)n;
    close(*ready);
    *ready = -1;
}

int main(int argc, char *argv[])
{
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct fuse_cmdline_opts opts;
    struct fuse_loop_config *loop_cfg = NULL;
    struct fuse_session *se = NULL;
    struct zfs_fs fs;
    int ret = 1, ready = -1;
    bool handlers = false, mounted = false;

    memset(&opts, 0, sizeof opts);
    memset(&fs, 0, sizeof fs);
    /* Exit status: 0 after a clean unmount (or --help, --version), 2 for
     * a usage error (an unknown option, a bad value, a missing operand),
     * 1 for any other failure. */
    ret = 2;
    if (fuse_opt_parse(&args, &fs.cfg, opt_spec, opt_proc) != 0)
        goto out;
    if (fuse_parse_cmdline(&args, &opts) != 0) {
        /* It has said why: an unknown option (a usage error), or a mount
         * point it cannot resolve (a missing folder: not one). */
        struct stat mst;
        if (fs.cfg.mnt_arg && stat(fs.cfg.mnt_arg, &mst) != 0)
            ret = 1;
        goto out;
    }
    if (opts.show_help) {
        usage();
        fuse_cmdline_help();
        fuse_lowlevel_help();
        ret = 0;
        goto out;
    }
    if (opts.show_version) {
        printf("zrecordfs (loaderx) %s\n", PACKAGE_VERSION);
        fflush(stdout); /* before fusermount3 prints its own version */
        fuse_lowlevel_version();
        ret = 0;
        goto out;
    }
    if (!fs.cfg.root || !opts.mountpoint) {
        fprintf(stderr, "usage: zrecordfs [options] ROOT MOUNTPOINT (see --help)\n");
        goto out;
    }
    if (settle_options(&fs.cfg) != 0)
        goto out;
    ret = 1;
    /* The kernel would mount over a file too, but a folder of stores
     * cannot be shown there; and over a dead FUSE mount (its daemon
     * killed) it would stack a second mount that hides the first. */
    struct stat mst;
    int mst_rc = stat(opts.mountpoint, &mst), mst_err = errno;
    if (mst_rc == 0 && !S_ISDIR(mst.st_mode)) {
        fprintf(stderr, "zrecordfs: %s: not a folder; mount on an empty folder\n", opts.mountpoint);
        goto out;
    }
    if (mst_rc != 0 && mst_err == ENOTCONN) {
        fprintf(stderr, "zrecordfs: %s: a mount whose daemon has gone is still there; "
                        "run 'fusermount3 -u %s' first\n", opts.mountpoint, opts.mountpoint);
        goto out;
    }
    fs.remote = strncmp(fs.cfg.root, "s3://", 5) == 0;
    if (fs.remote) {
        /* Told before going to the background, where no store is open
         * yet: the library would refuse each store alike. */
        if (fs.cfg.rw) {
            fprintf(stderr, "zrecordfs: %s: stores in an object store are read-only; mount "
                            "them without -o rw (write a store locally and publish it with "
                            "zr push)\n", fs.cfg.root);
            goto out;
        }
        size_t len = strlen(fs.cfg.root);
        while (len > 5 && fs.cfg.root[len - 1] == '/')
            fs.cfg.root[--len] = '\0';
        if (len == 5) {
            fprintf(stderr, "zrecordfs: %s: give an address s3://BUCKET or s3://BUCKET/PREFIX\n",
                    fs.cfg.root);
            ret = 2;
            goto out;
        }
    } else {
        char *root = realpath(fs.cfg.root, NULL);
        if (!root) {
            fprintf(stderr, "zrecordfs: %s: %s\n", fs.cfg.root, strerror(errno));
            goto out;
        }
        free(fs.cfg.root);
        fs.cfg.root = root;
    }
    fs.cfg.foreground = opts.foreground;
    fs.cfg.debug = opts.debug;

    /* The session first: it refuses the options that neither libfuse nor
     * we know, before any store is opened. It only keeps &fs, which the
     * tree below fills. */
    if (add_fsname(&args, fs.cfg.root) != 0 || fuse_opt_add_arg(&args, "-osubtype=zrecordfs") != 0)
        goto out;
    const struct fuse_lowlevel_ops *ops = zfs_lowlevel_ops();
    se = fuse_session_new(&args, ops, sizeof *ops, &fs);
    if (!se) {
        /* libfuse has said why: an option neither it nor we know. */
        ret = 2;
        goto out;
    }

    raise_fd_limit();
    if (!opts.foreground && go_background(&ready) != 0)
        goto out;
    if (zfs_tree_build(&fs) != 0)
        goto out;
    fs.ctl[fs.nctl++] = ZFS_CTL_STATS;
    if (!fs.cfg.noopen)
        fs.ctl[fs.nctl++] = ZFS_CTL_GATHER;
    fs.ctl[fs.nctl++] = ZFS_CTL_COMPACT;
    if (fs.cfg.rw)
        fs.ctl[fs.nctl++] = ZFS_CTL_DELETE;
    /* A read-only mount cannot change under the kernel (writers are
     * locked out), so its names and attributes may be cached for long. */
    fs.timeout = fs.cfg.rw ? 1.0 : 86400.0;

    fs.se = se;
    if (fuse_set_signal_handlers(se) != 0)
        goto out;
    handlers = true;
    if (fuse_session_mount(se, opts.mountpoint) != 0)
        goto out;
    mounted = true;
    zfs_raise_read_ahead(opts.mountpoint);
    if (zfs_dirops_io(se) != 0)
        fuse_log(FUSE_LOG_ERR, "zrecordfs: lookups in one folder will be sent one at a time\n");
    if (!opts.foreground) {
        openlog("zrecordfs", LOG_PID, LOG_DAEMON);
        fuse_set_log_func(syslog_func);
    }
    report_ready(&ready, 0);
    if (zfs_notify_start(&fs) != 0) {
        fuse_log(FUSE_LOG_ERR, "zrecordfs: cannot start the notification thread\n");
        goto out;
    }
    if (zfs_ahead_start() != 0)
        fuse_log(FUSE_LOG_ERR, "zrecordfs: cannot start the read-ahead thread\n");

    /* On two CPUs the one-thread loop, polling for the next request
     * before it sleeps (loop.c), serves a reader of record files faster
     * than the multi-threaded loop, idle or beside busy processes
     * (doc/loop-benchmarks.md): the multi-threaded loop hands each
     * request to another thread, and the reader, the daemon and the
     * kernel then trade two cores among more (zrecordfs(1), -s and
     * -o spin). Gathers still run on the library's own pool. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    bool single = opts.singlethread || (!fs.cfg.mt && cpus > 0 && cpus <= 2);
    /* But a remote store's requests wait for the network, on any
     * machine: a lookup of a Ragged record (its size is in the record)
     * would hold every other reader behind its GET on the one thread. */
    if (fs.remote && !opts.singlethread)
        single = false;
    if (fs.remote && zfs_remote_ahead_start() != 0)
        fuse_log(FUSE_LOG_ERR, "zrecordfs: cannot start the remote read-ahead threads\n");
    int rc;
    if (single) {
        /* But the copies of an O_DIRECT .gather read, all queued at
         * once while the reader sleeps, go to both cores (replies.c). */
        if (cpus > 1 && zfs_replies_start((unsigned)cpus) != 0)
            fuse_log(FUSE_LOG_ERR, "zrecordfs: cannot start the reply threads\n");
        /* And record files not in the page cache are read on threads of
         * their own, so that the loop's thread never waits for the disk
         * while other readers' requests queue behind it (cold.c). */
        if (zfs_cold_start() != 0)
            fuse_log(FUSE_LOG_ERR, "zrecordfs: cannot start the cold-read threads\n");
        rc = zfs_loop(se, fs.cfg.spin);
    } else {
        if (!(loop_cfg = fuse_loop_cfg_create()))
            goto out;
        fuse_loop_cfg_set_clone_fd(loop_cfg, (unsigned)opts.clone_fd);
        if (opts.max_idle_threads != UINT_MAX) /* UINT_MAX: not given */
            fuse_loop_cfg_set_idle_threads(loop_cfg, opts.max_idle_threads);
        fuse_loop_cfg_set_max_threads(loop_cfg, opts.max_threads);
        rc = fuse_session_loop_mt(se, loop_cfg);
    }
    ret = rc == 0 ? 0 : 1;
out:
    report_ready(&ready, ret);
    zfs_cold_stop();
    zfs_replies_stop();
    zfs_ahead_stop();
    zfs_remote_ahead_stop();
    if (fs.remote && mounted) {
        uint64_t windows, records, singles;
        zfs_remote_ahead_counts(&windows, &records, &singles);
        fuse_log(FUSE_LOG_INFO, "zrecordfs: %s: %llu records read in %llu windows, %llu alone\n",
                 fs.cfg.root, (unsigned long long)records, (unsigned long long)windows,
                 (unsigned long long)singles);
    }
    zfs_notify_stop();
    fuse_loop_cfg_destroy(loop_cfg);
    if (mounted)
        fuse_session_unmount(se);
    if (handlers)
        fuse_remove_signal_handlers(se);
    if (se)
        fuse_session_destroy(se);
    zfs_rec_cache_clear();
    zfs_tree_free(&fs);
    free(opts.mountpoint);
    free(fs.cfg.root);
    free(fs.cfg.mnt_arg);
    free(fs.cfg.ext);
    free(fs.cfg.spin_arg);
    fuse_opt_free_args(&args);
    return ret;
}

/*
 * gpuslice run: starts a program as a new tenant with the interposer
 * preloaded and the given limits, stays beside it to reclaim the usage of
 * tenant processes that die, and returns the program's exit status.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/config.h"
#include "common/error.h"
#include "common/parse.h"
#include "common/tenant.h"

static void run_usage(void)
{
    printf("usage: gpuslice run [OPTIONS] [--] COMMAND [ARGS...]\n\n"
           "Runs COMMAND, and every process it starts, as one tenant with the given limits.\n\n"
           "options:\n"
           "  -m, --memory SIZE      device memory limit for the whole tenant: one size\n"
           "                         for every GPU (8G, 512M, 1.5G, 1073741824) or per\n"
           "                         device by CUDA index or UUID (0:8G,1:4G or\n"
           "                         GPU-…:8G); a bare size plus entries sets a default\n"
           "                         (8G,1:4G)\n"
           "  -c, --compute PERCENT  compute ceiling: the share of each GPU's time that\n"
           "                         the whole tenant's kernels may hold, all its\n"
           "                         processes together; an integer 1..100 (100 = no\n"
           "                         ceiling), one for every GPU or per device like\n"
           "                         --memory (0:30,1:50 or GPU-…:30; 40,1:20 sets a\n"
           "                         default)\n"
           "      --name NAME        a name for the tenant (shown by gpuslice tenants,\n"
           "                         used by gpuslice set)\n"
           "  -q, --quiet            no progress messages\n"
           "  -h, --help             this text\n\n"
           "gpuslice tenants shows the tenant; gpuslice set changes its limits.\n"
           "The program's exit status is returned; 128+N if it died of signal N;\n"
           "2 for bad usage (nothing is started), 126/127 if COMMAND cannot be run.\n");
}

/* The interposer beside this executable (bin/../lib), or $GPUSLICE_PRELOAD_LIB. */
static int find_preload(char *out, size_t len)
{
    const char *env = getenv("GPUSLICE_PRELOAD_LIB");
    char exe[PATH_MAX], *slash;
    ssize_t n;

    if (env && *env) {
        if ((size_t)snprintf(out, len, "%s", env) >= len)
            return -ENAMETOOLONG;
        return access(out, R_OK) == 0 ? 0 : -errno;
    }
    if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) < 0)
        return -errno;
    exe[n] = '\0';
    if ((slash = strrchr(exe, '/')) == NULL)
        return -ENOENT;
    *slash = '\0';
    if ((size_t)snprintf(out, len, "%s/../lib/libgpuslice.so", exe) >= len)
        return -ENAMETOOLONG;
    return access(out, R_OK) == 0 ? 0 : -errno;
}

/* LD_PRELOAD with lib first, keeping what the user had (without a duplicate). */
static int set_preload(const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    char *v;
    int r;

    if (old && *old) {
        /* Already listed: leave it where the user put it. */
        const char *p = strstr(old, lib);
        size_t l = strlen(lib);
        if (p && (p == old || p[-1] == ':' || p[-1] == ' ') &&
            (p[l] == '\0' || p[l] == ':' || p[l] == ' '))
            return 0;
        if (asprintf(&v, "%s:%s", lib, old) < 0)
            return -ENOMEM;
    } else if ((v = strdup(lib)) == NULL) {
        return -ENOMEM;
    }
    r = setenv("LD_PRELOAD", v, 1);
    free(v);
    return r < 0 ? -errno : 0;
}

static int wait_child(pid_t child, struct gpuslice_tenant *t, int *status)
{
    sigset_t set;
    struct timespec tick = {0, 200 * 1000 * 1000};

    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    for (;;) {
        pid_t w = waitpid(child, status, WNOHANG);
        int sig;

        if (w == child)
            return 0;
        if (w < 0 && errno != EINTR)
            return -errno;
        sig = sigtimedwait(&set, NULL, &tick);
        if (sig > 0 && sig != SIGCHLD)
            kill(child, sig); /* a supervisor's signal is for the program */
        /* Give back promptly what processes of the tenant that died held. */
        gs_tenant_reap(t);
    }
}

static int run_run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"memory", required_argument, NULL, 'm'}, {"compute", required_argument, NULL, 'c'},
        {"name", required_argument, NULL, 'N'},   {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    const char *memory = NULL, *compute = NULL, *name = NULL;
    struct gpuslice_tenant *t = NULL;
    struct gs_limits limits;
    char err[512], lib[PATH_MAX], path[PATH_MAX];
    sigset_t block, old;
    int c, r, status = 0, pipefd[2];
    pid_t child;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:m:c:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            memory = optarg;
            break;
        case 'c':
            compute = optarg;
            break;
        case 'N':
            name = optarg;
            break;
        case 'q':
            gs_cli_quiet = 1;
            break;
        case 'h':
            run_usage();
            return GS_EXIT_OK;
        default:
            return gs_cli_bad_option("run", c, argv, opts);
        }
    }
    if (optind >= argc) {
        gs_cli_error("run: no command given (usage: gpuslice run [OPTIONS] -- COMMAND [ARGS...])");
        return GS_EXIT_USAGE;
    }
    if (memory && gs_parse_limit_list(memory, GS_VALUE_SIZE, "--memory", &limits, err,
                                      sizeof(err)) < 0) {
        gs_cli_error("%s", err);
        return GS_EXIT_USAGE;
    }
    if (compute && gs_parse_limit_list(compute, GS_VALUE_PERCENT, "--compute", &limits, err,
                                       sizeof(err)) < 0) {
        gs_cli_error("%s", err);
        return GS_EXIT_USAGE;
    }
    if (name && strlen(name) >= sizeof(t->name)) {
        gs_cli_error("--name: \"%s\" is longer than %zu characters", name, sizeof(t->name) - 1);
        return GS_EXIT_USAGE;
    }
    if ((r = find_preload(lib, sizeof(lib))) < 0) {
        gs_cli_error("cannot find the interposer libgpuslice.so (%s: %s); set "
                     "GPUSLICE_PRELOAD_LIB to its path",
                     lib, gs_strerror(r));
        return GS_EXIT_ERROR;
    }
    gs_tenant_sweep(gs_tenant_dir());
    if ((r = gs_tenant_create(gs_tenant_dir(), name ? name : argv[optind], path, sizeof(path),
                              &t)) < 0) {
        gs_cli_error("cannot create the tenant's state in %s: %s (set GPUSLICE_RUN_DIR to a "
                     "writable directory)",
                     gs_tenant_dir(), gs_strerror(r));
        return GS_EXIT_ERROR;
    }
    if (setenv(GS_ENV_TENANT, path, 1) < 0 || (memory && setenv(GS_ENV_MEMORY, memory, 1) < 0) ||
        (compute && setenv(GS_ENV_COMPUTE, compute, 1) < 0) || set_preload(lib) < 0) {
        gs_cli_error("cannot set the environment: %s", strerror(errno));
        unlink(path);
        return GS_EXIT_ERROR;
    }
    if (memory)
        gs_cli_note("memory limit %s for %s", memory, argv[optind]);
    if (compute)
        gs_cli_note("compute ceiling %s%s for %s", compute,
                    strchr(compute, ':') ? " (percent)" : "%", argv[optind]);
    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        gs_cli_error("pipe: %s", strerror(errno));
        unlink(path);
        return GS_EXIT_ERROR;
    }
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGUSR2);
    sigprocmask(SIG_BLOCK, &block, &old);
    if ((child = fork()) < 0) {
        gs_cli_error("fork: %s", strerror(errno));
        unlink(path);
        return GS_EXIT_ERROR;
    }
    if (child == 0) {
        int e;
        sigprocmask(SIG_SETMASK, &old, NULL);
        close(pipefd[0]);
        execvp(argv[optind], argv + optind);
        e = errno;
        if (write(pipefd[1], &e, sizeof(e)) < 0)
            _exit(127);
        _exit(e == ENOENT ? 127 : 126);
    }
    close(pipefd[1]);
    /* The terminal's ^C and ^\ reach the program directly; we outlive it. */
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    {
        int e;
        if (read(pipefd[0], &e, sizeof(e)) == (ssize_t)sizeof(e))
            gs_cli_error("run: cannot run %s: %s", argv[optind], strerror(e));
        close(pipefd[0]);
    }
    r = wait_child(child, t, &status);
    gs_tenant_reap(t);
    if (gs_tenant_live_procs(t) == 0)
        unlink(path);
    else
        gs_cli_note("%d process(es) of the tenant still run; its state stays until they exit",
                    gs_tenant_live_procs(t));
    gs_tenant_close(t);
    if (r < 0) {
        gs_cli_error("waiting for %s: %s", argv[optind], gs_strerror(r));
        return GS_EXIT_ERROR;
    }
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

const struct gs_cmd gs_cmd_run = {"run", "run a program with memory and compute limits", run_run,
                                  run_usage};

/*
 * Starting a program as a new tenant (gpuslice run, gpuslice exec): the
 * interposer preloaded with the given limits, the GPUs and nice value chosen,
 * and gpuslice staying beside it to reclaim the usage of tenant processes
 * that die, then returning the program's exit status. For Python programs it
 * also puts gpuslice's sitecustomize hook (python/gpuslice_torch) first on
 * PYTHONPATH, which runs PyTorch on a highest-priority CUDA stream.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/launch.h"
#include "control/mps.h"
#include "control/reserver.h"
#include "common/cuda_api.h"
#include "common/config.h"
#include "common/devlist.h"
#include "common/driver.h"
#include "common/error.h"
#include "common/parse.h"
#include "common/reserve.h"
#include "common/tenant.h"

#define RESERVER_START_MS 120000 /* the first fill of every GPU may take this long */
#define RESERVER_STOP_MS 10000   /* and giving it all back this long */

/* The room for a tenant's name in its state file, with the terminating NUL. */
#define NAME_SIZE sizeof(((struct gpuslice_tenant *)0)->name)

void launch_usage(const struct launch_mode *m)
{
    printf("usage: gpuslice %s [OPTIONS] [--] COMMAND [ARGS...]\n", m->cmd);
    if (m->python_scripts)
        printf("       gpuslice %s [OPTIONS] SCRIPT.py [ARGS...]\n", m->cmd);
    printf("\nRuns COMMAND, and every process it starts, as one tenant with the given limits.\n");
    if (m->python_scripts)
        printf("A first argument ending in .py that names an existing file is run with the\n"
               "Python interpreter ($PYTHON, else python3 from PATH), the other ARGS passed\n"
               "to the script; gpuslice exec never does this.\n");
    else
        printf("COMMAND is run as it is, whatever its name (gpuslice run starts a *.py\n"
               "file with Python).\n");
    printf("\noptions:\n"
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
           "      --sms LIST         run the whole program (every thread, the CUDA\n"
           "                         runtime, its graphs) on a partition of each GPU's\n"
           "                         SMs, a green context: a count (16), a count from\n"
           "                         an SM (16@32), or per device like --memory\n"
           "                         (0:16,1:32). Counts are whole groups of the GPU's\n"
           "                         split (gpuslice info shows it: 8 SMs, or 2)\n"
           "      --sm-share PERCENT like --sms, with PERCENT (1..100) of each GPU's SMs\n"
           "                         rounded to the GPU's finest split\n"
           "  -d, --device LIST      the GPUs the program sees: CUDA indexes and GPU\n"
           "                         UUIDs, comma-separated and/or repeated (-d 0,1 or\n"
           "                         -d 0 -d GPU-…); sets CUDA_VISIBLE_DEVICES. With\n"
           "                         CUDA_VISIBLE_DEVICES already set, an index picks\n"
           "                         from that list. Without -d it is left as it is\n"
           "  -f, --filled RATIO     keep each GPU the program sees RATIO full (in (0, 1],\n"
           "                         e.g. 0.9) while it runs: a reservation beside it\n"
           "                         holds what the program does not use, so no other\n"
           "                         process can take it, and gives the program memory\n"
           "                         whenever an allocation of the program needs it\n"
           "  -n, --nice N           the CPU nice value (-20..19) of the program and all\n"
           "                         it starts; if it may not be set (a negative one\n"
           "                         needs root), a warning, and it runs as it would\n"
           "      --name NAME        a name for the tenant (shown by gpuslice tenants,\n"
           "                         used by gpuslice set)\n"
           "      --no-torch-priority\n"
           "                         leave PYTHONPATH alone: without it, gpuslice's\n"
           "                         sitecustomize hook comes first on PYTHONPATH and\n"
           "                         puts PyTorch's work on a highest-priority CUDA\n"
           "                         stream on each device it uses (the user's\n"
           "                         sitecustomize still runs)\n"
           "      --gpu-share PERCENT\n"
           "                         run the program as an MPS client of your MPS\n"
           "                         control daemon for its GPU (started if it is not\n"
           "                         running, and left running afterwards; gpuslice\n"
           "                         mps stop stops it) with at most PERCENT (1..100)\n"
           "                         of the GPU's threads. One GPU only: the --device\n"
           "                         selection, else CUDA_VISIBLE_DEVICES, else GPU 0\n"
           "      --mps-priority normal|below-normal\n"
           "                         the MPS client priority (needs --gpu-share;\n"
           "                         default normal)\n"
           "  -q, --quiet            no progress messages\n"
           "  -h, --help             this text\n\n"
           "Index keys of --memory and --compute (0:8G) are CUDA indexes as the program\n"
           "sees them, after --device: with -d 2,3, 0:8G limits GPU 2.\n"
           "gpuslice tenants shows the tenant; gpuslice set changes its limits.\n"
           "The program's exit status is returned; 128+N if it died of signal N;\n"
           "2 for bad usage (nothing is started), 126/127 if COMMAND cannot be run.\n");
}

/* The interposer beside this executable (bin/../lib), or $GPUSLICE_PRELOAD_LIB. */
static int find_preload(char *out, size_t len)
{
    const char *env = getenv(GS_ENV_PRELOAD_LIB);
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

/*
 * The directory holding gpuslice's sitecustomize.py, made absolute:
 * $GPUSLICE_PYTHON_DIR, else bin/../share/gpuslice/python beside this
 * executable (installed, and in the build tree, where CMake copies it). On
 * failure out holds the path that was tried, for the message.
 */
static int find_python_dir(char *out, size_t len)
{
    const char *env = getenv(GS_ENV_PYTHON_DIR);
    char exe[PATH_MAX], want[PATH_MAX], *slash;
    ssize_t n;

    if (env && *env) {
        if ((size_t)snprintf(want, sizeof(want), "%s", env) >= sizeof(want))
            return -ENAMETOOLONG;
    } else {
        if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) < 0)
            return -errno;
        exe[n] = '\0';
        if ((slash = strrchr(exe, '/')) == NULL)
            return -ENOENT;
        *slash = '\0';
        if ((size_t)snprintf(want, sizeof(want), "%s/../share/gpuslice/python", exe) >=
            sizeof(want))
            return -ENAMETOOLONG;
    }
    snprintf(out, len, "%s", want);
    if (realpath(want, exe) == NULL)
        return -errno;
    /* A PYTHONPATH entry cannot hold a ':'. */
    if (strchr(exe, ':'))
        return -EINVAL;
    if ((size_t)snprintf(out, len, "%s/sitecustomize.py", exe) >= len)
        return -ENAMETOOLONG;
    if (access(out, R_OK) < 0)
        return -errno;
    if ((size_t)snprintf(out, len, "%s", exe) >= len)
        return -ENAMETOOLONG;
    return 0;
}

/* PYTHONPATH with dir first, then what the user had; unchanged if dir is first already. */
static int set_pythonpath(const char *dir)
{
    const char *old = getenv("PYTHONPATH");
    size_t l = strlen(dir);
    char *v;
    int r;

    if (old && strncmp(old, dir, l) == 0 && (old[l] == '\0' || old[l] == ':'))
        return 0; /* a gpuslice run inside another */
    /* No trailing ':' for an unset or empty PYTHONPATH: an empty entry is the cwd. */
    if (old && *old) {
        if (asprintf(&v, "%s:%s", dir, old) < 0)
            return -ENOMEM;
    } else if ((v = strdup(dir)) == NULL) {
        return -ENOMEM;
    }
    r = setenv("PYTHONPATH", v, 1);
    free(v);
    return r < 0 ? -errno : 0;
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

static int parse_nice(const char *s, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (!*s || isspace((unsigned char)*s) || *end || errno || v < -20 || v > 19)
        return -EINVAL;
    *out = (int)v;
    return 0;
}

/* A name ending in .py that is an existing file: gpuslice run train.py. */
static int is_python_script(const char *arg)
{
    size_t n = strlen(arg);
    struct stat st;

    return n > 3 && strcmp(arg + n - 3, ".py") == 0 && stat(arg, &st) == 0 && S_ISREG(st.st_mode);
}

/* In the child, before exec: the program and all it starts inherit the value. */
static void apply_nice(int n)
{
    int e, cur;

    if (setpriority(PRIO_PROCESS, 0, n) == 0)
        return;
    e = errno;
    errno = 0;
    cur = getpriority(PRIO_PROCESS, 0);
    if (e == EACCES || e == EPERM)
        gs_log_error("warning: --nice %d: %s (lowering the nice value needs root, "
                     "CAP_SYS_NICE or a higher RLIMIT_NICE); running at nice %d",
                     n, strerror(e), cur);
    else
        gs_log_error("warning: --nice %d: %s; running at nice %d", n, strerror(e), cur);
}

/*
 * Waits for the program, forwarding a supervisor's signals to it and reaping
 * the tenant's dead processes; notes it if the memory reservation (*reserver,
 * 0 without one) ends first, and clears *reserver then.
 */
static int wait_child(pid_t child, struct gpuslice_tenant *t, int *status, pid_t *reserver)
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
        int sig, rs;

        if (w == child)
            return 0;
        if (w < 0 && errno != EINTR)
            return -errno;
        if (*reserver > 0 && waitpid(*reserver, &rs, WNOHANG) == *reserver) {
            gs_log_error("warning: the memory reservation of --filled ended (%s %d); the "
                         "program runs on without it",
                         WIFSIGNALED(rs) ? "signal" : "exit status",
                         WIFSIGNALED(rs) ? WTERMSIG(rs) : WEXITSTATUS(rs));
            gs_reserve_release(t, *reserver); /* what it held went with it */
            *reserver = 0;
        }
        sig = sigtimedwait(&set, NULL, &tick);
        if (sig > 0 && sig != SIGCHLD)
            kill(child, sig); /* a supervisor's signal is for the program */
        /* Give back promptly what processes of the tenant that died held. */
        gs_tenant_reap(t);
    }
}

static void stop_reserver(pid_t pid);

/*
 * Starts the memory reservation of --filled beside tenant t, in a child of
 * its own, and waits until it has filled the GPUs. 0 and its PID, or -1
 * (said why). The child stops on SIGTERM, or when this process is gone. It
 * is started before the program's environment is made, so that it never
 * joins the tenant it serves (were gpuslice itself under an interposer, it
 * would stay in the tenant gpuslice belongs to); it sees the program's GPUs.
 */
static int start_reserver(double ratio, const char *devices, struct gpuslice_tenant *t, pid_t *out)
{
    char line[1024];
    size_t got = 0;
    int fds[2];
    pid_t pid, parent = getpid();

    if (pipe2(fds, O_CLOEXEC) < 0) {
        gs_log_error("--filled: pipe: %s", strerror(errno));
        return -1;
    }
    if ((pid = fork()) < 0) {
        gs_log_error("--filled: fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        struct reserve_opts ro = {.ratio = ratio, .tenant = t, .ready_fd = fds[1],
                                  .parent = parent, .label = "--filled"};
        sigset_t stop;
        close(fds[0]);
        if (devices && setenv("CUDA_VISIBLE_DEVICES", devices, 1) < 0)
            _exit(GS_EXIT_ERROR);
        /*
         * Signals to the terminal's or the job's process group are the
         * program's; the reservation ends when it does (SIGTERM from us).
         */
        setpgid(0, 0);
        signal(SIGINT, SIG_IGN);
        signal(SIGQUIT, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        signal(SIGPIPE, SIG_IGN);
        signal(SIGTTOU, SIG_IGN);
        signal(SIGTTIN, SIG_IGN);
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigprocmask(SIG_BLOCK, &stop, NULL);
        _exit(reserve_run(&ro, &stop) < 0 ? GS_EXIT_ERROR : GS_EXIT_OK);
    }
    close(fds[1]);
    {
        struct pollfd pfd = {fds[0], POLLIN, 0};
        while (got < sizeof(line) - 1 && (got == 0 || line[got - 1] != '\n')) {
            ssize_t n;
            int pr = poll(&pfd, 1, RESERVER_START_MS);
            if (pr <= 0)
                break;
            if ((n = read(fds[0], line + got, sizeof(line) - 1 - got)) <= 0)
                break;
            got += (size_t)n;
        }
    }
    close(fds[0]);
    line[got] = '\0';
    if (got > 0 && line[got - 1] == '\n')
        line[--got] = '\0';
    if (strcmp(line, "ok") == 0) {
        *out = pid;
        return 0;
    }
    if (strncmp(line, "error ", 6) == 0)
        gs_log_error("--filled: %s", line + 6);
    else
        gs_log_error("--filled: the memory reservation %s", got ? line : "did not start in time");
    stop_reserver(pid);
    return -1;
}

/* Ends the reservation (SIGTERM, then SIGKILL after RESERVER_STOP_MS) and waits for it. */
static void stop_reserver(pid_t pid)
{
    int status, i;

    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    for (i = 0; i < RESERVER_STOP_MS / 10; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        if (waitpid(pid, &status, WNOHANG) == pid)
            return;
        nanosleep(&ts, NULL);
    }
    gs_log_error("warning: the memory reservation did not end within %d s; killed",
                 RESERVER_STOP_MS / 1000);
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
}

struct launch_opts {
    const char *memory, *compute, *name;
    struct gs_limits mem_l, comp_l, sms_l; /* what --memory, --compute and --sms said */
    int mem_set, comp_set; /* mem_l / comp_l hold limits (from the options or the environment) */
    const char *sms; /* GPUSLICE_SMS for the program (--sms, or --sm-share as PERCENT%) */
    char sm_share[8];
    char *devices; /* CUDA_VISIBLE_DEVICES for the program; NULL leaves it as it is */
    int nice, has_nice;
    int no_torch_priority; /* --no-torch-priority: PYTHONPATH is left alone */
    int gpu_share;         /* --gpu-share: 1..100, 0 without MPS */
    double filled;         /* --filled: the reservation's ratio, 0 without one */
    int mps_priority;      /* CUDA_MPS_CLIENT_PRIORITY: 0 normal, 1 below normal */
    char *mps_device;      /* the one GPU (an index or a UUID) the MPS client uses */
    const char *what; /* the program as the user named it, for messages and the tenant */
    char **argv;      /* what is executed, NULL-terminated */
    char **python;    /* argv when built for a Python script (freed), else NULL */
};

static void opts_done(struct launch_opts *o)
{
    free(o->devices);
    free(o->python);
    free(o->mps_device);
}

/*
 * The GPU an MPS client will use: the --device selection, else
 * CUDA_VISIBLE_DEVICES, else 0. gpuslice runs one control daemon per GPU and
 * an MPS client talks to one daemon, so a selection of several is refused.
 */
static int mps_device(struct launch_opts *o, char *err, size_t errlen)
{
    const char *sel = o->devices ? o->devices : getenv("CUDA_VISIBLE_DEVICES");
    int n = sel ? gs_device_list_count(sel) : 1;

    if (sel && n == 0) {
        snprintf(err, errlen, "--gpu-share: CUDA_VISIBLE_DEVICES is empty, so the program has "
                              "no GPU to share (unset it or pass --device)");
        return -EINVAL;
    }
    if (n > 1) {
        snprintf(err, errlen,
                 "--gpu-share: the program would use %d GPUs (%s); an MPS client talks to one "
                 "control daemon, and gpuslice runs one per GPU, so --gpu-share takes one GPU "
                 "(pick it with --device)",
                 n, sel);
        return -EINVAL;
    }
    if (sel && strncasecmp(sel, "MIG-", 4) == 0) {
        snprintf(err, errlen,
                 "--gpu-share: %s is a MIG instance; gpuslice starts MPS for whole GPUs "
                 "(give a GPU index or GPU UUID)",
                 sel);
        return -EINVAL;
    }
    if ((o->mps_device = strdup(sel ? sel : "0")) == NULL) {
        snprintf(err, errlen, "--gpu-share: %s", strerror(ENOMEM));
        return -ENOMEM;
    }
    return 0;
}

/* Returns -1 to go on and start the program, else the exit status to return now. */
static int parse_args(const struct launch_mode *m, int argc, char **argv, struct launch_opts *o)
{
    static const struct option opts[] = {
        {"memory", required_argument, NULL, 'm'}, {"compute", required_argument, NULL, 'c'},
        {"device", required_argument, NULL, 'd'}, {"nice", required_argument, NULL, 'n'},
        {"name", required_argument, NULL, 'N'},   {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},         {"no-torch-priority", no_argument, NULL, 'T'},
        {"gpu-share", required_argument, NULL, 'G'},
        {"mps-priority", required_argument, NULL, 'P'},
        {"filled", required_argument, NULL, 'f'},
        {"sms", required_argument, NULL, 'S'},
        {"sm-share", required_argument, NULL, 'H'},
        {NULL, 0, NULL, 0}};
    const char *nice = NULL, *share = NULL, *prio = NULL, *filled = NULL, *sm_share = NULL;
    char err[768], **devargs;
    int c, ndev = 0, status = -1;

    if ((devargs = calloc((size_t)argc, sizeof(*devargs))) == NULL) {
        gs_log_error("%s: %s", m->cmd, strerror(ENOMEM));
        return GS_EXIT_ERROR;
    }
    optind = 1;
    opterr = 0;
    while (status < 0 && (c = getopt_long(argc, argv, "+:m:c:d:n:f:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            o->memory = optarg;
            break;
        case 'c':
            o->compute = optarg;
            break;
        case 'd':
            devargs[ndev++] = optarg;
            break;
        case 'n':
            nice = optarg;
            break;
        case 'N':
            o->name = optarg;
            break;
        case 'T':
            o->no_torch_priority = 1;
            break;
        case 'G':
            share = optarg;
            break;
        case 'P':
            prio = optarg;
            break;
        case 'f':
            filled = optarg;
            break;
        case 'S':
            o->sms = optarg;
            break;
        case 'H':
            sm_share = optarg;
            break;
        case 'q':
            gs_log_quiet = 1;
            break;
        case 'h':
            launch_usage(m);
            status = GS_EXIT_OK;
            break;
        default:
            status = gs_cli_bad_option(m->cmd, c, argv, opts);
            break;
        }
    }
    if (status >= 0)
        goto out;
    status = GS_EXIT_USAGE;
    if (optind >= argc) {
        gs_log_error("%s: no command given (usage: gpuslice %s [OPTIONS] -- COMMAND [ARGS...])",
                     m->cmd, m->cmd);
        goto out;
    }
    if (o->memory && gs_parse_limit_list(o->memory, GS_VALUE_SIZE, "--memory", &o->mem_l, err,
                                         sizeof(err)) < 0) {
        gs_log_error("%s", err);
        goto out;
    }
    if (o->compute && gs_parse_limit_list(o->compute, GS_VALUE_PERCENT, "--compute", &o->comp_l, err,
                                          sizeof(err)) < 0) {
        gs_log_error("%s", err);
        goto out;
    }
    /*
     * Without the options, limits already in the environment (GPUSLICE_*, vgpu.rs's, HAMi's:
     * a pod's) are the tenant's: run would otherwise make a tenant without them, and its
     * processes would no longer read them.
     */
    {
        extern char **environ;
        if ((!o->memory && gs_config_memory(environ, &o->mem_l, err, sizeof(err)) < 0) ||
            (!o->compute && gs_config_compute(environ, &o->comp_l, err, sizeof(err)) < 0)) {
            gs_log_error("%s (the limits in %s's environment become the tenant's)", err, m->cmd);
            goto out;
        }
    }
    o->mem_set = o->mem_l.n > 0;
    o->comp_set = o->comp_l.n > 0;
    if (o->sms && sm_share) {
        gs_log_error("--sms and --sm-share both set the SM partition: give one of them");
        goto out;
    }
    if (sm_share) {
        int pct;
        if (gs_parse_share(sm_share, &pct) < 0) {
            gs_log_error("--sm-share: \"%s\" is not a share (use an integer percentage from 1 "
                         "to 100)",
                         sm_share);
            goto out;
        }
        snprintf(o->sm_share, sizeof(o->sm_share), "%d%%", pct);
        o->sms = o->sm_share;
    } else if (o->sms && gs_parse_limit_list(o->sms, GS_VALUE_SMS, "--sms", &o->sms_l, err,
                                             sizeof(err)) < 0) {
        gs_log_error("%s", err);
        goto out;
    }
    if (o->name && strlen(o->name) >= NAME_SIZE) {
        gs_log_error("--name: \"%s\" is longer than %zu characters", o->name, NAME_SIZE - 1);
        goto out;
    }
    if (nice && parse_nice(nice, &o->nice) < 0) {
        gs_log_error("--nice: \"%s\" is not a nice value (use an integer from -20 to 19)", nice);
        goto out;
    }
    o->has_nice = nice != NULL;
    if (ndev && gs_device_list(devargs, ndev, getenv("CUDA_VISIBLE_DEVICES"), &o->devices, err,
                            sizeof(err)) < 0) {
        gs_log_error("%s", err);
        goto out;
    }
    if (share && gs_parse_share(share, &o->gpu_share) < 0) {
        gs_log_error("--gpu-share: \"%s\" is not a share (use an integer percentage from 1 "
                     "to 100)",
                     share);
        goto out;
    }
    if (prio && strcmp(prio, "normal") != 0 && strcmp(prio, "below-normal") != 0) {
        gs_log_error("--mps-priority: \"%s\" is not a priority (use normal or below-normal)",
                     prio);
        goto out;
    }
    if (prio && !share) {
        gs_log_error("--mps-priority needs --gpu-share (it is the priority of an MPS client)");
        goto out;
    }
    o->mps_priority = prio && strcmp(prio, "below-normal") == 0;
    if (filled && reserve_parse_ratio(filled, &o->filled) < 0) {
        gs_log_error("--filled: \"%s\" is not a ratio (use a number in (0, 1], e.g. 0.9)",
                     filled);
        goto out;
    }
    if (filled && share) {
        gs_log_error("--filled cannot be used with --gpu-share: an MPS client's memory is "
                     "allocated by the MPS server process, and the reservation, which follows "
                     "the program's own memory use, cannot follow memory the server holds for "
                     "it");
        goto out;
    }
    if (share && mps_device(o, err, sizeof(err)) < 0) {
        gs_log_error("%s", err);
        goto out;
    }
    o->what = argv[optind];
    o->argv = argv + optind;
    if (m->python_scripts && is_python_script(argv[optind])) {
        const char *py = getenv("PYTHON");
        int i, n = argc - optind;

        if ((o->python = calloc((size_t)n + 2, sizeof(*o->python))) == NULL) {
            gs_log_error("%s: %s", m->cmd, strerror(ENOMEM));
            status = GS_EXIT_ERROR;
            goto out;
        }
        o->python[0] = (char *)(py && *py ? py : "python3");
        for (i = 0; i < n; i++)
            o->python[i + 1] = argv[optind + i];
        o->argv = o->python;
    }
    status = -1;
out:
    free(devargs);
    return status;
}

/*
 * Runs fn in a forked child and waits at most timeout seconds (then kills
 * it): 0 if fn returned 0, else -EIO (or -ETIMEDOUT) with what fn wrote to
 * buf, its message or result. The CUDA work is done in a child because a
 * process that initialised CUDA cannot use it after a fork, and so that a
 * driver that hangs cannot hang gpuslice.
 */
static int in_child(int (*fn)(void *arg, char *buf, size_t len), void *arg, double timeout,
                    char *buf, size_t len)
{
    struct pollfd pfd;
    size_t got = 0;
    int fds[2], status = 0, timed_out = 0;
    pid_t pid;

    buf[0] = '\0';
    if (pipe2(fds, O_CLOEXEC) < 0) {
        snprintf(buf, len, "pipe: %s", strerror(errno));
        return -errno;
    }
    if ((pid = fork()) < 0) {
        snprintf(buf, len, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -EAGAIN;
    }
    if (pid == 0) {
        char out[1024] = "";
        int r;

        close(fds[0]);
        r = fn(arg, out, sizeof(out));
        if (write(fds[1], out, strlen(out)) < 0)
            _exit(2);
        _exit(r == 0 ? 0 : 1);
    }
    close(fds[1]);
    pfd.fd = fds[0];
    pfd.events = POLLIN;
    for (;;) {
        ssize_t n;
        int pr = poll(&pfd, 1, (int)(timeout * 1000));

        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            timed_out = 1;
            break;
        }
        if ((n = read(fds[0], buf + got, len - 1 - got)) <= 0 || (got += (size_t)n) >= len - 1)
            break;
    }
    buf[got] = '\0';
    close(fds[0]);
    if (timed_out)
        kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (timed_out) {
        snprintf(buf, len, "no answer within %g s", timeout);
        return -ETIMEDOUT;
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

/* In a child: the UUID of device index *arg as the driver numbers all GPUs. */
int launch_in_child(int (*fn)(void *arg, char *buf, size_t len), void *arg, double timeout,
                    char *buf, size_t len)
{
    return in_child(fn, arg, timeout, buf, len);
}

static int uuid_of_index(void *arg, char *buf, size_t len)
{
    char uuid[GS_UUID_STRLEN], err[512];

    /* Entries of CUDA_VISIBLE_DEVICES count the GPUs as they are without it. */
    unsetenv("CUDA_VISIBLE_DEVICES");
    if (mps_driver_uuid(*(int *)arg, uuid, err, sizeof(err)) < 0) {
        snprintf(buf, len, "%s", err);
        return -1;
    }
    snprintf(buf, len, "%s", uuid);
    return 0;
}

/* In a child with the program's environment: can CUDA make a context on device 0? */
static int cuda_probe(void *arg, char *buf, size_t len)
{
    struct gs_driver d = {0};
    const char *step;
    char num[32], why[256];
    CUcontext ctx;
    CUdevice dev;
    CUresult r;

    (void)arg;
    if (gs_driver_open_cuda(&d, RTLD_NOW | RTLD_LOCAL, NULL, why, sizeof(why)) < 0) {
        snprintf(buf, len, "cannot load the CUDA driver: %s", why);
        return -1;
    }
    if (!d.cuInit || !d.cuDeviceGet || !d.cuDevicePrimaryCtxRetain || !d.cuDevicePrimaryCtxRelease) {
        snprintf(buf, len, "the CUDA driver lacks cuInit, cuDeviceGet or the primary context "
                           "calls");
        return -1;
    }
    if ((r = d.cuInit(0)) != CUDA_SUCCESS)
        step = "cuInit";
    else if ((r = d.cuDeviceGet(&dev, 0)) != CUDA_SUCCESS)
        step = "cuDeviceGet(0)";
    else if ((r = d.cuDevicePrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS)
        step = "cuDevicePrimaryCtxRetain";
    else if ((r = d.cuDevicePrimaryCtxRelease(dev)) != CUDA_SUCCESS)
        step = "cuDevicePrimaryCtxRelease";
    else
        return 0;
    snprintf(buf, len, "%s: %s", step, gs_driver_cu_name(&d, r, num, sizeof(num)));
    return -1;
}

/*
 * --gpu-share: the user's MPS control daemon for the program's GPU, started
 * or reused, the client settings in the environment, and a connection probe.
 * Returns -1 to go on, else the exit status to return now (a daemon this
 * call started is stopped again on failure; one it reused is left alone).
 */
static int setup_mps(const struct launch_opts *o)
{
    char bin[MPS_PATH_MAX], err[1024], uuid[GS_UUID_STRLEN], num[16];
    struct mps_gpu g;
    double timeout = mps_timeout();
    void (*pipe_was)(int);
    int r, started = 0, status = GS_EXIT_ERROR;

    if (timeout < 0)
        return GS_EXIT_USAGE;
    if (mps_check_platform(bin, sizeof(bin), err, sizeof(err)) < 0) {
        gs_log_error("--gpu-share: %s", err);
        return GS_EXIT_ERROR;
    }
    if (gs_parse_uuid(o->mps_device, strlen(o->mps_device), uuid)) {
        memcpy(uuid, "GPU", 3); /* the probe below checks that it is a GPU */
    } else {
        int index = atoi(o->mps_device);

        if ((r = in_child(uuid_of_index, &index, timeout, err, sizeof(err))) < 0) {
            gs_log_error("--gpu-share: cannot find GPU %s: %s", o->mps_device, err);
            return GS_EXIT_ERROR;
        }
        if (!gs_parse_uuid(err, strlen(err), uuid)) {
            gs_log_error("--gpu-share: GPU %s has no UUID the driver would tell", o->mps_device);
            return GS_EXIT_ERROR;
        }
        memcpy(uuid, "GPU", 3);
    }
    if (mps_gpu_init(&g, uuid) < 0) {
        gs_log_error("--gpu-share: the MPS directory for %s would be too long (set "
                     "XDG_RUNTIME_DIR to a shorter directory)",
                     uuid);
        return GS_EXIT_ERROR;
    }
    /* A control client that exits before reading its command must not kill us. */
    pipe_was = signal(SIGPIPE, SIG_IGN);
    r = mps_daemon_start(bin, &g, timeout, &started, err, sizeof(err));
    if (r < 0) {
        gs_log_error("--gpu-share: MPS: %s", err);
        goto out;
    }
    gs_log_note("%s the MPS control daemon for %s (pipe dir %s)",
                started ? "started" : "reusing", g.uuid, g.pipe);
    snprintf(num, sizeof(num), "%d", o->gpu_share);
    if (setenv("CUDA_MPS_PIPE_DIRECTORY", g.pipe, 1) < 0 ||
        setenv("CUDA_MPS_LOG_DIRECTORY", g.log, 1) < 0 ||
        setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", num, 1) < 0 ||
        setenv("CUDA_MPS_CLIENT_PRIORITY", o->mps_priority ? "1" : "0", 1) < 0) {
        gs_log_error("cannot set the environment: %s", strerror(errno));
        goto out;
    }
    if ((r = in_child(cuda_probe, NULL, 2 * timeout, err, sizeof(err))) < 0) {
        gs_log_error("--gpu-share: a CUDA program cannot connect through MPS (pipe dir %s): %s; "
                     "%s is not started",
                     g.pipe, err, o->what);
        goto out;
    }
    gs_log_note("MPS client: %d%% of the GPU's threads, %s priority", o->gpu_share,
                o->mps_priority ? "below-normal" : "normal");
    status = -1;
out:
    if (status >= 0 && started) {
        if (mps_daemon_stop(bin, &g, timeout, err, sizeof(err)) < 0)
            gs_log_error("--gpu-share: cannot stop the MPS control daemon it started: %s", err);
        else
            gs_log_note("stopped the MPS control daemon for %s again", g.uuid);
    }
    signal(SIGPIPE, pipe_was);
    return status;
}

/* The GPUs the program will see: their count and UUIDs in CUDA order. */
struct visible_gpus {
    int n;
    uint8_t uuid[GPUSLICE_MAX_DEVICES][16];
};

/*
 * In a child with the program's CUDA_VISIBLE_DEVICES (arg, NULL: as it is):
 * "N HEX HEX …", the device count and each UUID as 32 hex digits.
 */
static int visible_probe(void *arg, char *buf, size_t len)
{
    uint8_t raw[GPUSLICE_MAX_DEVICES][16];
    const char *vis = arg;
    struct gs_driver d = {0};
    char why[256];
    size_t at;
    int n, i, k;

    if (vis && setenv("CUDA_VISIBLE_DEVICES", vis, 1) < 0) {
        snprintf(buf, len, "cannot set CUDA_VISIBLE_DEVICES: %s", strerror(errno));
        return -1;
    }
    if (gs_driver_open_cuda(&d, RTLD_NOW | RTLD_LOCAL, NULL, why, sizeof(why)) < 0) {
        snprintf(buf, len, "cannot load the CUDA driver: %s", why);
        return -1;
    }
    if ((n = gs_driver_uuids(&d, raw, GPUSLICE_MAX_DEVICES, buf, len)) < 0)
        return -1;
    at = (size_t)snprintf(buf, len, "%d", n);
    for (i = 0; i < n && i < GPUSLICE_MAX_DEVICES && at + 34 < len; i++) {
        buf[at++] = ' ';
        for (k = 0; k < 16; k++)
            at += (size_t)snprintf(buf + at, len - at, "%02x", raw[i][k]);
    }
    return 0;
}

static int has_device_keys(const struct gs_limits *l)
{
    int i;

    for (i = 0; i < l->n; i++)
        if (l->e[i].key != GS_KEY_ALL)
            return 1;
    return 0;
}

/* "0 = GPU-…, 1 = GPU-…" for messages. */
static void describe_visible(const struct visible_gpus *v, char *out, size_t len)
{
    size_t at = 0;
    int i;

    out[0] = '\0';
    for (i = 0; i < v->n && i < GPUSLICE_MAX_DEVICES && at < len; i++) {
        char u[GS_UUID_STRLEN];

        gs_format_uuid(v->uuid[i], u);
        at += (size_t)snprintf(out + at, len - at, "%s%d = GPU-%s", i ? ", " : "", i, u + 4);
    }
}

/*
 * Every index and UUID key of --memory, --compute and --sms names a GPU the
 * program will see: checked in a child (CUDA is never initialised here).
 * Returns -1 to go on (v filled, or v->n = -1 when nothing needed checking),
 * else the exit status.
 */
static int check_device_keys(const struct launch_mode *m, const struct launch_opts *o,
                             struct visible_gpus *v)
{
    const struct gs_limits *lists[] = {&o->mem_l, &o->comp_l, &o->sms_l};
    char buf[1024], seen[1024];
    const char *p;
    int i, j, k;

    v->n = -1;
    if (!has_device_keys(&o->mem_l) && !has_device_keys(&o->comp_l) &&
        !has_device_keys(&o->sms_l))
        return -1;
    if (launch_in_child(visible_probe, o->devices, 60, buf, sizeof(buf)) < 0) {
        gs_log_error("%s: cannot check the devices that %s name: %s", m->cmd,
                     has_device_keys(&o->mem_l)    ? "--memory's keys"
                     : has_device_keys(&o->comp_l) ? "--compute's keys"
                                                   : "--sms's keys",
                     buf);
        return GS_EXIT_ERROR;
    }
    v->n = atoi(buf);
    for (i = 0, p = strchr(buf, ' '); p && i < v->n && i < GPUSLICE_MAX_DEVICES; i++) {
        for (k = 0; k < 16; k++) {
            unsigned b;
            if (sscanf(p + 1 + 2 * k, "%2x", &b) != 1)
                break;
            v->uuid[i][k] = (uint8_t)b;
        }
        p = strchr(p + 1, ' ');
    }
    describe_visible(v, seen, sizeof(seen));
    for (j = 0; j < 3; j++) {
        const struct gs_limits *l = lists[j];

        for (i = 0; i < l->n; i++) {
            const struct gs_limit_entry *e = &l->e[i];
            int found = 0;

            if (e->key == GS_KEY_INDEX && e->index >= GPUSLICE_MAX_DEVICES && e->index < v->n) {
                gs_log_error("%s: device %d: a tenant keeps limits for its first %d GPUs only "
                             "(choose the GPUs the program sees with --device)",
                             l->source, e->index, GPUSLICE_MAX_DEVICES);
                return GS_EXIT_USAGE;
            }
            if (e->key == GS_KEY_INDEX && e->index >= v->n) {
                gs_log_error("%s: device %d does not exist: %s would see %d GPU%s%s%s%s", l->source,
                             e->index, o->what, v->n, v->n == 1 ? "" : "s", v->n ? " (" : "",
                             seen, v->n ? ")" : "");
                return GS_EXIT_USAGE;
            }
            if (e->key != GS_KEY_UUID)
                continue;
            for (k = 0; k < v->n && k < GPUSLICE_MAX_DEVICES && !found; k++) {
                char u[GS_UUID_STRLEN];
                gs_format_uuid(v->uuid[k], u);
                found = strcasecmp(u, e->uuid) == 0;
            }
            if (!found) {
                gs_log_error("%s: GPU-%s is not a GPU %s would see%s%s%s", l->source, e->uuid + 4,
                             o->what, v->n ? " (it sees " : " (it sees none)", seen,
                             v->n ? ")" : "");
                return GS_EXIT_USAGE;
            }
        }
    }
    return -1;
}

/*
 * One limit of a nested run against the enclosing tenant's: 0 if equal or not
 * given, else the exit status after a message. what: "--memory"/"--compute".
 */
static int nested_limit(const struct launch_mode *m, const struct launch_opts *o,
                        const struct gpuslice_tenant *t, const char *env, const char *what,
                        const char *where, uint64_t have, uint64_t want, int size)
{
    char a[32], b[32];

    if (want == have)
        return 0;
    if (size) {
        gs_format_size(have, a, sizeof(a));
        gs_format_size(want, b, sizeof(b));
    } else {
        snprintf(a, sizeof(a), "%llu%%", (unsigned long long)have);
        snprintf(b, sizeof(b), "%llu%%", (unsigned long long)want);
    }
    gs_log_error("%s: %s runs inside tenant \"%.63s\" (%s), whose limit %s is %s; a nested "
                 "gpuslice %s shares that tenant's limits and %s (asked: %s). Give the limit to "
                 "the outer gpuslice run, or lower it with gpuslice set",
                 what, o->what, t->name, env, where, have ? a : "none", m->cmd,
                 (want == 0 && have != 0) || (have != 0 && want > have) ? "may not raise them"
                                                                        : "cannot narrow them yet",
                 want ? b : "none");
    return GS_EXIT_USAGE;
}

/*
 * A run inside a tenant (GPUSLICE_TENANT names one we may join) stays in
 * it: a new tenant would escape the enclosing one's limits. Limits given to
 * such a run must be the enclosing tenant's own. Returns -1 to go on, or
 * the exit status; *outer is the enclosing tenant (mapped) or NULL.
 */
static int nested_run(const struct launch_mode *m, const struct launch_opts *o,
                      struct gpuslice_tenant **outer, char *path, size_t pathlen)
{
    static const uint8_t zero[16];
    const char *env = getenv(GS_ENV_TENANT);
    struct gpuslice_tenant *t;
    char where[80];
    int i, r = 0;

    *outer = NULL;
    if (env == NULL || *env == '\0' || gs_tenant_open(env, &t) < 0)
        return -1;
    if (gs_proc_start_time(t->creator_pid) != t->creator_start_time &&
        gs_tenant_live_procs(t) == 0) {
        gs_tenant_close(t); /* a leftover of a tenant that ended: not one to join */
        return -1;
    }
    for (i = 0; i < GPUSLICE_MAX_DEVICES && r == 0; i++) {
        const struct gpuslice_tenant_device *d = &t->dev[i];
        char u[GS_UUID_STRLEN];

        if (memcmp(d->uuid, zero, 16) == 0)
            continue;
        gs_format_uuid(d->uuid, u);
        snprintf(where, sizeof(where), "on GPU-%s", u + 4);
        if (o->mem_set)
            r = nested_limit(m, o, t, env, "--memory", where,
                             __atomic_load_n(&d->mem_limit, __ATOMIC_RELAXED),
                             gs_limits_lookup(&o->mem_l, d->ordinal, u), 1);
        if (o->comp_set && r == 0)
            r = nested_limit(m, o, t, env, "--compute", where,
                             __atomic_load_n(&d->compute_limit, __ATOMIC_RELAXED),
                             gs_limits_lookup(&o->comp_l, d->ordinal, u) % 100, 0);
    }
    /* And for the GPUs it has not used yet. */
    if (o->mem_set && r == 0 && (t->set_flags & GPUSLICE_SET_MEMORY))
        r = nested_limit(m, o, t, env, "--memory", "for its other GPUs", t->set_mem_limit,
                         gs_limits_lookup(&o->mem_l, -1, NULL), 1);
    if (o->comp_set && r == 0 && (t->set_flags & GPUSLICE_SET_COMPUTE))
        r = nested_limit(m, o, t, env, "--compute", "for its other GPUs", t->set_compute_limit,
                         gs_limits_lookup(&o->comp_l, -1, NULL) % 100, 0);
    if (r) {
        gs_tenant_close(t);
        return r;
    }
    gs_log_note("%s runs inside tenant \"%.63s\" (%s) and shares its limits", o->what, t->name,
                env);
    snprintf(path, pathlen, "%s", env);
    *outer = t;
    return -1;
}

int launch_main(const struct launch_mode *m, int argc, char **argv)
{
    struct launch_opts o = {0};
    struct gpuslice_tenant *t = NULL;
    struct visible_gpus vis;
    char lib[PATH_MAX], path[PATH_MAX], pydir[PATH_MAX];
    sigset_t block, old;
    int r, status = 0, pipefd[2], nested;
    pid_t child, reserver = 0;

    if ((r = parse_args(m, argc, argv, &o)) >= 0 || (r = check_device_keys(m, &o, &vis)) >= 0 ||
        (r = nested_run(m, &o, &t, path, sizeof(path))) >= 0) {
        opts_done(&o);
        return r;
    }
    nested = t != NULL;
    if (nested && o.filled) {
        gs_log_error("--filled: %s runs inside tenant \"%.63s\" (%s); a memory reservation is "
                     "made by the outer gpuslice run (give --filled to it)",
                     o.what, t->name, path);
        gs_tenant_close(t);
        opts_done(&o);
        return GS_EXIT_USAGE;
    }
    if ((r = find_preload(lib, sizeof(lib))) < 0) {
        gs_log_error("cannot find the interposer libgpuslice.so (%s: %s); set "
                     GS_ENV_PRELOAD_LIB " to its path",
                     lib, gs_strerror(r));
        opts_done(&o);
        return GS_EXIT_ERROR;
    }
    if (!nested) {
        gs_tenant_sweep(gs_tenant_dir());
        if ((r = gs_tenant_create(gs_tenant_dir(), o.name ? o.name : o.what, path, sizeof(path),
                                  &t)) < 0) {
            gs_log_error("cannot create the tenant's state in %s: %s (set GPUSLICE_RUN_DIR to a "
                         "writable directory)",
                         gs_tenant_dir(), gs_strerror(r));
            opts_done(&o);
            return GS_EXIT_ERROR;
        }
        /* Its limits belong to it from now on: no process of it can change them. */
        if ((r = gs_tenant_fix_limits(t, o.mem_set ? &o.mem_l : NULL, o.comp_set ? &o.comp_l : NULL,
                                      vis.n, vis.uuid)) < 0) {
            gs_log_error("cannot record the tenant's limits in %s: %s", path, gs_strerror(r));
            unlink(path);
            gs_tenant_close(t);
            opts_done(&o);
            return GS_EXIT_ERROR;
        }
    }
    if (o.filled) {
        gs_log_note("filling every GPU %s sees to %g%% of its memory", o.what, 100 * o.filled);
        if (start_reserver(o.filled, o.devices, t, &reserver) < 0)
            goto fail;
    }
    if (setenv(GS_ENV_TENANT, path, 1) < 0 ||
        /*
         * The limits live in the tenant; the variables stay as the limits of a
         * process that leaves it (one that unsets GPUSLICE_TENANT gets them alone).
         */
        (o.memory && setenv(GS_ENV_MEMORY, o.memory, 1) < 0) ||
        (o.compute && setenv(GS_ENV_COMPUTE, o.compute, 1) < 0) ||
        (o.sms && setenv(GS_ENV_SMS, o.sms, 1) < 0) ||
        (o.devices && setenv("CUDA_VISIBLE_DEVICES", o.devices, 1) < 0) || set_preload(lib) < 0) {
        gs_log_error("cannot set the environment: %s", strerror(errno));
        goto fail;
    }
    /*
     * A missing hook costs PyTorch only its stream priority, so the program
     * still runs; the warning is printed even with -q, like --nice's, since it
     * says a default did not take effect.
     */
    if (!o.no_torch_priority) {
        if ((r = find_python_dir(pydir, sizeof(pydir))) < 0)
            gs_log_error("warning: cannot find gpuslice's Python hook (%s: %s); PyTorch keeps "
                         "its default stream priority (set GPUSLICE_PYTHON_DIR to the "
                         "directory holding sitecustomize.py, or pass --no-torch-priority)",
                         pydir, r == -EINVAL ? "a PYTHONPATH entry cannot contain ':'"
                                             : gs_strerror(r));
        else if ((r = set_pythonpath(pydir)) < 0) {
            gs_log_error("cannot set PYTHONPATH: %s", gs_strerror(r));
            goto fail;
        }
    }
    if (o.gpu_share && (r = setup_mps(&o)) >= 0) {
        if (!nested)
            unlink(path);
        gs_tenant_close(t);
        opts_done(&o);
        return r;
    }
    if (o.python)
        gs_log_note("running the Python script %s with %s", o.what, o.argv[0]);
    if (o.devices)
        gs_log_note("CUDA_VISIBLE_DEVICES=%s for %s", o.devices, o.what);
    if (o.has_nice)
        gs_log_note("nice %d for %s", o.nice, o.what);
    if (o.memory)
        gs_log_note("memory limit %s for %s", o.memory, o.what);
    if (o.compute)
        gs_log_note("compute ceiling %s%s for %s", o.compute,
                    strchr(o.compute, ':') ? " (percent)" : "%", o.what);
    if (o.sms)
        gs_log_note("SM partition %s%s for %s", o.sms, strchr(o.sms, '%') ? " of the SMs" : "",
                    o.what);
    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        gs_log_error("pipe: %s", strerror(errno));
        goto fail;
    }
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGUSR2);
    sigprocmask(SIG_BLOCK, &block, &old);
    if ((child = fork()) < 0) {
        gs_log_error("fork: %s", strerror(errno));
        close(pipefd[0]);
        close(pipefd[1]);
        sigprocmask(SIG_SETMASK, &old, NULL);
        goto fail;
    }
    if (child == 0) {
        int e;
        sigprocmask(SIG_SETMASK, &old, NULL);
        close(pipefd[0]);
        if (o.has_nice)
            apply_nice(o.nice);
        execvp(o.argv[0], o.argv);
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
        if (read(pipefd[0], &e, sizeof(e)) == (ssize_t)sizeof(e)) {
            if (o.python)
                gs_log_error("%s: cannot run %s, the interpreter for %s (set PYTHON to "
                             "another): %s",
                             m->cmd, o.argv[0], o.what, strerror(e));
            else
                gs_log_error("%s: cannot run %s: %s", m->cmd, o.what, strerror(e));
        }
        close(pipefd[0]);
    }
    r = wait_child(child, t, &status, &reserver);
    stop_reserver(reserver);
    reserver = 0;
    gs_tenant_reap(t);
    if (nested)
        ; /* the enclosing run owns the tenant's state */
    else if (gs_tenant_live_procs(t) == 0)
        unlink(path);
    else
        gs_log_note("%d process(es) of the tenant still run; its state stays until they exit",
                    gs_tenant_live_procs(t));
    gs_tenant_close(t);
    if (r < 0) {
        gs_log_error("waiting for %s: %s", o.what, gs_strerror(r));
        opts_done(&o);
        return GS_EXIT_ERROR;
    }
    opts_done(&o);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
fail:
    stop_reserver(reserver);
    if (!nested)
        unlink(path);
    gs_tenant_close(t);
    opts_done(&o);
    return GS_EXIT_ERROR;
}

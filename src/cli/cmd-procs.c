/*
 * gpuslice procs --shares W1,W2,... -- CMD1 ARGS ::: CMD2 ARGS ::: ...
 *
 * Runs several programs side by side on one GPU, each on its own share of
 * its SMs: plans the partitions from the driver's real granularity
 * (smplan.c), makes sure gpuslice's MPS daemon for the GPU runs (processes
 * are time-sliced without it), starts every lane as `gpuslice run --gpu-share
 * 100 --sms COUNT@FIRST`, waits until each has made its partition (the
 * interposer says so in a file of procs's directory, GPUSLICE_LANE_BARRIER,
 * and waits for another to appear), prints
 * the lanes, and releases them together. When a lane fails the others are
 * terminated and its status is returned.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/launch.h"
#include "control/probe.h"
#include "control/mps.h"
#include "common/driver.h"
#include "common/smplan.h"
#include "common/cuda_api.h"
#include "common/parse.h"

#define SEP ":::"

static void procs_usage(void)
{
    printf("usage: gpuslice procs --shares W1,W2,... [-d D] [--dry-run] [--json]\n"
           "                      [--timeout SECONDS] [-q] -- CMD1 [ARGS] ::: CMD2 [ARGS] ...\n\n"
           "Runs the programs side by side on one GPU, each on its own share of the\n"
           "GPU's SMs (a green context, for the whole process: every thread, the CUDA\n"
           "runtime, its graphs), concurrently through your MPS daemon for the GPU\n"
           "(started if it is not running, and left running; gpuslice mps stop stops\n"
           "it). The shares are weights, one per program; the SMs are split in whole\n"
           "groups of the GPU's co-scheduled split when every program gets one (8 SMs\n"
           "on an H200), else of its finest split (2). Each program is started as by\n"
           "gpuslice run (a *.py file runs under Python); it runs freely until its\n"
           "first CUDA context, which waits until every program has made its\n"
           "partition: then all are released together.\n\n"
           "options:\n"
           "      --shares LIST     one positive weight per program: 20,30,50\n"
           "  -d, --device D        the GPU: a CUDA index (default 0) or a GPU UUID\n"
           "      --dry-run         print the plan as JSON and start nothing\n"
           "      --json            print the lanes (with their PIDs) as one JSON line on\n"
           "                        stdout when they are released\n"
           "      --timeout SECONDS how long the lanes may take to make their\n"
           "                        partitions (default 120)\n"
           "  -q, --quiet           no progress messages\n"
           "  -h, --help            this text\n\n"
           "Programs are separated by \" " SEP " \". Each lane gets GPUSLICE_LANE=INDEX.\n"
           "Exit status: 0 when every program exits 0; otherwise the status of the\n"
           "first that failed (128+N for signal N), the others being terminated; 1 when\n"
           "the GPU cannot be partitioned or MPS cannot start; 2 for bad usage.\n");
}

struct geom_query {
    const char *device;
    int index; /* the device's CUDA index */
    char uuid[GS_UUID_STRLEN];
    char name[128];
    struct sm_geom g;
};

/* In a child: the device's UUID, name and split, as "UUID TOTAL C NC F NF NAME". */
static int query_geom(void *arg, char *buf, size_t len)
{
    const struct geom_query *q = arg;
    struct gs_driver d = { 0 };
    char uuid[GS_UUID_STRLEN], want[GS_UUID_STRLEN], name[128] = "", eb[32], why[256];
    CUdevResource all, groups[1], rest;
    unsigned total, coarse = 0, ncoarse = 0, fine = 0, nfine = 0, n;
    CUdevice dev = -1;
    CUresult r;
    CUuuid u;
    int i, nd = 0, index = 0;

    if (gs_driver_open_cuda(&d, RTLD_NOW | RTLD_LOCAL, NULL, why, sizeof(why)) < 0) {
        snprintf(buf, len, "no NVIDIA driver found: %s", why);
        return -1;
    }
    if (!d.cuInit || !d.cuDeviceGet || !d.cuDeviceGetCount || !d.cuDeviceGetUuid_v2 ||
        !d.cuDeviceGetName) {
        snprintf(buf, len, "the CUDA driver lacks the device calls");
        return -1;
    }
    if ((r = d.cuInit(0)) != CUDA_SUCCESS || (r = d.cuDeviceGetCount(&nd)) != CUDA_SUCCESS) {
        snprintf(buf, len, "the CUDA driver did not initialise: %s",
                 gs_driver_cu_name(&d, r, eb, sizeof(eb)));
        return -1;
    }
    if (gs_parse_uuid(q->device, strlen(q->device), want)) {
        for (i = 0; i < nd && dev < 0; i++) {
            if (d.cuDeviceGet(&dev, i) == CUDA_SUCCESS &&
                d.cuDeviceGetUuid_v2(&u, dev) == CUDA_SUCCESS) {
                gs_format_uuid((const unsigned char *)u.bytes, uuid);
                if (strcmp(uuid, want) != 0)
                    dev = -1;
                else
                    index = i;
            } else {
                dev = -1;
            }
        }
        if (dev < 0) {
            snprintf(buf, len, "--device: no GPU %s among the %d this process sees", q->device, nd);
            return -1;
        }
    } else if ((r = d.cuDeviceGet(&dev, (index = atoi(q->device)))) != CUDA_SUCCESS) {
        snprintf(buf, len, "--device: there is no GPU %s (%d visible)", q->device, nd);
        return -1;
    }
    if ((r = d.cuDeviceGetUuid_v2(&u, dev)) != CUDA_SUCCESS) {
        snprintf(buf, len, "GPU %s has no UUID: %s", q->device,
                 gs_driver_cu_name(&d, r, eb, sizeof(eb)));
        return -1;
    }
    gs_format_uuid((const unsigned char *)u.bytes, uuid);
    memcpy(uuid, "GPU", 3);
    d.cuDeviceGetName(name, sizeof(name), dev);
    memset(&all, 0, sizeof(all));
    if (!d.cuDeviceGetDevResource || !d.cuDevSmResourceSplitByCount) {
        snprintf(buf, len,
                 "GPU %s: this driver has no green contexts (CUDA 12.4 or later is "
                 "needed for SM partitions)",
                 q->device);
        return -1;
    }
    if ((r = d.cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM)) != CUDA_SUCCESS ||
        all.sm.smCount == 0) {
        snprintf(buf, len,
                 "GPU %s cannot partition its SMs with green contexts "
                 "(cuDeviceGetDevResource: %s)",
                 q->device,
                 r == CUDA_SUCCESS ? "no SMs" : gs_driver_cu_name(&d, r, eb, sizeof(eb)));
        return -1;
    }
    total = all.sm.smCount;
    n = 1;
    if (d.cuDevSmResourceSplitByCount(groups, &n, &all, &rest, 0, 1) == CUDA_SUCCESS && n == 1) {
        coarse = groups[0].sm.smCount;
        if (d.cuDevSmResourceSplitByCount(NULL, &ncoarse, &all, NULL, 0, 1) != CUDA_SUCCESS)
            ncoarse = 0;
    }
    n = 1;
    if (d.cuDevSmResourceSplitByCount(groups, &n, &all, &rest,
                                      CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING,
                                      1) == CUDA_SUCCESS &&
        n == 1) {
        fine = groups[0].sm.smCount;
        if (d.cuDevSmResourceSplitByCount(NULL, &nfine, &all, NULL,
                                          CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING,
                                          1) != CUDA_SUCCESS)
            nfine = 0;
    }
    if (ncoarse == 0 && nfine == 0) {
        snprintf(buf, len, "GPU %s: cuDevSmResourceSplitByCount made no groups of its %u SMs",
                 q->device, total);
        return -1;
    }
    snprintf(buf, len, "%s %d %u %u %u %u %u %s", uuid, (int)index, total, coarse, ncoarse, fine,
             nfine, name);
    return 0;
}

struct lane {
    char **argv; /* the program and its arguments (into the caller's argv) */
    int argc;
    struct sm_lane sm;
    pid_t pid;  /* the gpuslice run that starts it */
    pid_t prog; /* the program, as its interposer said */
    int ready, status, ended;
    char line[640];
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void print_plan(const struct geom_query *q, int index, const struct lane *l, int n,
                       unsigned group, int with_pids)
{
    int i;

    printf("{\"device\":{\"index\":%d,\"uuid\":\"%s\",\"name\":", index, q->uuid);
    gs_json_string(stdout, q->name, strlen(q->name));
    printf(",\"sm_count\":%u,\"group_sms\":%u},\"lanes\":[", q->g.total, group);
    for (i = 0; i < n; i++) {
        printf("%s{\"index\":%d,\"requested_share\":%g,\"sm_count\":%u,\"first_sm\":%u",
               i ? "," : "", i, l[i].sm.share, l[i].sm.count, l[i].sm.first);
        if (with_pids)
            printf(",\"pid\":%d", (int)l[i].prog);
        printf("}");
    }
    printf("]}\n");
    fflush(stdout);
}

/* Splits argv[from..argc) at ":::" into lanes; the count, or -1 (said why). */
static int split_commands(int argc, char **argv, int from, struct lane *l, int max)
{
    int n = 0, i, start = from;

    for (i = from; i <= argc; i++) {
        if (i < argc && strcmp(argv[i], SEP) != 0)
            continue;
        if (i == start) {
            gs_log_error("procs: program %d is empty (programs are separated by \" " SEP " \")",
                         n + 1);
            return -1;
        }
        if (n == max) {
            gs_log_error("procs: more than %d programs", max);
            return -1;
        }
        l[n].argv = &argv[start];
        l[n].argc = i - start;
        n++;
        start = i + 1;
    }
    return n;
}

/* The lane's child: `gpuslice run -q --device UUID --gpu-share 100 --sms C@F -- ARGS`. */
static void exec_lane(const struct lane *l, int index, const char *uuid, const char *dir,
                      int fine_split)
{
    char sms[48], idx[16], barrier[PATH_MAX + 16], **av;
    int k = 0, i, null;

    if (!(av = calloc((size_t)l->argc + 12, sizeof(*av))))
        _exit(GS_EXIT_ERROR);
    /* Every lane from the split the plan used: groups of two splits may not be the same SMs. */
    snprintf(sms, sizeof(sms), "%u@%u%s", l->sm.count, l->sm.first, fine_split ? "/fine" : "");
    snprintf(idx, sizeof(idx), "%d", index);
    snprintf(barrier, sizeof(barrier), "%s/%d", dir, index);
    if (setenv(GS_ENV_LANE, idx, 1) < 0 || setenv(GS_ENV_LANE_BARRIER, barrier, 1) < 0)
        _exit(GS_EXIT_ERROR);
    /* What procs changed is not the program's: SIGPIPE back to its default. */
    signal(SIGPIPE, SIG_DFL);
    /*
     * Each lane is a process group of its own, so that it can be terminated
     * whole; a background group reading the terminal would stop, so the lanes
     * read nothing from it.
     */
    setpgid(0, 0);
    if ((null = open("/dev/null", O_RDONLY)) >= 0) {
        dup2(null, 0);
        if (null > 0)
            close(null);
    }
    av[k++] = "gpuslice";
    av[k++] = "run";
    av[k++] = "-q"; /* procs says what each lane is; errors still print */
    av[k++] = "--device";
    av[k++] = (char *)uuid;
    av[k++] = "--gpu-share";
    av[k++] = "100";
    av[k++] = "--sms";
    av[k++] = sms;
    av[k++] = "--";
    for (i = 0; i < l->argc; i++)
        av[k++] = l->argv[i];
    av[k] = NULL;
    execv("/proc/self/exe", av);
    fprintf(stderr, "gpuslice: procs: cannot start lane %d: %s\n", index, strerror(errno));
    _exit(127);
}

static int exit_status(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : GS_EXIT_ERROR;
}

/* Ends every lane still running: SIGTERM to its process group, SIGKILL after 5 s. */
static void terminate(struct lane *l, int n)
{
    double deadline = now_s() + 5;
    int i, left;

    for (i = 0; i < n; i++)
        if (l[i].pid > 0 && !l[i].ended)
            kill(-l[i].pid, SIGTERM);
    do {
        left = 0;
        for (i = 0; i < n; i++) {
            int st;
            if (l[i].pid <= 0 || l[i].ended)
                continue;
            if (waitpid(l[i].pid, &st, WNOHANG) == l[i].pid) {
                l[i].ended = 1;
                l[i].status = exit_status(st);
            } else {
                left++;
            }
        }
        if (left)
            usleep(50000);
    } while (left && now_s() < deadline);
    for (i = 0; i < n; i++)
        if (l[i].pid > 0 && !l[i].ended) {
            kill(-l[i].pid, SIGKILL);
            waitpid(l[i].pid, NULL, 0);
            l[i].ended = 1;
        }
}

/* What lane i said in DIR/ready.I: 1 and its line, 0 while it has said nothing. */
static int read_ready(const char *dir, int i, struct lane *l)
{
    char path[PATH_MAX + 32];
    ssize_t k;
    int fd;

    snprintf(path, sizeof(path), "%s/ready.%d", dir, i);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    k = read(fd, l->line, sizeof(l->line) - 1);
    close(fd);
    l->line[k > 0 ? k : 0] = '\0';
    return 1;
}

/* Removes the barrier's directory and what is in it (only files procs or its lanes made). */
static void remove_dir(const char *dir)
{
    char path[PATH_MAX + 260];
    DIR *d = opendir(dir);
    struct dirent *e;

    if (d) {
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

static int procs_main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "shares", required_argument, NULL, 's' },  { "device", required_argument, NULL, 'd' },
        { "dry-run", no_argument, NULL, 'n' },       { "json", no_argument, NULL, 'j' },
        { "timeout", required_argument, NULL, 't' }, { "quiet", no_argument, NULL, 'q' },
        { "help", no_argument, NULL, 'h' },          { NULL, 0, NULL, 0 }
    };
    static struct lane lanes[SMPLAN_MAX_LANES];
    double shares[SMPLAN_MAX_LANES], timeout = 120, mps_to, deadline;
    const char *shares_arg = NULL, *device = "0";
    char err[1024], bin[MPS_PATH_MAX];
    struct geom_query q;
    struct sm_lane plan[SMPLAN_MAX_LANES];
    struct mps_gpu g;
    struct sigaction sa;
    unsigned group;
    int c, n, nshares, dry = 0, json = 0, i, started = 0, failed = -1, status = 0, fd, r;
    char dir[PATH_MAX], path[PATH_MAX + 8];
    const char *rt = getenv("XDG_RUNTIME_DIR");
    char *end;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:d:qh", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            shares_arg = optarg;
            break;
        case 'd':
            device = optarg;
            break;
        case 'n':
            dry = 1;
            break;
        case 'j':
            json = 1;
            break;
        case 't':
            errno = 0;
            timeout = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(timeout > 0 && timeout <= 3600)) {
                gs_log_error("--timeout: \"%s\" is not a number of seconds (use one above 0, at "
                             "most 3600)",
                             optarg);
                return GS_EXIT_USAGE;
            }
            break;
        default:
            if ((r = gs_cli_common_option("procs", c, argv, opts, procs_usage, NULL)) >= 0)
                return r;
        }
    }
    if (!shares_arg) {
        gs_log_error("procs: --shares is needed (one weight per program, e.g. --shares 20,30,50)");
        return GS_EXIT_USAGE;
    }
    if (smplan_parse_shares(shares_arg, shares, SMPLAN_MAX_LANES, &nshares, err, sizeof(err)) < 0) {
        gs_log_error("%s", err);
        return GS_EXIT_USAGE;
    }
    if (optind >= argc) {
        gs_log_error("procs: no programs given (usage: gpuslice procs --shares 20,30,50 -- CMD1 "
                     "ARGS " SEP " CMD2 ARGS " SEP " CMD3 ARGS)");
        return GS_EXIT_USAGE;
    }
    if ((n = split_commands(argc, argv, optind, lanes, SMPLAN_MAX_LANES)) < 0)
        return GS_EXIT_USAGE;
    if (n != nshares) {
        gs_log_error("procs: %d share%s for %d program%s: give one share per program", nshares,
                     nshares == 1 ? "" : "s", n, n == 1 ? "" : "s");
        return GS_EXIT_USAGE;
    }
    if (!gs_parse_uuid(device, strlen(device), q.uuid)) {
        for (end = (char *)device; *end >= '0' && *end <= '9'; end++)
            ;
        if (end == device || *end || end - device > 3) {
            gs_log_error("--device: \"%s\" is not a GPU (use a CUDA index such as 0, or a GPU "
                         "UUID)",
                         device);
            return GS_EXIT_USAGE;
        }
    }
    if ((mps_to = mps_timeout()) < 0)
        return GS_EXIT_USAGE;
    q.device = device;
    if (probe_in_child(query_geom, &q, 30, err, sizeof(err)) < 0) {
        gs_log_error("procs: %s", err);
        return GS_EXIT_ERROR;
    }
    if (sscanf(err, "%40s %d %u %u %u %u %u %127[^\n]", q.uuid, &q.index, &q.g.total, &q.g.coarse,
               &q.g.ncoarse, &q.g.fine, &q.g.nfine, q.name) < 7) {
        gs_log_error("procs: the GPU query said \"%s\"", err);
        return GS_EXIT_ERROR;
    }
    for (i = 0; i < n; i++)
        plan[i].share = shares[i];
    if (smplan(&q.g, plan, n, &group, err, sizeof(err)) < 0) {
        gs_log_error("procs: GPU %s: %s", device, err);
        return GS_EXIT_ERROR;
    }
    for (i = 0; i < n; i++)
        lanes[i].sm = plan[i];
    if (dry) {
        print_plan(&q, q.index, lanes, n, group, 0);
        return GS_EXIT_OK;
    }

    /* Concurrency across processes needs MPS. */
    if (mps_check_platform(bin, sizeof(bin), err, sizeof(err)) < 0) {
        gs_log_error("procs: %s", err);
        return GS_EXIT_ERROR;
    }
    if (mps_gpu_init(&g, q.uuid) < 0) {
        gs_log_error("procs: the MPS directory for %s would be too long (set XDG_RUNTIME_DIR to "
                     "a shorter directory)",
                     q.uuid);
        return GS_EXIT_ERROR;
    }
    signal(SIGPIPE, SIG_IGN);
    if (mps_daemon_start(bin, &g, mps_to, &started, err, sizeof(err)) < 0) {
        gs_log_error("procs: MPS: %s", err);
        return GS_EXIT_ERROR;
    }
    gs_log_note("procs: %s the MPS control daemon for %s", started ? "started" : "reusing", q.uuid);

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    /* The lanes' rendezvous: a directory of our own (mode 0700). */
    snprintf(dir, sizeof(dir), "%s/gpuslice-procs-XXXXXX", rt && *rt == '/' ? rt : "/tmp");
    if (mkdtemp(dir) == NULL) {
        gs_log_error("procs: cannot make a directory for the lanes' start (%s): %s", dir,
                     strerror(errno));
        return GS_EXIT_ERROR;
    }
    /* Who waits for the lanes: a lane stops waiting when this process is gone. */
    snprintf(path, sizeof(path), "%s/owner", dir);
    if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) >= 0) {
        char pid[24];
        int len = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
        if (write(fd, pid, (size_t)len) != len)
            gs_log_note("procs: cannot write %s: lanes will not notice if procs is killed", path);
        close(fd);
    }
    fflush(NULL);
    for (i = 0; i < n; i++) {
        if ((lanes[i].pid = fork()) < 0) {
            gs_log_error("procs: fork: %s", strerror(errno));
            failed = i;
            status = GS_EXIT_ERROR;
            break;
        }
        if (lanes[i].pid == 0)
            exec_lane(&lanes[i], i, q.uuid, dir, smplan_fine(&q.g, n));
        setpgid(lanes[i].pid, lanes[i].pid);
    }

    /* Until every lane holds its partition (or one fails, ends, or time runs out). */
    deadline = now_s() + timeout;
    for (;;) {
        int waiting = 0, st;

        if (failed >= 0 || stop_signal)
            break;
        for (i = 0; i < n && failed < 0; i++) {
            struct lane *l = &lanes[i];
            if (!l->ready && read_ready(dir, i, l)) {
                if (sscanf(l->line, "ready %d", &l->prog) == 1) {
                    l->ready = 1;
                    gs_log_note("procs: lane %d: PID %d, share %g, %u SMs (from SM %u): %s", i,
                                (int)l->prog, l->sm.share, l->sm.count, l->sm.first, l->argv[0]);
                } else {
                    char *msg =
                        strncmp(l->line, "error ", 6) == 0 ? strchr(l->line + 6, ' ') : NULL;
                    l->line[strcspn(l->line, "\n")] = '\0';
                    gs_log_error("procs: lane %d cannot have its partition: %s", i,
                                 msg ? msg + 1 : l->line);
                    failed = i;
                    status = GS_EXIT_ERROR;
                }
            }
            if (!l->ended && waitpid(l->pid, &st, WNOHANG) == l->pid) {
                l->ended = 1;
                l->status = exit_status(st);
                if (failed < 0 && (!l->ready || l->status != 0)) {
                    gs_log_error("procs: lane %d (%s) ended before the lanes were released, "
                                 "with status %d",
                                 i, l->argv[0], l->status);
                    failed = i;
                    status = l->status ? l->status : GS_EXIT_ERROR;
                }
            }
            waiting += !l->ready;
        }
        if (failed >= 0 || waiting == 0)
            break;
        if (now_s() > deadline) {
            for (i = 0; i < n && lanes[i].ready; i++)
                ;
            gs_log_error("procs: lane %d (%s) did not make its partition within %g s (a "
                         "program that never uses CUDA, or only contexts of its own, never "
                         "does; see --timeout)",
                         i, lanes[i].argv[0], timeout);
            failed = i;
            status = GS_EXIT_ERROR;
            break;
        }
        usleep(20000);
    }
    if (failed < 0 && !stop_signal) {
        if (json)
            print_plan(&q, q.index, lanes, n, group, 1);
        snprintf(path, sizeof(path), "%s/go", dir);
        if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) >= 0)
            close(fd);
        gs_log_note("procs: %d lanes on %s released together", n, q.uuid);
        /* Until all end, or one fails. */
        for (;;) {
            int st, left = 0;
            pid_t p = waitpid(-1, &st, 0);
            if (p < 0 && errno == EINTR) {
                if (stop_signal)
                    break;
                continue;
            }
            if (p < 0)
                break;
            for (i = 0; i < n; i++) {
                if (lanes[i].pid == p) {
                    lanes[i].ended = 1;
                    lanes[i].status = exit_status(st);
                    if (lanes[i].status != 0 && failed < 0) {
                        gs_log_error("procs: lane %d (%s) failed with status %d; terminating "
                                     "the others",
                                     i, lanes[i].argv[0], lanes[i].status);
                        failed = i;
                        status = lanes[i].status;
                    }
                }
                left += !lanes[i].ended;
            }
            if (failed >= 0 || left == 0)
                break;
        }
    }
    if (stop_signal) {
        gs_log_error("procs: %s: terminating the lanes", strsignal(stop_signal));
        status = 128 + stop_signal;
    }
    /* Before the directory goes: lanes still waiting would take its end for a release. */
    terminate(lanes, n);
    remove_dir(dir);
    return status;
}

const struct gs_cmd gs_cmd_procs = { "procs",
                                     "run programs side by side, each on its share of a GPU's SMs",
                                     procs_main, procs_usage };

/*
 * gpuslice run and gpuslice exec: their usage and options, parsed into a
 * run_spec that control/run.c starts.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/launch.h"
#include "control/log.h"
#include "control/reserver.h"
#include "control/run.h"
#include "common/config.h"
#include "common/devlist.h"
#include "common/error.h"
#include "common/parse.h"
#include "common/tenant.h"

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
           "      --tenant NAME      join the daemon's tenant NAME (made with POST\n"
           "                         /v1/tenants): its limits, held by gpusliced, apply\n"
           "                         to COMMAND and everything it starts\n"
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
           "      --priority CLASS   latency, normal (the default) or background: on a\n"
           "                         GPU shared with your other tenants, a lower class\n"
           "                         yields to a higher one (normal only if given)\n"
           "                         while that one has work there (as MPS clients, on\n"
           "                         three quarters of the SMs, GPUSLICE_YIELD_SMS;\n"
           "                         else by keeping its queue to about one kernel)\n"
           "      --weight N         the tenant's share (1..100, default 1) of a GPU it\n"
           "                         takes turns on: turns of 10 ms x weight, at most\n"
           "                         200 ms\n"
           "  -q, --quiet            no progress messages\n"
           "  -h, --help             this text\n\n"
           "Index keys of --memory and --compute (0:8G) are CUDA indexes as the program\n"
           "sees them, after --device: with -d 2,3, 0:8G limits GPU 2.\n"
           "gpuslice tenants shows the tenant; gpuslice set changes its limits.\n"
           "The program's exit status is returned; 128+N if it died of signal N;\n"
           "2 for bad usage (nothing is started), 126/127 if COMMAND cannot be run.\n");
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

static void opts_done(struct run_spec *o)
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
static int mps_device(struct run_spec *o, char *err, size_t errlen)
{
    const char *sel = o->devices ? o->devices : getenv("CUDA_VISIBLE_DEVICES");
    int n = sel ? gs_device_list_count(sel) : 1;

    if (sel && n == 0) {
        snprintf(err, errlen,
                 "--gpu-share: CUDA_VISIBLE_DEVICES is empty, so the program has "
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

static int parse_args(const struct launch_mode *m, int argc, char **argv, struct run_spec *o)
{
    static const struct option opts[] = { { "memory", required_argument, NULL, 'm' },
                                          { "compute", required_argument, NULL, 'c' },
                                          { "device", required_argument, NULL, 'd' },
                                          { "nice", required_argument, NULL, 'n' },
                                          { "name", required_argument, NULL, 'N' },
                                          { "quiet", no_argument, NULL, 'q' },
                                          { "help", no_argument, NULL, 'h' },
                                          { "no-torch-priority", no_argument, NULL, 'T' },
                                          { "gpu-share", required_argument, NULL, 'G' },
                                          { "mps-priority", required_argument, NULL, 'P' },
                                          { "filled", required_argument, NULL, 'f' },
                                          { "sms", required_argument, NULL, 'S' },
                                          { "sm-share", required_argument, NULL, 'H' },
                                          { "tenant", required_argument, NULL, 'A' },
                                          { "priority", required_argument, NULL, 'R' },
                                          { "weight", required_argument, NULL, 'W' },
                                          { NULL, 0, NULL, 0 } };
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
        case 'A':
            o->tenant = optarg;
            break;
        case 'R':
            o->priority_arg = optarg;
            break;
        case 'W':
            o->weight_arg = optarg;
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
    if (o->compute && gs_parse_limit_list(o->compute, GS_VALUE_PERCENT, "--compute", &o->comp_l,
                                          err, sizeof(err)) < 0) {
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
    if (o->priority_arg && gs_parse_priority(o->priority_arg, &o->priority) < 0) {
        gs_log_error("--priority: \"%s\" is not a priority class (use latency, normal or "
                     "background)",
                     o->priority_arg);
        goto out;
    }
    if (o->weight_arg && gs_parse_weight(o->weight_arg, &o->weight) < 0) {
        gs_log_error("--weight: \"%s\" is not a weight (use an integer from 1 to %u)",
                     o->weight_arg, GPUSLICE_WEIGHT_MAX);
        goto out;
    }
    o->sched_given = o->priority_arg || o->weight_arg;
    {
        extern char **environ;
        uint32_t p, w;
        /* As with the limits: the environment's class and weight become the tenant's. */
        if (gs_config_sched(environ, &p, &w, err, sizeof(err)) < 0) {
            gs_log_error("%s (the environment's class and weight become the tenant's)", err);
            goto out;
        }
        if (!o->priority_arg && p && !o->tenant) {
            o->priority = p;
            o->priority_arg = gs_priority_name(p);
        }
        if (!o->weight_arg && w && !o->tenant) {
            o->weight = w;
            o->weight_arg = getenv(GS_ENV_WEIGHT);
        }
    }
    if (o->tenant &&
        (o->memory || o->compute || filled || o->name || o->priority_arg || o->weight_arg)) {
        gs_log_error("--tenant %s: the daemon's tenant has its limits, class, weight and name; "
                     "give --memory, --compute, --priority, --weight, --filled or --name to the "
                     "tenant instead (gpuslice set %s --memory SIZE), or run without --tenant",
                     o->tenant, o->tenant);
        goto out;
    }
    if (o->tenant) {
        /* The environment's limits are not the tenant's either: the daemon's are. */
        o->mem_l.n = 0;
        o->comp_l.n = 0;
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
        gs_log_error("--mps-priority: \"%s\" is not a priority (use normal or below-normal)", prio);
        goto out;
    }
    if (prio && !share) {
        gs_log_error("--mps-priority needs --gpu-share (it is the priority of an MPS client)");
        goto out;
    }
    o->mps_priority = prio && strcmp(prio, "below-normal") == 0;
    if (filled && reserve_parse_ratio(filled, &o->filled) < 0) {
        gs_log_error("--filled: \"%s\" is not a ratio (use a number in (0, 1], e.g. 0.9)", filled);
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

int launch_main(const struct launch_mode *m, int argc, char **argv)
{
    struct run_spec o = { 0 };
    int r;

    if ((r = parse_args(m, argc, argv, &o)) < 0)
        r = run_program(m->cmd, &o);
    opts_done(&o);
    return r;
}

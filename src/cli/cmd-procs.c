/*
 * gpuslice procs --shares W1,W2,... -- CMD1 ARGS ::: CMD2 ARGS ::: ...
 *
 * Runs several programs side by side on one GPU, each on its own share of
 * its SMs: parses the options, asks the driver for the GPU's real split
 * (control/probe.c), plans the partitions (smplan.c) and prints them; the
 * lanes are started, released together and waited for by
 * control/side_by_side.c. When a lane fails the others are terminated and its
 * status is returned.
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
#include "control/side_by_side.h"
#include "control/mps.h"
#include "common/driver.h"
#include "common/smplan.h"
#include "common/cuda_api.h"
#include "common/parse.h"

#define SEP SIDE_BY_SIDE_SEP

static void procs_usage(void)
{
    printf("usage: gpuslice procs --shares W1,W2,... [--memory M1,M2,...] [-d D] [--dry-run]\n"
           "                      [--json] [--timeout SECONDS] [-q]\n"
           "                      -- CMD1 [ARGS] ::: CMD2 [ARGS] ...\n\n"
           "Runs the programs side by side on one GPU, each on its own share of the\n"
           "GPU's SMs (a green context, for the whole process: every thread, the CUDA\n"
           "runtime, its graphs), concurrently through your MPS daemon for the GPU\n"
           "(started if it is not running, and left running; gpuslice mps stop stops\n"
           "it). The shares are weights, one per program; the SMs are split in whole\n"
           "groups of the GPU's co-scheduled split (8 SMs on an H200: thread-block\n"
           "clusters of up to 8 run) when every program is then within 2 points of its\n"
           "share, else of its finest split (2 SMs, clusters of 2). Each program is\n"
           "started as by gpuslice run (a *.py file runs under Python); it runs\n"
           "freely until its first CUDA context, which waits until every program has\n"
           "made its partition: then all are released together.\n\n"
           "options:\n"
           "      --shares LIST     one positive weight per program: 20,30,50\n"
           "      --memory LIST     one hard memory limit per program: a size (8G,\n"
           "                        512M) or a share of the GPU's memory (25%%); together\n"
           "                        at most the GPU's memory (default: none; memory is\n"
           "                        shared)\n"
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

static void print_plan(const struct geom_query *q, int index, const struct lane *l, int n,
                       const struct sm_split *split, int with_pids)
{
    int i;

    printf("{\"device\":{\"index\":%d,\"uuid\":\"%s\",\"name\":", index, q->uuid);
    gs_json_string(stdout, q->name, strlen(q->name));
    printf(",\"sm_count\":%u,\"group_sms\":%u,\"coscheduled\":%s,\"max_cluster\":%u,"
           "\"memory_bytes\":%llu},\"lanes\":[",
           q->g.total, split->group, split->fine ? "false" : "true", split->max_cluster,
           (unsigned long long)q->memory);
    for (i = 0; i < n; i++) {
        printf("%s{\"index\":%d,\"requested_share\":%g,\"sm_count\":%u,\"first_sm\":%u",
               i ? "," : "", i, l[i].sm.share, l[i].sm.count, l[i].sm.first);
        if (l[i].memory)
            printf(",\"memory_limit_bytes\":%llu", (unsigned long long)l[i].memory);
        else
            printf(",\"memory_limit_bytes\":null");
        if (with_pids)
            printf(",\"pid\":%d", (int)l[i].prog);
        printf("}");
    }
    printf("]}\n");
    fflush(stdout);
}

/* What side_by_side_run calls once the lanes are released: the plan with each lane's PID. */
struct plan_print {
    const struct geom_query *q;
    const struct lane *lanes;
    int n;
    const struct sm_split *split;
};

static void released(void *arg)
{
    const struct plan_print *p = arg;

    print_plan(p->q, p->q->index, p->lanes, p->n, p->split, 1);
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

/* A lane's memory limit as given: bytes, or a share of the GPU's memory in percent. */
struct lane_memory {
    uint64_t bytes;
    uint64_t micro; /* > 0: a share in millionths of a percent, resolved once the GPU's memory
                       is known */
};

/* "25", "12.5", "0.000001" (at most 6 decimals) in millionths, above 0 and at most 100; -1 if not. */
static int parse_percent(const char *v, size_t len, uint64_t *out)
{
    uint64_t whole = 0, frac = 0;
    size_t i = 0, digits = 0, decimals = 0;

    for (; i < len && v[i] >= '0' && v[i] <= '9'; i++, digits++)
        if ((whole = whole * 10 + (uint64_t)(v[i] - '0')) > 100)
            return -1;
    if (i < len && v[i] == '.') {
        for (i++; i < len && v[i] >= '0' && v[i] <= '9'; i++, decimals++) {
            if (decimals == 6)
                return -1;
            frac = frac * 10 + (uint64_t)(v[i] - '0');
        }
        if (decimals == 0)
            return -1;
    }
    if (i != len || digits == 0)
        return -1;
    for (; decimals < 6; decimals++)
        frac *= 10;
    *out = whole * 1000000 + frac;
    return *out > 0 && *out <= 100000000 ? 0 : -1;
}

/*
 * Parses --memory's LIST: one size or percentage per lane, at most max. The count, or -1 with
 * a message in err naming the entry and the accepted forms.
 */
static int parse_lane_memory(const char *arg, struct lane_memory *m, int max, char *err,
                             size_t errlen)
{
    const char *p = arg;
    int n = 0;

    for (;;) {
        size_t len = strcspn(p, ",");
        char v[64];

        if (len == 0 || len >= sizeof(v)) {
            snprintf(err, errlen,
                     "--memory: \"%s\" has %s entry (give one limit per program: a size such "
                     "as 8G or 512M, or a share of the GPU's memory such as 25%%)",
                     arg, len ? "a too long" : "an empty");
            return -1;
        }
        if (n == max) {
            snprintf(err, errlen, "--memory: more than %d entries", max);
            return -1;
        }
        memcpy(v, p, len);
        v[len] = '\0';
        m[n].bytes = 0;
        m[n].micro = 0;
        if (v[len - 1] == '%') {
            if (parse_percent(v, len - 1, &m[n].micro) < 0) {
                snprintf(err, errlen,
                         "--memory: \"%s\" is not a share of the GPU's memory (use a "
                         "percentage above 0 and at most 100, with at most 6 decimals, e.g. 25%% "
                         "or 12.5%%)",
                         v);
                return -1;
            }
        } else if (gs_parse_size(v, &m[n].bytes) < 0 || m[n].bytes < GS_MIN_MEMORY_LIMIT) {
            snprintf(err, errlen,
                     "--memory: \"%s\" is not a memory limit (%s, at least 1M; or a share "
                     "of the GPU's memory such as 25%%)",
                     v, GS_SIZE_FORMS);
            return -1;
        }
        n++;
        if (p[len] == '\0')
            return n;
        p += len + 1;
    }
}

static int procs_main(int argc, char **argv)
{
    static const struct option opts[] = { { "shares", required_argument, NULL, 's' },
                                          { "device", required_argument, NULL, 'd' },
                                          { "dry-run", no_argument, NULL, 'n' },
                                          { "json", no_argument, NULL, 'j' },
                                          { "timeout", required_argument, NULL, 't' },
                                          { "quiet", no_argument, NULL, 'q' },
                                          { "memory", required_argument, NULL, 'm' },
                                          { "help", no_argument, NULL, 'h' },
                                          { NULL, 0, NULL, 0 } };
    static struct lane lanes[SMPLAN_MAX_LANES];
    double shares[SMPLAN_MAX_LANES], timeout = 120, mps_to;
    const char *shares_arg = NULL, *memory_arg = NULL, *device = "0";
    struct lane_memory mem[SMPLAN_MAX_LANES];
    char err[1024];
    struct geom_query q;
    struct sm_lane plan[SMPLAN_MAX_LANES];
    struct plan_print pr;
    struct sm_split split;
    int c, n, nshares, nmem = 0, dry = 0, json = 0, i, r;
    uint64_t sum = 0;
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
        case 'm':
            memory_arg = optarg;
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
    if (memory_arg &&
        (nmem = parse_lane_memory(memory_arg, mem, SMPLAN_MAX_LANES, err, sizeof(err))) < 0) {
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
    if (memory_arg && nmem != n) {
        gs_log_error("--memory: %d limit%s for %d program%s: give one limit per program", nmem,
                     nmem == 1 ? "" : "s", n, n == 1 ? "" : "s");
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
    if (probe_sm_geometry(&q, err, sizeof(err)) < 0) {
        gs_log_error("procs: %s", err);
        return GS_EXIT_ERROR;
    }
    for (i = 0; i < n; i++)
        plan[i].share = shares[i];
    if (smplan(&q.g, plan, n, &split, err, sizeof(err)) < 0) {
        gs_log_error("procs: GPU %s: %s", device, err);
        return GS_EXIT_ERROR;
    }
    for (i = 0; i < n; i++) {
        lanes[i].sm = plan[i];
        lanes[i].memory = 0;
        if (i < nmem) {
            /* A share in whole MiB, rounded down. */
            lanes[i].memory =
                mem[i].micro > 0
                    ? (uint64_t)((unsigned __int128)q.memory * mem[i].micro / 100000000) &
                          ~((1ULL << 20) - 1)
                    : mem[i].bytes;
            if (lanes[i].memory < GS_MIN_MEMORY_LIMIT) {
                gs_log_error("--memory: %.6g%% of GPU %s's memory is under 1 MiB",
                             (double)mem[i].micro / 1e6, device);
                return GS_EXIT_USAGE;
            }
            /* Saturating: limits near 2^64 must not wrap the sum under the GPU's memory. */
            sum = lanes[i].memory > UINT64_MAX - sum ? UINT64_MAX : sum + lanes[i].memory;
        }
    }
    if (sum > q.memory) {
        char a[32], b[32];

        gs_format_size(sum, a, sizeof(a));
        gs_format_size(q.memory, b, sizeof(b));
        gs_log_error("--memory: the limits add up to %s, more than GPU %s's %s (memory is "
                     "shared by the lanes: give limits that fit together)",
                     a, device, b);
        return GS_EXIT_USAGE;
    }
    if (dry) {
        print_plan(&q, q.index, lanes, n, &split, 0);
        return GS_EXIT_OK;
    }
    pr.q = &q;
    pr.lanes = lanes;
    pr.n = n;
    pr.split = &split;

    return side_by_side_run(lanes, n, &q, split.fine, timeout, mps_to, json ? released : NULL, &pr);
}

const struct gs_cmd gs_cmd_procs = { "procs",
                                     "run programs side by side, each on its share of a GPU's SMs",
                                     procs_main, procs_usage };

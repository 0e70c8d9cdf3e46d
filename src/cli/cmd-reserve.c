/*
 * gpuslice reserve RATIO: holds device memory so that each GPU is RATIO full,
 * through the driver API (no framework needed), until SIGINT, SIGTERM or
 * SIGHUP, then gives it back. The reservation itself is src/control/reserver.c.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/launch.h"
#include "control/reserver.h"

static void reserve_usage(void)
{
    printf("usage: gpuslice reserve [-d LIST] [--json] [-q] RATIO\n\n"
           "Holds device memory so that each GPU is RATIO of its memory full (RATIO in\n"
           "(0, 1], e.g. 0.9), counting what is already in use, until SIGINT (Ctrl+C),\n"
           "SIGTERM or SIGHUP; then gives it all back and exits 0. It uses the CUDA\n"
           "driver API only. What it holds does not change afterwards: memory other\n"
           "processes free is not taken, and none of what it holds is given to them.\n"
           "Around a program, use gpuslice run -f RATIO instead (see its --help): the\n"
           "reservation there gives the program memory whenever it needs it.\n\n"
           "options:\n"
           "  -d, --device LIST  the GPUs to fill: CUDA indexes or GPU UUIDs, comma-\n"
           "                     separated and/or repeated (default: every GPU of\n"
           "                     CUDA_VISIBLE_DEVICES, all when it is unset)\n"
           "      --json         once filled, one JSON object on stdout: per GPU its\n"
           "                     index, uuid, total_bytes, target_bytes, reserved_bytes\n"
           "                     and used_bytes\n"
           "  -q, --quiet        no progress on stderr\n"
           "  -h, --help         this text\n\n"
           "Exit status: 0 after giving the memory back, 1 when the driver cannot be\n"
           "used, 2 for bad usage.\n");
}

static int reserve_main(int argc, char **argv)
{
    static const struct option opts[] = { { "device", required_argument, NULL, 'd' },
                                          { "json", no_argument, NULL, 'j' },
                                          { "quiet", no_argument, NULL, 'q' },
                                          { "help", no_argument, NULL, 'h' },
                                          { NULL, 0, NULL, 0 } };
    struct reserve_opts o = { .ready_fd = -1, .label = "reserve" };
    char err[768], *devices = NULL, **devargs;
    sigset_t stop;
    int c, ndev = 0, r;

    if ((devargs = calloc((size_t)argc + 1, sizeof(*devargs))) == NULL) {
        gs_log_error("reserve: %s", strerror(ENOMEM));
        return GS_EXIT_ERROR;
    }
    for (c = 1; c < argc; c++) {
        /* A negative number would read as options: say what it is. */
        if (argv[c][0] == '-' && (isdigit((unsigned char)argv[c][1]) || argv[c][1] == '.')) {
            gs_log_error("reserve: \"%s\" is not a ratio (use a number in (0, 1], e.g. 0.9)",
                         argv[c]);
            free(devargs);
            return GS_EXIT_USAGE;
        }
        if (strcmp(argv[c], "--") == 0)
            break;
    }
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":d:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            devargs[ndev++] = optarg;
            break;
        default:
            if ((r = gs_cli_common_option("reserve", c, argv, opts, reserve_usage, &o.json)) >= 0) {
                free(devargs);
                return r;
            }
        }
    }
    if (optind != argc - 1) {
        gs_log_error("reserve: %s (usage: gpuslice reserve [OPTIONS] RATIO)",
                     optind >= argc ? "no RATIO given" : "one RATIO only");
        free(devargs);
        return GS_EXIT_USAGE;
    }
    if (reserve_parse_ratio(argv[optind], &o.ratio) < 0) {
        gs_log_error("reserve: \"%s\" is not a ratio (use a number in (0, 1], e.g. 0.9)",
                     argv[optind]);
        free(devargs);
        return GS_EXIT_USAGE;
    }
    if (ndev && launch_device_list(devargs, ndev, getenv("CUDA_VISIBLE_DEVICES"), &devices, err,
                                   sizeof(err)) < 0) {
        gs_log_error("%s", err);
        free(devargs);
        return GS_EXIT_USAGE;
    }
    free(devargs);
    if (devices && setenv("CUDA_VISIBLE_DEVICES", devices, 1) < 0) {
        gs_log_error("reserve: cannot set CUDA_VISIBLE_DEVICES: %s", strerror(errno));
        free(devices);
        return GS_EXIT_ERROR;
    }
    free(devices);
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    sigprocmask(SIG_BLOCK, &stop, NULL);
    if (reserve_run(&o, &stop) < 0)
        return GS_EXIT_ERROR;
    gs_log_note("reserve: all memory given back");
    return GS_EXIT_OK;
}

const struct gs_cmd gs_cmd_reserve = { "reserve",
                                       "hold a share of each GPU's memory until a signal",
                                       reserve_main, reserve_usage };

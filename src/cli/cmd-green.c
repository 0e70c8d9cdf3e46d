/*
 * gpuslice green-run: nVertake's green-run (N Python callables side by side in one process,
 * each on its own share of the SMs), which is the gpuslice Python package's: this finds it
 * (share/gpuslice/python, or $GPUSLICE_PYTHON_DIR), puts it first on PYTHONPATH and runs
 * python3 -m gpuslice green-run with the arguments, which checks them (exit 2 for bad usage).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/env.h"
#include "common/error.h"
#include "control/log.h"
#include "control/run.h"

static void green_usage(void)
{
    printf("usage: gpuslice green-run --shares W1,W2,... --task MODULE:FUNC [--task ...]\n"
           "                          [--task-kwargs JSON ...] [-d D] [--json]\n\n"
           "Runs N Python callables side by side in one process, each on its own thread with\n"
           "its own weighted share of one GPU's SMs (a green context; threads a task starts\n"
           "get it too), released together, and prints each lane's SM count and result.\n"
           "nVertake's green-run, with N tasks. Memory is shared by the lanes, but a tensor\n"
           "must not cross lanes; the shares are fixed for the run.\n\n"
           "options:\n"
           "      --shares LIST        one positive weight per --task (default 25,75)\n"
           "      --task MODULE:FUNC   a callable, once per lane, in lane order (MODULE is\n"
           "                           imported from the current directory or PYTHONPATH)\n"
           "      --task-kwargs JSON   a JSON object of keyword arguments, once per --task\n"
           "  -d, --device D           the CUDA device index (default 0)\n"
           "      --json               one JSON line: the shares, then each lane's index,\n"
           "                           requested share, SM count and result\n\n"
           "The Python interpreter is $PYTHON, else python3. Exit status: 0 when every task\n"
           "returned, 1 when one raised or the GPU cannot be partitioned, 2 for bad usage.\n");
}

static int green_main(int argc, char **argv)
{
    const char *py = getenv("PYTHON");
    char dir[4096];
    char **args;
    int i, r;

    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            green_usage();
            return 0;
        }
    if ((r = gs_python_dir(dir, sizeof(dir))) < 0) {
        gs_log_error("green-run: cannot find gpuslice's Python package (%s: %s); set "
                     GS_ENV_PYTHON_DIR " to the directory holding it",
                     dir, r == -EINVAL ? "a PYTHONPATH entry cannot contain ':'" : gs_strerror(r));
        return 1;
    }
    if ((r = gs_set_pythonpath(dir)) < 0) {
        gs_log_error("green-run: cannot set PYTHONPATH: %s", gs_strerror(r));
        return 1;
    }
    if ((args = calloc((size_t)argc + 4, sizeof(*args))) == NULL) {
        gs_log_error("green-run: out of memory");
        return 1;
    }
    args[0] = (char *)(py && *py ? py : "python3");
    args[1] = "-m";
    args[2] = "gpuslice";
    args[3] = "green-run";
    for (i = 1; i < argc; i++)
        args[i + 3] = argv[i];
    execvp(args[0], args);
    gs_log_error("green-run: cannot run %s: %s", args[0], strerror(errno));
    free(args);
    return 1;
}

const struct gs_cmd gs_cmd_green = { "green-run",
                                     "run Python callables side by side on SM partitions",
                                     green_main, green_usage };

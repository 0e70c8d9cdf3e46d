/*
 * gpuslice green-run: nVertake's green-run (N Python callables side by side in one process,
 * each on its own share of the SMs), which is the gpuslice Python package's: this finds it
 * (share/gpuslice/python, or $GPUSLICE_PYTHON_DIR), puts it first on PYTHONPATH and runs
 * python3 -m gpuslice green-run with the arguments, which checks them (exit 2 for bad usage).
 * The interposer is preloaded into it ($GPUSLICE_LIB, else the copy run preloads; the package
 * is told to load that one): the driver answers a lane's own MULTIPROCESSOR_COUNT on the
 * lane's threads only where the process's libraries reach it through the interposer, and
 * libraries size their grids by it (four lanes of an 8192^3 cuBLAS GEMM, 10/20/30/40, made
 * 93.4 % of one process told the whole GPU's count, 97.3 % told their own, on an H100:
 * docs/results.md).
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
    const char *py = getenv("PYTHON"), *pkg = getenv(GS_ENV_LIB);
    char dir[4096], lib[4096];
    char **args;
    int i, r;

    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            green_usage();
            return 0;
        }
    if ((r = gs_python_dir(dir, sizeof(dir))) < 0) {
        gs_log_error(
            "green-run: cannot find gpuslice's Python package (%s: %s); set " GS_ENV_PYTHON_DIR
            " to the directory holding it",
            dir, r == -EINVAL ? "a PYTHONPATH entry cannot contain ':'" : gs_strerror(r));
        return 1;
    }
    if ((r = gs_set_pythonpath(dir)) < 0) {
        gs_log_error("green-run: cannot set PYTHONPATH: %s", gs_strerror(r));
        return 1;
    }
    /* The copy the package is told to load ($GPUSLICE_LIB), else the one run preloads. */
    if (pkg && *pkg) {
        r = (size_t)snprintf(lib, sizeof(lib), "%s", pkg) >= sizeof(lib) ? -ENAMETOOLONG
            : access(lib, R_OK) < 0                                      ? -errno
                                                                         : 0;
        if (r < 0) {
            gs_log_error("green-run: " GS_ENV_LIB " names %s, which cannot be read: %s", pkg,
                         gs_strerror(r));
            return 1;
        }
    } else if ((r = gs_preload_find(lib, sizeof(lib))) < 0) {
        gs_log_error(
            "green-run: cannot find the interposer libgpuslice.so (%s: %s); set " GS_ENV_PRELOAD_LIB
            " to its path",
            lib, gs_strerror(r));
        return 1;
    }
    if ((r = gs_set_preload(lib)) < 0 || setenv(GS_ENV_LIB, lib, 1) < 0) {
        gs_log_error("green-run: cannot set LD_PRELOAD and " GS_ENV_LIB ": %s",
                     gs_strerror(r < 0 ? r : -errno));
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

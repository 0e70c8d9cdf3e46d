/*
 * gpuslice run: starts a program, or a Python script named by its .py file,
 * as a new tenant with the given limits (launch.c) and returns its exit
 * status.
 */
#include "cli/cli.h"
#include "cli/launch.h"

static const struct launch_mode mode = { "run", 1 };

static int run_run(int argc, char **argv)
{
    return launch_main(&mode, argc, argv);
}

static void run_usage(void)
{
    launch_usage(&mode);
}

const struct gs_cmd gs_cmd_run = { "run", "run a program or a Python script with limits", run_run,
                                   run_usage };

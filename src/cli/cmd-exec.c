/*
 * gpuslice exec: starts any command as a new tenant with the given limits,
 * exactly like run (launch.c) except that a *.py file is executed as it is,
 * never handed to Python.
 */
#include "cli/cli.h"
#include "cli/launch.h"

static const struct launch_mode mode = { "exec", 0 };

static int exec_run(int argc, char **argv)
{
    return launch_main(&mode, argc, argv);
}

static void exec_usage(void)
{
    launch_usage(&mode);
}

const struct gs_cmd gs_cmd_exec = { "exec", "run any command with limits (like run, no .py form)",
                                    exec_run, exec_usage };

/*
 * Starting a program as a new tenant: the one code path behind gpuslice run
 * and gpuslice exec, which differ only in whether a Python script named
 * first is started with the interpreter.
 */
#ifndef GPUSLICE_CLI_LAUNCH_H
#define GPUSLICE_CLI_LAUNCH_H

#include <stddef.h>

#include "common/cuda_api.h"
#include "common/devlist.h"

struct launch_mode {
    const char *cmd;    /* the command's name, for messages and usage: "run", "exec" */
    int python_scripts; /* a first argument naming an existing *.py file runs under Python */
};

/*
 * Parses the command's arguments (argv[0] is its name), starts the program
 * and waits for it. Returns the exit status for gpuslice: the program's own,
 * 128+N if it died of signal N, GS_EXIT_USAGE for bad usage (nothing is
 * started), 126/127 if it cannot be run, GS_EXIT_ERROR if the tenant cannot
 * be set up.
 */
int launch_main(const struct launch_mode *m, int argc, char **argv);

/* Prints the command's usage on stdout. */
void launch_usage(const struct launch_mode *m);

/* The --device selection, now gs_device_list in common/devlist.h (where it is fuzzed). */
static inline int launch_device_list(char **args, int nargs, const char *visible, char **out,
                                     char *err, size_t errlen)
{
    return gs_device_list(args, nargs, visible, out, err, errlen);
}

#endif

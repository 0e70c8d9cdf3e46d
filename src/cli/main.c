/* gpuslice's entry point: global flags and the table of commands. */
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/env.h"
#include "common/tenant.h"

#ifndef GPUSLICE_VERSION
#define GPUSLICE_VERSION "0.0.0"
#endif

static const struct gs_cmd *commands[] = {
    &gs_cmd_run,     &gs_cmd_exec, &gs_cmd_info, &gs_cmd_reserve, &gs_cmd_procs,
    &gs_cmd_tenants, &gs_cmd_set,  &gs_cmd_mps,  &gs_cmd_top,     &gs_cmd_green,
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

int gs_cli_common_option(const char *cmd, int c, char **argv, const struct option *opts,
                         void (*usage)(void), int *json)
{
    switch (c) {
    case 'q':
        gs_log_quiet = 1;
        return -1;
    case 'h':
        usage();
        return GS_EXIT_OK;
    case 'j':
        if (json) {
            *json = 1;
            return -1;
        }
        break;
    default:
        break;
    }
    return gs_cli_bad_option(cmd, c, argv, opts);
}

int gs_cli_bad_option(const char *cmd, int c, char **argv, const struct option *opts)
{
    const char *arg = optind > 0 ? argv[optind - 1] : "?";
    const struct option *o;

    if (c == ':') {
        gs_log_error("%s: %s needs a value (see gpuslice %s --help)", cmd, arg, cmd);
        return GS_EXIT_USAGE;
    }
    /* getopt reports "--json=1" as '?' with optopt set to the option's value. */
    for (o = opts; optopt && o && o->name; o++) {
        size_t n = strlen(o->name);

        if (o->val == optopt && o->has_arg == no_argument && strncmp(arg, "--", 2) == 0 &&
            strncmp(arg + 2, o->name, n) == 0 && arg[2 + n] == '=') {
            gs_log_error("%s: --%s takes no value (see gpuslice %s --help)", cmd, o->name, cmd);
            return GS_EXIT_USAGE;
        }
    }
    if (optopt > ' ' && optopt < 127)
        gs_log_error("%s: unknown option -%c (see gpuslice %s --help)", cmd, optopt, cmd);
    else
        gs_log_error("%s: unknown option %s (see gpuslice %s --help)", cmd, arg, cmd);
    return GS_EXIT_USAGE;
}

static void usage(FILE *f)
{
    size_t i;

    fprintf(f, "usage: gpuslice [--quiet] [--version] [--help] COMMAND [ARGS...]\n\n"
               "Share NVIDIA GPUs safely: limits for any CUDA program, no code change.\n\n"
               "commands:\n");
    for (i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(f, "\n'gpuslice COMMAND --help' describes a command.\n"
               "exit status: 0 success, 1 error, 2 bad usage; run and exec return\n"
               "the program's (128+N if it died of signal N, 126/127 if it cannot be run).\n");
}

/*
 * A tenant file `set` changes is mapped (listings read copies); one that its
 * owner truncates meanwhile raises SIGBUS. Say so and fail, rather than die of
 * a signal.
 */
static void on_sigbus(int sig)
{
    static const char msg[] = "gpuslice: a tenant's state file was truncated while it was being "
                              "read; try again\n";
    (void)sig;
    if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
        /* nothing more to do */
    }
    _exit(GS_EXIT_ERROR);
}

/* "run, exec, ..." for messages: the commands, in the order of the table. */
static void command_names(char *out, size_t len)
{
    size_t i, n = 0;

    out[0] = '\0';
    for (i = 0; i < NCOMMANDS && n < len; i++)
        n += (size_t)snprintf(out + n, len - n, "%s%s", i ? ", " : "", commands[i]->name);
}

static const struct gs_cmd *find_command(const char *name)
{
    size_t c;

    for (c = 0; c < NCOMMANDS; c++)
        if (strcmp(name, commands[c]->name) == 0)
            return commands[c];
    return NULL;
}

/* gpuslice help [COMMAND]: argv[0] is "help". */
static int help(int argc, char **argv)
{
    const struct gs_cmd *cmd;
    char names[256];

    if (argc == 1) {
        usage(stdout);
        return GS_EXIT_OK;
    }
    command_names(names, sizeof(names));
    if (argc > 2) {
        gs_log_error("help: one command at a time (got \"%s\" and \"%s\"; commands: %s)", argv[1],
                     argv[2], names);
        return GS_EXIT_USAGE;
    }
    if ((cmd = find_command(argv[1])) == NULL) {
        gs_log_error("help: unknown command \"%s\" (commands: %s)", argv[1], names);
        return GS_EXIT_USAGE;
    }
    cmd->usage();
    return GS_EXIT_OK;
}

int main(int argc, char **argv)
{
    const struct gs_cmd *cmd;
    char names[256];
    int i = 1;

    signal(SIGBUS, on_sigbus);
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-V") == 0) {
            printf("gpuslice %s\n", GPUSLICE_VERSION);
            return GS_EXIT_OK;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return GS_EXIT_OK;
        } else if (strcmp(argv[i], "--quiet") == 0 || strcmp(argv[i], "-q") == 0) {
            gs_log_quiet = 1;
        } else {
            gs_log_error("unknown option %s (the options before a command are -q/--quiet, "
                         "-V/--version and -h/--help; see gpuslice --help)",
                         argv[i]);
            return GS_EXIT_USAGE;
        }
    }
    if (i >= argc) {
        gs_log_error("no command given");
        usage(stderr);
        return GS_EXIT_USAGE;
    }
    if (strcmp(argv[i], "help") == 0)
        return help(argc - i, argv + i);
    if ((cmd = find_command(argv[i])) != NULL) {
        const char *dd = getenv(GS_ENV_DAEMON_DIR);

        /*
         * Every command asks a daemon, or runs a program whose interposer does: refused once.
         * So is a relative directory for tenant files: each process would find its own.
         */
        if (dd && *dd && *dd != '/') {
            gs_log_error(GS_ENV_DAEMON_DIR "=\"%.200s\" is not an absolute path: give the "
                                           "daemon's run directory as one, or unset it",
                         dd);
            return GS_EXIT_USAGE;
        }
        if ((dd = gs_tenant_dir_relative()) != NULL) {
            gs_log_error(GS_ENV_RUN_DIR "=\"%.200s\" is not an absolute path: give the directory "
                                        "tenant files live in as one, or unset it (/dev/shm)",
                         dd);
            return GS_EXIT_USAGE;
        }
        return cmd->run(argc - i, argv + i);
    }
    command_names(names, sizeof(names));
    gs_log_error("unknown command \"%s\" (commands: %s, help; see gpuslice --help)", argv[i],
                 names);
    return GS_EXIT_USAGE;
}

/*
 * The command-line tool's commands. Each lives in its own cmd-*.c file and
 * is registered once in the table in main.c. Exit statuses: 0 success,
 * 1 error, 2 bad usage; run and exec return the program's own status.
 */
#ifndef GPUSLICE_CLI_H
#define GPUSLICE_CLI_H

#include <stddef.h>
#include <stdio.h>

#define GS_EXIT_OK 0
#define GS_EXIT_ERROR 1
#define GS_EXIT_USAGE 2

struct gs_cmd {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
    void (*usage)(void);
};

extern const struct gs_cmd gs_cmd_run;
extern const struct gs_cmd gs_cmd_exec;
extern const struct gs_cmd gs_cmd_set;
extern const struct gs_cmd gs_cmd_info;
extern const struct gs_cmd gs_cmd_tenants;
extern const struct gs_cmd gs_cmd_mps;
extern const struct gs_cmd gs_cmd_reserve;
extern const struct gs_cmd gs_cmd_procs;

/* Global flags that every command honours. */
extern int gs_cli_quiet;

/* Prints "gpuslice: <message>" on stderr unless quiet (errors always print). */
void gs_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void gs_cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * For getopt_long's ':' (a missing value; the option string must start with
 * ':' after any '+') and '?' (an unknown option, or a value given to one that
 * takes none): names the option in a message and returns GS_EXIT_USAGE.
 */
/*
 * Writes s (n bytes) as a JSON string: escapes what JSON requires, and the
 * terminal's control and bidi characters (tenant_list_is_control) as \uNNNN;
 * bytes that are not UTF-8 become U+FFFD. Defined with the tenants command,
 * its first user.
 */
void gs_cli_json_string(FILE *f, const char *s, size_t n);

struct option;
int gs_cli_bad_option(const char *cmd, int c, char **argv, const struct option *opts);

#endif

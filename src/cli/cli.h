/*
 * The command-line tool's commands. Each lives in its own cmd-*.c file and
 * is registered once in the table in main.c. Exit statuses: 0 success,
 * 1 error, 2 bad usage; run and exec return the program's own status.
 */
#ifndef GPUSLICE_CLI_H
#define GPUSLICE_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "common/text.h" /* gs_json_string, gs_text_safe */
#include "control/log.h" /* gs_log_error, gs_log_note, gs_log_quiet (-q), GS_EXIT_* */

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
extern const struct gs_cmd gs_cmd_top;
extern const struct gs_cmd gs_cmd_green;

/*
 * For getopt_long's ':' (a missing value; the option string must start with
 * ':' after any '+') and '?' (an unknown option, or a value given to one that
 * takes none): names the option in a message and returns GS_EXIT_USAGE.
 */
struct option;
int gs_cli_bad_option(const char *cmd, int c, char **argv, const struct option *opts);

/*
 * The options every command shares, for the default case of its getopt
 * switch: 'q' (-q, --quiet), 'h' (-h, --help: prints usage()) and, when json
 * is not NULL, 'j' (--json: sets *json); anything else goes to
 * gs_cli_bad_option. Returns -1 when c was 'q' or 'j' (parsing goes on), else
 * the exit status to return now (GS_EXIT_OK after --help).
 */
int gs_cli_common_option(const char *cmd, int c, char **argv, const struct option *opts,
                         void (*usage)(void), int *json);

#endif

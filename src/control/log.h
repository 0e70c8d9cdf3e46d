/*
 * Messages for a person from the control layer and the commands: one line on
 * stderr, "gpuslice: <message>". Notes are quiet under --quiet; errors and
 * warnings always print.
 */
#ifndef GPUSLICE_CONTROL_LOG_H
#define GPUSLICE_CONTROL_LOG_H

/* Exit statuses of the tools, and what the control layer's commands return. */
#define GS_EXIT_OK 0
#define GS_EXIT_ERROR 1
#define GS_EXIT_USAGE 2

/* Set once by the program (gpuslice -q / --quiet): notes stay silent. */
extern int gs_log_quiet;

void gs_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void gs_log_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

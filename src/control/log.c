/* The control layer's messages: one line each on stderr. */
#include "control/log.h"

#include <stdarg.h>
#include <stdio.h>

int gs_log_quiet;

__attribute__((format(printf, 1, 0))) static void say(const char *fmt, va_list ap)
{
    fputs("gpuslice: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void gs_log_error(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
}

void gs_log_note(const char *fmt, ...)
{
    va_list ap;

    if (gs_log_quiet)
        return;
    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
}

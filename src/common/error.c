/* Names for gpuslice's own error codes and for negative errnos. */
#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *gs_strerror(int r)
{
    switch (r) {
#define GS_ERR_CASE(name, value, msg)                                                              \
    case name:                                                                                     \
        return msg;
        GS_ERRNO_MAP(GS_ERR_CASE)
#undef GS_ERR_CASE
    default:
        break;
    }
    if (r < 0 && r > -4000)
        return strerror(-r);
    return "unknown error";
}

void gs_set_error(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

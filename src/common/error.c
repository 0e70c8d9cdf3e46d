/* Names for gpuslice's own error codes and for negative errnos. */
#include "common/error.h"

#include <string.h>

const char *gs_strerror(int r)
{
    switch (r) {
#define GS_ERR_CASE(name, value, msg) \
    case name:                        \
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

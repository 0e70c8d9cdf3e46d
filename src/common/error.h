/*
 * gpuslice's own error codes, written once. Internal functions return 0 or a
 * negative errno; where no errno fits they return one of these (also
 * negative), and gs_strerror() names either kind.
 */
#ifndef GPUSLICE_ERROR_H
#define GPUSLICE_ERROR_H

#include <stddef.h>

/* X(name, value, message) */
#define GS_ERRNO_MAP(X)                                                                            \
    X(GS_EBADCONFIG, -4001, "invalid gpuslice configuration")                                      \
    X(GS_EABI, -4002, "shared state has another ABI version")                                      \
    X(GS_ENODRIVER, -4003, "the NVIDIA driver library could not be loaded")                        \
    X(GS_EOVERLIMIT, -4004, "the tenant's memory limit would be exceeded")                         \
    X(GS_ENOSLOT, -4005, "no free process slot in the tenant's shared state")                      \
    X(GS_EUNSAFE, -4006, "the file is writable by other users, or owned by another user")        \
    X(GS_EOWNER, -4007, "the file's contents name another owner than the file's")

enum gs_error {
#define GS_ERR_ENUM(name, value, msg) name = value,
    GS_ERRNO_MAP(GS_ERR_ENUM)
#undef GS_ERR_ENUM
};

/* A static string describing r (a negative errno or a gs_error). */
const char *gs_strerror(int r);

/* Formats a message for a person into err (nothing when err is NULL or errlen 0). */
void gs_set_error(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif

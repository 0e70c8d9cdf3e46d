/*
 * The daemon's one state (daemon.h), its log and its clocks: apart from main.c so that
 * the fuzz targets link every part but the entry point.
 */
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>
#include <time.h>

#include "daemon/daemon.h"

struct gd_state gd = { .mu = PTHREAD_MUTEX_INITIALIZER };

int gd_log_syslog;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

void gd_log(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (gd_log_syslog) {
        syslog(LOG_INFO, "%s", msg);
        return;
    }
    pthread_mutex_lock(&log_mu);
    fprintf(stderr, "gpusliced: %s\n", msg);
    pthread_mutex_unlock(&log_mu);
}

uint64_t gd_mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t gd_unix_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

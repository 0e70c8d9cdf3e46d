/*
 * What the daemon's fuzz targets share (fuzz_api.c, fuzz_authz.c): the daemon's real state in
 * a temporary directory made from TEMPLATE (its options, events and registry: a node segment
 * and tenant files), with two simulated GPUs as NVML would show them.
 */
#ifndef GPUSLICE_FUZZ_DAEMON_H
#define GPUSLICE_FUZZ_DAEMON_H

#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"

static inline void fuzz_daemon_init(char *dir)
{
    char *argv[] = { "fuzz", "--config", "/dev/null", "--run-dir", dir, "--simulated", NULL };
    char err[512];
    int i;

    if (mkdtemp(dir) == NULL || gd_options_load(6, argv) != -1 || gd_events_init() < 0 ||
        gd_registry_start(err, sizeof(err)) < 0)
        abort();
    gd.ndev = 2;
    for (i = 0; i < 2; i++) {
        struct gd_device *d = &gd.dev[i];

        memset(d, 0, sizeof(*d));
        d->index = i;
        snprintf(d->uuid, sizeof(d->uuid), "GPU-5ac1ce00-0000-4000-8000-00000000000%d", i);
        memcpy(d->raw, "\x5a\xc1\xce\x00\x00\x00\x40\x00\x80\x00\x00\x00\x00\x00\x00", 15);
        d->raw[15] = (uint8_t)i;
        snprintf(d->name, sizeof(d->name), "fuzz GPU");
        d->mem_total = 16ULL << 30;
        d->util = d->power_mw = d->sm_clock = d->temp_c = -1;
    }
    gd.ready = 1;
}

#endif

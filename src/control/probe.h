/*
 * Questions to the CUDA driver asked in a child process (control/probe.c):
 * CUDA is never initialised in the caller, which forks the program later.
 */
#ifndef GPUSLICE_CONTROL_PROBE_H
#define GPUSLICE_CONTROL_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "common/parse.h"
#include "common/smplan.h"
#include "gpuslice/tenant_abi.h"

/*
 * Runs fn(arg, buf, len) in a child process and gives up after timeout
 * seconds (killing it): 0 if fn returned 0, else -EIO (or -ETIMEDOUT) with
 * what fn wrote to buf, its message or result.
 */
int probe_in_child(int (*fn)(void *arg, char *buf, size_t len), void *arg, double timeout,
                   char *buf, size_t len);

/* For probe_in_child: the UUID of device index *(int *)arg, counting all GPUs. */
int probe_uuid_of_index(void *arg, char *buf, size_t len);

/* For probe_in_child, in the program's environment: can CUDA make a context on device 0? */
int probe_cuda_context(void *arg, char *buf, size_t len);

/* The GPUs a program will see: their count and UUIDs in CUDA order. */
struct visible_gpus {
    int n;
    uint8_t uuid[GPUSLICE_MAX_DEVICES][16];
};

/*
 * The GPUs a program with CUDA_VISIBLE_DEVICES=devices (NULL: as it is)
 * sees, asked in a child. -1 with a message in err on failure.
 */
int probe_visible_gpus(const char *devices, struct visible_gpus *v, char *err, size_t errlen);

/* Every GPU of the machine, as CUDA counts them without CUDA_VISIBLE_DEVICES. */
int probe_every_gpu(struct visible_gpus *v, char *err, size_t errlen);

/* A GPU's SMs as green contexts may split them (gpuslice procs). */
struct geom_query {
    const char *device;
    int index; /* the device's CUDA index */
    char uuid[GS_UUID_STRLEN];
    char name[128];
    uint64_t memory; /* bytes */
    struct sm_geom g;
};

/*
 * Fills q (q->device: a CUDA index or a UUID) from a child: the GPU's index,
 * UUID, name, memory and SM split. -1 with a message in err on failure.
 */
int probe_sm_geometry(struct geom_query *q, char *err, size_t errlen);

#endif

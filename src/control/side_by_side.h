/*
 * Programs side by side on one GPU, each on its own share of its SMs
 * (control/side_by_side.c, for gpuslice procs).
 */
#ifndef GPUSLICE_CONTROL_SIDE_BY_SIDE_H
#define GPUSLICE_CONTROL_SIDE_BY_SIDE_H

#include <stdint.h>
#include <sys/types.h>

#include "control/probe.h"
#include "common/smplan.h"

/* What separates the programs on the command line. */
#define SIDE_BY_SIDE_SEP ":::"

/* One program and its partition. */
struct lane {
    char **argv; /* the program and its arguments (into the caller's argv) */
    int argc;
    struct sm_lane sm;
    uint64_t memory; /* the lane's memory limit in bytes; 0: none */
    pid_t pid;       /* the gpuslice run that starts it */
    pid_t prog;      /* the program, as its interposer said */
    int ready, status, ended;
    char line[640];
};

/*
 * Runs the n lanes on GPU q (their partitions planned, on the split ignoring
 * co-scheduling when fine): starts the MPS
 * daemon (mps_to: its timeout), the lanes, waits at most timeout seconds for
 * every partition, releases them together (then calls released(arg), when
 * given) and waits for them. Returns 0, the status of the first lane that
 * failed (128+N for signal N; the others terminated), or GS_EXIT_ERROR.
 */
int side_by_side_run(struct lane *lanes, int n, const struct geom_query *q, int fine,
                     double timeout, double mps_to, void (*released)(void *arg), void *arg);

#endif

/*
 * Planning SM partitions from weights, on a device's real granularity: the
 * planner behind gpuslice procs, green-run and gpuslice_lanes_run.
 */
#ifndef GPUSLICE_COMMON_SMPLAN_H
#define GPUSLICE_COMMON_SMPLAN_H

#include <stddef.h>

#define SMPLAN_MAX_LANES 64

/* How the driver splits a device's SMs (cuDevSmResourceSplitByCount, minCount 1). */
struct sm_geom {
    unsigned total; /* SMs of the device */
    unsigned coarse,
        ncoarse; /* group size and count when co-scheduling is kept (8 and 15 on an H200) */
    unsigned fine, nfine; /* ... ignoring co-scheduling (2 and 66) */
};

struct sm_lane {
    double share;   /* as requested */
    unsigned count; /* SMs it gets */
    unsigned first; /* the first of them, in the driver's split order */
};

/*
 * How far a lane's SM share may be from its weight (points of the device) for the co-scheduled
 * split to be kept; issue 30 asks every lane within 2 points.
 */
#define SMPLAN_TOLERANCE 2.0

/* What smplan chose. */
struct sm_split {
    unsigned group;       /* the SMs of one group of the split used */
    int fine;             /* 1: the split ignoring co-scheduling (COUNT@FIRST/fine) */
    unsigned max_cluster; /* the largest thread-block cluster each lane runs: a group's SMs */
    double worst;         /* the farthest a lane's SM share is from its weight, in points */
};

/*
 * Splits geom's SMs among n lanes in proportion to their shares, in whole
 * groups of one split (each lane at least one, the rest by the largest
 * remainder, the SMs the split leaves over to the last lane and counted in
 * its quota): the co-scheduled split while it puts every lane within
 * SMPLAN_TOLERANCE points of its weight (a lane then runs clusters of a
 * whole group, 8 SMs on an H200), else the split ignoring co-scheduling
 * (2 SMs, clusters of 2) unless that is no closer. Only one split: the
 * driver makes a partition of resources of one split only. 0 and *split,
 * or -EINVAL with a message naming the limit in err.
 */
int smplan(const struct sm_geom *geom, struct sm_lane *lanes, int n, struct sm_split *split,
           char *err, size_t errlen);

/*
 * Parses --shares: n comma-separated positive numbers (digits and at most
 * one '.', up to 1e6), at most max. 0, or -EINVAL with a message in err.
 */
int smplan_parse_shares(const char *s, double *out, int max, int *n, char *err, size_t errlen);

#endif

/*
 * Planning SM partitions from weights, on a device's real granularity: the
 * planner behind gpuslice procs.
 */
#ifndef GPUSLICE_COMMON_SMPLAN_H
#define GPUSLICE_COMMON_SMPLAN_H

#include <stddef.h>

#define SMPLAN_MAX_LANES 64

/* How the driver splits a device's SMs (cuDevSmResourceSplitByCount, minCount 1). */
struct sm_geom {
    unsigned total; /* SMs of the device */
    unsigned coarse,
        ncoarse; /* group size and count when co-scheduling is kept (8 and 16 on an H200) */
    unsigned fine, nfine; /* ... ignoring co-scheduling (2 and 66) */
};

struct sm_lane {
    double share;   /* as requested */
    unsigned count; /* SMs it gets */
    unsigned first; /* the first of them, in the driver's split order */
};

/*
 * Splits geom's SMs among n lanes in proportion to their shares: whole
 * groups of the co-scheduled split when every lane gets at least one, else
 * of the fine split (docs/results.md has what each gave on an H200);
 * each lane at least one group, the rest by the largest remainder, the SMs
 * the split leaves over to the last lane. 0 and *group the group size used,
 * or -EINVAL with a message naming the limit in err.
 */
int smplan(const struct sm_geom *geom, struct sm_lane *lanes, int n, unsigned *group, char *err,
           size_t errlen);

/* Whether smplan plans n lanes on the fine split (else the co-scheduled one). */
int smplan_fine(const struct sm_geom *geom, int n);

/*
 * Parses --shares: n comma-separated positive numbers (digits and at most
 * one '.', up to 1e6), at most max. 0, or -EINVAL with a message in err.
 */
int smplan_parse_shares(const char *s, double *out, int max, int *n, char *err, size_t errlen);

#endif

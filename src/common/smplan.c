/* The SM partition planner (smplan.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/smplan.h"

int smplan_parse_shares(const char *s, double *out, int max, int *n, char *err, size_t errlen)
{
    const char *p = s ? s : "";

    *n = 0;
    if (*p == '\0') {
        snprintf(err, errlen,
                 "--shares: empty (give one positive weight per program, e.g. "
                 "20,30,50)");
        return -EINVAL;
    }
    for (;;) {
        const char *end = strchr(p, ','), *q;
        size_t len = end ? (size_t)(end - p) : strlen(p);
        int dots = 0, digits = 0;
        char buf[32];
        double v;

        for (q = p; q < p + len; q++) {
            if (*q == '.')
                dots++;
            else if (*q >= '0' && *q <= '9')
                digits++;
            else
                digits = -1000;
        }
        if (len == 0 || len >= sizeof(buf) || digits <= 0 || dots > 1) {
            snprintf(err, errlen,
                     "--shares: \"%.*s\" is not a share (use a positive number such "
                     "as 20 or 12.5)",
                     (int)len, p);
            return -EINVAL;
        }
        memcpy(buf, p, len);
        buf[len] = '\0';
        v = strtod(buf, NULL);
        if (!(v > 0 && v <= 1e6)) {
            snprintf(err, errlen, "--shares: \"%s\" is %s (use a number above 0, at most 1e6)", buf,
                     v > 0 ? "too large" : "not above 0");
            return -EINVAL;
        }
        if (*n == max) {
            snprintf(err, errlen, "--shares: more than %d shares", max);
            return -EINVAL;
        }
        out[(*n)++] = v;
        if (!end)
            return 0;
        p = end + 1;
    }
}

/*
 * Splits geom's SMs in groups of size (groups of them, the rest to the last
 * lane) among the n lanes in proportion to their shares; the groups of each
 * lane in a. Returns the farthest a lane's SM share falls from its weight,
 * in points of the device.
 */
static double apportion(const struct sm_geom *geom, unsigned size, unsigned groups,
                        const struct sm_lane *lanes, int n, unsigned *a)
{
    unsigned sum = 0, rest = geom->total - size * groups;
    double total_w = 0, q[SMPLAN_MAX_LANES], worst = 0;
    int i;

    for (i = 0; i < n; i++)
        total_w += lanes[i].share;
    for (i = 0; i < n; i++) {
        /* The quota in groups; the last lane's counts the SMs the split leaves over to it. */
        q[i] = (lanes[i].share / total_w * geom->total - (i == n - 1 ? rest : 0)) / size;
        a[i] = q[i] < 1 ? 1 : (unsigned)q[i];
        sum += a[i];
    }
    /* Largest remainder: give the groups still free to the lanes furthest below their quota... */
    while (sum < groups) {
        int best = 0;
        for (i = 1; i < n; i++)
            if (q[i] - a[i] > q[best] - a[best])
                best = i;
        a[best]++;
        sum++;
    }
    /* ... and, where the minimum of one overshot, take back from those furthest above it. */
    while (sum > groups) {
        int best = -1;
        for (i = 0; i < n; i++)
            if (a[i] > 1 && (best < 0 || q[i] - a[i] < q[best] - a[best]))
                best = i;
        a[best]--;
        sum--;
    }
    for (i = 0; i < n; i++) {
        double got = 100.0 * (a[i] * size + (i == n - 1 ? rest : 0)) / geom->total,
               want = 100.0 * lanes[i].share / total_w;
        if ((got > want ? got - want : want - got) > worst)
            worst = got > want ? got - want : want - got;
    }
    return worst;
}

int smplan(const struct sm_geom *geom, struct sm_lane *lanes, int n, struct sm_split *split,
           char *err, size_t errlen)
{
    unsigned a[SMPLAN_MAX_LANES], fa[SMPLAN_MAX_LANES], size, at = 0;
    int coarse = geom->coarse > 0 && geom->ncoarse >= (unsigned)n,
        fine = geom->fine > 0 && geom->nfine >= (unsigned)n, i;
    double worst = 0, fworst;

    if (n < 1 || n > SMPLAN_MAX_LANES) {
        snprintf(err, errlen, "%d lanes: give 1 to %d", n, SMPLAN_MAX_LANES);
        return -EINVAL;
    }
    if (!coarse && !fine) {
        snprintf(err, errlen,
                 "%d lanes do not fit: the GPU's %u SMs make at most %u groups of %u SMs (%u of "
                 "%u ignoring co-scheduling), one group per lane at least",
                 n, geom->total, geom->ncoarse, geom->coarse, geom->nfine, geom->fine);
        return -EINVAL;
    }
    if (coarse)
        worst = apportion(geom, geom->coarse, geom->ncoarse, lanes, n, a);
    /*
     * Co-scheduled groups while every lane is within SMPLAN_TOLERANCE of its weight: they run
     * thread-block clusters of a whole group (8 on an H200; cuBLAS's Hopper GEMMs launch
     * clusters), the 2-SM split only 2. Else the 2-SM split, unless it is no closer. Groups
     * of 8 with a 2-SM remainder in one lane would keep both, but cuDevResourceGenerateDesc
     * takes the resources of one split only, and a split's groups are not split again
     * (docs/design.md, SM partitions).
     */
    if (fine && (!coarse || worst > SMPLAN_TOLERANCE)) {
        fworst = apportion(geom, geom->fine, geom->nfine, lanes, n, fa);
        if (!coarse || fworst < worst) {
            memcpy(a, fa, sizeof(a));
            worst = fworst;
            coarse = 0;
        }
    }
    size = coarse ? geom->coarse : geom->fine;
    for (i = 0; i < n; i++) {
        lanes[i].first = at;
        lanes[i].count = a[i] * size;
        at += lanes[i].count;
    }
    lanes[n - 1].count += geom->total - at; /* what the split leaves over */
    split->group = size;
    split->fine = !coarse;
    split->max_cluster = size;
    split->worst = worst;
    return 0;
}

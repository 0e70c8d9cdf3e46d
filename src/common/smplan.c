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

int smplan_fine(const struct sm_geom *geom, int n)
{
    return !(geom->ncoarse >= (unsigned)n && geom->coarse > 0);
}

int smplan(const struct sm_geom *geom, struct sm_lane *lanes, int n, unsigned *group, char *err,
           size_t errlen)
{
    unsigned size, groups, sum = 0, at = 0, a[SMPLAN_MAX_LANES];
    double total_w = 0, q[SMPLAN_MAX_LANES];
    int i;

    if (n < 1 || n > SMPLAN_MAX_LANES) {
        snprintf(err, errlen, "%d lanes: give 1 to %d", n, SMPLAN_MAX_LANES);
        return -EINVAL;
    }
    if (!smplan_fine(geom, n)) {
        size = geom->coarse;
        groups = geom->ncoarse;
    } else if (geom->nfine >= (unsigned)n && geom->fine > 0) {
        size = geom->fine;
        groups = geom->nfine;
    } else {
        snprintf(err, errlen,
                 "%d lanes do not fit: the GPU's %u SMs make at most %u groups of %u SMs (%u of "
                 "%u ignoring co-scheduling), one group per lane at least",
                 n, geom->total, geom->ncoarse, geom->coarse, geom->nfine, geom->fine);
        return -EINVAL;
    }
    for (i = 0; i < n; i++)
        total_w += lanes[i].share;
    for (i = 0; i < n; i++) {
        q[i] = lanes[i].share / total_w * groups;
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
        lanes[i].first = at;
        lanes[i].count = a[i] * size;
        at += lanes[i].count;
    }
    lanes[n - 1].count += geom->total - at; /* what the split leaves over */
    *group = size;
    return 0;
}

/*
 * The tenants as `gpuslice tenants` and `gpuslice info` show them, from
 * either source: the daemon's answer (GET /v1/tenants) when gpusliced runs,
 * and the tenant files of the run directory. A view is plain data, copied out
 * of its source, so the same code prints both. With a daemon, the view holds
 * what the daemon knows (its managed tenants too, and named tenants with no
 * process yet), then any tenant file the daemon does not list.
 */
#ifndef GPUSLICE_CONTROL_TENANT_VIEW_H
#define GPUSLICE_CONTROL_TENANT_VIEW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "common/parse.h"
#include "control/tenants.h"

#define TVIEW_PIDS GPUSLICE_MAX_PROCS /* host PIDs kept per tenant: every slot's */
#define TVIEW_NAME 160 /* room for a name: 64 bytes in a state file and in the daemon's answers */

struct tview_dev {
    int index; /* the device's index, -1 when unknown */
    char uuid[GS_UUID_STRLEN];
    uint64_t mem_limit; /* bytes, 0 for none */
    uint64_t mem_used;
    uint32_t ceiling; /* percent, 0 for none */
    uint64_t busy_ns; /* GPU time used so far */
    double used;      /* percent of wall time over the interval, < 0 when not measured */
};

struct tview {
    char id[TENANT_ID_MAX];
    char name[TVIEW_NAME];
    uid_t owner;
    int creator; /* the creator's PID, 0 for none (a daemon's named tenant) */
    int managed; /* the daemon owns its limits */
    int pids[TVIEW_PIDS];
    int npids;
    struct tview_dev dev[GPUSLICE_MAX_DEVICES];
    int ndev;
    uint64_t at_ns;       /* when its counters were read (CLOCK_MONOTONIC): for a daemon's
                             tenant, when the daemon read its file */
    uint64_t def_mem;     /* a daemon tenant's limits on GPUs it has not used yet; 0: none */
    uint32_t def_ceiling; /* percent, 0 for none */
    uint32_t priority;    /* GPUSLICE_PRIORITY_*, never UNSET: normal when not set */
    uint32_t weight;      /* 1..GPUSLICE_WEIGHT_MAX */
};

struct tview_list {
    struct tview *v;
    size_t n, cap;
    int daemon;       /* 1 when gpusliced answered */
    size_t skipped;   /* tenant files left out (tenant_list_scan) */
    size_t malformed; /* tenants of the daemon's answer that could not be read, left out */
};

/*
 * One reading of every tenant: from the daemon if one answers on its socket,
 * then from the run directory's files (warning on stderr about files skipped,
 * if warn). 0, or a negative errno with a message in err (a daemon that
 * answers with an error, a run directory that cannot be read).
 */
int tview_read(struct tview_list *l, int warn, char *err, size_t errlen);

/*
 * Sets each device's used share from two readings (b after a): the GPU time a
 * tenant used between them over the time between its two readings.
 */
void tview_usage(struct tview_list *b, const struct tview_list *a);

/* 1 if a tenant of b was read no later than in a (the daemon had not read its file again). */
int tview_stale(const struct tview_list *b, const struct tview_list *a);

/*
 * Appends the tenants of a daemon's answer to GET /v1/tenants (body) to l, at_ns being when
 * it came; a tenant that cannot be read is left out and counted in l->malformed. 0, or a
 * negative errno with a message in err (not a tenant list, no memory).
 */
int tview_parse(struct tview_list *l, const char *body, uint64_t at_ns, char *err, size_t errlen);

void tview_done(struct tview_list *l);

/* The tenants as a JSON array: the form of `gpuslice tenants --json`. */
void tview_json(FILE *f, const struct tview_list *l);

/* Fills v from a tenant file of the run directory (a copy of what it holds now). */
void tview_from_entry(struct tview *v, const struct tenant_entry *te);

/* Fills v from a daemon's tenant object (GET /v1/tenants); 0 or -EINVAL. For tests too. */
struct gs_json;
int tview_from_json(struct tview *v, const struct gs_json *o);

#endif

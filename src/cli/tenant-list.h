/*
 * The tenants the CLI can see: every tenant file in gs_tenant_dir() this user
 * may read, mapped read-only. Functions return 0 or a count, or a negative
 * errno. A list owns its mappings; tenant_list_done() frees them.
 */
#ifndef GPUSLICE_CLI_TENANT_LIST_H
#define GPUSLICE_CLI_TENANT_LIST_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpuslice/tenant_abi.h"

/* Longest ID accepted: "<uid>-<pid>-<hex>" is far shorter. */
#define TENANT_ID_MAX 128

struct tenant_entry {
    char id[TENANT_ID_MAX]; /* the file name between "gpuslice-" and ".tenant" */
    char path[PATH_MAX];
    struct gpuslice_tenant *t; /* read-only; the content is another process's to change */
};

struct tenant_list {
    struct tenant_entry *v;
    size_t n;
};

/*
 * Fills l with the tenants of gs_tenant_dir(), oldest first. A missing
 * directory is an empty list. Files that cannot be read are left out
 * silently; files of another ABI are left out, with a warning on stderr if
 * warn is set.
 */
int tenant_list_scan(struct tenant_list *l, int warn);

/* Unmaps and frees everything l holds (an empty or zeroed list is fine). */
void tenant_list_done(struct tenant_list *l);

/* Writes the ID of a tenant file's base name into id; -EINVAL if it is not one. */
int tenant_list_id(const char *base, char *id, size_t len);

/*
 * The PIDs of t's live processes, in slot order: writes at most max of them
 * and returns how many are alive.
 */
int tenant_list_pids(const struct gpuslice_tenant *t, int *pids, int max);

/* 1 if device entry d is in use (has a UUID), else 0. */
int tenant_list_dev_in_use(const struct gpuslice_tenant_device *d);

/*
 * Writes the tenants as a JSON array, the form of `gpuslice tenants --json`:
 * used(i, d, ctx) gives the measured compute use of tenant i's device entry d
 * in percent, or < 0 (null) when not measured; used may be NULL.
 */
void tenant_list_json(FILE *f, const struct tenant_list *l,
                      double (*used)(size_t i, int d, const void *ctx), const void *ctx);

/* A device entry's ceiling in percent, 0 for none. */
uint32_t tenant_list_ceiling(const struct gpuslice_tenant_device *d);

/* The tenant's name as a C string (the field need not be terminated). */
void tenant_list_name(const struct gpuslice_tenant *t, char *out, size_t len);

#endif

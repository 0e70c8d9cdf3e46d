/*
 * The tenants the CLI can see: every tenant file in gs_tenant_dir() this user
 * may read and may trust, each a copy read at the scan, and how the CLI
 * shows what such a file holds (control/tenant_view.h prints it). Functions return
 * 0 or a count, or a negative errno. A list owns its copies; tenant_list_done()
 * frees them.
 */
#ifndef GPUSLICE_CONTROL_TENANTS_H
#define GPUSLICE_CONTROL_TENANTS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "common/parse.h"
#include "gpuslice/tenant_abi.h"

/* Longest ID accepted: "<uid>-<pid>-<hex>" is far shorter. */
#define TENANT_ID_MAX 128

struct tenant_entry {
    char id[TENANT_ID_MAX]; /* the file name between "gpuslice-" and ".tenant" */
    char path[PATH_MAX];
    uid_t owner;               /* the file's real owner (fstat), never the header's owner_uid */
    uint64_t read_ns;          /* CLOCK_MONOTONIC when the copy's read began */
    struct gpuslice_tenant *t; /* read-only; the content is another process's to change */
};

/*
 * At most this many tenant files of one owner are read by a listing: the run directory is
 * anyone's to write (/dev/shm), so what one user plants there may cost the daemon and other
 * users' listings that user's share only, never hide another user's tenant.
 */
#define TENANT_LIST_PER_OWNER 64
#define TENANT_LIST_FAIR 16    /* each owner's oldest, read before anyone's 17th */
#define TENANT_LIST_MAX 256    /* files read by one listing, in all */
#define TENANT_LIST_NAMES 8192 /* names a listing keeps to choose from */

struct tenant_list {
    struct tenant_entry *v;
    size_t n;
    size_t skipped;    /* files left out as untrustworthy or of another ABI */
    size_t over_owner; /* files left unread: beyond TENANT_LIST_MAX, or an owner's share */
};

/*
 * Fills l with the live tenants of gs_tenant_dir() (tenant_list_live()),
 * oldest first. A missing directory is an empty list; one that cannot be
 * read or searched is an error (the negative errno). Files this user may not
 * read are left out silently. Files gs_tenant_open_owned() refuses (writable
 * by group or others: anyone could have written them; another ABI; not a
 * regular file) are left out and counted in l->skipped, each named with the
 * reason in one warning line on stderr if warn is set.
 */
int tenant_list_scan(struct tenant_list *l, int warn);

/* Unmaps and frees everything l holds (an empty or zeroed list is fine). */
void tenant_list_done(struct tenant_list *l);

/* Writes the ID of a tenant file's base name into id; -EINVAL if it is not one. */
int tenant_list_id(const char *base, char *id, size_t len);

/*
 * The PIDs of t's live processes, in slot order, as this process sees them (0
 * for one in a PID namespace it cannot see into): writes at most max of them
 * (pids may be NULL when max is 0) and returns how many are alive.
 */
int tenant_list_pids(const struct gpuslice_tenant *t, int *pids, int max);

/*
 * 1 while the tenant runs: its creator (gpuslice run) or one of its
 * processes is alive. A tenant whose creator and processes are all gone (one
 * whose gpuslice run was SIGKILLed, say) is over; its file is left behind
 * until its owner's next gpuslice run removes it.
 */
int tenant_list_live(const struct gpuslice_tenant *t);

/* 1 if device entry d is in use (has a UUID), else 0. */
int tenant_list_dev_in_use(const struct gpuslice_tenant_device *d);

/* Device entry dev's memory usage as shown: what the tenant's live processes hold. */
uint64_t tenant_list_mem_used(const struct gpuslice_tenant *t, int dev);

/* A raw UUID as the CLI prints it, NVIDIA's form: "GPU-" and lower-case hex. */
void tenant_list_uuid(const uint8_t raw[16], char out[GS_UUID_STRLEN]);

/* The same for a UUID string in gpuslice's internal "gpu-…" form (any case). */
void tenant_list_uuid_str(const char *uuid, char out[GS_UUID_STRLEN]);

/* A device entry's ceiling in percent, 0 for none. */
uint32_t tenant_list_ceiling(const struct gpuslice_tenant_device *d);

/* The tenant's name as a C string (the field need not be terminated). */
void tenant_list_name(const struct gpuslice_tenant *t, char *out, size_t len);

#endif

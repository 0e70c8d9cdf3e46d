/*
 * The daemon's node segment (gpuslice/node_abi.h): the daemon creates and
 * writes it; the interposer and the CLI map it read-only, after checking
 * that nobody but its owner, who must be root or themselves, could have
 * written it. Functions return 0 or a non-negative result, or a negative
 * errno / gs_error.
 */
#ifndef GPUSLICE_COMMON_NODE_H
#define GPUSLICE_COMMON_NODE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpuslice/node_abi.h"

/* The system daemon's run directory: the interposer always looks there. */
#define GS_NODE_SYSTEM_DIR "/run/gpuslice"

/*
 * The run directory of this user's own daemon: $GPUSLICE_DAEMON_DIR when set, else
 * /run/gpuslice for root, else $XDG_RUNTIME_DIR/gpuslice when that is absolute, else
 * /tmp/gpuslice-UID (the daemon's own defaults, options.c, are the same). The system
 * daemon's, GS_NODE_SYSTEM_DIR, is looked at beside it (the interposer always; the CLI unless
 * $GPUSLICE_DAEMON_DIR is set). Writes it into buf; -EINVAL if $GPUSLICE_DAEMON_DIR is set
 * but not absolute (the daemon refuses it too), -ENAMETOOLONG if it does not fit.
 */
int gs_node_dir(char *buf, size_t len);

/*
 * For the daemon: maps dir/gpusliced.node read-write, creating it (mode
 * 0644, through a temporary file renamed into place) when it is missing or
 * of another major ABI; an existing one of ours is kept, with its tenants
 * (a restart). *created says which. tenant_dir is recorded for readers.
 */
int gs_node_create(const char *dir, const char *tenant_dir, struct gpuslice_node **out,
                   int *created);

/*
 * For a reader: maps dir/gpusliced.node read-only. Refuses (GS_EUNSAFE) a
 * file, or a directory, that someone other than root or this user could
 * have written, and (GS_EABI) another layout. -ENOENT: no daemon there.
 */
int gs_node_open(const char *dir, struct gpuslice_node **out);

/* Unmaps n (NULL is fine). */
void gs_node_close(struct gpuslice_node *n);

/* Whether the daemon that wrote n is alive (by PID and start time, in its namespace). */
int gs_node_daemon_alive(const struct gpuslice_node *n);

/* A consistent copy of tenant entry i (under its sequence word). */
void gs_node_read_tenant(const struct gpuslice_node *n, int i, struct gpuslice_node_tenant *out);

/* The entry holding tenant id, or -ENOENT. */
int gs_node_find_tenant(const struct gpuslice_node *n, uint32_t id);

/* The entry holding the tenant named name, or -ENOENT. */
int gs_node_find_name(const struct gpuslice_node *n, const char *name);

/*
 * The limits tenant entry i gives the device uuid, which the calling process numbers ord
 * (its CUDA index; -1 when it has none): the UUID's own entry, else the entry of index ord
 * (GPUSLICE_NODE_INDEX_KEY_BYTE), else the tenant's defaults. Returns 0, or -ESTALE when
 * the entry no longer holds tenant id (the limits are then left as they were).
 */
int gs_node_limits(const struct gpuslice_node *n, int i, uint32_t id, const uint8_t uuid[16],
                   int ord, uint64_t *mem, uint32_t *compute);

/* The key of CUDA index idx (0..GPUSLICE_NODE_INDEX_MAX) in a limit entry. */
void gs_node_index_key(uint8_t out[16], int idx);

/* The index a limit entry's key names, or -1 for a UUID's (or an unused) entry. */
int gs_node_key_index(const uint8_t key[16]);

/* Tenant entry i's flags (GPUSLICE_NODE_*) while it holds tenant id; 0 otherwise. */
uint32_t gs_node_flags(const struct gpuslice_node *n, int i, uint32_t id);

/* Whether tenant entry i has a compute ceiling anywhere (one word: read at every launch). */
/*
 * The priority class and weight of tenant entry i, still tenant id (as
 * gs_node_limits): 0, or -ESTALE when the entry holds another tenant now.
 */
int gs_node_sched(const struct gpuslice_node *n, int i, uint32_t id, uint32_t *priority,
                  uint32_t *weight);

int gs_node_compute_any(const struct gpuslice_node *n, int i);

/* The tenant id of the member (pid_ns, pid, start), or 0. */
uint32_t gs_node_member_tenant(const struct gpuslice_node *n, uint32_t pid_ns, pid_t pid,
                               uint64_t start);

/*
 * The tenant this process belongs to: the first of itself and its ancestors
 * (at most 64 generations, parents read from /proc) that is a member. 0 for
 * none.
 */
uint32_t gs_node_lineage_tenant(const struct gpuslice_node *n);

/* Writer side: around every change of tenant entry i. */
void gs_node_write_begin(struct gpuslice_node *n, int i);
void gs_node_write_end(struct gpuslice_node *n, int i);

/* Writes p into tenant entry i whole, under its sequence word (p's own seq is not used). */
void gs_node_write_tenant(struct gpuslice_node *n, int i, const struct gpuslice_node_tenant *p);

#endif

/*
 * Opening, creating and updating a tenant's shared state (tenant_abi.h).
 * Functions return 0 or a non-negative result, or a negative errno /
 * gs_error. None of them keeps the lock on return.
 */
#ifndef GPUSLICE_TENANT_H
#define GPUSLICE_TENANT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/parse.h"
#include "common/proc.h"
#include "gpuslice/tenant_abi.h"

#define GS_TENANT_PREFIX "gpuslice-"
#define GS_TENANT_SUFFIX ".tenant"

/* The directory tenant files live in: $GPUSLICE_RUN_DIR or /dev/shm. */
const char *gs_tenant_dir(void);
/*
 * $GPUSLICE_RUN_DIR where it is set to a relative path, which names no one place (each
 * process's working directory): refused by the CLI, the interposer and gpusliced. Else NULL.
 */
const char *gs_tenant_dir_relative(void);

/*
 * Creates a new tenant file (mode 0600) in dir, its space allocated before it is mapped (-ENOSPC
 * when the filesystem is full, never SIGBUS later); its path goes to path, on failure too (the
 * file that could not be made).
 */
int gs_tenant_create(const char *dir, const char *name, char *path, size_t pathlen,
                     struct gpuslice_tenant **out);

/*
 * Maps an existing tenant file read-write for a process joining the tenant:
 * refuses a foreign magic, ABI or size (GS_EABI), and a file writable by
 * group or others or owned by another user (GS_EUNSAFE; root may join any).
 */
int gs_tenant_open(const char *path, struct gpuslice_tenant **out);

/*
 * Maps a tenant file, or when !writable (for listing other users' tenants)
 * reads a copy of it that later changes to the file do not reach. The file may have been planted by anyone: it must be a regular
 * file of the right layout that neither group nor others can write
 * (GS_EUNSAFE), and *owner gets its real owner (fstat), which is the only
 * owner to trust: the header's owner_uid is what its writer chose.
 */
int gs_tenant_open_owned(const char *path, int writable, uid_t *owner,
                         struct gpuslice_tenant **out);

/*
 * gs_tenant_open_owned() on an open descriptor fd (closed in all cases; what names it in
 * messages): a pod's state file, which the daemon hands over (SCM_RIGHTS) and the pod
 * cannot open itself on its read-only mount.
 */
int gs_tenant_open_fd(int fd, int writable, const char *what, uid_t *owner,
                      struct gpuslice_tenant **out);

/*
 * The tenant whose state file is path, made there if there is none (HAMi's
 * CUDA_DEVICE_MEMORY_SHARED_CACHE: every process naming the path joins one
 * tenant). An existing file is joined as by gs_tenant_open (same refusals; a
 * symbolic link is -ELOOP, a directory -EISDIR). A missing one is made
 * beside it under a name of gs_tenant_create's, complete, and then linked to
 * path, so that a racing process finds either no file or a whole one; of two
 * creators the second joins the first's. *created says whether this call made
 * it. -ENOENT: the directory does not exist.
 */
int gs_tenant_open_at(const char *path, const char *name, struct gpuslice_tenant **out,
                      int *created);

/* gs_tenant_open_owned() without the owner. */
int gs_tenant_open_mode(const char *path, int writable, struct gpuslice_tenant **out);

/* A tenant private to this process and the children it forks. */
int gs_tenant_anon(struct gpuslice_tenant **out);

/* Unmaps t (NULL is fine). */
void gs_tenant_close(struct gpuslice_tenant *t);

/*
 * The tenant's lock, waited for at most 2 s: 0, or -ETIMEDOUT. A holder that
 * died is replaced and the totals recomputed from the per-process records;
 * only a process of the holder's own PID namespace can tell it died
 * (tenant_abi.h). What the lock was for is then refused, never done unlocked.
 */
int gs_tenant_lock(struct gpuslice_tenant *t);
void gs_tenant_unlock(struct gpuslice_tenant *t);

/*
 * The holder whose lock the calling thread last waited for in vain: its TID and
 * PID namespace (0: none, or not told), for a message naming who held it.
 */
void gs_tenant_lock_blocker(uint32_t *tid, uint32_t *ns);

/* Takes a process slot for (pid, start); returns its index. */
int gs_tenant_proc_register(struct gpuslice_tenant *t, pid_t pid, uint64_t start);

/* Gives back everything slot holds and frees it. */
void gs_tenant_proc_unregister(struct gpuslice_tenant *t, int slot);

/*
 * The device entry for uuid, created with the given limits if new (or with
 * those of `gpuslice set`, which win); returns its index. An existing entry
 * keeps its limits (the first process sets them; the CLI or daemon may change
 * them later). compute_limit is a percentage; 0 and 100 mean no ceiling.
 */
int gs_tenant_device(struct gpuslice_tenant *t, const uint8_t uuid[16], int ordinal,
                     uint64_t mem_limit, uint32_t compute_limit);

/*
 * Gives a new tenant its limits for good (gpuslice run): mem and compute
 * (either may be NULL or empty: no limit) as defaults for every device, and
 * for the n devices of uuids (the GPUs the program sees, in CUDA order) the
 * entries their index or UUID keys give. From then on a process's own limit
 * variables change nothing; gpuslice set still may.
 */
int gs_tenant_fix_limits(struct gpuslice_tenant *t, const struct gs_limits *mem,
                         const struct gs_limits *compute, int n, const uint8_t (*uuids)[16]);

enum gs_set_kind { GS_SET_MEMORY, GS_SET_COMPUTE };

/*
 * Changes a running tenant's limits (gpuslice set). A default entry (a bare
 * value) applies to every device of the tenant and to devices it uses later;
 * index and UUID entries apply to the matching devices in use, and one that
 * matches none is refused (message in err). A value of 0 removes the limit.
 */
/*
 * Gives t a priority class (GPUSLICE_PRIORITY_*) and a weight (1..100);
 * 0 leaves that one as it is. Lock-free: each is one aligned word.
 */
void gs_tenant_set_sched(struct gpuslice_tenant *t, uint32_t priority, uint32_t weight);

int gs_tenant_set(struct gpuslice_tenant *t, enum gs_set_kind kind, const struct gs_limits *l,
                  char *err, size_t errlen);

/*
 * The compute budget of device entry d: refilled at limit% of wall time, up
 * to cap ns, by whichever process gets here first; returns the tokens (ns of
 * device time) left. A budget never refilled (compute_refill_ns 0: a new
 * entry, or a ceiling gs_tenant_set changed) starts empty at now_ns. Lock-free.
 */
int64_t gs_budget_refill(struct gpuslice_tenant_device *d, uint64_t now_ns, int64_t cap);

/* The same at a ceiling of pct percent given by the caller (the daemon's, for a managed tenant). */
int64_t gs_budget_refill_at(struct gpuslice_tenant_device *d, uint64_t now_ns, int64_t cap,
                            uint32_t pct);

/*
 * Takes ns of device time from d's budget (never leaving it below floor, a
 * negative debt limit) and adds it to its usage.
 */
void gs_budget_charge(struct gpuslice_tenant_device *d, uint64_t ns, int64_t floor);

/*
 * Takes `take` ns from d's budget (negative: gives them back; never leaving it below floor)
 * and adds busy ns to its usage (a counter: never taken back). Returns what was taken: less
 * than take where the floor forgave the rest.
 */
int64_t gs_budget_settle(struct gpuslice_tenant_device *d, int64_t take, uint64_t busy,
                         int64_t floor);

/*
 * Charges bytes to (slot, dev). Unless force, refuses with -GS_EOVERLIMIT
 * when the device's usage would cross its limit (after reclaiming the usage
 * of dead processes).
 */
int gs_tenant_charge(struct gpuslice_tenant *t, int slot, int dev, uint64_t bytes, int force);

/* For gs_tenant_charge_within: the device entry's own mem_limit; no limit, but no force. */
#define GS_TENANT_OWN_LIMIT UINT64_MAX
#define GS_TENANT_NO_LIMIT (UINT64_MAX - 1)

/*
 * gs_tenant_charge against the limit given (bytes; 0: none, force the charge;
 * GS_TENANT_OWN_LIMIT: the entry's own), for a tenant whose limits are the
 * daemon's.
 */
int gs_tenant_charge_within(struct gpuslice_tenant *t, int slot, int dev, uint64_t bytes,
                            uint64_t limit);

/* Gives back bytes charged to (slot, dev); never below zero. 0, or -ETIMEDOUT (the lock). */
int gs_tenant_uncharge(struct gpuslice_tenant *t, int slot, int dev, uint64_t bytes);

/* Frees the slots of dead processes; returns how many. Takes the lock. */
int gs_tenant_reap(struct gpuslice_tenant *t);

/* Same, for a caller that holds the lock. */
int gs_tenant_reap_locked(struct gpuslice_tenant *t);

/* What the tenant's live processes hold on device entry dev (dead ones' records skipped). */
uint64_t gs_tenant_live_mem_used(const struct gpuslice_tenant *t, int dev);

/* Number of live processes registered. */
int gs_tenant_live_procs(struct gpuslice_tenant *t);

/* Removes tenant files in dir owned by us whose creator and members are gone. */
int gs_tenant_sweep(const char *dir);

/*
 * Which slots' processes live (checked by start time, and across PID
 * namespaces: common/proc.h, one pass over /proc for all of them): seen[i] is
 * the PID this process sees for slot i's, -1 for one alive that it cannot see
 * (another namespace), 0 for a free slot or a dead process. Returns how many
 * live.
 */
int gs_tenant_procs_alive(const struct gpuslice_tenant *t, pid_t seen[GPUSLICE_MAX_PROCS]);

/*
 * From the initial PID namespace (else 0): the processes of other PID namespaces whose host
 * PID is not known yet (host_pid 0) or is not theirs (a PID that names another process or
 * none: the word is their tenant's to write), each looked for in one pass over /proc (found
 * as gs_proc_find answers): their slots into *slot, the host_pid each had into *had, their
 * count returned. *v, *slot and *had are allocated when there are any (the caller frees them).
 */
int gs_tenant_hosts_wanted(const struct gpuslice_tenant *t, struct gs_proc_want **v, int **slot,
                           int32_t **had);

/* Whether the tenant's creator (gpuslice run) lives, judged as slots are. */
int gs_tenant_creator_alive(const struct gpuslice_tenant *t);

#endif

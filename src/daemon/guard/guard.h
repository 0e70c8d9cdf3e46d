/*
 * The guard (guard.c): each managed tenant's use of each GPU as the driver reports it
 * (NVML's per-process memory and utilization, summed over the processes the kernel says
 * are the tenant's), held to the limits only the daemon writes. A tenant over a limit, by
 * a corrupted or bypassed interposer, is stopped by a rule the kernel enforces.
 */
#ifndef GPUSLICE_DAEMON_GUARD_H
#define GPUSLICE_DAEMON_GUARD_H

#include <stdint.h>
#include <stddef.h>

struct gd_device;

/* What the guard does to a tenant over a limit (gpusliced's guard-memory, guard-compute). */
enum gd_guard_action { GD_GUARD_KILL, GD_GUARD_FREEZE, GD_GUARD_REPORT };

/* Parses an action ("kill", "freeze", "report"); 0 or -EINVAL. */
int gd_guard_parse_action(const char *s, enum gd_guard_action *out);

/* Reads the options and thaws what an earlier daemon left frozen; 0 or -1 with a message. */
int gd_guard_start(char *err, size_t errlen);

/*
 * One pass over a sample of the GPUs (the sampler thread, after each sample; takes gd.mu
 * itself only briefly, never while it signals a process).
 */
void gd_guard_pass(const struct gd_device *dev, int ndev, uint64_t now_ns);

/*
 * A process of pod tenant id whose cgroup file reads cg has joined: its container's cgroup
 * gets the pod's memory limits in the driver, where the driver holds such limits, before the
 * process allocates anything (the guard sets them too, for processes that never join).
 */
void gd_guard_wall_join(uint32_t id, const char *cg);

/* Thaws every process it froze (the daemon stops: nothing stays stopped without it). */
void gd_guard_stop(void);

/*
 * Managed tenant id's use of the GPU raw at the latest pass (under gd.mu or not): memory in
 * bytes and compute in percent of the GPU's time (-1: no sample); 0 if known, -ENOENT.
 */
int gd_guard_use(uint32_t id, const uint8_t raw[16], uint64_t *mem, int *compute);

/* Whether the guard holds tenant id's processes stopped now. */
int gd_guard_frozen(uint32_t id);

/*
 * How often the guard acted on tenant id on the GPU raw: kind 0 memory, 1 compute; action
 * a gd_guard_action. 0 when never.
 */
uint64_t gd_guard_actions(uint32_t id, const uint8_t raw[16], int kind, int action);

/* ---- contain.c: managed tenants' own cgroups (tenant-cgroup), where configured ---- */

/* Checks and makes the tenant-cgroup directory; 0, or -1 with a message (the daemon stops). */
int gd_contain_start(char *err, size_t errlen);
int gd_contain_enabled(void);

/* Makes tenant id's cgroup; 0 (also when off), or a negative errno with a message. */
int gd_contain_make(uint32_t id, char *err, size_t errlen);

/* Thaws and removes tenant id's cgroup (kept while processes of it live: gd_contain_sweep). */
void gd_contain_end(uint32_t id);

/* Removes the cgroups of tenants not among live (n ids) once they are empty. */
void gd_contain_sweep(const uint32_t *live, int n);

/* Moves process pid into tenant id's cgroup; 0 (also when off), or a negative errno. */
int gd_contain_join(uint32_t id, pid_t pid, char *err, size_t errlen);

/* The tenant whose cgroup the text of a /proc/PID/cgroup names, or 0. */
uint32_t gd_contain_of(const char *cg);

/* The processes in tenant id's cgroup (PIDs into pids, at most max); how many in all. */
int gd_contain_procs(uint32_t id, pid_t *pids, int max);

/* Freezes (on) or thaws tenant id's cgroup; 0, or a negative errno (-ENOENT when off). */
int gd_contain_freeze(uint32_t id, int on);

/* ---- wall.c: the driver's own per-cgroup memory limits, where it has them (r615+) ---- */

/* Looks for nvmlDeviceSetMemoryLimits_v1 in the loaded NVML, and says what it found; 0. */
int gd_wall_start(void);

/* "driver" when the driver holds the limits, else why not (for /readyz and the log). */
const char *gd_wall_state(void);

/*
 * The sysfs path of the cgroup v2 line of cg (the contents of /proc/PID/cgroup) into out (a
 * container's leaf cgroup); 0, or -ENOENT where there is none this daemon can name.
 */
int gd_wall_leaf(const char *cg, char *out, size_t len);

/*
 * Sets hard bytes (0: nothing) as the limit of GPU dev (NVML index) for the cgroup at sysfs
 * path, once per value; nothing where the driver has no such limits.
 */
void gd_wall_apply(int dev, const char *path, uint64_t hard);

/* How many limits were set in the driver. */
unsigned long gd_wall_count(void);

#endif

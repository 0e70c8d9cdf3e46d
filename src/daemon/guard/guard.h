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

#endif

/*
 * The memory reservation: a process that holds device memory through the
 * driver API (no PyTorch needed) so that each GPU it sees stays filled to a
 * share of its memory. `gpuslice reserve` runs it alone until a signal;
 * `gpuslice run/exec --filled` runs it beside a tenant, where it gives memory
 * back when a process of the tenant asks (an allocation the driver refused)
 * and takes it again when the tenant frees.
 */
#ifndef GPUSLICE_CONTROL_RESERVER_H
#define GPUSLICE_CONTROL_RESERVER_H

#include <signal.h>
#include <sys/types.h>

#include "gpuslice/tenant_abi.h"

struct reserve_opts {
    double ratio;                   /* of each GPU's memory, in (0, 1] */
    struct gpuslice_tenant *tenant; /* the tenant it keeps memory for; NULL alone */
    int ready_fd;      /* -1, or where "ok\n" or "error MESSAGE\n" goes after the first fill */
    int json;          /* alone: the first fill as one JSON object on stdout */
    pid_t parent;      /* > 0: stop when this process is gone */
    const char *label; /* how messages name it: "reserve" or "--filled" */
};

/*
 * Parses a ratio in (0, 1] ("0.9", "1", ".5"); 0 or -EINVAL. The caller names
 * the option in its message.
 */
int reserve_parse_ratio(const char *s, double *out);

/*
 * Fills the GPUs (those of CUDA_VISIBLE_DEVICES, all by default), then keeps
 * the reservation until one of the signals in stop (blocked by the caller)
 * arrives or the parent is gone; then gives everything back. Returns 0 after
 * a normal end, -1 when it could not start (said to the parent or on stderr).
 */
int reserve_run(const struct reserve_opts *o, const sigset_t *stop);

#endif

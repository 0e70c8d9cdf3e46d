/*
 * The memory reservation kept beside a tenant (tenant_abi.h, struct
 * gpuslice_tenant_reserve): its protocol between the processes of the tenant
 * and the one reserver process (gpuslice run --filled). A process whose
 * allocation the driver refused asks the reserver for memory and waits a
 * bounded time for its answer; the reserver claims the reservation, keeps its
 * entries and answers. Lock-free: the two sequence words are futexes shared
 * between processes. Functions return 0 or a non-negative result, or a
 * negative errno.
 */
#ifndef GPUSLICE_RESERVE_H
#define GPUSLICE_RESERVE_H

#include <stdint.h>
#include <sys/types.h>

#include "gpuslice/tenant_abi.h"

/* Whether t has a reserver, and it is alive (PID and start time). */
int gs_reserve_alive(const struct gpuslice_tenant *t);

/* The reservation's entry for the GPU uuid, or -ENOENT. */
int gs_reserve_entry(const struct gpuslice_tenant *t, const uint8_t uuid[16]);

/* What the reservation holds on entry e (bytes; 0 without a reservation there). */
uint64_t gs_reserve_held(const struct gpuslice_tenant *t, int e);

/*
 * Asks the reserver to give back at least bytes on entry e, then waits at most
 * timeout_ns for its answer. 1: it answered, or ended meanwhile (the caller
 * tries its allocation again); 0: nothing to ask (no live reserver, nothing
 * held there); -ETIMEDOUT: no answer in time (the ask is withdrawn). errno is
 * kept.
 */
int gs_reserve_ask(struct gpuslice_tenant *t, int e, uint64_t bytes, uint64_t timeout_ns);

/* ---- the reserver's side ---- */

/* Makes (pid, start) t's reserver; -EBUSY while another live one holds it. */
int gs_reserve_claim(struct gpuslice_tenant *t, pid_t pid, uint64_t start);

/* The entry for uuid with the given target (made if new); its index, or -ENOSPC. */
int gs_reserve_add(struct gpuslice_tenant *t, const uint8_t uuid[16], uint64_t target);

/*
 * Waits at most timeout_ns for an ask after seen; returns the current ask
 * sequence (seen if none came).
 */
uint32_t gs_reserve_wait(struct gpuslice_tenant *t, uint32_t seen, uint64_t timeout_ns);

/* Takes entry e's largest outstanding ask (bytes; 0 if none). */
uint64_t gs_reserve_take(struct gpuslice_tenant *t, int e);

/* Tells the processes waiting for asks up to seq that they are answered. */
void gs_reserve_answer(struct gpuslice_tenant *t, uint32_t seq);

/* Ends (pid)'s reservation: nothing held, every waiter answered. */
void gs_reserve_release(struct gpuslice_tenant *t, pid_t pid);

#endif

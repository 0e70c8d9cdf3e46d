/*
 * Device boards (board_abi.h): opening one per GPU and taking turns on it.
 * Functions return 0 or a negative errno unless they say otherwise.
 */
#ifndef GPUSLICE_BOARD_H
#define GPUSLICE_BOARD_H

#include <stdint.h>
#include <sys/types.h>

#include "gpuslice/board_abi.h"

/* Maps (creating it, mode 0600) the board of the device with uuid in dir. */
int gs_board_open(const char *dir, const uint8_t uuid[16], struct gpuslice_board **out);

/* Unmaps b (NULL is fine). */
void gs_board_close(struct gpuslice_board *b);

/*
 * Takes the device for (pid, start) if it is free, or held by a process that
 * no longer exists; returns 1 when the caller holds it, 0 when another does.
 */
int gs_board_try_acquire(struct gpuslice_board *b, pid_t pid, uint64_t start, uint64_t now_ns);

/* Gives the device back if pid holds it, waking the waiters. */
void gs_board_release(struct gpuslice_board *b, pid_t pid);

/* Sleeps until the device is released or timeout_ns passes; counts as a waiter. */
void gs_board_wait(struct gpuslice_board *b, uint64_t timeout_ns, uint64_t now_ns);

/*
 * 1 if some process is waiting now: one waited within the last few ms (waits
 * last at most a millisecond and are renewed, so a waiter that died stops
 * counting at once).
 */
int gs_board_waiting(const struct gpuslice_board *b, uint64_t now_ns);

#endif

/*
 * Device boards (board_abi.h): opening one per GPU and taking turns on it.
 * Functions return 0 or a negative errno unless they say otherwise.
 */
#ifndef GPUSLICE_BOARD_H
#define GPUSLICE_BOARD_H

#include <stdint.h>
#include <sys/types.h>

#include "gpuslice/board_abi.h"

/*
 * Where this user's boards live: $XDG_RUNTIME_DIR when it is a directory of
 * the user's own that no one else may write (a name there cannot be planted),
 * else the tenant directory (gs_tenant_dir(), shared: see gs_board_open).
 */
const char *gs_board_dir(void);

/* How many names a board may take when files under its names are not ours. */
#define GS_BOARD_NAMES 16

/*
 * Maps (creating it, mode 0600) this user's board of the device with uuid in
 * dir. A file under its name that is not the user's own board (planted by
 * another user, writable by others) is passed over for the next of
 * GS_BOARD_NAMES names; note (when not NULL) then says which file and why,
 * for the caller to tell the user. -EEXIST when every name is taken.
 */
int gs_board_open(const char *dir, const uint8_t uuid[16], struct gpuslice_board **out, char *note,
                  size_t notelen);

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

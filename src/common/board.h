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

/*
 * Sleeps until the device is released or timeout_ns passes; counts as a
 * waiter, waiting since since_ns: the longest waiter (whose wait is renewed
 * within a few ms) gets the device next, whoever else tries to acquire it.
 */
void gs_board_wait(struct gpuslice_board *b, pid_t pid, uint64_t since_ns, uint64_t timeout_ns,
                   uint64_t now_ns);

/*
 * Counts as a waiter, waiting since since_ns, without sleeping: what a
 * process running beside a holder that has not let go does at each launch,
 * so that a holder that only missed it still yields to it.
 */
void gs_board_note_waiting(struct gpuslice_board *b, pid_t pid, uint64_t since_ns, uint64_t now_ns);

/*
 * Says that work of a tenant of class priority (GPUSLICE_PRIORITY_NORMAL
 * set explicitly, or LATENCY) is on the device now; other classes do nothing.
 */
void gs_board_active(struct gpuslice_board *b, uint32_t priority, uint64_t now_ns);

/*
 * The highest class above priority (UNSET reads as normal) whose work was
 * seen on the device within grace_ns, or 0 if none: a tenant of class
 * priority yields to it.
 */
int gs_board_above(const struct gpuslice_board *b, uint32_t priority, uint64_t now_ns,
                   uint64_t grace_ns);

/*
 * 1 if some process is waiting now: one waited within the last few ms (waits
 * last at most a millisecond and are renewed, so a waiter that died stops
 * counting at once).
 */
int gs_board_waiting(const struct gpuslice_board *b, uint64_t now_ns);

/*
 * The daemon's boards: one per GPU, in sealed memory (memfd: no holder can cut
 * it short), shared by the processes of all its tenants, of every user,
 * which get them from the socket GS_BOARDS_SOCKET in its run directory.
 */
#define GS_BOARDS_SOCKET "gpusliced.boards"
#define GS_BOARDS_MAX 16

/* Makes a board of the GPU uuid: its descriptor, or a negative errno. */
int gs_board_make_shared(const uint8_t uuid[16]);

/* Sends the n boards fds, of the GPUs uuids, to the peer of conn, without waiting. */
int gs_board_send(int conn, const int *fds, const uint8_t (*uuids)[16], int n);

/*
 * Maps the daemon's board of the GPU uuid, asking the socket in dir, which
 * must be served by daemon_uid. -ENOENT when the daemon has no board of it;
 * note (when not NULL) says what was wrong with one that was refused.
 */
int gs_board_open_shared(const char *dir, uint32_t daemon_uid, const uint8_t uuid[16],
                         struct gpuslice_board **out, char *note, size_t notelen);

#endif

/*
 * A unix socket in the run directory, mode 0666, whose every connection a handler answers
 * at once on the socket's own thread, and who is at the other end of a unix socket (usock.c).
 */
#ifndef GPUSLICE_DAEMON_USOCK_H
#define GPUSLICE_DAEMON_USOCK_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct gd_usock {
    int fd, stop[2], started;
    pthread_t th;
    char path[PATH_MAX];
    void (*handle)(int conn); /* answers conn (closed after it); must not wait on the peer */
};

/* Serves RUN_DIR/name with handle; what names it in messages. 0 or -1 with err. */
int gd_usock_start(struct gd_usock *u, const char *name, void (*handle)(int), const char *what,
                   char *err, size_t errlen);

/* Stops the thread, closes and removes the socket (also after a failed start). */
void gd_usock_stop(struct gd_usock *u);

/*
 * The process that connected to a unix socket, as the kernel names it: the credentials it
 * connected with (SO_PEERCRED: its PID as the daemon sees it, 0 when it cannot) and a pidfd of
 * that very process (SO_PEERPIDFD, Linux 6.5; before, pidfd_open of the PID right after
 * accept, which cannot tell a PID recycled before then; before Linux 5.3, none: its start
 * time instead). What is read of /proc/PID is that process's only if gd_peer_alive() says
 * it still is, after the reads: a PID is not given to another process while its holder lives.
 */
struct gd_peer_id {
    pid_t pid;
    uid_t uid;
    gid_t gid;
    int pidfd;      /* -1: none (start is checked instead) */
    uint64_t start; /* /proc/PID/stat's start time when pidfd is -1 */
};

/* p for the peer of conn: 0, or -errno (no credentials; no PID; the process gone already). */
int gd_peer_get(int conn, struct gd_peer_id *p);

/* Whether p's process is still alive (so PID is still its): 1 or 0. */
int gd_peer_alive(const struct gd_peer_id *p);

/* Closes p's pidfd (p may have none). */
void gd_peer_close(struct gd_peer_id *p);

#endif

/*
 * A unix socket in the run directory, mode 0666, whose every connection a handler answers
 * at once on the socket's own thread (usock.c).
 */
#ifndef GPUSLICE_DAEMON_USOCK_H
#define GPUSLICE_DAEMON_USOCK_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>

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

#endif

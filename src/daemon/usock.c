/*
 * A unix socket of the run directory that answers each connection at once, on a thread of
 * its own (usock.h): the device boards' and the pods' sockets. Its handler must not wait on
 * the peer, so that no client can hold the thread up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/usock.h"

static void *serve(void *arg)
{
    struct gd_usock *u = arg;
    struct pollfd p[2];

    p[0].fd = u->fd;
    p[0].events = POLLIN;
    p[1].fd = u->stop[0];
    p[1].events = POLLIN;
    for (;;) {
        int c;

        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        if (!(p[0].revents & POLLIN))
            continue;
        if ((c = accept4(u->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) < 0)
            continue;
        u->handle(c);
        close(c);
    }
    return NULL;
}

int gd_usock_start(struct gd_usock *u, const char *name, void (*handle)(int), const char *what,
                   char *err, size_t errlen)
{
    struct sockaddr_un sa;
    int r;

    u->fd = u->stop[0] = u->stop[1] = -1;
    u->started = 0;
    u->handle = handle;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if ((size_t)snprintf(u->path, sizeof(u->path), "%s/%s", gd_opt.run_dir, name) >=
        sizeof(sa.sun_path)) {
        snprintf(err, errlen, "%s/%s: the path is too long for a socket", gd_opt.run_dir, name);
        return -1;
    }
    memcpy(sa.sun_path, u->path, strlen(u->path) + 1);
    unlink(u->path);
    if ((u->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        bind(u->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        /* Processes of every user connect. */
        chmod(u->path, 0666) < 0 || listen(u->fd, 128) < 0 || pipe2(u->stop, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "cannot serve %s on %s: %s", what, u->path, strerror(errno));
        return -1;
    }
    if ((r = pthread_create(&u->th, NULL, serve, u)) != 0) {
        snprintf(err, errlen, "cannot start the thread of %s: %s", what, strerror(r));
        return -1;
    }
    u->started = 1;
    return 0;
}

void gd_usock_stop(struct gd_usock *u)
{
    int i;

    if (u->started) {
        (void)!write(u->stop[1], "x", 1);
        pthread_join(u->th, NULL);
        u->started = 0;
    }
    if (u->fd >= 0) {
        close(u->fd);
        unlink(u->path);
        u->fd = -1;
    }
    for (i = 0; i < 2; i++)
        if (u->stop[i] >= 0) {
            close(u->stop[i]);
            u->stop[i] = -1;
        }
}

/*
 * A unix socket of the run directory that answers each connection at once, on a thread of
 * its own (usock.h): the device boards' and the pods' sockets. Its handler must not wait on
 * the peer, so that no client can hold the thread up. And the identity of a unix socket's
 * peer, for every place the daemon acts on a peer's PID (the pods' socket, the API's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/proc.h"
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

/* ---- who is at the other end ---- */

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

int gd_peer_get(int conn, struct gd_peer_id *p)
{
    struct ucred cred = { 0, 0, 0 };
    socklen_t cl = sizeof(cred), fl = sizeof(int);

    memset(p, 0, sizeof(*p));
    p->pidfd = -1;
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
        return -errno;
    p->pid = cred.pid;
    p->uid = cred.uid;
    p->gid = cred.gid;
    if (cred.pid <= 0)
        return -ESRCH; /* in a PID namespace the daemon does not see */
    /* The process that called connect(), even if its PID has been given to another since. */
    if (getsockopt(conn, SOL_SOCKET, SO_PEERPIDFD, &p->pidfd, &fl) == 0 && p->pidfd >= 0)
        return 0;
    p->pidfd = -1;
    /*
     * Only a kernel without it falls back: any other refusal (EINVAL for a peer already
     * reaped, on kernels that give no pidfd for one) means the process cannot be named.
     */
    if (errno != ENOPROTOOPT)
        return -ESRCH;
#ifdef SYS_pidfd_open
    if ((p->pidfd = (int)syscall(SYS_pidfd_open, cred.pid, 0)) >= 0)
        return 0;
    if (errno == ESRCH)
        return -ESRCH;
#endif
    p->pidfd = -1;
    return (p->start = gs_proc_start_time(cred.pid)) != 0 ? 0 : -ESRCH;
}

int gd_peer_alive(const struct gd_peer_id *p)
{
    struct pollfd pf;

    if (p->pid <= 0)
        return 0;
    if (p->pidfd < 0)
        return p->start != 0 && gs_proc_start_time(p->pid) == p->start;
    /* A pidfd is readable once its process has exited (needs no right to signal it). */
    pf.fd = p->pidfd;
    pf.events = POLLIN;
    pf.revents = 0;
    return poll(&pf, 1, 0) == 0;
}

void gd_peer_close(struct gd_peer_id *p)
{
    if (p->pidfd >= 0)
        close(p->pidfd);
    p->pidfd = -1;
}

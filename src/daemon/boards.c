/*
 * The device boards the daemon shares among its tenants' processes, of every
 * user (common/board.h): one sealed memfd per GPU, made at start, handed to
 * any process that connects to GS_BOARDS_SOCKET in the run directory. The
 * answer is sent without reading anything from the peer and without waiting
 * for it, so no client can hold the thread up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/board.h"
#include "common/error.h"
#include "daemon/daemon.h"

static int board_fd[GS_BOARDS_MAX];
static uint8_t board_uuid[GS_BOARDS_MAX][16];
static int nboards;
static int listen_fd = -1;
static int stop_pipe[2] = { -1, -1 };
static pthread_t thread;
static int started;
static char sock_path[PATH_MAX];

static void *serve(void *arg)
{
    struct pollfd p[2];

    (void)arg;
    p[0].fd = listen_fd;
    p[0].events = POLLIN;
    p[1].fd = stop_pipe[0];
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
        if ((c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) < 0)
            continue;
        gs_board_send(c, board_fd, (const uint8_t(*)[16])board_uuid, nboards);
        close(c);
    }
    return NULL;
}

int gd_boards_start(char *err, size_t errlen)
{
    struct sockaddr_un sa;
    int i, r;

    pthread_mutex_lock(&gd.mu);
    for (i = 0; i < gd.ndev && nboards < GS_BOARDS_MAX; i++) {
        if ((r = gs_board_make_shared(gd.dev[i].raw)) < 0) {
            pthread_mutex_unlock(&gd.mu);
            snprintf(err, errlen, "cannot make the board of %s: %s", gd.dev[i].uuid, strerror(-r));
            return -1;
        }
        board_fd[nboards] = r;
        memcpy(board_uuid[nboards], gd.dev[i].raw, 16);
        nboards++;
    }
    pthread_mutex_unlock(&gd.mu);
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if ((size_t)snprintf(sock_path, sizeof(sock_path), "%s/" GS_BOARDS_SOCKET, gd_opt.run_dir) >=
        sizeof(sa.sun_path)) {
        snprintf(err, errlen, "%s/" GS_BOARDS_SOCKET ": the path is too long for a socket",
                 gd_opt.run_dir);
        return -1;
    }
    memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
    unlink(sock_path);
    if ((listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        /* Every tenant's processes connect, whoever they run as. */
        chmod(sock_path, 0666) < 0 || listen(listen_fd, 128) < 0 ||
        pipe2(stop_pipe, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "cannot serve the device boards on %s: %s", sock_path,
                 strerror(errno));
        return -1;
    }
    if ((r = pthread_create(&thread, NULL, serve, NULL)) != 0) {
        snprintf(err, errlen, "cannot start the board thread: %s", strerror(r));
        return -1;
    }
    started = 1;
    return 0;
}

void gd_boards_stop(void)
{
    int i;

    if (started) {
        (void)!write(stop_pipe[1], "x", 1);
        pthread_join(thread, NULL);
        started = 0;
    }
    if (listen_fd >= 0) {
        close(listen_fd);
        unlink(sock_path);
        listen_fd = -1;
    }
    for (i = 0; i < 2; i++)
        if (stop_pipe[i] >= 0) {
            close(stop_pipe[i]);
            stop_pipe[i] = -1;
        }
    for (i = 0; i < nboards; i++)
        close(board_fd[i]);
    nboards = 0;
}

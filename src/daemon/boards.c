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
#include "daemon/usock.h"

static int board_fd[GS_BOARDS_MAX];
static uint8_t board_uuid[GS_BOARDS_MAX][16];
static int nboards;
static struct gd_usock sock = { .fd = -1, .stop = { -1, -1 } };

static void answer(int c)
{
    gs_board_send(c, board_fd, (const uint8_t(*)[16])board_uuid, nboards);
}

int gd_boards_start(char *err, size_t errlen)
{
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
    return gd_usock_start(&sock, GS_BOARDS_SOCKET, answer, "the device boards", err, errlen);
}

void gd_boards_stop(void)
{
    int i;

    gd_usock_stop(&sock);
    for (i = 0; i < nboards; i++)
        close(board_fd[i]);
    nboards = 0;
}

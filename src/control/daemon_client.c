/*
 * The CLI's side of the daemon's API: finding the daemon's socket (this
 * user's own daemon, then the system's), a blocking HTTP/1.1 request with
 * "Connection: close" over it, read to its end with a time-out, and why no
 * daemon could be asked, in words a person can act on.
 */
#define _GNU_SOURCE
#include "control/daemon_client.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/env.h"
#include "common/node.h"

#define DAEMON_SOCKET "gpusliced.sock" /* the daemon's API socket in its run directory */

#define MAX_ANSWER (16u << 20)

/*
 * Where to ask, in order: only $GPUSLICE_DAEMON_DIR when it is set (a test, or a user who
 * named her daemon, reaches no other; -EINVAL when it is not absolute); else this user's own
 * daemon's directory, then the system daemon's (the same for root). A user's own gpusliced is
 * found even where /run/gpuslice exists. The count, or -EINVAL or -ENAMETOOLONG.
 */
static int candidates(char dirs[2][PATH_MAX])
{
    const char *env = getenv(GS_ENV_DAEMON_DIR);
    int r;

    if ((r = gs_node_dir(dirs[0], PATH_MAX)) < 0)
        return r;
    if ((env && *env) || strcmp(dirs[0], GS_NODE_SYSTEM_DIR) == 0)
        return 1;
    snprintf(dirs[1], PATH_MAX, "%s", GS_NODE_SYSTEM_DIR);
    return 2;
}

/* Why path cannot be asked, for a person: the cause and what to do about it. */
static void explain(const char *path, int r, char *err, size_t errlen)
{
    struct stat st;

    if (r == -EACCES) {
        struct group g, *gr = NULL;
        char buf[4096];

        /* The socket's group is the one that may ask (gpuslice where it exists). */
        if (stat(path, &st) == 0 && getgrgid_r(st.st_gid, &g, buf, sizeof(buf), &gr) == 0 && gr)
            snprintf(err, errlen,
                     "permission denied on %s: ask to be in group %s (the daemon's socket is "
                     "that group's), or ask an admin of the node",
                     path, gr->gr_name);
        else
            snprintf(err, errlen,
                     "permission denied on %s: ask to be in the group of the daemon's socket "
                     "(gpuslice), or ask an admin of the node",
                     path);
    } else if (r == -ECONNREFUSED) {
        snprintf(err, errlen,
                 "no gpuslice daemon answers on %s (a socket left by one that stopped): start "
                 "gpusliced (make start, or systemctl start gpusliced)",
                 path);
    } else {
        snprintf(err, errlen, "cannot reach the gpuslice daemon on %s: %s", path, strerror(-r));
    }
}

static int connect_daemon(char *err, size_t errlen)
{
    struct timeval tv = { 10, 0 };
    struct sockaddr_un a;
    char dirs[2][PATH_MAX], path[2][sizeof(a.sun_path)];
    int fd, i, n, r, why[2];

    if ((n = candidates(dirs)) < 0) {
        if (n == -EINVAL)
            snprintf(err, errlen,
                     GS_ENV_DAEMON_DIR "=\"%.200s\" is not an absolute path: give the daemon's "
                                       "run directory as one, or unset it",
                     getenv(GS_ENV_DAEMON_DIR));
        else
            snprintf(err, errlen, "no daemon socket path: %s", strerror(-n));
        return n;
    }
    for (i = 0; i < n; i++) {
        if ((size_t)snprintf(path[i], sizeof(path[i]), "%s/" DAEMON_SOCKET, dirs[i]) >=
            sizeof(path[i])) {
            why[i] = -ENAMETOOLONG;
            continue;
        }
        if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
            snprintf(err, errlen, "socket: %s", strerror(errno));
            return -errno;
        }
        memset(&a, 0, sizeof(a));
        a.sun_family = AF_UNIX;
        memcpy(a.sun_path, path[i], strlen(path[i]) + 1);
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
            return fd;
        }
        why[i] = errno == ENOENT || errno == ENOTDIR ? -ENOENT
                 : errno == EACCES || errno == EPERM ? -EACCES
                                                     : -ECONNREFUSED;
        close(fd);
    }
    /* The real cause first: a daemon this user may not ask, then one that stopped. */
    for (r = -ENOENT, i = 0; i < n; i++)
        if (why[i] == -EACCES || (why[i] == -ECONNREFUSED && r == -ENOENT))
            r = why[i];
    for (i = 0; i < n && why[i] != r; i++)
        ;
    if (r == -ENOENT || i == n)
        snprintf(err, errlen,
                 "no gpuslice daemon answers on %s%s%s (no such socket): start gpusliced (make "
                 "start, or systemctl start gpusliced)",
                 path[0], n > 1 ? " or " : "", n > 1 ? path[1] : "");
    else
        explain(path[i], r, err, errlen);
    return r == -ENOENT || r == -EACCES ? r : -ECONNREFUSED;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -errno;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int gs_daemon_request(const char *method, const char *path, const char *body, char **out, char *err,
                      size_t errlen)
{
    char head[1024], *buf = NULL, *p;
    size_t len = 0, cap = 0, blen = body ? strlen(body) : 0;
    int fd, r, status;

    *out = NULL;
    if ((fd = connect_daemon(err, errlen)) < 0)
        return fd;
    r = snprintf(head, sizeof(head),
                 "%s %s HTTP/1.1\r\nHost: gpusliced\r\nConnection: close\r\n%sContent-Length: "
                 "%zu\r\n\r\n",
                 method, path, body ? "Content-Type: application/json\r\n" : "", blen);
    if (r < 0 || (size_t)r >= sizeof(head) || send_all(fd, head, (size_t)r) < 0 ||
        (blen && send_all(fd, body, blen) < 0)) {
        snprintf(err, errlen, "cannot send the request to the daemon: %s", strerror(errno));
        close(fd);
        return -EIO;
    }
    for (;;) {
        ssize_t n;

        if (len + 4096 + 1 > cap) {
            char *nb;

            cap = cap ? cap * 2 : 8192;
            if (cap > MAX_ANSWER || (nb = realloc(buf, cap)) == NULL) {
                snprintf(err, errlen, "the daemon's answer is too large");
                free(buf);
                close(fd);
                return -EMSGSIZE;
            }
            buf = nb;
        }
        n = recv(fd, buf + len, cap - len - 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, errlen, "reading the daemon's answer: %s", strerror(errno));
            free(buf);
            close(fd);
            return -errno;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (buf == NULL || (buf[len] = '\0', sscanf(buf, "HTTP/1.%*d %d", &status) != 1) ||
        (p = strstr(buf, "\r\n\r\n")) == NULL) {
        snprintf(err, errlen, "the daemon's answer is not HTTP");
        free(buf);
        return -EPROTO;
    }
    memmove(buf, p + 4, len - (size_t)(p + 4 - buf) + 1);
    *out = buf;
    return status;
}

int gs_daemon_running(void)
{
    char err[256], *body = NULL;
    int r = gs_daemon_request("GET", "/healthz", NULL, &body, err, sizeof(err));

    free(body);
    return r == 200;
}

int gs_json_find_string(const char *json, const char *key, char *out, size_t len)
{
    char pat[128];
    const char *p;
    size_t n = 0;

    snprintf(pat, sizeof(pat), "\"%s\":\"", key);
    if ((p = strstr(json, pat)) == NULL)
        return -ENOENT;
    for (p += strlen(pat); *p && *p != '"' && n + 1 < len; p++) {
        if (*p == '\\' && p[1]) {
            p++;
            switch (*p) {
            case 'n':
                out[n++] = '\n';
                break;
            case 't':
                out[n++] = '\t';
                break;
            case 'u': {
                unsigned v = 0;
                int k;

                for (k = 1; k <= 4 && isxdigit((unsigned char)p[k]); k++)
                    v = v * 16 + (unsigned)(isdigit((unsigned char)p[k])
                                                ? p[k] - '0'
                                                : (p[k] | 0x20) - 'a' + 10);
                out[n++] = k == 5 && v >= 0x20 && v < 0x7f ? (char)v : '?';
                p += k - 1;
                break;
            }
            default:
                out[n++] = *p;
            }
            continue;
        }
        out[n++] = *p;
    }
    out[n] = '\0';
    return 0;
}

void gs_daemon_error_message(const char *body, char *out, size_t len)
{
    if (body == NULL || gs_json_find_string(body, "message", out, len) < 0)
        snprintf(out, len, "%.200s", body ? body : "no answer");
}

/*
 * The CLI's side of the daemon's API: a blocking HTTP/1.1 request with
 * "Connection: close" over the unix socket, read to its end with a time-out.
 */
#define _GNU_SOURCE
#include "control/daemon_client.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/node.h"

#define MAX_ANSWER (16u << 20)

int gs_daemon_socket(char *buf, size_t len)
{
    char dir[256];
    int r;

    if ((r = gs_node_dir(dir, sizeof(dir))) < 0)
        return r;
    if ((size_t)snprintf(buf, len, "%s/gpusliced.sock", dir) >= len)
        return -ENAMETOOLONG;
    return 0;
}

static int connect_daemon(char *err, size_t errlen)
{
    struct timeval tv = { 10, 0 };
    struct sockaddr_un a;
    char path[sizeof(a.sun_path)];
    int fd, r;

    if ((r = gs_daemon_socket(path, sizeof(path))) < 0) {
        snprintf(err, errlen, "no daemon socket path: %s", strerror(-r));
        return r;
    }
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -errno;
    }
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        r = -errno;
        snprintf(err, errlen, "no gpuslice daemon answers on %s (%s)", path, strerror(errno));
        close(fd);
        return r == -ENOENT ? -ENOENT : r == -EACCES ? -EACCES : -ECONNREFUSED;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return fd;
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

/*
 * node_load: an open-loop HTTP/1.1 load on gpusliced's unix socket (or TCP), for
 * bench/node_soak.py. Requests are due at a fixed rate, each measured from the moment it was
 * due (not from when a connection was free to send it: a daemon that stalls is charged for
 * the requests that queued behind the stall), over CONNS keep-alive connections, one request
 * in flight on each. One thread, poll(2). Prints one line a second ("sec N sent S done D
 * errors E p99_ms P max_ms M") and, at the end, one JSON object with every latency's
 * percentiles, the errors by kind and the rate reached.
 *
 *   node_load (--unix PATH | --tcp HOST:PORT) [--token FILE] [--rate 1000] [--seconds 60]
 *             [--conns 16] [--mix "GET /healthz;GET /v1/tenants;..."]
 *   node_load --serve PATH
 *
 * --serve answers every request on the unix socket PATH at once with a small fixed answer, a
 * thread per connection as gpusliced does: what the machine itself gives (its scheduling, at
 * the priority it runs at), to set the daemon's numbers against.
 * A mix entry is "METHOD PATH" or "METHOD PATH BODY" (a JSON body); the entries are sent in
 * turn. Built by bench/node_soak.py with cc -O2.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 256
#define MAX_MIX 32
#define BUF 65536

struct conn {
    int fd;
    int busy;
    uint64_t due; /* when the request in flight was due */
    char in[BUF * 4];
    size_t inlen;
};

static const char *unix_path, *tcp_spec;
static char token[512];
static char *reqs[MAX_MIX];
static size_t reqlen[MAX_MIX];
static int nmix;

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int dial(void)
{
    int fd;

    if (unix_path) {
        struct sockaddr_un a;

        memset(&a, 0, sizeof(a));
        a.sun_family = AF_UNIX;
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", unix_path);
        if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
            return -1;
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
            close(fd);
            return -1;
        }
    } else {
        struct sockaddr_in a;
        char host[128], *colon;
        int one = 1;

        snprintf(host, sizeof(host), "%s", tcp_spec);
        if ((colon = strrchr(host, ':')) == NULL)
            return -1;
        *colon = '\0';
        memset(&a, 0, sizeof(a));
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)atoi(colon + 1));
        if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
            return -1;
        if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
            return -1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

/* One mix entry as a request's bytes. */
static void build(int i, const char *entry)
{
    char method[16], path[512], auth[600] = "", ctype[96] = "";
    const char *body = NULL;
    size_t cap = 2048 + strlen(entry);
    int n = 0;

    if (sscanf(entry, "%15s %511s %n", method, path, &n) < 2) {
        fprintf(stderr, "node_load: --mix entry \"%s\" is not \"METHOD PATH [BODY]\"\n", entry);
        exit(2);
    }
    if (entry[n])
        body = entry + n;
    if (token[0])
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", token);
    if (body)
        snprintf(ctype, sizeof(ctype), "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                 strlen(body));
    reqs[i] = malloc(cap);
    reqlen[i] = (size_t)snprintf(reqs[i], cap, "%s %s HTTP/1.1\r\nHost: gpusliced\r\n%s%s\r\n%s",
                                 method, path, auth, ctype, body ? body : "");
}

/* --serve: one connection's requests (line and headers; a Content-Length body skipped). */
static void *serve_conn(void *arg)
{
    static const char ans[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                              "Content-Length: 15\r\n\r\n{\"status\":\"ok\"}";
    char buf[65536];
    size_t len = 0;
    int fd = (int)(intptr_t)arg;

    for (;;) {
        char *end, *cl;
        size_t whole;
        ssize_t r;

        buf[len] = '\0';
        if ((end = strstr(buf, "\r\n\r\n")) == NULL) {
            if (len >= sizeof(buf) - 1 || (r = recv(fd, buf + len, sizeof(buf) - 1 - len, 0)) <= 0)
                break;
            len += (size_t)r;
            continue;
        }
        cl = strcasestr(buf, "\r\nContent-Length:");
        whole = (size_t)(end + 4 - buf) + (cl && cl < end ? (size_t)atol(cl + 17) : 0);
        if (whole > len) {
            if (whole >= sizeof(buf) || (r = recv(fd, buf + len, sizeof(buf) - 1 - len, 0)) <= 0)
                break;
            len += (size_t)r;
            continue;
        }
        if (send(fd, ans, sizeof(ans) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(ans) - 1))
            break;
        memmove(buf, buf + whole, len - whole);
        len -= whole;
    }
    close(fd);
    return NULL;
}

static int serve(const char *path)
{
    struct sockaddr_un a;
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), fd;
    FILE *ag;

    /* Its nice for its session's group too, as gpusliced does (autogroup). */
    errno = 0;
    fd = getpriority(PRIO_PROCESS, 0);
    if (errno == 0 && fd != 0 && getsid(0) == getpid() &&
        (ag = fopen("/proc/self/autogroup", "we")) != NULL) {
        fprintf(ag, "%d", fd);
        fclose(ag);
    }
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    unlink(path);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 128) < 0) {
        fprintf(stderr, "node_load: --serve %s: %s\n", path, strerror(errno));
        return 1;
    }
    while ((fd = accept4(l, NULL, NULL, SOCK_CLOEXEC)) >= 0 || errno == EINTR) {
        pthread_t th;

        if (fd >= 0 && pthread_create(&th, NULL, serve_conn, (void *)(intptr_t)fd) == 0)
            pthread_detach(th);
        else if (fd >= 0)
            close(fd);
    }
    return 1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static double pct(uint64_t *v, size_t n, double q)
{
    size_t k;

    if (n == 0)
        return 0;
    k = (size_t)(q * (double)(n - 1) + 0.5);
    return (double)v[k] / 1e6;
}

/* A whole answer at the head of c->in: its length, or 0 (not yet), or -1 (not HTTP). */
static long answer_len(struct conn *c, int *status)
{
    char *end, *cl;
    long body;

    if (c->inlen < 12)
        return 0;
    if (memcmp(c->in, "HTTP/1.", 7) != 0)
        return -1;
    c->in[c->inlen] = '\0';
    if ((end = strstr(c->in, "\r\n\r\n")) == NULL)
        return 0;
    *status = atoi(c->in + 9);
    cl = strcasestr(c->in, "\r\nContent-Length:");
    body = cl && cl < end ? atol(cl + 17) : 0;
    if ((size_t)(end + 4 - c->in) + (size_t)body > c->inlen)
        return 0;
    return (long)(end + 4 - c->in) + body;
}

int main(int argc, char **argv)
{
    double rate = 1000, seconds = 60;
    int nconns = 16, i, errors_conn = 0, errors_status = 0, errors_proto = 0, statuses[6] = { 0 };
    const char *mix = "GET /healthz;GET /v1/tenants;GET /v1/devices;GET /readyz";
    struct conn *cs;
    struct pollfd *p;
    uint64_t *lat, t0, next, end, sec_start, sent = 0, done = 0, sec_sent = 0, sec_done = 0;
    uint64_t *sec_lat, sec_n = 0, backlog_max = 0, backlog = 0;
    size_t nlat = 0, cap;
    int sec = 0, mi = 0;
    char *m, *e;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (v == NULL) {
            fprintf(stderr, "node_load: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--serve") == 0)
            return serve(v);
        if (strcmp(a, "--unix") == 0)
            unix_path = v;
        else if (strcmp(a, "--tcp") == 0)
            tcp_spec = v;
        else if (strcmp(a, "--rate") == 0)
            rate = atof(v);
        else if (strcmp(a, "--seconds") == 0)
            seconds = atof(v);
        else if (strcmp(a, "--conns") == 0)
            nconns = atoi(v);
        else if (strcmp(a, "--mix") == 0)
            mix = v;
        else if (strcmp(a, "--token") == 0) {
            FILE *f = fopen(v, "re");

            if (f == NULL || fgets(token, sizeof(token), f) == NULL) {
                fprintf(stderr, "node_load: --token %s: cannot read it\n", v);
                return 2;
            }
            fclose(f);
            token[strcspn(token, "\r\n")] = '\0';
        } else {
            fprintf(stderr, "node_load: unknown option %s\n", a);
            return 2;
        }
        i++;
    }
    if ((!unix_path) == (!tcp_spec) || rate <= 0 || seconds <= 0 || nconns < 1 ||
        nconns > MAX_CONNS) {
        fprintf(stderr, "node_load: give --unix PATH or --tcp HOST:PORT, a rate and seconds over "
                        "0, and 1..256 connections\n");
        return 2;
    }
    m = strdup(mix);
    for (e = strtok(m, ";"); e && nmix < MAX_MIX; e = strtok(NULL, ";"))
        build(nmix++, e);
    cs = calloc((size_t)nconns, sizeof(*cs));
    p = calloc((size_t)nconns, sizeof(*p));
    cap = (size_t)(rate * seconds * 1.1) + 16;
    lat = malloc(cap * sizeof(*lat));
    sec_lat = malloc(cap * sizeof(*sec_lat));
    for (i = 0; i < nconns; i++)
        cs[i].fd = -1;
    t0 = now_ns();
    next = t0;
    end = t0 + (uint64_t)(seconds * 1e9);
    sec_start = t0;
    for (;;) {
        uint64_t now = now_ns(), wait_ns;
        int free_c = -1, n;

        /* Due requests go to free connections; the rest wait (counted as backlog). */
        while (now >= next && next < end) {
            for (i = 0; i < nconns; i++) {
                int k = (mi + i) % nconns;

                if (!cs[k].busy) {
                    free_c = k;
                    break;
                }
            }
            if (free_c < 0)
                break;
            if (cs[free_c].fd < 0 && (cs[free_c].fd = dial()) < 0) {
                errors_conn++;
                cs[free_c].fd = -1;
                next += (uint64_t)(1e9 / rate); /* dropped: counted as an error */
                sent++;
                continue;
            }
            if (send(cs[free_c].fd, reqs[mi % nmix], reqlen[mi % nmix], MSG_NOSIGNAL) !=
                (ssize_t)reqlen[mi % nmix]) {
                errors_conn++;
                close(cs[free_c].fd);
                cs[free_c].fd = -1;
                next += (uint64_t)(1e9 / rate);
                sent++;
                continue;
            }
            cs[free_c].busy = 1;
            cs[free_c].due = next;
            cs[free_c].inlen = 0;
            mi++;
            sent++;
            sec_sent++;
            next += (uint64_t)(1e9 / rate);
            free_c = -1;
        }
        backlog = now > next && next < end ? (now - next) * (uint64_t)rate / 1000000000ULL : 0;
        if (backlog > backlog_max)
            backlog_max = backlog;
        if (now >= sec_start + 1000000000ULL) {
            qsort(sec_lat, sec_n, sizeof(*sec_lat), cmp_u64);
            printf("sec %d sent %llu done %llu errors %d p99_ms %.3f max_ms %.3f\n", ++sec,
                   (unsigned long long)sec_sent, (unsigned long long)sec_done,
                   errors_conn + errors_status + errors_proto, pct(sec_lat, sec_n, 0.99),
                   sec_n ? (double)sec_lat[sec_n - 1] / 1e6 : 0.0);
            fflush(stdout);
            sec_start += 1000000000ULL;
            sec_sent = sec_done = sec_n = 0;
        }
        if (now >= end) {
            int busy = 0;

            for (i = 0; i < nconns; i++)
                busy += cs[i].busy;
            if (busy == 0 || now >= end + 5000000000ULL)
                break;
        }
        for (i = 0, n = 0; i < nconns; i++) {
            p[i].fd = cs[i].busy ? cs[i].fd : -1;
            p[i].events = POLLIN;
            p[i].revents = 0;
            n += cs[i].busy;
        }
        wait_ns = next > now ? next - now : 0;
        if (sec_start + 1000000000ULL > now && sec_start + 1000000000ULL - now < wait_ns)
            wait_ns = sec_start + 1000000000ULL - now;
        {
            struct timespec ts = { (time_t)(wait_ns / 1000000000ULL),
                                   (long)(wait_ns % 1000000000ULL) };

            if (ppoll(p, (nfds_t)nconns, &ts, NULL) < 0 && errno != EINTR)
                break;
        }
        now = now_ns();
        for (i = 0; i < nconns; i++) {
            struct conn *c = &cs[i];
            ssize_t r;
            long len;
            int st = 0;

            if (!c->busy || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            r = recv(c->fd, c->in + c->inlen, sizeof(c->in) - 1 - c->inlen, MSG_DONTWAIT);
            if (r <= 0) {
                if (r < 0 && (errno == EAGAIN || errno == EINTR))
                    continue;
                errors_conn++;
                close(c->fd);
                c->fd = -1;
                c->busy = 0;
                continue;
            }
            c->inlen += (size_t)r;
            if ((len = answer_len(c, &st)) == 0) {
                if (c->inlen >= sizeof(c->in) - 1) {
                    errors_proto++;
                    close(c->fd);
                    c->fd = -1;
                    c->busy = 0;
                }
                continue;
            }
            if (len < 0 || (size_t)len != c->inlen) {
                errors_proto++; /* not HTTP, or more than one answer */
                close(c->fd);
                c->fd = -1;
                c->busy = 0;
                continue;
            }
            statuses[st / 100 <= 5 ? st / 100 : 0]++;
            if (st >= 400)
                errors_status++;
            lat[nlat++] = now - c->due;
            sec_lat[sec_n++] = now - c->due;
            done++;
            sec_done++;
            c->busy = 0;
            if (strstr(c->in, "\r\nConnection: close")) {
                close(c->fd);
                c->fd = -1;
            }
        }
    }
    qsort(lat, nlat, sizeof(*lat), cmp_u64);
    printf("{\"requests\": %llu, \"answered\": %llu, \"seconds\": %.3f, \"rate\": %.1f, "
           "\"p50_ms\": %.3f, \"p90_ms\": %.3f, \"p99_ms\": %.3f, \"p999_ms\": %.3f, "
           "\"max_ms\": %.3f, \"errors\": {\"connection\": %d, \"status\": %d, \"protocol\": "
           "%d}, \"status\": {\"2xx\": %d, \"4xx\": %d, \"5xx\": %d}, \"backlog_max\": %llu}\n",
           (unsigned long long)sent, (unsigned long long)done, seconds, (double)done / seconds,
           pct(lat, nlat, 0.5), pct(lat, nlat, 0.9), pct(lat, nlat, 0.99), pct(lat, nlat, 0.999),
           nlat ? (double)lat[nlat - 1] / 1e6 : 0.0, errors_conn, errors_status, errors_proto,
           statuses[2], statuses[4], statuses[5], (unsigned long long)backlog_max);
    return 0;
}

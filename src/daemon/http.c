/*
 * The HTTP server: libmicrohttpd on the unix socket (its peers named by the
 * kernel, SO_PEERCRED), and on TCP only with --listen and a bearer token.
 * Each connection has a thread of its own, at most max_connections of them;
 * an idle one is closed after timeout_s; a request's line and headers are
 * capped by the connection's memory (max_header), its body by max_body (a
 * larger Content-Length is answered 413 before the body is read; a chunked
 * body that grows past it closes the connection). Routing and the answers
 * are api.c's.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/webhook.h"

struct conn_state {
    char *body;
    size_t len;
    int tcp;
    uint64_t t0; /* when its headers were read */
};

static void record_latency(uint64_t ns)
{
    double s = ns / 1e9;
    int b = 0;

    while (b < GD_LATENCY_BUCKETS && s > gd_latency_bounds[b])
        b++;
    __atomic_add_fetch(&gd.latency_count[b], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&gd.latency_sum_ns, ns, __ATOMIC_RELAXED);
}

struct sse_state {
    uint64_t last;
    int sent_gap;
    uid_t uid; /* the subscriber, who sees only its own tenants' events unless admin */
    int admin;
};

static struct MHD_Daemon *unix_d, *tcp_d, *hook_d;
static char *hook_cert, *hook_key; /* the webhook's PEM, kept while it serves */
static int unix_fd = -1;
static char token[512];
static size_t token_len;
static int sse_count;

/* Constant time in the token's length, whatever the client sent. */
static int token_ok(const char *auth)
{
    const char *given;
    size_t glen, i;
    unsigned diff;

    if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0)
        return 0;
    given = auth + 7;
    glen = strlen(given);
    diff = (unsigned)(glen != token_len);
    for (i = 0; i < token_len; i++)
        diff |= (unsigned char)token[i] ^ (unsigned char)(i < glen ? given[i] : 0);
    return diff == 0;
}

static int in_group(pid_t pid, gid_t primary, gid_t want)
{
    char path[64], buf[8192], *line;
    FILE *f;
    int found = primary == want;

    if (found || pid <= 0)
        return found;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if ((f = fopen(path, "re")) == NULL)
        return 0;
    while (!found && fgets(buf, sizeof(buf), f)) {
        if (strncmp(buf, "Groups:", 7) != 0)
            continue;
        for (line = strtok(buf + 7, " \t\n"); line && !found; line = strtok(NULL, " \t\n"))
            found = (gid_t)strtoul(line, NULL, 10) == want;
    }
    fclose(f);
    return found;
}

static void peer_of(struct MHD_Connection *c, int tcp, struct gd_peer *p)
{
    const union MHD_ConnectionInfo *ci;
    struct ucred cred;
    socklen_t len = sizeof(cred);

    memset(p, 0, sizeof(*p));
    p->uid = (uid_t)-1;
    p->gid = (gid_t)-1;
    if (tcp) {
        p->admin = 1; /* checked by its token */
        p->uid = geteuid();
        return;
    }
    ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci == NULL || getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return;
    p->unix_peer = 1;
    p->uid = cred.uid;
    p->gid = cred.gid;
    p->pid = cred.pid;
    p->admin = cred.uid == 0 || cred.uid == geteuid() ||
               (gd.has_admin_gid && in_group(cred.pid, cred.gid, gd.admin_gid));
}

static ssize_t sse_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct sse_state *s = cls;
    long keep = gd_opt.timeout_s > 2 ? gd_opt.timeout_s / 2 : 1;
    uint64_t last;
    size_t n;
    int gap;

    (void)pos;
    if (max < 1100)
        return 0;
    if (keep > 15)
        keep = 15;
    n = gd_events_read(s->last, buf, max, (int)keep * 1000, s->uid, s->admin, &last, &gap);
    if (gap && !s->sent_gap) {
        /* Said once: the history no longer reaches back to the id asked for. */
        s->sent_gap = 1;
    }
    if (n == 0 && last == s->last) {
        static const char ping[] = ": keep-alive\n\n";

        if (__atomic_load_n(&gd.ready, __ATOMIC_RELAXED) < 0)
            return MHD_CONTENT_READER_END_OF_STREAM;
        memcpy(buf, ping, sizeof(ping) - 1);
        return (ssize_t)(sizeof(ping) - 1);
    }
    s->last = last;
    return (ssize_t)n;
}

static void sse_free(void *cls)
{
    free(cls);
    __atomic_sub_fetch(&sse_count, 1, __ATOMIC_RELAXED);
}

static enum MHD_Result send_response(struct MHD_Connection *c, struct gd_response *r)
{
    struct MHD_Response *resp;
    enum MHD_Result ret;

    if (r->sse) {
        struct sse_state *s;

        if (__atomic_add_fetch(&sse_count, 1, __ATOMIC_RELAXED) > gd_opt.max_sse ||
            (s = calloc(1, sizeof(*s))) == NULL) {
            __atomic_sub_fetch(&sse_count, 1, __ATOMIC_RELAXED);
            gd_api_error(r, 429, "too_many_subscribers",
                         "the daemon has %ld event subscribers, its most (max-sse); try later",
                         gd_opt.max_sse);
            r->sse = 0;
            return send_response(c, r);
        }
        s->last = r->sse_from;
        s->uid = r->sse_uid;
        s->admin = r->sse_admin;
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_reader, s, sse_free);
        if (resp == NULL) {
            sse_free(s);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-store");
        ret = MHD_queue_response(c, 200, resp);
        MHD_destroy_response(resp);
        return ret;
    }
    resp =
        MHD_create_response_from_buffer(r->len, r->body ? r->body : (char *)"",
                                        r->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    r->body = NULL;
    if (resp == NULL)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type",
                            r->content_type ? r->content_type : "application/json");
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    if (r->status == 401)
        MHD_add_response_header(resp, "WWW-Authenticate", "Bearer realm=\"gpusliced\"");
    ret = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/*
 * The admission webhook's listener: POST /mutate with an AdmissionReview, GET /healthz. It
 * reads no state and answers only about the pod it is sent, so it needs no token (the API
 * server checks its certificate).
 */
static void webhook(const char *method, const char *url, const struct conn_state *cs,
                    struct gd_response *resp)
{
    struct gd_webhook_conf conf = { gd_opt.inject_lib_dir, gd_opt.inject_run_dir[0]
                                                               ? gd_opt.inject_run_dir
                                                               : gd_opt.run_dir };
    char err[512];
    json_t *o;

    if (strcmp(url, "/healthz") == 0 && strcmp(method, "GET") == 0) {
        resp->status = 200;
        resp->body = strdup("ok\n");
        resp->len = resp->body ? 3 : 0;
        resp->content_type = "text/plain";
        return;
    }
    if (strcmp(url, "/mutate") != 0) {
        gd_api_error(resp, 404, "not_found", "the webhook serves POST /mutate and GET /healthz");
        return;
    }
    if (strcmp(method, "POST") != 0) {
        gd_api_error(resp, 405, "method_not_allowed", "/mutate takes POST (an AdmissionReview)");
        return;
    }
    if ((o = gd_webhook_review(cs->body ? cs->body : "", cs->len, &conf, err, sizeof(err))) ==
        NULL) {
        gd_api_error(resp, 400, "bad_request", "%s", err);
        return;
    }
    __atomic_add_fetch(&gd.requests_total, 1, __ATOMIC_RELAXED);
    resp->status = 200;
    resp->body = json_dumps(o, JSON_COMPACT);
    resp->len = resp->body ? strlen(resp->body) : 0;
    resp->content_type = "application/json";
    json_decref(o);
}

/*
 * The largest body a listener takes: max-body for the API; for the webhook 4 MiB, above the
 * API server's own limit on an object (about 3 MiB), so that no pod is refused for its size.
 */
#define WEBHOOK_MAX_BODY ((size_t)4 << 20)
static size_t body_cap(void *cls)
{
    return cls == &hook_d ? WEBHOOK_MAX_BODY : (size_t)gd_opt.max_body;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    struct conn_state *cs = *con_cls;
    struct gd_request req;
    struct gd_response resp;
    enum MHD_Result ret;
    int tcp = cls == &tcp_d || cls == &hook_d;

    (void)version;
    if (cs == NULL) {
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");

        if ((cs = calloc(1, sizeof(*cs))) == NULL)
            return MHD_NO;
        cs->tcp = tcp;
        cs->t0 = gd_mono_ns();
        *con_cls = cs;
        memset(&resp, 0, sizeof(resp));
        if (tcp && cls != &hook_d &&
            !token_ok(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"))) {
            gd_api_error(&resp, 401, "unauthorized",
                         "this request needs the header \"Authorization: Bearer TOKEN\" with the "
                         "daemon's token (token-file)");
            return send_response(c, &resp);
        }
        if (cl && strtoull(cl, NULL, 10) > (unsigned long long)body_cap(cls)) {
            gd_api_error(&resp, 413, "body_too_large",
                         "the request body is %s bytes; the daemon accepts at most %zu%s", cl,
                         body_cap(cls), cls == &hook_d ? "" : " (max-body)");
            return send_response(c, &resp);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (cs->len + *upload_size > body_cap(cls))
            return MHD_NO; /* a chunked body past the cap: the connection is closed */
        {
            char *nb = realloc(cs->body, cs->len + *upload_size + 1);

            if (nb == NULL)
                return MHD_NO;
            cs->body = nb;
        }
        memcpy(cs->body + cs->len, upload, *upload_size);
        cs->len += *upload_size;
        cs->body[cs->len] = '\0';
        *upload_size = 0;
        return MHD_YES;
    }
    memset(&req, 0, sizeof(req));
    memset(&resp, 0, sizeof(resp));
    if (cls == &hook_d) {
        webhook(method, url, cs, &resp);
        ret = send_response(c, &resp);
        free(resp.body);
        return ret;
    }
    req.method = method;
    req.path = url;
    req.body = cs->body ? cs->body : "";
    req.body_len = cs->len;
    req.last_event_id = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Last-Event-ID");
    req.content_type = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    req.query = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "force");
    peer_of(c, tcp, &req.peer);
    __atomic_add_fetch(&gd.requests_total, 1, __ATOMIC_RELAXED);
    gd_api_handle(&req, &resp);
    if (!resp.sse)
        record_latency(gd_mono_ns() - cs->t0);
    if (gd_opt.verbose)
        gd_log("%s %s -> %d (uid %d)", method, url, resp.status, (int)req.peer.uid);
    ret = send_response(c, &resp);
    free(resp.body);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct conn_state *cs = *con_cls;

    (void)cls;
    (void)c;
    (void)toe;
    if (cs) {
        free(cs->body);
        free(cs);
        *con_cls = NULL;
    }
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char buf[512];

    (void)cls;
    if (!gd_opt.verbose)
        return;
    vsnprintf(buf, sizeof(buf), fmt, ap);
    buf[strcspn(buf, "\n")] = '\0';
    gd_log("http: %s", buf);
}

/* Another daemon answering on the socket: we must not take it over. */
static int socket_in_use(const char *path)
{
    struct sockaddr_un a;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), r;

    if (fd < 0)
        return 0;
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, path, strnlen(path, sizeof(a.sun_path) - 1));
    r = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return r;
}

static int open_unix(char *err, size_t errlen)
{
    struct sockaddr_un a;
    struct stat st;
    struct group *g;

    if (strlen(gd_opt.socket) >= sizeof(a.sun_path)) {
        snprintf(err, errlen, "socket path %s is longer than %zu characters", gd_opt.socket,
                 sizeof(a.sun_path) - 1);
        return -1;
    }
    if (lstat(gd_opt.socket, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, errlen, "%s exists and is not a socket", gd_opt.socket);
            return -1;
        }
        if (socket_in_use(gd_opt.socket)) {
            snprintf(err, errlen, "another gpusliced answers on %s", gd_opt.socket);
            return -1;
        }
        unlink(gd_opt.socket); /* a dead daemon's */
    }
    if ((unix_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, gd_opt.socket, strlen(gd_opt.socket)); /* checked above: it fits */
    if (bind(unix_fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        snprintf(err, errlen, "cannot bind %s: %s", gd_opt.socket, strerror(errno));
        close(unix_fd);
        unix_fd = -1;
        return -1;
    }
    /* 0660: the daemon's user, and its group (gpuslice where that group exists). */
    if ((g = getgrnam(gd_opt.socket_group)) != NULL &&
        chown(gd_opt.socket, (uid_t)-1, g->gr_gid) < 0)
        gd_log("warning: cannot give %s to group %s: %s", gd_opt.socket, gd_opt.socket_group,
               strerror(errno));
    if (chmod(gd_opt.socket, 0660) < 0 || listen(unix_fd, 128) < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", gd_opt.socket, strerror(errno));
        close(unix_fd);
        unix_fd = -1;
        return -1;
    }
    return 0;
}

static int read_token(char *err, size_t errlen)
{
    struct stat st;
    ssize_t n;
    int fd;

    if ((fd = open(gd_opt.token_file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
        snprintf(err, errlen, "--token-file %s: %s", gd_opt.token_file, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 0077)) {
        close(fd);
        snprintf(err, errlen,
                 "--token-file %s must be a regular file that only its owner can read (chmod 600)",
                 gd_opt.token_file);
        return -1;
    }
    n = read(fd, token, sizeof(token) - 1);
    close(fd);
    if (n < 0)
        n = 0;
    token[n] = '\0';
    token_len = strcspn(token, "\r\n");
    token[token_len] = '\0';
    if (token_len < 16) {
        snprintf(err, errlen, "--token-file %s holds %zu characters; a token needs at least 16",
                 gd_opt.token_file, token_len);
        return -1;
    }
    return 0;
}

static int parse_listen(const char *opt, const char *spec, struct sockaddr_storage *ss, char *err,
                        size_t errlen)
{
    char host[128], *colon;
    long port;
    char *end;

    snprintf(host, sizeof(host), "%s", spec);
    if ((colon = strrchr(host, ':')) == NULL) {
        snprintf(err, errlen, "--%s %s: give ADDR:PORT (e.g. 127.0.0.1:9400)", opt, spec);
        return -1;
    }
    *colon = '\0';
    port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535) {
        snprintf(err, errlen, "--%s %s: the port must be 1..65535", opt, spec);
        return -1;
    }
    memset(ss, 0, sizeof(*ss));
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

        host[strlen(host) - 1] = '\0';
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) == 1)
            return 0;
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)ss;

        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, host, &a4->sin_addr) == 1)
            return 0;
    }
    snprintf(err, errlen, "--%s %s: \"%s\" is not an IP address", opt, spec, host);
    return -1;
}

static struct MHD_Daemon *start(int fd, const struct sockaddr *sa, void *cls)
{
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_ERROR_LOG | MHD_USE_ITC | MHD_USE_POLL;

    if (sa && sa->sa_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    return MHD_start_daemon(flags, 0, NULL, NULL, on_request, cls, MHD_OPTION_NOTIFY_COMPLETED,
                            on_completed, NULL, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)gd_opt.max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)gd_opt.timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                            (size_t)gd_opt.max_header, MHD_OPTION_THREAD_STACK_SIZE,
                            (size_t)(256 * 1024), MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                            fd >= 0 ? MHD_OPTION_LISTEN_SOCKET : MHD_OPTION_SOCK_ADDR,
                            fd >= 0 ? (void *)(intptr_t)fd : (void *)sa, MHD_OPTION_END);
}

/* A PEM file's contents (malloc'd), or NULL with err; a key must be its owner's only. */
static char *read_pem(const char *opt, const char *path, int secret, char *err, size_t errlen)
{
    struct stat st;
    char *buf;
    ssize_t n;
    int fd;

    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        snprintf(err, errlen, "--%s %s: %s", opt, path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > (1 << 20) ||
        (secret && (st.st_mode & 0077))) {
        close(fd);
        snprintf(err, errlen, "--%s %s must be a regular file of PEM, at most 1 MiB%s", opt, path,
                 secret ? ", that only its owner can read (chmod 600)" : "");
        return NULL;
    }
    if ((buf = calloc(1, (size_t)st.st_size + 1)) == NULL ||
        (n = read(fd, buf, (size_t)st.st_size)) != st.st_size || !strstr(buf, "-----BEGIN ")) {
        close(fd);
        free(buf);
        snprintf(err, errlen, "--%s %s: not a PEM file", opt, path);
        return NULL;
    }
    close(fd);
    return buf;
}

static int start_webhook(char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_ERROR_LOG | MHD_USE_ITC | MHD_USE_TLS | MHD_USE_POLL;

    if (parse_listen("webhook-listen", gd_opt.webhook_listen, &ss, err, errlen) < 0 ||
        (hook_cert = read_pem("webhook-cert", gd_opt.webhook_cert, 0, err, errlen)) == NULL ||
        (hook_key = read_pem("webhook-key", gd_opt.webhook_key, 1, err, errlen)) == NULL)
        return -1;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    hook_d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, &hook_d, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)gd_opt.max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)gd_opt.timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)gd_opt.max_header, MHD_OPTION_THREAD_STACK_SIZE,
        (size_t)(256 * 1024), MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_HTTPS_MEM_CERT,
        hook_cert, MHD_OPTION_HTTPS_MEM_KEY, hook_key, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_END);
    if (hook_d == NULL) {
        snprintf(err, errlen,
                 "cannot serve the webhook on %s over TLS (the address in use or not this "
                 "host's, or a certificate and key that do not load or match)",
                 gd_opt.webhook_listen);
        return -1;
    }
    gd_log("admission webhook on https://%s/mutate", gd_opt.webhook_listen);
    return 0;
}

int gd_http_start(char *err, size_t errlen)
{
    if (open_unix(err, errlen) < 0)
        return -1;
    /* MHD takes an int for MHD_OPTION_LISTEN_SOCKET. */
    unix_d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                                  MHD_USE_ERROR_LOG | MHD_USE_ITC | MHD_USE_POLL,
                              0, NULL, NULL, on_request, &unix_d, MHD_OPTION_NOTIFY_COMPLETED,
                              on_completed, NULL, MHD_OPTION_CONNECTION_LIMIT,
                              (unsigned)gd_opt.max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
                              (unsigned)gd_opt.timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                              (size_t)gd_opt.max_header, MHD_OPTION_THREAD_STACK_SIZE,
                              (size_t)(256 * 1024), MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                              MHD_OPTION_LISTEN_SOCKET, unix_fd, MHD_OPTION_END);
    if (unix_d == NULL) {
        snprintf(err, errlen, "cannot start the HTTP server on %s", gd_opt.socket);
        return -1;
    }
    if (gd_opt.listen[0]) {
        struct sockaddr_storage ss;

        if (read_token(err, errlen) < 0 ||
            parse_listen("listen", gd_opt.listen, &ss, err, errlen) < 0)
            return -1;
        if ((tcp_d = start(-1, (struct sockaddr *)&ss, &tcp_d)) == NULL) {
            snprintf(err, errlen, "cannot listen on %s (in use, or not an address of this host)",
                     gd_opt.listen);
            return -1;
        }
        gd_log("listening on %s (bearer token from %s)", gd_opt.listen, gd_opt.token_file);
    }
    if (gd_opt.webhook_listen[0] && start_webhook(err, errlen) < 0)
        return -1;
    return 0;
}

void gd_http_stop(void)
{
    if (hook_d)
        MHD_stop_daemon(hook_d);
    hook_d = NULL;
    free(hook_cert);
    free(hook_key);
    hook_cert = hook_key = NULL;
    if (tcp_d)
        MHD_stop_daemon(tcp_d);
    if (unix_d)
        MHD_stop_daemon(unix_d);
    tcp_d = unix_d = NULL;
    if (unix_fd >= 0) {
        unlink(gd_opt.socket);
        unix_fd = -1;
    }
}

/*
 * The HTTP server: libmicrohttpd on the unix socket (its peers named by the
 * kernel, SO_PEERCRED), on TCP only with --listen and a bearer token, and the
 * admission webhook over TLS. Each listener has a thread of its own that
 * accepts, and lets a connection in only where its door (door.c) has room:
 * max-connections at once, max-peer-connections of one uid or address, and on
 * the unix socket reserved-connections more for root and the daemon's user;
 * one refused is answered 503 and closed. Each connection then has a thread of
 * its own. Every request must be whole, and answered, within
 * request-timeout-s of its connection or the previous answer (the door's
 * thread shuts down one past it), an idle connection is closed after
 * timeout-s, a request's line and headers are capped by the connection's
 * memory (max-header), its body by max-body (webhook-max-body for the
 * webhook; a larger Content-Length is answered 413 before the body is read; a
 * chunked body that grows past it closes the connection), and request bodies
 * with the memory their JSON will take to parse by request-memory, all
 * requests together (503 past it). Routing and the answers are api.c's.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/proc.h"
#include "daemon/daemon.h"
#include "daemon/pods.h"
#include "daemon/usock.h"
#include "daemon/door.h"
#include "daemon/webhook.h"

/* One request. */
struct conn_state {
    char *body;
    size_t len, cap;
    size_t mem; /* bytes taken from request-memory for it */
    int deny;   /* 401: answered once the request is whole, its body read and dropped */
    int tcp;
    uint64_t t0; /* when its headers were read */
};

enum listener_kind { L_UNIX, L_TCP, L_HOOK };

/* A refused socket is kept this long (at most LINGER_MAX of them) before it is closed. */
#define LINGER_MAX 64
#define LINGER_NS 200000000ULL

/*
 * A full listener gives the place of a request waiting this long to a newcomer: a client
 * that sends its request at once is done in milliseconds, so the one evicted is a slow or
 * idle one, however many addresses they come from.
 */
#define EVICT_AFTER_NS 50000000ULL

/* One listening socket: its door, the thread that accepts on it, its server. */
struct listener {
    enum listener_kind kind;
    int fd;
    struct MHD_Daemon *d;
    struct gd_door door;
    pthread_t th;
    int th_started;
    size_t max_body;
    const char *max_body_opt; /* the option that sets it, for messages */
    uint64_t refused, logged_ns;
    /* Refused sockets, oldest first, closed at until_ns (the door's thread only). */
    struct {
        int fd;
        uint64_t until_ns;
    } linger[LINGER_MAX];
    int nlinger;
};

static struct listener lsn[3] = { { .kind = L_UNIX, .fd = -1 },
                                  { .kind = L_TCP, .fd = -1 },
                                  { .kind = L_HOOK, .fd = -1 } };
static int stop_pipe[2] = { -1, -1 };

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
    uid_t uid; /* the subscriber, who sees only its own tenants' events unless admin */
    int admin;
};

static char *hook_cert, *hook_key; /* the webhook's PEM, kept while it serves */
static int unix_bound;             /* the socket file is ours to remove */
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

/*
 * Who sent a request: over TCP the token's holder (an admin); over the unix socket, the
 * process the kernel names (usock.c), an admin when it is root, the daemon's user or in the
 * admin group. Its groups and cgroup are read from /proc/PID, and believed only if that
 * process still lives after (else the PID may be another's now: its groups are not the
 * peer's). A process in a pod's cgroup (not the daemon's own pod) is never an admin, whatever
 * its uid: root in a container is no one's admin here; nor does it own anything (its uid
 * is taken as no one's).
 */
static void peer_of(struct MHD_Connection *c, int tcp, struct gd_peer *p)
{
    const union MHD_ConnectionInfo *ci;
    struct gd_peer_id id;
    char path[64], cg[16384];
    ssize_t got = -1;
    int fd, admin;

    memset(p, 0, sizeof(*p));
    p->uid = (uid_t)-1;
    p->gid = (gid_t)-1;
    if (tcp) {
        p->admin = 1; /* checked by its token */
        p->uid = geteuid();
        return;
    }
    ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci == NULL || gd_peer_get(ci->connect_fd, &id) < 0)
        return;
    admin = id.uid == 0 || id.uid == geteuid() ||
            (gd.has_admin_gid && in_group(id.pid, id.gid, gd.admin_gid));
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)id.pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
        got = read(fd, cg, sizeof(cg) - 1);
        close(fd);
    }
    /* Who it is for a join (POST /v1/tenants/ID/processes): recorded as read here. */
    p->pid_ns = gs_proc_pid_ns(id.pid);
    p->inner = gs_proc_inner_pid(id.pid);
    p->start = gs_proc_start_time(id.pid);
    if (!gd_peer_alive(&id)) {
        p->pid_ns = 0;
        p->inner = 0;
        p->start = 0;
        gd_peer_close(&id);
        return; /* gone: nothing read of its PID is its own */
    }
    gd_peer_close(&id);
    p->unix_peer = 1;
    p->pid = id.pid;
    if (got >= 0) {
        cg[got] = '\0';
        if (gd_pods_peer_in_pod(cg, (size_t)got)) {
            p->admin = 0;
            return; /* uid and gid stay no one's */
        }
    }
    p->uid = id.uid;
    p->gid = id.gid;
    p->admin = admin && got >= 0; /* an admin is known not to be a pod's */
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
    {
        /*
         * Said before what follows, each time the history no longer reaches back to where
         * the stream is (the id asked for is from before the daemon's restart, or events were
         * dropped from the ring while this reader lagged): an event without an id, so that
         * the client's Last-Event-ID stays the one it had.
         */
        (void)gd_events_read(s->last, NULL, 0, 0, s->uid, s->admin, &last, &gap);
        if (gap) {
            int k = snprintf(buf, max,
                             "event: events.lost\ndata: {\"type\":\"events.lost\","
                             "\"after\":%llu,\"resumed_after\":%llu}\n\n",
                             (unsigned long long)s->last, (unsigned long long)last);

            s->last = last;
            return k > 0 && (size_t)k < max ? (ssize_t)k : 0;
        }
    }
    n = gd_events_read(s->last, buf, max, (int)keep * 1000, s->uid, s->admin, &last, &gap);
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

/* The door's record of connection c (NULL if it has none). */
static struct gd_conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return ci ? ci->socket_context : NULL;
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
        /* A stream has no end to wait for: max-sse bounds them, timeout-s one nobody reads. */
        gd_door_start(conn_of(c), 0);
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
    if (r->status == 503)
        MHD_add_response_header(resp, "Retry-After", "1");
    ret = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/*
 * The admission webhook's listener: POST /mutate with an AdmissionReview, GET /healthz. It
 * reads no state and answers only about the pod it is sent, so it needs no token (the API
 * server checks its certificate); in webhook-claims mode it makes claim templates in the API
 * server (webhook_api.c).
 */
static void webhook(const char *method, const char *url, const struct conn_state *cs,
                    struct gd_response *resp)
{
    struct gd_webhook_conf conf = { gd_opt.inject_lib_dir,
                                    gd_opt.inject_run_dir[0] ? gd_opt.inject_run_dir
                                                             : gd_opt.run_dir,
                                    gd_opt.webhook_claims, gd_opt.pod_latency_namespaces,
                                    gd_webhook_ensure_template, NULL };
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

/* The request's share of request-memory, given back. */
static void release(struct conn_state *cs)
{
    free(cs->body);
    cs->body = NULL;
    cs->cap = 0;
    gd_mem_give(cs->mem);
    cs->mem = 0;
}

/* cs's share of request-memory raised to n bytes: 0 or -ENOMEM (nothing taken). */
static int reserve(struct conn_state *cs, size_t n)
{
    if (n <= cs->mem)
        return 0;
    if (gd_mem_take(n - cs->mem) < 0)
        return -ENOMEM;
    cs->mem = n;
    return 0;
}

/* Room in cs's buffer for n more bytes (at most cap in all), within its share: 0 or -ENOMEM. */
static int grow(struct conn_state *cs, size_t n, size_t cap)
{
    size_t want = cs->len + n + 1, size;
    char *nb;

    if (want <= cs->cap)
        return 0;
    if (want > cap + 1)
        return -E2BIG; /* (the callers check the cap first; this keeps the copy inside) */
    size = cs->cap * 2 > want ? cs->cap * 2 : want;
    if (size > cap + 1)
        size = cap + 1;
    if (reserve(cs, size) < 0 || (nb = realloc(cs->body, size)) == NULL)
        return -ENOMEM;
    cs->body = nb;
    cs->cap = size;
    return 0;
}

/* A 503 for a request request-memory has no room for now. */
static void busy(struct gd_response *resp)
{
    gd_api_error(resp, 503, "busy",
                 "the daemon is reading %zu bytes of other requests, its most (request-memory "
                 "%zu); try again",
                 gd_mem_used(), gd_mem_total());
}

/* A 413 for a request whose JSON would take more than request-memory to parse. */
static void too_complex(struct gd_response *resp, size_t need)
{
    gd_api_error(resp, 413, "body_too_complex",
                 "the request body's JSON would take about %zu bytes to read; the daemon reads "
                 "at most %zu at once (request-memory)",
                 need, gd_mem_total());
}

static enum MHD_Result answer_now(struct MHD_Connection *c, struct gd_response *resp)
{
    enum MHD_Result ret = send_response(c, resp);

    free(resp->body);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    struct listener *l = cls;
    struct conn_state *cs = *con_cls;
    struct gd_request req;
    struct gd_response resp;
    enum MHD_Result ret;
    int tcp = l->kind != L_UNIX;

    (void)version;
    memset(&resp, 0, sizeof(resp));
    if (cs == NULL) {
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        unsigned long long n = cl ? strtoull(cl, NULL, 10) : 0;

        if ((cs = calloc(1, sizeof(*cs))) == NULL)
            return MHD_NO;
        cs->tcp = tcp;
        cs->t0 = gd_mono_ns();
        *con_cls = cs;
        /* Answered before the body is read; the connection then closes (libmicrohttpd). */
        if (n > l->max_body) {
            gd_api_error(&resp, 413, "body_too_large",
                         "the request body is %s bytes; the daemon accepts at most %zu (%s)", cl,
                         l->max_body, l->max_body_opt);
            return answer_now(c, &resp);
        }
        if (l->kind == L_TCP &&
            !token_ok(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"))) {
            /*
             * Answered once the request is whole, its body dropped as it comes: the
             * connection then stays open, and requests sent behind it are answered in turn.
             */
            cs->deny = 401;
            return MHD_YES;
        }
        if (n > 0) {
            /*
             * What the body will take to parse, at the least (its text, the lexer's buffer,
             * the strings copied), all taken now: a request never holds part of it while it
             * waits for the rest, so that requests cannot hold each other up.
             */
            size_t need = gd_json_cost_floor((size_t)n);

            if (need > gd_mem_total())
                too_complex(&resp, need);
            else if (reserve(cs, need) < 0 || grow(cs, (size_t)n, l->max_body) < 0)
                busy(&resp);
            if (resp.status)
                return answer_now(c, &resp);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (cs->len + *upload_size > l->max_body)
            return MHD_NO; /* a chunked body past the cap: the connection is closed */
        if (!cs->deny) {
            if (grow(cs, *upload_size, l->max_body) < 0)
                return MHD_NO; /* a chunked body past request-memory: closed alike */
            memcpy(cs->body + cs->len, upload, *upload_size);
            cs->body[cs->len + *upload_size] = '\0';
        }
        cs->len += *upload_size;
        *upload_size = 0;
        return MHD_YES;
    }
    /* The request is whole: its answer must be written within request-timeout-s. */
    gd_door_start(conn_of(c), gd_mono_ns());
    if (cs->deny) {
        gd_api_error(&resp, 401, "unauthorized",
                     "this request needs the header \"Authorization: Bearer TOKEN\" with the "
                     "daemon's token (token-file)");
        return answer_now(c, &resp);
    }
    if (cs->len > 0) {
        /* What parsing its JSON will take, taken before it is parsed. */
        size_t need = gd_json_cost(cs->body, cs->len);

        if (need > gd_mem_total() || reserve(cs, need) < 0) {
            if (need > gd_mem_total())
                too_complex(&resp, need);
            else
                busy(&resp);
            release(cs);
            return answer_now(c, &resp);
        }
    }
    memset(&req, 0, sizeof(req));
    if (l->kind == L_HOOK) {
        webhook(method, url, cs, &resp);
        release(cs);
        return answer_now(c, &resp);
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
    release(cs);
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
    (void)toe;
    if (cs) {
        release(cs);
        free(cs);
        *con_cls = NULL;
    }
    /* The next request on the connection, whole and answered, within request-timeout-s. */
    gd_door_start(conn_of(c), gd_mono_ns());
}

/* A connection the server starts or ends: counted in its door, or out. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct listener *l = cls;
    const union MHD_ConnectionInfo *ci;
    struct gd_door_key k;
    int privileged, refused;

    if (code != MHD_CONNECTION_NOTIFY_STARTED) {
        gd_door_leave(&l->door, *socket_context);
        *socket_context = NULL;
        return;
    }
    ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci == NULL)
        return;
    if (gd_door_key_of(ci->connect_fd, l->kind != L_UNIX, &k, &privileged) < 0)
        memset(&k, 0, sizeof(k)); /* counted as one unknown peer */
    k.tcp = l->kind != L_UNIX;
    *socket_context =
        gd_door_enter(&l->door, ci->connect_fd, &k, privileged, gd_mono_ns(), &refused);
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
    int fd;

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
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, gd_opt.socket, strlen(gd_opt.socket)); /* checked above: it fits */
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        snprintf(err, errlen, "cannot bind %s: %s", gd_opt.socket, strerror(errno));
        close(fd);
        return -1;
    }
    unix_bound = 1;
    /*
     * 0660: the daemon's user, and its group (gpuslice where that group exists). A daemon of
     * a plain user (make start) is not in the default group and cannot give its socket to it;
     * that group is not its users', so that says nothing: only a group given is warned of.
     */
    if ((g = getgrnam(gd_opt.socket_group)) != NULL &&
        chown(gd_opt.socket, (uid_t)-1, g->gr_gid) < 0 &&
        !(errno == EPERM && geteuid() != 0 &&
          strcmp(gd_opt.socket_group, GD_SOCKET_GROUP_DEFAULT) == 0))
        gd_log("warning: cannot give %s to group %s: %s", gd_opt.socket, gd_opt.socket_group,
               strerror(errno));
    if (chmod(gd_opt.socket, 0660) < 0 || listen(fd, SOMAXCONN) < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", gd_opt.socket, strerror(errno));
        close(fd);
        return -1;
    }
    lsn[L_UNIX].fd = fd;
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

/* A PEM file's contents (malloc'd), or NULL with err; a key must be its owner's only. */
/*
 * Whether a key's file is private: only its owner may read it; or, for a daemon that is not
 * root, its owner and the daemon's own group (a Kubernetes Secret mounted with the pod's
 * fsGroup is 0440 in that group, whatever its defaultMode).
 */
static int key_private(const struct stat *st)
{
    if ((st->st_mode & 0077) == 0)
        return 1;
    return geteuid() != 0 && (st->st_mode & 0037) == 0 && st->st_gid == getegid();
}

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
        (secret && !key_private(&st))) {
        close(fd);
        snprintf(err, errlen, "--%s %s must be a regular file of PEM, at most 1 MiB%s", opt, path,
                 secret ? ", that only its owner can read (chmod 600; or 0440 in the daemon's "
                          "own group when it is not root, as Kubernetes mounts a Secret with an "
                          "fsGroup)"
                        : "");
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

/* A TCP socket listening on ss: its fd, or -1 with a message. */
static int open_tcp(const char *opt, const char *spec, const struct sockaddr_storage *ss, char *err,
                    size_t errlen)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, (const struct sockaddr *)ss,
             ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in)) <
            0 ||
        listen(fd, SOMAXCONN) < 0) {
        snprintf(err, errlen,
                 "--%s %s: cannot listen there: %s (in use, or not an address of "
                 "this host)",
                 opt, spec, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* What a refused peer sent, read and dropped; then its socket closed. */
static void linger_close(int fd)
{
    char sink[4096];
    int i;

    /* Closing on unread bytes would reset the connection, and the answer with it. */
    for (i = 0; i < 16 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
        ;
    close(fd);
}

/* Closes the refused sockets whose time is up (all of them with now = UINT64_MAX). */
static void linger_done(struct listener *l, uint64_t now)
{
    while (l->nlinger > 0 && l->linger[0].until_ns <= now) {
        linger_close(l->linger[0].fd);
        memmove(&l->linger[0], &l->linger[1], (size_t)--l->nlinger * sizeof(l->linger[0]));
    }
}

static void linger_add(struct listener *l, int fd, uint64_t now)
{
    if (l->nlinger == LINGER_MAX) {
        linger_close(l->linger[0].fd); /* the oldest goes first */
        memmove(&l->linger[0], &l->linger[1], (size_t)--l->nlinger * sizeof(l->linger[0]));
    }
    l->linger[l->nlinger].fd = fd;
    l->linger[l->nlinger].until_ns = now + LINGER_NS;
    l->nlinger++;
}

/* Who a refused peer is, for its answer and the log. */
static void peer_name(const struct gd_door_key *k, char *out, size_t len)
{
    char a[INET6_ADDRSTRLEN] = "?";

    if (!k->tcp) {
        snprintf(out, len, "uid %u", (unsigned)k->uid);
        return;
    }
    if (k->addr[10] == 0xff && k->addr[11] == 0xff &&
        memcmp(k->addr, "\0\0\0\0\0\0\0\0\0\0", 10) == 0)
        inet_ntop(AF_INET, k->addr + 12, a, sizeof(a));
    else
        inet_ntop(AF_INET6, k->addr, a, sizeof(a));
    snprintf(out, len, "address %s", a);
}

/*
 * Turns connection fd away: a 503 that says why (a plain listener; the webhook's peer speaks
 * TLS first, and gets nothing), and the socket kept a little while (lingering) so that the
 * peer can send its request and read the answer before the close.
 */
static void refuse(struct listener *l, int fd, int why, const struct gd_door_key *k, int held)
{
    char who[80], msg[256], quoted[600], body[700], buf[1024];
    uint64_t now = gd_mono_ns();
    int n;

    peer_name(k, who, sizeof(who));
    if (why == -EUSERS)
        snprintf(msg, sizeof(msg),
                 "%s has %d connections open here, its most (max-peer-connections); close one "
                 "or try again",
                 who, held);
    else
        snprintf(msg, sizeof(msg),
                 "the daemon holds %d connections here, its most (max-connections); try again",
                 held);
    if (l->kind != L_HOOK) {
        gd_json_quote(quoted, sizeof(quoted), msg);
        snprintf(body, sizeof(body),
                 "{\"error\":{\"code\":\"too_many_connections\",\"message\":%s}}", quoted);
        n = snprintf(buf, sizeof(buf),
                     "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                     "Cache-Control: no-store\r\nRetry-After: 1\r\nConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
        if (n > 0 && (size_t)n < sizeof(buf) &&
            send(fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
            shutdown(fd, SHUT_WR);
    }
    linger_add(l, fd, now);
    l->refused++;
    if (gd_opt.verbose || now - l->logged_ns > 60000000000ULL) {
        gd_log("refused %llu connection%s on %s in the last minute; the latest: %s",
               (unsigned long long)l->refused, l->refused == 1 ? "" : "s",
               l->kind == L_UNIX  ? gd_opt.socket
               : l->kind == L_TCP ? gd_opt.listen
                                  : gd_opt.webhook_listen,
               msg);
        l->refused = 0;
        l->logged_ns = now;
    }
}

/*
 * A listener's door: accepts, lets in the connections its door has room for (the server counts
 * each in as it starts it, and this thread waits for that before the next, so that the count it
 * checks is the server's), turns the rest away, and shuts down connections past their
 * deadline (every 250 ms at most).
 */
static void *door_main(void *arg)
{
    struct listener *l = arg;
    struct pollfd p[2];

    p[0].fd = l->fd;
    p[0].events = POLLIN;
    p[1].fd = stop_pipe[0];
    p[1].events = POLLIN;
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        struct gd_door_key k;
        int fd, privileged, held, r;
        uint64_t seen;

        r = poll(p, 2, l->nlinger ? 50 : 250);
        gd_door_expire(&l->door, gd_mono_ns());
        linger_done(l, gd_mono_ns());
        if (r < 0 && errno != EINTR)
            break;
        if (r > 0 && p[1].revents)
            break;
        if (r <= 0 || !(p[0].revents & POLLIN))
            continue;
        if ((fd = accept4(l->fd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC | SOCK_NONBLOCK)) < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                poll(p + 1, 1, 50); /* out of descriptors: not a busy loop meanwhile */
            continue;
        }
        if (gd_door_key_of(fd, l->kind != L_UNIX, &k, &privileged) < 0) {
            close(fd);
            continue;
        }
        if ((r = gd_door_check(&l->door, &k, privileged, gd_mono_ns(), &held)) < 0) {
            refuse(l, fd, r, &k, held);
            continue;
        }
        seen = gd_door_entered(&l->door);
        if (MHD_add_connection(l->d, fd, (struct sockaddr *)&ss, len) != MHD_YES)
            continue; /* closed by the server */
        gd_door_wait(&l->door, seen, 1000);
    }
    return NULL;
}

static int start_servers(struct listener *l, char *err, size_t errlen)
{
    /*
     * poll, not select: with select a connection thread waiting to write to an event stream
     * nobody reads never saw its socket shut down, and stopping waited for timeout-s.
     */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_ERROR_LOG | MHD_USE_ITC | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_POLL;
    long reserve = l->kind == L_UNIX ? gd_opt.reserved_connections : 0;

    if (l->kind == L_HOOK)
        flags |= MHD_USE_TLS;
    gd_door_init(&l->door, gd_opt.max_connections, reserve, gd_opt.max_peer_connections,
                 (uint64_t)gd_opt.request_timeout_s * 1000000000ULL, EVICT_AFTER_NS);
    /*
     * The door decides who comes in; the server's own limit, above it, is never what turns a
     * connection away. The TLS options come last: without TLS, MHD_OPTION_END ends the list.
     */
    l->d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, l, MHD_OPTION_NOTIFY_COMPLETED, on_completed, l,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, l, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(2 * (gd_opt.max_connections + reserve) + 16), MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)gd_opt.timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)gd_opt.max_header,
        MHD_OPTION_THREAD_STACK_SIZE, (size_t)(256 * 1024), MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
        NULL, l->kind == L_HOOK ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, hook_cert,
        MHD_OPTION_HTTPS_MEM_KEY, hook_key, MHD_OPTION_END);
    if (l->d == NULL) {
        snprintf(err, errlen, "cannot start the HTTP server%s",
                 l->kind == L_HOOK ? " over TLS (a certificate and key that do not load or match)"
                                   : "");
        return -1;
    }
    if ((stop_pipe[0] < 0 && pipe2(stop_pipe, O_CLOEXEC) < 0) ||
        pthread_create(&l->th, NULL, door_main, l) != 0) {
        snprintf(err, errlen, "cannot start the HTTP server's thread: %s", strerror(errno));
        return -1;
    }
    l->th_started = 1;
    return 0;
}

/*
 * Serves l on its listening socket l->fd: the server, then its door. 0 or -1 with a message.
 * Their threads, and every connection's, answer at nice (the calling thread's priority for
 * the while, which they inherit): the daemon's other threads run lower (main.c).
 */
static int start_listener(struct listener *l, char *err, size_t errlen)
{
    int r;

    if (gd_opt.nice != 0)
        setpriority(PRIO_PROCESS, 0, (int)gd_opt.nice); /* refused: main.c said so */
    r = start_servers(l, err, errlen);
    if (gd_opt.nice != 0)
        setpriority(PRIO_PROCESS, 0, (int)gd_nice_background());
    return r;
}

int gd_http_start_webhook(char *err, size_t errlen)
{
    struct listener *l = &lsn[L_HOOK];
    struct sockaddr_storage ss;

    gd_mem_init((size_t)gd_opt.request_memory);
    if (parse_listen("webhook-listen", gd_opt.webhook_listen, &ss, err, errlen) < 0 ||
        (hook_cert = read_pem("webhook-cert", gd_opt.webhook_cert, 0, err, errlen)) == NULL ||
        (hook_key = read_pem("webhook-key", gd_opt.webhook_key, 1, err, errlen)) == NULL ||
        (l->fd = open_tcp("webhook-listen", gd_opt.webhook_listen, &ss, err, errlen)) < 0)
        return -1;
    l->max_body = (size_t)gd_opt.webhook_max_body;
    l->max_body_opt = "webhook-max-body";
    if (start_listener(l, err, errlen) < 0) {
        size_t n = strlen(err);

        snprintf(err + n, errlen - n, " for the webhook on %s", gd_opt.webhook_listen);
        return -1;
    }
    gd_log("admission webhook on https://%s/mutate", gd_opt.webhook_listen);
    return 0;
}

int gd_http_start(char *err, size_t errlen)
{
    gd_mem_init((size_t)gd_opt.request_memory);
    if (open_unix(err, errlen) < 0)
        return -1;
    lsn[L_UNIX].max_body = (size_t)gd_opt.max_body;
    lsn[L_UNIX].max_body_opt = "max-body";
    if (start_listener(&lsn[L_UNIX], err, errlen) < 0) {
        size_t n = strlen(err);

        snprintf(err + n, errlen - n, " on %s", gd_opt.socket);
        return -1;
    }
    if (gd_opt.listen[0]) {
        struct listener *l = &lsn[L_TCP];
        struct sockaddr_storage ss;

        if (read_token(err, errlen) < 0 ||
            parse_listen("listen", gd_opt.listen, &ss, err, errlen) < 0 ||
            (l->fd = open_tcp("listen", gd_opt.listen, &ss, err, errlen)) < 0)
            return -1;
        l->max_body = (size_t)gd_opt.max_body;
        l->max_body_opt = "max-body";
        if (start_listener(l, err, errlen) < 0) {
            size_t n = strlen(err);

            snprintf(err + n, errlen - n, " on %s", gd_opt.listen);
            return -1;
        }
        gd_log("listening on %s (bearer token from %s)", gd_opt.listen, gd_opt.token_file);
    }
    if (gd_opt.webhook_listen[0] && gd_http_start_webhook(err, errlen) < 0)
        return -1;
    return 0;
}

void gd_http_stop(void)
{
    size_t i;

    /* The doors first, so that nothing comes in while the servers stop. */
    if (stop_pipe[1] >= 0 && write(stop_pipe[1], "x", 1) != 1) {
        /* a full pipe is a stop already asked for */
    }
    for (i = 0; i < sizeof(lsn) / sizeof(lsn[0]); i++) {
        struct listener *l = &lsn[i];

        if (l->th_started)
            pthread_join(l->th, NULL);
        l->th_started = 0;
        linger_done(l, UINT64_MAX);
        if (l->fd >= 0)
            close(l->fd);
        l->fd = -1;
        if (l->d)
            MHD_stop_daemon(l->d);
        l->d = NULL;
    }
    free(hook_cert);
    free(hook_key);
    hook_cert = hook_key = NULL;
    if (unix_bound)
        unlink(gd_opt.socket);
    unix_bound = 0;
    for (i = 0; i < 2; i++) {
        if (stop_pipe[i] >= 0)
            close(stop_pipe[i]);
        stop_pipe[i] = -1;
    }
}

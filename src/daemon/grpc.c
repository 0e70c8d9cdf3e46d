/*
 * A unary gRPC server on a Unix socket: the HTTP/2 session of a connection (nghttp2's server
 * session, fed from memory, so that the fuzzer drives it as the socket does), and the threads
 * that serve the socket: one accepting, one per connection.
 */
#define _GNU_SOURCE /* accept4, pipe2 */
#include "daemon/grpc.h"

#include <errno.h>
#include <fcntl.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define PREFIX 5     /* a message's prefix: compressed flag, big-endian length */
#define MSG_ROOM 512 /* a handler's message for a person */
#define CONN_BUDGET (2 * (GD_GRPC_MAX_MSG + PREFIX)) /* request bytes held by one connection */

/* ---- one call ---- */

struct call {
    int32_t id;
    int answered; /* its response is submitted (or the stream reset) */
    int ended;    /* the client's END_STREAM came */
    int bad_type; /* content-type is not application/grpc[+...] */
    int not_post;
    int path_long;
    char path[256]; /* :path; "" when absent or too long */
    uint8_t *req;   /* the request's bytes, prefix included */
    size_t len, cap;
    uint8_t *resp; /* the response's bytes, prefix included, as DATA sends them */
    size_t resp_len, resp_off;
    /* Its handler: what it answered; on a thread of its own in the server. */
    const struct gd_grpc_method *m;
    int status;
    uint8_t *hresp;
    size_t hlen;
    char msg[MSG_ROOM];
    int running; /* the handler was started on a thread and its answer is not submitted */
    int done;    /* that handler returned (under s->mu) */
    int orphan;  /* its stream closed meanwhile: the answer goes nowhere */
    pthread_t th;
    struct gd_grpc_sess *s;
    struct call *prev, *next; /* every call of the session */
};

struct gd_grpc_sess {
    nghttp2_session *h2;
    const struct gd_grpc_method *methods;
    int nmethods;
    int async;   /* handlers on threads of their own (the server), else inline */
    int wake[2]; /* with async: a byte for each handler that returned */
    pthread_mutex_t mu;
    struct call *calls;
    int busy;          /* streams open */
    int running;       /* handlers on threads, orphans included */
    int unended;       /* streams open the peer has not ended */
    uint64_t progress; /* requests ended, streams closed, handlers returned */
    size_t held;       /* request bytes held, all calls */
    uint8_t *out;      /* to be sent: out[off..len) */
    size_t out_len, out_off, out_cap;
};

static void call_unlink(struct gd_grpc_sess *s, struct call *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        s->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

static void call_free(struct call *c)
{
    if (!c)
        return;
    free(c->req);
    free(c->resp);
    free(c->hresp);
    free(c);
}

/* gRPC's percent-encoding of grpc-message: what is not printable ASCII, and '%'. */
static size_t pct_encode(const char *in, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p && o + 4 <= cap; p++) {
        if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    if (cap)
        out[o < cap ? o : cap - 1] = '\0';
    return o;
}

/*
 * A header for nghttp2: the name a literal (not copied), the value copied (nghttp2 keeps an
 * uncopied one until the frame is sent, long after the stack buffers values are made in).
 */
#define NV(n, v, vl)                                                                               \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vl), NGHTTP2_NV_FLAG_NO_COPY_NAME          \
    }

static void fail_call(struct gd_grpc_sess *s, struct call *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * Answers c with status and no message: a "trailers-only" response, one HEADERS frame that
 * ends the stream.
 */
static void fail_call(struct gd_grpc_sess *s, struct call *c, int status, const char *fmt, ...)
{
    char text[MSG_ROOM], enc[3 * MSG_ROOM], code[12];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    size_t el = pct_encode(text, enc, sizeof enc);
    int cl = snprintf(code, sizeof code, "%d", status);
    nghttp2_nv nv[] = { NV(":status", "200", 3), NV("content-type", "application/grpc", 16),
                        NV("grpc-status", code, (size_t)cl), NV("grpc-message", enc, el) };
    c->answered = 1;
    /*
     * A client still sending is not reset: gRPC clients report a reset over the trailers just
     * sent. What it sends after is dropped (on_data) until it ends the stream, which it does on
     * reading the trailers; one that does not is cut by the connection's deadline.
     */
    if (nghttp2_submit_response(s->h2, c->id, nv, sizeof nv / sizeof nv[0], NULL) != 0)
        nghttp2_submit_rst_stream(s->h2, NGHTTP2_FLAG_NONE, c->id, NGHTTP2_INTERNAL_ERROR);
}

/* DATA of an OK answer: the message, then the trailers. */
static ssize_t read_resp(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *user)
{
    struct call *c = src->ptr;
    (void)user;
    size_t n = c->resp_len - c->resp_off;
    if (n > length)
        n = length;
    memcpy(buf, c->resp + c->resp_off, n);
    c->resp_off += n;
    if (c->resp_off == c->resp_len) {
        nghttp2_nv nv[] = { NV("grpc-status", "0", 1) };
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (nghttp2_submit_trailer(h2, id, nv, 1) == 0)
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
    return (ssize_t)n;
}

static const struct gd_grpc_method *find_method(const struct gd_grpc_sess *s, const char *path)
{
    for (int i = 0; i < s->nmethods; i++)
        if (strcmp(s->methods[i].path, path) == 0)
            return &s->methods[i];
    return NULL;
}

/* Runs c's handler (on any thread: it touches c only). */
static void run_handler(struct call *c)
{
    c->msg[0] = '\0';
    c->status = c->m->handler(c->m->ctx, c->req + PREFIX, c->len - PREFIX, &c->hresp, &c->hlen,
                              c->msg, sizeof c->msg);
    c->msg[sizeof c->msg - 1] = '\0';
    if (!c->hresp)
        c->hlen = 0;
}

/* Submits the answer c's handler gave (on the session's thread). */
static void finish_call(struct gd_grpc_sess *s, struct call *c)
{
    /* The request is done with: its memory goes back before the answer waits on the peer. */
    s->held -= c->cap;
    free(c->req);
    c->req = NULL;
    c->len = c->cap = 0;
    int st = c->status;
    if (st != GD_GRPC_OK) {
        if (st < 0 || st > 16)
            st = GD_GRPC_UNKNOWN;
        return fail_call(s, c, st, "%s", c->msg[0] ? c->msg : "failed");
    }
    size_t rl = c->hlen;
    if (rl > GD_GRPC_MAX_MSG)
        return fail_call(s, c, GD_GRPC_RESOURCE_EXHAUSTED,
                         "%s: the response would be %zu bytes, more than %u", c->path, rl,
                         GD_GRPC_MAX_MSG);
    c->resp = malloc(rl + PREFIX);
    if (!c->resp)
        return fail_call(s, c, GD_GRPC_RESOURCE_EXHAUSTED, "%s: no memory for the response",
                         c->path);
    c->resp[0] = 0;
    c->resp[1] = (uint8_t)(rl >> 24);
    c->resp[2] = (uint8_t)(rl >> 16);
    c->resp[3] = (uint8_t)(rl >> 8);
    c->resp[4] = (uint8_t)rl;
    if (rl)
        memcpy(c->resp + PREFIX, c->hresp, rl);
    free(c->hresp);
    c->hresp = NULL;
    c->resp_len = rl + PREFIX;
    c->resp_off = 0;
    nghttp2_nv nv[] = { NV(":status", "200", 3), NV("content-type", "application/grpc", 16) };
    nghttp2_data_provider dp = { .source.ptr = c, .read_callback = read_resp };
    c->answered = 1;
    if (nghttp2_submit_response(s->h2, c->id, nv, 2, &dp) != 0)
        nghttp2_submit_rst_stream(s->h2, NGHTTP2_FLAG_NONE, c->id, NGHTTP2_INTERNAL_ERROR);
}

static void *handler_main(void *arg)
{
    struct call *c = arg;
    struct gd_grpc_sess *s = c->s;
    run_handler(c);
    pthread_mutex_lock(&s->mu);
    c->done = 1;
    pthread_mutex_unlock(&s->mu);
    char b = 1;
    while (write(s->wake[1], &b, 1) < 0 && errno == EINTR)
        ;
    return NULL;
}

/* The request of c is whole: checks it and runs its handler (inline, or on a thread). */
static void serve_call(struct gd_grpc_sess *s, struct call *c)
{
    if (c->answered)
        return;
    if (c->not_post)
        return fail_call(s, c, GD_GRPC_UNIMPLEMENTED, "only POST is served");
    if (c->bad_type)
        return fail_call(s, c, GD_GRPC_UNIMPLEMENTED,
                         "content-type must be application/grpc (this is a gRPC server)");
    if (c->path_long || !c->path[0])
        return fail_call(s, c, GD_GRPC_UNIMPLEMENTED, "no method named (:path %s)",
                         c->path_long ? "too long" : "missing");
    const struct gd_grpc_method *m = find_method(s, c->path);
    if (!m)
        return fail_call(s, c, GD_GRPC_UNIMPLEMENTED, "unknown method %s", c->path);
    if (c->len < PREFIX)
        return fail_call(s, c, GD_GRPC_INTERNAL,
                         "%s: the request has %s (a unary call sends one message)", c->path,
                         c->len ? "a partial message prefix" : "no message");
    uint32_t mlen = (uint32_t)c->req[1] << 24 | (uint32_t)c->req[2] << 16 |
                    (uint32_t)c->req[3] << 8 | c->req[4];
    if (c->req[0] != 0)
        return fail_call(s, c, GD_GRPC_UNIMPLEMENTED,
                         "%s: the request is compressed (flag %u); this server takes only "
                         "uncompressed messages (grpc-encoding identity)",
                         c->path, c->req[0]);
    if (mlen > GD_GRPC_MAX_MSG)
        return fail_call(s, c, GD_GRPC_RESOURCE_EXHAUSTED,
                         "%s: the request's message is %u bytes, more than %u", c->path, mlen,
                         GD_GRPC_MAX_MSG);
    if ((size_t)mlen + PREFIX != c->len)
        return fail_call(s, c, GD_GRPC_INTERNAL,
                         "%s: the request's message says %u bytes and %zu came (a unary call "
                         "sends one message)",
                         c->path, mlen, c->len - PREFIX);
    c->m = m;
    if (s->async) {
        /* Streams reset while their handlers run leave those running: they count too. */
        if (s->running >= GD_GRPC_MAX_STREAMS)
            return fail_call(s, c, GD_GRPC_RESOURCE_EXHAUSTED,
                             "%s: %d calls of this connection are in their handlers already",
                             c->path, s->running);
        c->s = s;
        c->running = 1;
        if (pthread_create(&c->th, NULL, handler_main, c) == 0) {
            s->running++;
            return;
        }
        c->running = 0;
    }
    run_handler(c);
    finish_call(s, c);
}

/* ---- nghttp2's callbacks ---- */

static int on_begin_headers(nghttp2_session *h2, const nghttp2_frame *f, void *user)
{
    struct gd_grpc_sess *s = user;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct call *c = calloc(1, sizeof *c);
    if (!c)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the stream is reset */
    c->id = f->hd.stream_id;
    c->bad_type = 1; /* until a content-type says otherwise */
    c->not_post = 1;
    if (nghttp2_session_set_stream_user_data(h2, c->id, c) != 0) {
        free(c);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    c->next = s->calls;
    if (s->calls)
        s->calls->prev = c;
    s->calls = c;
    s->busy++;
    s->unended++;
    return 0;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
    (void)flags;
    (void)user;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0; /* trailers of a request carry nothing we use */
    struct call *c = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
    if (!c)
        return 0;
#define IS(lit) (nlen == sizeof(lit) - 1 && memcmp(name, lit, nlen) == 0)
    if (IS(":path")) {
        if (vlen >= sizeof c->path) {
            c->path_long = 1;
        } else {
            memcpy(c->path, value, vlen);
            c->path[vlen] = '\0';
            if (strlen(c->path) != vlen)
                c->path_long = 1; /* a NUL inside (nghttp2 refuses these; kept safe anyway) */
        }
    } else if (IS(":method")) {
        c->not_post = !(vlen == 4 && memcmp(value, "POST", 4) == 0);
    } else if (IS("content-type")) {
        /* application/grpc, or application/grpc+proto and the like */
        c->bad_type = !(vlen >= 16 && memcmp(value, "application/grpc", 16) == 0 &&
                        (vlen == 16 || value[16] == '+' || value[16] == ';'));
    }
#undef IS
    return 0;
}

static int on_data(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *user)
{
    struct gd_grpc_sess *s = user;
    (void)flags;
    struct call *c = nghttp2_session_get_stream_user_data(h2, id);
    if (!c || c->answered || c->running)
        return 0;
    const char *path = c->path[0] ? c->path : "(no path)";
    /* More than one message can hold: refused at once, the rest dropped. */
    if (c->len + len > GD_GRPC_MAX_MSG + PREFIX) {
        fail_call(s, c, GD_GRPC_RESOURCE_EXHAUSTED, "%s: the request is more than %u bytes", path,
                  GD_GRPC_MAX_MSG);
        return 0;
    }
    if (c->len + len > c->cap) {
        size_t cap = c->cap ? c->cap : 256;
        while (cap < c->len + len)
            cap *= 2;
        if (cap > GD_GRPC_MAX_MSG + PREFIX)
            cap = GD_GRPC_MAX_MSG + PREFIX;
        if (s->held - c->cap + cap > CONN_BUDGET) {
            fail_call(s, c, GD_GRPC_RESOURCE_EXHAUSTED,
                      "%s: the calls of this connection hold more than %u bytes at once", path,
                      CONN_BUDGET);
            return 0;
        }
        uint8_t *p = realloc(c->req, cap);
        if (!p) {
            fail_call(s, c, GD_GRPC_RESOURCE_EXHAUSTED, "%s: no memory for the request", path);
            return 0;
        }
        s->held = s->held - c->cap + cap;
        c->req = p;
        c->cap = cap;
    }
    memcpy(c->req + c->len, data, len);
    c->len += len;
    return 0;
}

static int on_frame(nghttp2_session *h2, const nghttp2_frame *f, void *user)
{
    struct gd_grpc_sess *s = user;
    if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        struct call *c = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
        if (c && !c->ended) {
            c->ended = 1;
            s->unended--;
            s->progress++;
            serve_call(s, c);
        }
    }
    return 0;
}

static int on_close(nghttp2_session *h2, int32_t id, uint32_t code, void *user)
{
    struct gd_grpc_sess *s = user;
    (void)code;
    struct call *c = nghttp2_session_get_stream_user_data(h2, id);
    if (!c)
        return 0;
    nghttp2_session_set_stream_user_data(h2, id, NULL);
    s->busy--;
    s->progress++;
    if (!c->ended)
        s->unended--;
    if (c->running) {
        c->orphan = 1; /* freed when its handler returns (gd_grpc_sess_pump) */
        return 0;
    }
    s->held -= c->cap;
    call_unlink(s, c);
    call_free(c);
    return 0;
}

/* ---- the session ---- */

struct gd_grpc_sess *gd_grpc_sess_new(const struct gd_grpc_method *methods, int n, int async)
{
    struct gd_grpc_sess *s = calloc(1, sizeof *s);
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    if (!s)
        return NULL;
    s->wake[0] = s->wake[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    if (async && pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) < 0)
        goto fail;
    s->async = async;
    if (nghttp2_session_callbacks_new(&cb) != 0 || nghttp2_option_new(&opt) != 0)
        goto fail;
    s->methods = methods;
    s->nmethods = n;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    /* Floods of SETTINGS, PINGs and resets are bounded by nghttp2 (its defaults, and these). */
    nghttp2_option_set_max_outbound_ack(opt, 1000);
    nghttp2_option_set_max_settings(opt, 32);
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
    if (nghttp2_session_server_new2(&s->h2, cb, s, opt) != 0)
        goto fail;
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    cb = NULL;
    opt = NULL;
    nghttp2_settings_entry iv[] = {
        { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, GD_GRPC_MAX_STREAMS },
        { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1u << 20 },
        { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 16384 },
    };
    if (nghttp2_submit_settings(s->h2, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]) != 0)
        goto fail;
    return s;
fail:
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    gd_grpc_sess_free(s);
    return NULL;
}

/* Takes the calls whose handlers returned: answers them, or frees the orphans. */
static void pump(struct gd_grpc_sess *s)
{
    char b[64];
    if (!s->async)
        return;
    while (read(s->wake[0], b, sizeof b) > 0)
        ;
    for (;;) {
        struct call *c, *found = NULL;
        pthread_mutex_lock(&s->mu);
        for (c = s->calls; c && !found; c = c->next)
            if (c->running && c->done)
                found = c;
        pthread_mutex_unlock(&s->mu);
        if (!found)
            return;
        pthread_join(found->th, NULL);
        found->running = 0;
        s->running--;
        s->progress++;
        if (found->orphan) {
            s->held -= found->cap;
            call_unlink(s, found);
            call_free(found);
        } else {
            finish_call(s, found);
        }
    }
}

void gd_grpc_sess_free(struct gd_grpc_sess *s)
{
    if (!s)
        return;
    /* Handlers still running are waited for: they use their calls. */
    for (struct call *c = s->calls; c; c = c->next)
        if (c->running)
            pthread_join(c->th, NULL);
    nghttp2_session_del(s->h2); /* no callbacks: the calls are freed below */
    while (s->calls) {
        struct call *c = s->calls;
        call_unlink(s, c);
        call_free(c);
    }
    if (s->wake[0] >= 0) {
        close(s->wake[0]);
        close(s->wake[1]);
    }
    pthread_mutex_destroy(&s->mu);
    free(s->out);
    free(s);
}

/* Collects what nghttp2 has to send into s->out; -1 without memory or on a fatal error. */
static int pull_output(struct gd_grpc_sess *s)
{
    for (;;) {
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(s->h2, &p);
        if (n < 0)
            return -1;
        if (n == 0)
            return 0;
        if (s->out_off == s->out_len)
            s->out_off = s->out_len = 0;
        if (s->out_len + (size_t)n > s->out_cap) {
            size_t cap = s->out_cap ? s->out_cap : 16384;
            while (cap < s->out_len + (size_t)n)
                cap *= 2;
            uint8_t *o = realloc(s->out, cap);
            if (!o)
                return -1;
            s->out = o;
            s->out_cap = cap;
        }
        memcpy(s->out + s->out_len, p, (size_t)n);
        s->out_len += (size_t)n;
    }
}

static int session_alive(struct gd_grpc_sess *s)
{
    return nghttp2_session_want_read(s->h2) || nghttp2_session_want_write(s->h2) ? 0 : -1;
}

int gd_grpc_sess_feed(struct gd_grpc_sess *s, const uint8_t *in, size_t len)
{
    ssize_t r = len ? nghttp2_session_mem_recv(s->h2, in, len) : 0;
    if (pull_output(s) < 0)
        return -1;
    if (r < 0)
        return -1; /* nghttp2 has queued the GOAWAY where the error called for one */
    return session_alive(s);
}

int gd_grpc_sess_wake_fd(const struct gd_grpc_sess *s)
{
    return s->wake[0];
}

int gd_grpc_sess_pump(struct gd_grpc_sess *s)
{
    pump(s);
    if (pull_output(s) < 0)
        return -1;
    return session_alive(s);
}

const uint8_t *gd_grpc_sess_output(struct gd_grpc_sess *s, size_t *len)
{
    if (s->out_off == s->out_len)
        pull_output(s); /* answers that waited on the peer's window */
    *len = s->out_len - s->out_off;
    return s->out + s->out_off;
}

void gd_grpc_sess_sent(struct gd_grpc_sess *s, size_t n)
{
    s->out_off += n < s->out_len - s->out_off ? n : s->out_len - s->out_off;
}

int gd_grpc_sess_busy(const struct gd_grpc_sess *s)
{
    return s->busy;
}

int gd_grpc_sess_stalled(const struct gd_grpc_sess *s)
{
    /* Open streams whose handler does not run: waiting on the peer's bytes or window. */
    int n = s->busy;
    for (const struct call *c = s->calls; c; c = c->next)
        if (c->running && !c->orphan)
            n--;
    return n;
}

uint64_t gd_grpc_sess_progress(const struct gd_grpc_sess *s)
{
    return s->progress;
}

void gd_grpc_sess_goaway(struct gd_grpc_sess *s)
{
    nghttp2_submit_goaway(s->h2, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(s->h2),
                          NGHTTP2_NO_ERROR, NULL, 0);
    pull_output(s);
}

/* ---- the socket and its threads ---- */

struct conn {
    int fd;
    int used, done; /* a thread is (or was) serving it; it has finished */
    int busy;       /* calls open: not to be cut for a newcomer */
    int cut;        /* told to leave (full, or the server stops) */
    uint64_t last;  /* when its last byte came or went (ms) */
    pthread_t th;
    struct gd_grpc *srv;
};

struct gd_grpc {
    int fd, stop[2];
    int stopping; /* read and written with __atomic */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    const struct gd_grpc_method *methods;
    int nmethods;
    pthread_t th;
    pthread_mutex_t mu;
    struct conn conn[GD_GRPC_MAX_CONNS];
};

static int stopping(struct gd_grpc *srv)
{
    return __atomic_load_n(&srv->stopping, __ATOMIC_SEQ_CST);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Sends what s has to send, waiting at most until deadline (ms); -1: the peer is gone or slow. */
static int flush(struct gd_grpc *srv, int fd, struct gd_grpc_sess *s, uint64_t deadline)
{
    for (;;) {
        size_t n;
        const uint8_t *p = gd_grpc_sess_output(s, &n);
        if (n == 0)
            return 0;
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            gd_grpc_sess_sent(s, (size_t)w);
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        uint64_t t = now_ms();
        if (t >= deadline)
            return -1;
        struct pollfd pf[2] = { { fd, POLLOUT, 0 }, { srv->stop[0], POLLIN, 0 } };
        /* While stopping, the GOAWAY gets its own short deadline: the stop pipe stays readable. */
        int r = poll(pf, stopping(srv) ? 1 : 2, (int)(deadline - t));
        if (r < 0 && errno != EINTR)
            return -1;
        if (r > 0 && (pf[0].revents & (POLLERR | POLLHUP)) && !(pf[0].revents & POLLOUT))
            return -1;
        if (!stopping(srv) && r > 0 && pf[1].revents)
            return -1;
    }
}

static void *conn_main(void *arg)
{
    struct conn *cn = arg;
    struct gd_grpc *srv = cn->srv;
    struct gd_grpc_sess *s = gd_grpc_sess_new(srv->methods, srv->nmethods, 1);
    uint8_t buf[16384];
    uint64_t progress = 0, since = now_ms(); /* the deadline of stalled calls counts from since */
    if (!s)
        goto out;
    if (flush(srv, cn->fd, s, now_ms() + GD_GRPC_REQ_TIMEOUT_MS) < 0)
        goto out;
    for (;;) {
        int busy = gd_grpc_sess_busy(s), stalled = gd_grpc_sess_stalled(s);
        uint64_t t = now_ms();
        if (gd_grpc_sess_progress(s) != progress || !stalled) {
            progress = gd_grpc_sess_progress(s);
            since = t;
        }
        pthread_mutex_lock(&srv->mu);
        cn->busy = busy;
        int cut = cn->cut || stopping(srv);
        pthread_mutex_unlock(&srv->mu);
        if (cut)
            break;
        int timeout = -1;
        if (stalled) {
            if (t >= since + GD_GRPC_REQ_TIMEOUT_MS)
                break; /* calls waiting on the peer this long with no step: slow or stuck */
            timeout = (int)(since + GD_GRPC_REQ_TIMEOUT_MS - t);
        }
        struct pollfd pf[3] = { { cn->fd, POLLIN, 0 },
                                { srv->stop[0], POLLIN, 0 },
                                { gd_grpc_sess_wake_fd(s), POLLIN, 0 } };
        int r = poll(pf, 3, timeout);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || pf[1].revents)
            break;
        if (r == 0)
            continue;
        int fr = 0;
        if (pf[2].revents) {
            fr = gd_grpc_sess_pump(s);
        } else {
            ssize_t n = recv(cn->fd, buf, sizeof buf, MSG_DONTWAIT);
            if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
                continue;
            if (n <= 0)
                break; /* the peer closed, or was cut (shutdown) */
            pthread_mutex_lock(&srv->mu);
            cn->busy = 1; /* a call may start now: not to be cut for a newcomer */
            pthread_mutex_unlock(&srv->mu);
            fr = gd_grpc_sess_feed(s, buf, (size_t)n);
        }
        if (flush(srv, cn->fd, s, now_ms() + GD_GRPC_REQ_TIMEOUT_MS) < 0 || fr < 0)
            goto out;
        pthread_mutex_lock(&srv->mu);
        cn->last = now_ms();
        pthread_mutex_unlock(&srv->mu);
    }
    /* Leaving on our side: the handlers running are waited for and answered, then the client
     * is told, briefly (it may not be reading). */
    while (gd_grpc_sess_busy(s) > gd_grpc_sess_stalled(s)) {
        struct pollfd pw = { gd_grpc_sess_wake_fd(s), POLLIN, 0 };
        if (poll(&pw, 1, 1000) < 0 && errno != EINTR)
            break;
        if (gd_grpc_sess_pump(s) < 0 || flush(srv, cn->fd, s, now_ms() + 2000) < 0)
            goto out;
    }
    gd_grpc_sess_goaway(s);
    flush(srv, cn->fd, s, now_ms() + 500);
out:
    gd_grpc_sess_free(s);
    pthread_mutex_lock(&srv->mu);
    shutdown(cn->fd, SHUT_RDWR);
    close(cn->fd);
    cn->fd = -1;
    cn->done = 1;
    pthread_mutex_unlock(&srv->mu);
    return NULL;
}

/* Joins the threads of connections that ended; under srv->mu. */
static void reap(struct gd_grpc *srv)
{
    for (int i = 0; i < GD_GRPC_MAX_CONNS; i++) {
        struct conn *cn = &srv->conn[i];
        if (cn->used && cn->done) {
            pthread_join(cn->th, NULL);
            memset(cn, 0, sizeof *cn);
            cn->fd = -1;
        }
    }
}

/* A free slot for a newcomer, making one by cutting the idle connection quiet longest. */
static struct conn *slot_for_newcomer(struct gd_grpc *srv)
{
    struct conn *idle = NULL;
    reap(srv);
    for (int i = 0; i < GD_GRPC_MAX_CONNS; i++) {
        struct conn *cn = &srv->conn[i];
        if (!cn->used)
            return cn;
        if (!cn->busy && !cn->cut && !cn->done && (!idle || cn->last < idle->last))
            idle = cn;
    }
    if (idle) {
        idle->cut = 1;
        shutdown(idle->fd, SHUT_RD); /* wakes its thread; the GOAWAY can still go out */
    }
    return NULL;
}

static void *accept_main(void *arg)
{
    struct gd_grpc *srv = arg;
    while (!stopping(srv)) {
        struct pollfd pf[2] = { { srv->fd, POLLIN, 0 }, { srv->stop[0], POLLIN, 0 } };
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            break;
        if (stopping(srv) || pf[1].revents)
            break;
        if (!(pf[0].revents & POLLIN))
            continue;
        int fd = accept4(srv->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                usleep(50000); /* the waiting peer stays in the backlog: no busy loop meanwhile */
            continue;
        }
        pthread_mutex_lock(&srv->mu);
        struct conn *cn = slot_for_newcomer(srv);
        if (!cn) {
            /* Full: the cut connection leaves once its GOAWAY is out (500 ms at most). */
            for (int i = 0; i < 80 && !cn && !stopping(srv); i++) {
                pthread_mutex_unlock(&srv->mu);
                usleep(10000);
                pthread_mutex_lock(&srv->mu);
                reap(srv);
                for (int j = 0; j < GD_GRPC_MAX_CONNS && !cn; j++)
                    if (!srv->conn[j].used)
                        cn = &srv->conn[j];
            }
        }
        if (!cn || stopping(srv)) {
            pthread_mutex_unlock(&srv->mu);
            close(fd); /* every connection is in a call: this one is refused */
            continue;
        }
        cn->fd = fd;
        cn->srv = srv;
        cn->used = 1;
        cn->last = now_ms();
        if (pthread_create(&cn->th, NULL, conn_main, cn) != 0) {
            close(fd);
            memset(cn, 0, sizeof *cn);
            cn->fd = -1;
        }
        pthread_mutex_unlock(&srv->mu);
    }
    return NULL;
}

struct gd_grpc *gd_grpc_start(const char *sock_path, mode_t mode,
                              const struct gd_grpc_method *methods, int n, char *err, size_t errlen)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(sock_path) >= sizeof sa.sun_path) {
        snprintf(err, errlen, "%s: the path is too long for a unix socket (at most %zu bytes)",
                 sock_path, sizeof sa.sun_path - 1);
        return NULL;
    }
    struct gd_grpc *srv = calloc(1, sizeof *srv);
    if (!srv) {
        snprintf(err, errlen, "%s: no memory", sock_path);
        return NULL;
    }
    srv->fd = -1;
    srv->stop[0] = srv->stop[1] = -1;
    srv->methods = methods;
    srv->nmethods = n;
    for (int i = 0; i < GD_GRPC_MAX_CONNS; i++)
        srv->conn[i].fd = -1;
    snprintf(srv->path, sizeof srv->path, "%s", sock_path);
    memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
    pthread_mutex_init(&srv->mu, NULL);
    const char *what = "socket";
    if (pipe2(srv->stop, O_CLOEXEC) < 0)
        goto fail;
    srv->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (srv->fd < 0)
        goto fail;
    what = "unlink";
    if (unlink(sock_path) < 0 && errno != ENOENT)
        goto fail;
    what = "bind";
    /*
     * The socket's inode gets mode before bind (Linux makes the file with it, less the umask;
     * the process's umask is not touched, other threads make files), then the file gets it
     * exactly: no moment with more.
     */
    if (fchmod(srv->fd, mode) < 0 || bind(srv->fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        goto fail;
    what = "chmod";
    if (chmod(sock_path, mode) < 0)
        goto fail;
    what = "listen";
    if (listen(srv->fd, 64) < 0)
        goto fail;
    what = "thread";
    errno = pthread_create(&srv->th, NULL, accept_main, srv);
    if (errno != 0)
        goto fail;
    return srv;
fail:
    snprintf(err, errlen, "%s: %s: %s", sock_path, what, strerror(errno));
    if (srv->fd >= 0) {
        close(srv->fd);
        if (strcmp(what, "socket") && strcmp(what, "unlink") && strcmp(what, "bind"))
            unlink(sock_path);
    }
    if (srv->stop[0] >= 0) {
        close(srv->stop[0]);
        close(srv->stop[1]);
    }
    pthread_mutex_destroy(&srv->mu);
    free(srv);
    return NULL;
}

void gd_grpc_stop(struct gd_grpc *srv)
{
    if (!srv)
        return;
    __atomic_store_n(&srv->stopping, 1, __ATOMIC_SEQ_CST);
    char c = 1;
    while (write(srv->stop[1], &c, 1) < 0 && errno == EINTR)
        ;
    pthread_join(srv->th, NULL);
    for (int i = 0; i < GD_GRPC_MAX_CONNS; i++) {
        struct conn *cn = &srv->conn[i];
        if (cn->used)
            pthread_join(cn->th, NULL);
    }
    close(srv->fd);
    unlink(srv->path);
    close(srv->stop[0]);
    close(srv->stop[1]);
    pthread_mutex_destroy(&srv->mu);
    free(srv);
}

int gd_grpc_nconns(struct gd_grpc *srv)
{
    int n = 0;
    pthread_mutex_lock(&srv->mu);
    for (int i = 0; i < GD_GRPC_MAX_CONNS; i++)
        n += srv->conn[i].used && !srv->conn[i].done;
    pthread_mutex_unlock(&srv->mu);
    return n;
}

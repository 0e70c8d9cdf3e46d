/*
 * The gRPC server's session (src/daemon/grpc.c) from memory: an nghttp2 client session writes
 * the requests and reads the answers, the bytes carried between the two by the test. What a
 * gRPC client sees: :status, content-type, the message with its prefix, grpc-status and
 * grpc-message in the trailers (or a trailers-only answer).
 */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <nghttp2/nghttp2.h>

#include "daemon/grpc.h"

#define MAXS 16

struct answer {
    int32_t id;
    char status[8], ctype[64], gstatus[8], gmsg[1024];
    uint8_t *data;
    size_t len, cap;
    int closed;
    uint32_t rst;
};

struct client {
    nghttp2_session *h2;
    struct answer a[MAXS];
    int n;
    const uint8_t *body; /* what the next request's DATA sends */
    size_t body_len, body_off;
};

static struct answer *answer_of(struct client *c, int32_t id)
{
    for (int i = 0; i < c->n; i++)
        if (c->a[i].id == id)
            return &c->a[i];
    return NULL;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
    struct answer *a = answer_of(user, f->hd.stream_id);
    char *dst = NULL;
    size_t cap = 0;
    (void)h2;
    (void)flags;
    if (!a)
        return 0;
#define H(lit, field)                                                                              \
    if (nlen == sizeof(lit) - 1 && memcmp(name, lit, nlen) == 0) {                                 \
        dst = a->field;                                                                            \
        cap = sizeof a->field;                                                                     \
    }
    H(":status", status)
    H("content-type", ctype)
    H("grpc-status", gstatus)
    H("grpc-message", gmsg)
#undef H
    if (dst) {
        size_t k = vlen < cap - 1 ? vlen : cap - 1;
        memcpy(dst, value, k);
        dst[k] = '\0';
    }
    return 0;
}

static int on_data(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *user)
{
    struct answer *a = answer_of(user, id);
    (void)h2;
    (void)flags;
    if (!a)
        return 0;
    if (a->len + len > a->cap) {
        /* (doubled: an answer of 4 MiB comes in 16 KiB frames) */
        a->cap = a->cap ? a->cap : 16384;
        while (a->cap < a->len + len)
            a->cap *= 2;
        a->data = realloc(a->data, a->cap);
    }
    memcpy(a->data + a->len, data, len);
    a->len += len;
    return 0;
}

static int on_close(nghttp2_session *h2, int32_t id, uint32_t code, void *user)
{
    struct answer *a = answer_of(user, id);
    (void)h2;
    if (a) {
        a->closed = 1;
        a->rst = code;
    }
    return 0;
}

static ssize_t read_body(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *user)
{
    struct client *c = src->ptr;
    (void)h2;
    (void)id;
    (void)user;
    size_t n = c->body_len - c->body_off;
    if (n > length)
        n = length;
    memcpy(buf, c->body + c->body_off, n);
    c->body_off += n;
    if (c->body_off == c->body_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static void client_init(struct client *c)
{
    nghttp2_session_callbacks *cb;
    memset(c, 0, sizeof *c);
    assert_int_equal(nghttp2_session_callbacks_new(&cb), 0);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    assert_int_equal(nghttp2_session_client_new(&c->h2, cb, c), 0);
    nghttp2_session_callbacks_del(cb);
    assert_int_equal(nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, NULL, 0), 0);
}

static void client_done(struct client *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->a[i].data);
    nghttp2_session_del(c->h2);
}

/* A body sent in parts: what it has goes, then it waits (open) until it is ended. */
struct part {
    const uint8_t *p;
    size_t len, off;
    int open;
    int32_t id;
};

static ssize_t read_part(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *user)
{
    struct part *b = src->ptr;
    (void)h2;
    (void)id;
    (void)user;
    size_t n = b->len - b->off;
    if (n == 0 && b->open)
        return NGHTTP2_ERR_DEFERRED;
    if (n > length)
        n = length;
    memcpy(buf, b->p + b->off, n);
    b->off += n;
    if (b->off == b->len && !b->open)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/*
 * A call's request with its method and content-type (NULL: none sent); body is the whole DATA
 * (prefix included), sent with END_STREAM, or part's when part is given.
 */
static struct answer *call_as(struct client *c, const char *method, const char *path,
                              const char *ctype, const void *body, size_t len, struct part *part)
{
    nghttp2_nv nv[] = {
        { (uint8_t *)":method", (uint8_t *)method, 7, strlen(method), 0 },
        { (uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0 },
        { (uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0 },
        { (uint8_t *)":authority", (uint8_t *)"localhost", 10, 9, 0 },
        { (uint8_t *)"te", (uint8_t *)"trailers", 2, 8, 0 },
        { (uint8_t *)"content-type", (uint8_t *)ctype, 12, ctype ? strlen(ctype) : 0, 0 },
    };
    c->body = body;
    c->body_len = len;
    c->body_off = 0;
    nghttp2_data_provider dp = { .source.ptr = c, .read_callback = read_body };
    if (part) {
        dp.source.ptr = part;
        dp.read_callback = read_part;
    }
    int32_t id = nghttp2_submit_request(c->h2, NULL, nv, ctype ? 6 : 5, &dp, NULL);
    assert_true(id > 0);
    if (part)
        part->id = id;
    struct answer *a = &c->a[c->n++];
    a->id = id;
    return a;
}

static struct answer *call(struct client *c, const char *path, const char *ctype, const void *body,
                           size_t len)
{
    return call_as(c, "POST", path, ctype, body, len, NULL);
}

/* Carries bytes both ways until neither side has more; the server's feed results. */
static int pump_both(struct client *c, struct gd_grpc_sess *s)
{
    int rc = 0;
    for (int round = 0; round < 10000; round++) {
        const uint8_t *p;
        int moved = 0;
        ssize_t n;
        while ((n = nghttp2_session_mem_send(c->h2, &p)) > 0) {
            /* copy: the server may run handlers that take time; p is valid until the next send */
            uint8_t *copy = malloc((size_t)n);
            memcpy(copy, p, (size_t)n);
            if (gd_grpc_sess_feed(s, copy, (size_t)n) < 0)
                rc = -1;
            free(copy);
            moved = 1;
        }
        if (gd_grpc_sess_wake_fd(s) >= 0) {
            struct pollfd pf = { gd_grpc_sess_wake_fd(s), POLLIN, 0 };
            if (poll(&pf, 1, gd_grpc_sess_busy(s) > gd_grpc_sess_stalled(s) ? 2000 : 0) > 0 &&
                gd_grpc_sess_pump(s) < 0)
                rc = -1;
        }
        size_t len;
        const uint8_t *out = gd_grpc_sess_output(s, &len);
        if (len) {
            assert_int_equal(nghttp2_session_mem_recv(c->h2, out, len), (ssize_t)len);
            gd_grpc_sess_sent(s, len);
            moved = 1;
        }
        if (!moved && gd_grpc_sess_busy(s) <= gd_grpc_sess_stalled(s))
            return rc;
    }
    fail_msg("the sessions never went quiet");
    return rc;
}

static uint8_t *framed(const void *msg, size_t len, uint8_t flag)
{
    uint8_t *b = malloc(len + 5);
    b[0] = flag;
    b[1] = (uint8_t)(len >> 24);
    b[2] = (uint8_t)(len >> 16);
    b[3] = (uint8_t)(len >> 8);
    b[4] = (uint8_t)len;
    if (len)
        memcpy(b + 5, msg, len);
    return b;
}

/* ---- the methods ---- */

static int echo(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *rl, char *msg,
                size_t ml)
{
    (void)ctx;
    (void)msg;
    (void)ml;
    *resp = malloc(len + 1);
    memcpy(*resp, req, len);
    *rl = len;
    return GD_GRPC_OK;
}

static int refuse(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *rl, char *msg,
                  size_t ml)
{
    (void)req;
    (void)len;
    (void)resp;
    (void)rl;
    snprintf(msg, ml, "50%% done\n\xc3\xa9");
    return ctx ? *(int *)ctx : GD_GRPC_FAILED_PRECONDITION;
}

static int big(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *rl, char *msg,
               size_t ml)
{
    (void)ctx;
    (void)req;
    (void)msg;
    (void)ml;
    *rl = len ? GD_GRPC_MAX_MSG + 1 : GD_GRPC_MAX_MSG;
    *resp = calloc(1, *rl);
    return GD_GRPC_OK;
}

/* A refusal with no message for a person, or with characters at the ends of printable ASCII. */
static int mute(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *rl, char *msg,
                size_t ml)
{
    (void)ctx;
    (void)req;
    (void)len;
    (void)resp;
    (void)rl;
    (void)msg;
    (void)ml;
    return GD_GRPC_NOT_FOUND;
}

static int edges(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *rl, char *msg,
                 size_t ml)
{
    (void)ctx;
    (void)req;
    (void)len;
    (void)resp;
    (void)rl;
    snprintf(msg, ml, "a ~\x7f\x1f%%z");
    return GD_GRPC_ABORTED;
}

/* OK with an empty message, whatever came: the request's bytes only. */
static int drop(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *rl, char *msg,
                size_t ml)
{
    (void)ctx;
    (void)req;
    (void)len;
    (void)msg;
    (void)ml;
    *resp = NULL;
    *rl = 0;
    return GD_GRPC_OK;
}

static int odd = 99, last = 16, past = 17, below = -1;
static const struct gd_grpc_method methods[] = {
    { "/t.S/Echo", echo, NULL },      { "/t.S/Refuse", refuse, NULL },
    { "/t.S/Odd", refuse, &odd },     { "/t.S/Big", big, NULL },
    { "/t.S/Last", refuse, &last },   { "/t.S/Past", refuse, &past },
    { "/t.S/Below", refuse, &below }, { "/t.S/Mute", mute, NULL },
    { "/t.S/Edges", edges, NULL },    { "/t.S/Drop", drop, NULL },
};

static struct gd_grpc_sess *new_sess(int async)
{
    struct gd_grpc_sess *s =
        gd_grpc_sess_new(methods, (int)(sizeof methods / sizeof methods[0]), async);
    assert_non_null(s);
    return s;
}

static void check_ok(struct answer *a, const void *msg, size_t len)
{
    assert_true(a->closed);
    assert_int_equal(a->rst, 0);
    assert_string_equal(a->status, "200");
    assert_string_equal(a->ctype, "application/grpc");
    assert_string_equal(a->gstatus, "0");
    assert_int_equal(a->len, len + 5);
    assert_int_equal(a->data[0], 0);
    assert_int_equal((size_t)a->data[1] << 24 | (size_t)a->data[2] << 16 | (size_t)a->data[3] << 8 |
                         a->data[4],
                     len);
    assert_memory_equal(a->data + 5, msg, len);
}

static void check_status(struct answer *a, const char *code, const char *in_msg)
{
    assert_true(a->closed);
    assert_string_equal(a->status, "200");
    assert_string_equal(a->gstatus, code);
    if (in_msg && !strstr(a->gmsg, in_msg))
        fail_msg("grpc-message \"%s\" does not hold \"%s\"", a->gmsg, in_msg);
}

static void run_as(int async, const char *method, const char *path, const char *ctype,
                   const void *body, size_t len, const char *code, const char *in_msg)
{
    struct client c;
    struct gd_grpc_sess *s = new_sess(async);
    client_init(&c);
    struct answer *a = call_as(&c, method, path, ctype, body, len, NULL);
    assert_int_equal(pump_both(&c, s), 0);
    check_status(a, code, in_msg);
    client_done(&c);
    gd_grpc_sess_free(s);
}

static void run_one(int async, const char *path, const char *ctype, const void *body, size_t len,
                    const char *code, const char *in_msg)
{
    run_as(async, "POST", path, ctype, body, len, code, in_msg);
}

static void test_echo_answers_message_and_trailers(void **state)
{
    (void)state;
    for (int async = 0; async <= 1; async++) {
        struct client c;
        struct gd_grpc_sess *s = new_sess(async);
        client_init(&c);
        uint8_t *b = framed("hello", 5, 0), *e = framed(NULL, 0, 0);
        struct answer *a = call(&c, "/t.S/Echo", "application/grpc", b, 10);
        assert_int_equal(pump_both(&c, s), 0);
        check_ok(a, "hello", 5);
        a = call(&c, "/t.S/Echo", "application/grpc+proto", e, 5);
        assert_int_equal(pump_both(&c, s), 0);
        check_ok(a, "", 0);
        assert_int_equal(gd_grpc_sess_busy(s), 0);
        free(b);
        free(e);
        client_done(&c);
        gd_grpc_sess_free(s);
    }
}

static void test_unknown_method_is_unimplemented_naming_it(void **state)
{
    uint8_t *b = framed("x", 1, 0);
    (void)state;
    run_one(0, "/t.S/Nope", "application/grpc", b, 6, "12", "unknown method /t.S/Nope");
    run_one(1, "/t.S/Nope", "application/grpc", b, 6, "12", "/t.S/Nope");
    run_one(0, "/t.S/Echo", "text/plain", b, 6, "12", "content-type");
    free(b);
}

static void test_message_limits(void **state)
{
    size_t max = GD_GRPC_MAX_MSG;
    uint8_t *b = framed(NULL, 0, 0);
    (void)state;
    b = realloc(b, max + 6);
    memset(b + 5, 'm', max + 1);
    /* exactly the limit: answered */
    b[1] = (uint8_t)(max >> 24), b[2] = (uint8_t)(max >> 16), b[3] = (uint8_t)(max >> 8),
    b[4] = (uint8_t)max;
    {
        struct client c;
        struct gd_grpc_sess *s = new_sess(0);
        client_init(&c);
        struct answer *a = call(&c, "/t.S/Echo", "application/grpc", b, max + 5);
        assert_int_equal(pump_both(&c, s), 0);
        check_ok(a, b + 5, max);
        client_done(&c);
        gd_grpc_sess_free(s);
    }
    /* one byte more: RESOURCE_EXHAUSTED, whether the prefix says so or only the bytes do */
    run_one(0, "/t.S/Echo", "application/grpc", b, max + 6, "8", "more than");
    b[1] = (uint8_t)((max + 1) >> 24), b[2] = (uint8_t)((max + 1) >> 16),
    b[3] = (uint8_t)((max + 1) >> 8), b[4] = (uint8_t)(max + 1);
    run_one(0, "/t.S/Echo", "application/grpc", b, max + 6, "8", "more than");
    run_one(0, "/t.S/Echo", "application/grpc", b, 5 + 10, "8", "more than");
    free(b);
}

static void test_bad_framing_is_refused(void **state)
{
    uint8_t *z = framed("abc", 3, 1);
    (void)state;
    run_one(0, "/t.S/Echo", "application/grpc", z, 8, "12", "compressed");
    z[0] = 0;
    run_one(0, "/t.S/Echo", "application/grpc", z, 7, "13", "says 3 bytes and 2 came");
    run_one(0, "/t.S/Echo", "application/grpc", z, 3, "13", "partial");
    run_one(0, "/t.S/Echo", "application/grpc", z, 0, "13", "no message");
    free(z);
    /* two messages in one unary call */
    uint8_t two[12];
    uint8_t *one = framed("a", 1, 0);
    memcpy(two, one, 6);
    memcpy(two + 6, one, 6);
    run_one(0, "/t.S/Echo", "application/grpc", two, 12, "13", "one message");
    free(one);
}

static void test_handler_status_and_message_encoded(void **state)
{
    uint8_t *b = framed(NULL, 0, 0);
    (void)state;
    run_one(0, "/t.S/Refuse", "application/grpc", b, 5, "9", "50%25 done%0A%C3%A9");
    run_one(1, "/t.S/Odd", "application/grpc", b, 5, "2", "50%25");
    run_one(0, "/t.S/Big", "application/grpc", b, 5, "0", NULL);
    b = realloc(b, 6);
    b[4] = 1;
    b[5] = 'x';
    run_one(0, "/t.S/Big", "application/grpc", b, 6, "8", "response would be");
    free(b);
}

static void test_several_streams_on_one_connection(void **state)
{
    (void)state;
    for (int async = 0; async <= 1; async++) {
        struct client c;
        struct gd_grpc_sess *s = new_sess(async);
        uint8_t *m[4];
        struct answer *a[4];
        client_init(&c);
        for (int i = 0; i < 4; i++) {
            char t[8];
            snprintf(t, sizeof t, "m%d", i);
            m[i] = framed(t, 2, 0);
        }
        /* submitted together: each body is read when its DATA goes, so one at a time here */
        for (int i = 0; i < 4; i++) {
            a[i] = call(&c, "/t.S/Echo", "application/grpc", m[i], 7);
            assert_int_equal(pump_both(&c, s), 0);
        }
        for (int i = 0; i < 4; i++) {
            char t[8];
            snprintf(t, sizeof t, "m%d", i);
            check_ok(a[i], t, 2);
            free(m[i]);
        }
        client_done(&c);
        gd_grpc_sess_free(s);
    }
}

static void test_garbage_closes_the_session(void **state)
{
    struct gd_grpc_sess *s = new_sess(0);
    (void)state;
    static const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(gd_grpc_sess_feed(s, (const uint8_t *)junk, sizeof junk - 1), -1);
    gd_grpc_sess_free(s);
}

/* A request of another method is no call, whatever else it has right. */
static void test_only_post_is_served(void **state)
{
    static const char *const other[] = { "GET", "PUT", "post", "POSTS", "PATCH" };
    uint8_t *b = framed("x", 1, 0);
    (void)state;
    for (int async = 0; async <= 1; async++) {
        for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
            run_as(async, other[i], "/t.S/Echo", "application/grpc", b, 6, "12",
                   "only POST is served");
        run_as(async, "POST", "/t.S/Echo", "application/grpc", b, 6, "0", NULL);
    }
    free(b);
}

/*
 * content-type is application/grpc, or it with a suffix after '+' or ';' (gRPC's
 * application/grpc+proto); another framing that merely starts so (grpc-web) is refused.
 */
static void test_content_type_is_grpc_or_its_subtypes(void **state)
{
    static const char *const good[] = { "application/grpc", "application/grpc+proto",
                                        "application/grpc+json", "application/grpc;charset=utf-8" };
    static const char *const bad[] = { "application/grpc-web",
                                       "application/grpc-web+proto",
                                       "application/grpcx",
                                       "application/grp",
                                       "application/json",
                                       "text/plain",
                                       "" };
    uint8_t *b = framed("hi", 2, 0);
    (void)state;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        struct client c;
        struct gd_grpc_sess *s = new_sess(0);
        client_init(&c);
        struct answer *a = call(&c, "/t.S/Echo", good[i], b, 7);
        assert_int_equal(pump_both(&c, s), 0);
        check_ok(a, "hi", 2);
        client_done(&c);
        gd_grpc_sess_free(s);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        run_one(0, "/t.S/Echo", bad[i], b, 7, "12",
                "content-type must be application/grpc (this is a gRPC server)");
    /* none at all */
    run_as(0, "POST", "/t.S/Echo", NULL, b, 7, "12", "content-type must be application/grpc");
    free(b);
}

/* :path holds 255 bytes (named when unknown); 256 and more are refused as too long. */
static void test_path_length_bound(void **state)
{
    char path[300], want[320];
    uint8_t *b = framed("x", 1, 0);
    (void)state;
    memset(path, 'p', sizeof path);
    path[0] = '/';
    path[255] = '\0';
    snprintf(want, sizeof want, "unknown method %s", path);
    run_one(0, path, "application/grpc", b, 6, "12", want);
    path[255] = 'p';
    path[256] = '\0';
    run_one(0, path, "application/grpc", b, 6, "12", "no method named (:path too long)");
    run_one(1, path, "application/grpc", b, 6, "12", "no method named (:path too long)");
    free(b);
}

/*
 * A handler's status goes out as it is from 1 to 16; another is UNKNOWN (2). A refusal without
 * a message says "failed". grpc-message is percent-encoded outside ' '..'~', and '%' itself.
 */
static void test_handler_statuses_and_message_bounds(void **state)
{
    uint8_t *b = framed(NULL, 0, 0);
    (void)state;
    for (int async = 0; async <= 1; async++) {
        run_one(async, "/t.S/Last", "application/grpc", b, 5, "16", "50%25 done%0A%C3%A9");
        run_one(async, "/t.S/Past", "application/grpc", b, 5, "2", "50%25 done");
        run_one(async, "/t.S/Below", "application/grpc", b, 5, "2", "50%25 done");
        run_one(async, "/t.S/Refuse", "application/grpc", b, 5, "9", NULL);
        run_one(async, "/t.S/Mute", "application/grpc", b, 5, "5", NULL);
        run_one(async, "/t.S/Edges", "application/grpc", b, 5, "10", NULL);
    }
    {
        struct client c;
        struct gd_grpc_sess *s = new_sess(0);
        client_init(&c);
        struct answer *m = call(&c, "/t.S/Mute", "application/grpc", b, 5);
        assert_int_equal(pump_both(&c, s), 0);
        struct answer *e = call(&c, "/t.S/Edges", "application/grpc", b, 5);
        assert_int_equal(pump_both(&c, s), 0);
        check_status(m, "5", NULL);
        assert_string_equal(m->gmsg, "failed");
        check_status(e, "10", NULL);
        assert_string_equal(e->gmsg, "a ~%7F%1F%25z");
        client_done(&c);
        gd_grpc_sess_free(s);
    }
    free(b);
}

/* A message of max bytes framed: the whole request, prefix included. */
static uint8_t *max_request(void)
{
    size_t max = GD_GRPC_MAX_MSG;
    uint8_t *b = malloc(max + 5);
    b[0] = 0;
    b[1] = (uint8_t)(max >> 24), b[2] = (uint8_t)(max >> 16), b[3] = (uint8_t)(max >> 8),
    b[4] = (uint8_t)max;
    memset(b + 5, 'q', max);
    return b;
}

/*
 * A kubelet keeps its connection for good: what each answered or refused call held goes back
 * to the connection's budget, so the calls go on being served, however many came before.
 */
static void test_a_long_connection_keeps_its_budget(void **state)
{
    size_t max = GD_GRPC_MAX_MSG;
    uint8_t *b = max_request(), *big = malloc(max + 6);
    (void)state;
    memcpy(big, b, 5);
    memset(big + 5, 'q', max + 1);
    big[1] = (uint8_t)((max + 1) >> 24), big[2] = (uint8_t)((max + 1) >> 16),
    big[3] = (uint8_t)((max + 1) >> 8), big[4] = (uint8_t)(max + 1);
    for (int async = 0; async <= 1; async++) {
        struct client c;
        struct gd_grpc_sess *s = new_sess(async);
        client_init(&c);
        for (int i = 0; i < 3; i++) {
            struct answer *a = call(&c, "/t.S/Drop", "application/grpc", b, max + 5);
            assert_int_equal(pump_both(&c, s), 0);
            check_ok(a, "", 0);
        }
        /* refused while it came in: released all the same, when its stream closes */
        for (int i = 0; i < 2; i++) {
            struct answer *a = call(&c, "/t.S/Drop", "application/grpc", big, max + 6);
            assert_int_equal(pump_both(&c, s), 0);
            check_status(a, "8", "the request is more than 4194304 bytes");
        }
        struct answer *a = call(&c, "/t.S/Drop", "application/grpc", b, max + 5);
        assert_int_equal(pump_both(&c, s), 0);
        check_ok(a, "", 0);
        assert_int_equal(gd_grpc_sess_busy(s), 0);
        client_done(&c);
        gd_grpc_sess_free(s);
    }
    free(b);
    free(big);
}

/*
 * The calls open at once on a connection may hold two whole requests of the largest message
 * between them, not a byte more: a third is refused naming the bound, the two are served.
 */
static void test_calls_at_once_share_the_budget(void **state)
{
    size_t max = GD_GRPC_MAX_MSG;
    uint8_t *b = max_request(), *small = framed("s", 1, 0);
    struct part p1 = { b, max + 5, 0, 1, 0 }, p2 = { b, max + 5, 0, 1, 0 },
                p3 = { small, 6, 0, 1, 0 };
    struct client c;
    struct gd_grpc_sess *s = new_sess(0);
    (void)state;
    client_init(&c);
    struct answer *a1 = call_as(&c, "POST", "/t.S/Drop", "application/grpc", NULL, 0, &p1);
    assert_int_equal(pump_both(&c, s), 0);
    struct answer *a2 = call_as(&c, "POST", "/t.S/Drop", "application/grpc", NULL, 0, &p2);
    assert_int_equal(pump_both(&c, s), 0);
    assert_int_equal(p1.off, max + 5);
    assert_int_equal(p2.off, max + 5);
    struct answer *a3 = call_as(&c, "POST", "/t.S/Echo", "application/grpc", NULL, 0, &p3);
    assert_int_equal(pump_both(&c, s), 0);
    assert_string_equal(a3->gstatus, "8");
    if (!strstr(a3->gmsg, "the calls of this connection hold more than 8388618 bytes at once"))
        fail_msg("grpc-message \"%s\"", a3->gmsg);
    assert_false(a1->closed);
    assert_false(a2->closed);
    p3.open = 0;
    p1.open = 0;
    p2.open = 0;
    assert_int_equal(nghttp2_session_resume_data(c.h2, p3.id), 0);
    assert_int_equal(nghttp2_session_resume_data(c.h2, p1.id), 0);
    assert_int_equal(nghttp2_session_resume_data(c.h2, p2.id), 0);
    assert_int_equal(pump_both(&c, s), 0);
    check_status(a3, "8", NULL);
    check_ok(a1, "", 0);
    check_ok(a2, "", 0);
    assert_int_equal(gd_grpc_sess_busy(s), 0);
    client_done(&c);
    gd_grpc_sess_free(s);
    free(b);
    free(small);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_echo_answers_message_and_trailers),
        cmocka_unit_test(test_unknown_method_is_unimplemented_naming_it),
        cmocka_unit_test(test_message_limits),
        cmocka_unit_test(test_bad_framing_is_refused),
        cmocka_unit_test(test_handler_status_and_message_encoded),
        cmocka_unit_test(test_several_streams_on_one_connection),
        cmocka_unit_test(test_garbage_closes_the_session),
        cmocka_unit_test(test_only_post_is_served),
        cmocka_unit_test(test_content_type_is_grpc_or_its_subtypes),
        cmocka_unit_test(test_path_length_bound),
        cmocka_unit_test(test_handler_statuses_and_message_bounds),
        cmocka_unit_test(test_a_long_connection_keeps_its_budget),
        cmocka_unit_test(test_calls_at_once_share_the_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

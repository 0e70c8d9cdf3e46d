/*
 * A unary gRPC server on a Unix socket (grpc.c): HTTP/2 with prior knowledge (h2c, as gRPC
 * clients speak on unix: addresses) by nghttp2, one length-prefixed, uncompressed message each
 * way, a table of methods by path. It needs nothing else of the daemon, so that tests drive it
 * with a real gRPC client and the fuzzer drives a connection's session from memory.
 */
#ifndef GPUSLICE_DAEMON_GRPC_H
#define GPUSLICE_DAEMON_GRPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* gRPC's status codes (grpc/doc/statuscodes.md), as a handler returns them. */
enum gd_grpc_code {
    GD_GRPC_OK = 0,
    GD_GRPC_CANCELLED = 1,
    GD_GRPC_UNKNOWN = 2,
    GD_GRPC_INVALID_ARGUMENT = 3,
    GD_GRPC_DEADLINE_EXCEEDED = 4,
    GD_GRPC_NOT_FOUND = 5,
    GD_GRPC_ALREADY_EXISTS = 6,
    GD_GRPC_PERMISSION_DENIED = 7,
    GD_GRPC_RESOURCE_EXHAUSTED = 8,
    GD_GRPC_FAILED_PRECONDITION = 9,
    GD_GRPC_ABORTED = 10,
    GD_GRPC_OUT_OF_RANGE = 11,
    GD_GRPC_UNIMPLEMENTED = 12,
    GD_GRPC_INTERNAL = 13,
    GD_GRPC_UNAVAILABLE = 14,
    GD_GRPC_DATA_LOSS = 15,
    GD_GRPC_UNAUTHENTICATED = 16,
};

#define GD_GRPC_MAX_MSG (4u << 20) /* a message's bytes, either way (gRPC's default) */
#define GD_GRPC_MAX_CONNS 16       /* connections at once; the oldest idle one gives way */
#define GD_GRPC_MAX_STREAMS 4      /* calls at once on one connection */
#define GD_GRPC_REQ_TIMEOUT_MS                                                                     \
    10000 /* calls waiting on the peer (its request, or its reading
                                        of our answer) with no step taken in this long: the
                                        connection goes (a handler's own time is not counted) */

/*
 * A method. handler gets req (len bytes, the message without its 5-byte prefix) and answers a
 * gRPC status code; on GD_GRPC_OK it sets *resp to a malloc'd message (the server frees it;
 * NULL with *resplen 0 is an empty message), else it may write a message for a person into
 * msg (msglen bytes, NUL-terminated; it starts empty). Handlers of different connections run
 * at once, each on a thread of its own (several of one connection too): they must be
 * thread-safe.
 */
typedef int (*gd_grpc_handler)(void *ctx, const uint8_t *req, size_t len, uint8_t **resp,
                               size_t *resplen, char *msg, size_t msglen);

struct gd_grpc_method {
    const char *path; /* "/package.Service/Method" */
    gd_grpc_handler handler;
    void *ctx;
};

struct gd_grpc;

/*
 * Serves sock_path (an old file there is removed first; made with mode, e.g. 0600) with the
 * n methods (the table must outlive the server). The server, or NULL with err naming the path
 * and what failed.
 */
struct gd_grpc *gd_grpc_start(const char *sock_path, mode_t mode,
                              const struct gd_grpc_method *methods, int n, char *err,
                              size_t errlen);

/*
 * Stops srv (NULL: nothing): no new connection, each connection told GOAWAY and closed once its
 * handler in flight (if any) returns, every thread joined, the socket removed. It takes as long
 * as the longest handler in flight, plus at most GD_GRPC_REQ_TIMEOUT_MS for a peer not reading.
 */
void gd_grpc_stop(struct gd_grpc *srv);

/* Connections being served now (for tests and metrics). */
int gd_grpc_nconns(struct gd_grpc *srv);

/*
 * One connection's HTTP/2 session, without a socket: what the server runs on each connection,
 * and what the fuzzer drives from memory. With async 0 handlers run inside gd_grpc_sess_feed;
 * with 1, each on a thread of its own (at most GD_GRPC_MAX_STREAMS at once), and when one
 * returns a byte comes on gd_grpc_sess_wake_fd, upon which gd_grpc_sess_pump submits its
 * answer. gd_grpc_sess_feed gives it bytes the client sent. Both answer 0, or -1 when the
 * connection is to be closed (a protocol error: the GOAWAY is in the output).
 * gd_grpc_sess_output hands out what is to be sent (*len bytes, valid until the next call on
 * s) and gd_grpc_sess_sent says how many went. gd_grpc_sess_free waits for running handlers.
 */
struct gd_grpc_sess;
struct gd_grpc_sess *gd_grpc_sess_new(const struct gd_grpc_method *methods, int n, int async);
int gd_grpc_sess_feed(struct gd_grpc_sess *s, const uint8_t *in, size_t len);
int gd_grpc_sess_wake_fd(const struct gd_grpc_sess *s); /* -1 when not async */
int gd_grpc_sess_pump(struct gd_grpc_sess *s);
const uint8_t *gd_grpc_sess_output(struct gd_grpc_sess *s, size_t *len);
void gd_grpc_sess_sent(struct gd_grpc_sess *s, size_t n);
/* Calls open now (streams not yet closed), of them those waiting on the peer (its request or
 * its window; not in a handler), and a count that grows with each step a call takes (a request
 * ended, a handler returned, a stream closed). */
int gd_grpc_sess_busy(const struct gd_grpc_sess *s);
int gd_grpc_sess_stalled(const struct gd_grpc_sess *s);
uint64_t gd_grpc_sess_progress(const struct gd_grpc_sess *s);
/* Queues a GOAWAY (the server is leaving); its bytes come from gd_grpc_sess_output. */
void gd_grpc_sess_goaway(struct gd_grpc_sess *s);
void gd_grpc_sess_free(struct gd_grpc_sess *s);

#endif

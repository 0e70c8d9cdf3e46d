/*
 * The kubelet's side of gpusliced's gRPC, from anyone: the first byte picks what the rest is.
 *   0: what a client sends on the socket, after the HTTP/2 preface (fed to one connection's
 *      session, src/daemon/grpc.c, in pieces of the size the second byte gives, its output
 *      taken as a reading peer would), with handlers that decode the DRA messages;
 *   1: the same without the preface given (the bytes are all the client's);
 *   2: a Prepare/Unprepare request for gd_dra_decode_claims;
 *   3: a RegistrationStatus for gd_dra_decode_reg_status.
 * Invariants: decoded fields are within their arrays, non-empty, NUL-terminated; a refusal
 * says why; the session's counts stay sane and its output is bounded.
 */
#include <string.h>

#include "daemon/dra.h"
#include "daemon/grpc.h"
#include "fuzz.h"

static const char PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static void check_claims(const uint8_t *msg, size_t len)
{
    static struct gd_dra_ref refs[GD_DRA_MAX_CLAIMS];
    char err[256];
    int n = -7;
    err[0] = '\0';
    if (gd_dra_decode_claims(msg, len, refs, GD_DRA_MAX_CLAIMS, &n, err, sizeof err) < 0) {
        FUZZ_CHECK(err[0] != '\0', "a refusal without a message");
        return;
    }
    FUZZ_CHECK(n >= 0 && n <= GD_DRA_MAX_CLAIMS, "%d claims", n);
    for (int i = 0; i < n; i++) {
        FUZZ_CHECK(memchr(refs[i].ns, 0, sizeof refs[i].ns) && refs[i].ns[0], "claim %d ns", i);
        FUZZ_CHECK(memchr(refs[i].uid, 0, sizeof refs[i].uid) && refs[i].uid[0], "claim %d uid", i);
        FUZZ_CHECK(memchr(refs[i].name, 0, sizeof refs[i].name) && refs[i].name[0], "claim %d name",
                   i);
    }
}

/* Prepare: the claims decoded and each answered with a device (the encoder runs too). */
static int prepare(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *rl, char *msg,
                   size_t ml)
{
    static struct gd_dra_ref refs[GD_DRA_MAX_CLAIMS];
    static struct gd_dra_answer ans[GD_DRA_MAX_CLAIMS];
    int n;
    (void)ctx;
    if (gd_dra_decode_claims(req, len, refs, GD_DRA_MAX_CLAIMS, &n, msg, ml) < 0)
        return GD_GRPC_INVALID_ARGUMENT;
    memset(ans, 0, sizeof ans);
    for (int i = 0; i < n; i++) {
        memcpy(ans[i].uid, refs[i].uid, sizeof ans[i].uid);
        ans[i].ndev = 1;
        ans[i].dev[0].nreq = 1;
        memcpy(ans[i].dev[0].request[0], "gpu", 4);
        memcpy(ans[i].dev[0].device, "gpu-0", 6);
        ans[i].dev[0].ncdi = 1;
        memcpy(ans[i].dev[0].cdi[0], refs[i].name, strlen(refs[i].name) + 1);
    }
    return gd_dra_encode_prepare(ans, n, resp, rl) < 0 ? GD_GRPC_RESOURCE_EXHAUSTED : GD_GRPC_OK;
}

static int notify(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *rl, char *msg,
                  size_t ml)
{
    int reg;
    (void)ctx;
    (void)resp;
    (void)rl;
    return gd_dra_decode_reg_status(req, len, &reg, msg, ml) < 0 ? GD_GRPC_INVALID_ARGUMENT
                                                                 : GD_GRPC_OK;
}

static int echo(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *rl, char *msg,
                size_t ml)
{
    (void)ctx;
    (void)ml;
    if (len == 1 && req[0] == 'x') {
        memcpy(msg, "refused: 100% \xff", 16);
        return 77; /* not a gRPC code: answered as UNKNOWN */
    }
    *resp = malloc(len + 1);
    if (!*resp)
        return GD_GRPC_RESOURCE_EXHAUSTED;
    memcpy(*resp, req, len);
    *rl = len;
    return GD_GRPC_OK;
}

static const struct gd_grpc_method methods[] = {
    { "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources", prepare, NULL },
    { "/pluginregistration.Registration/NotifyRegistrationStatus", notify, NULL },
    { "/a/b", echo, NULL },
};

static void drain(struct gd_grpc_sess *s)
{
    size_t n;
    gd_grpc_sess_output(s, &n);
    /* A reading peer takes it all; what one feed queued is bounded by the answers it made. */
    FUZZ_CHECK(n <= 4 * (GD_GRPC_MAX_MSG + 4096), "%zu bytes of output", n);
    gd_grpc_sess_sent(s, n);
}

static void session(const uint8_t *data, size_t size, int preface)
{
    struct gd_grpc_sess *s = gd_grpc_sess_new(methods, 3, 0);
    if (!s)
        return;
    size_t piece = size ? (size_t)data[0] % 64 + 1 : 1;
    if (size) {
        data++;
        size--;
    }
    drain(s);
    int alive = !preface || gd_grpc_sess_feed(s, (const uint8_t *)PREFACE, 24) == 0;
    while (alive && size) {
        size_t k = size < piece ? size : piece;
        alive = gd_grpc_sess_feed(s, data, k) == 0;
        data += k;
        size -= k;
        drain(s);
        FUZZ_CHECK(gd_grpc_sess_busy(s) >= 0 && gd_grpc_sess_busy(s) <= 1000, "busy %d",
                   gd_grpc_sess_busy(s));
        FUZZ_CHECK(gd_grpc_sess_stalled(s) >= 0 && gd_grpc_sess_stalled(s) <= gd_grpc_sess_busy(s),
                   "stalled %d of %d", gd_grpc_sess_stalled(s), gd_grpc_sess_busy(s));
    }
    drain(s);
    gd_grpc_sess_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int mode = data[0] % 4;
    data++;
    size--;
    if (mode == 0 || mode == 1) {
        session(data, size, mode == 0);
    } else if (mode == 2) {
        check_claims(data, size);
    } else {
        int reg = -1;
        char err[128];
        err[0] = '\0';
        if (gd_dra_decode_reg_status(data, size, &reg, err, sizeof err) == 0)
            FUZZ_CHECK(reg == 0 || reg == 1, "registered %d", reg);
        else
            FUZZ_CHECK(err[0] != '\0', "a refusal without a message");
        FUZZ_CHECK(memchr(err, 0, sizeof err) != NULL, "error not terminated");
    }
    return 0;
}

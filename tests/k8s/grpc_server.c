/*
 * A gRPC server for the tests (tests/k8s/grpc_check.py): the daemon's grpc.c serving test
 * methods and dra_wire.c's messages on the paths of DRA v1 and v1beta1 and of the plugin
 * registration, with answers made up from the request. usage: grpc_server SOCK REGSOCK.
 * Prints "ready" once both listen; on SIGTERM stops and prints "stopped MS" (the time
 * gd_grpc_stop took); NotifyRegistrationStatus prints "registered R error E".
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/dra.h"
#include "daemon/grpc.h"

static const char *sock_path;

static int echo(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *rl, char *msg,
                size_t ml)
{
    (void)ctx;
    (void)msg;
    (void)ml;
    *resp = malloc(len ? len : 1);
    if (!*resp)
        return GD_GRPC_RESOURCE_EXHAUSTED;
    if (len)
        memcpy(*resp, req, len);
    *rl = len;
    return GD_GRPC_OK;
}

/* Sleeps the decimal number of ms the request holds (a handler that calls the API server). */
static int slow(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *rl, char *msg,
                size_t ml)
{
    char b[16] = "";
    memcpy(b, req, len < 15 ? len : 15);
    long ms = atol(b);
    (void)ctx;
    (void)msg;
    (void)ml;
    if (ms < 0 || ms > 60000)
        ms = 0;
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
    *resp = NULL;
    *rl = 0;
    return GD_GRPC_OK;
}

static int fail(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *rl, char *msg,
                size_t ml)
{
    (void)ctx;
    (void)req;
    (void)len;
    (void)resp;
    (void)rl;
    snprintf(msg, ml, "refused: 100%% wrong, caf\xc3\xa9\nnext line");
    return GD_GRPC_INVALID_ARGUMENT;
}

static int big(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *rl, char *msg,
               size_t ml)
{
    (void)ctx;
    (void)req;
    (void)len;
    (void)msg;
    (void)ml;
    *rl = GD_GRPC_MAX_MSG + 1;
    *resp = calloc(1, *rl);
    return *resp ? GD_GRPC_OK : GD_GRPC_RESOURCE_EXHAUSTED;
}

/* Prepare: one device gpu-0 per claim (CDI gpuslice.io/claim=<uid>); a claim named bad-* fails. */
static int claims(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *rl, char *msg,
                  size_t ml)
{
    /* Handlers run at once on threads of their own: nothing static. */
    struct gd_dra_ref *refs = calloc(GD_DRA_MAX_CLAIMS, sizeof *refs);
    struct gd_dra_answer *ans = calloc(GD_DRA_MAX_CLAIMS, sizeof *ans);
    int n, prepare = ctx != NULL, r = -1;
    if (!refs || !ans)
        goto out;
    if (gd_dra_decode_claims(req, len, refs, GD_DRA_MAX_CLAIMS, &n, msg, ml) < 0) {
        free(refs);
        free(ans);
        return GD_GRPC_INVALID_ARGUMENT;
    }
    for (int i = 0; i < n; i++) {
        struct gd_dra_answer *a = &ans[i];
        snprintf(a->uid, sizeof a->uid, "%s", refs[i].uid);
        if (strncmp(refs[i].name, "bad-", 4) == 0) {
            snprintf(a->error, sizeof a->error, "%s/%s: cannot prepare", refs[i].ns, refs[i].name);
            continue;
        }
        if (!prepare)
            continue;
        a->ndev = 1;
        a->dev[0].nreq = 1;
        snprintf(a->dev[0].request[0], sizeof a->dev[0].request[0], "gpu");
        snprintf(a->dev[0].pool, sizeof a->dev[0].pool, "node-1");
        snprintf(a->dev[0].device, sizeof a->dev[0].device, "gpu-0");
        a->dev[0].ncdi = 1;
        snprintf(a->dev[0].cdi[0], sizeof a->dev[0].cdi[0], "gpuslice.io/claim=%s", refs[i].uid);
    }
    r = prepare ? gd_dra_encode_prepare(ans, n, resp, rl)
                : gd_dra_encode_unprepare(ans, n, resp, rl);
out:
    free(refs);
    free(ans);
    return r < 0 ? GD_GRPC_RESOURCE_EXHAUSTED : GD_GRPC_OK;
}

static int get_info(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *rl,
                    char *msg, size_t ml)
{
    static const char *const versions[] = { GD_DRA_SERVICE_V1, GD_DRA_SERVICE_V1BETA1 };
    (void)ctx;
    (void)req;
    (void)len;
    (void)msg;
    (void)ml;
    return gd_dra_encode_plugin_info(GD_DRA_DRIVER, sock_path, versions, 2, resp, rl) < 0
               ? GD_GRPC_RESOURCE_EXHAUSTED
               : GD_GRPC_OK;
}

static int notify(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *rl, char *msg,
                  size_t ml)
{
    int reg;
    char error[256];
    (void)ctx;
    if (gd_dra_decode_reg_status(req, len, &reg, error, sizeof error) < 0) {
        snprintf(msg, ml, "RegistrationStatus: %s", error);
        return GD_GRPC_INVALID_ARGUMENT;
    }
    printf("registered %d error %s\n", reg, error);
    fflush(stdout);
    *resp = NULL;
    *rl = 0;
    return GD_GRPC_OK;
}

#define DRA_V1 GD_DRA_PATH_V1
#define DRA_V1B GD_DRA_PATH_V1BETA1
static int yes = 1;
static const struct gd_grpc_method methods[] = {
    { "/test.Echo/Echo", echo, NULL },
    { "/test.Echo/Sleep", slow, NULL },
    { "/test.Echo/Fail", fail, NULL },
    { "/test.Echo/Big", big, NULL },
    { DRA_V1 "NodePrepareResources", claims, &yes },
    { DRA_V1 "NodeUnprepareResources", claims, NULL },
    { DRA_V1B "NodePrepareResources", claims, &yes },
    { DRA_V1B "NodeUnprepareResources", claims, NULL },
};
static const struct gd_grpc_method reg_methods[] = {
    { GD_DRA_REG_PATH "GetInfo", get_info, NULL },
    { GD_DRA_REG_PATH "NotifyRegistrationStatus", notify, NULL },
};

int main(int argc, char **argv)
{
    char err[512];
    sigset_t set;
    int sig;
    if (argc != 3) {
        fprintf(stderr, "usage: grpc_server SOCK REGSOCK\n");
        return 2;
    }
    sock_path = argv[1];
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* every thread inherits it; sigwait takes them */
    struct gd_grpc *srv = gd_grpc_start(argv[1], 0600, methods, 8, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "grpc_server: %s\n", err);
        return 1;
    }
    struct gd_grpc *reg = gd_grpc_start(argv[2], 0600, reg_methods, 2, err, sizeof err);
    if (!reg) {
        fprintf(stderr, "grpc_server: %s\n", err);
        gd_grpc_stop(srv);
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    sigwait(&set, &sig);
    printf("conns %d\n", gd_grpc_nconns(srv));
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    gd_grpc_stop(srv);
    gd_grpc_stop(reg);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("stopped %ld\n",
           (long)((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000));
    return 0;
}

/*
 * A property of the daemon's API: no request of a user who is not an admin ever raises an
 * effective limit. An input makes a fresh managed tenant of uid 1000 (as an admin: its
 * memory and compute, a default and per-GPU entries, class and weight, from the first bytes),
 * then sends requests split at NUL bytes, each "METHOD BODY" (PATCH, POST or DELETE on that
 * tenant, or a POST of a new tenant), as uid 1000 (its owner) or 1001 (bit 7 of the request's
 * first byte). After every request, whatever its answer, each GPU's effective memory limit and
 * compute ceiling (a GPU of the node, and one it does not have: the default), the class and
 * the weight are compared with what they were: none may rise (no limit counts as the
 * highest), and a request of uid 1001 may change nothing. The tenant is ended after the input.
 * The daemon's state (a node segment and tenant files in a temporary directory, two simulated
 * GPUs) is real, as in fuzz_api.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/node.h"
#include "daemon/daemon.h"
#include "fuzz.h"
#include "fuzz_daemon.h"

static void init(void)
{
    static char dir[] = "/tmp/gs-fuzz-authz-XXXXXX";

    fuzz_daemon_init(dir);
}

/* What a tenant is allowed: per GPU (0, 1, and one the node lacks) memory and compute. */
struct allowed {
    int exists;
    uint32_t owner;
    uint64_t mem[3];
    uint32_t comp[3];
    uint32_t prio, weight;
};

/* A limit as a height: none is above every value. */
static uint64_t height(uint64_t v)
{
    return v ? v : UINT64_MAX;
}

static void read_allowed(const char *name, struct allowed *a)
{
    static const uint8_t other[16] = { 0x11, 0x22 };
    struct gpuslice_node_tenant p;
    int i, k;

    memset(a, 0, sizeof(*a));
    if ((i = gs_node_find_name(gd.node, name)) < 0)
        return;
    gs_node_read_tenant(gd.node, i, &p);
    a->exists = 1;
    a->owner = p.owner_uid;
    for (k = 0; k < 3; k++) {
        uint64_t m = 0;
        uint32_t c = 0;

        gs_node_limits(gd.node, i, p.id, k < 2 ? gd.dev[k].raw : other, -1, &m, &c);
        a->mem[k] = height(m);
        a->comp[k] = c ? c : 100;
    }
    a->prio = p.priority ? p.priority : GPUSLICE_PRIORITY_NORMAL;
    a->weight = p.weight ? p.weight : 1;
}

static void request(const char *method, const char *path, const char *body, size_t len, uid_t uid,
                    int admin, struct gd_response *resp)
{
    struct gd_request req;
    char *params_path = strdup(path);

    memset(&req, 0, sizeof(req));
    memset(resp, 0, sizeof(*resp));
    req.peer.unix_peer = 1;
    req.peer.admin = admin;
    req.peer.uid = uid;
    req.peer.pid = getpid();
    req.method = method;
    req.path = params_path;
    req.body = body;
    req.body_len = len;
    req.content_type = "application/json";
    gd_api_handle(&req, resp);
    free(params_path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const sizes[] = { NULL, "\"512M\"", "\"1G\"", "\"4G\"" };
    static const int pcts[] = { 0, 10, 50, 90 };
    static const char *const prios[] = { NULL, "background", "normal", "latency" };
    static int inited;
    struct gd_response resp;
    struct allowed before, after;
    char body[1024], path[64], *text;
    size_t at;
    int i;

    if (!inited) {
        init();
        inited = 1;
    }
    if (size < 4)
        return 0;
    /* The tenant, made by an admin for uid 1000. */
    snprintf(path, sizeof(path), "/v1/tenants");
    {
        int n = snprintf(body, sizeof(body), "{\"name\":\"t\",\"owner\":1000");
        const char *m0 = sizes[data[0] & 3], *m1 = sizes[(data[0] >> 2) & 3],
                   *md = sizes[(data[0] >> 4) & 3];
        int c0 = pcts[data[1] & 3], cd = pcts[(data[1] >> 2) & 3];

        n += snprintf(body + n, sizeof(body) - (size_t)n,
                      ",\"memory\":{\"default\":%s,\"0\":%s,\"1\":%s}", md ? md : "null",
                      m0 ? m0 : "null", m1 ? m1 : "null");
        n += snprintf(body + n, sizeof(body) - (size_t)n, ",\"compute\":{\"default\":");
        n += cd ? snprintf(body + n, sizeof(body) - (size_t)n, "%d", cd)
                : snprintf(body + n, sizeof(body) - (size_t)n, "null");
        n += c0 ? snprintf(body + n, sizeof(body) - (size_t)n, ",\"0\":%d}", c0)
                : snprintf(body + n, sizeof(body) - (size_t)n, ",\"0\":null}");
        if (prios[(data[1] >> 4) & 3])
            n += snprintf(body + n, sizeof(body) - (size_t)n, ",\"priority\":\"%s\"",
                          prios[(data[1] >> 4) & 3]);
        if (data[1] >> 6)
            n += snprintf(body + n, sizeof(body) - (size_t)n, ",\"weight\":%d", data[1] >> 6);
        snprintf(body + n, sizeof(body) - (size_t)n, "}");
    }
    request("POST", path, body, strlen(body), 0, 1, &resp);
    free(resp.body);
    FUZZ_CHECK(resp.status == 201, "the admin's tenant was not made (%d): %s", resp.status, body);
    /* The requests: METHOD, a space, the body; split at NUL. */
    text = malloc(size - 2 + 1);
    memcpy(text, data + 2, size - 2);
    text[size - 2] = '\0';
    for (at = 0; at < size - 2;) {
        char *req = text + at, *sp;
        size_t len = strlen(req);
        uid_t uid = (req[0] & 0x80) ? 1001 : 1000;
        const char *method = "PATCH", *rpath = "/v1/tenants/t";

        at += len + 1;
        if (len == 0)
            continue;
        switch (req[0] & 3) {
        case 1:
            method = "DELETE";
            break;
        case 2:
            method = "POST";
            rpath = "/v1/tenants";
            break;
        default:
            break;
        }
        sp = strchr(req, ' ');
        read_allowed("t", &before);
        request(method, rpath, sp ? sp + 1 : "", sp ? len - (size_t)(sp + 1 - req) : 0, uid, 0,
                &resp);
        read_allowed("t", &after);
        FUZZ_CHECK(resp.status >= 200 && resp.status <= 599, "status %d", resp.status);
        if (before.exists && after.exists && before.owner == after.owner) {
            for (i = 0; i < 3; i++) {
                FUZZ_CHECK(after.mem[i] <= before.mem[i],
                           "uid %d raised memory on GPU slot %d from %llu to %llu with %s %s "
                           "(answer %d)",
                           (int)uid, i, (unsigned long long)before.mem[i],
                           (unsigned long long)after.mem[i], method, sp ? sp + 1 : "", resp.status);
                FUZZ_CHECK(after.comp[i] <= before.comp[i],
                           "uid %d raised compute on GPU slot %d from %u to %u with %s %s",
                           (int)uid, i, before.comp[i], after.comp[i], method, sp ? sp + 1 : "");
            }
            FUZZ_CHECK(after.prio <= before.prio && after.weight <= before.weight,
                       "uid %d raised the class or weight with %s %s", (int)uid, method,
                       sp ? sp + 1 : "");
        }
        if (uid == 1001 && before.exists && before.owner == 1000)
            FUZZ_CHECK(memcmp(&before, &after, sizeof(before)) == 0,
                       "uid 1001 changed uid 1000's tenant with %s %s (answer %d)", method,
                       sp ? sp + 1 : "", resp.status);
        free(resp.body);
    }
    free(text);
    /* Everything made here goes: the tenant, and what uid 1000 made. */
    pthread_mutex_lock(&gd.mu);
    for (i = gd.ntenant - 1; i >= 0; i--)
        if (gd.tenant[i].managed)
            gd_tenant_end(&gd.tenant[i]); /* nothing of it runs: no /proc walk */
    pthread_mutex_unlock(&gd.mu);
    return 0;
}

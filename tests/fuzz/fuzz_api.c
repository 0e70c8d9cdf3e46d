/*
 * The daemon's API behind the HTTP server: routing, the JSON bodies, the limits they give,
 * who may do what. An input is a request in a short form: one byte of who asks (bit 0: an
 * admin; bits 1-2: uid 0, 1000, 1001 or 65534), then "METHOD PATH", then header lines
 * ("Content-Type: ...", "Last-Event-ID: ...") up to an empty line, then the body. Every
 * answer must have a status of 200..599 and, unless it is 204 or an event stream, a body that
 * is JSON (or, for /metrics, text); an error must be the {"error": {"code", "message"}} object
 * with a message. The daemon's state (a node segment and tenant files in a temporary
 * directory, two simulated GPUs) persists across inputs, as a daemon's does; when it holds
 * many tenants they are ended.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "fuzz.h"
#include "fuzz_daemon.h"

static void init(void)
{
    static char dir[] = "/tmp/gs-fuzz-api-XXXXXX";

    fuzz_daemon_init(dir);
}

/* Ends the managed tenants once there are many: the table has room for 256. */
static void trim(void)
{
    char err[256];
    int k;

    pthread_mutex_lock(&gd.mu);
    if (gd.ntenant > 64)
        for (k = gd.ntenant - 1; k >= 0; k--)
            if (gd.tenant[k].managed)
                gd_tenant_delete(&gd.tenant[k], 1, err, sizeof(err));
    pthread_mutex_unlock(&gd.mu);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uid_t uids[] = { 0, 1000, 1001, 65534 };
    static int inited;
    struct gd_request req;
    struct gd_response resp;
    char *text, *line, *next, *sp, *ctype = NULL, *last = NULL, *body;
    json_error_t je;
    json_t *o;

    if (!inited) {
        init();
        inited = 1;
    }
    if (size < 2)
        return 0;
    memset(&req, 0, sizeof(req));
    memset(&resp, 0, sizeof(resp));
    req.peer.unix_peer = 1;
    req.peer.admin = data[0] & 1;
    req.peer.uid = uids[(data[0] >> 1) & 3];
    req.peer.pid = getpid();
    /* The rest: a C string up to the body (a body may hold NULs). */
    text = malloc(size);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    body = text + strlen(text);
    line = text;
    next = strchr(line, '\n');
    if (next)
        *next++ = '\0';
    if ((sp = strchr(line, ' ')) == NULL) {
        free(text);
        return 0;
    }
    *sp = '\0';
    req.method = line;
    req.path = sp + 1;
    while (next && *next && *next != '\n') {
        line = next;
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (strncmp(line, "Content-Type: ", 14) == 0)
            ctype = line + 14;
        else if (strncmp(line, "Last-Event-ID: ", 15) == 0)
            last = line + 15;
    }
    if (next && *next == '\n')
        body = next + 1;
    req.content_type = ctype;
    req.last_event_id = last;
    req.body = body;
    req.body_len = (size_t)(text + size - 1 - body);
    gd_api_handle(&req, &resp);
    FUZZ_CHECK(resp.status >= 200 && resp.status <= 599, "status %d for %s %s", resp.status,
               req.method, req.path);
    if (resp.status != 204 && !resp.sse && strcmp(req.path, "/metrics") != 0) {
        FUZZ_CHECK(resp.body != NULL, "no body for %s %s", req.method, req.path);
        o = json_loadb(resp.body, resp.len, 0, &je);
        FUZZ_CHECK(o != NULL, "the answer is not JSON: %s", resp.body);
        if (resp.status >= 400) {
            json_t *e = json_object_get(o, "error");
            FUZZ_CHECK(json_is_string(json_object_get(e, "code")) &&
                           json_string_length(json_object_get(e, "message")) > 0,
                       "not an error object: %s", resp.body);
        }
        json_decref(o);
    }
    free(resp.body);
    free(text);
    trim();
    return 0;
}

/*
 * The webhook's one conversation with the Kubernetes API server, in
 * webhook-claims mode: a ResourceClaimTemplate made sure of (webhook.h's
 * gd_webhook_ensure_fn), through kube.c's client. Apart from webhook.c so that
 * the answer itself stays a pure function of the pod (its tests and fuzzing
 * pass a stub).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "daemon/kube.h"
#include "daemon/webhook.h"

/*
 * Each call waits at most this long: the API server gives the whole webhook call
 * timeoutSeconds (10 in the claims overlay) for a GET, a POST and a GET after a 409.
 */
#define CALL_TIMEOUT_S 3

int gd_webhook_ensure_template(const char *ns, const json_t *tmpl, void *arg, char *err,
                               size_t errlen)
{
    const char *name =
        json_string_value(json_object_get(json_object_get(tmpl, "metadata"), "name"));
    char path[512], msg[512];
    json_t *have;
    long code;
    int tries;

    (void)arg;
    if (!name) {
        snprintf(err, errlen, "a template without a name");
        return -EINVAL;
    }
    /* A GET, a POST where there is none, and a GET again when another made it meanwhile. */
    for (tries = 0; tries < 2; tries++) {
        snprintf(path, sizeof(path),
                 "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaimtemplates/%s", ns, name);
        code = gd_kube_call("GET", path, NULL, &have, CALL_TIMEOUT_S, msg, sizeof(msg));
        if (code == 200) {
            int same = gd_webhook_template_same(have, tmpl);

            json_decref(have);
            if (same)
                return 0;
            snprintf(err, errlen,
                     "a template of that name asks for something else than this pod's slice "
                     "(its name is gpuslice's: delete or rename it)");
            return -EEXIST;
        }
        json_decref(have);
        if (code != 404) {
            snprintf(err, errlen, "cannot read it from the API server: %s", msg);
            return -EIO;
        }
        snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaimtemplates",
                 ns);
        code = gd_kube_call("POST", path, tmpl, &have, CALL_TIMEOUT_S, msg, sizeof(msg));
        json_decref(have);
        if (code == 201 || code == 200)
            return 0;
        if (code != 409) {
            snprintf(err, errlen, "the API server did not make it: %s", msg);
            return -EIO;
        }
    }
    snprintf(err, errlen, "made and gone again while the webhook looked");
    return -EIO;
}

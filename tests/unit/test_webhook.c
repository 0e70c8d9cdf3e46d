/*
 * The admission webhook's answers (the daemon's webhook.c): which pods get
 * the interposer, the JSON Patch that puts it in (decoded and applied by a
 * small JSON Patch "add" of the test's own), the opt-out, and the refusals.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/podspec.h"
#include "daemon/webhook.h"
#include "gpuslice/tenant_abi.h"

static const struct gd_webhook_conf conf = { .lib_dir = "/var/lib/gpuslice/lib",
                                             .run_dir = "/run/gpuslice" };

static json_t *review(const char *pod_json)
{
    char body[8192], err[512];
    json_t *r;

    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":"
             "{\"uid\":\"u-1\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},"
             "\"operation\":\"CREATE\",\"object\":%s}}",
             pod_json);
    r = gd_webhook_review(body, strlen(body), &conf, err, sizeof(err));
    assert_non_null(r);
    assert_string_equal(json_string_value(json_object_get(json_object_get(r, "response"), "uid")),
                        "u-1");
    return r;
}

static int b64v(char c)
{
    const char *t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = strchr(t, c);

    return c && p ? (int)(p - t) : -1;
}

/* The response's patch, decoded and parsed (NULL when it has none). */
static json_t *patch_of(const json_t *r)
{
    const char *b = json_string_value(json_object_get(json_object_get(r, "response"), "patch"));
    size_t n, i, o = 0;
    char *out;
    json_t *p;

    if (b == NULL)
        return NULL;
    n = strlen(b);
    assert_int_equal(n % 4, 0);
    out = malloc(n);
    for (i = 0; i < n; i += 4) {
        int a = b64v(b[i]), c = b64v(b[i + 1]), d = b64v(b[i + 2]), e = b64v(b[i + 3]);

        assert_true(a >= 0 && c >= 0);
        out[o++] = (char)(a << 2 | c >> 4);
        if (b[i + 2] != '=')
            out[o++] = (char)((c & 15) << 4 | d >> 2);
        if (b[i + 3] != '=')
            out[o++] = (char)((d & 3) << 6 | e);
    }
    p = json_loadb(out, o, 0, NULL);
    free(out);
    assert_non_null(p);
    return p;
}

/* Applies JSON Patch "add" ops (all the webhook sends) to doc. */
static void apply(json_t *doc, const json_t *patch)
{
    const json_t *op;
    size_t i;

    json_array_foreach(patch, i, op)
    {
        char path[256], *tok, *save, *last = NULL;
        json_t *at = doc, *parent = NULL;

        int rm = strcmp(json_string_value(json_object_get(op, "op")), "remove") == 0;

        if (!rm)
            assert_string_equal(json_string_value(json_object_get(op, "op")), "add");
        snprintf(path, sizeof(path), "%s", json_string_value(json_object_get(op, "path")));
        for (tok = strtok_r(path + 1, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
            char key[128], *k = key, *s;

            for (s = tok; *s; s++) /* "~1" is '/', "~0" is '~' */
                *k++ = s[0] == '~' && s[1] == '1' ? (s++, '/') : s[0] == '~' ? (s++, '~') : *s;
            *k = '\0';
            if (parent)
                at = json_is_array(parent) ? json_array_get(parent, (size_t)atoi(last))
                                           : json_object_get(parent, last);
            assert_non_null(at);
            parent = at;
            free(last);
            last = strdup(key);
        }
        if (rm) {
            assert_true(json_is_object(parent)); /* (the webhook removes members only) */
            assert_int_equal(json_object_del(parent, last), 0);
        } else if (json_is_array(parent)) {
            assert_string_equal(last, "-");
            json_array_append(parent, json_object_get(op, "value"));
        } else {
            /* add never replaces here, but the claims mode's record for people */
            if (strcmp(last, "gpuslice.io/claim-template") != 0)
                assert_null(json_object_get(parent, last));
            json_object_set(parent, last, json_object_get(op, "value"));
        }
        free(last);
    }
}

static const char *const gpu_pod =
    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns1\"},\"spec\":{\"containers\":["
    "{\"name\":\"main\",\"image\":\"x\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}},"
    "\"env\":[{\"name\":\"LD_PRELOAD\",\"value\":\"/opt/mine.so\"}]},"
    "{\"name\":\"side\",\"image\":\"y\",\"volumeMounts\":[{\"name\":\"d\",\"mountPath\":\"/d\"}]}],"
    "\"initContainers\":[{\"name\":\"init\",\"image\":\"z\"}],"
    "\"volumes\":[{\"name\":\"d\",\"emptyDir\":{}}]}}";

static void test_gpu_pod_gets_the_interposer(void **state)
{
    json_t *r = review(gpu_pod), *p = patch_of(r), *pod = json_loads(gpu_pod, 0, NULL), *c;
    const char *const lists[] = { "containers", "initContainers" };
    size_t i, k;

    (void)state;
    assert_true(json_is_true(json_object_get(json_object_get(r, "response"), "allowed")));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(r, "response"), "patchType")),
        "JSONPatch");
    assert_non_null(p);
    apply(pod, p);
    {
        const json_t *v = json_object_get(json_object_get(pod, "spec"), "volumes");

        /*
         * The run directory's pod/ and tenants/, never the run directory: its API socket made
         * root in a container an admin of the node (issue 28).
         */
        assert_int_equal(json_array_size(v), 4);
        assert_string_equal(json_string_value(json_object_get(
                                json_object_get(json_array_get(v, 1), "hostPath"), "path")),
                            "/var/lib/gpuslice/lib");
        assert_string_equal(json_string_value(json_object_get(
                                json_object_get(json_array_get(v, 2), "hostPath"), "path")),
                            "/run/gpuslice/pod");
        assert_string_equal(json_string_value(json_object_get(
                                json_object_get(json_array_get(v, 3), "hostPath"), "path")),
                            "/run/gpuslice/tenants");
        for (i = 0; i < json_array_size(v); i++) {
            const char *hp = json_string_value(
                json_object_get(json_object_get(json_array_get(v, i), "hostPath"), "path"));

            assert_true(hp == NULL || strcmp(hp, "/run/gpuslice") != 0);
        }
    }
    for (k = 0; k < 2; k++)
        json_array_foreach(json_object_get(json_object_get(pod, "spec"), lists[k]), i, c)
        {
            const json_t *m = json_object_get(c, "volumeMounts"), *e = json_object_get(c, "env"),
                         *x;
            size_t j;
            int preload = 0, run = 0, lib = 0, pod_env = 0, tenants = 0;

            json_array_foreach(m, j, x)
            {
                const char *mp = json_string_value(json_object_get(x, "mountPath"));
                const char *vol = json_string_value(json_object_get(x, "name"));
                int ro = json_is_true(json_object_get(x, "readOnly"));

                preload += strcmp(mp, "/etc/ld.so.preload") == 0 &&
                           strcmp(json_string_value(json_object_get(x, "subPath")),
                                  "ld.so.preload") == 0 &&
                           ro;
                run += strcmp(mp, "/run/gpuslice") == 0 && strcmp(vol, "gpuslice-run") == 0 && ro;
                tenants += strcmp(mp, "/run/gpuslice/tenants") == 0 &&
                           strcmp(vol, "gpuslice-tenants") == 0 && ro;
                lib += strcmp(mp, "/usr/local/gpuslice") == 0;
            }
            assert_int_equal(tenants, 1);
            json_array_foreach(e, j, x) pod_env +=
                strcmp(json_string_value(json_object_get(x, "name")), "GPUSLICE_POD") == 0 &&
                strcmp(json_string_value(json_object_get(x, "value")), "1") == 0;
            assert_int_equal(preload, 1);
            assert_int_equal(run, 1);
            assert_int_equal(lib, 1);
            assert_int_equal(pod_env, 1);
        }
    /* What the pod had is kept: its own LD_PRELOAD, its volume and mount. */
    c = json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(c, "env"), 0), "value")),
        "/opt/mine.so");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(pod, "metadata"), "annotations"),
                            "gpuslice.io/injected")),
                        "true");
    json_decref(p);
    json_decref(r);
    /* The injected pod again (a reinvocation): nothing more. */
    {
        char *again = json_dumps(pod, JSON_COMPACT);

        r = review(again);
        assert_null(patch_of(r));
        assert_true(json_is_true(json_object_get(json_object_get(r, "response"), "allowed")));
        free(again);
        json_decref(r);
    }
    /* A sidecar another webhook added after our first call: it alone gets the interposer. */
    {
        json_t *cs = json_object_get(json_object_get(pod, "spec"), "containers"), *sc;
        char *again;
        size_t n;

        json_array_append_new(cs, json_pack("{s:s, s:s}", "name", "sidecar", "image", "s"));
        again = json_dumps(pod, JSON_COMPACT);
        r = review(again);
        p = patch_of(r);
        assert_non_null(p);
        n = json_array_size(p);
        apply(pod, p);
        sc = json_array_get(cs, 2);
        assert_int_equal(json_array_size(json_object_get(sc, "volumeMounts")), 4);
        assert_int_equal(
            json_array_size(json_object_get(
                json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0),
                "volumeMounts")),
            4);
        assert_true(n == 7); /* mounts, env: two arrays and five entries, for it alone */
        json_decref(p);
        json_decref(r);
        free(again);
    }
    json_decref(pod);
}

/* An annotation anyone can write does not stop the injection; part of it is refused. */
static void test_marker_not_believed(void **state)
{
    json_t *r, *p, *m, *x;
    size_t i;
    int ro = 0;

    (void)state;
    r = review("{\"metadata\":{\"annotations\":{\"gpuslice.io/injected\":\"true\"}},\"spec\":{"
               "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":"
               "\"1\"}}}]}}");
    p = patch_of(r);
    assert_non_null(p);
    /* The run directory is mounted read-only. */
    json_array_foreach(p, i, x)
    {
        m = json_object_get(x, "value");
        if (json_is_object(m) && json_string_value(json_object_get(m, "mountPath")) &&
            strcmp(json_string_value(json_object_get(m, "mountPath")), "/run/gpuslice") == 0)
            ro = json_is_true(json_object_get(m, "readOnly"));
    }
    assert_true(ro);
    json_decref(p);
    json_decref(r);
    r = review("{\"spec\":{\"containers\":[{\"name\":\"half\",\"resources\":{\"limits\":{"
               "\"nvidia.com/gpu\":\"1\"}},\"env\":[{\"name\":\"GPUSLICE_POD\",\"value\":"
               "\"0\"}]}]}}");
    assert_true(json_is_false(json_object_get(json_object_get(r, "response"), "allowed")));
    json_decref(r);
}

static void test_which_pods(void **state)
{
    json_t *r;

    (void)state;
    /* No GPU asked: untouched. */
    r = review("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}");
    assert_null(patch_of(r));
    assert_true(json_is_true(json_object_get(json_object_get(r, "response"), "allowed")));
    json_decref(r);
    /* An annotation of ours, TensorFusion's, or HAMi's resource is a GPU pod. */
    r = review("{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"8G\"}},\"spec\":{"
               "\"containers\":[{\"name\":\"c\"}]}}");
    json_decref(patch_of(r));
    assert_non_null(json_object_get(json_object_get(r, "response"), "patch"));
    json_decref(r);
    r = review("{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/vram-limit\":\"4Gi\"}},"
               "\"spec\":{\"containers\":[{\"name\":\"c\"}]}}");
    assert_non_null(json_object_get(json_object_get(r, "response"), "patch"));
    json_decref(r);
    r = review("{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
               "\"nvidia.com/gpumem\":\"4096\"}}}]}}");
    assert_non_null(json_object_get(json_object_get(r, "response"), "patch"));
    json_decref(r);
    /* Opted out. */
    r = review("{\"metadata\":{\"annotations\":{\"gpuslice.io/inject\":\"false\"}},\"spec\":{"
               "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":"
               "\"1\"}}}]}}");
    assert_null(json_object_get(json_object_get(r, "response"), "patch"));
    assert_true(json_is_true(json_object_get(json_object_get(r, "response"), "allowed")));
    json_decref(r);
}

/*
 * The webhook injects exactly the pods the daemon makes tenants of (gd_pod_wants_gpus, one
 * definition): a pod whose only GPU is an init container's is injected, and is a GPU pod.
 */
static void test_injects_exactly_gpu_pods(void **state)
{
    static const char *const pods[] = {
        "{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
        "{\"spec\":{\"containers\":[{\"name\":\"c\"}],\"initContainers\":[{\"name\":\"i\","
        "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
        "{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{"
        "\"nvidia.com/gpu\":\"1\"}}}]}}",
        "{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
        "\"nvidia.com/priority\":\"0\"}}}]}}",
        "{\"spec\":{\"containers\":[{\"name\":\"c\"}],\"ephemeralContainers\":[{\"name\":\"e\","
        "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
        "{\"metadata\":{\"annotations\":{\"gpuslice.io/sms\":\"50%\"}},\"spec\":{\"containers\":"
        "[{\"name\":\"c\"}]}}",
        "{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/qos\":\"high\"}},\"spec\":{"
        "\"containers\":[{\"name\":\"c\"}]}}",
        "{\"metadata\":{\"annotations\":{\"gpuslice.io/inject\":\"true\"}},\"spec\":{"
        "\"containers\":[{\"name\":\"c\"}]}}",
        "{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
        "\"amd.com/gpu\":\"1\"}}}]}}",
        /* A claim (of NVIDIA's DRA driver, say): its driver is not in the pod; injected. */
        "{\"spec\":{\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":"
        "\"t\"}],\"containers\":[{\"name\":\"c\",\"resources\":{\"claims\":[{\"name\":"
        "\"gpu\"}]}}]}}",
    };
    size_t i;
    int gpu_pods = 0;

    (void)state;
    for (i = 0; i < sizeof(pods) / sizeof(pods[0]); i++) {
        json_t *pod = json_loads(pods[i], 0, NULL), *r = review(pods[i]);
        int patched = json_object_get(json_object_get(r, "response"), "patch") != NULL;

        assert_non_null(pod);
        if (patched != gd_pod_wants_gpus(pod))
            fail_msg("pod %zu (%s): patched %d, a GPU pod %d", i, pods[i], patched,
                     gd_pod_wants_gpus(pod));
        gpu_pods += patched;
        json_decref(pod);
        json_decref(r);
    }
    assert_int_equal(gpu_pods, 6); /* the init container's, requests, priority, sms, qos, claim */
}

static void test_refusals(void **state)
{
    char err[512];
    json_t *r;
    const char *msg;

    (void)state;
    r = review("{\"metadata\":{\"annotations\":{\"gpuslice.io/inject\":\"no\"}},\"spec\":{"
               "\"containers\":[{\"name\":\"c\"}]}}");
    assert_true(json_is_false(json_object_get(json_object_get(r, "response"), "allowed")));
    msg = json_string_value(
        json_object_get(json_object_get(json_object_get(r, "response"), "status"), "message"));
    assert_non_null(strstr(msg, "gpuslice.io/inject"));
    assert_non_null(strstr(msg, "\"true\" or \"false\""));
    json_decref(r);
    /* A container that mounts /etc/ld.so.preload itself: refused, not overridden. */
    r = review("{\"spec\":{\"containers\":[{\"name\":\"own\",\"resources\":{\"limits\":{"
               "\"nvidia.com/gpu\":\"1\"}},\"volumeMounts\":[{\"name\":\"v\",\"mountPath\":"
               "\"/etc/ld.so.preload\"}]}]}}");
    assert_true(json_is_false(json_object_get(json_object_get(r, "response"), "allowed")));
    msg = json_string_value(
        json_object_get(json_object_get(json_object_get(r, "response"), "status"), "message"));
    assert_non_null(strstr(msg, "container own"));
    json_decref(r);
    /*
     * A volume under our names that is not ours: the run directory itself (what the injection
     * mounted before issue 28, and what would give the pod the API's socket), or another
     * directory as the tenants' volume. Refused, never mounted.
     */
    r = review("{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
               "\"nvidia.com/gpu\":\"1\"}}}],\"volumes\":[{\"name\":\"gpuslice-run\","
               "\"hostPath\":{\"path\":\"/run/gpuslice\"}}]}}");
    assert_true(json_is_false(json_object_get(json_object_get(r, "response"), "allowed")));
    msg = json_string_value(
        json_object_get(json_object_get(json_object_get(r, "response"), "status"), "message"));
    assert_non_null(strstr(msg, "not gpuslice's"));
    json_decref(r);
    r = review("{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
               "\"nvidia.com/gpu\":\"1\"}}}],\"volumes\":[{\"name\":\"gpuslice-tenants\","
               "\"hostPath\":{\"path\":\"/\"}}]}}");
    assert_true(json_is_false(json_object_get(json_object_get(r, "response"), "allowed")));
    json_decref(r);
    /* Not an AdmissionReview: an error for a 400. */
    assert_null(gd_webhook_review("{}", 2, &conf, err, sizeof(err)));
    assert_non_null(strstr(err, "AdmissionReview"));
    assert_null(gd_webhook_review("{", 1, &conf, err, sizeof(err)));
    assert_non_null(strstr(err, "not JSON"));
}

/* ---- webhook-claims ---- */

/* The templates the stub was asked to make sure of, and what it answers. */
static struct {
    int calls, answer;
    char ns[64], name[128];
    json_t *last;
} made;

static int stub_ensure(const char *ns, const json_t *tmpl, void *arg, char *err, size_t errlen)
{
    (void)arg;
    made.calls++;
    snprintf(made.ns, sizeof(made.ns), "%s", ns);
    snprintf(made.name, sizeof(made.name), "%s",
             json_string_value(json_object_get(json_object_get(tmpl, "metadata"), "name")));
    json_decref(made.last);
    made.last = json_deep_copy(tmpl);
    if (made.answer == -EEXIST)
        snprintf(err, errlen, "a template of that name asks for something else");
    return made.answer;
}

static const struct gd_webhook_conf claims_conf = { .lib_dir = "/var/lib/gpuslice/lib",
                                                    .run_dir = "/run/gpuslice",
                                                    .claims = 1,
                                                    .latency_namespaces = "prod",
                                                    .ensure = stub_ensure };

/* The review of pod_json in claims mode, in namespace ns, a dry run or not. */
static json_t *claims_review(const char *pod_json, const char *ns, int dry_run)
{
    char body[16384], err[512];
    json_t *r;

    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":"
             "{\"uid\":\"u-2\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},"
             "\"namespace\":\"%s\",\"operation\":\"CREATE\",\"dryRun\":%s,\"object\":%s}}",
             ns, dry_run ? "true" : "false", pod_json);
    r = gd_webhook_review(body, strlen(body), &claims_conf, err, sizeof(err));
    assert_non_null(r);
    return r;
}

static int allowed(const json_t *r)
{
    return json_is_true(json_object_get(json_object_get(r, "response"), "allowed"));
}

static const char *refusal(const json_t *r)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(r, "response"), "status"), "message"));
}

static const json_t *container(const json_t *pod, const char *list, size_t i)
{
    return json_array_get(json_object_get(json_object_get(pod, "spec"), list), i);
}

static int has_claim_ref(const json_t *c)
{
    const json_t *cl = json_object_get(json_object_get(c, "resources"), "claims");

    return json_array_size(cl) == 1 &&
           strcmp(json_string_value(json_object_get(json_array_get(cl, 0), "name")),
                  "gpuslice") == 0;
}

static const char *const slice_pod =
    "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"gpuslice.io/memory\":\"8G\","
    "\"gpuslice.io/compute\":\"50\"}},\"spec\":{\"containers\":["
    "{\"name\":\"main\",\"image\":\"x\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\","
    "\"cpu\":\"2\"},\"requests\":{\"nvidia.com/gpu\":\"1\"}}},"
    "{\"name\":\"side\",\"image\":\"y\"}],\"initContainers\":[{\"name\":\"init\",\"image\":\"z\"}]}}";

/*
 * The pod's slice becomes a claim: the claim from the template named after the slice, made sure
 * of in the pod's namespace; the claim in the container that asked for the GPU (only), its
 * nvidia.com/gpu taken away (the device plugin must not give one too), the template named in an
 * annotation; and no interposer mounts (the claim's CDI spec brings them).
 */
static void test_claims_patch_gives_the_pod_its_claim(void **state)
{
    json_t *r, *p, *pod = json_loads(slice_pod, 0, NULL);
    const json_t *rc, *op;
    size_t i;

    (void)state;
    made.calls = 0;
    made.answer = 0;
    r = claims_review(slice_pod, "team-a", 0);
    assert_true(allowed(r));
    assert_int_equal(made.calls, 1);
    assert_string_equal(made.ns, "team-a");
    assert_string_equal(made.name, "gpuslice-m8192mi-c50-n1");
    p = patch_of(r);
    assert_non_null(p);
    json_array_foreach(p, i, op)
    {
        const char *path = json_string_value(json_object_get(op, "path"));

        assert_null(strstr(path, "volume"));
        assert_null(strstr(path, "/env"));
    }
    apply(pod, p);
    rc = json_object_get(json_object_get(pod, "spec"), "resourceClaims");
    assert_int_equal(json_array_size(rc), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(rc, 0), "name")),
                        "gpuslice");
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(rc, 0), "resourceClaimTemplateName")),
        "gpuslice-m8192mi-c50-n1");
    assert_true(has_claim_ref(container(pod, "containers", 0)));
    assert_null(json_object_get(json_object_get(container(pod, "containers", 1), "resources"),
                                "claims"));
    assert_null(json_object_get(container(pod, "initContainers", 0), "resources"));
    {
        const json_t *res = json_object_get(container(pod, "containers", 0), "resources");

        assert_null(json_object_get(json_object_get(res, "limits"), "nvidia.com/gpu"));
        assert_null(json_object_get(json_object_get(res, "requests"), "nvidia.com/gpu"));
        assert_string_equal(json_string_value(json_object_get(json_object_get(res, "limits"),
                                                              "cpu")),
                            "2");
    }
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(pod, "metadata"), "annotations"),
                            "gpuslice.io/claim-template")),
                        "gpuslice-m8192mi-c50-n1");
    /* The pod's limits stay in its annotations: they are where the template came from. */
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(pod, "metadata"), "annotations"),
                            "gpuslice.io/memory")),
                        "8G");
    /* The template: one request of a device of class gpuslice.io with the slice's capacity. */
    {
        const json_t *ex = json_object_get(
            json_array_get(json_object_get(json_object_get(json_object_get(json_object_get(
                                                               made.last, "spec"),
                                                               "spec"),
                                                           "devices"),
                                           "requests"),
                           0),
            "exactly");
        const json_t *rq = json_object_get(json_object_get(ex, "capacity"), "requests");

        assert_string_equal(json_string_value(json_object_get(ex, "deviceClassName")),
                            "gpuslice.io");
        assert_int_equal(json_integer_value(json_object_get(ex, "count")), 1);
        assert_string_equal(json_string_value(json_object_get(rq, "memory")), "8192Mi");
        assert_string_equal(json_string_value(json_object_get(rq, "cores")), "50");
        assert_string_equal(
            json_string_value(json_object_get(
                json_object_get(json_object_get(made.last, "metadata"), "labels"),
                "app.kubernetes.io/managed-by")),
            "gpuslice");
        assert_string_equal(json_string_value(json_object_get(
                                json_object_get(made.last, "metadata"), "namespace")),
                            "team-a");
    }
    json_decref(p);
    json_decref(r);
    /* A second call (the reinvocation) adds nothing, and makes nothing. */
    {
        char *text = json_dumps(pod, JSON_COMPACT);

        made.calls = 0;
        r = claims_review(text, "team-a", 0);
        assert_true(allowed(r));
        assert_null(patch_of(r));
        assert_int_equal(made.calls, 0);
        json_decref(r);
        free(text);
    }
    json_decref(pod);
}

/*
 * HAMi's form: nvidia.com/gpumem (MiB, rounded up to the 256 MiB steps the scheduler counts in)
 * and nvidia.com/gpucores over 2 GPUs; all of them taken away (their JSON Pointers with "~1"),
 * each GPU of the claim getting the same slice. A pod that asks by annotations only gets the
 * claim in every container.
 */
static void test_claims_hami_and_annotation_only(void **state)
{
    static const char *const hami =
        "{\"metadata\":{\"name\":\"h\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":"
        "{\"limits\":{\"nvidia.com/gpu\":\"2\",\"nvidia.com/gpumem\":\"4000\","
        "\"nvidia.com/gpucores\":\"30\",\"nvidia.com/priority\":\"1\"}}}]}}";
    static const char *const ann =
        "{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/vram-limit\":\"1Gi\"}},\"spec\":{"
        "\"containers\":[{\"name\":\"a\"},{\"name\":\"b\",\"resources\":{\"claims\":["
        "{\"name\":\"other\"}]}}],\"initContainers\":[{\"name\":\"i\"}],\"resourceClaims\":["
        "{\"name\":\"other\",\"resourceClaimName\":\"o\"}]}}";
    json_t *r, *p, *pod = json_loads(hami, 0, NULL);
    const json_t *op;
    size_t i;
    int removes = 0;

    (void)state;
    made.calls = 0;
    made.answer = 0;
    r = claims_review(hami, "ns1", 0);
    assert_true(allowed(r));
    assert_string_equal(made.name, "gpuslice-m4096mi-c30-n2-background");
    p = patch_of(r);
    json_array_foreach(p, i, op)
        if (strcmp(json_string_value(json_object_get(op, "op")), "remove") == 0) {
            const char *path = json_string_value(json_object_get(op, "path"));

            assert_int_equal(strncmp(path, "/spec/containers/0/resources/limits/nvidia.com~1", 48),
                             0);
            removes++;
        }
    assert_int_equal(removes, 4);
    apply(pod, p);
    assert_int_equal(json_object_size(json_object_get(
                         json_object_get(container(pod, "containers", 0), "resources"), "limits")),
                     0);
    assert_true(has_claim_ref(container(pod, "containers", 0)));
    /* The class rides in the template's configuration, for the driver to judge again. */
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(
                json_object_get(
                    json_array_get(json_object_get(json_object_get(json_object_get(json_object_get(
                                                                       made.last, "spec"),
                                                                       "spec"),
                                                                   "devices"),
                                                   "config"),
                                   0),
                    "opaque"),
                "parameters"),
            "priority")),
        "background");
    json_decref(p);
    json_decref(r);
    json_decref(pod);
    /* Annotations only: every container and init container (an array in resourceClaims kept). */
    pod = json_loads(ann, 0, NULL);
    r = claims_review(ann, "ns1", 0);
    assert_true(allowed(r));
    assert_string_equal(made.name, "gpuslice-m1024mi-n1");
    p = patch_of(r);
    apply(pod, p);
    assert_true(has_claim_ref(container(pod, "containers", 0)));
    assert_int_equal(json_array_size(json_object_get(
                         json_object_get(container(pod, "containers", 1), "resources"), "claims")),
                     2);
    assert_true(has_claim_ref(container(pod, "initContainers", 0)));
    assert_int_equal(
        json_array_size(json_object_get(json_object_get(pod, "spec"), "resourceClaims")), 2);
    json_decref(p);
    json_decref(r);
    json_decref(pod);
}

/* A dry run gets the patch, and nothing is made (sideEffects: NoneOnDryRun). */
static void test_claims_dry_run_makes_nothing(void **state)
{
    json_t *r, *p;

    (void)state;
    made.calls = 0;
    made.answer = -EIO; /* would refuse, were it asked */
    r = claims_review(slice_pod, "team-a", 1);
    assert_true(allowed(r));
    assert_int_equal(made.calls, 0);
    p = patch_of(r);
    assert_non_null(p);
    json_decref(p);
    json_decref(r);
    made.answer = 0;
}

/*
 * Refusals, each naming what to change: per-GPU values (one request cannot place them), an SM
 * partition, the latency class outside pod-latency-namespaces, a template of that name that
 * asks for something else, no way to make templates, a claim of ours that is not ours.
 */
static void test_claims_refusals(void **state)
{
    static const struct {
        const char *pod, *ns, *want;
        int answer, code;
    } cases[] = {
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"0:8G,1:4G\"}}}", "n",
          "annotation gpuslice.io/memory: a claim gives each of the pod's GPUs the same slice",
          0, 422 },
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"8G,1:4G\"}}}", "n",
          "give one size", 0, 422 },
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/compute\":\"0:50,1:30\"}}}", "n",
          "annotation gpuslice.io/compute: a claim gives each of the pod's GPUs the same slice, "
          "so per-GPU values cannot be placed: give one percentage for all (e.g. 50)",
          0, 422 },
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"lots\"}}}", "n",
          "gpuslice.io/memory", 0, 422 },
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/sms\":\"50%\"}}}", "n",
          "annotation gpuslice.io/sms", 0, 422 },
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/priority\":\"latency\"}}}", "dev",
          "pods of namespace dev may not have", 0, 422 },
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"8G\"}}}", "n",
          "ResourceClaimTemplate n/gpuslice-m8192mi-n1: a template of that name", -EEXIST, 409 },
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"8G\"}},\"spec\":{"
          "\"containers\":[{\"name\":\"c\"}],\"resourceClaims\":[{\"name\":\"gpuslice\","
          "\"resourceClaimName\":\"x\"}]}}",
          "n", "a claim named gpuslice that is not gpuslice's", 0, 422 },
        { "{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
          "\"nvidia.com/gpu\":\"17\"}}}]}}",
          "n", "at most 16", 0, 422 },
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"8G\"}}}", "Bad_NS",
          "namespace", 0, 422 },
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char pod[1024];
        json_t *r;

        /* (A pod without containers gets one, so that only the case's fault is refused.) */
        if (strstr(cases[i].pod, "\"spec\""))
            snprintf(pod, sizeof(pod), "%s", cases[i].pod);
        else
            snprintf(pod, sizeof(pod), "%.*s,\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
                     (int)strlen(cases[i].pod) - 1, cases[i].pod);
        made.answer = cases[i].answer;
        r = claims_review(pod, cases[i].ns, 0);
        if (allowed(r) || !strstr(refusal(r), cases[i].want))
            fail_msg("case %zu: %s: allowed %d, \"%s\"; want \"%s\"", i, pod, allowed(r),
                     refusal(r) ? refusal(r) : "", cases[i].want);
        assert_int_equal(json_integer_value(json_object_get(
                             json_object_get(json_object_get(r, "response"), "status"), "code")),
                         cases[i].code);
        json_decref(r);
    }
    made.answer = 0;
    /* Without a way to make templates: refused, not let through without its claim. */
    {
        struct gd_webhook_conf c = claims_conf;
        char body[4096], err[512];
        json_t *r;

        c.ensure = NULL;
        snprintf(body, sizeof(body),
                 "{\"request\":{\"uid\":\"u\",\"namespace\":\"n\",\"object\":%s}}", slice_pod);
        r = gd_webhook_review(body, strlen(body), &c, err, sizeof(err));
        assert_non_null(r);
        assert_false(allowed(r));
        assert_non_null(strstr(refusal(r), "no API server"));
        json_decref(r);
    }
}

/* Which pods the claims mode leaves alone: not GPU pods, opted out, already in claim form. */
static void test_claims_leaves_alone(void **state)
{
    static const char *const pods[] = {
        "{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
        "{\"metadata\":{\"annotations\":{\"gpuslice.io/inject\":\"false\","
        "\"gpuslice.io/memory\":\"8G\"}},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
        /* a claim of its own from one of our templates: its author's form */
        "{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"8G\"}},\"spec\":{"
        "\"containers\":[{\"name\":\"c\",\"resources\":{\"claims\":[{\"name\":\"g\"}]}}],"
        "\"resourceClaims\":[{\"name\":\"g\",\"resourceClaimTemplateName\":\"gpuslice-n1\"}]}}",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(pods) / sizeof(pods[0]); i++) {
        json_t *r;

        made.calls = 0;
        r = claims_review(pods[i], "n", 0);
        assert_true(allowed(r));
        assert_null(patch_of(r));
        assert_int_equal(made.calls, 0);
        json_decref(r);
    }
}

/* The template's name: the same slice, the same name; memory rounded up to 256 MiB steps. */
static void test_claims_template_names(void **state)
{
    static const struct {
        const char *anns;
        const char *name;
    } cases[] = {
        { "\"gpuslice.io/memory\":\"8G\"", "gpuslice-m8192mi-n1" },
        { "\"gpuslice.io/memory\":\"8192M\"", "gpuslice-m8192mi-n1" },
        { "\"gpuslice.io/memory\":\"1M\"", "gpuslice-m256mi-n1" },
        { "\"gpuslice.io/memory\":\"256M\"", "gpuslice-m256mi-n1" },
        { "\"gpuslice.io/memory\":\"257M\"", "gpuslice-m512mi-n1" },
        { "\"tensor-fusion.ai/vram-limit\":\"1.5Gi\"", "gpuslice-m1536mi-n1" },
        { "\"gpuslice.io/compute\":\"25\"", "gpuslice-c25-n1" },
        { "\"gpuslice.io/memory\":\"2G\",\"gpuslice.io/priority\":\"latency\"",
          "gpuslice-m2048mi-n1-latency" },
        { "\"gpuslice.io/priority\":\"normal\"", "gpuslice-n1-normal" },
    };
    size_t i;

    (void)state;
    made.answer = 0;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char pod[512];
        json_t *r;

        snprintf(pod, sizeof(pod),
                 "{\"metadata\":{\"annotations\":{%s}},\"spec\":{\"containers\":[{\"name\":"
                 "\"c\"}]}}",
                 cases[i].anns);
        r = claims_review(pod, "prod", 0);
        assert_true(allowed(r));
        if (strcmp(made.name, cases[i].name) != 0)
            fail_msg("case %zu: %s: %s, want %s", i, cases[i].anns, made.name, cases[i].name);
        json_decref(r);
    }
    /* nvidia.com/gpu alone: the whole GPU (nothing asked: the capacities' defaults). */
    {
        json_t *r = claims_review("{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{"
                                  "\"limits\":{\"nvidia.com/gpu\":\"3\"}}}]}}",
                                  "prod", 0);

        assert_string_equal(made.name, "gpuslice-n3");
        assert_null(json_object_get(
            json_object_get(
                json_array_get(json_object_get(json_object_get(json_object_get(json_object_get(
                                                                   made.last, "spec"),
                                                                   "spec"),
                                                               "devices"),
                                               "requests"),
                               0),
                "exactly"),
            "capacity"));
        json_decref(r);
    }
}

/*
 * A template read back from the API server is the same when it asks the same, whatever the
 * server's defaults and the forms of its quantities; anything else is a difference.
 */
static void test_claims_template_same(void **state)
{
    struct gd_webhook_slice s = { 8192, 50, 1, GPUSLICE_PRIORITY_UNSET };
    json_t *ours = gd_webhook_template(&s, "n"), *have;
    json_t *ex;

    (void)state;
    assert_true(gd_webhook_template_same(ours, ours));
    have = json_deep_copy(ours);
    ex = json_object_get(
        json_array_get(json_object_get(json_object_get(json_object_get(json_object_get(have,
                                                                                       "spec"),
                                                                       "spec"),
                                                       "devices"),
                                       "requests"),
                       0),
        "exactly");
    json_object_del(ex, "allocationMode");
    json_object_del(ex, "count");
    json_object_set_new(json_object_get(json_object_get(ex, "capacity"), "requests"), "memory",
                        json_string("8Gi"));
    assert_true(gd_webhook_template_same(have, ours));
    json_object_set_new(json_object_get(json_object_get(ex, "capacity"), "requests"), "cores",
                        json_string("60"));
    assert_false(gd_webhook_template_same(have, ours));
    json_object_set_new(json_object_get(json_object_get(ex, "capacity"), "requests"), "cores",
                        json_string("50"));
    json_object_set_new(ex, "selectors", json_array());
    assert_false(gd_webhook_template_same(have, ours));
    json_object_del(ex, "selectors");
    json_object_set_new(ex, "count", json_integer(2));
    assert_false(gd_webhook_template_same(have, ours));
    json_decref(have);
    s.priority = GPUSLICE_PRIORITY_LATENCY;
    have = gd_webhook_template(&s, "n");
    assert_false(gd_webhook_template_same(have, ours));
    json_decref(have);
    json_decref(ours);
}

/* The status of a refusal: code and reason. */
static void check_refusal(const json_t *r, int code, const char *reason, const char *msg)
{
    const json_t *st = json_object_get(json_object_get(r, "response"), "status");

    assert_false(allowed(r));
    assert_int_equal(json_integer_value(json_object_get(st, "code")), code);
    assert_string_equal(json_string_value(json_object_get(st, "reason")), reason);
    if (!strstr(refusal(r), msg))
        fail_msg("\"%s\" lacks \"%s\"", refusal(r), msg);
}

/* nvidia.com/gpu up to the driver's 16 devices of a claim: 16 is a claim of 16, 17 is refused. */
static void test_claims_gpu_count_bounds(void **state)
{
    json_t *r;

    (void)state;
    made.answer = 0;
    made.calls = 0;
    r = claims_review("{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
                      "\"nvidia.com/gpu\":\"16\"}}}]}}",
                      "n", 0);
    assert_true(allowed(r));
    assert_int_equal(made.calls, 1);
    assert_string_equal(made.name, "gpuslice-n16");
    assert_int_equal(
        json_integer_value(json_object_get(
            json_object_get(
                json_array_get(
                    json_object_get(
                        json_object_get(json_object_get(json_object_get(made.last, "spec"), "spec"),
                                        "devices"),
                        "requests"),
                    0),
                "exactly"),
            "count")),
        16);
    assert_true(gd_webhook_template_same(made.last, made.last));
    json_decref(r);
    r = claims_review("{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
                      "\"nvidia.com/gpu\":\"17\"}}}]}}",
                      "n", 0);
    check_refusal(r, 422, "Invalid",
                  "resource nvidia.com/gpu: 17 GPUs in one claim; the driver gives at most 16");
    json_decref(r);
}

/*
 * In claims mode, gpuslice.io/inject: "true" asks the same as no annotation (a claim, never the
 * interposer's mounts); "false" opts out; another value is refused as in injection mode.
 */
static void test_claims_inject_annotation(void **state)
{
    static const char *const yes =
        "{\"metadata\":{\"annotations\":{\"gpuslice.io/inject\":\"true\","
        "\"gpuslice.io/memory\":\"4G\"}},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}";
    json_t *r, *p;
    const json_t *op;
    size_t i;
    int claims = 0;

    (void)state;
    made.answer = 0;
    made.calls = 0;
    r = claims_review(yes, "n", 0);
    assert_true(allowed(r));
    assert_int_equal(made.calls, 1);
    assert_string_equal(made.name, "gpuslice-m4096mi-n1");
    p = patch_of(r);
    assert_non_null(p);
    json_array_foreach(p, i, op)
    {
        const char *path = json_string_value(json_object_get(op, "path"));

        assert_null(strstr(path, "volume"));
        assert_null(strstr(path, "/env"));
        claims += strcmp(path, "/spec/resourceClaims/-") == 0;
    }
    assert_int_equal(claims, 1);
    json_decref(p);
    json_decref(r);
    made.calls = 0;
    r = claims_review("{\"metadata\":{\"annotations\":{\"gpuslice.io/inject\":\"yes\","
                      "\"gpuslice.io/memory\":\"4G\"}},\"spec\":{\"containers\":[{\"name\":"
                      "\"c\"}]}}",
                      "n", 0);
    check_refusal(r, 422, "Invalid",
                  "annotation gpuslice.io/inject: \"yes\": give \"true\" or \"false\"");
    assert_int_equal(made.calls, 0);
    json_decref(r);
}

/*
 * The namespace is the request's, else the pod's own; a DNS label of 1 to 63 characters that
 * neither starts nor ends with '-' (it goes into the template's URL).
 */
static void test_claims_namespace(void **state)
{
    static const char *const pod =
        "{\"metadata\":{\"namespace\":\"from-pod\",\"annotations\":{\"gpuslice.io/memory\":"
        "\"1G\"}},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}";
    char body[2048], ns[80], e[512];
    json_t *r;
    size_t i;
    static const char *const bad[] = { "-a", "a-", "a_b", "a.b", "A" };

    (void)state;
    made.answer = 0;
    snprintf(body, sizeof(body), "{\"request\":{\"uid\":\"u\",\"object\":%s}}", pod);
    r = gd_webhook_review(body, strlen(body), &claims_conf, e, sizeof(e));
    assert_non_null(r);
    assert_true(allowed(r));
    assert_string_equal(made.ns, "from-pod");
    json_decref(r);
    r = claims_review(pod, "from-req", 0);
    assert_true(allowed(r));
    assert_string_equal(made.ns, "from-req");
    json_decref(r);
    memset(ns, 'n', sizeof(ns));
    ns[63] = '\0';
    r = claims_review(pod, ns, 0);
    assert_true(allowed(r));
    assert_string_equal(made.ns, ns);
    json_decref(r);
    ns[63] = 'n';
    ns[64] = '\0';
    r = claims_review(pod, ns, 0);
    check_refusal(r, 422, "Invalid", "the pod's namespace \"");
    json_decref(r);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char want[128];

        r = claims_review(pod, bad[i], 0);
        snprintf(want, sizeof(want), "the pod's namespace \"%s\" is not a namespace's name",
                 bad[i]);
        check_refusal(r, 422, "Invalid", want);
        json_decref(r);
    }
    /* none at all */
    snprintf(body, sizeof(body),
             "{\"request\":{\"uid\":\"u\",\"object\":{\"metadata\":{\"annotations\":{"
             "\"gpuslice.io/memory\":\"1G\"}},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}}");
    r = gd_webhook_review(body, strlen(body), &claims_conf, e, sizeof(e));
    check_refusal(r, 422, "Invalid", "the pod's namespace \"\" is not a namespace's name");
    json_decref(r);
}

/* The template could not be made: a conflict is 409, anything else 500, each saying so. */
static void test_claims_template_failures(void **state)
{
    static const char *const pod = "{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":"
                                   "\"1G\"}},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}";
    json_t *r;

    (void)state;
    made.answer = -EEXIST;
    r = claims_review(pod, "n", 0);
    check_refusal(r, 409, "Conflict",
                  "ResourceClaimTemplate n/gpuslice-m1024mi-n1: a template of that name asks "
                  "for something else");
    json_decref(r);
    made.answer = -EIO;
    r = claims_review(pod, "n", 0);
    check_refusal(r, 500, "InternalError",
                  "ResourceClaimTemplate n/gpuslice-m1024mi-n1: it could not be made");
    json_decref(r);
    made.answer = 0;
}

/*
 * The review's envelope: a request's UID of up to 128 characters is answered under it; a longer
 * one, or no object, is no AdmissionReview. Objects other than pods pass untouched in both modes.
 */
static void test_review_envelope(void **state)
{
    char body[4096], uid[200], e[512];
    json_t *r;
    int mode;

    (void)state;
    memset(uid, 'u', sizeof(uid));
    uid[128] = '\0';
    snprintf(body, sizeof(body), "{\"request\":{\"uid\":\"%s\",\"object\":{}}}", uid);
    r = gd_webhook_review(body, strlen(body), &conf, e, sizeof(e));
    assert_non_null(r);
    assert_string_equal(json_string_value(json_object_get(r, "apiVersion")), "admission.k8s.io/v1");
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "AdmissionReview");
    assert_string_equal(json_string_value(json_object_get(json_object_get(r, "response"), "uid")),
                        uid);
    json_decref(r);
    uid[128] = 'u';
    uid[129] = '\0';
    snprintf(body, sizeof(body), "{\"request\":{\"uid\":\"%s\",\"object\":{}}}", uid);
    assert_null(gd_webhook_review(body, strlen(body), &conf, e, sizeof(e)));
    assert_non_null(strstr(e, "not an AdmissionReview"));
    snprintf(body, sizeof(body), "{\"request\":{\"uid\":\"u\",\"object\":[]}}");
    assert_null(gd_webhook_review(body, strlen(body), &conf, e, sizeof(e)));
    assert_non_null(strstr(e, "not an AdmissionReview"));
    for (mode = 0; mode < 2; mode++) {
        made.calls = 0;
        snprintf(body, sizeof(body),
                 "{\"request\":{\"uid\":\"u\",\"namespace\":\"n\",\"kind\":{\"kind\":"
                 "\"Deployment\"},\"object\":%s}}",
                 gpu_pod);
        r = gd_webhook_review(body, strlen(body), mode ? &claims_conf : &conf, e, sizeof(e));
        assert_non_null(r);
        assert_true(allowed(r));
        assert_null(json_object_get(json_object_get(r, "response"), "patch"));
        assert_int_equal(made.calls, 0);
        json_decref(r);
    }
}

/* What a template read back may say and still be ours: each bound of each field. */
static void test_claims_template_same_bounds(void **state)
{
    struct gd_webhook_slice s = { 256, 100, 16, GPUSLICE_PRIORITY_BACKGROUND };
    json_t *ours = gd_webhook_template(&s, "n");
    static const struct {
        const char *at, *key, *value; /* a string value set at a place of the template */
        int same;
    } cases[] = {
        { "requests", "memory", "256Mi", 1 },
        { "requests", "memory", "268435456", 1 },
        { "requests", "memory", "257Mi", 0 },
        { "requests", "memory", "0", 0 },
        { "requests", "memory", "lots", 0 },
        { "requests", "cores", "101", 0 },
        { "requests", "cores", "0", 0 },
        { "requests", "gpus", "1", 0 },
        { "exactly", "allocationMode", "All", 0 },
        { "exactly", "allocationMode", "ExactCount", 1 },
        { "exactly", "deviceClassName", "other.io", 0 },
        { "exactly", "selectors", "x", 0 },
        { "request", "name", "gpu2", 0 },
        { "request", "firstAvailable", "x", 0 },
        { "devices", "constraints", "x", 0 },
        { "parameters", "priority", "urgent", 0 },
        { "parameters", "priority", "latency", 0 },
        { "parameters", "weight", "5", 0 },
        { "opaque", "driver", "gpu.nvidia.com", 0 },
        { "config", "requests", "x", 0 },
    };
    size_t i;

    (void)state;
    assert_true(gd_webhook_template_same(ours, ours));
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *t = json_deep_copy(ours);
        json_t *devs =
                   json_object_get(json_object_get(json_object_get(t, "spec"), "spec"), "devices"),
               *req = json_array_get(json_object_get(devs, "requests"), 0),
               *ex = json_object_get(req, "exactly"),
               *rq = json_object_get(json_object_get(ex, "capacity"), "requests"),
               *c0 = json_array_get(json_object_get(devs, "config"), 0),
               *op = json_object_get(c0, "opaque"), *par = json_object_get(op, "parameters");
        json_t *at = strcmp(cases[i].at, "requests") == 0     ? rq
                     : strcmp(cases[i].at, "exactly") == 0    ? ex
                     : strcmp(cases[i].at, "request") == 0    ? req
                     : strcmp(cases[i].at, "devices") == 0    ? devs
                     : strcmp(cases[i].at, "parameters") == 0 ? par
                     : strcmp(cases[i].at, "opaque") == 0     ? op
                                                              : c0;

        assert_non_null(at);
        json_object_set_new(at, cases[i].key, json_string(cases[i].value));
        if (gd_webhook_template_same(t, ours) != cases[i].same)
            fail_msg("case %zu: %s.%s = %s: same %d", i, cases[i].at, cases[i].key, cases[i].value,
                     !cases[i].same);
        json_decref(t);
    }
    /* count: 1 to 16 */
    {
        static const json_int_t counts[] = { 0, 1, 16, 17 };
        struct gd_webhook_slice one = s;

        for (i = 0; i < 4; i++) {
            json_t *t = json_deep_copy(ours), *ex;

            ex = json_object_get(
                json_array_get(
                    json_object_get(
                        json_object_get(json_object_get(json_object_get(t, "spec"), "spec"),
                                        "devices"),
                        "requests"),
                    0),
                "exactly");
            json_object_set_new(ex, "count", json_integer(counts[i]));
            one.count = (uint32_t)counts[i];
            {
                json_t *want = gd_webhook_template(&one, "n");

                assert_int_equal(gd_webhook_template_same(t, want),
                                 counts[i] >= 1 && counts[i] <= 16);
                json_decref(want);
            }
            json_decref(t);
        }
    }
    json_decref(ours);
}
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_pod_gets_the_interposer),
        cmocka_unit_test(test_which_pods),
        cmocka_unit_test(test_injects_exactly_gpu_pods),
        cmocka_unit_test(test_marker_not_believed),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_claims_patch_gives_the_pod_its_claim),
        cmocka_unit_test(test_claims_hami_and_annotation_only),
        cmocka_unit_test(test_claims_dry_run_makes_nothing),
        cmocka_unit_test(test_claims_refusals),
        cmocka_unit_test(test_claims_leaves_alone),
        cmocka_unit_test(test_claims_template_names),
        cmocka_unit_test(test_claims_template_same),
        cmocka_unit_test(test_claims_gpu_count_bounds),
        cmocka_unit_test(test_claims_inject_annotation),
        cmocka_unit_test(test_claims_namespace),
        cmocka_unit_test(test_claims_template_failures),
        cmocka_unit_test(test_review_envelope),
        cmocka_unit_test(test_claims_template_same_bounds),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

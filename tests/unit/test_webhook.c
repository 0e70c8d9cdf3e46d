/*
 * The admission webhook's answers (the daemon's webhook.c): which pods get
 * the interposer, the JSON Patch that puts it in (decoded and applied by a
 * small JSON Patch "add" of the test's own), the opt-out, and the refusals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/podspec.h"
#include "daemon/webhook.h"

static const struct gd_webhook_conf conf = { "/var/lib/gpuslice/lib", "/run/gpuslice" };

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
        if (json_is_array(parent)) {
            assert_string_equal(last, "-");
            json_array_append(parent, json_object_get(op, "value"));
        } else {
            assert_null(json_object_get(parent, last)); /* add never replaces here */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_pod_gets_the_interposer),
        cmocka_unit_test(test_which_pods),
        cmocka_unit_test(test_injects_exactly_gpu_pods),
        cmocka_unit_test(test_marker_not_believed),
        cmocka_unit_test(test_refusals),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

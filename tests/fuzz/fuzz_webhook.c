/*
 * gd_webhook_review (the daemon's admission webhook) on any request body, in
 * both modes: injecting the interposer, and webhook-claims, its template's
 * creation stubbed (no network: the stub answers made, or a different one of
 * that name, by the input's length). Checked: an answer or an error, never
 * both nor neither; an answer is an AdmissionReview whose response is allowed
 * with a patch, allowed untouched, or refused with a message; a patch is
 * base64 of a JSON array of ops whose paths start with /spec/ or /metadata/,
 * "add" ops, and in claims mode "remove" ops of a container's nvidia.com
 * resources only, and no mounts; a template the claims mode asks for is named
 * gpuslice-..., fits a name, is one gd_webhook_template reads back, and is made
 * only for a pod allowed with a patch (or refused when the stub refuses).
 */
#include <errno.h>
#include <jansson.h>

#include "daemon/webhook.h"
#include "fuzz.h"

static int b64v(char c)
{
    const char *t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = c ? strchr(t, c) : NULL;

    return p ? (int)(p - t) : -1;
}

static int ensured, ensure_answer;

static int stub_ensure(const char *ns, const json_t *tmpl, void *arg, char *err, size_t errlen)
{
    const char *name =
        json_string_value(json_object_get(json_object_get(tmpl, "metadata"), "name"));

    (void)arg;
    FUZZ_CHECK(ns && *ns && strlen(ns) <= 63 && strspn(ns, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(ns),
               "namespace \"%s\" would go into a URL", ns ? ns : "(null)");
    FUZZ_CHECK(name && strncmp(name, "gpuslice-", 9) == 0 && strlen(name) <= 63 &&
                   strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(name),
               "template name \"%s\"", name ? name : "(null)");
    FUZZ_CHECK(gd_webhook_template_same(tmpl, tmpl), "template %s is not read back", name);
    ensured++;
    if (ensure_answer < 0)
        snprintf(err, errlen, "stubbed refusal");
    return ensure_answer;
}

/* One review under conf; the checks of the file's comment. */
static void one(const uint8_t *data, size_t size, const struct gd_webhook_conf *conf)
{
    char err[512];
    json_t *r, *resp, *ops, *op;
    const char *b;
    size_t n, i, o = 0;
    char *dec;

    err[0] = '\0';
    ensured = 0;
    r = gd_webhook_review((const char *)data, size, conf, err, sizeof(err));
    FUZZ_CHECK((r == NULL) == (err[0] != '\0'), "answer %p, err \"%s\"", (void *)r, err);
    FUZZ_CHECK(ensured <= 1, "%d templates for one pod", ensured);
    if (r == NULL)
        return;
    resp = json_object_get(r, "response");
    FUZZ_CHECK(json_is_object(resp) && json_is_boolean(json_object_get(resp, "allowed")),
               "no response");
    b = json_string_value(json_object_get(resp, "patch"));
    if (json_is_false(json_object_get(resp, "allowed")))
        FUZZ_CHECK(b == NULL && json_string_value(
                                    json_object_get(json_object_get(resp, "status"), "message")),
                   "a refusal without its message, or with a patch");
    else
        FUZZ_CHECK(!ensured || (ensure_answer == 0 && b), "a template made for a pod left as is");
    if (b) {
        n = strlen(b);
        FUZZ_CHECK(n % 4 == 0, "base64 of %zu characters", n);
        dec = malloc(n);
        for (i = 0; i < n; i += 4) {
            int a = b64v(b[i]), c = b64v(b[i + 1]), d = b[i + 2] == '=' ? 0 : b64v(b[i + 2]),
                e = b[i + 3] == '=' ? 0 : b64v(b[i + 3]);

            FUZZ_CHECK(a >= 0 && c >= 0 && d >= 0 && e >= 0, "not base64 at %zu", i);
            dec[o++] = (char)(a << 2 | c >> 4);
            if (b[i + 2] != '=')
                dec[o++] = (char)((c & 15) << 4 | d >> 2);
            if (b[i + 3] != '=')
                dec[o++] = (char)((d & 3) << 6 | e);
        }
        ops = json_loadb(dec, o, 0, NULL);
        free(dec);
        FUZZ_CHECK(json_is_array(ops) && json_array_size(ops) > 0, "the patch is no array");
        json_array_foreach(ops, i, op)
        {
            const char *path = json_string_value(json_object_get(op, "path"));
            const char *kind = json_string_value(json_object_get(op, "op"));

            FUZZ_CHECK(
                path && (strncmp(path, "/spec/", 6) == 0 || strncmp(path, "/metadata/", 10) == 0),
                "op %zu's path", i);
            FUZZ_CHECK(kind && (strcmp(kind, "add") == 0 ||
                                (conf->claims && strcmp(kind, "remove") == 0 &&
                                 strstr(path, "/resources/") && strstr(path, "/nvidia.com~1"))),
                       "op %zu is %s of %s", i, kind ? kind : "?", path);
            if (conf->claims)
                FUZZ_CHECK(!strstr(path, "volume") && !strstr(path, "/env"),
                           "the claims mode mounts or sets %s", path);
        }
        json_decref(ops);
    }
    json_decref(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct gd_webhook_conf conf = { .lib_dir = "/var/lib/gpuslice/lib",
                                                 .run_dir = "/run/gpuslice" };
    static const struct gd_webhook_conf claims = { .lib_dir = "/var/lib/gpuslice/lib",
                                                   .run_dir = "/run/gpuslice",
                                                   .claims = 1,
                                                   .latency_namespaces = "prod",
                                                   .ensure = stub_ensure };

    one(data, size, &conf);
    ensure_answer = size % 3 == 0 ? -EEXIST : size % 3 == 1 ? -EIO : 0;
    one(data, size, &claims);
    return 0;
}

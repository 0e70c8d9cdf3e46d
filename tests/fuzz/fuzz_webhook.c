/*
 * gd_webhook_review (the daemon's admission webhook) on any request body.
 * Checked: an answer or an error, never both nor neither; an answer is an
 * AdmissionReview whose response is allowed with a patch, allowed untouched,
 * or refused with a message; a patch is base64 of a JSON array of "add" ops
 * whose paths start with /spec/ or /metadata/.
 */
#include <jansson.h>

#include "daemon/webhook.h"
#include "fuzz.h"

static int b64v(char c)
{
    const char *t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = c ? strchr(t, c) : NULL;

    return p ? (int)(p - t) : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct gd_webhook_conf conf = { .lib_dir = "/var/lib/gpuslice/lib",
                                             .run_dir = "/run/gpuslice" };
    char err[512];
    json_t *r, *resp, *ops, *op;
    const char *b;
    size_t n, i, o = 0;
    char *dec;

    err[0] = '\0';
    r = gd_webhook_review((const char *)data, size, &conf, err, sizeof(err));
    FUZZ_CHECK((r == NULL) == (err[0] != '\0'), "answer %p, err \"%s\"", (void *)r, err);
    if (r == NULL)
        return 0;
    resp = json_object_get(r, "response");
    FUZZ_CHECK(json_is_object(resp) && json_is_boolean(json_object_get(resp, "allowed")),
               "no response");
    b = json_string_value(json_object_get(resp, "patch"));
    if (json_is_false(json_object_get(resp, "allowed")))
        FUZZ_CHECK(b == NULL && json_string_value(
                                    json_object_get(json_object_get(resp, "status"), "message")),
                   "a refusal without its message, or with a patch");
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

            FUZZ_CHECK(
                path && (strncmp(path, "/spec/", 6) == 0 || strncmp(path, "/metadata/", 10) == 0),
                "op %zu's path", i);
            FUZZ_CHECK(strcmp(json_string_value(json_object_get(op, "op")), "add") == 0,
                       "op %zu is not add", i);
        }
        json_decref(ops);
    }
    json_decref(r);
    return 0;
}

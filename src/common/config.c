/* Memory-limit configuration from the environment, with documented precedence. */
#include "common/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

const char *gs_env_get(char *const *env, const char *name)
{
    size_t n = strlen(name);

    for (; env && *env; env++)
        if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
            return *env + n + 1;
    return NULL;
}

/* HAMi-core's form: CUDA_DEVICE_MEMORY_LIMIT (all) and _<i> (device i). */
static int hami_memory(char *const *env, struct gs_limits *out, char *err, size_t errlen)
{
    const size_t plen = strlen(GS_ENV_HAMI_MEMORY);
    char *const *e;

    memset(out, 0, sizeof(*out));
    out->source = GS_ENV_HAMI_MEMORY;
    for (e = env; e && *e; e++) {
        const char *s = *e, *eq = strchr(s, '=');
        struct gs_limits one;
        char name[64];
        int r, index = -1;

        if (eq == NULL || strncmp(s, GS_ENV_HAMI_MEMORY, plen) != 0)
            continue;
        if (s + plen != eq) {
            const char *p = s + plen;
            if (*p != '_' || eq - p < 2 || eq - p > 4)
                continue; /* another variable that merely starts alike */
            index = 0;
            for (p++; p < eq; p++) {
                if (!isdigit((unsigned char)*p)) {
                    index = -2;
                    break;
                }
                index = index * 10 + (*p - '0');
            }
            if (index == -2)
                continue;
        }
        snprintf(name, sizeof(name), "%.*s", (int)(eq - s), s);
        if ((r = gs_parse_limit_list(eq + 1, GS_VALUE_SIZE, name, &one, err, errlen)) < 0)
            return r;
        if (one.n != 1 || one.e[0].key != GS_KEY_ALL) {
            snprintf(err, errlen, "%s: \"%s\" must be one size (%s)", name, eq + 1,
                     GS_SIZE_FORMS);
            return -EINVAL;
        }
        if (index >= 0) {
            one.e[0].key = GS_KEY_INDEX;
            one.e[0].index = index;
        }
        if (out->n >= GS_MAX_LIMIT_ENTRIES) {
            snprintf(err, errlen, "%s: too many per-device variables", GS_ENV_HAMI_MEMORY);
            return -E2BIG;
        }
        out->e[out->n++] = one.e[0];
    }
    return 0;
}

int gs_config_memory(char *const *env, struct gs_limits *out, char *err, size_t errlen)
{
    struct gs_limits own, tf, hami;
    const char *v;
    int r;

    memset(out, 0, sizeof(*out));
    memset(&own, 0, sizeof(own));
    memset(&tf, 0, sizeof(tf));
    if ((v = gs_env_get(env, GS_ENV_MEMORY)) != NULL &&
        (r = gs_parse_limit_list(v, GS_VALUE_SIZE, GS_ENV_MEMORY, &own, err, errlen)) < 0)
        return r;
    if ((v = gs_env_get(env, GS_ENV_TF_MEMORY)) != NULL &&
        (r = gs_parse_limit_json(v, GS_VALUE_SIZE, GS_ENV_TF_MEMORY, &tf, err, errlen)) < 0)
        return r;
    if ((r = hami_memory(env, &hami, err, errlen)) < 0)
        return r;
    if (own.n)
        *out = own;
    else if (tf.n)
        *out = tf;
    else if (hami.n)
        *out = hami;
    return 0;
}

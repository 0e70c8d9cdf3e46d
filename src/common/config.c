/* Limits from the environment, with documented precedence. */
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

/*
 * HAMi-core's form: BASE (all devices) and BASE_<i> (device i), one value
 * each. For percentages HAMi-core reads 0 as "no ceiling"; so do we.
 */
static int hami_list(char *const *env, const char *base, enum gs_value_kind kind,
                     struct gs_limits *out, char *err, size_t errlen)
{
    const size_t plen = strlen(base);
    char *const *e;

    memset(out, 0, sizeof(*out));
    out->source = base;
    for (e = env; e && *e; e++) {
        const char *s = *e, *eq = strchr(s, '=');
        struct gs_limits one;
        char name[64];
        int r, index = -1;

        if (eq == NULL || strncmp(s, base, plen) != 0)
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
        if (kind == GS_VALUE_PERCENT && strcmp(eq + 1, "0") == 0) {
            memset(&one, 0, sizeof(one));
            one.n = 1; /* value 0: no ceiling, and it overrides a default */
        } else if ((r = gs_parse_limit_list(eq + 1, kind, name, &one, err, errlen)) < 0) {
            return r;
        }
        if (one.n != 1 || one.e[0].key != GS_KEY_ALL) {
            snprintf(err, errlen, "%s: \"%s\" must be one %s (%s)", name, eq + 1,
                     kind == GS_VALUE_SIZE ? "size" : "percentage",
                     kind == GS_VALUE_SIZE ? GS_SIZE_FORMS
                                           : "an integer from 0 (no ceiling) to 100");
            return -EINVAL;
        }
        if (index >= 0) {
            one.e[0].key = GS_KEY_INDEX;
            one.e[0].index = index;
        }
        if (out->n >= GS_MAX_LIMIT_ENTRIES) {
            snprintf(err, errlen, "%s: too many per-device variables", base);
            return -E2BIG;
        }
        out->e[out->n++] = one.e[0];
    }
    return 0;
}

/* The first source set wins; every one that is set must still parse. */
static int config_limits(char *const *env, enum gs_value_kind kind, const char *own_name,
                         const char *tf_name, const char *hami_name, struct gs_limits *out,
                         char *err, size_t errlen)
{
    struct gs_limits own, tf, hami;
    const char *v;
    int r;

    memset(out, 0, sizeof(*out));
    memset(&own, 0, sizeof(own));
    memset(&tf, 0, sizeof(tf));
    if ((v = gs_env_get(env, own_name)) != NULL &&
        (r = gs_parse_limit_list(v, kind, own_name, &own, err, errlen)) < 0)
        return r;
    if ((v = gs_env_get(env, tf_name)) != NULL &&
        (r = gs_parse_limit_json(v, kind, tf_name, &tf, err, errlen)) < 0)
        return r;
    if ((r = hami_list(env, hami_name, kind, &hami, err, errlen)) < 0)
        return r;
    if (own.n)
        *out = own;
    else if (tf.n)
        *out = tf;
    else if (hami.n)
        *out = hami;
    return 0;
}

int gs_config_memory(char *const *env, struct gs_limits *out, char *err, size_t errlen)
{
    return config_limits(env, GS_VALUE_SIZE, GS_ENV_MEMORY, GS_ENV_TF_MEMORY,
                         GS_ENV_HAMI_MEMORY, out, err, errlen);
}

int gs_config_compute(char *const *env, struct gs_limits *out, char *err, size_t errlen)
{
    return config_limits(env, GS_VALUE_PERCENT, GS_ENV_COMPUTE, GS_ENV_TF_COMPUTE,
                         GS_ENV_HAMI_COMPUTE, out, err, errlen);
}

/* Limits from the environment, with documented precedence. */
#include "common/config.h"
#include "common/error.h"
#include "gpuslice/tenant_abi.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
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
 * The device index of a HAMi-core variable's name: name is BASE (all
 * devices: *index -1) or BASE_<index>, index 0..GS_MAX_DEVICE_INDEX in
 * decimal without leading zeros (HAMi-core itself reads BASE_0..BASE_15,
 * formatted with "%d", so no other spelling can be meant). Returns 1 for a
 * name of HAMi-core's, 0 for a name that merely starts alike, -EINVAL for a
 * malformed one. Everything from "BASE_" on is HAMi-core's namespace: a name
 * there that it would not read (CUDA_DEVICE_MEMORY_LIMIT_O, _0x, _00, a bare
 * _) is a typo that would leave a device unlimited, so it is refused. A name
 * that continues BASE without the underscore (CUDA_DEVICE_MEMORY_LIMITS) is
 * another variable; HAMi-core's other variables (CUDA_DEVICE_MEMORY_SHARED_
 * CACHE, CUDA_DEVICE_SM_LIMIT's neighbours) do not start with BASE at all.
 */
static int hami_index(const char *name, size_t len, const char *base, size_t plen, int *index)
{
    size_t i;
    int v = 0;

    if (len < plen || strncmp(name, base, plen) != 0)
        return 0;
    if (len == plen) {
        *index = -1;
        return 1;
    }
    if (name[plen] != '_')
        return 0;
    if (len == plen + 1 || len > plen + 4 || (name[plen + 1] == '0' && len > plen + 2))
        return -EINVAL;
    for (i = plen + 1; i < len; i++) {
        if (!isdigit((unsigned char)name[i]))
            return -EINVAL;
        v = v * 10 + (name[i] - '0');
    }
    *index = v;
    return 1;
}

/*
 * HAMi-core's form: BASE (all devices) and BASE_<i> (device i), one value
 * each, in HAMi-core's units (plain numbers are bytes). For percentages
 * HAMi-core reads 0 as "no ceiling"; so do we. A variable given twice in env
 * counts once, by its first value, as getenv (which HAMi-core uses) does.
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
        int r, i, dup = 0, index = -1;

        if (eq == NULL || (r = hami_index(s, (size_t)(eq - s), base, plen, &index)) == 0)
            continue;
        snprintf(name, sizeof(name), "%.*s", (int)(eq - s), s);
        if (r < 0) {
            gs_set_error(err, errlen,
                         "%s%s: not a variable HAMi-core reads (use %s for every device, or "
                         "%s_<index> for one, the index from 0 to %d without leading zeros, "
                         "e.g. %s_0)",
                         name, (size_t)(eq - s) >= sizeof(name) ? "..." : "", base, base,
                         GS_MAX_DEVICE_INDEX, base);
            return -EINVAL;
        }
        if (kind == GS_VALUE_PERCENT && strcmp(eq + 1, "0") == 0) {
            memset(&one, 0, sizeof(one));
            one.n = 1; /* value 0: no ceiling, and it overrides a default */
        } else if ((r = gs_parse_limit_list(eq + 1, kind, name, &one, err, errlen)) < 0) {
            return r;
        }
        if (one.n != 1 || one.e[0].key != GS_KEY_ALL) {
            gs_set_error(err, errlen, "%s: \"%s\" must be one %s (%s)", name, eq + 1,
                         kind == GS_VALUE_SIZE ? "size" : "percentage",
                         kind == GS_VALUE_SIZE ? "use e.g. 8g, 512m or 1073741824 (bytes)"
                                               : "an integer from 0 (no ceiling) to 100");
            return -EINVAL;
        }
        if (index >= 0) {
            one.e[0].key = GS_KEY_INDEX;
            one.e[0].index = index;
        }
        for (i = 0; i < out->n; i++)
            if (out->e[i].key == one.e[0].key &&
                (one.e[0].key == GS_KEY_ALL || out->e[i].index == one.e[0].index))
                dup = 1;
        if (dup)
            continue;
        if (out->n >= GS_MAX_LIMIT_ENTRIES) {
            gs_set_error(err, errlen, "%s: more than %d per-device variables", base,
                         GS_MAX_LIMIT_ENTRIES);
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
    return config_limits(env, GS_VALUE_SIZE, GS_ENV_MEMORY, GS_ENV_TF_MEMORY, GS_ENV_HAMI_MEMORY,
                         out, err, errlen);
}

int gs_config_compute(char *const *env, struct gs_limits *out, char *err, size_t errlen)
{
    return config_limits(env, GS_VALUE_PERCENT, GS_ENV_COMPUTE, GS_ENV_TF_COMPUTE,
                         GS_ENV_HAMI_COMPUTE, out, err, errlen);
}

int gs_config_shared_cache(char *const *env, const char **path, char *err, size_t errlen)
{
    const char *v = gs_env_get(env, GS_ENV_HAMI_SHARED_CACHE), *base;
    size_t n;

    *path = NULL;
    if (v == NULL || *v == '\0')
        return 0;
    n = strlen(v);
    base = strrchr(v, '/');
    if (v[0] != '/' || n >= PATH_MAX || v[n - 1] == '/' || strcmp(base, "/.") == 0 ||
        strcmp(base, "/..") == 0) {
        gs_set_error(err, errlen,
                     "%s: \"%.200s%s\" is not a file's absolute path (use one like "
                     "/usr/local/vgpu/job.cache, the same for every process that is to share "
                     "the limits)",
                     GS_ENV_HAMI_SHARED_CACHE, v, n > 200 ? "..." : "");
        return -EINVAL;
    }
    *path = v;
    return 0;
}

int gs_config_sched(char *const *env, uint32_t *priority, uint32_t *weight, char *err,
                    size_t errlen)
{
    const char *v;
    uint32_t n;

    *priority = GPUSLICE_PRIORITY_UNSET;
    *weight = 0;
    if ((v = gs_env_get(env, GS_ENV_PRIORITY)) != NULL && gs_parse_priority(v, priority) < 0) {
        snprintf(err, errlen,
                 "%s: \"%s\" is not a priority class (use latency, normal or "
                 "background)",
                 GS_ENV_PRIORITY, v);
        return -EINVAL;
    }
    if ((v = gs_env_get(env, GS_ENV_WEIGHT)) != NULL && gs_parse_weight(v, weight) < 0) {
        snprintf(err, errlen, "%s: \"%s\" is not a weight (use an integer from 1 to %u)",
                 GS_ENV_WEIGHT, v, GPUSLICE_WEIGHT_MAX);
        return -EINVAL;
    }
    if ((v = gs_env_get(env, GS_ENV_YIELD_SMS)) != NULL && gs_parse_yield_sms(v, &n) < 0) {
        snprintf(err, errlen,
                 "%s: \"%s\" is not a count of SMs (use an integer from 2 to %u: the SMs a "
                 "lower class keeps while a higher one is active)",
                 GS_ENV_YIELD_SMS, v, GS_YIELD_SMS_MAX);
        return -EINVAL;
    }
    return 0;
}

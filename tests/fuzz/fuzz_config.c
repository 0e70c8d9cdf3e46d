/*
 * gs_config_memory and gs_config_compute on synthesized environments: each
 * line of the input is one variable, its first byte picking a name (or
 * prefix) among those gpuslice, vgpu.rs and HAMi-core read, the rest the
 * name's tail and value. Checked: values in range; the documented precedence
 * (the first source set is used alone and equals that variable parsed by
 * itself); every variable that is set is still validated; a name in
 * HAMi-core's namespace that is not BASE or BASE_<index> is refused; a HAMi
 * entry is what the first of its variables says, as getenv reads it. And
 * gs_config_shared_cache: an absolute path of a file or nothing, else refused
 * with a message.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>

#include "common/config.h"
#include "limits_check.h"

#define MAX_VARS 48

static const char *const prefixes[] = {
    "GPUSLICE_MEMORY_LIMIT=",
    "TENSOR_FUSION_CUDA_MEM_LIMIT=",
    "CUDA_DEVICE_MEMORY_LIMIT=",
    "CUDA_DEVICE_MEMORY_LIMIT_",
    "GPUSLICE_COMPUTE_LIMIT=",
    "TENSOR_FUSION_CUDA_UP_LIMIT=",
    "CUDA_DEVICE_SM_LIMIT=",
    "CUDA_DEVICE_SM_LIMIT_",
    "CUDA_DEVICE_MEMORY_LIMIT",
    "CUDA_DEVICE_SM_LIMIT",
    "CUDA_DEVICE_MEMORY_SHARED_CACHE=",
    "PATH=",
    "",
};
#define NPREFIX (sizeof(prefixes) / sizeof(prefixes[0]))

/* -1: not HAMi's; -2: in its namespace but malformed; else the index (BASE alone: 1000). */
static int hami_name(const char *var, const char *base)
{
    size_t plen = strlen(base), len = strcspn(var, "=");
    const char *p = var + plen;
    size_t digits;

    if (var[len] != '=' || len < plen || strncmp(var, base, plen) != 0)
        return -1;
    if (len == plen)
        return 1000;
    if (*p != '_')
        return -1;
    p++;
    digits = len - plen - 1;
    if (digits < 1 || digits > 3 || (p[0] == '0' && digits > 1))
        return -2;
    for (size_t i = 0; i < digits; i++)
        if (!isdigit((unsigned char)p[i]))
            return -2;
    return atoi(p);
}

/* The index entry (or the default) of l, or NULL. */
static const struct gs_limit_entry *entry_for(const struct gs_limits *l, int index)
{
    for (int i = 0; i < l->n; i++)
        if ((index == 1000 && l->e[i].key == GS_KEY_ALL) ||
            (index < 1000 && l->e[i].key == GS_KEY_INDEX && l->e[i].index == index))
            return &l->e[i];
    return NULL;
}

static void check(char **env, enum gs_value_kind kind)
{
    const int mem = kind == GS_VALUE_SIZE;
    const char *own_name = mem ? GS_ENV_MEMORY : GS_ENV_COMPUTE;
    const char *tf_name = mem ? GS_ENV_TF_MEMORY : GS_ENV_TF_COMPUTE;
    const char *hami = mem ? GS_ENV_HAMI_MEMORY : GS_ENV_HAMI_COMPUTE;
    const char *own = gs_env_get(env, own_name), *tf = gs_env_get(env, tf_name);
    struct gs_limits l, alone;
    char err[512] = "", err2[512];
    int r, malformed = 0, i;

    r = mem ? gs_config_memory(env, &l, err, sizeof(err))
            : gs_config_compute(env, &l, err, sizeof(err));
    for (i = 0; env[i]; i++)
        malformed |= hami_name(env[i], hami) == -2;
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL || r == -E2BIG, "%d", r);
        FUZZ_CHECK(err[0] != '\0', "refused without a message");
        return;
    }
    FUZZ_CHECK(r == 0, "%d", r);
    FUZZ_CHECK(!malformed, "a malformed %s_… name was accepted", hami);
    if (own)
        FUZZ_CHECK(gs_parse_limit_list(own, kind, own_name, &alone, err2, sizeof(err2)) == 0,
                   "%s=%s accepted in the environment, refused alone: %s", own_name, own, err2);
    if (tf)
        FUZZ_CHECK(gs_parse_limit_json(tf, kind, tf_name, &alone, err2, sizeof(err2)) == 0,
                   "%s=%s accepted in the environment, refused alone: %s", tf_name, tf, err2);
    for (i = 0; env[i]; i++) {
        const char *v = strchr(env[i], '=') + 1;
        if (hami_name(env[i], hami) >= 0 && (mem || strcmp(v, "0") != 0))
            FUZZ_CHECK(gs_parse_limit_list(v, kind, "x", &alone, err2, sizeof(err2)) == 0 &&
                           alone.n == 1 && alone.e[0].key == GS_KEY_ALL,
                       "%s accepted in the environment, its value refused: %s", env[i], err2);
    }
    if (l.n == 0) {
        FUZZ_CHECK(own == NULL, "%s=%s set, no limit", own_name, own);
        return;
    }
    if (own) {
        gs_parse_limit_list(own, kind, own_name, &alone, err2, sizeof(err2));
        FUZZ_CHECK(strcmp(l.source, own_name) == 0, "source %s though %s is set", l.source,
                   own_name);
        check_same(&alone, &l, own, "the environment");
    } else if (tf && gs_parse_limit_json(tf, kind, tf_name, &alone, err2, sizeof(err2)) == 0 &&
               alone.n > 0) {
        FUZZ_CHECK(strcmp(l.source, tf_name) == 0, "source %s though %s is set", l.source, tf_name);
        check_same(&alone, &l, tf, "the environment");
    } else {
        FUZZ_CHECK(strcmp(l.source, hami) == 0, "source %s", l.source);
        /* Every entry comes from the first variable of its name, and each name has one. */
        for (i = 0; env[i]; i++) {
            int index = hami_name(env[i], hami), first = 1;
            const struct gs_limit_entry *e;
            for (int j = 0; j < i; j++)
                if (strcspn(env[j], "=") == strcspn(env[i], "=") &&
                    strncmp(env[j], env[i], strcspn(env[i], "=")) == 0)
                    first = 0;
            if (index < 0 || !first)
                continue;
            e = entry_for(&l, index);
            FUZZ_CHECK(e != NULL, "%s has no entry", env[i]);
            if (strcmp(strchr(env[i], '=') + 1, "0") == 0 && !mem) {
                FUZZ_CHECK(e->value == 0, "%s is not 'no ceiling'", env[i]);
            } else {
                FUZZ_CHECK(gs_parse_limit_list(strchr(env[i], '=') + 1, kind, "x", &alone, err2,
                                               sizeof(err2)) == 0 &&
                               alone.n == 1 && alone.e[0].value == e->value,
                           "%s does not give its entry's value %llu", env[i],
                           (unsigned long long)e->value);
            }
        }
    }
    check_entries(&l, kind, strcmp(l.source, hami) == 0 && !mem, "the environment");
}

/* HAMi's shared file: what gs_config_shared_cache uses is the first value, and a usable one. */
static void check_shared_cache(char **env)
{
    const char *v = gs_env_get(env, GS_ENV_HAMI_SHARED_CACHE), *p = "unset", *base;
    char err[512] = "";
    size_t n;
    int r = gs_config_shared_cache(env, &p, err, sizeof(err)), usable;

    if (v == NULL || *v == '\0') {
        FUZZ_CHECK(r == 0 && p == NULL, "unset or empty: %d %p", r, (const void *)p);
        return;
    }
    n = strlen(v);
    base = strrchr(v, '/');
    usable = v[0] == '/' && n < PATH_MAX && v[n - 1] != '/' && strcmp(base, "/.") != 0 &&
             strcmp(base, "/..") != 0;
    if (usable) {
        FUZZ_CHECK(r == 0 && p == v, "%s refused: %s", v, err);
    } else {
        FUZZ_CHECK(r == -EINVAL && p == NULL && strstr(err, GS_ENV_HAMI_SHARED_CACHE) == err,
                   "%s: %d, \"%s\"", v, r, err);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *env[MAX_VARS + 1];
    size_t pos = 0;
    int n = 0;

    while (pos < size && n < MAX_VARS) {
        const uint8_t *nl = memchr(data + pos, '\n', size - pos);
        size_t len = nl ? (size_t)(nl - (data + pos)) : size - pos, plen;
        const char *prefix;

        if (len == 0) {
            pos++;
            continue;
        }
        prefix = prefixes[data[pos] % NPREFIX];
        plen = strlen(prefix);
        env[n] = malloc(plen + len);
        if (env[n] == NULL)
            abort();
        memcpy(env[n], prefix, plen);
        memcpy(env[n] + plen, data + pos + 1, len - 1);
        env[n][plen + len - 1] = '\0';
        if (strlen(env[n]) < plen + len - 1 || strchr(env[n], '=') == NULL)
            free(env[n]); /* a NUL inside, or not NAME=value: an environment has neither */
        else
            n++;
        pos += len + 1;
    }
    env[n] = NULL;
    check(env, GS_VALUE_SIZE);
    check(env, GS_VALUE_PERCENT);
    check_shared_cache(env);
    while (n > 0)
        free(env[--n]);
    return 0;
}

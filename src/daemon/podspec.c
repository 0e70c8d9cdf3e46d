/*
 * A pod's GPU limits from its object (podspec.h). The pod's author controls
 * every string here: each is checked, and a bad one is an error naming it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "daemon/podspec.h"
#include "gpuslice/tenant_abi.h"

/* The annotation's string, NULL if the pod has none; -EINVAL (err) if it is not a string. */
static int annotation(const json_t *pod, const char *name, const char **val, char *err,
                      size_t errlen)
{
    const json_t *a = json_object_get(json_object_get(pod, "metadata"), "annotations"), *v;

    *val = NULL;
    if (!a || !(v = json_object_get(a, name)))
        return 0;
    if (!json_is_string(v)) {
        snprintf(err, errlen, "annotation %s is not a string", name);
        return -EINVAL;
    }
    *val = json_string_value(v);
    return 0;
}

/* The containers' lists of a pod's spec whose resources count (ephemeral ones have none). */
static const char *const container_lists[] = { "containers", "initContainers" };

/*
 * What the pod asks of resource limit name (a quantity, times unit), as the scheduler counts
 * a pod's request: the sum over its containers, or the most one init container asks when
 * that is more (init containers run one at a time, before the others). found is set when any
 * container has it; -EINVAL (err) for a bad one.
 */
static int container_sum(const json_t *pod, const char *name, uint64_t unit, uint64_t max,
                         const char *forms, uint64_t *sum, int *found, char *err, size_t errlen)
{
    const json_t *c;
    uint64_t init = 0;
    size_t i, k;

    *sum = 0;
    *found = 0;
    for (k = 0; k < 2; k++)
        json_array_foreach(json_object_get(json_object_get(pod, "spec"), container_lists[k]), i, c)
        {
            const json_t *v =
                json_object_get(json_object_get(json_object_get(c, "resources"), "limits"), name);
            const char *cname = json_string_value(json_object_get(c, "name"));
            uint64_t q;

            if (!v)
                continue;
            if (!json_is_string(v) || gs_parse_quantity(json_string_value(v), &q) < 0 || q == 0 ||
                q > max / unit) {
                snprintf(err, errlen, "resource %s of %s %s: \"%.64s\" is not %s", name,
                         k ? "init container" : "container", cname ? cname : "?",
                         json_is_string(v) ? json_string_value(v) : "?", forms);
                return -EINVAL;
            }
            *found = 1;
            if (k == 1) {
                init = q * unit > init ? q * unit : init;
                continue;
            }
            if (q * unit > max - *sum) {
                snprintf(err, errlen,
                         "resource %s: the pod's containers ask for more than %llu in all", name,
                         (unsigned long long)(max / unit));
                return -EINVAL;
            }
            *sum += q * unit;
        }
    if (init > *sum)
        *sum = init;
    return 0;
}

/* The annotations and container resources that make a pod a GPU pod (gd_pod_wants_gpus). */
static const char *const gpu_annotations[] = { GD_ANN_MEMORY, GD_ANN_COMPUTE, GD_ANN_PRIORITY,
                                               GD_ANN_SMS,    GD_TF_VRAM,     GD_TF_COMPUTE,
                                               GD_TF_QOS };
static const char *const gpu_resources[] = { GD_NVIDIA_GPU, GD_HAMI_MEM, GD_HAMI_CORES,
                                             GD_HAMI_PRIORITY };

int gd_pod_has_claim(const json_t *pod)
{
    const json_t *rc;
    size_t i;

    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "resourceClaims"), i, rc)
    {
        const char *n = json_string_value(json_object_get(rc, "name"));
        const char *t = json_string_value(json_object_get(rc, "resourceClaimTemplateName"));

        if (n && t && strcmp(n, GD_POD_CLAIM) == 0 &&
            strncmp(t, GD_POD_CLAIM_TEMPLATE_PREFIX, strlen(GD_POD_CLAIM_TEMPLATE_PREFIX)) == 0)
            return 1;
    }
    return 0;
}

int gd_pod_wants_gpus(const json_t *pod)
{
    const json_t *anns = json_object_get(json_object_get(pod, "metadata"), "annotations"), *c;
    size_t i, k, r;

    for (k = 0; k < 2; k++)
        json_array_foreach(json_object_get(json_object_get(pod, "spec"), container_lists[k]), i, c)
        {
            const json_t *res = json_object_get(c, "resources");

            for (r = 0; r < sizeof(gpu_resources) / sizeof(gpu_resources[0]); r++)
                if (json_object_get(json_object_get(res, "limits"), gpu_resources[r]) ||
                    json_object_get(json_object_get(res, "requests"), gpu_resources[r]))
                    return 1;
        }
    /*
     * A pod in the webhook's claim form is no annotation tenant: its processes join its claim's
     * tenant (dra.c, gd_dra_tenant_of_pod), held to what the scheduler allocated to the claim.
     * The trust point: anyone who writes pods can add such a claim by hand (or a template named
     * gpuslice-*), and so escape the tenant its annotations would make; what it gets is exactly
     * the claim's allocation, never more: a claim of our driver is prepared as a tenant of its
     * consumed capacity, and a GPU of another driver or of the device plugin comes with what
     * that one allocated. A pod that also asks a device plugin for a GPU (above) stays a GPU pod
     * (a tenant by its annotations): that GPU is not the claim's.
     */
    if (gd_pod_has_claim(pod))
        return 0;
    for (k = 0; k < sizeof(gpu_annotations) / sizeof(gpu_annotations[0]); k++)
        if (json_object_get(anns, gpu_annotations[k]))
            return 1;
    /*
     * Any other resource claim: a claim of NVIDIA's driver (gpu.nvidia.com) is a GPU the pod
     * names only there, and which driver a claim is of cannot be told from the pod (nvclaim.h).
     */
    if (json_array_size(json_object_get(json_object_get(pod, "spec"), "resourceClaims")) > 0)
        return 1;
    return 0;
}

static void one_limit(struct gs_limits *l, uint64_t value, const char *source)
{
    memset(l, 0, sizeof(*l));
    l->n = 1;
    l->e[0].key = GS_KEY_ALL;
    l->e[0].value = value;
    l->source = source;
}

/* A TensorFusion or HAMi priority: GPUSLICE_PRIORITY_*, or -EINVAL. */
static int qos_class(const char *s, uint32_t *out)
{
    static const struct {
        const char *name;
        uint32_t prio;
    } qos[] = { { "low", GPUSLICE_PRIORITY_BACKGROUND },
                { "medium", GPUSLICE_PRIORITY_NORMAL },
                { "high", GPUSLICE_PRIORITY_LATENCY },
                { "critical", GPUSLICE_PRIORITY_LATENCY } };
    size_t i;

    for (i = 0; i < sizeof(qos) / sizeof(qos[0]); i++)
        if (strcasecmp(s, qos[i].name) == 0) {
            *out = qos[i].prio;
            return 0;
        }
    return -EINVAL;
}

/*
 * HAMi's nvidia.com/priority over the pod's containers: 0 (high) in any makes the pod latency,
 * else 1 (low) background; *found 0 if none has it; -EINVAL (err) for another value.
 */
static int hami_priority(const json_t *pod, uint32_t *prio, int *found, char *err, size_t errlen)
{
    const json_t *c;
    size_t i, k;

    *found = 0;
    for (k = 0; k < 2; k++)
        json_array_foreach(json_object_get(json_object_get(pod, "spec"), container_lists[k]), i, c)
        {
            const json_t *v = json_object_get(
                json_object_get(json_object_get(c, "resources"), "limits"), GD_HAMI_PRIORITY);
            const char *cname = json_string_value(json_object_get(c, "name")), *sv;

            if (!v)
                continue;
            sv = json_string_value(v);
            if (!sv || (strcmp(sv, "0") != 0 && strcmp(sv, "1") != 0)) {
                snprintf(err, errlen,
                         "resource %s of container %s: \"%.64s\" is not 0 (high) or 1 (low)",
                         GD_HAMI_PRIORITY, cname ? cname : "?", sv ? sv : "?");
                return -EINVAL;
            }
            if (!*found || sv[0] == '0')
                *prio = sv[0] == '0' ? GPUSLICE_PRIORITY_LATENCY : GPUSLICE_PRIORITY_BACKGROUND;
            *found = 1;
        }
    return 0;
}

/* An annotation in the CLI's list form (kind), into l; -EINVAL with err. */
static int own_list(const char *val, const char *name, enum gs_value_kind kind, struct gs_limits *l,
                    char *err, size_t errlen)
{
    char msg[384];

    if (gs_parse_limit_list(val, kind, name, l, msg, sizeof(msg)) < 0) {
        snprintf(err, errlen, "annotation %s", msg);
        return -EINVAL;
    }
    l->source = name;
    return 0;
}

int gd_pod_spec(const json_t *pod, struct gd_pod_spec *out, char *err, size_t errlen)
{
    const char *own_mem, *own_comp, *own_prio, *own_sms, *tf_vram, *tf_comp, *tf_qos;
    struct gs_limits l;
    uint64_t mem, cores, q;
    int has_mem, has_cores, has_prio, share;
    uint32_t p;

    memset(out, 0, sizeof(*out));
    out->priority = GPUSLICE_PRIORITY_UNSET;
    if (!json_is_object(pod)) {
        snprintf(err, errlen, "the pod is not a JSON object");
        return -EINVAL;
    }
    if (annotation(pod, GD_ANN_MEMORY, &own_mem, err, errlen) < 0 ||
        annotation(pod, GD_ANN_COMPUTE, &own_comp, err, errlen) < 0 ||
        annotation(pod, GD_ANN_PRIORITY, &own_prio, err, errlen) < 0 ||
        annotation(pod, GD_ANN_SMS, &own_sms, err, errlen) < 0 ||
        annotation(pod, GD_TF_VRAM, &tf_vram, err, errlen) < 0 ||
        annotation(pod, GD_TF_COMPUTE, &tf_comp, err, errlen) < 0 ||
        annotation(pod, GD_TF_QOS, &tf_qos, err, errlen) < 0)
        return -EINVAL;
    /* Every form is checked, lowest precedence first, so the highest that is there counts. */
    if (container_sum(pod, GD_HAMI_MEM, 1ULL << 20, UINT64_MAX, "a count of MiB, e.g. 4096", &mem,
                      &has_mem, err, errlen) < 0 ||
        container_sum(pod, GD_HAMI_CORES, 1, 100, "a percentage from 1 to 100", &cores, &has_cores,
                      err, errlen) < 0 ||
        hami_priority(pod, &p, &has_prio, err, errlen) < 0 ||
        container_sum(pod, GD_NVIDIA_GPU, 1, 1024, "a whole number of GPUs", &q, &share, err,
                      errlen) < 0)
        return -EINVAL;
    out->gpus = (uint32_t)q;
    if (has_mem)
        one_limit(&out->memory, mem, GD_HAMI_MEM);
    if (has_cores)
        one_limit(&out->compute, cores, GD_HAMI_CORES);
    if (has_prio) {
        out->priority = p;
        out->priority_from = GD_HAMI_PRIORITY;
    }
    if (tf_vram) {
        if (gs_parse_quantity(tf_vram, &q) < 0 || q < GS_MIN_MEMORY_LIMIT) {
            snprintf(err, errlen, "annotation %s: \"%.64s\" is not %s of at least 1Mi", GD_TF_VRAM,
                     tf_vram, GS_QUANTITY_FORMS);
            return -EINVAL;
        }
        one_limit(&out->memory, q, GD_TF_VRAM);
    }
    if (tf_comp) {
        if (gs_parse_share(tf_comp, &share) < 0) {
            snprintf(err, errlen, "annotation %s: \"%.64s\" is not a percentage from 1 to 100",
                     GD_TF_COMPUTE, tf_comp);
            return -EINVAL;
        }
        one_limit(&out->compute, (uint64_t)share, GD_TF_COMPUTE);
    }
    if (tf_qos) {
        if (qos_class(tf_qos, &p) < 0) {
            snprintf(err, errlen,
                     "annotation %s: \"%.64s\" is not a QoS (use low, medium, high or critical)",
                     GD_TF_QOS, tf_qos);
            return -EINVAL;
        }
        out->priority = p;
        out->priority_from = GD_TF_QOS;
    }
    if (own_mem) {
        if (own_list(own_mem, GD_ANN_MEMORY, GS_VALUE_SIZE, &l, err, errlen) < 0)
            return -EINVAL;
        out->memory = l;
    }
    if (own_comp) {
        if (own_list(own_comp, GD_ANN_COMPUTE, GS_VALUE_PERCENT, &l, err, errlen) < 0)
            return -EINVAL;
        out->compute = l;
    }
    if (own_sms) {
        if (own_list(own_sms, GD_ANN_SMS, GS_VALUE_SMS, &l, err, errlen) < 0)
            return -EINVAL;
        out->sms = l;
    }
    if (own_prio) {
        if (gs_parse_priority(own_prio, &p) < 0) {
            snprintf(err, errlen,
                     "annotation %s: \"%.64s\" is not a priority class (use latency, normal or "
                     "background)",
                     GD_ANN_PRIORITY, own_prio);
            return -EINVAL;
        }
        out->priority = p;
        out->priority_from = GD_ANN_PRIORITY;
    }
    return 0;
}

/* Whether namespace ns is one of list (gd_pod_ns_list_check's form). */
static int ns_listed(const char *list, const char *ns)
{
    size_t n = strlen(ns);
    const char *p = list;

    if (strcmp(list, "*") == 0)
        return 1;
    while (*p) {
        size_t k = strcspn(p, ",");

        if (k == n && n > 0 && strncmp(p, ns, n) == 0)
            return 1;
        p += k;
        if (*p == ',')
            p++;
    }
    return 0;
}

int gd_pod_class_allowed(const struct gd_pod_spec *s, const char *ns, const char *allowed,
                         char *err, size_t errlen)
{
    if (s->priority != GPUSLICE_PRIORITY_LATENCY || ns_listed(allowed, ns))
        return 0;
    snprintf(err, errlen,
             "%s %s asks for the latency class, which pods of namespace %.64s may not have "
             "(they may be normal or background; the node's admin gives latency to the "
             "namespaces listed in gpusliced's pod-latency-namespaces: %.300s)",
             s->priority_from && strcmp(s->priority_from, GD_HAMI_PRIORITY) == 0 ? "resource"
                                                                                 : "annotation",
             s->priority_from ? s->priority_from : "?", ns, allowed[0] ? allowed : "none");
    return -EPERM;
}

int gd_pod_ns_list_check(const char *list, char *err, size_t errlen)
{
    const char *p = list;

    if (strcmp(list, "*") == 0 || list[0] == '\0')
        return 0;
    while (*p) {
        size_t k = strcspn(p, ","), i;

        for (i = 0; i < k; i++)
            if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '-'))
                break;
        if (k == 0 || k > 63 || i < k) {
            snprintf(err, errlen,
                     "pod-latency-namespaces: \"%.200s\" is not a list of namespaces (give names "
                     "of lower-case letters, digits and '-' separated by commas, * for every "
                     "namespace, or nothing for none)",
                     list);
            return -EINVAL;
        }
        p += k;
        if (*p == ',' && *++p == '\0') {
            snprintf(err, errlen, "pod-latency-namespaces: \"%.200s\" ends with a comma", list);
            return -EINVAL;
        }
    }
    return 0;
}

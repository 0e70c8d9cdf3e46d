/*
 * A pod's GPU limits from its object (src/daemon/podspec.c): each form, their precedence,
 * HAMi's sums over containers, and a bad value of any form refused with a message naming it.
 */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/parse.h"
#include "daemon/podspec.h"
#include "gpuslice/tenant_abi.h"

#define GiB (1ULL << 30)
#define MiB (1ULL << 20)

static char err[512];

/* gd_pod_spec of a pod written as JSON; the return code. */
static int spec_of(const char *text, struct gd_pod_spec *s)
{
    json_error_t e;
    json_t *pod = json_loads(text, 0, &e);
    int r;

    assert_non_null(pod);
    err[0] = '\0';
    r = gd_pod_spec(pod, s, err, sizeof(err));
    json_decref(pod);
    return r;
}

static void test_no_gpu_settings(void **state)
{
    struct gd_pod_spec s;

    (void)state;
    assert_int_equal(
        spec_of("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}", &s),
        0);
    assert_int_equal(s.memory.n, 0);
    assert_int_equal(s.compute.n, 0);
    assert_int_equal(s.sms.n, 0);
    assert_int_equal(s.priority, GPUSLICE_PRIORITY_UNSET);
    assert_null(s.priority_from);
}

static void test_our_annotations(void **state)
{
    struct gd_pod_spec s;

    (void)state;
    assert_int_equal(spec_of("{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"0:8G,1:4G\","
                             "\"gpuslice.io/compute\":\"50\",\"gpuslice.io/priority\":\"latency\","
                             "\"gpuslice.io/sms\":\"0:66\"}}}",
                             &s),
                     0);
    assert_int_equal(s.memory.n, 2);
    assert_int_equal(gs_limits_lookup(&s.memory, 0, NULL), 8 * GiB);
    assert_int_equal(gs_limits_lookup(&s.memory, 1, NULL), 4 * GiB);
    assert_string_equal(s.memory.source, GD_ANN_MEMORY);
    assert_int_equal(gs_limits_lookup(&s.compute, 3, NULL), 50);
    assert_int_equal(GS_SMS_COUNT(gs_limits_lookup(&s.sms, 0, NULL)), 66);
    assert_int_equal(s.priority, GPUSLICE_PRIORITY_LATENCY);
    assert_string_equal(s.priority_from, GD_ANN_PRIORITY);
}

static void test_tensor_fusion_annotations(void **state)
{
    struct gd_pod_spec s;

    (void)state;
    assert_int_equal(
        spec_of("{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/vram-limit\":\"4Gi\","
                "\"tensor-fusion.ai/compute-percent-limit\":\"25\","
                "\"tensor-fusion.ai/qos\":\"low\"}}}",
                &s),
        0);
    assert_int_equal(gs_limits_lookup(&s.memory, 0, NULL), 4 * GiB);
    assert_string_equal(s.memory.source, GD_TF_VRAM);
    assert_int_equal(gs_limits_lookup(&s.compute, 0, NULL), 25);
    assert_int_equal(s.priority, GPUSLICE_PRIORITY_BACKGROUND);
    /* Kubernetes quantities: G is 10^9, Gi 2^30. */
    assert_int_equal(
        spec_of("{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/vram-limit\":\"4G\","
                "\"tensor-fusion.ai/qos\":\"critical\"}}}",
                &s),
        0);
    assert_int_equal(gs_limits_lookup(&s.memory, 0, NULL), 4000000000ULL);
    assert_int_equal(s.priority, GPUSLICE_PRIORITY_LATENCY);
    assert_int_equal(
        spec_of("{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/qos\":\"medium\"}}}", &s), 0);
    assert_int_equal(s.priority, GPUSLICE_PRIORITY_NORMAL);
    assert_int_equal(
        spec_of("{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/qos\":\"high\"}}}", &s), 0);
    assert_int_equal(s.priority, GPUSLICE_PRIORITY_LATENCY);
}

static void test_hami_resources_sum_over_containers(void **state)
{
    struct gd_pod_spec s;

    (void)state;
    assert_int_equal(
        spec_of("{\"spec\":{\"containers\":["
                "{\"name\":\"a\",\"resources\":{\"limits\":{\"nvidia.com/gpumem\":\"3000\","
                "\"nvidia.com/gpucores\":\"30\",\"nvidia.com/priority\":\"1\"}}},"
                "{\"name\":\"b\",\"resources\":{\"limits\":{\"nvidia.com/gpumem\":\"1096\","
                "\"nvidia.com/gpucores\":\"20\"}}},{\"name\":\"c\"}]}}",
                &s),
        0);
    assert_int_equal(gs_limits_lookup(&s.memory, 0, NULL), 4096 * MiB);
    assert_string_equal(s.memory.source, GD_HAMI_MEM);
    assert_int_equal(gs_limits_lookup(&s.compute, 0, NULL), 50);
    assert_int_equal(s.priority, GPUSLICE_PRIORITY_BACKGROUND);
    /* Priority 0 (high) in any container makes the pod latency. */
    assert_int_equal(
        spec_of("{\"spec\":{\"containers\":["
                "{\"name\":\"a\",\"resources\":{\"limits\":{\"nvidia.com/priority\":\"1\"}}},"
                "{\"name\":\"b\",\"resources\":{\"limits\":{\"nvidia.com/priority\":\"0\"}}}]}}",
                &s),
        0);
    assert_int_equal(s.priority, GPUSLICE_PRIORITY_LATENCY);
}

/* nvidia.com/gpu summed over the containers: how many devices the pod's totals cover. */
static void test_gpus_counted(void **state)
{
    struct gd_pod_spec s;

    (void)state;
    assert_int_equal(
        spec_of("{\"spec\":{\"containers\":["
                "{\"name\":\"a\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}},"
                "{\"name\":\"b\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}},"
                "{\"name\":\"c\"}]}}",
                &s),
        0);
    assert_int_equal(s.gpus, 3);
    assert_int_equal(spec_of("{\"spec\":{\"containers\":[{\"name\":\"a\"}]}}", &s), 0);
    assert_int_equal(s.gpus, 0);
    assert_int_equal(
        spec_of("{\"spec\":{\"containers\":["
                "{\"name\":\"a\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"half\"}}}]}}",
                &s),
        -EINVAL);
    assert_non_null(strstr(err, "nvidia.com/gpu"));
}

/*
 * Init containers count as the scheduler counts them: a pod asks for the most of its
 * containers' sum and each init container's own (they run one at a time, before the others).
 */
static void test_init_containers_count_as_scheduled(void **state)
{
    struct gd_pod_spec s;

    (void)state;
    /* A GPU only on an init container: the pod's limit and GPU count are that container's. */
    assert_int_equal(spec_of("{\"spec\":{\"containers\":[{\"name\":\"a\"}],\"initContainers\":["
                             "{\"name\":\"i\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\","
                             "\"nvidia.com/gpumem\":\"4096\",\"nvidia.com/gpucores\":\"40\"}}}]}}",
                             &s),
                     0);
    assert_int_equal(s.gpus, 2);
    assert_int_equal(gs_limits_lookup(&s.memory, 0, NULL), 4096 * MiB);
    assert_int_equal(gs_limits_lookup(&s.compute, 0, NULL), 40);
    /* The containers' sum when it is more than any init container's. */
    assert_int_equal(
        spec_of("{\"spec\":{\"containers\":["
                "{\"name\":\"a\",\"resources\":{\"limits\":{\"nvidia.com/gpumem\":\"2048\"}}},"
                "{\"name\":\"b\",\"resources\":{\"limits\":{\"nvidia.com/gpumem\":\"1024\"}}}],"
                "\"initContainers\":[{\"name\":\"i\",\"resources\":{\"limits\":{"
                "\"nvidia.com/gpumem\":\"1024\"}}}]}}",
                &s),
        0);
    assert_int_equal(gs_limits_lookup(&s.memory, 0, NULL), 3072 * MiB);
    /* A bad value on an init container is refused, naming it. */
    assert_int_equal(spec_of("{\"spec\":{\"containers\":[{\"name\":\"a\"}],\"initContainers\":["
                             "{\"name\":\"setup\",\"resources\":{\"limits\":{"
                             "\"nvidia.com/gpumem\":\"lots\"}}}]}}",
                             &s),
                     -EINVAL);
    assert_non_null(strstr(err, "init container setup"));
}

/* Which pods are GPU pods: the one definition the webhook and the daemon both use. */
static void test_which_pods_are_gpu_pods(void **state)
{
    static const struct {
        const char *pod;
        int gpu;
    } cases[] = {
        { "{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}", 0 },
        { "{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"cpu\":\"1\","
          "\"memory\":\"1Gi\"}}}]}}",
          0 },
        { "{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
          "\"amd.com/gpu\":\"1\"}}}]}}",
          0 },
        { "{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
          "\"nvidia.com/gpu\":\"1\"}}}]}}",
          1 },
        /* Requests alone (the API server asks for limits too; counted all the same). */
        { "{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{"
          "\"nvidia.com/gpu\":\"1\"}}}]}}",
          1 },
        /* Only an init container asks (issue 28: injected, but never a tenant). */
        { "{\"spec\":{\"containers\":[{\"name\":\"c\"}],\"initContainers\":[{\"name\":\"i\","
          "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
          1 },
        { "{\"spec\":{\"containers\":[{\"name\":\"c\"}],\"initContainers\":[{\"name\":\"i\","
          "\"resources\":{\"requests\":{\"nvidia.com/gpumem\":\"1024\"}}}]}}",
          1 },
        /* An ephemeral container cannot have resources: what it says does not count. */
        { "{\"spec\":{\"containers\":[{\"name\":\"c\"}],\"ephemeralContainers\":[{\"name\":"
          "\"e\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
          0 },
        { "{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
          "\"nvidia.com/gpucores\":\"30\"}}}]}}",
          1 },
        { "{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
          "\"nvidia.com/priority\":\"1\"}}}]}}",
          1 },
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/priority\":\"background\"}},\"spec\":{"
          "\"containers\":[{\"name\":\"c\"}]}}",
          1 },
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/sms\":\"50%\"}}}", 1 },
        { "{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/qos\":\"low\"}}}", 1 },
        { "{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/compute-percent-limit\":\"5\"}}}",
          1 },
        /* A bad value makes a GPU pod all the same: it is refused, not left alone. */
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"lots\"}}}", 1 },
        /* The injection's own annotations ask for no GPU. */
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/inject\":\"true\","
          "\"gpuslice.io/injected\":\"true\"}},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
          0 },
        { "{\"metadata\":{\"annotations\":{\"other.io/memory\":\"1G\"}}}", 0 },
        /*
         * The webhook's claim form (webhook-claims): the GPU comes through the claim, whose
         * tenant the processes join; the annotations make no tenant of their own.
         */
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"8G\"}},\"spec\":{"
          "\"resourceClaims\":[{\"name\":\"gpuslice\",\"resourceClaimTemplateName\":"
          "\"gpuslice-m8192mi-n1\"}],\"containers\":[{\"name\":\"c\",\"resources\":{"
          "\"claims\":[{\"name\":\"gpuslice\"}]}}]}}",
          0 },
        /* ... but not while a container also asks a device plugin for a GPU. */
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"8G\"}},\"spec\":{"
          "\"resourceClaims\":[{\"name\":\"gpuslice\",\"resourceClaimTemplateName\":"
          "\"gpuslice-m8192mi-n1\"}],\"containers\":[{\"name\":\"c\",\"resources\":{"
          "\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
          1 },
        /* Another claim's name, or a template not gpuslice's: not the webhook's form. */
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"8G\"}},\"spec\":{"
          "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":"
          "\"gpuslice-m8192mi-n1\"}]}}",
          1 },
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"8G\"}},\"spec\":{"
          "\"resourceClaims\":[{\"name\":\"gpuslice\",\"resourceClaimTemplateName\":"
          "\"gpu-8g\"}]}}",
          1 },
        { "{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"8G\"}},\"spec\":{"
          "\"resourceClaims\":[{\"name\":\"gpuslice\",\"resourceClaimName\":"
          "\"gpuslice-mine\"}]}}",
          1 },
        /* A resource claim (NVIDIA's DRA driver names its GPUs only there): a GPU pod. */
        { "{\"spec\":{\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":"
          "\"t\"}],\"containers\":[{\"name\":\"c\"}]}}",
          1 },
        { "{\"spec\":{\"resourceClaims\":[],\"containers\":[{\"name\":\"c\"}]}}", 0 },
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *pod = json_loads(cases[i].pod, 0, NULL);

        assert_non_null(pod);
        if (gd_pod_wants_gpus(pod) != cases[i].gpu)
            fail_msg("case %zu: %s: want %d", i, cases[i].pod, cases[i].gpu);
        json_decref(pod);
    }
}

/*
 * The latency class is the node admin's to give (issue 28): a pod's own annotation or
 * resource asks for it, and only namespaces gpusliced's pod-latency-namespaces lists get it.
 */
static void test_latency_class_only_where_allowed(void **state)
{
    static const char *const asks[] = {
        "{\"metadata\":{\"annotations\":{\"gpuslice.io/priority\":\"latency\"}}}",
        "{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/qos\":\"critical\"}}}",
        "{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/qos\":\"high\"}}}",
        "{\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
        "\"nvidia.com/priority\":\"0\"}}}]}}",
    };
    static const char *const names[] = { "annotation gpuslice.io/priority",
                                         "annotation tensor-fusion.ai/qos",
                                         "annotation tensor-fusion.ai/qos",
                                         "resource nvidia.com/priority" };
    struct gd_pod_spec s;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
        assert_int_equal(spec_of(asks[i], &s), 0);
        assert_int_equal(s.priority, GPUSLICE_PRIORITY_LATENCY);
        /* None allowed (the default), or other namespaces only: refused, saying why. */
        assert_int_equal(gd_pod_class_allowed(&s, "team-a", "", err, sizeof(err)), -EPERM);
        assert_non_null(strstr(err, names[i]));
        assert_non_null(strstr(err, "namespace team-a"));
        assert_non_null(strstr(err, "pod-latency-namespaces: none"));
        assert_int_equal(
            gd_pod_class_allowed(&s, "team-a", "team-b,team-aa,team", err, sizeof(err)), -EPERM);
        assert_non_null(strstr(err, "team-b,team-aa,team"));
        /* Listed, or every namespace: allowed. */
        assert_int_equal(gd_pod_class_allowed(&s, "team-a", "team-b,team-a", err, sizeof(err)), 0);
        assert_int_equal(gd_pod_class_allowed(&s, "team-a", "team-a", err, sizeof(err)), 0);
        assert_int_equal(gd_pod_class_allowed(&s, "team-a", "*", err, sizeof(err)), 0);
    }
    /* Normal and background are every pod's. */
    assert_int_equal(
        spec_of("{\"metadata\":{\"annotations\":{\"gpuslice.io/priority\":\"background\"}}}", &s),
        0);
    assert_int_equal(gd_pod_class_allowed(&s, "team-a", "", err, sizeof(err)), 0);
    assert_int_equal(
        spec_of("{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/qos\":\"medium\"}}}", &s), 0);
    assert_int_equal(gd_pod_class_allowed(&s, "team-a", "", err, sizeof(err)), 0);
    assert_int_equal(spec_of("{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}", &s), 0);
    assert_int_equal(gd_pod_class_allowed(&s, "team-a", "", err, sizeof(err)), 0);
    /* The option's own form. */
    assert_int_equal(gd_pod_ns_list_check("", err, sizeof(err)), 0);
    assert_int_equal(gd_pod_ns_list_check("*", err, sizeof(err)), 0);
    assert_int_equal(gd_pod_ns_list_check("a,b-2,c", err, sizeof(err)), 0);
    assert_int_equal(gd_pod_ns_list_check("a, b", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "pod-latency-namespaces"));
    assert_int_equal(gd_pod_ns_list_check("a,,b", err, sizeof(err)), -EINVAL);
    assert_int_equal(gd_pod_ns_list_check("a,", err, sizeof(err)), -EINVAL);
    assert_int_equal(gd_pod_ns_list_check("Team", err, sizeof(err)), -EINVAL);
    assert_int_equal(gd_pod_ns_list_check("a,*", err, sizeof(err)), -EINVAL);
}

static void test_precedence_ours_then_tensor_fusion_then_hami(void **state)
{
    struct gd_pod_spec s;
    const char *hami = "\"spec\":{\"containers\":[{\"name\":\"a\",\"resources\":{\"limits\":"
                       "{\"nvidia.com/gpumem\":\"2048\",\"nvidia.com/gpucores\":\"10\","
                       "\"nvidia.com/priority\":\"0\"}}}]}";
    char text[1024];

    (void)state;
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/vram-limit\":\"1Gi\","
             "\"tensor-fusion.ai/qos\":\"low\"}},%s}",
             hami);
    assert_int_equal(spec_of(text, &s), 0);
    assert_int_equal(gs_limits_lookup(&s.memory, 0, NULL), GiB);
    assert_string_equal(s.memory.source, GD_TF_VRAM);
    assert_int_equal(gs_limits_lookup(&s.compute, 0, NULL), 10); /* HAMi's: TF gave none */
    assert_string_equal(s.compute.source, GD_HAMI_CORES);
    assert_int_equal(s.priority, GPUSLICE_PRIORITY_BACKGROUND);
    assert_string_equal(s.priority_from, GD_TF_QOS);
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/vram-limit\":\"1Gi\","
             "\"gpuslice.io/memory\":\"3G\",\"gpuslice.io/priority\":\"normal\","
             "\"tensor-fusion.ai/compute-percent-limit\":\"40\"}},%s}",
             hami);
    assert_int_equal(spec_of(text, &s), 0);
    assert_int_equal(gs_limits_lookup(&s.memory, 0, NULL), 3 * GiB);
    assert_string_equal(s.memory.source, GD_ANN_MEMORY);
    assert_int_equal(gs_limits_lookup(&s.compute, 0, NULL), 40);
    assert_int_equal(s.priority, GPUSLICE_PRIORITY_NORMAL);
    assert_string_equal(s.priority_from, GD_ANN_PRIORITY);
}

/* A bad value is refused, naming what and the accepted forms, even where a higher form counts. */
static void refused(const char *text, const char *names, const char *forms)
{
    struct gd_pod_spec s;

    assert_int_equal(spec_of(text, &s), -EINVAL);
    if (!strstr(err, names) || !strstr(err, forms))
        fail_msg("message \"%s\" does not name \"%s\" and \"%s\"", err, names, forms);
}

static void test_bad_values_are_refused_and_named(void **state)
{
    (void)state;
    refused("{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"lots\"}}}", GD_ANN_MEMORY,
            "8G");
    refused("{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"100\"}}}", GD_ANN_MEMORY, "");
    refused("{\"metadata\":{\"annotations\":{\"gpuslice.io/compute\":\"150\"}}}", GD_ANN_COMPUTE,
            "");
    refused("{\"metadata\":{\"annotations\":{\"gpuslice.io/priority\":\"urgent\"}}}",
            GD_ANN_PRIORITY, "latency, normal or background");
    refused("{\"metadata\":{\"annotations\":{\"gpuslice.io/sms\":\"x\"}}}", GD_ANN_SMS, "");
    refused("{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":8}}}", GD_ANN_MEMORY,
            "not a string");
    refused("{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/vram-limit\":\"4Gb\"}}}",
            GD_TF_VRAM, "Kubernetes quantity");
    refused("{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/vram-limit\":\"1Ki\"}}}",
            GD_TF_VRAM, "at least 1Mi");
    refused("{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/compute-percent-limit\":\"0\"}}}",
            GD_TF_COMPUTE, "1 to 100");
    refused("{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/qos\":\"urgent\"}}}", GD_TF_QOS,
            "low, medium, high or critical");
    refused(
        "{\"spec\":{\"containers\":[{\"name\":\"w\",\"resources\":{\"limits\":{\"nvidia.com/gpumem\":\"-5\"}}}]}}",
        "nvidia.com/gpumem of container w", "MiB");
    refused(
        "{\"spec\":{\"containers\":[{\"name\":\"w\",\"resources\":{\"limits\":{\"nvidia.com/gpucores\":\"60\"}}},"
        "{\"name\":\"v\",\"resources\":{\"limits\":{\"nvidia.com/gpucores\":\"60\"}}}]}}",
        GD_HAMI_CORES, "more than 100 in all");
    refused(
        "{\"spec\":{\"containers\":[{\"name\":\"w\",\"resources\":{\"limits\":{\"nvidia.com/priority\":\"2\"}}}]}}",
        GD_HAMI_PRIORITY, "0 (high) or 1 (low)");
    /* Sums that would wrap around 2^64 bytes. */
    refused(
        "{\"spec\":{\"containers\":[{\"name\":\"w\",\"resources\":{\"limits\":{\"nvidia.com/gpumem\":\"8796093022208\"}}},"
        "{\"name\":\"v\",\"resources\":{\"limits\":{\"nvidia.com/gpumem\":\"8796093022208\"}}}]}}",
        GD_HAMI_MEM, "in all");
    /* A bad lower form is refused even where a higher one counts. */
    refused(
        "{\"metadata\":{\"annotations\":{\"gpuslice.io/memory\":\"8G\",\"tensor-fusion.ai/vram-limit\":\"x\"}}}",
        GD_TF_VRAM, "quantity");
    refused("[1,2]", "not a JSON object", "");
}

static void test_kubernetes_quantities(void **state)
{
    uint64_t v;

    (void)state;
    assert_int_equal(gs_parse_quantity("1073741824", &v), 0);
    assert_int_equal(v, GiB);
    assert_int_equal(gs_parse_quantity("1.5Gi", &v), 0);
    assert_int_equal(v, 3 * GiB / 2);
    assert_int_equal(gs_parse_quantity("512Mi", &v), 0);
    assert_int_equal(v, 512 * MiB);
    assert_int_equal(gs_parse_quantity("2k", &v), 0);
    assert_int_equal(v, 2000);
    assert_int_equal(gs_parse_quantity("16Ei", &v), -ERANGE);
    assert_int_equal(gs_parse_quantity("18446744073709551616", &v), -ERANGE);
    assert_int_equal(gs_parse_quantity("15Ei", &v), 0);
    assert_int_equal(v, 15ULL << 60);
    assert_int_equal(gs_parse_quantity("0.5", &v), 0);
    assert_int_equal(v, 0);
    const char *bad[] = {
        "", "Gi", ".", "1 Gi", "1gi", "-1", "+1", "1.2.3", "1e3", "4GiB", "0x10"
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (gs_parse_quantity(bad[i], &v) != -EINVAL)
            fail_msg("quantity \"%s\" accepted", bad[i]);
    assert_int_equal(gs_parse_quantity(NULL, &v), -EINVAL);
}

/* A pod of containers w and v (and init containers i, j) with these limits objects ("" none). */
static int limits_pod(const char *w, const char *v, const char *i, const char *j,
                      struct gd_pod_spec *s)
{
    char text[2048];

    snprintf(text, sizeof(text),
             "{\"spec\":{\"containers\":[{\"name\":\"w\",\"resources\":{\"limits\":{%s}}},"
             "{\"name\":\"v\",\"resources\":{\"limits\":{%s}}}],\"initContainers\":["
             "{\"name\":\"i\",\"resources\":{\"limits\":{%s}}},"
             "{\"name\":\"j\",\"resources\":{\"limits\":{%s}}}]}}",
             w, v, i, j);
    return spec_of(text, s);
}

/*
 * HAMi's resources at both ends of what each accepts, and the messages naming the container,
 * the resource, the value and the accepted form exactly.
 */
static void test_hami_resources_at_both_ends(void **state)
{
    static const struct {
        const char *w, *v, *i, *j;
        uint64_t mem;   /* bytes; 0: none */
        uint64_t cores; /* 0: none */
        uint32_t gpus;
        const char *err; /* NULL: accepted */
    } cases[] = {
        { "\"nvidia.com/gpumem\":\"1\"", "", "", "", MiB, 0, 0, NULL },
        { "\"nvidia.com/gpumem\":\"0\"", "", "", "", 0, 0, 0,
          "resource nvidia.com/gpumem of container w: \"0\" is not a count of MiB, e.g. 4096" },
        { "", "\"nvidia.com/gpumem\":4096", "", "", 0, 0, 0,
          "resource nvidia.com/gpumem of container v: \"?\" is not a count of MiB, e.g. 4096" },
        { "", "", "", "\"nvidia.com/gpumem\":\"0\"", 0, 0, 0,
          "resource nvidia.com/gpumem of init container j: \"0\" is not a count of MiB, e.g. "
          "4096" },
        { "\"nvidia.com/gpucores\":\"1\"", "", "", "", 0, 1, 0, NULL },
        { "\"nvidia.com/gpucores\":\"100\"", "", "", "", 0, 100, 0, NULL },
        { "\"nvidia.com/gpucores\":\"0\"", "", "", "", 0, 0, 0,
          "resource nvidia.com/gpucores of container w: \"0\" is not a percentage from 1 to 100" },
        { "\"nvidia.com/gpucores\":\"101\"", "", "", "", 0, 0, 0,
          "resource nvidia.com/gpucores of container w: \"101\" is not a percentage from 1 to "
          "100" },
        { "\"nvidia.com/gpucores\":\"60\"", "\"nvidia.com/gpucores\":\"40\"", "", "", 0, 100, 0,
          NULL },
        { "\"nvidia.com/gpucores\":\"60\"", "\"nvidia.com/gpucores\":\"41\"", "", "", 0, 0, 0,
          "resource nvidia.com/gpucores: the pod's containers ask for more than 100 in all" },
        /* init containers run one at a time: the most of them counts, never their sum */
        { "", "", "\"nvidia.com/gpucores\":\"60\"", "\"nvidia.com/gpucores\":\"70\"", 0, 70, 0,
          NULL },
        { "\"nvidia.com/gpucores\":\"30\"", "", "\"nvidia.com/gpucores\":\"20\"", "", 0, 30, 0,
          NULL },
        { "", "", "\"nvidia.com/gpucores\":\"101\"", "", 0, 0, 0,
          "resource nvidia.com/gpucores of init container i: \"101\" is not a percentage from 1 "
          "to 100" },
        { "\"nvidia.com/gpu\":\"1024\"", "", "", "", 0, 0, 1024, NULL },
        { "\"nvidia.com/gpu\":\"1025\"", "", "", "", 0, 0, 0,
          "resource nvidia.com/gpu of container w: \"1025\" is not a whole number of GPUs" },
        { "\"nvidia.com/gpu\":\"1000\"", "\"nvidia.com/gpu\":\"24\"", "", "", 0, 0, 1024, NULL },
        { "\"nvidia.com/gpu\":\"1000\"", "\"nvidia.com/gpu\":\"25\"", "", "", 0, 0, 0,
          "resource nvidia.com/gpu: the pod's containers ask for more than 1024 in all" },
        { "\"nvidia.com/gpu\":\"1\"", "\"nvidia.com/gpu\":\"1\"", "\"nvidia.com/gpu\":\"2\"",
          "\"nvidia.com/gpu\":\"3\"", 0, 0, 3, NULL },
        { "\"nvidia.com/gpu\":\"2\"", "\"nvidia.com/gpu\":\"1\"", "\"nvidia.com/gpu\":\"2\"", "", 0,
          0, 3, NULL },
        { "\"nvidia.com/gpu\":\"0\"", "", "", "", 0, 0, 0,
          "resource nvidia.com/gpu of container w: \"0\" is not a whole number of GPUs" },
    };
    struct gd_pod_spec s;
    size_t k;

    (void)state;
    for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        int r = limits_pod(cases[k].w, cases[k].v, cases[k].i, cases[k].j, &s);

        if (cases[k].err) {
            if (r != -EINVAL || strcmp(err, cases[k].err) != 0)
                fail_msg("case %zu: %d \"%s\", want \"%s\"", k, r, err, cases[k].err);
            continue;
        }
        if (r != 0)
            fail_msg("case %zu: refused: %s", k, err);
        if (s.gpus != cases[k].gpus)
            fail_msg("case %zu: %u GPUs, want %u", k, s.gpus, cases[k].gpus);
        if ((cases[k].mem ? s.memory.n != 1 || gs_limits_lookup(&s.memory, 0, NULL) != cases[k].mem
                          : s.memory.n != 0) ||
            (cases[k].cores
                 ? s.compute.n != 1 || gs_limits_lookup(&s.compute, 0, NULL) != cases[k].cores
                 : s.compute.n != 0))
            fail_msg("case %zu: memory %d entries, compute %d entries (%llu)", k, s.memory.n,
                     s.compute.n, (unsigned long long)gs_limits_lookup(&s.compute, 0, NULL));
    }
}

/* HAMi's priority: 0 (high) in any container, init ones too, wins whatever its place. */
static void test_hami_priority_any_high_wins(void **state)
{
    struct gd_pod_spec s;

    (void)state;
    assert_int_equal(
        limits_pod("\"nvidia.com/priority\":\"0\"", "\"nvidia.com/priority\":\"1\"", "", "", &s),
        0);
    assert_int_equal(s.priority, GPUSLICE_PRIORITY_LATENCY);
    assert_string_equal(s.priority_from, GD_HAMI_PRIORITY);
    assert_int_equal(
        limits_pod("\"nvidia.com/priority\":\"1\"", "\"nvidia.com/priority\":\"1\"", "", "", &s),
        0);
    assert_int_equal(s.priority, GPUSLICE_PRIORITY_BACKGROUND);
    assert_int_equal(
        limits_pod("\"nvidia.com/priority\":\"1\"", "", "", "\"nvidia.com/priority\":\"0\"", &s),
        0);
    assert_int_equal(s.priority, GPUSLICE_PRIORITY_LATENCY);
    assert_int_equal(limits_pod("", "", "", "", &s), 0);
    assert_int_equal(s.priority, GPUSLICE_PRIORITY_UNSET);
    assert_null(s.priority_from);
    assert_int_equal(limits_pod("", "\"nvidia.com/priority\":\"00\"", "", "", &s), -EINVAL);
    assert_string_equal(err, "resource nvidia.com/priority of container v: \"00\" is not 0 (high) "
                             "or 1 (low)");
    assert_int_equal(limits_pod("", "", "\"nvidia.com/priority\":0", "", &s), -EINVAL);
    assert_string_equal(err, "resource nvidia.com/priority of container i: \"?\" is not 0 (high) "
                             "or 1 (low)");
}

/* TensorFusion's annotations at both ends of what each accepts. */
static void test_tensor_fusion_at_both_ends(void **state)
{
    struct gd_pod_spec s;

    (void)state;
    assert_int_equal(
        spec_of("{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/vram-limit\":\"1Mi\","
                "\"tensor-fusion.ai/compute-percent-limit\":\"1\"}}}",
                &s),
        0);
    assert_int_equal(gs_limits_lookup(&s.memory, 0, NULL), MiB);
    assert_int_equal(gs_limits_lookup(&s.compute, 0, NULL), 1);
    assert_string_equal(s.compute.source, GD_TF_COMPUTE);
    assert_int_equal(
        spec_of("{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/compute-percent-limit\":"
                "\"100\",\"tensor-fusion.ai/qos\":\"LOW\"}}}",
                &s),
        0);
    assert_int_equal(gs_limits_lookup(&s.compute, 0, NULL), 100);
    assert_int_equal(s.priority, GPUSLICE_PRIORITY_BACKGROUND);
    assert_int_equal(
        spec_of("{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/vram-limit\":\"1048575\"}}}",
                &s),
        -EINVAL);
    assert_string_equal(
        err, "annotation tensor-fusion.ai/vram-limit: \"1048575\" is not " GS_QUANTITY_FORMS
             " of at least 1Mi");
    assert_int_equal(
        spec_of("{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/compute-percent-limit\":"
                "\"101\"}}}",
                &s),
        -EINVAL);
    assert_string_equal(err, "annotation tensor-fusion.ai/compute-percent-limit: \"101\" is not a "
                             "percentage from 1 to 100");
    assert_int_equal(
        spec_of("{\"metadata\":{\"annotations\":{\"tensor-fusion.ai/qos\":\"lowest\"}}}", &s),
        -EINVAL);
    assert_string_equal(err, "annotation tensor-fusion.ai/qos: \"lowest\" is not a QoS (use low, "
                             "medium, high or critical)");
}

/* Each annotation read is refused, by its name, when it is not a string. */
static void test_each_annotation_must_be_a_string(void **state)
{
    static const char *const names[] = { GD_ANN_MEMORY, GD_ANN_COMPUTE, GD_ANN_PRIORITY, GD_ANN_SMS,
                                         GD_TF_VRAM,    GD_TF_COMPUTE,  GD_TF_QOS };
    struct gd_pod_spec s;
    char text[256], want[128];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(text, sizeof(text), "{\"metadata\":{\"annotations\":{\"%s\":50}}}", names[i]);
        assert_int_equal(spec_of(text, &s), -EINVAL);
        snprintf(want, sizeof(want), "annotation %s is not a string", names[i]);
        assert_string_equal(err, want);
        /* and, as a string, it is what makes a GPU pod */
        snprintf(text, sizeof(text), "{\"metadata\":{\"annotations\":{\"%s\":\"x\"}}}", names[i]);
        {
            json_t *pod = json_loads(text, 0, NULL);

            assert_int_equal(gd_pod_wants_gpus(pod), 1);
            json_decref(pod);
        }
    }
    /* Each of the resources, in limits or in requests, of a container or an init container. */
    {
        static const char *const res[] = { GD_NVIDIA_GPU, GD_HAMI_MEM, GD_HAMI_CORES,
                                           GD_HAMI_PRIORITY };
        static const char *const parts[] = { "limits", "requests" };
        static const char *const lists[] = { "containers", "initContainers" };
        size_t r, p, l;

        for (r = 0; r < 4; r++)
            for (p = 0; p < 2; p++)
                for (l = 0; l < 2; l++) {
                    json_t *pod;

                    snprintf(text, sizeof(text),
                             "{\"spec\":{\"%s\":[{\"name\":\"c\",\"resources\":{\"%s\":{"
                             "\"%s\":\"1\"}}}]}}",
                             lists[l], parts[p], res[r]);
                    pod = json_loads(text, 0, NULL);
                    if (gd_pod_wants_gpus(pod) != 1)
                        fail_msg("%s: not a GPU pod", text);
                    json_decref(pod);
                }
    }
}

/* The webhook's claim form: the claim named exactly gpuslice, from a template gpuslice-*. */
static void test_claim_form_exactly(void **state)
{
    static const struct {
        const char *name, *tmpl;
        int form;
    } cases[] = {
        { "gpuslice", "gpuslice-n1", 1 },  { "gpuslice", "gpuslice-", 1 },
        { "gpuslice", "gpuslice", 0 },     { "gpuslice", "gpuslicen1", 0 },
        { "gpuslicex", "gpuslice-n1", 0 }, { "gpuslic", "gpuslice-n1", 0 },
        { "Gpuslice", "gpuslice-n1", 0 },  { "gpuslice", "xgpuslice-n1", 0 },
    };
    char text[512];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *pod;

        snprintf(text, sizeof(text),
                 "{\"spec\":{\"resourceClaims\":[{\"name\":\"other\",\"resourceClaimName\":"
                 "\"o\"},{\"name\":\"%s\",\"resourceClaimTemplateName\":\"%s\"}]}}",
                 cases[i].name, cases[i].tmpl);
        pod = json_loads(text, 0, NULL);
        if (gd_pod_has_claim(pod) != cases[i].form)
            fail_msg("case %zu: %s %s", i, cases[i].name, cases[i].tmpl);
        /* in claim form it is no annotation tenant; any other claim makes a GPU pod */
        assert_int_equal(gd_pod_wants_gpus(pod), !cases[i].form);
        json_decref(pod);
    }
}

/* pod-latency-namespaces: names of 1 to 63 of [a-z0-9-], separated by single commas. */
static void test_latency_namespaces_list_bounds(void **state)
{
    static const char *const good[] = { "a", "z", "0", "9", "a-0,z9", "*", "" };
    static const char *const bad[] = { "`",   "{",  "/",    ":",  "A", "a_b",
                                       "a.b", ",a", "a,,b", "**", " a" };
    char name[80];
    size_t i;
    struct gd_pod_spec s;

    (void)state;
    for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (gd_pod_ns_list_check(good[i], err, sizeof(err)) != 0)
            fail_msg("\"%s\" refused: %s", good[i], err);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char want[512];

        if (gd_pod_ns_list_check(bad[i], err, sizeof(err)) != -EINVAL)
            fail_msg("\"%s\" accepted", bad[i]);
        snprintf(want, sizeof(want),
                 "pod-latency-namespaces: \"%s\" is not a list of namespaces (give names of "
                 "lower-case letters, digits and '-' separated by commas, * for every "
                 "namespace, or nothing for none)",
                 bad[i]);
        assert_string_equal(err, want);
    }
    memset(name, 'n', sizeof(name));
    name[63] = '\0';
    assert_int_equal(gd_pod_ns_list_check(name, err, sizeof(err)), 0);
    name[63] = 'n';
    name[64] = '\0';
    assert_int_equal(gd_pod_ns_list_check(name, err, sizeof(err)), -EINVAL);
    assert_int_equal(gd_pod_ns_list_check("a,b,", err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "pod-latency-namespaces: \"a,b,\" ends with a comma");
    /* The class's refusal, whole; and a namespace matched whole, first or last in the list. */
    assert_int_equal(
        spec_of("{\"metadata\":{\"annotations\":{\"gpuslice.io/priority\":\"latency\"}}}", &s), 0);
    assert_int_equal(gd_pod_class_allowed(&s, "team-a", "x", err, sizeof(err)), -EPERM);
    assert_string_equal(err, "annotation gpuslice.io/priority asks for the latency class, which "
                             "pods of namespace team-a may not have (they may be normal or "
                             "background; the node's admin gives latency to the namespaces "
                             "listed in gpusliced's pod-latency-namespaces: x)");
    assert_int_equal(gd_pod_class_allowed(&s, "team-a", "team-a,b", err, sizeof(err)), 0);
    assert_int_equal(gd_pod_class_allowed(&s, "team-a", "b,team-a", err, sizeof(err)), 0);
    assert_int_equal(gd_pod_class_allowed(&s, "team-a", "team-ab,b", err, sizeof(err)), -EPERM);
    assert_int_equal(gd_pod_class_allowed(&s, "team-a", "b,eam-a", err, sizeof(err)), -EPERM);
    assert_int_equal(gd_pod_class_allowed(&s, "", "a,,b", err, sizeof(err)), -EPERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_gpu_settings),
        cmocka_unit_test(test_our_annotations),
        cmocka_unit_test(test_tensor_fusion_annotations),
        cmocka_unit_test(test_hami_resources_sum_over_containers),
        cmocka_unit_test(test_gpus_counted),
        cmocka_unit_test(test_init_containers_count_as_scheduled),
        cmocka_unit_test(test_which_pods_are_gpu_pods),
        cmocka_unit_test(test_latency_class_only_where_allowed),
        cmocka_unit_test(test_precedence_ours_then_tensor_fusion_then_hami),
        cmocka_unit_test(test_bad_values_are_refused_and_named),
        cmocka_unit_test(test_kubernetes_quantities),
        cmocka_unit_test(test_hami_resources_at_both_ends),
        cmocka_unit_test(test_hami_priority_any_high_wins),
        cmocka_unit_test(test_tensor_fusion_at_both_ends),
        cmocka_unit_test(test_each_annotation_must_be_a_string),
        cmocka_unit_test(test_claim_form_exactly),
        cmocka_unit_test(test_latency_namespaces_list_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The readers of NVIDIA's DRA driver's documents (src/daemon/nvclaim_doc.c): a pod's claim
 * names, claims of gpu.nvidia.com read for a pod of this node (good ones table by table, bad
 * ones refused naming the claim), the node's ResourceSlices, and the limits they make beside
 * the pod's annotations.
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/nvclaim.h"

#define GiB (1ULL << 30)
#define POD_UID "a1a1a1a1-0000-4000-8000-000000000001"
#define UUID0 "GPU-5AC1CE00-0000-4000-8000-000000000000"
#define UUID1 "GPU-0ddba11e-0000-4000-8000-000000000001"

static char err[1024];

static json_t *load(const char *text)
{
    json_t *j = json_loads(text, 0, NULL);

    if (j == NULL)
        fail_msg("not JSON: %s", text);
    return j;
}

static void test_pod_claims_from_status_and_spec(void **state)
{
    static const struct {
        const char *pod;
        int n, pending;
        const char *names[3];
    } cases[] = {
        { "{\"spec\":{\"containers\":[]}}", 0, 0, { NULL } },
        /* A template's claim, named by the status; a claim named in the spec. */
        { "{\"spec\":{\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"t\"},"
          "{\"name\":\"shared\",\"resourceClaimName\":\"team-gpu\"}]},"
          "\"status\":{\"resourceClaimStatuses\":[{\"name\":\"gpu\","
          "\"resourceClaimName\":\"web-gpu-x7k2p\"}]}}",
          2,
          0,
          { "web-gpu-x7k2p", "team-gpu" } },
        /* Not generated yet: pending, nothing to read. */
        { "{\"spec\":{\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":"
          "\"t\"}]}}",
          0,
          1,
          { NULL } },
        /* A status entry without a claim (none was needed) names nothing, and is not pending. */
        { "{\"spec\":{\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":"
          "\"t\"}]},\"status\":{\"resourceClaimStatuses\":[{\"name\":\"gpu\"}]}}",
          0,
          0,
          { NULL } },
        /* One claim named twice is read once. */
        { "{\"spec\":{\"resourceClaims\":[{\"name\":\"a\",\"resourceClaimName\":\"c\"},"
          "{\"name\":\"b\",\"resourceClaimName\":\"c\"}]}}",
          1,
          0,
          { "c" } },
    };
    char names[GD_POD_MAX_CLAIMS][GD_CLAIM_NAME_LEN];
    size_t i;
    int k, n, pending;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *pod = load(cases[i].pod);

        n = gd_nv_pod_claims(pod, names, GD_POD_MAX_CLAIMS, &pending, err, sizeof(err));
        if (n != cases[i].n || pending != cases[i].pending)
            fail_msg("case %zu: %d claims %d pending, want %d %d (%s)", i, n, pending, cases[i].n,
                     cases[i].pending, err);
        for (k = 0; k < n; k++)
            assert_string_equal(names[k], cases[i].names[k]);
        json_decref(pod);
    }
}

static void test_pod_claims_bad_names_and_too_many_are_refused(void **state)
{
    char names[GD_POD_MAX_CLAIMS][GD_CLAIM_NAME_LEN], text[4096];
    int pending, k, off;
    json_t *pod;

    (void)state;
    pod = load("{\"spec\":{\"resourceClaims\":[{\"name\":\"a\",\"resourceClaimName\":"
               "\"../pods\"}]}}");
    assert_int_equal(gd_nv_pod_claims(pod, names, GD_POD_MAX_CLAIMS, &pending, err, sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "spec.resourceClaims[0].resourceClaimName"));
    json_decref(pod);
    off = snprintf(text, sizeof(text), "{\"spec\":{\"resourceClaims\":[");
    for (k = 0; k <= GD_POD_MAX_CLAIMS; k++)
        off += snprintf(text + off, sizeof(text) - (size_t)off,
                        "%s{\"name\":\"r%d\",\"resourceClaimName\":\"c%d\"}", k ? "," : "", k, k);
    snprintf(text + off, sizeof(text) - (size_t)off, "]}}");
    pod = load(text);
    assert_int_equal(gd_nv_pod_claims(pod, names, GD_POD_MAX_CLAIMS, &pending, err, sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "more than 8"));
    json_decref(pod);
}

/* A claim's name is a DNS subdomain: lower-case letters, digits, '-' and '.', beginning and
 * ending with a letter or digit, at most 253 characters; anything else is refused by its path. */
static void test_pod_claim_names_both_ends_and_each_character(void **state)
{
    static const struct {
        const char *name;
        int ok;
    } cases[] = {
        { "a", 1 },      { "0", 1 },       { "a-b.c9", 1 }, { "z.0", 1 },  { "-c", 0 },
        { ".c", 0 },     { "c-", 0 },      { "c.", 0 },     { "-", 0 },    { "Ab", 0 },
        { "aB", 0 },     { "a_b", 0 },     { "a b", 0 },    { "a/b", 0 },  { "", 0 },
        { "a%2fb", 0 },  { "9-", 0 },
    };
    char names[GD_POD_MAX_CLAIMS][GD_CLAIM_NAME_LEN], text[1024], longest[GD_CLAIM_NAME_LEN + 1];
    int pending, n;
    size_t i;
    json_t *pod;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(text, sizeof(text),
                 "{\"spec\":{\"resourceClaims\":[{\"name\":\"r\",\"resourceClaimName\":\"%s\"}]}}",
                 cases[i].name);
        pod = load(text);
        err[0] = '\0';
        n = gd_nv_pod_claims(pod, names, GD_POD_MAX_CLAIMS, &pending, err, sizeof(err));
        if (cases[i].ok) {
            if (n != 1 || strcmp(names[0], cases[i].name) != 0)
                fail_msg("\"%s\": %d claims (%s), want it read", cases[i].name, n, err);
        } else {
            char want[600];

            snprintf(want, sizeof(want),
                     "spec.resourceClaims[0].resourceClaimName: \"%s\" is not a claim's name",
                     cases[i].name);
            if (n != -1 || strcmp(err, want) != 0)
                fail_msg("\"%s\": %d claims, error '%s', want -1 and '%s'", cases[i].name, n, err,
                         want);
        }
        json_decref(pod);
    }
    /* 253 characters: the longest name; 254: refused. In the status, its own path. */
    memset(longest, 'a', GD_CLAIM_NAME_LEN - 1);
    longest[GD_CLAIM_NAME_LEN - 1] = '\0';
    snprintf(text, sizeof(text),
             "{\"status\":{\"resourceClaimStatuses\":[{\"name\":\"r\",\"resourceClaimName\":\"%s\"}]}}",
             longest);
    pod = load(text);
    assert_int_equal(gd_nv_pod_claims(pod, names, GD_POD_MAX_CLAIMS, &pending, err, sizeof(err)), 1);
    assert_string_equal(names[0], longest);
    json_decref(pod);
    longest[GD_CLAIM_NAME_LEN - 1] = 'a';
    longest[GD_CLAIM_NAME_LEN] = '\0';
    snprintf(text, sizeof(text),
             "{\"status\":{\"resourceClaimStatuses\":[{\"name\":\"r\",\"resourceClaimName\":\"%s\"}]}}",
             longest);
    pod = load(text);
    assert_int_equal(gd_nv_pod_claims(pod, names, GD_POD_MAX_CLAIMS, &pending, err, sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "status.resourceClaimStatuses[0].resourceClaimName: \""));
    json_decref(pod);
    /* Not a string: refused too. */
    pod = load("{\"spec\":{\"resourceClaims\":[{\"name\":\"r\",\"resourceClaimName\":7}]}}");
    assert_int_equal(gd_nv_pod_claims(pod, names, GD_POD_MAX_CLAIMS, &pending, err, sizeof(err)),
                     -1);
    assert_string_equal(err, "spec.resourceClaims[0].resourceClaimName: \"?\" is not a claim's name");
    json_decref(pod);
}

#define RES(drv, pool, dev, cc)                                                                    \
    "{\"request\":\"gpu\",\"driver\":\"" drv "\",\"pool\":\"" pool "\",\"device\":\"" dev "\"" cc  \
    "}"
#define MEM(m) ",\"consumedCapacity\":{\"memory\":\"" m "\"}"
#define RESERVED                                                                                   \
    "\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"web\",\"uid\":\"" POD_UID "\"}]"

static char *claim_text(const char *results, const char *reserved)
{
    static char buf[8192];

    snprintf(buf, sizeof(buf),
             "{\"metadata\":{\"namespace\":\"ns1\",\"name\":\"c\",\"uid\":\"cu\","
             "\"resourceVersion\":\"42\"},\"status\":{\"allocation\":{\"devices\":{\"results\":"
             "[%s]}},%s}}",
             results, reserved);
    return buf;
}

static void test_claim_results_of_nvidia_on_this_node(void **state)
{
    static const struct {
        const char *results;
        int n;
        const char *dev[2];
        uint64_t mem[2];
    } cases[] = {
        { RES("gpu.nvidia.com", "node1", "gpu-0", MEM("4Gi")), 1, { "gpu-0" }, { 4 * GiB } },
        /* A whole GPU: no memory consumed; "0" (unlimited and N-shares modes) is none too. */
        { RES("gpu.nvidia.com", "node1", "gpu-1", ""), 1, { "gpu-1" }, { 0 } },
        { RES("gpu.nvidia.com", "node1", "gpu-1", MEM("0")), 1, { "gpu-1" }, { 0 } },
        /* Shares only: no memory. */
        { RES("gpu.nvidia.com", "node1", "gpu-0", ",\"consumedCapacity\":{\"shares\":\"1\"}"),
          1,
          { "gpu-0" },
          { 0 } },
        /* Another driver's result is not read (its pool may be anything). */
        { RES("nic.example.com", "elsewhere", "eth0", "") "," RES("gpu.nvidia.com", "node1",
                                                                  "gpu-2", MEM("1.5Gi")),
          1,
          { "gpu-2" },
          { 3 * GiB / 2 } },
        { RES("gpu.gpuslice.io", "node1", "gpu-0", MEM("4Gi")), 0, { NULL }, { 0 } },
    };
    struct gd_nv_claim c;
    size_t i;
    int k;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *j = load(claim_text(cases[i].results, RESERVED));

        if (gd_nv_claim_read(j, "ns1", "c", "node1", POD_UID, &c, err, sizeof(err)) != 0)
            fail_msg("case %zu: %s", i, err);
        assert_string_equal(c.uid, "cu");
        assert_string_equal(c.rv, "42");
        assert_int_equal(c.n, cases[i].n);
        for (k = 0; k < c.n; k++) {
            assert_string_equal(c.r[k].device, cases[i].dev[k]);
            assert_int_equal(c.r[k].mem, cases[i].mem[k]);
        }
        json_decref(j);
    }
}

static void test_claim_bad_ones_are_refused_naming_it(void **state)
{
    static const struct {
        const char *claim, *says;
    } cases[] = {
        { "[1]", "not a JSON object" },
        { "{\"metadata\":{\"namespace\":\"ns1\",\"name\":\"other\",\"uid\":\"u\","
          "\"resourceVersion\":\"1\"},\"status\":{}}",
          "another object" },
        { "{\"metadata\":{\"namespace\":\"ns1\",\"name\":\"c\",\"uid\":\"u\","
          "\"resourceVersion\":\"1\"},\"status\":{}}",
          "not allocated" },
        { "{\"metadata\":{\"namespace\":\"ns1\",\"name\":\"c\",\"resourceVersion\":\"1\"},"
          "\"status\":{}}",
          "metadata.uid" },
    };
    struct gd_nv_claim c;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *j = load(cases[i].claim);

        assert_int_equal(gd_nv_claim_read(j, "ns1", "c", "node1", POD_UID, &c, err, sizeof(err)),
                         -1);
        if (strncmp(err, "claim ns1/c: ", 13) != 0 || !strstr(err, cases[i].says))
            fail_msg("case %zu: \"%s\" (want \"%s\")", i, err, cases[i].says);
        assert_int_equal(c.n, 0);
        json_decref(j);
    }
}

static void test_claim_of_another_node_or_pod_or_bad_memory_is_refused(void **state)
{
    static const struct {
        const char *results, *reserved, *says;
    } cases[] = {
        { RES("gpu.nvidia.com", "node2", "gpu-0", MEM("4Gi")), RESERVED,
          "pool is \"node2\", not this node's (node1)" },
        { RES("gpu.nvidia.com", "node1", "gpu-0", MEM("4Gi")),
          "\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"x\",\"uid\":\"someone-else\"}]",
          "does not name this pod" },
        { RES("gpu.nvidia.com", "node1", "gpu-0", MEM("4Gi")), "\"reservedFor\":[]",
          "does not name this pod" },
        { RES("gpu.nvidia.com", "node1", "gpu-0", MEM("lots")), RESERVED,
          "consumedCapacity.memory: \"lots\" is not a Kubernetes quantity" },
        { RES("gpu.nvidia.com", "node1", "gpu-0", ",\"consumedCapacity\":{\"memory\":4}"), RESERVED,
          "not a quantity string" },
        { RES("gpu.nvidia.com", "node1", "gpu-0", ",\"consumedCapacity\":[]"), RESERVED,
          "consumedCapacity is not an object" },
        { "{\"driver\":\"gpu.nvidia.com\",\"pool\":\"node1\"}", RESERVED, "device is missing" },
        { "{\"pool\":\"node1\",\"device\":\"gpu-0\"}", RESERVED, "driver is missing" },
    };
    struct gd_nv_claim c;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *j = load(claim_text(cases[i].results, cases[i].reserved));

        assert_int_equal(gd_nv_claim_read(j, "ns1", "c", "node1", POD_UID, &c, err, sizeof(err)),
                         -1);
        if (strncmp(err, "claim ns1/c: ", 13) != 0 || !strstr(err, cases[i].says))
            fail_msg("case %zu: \"%s\" (want \"%s\")", i, err, cases[i].says);
        json_decref(j);
    }
}

static void test_slices_of_this_node_give_uuids(void **state)
{
    struct gd_nv_dev d[4];
    json_t *j = load(
        "{\"items\":["
        "{\"spec\":{\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"node1\",\"pool\":{\"name\":"
        "\"node1\"},\"devices\":[{\"name\":\"gpu-0\",\"attributes\":{\"uuid\":{\"string\":\"" UUID0
        "\"}}},{\"name\":\"gpu-9\",\"attributes\":{\"type\":{\"string\":\"gpu\"}}}]}},"
        "{\"spec\":{\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"node2\",\"pool\":{\"name\":"
        "\"node2\"},\"devices\":[{\"name\":\"gpu-1\",\"attributes\":{\"uuid\":{\"string\":\"" UUID1
        "\"}}}]}},"
        "{\"spec\":{\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"node1\",\"pool\":{\"name\":"
        "\"node1\"},\"sharedCounters\":[]}},"
        "{\"spec\":{\"driver\":\"other.example.com\",\"nodeName\":\"node1\",\"pool\":{\"name\":"
        "\"node1\"},\"devices\":[{\"name\":\"gpu-2\",\"attributes\":{\"uuid\":{\"string\":\"x\"}}}]}}"
        "]}");
    int n;

    (void)state;
    assert_int_equal(gd_nv_slices_read(j, "node1", d, 4, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 1); /* gpu-9 has no uuid; node2's, the other driver's: not ours */
    assert_string_equal(d[0].name, "gpu-0");
    assert_string_equal(d[0].uuid, UUID0);
    assert_int_equal(gd_nv_slices_read(j, "node1", d, 0, &n, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "more than 0 devices"));
    json_decref(j);
    j = load("{\"kind\":\"Status\"}");
    assert_int_equal(gd_nv_slices_read(j, "node1", d, 4, &n, err, sizeof(err)), -1);
    json_decref(j);
}

static void test_limits_add_up_per_gpu_and_whole_wins(void **state)
{
    struct gs_limits l;
    unsigned char whole[GS_MAX_LIMIT_ENTRIES];

    (void)state;
    memset(&l, 0, sizeof(l));
    memset(whole, 0, sizeof(whole));
    assert_int_equal(gd_nv_limits_add(&l, whole, UUID0, 4 * GiB, err, sizeof(err)), 0);
    assert_int_equal(gd_nv_limits_add(&l, whole, UUID0, 2 * GiB, err, sizeof(err)), 0);
    assert_int_equal(gd_nv_limits_add(&l, whole, UUID1, 1 * GiB, err, sizeof(err)), 0);
    assert_int_equal(gd_nv_limits_add(&l, whole, UUID1, 0, err, sizeof(err)), 0);
    /* A MIG device held whole adds nothing; one that consumes memory cannot be held. */
    assert_int_equal(gd_nv_limits_add(&l, whole, "MIG-1234", 0, err, sizeof(err)), 0);
    assert_int_equal(gd_nv_limits_add(&l, whole, "MIG-1234", GiB, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "MIG-1234"));
    gd_nv_limits_done(&l, whole);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.e[0].key, GS_KEY_UUID);
    assert_string_equal(l.e[0].uuid, "gpu-5ac1ce00-0000-4000-8000-000000000000");
    assert_int_equal(l.e[0].value, 6 * GiB);
}

/* Claims' memory on one GPU saturates at the most a limit holds: never wraps to a few bytes. */
static void test_limits_sum_saturates_never_wraps(void **state)
{
    struct gs_limits l;
    unsigned char whole[GS_MAX_LIMIT_ENTRIES];

    (void)state;
    memset(&l, 0, sizeof(l));
    memset(whole, 0, sizeof(whole));
    /* 2^63 + 2^63 is 2^64: held at UINT64_MAX, not 0 (which would drop the limit). */
    assert_int_equal(gd_nv_limits_add(&l, whole, UUID0, 1ULL << 63, err, sizeof(err)), 0);
    assert_int_equal(gd_nv_limits_add(&l, whole, UUID0, 1ULL << 63, err, sizeof(err)), 0);
    /* UINT64_MAX - 1 + 3 would wrap to 1 byte. */
    assert_int_equal(gd_nv_limits_add(&l, whole, UUID1, UINT64_MAX - 1, err, sizeof(err)), 0);
    assert_int_equal(gd_nv_limits_add(&l, whole, UUID1, 3, err, sizeof(err)), 0);
    assert_int_equal(l.n, 2);
    assert_true(l.e[0].value == UINT64_MAX);
    assert_true(l.e[1].value == UINT64_MAX);
    /* Exactly UINT64_MAX in all: the sum itself, and more added stays there. */
    memset(&l, 0, sizeof(l));
    assert_int_equal(gd_nv_limits_add(&l, whole, UUID0, UINT64_MAX - 5, err, sizeof(err)), 0);
    assert_int_equal(gd_nv_limits_add(&l, whole, UUID0, 5, err, sizeof(err)), 0);
    assert_true(l.e[0].value == UINT64_MAX);
    assert_int_equal(gd_nv_limits_add(&l, whole, UUID0, 1, err, sizeof(err)), 0);
    assert_true(l.e[0].value == UINT64_MAX);
    gd_nv_limits_done(&l, whole);
    assert_int_equal(l.n, 1);
    assert_true(l.e[0].value == UINT64_MAX);
}

static void test_merge_smaller_of_annotation_and_claim_wins(void **state)
{
    static const struct {
        const char *ann;
        uint64_t claim, want;
    } cases[] = {
        { NULL, 4 * GiB, 4 * GiB },
        { "2G", 4 * GiB, 2 * GiB },
        { "8G", 4 * GiB, 4 * GiB },
        /* A UUID entry is the GPU's own, whatever the default says. */
        { "1G," UUID0 ":6G", 4 * GiB, 4 * GiB },
        { "8G," UUID0 ":3G", 4 * GiB, 3 * GiB },
        /* An index is the container's: the smallest that might be this GPU counts. */
        { "0:3G,1:8G", 4 * GiB, 3 * GiB },
    };
    struct gs_limits ann, claims, out;
    size_t i;
    int k;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(&ann, 0, sizeof(ann));
        memset(&claims, 0, sizeof(claims));
        if (cases[i].ann &&
            gs_parse_limit_list(cases[i].ann, GS_VALUE_SIZE, "test", &ann, err, sizeof(err)) < 0)
            fail_msg("case %zu: %s", i, err);
        claims.n = 1;
        claims.e[0].key = GS_KEY_UUID;
        snprintf(claims.e[0].uuid, sizeof(claims.e[0].uuid), "%s",
                 "gpu-5ac1ce00-0000-4000-8000-000000000000");
        claims.e[0].value = cases[i].claim;
        assert_int_equal(gd_nv_merge(&ann, &claims, &out, err, sizeof(err)), 0);
        for (k = 0; k < out.n; k++)
            if (out.e[k].key == GS_KEY_UUID &&
                strcmp(out.e[k].uuid, "gpu-5ac1ce00-0000-4000-8000-000000000000") == 0)
                break;
        if (k == out.n || out.e[k].value != cases[i].want)
            fail_msg("case %zu: %llu on the GPU, want %llu", i,
                     k == out.n ? 0ULL : (unsigned long long)out.e[k].value,
                     (unsigned long long)cases[i].want);
        /* The annotation's own UUID entry is changed in place; else one is added. */
        assert_int_equal(out.n, ann.n + (cases[i].ann && strstr(cases[i].ann, "GPU-") ? 0 : 1));
    }
    /* No claims: the annotations as they are. */
    claims.n = 0;
    assert_int_equal(gd_nv_merge(&ann, &claims, &out, err, sizeof(err)), 0);
    assert_memory_equal(&out, &ann, sizeof(ann));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pod_claims_from_status_and_spec),
        cmocka_unit_test(test_pod_claims_bad_names_and_too_many_are_refused),
        cmocka_unit_test(test_pod_claim_names_both_ends_and_each_character),
        cmocka_unit_test(test_claim_results_of_nvidia_on_this_node),
        cmocka_unit_test(test_claim_bad_ones_are_refused_naming_it),
        cmocka_unit_test(test_claim_of_another_node_or_pod_or_bad_memory_is_refused),
        cmocka_unit_test(test_slices_of_this_node_give_uuids),
        cmocka_unit_test(test_limits_add_up_per_gpu_and_whole_wins),
        cmocka_unit_test(test_limits_sum_saturates_never_wraps),
        cmocka_unit_test(test_merge_smaller_of_annotation_and_claim_wins),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The DRA driver's documents (src/daemon/dra_doc.c): the node's ResourceSlice, ResourceClaims
 * read and judged (good ones table by table, and every bad one refused with a message naming
 * the claim and the field), the CDI spec, and the checkpoint's round trip and corruptions.
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

#include "daemon/dra.h"
#include "gpuslice/tenant_abi.h"

#define GiB (1ULL << 30)
#define MiB (1ULL << 20)

static const struct gd_dra_gpu gpus[] = {
    { 0, "GPU-11111111-2222-3333-4444-555555555555", "NVIDIA H100 80GB HBM3", "550.54.15", "hopper",
      132, 80 * GiB },
    { 1, "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "NVIDIA H100 80GB HBM3", "550.54.15", "hopper",
      132, 80 * GiB },
    { 3, "GPU-99999999-8888-7777-6666-555555555555", "Tesla T4", "535.104.05", "turing", 40,
      15 * GiB + 100 * MiB },
};
#define NGPU 3
static const struct gd_dra_ref ref = { "default", "5c4c2d6e-1111-2222-3333-444455556666", "train" };
static char err[1024];

#define META                                                                                       \
    "\"metadata\":{\"namespace\":\"default\",\"name\":\"train\","                                  \
    "\"uid\":\"5c4c2d6e-1111-2222-3333-444455556666\"}"
#define RES(req, dev, cc)                                                                          \
    "{\"request\":\"" req "\",\"driver\":\"gpu.gpuslice.io\",\"pool\":\"node-a\","                 \
    "\"device\":\"" dev "\"" cc "}"
#define CC(m, c) ",\"consumedCapacity\":{\"memory\":\"" m "\",\"cores\":\"" c "\"}"
#define OTHER                                                                                      \
    "{\"request\":\"nic\",\"driver\":\"nic.example.com\",\"pool\":\"node-a\","                     \
    "\"device\":\"eth0\"}"
#define CFG(reqs, params)                                                                          \
    "{\"source\":\"FromClaim\"" reqs ",\"opaque\":{\"driver\":\"gpu.gpuslice.io\","                \
    "\"parameters\":" params "}}"
#define POD(uid) "{\"resource\":\"pods\",\"name\":\"p\",\"uid\":\"" uid "\"}"

/* A ResourceClaim with its metadata, results, config and reservedFor (NULL: no allocation). */
static char *claim_text(const char *meta, const char *results, const char *config,
                        const char *reserved)
{
    static char buf[16384];

    if (results == NULL)
        snprintf(buf, sizeof(buf), "{%s,\"status\":{}}", meta);
    else
        snprintf(buf, sizeof(buf),
                 "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\",%s,"
                 "\"status\":{\"allocation\":{\"devices\":{\"results\":[%s],\"config\":[%s]}},"
                 "\"reservedFor\":[%s]}}",
                 meta, results, config ? config : "", reserved ? reserved : "");
    return buf;
}

static int read_claim(const char *text, struct gd_dra_claim *c)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    int r;

    if (j == NULL)
        fail_msg("bad test JSON: %s: %s", e.text, text);
    err[0] = '\0';
    r = gd_dra_claim_read(j, &ref, "node-a", gpus, NGPU, c, err, sizeof(err));
    json_decref(j);
    return r;
}

/* ---- good claims ---- */

struct good {
    const char *what, *results, *config, *reserved;
    int nhold;
    struct {
        const char *device, *uuid, *req0;
        int nreq;
        uint64_t mem;
        int cores;
    } h[2];
    uint32_t priority, weight;
    int npod;
};

static const struct good goods[] = {
    { "8Gi and 25 cores",
      RES("gpu", "gpu-0", CC("8Gi", "25")),
      NULL,
      POD("pod-1"),
      1,
      { { "gpu-0", "GPU-11111111-2222-3333-4444-555555555555", "gpu", 1, 8 * GiB, 25 } },
      0,
      0,
      1 },
    { "memory only",
      RES("gpu", "gpu-3", ",\"consumedCapacity\":{\"memory\":\"4294967296\"}"),
      NULL,
      NULL,
      1,
      { { "gpu-3", "GPU-99999999-8888-7777-6666-555555555555", "gpu", 1, 4 * GiB, 0 } },
      0,
      0,
      0 },
    { "nothing asked: the whole GPU, no ceiling",
      RES("gpu", "gpu-1", ""),
      NULL,
      NULL,
      1,
      { { "gpu-1", "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "gpu", 1, 0, 0 } },
      0,
      0,
      0 },
    { "two devices",
      RES("a", "gpu-0", CC("1Gi", "10")) "," RES("b", "gpu-1", CC("2G", "0")),
      NULL,
      POD("p1") "," POD("p2"),
      2,
      { { "gpu-0", NULL, "a", 1, GiB, 10 }, { "gpu-1", NULL, "b", 1, 2000000000ULL, 0 } },
      0,
      0,
      2 },
    { "other drivers' results left out",
      OTHER "," RES("gpu", "gpu-1", CC("512Mi", "50")) "," OTHER,
      NULL,
      "{\"apiGroup\":\"batch\",\"resource\":\"jobs\",\"name\":\"j\",\"uid\":\"j1\"}," POD("p9"),
      1,
      { { "gpu-1", NULL, "gpu", 1, 512 * MiB, 50 } },
      0,
      0,
      1 },
    { "two requests on one device are summed",
      RES("a", "gpu-0", CC("1Gi", "10")) "," RES("b/small", "gpu-0", CC("3Gi", "20")),
      NULL,
      NULL,
      1,
      { { "gpu-0", NULL, "a", 2, 4 * GiB, 30 } },
      0,
      0,
      0 },
    { "config for every request",
      RES("a", "gpu-0", CC("1Gi", "10")) "," RES("b", "gpu-1", CC("1Gi", "10")),
      CFG("", "{\"apiVersion\":\"gpu.gpuslice.io/v1alpha1\",\"kind\":\"ClaimConfig\","
              "\"priority\":\"latency\",\"weight\":40}"),
      NULL,
      2,
      { { "gpu-0", NULL, "a", 1, GiB, 10 }, { "gpu-1", NULL, "b", 1, GiB, 10 } },
      GPUSLICE_PRIORITY_LATENCY,
      40,
      0 },
    { "config for one request",
      RES("a", "gpu-0", CC("1Gi", "10")) "," RES("b", "gpu-1", CC("1Gi", "10")),
      CFG(",\"requests\":[\"b\"]", "{\"priority\":\"background\"}") "," CFG(
          ",\"requests\":[\"zz\"]", "{\"priority\":\"latency\",\"weight\":3}"),
      NULL,
      2,
      { { "gpu-0", NULL, "a", 1, GiB, 10 }, { "gpu-1", NULL, "b", 1, GiB, 10 } },
      GPUSLICE_PRIORITY_BACKGROUND,
      0,
      0 },
    { "two results on one GPU whose cores sum to exactly 100",
      RES("a", "gpu-0", CC("1Gi", "60")) "," RES("b", "gpu-0", CC("1Gi", "40")),
      NULL,
      NULL,
      1,
      { { "gpu-0", NULL, "a", 2, 2 * GiB, 100 } },
      0,
      0,
      0 },
    { "two results on one GPU whose memory is exactly the total",
      RES("a", "gpu-0", CC("60Gi", "10")) "," RES("b", "gpu-0", CC("20Gi", "10")),
      NULL,
      NULL,
      1,
      { { "gpu-0", NULL, "a", 2, 80 * GiB, 20 } },
      0,
      0,
      0 },
    { "a config for request gpu2 is not request gpu's",
      RES("gpu", "gpu-0", CC("1Gi", "10")),
      CFG(",\"requests\":[\"gpu2\"]", "{\"priority\":\"latency\",\"weight\":9}") "," CFG(
          ",\"requests\":[\"gp\"]", "{\"priority\":\"background\"}"),
      NULL,
      1,
      { { "gpu-0", NULL, "gpu", 1, GiB, 10 } },
      0,
      0,
      0 },
    { "weight 1 and weight 100, the ends",
      RES("a", "gpu-0", CC("1Gi", "10")) "," RES("b", "gpu-1", CC("1Gi", "10")),
      CFG(",\"requests\":[\"a\"]", "{\"weight\":1}") "," CFG(",\"requests\":[\"a\"]",
                                                               "{\"weight\":100}"),
      NULL,
      2,
      { { "gpu-0", NULL, "a", 1, GiB, 10 }, { "gpu-1", NULL, "b", 1, GiB, 10 } },
      0,
      100,
      0 },
    { "a later config overrides, a main request covers its subrequests",
      RES("a/x", "gpu-0", CC("1Gi", "10")),
      CFG("", "{\"priority\":\"latency\",\"weight\":5}") "," CFG(
          ",\"requests\":[\"a\"]",
          "{\"weight\":7}") ","
                            "{\"opaque\":{\"driver\":\"other.example.com\",\"parameters\":{\"whatever\":1}}}",
      NULL,
      1,
      { { "gpu-0", NULL, "a/x", 1, GiB, 10 } },
      GPUSLICE_PRIORITY_LATENCY,
      7,
      0 },
};

static void test_good_claims_are_read(void **state)
{
    size_t i;
    int k;

    (void)state;
    for (i = 0; i < sizeof(goods) / sizeof(goods[0]); i++) {
        const struct good *g = &goods[i];
        struct gd_dra_claim c;

        if (read_claim(claim_text(META, g->results, g->config, g->reserved), &c) != 0)
            fail_msg("%s: refused: %s", g->what, err);
        assert_string_equal(c.ns, "default");
        assert_string_equal(c.name, "train");
        assert_string_equal(c.uid, ref.uid);
        assert_int_equal(c.nhold, g->nhold);
        for (k = 0; k < g->nhold; k++) {
            assert_string_equal(c.hold[k].device, g->h[k].device);
            if (g->h[k].uuid)
                assert_string_equal(c.hold[k].uuid, g->h[k].uuid);
            assert_string_equal(c.hold[k].request[0], g->h[k].req0);
            assert_int_equal(c.hold[k].nreq, g->h[k].nreq);
            assert_int_equal(c.hold[k].mem_bytes, g->h[k].mem);
            assert_int_equal(c.hold[k].cores, g->h[k].cores);
        }
        assert_int_equal(c.priority, g->priority);
        assert_int_equal(c.weight, g->weight);
        assert_int_equal(c.npod, g->npod);
    }
}

static void test_summed_requests_keep_both_names(void **state)
{
    struct gd_dra_claim c;

    (void)state;
    assert_int_equal(read_claim(claim_text(META,
                                           RES("a", "gpu-0", CC("1Gi", "0")) "," RES(
                                               "b", "gpu-0", CC("1Gi", "20")),
                                           NULL, NULL),
                                &c),
                     0);
    assert_int_equal(c.hold[0].nreq, 2);
    assert_string_equal(c.hold[0].request[1], "b");
    assert_int_equal(c.hold[0].mem_bytes, 2 * GiB);
    assert_int_equal(c.hold[0].cores, 0); /* one of them asked no ceiling */
}

/* ---- bad claims ---- */

struct bad {
    const char *what, *meta, *results, *config, *reserved;
    const char *field, *also; /* what the message must name */
};

#define LONG70 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define LONG140 LONG70 LONG70
#define GOOD RES("gpu", "gpu-0", CC("8Gi", "25"))

static const struct bad bads[] = {
    { "wrong uid", "\"metadata\":{\"namespace\":\"default\",\"name\":\"train\",\"uid\":\"other\"}",
      GOOD, NULL, NULL, "metadata.uid", "\"other\"" },
    { "wrong namespace",
      "\"metadata\":{\"namespace\":\"kube-system\",\"name\":\"train\",\"uid\":\"x\"}", GOOD, NULL,
      NULL, "metadata.namespace", "kube-system" },
    { "no metadata name", "\"metadata\":{\"namespace\":\"default\"}", GOOD, NULL, NULL,
      "metadata.name", NULL },
    { "not allocated", META, NULL, NULL, NULL, "not allocated", NULL },
    { "no device of ours", META, OTHER, NULL, NULL, "no device of gpu.gpuslice.io", NULL },
    { "another node's pool", META,
      "{\"request\":\"gpu\",\"driver\":\"gpu.gpuslice.io\",\"pool\":\"node-b\","
      "\"device\":\"gpu-0\"}",
      NULL, NULL, "results[0].pool", "node-b" },
    { "gpu-01", META, OTHER "," RES("gpu", "gpu-01", ""), NULL, NULL, "results[1].device",
      "gpu-01" },
    { "gpu-0x", META, RES("gpu", "gpu-0x", ""), NULL, NULL, "results[0].device", NULL },
    { "gpu--1", META, RES("gpu", "gpu--1", ""), NULL, NULL, "results[0].device", NULL },
    { "gpu-9 is not here", META, RES("gpu", "gpu-9", ""), NULL, NULL, "results[0].device",
      "no GPU of this node" },
    { "memory over the total", META, RES("gpu", "gpu-3", CC("16Gi", "10")), NULL, NULL,
      "results[0].consumedCapacity.memory", "over" },
    { "memory 0", META, RES("gpu", "gpu-0", CC("0", "10")), NULL, NULL,
      "results[0].consumedCapacity.memory", NULL },
    { "cores 101", META, RES("gpu", "gpu-0", CC("1Gi", "101")), NULL, NULL,
      "results[0].consumedCapacity.cores", "101" },
    { "memory abc", META, RES("gpu", "gpu-0", CC("abc", "1")), NULL, NULL,
      "results[0].consumedCapacity.memory", "\"abc\"" },
    { "cores abc", META, RES("gpu", "gpu-0", CC("1Gi", "abc")), NULL, NULL,
      "results[0].consumedCapacity.cores", "\"abc\"" },
    { "cores 0.5", META, RES("gpu", "gpu-0", CC("1Gi", "0.5")), NULL, NULL,
      "results[0].consumedCapacity.cores", "whole number" },
    { "negative memory", META, RES("gpu", "gpu-0", CC("-1Gi", "1")), NULL, NULL,
      "results[0].consumedCapacity.memory", NULL },
    { "negative cores", META, RES("gpu", "gpu-0", CC("1Gi", "-5")), NULL, NULL,
      "results[0].consumedCapacity.cores", NULL },
    { "memory not a string", META, RES("gpu", "gpu-0", ",\"consumedCapacity\":{\"memory\":1024}"),
      NULL, NULL, "results[0].consumedCapacity.memory", NULL },
    { "a capacity we never publish", META,
      RES("gpu", "gpu-0", ",\"consumedCapacity\":{\"bandwidth\":\"1\"}"), NULL, NULL,
      "consumedCapacity.bandwidth", NULL },
    { "two results on one GPU over its memory", META,
      RES("a", "gpu-0", CC("60Gi", "10")) "," RES("b", "gpu-0", CC("30Gi", "10")), NULL, NULL,
      "results[1]", "memory" },
    { "two results on one GPU over its cores", META,
      RES("a", "gpu-0", CC("1Gi", "60")) "," RES("b", "gpu-0", CC("1Gi", "50")), NULL, NULL,
      "results[1]", "cores" },
    { "no request name", META,
      "{\"driver\":\"gpu.gpuslice.io\",\"pool\":\"node-a\",\"device\":\"gpu-0\"}", NULL, NULL,
      "results[0].request", NULL },
    { "request name too long", META, RES(LONG70, "gpu-0", ""), NULL, NULL, "results[0].request",
      "longer than 63" },
    { "unknown config key", META, GOOD, CFG("", "{\"priority\":\"latency\",\"colour\":\"red\"}"),
      NULL, "config[0].opaque.parameters", "colour" },
    { "weight 0", META, GOOD, CFG("", "{\"weight\":0}"), NULL, "config[0].opaque.parameters.weight",
      NULL },
    { "weight 101", META, GOOD, CFG("", "{\"weight\":101}"), NULL,
      "config[0].opaque.parameters.weight", NULL },
    { "weight as a string", META, GOOD, CFG("", "{\"weight\":\"5\"}"), NULL,
      "config[0].opaque.parameters.weight", NULL },
    { "priority urgent", META, GOOD, CFG("", "{\"priority\":\"urgent\"}"), NULL,
      "config[0].opaque.parameters.priority", "urgent" },
    { "another kind of parameters", META, GOOD, CFG("", "{\"kind\":\"GpuConfig\"}"), NULL,
      "config[0].opaque.parameters.kind", "GpuConfig" },
    { "parameters not an object", META, GOOD, CFG("", "[1]"), NULL, "config[0].opaque.parameters",
      NULL },
    { "two devices, two priorities", META, RES("a", "gpu-0", "") "," RES("b", "gpu-1", ""),
      CFG(",\"requests\":[\"a\"]", "{\"priority\":\"latency\"}") "," CFG(
          ",\"requests\":[\"b\"]", "{\"priority\":\"background\"}"),
      NULL, "config", "one priority" },
    { "the whole GPU, then a share of it", META,
      RES("a", "gpu-0", "") "," RES("b", "gpu-0", CC("1Gi", "0")), NULL, NULL, "results[1]",
      "memory" },
    { "a share of it, then the whole GPU", META,
      RES("a", "gpu-0", CC("1Gi", "0")) "," RES("b", "gpu-0", ""), NULL, NULL, "results[1]",
      "memory" },
    { "two devices, two weights", META, RES("a", "gpu-0", "") "," RES("b", "gpu-1", ""),
      CFG(",\"requests\":[\"a\"]", "{\"weight\":5}") "," CFG(",\"requests\":[\"b\"]",
                                                               "{\"weight\":7}"),
      NULL, "config", "one weight" },
    { "nine pods", META, GOOD, NULL,
      POD("1") "," POD("2") "," POD("3") "," POD("4") "," POD("5") "," POD("6") "," POD(
          "7") "," POD("8") "," POD("9"),
      "reservedFor[8]", "more than 8" },
    { "a pod's uid too long", META, GOOD, NULL, POD(LONG140), "reservedFor[0].uid",
      "longer than 128" },
    { "a pod without uid", META, GOOD, NULL, "{\"resource\":\"pods\",\"name\":\"p\"}",
      "reservedFor[0].uid", "missing" },
    { "no results at all", META, "", NULL, NULL, "no device", NULL },
};

static void test_bad_claims_are_refused_naming_the_field(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
        const struct bad *b = &bads[i];
        struct gd_dra_claim c;

        if (read_claim(claim_text(b->meta, b->results, b->config, b->reserved), &c) != -1)
            fail_msg("%s: accepted", b->what);
        if (getenv("DRA_DOC_VERBOSE"))
            print_message("%s: %s\n", b->what, err);
        if (strncmp(err, "claim default/train: ", 21) != 0 || !strstr(err, b->field) ||
            (b->also && !strstr(err, b->also)))
            fail_msg("%s: the message \"%s\" does not name the claim, %s and %s", b->what, err,
                     b->field, b->also ? b->also : "-");
        assert_int_equal(c.nhold, 0); /* nothing half-read is left */
    }
}

static void test_more_than_max_devices_is_refused(void **state)
{
    static const struct gd_dra_gpu many_gpu = { 0, "GPU-x", "p", "1.0.0", "a", 1, 80 * GiB };
    struct gd_dra_gpu many[GD_DRA_MAX_DEVS + 1];
    char results[8192] = "";
    struct gd_dra_claim c;
    json_t *j;
    int i;

    (void)state;
    for (i = 0; i <= GD_DRA_MAX_DEVS; i++) {
        many[i] = many_gpu;
        many[i].index = i;
        snprintf(results + strlen(results), sizeof(results) - strlen(results),
                 "%s{\"request\":\"r\",\"driver\":\"gpu.gpuslice.io\",\"pool\":\"node-a\","
                 "\"device\":\"gpu-%d\"}",
                 i ? "," : "", i);
    }
    j = json_loads(claim_text(META, results, NULL, NULL), 0, NULL);
    assert_non_null(j);
    assert_int_equal(
        gd_dra_claim_read(j, &ref, "node-a", many, GD_DRA_MAX_DEVS, &c, err, sizeof(err)),
        -1); /* gpu-16 is not among the first 16 */
    assert_int_equal(
        gd_dra_claim_read(j, &ref, "node-a", many, GD_DRA_MAX_DEVS + 1, &c, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "more than 16 devices"));
    json_decref(j);
}

/* ---- the ResourceSlice ---- */

static const json_t *path(const json_t *j, const char *p)
{
    char key[64];

    while (j && *p) {
        size_t n = strcspn(p, ".");

        snprintf(key, sizeof(key), "%.*s", (int)n, p);
        j = json_is_array(j) ? json_array_get(j, (size_t)atoi(key)) : json_object_get(j, key);
        p += n + (p[n] == '.');
    }
    return j;
}

static const char *str_at(const json_t *j, const char *p)
{
    const char *s = json_string_value(path(j, p));

    if (s == NULL)
        fail_msg("no string at %s", p);
    return s;
}

static void test_slice_publishes_each_gpu(void **state)
{
    json_t *s = gd_dra_slice_json("node-a", 7, gpus, NGPU);

    (void)state;
    assert_non_null(s);
    assert_string_equal(str_at(s, "apiVersion"), "resource.k8s.io/v1");
    assert_string_equal(str_at(s, "kind"), "ResourceSlice");
    assert_string_equal(str_at(s, "metadata.name"), "node-a-gpu.gpuslice.io");
    assert_string_equal(str_at(s, "spec.driver"), "gpu.gpuslice.io");
    assert_string_equal(str_at(s, "spec.nodeName"), "node-a");
    assert_string_equal(str_at(s, "spec.pool.name"), "node-a");
    assert_int_equal(json_integer_value(path(s, "spec.pool.generation")), 7);
    assert_int_equal(json_integer_value(path(s, "spec.pool.resourceSliceCount")), 1);
    assert_int_equal(json_array_size(path(s, "spec.devices")), 3);
    assert_string_equal(str_at(s, "spec.devices.0.name"), "gpu-0");
    assert_string_equal(str_at(s, "spec.devices.2.name"), "gpu-3");
    assert_true(json_is_true(path(s, "spec.devices.0.allowMultipleAllocations")));
    assert_string_equal(str_at(s, "spec.devices.0.attributes.uuid.string"), gpus[0].uuid);
    assert_string_equal(str_at(s, "spec.devices.0.attributes.productName.string"),
                        "NVIDIA H100 80GB HBM3");
    assert_string_equal(str_at(s, "spec.devices.0.attributes.architecture.string"), "hopper");
    assert_int_equal(json_integer_value(path(s, "spec.devices.2.attributes.index.int")), 3);
    assert_int_equal(json_integer_value(path(s, "spec.devices.0.attributes.multiprocessors.int")),
                     132);
    /* 550.54.15 is a semantic version; 535.104.05 (a leading zero) is not. */
    assert_string_equal(str_at(s, "spec.devices.0.attributes.driverVersion.version"), "550.54.15");
    assert_string_equal(str_at(s, "spec.devices.2.attributes.driverVersion.string"), "535.104.05");
    assert_null(path(s, "spec.devices.2.attributes.driverVersion.version"));
    /* memory: bytes; 256 MiB steps up to the total rounded down; all by default */
    assert_string_equal(str_at(s, "spec.devices.0.capacity.memory.value"), "85899345920");
    assert_string_equal(str_at(s, "spec.devices.2.capacity.memory.value"), "16210984960");
    assert_string_equal(str_at(s, "spec.devices.2.capacity.memory.requestPolicy.default"),
                        "16106127360");
    assert_string_equal(str_at(s, "spec.devices.2.capacity.memory.requestPolicy.validRange.max"),
                        "16106127360");
    assert_string_equal(str_at(s, "spec.devices.2.capacity.memory.requestPolicy.validRange.min"),
                        "268435456");
    assert_string_equal(str_at(s, "spec.devices.2.capacity.memory.requestPolicy.validRange.step"),
                        "268435456");
    assert_string_equal(str_at(s, "spec.devices.0.capacity.cores.value"), "100");
    assert_string_equal(str_at(s, "spec.devices.0.capacity.cores.requestPolicy.default"), "0");
    assert_string_equal(str_at(s, "spec.devices.0.capacity.cores.requestPolicy.validRange.min"),
                        "0");
    assert_string_equal(str_at(s, "spec.devices.0.capacity.cores.requestPolicy.validRange.max"),
                        "100");
    assert_string_equal(str_at(s, "spec.devices.0.capacity.cores.requestPolicy.validRange.step"),
                        "1");
    json_decref(s);
}

/* A GPU under two steps of memory publishes it without a policy (upstream requires min + step
   within the capacity); at exactly two steps, with one from one step to two. */
static void test_small_gpus_policy(void **state)
{
    struct gd_dra_gpu small[3] = { gpus[0], gpus[0], gpus[0] };
    json_t *s;

    (void)state;
    small[0].index = 0;
    small[0].mem_total = 300 * MiB;
    small[1].index = 1;
    small[1].mem_total = 511 * MiB;
    small[2].index = 2;
    small[2].mem_total = 512 * MiB;
    s = gd_dra_slice_json("node-a", 1, small, 3);
    assert_non_null(s);
    assert_string_equal(str_at(s, "spec.devices.0.capacity.memory.value"), "314572800");
    assert_null(path(s, "spec.devices.0.capacity.memory.requestPolicy"));
    assert_null(path(s, "spec.devices.1.capacity.memory.requestPolicy"));
    assert_string_equal(str_at(s, "spec.devices.2.capacity.memory.requestPolicy.validRange.min"),
                        "268435456");
    assert_string_equal(str_at(s, "spec.devices.2.capacity.memory.requestPolicy.validRange.max"),
                        "536870912");
    assert_string_equal(str_at(s, "spec.devices.2.capacity.memory.requestPolicy.default"),
                        "536870912");
    json_decref(s);
}

static int dns_subdomain(const char *s)
{
    size_t i, n = strlen(s);

    if (n == 0 || n > 253 || s[0] == '-' || s[0] == '.' || s[n - 1] == '-' || s[n - 1] == '.')
        return 0;
    for (i = 0; i < n; i++) {
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
              s[i] == '.'))
            return 0;
        if (s[i] == '.' && (s[i + 1] == '.' || s[i + 1] == '-' || s[i - 1] == '-'))
            return 0;
    }
    return 1;
}

static void test_slice_name_of_a_long_node_fits(void **state)
{
    char node[254], other[254];
    json_t *a, *b;

    (void)state;
    memset(node, 'n', 253);
    node[253] = '\0';
    node[100] = '.';
    snprintf(other, sizeof(other), "%s", node);
    other[252] = 'm';
    a = gd_dra_slice_json(node, 1, gpus, 1);
    b = gd_dra_slice_json(other, 1, gpus, 1);
    assert_non_null(a);
    assert_non_null(b);
    assert_true(dns_subdomain(str_at(a, "metadata.name")));
    assert_true(strlen(str_at(a, "metadata.name")) <= 253);
    /* cut to fit with a hash of the whole node's name, the driver's suffix kept whole */
    {
        const char *nm = str_at(a, "metadata.name");
        size_t n = strlen(nm), suffix = strlen("-gpu.gpuslice.io");

        assert_true(n >= 250);
        assert_string_equal(nm + n - suffix, "-gpu.gpuslice.io");
    }
    assert_string_not_equal(str_at(a, "metadata.name"), str_at(b, "metadata.name"));
    json_decref(a);
    /* the same node, the same name */
    a = gd_dra_slice_json(node, 2, gpus, 1);
    assert_string_not_equal(str_at(a, "metadata.name"), str_at(b, "metadata.name"));
    json_decref(b);
    b = gd_dra_slice_json(node, 3, gpus, 1);
    assert_string_equal(str_at(a, "metadata.name"), str_at(b, "metadata.name"));
    json_decref(a);
    json_decref(b);
    /* a name that is no DNS subdomain is no node's */
    assert_null(gd_dra_slice_json("Node_A", 1, gpus, 1));
    assert_null(gd_dra_slice_json("", 1, gpus, 1));
}

/* ---- the CDI spec ---- */

static void test_cdi_spec_round_trip(void **state)
{
    json_t *j = gd_dra_cdi_json(ref.uid, "/var/lib/gpuslice/lib",
                                "/var/lib/gpuslice/lib/ld.so.preload", "/run/gpuslice/pod",
                                "/run/gpuslice/tenants"),
           *back;
    char *text, id[256];

    (void)state;
    assert_non_null(j);
    text = json_dumps(j, JSON_SORT_KEYS);
    back = json_loads(text, 0, NULL);
    assert_true(json_equal(j, back));
    assert_string_equal(str_at(back, "cdiVersion"), "0.3.0");
    assert_string_equal(str_at(back, "kind"), "gpuslice.io/claim");
    assert_string_equal(str_at(back, "devices.0.name"), ref.uid);
    assert_string_equal(str_at(back, "devices.0.containerEdits.env.0"), "GPUSLICE_POD=1");
    assert_string_equal(str_at(back, "devices.0.containerEdits.mounts.0.hostPath"),
                        "/var/lib/gpuslice/lib");
    assert_string_equal(str_at(back, "devices.0.containerEdits.mounts.0.containerPath"),
                        "/usr/local/gpuslice");
    assert_string_equal(str_at(back, "devices.0.containerEdits.mounts.1.containerPath"),
                        "/etc/ld.so.preload");
    assert_string_equal(str_at(back, "devices.0.containerEdits.mounts.2.hostPath"),
                        "/run/gpuslice/pod");
    assert_string_equal(str_at(back, "devices.0.containerEdits.mounts.2.containerPath"),
                        "/run/gpuslice");
    assert_string_equal(str_at(back, "devices.0.containerEdits.mounts.3.hostPath"),
                        "/run/gpuslice/tenants");
    assert_string_equal(str_at(back, "devices.0.containerEdits.mounts.3.containerPath"),
                        "/run/gpuslice/tenants");
    assert_string_equal(str_at(back, "devices.0.containerEdits.mounts.1.options.0"), "ro");
    assert_string_equal(str_at(back, "devices.0.containerEdits.mounts.1.options.3"), "bind");
    free(text);
    json_decref(back);
    json_decref(j);
    gd_dra_cdi_id(ref.uid, id, sizeof(id));
    assert_string_equal(id, "gpuslice.io/claim=5c4c2d6e-1111-2222-3333-444455556666");
    /* not a CDI device name: no spec, no ID */
    assert_null(gd_dra_cdi_json("../x", "/l", "/p", "/d", "/t"));
    assert_null(gd_dra_cdi_json("-x", "/l", "/p", "/d", "/t"));
    assert_null(gd_dra_cdi_json("x y", "/l", "/p", "/d", "/t"));
    assert_null(gd_dra_cdi_json("", "/l", "/p", "/d", "/t"));
    assert_null(gd_dra_cdi_json("x", "rel", "/p", "/d", "/t"));
    assert_null(gd_dra_cdi_json("x", "/l", "/p", "/d", "rel"));
    gd_dra_cdi_id("a/b", id, sizeof(id));
    assert_string_equal(id, "");
    gd_dra_cdi_id(ref.uid, id, 10); /* too small: nothing rather than a cut ID */
    assert_string_equal(id, "");
}

/* ---- the checkpoint ---- */

static void claims_for_checkpoint(struct gd_dra_claim c[2])
{
    memset(c, 0, 2 * sizeof(c[0]));
    assert_int_equal(
        read_claim(claim_text(META,
                              RES("a", "gpu-0", CC("1Gi", "10")) "," RES(
                                  "b", "gpu-0", CC("2Gi", "5")) "," RES("c", "gpu-3", ""),
                              CFG("", "{\"priority\":\"normal\",\"weight\":9}"),
                              POD("p1") "," POD("p2")),
                   &c[0]),
        0);
    snprintf(c[1].ns, sizeof(c[1].ns), "ml");
    snprintf(c[1].name, sizeof(c[1].name), "infer");
    snprintf(c[1].uid, sizeof(c[1].uid), "u-2");
    c[1].nhold = 1;
    snprintf(c[1].hold[0].uuid, sizeof(c[1].hold[0].uuid), "GPU-x");
    snprintf(c[1].hold[0].device, sizeof(c[1].hold[0].device), "gpu-12");
    c[1].hold[0].nreq = 1;
    snprintf(c[1].hold[0].request[0], sizeof(c[1].hold[0].request[0]), "r");
    c[1].hold[0].mem_bytes = 80 * GiB;
    /* A DeviceClass's latency claim at the greatest weight: each field's upper bound. */
    c[1].priority = GPUSLICE_PRIORITY_LATENCY;
    c[1].weight = GPUSLICE_WEIGHT_MAX;
}

/* A class's configuration is its admin's: only the claim's own marks what its author set. */
static void test_config_source_marks_the_author(void **state)
{
    struct gd_dra_claim c;
    static const char cls[] = "{\"source\":\"FromClass\",\"opaque\":{\"driver\":"
                              "\"gpu.gpuslice.io\",\"parameters\":{\"priority\":\"latency\","
                              "\"weight\":7}}}";

    (void)state;
    assert_int_equal(read_claim(claim_text(META, RES("a", "gpu-0", CC("1Gi", "10")), cls, ""),
                                &c),
                     0);
    assert_int_equal(c.priority, GPUSLICE_PRIORITY_LATENCY);
    assert_int_equal(c.weight, 7);
    assert_int_equal(c.claim_set, 0);
    assert_int_equal(read_claim(claim_text(META, RES("a", "gpu-0", CC("1Gi", "10")),
                                           CFG("", "{\"weight\":7}"), ""),
                                &c),
                     0);
    assert_int_equal(c.claim_set, GD_DRA_CLAIM_SET_WEIGHT);
    assert_int_equal(read_claim(claim_text(META, RES("a", "gpu-0", CC("1Gi", "10")),
                                           CFG("", "{\"priority\":\"background\"}"), ""),
                                &c),
                     0);
    assert_int_equal(c.claim_set, GD_DRA_CLAIM_SET_PRIORITY);
}

static void test_checkpoint_round_trip(void **state)
{
    struct gd_dra_claim c[2], back[4];
    json_t *j, *again;
    char *text;
    int n;

    (void)state;
    claims_for_checkpoint(c);
    j = gd_dra_checkpoint_json(c, 2);
    assert_non_null(j);
    text = json_dumps(j, 0);
    again = json_loads(text, 0, NULL);
    assert_int_equal(gd_dra_checkpoint_read(again, back, 4, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 2);
    /* who set the class is judged at Prepare only, and not kept */
    assert_int_equal(back[0].claim_set, 0);
    c[0].claim_set = c[1].claim_set = 0;
    assert_memory_equal(&back[0], &c[0], sizeof(c[0]));
    assert_memory_equal(&back[1], &c[1], sizeof(c[1]));
    assert_int_equal(back[0].priority, GPUSLICE_PRIORITY_NORMAL);
    assert_int_equal(back[0].hold[0].nreq, 2);
    /* a restart keeps a latency claim (a checkpoint that refused it lost every claim) */
    assert_int_equal(back[1].priority, GPUSLICE_PRIORITY_LATENCY);
    assert_int_equal(back[1].weight, GPUSLICE_WEIGHT_MAX);
    /* no more than max */
    assert_int_equal(gd_dra_checkpoint_read(again, back, 1, &n, err, sizeof(err)), -1);
    assert_int_equal(n, 0);
    free(text);
    json_decref(again);
    json_decref(j);
    /* none prepared */
    j = gd_dra_checkpoint_json(NULL, 0);
    assert_int_equal(gd_dra_checkpoint_read(j, back, 4, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 0);
    json_decref(j);
}

/* A corruption: a change at a path of the checkpoint, and what the message must name. */
struct corrupt {
    const char *path, *key; /* the object (path) and its key set to value (NULL: removed) */
    const char *value;
    const char *field;
};

static const struct corrupt corrupts[] = {
    { "", "version", "2", "version" },
    { "", "version", "\"1\"", "version" },
    { "", "claims", "{}", "claims" },
    { "", "extra", "1", "unknown key \"extra\"" },
    { "claims.0", "uid", NULL, "claims[0].uid is missing" },
    { "claims.0", "uid", "\"\"", "claims[0].uid is empty" },
    { "claims.0", "name", "7", "claims[0].name is not a string" },
    { "claims.0", "priority", "4", "claims[0].priority" },
    { "claims.0", "weight", "101", "claims[0].weight" },
    { "claims.0", "weight", "-1", "claims[0].weight" },
    { "claims.0", "holds", "[]", "claims[0].holds" },
    { "claims.0", "pods", "[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\"]",
      "claims[0].pods" },
    { "claims.0", "ns", "\"x\"", "unknown key \"ns\"" },
    { "claims.0.holds.1", "device", "\"gpu-03\"", "claims[0].holds[1].device" },
    { "claims.0.holds.1", "cores", "101", "claims[0].holds[1].cores" },
    { "claims.0.holds.1", "cores", "1.5", "claims[0].holds[1].cores" },
    { "claims.0.holds.1", "memory", "-1", "claims[0].holds[1].memory" },
    { "claims.0.holds.1", "requests", "[]", "claims[0].holds[1].requests" },
    { "claims.0.holds.1", "requests", "[\"a\",\"b\",\"c\",\"d\",\"e\"]",
      "claims[0].holds[1].requests" },
    { "claims.0.holds.0", "requests", "[\"" LONG70 "\"]", "claims[0].holds[0].requests[0]" },
    { "claims.0.holds.0", "uuid", "\"" LONG140 "\"", "claims[0].holds[0].uuid is longer" },
    { "claims.1", "uid", "\"5c4c2d6e-1111-2222-3333-444455556666\"", "claims[1].uid" },
};

static void test_checkpoint_corruptions_are_refused(void **state)
{
    struct gd_dra_claim c[2], back[4];
    size_t i;
    int n;

    (void)state;
    claims_for_checkpoint(c);
    for (i = 0; i < sizeof(corrupts) / sizeof(corrupts[0]); i++) {
        const struct corrupt *x = &corrupts[i];
        json_t *j = gd_dra_checkpoint_json(c, 2), *o = (json_t *)path(j, x->path);

        assert_non_null(o);
        if (x->value)
            json_object_set_new(o, x->key, json_loads(x->value, JSON_DECODE_ANY, NULL));
        else
            json_object_del(o, x->key);
        n = -7;
        if (gd_dra_checkpoint_read(j, back, 4, &n, err, sizeof(err)) != -1)
            fail_msg("%s.%s = %s: accepted", x->path, x->key, x->value ? x->value : "(none)");
        if (getenv("DRA_DOC_VERBOSE"))
            print_message("%s\n", err);
        if (strncmp(err, "checkpoint: ", 12) != 0 || !strstr(err, x->field))
            fail_msg("%s.%s: the message \"%s\" does not name %s", x->path, x->key, err, x->field);
        assert_int_equal(n, 0);
        assert_int_equal(back[0].nhold, 0);
        json_decref(j);
    }
    {
        json_t *a = json_array();

        assert_int_equal(gd_dra_checkpoint_read(a, back, 4, &n, err, sizeof(err)), -1);
        json_decref(a);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_claims_are_read),
        cmocka_unit_test(test_summed_requests_keep_both_names),
        cmocka_unit_test(test_bad_claims_are_refused_naming_the_field),
        cmocka_unit_test(test_more_than_max_devices_is_refused),
        cmocka_unit_test(test_slice_publishes_each_gpu),
        cmocka_unit_test(test_slice_name_of_a_long_node_fits),
        cmocka_unit_test(test_small_gpus_policy),
        cmocka_unit_test(test_cdi_spec_round_trip),
        cmocka_unit_test(test_config_source_marks_the_author),
        cmocka_unit_test(test_checkpoint_round_trip),
        cmocka_unit_test(test_checkpoint_corruptions_are_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

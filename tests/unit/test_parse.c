/* Parsers of outside input: sizes, limit lists, vgpu.rs JSON, HAMi variables. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/config.h"
#include "common/parse.h"

struct size_case {
    const char *in;
    int ok;
    uint64_t want;
};

static void test_size_table(void **state)
{
    static const struct size_case cases[] = {
        {"0", 1, 0},
        {"1073741824", 1, 1073741824ULL},
        {"8G", 1, 8ULL << 30},
        {"8g", 1, 8ULL << 30},
        {"8GiB", 1, 8ULL << 30},
        {"8GB", 1, 8ULL << 30},
        {"512M", 1, 512ULL << 20},
        {"512m", 1, 512ULL << 20},
        {"4k", 1, 4096},
        {"1T", 1, 1ULL << 40},
        {"1.5G", 1, 3ULL << 29},
        {"0.5m", 1, 512ULL << 10},
        {"100B", 1, 100},
        {"", 0, 0},
        {"G", 0, 0},
        {"8 GB", 0, 0},
        {" 8G", 0, 0},
        {"8G ", 0, 0},
        {"-1G", 0, 0},
        {"8X", 0, 0},
        {"8GiBB", 0, 0},
        {"1.5", 0, 0},
        {"banana", 0, 0},
        {"99999999999999999999", 0, 0},
        {"17179869184T", 0, 0},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v = 12345;
        int r = gs_parse_size(cases[i].in, &v);
        if (cases[i].ok) {
            assert_int_equal(r, 0);
            assert_int_equal(v, cases[i].want);
        } else if (r == 0) {
            fail_msg("size \"%s\" was accepted as %llu", cases[i].in, (unsigned long long)v);
        }
    }
}

static void test_sm_partition_values(void **state)
{
    static const char *const bad[] = {"0", "x", "16@", "@4", "16@4096", "5000", "101%", "0%",
                                      "25%/fine", "16/fine/fine", "16@-1", "1.5", "16 ", "%"};
    struct gs_limits l;
    char err[256];
    size_t i;

    (void)state;
    assert_int_equal(gs_parse_limit_list("16", GS_VALUE_SMS, "--sms", &l, err, sizeof(err)), 0);
    assert_int_equal(GS_SMS_COUNT(l.e[0].value), 16);
    assert_int_equal(GS_SMS_FIRST(l.e[0].value), 0);
    assert_int_equal(gs_parse_limit_list("0:16@32,1:8@0/fine", GS_VALUE_SMS, "--sms", &l, err,
                                         sizeof(err)),
                     0);
    assert_int_equal(l.n, 2);
    assert_int_equal(GS_SMS_COUNT(l.e[0].value), 16);
    assert_int_equal(GS_SMS_FIRST(l.e[0].value), 32);
    assert_false(l.e[0].value & GS_SMS_FINE);
    assert_int_equal(GS_SMS_COUNT(l.e[1].value), 8);
    assert_int_equal(GS_SMS_FIRST(l.e[1].value), 0);
    assert_true(l.e[1].value & GS_SMS_FINE);
    assert_int_equal(gs_parse_limit_list("25%", GS_VALUE_SMS, "GPUSLICE_SMS", &l, err, sizeof(err)),
                     0);
    assert_true(l.e[0].value & GS_SMS_SHARE);
    assert_int_equal(GS_SMS_COUNT(l.e[0].value), 25);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(gs_parse_limit_list(bad[i], GS_VALUE_SMS, "--sms", &l, err, sizeof(err)),
                         -EINVAL);
        assert_non_null(strstr(err, "--sms"));
    }
}

static void test_format_size_table(void **state)
{
    static const struct {
        uint64_t bytes;
        const char *text;
    } cases[] = {
        {0, "0 B"},
        {1000, "1000 B"},
        {4096, "4 KiB"},
        {1047552, "1023 KiB"}, /* a multiple of KiB below 1 MiB stays exact */
        {1048576, "1 MiB"},
        {1536ULL << 20, "1536 MiB"},
        {4ULL << 30, "4 GiB"},
        {633152ULL << 10, "618.31 MiB"},
        {(2ULL << 30) + 1, "2.00 GiB"},
        {150754820096ULL, "143771 MiB"},
        {150754820097ULL, "140.40 GiB"},
        {3ULL << 40, "3 TiB"},
    };
    char buf[64];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gs_format_size(cases[i].bytes, buf, sizeof(buf));
        assert_string_equal(buf, cases[i].text);
    }
}

static void test_limit_list_per_device(void **state)
{
    struct gs_limits l;
    char err[256];

    (void)state;
    assert_int_equal(gs_parse_limit_list("0:8G,1:4G", GS_VALUE_SIZE, "--memory", &l, err,
                                         sizeof(err)),
                     0);
    assert_int_equal(l.n, 2);
    assert_int_equal(gs_limits_lookup(&l, 0, NULL), 8ULL << 30);
    assert_int_equal(gs_limits_lookup(&l, 1, NULL), 4ULL << 30);
    assert_int_equal(gs_limits_lookup(&l, 2, NULL), 0);
}

static void test_limit_list_default_and_uuid_override(void **state)
{
    const char *u = "GPU-5AC1CE00-0000-4000-8000-000000000001";
    struct gs_limits l;
    char err[256];

    (void)state;
    assert_int_equal(gs_parse_limit_list("8G,1:4G,GPU-5ac1ce00-0000-4000-8000-000000000001:1G",
                                         GS_VALUE_SIZE, "--memory", &l, err, sizeof(err)),
                     0);
    assert_int_equal(gs_limits_lookup(&l, 0, "gpu-00000000-0000-0000-0000-000000000000"),
                     8ULL << 30);
    assert_int_equal(gs_limits_lookup(&l, 1, NULL), 4ULL << 30);
    assert_int_equal(gs_limits_lookup(&l, 1, u), 1ULL << 30); /* UUID wins, any case */
}

struct bad_case {
    const char *in;
    const char *must_mention;
};

static void test_limit_list_bad_inputs_are_named(void **state)
{
    static const struct bad_case cases[] = {
        {"", "empty"},
        {"8 GB", "\"8 GB\" is not a size"},
        {"0", "above zero"},
        {"0:0", "above zero"},
        {"x:8G", "\"x\" is not a device"},
        {"GPU-12:8G", "not a device"},
        {"0:8G,0:4G", "twice"},
        {"8G,", "trailing comma"},
        {"8G,4G", "twice"},
        {"0:", "not a size"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gs_limits l;
        char err[256] = "";
        assert_true(gs_parse_limit_list(cases[i].in, GS_VALUE_SIZE, "--memory", &l, err,
                                        sizeof(err)) < 0);
        if (strstr(err, cases[i].must_mention) == NULL || strstr(err, "--memory") == NULL)
            fail_msg("for \"%s\" the message was: %s", cases[i].in, err);
    }
}

static void test_percent_values(void **state)
{
    struct gs_limits l;
    char err[256];

    (void)state;
    assert_int_equal(gs_parse_limit_list("30", GS_VALUE_PERCENT, "--compute", &l, err,
                                         sizeof(err)),
                     0);
    assert_int_equal(gs_limits_lookup(&l, 0, NULL), 30);
    assert_true(gs_parse_limit_list("0", GS_VALUE_PERCENT, "--compute", &l, err, sizeof(err)) < 0);
    assert_true(gs_parse_limit_list("101", GS_VALUE_PERCENT, "--compute", &l, err, sizeof(err)) <
                0);
    assert_true(gs_parse_limit_list("5.5", GS_VALUE_PERCENT, "--compute", &l, err, sizeof(err)) <
                0);
}

static void test_tf_json_forms(void **state)
{
    struct gs_limits l;
    char err[256];

    (void)state;
    assert_int_equal(gs_parse_limit_json("{\"0\": 1073741824}", GS_VALUE_SIZE, "T", &l, err,
                                         sizeof(err)),
                     0);
    assert_int_equal(gs_limits_lookup(&l, 0, NULL), 1ULL << 30);
    assert_int_equal(
        gs_parse_limit_json(" { \"gpu-5ac1ce00-0000-4000-8000-000000000000\" : 2147483648 ,"
                            "\"1\":5 } ",
                            GS_VALUE_SIZE, "T", &l, err, sizeof(err)),
        0);
    assert_int_equal(gs_limits_lookup(&l, 7, "GPU-5AC1CE00-0000-4000-8000-000000000000"),
                     2ULL << 30);
    assert_int_equal(gs_limits_lookup(&l, 1, NULL), 5);
    assert_int_equal(gs_parse_limit_json("{}", GS_VALUE_SIZE, "T", &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, 0);
}

static void test_tf_json_malformed(void **state)
{
    static const char *bad[] = {
        "",         "{",           "{\"0\": }",        "{\"0\": -1}",     "{\"0\": 1.5}",
        "{\"0\":1,}", "{0: 1}",      "{\"0\": \"1\"}",   "{\"a\": 1}",      "[1]",
        "{\"0\": 1} x", "{\"0\": 0}", "{\"0\":1 \"1\":2}", "{\"0\": 1e9}",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct gs_limits l;
        char err[256] = "";
        if (gs_parse_limit_json(bad[i], GS_VALUE_SIZE, "TENSOR_FUSION_CUDA_MEM_LIMIT", &l, err,
                                sizeof(err)) == 0)
            fail_msg("accepted malformed JSON %s", bad[i]);
        assert_non_null(strstr(err, "TENSOR_FUSION_CUDA_MEM_LIMIT"));
    }
}

static void test_env_precedence(void **state)
{
    char *own[] = {"GPUSLICE_MEMORY_LIMIT=1G", "TENSOR_FUSION_CUDA_MEM_LIMIT={\"0\": 2147483648}",
                   "CUDA_DEVICE_MEMORY_LIMIT=3g", NULL};
    char *tf[] = {"TENSOR_FUSION_CUDA_MEM_LIMIT={\"0\": 2147483648}",
                  "CUDA_DEVICE_MEMORY_LIMIT=3g", NULL};
    char *hami[] = {"CUDA_DEVICE_MEMORY_LIMIT=3g", "CUDA_DEVICE_MEMORY_LIMIT_1=512m",
                    "CUDA_DEVICE_MEMORY_LIMIT_FOO=1", NULL};
    char *none[] = {"PATH=/bin", NULL};
    struct gs_limits l;
    char err[256];

    (void)state;
    assert_int_equal(gs_config_memory(own, &l, err, sizeof(err)), 0);
    assert_string_equal(l.source, "GPUSLICE_MEMORY_LIMIT");
    assert_int_equal(gs_limits_lookup(&l, 0, NULL), 1ULL << 30);
    assert_int_equal(gs_config_memory(tf, &l, err, sizeof(err)), 0);
    assert_string_equal(l.source, "TENSOR_FUSION_CUDA_MEM_LIMIT");
    assert_int_equal(gs_limits_lookup(&l, 0, NULL), 2ULL << 30);
    assert_int_equal(gs_limits_lookup(&l, 1, NULL), 0);
    assert_int_equal(gs_config_memory(hami, &l, err, sizeof(err)), 0);
    assert_int_equal(gs_limits_lookup(&l, 0, NULL), 3ULL << 30);
    assert_int_equal(gs_limits_lookup(&l, 1, NULL), 512ULL << 20);
    assert_int_equal(gs_config_memory(none, &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, 0);
}

static void test_env_bad_lower_precedence_still_refused(void **state)
{
    char *env[] = {"GPUSLICE_MEMORY_LIMIT=1G", "CUDA_DEVICE_MEMORY_LIMIT_0=lots", NULL};
    char *env2[] = {"TENSOR_FUSION_CUDA_MEM_LIMIT={bad", NULL};
    struct gs_limits l;
    char err[256];

    (void)state;
    assert_true(gs_config_memory(env, &l, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "CUDA_DEVICE_MEMORY_LIMIT_0"));
    assert_true(gs_config_memory(env2, &l, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "TENSOR_FUSION_CUDA_MEM_LIMIT"));
}

static void test_env_compute_precedence_and_hami_zero(void **state)
{
    char *own[] = {"GPUSLICE_COMPUTE_LIMIT=30", "TENSOR_FUSION_CUDA_UP_LIMIT={\"0\": 40}",
                   "CUDA_DEVICE_SM_LIMIT=50", NULL};
    char *tf[] = {"TENSOR_FUSION_CUDA_UP_LIMIT={\"0\": 40}", "CUDA_DEVICE_SM_LIMIT=50", NULL};
    char *hami[] = {"CUDA_DEVICE_SM_LIMIT=50", "CUDA_DEVICE_SM_LIMIT_1=0", NULL};
    char *bad[] = {"CUDA_DEVICE_SM_LIMIT=150", NULL};
    char *bad_own[] = {"GPUSLICE_COMPUTE_LIMIT=0", NULL};
    struct gs_limits l;
    char err[256];

    (void)state;
    assert_int_equal(gs_config_compute(own, &l, err, sizeof(err)), 0);
    assert_string_equal(l.source, "GPUSLICE_COMPUTE_LIMIT");
    assert_int_equal(gs_limits_lookup(&l, 0, NULL), 30);
    assert_int_equal(gs_config_compute(tf, &l, err, sizeof(err)), 0);
    assert_int_equal(gs_limits_lookup(&l, 0, NULL), 40);
    assert_int_equal(gs_limits_lookup(&l, 1, NULL), 0);
    /* HAMi-core reads 0 as no ceiling, and a device's own variable wins. */
    assert_int_equal(gs_config_compute(hami, &l, err, sizeof(err)), 0);
    assert_int_equal(gs_limits_lookup(&l, 0, NULL), 50);
    assert_int_equal(gs_limits_lookup(&l, 1, NULL), 0);
    assert_true(gs_config_compute(bad, &l, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "CUDA_DEVICE_SM_LIMIT"));
    assert_true(gs_config_compute(bad_own, &l, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "GPUSLICE_COMPUTE_LIMIT"));
}

static void test_uuid_format_roundtrip(void **state)
{
    const unsigned char b[16] = {0x5a, 0xc1, 0xce, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 7};
    char s[GS_UUID_STRLEN], p[GS_UUID_STRLEN];

    (void)state;
    gs_format_uuid(b, s);
    assert_string_equal(s, "gpu-5ac1ce00-0000-4000-8000-000000000007");
    assert_int_equal(gs_parse_uuid("GPU-5AC1CE00-0000-4000-8000-000000000007", 40, p), 1);
    assert_string_equal(p, s);
    assert_int_equal(gs_parse_uuid("GPU-5AC1CE00-0000-4000-8000-00000000000", 39, p), 0);
    assert_int_equal(gs_parse_uuid("MIG-5AC1CE00-0000-4000-8000-000000000007", 40, p), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_table),
        cmocka_unit_test(test_format_size_table),
        cmocka_unit_test(test_limit_list_per_device),
        cmocka_unit_test(test_limit_list_default_and_uuid_override),
        cmocka_unit_test(test_limit_list_bad_inputs_are_named),
        cmocka_unit_test(test_percent_values),
        cmocka_unit_test(test_tf_json_forms),
        cmocka_unit_test(test_tf_json_malformed),
        cmocka_unit_test(test_env_precedence),
        cmocka_unit_test(test_env_bad_lower_precedence_still_refused),
        cmocka_unit_test(test_env_compute_precedence_and_hami_zero),
        cmocka_unit_test(test_uuid_format_roundtrip),
        cmocka_unit_test(test_sm_partition_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

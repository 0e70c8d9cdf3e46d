/* Parsers of outside input: sizes, limit lists, vgpu.rs JSON, HAMi variables. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/config.h"
#include "common/parse.h"
#include "gpuslice/tenant_abi.h"

struct size_case {
    const char *in;
    int ok;
    uint64_t want;
};

static void test_size_table(void **state)
{
    static const struct size_case cases[] = {
        { "0", 1, 0 },
        { "1073741824", 1, 1073741824ULL },
        { "8G", 1, 8ULL << 30 },
        { "8g", 1, 8ULL << 30 },
        { "8GiB", 1, 8ULL << 30 },
        { "8GB", 1, 8ULL << 30 },
        { "512M", 1, 512ULL << 20 },
        { "512m", 1, 512ULL << 20 },
        { "4k", 1, 4096 },
        { "1T", 1, 1ULL << 40 },
        { "1.5G", 1, 3ULL << 29 },
        { "0.5m", 1, 512ULL << 10 },
        { "100B", 1, 100 },
        { "", 0, 0 },
        { "G", 0, 0 },
        { "8 GB", 0, 0 },
        { " 8G", 0, 0 },
        { "8G ", 0, 0 },
        { "-1G", 0, 0 },
        { "8X", 0, 0 },
        { "8GiBB", 0, 0 },
        { "1.5", 0, 0 },
        { "banana", 0, 0 },
        { "99999999999999999999", 0, 0 },
        { "17179869184T", 0, 0 },
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
    static const char *const bad[] = { "0",     "x",    "16@", "@4",       "16@4096",
                                       "5000",  "101%", "0%",  "25%/fine", "16/fine/fine",
                                       "16@-1", "1.5",  "16 ", "%" };
    struct gs_limits l;
    char err[256];
    size_t i;

    (void)state;
    assert_int_equal(gs_parse_limit_list("16", GS_VALUE_SMS, "--sms", &l, err, sizeof(err)), 0);
    assert_int_equal(GS_SMS_COUNT(l.e[0].value), 16);
    assert_int_equal(GS_SMS_FIRST(l.e[0].value), 0);
    assert_int_equal(
        gs_parse_limit_list("0:16@32,1:8@0/fine", GS_VALUE_SMS, "--sms", &l, err, sizeof(err)), 0);
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
        { 0, "0 B" },
        { 1000, "1000 B" },
        { 4096, "4 KiB" },
        { 1047552, "1023 KiB" }, /* a multiple of KiB below 1 MiB stays exact */
        { 1048576, "1 MiB" },
        { 1536ULL << 20, "1536 MiB" },
        { 4ULL << 30, "4 GiB" },
        { 633152ULL << 10, "618.31 MiB" },
        { (2ULL << 30) + 1, "2.00 GiB" },
        { 150754820096ULL, "143771 MiB" },
        { 150754820097ULL, "140.40 GiB" },
        { 3ULL << 40, "3 TiB" },
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
    assert_int_equal(
        gs_parse_limit_list("0:8G,1:4G", GS_VALUE_SIZE, "--memory", &l, err, sizeof(err)), 0);
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
        { "", "empty" },
        { "8 GB", "\"8 GB\" is not a size" },
        { "0", "above zero" },
        { "0:0", "above zero" },
        { "x:8G", "\"x\" is not a device" },
        { "GPU-12:8G", "not a device" },
        { "0:8G,0:4G", "twice" },
        { "8G,", "trailing comma" },
        { "8G,4G", "twice" },
        { "0:", "not a size" },
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gs_limits l;
        char err[256] = "";
        assert_true(
            gs_parse_limit_list(cases[i].in, GS_VALUE_SIZE, "--memory", &l, err, sizeof(err)) < 0);
        if (strstr(err, cases[i].must_mention) == NULL || strstr(err, "--memory") == NULL)
            fail_msg("for \"%s\" the message was: %s", cases[i].in, err);
    }
}

static void test_percent_values(void **state)
{
    struct gs_limits l;
    char err[256];

    (void)state;
    assert_int_equal(gs_parse_limit_list("30", GS_VALUE_PERCENT, "--compute", &l, err, sizeof(err)),
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
    assert_int_equal(
        gs_parse_limit_json("{\"0\": 1073741824}", GS_VALUE_SIZE, "T", &l, err, sizeof(err)), 0);
    assert_int_equal(gs_limits_lookup(&l, 0, NULL), 1ULL << 30);
    assert_int_equal(
        gs_parse_limit_json(" { \"gpu-5ac1ce00-0000-4000-8000-000000000000\" : 2147483648 ,"
                            "\"1\":1048576 } ",
                            GS_VALUE_SIZE, "T", &l, err, sizeof(err)),
        0);
    assert_int_equal(gs_limits_lookup(&l, 7, "GPU-5AC1CE00-0000-4000-8000-000000000000"),
                     2ULL << 30);
    assert_int_equal(gs_limits_lookup(&l, 1, NULL), 1048576);
    assert_int_equal(gs_parse_limit_json("{}", GS_VALUE_SIZE, "T", &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, 0);
}

static void test_tf_json_malformed(void **state)
{
    static const char *bad[] = {
        "",
        "{",
        "{\"0\": }",
        "{\"0\": -1}",
        "{\"0\": 1.5}",
        "{\"0\":1,}",
        "{0: 1}",
        "{\"0\": \"1\"}",
        "{\"a\": 1}",
        "[1]",
        "{\"0\": 1} x",
        "{\"0\": 0}",
        "{\"0\":1 \"1\":2}",
        "{\"0\": 1e9}",
        "{\"0\": 01073741824}",
        "{\"0\": 100}",
        "{\"0\": 99999999999999999999}",
        "{\"1000\": 1073741824}",
        "{\"0\": 1073741824, \"0\": 1073741824}",
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
    char *own[] = { "GPUSLICE_MEMORY_LIMIT=1G", "TENSOR_FUSION_CUDA_MEM_LIMIT={\"0\": 2147483648}",
                    "CUDA_DEVICE_MEMORY_LIMIT=3g", NULL };
    char *tf[] = { "TENSOR_FUSION_CUDA_MEM_LIMIT={\"0\": 2147483648}",
                   "CUDA_DEVICE_MEMORY_LIMIT=3g", NULL };
    /* CUDA_DEVICE_MEMORY_LIMITS and HAMi-core's shared-cache variable are other variables. */
    char *hami[] = { "CUDA_DEVICE_MEMORY_LIMIT=3g", "CUDA_DEVICE_MEMORY_LIMIT_1=512m",
                     "CUDA_DEVICE_MEMORY_LIMITS=1", "CUDA_DEVICE_MEMORY_SHARED_CACHE=/tmp/x",
                     NULL };
    char *none[] = { "PATH=/bin", NULL };
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
    char *env[] = { "GPUSLICE_MEMORY_LIMIT=1G", "CUDA_DEVICE_MEMORY_LIMIT_0=lots", NULL };
    char *env2[] = { "TENSOR_FUSION_CUDA_MEM_LIMIT={bad", NULL };
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
    char *own[] = { "GPUSLICE_COMPUTE_LIMIT=30", "TENSOR_FUSION_CUDA_UP_LIMIT={\"0\": 40}",
                    "CUDA_DEVICE_SM_LIMIT=50", NULL };
    char *tf[] = { "TENSOR_FUSION_CUDA_UP_LIMIT={\"0\": 40}", "CUDA_DEVICE_SM_LIMIT=50", NULL };
    char *hami[] = { "CUDA_DEVICE_SM_LIMIT=50", "CUDA_DEVICE_SM_LIMIT_1=0", NULL };
    char *bad[] = { "CUDA_DEVICE_SM_LIMIT=150", NULL };
    char *bad_own[] = { "GPUSLICE_COMPUTE_LIMIT=0", NULL };
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
    const unsigned char b[16] = { 0x5a, 0xc1, 0xce, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 7 };
    char s[GS_UUID_STRLEN], p[GS_UUID_STRLEN];

    (void)state;
    gs_format_uuid(b, s);
    assert_string_equal(s, "gpu-5ac1ce00-0000-4000-8000-000000000007");
    assert_int_equal(gs_parse_uuid("GPU-5AC1CE00-0000-4000-8000-000000000007", 40, p), 1);
    assert_string_equal(p, s);
    assert_int_equal(gs_parse_uuid("GPU-5AC1CE00-0000-4000-8000-00000000000", 39, p), 0);
    assert_int_equal(gs_parse_uuid("MIG-5AC1CE00-0000-4000-8000-000000000007", 40, p), 0);
}

/* Issue 12: "0.019999999T" was 3.3 GiB; a fraction is exact in every unit and never wraps. */
static void test_size_fraction_is_exact_and_never_wraps(void **state)
{
    static const struct size_case cases[] = {
        { "0.019999999T", 1, 21990231456ULL }, /* 0.019999999 * 2^40, truncated */
        { "0.0199999999999999999999999T", 1, 21990232555ULL },
        { "0.999999999999999999999999999T", 1, (1ULL << 40) - 1 },
        { "1.999999999999999999999K", 1, 2047 },
        { "0.1K", 1, 102 },
        { "0.3M", 1, 314572 },
        { "1.000000000000000000000000001G", 1, 1ULL << 30 },
        { "0.00000000000000000000000001T", 1, 0 },
        { ".5G", 1, 1ULL << 29 },
        { "1.000", 1, 1 },
        { "18446744073709551615", 1, UINT64_MAX },
        { "18446744073709551615B", 1, UINT64_MAX },
        { "16777215.999999999999999999999T", 1, UINT64_MAX },
        { "17179869183.99999999999999999999G", 1, UINT64_MAX },
        { "4Gi", 1, 4ULL << 30 },
        { "18446744073709551616", 0, 0 },
        { "16777216T", 0, 0 },
        { "16777216.0T", 0, 0 },
        { "17179869184G", 0, 0 },
        { "18014398509481984K", 0, 0 },
        { "1.", 0, 0 },
        { "1.G", 0, 0 },
        { ".", 0, 0 },
        { ".G", 0, 0 },
        { "0.5", 0, 0 },
        { "1.0000001", 0, 0 },
        { "1..5G", 0, 0 },
        { "1.5.G", 0, 0 },
        { "1e3", 0, 0 },
        { "0x10M", 0, 0 },
        { "+1G", 0, 0 },
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v = 12345;
        int r = gs_parse_size(cases[i].in, &v);
        if (cases[i].ok && (r != 0 || v != cases[i].want))
            fail_msg("size \"%s\": %d, %llu; want %llu", cases[i].in, r, (unsigned long long)v,
                     (unsigned long long)cases[i].want);
        if (!cases[i].ok && r == 0)
            fail_msg("size \"%s\" was accepted as %llu", cases[i].in, (unsigned long long)v);
    }
    assert_int_equal(gs_parse_size("16777216T", &(uint64_t){ 0 }), -ERANGE);
}

/* Against exact 128-bit arithmetic: W.F<unit> is W * 2^k + floor(F * 2^k / 10^n). */
static void test_size_fraction_matches_exact_arithmetic(void **state)
{
    static const char units[] = "KMGT";
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    int n;

    (void)state;
    for (n = 0; n < 20000; n++) {
        char in[64];
        unsigned k = (unsigned)(n % 4), digits, d;
        uint64_t whole, frac = 0, pow10 = 1, got = 0;
        unsigned __int128 want;
        int len;

        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        whole = (x >> 11) % 100000;
        digits = 1 + (unsigned)((x >> 40) % 19);
        len = snprintf(in, sizeof(in), "%llu.", (unsigned long long)whole);
        for (d = 0; d < digits; d++) {
            unsigned digit = (unsigned)((x >> (d * 3 % 60)) % 10);
            in[len++] = (char)('0' + digit);
            frac = frac * 10 + digit;
            pow10 *= 10;
        }
        in[len++] = units[k];
        in[len] = '\0';
        want = (unsigned __int128)whole << (10 * (k + 1));
        want += ((unsigned __int128)frac << (10 * (k + 1))) / pow10;
        if (gs_parse_size(in, &got) != 0 || got != (uint64_t)want)
            fail_msg("size \"%s\" = %llu, want %llu", in, (unsigned long long)got,
                     (unsigned long long)want);
    }
}

struct env_case {
    const char *var; /* NAME=value */
    int ok;
};

/* Issue 12: HAMi per-device names that HAMi-core would not read left the process unlimited. */
static void test_hami_malformed_names_are_refused(void **state)
{
    static const char *const bases[] = { "CUDA_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_SM_LIMIT" };
    static const struct {
        const char *suffix;
        int ok;
    } names[] = {
        { "", 1 },    { "_0", 1 },    { "_7", 1 },  { "_15", 1 },   { "_999", 1 }, { "S", 1 },
        { "X_0", 1 }, { "_O", 0 },    { "_0x", 0 }, { "_0000", 0 }, { "_", 0 },    { "_00", 0 },
        { "_01", 0 }, { "_1000", 0 }, { "_-1", 0 }, { "_1a", 0 },   { "_ 1", 0 },  { "__0", 0 },
        { "_0_", 0 }, { "_FOO", 0 },  { "_１", 0 },
    };
    size_t b, i;

    (void)state;
    for (b = 0; b < 2; b++) {
        for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            char var[128], name[96], *env[3] = { var, NULL, NULL };
            struct gs_limits l;
            char err[512] = "";
            int r;

            snprintf(name, sizeof(name), "%s%s", bases[b], names[i].suffix);
            snprintf(var, sizeof(var), "%s=%s", name, b == 0 ? "1g" : "30");
            r = b == 0 ? gs_config_memory(env, &l, err, sizeof(err))
                       : gs_config_compute(env, &l, err, sizeof(err));
            if (names[i].ok && r != 0)
                fail_msg("%s was refused: %s", var, err);
            if (!names[i].ok) {
                char form[128];
                snprintf(form, sizeof(form), "%s_<index>", bases[b]);
                if (r != -EINVAL || strstr(err, name) == NULL || strstr(err, form) == NULL)
                    fail_msg("%s: %d, message: %s", var, r, err);
                /* Refused even where a source of higher precedence is set. */
                env[1] = b == 0 ? "GPUSLICE_MEMORY_LIMIT=1G" : "GPUSLICE_COMPUTE_LIMIT=30";
                r = b == 0 ? gs_config_memory(env, &l, err, sizeof(err))
                           : gs_config_compute(env, &l, err, sizeof(err));
                assert_int_equal(r, -EINVAL);
                env[1] = NULL;
            }
        }
    }
}

static void test_hami_names_map_to_their_device(void **state)
{
    char *env[] = { "CUDA_DEVICE_MEMORY_LIMIT_12=2g", "CUDA_DEVICE_MEMORY_LIMIT=1g",
                    "CUDA_DEVICE_MEMORY_LIMITS=junk", "CUDA_DEVICE_MEMORY_LIMIT_12=4g", NULL };
    struct gs_limits l;
    char err[256];

    (void)state;
    assert_int_equal(gs_config_memory(env, &l, err, sizeof(err)), 0);
    assert_int_equal(gs_limits_lookup(&l, 12, NULL), 2ULL << 30); /* the first, as getenv */
    assert_int_equal(gs_limits_lookup(&l, 1, NULL), 1ULL << 30);
    assert_int_equal(l.n, 2);
}

struct msg_case {
    const char *in;
    const char *want; /* the whole message, or a part of it */
};

/* Issue 12: --memory 100 was 100 bytes; no source may give a limit below 1 MiB. */
static void test_memory_below_one_mib_is_refused_from_every_source(void **state)
{
    static const struct msg_case lists[] = {
        { "100", "--memory: \"100\" is 100 bytes, below the 1 MiB minimum (give a unit: 100M, "
                 "100G)" },
        { "100B", "(give a unit: 100M, 100G)" },
        { "1048575", "is 1048575 bytes, below the 1 MiB minimum" },
        { "1023K", "\"1023K\" is 1047552 bytes, below the 1 MiB minimum (use at least 1M" },
        { "0.5M", "below the 1 MiB minimum (use at least 1M" },
        { "0:8G,1:100", "\"100\" is 100 bytes" },
        { "8G,GPU-5ac1ce00-0000-4000-8000-000000000001:4k", "4096 bytes" },
        { "0", "above zero" },
        { "99999999999999999999", "too large" },
    };
    static const struct {
        const char *var;
        const char *want;
    } envs[] = {
        { "GPUSLICE_MEMORY_LIMIT=100",
          "GPUSLICE_MEMORY_LIMIT: \"100\" is 100 bytes, below the 1 MiB minimum (give a unit: "
          "100M, 100G)" },
        { "TENSOR_FUSION_CUDA_MEM_LIMIT={\"0\": 100}",
          "TENSOR_FUSION_CUDA_MEM_LIMIT: the value 100 for \"0\" is 100 bytes, below the 1 MiB "
          "minimum (values here are bytes: 1 GiB is 1073741824)" },
        { "TENSOR_FUSION_CUDA_MEM_LIMIT={\"0\": 1048575}", "values here are bytes" },
        { "CUDA_DEVICE_MEMORY_LIMIT=100", "CUDA_DEVICE_MEMORY_LIMIT: \"100\" is 100 bytes" },
        { "CUDA_DEVICE_MEMORY_LIMIT_0=512k",
          "CUDA_DEVICE_MEMORY_LIMIT_0: \"512k\" is 524288 bytes" },
    };
    static const char *const ok[] = { "1M", "1048576", "1m", "0.0009765625G", "1024K" };
    struct gs_limits l;
    char err[512];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        err[0] = '\0';
        if (gs_parse_limit_list(lists[i].in, GS_VALUE_SIZE, "--memory", &l, err, sizeof(err)) !=
                -EINVAL ||
            strstr(err, lists[i].want) == NULL || strstr(err, "--memory") == NULL)
            fail_msg("--memory %s: message \"%s\", want \"%s\"", lists[i].in, err, lists[i].want);
    }
    for (i = 0; i < sizeof(envs) / sizeof(envs[0]); i++) {
        char *env[] = { (char *)envs[i].var, NULL };
        err[0] = '\0';
        if (gs_config_memory(env, &l, err, sizeof(err)) != -EINVAL ||
            strstr(err, envs[i].want) == NULL)
            fail_msg("%s: message \"%s\", want \"%s\"", envs[i].var, err, envs[i].want);
    }
    for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char var[64], *env[] = { var, NULL };
        assert_int_equal(
            gs_parse_limit_list(ok[i], GS_VALUE_SIZE, "--memory", &l, err, sizeof(err)), 0);
        assert_int_equal(l.e[0].value, GS_MIN_MEMORY_LIMIT);
        snprintf(var, sizeof(var), "CUDA_DEVICE_MEMORY_LIMIT=%s", ok[i]);
        assert_int_equal(gs_config_memory(env, &l, err, sizeof(err)), 0);
        assert_int_equal(gs_limits_lookup(&l, 0, NULL), GS_MIN_MEMORY_LIMIT);
    }
}

/* Issue 12: --compute '' suggested memory sizes; every message shows examples of its kind. */
static void test_messages_show_examples_of_their_kind(void **state)
{
    static const struct {
        enum gs_value_kind kind;
        const char *in;
        const char *want;
    } cases[] = {
        { GS_VALUE_PERCENT, "", "0:30,1:50" },
        { GS_VALUE_PERCENT, ",30", "0:30,1:50" },
        { GS_VALUE_PERCENT, "30,,0:40", "0:30,1:50" },
        { GS_VALUE_PERCENT, "x:30", "0:30,1:50" },
        { GS_VALUE_PERCENT, "abc", "e.g. 30" },
        { GS_VALUE_PERCENT, "150", "1 to 100" },
        { GS_VALUE_SMS, "", "0:16,1:32" },
        { GS_VALUE_SMS, ",16", "0:16,1:32" },
        { GS_VALUE_SMS, "x:16", "0:16,1:32" },
        { GS_VALUE_SMS, "abc", "16@32" },
        { GS_VALUE_SIZE, "", "0:8G,1:4G" },
        { GS_VALUE_SIZE, ",8G", "0:8G,1:4G" },
        { GS_VALUE_SIZE, "x:8G", "0:8G,1:4G" },
        { GS_VALUE_SIZE, "abc", "512M" },
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gs_limits l;
        char err[512] = "";
        const char *what = cases[i].kind == GS_VALUE_SIZE      ? "--memory"
                           : cases[i].kind == GS_VALUE_PERCENT ? "--compute"
                                                               : "--sms";
        assert_int_equal(
            gs_parse_limit_list(cases[i].in, cases[i].kind, what, &l, err, sizeof(err)), -EINVAL);
        if (strstr(err, cases[i].want) == NULL || strncmp(err, what, strlen(what)) != 0 ||
            (cases[i].kind != GS_VALUE_SIZE && (strstr(err, "8G") || strstr(err, "512M"))))
            fail_msg("%s \"%s\": message \"%s\", want \"%s\"", what, cases[i].in, err,
                     cases[i].want);
    }
}

static void test_duplicate_device_is_named(void **state)
{
    struct gs_limits l;
    char err[256];

    (void)state;
    assert_int_equal(
        gs_parse_limit_list("0:30,1:40,1:50", GS_VALUE_PERCENT, "--compute", &l, err, sizeof(err)),
        -EINVAL);
    assert_string_equal(err, "--compute: device 1 is given twice");
}

static void test_share_table(void **state)
{
    static const struct {
        const char *in;
        int want; /* 0: refused */
    } cases[] = {
        { "1", 1 },          { "50", 50 },  { "100", 100 },
        { "0100", 100 },     { "0", 0 },    { "101", 0 },
        { "", 0 },           { "-5", 0 },   { "+5", 0 },
        { " 5", 0 },         { "5 ", 0 },   { "5%", 0 },
        { "1.5", 0 },        { "0x10", 0 }, { "99999999999999999999", 0 },
        { "4294967346", 0 },
    };
    size_t i;

    (void)state;
    assert_int_equal(gs_parse_share(NULL, &(int){ 0 }), -EINVAL);
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int v = -1, r = gs_parse_share(cases[i].in, &v);
        if (cases[i].want ? (r != 0 || v != cases[i].want) : r != -EINVAL)
            fail_msg("share \"%s\": %d, %d", cases[i].in, r, v);
    }
}

static void test_priority_and_weight(void **state)
{
    static const char *const bad_prio[] = { "", "urgent", "latency ", " normal", "low", "3", NULL };
    static const char *const bad_weight[] = { "",    "0",  "101", "-1",          "+2",
                                              "1.5", "2x", " 2",  "99999999999", "0x10" };
    uint32_t v;
    size_t i;

    (void)state;
    assert_int_equal(gs_parse_priority("latency", &v), 0);
    assert_int_equal(v, GPUSLICE_PRIORITY_LATENCY);
    assert_int_equal(gs_parse_priority("Normal", &v), 0);
    assert_int_equal(v, GPUSLICE_PRIORITY_NORMAL);
    assert_int_equal(gs_parse_priority("BACKGROUND", &v), 0);
    assert_int_equal(v, GPUSLICE_PRIORITY_BACKGROUND);
    for (i = 0; i < sizeof(bad_prio) / sizeof(bad_prio[0]); i++)
        if (gs_parse_priority(bad_prio[i], &v) != -EINVAL)
            fail_msg("priority \"%s\" accepted", bad_prio[i] ? bad_prio[i] : "(null)");
    assert_string_equal(gs_priority_name(GPUSLICE_PRIORITY_UNSET), "normal");
    assert_string_equal(gs_priority_name(GPUSLICE_PRIORITY_LATENCY), "latency");
    assert_string_equal(gs_priority_name(GPUSLICE_PRIORITY_BACKGROUND), "background");
    assert_null(gs_priority_name(4));
    assert_int_equal(gs_parse_weight("1", &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(gs_parse_weight("100", &v), 0);
    assert_int_equal(v, 100);
    assert_int_equal(gs_parse_weight("007", &v), 0);
    assert_int_equal(v, 7);
    for (i = 0; i < sizeof(bad_weight) / sizeof(bad_weight[0]); i++)
        if (gs_parse_weight(bad_weight[i], &v) != -EINVAL)
            fail_msg("weight \"%s\" accepted", bad_weight[i]);
    assert_int_equal(gs_parse_weight(NULL, &v), -EINVAL);
    assert_int_equal(gs_parse_yield_sms("2", &v), 0);
    assert_int_equal(v, 2);
    assert_int_equal(gs_parse_yield_sms("96", &v), 0);
    assert_int_equal(v, 96);
    assert_int_equal(gs_parse_yield_sms("1024", &v), 0);
    assert_int_equal(v, 1024);
    {
        static const char *const bad_yield[] = { "",   "0",  "1",  "1025", "99999999999", "-8",
                                                 "+8", " 8", "8 ", "8x",   "0x10",        "1.5" };
        for (i = 0; i < sizeof(bad_yield) / sizeof(bad_yield[0]); i++)
            if (gs_parse_yield_sms(bad_yield[i], &v) != -EINVAL)
                fail_msg("yield SMs \"%s\" accepted", bad_yield[i]);
    }
    assert_int_equal(gs_parse_yield_sms(NULL, &v), -EINVAL);
}

/*
 * Issue 32: the ends of each accepted range are accepted and one past each is refused, so an
 * off-by-one at either end fails here. Compute ceilings 1..100; SM partitions up to
 * GS_SMS_MAX SMs, a first SM below it, 1..100 %; sizes up to 2^64 - 1 bytes.
 */
static void test_range_ends_accepted_one_past_refused(void **state)
{
    static const struct {
        const char *in;
        enum gs_value_kind kind;
        uint64_t want; /* 0: refused */
    } cases[] = {
        { "1", GS_VALUE_PERCENT, 1 },
        { "100", GS_VALUE_PERCENT, 100 },
        { "0", GS_VALUE_PERCENT, 0 },
        { "101", GS_VALUE_PERCENT, 0 },
        { "1", GS_VALUE_SMS, 1 },
        { "4096", GS_VALUE_SMS, 4096 },
        { "0", GS_VALUE_SMS, 0 },
        { "4097", GS_VALUE_SMS, 0 },
        { "1@4095", GS_VALUE_SMS, 1 | 4095ULL << 32 },
        { "1@4096", GS_VALUE_SMS, 0 },
        { "1%", GS_VALUE_SMS, 1 | GS_SMS_SHARE },
        { "100%", GS_VALUE_SMS, 100 | GS_SMS_SHARE },
        { "0%", GS_VALUE_SMS, 0 },
        { "101%", GS_VALUE_SMS, 0 },
        { "1M", GS_VALUE_SIZE, 1ULL << 20 },
        { "1048575", GS_VALUE_SIZE, 0 },
        { "18446744073709551615", GS_VALUE_SIZE, UINT64_MAX },
        { "18446744073709551616", GS_VALUE_SIZE, 0 },
        { "16777215T", GS_VALUE_SIZE, 16777215ULL << 40 },
        { "16777216T", GS_VALUE_SIZE, 0 },
    };
    struct gs_limits l;
    char err[512];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int r = gs_parse_limit_list(cases[i].in, cases[i].kind, "--limit", &l, err, sizeof(err));
        if (cases[i].want ? r != 0 || gs_limits_lookup(&l, 0, NULL) != cases[i].want : r == 0)
            fail_msg("\"%s\" (kind %d): %d, %llu", cases[i].in, (int)cases[i].kind, r,
                     r == 0 ? (unsigned long long)gs_limits_lookup(&l, 0, NULL) : 0ULL);
    }
    /* A compute ceiling per device at both ends. */
    assert_int_equal(
        gs_parse_limit_list("0:1,1:100", GS_VALUE_PERCENT, "--compute", &l, err, sizeof(err)), 0);
    assert_int_equal(gs_limits_lookup(&l, 0, NULL), 1);
    assert_int_equal(gs_limits_lookup(&l, 1, NULL), 100);
    assert_true(
        gs_parse_limit_list("0:1,1:101", GS_VALUE_PERCENT, "--compute", &l, err, sizeof(err)) < 0);
    /* The size parser alone: 2^64 - 1 is the largest, by digits or by a unit. */
    {
        uint64_t v = 0;
        assert_int_equal(gs_parse_size("18446744073709551615", &v), 0);
        assert_true(v == UINT64_MAX);
        assert_int_equal(gs_parse_size("18446744073709551616", &v), -ERANGE);
        assert_int_equal(gs_parse_size("16777215.99999999999T", &v), 0);
        assert_true(v < UINT64_MAX && v > (16777215ULL << 40));
        assert_int_equal(gs_parse_size("16777216T", &v), -ERANGE);
    }
}

/* HAMi's shared file: an absolute path of a file, or nothing; anything else is named. */
static void test_shared_cache_path(void **state)
{
    static const struct {
        const char *var; /* NULL: not set */
        int ok;
        const char *path; /* what is used when ok (NULL: none) */
    } cases[] = {
        { NULL, 1, NULL },
        { "CUDA_DEVICE_MEMORY_SHARED_CACHE=", 1, NULL },
        { "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/a.cache", 1, "/usr/local/vgpu/a.cache" },
        { "CUDA_DEVICE_MEMORY_SHARED_CACHE=/x", 1, "/x" },
        { "CUDA_DEVICE_MEMORY_SHARED_CACHE=a.cache", 0, NULL },
        { "CUDA_DEVICE_MEMORY_SHARED_CACHE=./a.cache", 0, NULL },
        { "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/", 0, NULL },
        { "CUDA_DEVICE_MEMORY_SHARED_CACHE=/", 0, NULL },
        { "CUDA_DEVICE_MEMORY_SHARED_CACHE=/tmp/.", 0, NULL },
        { "CUDA_DEVICE_MEMORY_SHARED_CACHE=/tmp/..", 0, NULL },
    };
    static char long_var[PATH_MAX + 64];
    const char *p;
    char err[512];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *env[] = { "PATH=/bin", (char *)cases[i].var, NULL };

        err[0] = '\0';
        p = "unchanged";
        assert_int_equal(gs_config_shared_cache(env, &p, err, sizeof(err)),
                         cases[i].ok ? 0 : -EINVAL);
        if (cases[i].ok) {
            if (cases[i].path)
                assert_string_equal(p, cases[i].path);
            else
                assert_null(p);
        } else {
            assert_null(p);
            assert_non_null(strstr(err, "CUDA_DEVICE_MEMORY_SHARED_CACHE: \""));
            assert_non_null(strstr(err, "is not a file's absolute path (use one like /"));
        }
    }
    /* One longer than a path can be. */
    snprintf(long_var, sizeof(long_var), "CUDA_DEVICE_MEMORY_SHARED_CACHE=/");
    memset(long_var + strlen(long_var), 'a', PATH_MAX);
    {
        char *env[] = { long_var, NULL };

        assert_int_equal(gs_config_shared_cache(env, &p, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "...\" is not"));
    }
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
        cmocka_unit_test(test_size_fraction_is_exact_and_never_wraps),
        cmocka_unit_test(test_size_fraction_matches_exact_arithmetic),
        cmocka_unit_test(test_hami_malformed_names_are_refused),
        cmocka_unit_test(test_hami_names_map_to_their_device),
        cmocka_unit_test(test_memory_below_one_mib_is_refused_from_every_source),
        cmocka_unit_test(test_messages_show_examples_of_their_kind),
        cmocka_unit_test(test_duplicate_device_is_named),
        cmocka_unit_test(test_share_table),
        cmocka_unit_test(test_priority_and_weight),
        cmocka_unit_test(test_shared_cache_path),
        cmocka_unit_test(test_range_ends_accepted_one_past_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

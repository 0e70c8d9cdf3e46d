/*
 * Parsers of outside input: sizes, limit lists, vgpu.rs JSON, HAMi variables; the UTF-8
 * decoder and escaping of text anyone may have chosen; what /proc says of a process.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/config.h"
#include "common/parse.h"
#include "common/proc.h"
#include "common/text.h"
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

/* A variable is its whole name: a longer one that starts the same is another variable. */
static void test_env_whole_name(void **state)
{
    char *longer[] = { "GPUSLICE_MEMORY_LIMITS=5G", "GPUSLICE_MEMORY_LIMITX=2G",
                       "GPUSLICE_MEMORY_LIMIT=1G", NULL };
    char *only_longer[] = { "GPUSLICE_MEMORY_LIMITS=5G", "CUDA_DEVICE_MEMORY_LIMITS=3g", NULL };
    struct gs_limits l;
    char err[256] = "";

    (void)state;
    assert_int_equal(gs_config_memory(longer, &l, err, sizeof(err)), 0);
    assert_string_equal(l.source, "GPUSLICE_MEMORY_LIMIT");
    assert_int_equal(gs_limits_lookup(&l, 0, NULL), 1ULL << 30);
    assert_int_equal(gs_config_memory(only_longer, &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, 0);
    assert_string_equal(err, "");
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

/*
 * Device 0's own variable is device 0's, never every device's, whichever comes first in the
 * environment: _0 is an index like _12 (HAMi-core reads CUDA_DEVICE_MEMORY_LIMIT_0 for device 0).
 */
static void test_hami_device_zero_is_one_device(void **state)
{
    char *after[] = { "CUDA_DEVICE_MEMORY_LIMIT=3g", "CUDA_DEVICE_MEMORY_LIMIT_0=1g", NULL };
    char *before[] = { "CUDA_DEVICE_MEMORY_LIMIT_0=1g", "CUDA_DEVICE_MEMORY_LIMIT=3g", NULL };
    char *alone[] = { "CUDA_DEVICE_MEMORY_LIMIT_0=1g", NULL };
    char *sm[] = { "CUDA_DEVICE_SM_LIMIT_0=30", "CUDA_DEVICE_SM_LIMIT=80", NULL };
    char *sm_alone[] = { "CUDA_DEVICE_SM_LIMIT_0=30", NULL };
    char **both[] = { after, before };
    struct gs_limits l;
    char err[256];
    int i;

    (void)state;
    for (i = 0; i < 2; i++) {
        assert_int_equal(gs_config_memory(both[i], &l, err, sizeof(err)), 0);
        assert_int_equal(l.n, 2);
        assert_int_equal(gs_limits_lookup(&l, 0, NULL), 1ULL << 30);
        assert_int_equal(gs_limits_lookup(&l, 1, NULL), 3ULL << 30);
    }
    assert_int_equal(gs_config_memory(alone, &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.e[0].key, GS_KEY_INDEX);
    assert_int_equal(l.e[0].index, 0);
    assert_int_equal(gs_limits_lookup(&l, 0, NULL), 1ULL << 30);
    assert_int_equal(gs_limits_lookup(&l, 1, NULL), 0);
    assert_int_equal(gs_config_compute(sm, &l, err, sizeof(err)), 0);
    assert_int_equal(gs_limits_lookup(&l, 0, NULL), 30);
    assert_int_equal(gs_limits_lookup(&l, 1, NULL), 80);
    assert_int_equal(gs_config_compute(sm_alone, &l, err, sizeof(err)), 0);
    assert_int_equal(gs_limits_lookup(&l, 0, NULL), 30);
    assert_int_equal(gs_limits_lookup(&l, 1, NULL), 0);
    /* Two devices' own variables are two entries, each its device's. */
    {
        char *two[] = { "CUDA_DEVICE_MEMORY_LIMIT_0=1g", "CUDA_DEVICE_MEMORY_LIMIT_1=2g", NULL };

        assert_int_equal(gs_config_memory(two, &l, err, sizeof(err)), 0);
        assert_int_equal(l.n, 2);
        assert_int_equal(gs_limits_lookup(&l, 0, NULL), 1ULL << 30);
        assert_int_equal(gs_limits_lookup(&l, 1, NULL), 2ULL << 30);
        assert_int_equal(gs_limits_lookup(&l, 2, NULL), 0);
    }
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

/* UTF-8 as RFC 3629 has it: each lead byte's range, both ends, and what is refused. */
struct utf8_case {
    const char *in;
    size_t n;    /* bytes offered */
    size_t want; /* the sequence's length, 0 when refused */
    uint32_t cp;
};

static void test_utf8_len_table(void **state)
{
    static const struct utf8_case cases[] = {
        { "A", 1, 1, 0x41 },
        { "\x7f", 1, 1, 0x7f },
        { "\x80", 1, 0, 0 }, /* a continuation byte alone */
        { "\xbf", 1, 0, 0 },
        { "\xc0\x80", 2, 0, 0 }, /* overlong 2-byte forms */
        { "\xc1\xbf", 2, 0, 0 },
        { "\xc2\x80", 2, 2, 0x80 }, /* the first 2-byte code point */
        { "\xc2\x9b", 2, 2, 0x9b },
        { "\xc3\xa9", 2, 2, 0xe9 },
        { "\xdf\xbf", 2, 2, 0x7ff }, /* the last */
        { "\xc2\x7f", 2, 0, 0 },     /* a continuation out of range */
        { "\xc2\xc0", 2, 0, 0 },
        { "\xc2", 1, 0, 0 },         /* truncated */
        { "\xe0\x9f\xbf", 3, 0, 0 }, /* overlong 3-byte */
        { "\xe0\xa0\x80", 3, 3, 0x800 },
        { "\xe1\x80\x80", 3, 3, 0x1000 },
        { "\xe2\x80\xae", 3, 3, 0x202e },
        { "\xec\xbf\xbf", 3, 3, 0xcfff },
        { "\xed\x80\x80", 3, 3, 0xd000 },
        { "\xed\x9f\xbf", 3, 3, 0xd7ff }, /* the last before the surrogates */
        { "\xed\xa0\x80", 3, 0, 0 },      /* surrogates: U+D800 */
        { "\xed\xbf\xbf", 3, 0, 0 },      /* U+DFFF */
        { "\xee\x80\x80", 3, 3, 0xe000 }, /* the first after them */
        { "\xef\xbb\xbf", 3, 3, 0xfeff },
        { "\xef\xbf\xbf", 3, 3, 0xffff },
        { "\xe2\x80\x41", 3, 0, 0 }, /* a third byte that continues nothing */
        { "\xe2\x80\xc0", 3, 0, 0 },
        { "\xe2\x80\xae", 2, 0, 0 },     /* truncated */
        { "\xf0\x8f\xbf\xbf", 4, 0, 0 }, /* overlong 4-byte */
        { "\xf0\x90\x80\x80", 4, 4, 0x10000 },
        { "\xf0\x9f\x98\x80", 4, 4, 0x1f600 },
        { "\xf3\xbf\xbf\xbf", 4, 4, 0xfffff },
        { "\xf4\x80\x80\x80", 4, 4, 0x100000 },
        { "\xf4\x8f\xbf\xbf", 4, 4, 0x10ffff }, /* the last code point */
        { "\xf4\x90\x80\x80", 4, 0, 0 },        /* beyond it */
        { "\xf5\x80\x80\x80", 4, 0, 0 },
        { "\xff", 1, 0, 0 },
        { "\xf0\x9f\x98\x41", 4, 0, 0 },
        { "\xf0\x9f\x41\x80", 4, 0, 0 },
        { "\xf0\x9f\x98", 3, 0, 0 },
        { "\xc3\xa9zz", 4, 2, 0xe9 }, /* only the first sequence */
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint32_t cp = 0xdeadbeef;
        size_t got = gs_utf8_len((const unsigned char *)cases[i].in, cases[i].n, &cp);

        if (got != cases[i].want || (got && cp != cases[i].cp))
            fail_msg("case %zu: length %zu (U+%04X), want %zu (U+%04X)", i, got, (unsigned)cp,
                     cases[i].want, (unsigned)cases[i].cp);
    }
    assert_int_equal(gs_utf8_len((const unsigned char *)"A", 0, NULL), 0);
}

/* The code points kept from a terminal: each range's first and last, and their neighbours. */
static void test_text_control_ranges(void **state)
{
    static const uint32_t controls[] = { 0x00,   0x1b,   0x1f,   0x7f,   0x80,
                                         0x9b,   0x9f,   0x061c, 0x200b, 0x200f,
                                         0x2028, 0x202e, 0x2066, 0x2069, 0xfeff };
    static const uint32_t printable[] = { 0x20,   0x41,   0x7e,   0xa0,   0xe9,   0x061b,
                                          0x061d, 0x200a, 0x2010, 0x2027, 0x202f, 0x2065,
                                          0x206a, 0xfefe, 0xff00, 0x1f600 };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(controls) / sizeof(controls[0]); i++)
        if (!gs_text_is_control(controls[i]))
            fail_msg("U+%04X is not taken for a control", (unsigned)controls[i]);
    for (i = 0; i < sizeof(printable) / sizeof(printable[0]); i++)
        if (gs_text_is_control(printable[i]))
            fail_msg("U+%04X is taken for a control", (unsigned)printable[i]);
}

struct text_case {
    const char *in;
    size_t n;
    const char *safe; /* gs_text_safe */
    const char *json; /* gs_json_string */
};

static void test_text_safe_and_json_string(void **state)
{
    static const struct text_case cases[] = {
        { "plain-name_1.0", 14, "plain-name_1.0", "\"plain-name_1.0\"" },
        { "a\\b\"c", 5, "a\\\\b\"c", "\"a\\\\b\\\"c\"" },
        { "t\tn\nr\r", 6, "t\\x09n\\x0ar\\x0d", "\"t\\tn\\nr\\r\"" },
        { "\x01\x1b[2J\x1f", 6, "\\x01\\x1b[2J\\x1f", "\"\\u0001\\u001b[2J\\u001f\"" },
        { "~\x7f", 2, "~\\x7f", "\"~\\u007f\"" },
        { "\xc2\x80\xc2\x9b\xc2\x9f\xc2\xa0", 8, "\\u0080\\u009b\\u009f\xc2\xa0",
          "\"\\u0080\\u009b\\u009f\xc2\xa0\"" },
        { "\xd8\x9c\xe2\x80\x8b\xe2\x80\x8f\xe2\x80\xa8\xe2\x80\xae\xe2\x81\xa6\xe2\x81\xa9", 20,
          "\\u061c\\u200b\\u200f\\u2028\\u202e\\u2066\\u2069",
          "\"\\u061c\\u200b\\u200f\\u2028\\u202e\\u2066\\u2069\"" },
        { "\xef\xbb\xbfx", 4, "\\ufeffx", "\"\\ufeffx\"" },
        { "caf\xc3\xa9 \xf0\x9f\x98\x80", 10, "caf\xc3\xa9 \xf0\x9f\x98\x80",
          "\"caf\xc3\xa9 \xf0\x9f\x98\x80\"" },
        { "\x9b\xff", 2, "\\x9b\\xff", "\"\\ufffd\\ufffd\"" },
        /* Encoded surrogates and overlong forms are no UTF-8: escaped byte by byte. */
        { "\xed\xa0\x80!", 4, "\\xed\\xa0\\x80!", "\"\\ufffd\\ufffd\\ufffd!\"" },
        { "\xc0\xaf", 2, "\\xc0\\xaf", "\"\\ufffd\\ufffd\"" },
        { "\xe2\x80", 2, "\\xe2\\x80", "\"\\ufffd\\ufffd\"" },
        { "a\0b", 3, "a\\x00b", "\"a\\u0000b\"" },
    };
    char out[256], *buf;
    size_t i, len;
    FILE *f;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gs_text_safe(out, sizeof(out), cases[i].in, cases[i].n);
        if (strcmp(out, cases[i].safe) != 0)
            fail_msg("case %zu: gs_text_safe gave \"%s\", want \"%s\"", i, out, cases[i].safe);
        assert_non_null(f = open_memstream(&buf, &len));
        gs_json_string(f, cases[i].in, cases[i].n);
        fclose(f);
        if (strcmp(buf, cases[i].json) != 0)
            fail_msg("case %zu: gs_json_string gave %s, want %s", i, buf, cases[i].json);
        free(buf);
    }
}

/* gs_text_safe stops at the last whole character that fits, and GS_TEXT_LEN(n) is enough. */
static void test_text_safe_bounds(void **state)
{
    char out[GS_TEXT_LEN(64)], in[64];

    (void)state;
    gs_text_safe(out, 4, "abc", 3);
    assert_string_equal(out, "abc");
    gs_text_safe(out, 3, "abc", 3);
    assert_string_equal(out, "ab");
    gs_text_safe(out, 6, "ab\x1b", 3);
    assert_string_equal(out, "ab"); /* "\x1b" would need 4 more, and a NUL */
    gs_text_safe(out, 7, "ab\x1b", 3);
    assert_string_equal(out, "ab\\x1b");
    gs_text_safe(out, 3, "\xc3\xa9\xc3\xa9", 4);
    assert_string_equal(out, "\xc3\xa9"); /* never half a character */
    gs_text_safe(out, 2, "\xc3\xa9", 2);
    assert_string_equal(out, "");
    gs_text_safe(out, 4, "a\\b", 3);
    assert_string_equal(out, "a\\\\");
    out[0] = 'x';
    gs_text_safe(out, 0, "abc", 3); /* no room at all: nothing written */
    assert_int_equal(out[0], 'x');
    gs_text_safe(out, sizeof(out), "abc", 1);
    assert_string_equal(out, "a");
    memset(in, 0xff, sizeof(in)); /* the worst case: 4 characters a byte */
    gs_text_safe(out, sizeof(out), in, sizeof(in));
    assert_int_equal(strlen(out), 4 * sizeof(in));
    memset(in, 0x1b, sizeof(in));
    gs_text_safe(out, sizeof(out), in, sizeof(in));
    assert_int_equal(strlen(out), 4 * sizeof(in));
}

/* A fake /proc entry: stat's line, status's text and the PID namespace link, as given. */
static void proc_entry(const char *root, const char *name, const char *stat, const char *status,
                       const char *ns)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", root, name);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/%s/ns", root, name);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/%s/stat", root, name);
    assert_non_null(f = fopen(path, "w"));
    fputs(stat, f);
    fclose(f);
    if (status) {
        snprintf(path, sizeof(path), "%s/%s/status", root, name);
        assert_non_null(f = fopen(path, "w"));
        fputs(status, f);
        fclose(f);
    }
    if (ns) {
        snprintf(path, sizeof(path), "%s/%s/ns/pid", root, name);
        unlink(path);
        assert_int_equal(symlink(ns, path), 0);
    }
}

/*
 * /proc/PID/stat: the start time is field 22 and the parent field 4, counted after the last
 * ')' (a command name may hold spaces, parentheses and a fake state); a zombie or a dead
 * process has no start time. NSpid's last field is the innermost PID; the namespace is the
 * link's inode.
 */
static void test_proc_fields(void **state)
{
    /* Fields 3..22 with values that tell every field apart: ppid 4004, start time 22022. */
    static const char tail[] = "4004 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22022 23 24\n";
    char root[] = "/tmp/gs-test-proc-XXXXXX", line[256], groups[12000], cmd[64];
    size_t at;
    int g;

    (void)state;
    assert_non_null(mkdtemp(root));
    snprintf(line, sizeof(line), "101 (sleep) S %s", tail);
    proc_entry(root, "101", line, "Name:\tsleep\nNSpid:\t101\n", "pid:[4026531836]");
    snprintf(line, sizeof(line), "102 (a) Z (b) R %s", tail); /* the name "a) Z (b" */
    proc_entry(root, "102", line, "Name:\ta) Z (b\nNSpid:\t102\t7\n", "pid:[4026532100]");
    snprintf(line, sizeof(line), "103 (z) Z %s", tail);
    proc_entry(root, "103", line, NULL, NULL);
    snprintf(line, sizeof(line), "104 (x) X %s", tail);
    proc_entry(root, "104", line, NULL, NULL);
    /* A start time of 0 (a process started at boot) is still a live process's. */
    proc_entry(root, "105", "105 (init) S 0 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 0 23\n",
               "Name:\tinit\nNSpid:\t1\t2\t3\n", "pid:[0]");
    /* Too few fields: no start time. */
    proc_entry(root, "106", "106 (short) S 1 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21\n",
               "Name:\tshort\nNSpid:\n", "pid:[4294967296]");
    proc_entry(root, "107", "107 (t) T 2147483648 5\n", "Name:\tt\n", "net:[4026531840]");
    /* A long Groups: line before NSpid (the whole file is read). */
    at = (size_t)snprintf(groups, sizeof(groups), "Name:\tbig\nGroups:\t");
    for (g = 0; g < 2000 && at < sizeof(groups) - 64; g++)
        at += (size_t)snprintf(groups + at, sizeof(groups) - at, "%d ", 100000 + g);
    snprintf(groups + at, sizeof(groups) - at, "\nNSpid:\t108\t42\nNSpgid:\t1\n");
    snprintf(line, sizeof(line), "108 (big) S %s", tail);
    proc_entry(root, "108", line, groups, "pid:[4026532100]");
    gs_proc_set_root(root);

    assert_int_equal(gs_proc_start_time(101), 22022);
    assert_int_equal(gs_proc_parent(101), 4004);
    assert_int_equal(gs_proc_inner_pid(101), 101);
    assert_int_equal(gs_proc_pid_ns(101), 4026531836u);
    assert_int_equal(gs_proc_start_time(102), 22022); /* state R, after the real ')' */
    assert_int_equal(gs_proc_parent(102), 4004);
    assert_int_equal(gs_proc_inner_pid(102), 7);
    assert_int_equal(gs_proc_pid_ns(102), 4026532100u);
    assert_int_equal(gs_proc_start_time(103), 0); /* a zombie */
    assert_int_equal(gs_proc_start_time(104), 0); /* dead */
    assert_int_equal(gs_proc_parent(103), 4004);  /* a zombie still has its parent */
    assert_int_equal(gs_proc_start_time(105), 1);
    assert_int_equal(gs_proc_parent(105), 0);
    assert_int_equal(gs_proc_inner_pid(105), 3);
    assert_int_equal(gs_proc_pid_ns(105), 0);
    assert_int_equal(gs_proc_start_time(106), 0);
    assert_int_equal(gs_proc_inner_pid(106), 0);
    assert_int_equal(gs_proc_pid_ns(106), 0); /* no inode beyond 32 bits */
    assert_int_equal(gs_proc_parent(107), 0); /* no PID beyond 31 bits */
    assert_int_equal(gs_proc_inner_pid(107), 0);
    assert_int_equal(gs_proc_pid_ns(107), 0); /* another kind of namespace */
    assert_int_equal(gs_proc_inner_pid(108), 42);
    assert_int_equal(gs_proc_start_time(109), 0); /* no such process */
    assert_int_equal(gs_proc_parent(109), 0);
    assert_int_equal(gs_proc_inner_pid(109), 0);
    assert_int_equal(gs_proc_pid_ns(109), 0);
    assert_int_equal(gs_proc_start_time(0), 0);
    assert_int_equal(gs_proc_start_time(-1), 0);

    /* Whether PID is the process known by namespace, inner PID and start time. */
    assert_int_equal(gs_proc_is(102, 4026532100u, 7, 22022), 1);
    assert_int_equal(gs_proc_is(102, 4026532100u, 7, 22023), 0); /* the PID recycled */
    assert_int_equal(gs_proc_is(102, 4026532100u, 8, 22022), 0); /* another inner PID */
    assert_int_equal(gs_proc_is(102, 4026532101u, 7, 22022), 0); /* another namespace */
    assert_int_equal(gs_proc_is(103, 4026532100u, 7, 22022), 0); /* a zombie is gone */
    assert_int_equal(gs_proc_is(105, 4026532100u, 3, 1), -1);    /* no namespace shown */
    assert_int_equal(gs_proc_is(0, 4026532100u, 7, 22022), 0);
    /* Found by namespace and inner PID among all of them, and the hint tried first. */
    assert_int_equal(gs_proc_find(4026532100u, 42, 22022, 0), 108);
    assert_int_equal(gs_proc_find(4026532100u, 7, 22022, 102), 102);
    assert_int_equal(gs_proc_find(4026532100u, 7, 22022, 101), 102);
    assert_int_equal(gs_proc_find(4026532100u, 9, 22022, 0), 0);
    /*
     * A process of the start time wanted whose namespace is not shown (another user's, or not
     * dumpable) cannot be told apart: undecidable (-1), never gone (0), or its tenant's member
     * would be reaped while it runs.
     */
    assert_int_equal(gs_proc_find(4026532100u, 3, 1, 0), -1);
    {
        struct gs_proc_want w[3] = { { 4026532100u, 42, 22022, 0 },
                                     { 4026532100u, 3, 1, 0 },
                                     { 4026532100u, 5, 33033, 0 } };

        gs_proc_find_all(w, 3);
        assert_int_equal(w[0].found, 108); /* found */
        assert_int_equal(w[1].found, -1);  /* undecidable */
        assert_int_equal(w[2].found, 0);   /* no process of that start time: gone */
    }

    gs_proc_set_root(NULL);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
}

/* gs_read_text: at most len - 1 bytes, always terminated; -1 for a file that cannot be read. */
static void test_read_text_bounds(void **state)
{
    char path[] = "/tmp/gs-test-read-XXXXXX", buf[8];
    int fd;

    (void)state;
    assert_true((fd = mkstemp(path)) >= 0);
    assert_int_equal(write(fd, "0123456789", 10), 10);
    close(fd);
    memset(buf, 'x', sizeof(buf));
    assert_int_equal(gs_read_text(path, buf, sizeof(buf)), 7);
    assert_string_equal(buf, "0123456");
    assert_int_equal(gs_read_text(path, buf, 2), 1);
    assert_string_equal(buf, "0");
    unlink(path);
    assert_int_equal(gs_read_text(path, buf, sizeof(buf)), -1);
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
        cmocka_unit_test(test_env_whole_name),
        cmocka_unit_test(test_env_bad_lower_precedence_still_refused),
        cmocka_unit_test(test_env_compute_precedence_and_hami_zero),
        cmocka_unit_test(test_uuid_format_roundtrip),
        cmocka_unit_test(test_sm_partition_values),
        cmocka_unit_test(test_size_fraction_is_exact_and_never_wraps),
        cmocka_unit_test(test_size_fraction_matches_exact_arithmetic),
        cmocka_unit_test(test_hami_malformed_names_are_refused),
        cmocka_unit_test(test_hami_names_map_to_their_device),
        cmocka_unit_test(test_hami_device_zero_is_one_device),
        cmocka_unit_test(test_memory_below_one_mib_is_refused_from_every_source),
        cmocka_unit_test(test_messages_show_examples_of_their_kind),
        cmocka_unit_test(test_duplicate_device_is_named),
        cmocka_unit_test(test_share_table),
        cmocka_unit_test(test_priority_and_weight),
        cmocka_unit_test(test_shared_cache_path),
        cmocka_unit_test(test_range_ends_accepted_one_past_refused),
        cmocka_unit_test(test_utf8_len_table),
        cmocka_unit_test(test_text_control_ranges),
        cmocka_unit_test(test_text_safe_and_json_string),
        cmocka_unit_test(test_text_safe_bounds),
        cmocka_unit_test(test_proc_fields),
        cmocka_unit_test(test_read_text_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

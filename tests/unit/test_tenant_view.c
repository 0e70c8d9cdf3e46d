/* The CLI's view of the daemon's tenants: what it takes from an answer, and what it refuses. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "control/json.h"
#include "control/tenant_view.h"

#define GOOD                                                                                       \
    "{\"id\":\"1\",\"name\":\"job\",\"managed\":true,\"owner\":1000,\"creator_pid\":0,"            \
    "\"pids\":[41,42],\"limits\":{\"memory\":{\"default\":1073741824},\"compute\":{"               \
    "\"default\":30}},\"devices\":[{\"uuid\":\"GPU-5ac1ce00-0000-4000-8000-000000000000\","        \
    "\"index\":0,\"memory_limit_bytes\":536870912,\"memory_used_bytes\":4096,"                     \
    "\"compute_limit_percent\":null,\"gpu_time_seconds\":1.5}]}"

static int parse(const char *text, struct tview *v)
{
    char err[256];
    struct gs_json *o = gs_json_parse(text, strlen(text), err, sizeof(err));
    int r;

    assert_non_null(o);
    r = tview_from_json(v, o);
    gs_json_free(o);
    return r;
}

static void test_a_tenant(void **state)
{
    struct tview v;

    (void)state;
    assert_int_equal(parse(GOOD, &v), 0);
    assert_string_equal(v.id, "1");
    assert_string_equal(v.name, "job");
    assert_true(v.managed);
    assert_int_equal(v.owner, 1000);
    assert_int_equal(v.npids, 2);
    assert_int_equal(v.pids[1], 42);
    assert_int_equal(v.def_mem, 1073741824ULL);
    assert_int_equal(v.def_ceiling, 30);
    assert_int_equal(v.ndev, 1);
    assert_int_equal(v.dev[0].index, 0);
    assert_int_equal(v.dev[0].mem_limit, 536870912ULL);
    assert_int_equal(v.dev[0].mem_used, 4096);
    assert_int_equal(v.dev[0].ceiling, 0);
    assert_int_equal(v.dev[0].busy_ns, 1500000000ULL);
    assert_true(v.dev[0].used < 0);
}

/* Each replaces one part of GOOD: the tenant must be refused, never half taken. */
static void test_malformed(void **state)
{
    static const char *const bad[][2] = {
        { "\"id\":\"1\"", "\"id\":1" },
        { "\"id\":\"1\"", "\"id\":\"\"" },
        { "\"owner\":1000", "\"owner\":-1" },
        { "\"owner\":1000", "\"owner\":1.5" },
        { "\"owner\":1000,", "" },
        { "\"managed\":true", "\"managed\":1" },
        { "[41,42]", "[41,0]" },
        { "[41,42]", "\"41\"" },
        { "\"default\":30", "\"default\":101" },
        { "\"default\":1073741824", "\"default\":\"1G\"" },
        { "\"index\":0", "\"index\":-2" },
        { "\"gpu_time_seconds\":1.5", "\"gpu_time_seconds\":-1" },
        { ",\"gpu_time_seconds\":1.5", "" },
        { "\"memory_used_bytes\":4096", "\"memory_used_bytes\":true" },
        { "\"uuid\":\"GPU-5ac1ce00-0000-4000-8000-000000000000\",", "" },
        { "\"devices\":[{", "\"devices\":{\"a\":{" },
        { "[41,42]", "[41,1.5]" },
        { "\"name\":\"job\"", "\"name\":7" },
        { "\"creator_pid\":0", "\"creator_pid\":5000000" },
        { "\"uuid\":\"GPU-5ac1ce00-0000-4000-8000-000000000000\"",
          "\"uuid\":\"GPU-5ac1ce00-0000-4000-8000-000000000000-and-more\"" },
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[1024], *at;
        struct tview v;

        at = strstr(GOOD, bad[i][0]);
        assert_non_null(at);
        snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - GOOD), GOOD, bad[i][1],
                 at + strlen(bad[i][0]));
        if (strstr(text, "\"devices\":{"))
            strcpy(strrchr(text, ']'), "}}");
        if (parse(text, &v) != -EINVAL)
            fail_msg("case %zu (%s) taken: %s", i, bad[i][1], text);
    }
}

static void test_usage_between_readings(void **state)
{
    struct tview_list a = { 0 }, b = { 0 };
    struct tview ta, tb;

    (void)state;
    assert_int_equal(parse(GOOD, &ta), 0);
    tb = ta;
    ta.at_ns = 1000000000ULL;
    tb.at_ns = ta.at_ns + 200000000ULL;
    tb.dev[0].busy_ns += 100000000ULL; /* 0.1 s of GPU time over 0.2 s */
    a.v = &ta;
    a.n = 1;
    b.v = &tb;
    b.n = 1;
    tview_usage(&b, &a);
    assert_true(tb.dev[0].used > 49.99 && tb.dev[0].used < 50.01);
    tb.dev[0].busy_ns = ta.dev[0].busy_ns - 1; /* another tenant under the same id: not negative */
    tview_usage(&b, &a);
    assert_true(tb.dev[0].used == 0);
}

/* An answer: one good tenant between a malformed one and one with 17 GPUs, which are left out. */
static void test_answer_keeps_the_good(void **state)
{
    char body[16384], dev[600], devs[17 * 600];
    struct tview_list l = { 0 };
    char err[256];
    size_t len = 0;
    int i;

    (void)state;
    snprintf(dev, sizeof(dev),
             "{\"uuid\":\"GPU-5ac1ce00-0000-4000-8000-000000000000\",\"gpu_time_seconds\":0}");
    for (i = 0; i < 17; i++)
        len += (size_t)snprintf(devs + len, sizeof(devs) - len, "%s%s", i ? "," : "", dev);
    snprintf(body, sizeof(body),
             "{\"tenants\":[{\"id\":\"2\",\"owner\":-5,\"devices\":[]},%s,"
             "{\"id\":\"3\",\"owner\":1,\"devices\":[%s]}]}",
             GOOD, devs);
    assert_int_equal(tview_parse(&l, body, 777, err, sizeof(err)), 0);
    assert_true(l.daemon);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.malformed, 2);
    assert_string_equal(l.v[0].id, "1");
    assert_int_equal(l.v[0].at_ns, 777); /* no read_monotonic_ns: when the answer came */
    tview_done(&l);
    assert_true(tview_parse(&l, "{\"tenant\":[]}", 1, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "not a tenant list"));
    tview_done(&l);
}

/* The daemon's own read time is used; two readings of one sweep measure nothing. */
static void test_readings_of_one_sweep(void **state)
{
    struct tview_list a = { 0 }, b = { 0 };
    char text[1200], err[256];

    (void)state;
    snprintf(text, sizeof(text), "{\"tenants\":[%.*s,\"read_monotonic_ns\":5000}]}",
             (int)strlen(GOOD) - 1, GOOD);
    assert_int_equal(tview_parse(&a, text, 9999, err, sizeof(err)), 0);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.v[0].at_ns, 5000);
    assert_int_equal(tview_parse(&b, text, 10999, err, sizeof(err)), 0);
    assert_true(tview_stale(&b, &a));
    tview_usage(&b, &a);
    assert_true(b.v[0].dev[0].used < 0);
    b.v[0].at_ns += 100000000ULL;
    b.v[0].dev[0].busy_ns += 25000000ULL;
    assert_false(tview_stale(&b, &a));
    tview_usage(&b, &a);
    assert_true(b.v[0].dev[0].used > 24.99 && b.v[0].dev[0].used < 25.01);
    tview_done(&a);
    tview_done(&b);
}

/* The CLI's JSON of a tenant, every key and value exactly: 5 ms of GPU time is 0.005 s. */
static void test_json_exact(void **state)
{
    struct tview_list l = { 0 };
    char text[1200], err[256], *out = NULL;
    size_t len = 0;
    FILE *f;

    (void)state;
    snprintf(text, sizeof(text), "{\"tenants\":[%s]}", GOOD);
    assert_int_equal(tview_parse(&l, text, 1000, err, sizeof(err)), 0);
    assert_int_equal(l.n, 1);
    l.v[0].dev[0].busy_ns = 5000000ULL;
    l.v[0].dev[0].used = 12.345;
    l.v[0].dev[0].ceiling = 40;
    assert_non_null(f = open_memstream(&out, &len));
    tview_json(f, &l);
    fclose(f);
    assert_string_equal(
        out,
        "[{\"id\":\"1\",\"name\":\"job\",\"owner_uid\":1000,\"creator_pid\":0,\"managed\":true,"
        "\"pids\":[41,42],\"default_memory_limit_bytes\":1073741824,"
        "\"default_compute_limit_percent\":30,\"priority\":\"normal\",\"weight\":1,"
        "\"devices\":[{\"index\":0,\"uuid\":\"GPU-5ac1ce00-0000-4000-8000-000000000000\","
        "\"memory_limit_bytes\":536870912,\"memory_used_bytes\":4096,"
        "\"compute_limit_percent\":40,\"compute_used_percent\":12.35,"
        "\"compute_busy_seconds\":0.005000000}]}]");
    free(out);
    l.v[0].dev[0].busy_ns = 12000000001ULL;
    l.v[0].dev[0].used = -1;
    l.v[0].dev[0].ceiling = 0;
    l.v[0].dev[0].index = -1;
    out = NULL;
    assert_non_null(f = open_memstream(&out, &len));
    tview_json(f, &l);
    fclose(f);
    assert_non_null(strstr(out, "{\"index\":null,"));
    assert_non_null(strstr(out, "\"compute_limit_percent\":null,\"compute_used_percent\":null,"
                                "\"compute_busy_seconds\":12.000000001}"));
    free(out);
    tview_done(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_tenant),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_usage_between_readings),
        cmocka_unit_test(test_answer_keeps_the_good),
        cmocka_unit_test(test_readings_of_one_sweep),
        cmocka_unit_test(test_json_exact),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

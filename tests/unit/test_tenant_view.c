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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_tenant),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_usage_between_readings),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The SM partition planner of gpuslice procs (src/cli/smplan.c), on an H200's granularity. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "common/smplan.h"

static const struct sm_geom h200 = { 132, 8, 16, 2, 66 };
/* What the H200's driver reported (tests/gpu sm_lanes): 15 groups of 8, 12 SMs left over. */
static const struct sm_geom h200_real = { 132, 8, 15, 2, 66 };

static void plan(const struct sm_geom *g, const double *w, int n, struct sm_lane *l,
                 unsigned *group)
{
    char err[256] = "";
    int i;

    for (i = 0; i < n; i++)
        l[i].share = w[i];
    assert_int_equal(smplan(g, l, n, group, err, sizeof(err)), 0);
}

static void test_three_and_four_lanes_take_whole_groups_of_eight(void **state)
{
    const double w3[] = { 20, 30, 50 }, w4[] = { 10, 20, 30, 40 };
    struct sm_lane l[4];
    unsigned group;

    (void)state;
    plan(&h200, w3, 3, l, &group);
    assert_int_equal(group, 8);
    assert_int_equal(l[0].count, 24);
    assert_int_equal(l[1].count, 40);
    assert_int_equal(l[2].count, 68); /* 64 and the 4 the split leaves over */
    assert_int_equal(l[0].first, 0);
    assert_int_equal(l[1].first, 24);
    assert_int_equal(l[2].first, 64);
    plan(&h200, w4, 4, l, &group);
    assert_int_equal(l[0].count, 16);
    assert_int_equal(l[1].count, 24);
    assert_int_equal(l[2].count, 40);
    assert_int_equal(l[3].count, 52);
    assert_int_equal(l[3].first, 80);
}

static void test_the_h200s_own_split(void **state)
{
    const double w3[] = { 20, 30, 50 }, w4[] = { 10, 20, 30, 40 };
    struct sm_lane l[4];
    unsigned group;

    (void)state;
    plan(&h200_real, w3, 3, l, &group);
    assert_int_equal(l[0].count, 24);
    assert_int_equal(l[1].count, 40);
    assert_int_equal(l[2].count, 68); /* 56 and the 12 left over */
    plan(&h200_real, w4, 4, l, &group);
    assert_int_equal(l[0].count, 16);
    assert_int_equal(l[1].count, 24);
    assert_int_equal(l[2].count, 32);
    assert_int_equal(l[3].count, 60);
}

static void test_every_lane_gets_a_group_and_all_sms_are_used(void **state)
{
    const double w[] = { 1, 1000 };
    double many[17];
    struct sm_lane l[64];
    unsigned group, sum = 0;
    int i;

    (void)state;
    plan(&h200, w, 2, l, &group);
    assert_int_equal(l[0].count, 8);
    assert_int_equal(l[1].count, 124);
    for (i = 0; i < 17; i++)
        many[i] = 1;
    plan(&h200, many, 17, l, &group); /* more lanes than groups of 8: groups of 2 */
    assert_int_equal(group, 2);
    for (i = 0; i < 17; i++) {
        assert_true(l[i].count >= 2 && l[i].count % 2 == 0);
        assert_int_equal(l[i].first, sum);
        sum += l[i].count;
    }
    assert_int_equal(sum, 132);
    plan(&h200, w, 1, l, &group);
    assert_int_equal(l[0].count, 132);
}

/* The groups left after the floors go by the largest remainder, to the last lane too. */
static void test_largest_remainder_reaches_the_last_lane(void **state)
{
    const double w[] = { 1, 2 };
    struct sm_lane l[2];
    unsigned group;

    (void)state;
    /* 16 groups: quotas 5.33 and 10.67; the one group left goes to the second lane. */
    plan(&h200, w, 2, l, &group);
    assert_int_equal(l[0].count, 40);
    assert_int_equal(l[1].count, 92); /* 11 groups and the 4 left over */
    assert_int_equal(l[1].first, 40);
}

/* As many lanes as the co-scheduled split has groups still get groups of 8. */
static void test_one_lane_per_coarse_group_keeps_groups_of_eight(void **state)
{
    double w[17];
    struct sm_lane l[17];
    unsigned group;
    int i;

    (void)state;
    for (i = 0; i < 17; i++)
        w[i] = 1;
    assert_int_equal(smplan_fine(&h200, 16), 0);
    assert_int_equal(smplan_fine(&h200, 17), 1);
    plan(&h200, w, 16, l, &group);
    assert_int_equal(group, 8);
    for (i = 0; i < 15; i++)
        assert_int_equal(l[i].count, 8);
    assert_int_equal(l[15].count, 12); /* its group and the 4 left over */
    assert_int_equal(l[15].first, 120);
}

static void test_too_many_lanes_and_bad_shares_are_refused(void **state)
{
    struct sm_lane l[64];
    double s[70];
    unsigned group;
    char err[256];
    int n, i;

    (void)state;
    static const struct sm_geom small = { 16, 8, 2, 2, 8 };
    for (i = 0; i < 64; i++)
        l[i].share = 1;
    assert_int_equal(smplan(&small, l, 9, &group, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "at most 2 groups of 8 SMs (8 of 2 ignoring co-scheduling)"));
    assert_int_equal(smplan(&h200, l, 65, &group, err, sizeof(err)), -EINVAL);
    assert_int_equal(smplan_parse_shares("20,30,50", s, 64, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 3);
    assert_true(s[2] == 50);
    assert_int_equal(smplan_parse_shares("12.5,1", s, 64, &n, err, sizeof(err)), 0);
    assert_true(s[0] == 12.5);
    static const char *const bad[] = { "",    "0",    "-1",   "1,,2", "1,", "nan",     "inf",
                                       "1e3", "2..5", "0x10", " 5",   "5 ", "1000001", "0.0" };
    for (i = 0; i < (int)(sizeof(bad) / sizeof(bad[0])); i++) {
        err[0] = '\0';
        assert_int_equal(smplan_parse_shares(bad[i], s, 64, &n, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "--shares"));
    }
    assert_int_equal(smplan_parse_shares("1,1,1", s, 2, &n, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "more than 2"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_and_four_lanes_take_whole_groups_of_eight),
        cmocka_unit_test(test_the_h200s_own_split),
        cmocka_unit_test(test_every_lane_gets_a_group_and_all_sms_are_used),
        cmocka_unit_test(test_largest_remainder_reaches_the_last_lane),
        cmocka_unit_test(test_one_lane_per_coarse_group_keeps_groups_of_eight),
        cmocka_unit_test(test_too_many_lanes_and_bad_shares_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The SM partition planner of gpuslice procs and green-run (src/common/smplan.c), on an H200's split. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "common/smplan.h"

/* What the H200's driver reports (tests/gpu sm_lanes): 15 groups of 8 and 12 SMs left over, 66 of 2. */
static const struct sm_geom h200 = { 132, 8, 15, 2, 66 };

static void plan(const struct sm_geom *g, const double *w, int n, struct sm_lane *l,
                 struct sm_split *split)
{
    char err[256] = "";
    int i;

    for (i = 0; i < n; i++)
        l[i].share = w[i];
    assert_int_equal(smplan(g, l, n, split, err, sizeof(err)), 0);
}

/*
 * What every plan keeps: the lanes one after another over every SM, whole groups of the split
 * it names (the last lane with what the split leaves over), at least one each, and split->worst
 * the farthest a lane's SM share is from its weight.
 */
static double check_plan(const struct sm_geom *g, const struct sm_lane *l, int n,
                         const struct sm_split *split)
{
    unsigned at = 0, size = split->fine ? g->fine : g->coarse;
    double total_w = 0, worst = 0, d;
    int i;

    assert_int_equal(split->group, size);
    assert_int_equal(split->max_cluster, size);
    for (i = 0; i < n; i++)
        total_w += l[i].share;
    for (i = 0; i < n; i++) {
        assert_int_equal(l[i].first, at);
        assert_true(l[i].count >= size);
        if (i < n - 1)
            assert_int_equal(l[i].count % size, 0);
        at += l[i].count;
        d = 100.0 * l[i].count / g->total - 100.0 * l[i].share / total_w;
        if ((d < 0 ? -d : d) > worst)
            worst = d < 0 ? -d : d;
    }
    assert_int_equal(at, g->total);
    assert_true(worst - split->worst < 1e-9 && split->worst - worst < 1e-9);
    return worst;
}

/* One row: weights, whether the 2-SM split is used, the SMs each lane gets. */
struct row {
    const char *what;
    int n;
    double w[8];
    int fine;
    unsigned sms[8];
};

static const struct row rows[] = {
    /* Issue 30: 16/24/32/60 before (the 30 % lane 5 points short). */
    { "10/20/30/40", 4, { 10, 20, 30, 40 }, 1, { 14, 26, 40, 52 } },
    /* Groups of 8 gave 24/24/24/24/36 (27 % for the last): the 12 left over now count. */
    { "5 x 20", 5, { 20, 20, 20, 20, 20 }, 1, { 28, 26, 26, 26, 26 } },
    /* Within 2 points on groups of 8 (measured 18.6/29.9/51.5 %): they keep clusters of 8. */
    { "20/30/50", 3, { 20, 30, 50 }, 0, { 24, 40, 68 } },
    { "25/75", 2, { 25, 75 }, 0, { 32, 100 } },
    { "1/1", 2, { 1, 1 }, 0, { 64, 68 } },
    /* 40/92 is 3 points off; 44/88 is exact. */
    { "1/2", 2, { 1, 2 }, 1, { 44, 88 } },
    /* A group of 8 is 6 % of the GPU; 2 SMs are 1.5 %. */
    { "1/1000", 2, { 1, 1000 }, 1, { 2, 130 } },
    { "1000/1", 2, { 1000, 1 }, 1, { 130, 2 } },
    { "3 x 1", 3, { 1, 1, 1 }, 1, { 44, 44, 44 } },
    { "5/10/15/20/50", 5, { 5, 10, 15, 20, 50 }, 1, { 6, 14, 20, 26, 66 } },
    { "1..8", 8, { 1, 2, 3, 4, 5, 6, 7, 8 }, 1, { 4, 8, 10, 14, 18, 22, 26, 30 } },
    { "8 x 1", 8, { 1, 1, 1, 1, 1, 1, 1, 1 }, 1, { 18, 18, 16, 16, 16, 16, 16, 16 } },
    { "one lane", 1, { 7 }, 0, { 132 } },
};

static void test_each_lane_within_two_points_of_its_weight(void **state)
{
    struct sm_lane l[8];
    struct sm_split split;
    size_t k;
    int i;

    (void)state;
    for (k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
        const struct row *r = &rows[k];
        plan(&h200, r->w, r->n, l, &split);
        assert_int_equal(split.fine, r->fine);
        for (i = 0; i < r->n; i++)
            assert_int_equal(l[i].count, r->sms[i]);
        assert_true(check_plan(&h200, l, r->n, &split) <= SMPLAN_TOLERANCE);
    }
}

/* 2 to 8 lanes of weights 1 to 100 (a fixed pseudo-random sequence): all within 2 points. */
static void test_two_to_eight_lanes_of_any_weights_are_within_two_points(void **state)
{
    unsigned seed = 12345, fine = 0, trial;
    struct sm_lane l[8];
    struct sm_split split;
    double w[8];
    int n, i;

    (void)state;
    for (trial = 0; trial < 2000; trial++) {
        n = 2 + (int)(trial % 7);
        for (i = 0; i < n; i++) {
            seed = (seed * 1103515245u + 12345u) & 0x7fffffffu;
            w[i] = 1 + seed % 100;
        }
        plan(&h200, w, n, l, &split);
        if (check_plan(&h200, l, n, &split) > SMPLAN_TOLERANCE) {
            print_message("trial %u: %d lanes, worst %.2f points\n", trial, n, split.worst);
            fail();
        }
        fine += (unsigned)split.fine;
    }
    /* Both splits are used: groups of 8 where they are close enough (a sixth of these). */
    assert_true(fine > 1000 && fine < 1900);
}

/* The minimum of one group per lane can force a lane past 2 points: it is kept, and said. */
static void test_the_minimum_group_wins_over_the_tolerance(void **state)
{
    const double w[] = { 1, 1, 1000 };
    struct sm_lane l[3];
    struct sm_split split;

    (void)state;
    plan(&h200, w, 3, l, &split);
    assert_int_equal(split.fine, 1);
    assert_int_equal(l[0].count, 2);
    assert_int_equal(l[1].count, 2);
    assert_int_equal(l[2].count, 128);
    assert_true(check_plan(&h200, l, 3, &split) > SMPLAN_TOLERANCE);
}

static void test_more_lanes_than_groups_of_eight_take_groups_of_two(void **state)
{
    static const struct sm_geom coarse_only = { 132, 8, 16, 0, 0 };
    double many[17];
    struct sm_lane l[64];
    struct sm_split split;
    int i;

    (void)state;
    for (i = 0; i < 17; i++)
        many[i] = 1;
    /* 15 lanes on 15 groups of 8 would leave the 12 over to the last (15 % for 6.7). */
    plan(&h200, many, 15, l, &split);
    assert_int_equal(split.fine, 1);
    check_plan(&h200, l, 15, &split);
    plan(&h200, many, 16, l, &split);
    assert_int_equal(split.fine, 1);
    assert_true(check_plan(&h200, l, 16, &split) <= SMPLAN_TOLERANCE);
    plan(&h200, many, 17, l, &split);
    assert_int_equal(split.fine, 1);
    assert_true(check_plan(&h200, l, 17, &split) <= SMPLAN_TOLERANCE);
    /* Without a finer split, as many lanes as groups get one each. */
    plan(&coarse_only, many, 16, l, &split);
    assert_int_equal(split.fine, 0);
    assert_int_equal(l[14].count, 8);
    assert_int_equal(l[15].count, 12); /* its group and the 4 left over */
    assert_int_equal(l[15].first, 120);
}

/* The groups left after the floors go by the largest remainder, to the last lane too. */
static void test_largest_remainder_reaches_the_last_lane(void **state)
{
    const double w[] = { 3, 5 };
    struct sm_lane l[2];
    struct sm_split split;

    (void)state;
    /* Quotas 6.19 groups and (82.5 - 12) / 8 = 8.81: the one group left goes to the second. */
    plan(&h200, w, 2, l, &split);
    assert_int_equal(split.fine, 0);
    assert_int_equal(l[0].count, 48);
    assert_int_equal(l[1].count, 84); /* 9 groups and the 12 left over */
    assert_int_equal(l[1].first, 48);
}

/* A GPU whose co-scheduled split cannot hold every lane, nor its fine one. */
static void test_a_split_too_coarse_for_the_lanes(void **state)
{
    static const struct sm_geom small = { 16, 8, 2, 2, 8 }, nofine = { 132, 8, 15, 0, 0 },
                                leaves_more = { 16, 4, 2, 2, 2 };
    const double w[] = { 1, 2, 3, 4 }, same[] = { 1, 1 };
    struct sm_lane l[4];
    struct sm_split split;

    (void)state;
    plan(&small, w, 4, l, &split);
    assert_int_equal(split.fine, 1);
    check_plan(&small, l, 4, &split);
    /* No fine split: groups of 8 even when they miss the tolerance. */
    plan(&nofine, w, 4, l, &split);
    assert_int_equal(split.fine, 0);
    check_plan(&nofine, l, 4, &split);
    /* A finer split that leaves more over is not taken when it is farther still (4/12 for 1/1
       is 25 points off; 2/14 would be 37.5). */
    plan(&leaves_more, same, 2, l, &split);
    assert_int_equal(split.fine, 0);
    assert_int_equal(l[0].count, 4);
    assert_int_equal(l[1].count, 12);
}

static void test_too_many_lanes_and_bad_shares_are_refused(void **state)
{
    struct sm_lane l[64];
    double s[70];
    struct sm_split split;
    char err[256];
    int n, i;

    (void)state;
    static const struct sm_geom small = { 16, 8, 2, 2, 8 };
    for (i = 0; i < 64; i++)
        l[i].share = 1;
    assert_int_equal(smplan(&small, l, 9, &split, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "at most 2 groups of 8 SMs (8 of 2 ignoring co-scheduling)"));
    assert_int_equal(smplan(&h200, l, 65, &split, err, sizeof(err)), -EINVAL);
    assert_int_equal(smplan_parse_shares("20,30,50", s, 64, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 3);
    assert_true(s[2] == 50);
    assert_int_equal(smplan_parse_shares("12.5,1", s, 64, &n, err, sizeof(err)), 0);
    assert_true(s[0] == 12.5);
    /* The ends (issue 32): 1e6 and a millionth are shares, 1000000.5 is not; 64 shares fit in 64. */
    assert_int_equal(smplan_parse_shares("1000000,0.000001", s, 64, &n, err, sizeof(err)), 0);
    assert_true(n == 2 && s[0] == 1e6 && s[1] == 0.000001);
    assert_int_equal(smplan_parse_shares("1000000.5", s, 64, &n, err, sizeof(err)), -EINVAL);
    assert_int_equal(smplan_parse_shares("1,1", s, 2, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 2);
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
        cmocka_unit_test(test_each_lane_within_two_points_of_its_weight),
        cmocka_unit_test(test_two_to_eight_lanes_of_any_weights_are_within_two_points),
        cmocka_unit_test(test_the_minimum_group_wins_over_the_tolerance),
        cmocka_unit_test(test_more_lanes_than_groups_of_eight_take_groups_of_two),
        cmocka_unit_test(test_largest_remainder_reaches_the_last_lane),
        cmocka_unit_test(test_a_split_too_coarse_for_the_lanes),
        cmocka_unit_test(test_too_many_lanes_and_bad_shares_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

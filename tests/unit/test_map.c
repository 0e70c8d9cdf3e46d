/*
 * The interposer's hash map (src/preload/map.c): device pointers and handles to their
 * charges. Every key put is found until deleted, across growth, tombstones and rehashes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "preload/map.h"

/* Keys as the driver hands out pointers: aligned, close together, so the hash must spread them. */
static uint64_t key(size_t i)
{
    return 0x7f0000000000ULL + (uint64_t)i * 0x200000ULL;
}

static size_t count(struct gs_map *m)
{
    struct gs_map_entry *e;
    size_t n = 0;

    GS_MAP_FOREACH(m, e)
    {
        n++;
    }
    return n;
}

static void done(struct gs_map *m)
{
    free(m->v);
    memset(m, 0, sizeof(*m));
}

static void test_empty_map_finds_nothing(void **state)
{
    struct gs_map m = { 0 };

    (void)state;
    assert_null(gs_map_get(&m, 0));
    assert_null(gs_map_get(&m, key(1)));
    assert_int_equal(count(&m), 0);
}

/* The first put makes a table of 256; the entry is fresh: its key, state 1, the rest zero. */
static void test_put_makes_a_fresh_entry(void **state)
{
    struct gs_map m = { 0 };
    struct gs_map_entry *e;

    (void)state;
    assert_non_null(e = gs_map_put(&m, key(3)));
    assert_int_equal(m.cap, 256);
    assert_int_equal(m.used, 1);
    assert_int_equal(m.deleted, 0);
    assert_int_equal(e->key, key(3));
    assert_int_equal(e->state, 1);
    assert_int_equal(e->bytes, 0);
    assert_int_equal(e->aux, 0);
    assert_int_equal(e->dev, 0);
    assert_int_equal(e->refs, 0);
    assert_int_equal(e->maps, 0);
    e->bytes = 4096;
    e->aux = 7;
    e->dev = 2;
    assert_ptr_equal(gs_map_get(&m, key(3)), e);
    assert_int_equal(gs_map_get(&m, key(3))->bytes, 4096);
    assert_null(gs_map_get(&m, key(4)));
    /* Key 0 is a key like any other. */
    assert_non_null(gs_map_put(&m, 0));
    assert_non_null(gs_map_get(&m, 0));
    assert_int_equal(m.used, 2);
    done(&m);
}

/* Putting a key again replaces its entry (zeroed) in place: no second entry. */
static void test_put_of_a_present_key_replaces_it(void **state)
{
    struct gs_map m = { 0 };
    struct gs_map_entry *e, *f;

    (void)state;
    e = gs_map_put(&m, key(9));
    e->bytes = 100;
    e->refs = 3;
    f = gs_map_put(&m, key(9));
    assert_ptr_equal(f, e);
    assert_int_equal(f->bytes, 0);
    assert_int_equal(f->refs, 0);
    assert_int_equal(f->key, key(9));
    assert_int_equal(f->state, 1);
    assert_int_equal(m.used, 1);
    assert_int_equal(count(&m), 1);
    done(&m);
}

/* Many keys: every one found with its value after the table doubled several times. */
static void test_growth_keeps_every_entry(void **state)
{
    struct gs_map m = { 0 };
    const size_t n = 5000;
    size_t i;

    (void)state;
    for (i = 0; i < n; i++) {
        struct gs_map_entry *e = gs_map_put(&m, key(i));
        assert_non_null(e);
        e->bytes = i + 1;
        /* At most half full, counting tombstones. */
        assert_true((m.used + m.deleted) * 2 <= m.cap);
    }
    assert_int_equal(m.used, n);
    assert_int_equal(m.cap, 16384);
    for (i = 0; i < n; i++) {
        struct gs_map_entry *e = gs_map_get(&m, key(i));
        if (e == NULL || e->bytes != i + 1 || e->key != key(i))
            fail_msg("key %zu lost after growth (cap %zu)", i, m.cap);
    }
    assert_null(gs_map_get(&m, key(n)));
    assert_int_equal(count(&m), n);
    done(&m);
}

/* The table grows at exactly half full: 128 entries fit in 256, the 129th doubles it. */
static void test_grows_at_half_load(void **state)
{
    struct gs_map m = { 0 };
    size_t i;

    (void)state;
    for (i = 0; i < 128; i++)
        assert_non_null(gs_map_put(&m, key(i)));
    assert_int_equal(m.cap, 256);
    assert_non_null(gs_map_put(&m, key(128)));
    assert_int_equal(m.cap, 512);
    for (i = 0; i <= 128; i++)
        assert_non_null(gs_map_get(&m, key(i)));
    done(&m);
}

/* Deleted entries are gone; the others, past their tombstones in a probe chain, stay found. */
static void test_delete_leaves_the_rest_findable(void **state)
{
    struct gs_map m = { 0 };
    size_t i;

    (void)state;
    for (i = 0; i < 100; i++)
        gs_map_put(&m, key(i))->bytes = i;
    for (i = 0; i < 100; i += 2)
        gs_map_del(&m, gs_map_get(&m, key(i)));
    assert_int_equal(m.used, 50);
    assert_int_equal(m.deleted, 50);
    assert_int_equal(count(&m), 50);
    for (i = 0; i < 100; i++) {
        struct gs_map_entry *e = gs_map_get(&m, key(i));
        if (i % 2 == 0)
            assert_null(e);
        else if (e == NULL || e->bytes != i)
            fail_msg("key %zu lost beside deleted ones", i);
    }
    /* A deleted key put again is new, and reuses a tombstone's count. */
    assert_non_null(gs_map_put(&m, key(0)));
    assert_int_equal(m.used, 51);
    assert_int_equal(m.deleted, 49);
    assert_non_null(gs_map_get(&m, key(0)));
    done(&m);
}

/*
 * Churn, as an allocator frees and allocates: the live set stays small while tombstones pile
 * up, so the table is rehashed at its own size rather than doubled, and nothing is lost.
 */
static void test_churn_rehashes_in_place(void **state)
{
    struct gs_map m = { 0 };
    size_t i, j;

    (void)state;
    for (i = 0; i < 20; i++)
        gs_map_put(&m, key(i))->bytes = i;
    for (i = 20; i < 20000; i++) {
        gs_map_put(&m, key(i))->bytes = i;
        gs_map_del(&m, gs_map_get(&m, key(i - 20)));
        assert_int_equal(m.used, 20);
        assert_true((m.used + m.deleted) * 2 <= m.cap);
        for (j = i - 19; j <= i; j++)
            if (gs_map_get(&m, key(j)) == NULL || gs_map_get(&m, key(j))->bytes != j)
                fail_msg("key %zu lost in churn at %zu (cap %zu)", j, i, m.cap);
    }
    assert_int_equal(m.cap, 256); /* never grew: 20 live entries */
    assert_int_equal(count(&m), 20);
    done(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_map_finds_nothing),
        cmocka_unit_test(test_put_makes_a_fresh_entry),
        cmocka_unit_test(test_put_of_a_present_key_replaces_it),
        cmocka_unit_test(test_growth_keeps_every_entry),
        cmocka_unit_test(test_grows_at_half_load),
        cmocka_unit_test(test_delete_leaves_the_rest_findable),
        cmocka_unit_test(test_churn_rehashes_in_place),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

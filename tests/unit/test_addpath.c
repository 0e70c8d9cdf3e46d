/*
 * libgpuslice-addpath.so: the composition of a search path (compose.c), and the library
 * itself, preloaded into env(1), which prints the environment its constructor left.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "addpath/compose.h"

/* gs_path_compose's result: the new value, or "=" for unchanged. */
static char *compose(const char *cur, const char *add, int prepend, int space_too)
{
    static char buf[4096];
    char *out = NULL;
    int r = gs_path_compose(cur, add, prepend, space_too, &out);

    assert_true(r == 0 || r == 1);
    if (r == 0) {
        assert_null(out);
        return strcpy(buf, "=");
    }
    assert_non_null(out);
    snprintf(buf, sizeof(buf), "%s", out);
    free(out);
    return buf;
}

static void test_append_and_prepend(void **state)
{
    (void)state;
    assert_string_equal(compose("/usr/bin:/bin", "/opt/x/bin", 0, 0), "/usr/bin:/bin:/opt/x/bin");
    assert_string_equal(compose("/usr/bin:/bin", "/opt/x/bin", 1, 0), "/opt/x/bin:/usr/bin:/bin");
    /* Unset or empty: the value alone (no empty component, which would mean "."). */
    assert_string_equal(compose(NULL, "/opt/x/bin", 0, 0), "/opt/x/bin");
    assert_string_equal(compose("", "/opt/x/bin", 1, 0), "/opt/x/bin");
    /* Several components, in their order, each once. */
    assert_string_equal(compose("/a", "/b:/c", 0, 0), "/a:/b:/c");
    assert_string_equal(compose("/a", "/b:/c", 1, 0), "/b:/c:/a");
    assert_string_equal(compose("/a", "/b:/b:/c:/b", 0, 0), "/a:/b:/c");
}

static void test_present_and_empty_components_are_skipped(void **state)
{
    (void)state;
    assert_string_equal(compose("/usr/bin:/bin", "/bin", 0, 0), "=");
    assert_string_equal(compose("/usr/bin:/bin", "/usr/bin", 1, 0), "=");
    assert_string_equal(compose("/usr/bin:/bin", "/bin:/opt", 0, 0), "/usr/bin:/bin:/opt");
    /* Whole components only: a prefix or a longer name is not the same. */
    assert_string_equal(compose("/usr/bin", "/usr", 0, 0), "/usr/bin:/usr");
    assert_string_equal(compose("/usr", "/usr/bin", 0, 0), "/usr:/usr/bin");
    assert_string_equal(compose("/a", "", 0, 0), "=");
    assert_string_equal(compose("/a", ":", 0, 0), "=");
    assert_string_equal(compose("/a", "::/b::", 0, 0), "/a:/b");
    assert_string_equal(compose("/a", NULL, 0, 0), "=");
    /* What was there stays as it was, empty components included. */
    assert_string_equal(compose("/a::/b:", "/c", 0, 0), "/a::/b::/c");
}

static void test_ld_preload_separates_by_spaces_too(void **state)
{
    (void)state;
    assert_string_equal(compose("liba.so libb.so", "libb.so", 0, 1), "=");
    assert_string_equal(compose("liba.so libb.so", "libc.so", 0, 1), "liba.so libb.so:libc.so");
    assert_string_equal(compose("liba.so", "libb.so libc.so", 1, 1), "libb.so:libc.so:liba.so");
    /* Elsewhere a space is part of a name. */
    assert_string_equal(compose("/my dir:/b", "/my", 0, 0), "/my dir:/b:/my");
    assert_string_equal(compose("/my dir:/b", "/my dir", 0, 0), "=");
}

/* The library preloaded into env(1): the environment after its constructor. */
static char *env_after(const char *vars)
{
    static char out[65536];
    char cmd[8192];
    size_t n;
    FILE *p;

    /* (ASAN_OPTIONS: under the sanitizers the library needs their runtime, loaded after env's.
       env by its path: the PATH given may not lead to it.) */
    snprintf(cmd, sizeof(cmd),
             "env -i ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0 %s LD_PRELOAD=%s "
             "\"$(command -v env)\"",
             vars, GS_ADDPATH_LIB);
    assert_non_null(p = popen(cmd, "r"));
    n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
    return out;
}

static void test_the_library_composes_from_its_constructor(void **state)
{
    char *e;

    (void)state;
    e = env_after("PATH=/usr/bin:/bin TF_PATH=/opt/tf/bin TF_PREPEND_PATH=/first "
                  "GPUSLICE_PATH=/opt/gs/bin:/bin LD_LIBRARY_PATH=/lib64 "
                  "TF_LD_LIBRARY_PATH=/opt/tf/lib GPUSLICE_PREPEND_LD_LIBRARY_PATH=/opt/gs/lib "
                  "TF_LD_PRELOAD=/opt/x/libx.so");
    assert_non_null(strstr(e, "\nPATH=/first:/usr/bin:/bin:/opt/tf/bin:/opt/gs/bin\n"));
    assert_non_null(strstr(e, "\nLD_LIBRARY_PATH=/opt/gs/lib:/lib64:/opt/tf/lib\n"));
    /* LD_PRELOAD held the library itself: the new one comes after it. */
    assert_non_null(strstr(e, "LD_PRELOAD=" GS_ADDPATH_LIB ":/opt/x/libx.so\n"));
    /* Nothing to add: nothing changes, and a variable that was unset is set. */
    e = env_after("PATH=/usr/bin:/bin TF_PATH=/bin TF_LD_LIBRARY_PATH=/opt/tf/lib");
    assert_non_null(strstr(e, "PATH=/usr/bin:/bin\n"));
    assert_non_null(strstr(e, "LD_LIBRARY_PATH=/opt/tf/lib\n"));
}

/*
 * All twelve variables at once: for each of PATH, LD_PRELOAD and LD_LIBRARY_PATH its own
 * TF_ and GPUSLICE_ append and prepend rules, applied in the order TF_ append, TF_ prepend,
 * GPUSLICE_ append, GPUSLICE_ prepend; spaces separate in LD_PRELOAD's only.
 */
static void test_every_variable_goes_to_its_own_place(void **state)
{
    char *e;

    (void)state;
    e = env_after("PATH=/orig TF_PATH=/tf-add TF_PREPEND_PATH=/tf-pre 'GPUSLICE_PATH=/gs add' "
                  "GPUSLICE_PREPEND_PATH=/gs-pre "
                  "TF_LD_PRELOAD=tf-add.so 'TF_PREPEND_LD_PRELOAD=tf-pre1.so tf-pre2.so' "
                  "GPUSLICE_LD_PRELOAD=gs-add.so GPUSLICE_PREPEND_LD_PRELOAD=gs-pre.so "
                  "LD_LIBRARY_PATH=/lib-orig TF_LD_LIBRARY_PATH=/tf-lib "
                  "'TF_PREPEND_LD_LIBRARY_PATH=/tf pre' GPUSLICE_LD_LIBRARY_PATH=/gs-lib "
                  "GPUSLICE_PREPEND_LD_LIBRARY_PATH=/gs-prelib");
    if (!strstr(e, "\nPATH=/gs-pre:/tf-pre:/orig:/tf-add:/gs add\n") ||
        !strstr(e, "\nLD_PRELOAD=gs-pre.so:tf-pre1.so:tf-pre2.so:" GS_ADDPATH_LIB
                   ":tf-add.so:gs-add.so\n") ||
        !strstr(e, "\nLD_LIBRARY_PATH=/gs-prelib:/tf pre:/lib-orig:/tf-lib:/gs-lib\n"))
        fail_msg("the environment after the constructor:\n%s", e);
    /* Each GPUSLICE_ rule alone, the variable unset before (LD_PRELOAD holds the library). */
    e = env_after("GPUSLICE_PREPEND_LD_PRELOAD=only-pre.so");
    if (!strstr(e, "LD_PRELOAD=only-pre.so:" GS_ADDPATH_LIB "\n"))
        fail_msg("GPUSLICE_PREPEND_LD_PRELOAD alone:\n%s", e);
    e = env_after("GPUSLICE_LD_PRELOAD=only-add.so");
    if (!strstr(e, "LD_PRELOAD=" GS_ADDPATH_LIB ":only-add.so\n"))
        fail_msg("GPUSLICE_LD_PRELOAD alone:\n%s", e);
    e = env_after("GPUSLICE_PREPEND_PATH=/p GPUSLICE_LD_LIBRARY_PATH=/l");
    if (!strstr(e, "\nPATH=/p\n") || !strstr(e, "\nLD_LIBRARY_PATH=/l\n"))
        fail_msg("GPUSLICE_PREPEND_PATH and GPUSLICE_LD_LIBRARY_PATH alone:\n%s", e);
    e = env_after("TF_PREPEND_LD_LIBRARY_PATH=/q GPUSLICE_PREPEND_LD_LIBRARY_PATH=/r");
    if (!strstr(e, "\nLD_LIBRARY_PATH=/r:/q\n") || strstr(e, "\nPATH="))
        fail_msg("the LD_LIBRARY_PATH prepend rules alone:\n%s", e);
    /* Empty values add nothing (no empty component, which would mean the working directory). */
    e = env_after("PATH=/orig TF_PATH= GPUSLICE_PREPEND_PATH= GPUSLICE_LD_LIBRARY_PATH=");
    if (!strstr(e, "\nPATH=/orig\n") || strstr(e, "\nLD_LIBRARY_PATH="))
        fail_msg("empty values:\n%s", e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_and_prepend),
        cmocka_unit_test(test_present_and_empty_components_are_skipped),
        cmocka_unit_test(test_ld_preload_separates_by_spaces_too),
        cmocka_unit_test(test_the_library_composes_from_its_constructor),
        cmocka_unit_test(test_every_variable_goes_to_its_own_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

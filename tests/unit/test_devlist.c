/* The --device selection: indexes and UUIDs into CUDA_VISIBLE_DEVICES. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/devlist.h"

struct devlist_case {
    const char *args[3]; /* up to three --device values */
    const char *visible; /* the caller's CUDA_VISIBLE_DEVICES, or NULL */
    const char *want;    /* the result, or NULL when refused */
    const char *message; /* a part of the message when refused */
};

static void test_device_list_table(void **state)
{
    static const struct devlist_case cases[] = {
        { { "0" }, NULL, "0", NULL },
        { { "1,0" }, NULL, "1,0", NULL },
        { { "0", "1" }, NULL, "0,1", NULL },
        { { "GPU-5ac1ce00-0000-4000-8000-000000000001" },
          NULL,
          "GPU-5ac1ce00-0000-4000-8000-000000000001",
          NULL },
        { { "MIG-GPU-5ac1ce00-0000-4000-8000-000000000001/1/0" },
          NULL,
          "MIG-GPU-5ac1ce00-0000-4000-8000-000000000001/1/0",
          NULL },
        { { "1" }, "3,2", "2", NULL },
        { { "1,0" }, "GPU-a,GPU-b", "GPU-b,GPU-a", NULL },
        { { "007" }, NULL, "7", NULL }, /* one spelling per index */
        { { "65535" }, NULL, "65535", NULL },
        { { "0,00" }, NULL, NULL, "given twice" },
        { { "0", "0" }, NULL, NULL, "given twice" },
        { { "gpu-a,GPU-A" }, NULL, NULL, "given twice" },
        { { "0,1" }, "2,2", NULL, "given twice" },
        /* One entry a prefix of another is two GPUs, either way round. */
        { { "10,1" }, NULL, "10,1", NULL },
        { { "1,10" }, NULL, "1,10", NULL },
        { { "1", "10" }, NULL, "1,10", NULL },
        { { "GPU-ab,GPU-abc" }, NULL, "GPU-ab,GPU-abc", NULL },
        { { "GPU-abc,GPU-ab" }, NULL, "GPU-abc,GPU-ab", NULL },
        { { "0,1" }, "GPU-a,GPU-ab", "GPU-a,GPU-ab", NULL },
        { { "1,0" }, "GPU-a,GPU-ab", "GPU-ab,GPU-a", NULL },
        { { "3" }, "0,1,2,3", "3", NULL },
        { { "0" }, "7", "7", NULL },
        { { "" }, NULL, NULL, "empty entry" },
        { { "0," }, NULL, NULL, "empty entry" },
        { { ",0" }, NULL, NULL, "empty entry" },
        { { "0,,1" }, NULL, NULL, "empty entry" },
        { { "-1" }, NULL, NULL, "negative" },
        { { "x" }, NULL, NULL, "not a device" },
        { { "1x" }, NULL, NULL, "not a device" },
        { { " 1" }, NULL, NULL, "not a device" },
        { { "+1" }, NULL, NULL, "not a device" },
        { { "GPU-" }, NULL, NULL, "not a device" },
        { { "GPU-a b" }, NULL, NULL, "not a device" },
        { { "65536" }, NULL, NULL, "too large" },
        { { "99999999999999999999999" }, NULL, NULL, "too large" },
        { { "0" }, "", NULL, "CUDA_VISIBLE_DEVICES is empty" },
        { { "2" }, "0,1", NULL, "not among the 2 device(s)" },
        { { "1" }, "0,,1", NULL, "empty entry of CUDA_VISIBLE_DEVICES" },
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct devlist_case *c = &cases[i];
        char *args[3], *out = NULL, err[512] = "";
        int n = 0, r;

        while (n < 3 && c->args[n])
            args[n] = (char *)c->args[n], n++;
        r = gs_device_list(args, n, c->visible, &out, err, sizeof(err));
        if (c->want && (r != 0 || strcmp(out, c->want) != 0))
            fail_msg("--device %s (visible %s): %d \"%s\" %s, want %s", c->args[0],
                     c->visible ? c->visible : "unset", r, out ? out : "", err, c->want);
        if (!c->want &&
            (r != -EINVAL || strstr(err, c->message) == NULL || strstr(err, "--device") == NULL))
            fail_msg("--device %s (visible %s): %d \"%s\", want a message with \"%s\"", c->args[0],
                     c->visible ? c->visible : "unset", r, err, c->message);
        free(out);
    }
}

/* Each refusal, word for word: it names the entry as given and what is accepted. */
#define ACCEPTED                                                                                   \
    "use indexes such as 0 or UUIDs such as GPU-5ac1ce00-0000-4000-8000-000000000000, separated "  \
    "by commas"
static void test_device_list_messages(void **state)
{
    static const struct devlist_case cases[] = {
        { { "0,00" }, NULL, NULL, "--device: \"00\" is given twice" },
        { { "1,GPU-a,gpu-A" }, NULL, NULL, "--device: \"gpu-A\" is given twice" },
        { { "0,1" }, "5,5", NULL, "--device: \"1\" is given twice" },
        { { "65536" }, NULL, NULL, "--device: index 65536 is too large (at most 65535)" },
        { { "4" },
          "0,1,2,3",
          NULL,
          "--device: index 4 is not among the 4 device(s) of CUDA_VISIBLE_DEVICES=\"0,1,2,3\" "
          "(use 0..3, or a UUID)" },
        { { "0" },
          "",
          NULL,
          "--device: index 0: CUDA_VISIBLE_DEVICES is empty, so there is no device to pick (use a "
          "UUID, or unset it)" },
        { { "2" },
          "0,1,,3",
          NULL,
          "--device: index 2 picks an empty entry of CUDA_VISIBLE_DEVICES=\"0,1,,3\" (fix it, or "
          "use a UUID)" },
        { { "0,," }, NULL, NULL, "--device: \"0,,\" has an empty entry (" ACCEPTED ")" },
        { { "1,-2" },
          NULL,
          NULL,
          "--device: \"-2\" is negative (indexes start at 0; " ACCEPTED ")" },
        { { "0,x1" }, NULL, NULL, "--device: \"x1\" is not a device (" ACCEPTED ")" },
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct devlist_case *c = &cases[i];
        char *args[3], *out = NULL, err[512] = "";
        int n = 0;

        while (n < 3 && c->args[n])
            args[n] = (char *)c->args[n], n++;
        assert_int_equal(gs_device_list(args, n, c->visible, &out, err, sizeof(err)), -EINVAL);
        assert_null(out);
        assert_string_equal(err, c->message);
    }
}

/* The entries of a list, as CUDA_VISIBLE_DEVICES counts them. */
static void test_device_list_count(void **state)
{
    (void)state;
    assert_int_equal(gs_device_list_count(""), 0);
    assert_int_equal(gs_device_list_count("0"), 1);
    assert_int_equal(gs_device_list_count("0,1"), 2);
    assert_int_equal(gs_device_list_count("0,,1"), 3);
    assert_int_equal(gs_device_list_count(","), 2);
}

/* Many indexes picking a long entry of CUDA_VISIBLE_DEVICES: the result is sized right. */
static void test_device_list_expands_within_its_buffer(void **state)
{
    char visible[8192], arg[1024], *args[1] = { arg }, *out = NULL, err[256];
    size_t vl = 0, al = 0;
    int i;

    (void)state;
    for (i = 0; i < 100; i++) {
        vl += (size_t)snprintf(visible + vl, sizeof(visible) - vl,
                               "%sGPU-5ac1ce00-0000-4000-8000-%012d", i ? "," : "", i);
        al += (size_t)snprintf(arg + al, sizeof(arg) - al, "%s%d", i ? "," : "", 99 - i);
    }
    assert_int_equal(gs_device_list(args, 1, visible, &out, err, sizeof(err)), 0);
    assert_int_equal(strlen(out), vl);
    assert_memory_equal(out, "GPU-5ac1ce00-0000-4000-8000-000000000099,", 41);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_list_table),
        cmocka_unit_test(test_device_list_messages),
        cmocka_unit_test(test_device_list_count),
        cmocka_unit_test(test_device_list_expands_within_its_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

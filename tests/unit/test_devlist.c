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
        cmocka_unit_test(test_device_list_expands_within_its_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

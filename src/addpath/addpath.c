/*
 * libgpuslice-addpath.so: composes PATH, LD_PRELOAD and LD_LIBRARY_PATH from
 * its constructor, for a program that is preloaded with it (vgpu.rs's
 * add-path, with the same variables): TF_PATH, TF_LD_PRELOAD and
 * TF_LD_LIBRARY_PATH are appended to them, TF_PREPEND_PATH,
 * TF_PREPEND_LD_PRELOAD and TF_PREPEND_LD_LIBRARY_PATH prepended, and the
 * same under GPUSLICE_ names (GPUSLICE_PATH, GPUSLICE_PREPEND_PATH, ...)
 * after them. A component already there is skipped, as is an empty one. The
 * loader has read LD_PRELOAD and LD_LIBRARY_PATH by then: those take effect
 * in the programs this one starts; PATH at once. Links nothing but libc.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "addpath/compose.h"
#include "common/env.h"

static const struct rule {
    const char *var;
    int space_too; /* LD_PRELOAD also separates by spaces */
    const char *append[2], *prepend[2];
} rules[] = {
    { "PATH", 0, { "TF_PATH", GS_ENV_ADD_PATH }, { "TF_PREPEND_PATH", GS_ENV_PREPEND_PATH } },
    { "LD_PRELOAD",
      1,
      { "TF_LD_PRELOAD", GS_ENV_ADD_LD_PRELOAD },
      { "TF_PREPEND_LD_PRELOAD", GS_ENV_PREPEND_LD_PRELOAD } },
    { "LD_LIBRARY_PATH",
      0,
      { "TF_LD_LIBRARY_PATH", GS_ENV_ADD_LD_LIBRARY_PATH },
      { "TF_PREPEND_LD_LIBRARY_PATH", GS_ENV_PREPEND_LD_LIBRARY_PATH } },
};

static void apply(const struct rule *r, const char *from, int prepend)
{
    const char *add = getenv(from);
    char *out;
    int n;

    if (!add || !*add)
        return;
    if ((n = gs_path_compose(getenv(r->var), add, prepend, r->space_too, &out)) < 0) {
        fprintf(stderr, "gpuslice-addpath: %s not added to %s: %s\n", from, r->var, strerror(-n));
        return;
    }
    if (n > 0 && setenv(r->var, out, 1) < 0)
        fprintf(stderr, "gpuslice-addpath: %s not added to %s: %s\n", from, r->var,
                strerror(errno));
    free(out);
}

__attribute__((constructor)) static void addpath_init(void)
{
    size_t i, k;

    /* A set-user-ID program (loaded through /etc/ld.so.preload): its loader's variables are
       not for the user to compose. */
    if (getauxval(AT_SECURE))
        return;
    for (i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
        for (k = 0; k < 2; k++) {
            apply(&rules[i], rules[i].append[k], 0);
            apply(&rules[i], rules[i].prepend[k], 1);
        }
}

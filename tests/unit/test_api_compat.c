/*
 * Our CUDA and NVML declarations agree with the real headers: every size,
 * offset and enum value in compat_checks.h is compared; function types are
 * checked by the compiler in compat_real.c.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "compat_checks.h"

extern const struct gs_compat_fact gs_compat_ours_cuda[], gs_compat_real_cuda[];
extern const struct gs_compat_fact gs_compat_ours_nvml[], gs_compat_real_nvml[];

static int compare(const char *what, const struct gs_compat_fact *ours,
                   const struct gs_compat_fact *real, int *n)
{
    int bad = 0, i;

    for (i = 0; ours[i].label && real[i].label; i++, (*n)++) {
        if (ours[i].value != real[i].value) {
            printf("MISMATCH %s %s: ours %llu, real %llu\n", what, ours[i].label, ours[i].value,
                   real[i].value);
            bad++;
        }
    }
    return bad;
}

int main(void)
{
    int n = 0, bad = compare("cuda.h", gs_compat_ours_cuda, gs_compat_real_cuda, &n);

    if (gs_compat_real_nvml[0].label)
        bad += compare("nvml.h", gs_compat_ours_nvml, gs_compat_real_nvml, &n);
    else
        printf("nvml.h not installed: NVML layouts not compared\n");
    printf("%d facts compared, %d mismatches\n", n, bad);
    return bad ? 1 : 0;
}

/*
 * Which pointer the interposer's cuGetProcAddress hands out. Run under
 * LD_PRELOAD=libgpuslice.so with a limit set (so its hooks are active), it
 * asks, for every entry of the hook list (GS_CUDA_HOOKS) at versions around
 * the entry's own (version - 1, version, 12000, 13000) and flags 0, 1 and 2,
 * through cuGetProcAddress_v2, cuGetProcAddress (v1) and the resolvers that
 * both hand back for "cuGetProcAddress" itself; and compares each answer with
 * dlsym(RTLD_DEFAULT, expected), the interposer's exported hook of the
 * variant the real driver gives for that name, version and flags.
 *
 * expected comes from the H200's driver, not from the hook list: the table
 * below is what driver 580.159.04 answered (tests/sim/h200-driver-facts.txt,
 * "getproc" lines; the first version between two measured ones from CUDA
 * 13.0's cudaTypedefs.h), and the rule is the one measured there: the
 * variant of the highest version not above the one asked for; with flag 2
 * (per-thread default stream) only the per-thread variants of a name that
 * has any, else the plain ones; none below the first version. The hook list
 * is checked against the table too: every hooked name's every variant must
 * be the interposer's own export.
 *
 * Prints each mismatch (how, name, version, flags, got, want) and exits 1 on
 * any; 0 when every answer is the expected hook.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_api.h"
#include "preload/hooks.h"

struct hook {
    const char *api, *symbol;
    int version, ptds;
};

static const struct hook hooks[] = {
#define PC_HOOK(api, sym, ver, ptds, flags) { #api, #sym, ver, ptds },
    GS_CUDA_HOOKS(PC_HOOK)
#undef PC_HOOK
};

/* The real driver's variants of every hooked name: (name, symbol, first version, per-thread). */
static const struct hook driver[] = {
    { "cuInit", "cuInit", 2000, 0 },
    { "cuGetProcAddress", "cuGetProcAddress", 11030, 0 },
    { "cuGetProcAddress", "cuGetProcAddress_v2", 12000, 0 },
    { "cuDeviceTotalMem", "cuDeviceTotalMem", 2000, 0 },
    { "cuDeviceTotalMem", "cuDeviceTotalMem_v2", 3020, 0 },
    { "cuDeviceGetAttribute", "cuDeviceGetAttribute", 2000, 0 },
    { "cuMemGetInfo", "cuMemGetInfo", 2000, 0 },
    { "cuMemGetInfo", "cuMemGetInfo_v2", 3020, 0 },
    { "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 7000, 0 },
    { "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease", 7000, 0 },
    { "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", 11000, 0 },
    { "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset", 7000, 0 },
    { "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2", 11000, 0 },
    { "cuCtxCreate", "cuCtxCreate", 2000, 0 },
    { "cuCtxCreate", "cuCtxCreate_v2", 3020, 0 },
    { "cuCtxCreate", "cuCtxCreate_v3", 11040, 0 },
    { "cuCtxCreate", "cuCtxCreate_v4", 12050, 0 },
    { "cuCtxGetCurrent", "cuCtxGetCurrent", 4000, 0 },
    { "cuStreamCreate", "cuStreamCreate", 2000, 0 },
    { "cuStreamCreateWithPriority", "cuStreamCreateWithPriority", 5050, 0 },
    { "cuCtxSetCurrent", "cuCtxSetCurrent", 4000, 0 },
    { "cuCtxPushCurrent", "cuCtxPushCurrent", 2000, 0 },
    { "cuCtxPushCurrent", "cuCtxPushCurrent_v2", 4000, 0 },
    { "cuCtxDestroy", "cuCtxDestroy", 2000, 0 },
    { "cuCtxDestroy", "cuCtxDestroy_v2", 4000, 0 },
    { "cuMemAlloc", "cuMemAlloc", 2000, 0 },
    { "cuMemAlloc", "cuMemAlloc_v2", 3020, 0 },
    { "cuMemAllocPitch", "cuMemAllocPitch", 2000, 0 },
    { "cuMemAllocPitch", "cuMemAllocPitch_v2", 3020, 0 },
    { "cuMemAllocManaged", "cuMemAllocManaged", 6000, 0 },
    { "cuMemFree", "cuMemFree", 2000, 0 },
    { "cuMemFree", "cuMemFree_v2", 3020, 0 },
    { "cuMemAllocAsync", "cuMemAllocAsync", 11020, 0 },
    { "cuMemAllocAsync", "cuMemAllocAsync_ptsz", 11020, 1 },
    { "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 11020, 0 },
    { "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", 11020, 1 },
    { "cuMemFreeAsync", "cuMemFreeAsync", 11020, 0 },
    { "cuMemFreeAsync", "cuMemFreeAsync_ptsz", 11020, 1 },
    { "cuMemPoolCreate", "cuMemPoolCreate", 11020, 0 },
    { "cuMemPoolDestroy", "cuMemPoolDestroy", 11020, 0 },
    { "cuMemPoolTrimTo", "cuMemPoolTrimTo", 11020, 0 },
    { "cuMemCreate", "cuMemCreate", 10020, 0 },
    { "cuMemRelease", "cuMemRelease", 10020, 0 },
    { "cuMemRetainAllocationHandle", "cuMemRetainAllocationHandle", 11000, 0 },
    { "cuMemMap", "cuMemMap", 10020, 0 },
    { "cuMemUnmap", "cuMemUnmap", 10020, 0 },
    { "cuArrayCreate", "cuArrayCreate", 2000, 0 },
    { "cuArrayCreate", "cuArrayCreate_v2", 3020, 0 },
    { "cuArray3DCreate", "cuArray3DCreate", 2000, 0 },
    { "cuArray3DCreate", "cuArray3DCreate_v2", 3020, 0 },
    { "cuArrayDestroy", "cuArrayDestroy", 2000, 0 },
    { "cuLaunchKernel", "cuLaunchKernel", 4000, 0 },
    { "cuLaunchKernel", "cuLaunchKernel_ptsz", 7000, 1 },
    { "cuLaunchKernelEx", "cuLaunchKernelEx", 11060, 0 },
    { "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz", 11060, 1 },
    { "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel", 9000, 0 },
    { "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz", 9000, 1 },
    { "cuGraphLaunch", "cuGraphLaunch", 10000, 0 },
    { "cuGraphLaunch", "cuGraphLaunch_ptsz", 10000, 1 },
    { "cuCtxSynchronize", "cuCtxSynchronize", 2000, 0 },
    { "cuCtxSynchronize", "cuCtxSynchronize_v2", 13000, 0 },
    { "cuStreamSynchronize", "cuStreamSynchronize", 2000, 0 },
    { "cuStreamSynchronize", "cuStreamSynchronize_ptsz", 7000, 1 },
    { "cuStreamDestroy", "cuStreamDestroy", 2000, 0 },
    { "cuStreamDestroy", "cuStreamDestroy_v2", 4000, 0 },
    { "cuStreamBeginCapture", "cuStreamBeginCapture", 10000, 0 },
    { "cuStreamBeginCapture", "cuStreamBeginCapture_ptsz", 10000, 1 },
    { "cuStreamBeginCapture", "cuStreamBeginCapture_v2", 10010, 0 },
    { "cuStreamBeginCapture", "cuStreamBeginCapture_v2_ptsz", 10010, 1 },
    { "cuStreamEndCapture", "cuStreamEndCapture", 10000, 0 },
    { "cuStreamEndCapture", "cuStreamEndCapture_ptsz", 10000, 1 },
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int mismatches, checked;
static char preload_lib[4096];

/* The driver's answer for (api, version, flags): the symbol, or NULL below the first version. */
static const char *expected(const char *api, int version, cuuint64_t flags)
{
    const struct hook *best = NULL;
    int has_ptds = 0, want_ptds;

    for (size_t i = 0; i < COUNT(driver); i++)
        if (strcmp(driver[i].api, api) == 0)
            has_ptds |= driver[i].ptds;
    want_ptds = flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM && has_ptds;
    for (size_t i = 0; i < COUNT(driver); i++) {
        const struct hook *d = &driver[i];
        if (strcmp(d->api, api) == 0 && d->ptds == want_ptds && d->version <= version &&
            (!best || d->version > best->version))
            best = d;
    }
    return best ? best->symbol : NULL;
}

static const char *name_of(void *p, char *buf, size_t len)
{
    Dl_info info;

    if (!p)
        return "(null)";
    if (dladdr(p, &info) && info.dli_sname && dlsym(RTLD_DEFAULT, info.dli_sname) == p)
        snprintf(buf, len, "%s in %s", info.dli_sname, info.dli_fname);
    else if (dladdr(p, &info) && info.dli_fname)
        snprintf(buf, len, "unexported, in %s", info.dli_fname);
    else
        snprintf(buf, len, "unexported");
    return buf;
}

static int in_preload(void *p)
{
    Dl_info info;

    return p && dladdr(p, &info) && info.dli_fname && strcmp(info.dli_fname, preload_lib) == 0;
}

/* How a lookup is made: one of the four resolvers. */
struct resolver {
    const char *how;
    gs_pfn_cuGetProcAddress_v2 v2;
    gs_pfn_cuGetProcAddress v1;
};

static void check(const struct resolver *r, const char *api, int version, cuuint64_t flags)
{
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    const char *sym = expected(api, version, flags);
    void *got = NULL, *want = sym ? dlsym(RTLD_DEFAULT, sym) : NULL;
    char a[600], b[600];
    CUresult res = r->v2 ? r->v2(api, &got, version, flags, &st) : r->v1(api, &got, version, flags);
    int ok;

    checked++;
    if (sym)
        ok = res == CUDA_SUCCESS && got == want && (!r->v2 || st == CU_GET_PROC_ADDRESS_SUCCESS);
    else
        ok = res != CUDA_SUCCESS && got == NULL &&
             (!r->v2 || st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    if (!ok) {
        mismatches++;
        printf("MISMATCH %s: %s version %d flags %llu: got %p (%s, result %d, status %d), "
               "want %p (%s)\n",
               r->how, api, version, (unsigned long long)flags, got, name_of(got, a, sizeof(a)),
               (int)res, (int)st, want,
               sym ? name_of(want, b, sizeof(b)) : "none: version not sufficient");
    }
}

static void check_grid(const struct resolver *r)
{
    static const cuuint64_t flags[] = { CU_GET_PROC_ADDRESS_DEFAULT,
                                        CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                                        CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM };

    for (size_t i = 0; i < COUNT(hooks); i++) {
        const int versions[] = { hooks[i].version - 1, hooks[i].version, 12000, 13000 };
        for (size_t v = 0; v < COUNT(versions); v++)
            for (size_t f = 0; f < COUNT(flags); f++)
                check(r, hooks[i].api, versions[v], flags[f]);
    }
}

/* The hook list against the driver's table: the same variants, versions and streams, all ours. */
static void check_hook_list(void)
{
    for (size_t i = 0; i < COUNT(hooks); i++) {
        size_t k;
        for (k = 0; k < COUNT(driver); k++)
            if (strcmp(driver[k].symbol, hooks[i].symbol) == 0)
                break;
        if (k == COUNT(driver) || strcmp(driver[k].api, hooks[i].api) != 0 ||
            driver[k].version != hooks[i].version || driver[k].ptds != hooks[i].ptds) {
            mismatches++;
            printf("MISMATCH hook list: %s (%s from %d, ptds %d) is not the driver's variant "
                   "%s\n",
                   hooks[i].symbol, hooks[i].api, hooks[i].version, hooks[i].ptds,
                   k == COUNT(driver) ? "(none)" : driver[k].symbol);
        }
    }
    for (size_t k = 0; k < COUNT(driver); k++) {
        void *p = dlsym(RTLD_DEFAULT, driver[k].symbol);
        char a[600];
        if (!in_preload(p)) {
            mismatches++;
            printf("MISMATCH hook list: the driver's %s (for %s from %d) resolves to %s, not "
                   "to the interposer\n",
                   driver[k].symbol, driver[k].api, driver[k].version, name_of(p, a, sizeof(a)));
        }
    }
}

int main(void)
{
    struct resolver gpa2 = { "cuGetProcAddress_v2", NULL, NULL };
    struct resolver gpa1 = { "cuGetProcAddress", NULL, NULL };
    struct resolver self2 = { "the cuGetProcAddress_v2 it hands back", NULL, NULL };
    struct resolver self1 = { "the cuGetProcAddress (v1) it hands back", NULL, NULL };
    const char *lib = getenv("LD_PRELOAD");
    Dl_info info;
    void *p = NULL;

    setvbuf(stdout, NULL, _IONBF, 0);
    if (!lib || !*lib || !dlopen(lib, RTLD_NOW | RTLD_NOLOAD)) {
        printf("procaddr_check: run it with LD_PRELOAD naming libgpuslice.so\n");
        return 2;
    }
    *(void **)&gpa2.v2 = dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
    *(void **)&gpa1.v1 = dlsym(RTLD_DEFAULT, "cuGetProcAddress");
    if (!gpa2.v2 || !gpa1.v1 || !dladdr((void *)gpa2.v2, &info) || !info.dli_fname) {
        printf("procaddr_check: no cuGetProcAddress_v2 or cuGetProcAddress to ask\n");
        return 2;
    }
    snprintf(preload_lib, sizeof(preload_lib), "%s", info.dli_fname);
    printf("interposer %s\n", preload_lib);
    if (!in_preload((void *)gpa1.v1)) {
        printf("MISMATCH dlsym: cuGetProcAddress is not the interposer's\n");
        mismatches++;
    }

    check_hook_list();
    check_grid(&gpa2);
    check_grid(&gpa1);
    /* The resolvers handed back for "cuGetProcAddress" itself, and lookups through them. */
    if (gpa2.v2("cuGetProcAddress", &p, 12000, 0, NULL) == CUDA_SUCCESS &&
        p == dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2")) {
        *(void **)&self2.v2 = p;
    } else {
        printf("MISMATCH: cuGetProcAddress_v2(\"cuGetProcAddress\", 12000) gave %p\n", p);
        mismatches++;
    }
    p = NULL;
    if (gpa2.v2("cuGetProcAddress", &p, 11030, 0, NULL) == CUDA_SUCCESS &&
        p == dlsym(RTLD_DEFAULT, "cuGetProcAddress")) {
        *(void **)&self1.v1 = p;
    } else {
        printf("MISMATCH: cuGetProcAddress_v2(\"cuGetProcAddress\", 11030) gave %p\n", p);
        mismatches++;
    }
    if (self2.v2)
        check_grid(&self2);
    if (self1.v1)
        check_grid(&self1);
    printf("procaddr_check: %d lookups of %zu hooks, %d mismatches\n", checked, COUNT(hooks),
           mismatches);
    return mismatches ? 1 : 0;
}

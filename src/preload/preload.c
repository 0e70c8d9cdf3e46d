/*
 * The interposer's entry points: loading the real driver, reading the
 * configuration once, and handing out hooks through every lookup path —
 * direct linking, dlsym on any handle, cuGetProcAddress and _v2 (including
 * the pointer handed back for cuGetProcAddress itself). Each hook is the very
 * variant the caller asked for: we match the driver's answer by pointer and
 * fall back to the version rules only if the driver returns something else.
 */
#define _GNU_SOURCE
#include "preload/preload.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/error.h"
#include "common/tenant.h"

struct gs_real gs__real;
struct gs_state gs__state;

struct hook_entry {
    const char *api;
    const char *symbol;
    int version;
    int ptds;
    void *hook;
    void **real;
};

static const struct hook_entry cuda_hooks[] = {
#define GS_ENTRY(ret, api, sym, ver, ptds, params, args) \
    {#api, #sym, ver, ptds, (void *)sym, (void **)&gs__real.sym},
    GS_CUDA_HOOKS(GS_ENTRY)};

static const struct hook_entry nvml_hooks[] = {GS_NVML_HOOKS(GS_ENTRY)};
#undef GS_ENTRY

#define NHOOKS(a) (sizeof(a) / sizeof((a)[0]))

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn real_dlsym;
static pthread_once_t dlsym_once = PTHREAD_ONCE_INIT;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static int cuda_status = -ENOENT, nvml_status = -ENOENT;
static int config_done;

static unsigned long stat_exact, stat_rule, stat_passed;

void gs__log(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    int n, saved = errno;

    n = snprintf(buf, sizeof(buf), "gpuslice: ");
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    n = (int)strlen(buf);
    buf[n++] = '\n';
    if (write(STDERR_FILENO, buf, (size_t)n) < 0) {
        /* nothing sensible to do: stderr is gone */
    }
    errno = saved;
}

void gs__debug(const char *fmt, ...)
{
    char buf[900];
    va_list ap;

    if (!gs__state.debug)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    gs__log("debug: %s", buf);
}

/*
 * dlsym runs before anything else in the process, even before a sanitizer
 * runtime has set itself up (ASan finds its interceptors' targets through it),
 * so these two must not be instrumented.
 */
#define GS_NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

GS_NO_SANITIZE static void init_real_dlsym(void)
{
    static const char *versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
    size_t i;

    for (i = 0; i < NHOOKS(versions) && real_dlsym == NULL; i++)
        real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
}

static void resolve(void *lib, const struct hook_entry *h, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        *h[i].real = real_dlsym(lib, h[i].symbol);
}

static void load_cuda_once(void)
{
    const char *path = getenv("GPUSLICE_REAL_LIBCUDA");
    void *lib;

    pthread_once(&dlsym_once, init_real_dlsym);
    lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        gs__log("cannot load the CUDA driver (%s)", dlerror());
        cuda_status = GS_ENODRIVER;
        return;
    }
    resolve(lib, cuda_hooks, NHOOKS(cuda_hooks));
#define GS_EXTRA(name) gs__real.name = (gs_pfn_##name)real_dlsym(lib, #name)
    GS_EXTRA(cuCtxGetDevice);
    GS_EXTRA(cuDeviceGetCount);
    GS_EXTRA(cuDeviceGet);
    GS_EXTRA(cuDeviceGetUuid_v2);
    GS_EXTRA(cuMemGetAllocationGranularity);
    GS_EXTRA(cuMemPoolGetAttribute);
    GS_EXTRA(cuDeviceGetMemPool);
    GS_EXTRA(cuStreamGetCtx);
    GS_EXTRA(cuGetErrorName);
    GS_EXTRA(cuDevicePrimaryCtxGetState);
    GS_EXTRA(cuDeviceGetDevResource);
    GS_EXTRA(cuDevSmResourceSplitByCount);
    GS_EXTRA(cuDevResourceGenerateDesc);
    GS_EXTRA(cuGreenCtxCreate);
    GS_EXTRA(cuGreenCtxDestroy);
    GS_EXTRA(cuCtxFromGreenCtx);
    GS_EXTRA(cuGreenCtxGetDevResource);
    GS_EXTRA(cuCtxPopCurrent_v2);
    GS_EXTRA(cuEventCreate);
    GS_EXTRA(cuEventRecord);
    GS_EXTRA(cuEventQuery);
    GS_EXTRA(cuEventDestroy_v2);
    GS_EXTRA(cuStreamIsCapturing);
    GS_EXTRA(cuStreamIsCapturing_ptsz);
    GS_EXTRA(cuStreamQuery);
    cuda_status = 0;
}

int gs__load_cuda(void)
{
    pthread_once(&cuda_once, load_cuda_once);
    return cuda_status;
}

static void load_nvml_once(void)
{
    const char *path = getenv("GPUSLICE_REAL_LIBNVML");
    void *lib;

    pthread_once(&dlsym_once, init_real_dlsym);
    lib = dlopen(path && *path ? path : "libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        gs__debug("cannot load NVML (%s)", dlerror());
        nvml_status = GS_ENODRIVER;
        return;
    }
    resolve(lib, nvml_hooks, NHOOKS(nvml_hooks));
    GS_EXTRA(nvmlDeviceGetHandleByUUID);
    GS_EXTRA(nvmlDeviceGetUUID);
    GS_EXTRA(nvmlDeviceGetComputeRunningProcesses_v3);
#undef GS_EXTRA
    nvml_status = 0;
}

int gs__load_nvml(void)
{
    pthread_once(&nvml_once, load_nvml_once);
    return nvml_status;
}

static void config_once_fn(void)
{
    extern char **environ;
    struct gs_state *st = &gs__state;
    const char *dbg = getenv(GS_ENV_DEBUG), *tenant = getenv(GS_ENV_TENANT);
    int r;

    st->debug = dbg && *dbg && strcmp(dbg, "0") != 0;
    r = gs_config_memory(environ, &st->mem_limits, st->config_msg, sizeof(st->config_msg));
    if (r == 0)
        r = gs_config_compute(environ, &st->compute_limits, st->config_msg,
                              sizeof(st->config_msg));
    if (r == 0 && getenv(GS_ENV_SMS))
        r = gs_parse_limit_list(getenv(GS_ENV_SMS), GS_VALUE_SMS, GS_ENV_SMS, &st->sm_limits,
                                st->config_msg, sizeof(st->config_msg));
    if (r < 0) {
        st->config_error = 1;
    } else if (tenant && *tenant) {
        if ((r = gs_tenant_open(tenant, &st->tenant)) < 0) {
            snprintf(st->config_msg, sizeof(st->config_msg),
                     "%s: cannot attach the tenant's shared state %s: %s", GS_ENV_TENANT, tenant,
                     r == GS_EABI ? "it was made by another gpuslice version (ABI mismatch)"
                                  : gs_strerror(r));
            st->config_error = 1;
        } else {
            st->shared_tenant = 1;
        }
    } else if (st->mem_limits.n > 0 || st->compute_limits.n > 0) {
        if ((r = gs_tenant_anon(&st->tenant)) < 0) {
            snprintf(st->config_msg, sizeof(st->config_msg),
                     "cannot create the process's limit state: %s", gs_strerror(r));
            st->config_error = 1;
        }
    }
    if (st->tenant)
        gs__compute_config();
    if (st->config_error)
        gs__log("%s; CUDA is disabled in this process (cuInit fails)", st->config_msg);
    st->active = st->config_error || st->tenant != NULL || st->sm_limits.n > 0;
    gs__sm_on = !st->config_error && st->sm_limits.n > 0;
    gs__debug("configuration: %s, %d memory limit entr%s from %s, %d compute ceiling entr%s "
              "from %s, %d SM partition entr%s, tenant %s",
              st->active ? "active" : "inactive (pass-through)", st->mem_limits.n,
              st->mem_limits.n == 1 ? "y" : "ies",
              st->mem_limits.source ? st->mem_limits.source : "nowhere", st->compute_limits.n,
              st->compute_limits.n == 1 ? "y" : "ies",
              st->compute_limits.source ? st->compute_limits.source : "nowhere",
              st->sm_limits.n, st->sm_limits.n == 1 ? "y" : "ies",
              st->shared_tenant ? tenant : st->tenant ? "private" : "none");
    __atomic_store_n(&config_done, 1, __ATOMIC_RELEASE);
}

int gs__config(void)
{
    if (!__atomic_load_n(&config_done, __ATOMIC_ACQUIRE)) {
        int saved = errno;
        pthread_once(&config_once, config_once_fn);
        errno = saved;
    }
    return gs__state.active;
}

void *gs__hook_for_symbol(const char *symbol)
{
    size_t i;

    if (symbol[0] == 'c') {
        for (i = 0; i < NHOOKS(cuda_hooks); i++)
            if (strcmp(cuda_hooks[i].symbol, symbol) == 0)
                return cuda_hooks[i].hook;
    } else {
        for (i = 0; i < NHOOKS(nvml_hooks); i++)
            if (strcmp(nvml_hooks[i].symbol, symbol) == 0)
                return nvml_hooks[i].hook;
    }
    return NULL;
}

/*
 * Hooked even in a process with nothing configured: the lanes API tells a
 * lane's thread its SM count through cuDeviceGetAttribute (sm.c), also where
 * the CUDA runtime resolves it through dlsym and cuGetProcAddress.
 */
static int always_hooked(const char *symbol)
{
    return strcmp(symbol, "cuDeviceGetAttribute") == 0 ||
           strncmp(symbol, "cuGetProcAddress", 16) == 0;
}

static void *lookup(void *handle, const char *symbol)
{
    void *r = real_dlsym(handle, symbol), *h;

    if (r == NULL || (!gs__config() && !always_hooked(symbol)))
        return r;
    h = gs__hook_for_symbol(symbol);
    return h ? h : r;
}

/*
 * dlsym on any handle: a symbol exported by a preloaded library is not what
 * dlsym(handle, …) returns for another handle, so we answer for the names we
 * hook. Everything else, and RTLD_NEXT (whose meaning depends on the
 * caller's address), is a tail call to the real dlsym so the caller's return
 * address is the one it sees.
 */
/* glibc declares symbol nonnull; a caller may still pass NULL, which we must not read. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnonnull-compare"
GS_EXPORT GS_NO_SANITIZE
__attribute__((optimize("O2", "omit-frame-pointer", "optimize-sibling-calls"))) void *dlsym(void *handle, const char *symbol)
{
    if (real_dlsym == NULL)
        pthread_once(&dlsym_once, init_real_dlsym);
    if (handle != RTLD_NEXT && symbol != NULL &&
        ((symbol[0] == 'c' && symbol[1] == 'u') || strncmp(symbol, "nvml", 4) == 0))
        return lookup(handle, symbol);
    return real_dlsym(handle, symbol);
}
#pragma GCC diagnostic pop

/* The hook to hand back for what the driver resolved api to. */
static void *translate(const char *api, void *p, int version, cuuint64_t flags)
{
    const struct hook_entry *best = NULL;
    int want_ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    int known = 0;
    size_t i;

    for (i = 0; i < NHOOKS(cuda_hooks); i++) {
        const struct hook_entry *h = &cuda_hooks[i];
        if (strcmp(h->api, api) != 0)
            continue;
        known = 1;
        if (*h->real == p) {
            __atomic_add_fetch(&stat_exact, 1, __ATOMIC_RELAXED);
            return h->hook;
        }
    }
    if (!known) {
        __atomic_add_fetch(&stat_passed, 1, __ATOMIC_RELAXED);
        return p;
    }
    /* The driver answered with a pointer we do not know: apply its rules. */
    for (i = 0; i < NHOOKS(cuda_hooks); i++) {
        const struct hook_entry *h = &cuda_hooks[i];
        if (strcmp(h->api, api) != 0 || h->version > version)
            continue;
        if (best == NULL || (h->ptds == want_ptds && best->ptds != want_ptds) ||
            (h->ptds == best->ptds && h->version > best->version))
            best = h;
    }
    if (best == NULL || (best->ptds && !want_ptds)) {
        __atomic_add_fetch(&stat_passed, 1, __ATOMIC_RELAXED);
        return p;
    }
    __atomic_add_fetch(&stat_rule, 1, __ATOMIC_RELAXED);
    gs__debug("cuGetProcAddress(%s, %d, %llu) returned an unlisted pointer; using %s", api,
              version, (unsigned long long)flags, best->symbol);
    return best->hook;
}

static CUresult getproc(const char *symbol, void **pfn, int version, cuuint64_t flags,
                        CUdriverProcAddressQueryResult *status, int v2)
{
    CUresult r;

    if (gs__load_cuda() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (v2) {
        if (!gs__real.cuGetProcAddress_v2)
            return CUDA_ERROR_NOT_SUPPORTED;
        r = gs__real.cuGetProcAddress_v2(symbol, pfn, version, flags, status);
    } else {
        if (!gs__real.cuGetProcAddress)
            return CUDA_ERROR_NOT_SUPPORTED;
        r = gs__real.cuGetProcAddress(symbol, pfn, version, flags);
    }
    if (r != CUDA_SUCCESS || pfn == NULL || *pfn == NULL || symbol == NULL ||
        (!gs__config() && !always_hooked(symbol)))
        return r;
    *pfn = translate(symbol, *pfn, version, flags);
    return r;
}

GS_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags)
{
    return getproc(symbol, pfn, cudaVersion, flags, NULL, 0);
}

GS_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus)
{
    return getproc(symbol, pfn, cudaVersion, flags, symbolStatus, 1);
}

static void on_fork_child(void)
{
    gs__mem_fork_child();
    gs__compute_fork_child();
}

__attribute__((constructor)) static void gs_init(void)
{
    /* Nothing costly here: the driver is loaded on the first CUDA lookup. */
    pthread_atfork(NULL, NULL, on_fork_child);
}

__attribute__((destructor)) static void gs_fini(void)
{
    if (!config_done)
        return;
    gs__compute_exit();
    gs__mem_exit();
    if (gs__state.debug)
        gs__log("debug: cuGetProcAddress lookups: %lu hooked by pointer match, %lu by version "
                "rule, %lu passed through",
                stat_exact, stat_rule, stat_passed);
}

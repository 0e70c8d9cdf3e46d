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
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/error.h"
#include "common/shm.h"
#include "common/tenant.h"

struct gs_driver gs__real;
struct gs_state gs__state;

struct hook_entry {
    const char *api;
    const char *symbol;
    int version;
    int ptds;
    int flags; /* GS_HOOK, GS_HOOK_ALWAYS */
    void *hook;
    void **real;
};

static const struct hook_entry cuda_hooks[] = {
#define GS_ENTRY(api, sym, ver, ptds, flags)                                                       \
    { #api, #sym, ver, ptds, flags, (void *)sym, (void **)&gs__real.sym },
    GS_CUDA_HOOKS(GS_ENTRY)
};

static const struct hook_entry nvml_hooks[] = { GS_NVML_HOOKS(GS_ENTRY) };
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
 * runtime has set itself up (ASan and TSan find their interceptors' targets
 * through dlsym(RTLD_NEXT, …) while they start), so these two must not be
 * instrumented at all: TSan's function-entry hook alone crashes there, and
 * clang keeps that hook under no_sanitize("thread"), hence its
 * disable_sanitizer_instrumentation. Nor may they call anything a sanitizer
 * intercepts (pthread_once, strncmp) on the way to the real dlsym.
 */
#if defined(__clang__)
#define GS_NO_SANITIZE                                                                             \
    __attribute__((no_sanitize("address", "undefined", "thread"),                                  \
                   disable_sanitizer_instrumentation))
#else
#define GS_NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "thread")))
#endif

GS_NO_SANITIZE static int same_name(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

/*
 * The default version of name in the loaded object that defines fn, read
 * from its dynamic symbol table (GNU hash). We export dlsym, dlvsym and
 * dlmopen ourselves, so asking the dynamic linker for glibc's would give us
 * our own; this finds glibc's from the address of a function we do not
 * define (dlerror lives beside them: in libc since glibc 2.34, in libdl
 * before). Calls nothing a sanitizer intercepts.
 */
GS_NO_SANITIZE static void *symbol_in(const struct link_map *lm, const char *name)
{
    const ElfW(Sym) *symtab = NULL;
    const ElfW(Half) *versym = NULL;
    const uint32_t *gh = NULL, *buckets, *chain;
    const char *strtab = NULL;
    const ElfW(Dyn) * d;
    uint32_t h = 5381, nb, off, i;
    const unsigned char *c;

    if (lm == NULL || lm->l_ld == NULL)
        return NULL;
    for (d = lm->l_ld; d->d_tag != DT_NULL; d++) {
        /* Most dynamic loaders relocate these in place; allow for one that does not. */
        ElfW(Addr) a = d->d_un.d_ptr < lm->l_addr ? d->d_un.d_ptr + lm->l_addr : d->d_un.d_ptr;
        switch (d->d_tag) {
        case DT_SYMTAB:
            symtab = (const ElfW(Sym) *)a;
            break;
        case DT_STRTAB:
            strtab = (const char *)a;
            break;
        case DT_GNU_HASH:
            gh = (const uint32_t *)a;
            break;
        case DT_VERSYM:
            versym = (const ElfW(Half) *)a;
            break;
        }
    }
    if (symtab == NULL || strtab == NULL || gh == NULL)
        return NULL;
    for (c = (const unsigned char *)name; *c; c++)
        h = h * 33 + *c;
    nb = gh[0];
    off = gh[1];
    buckets = gh + 4 + gh[2] * (sizeof(ElfW(Addr)) / 4);
    chain = buckets + nb;
    if (nb == 0 || (i = buckets[h % nb]) < off)
        return NULL;
    for (;; i++) {
        uint32_t ch = chain[i - off];
        if ((ch | 1) == (h | 1) && same_name(strtab + symtab[i].st_name, name) &&
            symtab[i].st_shndx != SHN_UNDEF && (versym == NULL || !(versym[i] & 0x8000)))
            return (void *)(lm->l_addr + symtab[i].st_value);
        if (ch & 1)
            return NULL;
    }
}

GS_NO_SANITIZE static void *symbol_beside(void *fn, const char *name)
{
    struct link_map *lm = NULL;
    Dl_info info;
    void *p = NULL, *libc;

    if (dladdr1(fn, &info, (void **)&lm, RTLD_DL_LINKMAP) != 0)
        p = symbol_in(lm, name);
    /* Should dladdr fail us, the C library by its name (the loader has it loaded). */
    if (p == NULL && (libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD)) != NULL) {
        if (dlinfo(libc, RTLD_DI_LINKMAP, &lm) == 0)
            p = symbol_in(lm, name);
        dlclose(libc);
    }
    return p;
}

/* Ours for the dynamic loader's lookup functions (s may be NULL), else NULL. */
GS_NO_SANITIZE static void *loader_function(const char *s)
{
    if (s == NULL || s[0] != 'd' || s[1] != 'l')
        return NULL;
    if (same_name(s, "dlsym"))
        return (void *)dlsym;
    if (same_name(s, "dlvsym"))
        return (void *)dlvsym;
    if (same_name(s, "dlmopen"))
        return (void *)dlmopen;
    return NULL;
}

typedef void *(*dlvsym_fn)(void *, const char *, const char *);
typedef void *(*dlmopen_fn)(Lmid_t, const char *, int);
static dlvsym_fn real_dlvsym;
static dlmopen_fn real_dlmopen;

/*
 * Finds the real dlsym, dlvsym and dlmopen. Lock-free and idempotent, so that
 * it may run on several threads at once and re-entrantly (a sanitizer starting
 * up may call dlsym again): each pointer is published once, by the first to
 * find it; after a thread has read it no one writes it again.
 */
GS_NO_SANITIZE static void init_real_dlsym(void)
{
    void *none = NULL, *p;

    if (__atomic_load_n(&real_dlsym, __ATOMIC_ACQUIRE) != NULL)
        return;
    if ((p = symbol_beside((void *)dlerror, "dlvsym")) != NULL)
        __atomic_compare_exchange_n((void **)&real_dlvsym, &none, p, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE);
    none = NULL;
    if ((p = symbol_beside((void *)dlerror, "dlmopen")) != NULL)
        __atomic_compare_exchange_n((void **)&real_dlmopen, &none, p, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE);
    none = NULL;
    if ((p = symbol_beside((void *)dlerror, "dlsym")) != NULL)
        __atomic_compare_exchange_n((void **)&real_dlsym, &none, p, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE);
}

static void *lookup_real(void *lib, const char *name)
{
    return real_dlsym ? real_dlsym(lib, name) : NULL;
}

static void load_cuda_once(void)
{
    char err[256];

    pthread_once(&dlsym_once, init_real_dlsym);
    if (gs_driver_open_cuda(&gs__real, RTLD_NOW | RTLD_GLOBAL, lookup_real, err, sizeof(err)) < 0) {
        gs__log("cannot load the CUDA driver (%s)", err);
        cuda_status = GS_ENODRIVER;
        return;
    }
    cuda_status = 0;
}

int gs__load_cuda(void)
{
    pthread_once(&cuda_once, load_cuda_once);
    return cuda_status;
}

static void load_nvml_once(void)
{
    char err[256];

    pthread_once(&dlsym_once, init_real_dlsym);
    if (gs_driver_open_nvml(&gs__real, RTLD_NOW | RTLD_GLOBAL, lookup_real, err, sizeof(err)) < 0) {
        gs__debug("cannot load NVML (%s)", err);
        nvml_status = GS_ENODRIVER;
        return;
    }
    nvml_status = 0;
}

int gs__load_nvml(void)
{
    pthread_once(&nvml_once, load_nvml_once);
    return nvml_status;
}

/*
 * A tenant whose limits came with it (gpuslice run): a process's own variables
 * (unset, or raised in a child's environment) change nothing.
 */
static void drop_own_limits_if_fixed(struct gs_state *st)
{
    if (!__atomic_load_n(&st->tenant->limits_fixed, __ATOMIC_ACQUIRE))
        return;
    if (st->mem_limits.n || st->compute_limits.n)
        gs__debug("the tenant's limits were fixed when it was made; %s%s%s in this "
                  "process's environment is not used",
                  st->mem_limits.n ? st->mem_limits.source : "",
                  st->mem_limits.n && st->compute_limits.n ? " and " : "",
                  st->compute_limits.n ? st->compute_limits.source : "");
    st->mem_limits.n = 0;
    st->compute_limits.n = 0;
    st->priority = st->weight = 0;
}

static void config_once_fn(void)
{
    extern char **environ;
    struct gs_state *st = &gs__state;
    const char *dbg = getenv(GS_ENV_DEBUG), *tenant = getenv(GS_ENV_TENANT), *cache = NULL;
    int r;

    st->debug = dbg && *dbg && strcmp(dbg, "0") != 0;
    r = gs_config_memory(environ, &st->mem_limits, st->config_msg, sizeof(st->config_msg));
    if (r == 0)
        r = gs_config_compute(environ, &st->compute_limits, st->config_msg, sizeof(st->config_msg));
    if (r == 0)
        r = gs_config_sched(environ, &st->priority, &st->weight, st->config_msg,
                            sizeof(st->config_msg));
    if (r == 0)
        r = gs_config_shared_cache(environ, &cache, st->config_msg, sizeof(st->config_msg));
    if (r == 0 && getenv(GS_ENV_SMS))
        r = gs_parse_limit_list(getenv(GS_ENV_SMS), GS_VALUE_SMS, GS_ENV_SMS, &st->sm_limits,
                                st->config_msg, sizeof(st->config_msg));
    if (r == 0 && gs_tenant_dir_relative()) {
        /* Boards (and tenant files) there would be each working directory's own. */
        snprintf(st->config_msg, sizeof(st->config_msg),
                 GS_ENV_RUN_DIR "=\"%.64s\" is not an absolute path: give the directory tenant "
                                "files live in as one, or unset it (/dev/shm)",
                 gs_tenant_dir_relative());
        r = -1;
    }
    if (r < 0) {
        st->config_error = 1;
    } else if ((r = gs__managed_attach()) != 0) {
        /* The daemon's tenant: its limits are the daemon's, whatever the environment says. */
        if (r < 0)
            st->config_error = 1;
        else if (st->mem_limits.n || st->compute_limits.n || (tenant && *tenant))
            gs__debug("the daemon's limits apply; %s%s%s%s in this process's environment %s not "
                      "used",
                      st->mem_limits.n ? st->mem_limits.source : "",
                      st->mem_limits.n && (st->compute_limits.n || tenant) ? ", " : "",
                      st->compute_limits.n ? st->compute_limits.source : "",
                      tenant && *tenant ? GS_ENV_TENANT : "",
                      st->mem_limits.n + st->compute_limits.n + (tenant && *tenant) > 1 ? "are"
                                                                                        : "is");
        st->mem_limits.n = 0;
        st->compute_limits.n = 0;
        st->priority = st->weight = 0;
    } else if (tenant && *tenant) {
        if (cache)
            gs__debug("%s names the tenant; %s is not used", GS_ENV_TENANT,
                      GS_ENV_HAMI_SHARED_CACHE);
        if ((r = gs_tenant_open(tenant, &st->tenant)) < 0) {
            char why[400];

            /* Of another gpuslice: the message names its version and ours. */
            if (r != GS_EABI ||
                gs_shm_check_file(tenant, GPUSLICE_TENANT_MAGIC, GPUSLICE_TENANT_ABI_MAJOR,
                                  sizeof(struct gpuslice_tenant), "tenant", why, sizeof(why)) == 0)
                snprintf(why, sizeof(why), "%s",
                         r == GS_EABI ? "not a tenant's file" : gs_strerror(r));
            snprintf(st->config_msg, sizeof(st->config_msg),
                     "%s: cannot attach the tenant's shared state %s: %s", GS_ENV_TENANT, tenant,
                     why);
            st->config_error = 1;
        } else {
            st->shared_tenant = 1;
            drop_own_limits_if_fixed(st);
        }
    } else if (cache) {
        /* HAMi's shared file: whoever names it shares one tenant (hami.c). */
        if (gs__hami_attach(cache) < 0)
            st->config_error = 1;
        else
            drop_own_limits_if_fixed(st);
    } else if (st->mem_limits.n > 0 || st->compute_limits.n > 0 || st->priority || st->weight) {
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
              st->compute_limits.source ? st->compute_limits.source : "nowhere", st->sm_limits.n,
              st->sm_limits.n == 1 ? "y" : "ies",
              st->node              ? "the daemon's"
              : st->shared_cache[0] ? st->shared_cache
              : st->shared_tenant   ? tenant
              : st->tenant          ? "private"
                                    : "none");
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
 * Whether symbol (an exported name, or a name asked of cuGetProcAddress) is
 * hooked even in a process with nothing configured: GS_HOOK_ALWAYS in the
 * hook list (the lanes API tells a lane's thread its SM count through
 * cuDeviceGetAttribute, sm.c, also where the CUDA runtime resolves it through
 * dlsym and cuGetProcAddress).
 */
static int always_hooked(const char *symbol)
{
    size_t i;

    for (i = 0; i < NHOOKS(cuda_hooks); i++)
        if ((cuda_hooks[i].flags & GS_HOOK_ALWAYS) &&
            (strcmp(cuda_hooks[i].symbol, symbol) == 0 || strcmp(cuda_hooks[i].api, symbol) == 0))
            return 1;
    return 0;
}

/* Whether s (may be NULL) names a CUDA driver or NVML function. */
GS_NO_SANITIZE static int driver_name(const char *s)
{
    return s != NULL && ((s[0] == 'c' && s[1] == 'u') ||
                         (s[0] == 'n' && s[1] == 'v' && s[2] == 'm' && s[3] == 'l'));
}

/* Our hook for a driver name asked of RTLD_NEXT, when one applies; else NULL. */
static void *next_hook(const char *symbol)
{
    void *h = gs__hook_for_symbol(symbol);

    return h != NULL && (gs__config() || always_hooked(symbol)) ? h : NULL;
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
 * address is the one it sees. So is a call made while this thread is already
 * inside one of our lookups (a library's constructor run by our dlopen of the
 * driver, a sanitizer starting up): it gets the real symbol, and never waits
 * on the configuration this thread is in the middle of reading.
 */
GS_EXPORT GS_NO_SANITIZE
#if !defined(__clang__)
    __attribute__((optimize("O2", "omit-frame-pointer", "optimize-sibling-calls")))
#endif
    void *
    dlsym(void *handle, const char *symbol)
{
    static __thread __attribute__((tls_model("initial-exec"))) int depth; /* our lookups */
    const char *s = symbol;
    void *r;

    /*
     * glibc declares symbol nonnull, so the compiler would drop a test of it; a caller may
     * still pass NULL, which we must not read. The empty asm makes s opaque to it.
     */
    __asm__("" : "+r"(s));
    if (__atomic_load_n(&real_dlsym, __ATOMIC_ACQUIRE) == NULL)
        init_real_dlsym();
    /* The loader's own lookups, from any handle (RTLD_NEXT too): ours, never glibc's. */
    if (depth == 0 && (r = loader_function(s)) != NULL)
        return r;
    /*
     * "The next" CUDA or NVML function after a library: the real driver's, since we load
     * it globally after everything the program links. With limits it is our hook, as
     * for any other handle (an interposer preloaded after us then calls through ours).
     */
    if (handle == RTLD_NEXT && depth == 0 && driver_name(s)) {
        depth++;
        r = next_hook(s);
        depth--;
        if (r != NULL)
            return r;
    }
    if (__atomic_load_n(&real_dlsym, __ATOMIC_ACQUIRE) == NULL)
        return NULL; /* glibc's dlsym not found: nothing to answer with (never a jump to 0) */
    if (handle == RTLD_NEXT || s == NULL || depth > 0 ||
        !((s[0] == 'c' && s[1] == 'u') ||
          (s[0] == 'n' && s[1] == 'v' && s[2] == 'm' && s[3] == 'l')))
        return real_dlsym(handle, symbol);
    depth++;
    r = lookup(handle, symbol);
    depth--;
    return r;
}

/*
 * dlvsym: glibc's dlsym by version was the way past our dlsym
 * (dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34")). The loader's lookups are
 * answered with ours; CUDA and NVML names get the hooks as with dlsym;
 * everything else is a tail call, so RTLD_NEXT keeps meaning "after the
 * caller". Sanitizer runtimes call it while they start (versioned
 * interceptors), so like dlsym it is not instrumented and calls nothing they
 * intercept on that path.
 */
GS_EXPORT GS_NO_SANITIZE
#if !defined(__clang__)
    __attribute__((optimize("O2", "omit-frame-pointer", "optimize-sibling-calls")))
#endif
    void *
    dlvsym(void *handle, const char *symbol, const char *version)
{
    const char *s = symbol;
    void *r;

    __asm__("" : "+r"(s)); /* may be NULL whatever glibc declares: see dlsym */
    if (__atomic_load_n(&real_dlsym, __ATOMIC_ACQUIRE) == NULL)
        init_real_dlsym();
    if (real_dlvsym == NULL)
        return NULL;
    if ((r = loader_function(s)) != NULL)
        return r;
    if (handle == RTLD_NEXT && driver_name(s) && (r = next_hook(s)) != NULL)
        return r;
    if (handle != RTLD_NEXT && s != NULL &&
        ((s[0] == 'c' && s[1] == 'u') ||
         (s[0] == 'n' && s[1] == 'v' && s[2] == 'm' && s[3] == 'l'))) {
        void *h;

        r = real_dlvsym(handle, symbol, version);
        if (r == NULL || (!gs__config() && !always_hooked(symbol)))
            return r;
        h = gs__hook_for_symbol(symbol);
        return h ? h : r;
    }
    return real_dlvsym(handle, symbol, version);
}

/* Whether path names the CUDA driver or NVML library (any directory, any version suffix). */
static int driver_library(const char *path)
{
    const char *b = strrchr(path, '/');

    b = b ? b + 1 : path;
    return strncmp(b, "libcuda.so", 10) == 0 || strncmp(b, "libnvidia-ml.so", 15) == 0;
}

/*
 * dlmopen: a library loaded into a new link-map namespace gets its own C
 * library and its own dynamic linker scope, where neither our dlsym nor our
 * exported hooks are seen: from there it could open the real driver. The
 * driver itself is opened in the base namespace instead (where our lookups
 * answer); any other library is refused a new namespace while limits apply,
 * with a message. Without limits nothing changes.
 */
GS_EXPORT void *dlmopen(Lmid_t lmid, const char *file, int mode)
{
    if (__atomic_load_n(&real_dlsym, __ATOMIC_ACQUIRE) == NULL)
        init_real_dlsym();
    if (real_dlmopen == NULL)
        return NULL;
    if (lmid == LM_ID_BASE || file == NULL)
        return real_dlmopen(lmid, file, mode);
    if (driver_library(file))
        return dlopen(file, mode);
    if (gs__config() && !gs__state.config_error) {
        gs__log("dlmopen of %s into a new namespace refused: the CUDA driver it could reach "
                "there would not see this process's limits (load it with dlopen)",
                file);
        return NULL;
    }
    return real_dlmopen(lmid, file, mode);
}

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
    gs__debug("cuGetProcAddress(%s, %d, %llu) returned an unlisted pointer; using %s", api, version,
              (unsigned long long)flags, best->symbol);
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

/*
 * Loading the real NVIDIA libraries: one table of names and offsets made from
 * the function lists, so that a function added to a list is loaded everywhere.
 */
#include "common/driver.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

struct sym {
    const char *name;
    size_t off;
};

#define GS_DRIVER_SYM(ret, name, params) { #name, offsetof(struct gs_driver, name) },
static const struct sym cuda_syms[] = { GS_CUDA_FUNCS(GS_DRIVER_SYM) };
static const struct sym nvml_syms[] = { GS_NVML_FUNCS(GS_DRIVER_SYM) };
#undef GS_DRIVER_SYM

static void *plain_lookup(void *lib, const char *name)
{
    return dlsym(lib, name);
}

static int open_lib(struct gs_driver *d, void **lib, const char *var, const char *dflt,
                    const struct sym *syms, size_t n, int flags, gs_driver_lookup lookup, char *err,
                    size_t errlen)
{
    const char *path = getenv(var), *e;
    size_t i;

    if ((*lib = dlopen(path && *path ? path : dflt, flags)) == NULL) {
        e = dlerror();
        snprintf(err, errlen, "%s", e ? e : "cannot load the library");
        return GS_ENODRIVER;
    }
    if (lookup == NULL)
        lookup = plain_lookup;
    for (i = 0; i < n; i++)
        *(void **)((char *)d + syms[i].off) = lookup(*lib, syms[i].name);
    return 0;
}

int gs_driver_open_cuda(struct gs_driver *d, int flags, gs_driver_lookup lookup, char *err,
                        size_t errlen)
{
    return open_lib(d, &d->cuda, GS_ENV_REAL_LIBCUDA, "libcuda.so.1", cuda_syms,
                    sizeof(cuda_syms) / sizeof(cuda_syms[0]), flags, lookup, err, errlen);
}

int gs_driver_open_nvml(struct gs_driver *d, int flags, gs_driver_lookup lookup, char *err,
                        size_t errlen)
{
    return open_lib(d, &d->nvml, GS_ENV_REAL_LIBNVML, "libnvidia-ml.so.1", nvml_syms,
                    sizeof(nvml_syms) / sizeof(nvml_syms[0]), flags, lookup, err, errlen);
}

void gs_driver_close(struct gs_driver *d)
{
    if (d == NULL)
        return;
    if (d->nvml)
        dlclose(d->nvml);
    if (d->cuda)
        dlclose(d->cuda);
    memset(d, 0, sizeof(*d));
}

int gs_driver_count(const struct gs_driver *d, char *err, size_t errlen)
{
    char num[32];
    CUresult r;
    int n = 0;

    if (!d->cuInit || !d->cuDeviceGetCount || !d->cuDeviceGet || !d->cuDeviceGetUuid_v2) {
        snprintf(err, errlen, "the CUDA driver lacks basic device queries (too old?)");
        return -ENOSYS;
    }
    if ((r = d->cuInit(0)) == CUDA_ERROR_NO_DEVICE)
        return 0;
    if (r != CUDA_SUCCESS || (r = d->cuDeviceGetCount(&n)) != CUDA_SUCCESS) {
        snprintf(err, errlen, "the CUDA driver did not initialise: %s",
                 gs_driver_cu_name(d, r, num, sizeof(num)));
        return -EIO;
    }
    return n;
}

int gs_driver_uuid(const struct gs_driver *d, int i, uint8_t out[16])
{
    CUdevice dev;
    CUuuid u;
    CUresult r;

    if ((r = d->cuDeviceGet(&dev, i)) != CUDA_SUCCESS ||
        (r = d->cuDeviceGetUuid_v2(&u, dev)) != CUDA_SUCCESS)
        return (int)r;
    memcpy(out, u.bytes, 16);
    return 0;
}

int gs_driver_uuids(const struct gs_driver *d, uint8_t (*uuids)[16], int max, char *err,
                    size_t errlen)
{
    char num[32];
    int n, i, r;

    if ((n = gs_driver_count(d, err, errlen)) < 0)
        return n;
    for (i = 0; i < n && i < max; i++)
        if ((r = gs_driver_uuid(d, i, uuids[i])) != 0) {
            snprintf(err, errlen, "cannot read the UUID of CUDA device %d: %s", i,
                     gs_driver_cu_name(d, (CUresult)r, num, sizeof(num)));
            return -EIO;
        }
    return n;
}

const char *gs_driver_cu_name(const struct gs_driver *d, CUresult r, char *buf, size_t len)
{
    const char *s = NULL;

    if (d && d->cuGetErrorName && d->cuGetErrorName(r, &s) == CUDA_SUCCESS && s)
        return s;
    snprintf(buf, len, "CUDA error %d", (int)r);
    return buf;
}

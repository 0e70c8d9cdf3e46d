/*
 * Ways a program under a memory limit might reach the real driver behind the
 * interposer, each tried by allocating more than the limit (the limit must
 * be below BYTES): "dlvsym" (glibc's own dlsym found with dlvsym, then
 * libcuda's functions through it), "next_dlsym" (dlsym(RTLD_NEXT, "dlsym")
 * from a library loaded after the interposer, LIB), "next_cu" (the driver's
 * functions as dlsym(RTLD_NEXT, "cu…") from LIB), "libc_dlsym" (glibc's
 * dlsym asked of the C library's own handle, dlsym(libc, "dlsym")),
 * "dlmopen" (LIB loaded into a new link-map namespace, where it opens its
 * own libcuda), "dlmopen_driver" (LIB, the driver or NVML by any name, asked
 * of dlmopen for a new namespace: it must be the base namespace's, the very
 * handle dlopen gives, and for the driver its allocations limited).
 * Exit 0 when the allocation was refused (or the way itself was refused),
 * 1 when it got past the limit, 2 on a usage or set-up error; for
 * "dlmopen_driver", 3 when dlmopen refused LIB or gave another handle.
 *
 * usage: escape WAY BYTES [LIB]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape_try.h"

typedef int (*alloc_fn)(dlsym_fn, unsigned long long);

int escape_next_alloc(unsigned long long bytes); /* libescape.so */

/* Allocates bytes through functions resolved by d from libcuda: 0 refused, 1 got it. */
static int try_alloc(dlsym_fn d, unsigned long long bytes)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);

    return lib ? escape_try(d, lib, "through the lookup", bytes) : 2;
}

int main(int argc, char **argv)
{
    unsigned long long bytes;

    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc < 3)
        return 2;
    bytes = strtoull(argv[2], NULL, 0);
    if (strcmp(argv[1], "dlvsym") == 0) {
        static const char *v[] = { "GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17" };
        dlsym_fn d = NULL;
        size_t i;
        for (i = 0; i < 3 && !d; i++)
            d = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", v[i]);
        if (!d) {
            printf("dlvsym found no dlsym\n");
            return 2;
        }
        return try_alloc(d, bytes);
    }
    if (strcmp(argv[1], "next_dlsym") == 0 && argc > 3) {
        void *lib = dlopen(argv[3], RTLD_NOW);
        dlsym_fn (*next)(void) = lib ? (dlsym_fn(*)(void))dlsym(lib, "escape_next_dlsym") : NULL;
        if (!next) {
            printf("cannot load %s: %s\n", argv[3], dlerror());
            return 2;
        }
        return try_alloc(next(), bytes);
    }
    if (strcmp(argv[1], "libc_dlsym") == 0) {
        void *libc = dlopen("libc.so.6", RTLD_NOW);
        dlsym_fn d = libc ? (dlsym_fn)dlsym(libc, "dlsym") : NULL;
        if (!d) {
            printf("no dlsym in libc.so.6: %s\n", dlerror());
            return 2;
        }
        return try_alloc(d, bytes);
    }
    if (strcmp(argv[1], "next_cu") == 0) {
        /*
         * The driver is loaded (globally) first; then a library this program links
         * (DT_NEEDED, after the interposer in the search order) asks for "the next" cu*.
         */
        if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)) {
            printf("cannot load libcuda.so.1: %s\n", dlerror());
            return 2;
        }
        return escape_next_alloc(bytes);
    }
    if (strcmp(argv[1], "dlmopen") == 0 && argc > 3) {
        void *lib = dlmopen(LM_ID_NEWLM, argv[3], RTLD_NOW);
        alloc_fn f;
        if (!lib) {
            printf("dlmopen refused: %s\n", dlerror());
            return 0;
        }
        /* Inside the namespace: its own libc, its own dlsym, its own libcuda. */
        if (!(f = (alloc_fn)dlsym(lib, "escape_alloc"))) {
            printf("no escape_alloc in %s\n", argv[3]);
            return 2;
        }
        return f(NULL, bytes);
    }
    if (strcmp(argv[1], "dlmopen_driver") == 0 && argc > 3) {
        const char *b = strrchr(argv[3], '/');
        void *lib = dlmopen(LM_ID_NEWLM, argv[3], RTLD_NOW), *base;
        if (!lib) {
            printf("dlmopen of %s refused: %s\n", argv[3], dlerror());
            return 3;
        }
        base = dlopen(argv[3], RTLD_NOW | RTLD_NOLOAD);
        printf("dlmopen of %s: %s\n", argv[3],
               lib == base ? "the base namespace's" : "another namespace's");
        if (lib != base)
            return 3;
        b = b ? b + 1 : argv[3];
        return strncmp(b, "libcuda.so", 10) == 0
                   ? escape_try((dlsym_fn)dlsym, lib, "through the driver dlmopen gave", bytes)
                   : 0;
    }
    printf("unknown way %s\n", argv[1]);
    return 2;
}

/*
 * The library half of escape.c: loaded after the interposer (or into a
 * new link-map namespace), it finds dlsym the way such a library would.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include "escape_try.h"

dlsym_fn escape_next_dlsym(void);
int escape_alloc(dlsym_fn unused, unsigned long long bytes);
int escape_next_alloc(unsigned long long bytes);

/* What "the next dlsym" is from here: glibc's, unless the interposer answers for it. */
dlsym_fn escape_next_dlsym(void)
{
    return (dlsym_fn)dlsym(RTLD_NEXT, "dlsym");
}

/* Opens libcuda from here (in a namespace: its own copy) and allocates bytes. */
int escape_alloc(dlsym_fn unused, unsigned long long bytes)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);

    (void)unused;
    return lib ? escape_try(dlsym, lib, "in the namespace", bytes) : 2;
}

/* The driver's functions as "the next definition" after this library, and an allocation. */
int escape_next_alloc(unsigned long long bytes)
{
    return escape_try(dlsym, RTLD_NEXT, "through RTLD_NEXT", bytes);
}

/*
 * A second preloaded library that, like many interposers, finds the next
 * definition of a function with dlsym(RTLD_NEXT, …). gpuslice overrides
 * dlsym; this checks that RTLD_NEXT still means "after the caller".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int itest_rtld_next_ok = -1;

int puts(const char *s);

int puts(const char *s)
{
    int (*next)(const char *) = (int (*)(const char *))dlsym(RTLD_NEXT, "puts");
    return next && next != puts ? next(s) : -1;
}

__attribute__((constructor)) static void probe(void)
{
    void *next = dlsym(RTLD_NEXT, "puts");
    const char *msg = next && next != (void *)puts ? "rtld-next-ok\n" : "rtld-next-broken\n";
    if (write(STDOUT_FILENO, msg, 13 + (msg[9] == 'b' ? 4 : 0)) < 0)
        _exit(3);
}

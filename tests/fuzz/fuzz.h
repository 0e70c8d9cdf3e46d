/*
 * What every libFuzzer target here shares: the entry point's prototype, a
 * NUL-terminated copy of the input (the parsers read C strings), and a check
 * that aborts with a message, so that a broken invariant is a crash the
 * fuzzer keeps. A target checks what a successful parse promises, not only
 * that nothing crashed.
 */
#ifndef GPUSLICE_FUZZ_H
#define GPUSLICE_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "invariant broken at %s:%d: %s: ", __FILE__, __LINE__, #cond);         \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A malloc'd NUL-terminated copy of data[0..size), cut at its first NUL. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);

    if (s == NULL)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* A message for a person: not empty, and starting with the input's name. */
static inline int fuzz_message_ok(const char *err, const char *what)
{
    return err[0] != '\0' && strncmp(err, what, strlen(what)) == 0;
}

#endif

/*
 * The output protocol of the GPU test programs, shared with tests/gpu/gpucheck.py:
 * every result is one stdout line that tests/gpu/report.py reads back.
 *   @ok TEXT        an assertion that held
 *   @fail TEXT      an assertion that did not hold (the check fails)
 *   @skip TEXT      the check cannot run here (with the reason)
 *   @key NAME VAL   a headline number (shown in the summary table and the JSON)
 *   @num NAME VAL   a detail number (JSON only)
 *   @note TEXT      context for a person reading the log
 *   @info TEXT      a fact, not an assertion: a program that prints these and no
 *                   @ok/@fail is informational (verdict INFO: it neither passes nor
 *                   fails the suite)
 *   @known TEXT     a measured shortfall that docs/reference.md names (verdict KNOWN, not PASS)
 * A program exits 1 if any assertion failed, so a crash or an early exit without
 * a verdict is still a failure.
 */
#ifndef GPUSLICE_GPU_CHECK_H
#define GPUSLICE_GPU_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define MiB (1024.0 * 1024.0)

static int check_failures;
static int check_passes;

static inline void check_init(void)
{
    /* Line-buffered so the lines interleave sensibly with stderr in the log. */
    setvbuf(stdout, NULL, _IOLBF, 0);
}

/* Prints "@ok TEXT" or "@fail TEXT" and returns cond, so callers can stop early. */
static inline int expect(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int expect(int cond, const char *fmt, ...)
{
    va_list ap;
    fputs(cond ? "@ok " : "@fail ", stdout);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    if (cond)
        check_passes++;
    else
        check_failures++;
    return cond;
}

static inline void key(const char *name, double v)
{
    printf("@key %s %.10g\n", name, v);
}

static inline void num(const char *name, double v)
{
    printf("@num %s %.10g\n", name, v);
}

static inline void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void note(const char *fmt, ...)
{
    va_list ap;
    fputs("@note ", stdout);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
}

static inline void info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void info(const char *fmt, ...)
{
    va_list ap;
    fputs("@info ", stdout);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
}

static inline int check_done(void)
{
    printf("%d passed, %d failed\n", check_passes, check_failures);
    fflush(stdout);
    return check_failures ? 1 : 0;
}

#endif /* GPUSLICE_GPU_CHECK_H */

/* CHECK for the integration test programs: a failed condition is printed and remembered. */
#ifndef GPUSLICE_TESTS_CHECK_H
#define GPUSLICE_TESTS_CHECK_H

#include <stdio.h>

static int check_fail; /* set by a failed CHECK; the program's exit status */

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            check_fail = 1;                                                                        \
        }                                                                                          \
    } while (0)

#endif

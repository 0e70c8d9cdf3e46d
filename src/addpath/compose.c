/*
 * Composing a search-path variable (PATH, LD_PRELOAD, LD_LIBRARY_PATH) with
 * components to add, as libgpuslice-addpath.so does from its constructor.
 * Pure: no environment, no global state (so the unit and fuzz tests call it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "addpath/compose.h"

/* Whether c separates components: ':' always; ' ' too where space_too (LD_PRELOAD). */
static int is_sep(char c, int space_too)
{
    return c == ':' || (space_too && c == ' ');
}

/* Whether the component [s, s + n) occurs in list (split as is_sep says). */
static int has_component(const char *list, size_t len, const char *s, size_t n, int space_too)
{
    size_t i = 0;

    while (i <= len) {
        size_t j = i;

        while (j < len && !is_sep(list[j], space_too))
            j++;
        if (j - i == n && memcmp(list + i, s, n) == 0)
            return 1;
        i = j + 1;
    }
    return 0;
}

int gs_path_compose(const char *cur, const char *add, int prepend, int space_too, char **out)
{
    size_t clen = cur ? strlen(cur) : 0, alen = add ? strlen(add) : 0, i = 0, n = 0;
    char *picked, *res;

    *out = NULL;
    if (alen == 0)
        return 0;
    /* The components of add that cur lacks, each once, in add's order. */
    if (!(picked = malloc(alen + 1)))
        return -ENOMEM;
    while (i <= alen) {
        size_t j = i;

        while (j < alen && !is_sep(add[j], space_too))
            j++;
        /* An empty component would mean the working directory: never added. */
        if (j > i && !has_component(cur ? cur : "", clen, add + i, j - i, space_too) &&
            !(n > 0 && has_component(picked, n, add + i, j - i, space_too))) {
            if (n > 0)
                picked[n++] = ':';
            memcpy(picked + n, add + i, j - i);
            n += j - i;
        }
        i = j + 1;
    }
    if (n == 0) {
        free(picked);
        return 0;
    }
    picked[n] = '\0';
    if (clen == 0) {
        *out = picked;
        return 1;
    }
    if (!(res = malloc(clen + n + 2))) {
        free(picked);
        return -ENOMEM;
    }
    if (prepend) {
        memcpy(res, picked, n);
        res[n] = ':';
        memcpy(res + n + 1, cur, clen + 1);
    } else {
        memcpy(res, cur, clen);
        res[clen] = ':';
        memcpy(res + clen + 1, picked, n + 1);
    }
    free(picked);
    *out = res;
    return 1;
}

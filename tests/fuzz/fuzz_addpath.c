/*
 * gs_path_compose (libgpuslice-addpath.so) on any input: the variable's value,
 * the components to add and the flags, split from the fuzzer's bytes. Checked:
 * what was there is kept as it was, at the start (append) or the end (prepend);
 * every non-empty component to add is a component of the result; composing
 * again changes nothing.
 */
#include <string.h>

#include "addpath/compose.h"
#include "fuzz.h"

static int is_sep(char c, int space_too)
{
    return c == ':' || (space_too && c == ' ');
}

/* Whether [s, s + n) is a component of list. */
static int component_of(const char *list, const char *s, size_t n, int space_too)
{
    const char *p = list;

    for (;;) {
        const char *e = p;
        while (*e && !is_sep(*e, space_too))
            e++;
        if ((size_t)(e - p) == n && memcmp(p, s, n) == 0)
            return 1;
        if (!*e)
            return 0;
        p = e + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *cur, *add, *out = NULL, *again = NULL;
    const char *cur_or_empty, *split;
    size_t clen, n, i;
    int prepend, space_too, r;

    if (size < 1)
        return 0;
    prepend = data[0] & 1;
    space_too = (data[0] >> 1) & 1;
    data++;
    size--;
    /* cur, a NUL byte, add (NULs elsewhere end the strings early, as C strings do). */
    split = memchr(data, '\0', size);
    n = split ? (size_t)(split - (const char *)data) : size;
    cur = fuzz_cstr(data, n);
    add = split ? fuzz_cstr((const uint8_t *)split + 1, size - n - 1) : fuzz_cstr(data, 0);
    r = gs_path_compose((data[-1] & 4) ? NULL : cur, add, prepend, space_too, &out);
    cur_or_empty = (data[-1] & 4) ? "" : cur;
    clen = strlen(cur_or_empty);
    FUZZ_CHECK(r == 0 || r == 1, "returned %d", r); /* no allocation fails here */
    if (r == 0) {
        FUZZ_CHECK(out == NULL, "unchanged, yet a value");
        /* Unchanged: every non-empty component of add was there. */
        for (i = 0; add[i];) {
            size_t j = i;
            while (add[j] && !is_sep(add[j], space_too))
                j++;
            FUZZ_CHECK(j == i || component_of(cur_or_empty, add + i, j - i, space_too),
                       "unchanged, but \"%.*s\" is not in \"%s\"", (int)(j - i), add + i,
                       cur_or_empty);
            i = add[j] ? j + 1 : j;
        }
    } else {
        size_t olen = strlen(out);
        if (clen > 0) {
            /* The old value, whole, at its end of the result, a ':' between. */
            FUZZ_CHECK(olen > clen + 1, "\"%s\" from \"%s\"", out, cur_or_empty);
            FUZZ_CHECK(prepend ? (memcmp(out + olen - clen, cur_or_empty, clen) == 0 &&
                                  out[olen - clen - 1] == ':')
                               : (memcmp(out, cur_or_empty, clen) == 0 && out[clen] == ':'),
                       "\"%s\" does not keep \"%s\"", out, cur_or_empty);
        }
        /* Every non-empty component of add is in the result. */
        for (i = 0; add[i];) {
            size_t j = i;
            while (add[j] && !is_sep(add[j], space_too))
                j++;
            FUZZ_CHECK(j == i || component_of(out, add + i, j - i, space_too),
                       "\"%.*s\" is not in \"%s\"", (int)(j - i), add + i, out);
            i = add[j] ? j + 1 : j;
        }
        /* Idempotent: adding the same again changes nothing. */
        FUZZ_CHECK(gs_path_compose(out, add, prepend, space_too, &again) == 0 && !again,
                   "adding \"%s\" to \"%s\" again changed it", add, out);
    }
    free(out);
    free(cur);
    free(add);
    return 0;
}

/*
 * gs_device_list (--device): the input's lines are the --device values,
 * and, when its first byte is odd, the first line is the caller's
 * CUDA_VISIBLE_DEVICES. An accepted selection has one entry per entry given,
 * in order: the UUID as given, the visible entry an index picks, or the
 * index in one spelling; none empty, none twice. A refusal names --device
 * and hands back nothing.
 */
#include <ctype.h>
#include <errno.h>
#include <strings.h>

#include "common/devlist.h"
#include "fuzz.h"

#define MAX_ARGS 6

/* The n'th comma-separated entry of list (length in *len), or NULL. */
static const char *nth(const char *list, int n, size_t *len)
{
    for (; n > 0 && list; n--)
        if ((list = strchr(list, ',')) != NULL)
            list++;
    if (list)
        *len = strcspn(list, ",");
    return list;
}

static int count(const char *list)
{
    int n = 1;

    if (*list == '\0')
        return 0;
    for (; *list; list++)
        n += *list == ',';
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s, *args[MAX_ARGS], *visible = NULL, *out = NULL, err[512] = "", *line;
    int nargs = 0, r, a, i, k = 0;

    if (size < 1)
        return 0;
    s = fuzz_cstr(data + 1, size - 1);
    line = s;
    if (data[0] & 1) {
        visible = line;
        line = strchr(line, '\n');
        if (line)
            *line++ = '\0';
    }
    while (line && nargs < MAX_ARGS) {
        args[nargs++] = line;
        if ((line = strchr(line, '\n')) != NULL)
            *line++ = '\0';
    }
    if (nargs == 0) {
        free(s);
        return 0;
    }
    r = gs_device_list(args, nargs, visible, &out, err, sizeof(err));
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL, "%d", r);
        FUZZ_CHECK(out == NULL, "refused, and yet \"%s\" handed back", out);
        FUZZ_CHECK(fuzz_message_ok(err, "--device"), "message \"%s\"", err);
        free(s);
        return 0;
    }
    FUZZ_CHECK(r == 0 && out != NULL, "%d", r);
    for (a = 0; a < nargs; a++) {
        int n = count(args[a]);
        FUZZ_CHECK(n > 0, "the empty value %d was accepted", a);
        for (i = 0; i < n; i++, k++) {
            size_t el, ol, vl;
            const char *e = nth(args[a], i, &el), *o = nth(out, k, &ol), *v;
            char num[16];

            FUZZ_CHECK(o != NULL, "entry %d missing from \"%s\"", k, out);
            FUZZ_CHECK(el > 0 && ol > 0, "an empty entry in \"%s\" -> \"%s\"", args[a], out);
            if (strncasecmp(e, "GPU-", 4) == 0 || strncasecmp(e, "MIG-", 4) == 0) {
                v = e;
                vl = el;
            } else {
                FUZZ_CHECK(el <= 5 || strspn(e, "0") >= el - 5, "index \"%.*s\" accepted", (int)el,
                           e);
                for (size_t j = 0; j < el; j++)
                    FUZZ_CHECK(isdigit((unsigned char)e[j]), "index \"%.*s\"", (int)el, e);
                if (visible) {
                    v = nth(visible, atoi(e + strspn(e, "0") - (strspn(e, "0") == el)), &vl);
                    FUZZ_CHECK(v != NULL, "index %.*s beyond \"%s\"", (int)el, e, visible);
                } else {
                    vl = (size_t)snprintf(num, sizeof(num), "%d",
                                          atoi(e + strspn(e, "0") - (strspn(e, "0") == el)));
                    v = num;
                }
            }
            FUZZ_CHECK(ol == vl && memcmp(o, v, vl) == 0, "entry %d is \"%.*s\", want \"%.*s\"", k,
                       (int)ol, o, (int)vl, v);
            for (int j = 0; j < k; j++) {
                size_t pl;
                const char *p = nth(out, j, &pl);
                FUZZ_CHECK(!(pl == ol && strncasecmp(p, o, ol) == 0), "\"%.*s\" twice in \"%s\"",
                           (int)ol, o, out);
            }
        }
    }
    FUZZ_CHECK(count(out) == k, "\"%s\" has %d entries, want %d", out, count(out), k);
    free(out);
    free(s);
    return 0;
}

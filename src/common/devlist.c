/*
 * The --device selection (gpuslice run, exec, reserve): indexes and UUIDs
 * into the CUDA_VISIBLE_DEVICES the program is started with. It is strict,
 * as every parser of what people write is: an entry not understood is
 * refused, and no GPU may be named twice (the program would see one device
 * under two ordinals).
 */
#define _GNU_SOURCE
#include "common/devlist.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/error.h"

/* "GPU-…" or "MIG-…" (either case) followed by what a UUID is made of. */
static int is_uuid(const char *s, size_t n)
{
    size_t i;

    if (n <= 4 || (strncasecmp(s, "GPU-", 4) != 0 && strncasecmp(s, "MIG-", 4) != 0))
        return 0;
    for (i = 4; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '/')
            return 0;
    return 1;
}

/* The n'th comma-separated entry of list and its length, or NULL. */
static const char *list_entry(const char *list, int n, size_t *len)
{
    const char *p = list;

    for (; n > 0 && p; n--)
        if ((p = strchr(p, ',')) != NULL)
            p++;
    if (p)
        *len = strcspn(p, ",");
    return p;
}

int gs_device_list_count(const char *list)
{
    int n = 1;

    if (!*list)
        return 0;
    for (; *list; list++)
        n += *list == ',';
    return n;
}

/* The length of list's longest comma-separated entry. */
static size_t longest_entry(const char *list)
{
    size_t most = 0;

    while (*list) {
        size_t l = strcspn(list, ",");
        if (l > most)
            most = l;
        list += l + (list[l] == ',');
    }
    return most;
}

int gs_device_list(char **args, int nargs, const char *visible, char **out, char *err,
                   size_t errlen)
{
    static const char *accepted = "use indexes such as 0 or UUIDs such as "
                                  "GPU-5ac1ce00-0000-4000-8000-000000000000, separated by commas";
    size_t cap = 1, len = 0, widest = visible ? longest_entry(visible) : 0;
    char *res;
    int a, i;

    /* Each entry is copied, or an index replaced by one of visible's entries. */
    for (a = 0; a < nargs; a++)
        cap += strlen(args[a]) + 1 + (widest + 1) * (size_t)gs_device_list_count(args[a]);
    if ((res = calloc(1, cap)) == NULL) {
        gs_set_error(err, errlen, "--device: %s", strerror(ENOMEM));
        return -ENOMEM;
    }
    for (a = 0; a < nargs; a++) {
        const char *arg = args[a];
        int n = gs_device_list_count(arg) ? gs_device_list_count(arg) : 1;

        for (i = 0; i < n; i++) {
            size_t l = 0, vl = 0;
            const char *e = list_entry(arg, i, &l), *v;
            char *end, num[8];
            unsigned long idx;

            if (l == 0) {
                gs_set_error(err, errlen, "--device: \"%s\" has an empty entry (%s)", arg,
                             accepted);
                goto bad;
            }
            if (is_uuid(e, l)) {
                v = e;
                vl = l;
            } else if (e[0] == '-' && l > 1 && isdigit((unsigned char)e[1])) {
                gs_set_error(err, errlen, "--device: \"%.*s\" is negative (indexes start at 0; %s)",
                             (int)l, e, accepted);
                goto bad;
            } else {
                idx = isdigit((unsigned char)e[0]) ? strtoul(e, &end, 10) : 0;
                if (!isdigit((unsigned char)e[0]) || end != e + l) {
                    gs_set_error(err, errlen, "--device: \"%.*s\" is not a device (%s)", (int)l, e,
                                 accepted);
                    goto bad;
                }
                if (idx > GS_DEVLIST_MAX_INDEX) {
                    gs_set_error(err, errlen, "--device: index %.*s is too large (at most %d)",
                                 (int)l, e, GS_DEVLIST_MAX_INDEX);
                    goto bad;
                }
                if (visible) {
                    int nv = gs_device_list_count(visible);
                    if (nv == 0) {
                        gs_set_error(err, errlen,
                                     "--device: index %lu: CUDA_VISIBLE_DEVICES is empty, so "
                                     "there is no device to pick (use a UUID, or unset it)",
                                     idx);
                        goto bad;
                    }
                    if ((int)idx >= nv) {
                        gs_set_error(err, errlen,
                                     "--device: index %lu is not among the %d device(s) of "
                                     "CUDA_VISIBLE_DEVICES=\"%s\" (use 0..%d, or a UUID)",
                                     idx, nv, visible, nv - 1);
                        goto bad;
                    }
                    v = list_entry(visible, (int)idx, &vl);
                    if (vl == 0) {
                        gs_set_error(err, errlen,
                                     "--device: index %lu picks an empty entry of "
                                     "CUDA_VISIBLE_DEVICES=\"%s\" (fix it, or use a UUID)",
                                     idx, visible);
                        goto bad;
                    }
                } else {
                    /* In one spelling, so that 0 and 00 are seen to be one device. */
                    vl = (size_t)snprintf(num, sizeof(num), "%lu", idx);
                    v = num;
                }
            }
            /* The same GPU twice would give the program two ordinals for one device. */
            {
                const char *p = res;
                while (*p) {
                    size_t pl = strcspn(p, ",");
                    if (pl == vl && strncasecmp(p, v, vl) == 0) {
                        gs_set_error(err, errlen, "--device: \"%.*s\" is given twice", (int)l, e);
                        goto bad;
                    }
                    p += pl + (p[pl] == ',');
                }
            }
            if (len)
                res[len++] = ',';
            memcpy(res + len, v, vl);
            len += vl;
            res[len] = '\0';
        }
    }
    *out = res;
    return 0;
bad:
    free(res);
    return -EINVAL;
}

/*
 * The share parsers: gs_parse_share (--gpu-share, --sm-share; the first
 * byte even) against its definition, an integer 1..100 in decimal digits
 * only; smplan_parse_shares (gpuslice procs --shares; odd) for one weight
 * per comma-separated item, each what strtod reads there, above 0 and at
 * most 1e6, and no more than asked for.
 */
#include <errno.h>

#include "common/parse.h"
#include "common/smplan.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s;

    if (size < 1)
        return 0;
    s = fuzz_cstr(data + 1, size - 1);
    if (data[0] % 2 == 0) {
        size_t len = strlen(s), zeros = strspn(s, "0");
        int v = -1, r = gs_parse_share(s, &v), want = 0;

        if (len > 0 && strspn(s, "0123456789") == len && len - zeros <= 3)
            want = atoi(s);
        if (want >= 1 && want <= 100)
            FUZZ_CHECK(r == 0 && v == want, "\"%s\": %d, %d; want %d", s, r, v, want);
        else
            FUZZ_CHECK(r == -EINVAL && v == -1, "\"%s\" accepted as %d", s, v);
    } else {
        double w[SMPLAN_MAX_LANES];
        int max = 1 + data[0] / 2 % SMPLAN_MAX_LANES, n = -1, r, i, items = 1;
        char err[256] = "";
        const char *p = s;

        r = smplan_parse_shares(s, w, max, &n, err, sizeof(err));
        for (const char *q = s; *q; q++)
            items += *q == ',';
        if (r < 0) {
            FUZZ_CHECK(r == -EINVAL, "\"%s\": %d", s, r);
            FUZZ_CHECK(fuzz_message_ok(err, "--shares"), "\"%s\": message \"%s\"", s, err);
        } else {
            FUZZ_CHECK(r == 0 && n == items && n >= 1 && n <= max,
                       "\"%s\": %d shares of %d (max %d)", s, n, items, max);
            for (i = 0; i < n; i++) {
                size_t len = strcspn(p, ",");
                char buf[64];
                FUZZ_CHECK(len > 0 && len < sizeof(buf), "item %d of \"%s\"", i, s);
                FUZZ_CHECK(strspn(p, "0123456789.") >= len, "item %d of \"%s\" is not a number", i,
                           s);
                memcpy(buf, p, len);
                buf[len] = '\0';
                FUZZ_CHECK(w[i] > 0 && w[i] <= 1e6 && w[i] == strtod(buf, NULL),
                           "item %d of \"%s\" is %g", i, s, w[i]);
                p += len + 1;
            }
        }
    }
    free(s);
    return 0;
}

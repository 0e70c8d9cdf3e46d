/*
 * gs_parse_size against a second implementation written another way (the
 * fraction by repeated doubling of its decimal digits, not by division), and
 * round trips: an accepted size, written back in bytes, in each exact unit,
 * and as gs_format_size prints it, parses to the same size (within the
 * printed precision where gs_format_size rounds).
 */
#include <ctype.h>
#include <errno.h>

#include "common/parse.h"
#include "fuzz.h"

/* floor(0.DIGITS * 2^bits), by doubling the digit string bits times. */
static uint64_t fraction_by_doubling(const char *digits, size_t n, unsigned bits)
{
    unsigned char *d = malloc(n ? n : 1);
    uint64_t v = 0;
    unsigned b;
    size_t i;

    if (d == NULL)
        abort();
    for (i = 0; i < n; i++)
        d[i] = (unsigned char)(digits[i] - '0');
    for (b = 0; b < bits; b++) {
        unsigned carry = 0;
        for (i = n; i-- > 0;) {
            unsigned x = d[i] * 2u + carry;
            d[i] = (unsigned char)(x % 10);
            carry = x / 10;
        }
        v = v * 2 + carry;
    }
    free(d);
    return v;
}

/* 1 and *out when s is a size, 0 when it is not one or too large. */
static int reference(const char *s, uint64_t *out)
{
    const char *p = s, *w0, *f0 = NULL;
    size_t wn, fn = 0;
    unsigned bits = 0;
    unsigned __int128 whole = 0, v;
    int frac_nonzero = 0;

    w0 = p;
    while (isdigit((unsigned char)*p))
        p++;
    wn = (size_t)(p - w0);
    if (*p == '.') {
        f0 = ++p;
        while (isdigit((unsigned char)*p))
            p++;
        fn = (size_t)(p - f0);
        if (fn == 0)
            return 0;
    }
    if (wn == 0 && fn == 0)
        return 0;
    switch (*p) {
    case 'k':
    case 'K':
        bits = 10;
        break;
    case 'm':
    case 'M':
        bits = 20;
        break;
    case 'g':
    case 'G':
        bits = 30;
        break;
    case 't':
    case 'T':
        bits = 40;
        break;
    case 'b':
    case 'B':
    case '\0':
        break;
    default:
        return 0;
    }
    if (bits) {
        p++;
        if (*p == 'i' || *p == 'I')
            p++;
        if (*p == 'b' || *p == 'B')
            p++;
    } else if (*p) {
        p++;
    }
    if (*p)
        return 0;
    for (size_t i = 0; i < fn; i++)
        frac_nonzero |= f0[i] != '0';
    if (bits == 0 && frac_nonzero)
        return 0;
    for (size_t i = 0; i < wn; i++) {
        whole = whole * 10 + (unsigned)(w0[i] - '0');
        if (whole > UINT64_MAX)
            return 0;
    }
    v = (whole << bits) + (fn ? fraction_by_doubling(f0, fn, bits) : 0);
    if (v > UINT64_MAX)
        return 0;
    *out = (uint64_t)v;
    return 1;
}

static void reparse(const char *text, uint64_t want, uint64_t slack)
{
    uint64_t v = 0;
    int r = gs_parse_size(text, &v);

    if (r == -ERANGE && want > UINT64_MAX - slack)
        return; /* rounded up past the largest size */
    FUZZ_CHECK(r == 0, "\"%s\" (written for %llu) is refused: %d", text, (unsigned long long)want,
               r);
    FUZZ_CHECK((v >= want ? v - want : want - v) <= slack, "\"%s\" is %llu, want %llu +- %llu",
               text, (unsigned long long)v, (unsigned long long)want, (unsigned long long)slack);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char units[] = "KMGT";
    char *s = fuzz_cstr(data, size), buf[64], *q;
    uint64_t v = 0, ref = 0;
    int r = gs_parse_size(s, &v), ok = reference(s, &ref);
    unsigned k;

    FUZZ_CHECK((r == 0) == ok, "\"%s\": gs_parse_size %d, reference %d", s, r, ok);
    FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE, "\"%s\": %d", s, r);
    if (r == 0) {
        FUZZ_CHECK(v == ref, "\"%s\": %llu, reference %llu", s, (unsigned long long)v,
                   (unsigned long long)ref);
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
        reparse(buf, v, 0);
        for (k = 0; k < 4; k++) {
            if (v % (1ULL << (10 * (k + 1))) == 0) {
                snprintf(buf, sizeof(buf), "%llu%c", (unsigned long long)(v >> (10 * (k + 1))),
                         units[k]);
                reparse(buf, v, 0);
            }
        }
        /* "4 GiB" or "2.00 GiB": without the space it is a size again. */
        gs_format_size(v, buf, sizeof(buf));
        if ((q = strchr(buf, ' ')) != NULL)
            memmove(q, q + 1, strlen(q));
        if (strchr(buf, '.') == NULL) {
            reparse(buf, v, 0);
        } else {
            const char *unit = buf + strspn(buf, "0123456789.");
            unsigned shift = *unit == 'K' ? 10 : *unit == 'M' ? 20 : *unit == 'G' ? 30 : 40;
            /*
             * Two decimals: off by at most half a hundredth of the unit, plus what the
             * double that printed it lost (53 bits of a 64-bit size: far under 2^-20 unit).
             */
            reparse(buf, v, (1ULL << shift) / 200 + (1ULL << shift >> 20));
        }
    }
    free(s);
    return 0;
}

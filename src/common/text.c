/* Decoding UTF-8 and escaping what a terminal or a JSON reader must not get as it is. */
#include "common/text.h"

#include <string.h>

size_t gs_utf8_len(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char lo = 0x80, hi = 0xbf;
    size_t len, i;
    uint32_t v;

    if (n == 0)
        return 0;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2;
        v = s[0] & 0x1fu;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        len = 3;
        v = s[0] & 0x0fu;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4;
        v = s[0] & 0x07u;
    } else {
        return 0;
    }
    if (s[0] == 0xe0)
        lo = 0xa0; /* overlong */
    else if (s[0] == 0xed)
        hi = 0x9f; /* surrogates */
    else if (s[0] == 0xf0)
        lo = 0x90; /* overlong */
    else if (s[0] == 0xf4)
        hi = 0x8f; /* beyond U+10FFFF */
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (i = 1; i < len; i++) {
        if (i > 1 && (s[i] < 0x80 || s[i] > 0xbf))
            return 0;
        v = v << 6 | (s[i] & 0x3fu);
    }
    *cp = v;
    return len;
}

int gs_text_is_control(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c ||
           (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
           (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
}

void gs_text_safe(char *out, size_t len, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, o = 0, k;
    uint32_t cp;

    if (len == 0)
        return;
    while (i < n) {
        char esc[8];
        const char *piece = esc;
        size_t plen;

        k = gs_utf8_len(s + i, n - i, &cp);
        if (k == 0) {
            plen = (size_t)snprintf(esc, sizeof(esc), "\\x%02x", s[i]);
            k = 1;
        } else if (gs_text_is_control(cp)) {
            plen =
                (size_t)snprintf(esc, sizeof(esc), cp < 0x80 ? "\\x%02x" : "\\u%04x", (unsigned)cp);
        } else if (cp == '\\') {
            piece = "\\\\";
            plen = 2;
        } else {
            piece = str + i;
            plen = k;
        }
        if (o + plen >= len)
            break;
        memcpy(out + o, piece, plen);
        o += plen;
        i += k;
    }
    out[o] = '\0';
}

/*
 * Writes a JSON string: escapes what JSON requires, and also the code points
 * that must not reach a terminal as they are (gs_text_is_control), since
 * JSON is often read on one; bytes that are not UTF-8 become U+FFFD.
 */
void gs_json_string(FILE *f, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, len;
    uint32_t cp;

    fputc('"', f);
    while (i < n) {
        if ((len = gs_utf8_len(s + i, n - i, &cp)) == 0) {
            fputs("\\ufffd", f);
            i++;
        } else if (cp == '"' || cp == '\\') {
            fprintf(f, "\\%c", (char)cp);
            i++;
        } else if (cp == '\n') {
            fputs("\\n", f);
            i++;
        } else if (cp == '\t') {
            fputs("\\t", f);
            i++;
        } else if (cp == '\r') {
            fputs("\\r", f);
            i++;
        } else if (gs_text_is_control(cp)) {
            fprintf(f, "\\u%04x", (unsigned)cp);
            i += len;
        } else {
            fwrite(s + i, 1, len, f);
            i += len;
        }
    }
    fputc('"', f);
}

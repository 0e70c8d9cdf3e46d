/*
 * Text that anyone may have chosen (tenant names, paths, driver strings), made
 * safe to show: UTF-8 decoding, the code points that must not reach a
 * terminal, and JSON strings.
 */
#ifndef GPUSLICE_COMMON_TEXT_H
#define GPUSLICE_COMMON_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Room gs_text_safe() needs for n bytes of input: 4 characters a byte at most. */
#define GS_TEXT_LEN(n) (4 * (n) + 1)

/*
 * The length of the UTF-8 sequence at s (n > 0 bytes left), with its code
 * point in *cp; 0 if s does not start one (overlong, surrogate, truncated...).
 */
size_t gs_utf8_len(const unsigned char *s, size_t n, uint32_t *cp);

/*
 * 1 for a code point that must not reach a terminal as it is: C0 controls,
 * DEL, C1 controls (U+0080..U+009F), and the invisible and bidirectional
 * controls (U+061C, U+200B..U+200F, U+2028..U+202E, U+2066..U+2069, U+FEFF)
 * with which a name could rewrite or hide what is printed around it.
 */
int gs_text_is_control(uint32_t cp);

/*
 * Writes s (n bytes, which anyone may have chosen) as text for a terminal
 * into out (len bytes, always terminated): printable ASCII and UTF-8 kept, a
 * backslash doubled, a control code point (gs_text_is_control) as \xNN
 * below U+0080 and \uNNNN above, a byte that is not UTF-8 as \xNN. Stops at
 * the last whole character that fits; GS_TEXT_LEN(n) always suffices.
 */
void gs_text_safe(char *out, size_t len, const char *s, size_t n);

/*
 * Writes s (n bytes) as a JSON string on f: escapes what JSON requires, and
 * the terminal's control and bidi characters (gs_text_is_control) as
 * \uNNNN, since JSON is often read on one; bytes that are not UTF-8 become
 * U+FFFD.
 */
void gs_json_string(FILE *f, const char *s, size_t n);

#endif /* GPUSLICE_COMMON_TEXT_H */

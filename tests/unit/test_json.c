/*
 * The CLI's JSON reader (src/control/json.c): every value it takes, to the byte, and every text
 * it refuses, with the message and the offset it names.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "control/json.h"

/* text parsed whole: the tree, which must be there. */
static struct gs_json *parse_ok(const char *text)
{
    char err[256] = "";
    struct gs_json *v = gs_json_parse(text, strlen(text), err, sizeof(err));

    if (v == NULL)
        fail_msg("\"%s\" refused: %s", text, err);
    return v;
}

/* One string's value as it is unescaped: its bytes up to its first NUL. */
static void string_is(const char *text, const char *want)
{
    struct gs_json *v = parse_ok(text);

    assert_int_equal(v->type, GS_JSON_STRING);
    if (strcmp(v->str, want) != 0) {
        size_t i;

        for (i = 0; v->str[i]; i++)
            print_message("%02x ", (unsigned char)v->str[i]);
        fail_msg("%s: not the bytes wanted", text);
    }
    gs_json_free(v);
}

static void test_strings_unescaped(void **state)
{
    static const char *const cases[][2] = {
        { "\"\"", "" },
        { "\"plain text\"", "plain text" },
        { "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\/\b\f\n\r\t" },
        { "\"a\\nb\"", "a\nb" },
        /* \u: each UTF-8 length at both ends of its range. */
        { "\"\\u0041\"", "A" },
        { "\"\\u0001\"", "\x01" },
        { "\"\\u007f\"", "\x7f" },
        { "\"\\u0080\"", "\xc2\x80" },
        { "\"\\u00e9\"", "\xc3\xa9" },
        { "\"\\u00E9\"", "\xc3\xa9" },
        { "\"\\u07ff\"", "\xdf\xbf" },
        { "\"\\u0800\"", "\xe0\xa0\x80" },
        { "\"\\uABCD\"", "\xea\xaf\x8d" },
        { "\"\\ud7ff\"", "\xed\x9f\xbf" },
        { "\"\\ue000\"", "\xee\x80\x80" },
        { "\"\\uffff\"", "\xef\xbf\xbf" },
        /* Surrogate pairs: the first and last of each half. */
        { "\"\\ud800\\udc00\"", "\xf0\x90\x80\x80" },
        { "\"\\ud800\\udfff\"", "\xf0\x90\x8f\xbf" },
        { "\"\\udbff\\udc00\"", "\xf4\x8f\xb0\x80" },
        { "\"\\udbff\\udfff\"", "\xf4\x8f\xbf\xbf" },
        { "\"\\uD83D\\uDE00\"", "\xf0\x9f\x98\x80" },
        /* A \u0000 ends the string there (json.h). */
        { "\"a\\u0000b\"", "a" },
        /* Raw UTF-8 of each length passes as it is; a space and DEL are not controls. */
        { "\"\xc3\xa9\"", "\xc3\xa9" },
        { "\"\xe2\x82\xac\"", "\xe2\x82\xac" },
        { "\"\xf0\x9f\x98\x80\"", "\xf0\x9f\x98\x80" },
        { "\" \x7f\"", " \x7f" },
        { "\"x\\u00e9y\\n\\u20acz\"", "x\xc3\xa9y\n\xe2\x82\xacz" },
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        string_is(cases[i][0], cases[i][1]);
}

static void number_is(const char *text, double want)
{
    struct gs_json *v = parse_ok(text);

    assert_int_equal(v->type, GS_JSON_NUMBER);
    if (!(v->num == want && signbit(v->num) == signbit(want)))
        fail_msg("%s read as %.17g, want %.17g", text, v->num, want);
    gs_json_free(v);
}

static void test_numbers(void **state)
{
    char big[128];

    (void)state;
    number_is("0", 0);
    number_is("-0", -0.0);
    number_is("7", 7);
    number_is("-12", -12);
    number_is("1234567890123", 1234567890123.0);
    number_is("0.5", 0.5);
    number_is("-12.25", -12.25);
    number_is("1e3", 1000);
    number_is("1E3", 1000);
    number_is("1e+3", 1000);
    number_is("25e-2", 0.25);
    number_is("2.5E-1", 0.25);
    number_is("0e0", 0);
    number_is("  42  ", 42);
    /* 63 digits and 64 (past the reader's buffer of 64 bytes): both read in full. */
    memset(big, '0', sizeof(big));
    big[0] = '1';
    big[63] = '\0';
    number_is(big, 1e62);
    big[63] = '0';
    big[64] = '\0';
    number_is(big, 1e63);
    big[64] = '0';
    big[71] = '\0';
    number_is(big, 1e70);
    memcpy(big, "-1.5", 4);
    memset(big + 4, '0', 80);
    memcpy(big + 84, "e-2", 4);
    number_is(big, -0.015);
}

static void test_literals(void **state)
{
    static const struct {
        const char *text;
        enum gs_json_type type;
    } cases[] = { { "true", GS_JSON_TRUE }, { "false", GS_JSON_FALSE },
                  { "null", GS_JSON_NULL }, { "\t\r\n true \n", GS_JSON_TRUE },
                  { "[]", GS_JSON_ARRAY },  { "{}", GS_JSON_OBJECT } };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gs_json *v = parse_ok(cases[i].text);

        assert_int_equal(v->type, cases[i].type);
        assert_int_equal(v->n, 0);
        assert_null(v->child);
        assert_null(v->str);
        assert_null(v->key);
        gs_json_free(v);
    }
}

static void test_objects_and_arrays(void **state)
{
    struct gs_json *v;
    const struct gs_json *e, *inner;

    (void)state;
    v = parse_ok(
        " { \"a\" : 1 ,\"b\":\"two\",\t\"c\":[true, null, 3.5, [], {}],\n\"d\":{\"e\":false},"
        "\"\\u0061b\":5, \"a\":9 } ");
    assert_int_equal(v->type, GS_JSON_OBJECT);
    assert_int_equal(v->n, 6);
    /* Members in order, each with its key. */
    e = v->child;
    assert_string_equal(e->key, "a");
    e = e->next;
    assert_string_equal(e->key, "b");
    e = e->next;
    assert_string_equal(e->key, "c");
    e = e->next;
    assert_string_equal(e->key, "d");
    e = e->next;
    assert_string_equal(e->key, "ab");
    e = e->next;
    assert_string_equal(e->key, "a");
    assert_null(e->next);
    /* A repeated name: the first. */
    assert_true(gs_json_num(gs_json_get(v, "a"), -1) == 1);
    assert_true(gs_json_num(gs_json_get(v, "ab"), -1) == 5);
    assert_string_equal(gs_json_str(gs_json_get(v, "b"), NULL), "two");
    e = gs_json_get(v, "c");
    assert_non_null(e);
    assert_int_equal(e->type, GS_JSON_ARRAY);
    assert_int_equal(e->n, 5);
    inner = e->child;
    assert_int_equal(inner->type, GS_JSON_TRUE);
    assert_null(inner->key);
    assert_int_equal(inner->next->type, GS_JSON_NULL);
    assert_true(inner->next->next->num == 3.5);
    assert_int_equal(inner->next->next->next->type, GS_JSON_ARRAY);
    assert_int_equal(inner->next->next->next->n, 0);
    assert_int_equal(inner->next->next->next->next->type, GS_JSON_OBJECT);
    assert_null(inner->next->next->next->next->next);
    inner = gs_json_get(gs_json_get(v, "d"), "e");
    assert_non_null(inner);
    assert_int_equal(inner->type, GS_JSON_FALSE);
    /* What is not there, or not an object, has no members. */
    assert_null(gs_json_get(v, "z"));
    assert_null(gs_json_get(v, "A"));
    assert_null(gs_json_get(v, ""));
    assert_null(gs_json_get(gs_json_get(v, "c"), "a"));
    assert_null(gs_json_get(gs_json_get(v, "b"), "b"));
    assert_null(gs_json_get(NULL, "a"));
    /* The typed readers give the default for another type or nothing. */
    assert_true(gs_json_num(gs_json_get(v, "b"), -7) == -7);
    assert_true(gs_json_num(gs_json_get(v, "c"), -7) == -7);
    assert_true(gs_json_num(NULL, 3.5) == 3.5);
    assert_string_equal(gs_json_str(gs_json_get(v, "a"), "dflt"), "dflt");
    assert_string_equal(gs_json_str(gs_json_get(gs_json_get(v, "d"), "e"), "dflt"), "dflt");
    assert_string_equal(gs_json_str(NULL, "dflt"), "dflt");
    assert_null(gs_json_str(NULL, NULL));
    gs_json_free(v);

    v = parse_ok("[1,2,3]");
    assert_int_equal(v->n, 3);
    assert_true(v->child->num == 1 && v->child->next->num == 2 && v->child->next->next->num == 3);
    assert_null(v->child->next->next->next);
    gs_json_free(v);
    gs_json_free(NULL);
}

/* text (len bytes) refused with exactly the message want. */
static void refused_n(const char *text, size_t len, const char *want)
{
    char err[256] = "unset";
    struct gs_json *v = gs_json_parse(text, len, err, sizeof(err));

    if (v != NULL) {
        gs_json_free(v);
        fail_msg("\"%.*s\" was taken; want \"%s\"", (int)len, text, want);
    }
    if (strcmp(err, want) != 0)
        fail_msg("\"%.*s\": \"%s\", want \"%s\"", (int)len, text, err, want);
}

static void refused(const char *text, const char *want)
{
    refused_n(text, strlen(text), want);
}

static void test_refused_with_the_offset(void **state)
{
    static const char *const cases[][2] = {
        { "", "a value expected at byte 0" },
        { " \t\r\n", "a value expected at byte 4" },
        /* One value, then only blanks. */
        { "{} x", "text after the value at byte 3" },
        { "{}{}", "text after the value at byte 2" },
        { "[1] [2]", "text after the value at byte 4" },
        { "1 2", "text after the value at byte 2" },
        { "\"a\"\"b\"", "text after the value at byte 3" },
        { "nulls", "text after the value at byte 4" },
        { "1\v", "text after the value at byte 1" },
        { "1\f", "text after the value at byte 1" },
        /* Numbers as the grammar has them. */
        { "01", "text after the value at byte 1" },
        { "-01", "text after the value at byte 2" },
        { "00.5", "text after the value at byte 1" },
        { "-", "a bad number at byte 0" },
        { "+1", "a bad number at byte 0" },
        { ".5", "a bad number at byte 0" },
        { "1.", "a bad number at byte 0" },
        { "1.e3", "a bad number at byte 0" },
        { "1e", "a bad number at byte 0" },
        { "1e+", "a bad number at byte 0" },
        { "1E-", "a bad number at byte 0" },
        { "-a", "a bad number at byte 0" },
        { "\f1", "a bad number at byte 0" },
        { "[ 1, -]", "a bad number at byte 5" },
        /* Literals whole, in lower case. */
        { "tru", "an unexpected character at byte 0" },
        { "True", "a bad number at byte 0" },
        { "trUe", "an unexpected character at byte 0" },
        { "nul", "an unexpected character at byte 0" },
        { "fals", "an unexpected character at byte 0" },
        { "falsy", "an unexpected character at byte 0" },
        { "[true, nul]", "an unexpected character at byte 7" },
        /* Arrays and objects. */
        { "[", "a value expected at byte 1" },
        { "[1", "',' or ']' expected at byte 2" },
        { "[1,]", "a bad number at byte 3" },
        { "[1 2]", "',' or ']' expected at byte 3" },
        { "[1}", "',' or ']' expected at byte 2" },
        { "[,1]", "a bad number at byte 1" },
        { "{", "a member name expected at byte 1" },
        { "{1:2}", "a member name expected at byte 1" },
        { "{\"a\":1,}", "a member name expected at byte 7" },
        { "{\"a\" 1}", "':' expected at byte 5" },
        { "{\"a\"", "':' expected at byte 4" },
        { "{\"a\":}", "a bad number at byte 5" },
        { "{\"a\":", "a value expected at byte 5" },
        { "{\"a\":1 \"b\":2}", "',' or '}' expected at byte 7" },
        { "{\"a\":1]", "',' or '}' expected at byte 6" },
        { "{\"a\":1", "',' or '}' expected at byte 6" },
        /* Strings. */
        { "\"abc", "an unterminated string at byte 4" },
        { "\"a\\", "an unterminated string at byte 3" },
        { "{\"ab", "an unterminated string at byte 4" },
        { "\"\\x\"", "a bad escape at byte 3" },
        { "\"\\U0041\"", "a bad escape at byte 3" },
        { "\"\\'\"", "a bad escape at byte 3" },
        { "\"\\u12\"", "a short \\u escape at byte 3" },
        { "\"\\u004", "a short \\u escape at byte 3" },
        { "\"\\u12G4\"", "a bad \\u escape at byte 6" },
        { "\"\\u-123\"", "a bad \\u escape at byte 4" },
        { "\"\\ug000\"", "a bad \\u escape at byte 4" },
        { "\"\\u00/0\"", "a bad \\u escape at byte 6" },
        { "\"\\u00:0\"", "a bad \\u escape at byte 6" },
        { "\"\\u00@0\"", "a bad \\u escape at byte 6" },
        { "\"\\u00`0\"", "a bad \\u escape at byte 6" },
        { "\"\\ud800\"", "a lone surrogate at byte 7" },
        { "\"\\ud800x\"", "a lone surrogate at byte 7" },
        { "\"\\ud800\\n\"", "a lone surrogate at byte 7" },
        { "\"\\udbff\\u0041\"", "a lone surrogate at byte 13" },
        { "\"\\ud800\\udbff\"", "a lone surrogate at byte 13" },
        { "\"\\ud800\\ue000\"", "a lone surrogate at byte 13" },
        { "\"\\ud800\\u00zz\"", "a bad \\u escape at byte 12" },
        { "\"\\udc00\"", "a lone surrogate at byte 7" },
        { "\"\\udfff\"", "a lone surrogate at byte 7" },
        { "\"a\x01z\"", "a control character in a string at byte 3" },
        { "\"\x1f\"", "a control character in a string at byte 2" },
        { "\"a\nb\"", "a control character in a string at byte 3" },
        { "\"a\tb\"", "a control character in a string at byte 3" },
        { "\"a\xff\"", "a byte that is not UTF-8 in a string at byte 2" },
        { "\"ab\x80\"", "a byte that is not UTF-8 in a string at byte 3" },
        { "\"\xc3\"", "a byte that is not UTF-8 in a string at byte 1" },
        { "\"\xc3(\"", "a byte that is not UTF-8 in a string at byte 1" },
        { "\"\xc0\xa0\"", "a byte that is not UTF-8 in a string at byte 1" },
        { "\"\xed\xa0\x80\"", "a byte that is not UTF-8 in a string at byte 1" },
        { "\"\xf4\x90\x80\x80\"", "a byte that is not UTF-8 in a string at byte 1" },
        { "{\"k\xfe\":1}", "a byte that is not UTF-8 in a string at byte 3" },
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        refused(cases[i][0], cases[i][1]);
}

/* 64 levels are read; the 65th is refused where it opens, arrays and objects alike. */
static void test_depth(void **state)
{
    char text[512];
    struct gs_json *v;
    int i, n = 0;

    (void)state;
    for (i = 0; i < 64; i++)
        text[n++] = '[';
    for (i = 0; i < 64; i++)
        text[n++] = ']';
    text[n] = '\0';
    v = parse_ok(text);
    gs_json_free(v);
    n = 0;
    for (i = 0; i < 65; i++)
        text[n++] = '[';
    for (i = 0; i < 65; i++)
        text[n++] = ']';
    text[n] = '\0';
    refused(text, "nested too deep at byte 64");
    /* Objects count too: 32 of each, alternating, is 64. */
    n = 0;
    for (i = 0; i < 32; i++)
        n += sprintf(text + n, "{\"k\":[");
    n += sprintf(text + n, "1");
    for (i = 0; i < 32; i++)
        n += sprintf(text + n, "]}");
    v = parse_ok(text);
    gs_json_free(v);
    n = 0;
    for (i = 0; i < 32; i++)
        n += sprintf(text + n, "{\"k\":[");
    n += sprintf(text + n, "{}");
    for (i = 0; i < 32; i++)
        n += sprintf(text + n, "]}");
    refused(text, "nested too deep at byte 192");
    /* Siblings do not add up: 64 levels then 64 again beside them. */
    n = 0;
    text[n++] = '[';
    for (int k = 0; k < 2; k++) {
        for (i = 0; i < 63; i++)
            text[n++] = '[';
        for (i = 0; i < 63; i++)
            text[n++] = ']';
        if (k == 0)
            text[n++] = ',';
    }
    text[n++] = ']';
    text[n] = '\0';
    v = parse_ok(text);
    assert_int_equal(v->n, 2);
    gs_json_free(v);
}

/* Only len bytes are read: the text need not end with a NUL, and what follows is not looked at. */
static void test_length_is_the_end(void **state)
{
    char err[64] = "";
    struct gs_json *v;

    (void)state;
    v = gs_json_parse("[1]garbage", 3, err, sizeof(err));
    assert_non_null(v);
    assert_int_equal(v->n, 1);
    gs_json_free(v);
    v = gs_json_parse("truex", 4, err, sizeof(err));
    assert_non_null(v);
    assert_int_equal(v->type, GS_JSON_TRUE);
    gs_json_free(v);
    v = gs_json_parse("\"ab\"cd", 4, err, sizeof(err));
    assert_non_null(v);
    assert_string_equal(v->str, "ab");
    gs_json_free(v);
    v = gs_json_parse("12345", 2, err, sizeof(err));
    assert_non_null(v);
    assert_true(v->num == 12);
    gs_json_free(v);
    refused_n("{\"a\":1}", 6, "',' or '}' expected at byte 6");
    refused_n("\"abc\"", 4, "an unterminated string at byte 4");
    refused_n("true", 3, "an unexpected character at byte 0");
    refused_n("\"\\u0041\"", 6, "a short \\u escape at byte 3");
    refused_n("\"\xc3\xa9\"", 2, "a byte that is not UTF-8 in a string at byte 1");
    refused_n("[1]", 0, "a value expected at byte 0");
    /* No room for a message, or none asked for: still refused, and nothing written. */
    assert_null(gs_json_parse("{x", 2, NULL, 0));
    strcpy(err, "kept");
    assert_null(gs_json_parse("{x", 2, err, 0));
    assert_string_equal(err, "kept");
    assert_null(gs_json_parse("[1] x", 5, err, 8));
    assert_string_equal(err, "text af");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strings_unescaped),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_literals),
        cmocka_unit_test(test_objects_and_arrays),
        cmocka_unit_test(test_refused_with_the_offset),
        cmocka_unit_test(test_depth),
        cmocka_unit_test(test_length_is_the_end),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

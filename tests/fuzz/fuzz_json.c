/*
 * The CLI's JSON reader (src/control/json.c) against jansson: where jansson reads a text,
 * ours must read it too, with the same kind of value at the top and the same number of
 * elements; where ours reads one jansson refuses, jansson's reason must be one ours does not
 * share (a number too large for a double, nesting deeper than its limit). Nothing else may
 * differ.
 */
#include <jansson.h>
#include <string.h>

#include "control/json.h"
#include "fuzz.h"

static enum gs_json_type type_of(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return GS_JSON_OBJECT;
    case JSON_ARRAY:
        return GS_JSON_ARRAY;
    case JSON_STRING:
        return GS_JSON_STRING;
    case JSON_INTEGER:
    case JSON_REAL:
        return GS_JSON_NUMBER;
    case JSON_TRUE:
        return GS_JSON_TRUE;
    case JSON_FALSE:
        return GS_JSON_FALSE;
    default:
        return GS_JSON_NULL;
    }
}

static size_t count(const json_t *v)
{
    return json_is_object(v) ? json_object_size(v) : json_is_array(v) ? json_array_size(v) : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* jansson ends a buffer at its first NUL byte: both read the text up to it. */
    size = strnlen((const char *)data, size);
    char err[256];
    json_error_t je;
    struct gs_json *ours = gs_json_parse((const char *)data, size, err, sizeof(err));
    json_t *theirs = json_loadb((const char *)data, size,
                                JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &je);

    if (theirs) {
        FUZZ_CHECK(ours != NULL, "jansson reads it, ours does not: %s", err);
        FUZZ_CHECK(ours->type == type_of(theirs), "a %d at the top, jansson's a %d", ours->type,
                   (int)json_typeof(theirs));
        /* Duplicate members: jansson keeps the last, ours keeps them all. */
        FUZZ_CHECK(ours->n >= count(theirs), "%zu elements, jansson's %zu", ours->n, count(theirs));
    } else if (ours) {
        FUZZ_CHECK(strstr(je.text, "overflow") || strstr(je.text, "NUL") ||
                       strstr(je.text, "too big") || strstr(je.text, "nesting") ||
                       strstr(je.text, "maximum"),
                   "ours reads what jansson refuses: %s", je.text);
    }
    gs_json_free(ours);
    json_decref(theirs);
    return 0;
}

/*
 * A small JSON reader for the CLI, which reads the daemon's answers (the
 * daemon itself uses jansson; the CLI links no JSON library). It parses a
 * whole text (RFC 8259; at most 64 levels deep) into a tree the caller frees
 * with gs_json_free(). Strings are unescaped to UTF-8; a \u0000 ends a
 * string there.
 */
#ifndef GPUSLICE_CONTROL_JSON_H
#define GPUSLICE_CONTROL_JSON_H

#include <stddef.h>

enum gs_json_type {
    GS_JSON_NULL,
    GS_JSON_FALSE,
    GS_JSON_TRUE,
    GS_JSON_NUMBER,
    GS_JSON_STRING,
    GS_JSON_ARRAY,
    GS_JSON_OBJECT
};

struct gs_json {
    enum gs_json_type type;
    double num;
    char *str;                    /* a string's value */
    char *key;                    /* the member's name, in an object */
    struct gs_json *child, *next; /* an array's or object's first element; the next sibling */
    size_t n;                     /* an array's or object's element count */
};

/* Parses text (len bytes); NULL with a message in err (naming the offset) when it is not JSON. */
struct gs_json *gs_json_parse(const char *text, size_t len, char *err, size_t errlen);

void gs_json_free(struct gs_json *v);

/* The member key of object v, or NULL (v NULL or not an object: NULL). */
const struct gs_json *gs_json_get(const struct gs_json *v, const char *key);

/* v's number, or dflt when v is NULL or not a number. */
double gs_json_num(const struct gs_json *v, double dflt);

/* v's string, or dflt when v is NULL or not a string. */
const char *gs_json_str(const struct gs_json *v, const char *dflt);

#endif

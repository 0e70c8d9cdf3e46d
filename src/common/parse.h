/*
 * Parsers for what people write in options and environment variables: sizes,
 * per-device limit lists, the vgpu.rs JSON form and HAMi-core's variables.
 * Every parser returns 0 or a negative errno and, on failure, writes a
 * message for a person into err (naming the input and the accepted forms).
 * Nothing here allocates.
 */
#ifndef GPUSLICE_PARSE_H
#define GPUSLICE_PARSE_H

#include <stddef.h>
#include <stdint.h>

#define GS_UUID_STRLEN 41 /* "GPU-" + 36 + NUL */
#define GS_MAX_LIMIT_ENTRIES 32
/* The largest device index a key may name (three digits). */
#define GS_MAX_DEVICE_INDEX 999
/*
 * The smallest memory limit accepted from any source: below it no CUDA
 * context fits, and such a value is almost always a size given without its
 * unit ("--memory 100" meaning 100M).
 */
#define GS_MIN_MEMORY_LIMIT (1ULL << 20)

/*
 * Parses "8G", "512M", "1.5g", "1073741824", "4GiB", "4Gi" (binary units; a
 * fraction is exact, truncated to whole bytes). 0, -EINVAL (not a size) or
 * -ERANGE (above 2^64 - 1 bytes). Any size, 0 included, is returned.
 */
int gs_parse_size(const char *s, uint64_t *out);

/* Message fragment listing accepted size forms. */
#define GS_SIZE_FORMS "use e.g. 8G, 512M, 1.5G or 1073741824"

enum gs_limit_key {
    GS_KEY_ALL = 0,   /* applies to every device without its own entry */
    GS_KEY_INDEX = 1, /* a CUDA device ordinal as the process sees it */
    GS_KEY_UUID = 2   /* a GPU UUID, compared case-insensitively */
};

struct gs_limit_entry {
    enum gs_limit_key key;
    int index;
    char uuid[GS_UUID_STRLEN]; /* lower-case "gpu-…" form */
    uint64_t value;
};

struct gs_limits {
    int n;
    struct gs_limit_entry e[GS_MAX_LIMIT_ENTRIES];
    const char *source; /* the variable or flag the entries came from */
};

enum gs_value_kind { GS_VALUE_SIZE, GS_VALUE_PERCENT, GS_VALUE_SMS };

/*
 * A GS_VALUE_SMS value is an SM partition, "COUNT" or "COUNT@FIRST": COUNT SMs
 * (1..4096) from the FIRST-th (0..4095) in the order the driver splits them,
 * stored as COUNT | FIRST << 32, with "/fine" after it (GS_SMS_FINE) made of
 * the split that ignores co-scheduling only; or "PERCENT%" (1..100), a share
 * of the device's SMs from the first, stored as PERCENT | GS_SMS_SHARE.
 */
#define GS_SMS_SHARE (1ULL << 63)
#define GS_SMS_FINE (1ULL << 62)
#define GS_SMS_COUNT(v) ((unsigned)((v)&0xffffffffu))
#define GS_SMS_FIRST(v) ((unsigned)(((v) & ~(GS_SMS_SHARE | GS_SMS_FINE)) >> 32))
#define GS_SMS_MAX 4096

/*
 * Parses a per-device list: "8G" (all devices), "0:8G,1:4G",
 * "GPU-…:8G", or a default plus overrides ("8G,1:4G"). With GS_VALUE_SIZE
 * values are sizes of at least GS_MIN_MEMORY_LIMIT; with GS_VALUE_PERCENT
 * integers 1..100; with GS_VALUE_SMS partitions as above. Keys are indexes
 * 0..GS_MAX_DEVICE_INDEX or UUIDs. `what` names the flag or variable in
 * messages.
 */
int gs_parse_limit_list(const char *s, enum gs_value_kind kind, const char *what,
                        struct gs_limits *out, char *err, size_t errlen);

/*
 * Parses vgpu.rs's JSON object form ({"0": 1073741824, "GPU-…": 2147483648}):
 * keys are device indexes or UUIDs, values JSON integers: bytes (at least
 * GS_MIN_MEMORY_LIMIT) for GS_VALUE_SIZE, 1..100 for GS_VALUE_PERCENT.
 */
int gs_parse_limit_json(const char *s, enum gs_value_kind kind, const char *what,
                        struct gs_limits *out, char *err, size_t errlen);

/*
 * Parses a share, an integer percentage 1..100 written in decimal digits
 * only (--gpu-share, --sm-share): 0 or -EINVAL.
 */
int gs_parse_share(const char *s, int *out);

/*
 * Parses a priority class, "latency", "normal" or "background" (any case),
 * into GPUSLICE_PRIORITY_* (tenant_abi.h): 0 or -EINVAL.
 */
int gs_parse_priority(const char *s, uint32_t *out);

/* The name of a priority class; "normal" for GPUSLICE_PRIORITY_UNSET, NULL if unknown. */
const char *gs_priority_name(uint32_t p);

/* Parses a weight, an integer 1..GPUSLICE_WEIGHT_MAX in decimal digits only: 0 or -EINVAL. */
int gs_parse_weight(const char *s, uint32_t *out);

/* GPUSLICE_YIELD_SMS: a count of SMs from 2 to GS_YIELD_SMS_MAX, digits only; 0 or -EINVAL. */
#define GS_YIELD_SMS_MAX 1024
int gs_parse_yield_sms(const char *s, uint32_t *out);

/*
 * Parses a Kubernetes quantity of bytes ("4Gi", "512Mi", "4G" = 4 x 10^9, "1.5Gi", "1073741824";
 * suffixes k M G T P E decimal, Ki Mi Gi Ti Pi Ei binary): whole bytes, a fraction truncated.
 * 0, -EINVAL (not a quantity of bytes) or -ERANGE (above 2^64 - 1).
 */
int gs_parse_quantity(const char *s, uint64_t *out);
#define GS_QUANTITY_FORMS "a Kubernetes quantity, e.g. 4Gi, 512Mi, 4G or 1073741824"

/* Returns 1 and fills out (lower-case) if s is a GPU UUID string. */
int gs_parse_uuid(const char *s, size_t len, char out[GS_UUID_STRLEN]);

/* Formats 16 raw UUID bytes as "gpu-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx". */
void gs_format_uuid(const unsigned char bytes[16], char out[GS_UUID_STRLEN]);

/*
 * The value for device (index, uuid) or 0 when none applies. A UUID entry
 * wins over an index entry, which wins over the default.
 */
uint64_t gs_limits_lookup(const struct gs_limits *l, int index, const char *uuid);

/* Formats a size for people: "4 GiB", "512 MiB", "1234 B". */
void gs_format_size(uint64_t bytes, char *buf, size_t len);

#endif

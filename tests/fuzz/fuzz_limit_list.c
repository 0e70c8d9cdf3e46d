/*
 * gs_parse_limit_list, for each kind of value (the first byte picks sizes,
 * percentages or --sms partitions): every accepted entry in range, no device
 * twice, the entries written back parse to the same, lookups agree with the
 * entries, and a refusal is a message naming the option.
 */
#include <errno.h>

#include "limits_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const what[] = { "--memory", "--compute", "--sms" };
    struct gs_limits l, again;
    enum gs_value_kind kind;
    char *s, err[256], buf[8192];
    int r, i;

    if (size < 1)
        return 0;
    kind = data[0] % 3 == 0 ? GS_VALUE_SIZE : data[0] % 3 == 1 ? GS_VALUE_PERCENT : GS_VALUE_SMS;
    s = fuzz_cstr(data + 1, size - 1);
    err[0] = '\0';
    r = gs_parse_limit_list(s, kind, what[kind], &l, err, sizeof(err));
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL || r == -E2BIG, "\"%s\": %d", s, r);
        FUZZ_CHECK(fuzz_message_ok(err, what[kind]), "\"%s\": message \"%s\"", s, err);
    } else {
        FUZZ_CHECK(r == 0 && l.n >= 1, "\"%s\": %d with %d entries", s, r, l.n);
        FUZZ_CHECK(l.source == what[kind], "source %s", l.source);
        check_entries(&l, kind, 0, s);
        write_list(&l, kind, buf, sizeof(buf));
        r = gs_parse_limit_list(buf, kind, what[kind], &again, err, sizeof(err));
        FUZZ_CHECK(r == 0, "\"%s\" written back as \"%s\" is refused: %s", s, buf, err);
        check_same(&l, &again, s, buf);
        for (i = 0; i < l.n; i++) {
            const struct gs_limit_entry *e = &l.e[i];
            if (e->key == GS_KEY_INDEX)
                FUZZ_CHECK(gs_limits_lookup(&l, e->index, NULL) == e->value, "lookup of %d",
                           e->index);
            if (e->key == GS_KEY_UUID)
                FUZZ_CHECK(gs_limits_lookup(&l, -1, e->uuid) == e->value, "lookup of %s", e->uuid);
        }
    }
    free(s);
    return 0;
}

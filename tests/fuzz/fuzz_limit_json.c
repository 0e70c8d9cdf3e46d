/*
 * gs_parse_limit_json (vgpu.rs's TENSOR_FUSION_CUDA_MEM_LIMIT and _UP_LIMIT;
 * the first byte picks bytes or percentages): every accepted entry in range
 * and keyed by a device, and the same entries written back as JSON, and in
 * the list form, parse to the same.
 */
#include <errno.h>

#include "limits_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const what[] = { "TENSOR_FUSION_CUDA_MEM_LIMIT",
                                        "TENSOR_FUSION_CUDA_UP_LIMIT" };
    struct gs_limits l, again;
    enum gs_value_kind kind;
    char *s, err[512], buf[8192];
    size_t n;
    int r, i;

    if (size < 1)
        return 0;
    kind = data[0] % 2 ? GS_VALUE_PERCENT : GS_VALUE_SIZE;
    s = fuzz_cstr(data + 1, size - 1);
    err[0] = '\0';
    r = gs_parse_limit_json(s, kind, what[kind == GS_VALUE_PERCENT], &l, err, sizeof(err));
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL || r == -E2BIG, "\"%s\": %d", s, r);
        FUZZ_CHECK(fuzz_message_ok(err, what[kind == GS_VALUE_PERCENT]), "\"%s\": message \"%s\"",
                   s, err);
        free(s);
        return 0;
    }
    check_entries(&l, kind, 0, s);
    n = (size_t)snprintf(buf, sizeof(buf), " {");
    for (i = 0; i < l.n; i++) {
        const struct gs_limit_entry *e = &l.e[i];
        FUZZ_CHECK(e->key != GS_KEY_ALL, "entry %d of \"%s\" is for every device", i, s);
        if (e->key == GS_KEY_INDEX)
            n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s\"%d\" :%llu", i ? ",\n" : "",
                                  e->index, (unsigned long long)e->value);
        else
            n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s\"%s\":\t%llu", i ? ", " : "",
                                  e->uuid, (unsigned long long)e->value);
    }
    snprintf(buf + n, sizeof(buf) - n, "}\r\n");
    r = gs_parse_limit_json(buf, kind, "again", &again, err, sizeof(err));
    FUZZ_CHECK(r == 0, "\"%s\" written back as %s is refused: %s", s, buf, err);
    check_same(&l, &again, s, buf);
    if (l.n > 0) {
        write_list(&l, kind, buf, sizeof(buf));
        r = gs_parse_limit_list(buf, kind, "again", &again, err, sizeof(err));
        FUZZ_CHECK(r == 0, "\"%s\" as the list \"%s\" is refused: %s", s, buf, err);
        check_same(&l, &again, s, buf);
    }
    free(s);
    return 0;
}

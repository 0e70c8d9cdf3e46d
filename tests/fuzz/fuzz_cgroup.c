/*
 * gd_cgroup_pod (the daemon's cgroup.c) on any /proc/PID/cgroup text. Checked:
 * no read outside the input; a pod found has a UUID-shaped, lower-case UID and
 * a container ID of hexadecimal digits only; the answer does not depend on a
 * NUL after the input.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/cgroup.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char uid[GD_POD_UID_LEN], cid[GD_CONTAINER_ID_LEN], *copy;
    int r, i;

    if ((copy = malloc(size ? size : 1)) == NULL)
        return 0;
    memcpy(copy, data, size);
    r = gd_cgroup_pod(copy, size, uid, cid);
    FUZZ_CHECK(r >= -1 && r <= 1, "%d", r);
    if (r == 1) {
        FUZZ_CHECK(strlen(uid) == 36, "uid %s", uid);
        for (i = 0; i < 36; i++)
            FUZZ_CHECK((i == 8 || i == 13 || i == 18 || i == 23)
                           ? uid[i] == '-'
                           : ((uid[i] >= '0' && uid[i] <= '9') || (uid[i] >= 'a' && uid[i] <= 'f')),
                       "uid %s", uid);
        FUZZ_CHECK(strspn(cid, "0123456789abcdef") == strlen(cid) && strlen(cid) <= 64, "cid %s",
                   cid);
    }
    free(copy);
    return 0;
}

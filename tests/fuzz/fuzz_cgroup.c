/*
 * gd_cgroup_pod and gd_cgroup_pod_in (the daemon's cgroup.c) on any
 * /proc/PID/cgroup text, read from the host's cgroup namespace and from one
 * rooted deep in a pod's container (v2, and v1's memory and name=systemd):
 * checked that nothing is read outside the input; a pod found has a
 * UUID-shaped, lower-case UID and a container ID of hexadecimal digits only;
 * an answer that is no pod leaves both empty.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/cgroup.h"
#include "fuzz.h"

static void check(int r, const char *uid, const char *cid)
{
    int i;

    FUZZ_CHECK(r >= GD_CGROUP_UNPLACED && r <= 1, "%d", r);
    if (r != 1) {
        FUZZ_CHECK(uid[0] == '\0' && (r == 0 || cid[0] == '\0'), "answer %d with uid %s", r, uid);
        return;
    }
    FUZZ_CHECK(strlen(uid) == 36, "uid %s", uid);
    for (i = 0; i < 36; i++)
        FUZZ_CHECK((i == 8 || i == 13 || i == 18 || i == 23)
                       ? uid[i] == '-'
                       : ((uid[i] >= '0' && uid[i] <= '9') || (uid[i] >= 'a' && uid[i] <= 'f')),
                   "uid %s", uid);
    FUZZ_CHECK(strspn(cid, "0123456789abcdef") == strlen(cid) && strlen(cid) <= 64, "cid %s", cid);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct gd_cgroup_ns ns;
    char uid[GD_POD_UID_LEN], cid[GD_CONTAINER_ID_LEN], *copy;

    if (ns.n == 0) {
        ns.n = 3;
        snprintf(ns.h[0].root, sizeof(ns.h[0].root),
                 "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b5e9d2a_1f2c_"
                 "4a8e_9e59_3c0d1d2f5a61.slice/cri-containerd-4e3a1b2c.scope");
        ns.h[1].id = 4;
        snprintf(ns.h[1].ctrl, sizeof(ns.h[1].ctrl), "memory");
        snprintf(ns.h[1].root, sizeof(ns.h[1].root), "/kubepods/besteffort/podx/y");
        ns.h[2].id = 1;
        snprintf(ns.h[2].ctrl, sizeof(ns.h[2].ctrl), "name=systemd");
    }
    if ((copy = malloc(size ? size : 1)) == NULL)
        return 0;
    memcpy(copy, data, size);
    check(gd_cgroup_pod(copy, size, uid, cid), uid, cid);
    check(gd_cgroup_pod_in(&ns, copy, size, uid, cid), uid, cid);
    (void)gd_cgroup_inside(copy, size);
    (void)gd_cgroup_at_roots(&ns, copy, size);
    free(copy);
    return 0;
}

/*
 * Which pod and container a process runs in, from its /proc/PID/cgroup as the
 * daemon (in the host's cgroup namespace) reads it. The kubelet names a pod's
 * cgroup after the pod's UID and a container's after its ID, with either of
 * its cgroup drivers:
 *
 *   cgroupfs: /kubepods/burstable/pod<uid>/<container id>
 *   systemd:  /kubepods.slice/kubepods-burstable.slice/
 *             kubepods-burstable-pod<uid, '-' as '_'>.slice/cri-containerd-<id>.scope
 *
 * (docker-<id>.scope and crio-<id>.scope as well). A process cannot move
 * itself into another pod's cgroup without write access to the cgroup tree,
 * which a pod's containers do not have: this, not its environment, says
 * which pod it belongs to.
 */
#include <string.h>

#include "daemon/cgroup.h"

static int hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* A pod UID at s (36 characters, '-' or '_' where a UUID has '-'), into uid; 1 or 0. */
static int take_uid(const char *s, size_t n, char uid[GD_POD_UID_LEN])
{
    int i;

    if (n < 36)
        return 0;
    for (i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-' && s[i] != '_')
                return 0;
            uid[i] = '-';
        } else if (hex(s[i])) {
            uid[i] = s[i];
        } else {
            return 0;
        }
    }
    uid[36] = '\0';
    return 1;
}

/*
 * A path component naming a pod: "pod<uid>" (cgroupfs) or "…-pod<uid>.slice" (systemd), and
 * nothing after the UID but ".slice".
 */
static int pod_component(const char *c, size_t n, char uid[GD_POD_UID_LEN])
{
    size_t i;

    if (n > 6 && memcmp(c + n - 6, ".slice", 6) == 0)
        n -= 6;
    for (i = 0; i + 3 + 36 <= n; i++) {
        if ((i == 0 || c[i - 1] == '-') && memcmp(c + i, "pod", 3) == 0 && i + 3 + 36 == n)
            return take_uid(c + i + 3, 36, uid);
    }
    return 0;
}

/* A container's component: "<id>", "cri-containerd-<id>.scope", "docker-…", "crio-…". */
static int container_component(const char *c, size_t n, char cid[GD_CONTAINER_ID_LEN])
{
    static const char *const prefix[] = { "cri-containerd-", "docker-", "crio-" };
    size_t i, k;

    if (n > 6 && memcmp(c + n - 6, ".scope", 6) == 0) {
        n -= 6;
        for (k = 0; k < sizeof(prefix) / sizeof(prefix[0]); k++) {
            size_t pl = strlen(prefix[k]);

            if (n > pl && memcmp(c, prefix[k], pl) == 0) {
                c += pl;
                n -= pl;
                break;
            }
        }
        if (k == sizeof(prefix) / sizeof(prefix[0]))
            return 0;
    }
    if (n == 0 || n >= GD_CONTAINER_ID_LEN)
        return 0;
    for (i = 0; i < n; i++)
        if (!hex(c[i]))
            return 0;
    memcpy(cid, c, n);
    cid[n] = '\0';
    return 1;
}

/* One line's path (after "ID:CONTROLLERS:"): 1 with uid (and cid, maybe empty), or 0. */
static int from_path(const char *p, size_t n, char uid[GD_POD_UID_LEN],
                     char cid[GD_CONTAINER_ID_LEN])
{
    size_t i = 0;

    while (i < n) {
        size_t j;

        while (i < n && p[i] == '/')
            i++;
        for (j = i; j < n && p[j] != '/'; j++)
            ;
        if (j > i && pod_component(p + i, j - i, uid)) {
            size_t a = j, b;

            cid[0] = '\0';
            while (a < n && p[a] == '/')
                a++;
            for (b = a; b < n && p[b] != '/'; b++)
                ;
            if (b > a && !container_component(p + a, b - a, cid))
                cid[0] = '\0';
            return 1;
        }
        i = j;
    }
    return 0;
}

int gd_cgroup_pod(const char *text, size_t len, char uid[GD_POD_UID_LEN],
                  char cid[GD_CONTAINER_ID_LEN])
{
    size_t i = 0;
    int found = 0;
    char u[GD_POD_UID_LEN], c[GD_CONTAINER_ID_LEN];

    uid[0] = cid[0] = '\0';
    while (i < len) {
        size_t e, colon1, colon2;

        for (e = i; e < len && text[e] != '\n'; e++)
            ;
        for (colon1 = i; colon1 < e && text[colon1] != ':'; colon1++)
            ;
        for (colon2 = colon1 + 1; colon2 < e && text[colon2] != ':'; colon2++)
            ;
        if (colon2 < e && from_path(text + colon2 + 1, e - colon2 - 1, u, c)) {
            /* Every hierarchy that names a pod must name the same one. */
            if (found && (strcmp(u, uid) != 0 || (c[0] && cid[0] && strcmp(c, cid) != 0)))
                return -1;
            if (!found || (!cid[0] && c[0])) {
                memcpy(uid, u, sizeof(u));
                memcpy(cid, c, sizeof(c));
            }
            found = 1;
        }
        i = e + 1;
    }
    return found;
}

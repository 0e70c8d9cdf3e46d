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
 * (docker-<id>.scope and crio-<id>.scope as well), from the root of the
 * hierarchy (the daemon's cgroup namespace is the host's). A process cannot
 * move itself into another pod's cgroup without write access to the kubelet's
 * part of the tree, which neither a pod's containers nor a user with a
 * delegated subtree of their own have: this, not its environment, says which
 * pod it belongs to.
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

/* The next component of p at *i (n bytes in all): its start and length, *i past it; 0 at the end. */
static int next_component(const char *p, size_t n, size_t *i, const char **c, size_t *len)
{
    size_t j;

    while (*i < n && p[*i] == '/')
        (*i)++;
    for (j = *i; j < n && p[j] != '/'; j++)
        ;
    *c = p + *i;
    *len = j - *i;
    *i = j;
    return *len > 0;
}

static int is(const char *c, size_t n, const char *s)
{
    return n == strlen(s) && memcmp(c, s, n) == 0;
}

/*
 * One line's path (after "ID:CONTROLLERS:"): 1 with uid (and cid, maybe empty), or 0. The pod
 * must be where the kubelet puts pods, from the hierarchy's root: kubepods (cgroupfs) or
 * kubepods.slice (systemd), or kubelet.slice/kubelet-kubepods.slice (a kubelet run with
 * --cgroup-root=/kubelet, as kind and k3s in containers do), then a QoS class or none, then
 * the pod. A cgroup a user made in a tree delegated to them (user.slice/…) is not a pod's,
 * whatever its name.
 */
static int from_path(const char *p, size_t n, char uid[GD_POD_UID_LEN],
                     char cid[GD_CONTAINER_ID_LEN])
{
    const char *c;
    size_t i = 0, len;

    if (!next_component(p, n, &i, &c, &len))
        return 0;
    if (is(c, len, "kubelet.slice")) {
        if (!next_component(p, n, &i, &c, &len) || !is(c, len, "kubelet-kubepods.slice"))
            return 0;
    } else if (!is(c, len, "kubepods") && !is(c, len, "kubepods.slice")) {
        return 0;
    }
    if (!next_component(p, n, &i, &c, &len))
        return 0;
    if (is(c, len, "besteffort") || is(c, len, "burstable") ||
        is(c, len, "kubepods-besteffort.slice") || is(c, len, "kubepods-burstable.slice") ||
        is(c, len, "kubelet-kubepods-besteffort.slice") ||
        is(c, len, "kubelet-kubepods-burstable.slice")) {
        if (!next_component(p, n, &i, &c, &len))
            return 0;
    }
    if (!pod_component(c, len, uid))
        return 0;
    cid[0] = '\0';
    if (next_component(p, n, &i, &c, &len) && !container_component(c, len, cid))
        cid[0] = '\0';
    return 1;
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

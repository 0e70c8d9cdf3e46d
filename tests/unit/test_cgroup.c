/*
 * A process's pod and container from its /proc/PID/cgroup (the daemon's
 * cgroup.c): both kubelet cgroup drivers, cgroup v1 and v2, the runtimes'
 * scope names, and what must not be taken for a pod; the same read from a
 * cgroup namespace of the daemon's own (paths relative to its root, climbing
 * with ".."), and that root found in a host's tree (made here, in a
 * temporary directory, with the files the kernel shows).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/cgroup.h"

#define UID "0b5e9d2a-1f2c-4a8e-9e59-3c0d1d2f5a61"
#define UIDS "0b5e9d2a_1f2c_4a8e_9e59_3c0d1d2f5a61"
#define CID "4e3a1b2c3d4e5f60718293a4b5c6d7e8f90123456789abcdef0123456789abcd"

static int pod(const char *text, char uid[GD_POD_UID_LEN], char cid[GD_CONTAINER_ID_LEN])
{
    return gd_cgroup_pod(text, strlen(text), uid, cid);
}

static void test_systemd_driver_v2(void **state)
{
    char uid[GD_POD_UID_LEN], cid[GD_CONTAINER_ID_LEN];

    (void)state;
    assert_int_equal(pod("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDS
                         ".slice/cri-containerd-" CID ".scope\n",
                         uid, cid),
                     1);
    assert_string_equal(uid, UID);
    assert_string_equal(cid, CID);
    /* Guaranteed pods sit right under kubepods.slice; CRI-O and Docker name scopes so. */
    assert_int_equal(
        pod("0::/kubepods.slice/kubepods-pod" UIDS ".slice/crio-" CID ".scope", uid, cid), 1);
    assert_string_equal(cid, CID);
    assert_int_equal(pod("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UIDS
                         ".slice/docker-" CID ".scope",
                         uid, cid),
                     1);
    assert_string_equal(uid, UID);
    assert_string_equal(cid, CID);
}

static void test_cgroupfs_driver_v1(void **state)
{
    char uid[GD_POD_UID_LEN], cid[GD_CONTAINER_ID_LEN];

    (void)state;
    assert_int_equal(pod("12:pids:/kubepods/burstable/pod" UID "/" CID "\n"
                         "11:memory:/kubepods/burstable/pod" UID "/" CID "\n"
                         "1:name=systemd:/kubepods/burstable/pod" UID "/" CID "\n",
                         uid, cid),
                     1);
    assert_string_equal(uid, UID);
    assert_string_equal(cid, CID);
    /* In the pod's cgroup but no container's: the pod, no container. */
    assert_int_equal(pod("0::/kubepods/pod" UID "\n", uid, cid), 1);
    assert_string_equal(uid, UID);
    assert_string_equal(cid, "");
    /* A container component that is not an ID is not taken for one. */
    assert_int_equal(pod("0::/kubepods/pod" UID "/not-an-id\n", uid, cid), 1);
    assert_string_equal(cid, "");
    /* A kubelet with --cgroup-root=/kubelet (kind, k3s in a container). */
    assert_int_equal(pod("0::/kubelet.slice/kubelet-kubepods.slice/"
                         "kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod" UIDS
                         ".slice/cri-containerd-" CID ".scope",
                         uid, cid),
                     1);
    assert_string_equal(uid, UID);
    /* Not from the hierarchy's root: a user's delegated subtree, or anywhere deeper. */
    assert_int_equal(pod("0::/user.slice/user-1000.slice/user@1000.service/kubepods.slice/"
                         "kubepods-pod" UIDS ".slice/cri-containerd-" CID ".scope",
                         uid, cid),
                     0);
    assert_int_equal(pod("0::/docker/abc/kubepods/pod" UID "/" CID, uid, cid), 0);
    assert_int_equal(pod("0::/user.slice/pod" UID "/" CID, uid, cid), 0);
    /* The pod right under the QoS level, not deeper. */
    assert_int_equal(pod("0::/kubepods/burstable/x/pod" UID "/" CID, uid, cid), 0);
}

static void test_not_a_pod(void **state)
{
    char uid[GD_POD_UID_LEN], cid[GD_CONTAINER_ID_LEN];

    (void)state;
    assert_int_equal(pod("0::/\n", uid, cid), 0);
    assert_string_equal(uid, "");
    assert_int_equal(pod("0::/user.slice/user-1000.slice/session-2.scope\n", uid, cid), 0);
    assert_int_equal(pod("", uid, cid), 0);
    /* "pod" inside a component, a short or bad UID, a UID with more after it. */
    assert_int_equal(pod("0::/kubepods/xpod" UID "/" CID, uid, cid), 0);
    assert_int_equal(pod("0::/kubepods/pod0b5e9d2a-1f2c-4a8e-9e59-3c0d1d2f5a6/" CID, uid, cid), 0);
    assert_int_equal(pod("0::/kubepods/pod0b5e9d2a-1f2c-4a8e-9e59-3c0d1d2f5aXY/" CID, uid, cid), 0);
    assert_int_equal(pod("0::/kubepods/pod" UID "x/" CID, uid, cid), 0);
    assert_int_equal(pod("0::/kubepods/pod0b5e9d2a.1f2c-4a8e-9e59-3c0d1d2f5a61/" CID, uid, cid), 0);
    /* A line without its two colons names nothing. */
    assert_int_equal(pod("/kubepods/pod" UID "/" CID, uid, cid), 0);
}

static void test_disagreeing_lines_refused(void **state)
{
    char uid[GD_POD_UID_LEN], cid[GD_CONTAINER_ID_LEN];

    (void)state;
    assert_int_equal(pod("1:name=systemd:/kubepods/pod" UID "/" CID "\n"
                         "0::/kubepods/pod1b5e9d2a-1f2c-4a8e-9e59-3c0d1d2f5a61/" CID "\n",
                         uid, cid),
                     -1);
    assert_int_equal(pod("1:name=systemd:/kubepods/pod" UID "/" CID "\n"
                         "0::/kubepods/pod" UID "/aaaa\n",
                         uid, cid),
                     -1);
    /* A line that names the pod without a container agrees with one that names both. */
    assert_int_equal(
        pod("1:name=systemd:/kubepods/pod" UID "\n0::/kubepods/pod" UID "/" CID "\n", uid, cid), 1);
    assert_string_equal(cid, CID);
}

/* ---- from a cgroup namespace of the reader's own ---- */

#define DUIDS "9d2e0b5a_1f2c_4a8e_9e59_3c0d1d2f5a61"
#define DUID "9d2e0b5a-1f2c-4a8e-9e59-3c0d1d2f5a61"
#define DCID "aa3a1b2c3d4e5f60718293a4b5c6d7e8f90123456789abcdef0123456789abcd"
/* The daemon's container, as the systemd driver and the cgroupfs driver name it. */
#define DSYSTEMD                                                                                   \
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" DUIDS                        \
    ".slice/cri-containerd-" DCID ".scope"
#define DCGROUPFS "/kubepods/besteffort/pod" DUID "/" DCID
#define S(text) text, strlen(text)

static void ns_of(struct gd_cgroup_ns *ns, const char *v2root, const char *memroot,
                  const char *systemdroot)
{
    memset(ns, 0, sizeof(*ns));
    ns->h[0].id = 0;
    snprintf(ns->h[0].root, sizeof(ns->h[0].root), "%s", v2root);
    ns->n = 1;
    if (memroot) {
        ns->h[1].id = 4;
        snprintf(ns->h[1].ctrl, sizeof(ns->h[1].ctrl), "memory");
        snprintf(ns->h[1].root, sizeof(ns->h[1].root), "%s", memroot);
        ns->h[2].id = 1;
        snprintf(ns->h[2].ctrl, sizeof(ns->h[2].ctrl), "name=systemd");
        snprintf(ns->h[2].root, sizeof(ns->h[2].root), "%s", systemdroot);
        ns->n = 3;
    }
}

static int pod_in(const struct gd_cgroup_ns *ns, const char *text, char uid[GD_POD_UID_LEN],
                  char cid[GD_CONTAINER_ID_LEN])
{
    return gd_cgroup_pod_in(ns, text, strlen(text), uid, cid);
}

/* Issue 28: read from the daemon's container's namespace, another pod's process climbs out. */
static void test_paths_relative_to_the_namespace_root(void **state)
{
    char uid[GD_POD_UID_LEN], cid[GD_CONTAINER_ID_LEN];
    struct gd_cgroup_ns ns;

    (void)state;
    ns_of(&ns, DSYSTEMD, NULL, NULL);
    /* Another QoS class: up to kubepods.slice, three levels. */
    assert_int_equal(pod_in(&ns,
                            "0::/../../../kubepods-besteffort.slice/kubepods-besteffort-pod" UIDS
                            ".slice/cri-containerd-" CID ".scope\n",
                            uid, cid),
                     1);
    assert_string_equal(uid, UID);
    assert_string_equal(cid, CID);
    /* The same class: two levels. */
    assert_int_equal(
        pod_in(&ns, "0::/../../kubepods-burstable-pod" UIDS ".slice/cri-containerd-" CID ".scope",
               uid, cid),
        1);
    assert_string_equal(uid, UID);
    /* Up to the hierarchy's root, then down the other driver's names. */
    assert_int_equal(pod_in(&ns, "0::/../../../../kubepods/burstable/pod" UID "/" CID, uid, cid),
                     1);
    assert_string_equal(uid, UID);
    assert_string_equal(cid, CID);
    /* The daemon's own container is a pod's too: its own. */
    assert_int_equal(pod_in(&ns, "0::/\n", uid, cid), 1);
    assert_string_equal(uid, DUID);
    assert_string_equal(cid, DCID);
    /* The cgroupfs driver's daemon; the issue's own example. */
    ns_of(&ns, DCGROUPFS, NULL, NULL);
    assert_int_equal(pod_in(&ns, "0::/../../../burstable/pod" UID "/" CID, uid, cid), 1);
    assert_string_equal(uid, UID);
    assert_int_equal(
        pod_in(&ns, "0::/../../../../kubepods.slice/kubepods-pod" UIDS ".slice/crio-" CID ".scope",
               uid, cid),
        1);
    assert_string_equal(cid, CID);
    /* Without the namespace (the host's reader) the same text names nothing it can place. */
    assert_int_equal(gd_cgroup_pod(S("0::/../../../burstable/pod" UID "/" CID), uid, cid),
                     GD_CGROUP_UNPLACED);
}

/* The anchoring holds from a namespace: a lookalike is placed where it is, and is no pod. */
static void test_lookalikes_placed_where_they_are(void **state)
{
    char uid[GD_POD_UID_LEN], cid[GD_CONTAINER_ID_LEN];
    struct gd_cgroup_ns ns;

    (void)state;
    ns_of(&ns, DSYSTEMD, NULL, NULL);
    /*
     * Below the daemon's root, named as the kubelet names a pod: placed where it is, in the
     * daemon's own container's cgroup, it is that pod's (the daemon's), never the one it names.
     */
    assert_int_equal(
        pod_in(&ns, "0::/kubepods.slice/kubepods-pod" UIDS ".slice/cri-containerd-" CID ".scope",
               uid, cid),
        1);
    assert_string_equal(uid, DUID);
    assert_string_equal(cid, DCID);
    assert_int_equal(pod_in(&ns, "0::/kubepods/pod" UID "/" CID, uid, cid), 1);
    assert_string_equal(uid, DUID);
    /* Below a namespace rooted outside any pod (a daemon run by systemd in a container). */
    ns_of(&ns, "/system.slice/gpusliced.service", NULL, NULL);
    assert_int_equal(
        pod_in(&ns, "0::/kubepods.slice/kubepods-pod" UIDS ".slice/cri-containerd-" CID ".scope",
               uid, cid),
        0);
    assert_int_equal(pod_in(&ns, "0::/../../kubepods/pod" UID "/" CID, uid, cid), 1);
    assert_string_equal(uid, UID);
    ns_of(&ns, DSYSTEMD, NULL, NULL);
    /* A user's delegated subtree, reached by climbing to the root. */
    assert_int_equal(pod_in(&ns,
                            "0::/../../../../user.slice/user-1000.slice/user@1000.service/"
                            "kubepods.slice/kubepods-pod" UIDS ".slice/cri-containerd-" CID
                            ".scope",
                            uid, cid),
                     0);
    assert_string_equal(uid, "");
    /* Climbing above the hierarchy's root; to a level where it is inside another pod. */
    assert_int_equal(pod_in(&ns, "0::/../../../../../../kubepods/pod" UID "/" CID, uid, cid),
                     GD_CGROUP_UNPLACED);
    assert_int_equal(pod_in(&ns, "0::/../kubepods/pod" UID "/" CID, uid, cid), 1);
    assert_string_equal(uid, DUID);
    assert_int_equal(
        pod_in(&ns, "0::/../../../kubepods-besteffort.slice/x/kubepods/pod" UID "/" CID, uid, cid),
        0);
    /* What the kernel never writes: ".." after a name, ".". */
    assert_int_equal(pod_in(&ns, "0::/a/../../../kubepods/pod" UID "/" CID, uid, cid),
                     GD_CGROUP_UNPLACED);
    assert_int_equal(pod_in(&ns, "0::/./x", uid, cid), GD_CGROUP_UNPLACED);
    /* A hierarchy the namespace was not found in. */
    assert_int_equal(pod_in(&ns, "0::/\n7:pids:/kubepods/pod" UID "/" CID "\n", uid, cid),
                     GD_CGROUP_UNPLACED);
    /* One line that cannot be placed leaves nothing known, even where another names a pod. */
    assert_int_equal(pod_in(&ns,
                            "0::/../../../../kubepods/pod" UID "/" CID "\n0::/../../../../../x\n",
                            uid, cid),
                     GD_CGROUP_UNPLACED);
    assert_string_equal(uid, "");
}

/* Per hierarchy on cgroup v1: each has a root of its own. */
static void test_each_hierarchy_its_own_root(void **state)
{
    char uid[GD_POD_UID_LEN], cid[GD_CONTAINER_ID_LEN];
    struct gd_cgroup_ns ns;

    (void)state;
    ns_of(&ns, "", DCGROUPFS, "/system.slice/containerd.service");
    assert_int_equal(pod_in(&ns,
                            "4:memory:/../../../burstable/pod" UID "/" CID "\n"
                            "1:name=systemd:/../../kubepods/burstable/pod" UID "/" CID "\n"
                            "0::/\n",
                            uid, cid),
                     1);
    assert_string_equal(uid, UID);
    assert_string_equal(cid, CID);
    /* Each hierarchy placed from its own root: here they name two pods. */
    assert_int_equal(pod_in(&ns,
                            "4:memory:/../../../burstable/pod" UID "/" CID "\n"
                            "1:name=systemd:/../../kubepods/burstable/pod1b5e9d2a-1f2c-4a8e-9e59-"
                            "3c0d1d2f5a61/" CID "\n",
                            uid, cid),
                     -1);
    /* The systemd hierarchy's root is two deep: three ".." climb above it. */
    assert_int_equal(
        pod_in(&ns, "1:name=systemd:/../../../kubepods/pod" UID "/" CID "\n", uid, cid),
        GD_CGROUP_UNPLACED);
    /* Controllers must match as well as the ID. */
    assert_int_equal(pod_in(&ns, "4:cpu:/\n", uid, cid), GD_CGROUP_UNPLACED);
    /* The roots: kthreadd is at every one; a process below the daemon is not. */
    assert_int_equal(
        gd_cgroup_at_roots(&ns, S("4:memory:/../../../..\n1:name=systemd:/../..\n0::/\n")), 1);
    assert_int_equal(gd_cgroup_at_roots(&ns, S("4:memory:/../../..\n0::/\n")), 0);
    assert_int_equal(gd_cgroup_at_roots(&ns, S("")), 0);
    /* Inside the reader's namespace: nothing climbs. */
    assert_int_equal(gd_cgroup_inside(S("4:memory:/\n0::/a/b\n")), 1);
    assert_int_equal(gd_cgroup_inside(S("4:memory:/\n0::/../b\n")), 0);
    assert_int_equal(gd_cgroup_inside(S("")), 0);
}

/* ---- the namespace's root, found in a host's tree ---- */

static char tree[64];

static void put(const char *rel, const char *file, const char *content)
{
    char path[4096], cmd[4200];
    FILE *f;

    snprintf(cmd, sizeof(cmd), "mkdir -p '%s%s'", tree, rel);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof(path), "%s%s/%s", tree, rel, file);
    assert_non_null(f = fopen(path, "w"));
    fputs(content, f);
    fclose(f);
}

/* A v2 cgroup below the root (cgroup.type is not on the root) holding procs. */
static void cg2(const char *rel, const char *procs)
{
    put(rel, "cgroup.controllers", "");
    put(rel, "cgroup.type", "domain\n");
    put(rel, "cgroup.procs", procs);
}

static int setup_tree(void **state)
{
    char big[12000];
    int n = 0;

    (void)state;
    snprintf(tree, sizeof(tree), "/tmp/gs-cgtree-XXXXXX");
    assert_non_null(mkdtemp(tree));
    /* cgroup v2 beside v1 (unified), as systemd's hybrid layout has it. */
    put("/unified", "cgroup.controllers", "");
    put("/unified", "cgroup.procs", "1\n2\n");
    cg2("/unified/kubepods.slice", "");
    cg2("/unified/kubepods.slice/kubepods-burstable.slice", "");
    /* PIDs that start as the daemon's, and the daemon's across a 4096-byte read. */
    while (n < 4090)
        n += snprintf(big + n, sizeof(big) - (size_t)n, "%d\n", 100000 + n);
    snprintf(big + n, sizeof(big) - (size_t)n, "424\n42420\n14242\n");
    cg2("/unified/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDS ".slice",
        big);
    n = snprintf(big, sizeof(big), "7\n");
    while (n < 4093)
        big[n++] = '\n';
    snprintf(big + n, sizeof(big) - (size_t)n, "4242\n5\n");
    cg2("/unified" DSYSTEMD, big);
    cg2("/unified/user.slice", "300\n");
    /* v1: a controller's hierarchy and a named one. */
    put("/memory", "release_agent", "");
    put("/memory", "cgroup.procs", "1\n");
    put("/memory" DCGROUPFS, "cgroup.procs", "4242\n");
    put("/memory/kubepods/burstable", "cgroup.procs", "");
    put("/systemd", "release_agent", "");
    put("/systemd", "cgroup.procs", "1\n");
    put("/systemd/system.slice/containerd.service", "cgroup.procs", "4242\n");
    return 0;
}

static int teardown_tree(void **state)
{
    char cmd[128];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tree);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_root_found_by_the_daemons_pid(void **state)
{
    static struct gd_cgroup_ns ns;
    const char *self = "4:memory:/\n1:name=systemd:/\n0::/\n";
    char why[512], uid[GD_POD_UID_LEN], cid[GD_CONTAINER_ID_LEN];

    (void)state;
    assert_int_equal(gd_cgroup_ns_find(tree, self, strlen(self), 4242, &ns, why, sizeof(why)), 0);
    assert_int_equal(ns.n, 3);
    assert_int_equal(ns.h[0].id, 4);
    assert_string_equal(ns.h[0].ctrl, "memory");
    assert_string_equal(ns.h[0].root, DCGROUPFS);
    assert_string_equal(ns.h[1].ctrl, "name=systemd");
    assert_string_equal(ns.h[1].root, "/system.slice/containerd.service");
    assert_int_equal(ns.h[2].id, 0);
    assert_string_equal(ns.h[2].root, DSYSTEMD);
    /* What it reads from there, placed. */
    assert_int_equal(pod_in(&ns,
                            "0::/../../../kubepods-besteffort.slice/kubepods-besteffort-pod" UIDS
                            ".slice/cri-containerd-" CID
                            ".scope\n4:memory:/../../../burstable/pod" UID "/" CID
                            "\n1:name=systemd:/../../kubepods/burstable/pod" UID "/" CID "\n",
                            uid, cid),
                     1);
    assert_string_equal(uid, UID);
    /* Its own path below its namespace's root: the root is that much higher. */
    put("/unified" DSYSTEMD "/init", "cgroup.procs", "4243\n");
    put("/unified" DSYSTEMD "/init", "cgroup.type", "domain\n");
    assert_int_equal(gd_cgroup_ns_find(tree, S("0::/init\n"), 4243, &ns, why, sizeof(why)), 0);
    assert_string_equal(ns.h[0].root, DSYSTEMD);
    /* In the host's namespace: its own path is the whole path, the root the hierarchy's. */
    assert_int_equal(gd_cgroup_ns_find(tree, "0::" DSYSTEMD "\n", strlen("0::" DSYSTEMD "\n"), 4242,
                                       &ns, why, sizeof(why)),
                     0);
    assert_string_equal(ns.h[0].root, "");
}

static void test_root_not_found_is_said(void **state)
{
    static struct gd_cgroup_ns ns;
    char why[512], sub[4200];

    (void)state;
    /* Not in the tree (another PID), or a PID that only starts the same. */
    assert_int_equal(gd_cgroup_ns_find(tree, "0::/\n", 5, 4241, &ns, why, sizeof(why)), -ENOENT);
    assert_non_null(strstr(why, "process 4241 is in no cgroup"));
    assert_int_equal(gd_cgroup_ns_find(tree, "0::/\n", 5, 42, &ns, why, sizeof(why)), -ENOENT);
    /* A path that does not end as the process's own says. */
    assert_int_equal(gd_cgroup_ns_find(tree, "0::/elsewhere\n", 14, 4242, &ns, why, sizeof(why)),
                     -EXDEV);
    assert_non_null(strstr(why, "does not end as"));
    /* Its own path climbing out of its namespace. */
    assert_int_equal(gd_cgroup_ns_find(tree, "0::/../x\n", 9, 4242, &ns, why, sizeof(why)),
                     -EINVAL);
    assert_non_null(strstr(why, "outside its cgroup namespace"));
    /* No such hierarchy there; a tree that is a container's own mount, not the host's. */
    assert_int_equal(gd_cgroup_ns_find(tree, "9:pids:/\n", 9, 4242, &ns, why, sizeof(why)),
                     -ENOENT);
    assert_non_null(strstr(why, "host-cgroup-root"));
    snprintf(sub, sizeof(sub), "%s/unified/kubepods.slice", tree);
    assert_int_equal(gd_cgroup_ns_find(sub, "0::/\n", 5, 4242, &ns, why, sizeof(why)), -EXDEV);
    assert_non_null(strstr(why, "not mounted from the root"));
    assert_int_equal(gd_cgroup_ns_find(tree, "0::/\n", 5, 4242, &ns, why, sizeof(why)), 0);
    /* A v1 hierarchy's directory without release_agent is not its root. */
    put("/cpu/kubepods", "cgroup.procs", "4242\n");
    put("/cpu", "cgroup.procs", "1\n");
    assert_int_equal(gd_cgroup_ns_find(tree, "3:cpu:/\n", 8, 4242, &ns, why, sizeof(why)), -EXDEV);
    assert_non_null(strstr(why, "not mounted from the root"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_systemd_driver_v2),
        cmocka_unit_test(test_cgroupfs_driver_v1),
        cmocka_unit_test(test_not_a_pod),
        cmocka_unit_test(test_disagreeing_lines_refused),
        cmocka_unit_test(test_paths_relative_to_the_namespace_root),
        cmocka_unit_test(test_lookalikes_placed_where_they_are),
        cmocka_unit_test(test_each_hierarchy_its_own_root),
        cmocka_unit_test_setup_teardown(test_root_found_by_the_daemons_pid, setup_tree,
                                        teardown_tree),
        cmocka_unit_test_setup_teardown(test_root_not_found_is_said, setup_tree, teardown_tree),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

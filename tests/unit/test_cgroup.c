/*
 * A process's pod and container from its /proc/PID/cgroup (the daemon's
 * cgroup.c): both kubelet cgroup drivers, cgroup v1 and v2, the runtimes'
 * scope names, and what must not be taken for a pod.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_systemd_driver_v2),
        cmocka_unit_test(test_cgroupfs_driver_v1),
        cmocka_unit_test(test_not_a_pod),
        cmocka_unit_test(test_disagreeing_lines_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

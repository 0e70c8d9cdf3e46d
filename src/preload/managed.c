/*
 * Tenants of the daemon's: whether this process belongs to one, found from
 * the node segment (by itself or an ancestor being a member, never by its
 * environment, which it controls), and the attachment of that tenant's
 * state file. The system daemon's directory is always looked at, so that a
 * process cannot leave its tenant by changing a variable.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/env.h"
#include "common/error.h"
#include "common/node.h"
#include "common/tenant.h"
#include "preload/preload.h"

/* Whether name is a plain file name of a tenant's state file (no directory part). */
static int plain_name(const char *name)
{
    return name[0] != '\0' && strchr(name, '/') == NULL && strcmp(name, ".") != 0 &&
           strcmp(name, "..") != 0 &&
           strncmp(name, GS_TENANT_PREFIX, strlen(GS_TENANT_PREFIX)) == 0;
}

/*
 * Attaches tenant id of node n: its state file, or state_fd when the daemon handed it over
 * (a pod's: taken, closed in all cases). 1, 0 when the tenant ended meanwhile, or -1 with
 * the message in gs__state.config_msg.
 */
static int attach(const struct gpuslice_node *n, const char *dir, uint32_t id, int state_fd)
{
    uid_t owner;

    struct gs_state *st = &gs__state;
    struct gpuslice_node_tenant t;
    char tdir[sizeof(n->tenant_dir)], path[PATH_MAX];
    int idx, r;

    if ((idx = gs_node_find_tenant(n, id)) < 0) {
        if (state_fd >= 0)
            close(state_fd);
        return 0; /* ended between the two reads: a member no longer */
    }
    gs_node_read_tenant(n, idx, &t);
    memcpy(tdir, n->tenant_dir, sizeof(tdir));
    tdir[sizeof(tdir) - 1] = '\0';
    if (t.id == id && (t.flags & GPUSLICE_NODE_REFUSED)) {
        snprintf(st->config_msg, sizeof(st->config_msg),
                 "this process belongs to the daemon's tenant \"%s\", whose limits the daemon "
                 "refused (a pod's bad GPU annotations: kubectl describe pod shows the Event)",
                 t.name);
        if (state_fd >= 0)
            close(state_fd);
        return -1;
    }
    if (t.id != id || !plain_name(t.state_file) || tdir[0] != '/' ||
        (size_t)snprintf(path, sizeof(path), "%s/%s", tdir, t.state_file) >= sizeof(path)) {
        snprintf(st->config_msg, sizeof(st->config_msg),
                 "this process belongs to the daemon's tenant %u (%.200s/" GPUSLICE_NODE_FILE
                 "), whose entry names no usable state file",
                 id, dir);
        if (state_fd >= 0)
            close(state_fd);
        return -1;
    }
    if ((r = state_fd >= 0 ? gs_tenant_open_fd(state_fd, 1, path, &owner, &st->tenant)
                           : gs_tenant_open(path, &st->tenant)) < 0) {
        snprintf(st->config_msg, sizeof(st->config_msg),
                 "this process belongs to the daemon's tenant \"%s\", whose state file %.300s "
                 "cannot be attached: %s",
                 t.name, path, gs_strerror(r));
        return -1;
    }
    if (__atomic_load_n(&st->tenant->node_tenant, __ATOMIC_ACQUIRE) != id) {
        gs_tenant_close(st->tenant);
        st->tenant = NULL;
        snprintf(st->config_msg, sizeof(st->config_msg),
                 "this process belongs to the daemon's tenant \"%s\", but %.300s is not that "
                 "tenant's state file",
                 t.name, path);
        return -1;
    }
    st->node = n;
    st->node_id = id;
    st->node_idx = idx;
    if ((size_t)snprintf(st->node_dir, sizeof(st->node_dir), "%s", dir) >= sizeof(st->node_dir))
        st->node_dir[0] = '\0'; /* no board socket there then: boards of its own user */
    st->shared_tenant = 1;
    gs__debug("managed by the daemon (%s): tenant \"%s\" (%u), state %s", dir, t.name, id, path);
    return 1;
}

#define POD_WAIT_NS (10 * 1000000000ULL) /* how long a pod's process waits to be known */

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * Asks the daemon of dir, whose user is daemon_uid, to join this process to its pod's tenant
 * (GPUSLICE_NODE_POD_SOCKET; the daemon reads the process's cgroup, nothing it says). The
 * answer's line into ans: 1 "ok", 2 "wait", 0 "none", -1 "refused" or "error"; -2 when the
 * socket cannot be asked (ans says why), -3 when there is no such socket.
 */
static int ask_pod(const char *dir, uint32_t daemon_uid, char *ans, size_t len, int *state_fd)
{
    struct sockaddr_un sa;
    struct timeval tv = { 2, 0 };
    struct ucred cred = { 0, 0, 0 };
    socklen_t cl = sizeof(cred);
    size_t got = 0;
    ssize_t k;
    int s;

    ans[0] = '\0';
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/" GPUSLICE_NODE_POD_SOCKET, dir) >=
        sizeof(sa.sun_path))
        return -3;
    if (access(sa.sun_path, F_OK) < 0)
        return -3;
    if ((s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
        snprintf(ans, len, "socket: %s", strerror(errno));
        return -2;
    }
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        snprintf(ans, len, "%s: %s", sa.sun_path, strerror(errno));
        close(s);
        return -2;
    }
    /* Only the daemon's user serves it: a socket planted by another user is not its. */
    if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 || cred.uid != daemon_uid) {
        snprintf(ans, len, "%s is served by uid %u, not the daemon's (%u)", sa.sun_path,
                 (unsigned)cred.uid, (unsigned)daemon_uid);
        close(s);
        return -2;
    }
    /* The line, and with "ok" the tenant's state file (SCM_RIGHTS, with its first byte). */
    while (got + 1 < len) {
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } u;
        struct iovec iov = { ans + got, len - 1 - got };
        struct msghdr m;
        struct cmsghdr *h;

        memset(&m, 0, sizeof(m));
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = u.buf;
        m.msg_controllen = sizeof(u.buf);
        if ((k = recvmsg(s, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
            continue;
        for (h = k >= 0 ? CMSG_FIRSTHDR(&m) : NULL; h; h = CMSG_NXTHDR(&m, h))
            if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
                h->cmsg_len == CMSG_LEN(sizeof(int))) {
                int fd;

                memcpy(&fd, CMSG_DATA(h), sizeof(int));
                if (*state_fd >= 0)
                    close(*state_fd);
                *state_fd = fd;
            }
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(s);
    ans[got] = '\0';
    ans[strcspn(ans, "\n")] = '\0';
    if (strncmp(ans, "ok ", 3) == 0)
        return 1;
    if (strncmp(ans, "wait ", 5) == 0)
        return 2;
    if (strncmp(ans, "none ", 5) == 0)
        return 0;
    if (strncmp(ans, "refused ", 8) == 0 || strncmp(ans, "error ", 6) == 0)
        return -1;
    if (got == 0)
        snprintf(ans, len, "%s gave no answer", sa.sun_path);
    return -2;
}

/*
 * Joins this process to its pod's tenant through the daemon of dir (node n) when it has a
 * pods socket: 1 joined (and attached), 0 not a pod's process or no such socket, -1 with the
 * message in gs__state.config_msg. required: GPUSLICE_POD=1, so that anything but joining
 * is an error; then -2 when this daemon says the process is in none of its pods, -3 when it
 * follows no pods (the message in config_msg in both): another daemon may have the pod.
 */
static int join_pod(struct gpuslice_node *n, const char *dir, int required)
{
    struct gs_state *st = &gs__state;
    char ans[1024];
    uint64_t start = mono_ns();
    uint32_t id;
    int r, state_fd = -1;

    for (;;) {
        if (state_fd >= 0)
            close(state_fd);
        state_fd = -1;
        r = ask_pod(dir, n->owner_uid, ans, sizeof(ans), &state_fd);
        if (r != 2 || mono_ns() - start > POD_WAIT_NS)
            break;
        usleep(100 * 1000); /* a pod the daemon's watch has not brought yet */
    }
    if (r == 1 && (id = gs_node_lineage_tenant(n)) != 0)
        return attach(n, dir, id, state_fd);
    if (state_fd >= 0)
        close(state_fd);
    if (r == 1)
        snprintf(ans, sizeof(ans),
                 "the daemon said it joined this process, but its node "
                 "segment does not have it");
    if (r == -3 && !required)
        return 0;
    if (r == 0 && !required)
        return 0;
    if (r == -3)
        snprintf(ans, sizeof(ans),
                 "%.900s/" GPUSLICE_NODE_POD_SOCKET " does not exist (the daemon "
                 "does not follow Kubernetes pods)",
                 dir);
    if (r == -2)
        r = -1; /* a daemon that cannot be asked is never passed over */
    if (r == 0)
        r = -2;
    snprintf(st->config_msg, sizeof(st->config_msg), "%s%s: %.420s",
             r == -1 && strncmp(ans, "refused ", 8) == 0
                 ? "the daemon refused this pod's GPU limits"
                 : "this process could not join its pod's tenant",
             required ? " (" GS_ENV_POD "=1)" : "",
             strncmp(ans, "refused ", 8) == 0 ? ans + 8
             : strncmp(ans, "error ", 6) == 0 ? ans + 6
             : strncmp(ans, "wait ", 5) == 0  ? ans + 5
             : strncmp(ans, "none ", 5) == 0  ? ans + 5
                                              : ans);
    return r == -2 || r == -3 ? r : -1;
}

int gs__managed_attach(void)
{
    char dirs[2][PATH_MAX], missed[sizeof(gs__state.config_msg)] = "";
    const char *pod = getenv(GS_ENV_POD);
    int nd = 0, i, r, required = 0, answered = 0;

    snprintf(dirs[nd++], sizeof(dirs[0]), "%s", GS_NODE_SYSTEM_DIR);
    if ((r = gs_node_dir(dirs[nd], sizeof(dirs[1]))) == 0 && strcmp(dirs[nd], dirs[0]) != 0)
        nd++;
    if (r == -EINVAL) {
        /* The user named a daemon's directory no daemon takes: said, not looked past. */
        snprintf(gs__state.config_msg, sizeof(gs__state.config_msg),
                 GS_ENV_DAEMON_DIR "=\"%.64s\" is not an absolute path: give the daemon's run "
                                   "directory as one, or unset it",
                 getenv(GS_ENV_DAEMON_DIR));
        return -1;
    }
    if (pod && *pod) {
        if (strcmp(pod, "1") != 0 && strcmp(pod, "0") != 0) {
            snprintf(gs__state.config_msg, sizeof(gs__state.config_msg),
                     GS_ENV_POD "=\"%.64s\": give 1 (a pod's process, which must join its "
                                "pod's tenant) or 0",
                     pod);
            return -1;
        }
        required = strcmp(pod, "1") == 0;
    }
    for (i = 0; i < nd; i++) {
        struct gpuslice_node *n;
        uint32_t id;

        if (gs_node_open(dirs[i], &n) < 0)
            continue; /* no daemon there, or one whose file nobody should trust */
        id = gs_node_lineage_tenant(n);
        /*
         * Not a member yet, or a member of a pod's tenant (whose state file the pod cannot
         * open on its read-only mount): the daemon joins it by its cgroup and hands the file.
         */
        if (id == 0 || (gs_node_flags(n, gs_node_find_tenant(n, id), id) & GPUSLICE_NODE_POD))
            r = join_pod(n, dirs[i], required);
        else
            r = attach(n, dirs[i], id, -1);
        if (r == -2 || r == -3) {
            /*
             * Not this daemon's pod: the next directory's daemon may have it (the system
             * daemon's directory is looked at first, so this opens no way out of a pod it
             * has). Said if none joins it: a daemon's own answer before a missing socket.
             */
            if (missed[0] == '\0' || (r == -2 && !answered)) {
                memcpy(missed, gs__state.config_msg, sizeof(missed));
                answered = r == -2;
            }
            gs_node_close(n);
            continue;
        }
        if (r != 0) {
            if (r < 0)
                gs_node_close(n);
            return r;
        }
        gs_node_close(n);
    }
    if (required && missed[0]) {
        memcpy(gs__state.config_msg, missed, sizeof(missed));
        return -1;
    }
    if (required) {
        snprintf(gs__state.config_msg, sizeof(gs__state.config_msg),
                 GS_ENV_POD "=1, but no daemon joined this process to its pod's tenant (none "
                            "runs in %.200s%s%.200s)",
                 dirs[0], nd > 1 ? " or " : "", nd > 1 ? dirs[1] : "");
        return -1;
    }
    return 0;
}

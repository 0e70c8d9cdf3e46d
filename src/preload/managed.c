/*
 * Tenants of the daemon's: whether this process belongs to one, found from
 * the node segment (by itself or an ancestor being a member, never by its
 * environment, which it controls), and the attachment of that tenant's
 * state file. The system daemon's directory is always looked at, so that a
 * process cannot leave its tenant by changing a variable.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

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

/* Attaches tenant id of node n; 1, or -1 with the message in gs__state.config_msg. */
static int attach(const struct gpuslice_node *n, const char *dir, uint32_t id)
{
    struct gs_state *st = &gs__state;
    struct gpuslice_node_tenant t;
    char tdir[sizeof(n->tenant_dir)], path[PATH_MAX];
    int idx, r;

    if ((idx = gs_node_find_tenant(n, id)) < 0)
        return 0; /* ended between the two reads: a member no longer */
    gs_node_read_tenant(n, idx, &t);
    memcpy(tdir, n->tenant_dir, sizeof(tdir));
    tdir[sizeof(tdir) - 1] = '\0';
    if (t.id != id || !plain_name(t.state_file) || tdir[0] != '/' ||
        (size_t)snprintf(path, sizeof(path), "%s/%s", tdir, t.state_file) >= sizeof(path)) {
        snprintf(st->config_msg, sizeof(st->config_msg),
                 "this process belongs to the daemon's tenant %u (%.200s/" GPUSLICE_NODE_FILE
                 "), whose entry names no usable state file",
                 id, dir);
        return -1;
    }
    if ((r = gs_tenant_open(path, &st->tenant)) < 0) {
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

int gs__managed_attach(void)
{
    char dirs[2][PATH_MAX];
    int nd = 0, i, r;

    snprintf(dirs[nd++], sizeof(dirs[0]), "%s", GS_NODE_SYSTEM_DIR);
    if (gs_node_dir(dirs[nd], sizeof(dirs[1])) == 0 && strcmp(dirs[nd], dirs[0]) != 0)
        nd++;
    for (i = 0; i < nd; i++) {
        struct gpuslice_node *n;
        uint32_t id;

        if (gs_node_open(dirs[i], &n) < 0)
            continue; /* no daemon there, or one whose file nobody should trust */
        if ((id = gs_node_lineage_tenant(n)) != 0 && (r = attach(n, dirs[i], id)) != 0) {
            if (r < 0)
                gs_node_close(n);
            return r;
        }
        gs_node_close(n);
    }
    return 0;
}

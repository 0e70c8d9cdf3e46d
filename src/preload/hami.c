/*
 * HAMi's contract: the processes that name one CUDA_DEVICE_MEMORY_SHARED_CACHE
 * path are one tenant, whose state file (gpuslice's own format, not
 * HAMi-core's) lives at that path; and the message that says why a path
 * cannot be that file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/env.h"
#include "common/error.h"
#include "common/shm.h"
#include "common/tenant.h"
#include "preload/preload.h"

/* HAMi-core's region starts with this int32 (its MULTIPROCESS_SHARED_REGION_MAGIC_FLAG). */
#define HAMI_CORE_MAGIC 19920718

/*
 * Why the existing file at path is not a tenant's state we may join (r: what
 * gs_tenant_open said), into why: it is looked at again, without following a
 * link, to name what it is.
 */
static void refusal(const char *path, int r, char *why, size_t len)
{
    struct stat st;
    union {
        int32_t hami;
        uint64_t ours;
    } head = { 0 };
    ssize_t n;
    int fd;

    if (r == -ELOOP) {
        snprintf(why, len, "it is a symbolic link (name the file itself)");
        return;
    }
    if (r == -EISDIR) {
        snprintf(why, len, "it is a directory, not a regular file");
        return;
    }
    if (lstat(path, &st) < 0) {
        if (r == -EACCES || r == -EROFS)
            snprintf(why, len,
                     "there is no such file, and this user (uid %u) cannot make one in "
                     "its directory (%s)",
                     (unsigned)geteuid(), gs_strerror(r));
        else
            snprintf(why, len, "%s", gs_strerror(r));
        return;
    }
    if (r == -EACCES) {
        snprintf(why, len,
                 "permission denied: it is owned by uid %u with mode %04o (this is uid %u)",
                 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
        return;
    }
    if (r != GS_EABI && r != GS_EUNSAFE) {
        snprintf(why, len, "%s", gs_strerror(r));
        return;
    }
    fd = S_ISREG(st.st_mode) ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) : -1;
    /* HAMi-core's first: it makes its file mode 0666, which alone would be refused as unsafe. */
    n = fd >= 0 ? pread(fd, &head, sizeof(head), 0) : 0;
    if (!S_ISREG(st.st_mode))
        snprintf(why, len, "it is not a regular file");
    else if (n >= (ssize_t)sizeof(head.hami) && head.hami == HAMI_CORE_MAGIC)
        snprintf(why, len,
                 "it holds HAMi-core's shared region (made by HAMi-core's libvgpu.so), whose "
                 "format gpuslice does not share; remove it, or name a new path");
    else if (r == GS_EUNSAFE)
        snprintf(why, len,
                 "it is owned by uid %u with mode %04o; it must be this user's (uid %u) and "
                 "writable by no one else",
                 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
    else if (st.st_size == 0)
        snprintf(why, len, "it is an empty file, not gpuslice's tenant state; remove it");
    else if (n != (ssize_t)sizeof(head.ours) || head.ours != GPUSLICE_TENANT_MAGIC ||
             gs_shm_check_file(path, GPUSLICE_TENANT_MAGIC, GPUSLICE_TENANT_ABI_MAJOR,
                               sizeof(struct gpuslice_tenant), "tenant", why, len) == 0)
        snprintf(why, len, "it is not gpuslice's tenant state (a file of another program)");
    if (fd >= 0)
        close(fd);
}

int gs__hami_attach(const char *path)
{
    struct gs_state *st = &gs__state;
    const char *base = strrchr(path, '/') + 1;
    char name[64], why[400];
    int r, created;

    snprintf(name, sizeof(name), "hami:%s", base);
    if ((r = gs_tenant_open_at(path, name, &st->tenant, &created)) < 0) {
        if (r == -ENOENT || r == -ENOTDIR)
            snprintf(why, sizeof(why),
                     "its directory does not exist (HAMi's device plugin "
                     "mounts one per container; create it, or name a path in one that exists)");
        else
            refusal(path, r, why, sizeof(why));
        snprintf(st->config_msg, sizeof(st->config_msg),
                 "%s: cannot use %s as the state its processes share their limits through: %s",
                 GS_ENV_HAMI_SHARED_CACHE, path, why);
        st->tenant = NULL;
        return r;
    }
    st->shared_tenant = 1;
    snprintf(st->shared_cache, sizeof(st->shared_cache), "%s", path);
    gs__debug("%s %s: %s", created ? "made" : "joined", path,
              created ? "this process's limits are the file's" : "the file's limits apply");
    return 0;
}

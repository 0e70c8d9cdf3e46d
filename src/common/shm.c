/*
 * The common header of every shared-memory segment (magic, major and minor version, size), and
 * the space of a segment's file, allocated before the file is mapped.
 */
#include "common/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"

int gs_shm_check(const struct gpuslice_shm_header *h, size_t file_size, uint64_t magic,
                 uint32_t major, size_t known, const char *what, const char *path, char *err,
                 size_t errlen)
{
    uint64_t m = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE);
    uint32_t v = h->abi_version, size = h->size;
    const char *why = NULL;

    if (m != magic)
        why = "another magic number: not a gpuslice segment of this kind";
    else if (GPUSLICE_ABI_MAJOR(v) != major)
        why = "another major ABI version";
    else if (size < known || size > file_size)
        why = size < known ? "smaller than its ABI version's layout" : "larger than its file";
    if (why == NULL)
        return 0;
    if (err && errlen)
        snprintf(err, errlen,
                 "%s: %s (%s ABI %u.%u, %u of %zu bytes; this gpuslice reads %s ABI %u.x, at "
                 "least %zu bytes)",
                 path, why, what, (unsigned)GPUSLICE_ABI_MAJOR(v), (unsigned)GPUSLICE_ABI_MINOR(v),
                 (unsigned)size, file_size, what, (unsigned)major, known);
    return GS_EABI;
}

int gs_shm_check_file(const char *path, uint64_t magic, uint32_t major, size_t known,
                      const char *what, char *err, size_t errlen)
{
    struct gpuslice_shm_header h;
    struct stat st;
    ssize_t n;
    int fd, r;

    if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0 ||
        fstat(fd, &st) < 0) {
        r = -errno;
        if (fd >= 0)
            close(fd);
        if (err && errlen)
            snprintf(err, errlen, "%s: %s", path, strerror(-r));
        return r;
    }
    n = pread(fd, &h, sizeof(h), 0);
    close(fd);
    if (n != (ssize_t)sizeof(h)) {
        if (err && errlen)
            snprintf(err, errlen, "%s: %lld bytes, too short for a %s segment", path,
                     (long long)st.st_size, what);
        return GS_EABI;
    }
    return gs_shm_check(&h, (size_t)st.st_size, magic, major, known, what, path, err, errlen);
}

/* Writes zeros over [0, len) of fd: where the filesystem has no fallocate. */
static int write_zeros(int fd, size_t len)
{
    static const char zero[4096];
    size_t done = 0;

    while (done < len) {
        size_t n = len - done < sizeof(zero) ? len - done : sizeof(zero);
        ssize_t w = pwrite(fd, zero, n, (off_t)done);

        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        if (w == 0)
            return -ENOSPC; /* nothing written and no error: the filesystem took no more */
        done += (size_t)w;
    }
    return 0;
}

int gs_shm_allocate(int fd, size_t len)
{
    int r;

    if (len == 0 || len > (size_t)INT64_MAX)
        return -EINVAL;
    /* posix_fallocate answers an errno value itself (errno is left alone). */
    do
        r = posix_fallocate(fd, 0, (off_t)len);
    while (r == EINTR);
    if (r == EOPNOTSUPP || r == ENOSYS || r == EINVAL)
        return write_zeros(fd, len);
    return -r;
}

/*
 * Checking the common header of a shared-memory segment (gpuslice/shm_abi.h)
 * before anything else of it is read.
 */
#ifndef GPUSLICE_COMMON_SHM_H
#define GPUSLICE_COMMON_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "gpuslice/shm_abi.h"

/*
 * Whether h (the first bytes of a file of file_size bytes) is a segment this
 * build can read: its magic, its major ABI version, a size of at least known
 * bytes (a later minor version may be larger) and within the file. Returns 0,
 * or GS_EABI with a message in err (when not NULL) that names the file (path,
 * what it should be: "tenant", "board") and both versions.
 */
int gs_shm_check(const struct gpuslice_shm_header *h, size_t file_size, uint64_t magic,
                 uint32_t major, size_t known, const char *what, const char *path, char *err,
                 size_t errlen);

/*
 * The same for the file at path, read with pread (it may be another user's):
 * 0, GS_EABI with the message, or a negative errno (also said in err).
 */
int gs_shm_check_file(const char *path, uint64_t magic, uint32_t major, size_t known,
                      const char *what, char *err, size_t errlen);

/*
 * Gives the new, empty file fd len bytes of real space, not a sparse hole: a
 * page of a hole that a full filesystem cannot back kills whoever first writes
 * it through a mapping (SIGBUS). Called before a file is mapped. 0, -ENOSPC
 * (or -EDQUOT) when the filesystem is full, or another negative errno. Where the
 * filesystem cannot allocate ahead, the file is written with zeros instead.
 */
int gs_shm_allocate(int fd, size_t len);

#endif

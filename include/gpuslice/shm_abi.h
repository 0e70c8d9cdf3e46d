/*
 * The header every gpuslice shared-memory segment opens with (tenants,
 * boards): magic, ABI version, size. The version has two parts: a major
 * version (the low 16 bits), changed when a layout changes in a way an older
 * reader would misread, and a minor version (the high 16 bits), changed when
 * fields are added at the end. A reader accepts any minor version of its
 * major whose size is at least what it knows, and reads only what it knows;
 * another major version is refused, with a message naming both versions and
 * the file.
 */
#ifndef GPUSLICE_SHM_ABI_H
#define GPUSLICE_SHM_ABI_H

#include <stddef.h>
#include <stdint.h>

#define GPUSLICE_ABI(major, minor) ((uint32_t)(major) | (uint32_t)(minor) << 16)
#define GPUSLICE_ABI_MAJOR(v) ((uint32_t)(v)&0xffffu)
#define GPUSLICE_ABI_MINOR(v) ((uint32_t)(v) >> 16)

struct gpuslice_shm_header {
    uint64_t magic;
    uint32_t abi_version; /* GPUSLICE_ABI(major, minor) of the writer */
    uint32_t size;        /* bytes of the segment as its writer laid it out */
};

_Static_assert(sizeof(struct gpuslice_shm_header) == 16, "segment header size");

/*
 * For a segment's layout: it opens with the common header (magic first, then
 * abi_version and size where the header has them), and its ABI_VERSION
 * define has the major version its ABI_MAJOR define says.
 */
#define GPUSLICE_SHM_LAYOUT_CHECK(type, version, major)                                            \
    _Static_assert(offsetof(type, magic) == offsetof(struct gpuslice_shm_header, magic) &&         \
                       offsetof(type, abi_version) ==                                              \
                           offsetof(struct gpuslice_shm_header, abi_version) &&                    \
                       offsetof(type, size) == offsetof(struct gpuslice_shm_header, size),         \
                   #type " opens with the common segment header");                                 \
    _Static_assert(GPUSLICE_ABI_MAJOR(version) == (major), #version "'s major is " #major)

#endif

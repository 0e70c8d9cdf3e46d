/*
 * A small open-addressing hash map from 64-bit keys (device pointers,
 * handles) to what the interposer charged for them. Not thread-safe: callers
 * hold the memory module's lock.
 */
#ifndef GPUSLICE_PRELOAD_MAP_H
#define GPUSLICE_PRELOAD_MAP_H

#include <stddef.h>
#include <stdint.h>

struct gs_map_entry {
    uint64_t key;
    uint64_t bytes; /* charged to the tenant */
    uint64_t aux;   /* context, handle, … by map */
    int32_t dev;    /* CUDA ordinal */
    uint32_t refs;  /* VMM: handle references */
    uint32_t maps;  /* VMM: live mappings */
    uint8_t state;  /* 0 empty, 1 used, 2 deleted */
};

struct gs_map {
    struct gs_map_entry *v;
    size_t cap, used, deleted;
};

/* Inserts or replaces key; returns the entry, or NULL when out of memory. */
struct gs_map_entry *gs_map_put(struct gs_map *m, uint64_t key);

/* The entry for key, or NULL. */
struct gs_map_entry *gs_map_get(struct gs_map *m, uint64_t key);

/* Removes e (from gs_map_get or iteration). */
void gs_map_del(struct gs_map *m, struct gs_map_entry *e);

#define GS_MAP_FOREACH(m, e)                                                                       \
    for ((e) = (m)->v; (m)->v && (e) < (m)->v + (m)->cap; (e)++)                                   \
        if ((e)->state == 1)

#endif

/* Open addressing with linear probing; rehashes at 50% load including tombstones. */
#include "preload/map.h"

#include <stdlib.h>
#include <string.h>

static size_t hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k;
}

static int grow(struct gs_map *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 256, i;
    struct gs_map_entry *nv, *old = m->v;

    if (m->used * 4 < m->cap)
        ncap = m->cap; /* mostly tombstones: rehash in place size */
    if ((nv = calloc(ncap, sizeof(*nv))) == NULL)
        return -1;
    for (i = 0; i < m->cap; i++) {
        if (old[i].state == 1) {
            size_t j = hash(old[i].key) & (ncap - 1);
            while (nv[j].state)
                j = (j + 1) & (ncap - 1);
            nv[j] = old[i];
        }
    }
    free(old);
    m->v = nv;
    m->cap = ncap;
    m->deleted = 0;
    return 0;
}

struct gs_map_entry *gs_map_get(struct gs_map *m, uint64_t key)
{
    size_t j;

    if (m->cap == 0)
        return NULL;
    for (j = hash(key) & (m->cap - 1); m->v[j].state; j = (j + 1) & (m->cap - 1))
        if (m->v[j].state == 1 && m->v[j].key == key)
            return &m->v[j];
    return NULL;
}

struct gs_map_entry *gs_map_put(struct gs_map *m, uint64_t key)
{
    struct gs_map_entry *e = gs_map_get(m, key);
    size_t j;

    if (e) {
        memset(e, 0, sizeof(*e));
        e->key = key;
        e->state = 1;
        return e;
    }
    if ((m->used + m->deleted + 1) * 2 > m->cap && grow(m) < 0)
        return NULL;
    for (j = hash(key) & (m->cap - 1); m->v[j].state == 1; j = (j + 1) & (m->cap - 1))
        ;
    if (m->v[j].state == 2)
        m->deleted--;
    e = &m->v[j];
    memset(e, 0, sizeof(*e));
    e->key = key;
    e->state = 1;
    m->used++;
    return e;
}

void gs_map_del(struct gs_map *m, struct gs_map_entry *e)
{
    e->state = 2;
    m->used--;
    m->deleted++;
}

/*
 * Composing a search-path variable with components to add (addpath.c).
 */
#ifndef GPUSLICE_ADDPATH_COMPOSE_H
#define GPUSLICE_ADDPATH_COMPOSE_H

/*
 * cur: the variable's value (NULL or "" when unset); add: the components to add, separated
 * by ':' (and ' ' where space_too, as LD_PRELOAD allows). Each non-empty component of add
 * that is not already a component of cur, nor an earlier one of add, is added: after cur
 * (prepend 0) or before it (prepend 1), in add's order, joined by ':'. Returns 1 with the new
 * value in *out (malloc'd), 0 when nothing changes (*out NULL), -ENOMEM.
 */
int gs_path_compose(const char *cur, const char *add, int prepend, int space_too, char **out);

#endif

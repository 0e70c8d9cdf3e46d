/*
 * The --device selection: turning what a person wrote (indexes and GPU
 * UUIDs) into the CUDA_VISIBLE_DEVICES a program is started with.
 */
#ifndef GPUSLICE_DEVLIST_H
#define GPUSLICE_DEVLIST_H

#include <stddef.h>

/* Far above any machine's GPU count; keeps an index's digits bounded. */
#define GS_DEVLIST_MAX_INDEX 65535

/*
 * CUDA_VISIBLE_DEVICES for the --device values args[0..nargs), each a
 * comma-separated list of indexes and UUIDs ("GPU-…", "MIG-…"). With visible
 * (the caller's own CUDA_VISIBLE_DEVICES) set, an index picks from it, so the
 * program sees a subset of what it would have seen; a UUID is passed through.
 * Returns 0 and a string for the caller to free in *out, or -EINVAL (-ENOMEM)
 * with a message naming --device in err.
 */
int gs_device_list(char **args, int nargs, const char *visible, char **out, char *err,
                   size_t errlen);

/* The number of comma-separated entries of list; 0 for "". */
int gs_device_list_count(const char *list);

#endif

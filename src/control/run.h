/*
 * Starting a program as a tenant: what gpuslice run and gpuslice exec were
 * asked (parsed by src/cli/launch.c) and the one code path that runs it
 * (control/run.c).
 */
#ifndef GPUSLICE_CONTROL_RUN_H
#define GPUSLICE_CONTROL_RUN_H

#include "common/parse.h"

struct run_spec {
    const char *memory, *compute, *name;
    const char *tenant; /* --tenant: a tenant of the daemon's to join (its limits are its own) */
    struct gs_limits mem_l, comp_l, sms_l; /* what --memory, --compute and --sms said */
    int mem_set, comp_set; /* mem_l / comp_l hold limits (from the options or the environment) */
    uint32_t priority;     /* --priority: GPUSLICE_PRIORITY_*, 0 = not given */
    uint32_t weight;       /* --weight: 1..100, 0 = not given */
    const char *priority_arg, *weight_arg; /* as given, for the environment */
    int sched_given; /* --priority or --weight given (not only the environment's) */
    const char *sms; /* GPUSLICE_SMS for the program (--sms, or --sm-share as PERCENT%) */
    char sm_share[8];
    char *devices; /* CUDA_VISIBLE_DEVICES for the program; NULL leaves it as it is */
    int nice, has_nice;
    int no_torch_priority; /* --no-torch-priority: PYTHONPATH is left alone */
    int gpu_share;         /* --gpu-share: 1..100, 0 without MPS */
    double filled;         /* --filled: the reservation's ratio, 0 without one */
    int mps_priority;      /* CUDA_MPS_CLIENT_PRIORITY: 0 normal, 1 below normal */
    char *mps_device;      /* the one GPU (an index or a UUID) the MPS client uses */
    const char *what;      /* the program as the user named it, for messages and the tenant */
    char **argv;           /* what is executed, NULL-terminated */
    char **python;         /* argv when built for a Python script (freed), else NULL */
};

/*
 * Starts the program of spec as a new tenant (or inside the enclosing one)
 * and waits for it; cmd names the command in messages. Returns the exit
 * status for gpuslice: the program's own, 128+N if it died of signal N,
 * GS_EXIT_USAGE when a device key or a nested limit is refused (nothing is
 * started), 126/127 if it cannot be run, GS_EXIT_ERROR if the tenant cannot
 * be set up.
 */
int run_program(const char *cmd, struct run_spec *spec);

/*
 * The directory of gpuslice's Python files (sitecustomize.py and the gpuslice package),
 * absolute: $GPUSLICE_PYTHON_DIR, else bin/../share/gpuslice/python beside this executable.
 * 0, or a negative errno with the path tried in out.
 */
int gs_python_dir(char *out, size_t len);

/* The interposer beside this executable (bin/../lib), or $GPUSLICE_PRELOAD_LIB: 0, or a
   negative errno with the path tried in out. */
int gs_preload_find(char *out, size_t len);

/* LD_PRELOAD with lib first, keeping what the user had (lib listed already: unchanged). 0 or
   -errno. */
int gs_set_preload(const char *lib);

/* PYTHONPATH with dir first, then what the user had (unchanged if dir is first): 0 or -errno. */
int gs_set_pythonpath(const char *dir);

#endif

/*
 * MPS (Multi-Process Service) helpers shared by `gpuslice mps` and
 * `gpuslice info`: where gpuslice keeps each GPU's MPS control daemon, whether
 * a daemon serves a pipe directory, and running nvidia-cuda-mps-control with
 * a timeout. Functions return 0 or a negative errno unless they say otherwise;
 * those that take err write a message for a person there on failure.
 */
#ifndef GPUSLICE_CONTROL_MPS_H
#define GPUSLICE_CONTROL_MPS_H

#include <stddef.h>
#include <sys/types.h>

#include "common/parse.h"

#define MPS_CONTROL "nvidia-cuda-mps-control"
#define MPS_DEFAULT_PIPE_DIR "/tmp/nvidia-mps"
#define MPS_PATH_MAX 4096

/* One GPU's daemon: its UUID ("GPU-…", lower-case hex) and its directories. */
struct mps_gpu {
    char uuid[GS_UUID_STRLEN];
    char dir[MPS_PATH_MAX - 16]; /* base/UUID (leaves room for "/pipe") */
    char pipe[MPS_PATH_MAX];     /* base/UUID/pipe: CUDA_MPS_PIPE_DIRECTORY */
    char log[MPS_PATH_MAX];      /* base/UUID/log: CUDA_MPS_LOG_DIRECTORY */
};

/*
 * The per-user base directory: $XDG_RUNTIME_DIR/gpuslice-mps when that
 * variable is an absolute path, else (unset, empty or relative)
 * /tmp/gpuslice-mps-EUID with the effective user ID in decimal.
 * -ENAMETOOLONG if it does not fit in len.
 */
int mps_base_dir(char *buf, size_t len);

/* Fills g's paths for uuid (already in canonical form). */
int mps_gpu_init(struct mps_gpu *g, const char *uuid);

/*
 * Checks base, base/UUID, pipe and log in turn: each must be a directory
 * (not a link) owned by the effective user with no group or other
 * permission bits. With create, a missing one is made with mode 0700;
 * without, a missing one is -ENOENT (with no message).
 */
int mps_gpu_dirs(const struct mps_gpu *g, int create, char *err, size_t errlen);

/*
 * The PID of an nvidia-cuda-mps-control process whose CUDA_MPS_PIPE_DIRECTORY
 * (default /tmp/nvidia-mps) is pipe_dir; 0 if none; -EACCES if none matched
 * but the environment of one (another user's) could not be read.
 */
pid_t mps_daemon_find(const char *pipe_dir);

/*
 * "running" when pipe_dir has its control endpoint and a daemon serves it
 * (or, unless own, one that may: another user's, whose environment cannot be
 * read), "not running" without the endpoint or, when own (gpuslice's own
 * directory of this user, which only this user's daemon can serve), without
 * a daemon of ours,
 * "unknown" otherwise (an endpoint no visible daemon serves, a directory that
 * cannot be read). A static string. It neither talks to the daemon nor asks
 * which GPUs it serves.
 */
const char *mps_state(const char *pipe_dir, int own);

/*
 * 0 where MPS can work: Linux, not WSL, nvidia-cuda-mps-control in $PATH
 * (its path in bin). Else -ENOSYS (platform) or -ENOENT (no binary).
 */
int mps_check_platform(char *bin, size_t binlen, char *err, size_t errlen);

/* The output of one nvidia-cuda-mps-control call (stdout and stderr together). */
struct mps_out {
    int status;    /* exit status; -1 if it timed out or died of a signal */
    int timed_out; /* killed after the timeout */
    char text[8192];
    size_t len;
};

#define MPS_TIMEOUT_MAX 600

/*
 * Seconds one call may take: $GPUSLICE_MPS_TIMEOUT, decimal seconds above 0
 * and at most MPS_TIMEOUT_MAX (0 means nothing sensible: every call would
 * time out at once), default 10 when unset or empty; -1, with a message
 * naming the variable and the accepted range, when it is set to anything else.
 */
double mps_timeout(void);

/*
 * Runs bin (nvidia-cuda-mps-control) with arg (e.g. "-d", or NULL) and input
 * written to its stdin, no shell, with CUDA_MPS_PIPE_DIRECTORY and
 * CUDA_MPS_LOG_DIRECTORY set to g's directories, CUDA_VISIBLE_DEVICES to its
 * UUID, and libgpuslice removed from LD_PRELOAD (the MPS server must see the
 * whole GPU). Kills its process group after timeout seconds. Returns 0 once
 * it ended (see out->status), or a negative errno if it could not be run.
 */
int mps_control(const char *bin, const struct mps_gpu *g, const char *arg, const char *input,
                double timeout, struct mps_out *out);

/*
 * Parses the PIDs in text (whitespace-separated; other words are skipped)
 * into *pids (malloc'd, the caller frees) and *n.
 */
int mps_parse_pids(const char *text, pid_t **pids, int *n);

/*
 * The UUID ("GPU-…") of CUDA device index as this process's driver numbers
 * it, or with index < 0 a check that uuid is a GPU, through
 * $GPUSLICE_REAL_LIBCUDA, else libcuda.so.1. Initialises CUDA in this
 * process: a process that forks afterwards cannot use CUDA in the child.
 */
int mps_driver_uuid(int index, char uuid[GS_UUID_STRLEN], char *err, size_t errlen);

/*
 * Makes g's directories (see mps_gpu_dirs) and reuses the daemon that answers
 * there, or starts one (nvidia-cuda-mps-control -d) and sets its default
 * active thread percentage to 100. *started says whether this call started
 * it (also set when a later step failed, so the caller can stop it).
 */
int mps_daemon_start(const char *bin, const struct mps_gpu *g, double timeout, int *started,
                     char *err, size_t errlen);

/* Sends quit to g's daemon and waits (timeout) until it is gone. */
int mps_daemon_stop(const char *bin, const struct mps_gpu *g, double timeout, char *err,
                    size_t errlen);

/* Small clocks shared by the MPS commands. */
void mps_sleep_ms(int ms);
double mps_now_s(void);

#endif

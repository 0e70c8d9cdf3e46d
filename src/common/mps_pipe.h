/*
 * Where an MPS control daemon listens: the one test of whether a pipe
 * directory has a running daemon's endpoint, shared by the CLI (mps) and the
 * interposer (whether this process is an MPS client).
 */
#ifndef GPUSLICE_MPS_PIPE_H
#define GPUSLICE_MPS_PIPE_H

#include <stdio.h>
#include <sys/stat.h>

/*
 * 1 if pipe_dir holds an MPS control daemon's endpoint "control": a socket
 * (NVIDIA's daemon), or a FIFO (the tests' stand-in), where the driver looks.
 */
static inline int gs_mps_control_at(const char *pipe_dir)
{
    char path[4096];
    struct stat st;

    if (snprintf(path, sizeof(path), "%s/control", pipe_dir) >= (int)sizeof(path))
        return 0;
    return stat(path, &st) == 0 && (S_ISSOCK(st.st_mode) || S_ISFIFO(st.st_mode));
}

#endif

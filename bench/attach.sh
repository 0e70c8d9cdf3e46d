#!/usr/bin/env bash
# Many processes of one tenant attaching at once (issue 12, defect 3): N processes (default
# 256) started together behind a barrier under one `gpuslice run --memory SIZE`, each
# initialising CUDA, making a context current and allocating ALLOC MiB (default 64); prints
# the attach-time distribution (median, p99, max), how many were refused, and the tenant's
# accounted usage against the device's own change (NVML outside the interposer). Goal: every
# process attaches in under 1 s, none is refused, accounting within 64 MiB. See
# bench/attach.py for the details; the launcher is bench/attach.c, built here with gcc (it
# loads libcuda.so.1 with dlopen, so it needs no CUDA headers).
#
# usage: bench/attach.sh [-n N] [--alloc-mib M] [--memory SIZE|auto] [--native] [--table FILE]
#        bench/attach.sh --build            only build the launcher
# env:   GPU_BUILD_DIR (build-gpu: gpuslice from there, the launcher into its gpu/),
#        CC (gcc), PYTHON (python3)
# On the simulated GPU: GPU_BUILD_DIR=build LD_LIBRARY_PATH=build/lib/sim \
#        GPUSLICE_SIM_STATE=/tmp/sim-attach GPUSLICE_SIM_MEMORY=64G bench/attach.sh -n 16
# (a fresh state file: an existing one keeps its geometry; 256 processes of 64 + 64 MiB need
# 32 GiB of simulated memory; the simulator keeps at most 128 processes).
# On an H200 a context takes about 518 MiB: 256 of them need --memory auto and a small
# --alloc-mib (tests/gpu/run.sh uses -n 256 --alloc-mib 8 --memory auto --native).
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${GPU_BUILD_DIR:-build-gpu}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
BIN=$BUILD/gpu/attach
SRC=$ROOT/bench/attach.c

build() {
    mkdir -p "$(dirname "$BIN")" && "${CC:-gcc}" -O2 -Wall -o "$BIN" "$SRC" -ldl
}

if [ "${1:-}" = --build ]; then
    build
    exit
fi
if [ ! -x "$BIN" ] || [ "$SRC" -nt "$BIN" ]; then
    build || { echo "@fail cannot build $SRC with ${CC:-gcc}"; exit 1; }
fi
export GPU_BUILD_DIR=$BUILD PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
exec "${PYTHON:-python3}" "$ROOT/bench/attach.py" --launcher "$BIN" "$@"

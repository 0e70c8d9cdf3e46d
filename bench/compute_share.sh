#!/usr/bin/env bash
# Compute-ceiling benchmark: builds bench/compute_small.cu into $GPU_BUILD_DIR/gpu/ (when
# missing or older than its source) and runs bench/compute_share.py, which judges each
# ceiling of `gpuslice run --compute P` by the share of the device's time the tenant held
# (gpuslice's own busy count and NVML sampled outside the tenant) for PyTorch and CUDA C
# workloads, two tenants at once, and `gpuslice set` on a running tenant; host-bound
# workloads (small kernels launched one by one) under their ceiling by their rate and NVML
# share against themselves native. See compute_share.py for what it runs and prints.
# Takes about 5 minutes with the defaults (3 repeats of 2 s phases; about 7 with
# --interleave, which the host-bound workloads want); it prints its expected duration first.
#
# usage: bench/compute_share.sh [compute_share.py options]   e.g. --only gemm,pair --repeats 2
#        e.g. --only small,cuda-small --interleave --ceilings-small 100,75,15
#        bench/compute_share.sh --build                     only compile compute_small
# env:   GPU_BUILD_DIR (build-gpu), GPUSLICE_BIN (default $GPU_BUILD_DIR/bin/gpuslice),
#        NVCC, PYTHON (python3), OUT (also write bench-compute.md and .json there)
# Output: progress, tables, and check lines ("@ok", "@fail", "@key", "@num") that
# tests/gpu/report.py reads when tests/gpu/run.sh runs this as its compute_share check.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${GPU_BUILD_DIR:-build-gpu}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
BIN=$BUILD/gpu/compute_small
SRC=$ROOT/bench/compute_small.cu
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
PY=${PYTHON:-python3}

build() {
    mkdir -p "$(dirname "$BIN")" && "$NVCC" -arch=sm_90 -O2 -o "$BIN" "$SRC"
}

if [ "${1:-}" = --build ]; then
    build
    exit
fi
if [ ! -x "$BIN" ] || [ "$SRC" -nt "$BIN" ]; then
    if ! build; then
        # The PyTorch sections still run; the cuda-rt rows fail with "not built".
        echo "@fail cannot compile $SRC with $NVCC"
        rm -f "$BIN"
    fi
fi
GPUSLICE_BIN=${GPUSLICE_BIN:-$BUILD/bin/gpuslice}
[ -x "$GPUSLICE_BIN" ] || { echo "@fail missing $GPUSLICE_BIN (build gpuslice into $BUILD first)"; exit 1; }
export GPUSLICE_BIN PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
exec "$PY" "$ROOT/bench/compute_share.py" --gpuslice "$GPUSLICE_BIN" --compute-small "$BIN" "$@"

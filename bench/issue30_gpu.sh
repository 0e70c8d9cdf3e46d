#!/usr/bin/env bash
# Issue 30's measurements on one GPU, one after another, each into DIR (default
# /tmp/issue30): the whole GPU suite (tests/gpu/run.sh: small kernels and GEMM under
# ceilings, SM splits 10/20/30/40 and 5 x 20 through procs and green-run), what the duty gets
# from NVML's device samples and makes of them (bench/duty_probe.sh), the latency table
# with a GEMM latency job (yield partitions of 96, 64 and 48 SMs beside NVIDIA's MPS rows, and
# a client killed mid-kernel), the PyTorch launch pairs, and the latency table with a
# transformers generate job. Each step's output is DIR/<step>.txt; DIR/done names the steps
# finished. Meant to be started detached (setsid) where one command may run for less time
# than the whole takes, and collected later.
#
# usage: bench/issue30_gpu.sh [DIR]
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${1:-/tmp/issue30}
PY=${PYTHON:-python3}
mkdir -p "$DIR" || exit 1
cd "$ROOT" || exit 1
export PYTHONUNBUFFERED=1
: >"$DIR/done"
step() {
    local name=$1 t0
    shift
    t0=$(date +%s)
    echo "=== $name start $(date -u +%H:%M:%S)" >"$DIR/$name.txt"
    "$@" >>"$DIR/$name.txt" 2>&1
    echo "=== $name exit $? after $(($(date +%s) - t0)) s" | tee -a "$DIR/$name.txt" >>"$DIR/done"
}
GS=$ROOT/build-gpu/bin/gpuslice
# The suite builds build-gpu first; the steps after it use that build.
step suite env OUT="$DIR/suite" GPU_SUITE_BUDGET="${ISSUE30_SUITE_BUDGET:-1100}" tests/gpu/run.sh
step duty_probe bench/duty_probe.sh
step contention "$PY" bench/contention.py --gpuslice "$GS" --seconds 2.5 --repeats 2 \
    --only solo-latency,solo-background,time-sliced,mps,mps-priority,mps-threads50,gs-priority,mps-gs-priority,mps-gs-priority-y64,mps-gs-priority-y48 \
    --faults latency-dies-mps,latency-dies --out "$DIR/contention-gemm"
step launch_torch env BENCH_TABLE="$DIR/launch-torch.md" BENCH_PAIRS=8 BENCH_BUDGET=150 \
    bench/launch_torch.sh
step generate "$PY" bench/contention.py --gpuslice "$GS" --latency-job generate --repeats 2 \
    --only solo-latency,solo-background,time-sliced,mps,mps-priority,mps-threads50,gs-priority,mps-gs-priority,mps-gs-priority-y64 \
    --out "$DIR/contention-generate"
echo "=== all done $(date -u +%H:%M:%S)" >>"$DIR/done"

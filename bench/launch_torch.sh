#!/usr/bin/env bash
# The interposer's and the governor's cost on a PyTorch launch-bound loop (issue 30, point 2):
# bench/torch_small_serve.py (eager in-place ops on a 64K- and a 1K-element tensor, one kernel
# each, launched one by one) as interleaved pairs by bench/launch_pairs.py: each pair is one
# fresh process per configuration, started together, sampled in turn (A B C ..., rotating),
# BENCH_SAMPLES samples of BENCH_LAUNCHES ops per kind each. Configurations:
#   native      no interposer
#   preload     LD_PRELOAD=libgpuslice.so only (no tenant, no limit)
#   run         gpuslice run -- (a tenant with no limit: the launch hooks read one flag)
#   memory      gpuslice run --memory 8G
#   compute90   gpuslice run --compute 90 (a ceiling the loop, at about a fifth of the GPU's
#               time, never reaches: its launches are governed, its kernels' time billed)
# A pair's ratio is its process's median µs per op over the native one's; the verdict is on
# the median of the pairs' ratios with a 95 % bootstrap interval: FAIL only when the whole
# interval lies above 1 + BENCH_TOLERANCE (2 %).
#
# usage: bench/launch_torch.sh
# env:   GPU_BUILD_DIR (build-gpu), BENCH_PAIRS (12), BENCH_SAMPLES (3), BENCH_LAUNCHES (20000),
#        BENCH_TOLERANCE (0.02), BENCH_CPUS (2-9: every process may use these; they start
#        together, importing torch, and are sampled one at a time), BENCH_BUDGET (seconds, 0 = none),
#        BENCH_TABLE (also write the table there), PYTHON
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${GPU_BUILD_DIR:-build-gpu}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
GS=$BUILD/bin/gpuslice
LIB=$BUILD/lib/libgpuslice.so
PY=${PYTHON:-python3}
[ $# -eq 0 ] || { echo "usage: bench/launch_torch.sh (settings in the environment)" >&2; exit 2; }
for f in "$GS" "$LIB"; do
    [ -e "$f" ] || { echo "@fail $f is not built"; exit 1; }
done
export GPUSLICE_RUN_DIR=${GPUSLICE_RUN_DIR:-$(mktemp -d)}
exec "$PY" "$ROOT/bench/launch_pairs.py" --bin "$PY $ROOT/bench/torch_small_serve.py" \
    --apis "small=PyTorch op on 64K elements,tiny=PyTorch op on 1K elements" \
    --title "PyTorch eager op (one small kernel)" --prefix torch_ \
    --pairs "${BENCH_PAIRS:-12}" --min-pairs "$(((${BENCH_PAIRS:-12} + 1) / 2))" \
    --samples "${BENCH_SAMPLES:-3}" --launches "${BENCH_LAUNCHES:-20000}" --warmup 2000 \
    --tolerance "${BENCH_TOLERANCE:-0.02}" --cpus "${BENCH_CPUS-2-9}" \
    --budget "${BENCH_BUDGET:-0}" ${BENCH_TABLE:+--table "$BENCH_TABLE"} \
    --config native= \
    --config "preload=env LD_PRELOAD=$LIB" \
    --config "run=$GS run -q --" \
    --config "memory=$GS run -q --memory 8G --" \
    --config "compute90=$GS run -q --compute 90 --"

#!/usr/bin/env bash
# Launch-overhead benchmark: the host cost of an empty-kernel launch (runtime API <<<>>> and
# driver API cuLaunchKernel through cuGetProcAddress) natively, through the interposer with
# no limit (LD_PRELOAD only), and through the interposer with a memory limit
# (gpuslice run --memory 8G), measured as interleaved pairs by bench/launch_pairs.py: each
# pair is one fresh process of the same binary per configuration, started together and
# sampled in turn (A B C, BENCH_SAMPLES samples of BENCH_LAUNCHES launches per API each);
# a pair's ratio is its interposed process's median over its native one's. The verdict is on
# the median of BENCH_PAIRS pairs' ratios with a 95 % bootstrap confidence interval (2000
# resamples): FAIL only when the whole interval lies above 1 + BENCH_TOLERANCE (2 %). About
# 40 s on an H200 (estimated).
#
# With --duty it measures the cost of launching under a compute ceiling that is accounted but
# does not bind: the program launches in bursts (BENCH_BURST launches, then
# cudaDeviceSynchronize and a sleep as long as the burst, so the device is about half busy),
# timing the bursts only, natively and under gpuslice run --compute BENCH_DUTY_CEILING (95);
# bound 1 + BENCH_TOLERANCE (5 % in this mode). About 40 s (estimated).
#
# usage: bench/launch_overhead.sh          run (from anywhere; needs build-gpu/ built)
#        bench/launch_overhead.sh --duty   the duty-cycled comparison under a compute ceiling
#        bench/launch_overhead.sh --build  only compile build-gpu/gpu/launch_overhead
# env:   GPU_BUILD_DIR (build-gpu), BENCH_PAIRS (40), BENCH_SAMPLES (1),
#        BENCH_LAUNCHES (10000), BENCH_BURST (--duty: 2000), BENCH_DUTY_CEILING (--duty: 95),
#        BENCH_TOLERANCE (0.02; --duty 0.05), BENCH_CPUS (2,3: every process on these two
#        cores), BENCH_BUDGET (seconds; 0 = none), BENCH_TABLE (also write the markdown table
#        to this file), NVCC, PYTHON
# Output: progress, the table, and check lines ("@ok", "@fail", "@key", "@num") that
# tests/gpu/report.py reads when tests/gpu/run.sh runs this as its bench_launch check.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${GPU_BUILD_DIR:-build-gpu}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
BIN=$BUILD/gpu/launch_overhead
SRC=$ROOT/bench/launch_overhead.cu
GS=$BUILD/bin/gpuslice
LIB=$BUILD/lib/libgpuslice.so
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
PY=${PYTHON:-python3}
MODE=plain
[ "${1:-}" = --duty ] && MODE=duty

build() {
    mkdir -p "$(dirname "$BIN")" && "$NVCC" -arch=sm_90 -O2 -o "$BIN" "$SRC"
}

case ${1:-} in
--build)
    build
    exit
    ;;
--duty | "") ;;
*)
    echo "usage: bench/launch_overhead.sh [--duty | --build]" >&2
    exit 2
    ;;
esac
if [ ! -x "$BIN" ] || [ "$SRC" -nt "$BIN" ]; then
    build || { echo "@fail cannot compile $SRC with $NVCC"; exit 1; }
fi
for f in "$GS" "$LIB"; do
    [ -e "$f" ] || { echo "@fail missing $f (build gpuslice into $BUILD first)"; exit 1; }
done

common=(--bin "$BIN" --pairs "${BENCH_PAIRS:-40}" --launches "${BENCH_LAUNCHES:-10000}"
    --cpus "${BENCH_CPUS-2,3}" --budget "${BENCH_BUDGET:-0}" --table "${BENCH_TABLE:-}"
    --config native=)
if [ "$MODE" = duty ]; then
    ceil=${BENCH_DUTY_CEILING:-95}
    burst=${BENCH_BURST:-2000}
    exec "$PY" "$ROOT/bench/launch_pairs.py" "${common[@]}" --duty --burst "$burst" \
        --samples "${BENCH_SAMPLES:-1}" --tolerance "${BENCH_TOLERANCE:-0.05}" --prefix duty_ \
        --config "capped=$(printf '%q' "$GS") run --compute $ceil --" \
        --label "capped=gpuslice run --compute $ceil" \
        --title "empty-kernel launch inside bursts of $burst launches, each followed by an equal sleep (about 50% of the device busy, so a $ceil% ceiling does not bind)"
fi
exec "$PY" "$ROOT/bench/launch_pairs.py" "${common[@]}" --samples "${BENCH_SAMPLES:-1}" \
    --tolerance "${BENCH_TOLERANCE:-0.02}" \
    --config "preload=env LD_PRELOAD=$(printf '%q' "$LIB")" \
    --label "preload=LD_PRELOAD, no limit" \
    --config "limited=$(printf '%q' "$GS") run --memory 8G --" \
    --label "limited=gpuslice run --memory 8G"

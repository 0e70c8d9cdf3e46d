#!/usr/bin/env bash
# Where a launch-bound program's time goes under a compute ceiling, in one process:
# bench/launch_trace.cu runs under `gpuslice run` and changes its own ceiling between phases
# (uncapped before each ceiling, REPEATS times). One table row per phase: launch rate and its
# ratio to the uncapped phase before it, bursts, the share of time in bursts, waits and
# synchronisation, the launch rate inside bursts by position after a wait, and gpuslice's own
# busy share of the tenant over the phase.
#
# usage: bench/launch_trace.sh [--ceilings 50,90] [--repeats 4] [--seconds 0.5] [--settle 0.1]
# env:   GPUSLICE_BIN (build-gpu/bin/gpuslice), GPU_BUILD_DIR (build-gpu), NVCC,
#        BENCH_CPUS (14,15: taskset -c for the program; empty for none), GPUSLICE_VARIANT
#        (a name for the first column, set by bench/compute_variants.sh)
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${GPU_BUILD_DIR:-build-gpu}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
GS=${GPUSLICE_BIN:-$BUILD/bin/gpuslice}
BIN=$BUILD/gpu/launch_trace
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CEILINGS=50,90 REPEATS=4 SECS=0.5 SETTLE=0.1
while [ $# -gt 0 ]; do
    case $1 in
    --ceilings) CEILINGS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    --settle) SETTLE=$2; shift 2 ;;
    *)
        echo "usage: bench/launch_trace.sh [--ceilings LIST] [--repeats N] [--seconds S] [--settle S]" >&2
        exit 2
        ;;
    esac
done
if [ ! -x "$BIN" ] || [ "$ROOT/bench/launch_trace.cu" -nt "$BIN" ]; then
    mkdir -p "$(dirname "$BIN")" &&
        "$NVCC" -arch=sm_90 -O2 -o "$BIN" "$ROOT/bench/launch_trace.cu" || exit 1
fi
[ -x "$GS" ] || { echo "launch_trace: missing $GS" >&2; exit 1; }
PIN=()
CPUS=${BENCH_CPUS-14,15}
[ -n "$CPUS" ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 8 ] && PIN=(taskset -c "$CPUS")

phases=
IFS=, read -r -a CS <<<"$CEILINGS"
for ((r = 0; r < REPEATS; r++)); do
    for c in "${CS[@]}"; do phases=$phases${phases:+,}none,$c; done
done
phases=$phases,none
echo "| variant | ceiling | launches/s | vs uncapped before | bursts | burst % | wait % | sync % | in-burst /s | 0-100us | 0.1-0.5ms | 0.5-2ms | 2ms+ | gpuslice busy % |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
GPUSLICE_BIN=$GS "$GS" run -q --compute 100 -- "${PIN[@]}" "$BIN" --phases "$phases" \
    --seconds "$SECS" --settle "$SETTLE" 2>&1 |
    awk -v v="${GPUSLICE_VARIANT:-}" '
    $1 == "trace" {
        if ($2 == "none") base = $5
        vs = base > 0 && $2 != "none" ? sprintf("%.3f", $5 / base) : "-"
        busy = $15 >= 0 ? sprintf("%.1f", 100 * $15) : "-"
        printf "| %s | %s | %.0f | %s | %d | %.1f | %.1f | %.1f | %.0f | %.0f | %.0f | %.0f | %.0f | %s |\n",
            v, $2, $5, vs, $6, 100 * $7, 100 * $8, 100 * $14, $9, $10, $11, $12, $13, busy
        next
    }
    { print "  " $0 }'

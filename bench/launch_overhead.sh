#!/usr/bin/env bash
# Launch-overhead benchmark: the host cost of an empty-kernel launch (runtime API <<<>>> and
# driver API cuLaunchKernel through cuGetProcAddress) natively, through the interposer with
# no limit (LD_PRELOAD only), and through the interposer with a memory limit
# (gpuslice run --memory 8G). The three configurations run as alternating processes
# (BENCH_PROCS each, the order rotating), each process timing BENCH_ROUNDS rounds of
# BENCH_LAUNCHES launches per API after a warm-up; the medians per configuration are compared
# and the run passes when both interposer configurations are within BENCH_TOLERANCE (2%) of
# native for both APIs. Takes about a minute on an H200.
#
# With --duty it measures the cost of launching under a compute ceiling that is accounted but
# does not bind: the program launches in bursts (BENCH_BURST launches, then
# cudaDeviceSynchronize and a sleep as long as the burst, so the device is about half busy),
# timing the bursts only, natively and under gpuslice run --compute 95; it passes when the
# ceiling costs at most BENCH_TOLERANCE (5% in this mode) for both APIs.
#
# usage: bench/launch_overhead.sh          run (from anywhere; needs build-gpu/ built)
#        bench/launch_overhead.sh --duty   the duty-cycled comparison under a compute ceiling
#        bench/launch_overhead.sh --build  only compile build-gpu/gpu/launch_overhead
# env:   GPU_BUILD_DIR (build-gpu), BENCH_PROCS (10; --duty 8), BENCH_ROUNDS (3),
#        BENCH_LAUNCHES (100000; --duty 50000), BENCH_BURST (--duty: 2000),
#        BENCH_DUTY_CEILING (--duty: 95), BENCH_TOLERANCE (0.02; --duty 0.05),
#        BENCH_TABLE (also write the markdown table to this file), NVCC
# Output: progress, the table, and check lines ("@ok", "@fail", "@key") that
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
if [ "$MODE" = duty ]; then
    PROCS=${BENCH_PROCS:-8}
    ROUNDS=${BENCH_ROUNDS:-3}
    LAUNCHES=${BENCH_LAUNCHES:-50000}
    TOL=${BENCH_TOLERANCE:-0.05}
    BURST=${BENCH_BURST:-2000}
    CEIL=${BENCH_DUTY_CEILING:-95}
else
    PROCS=${BENCH_PROCS:-10}
    ROUNDS=${BENCH_ROUNDS:-3}
    LAUNCHES=${BENCH_LAUNCHES:-100000}
    TOL=${BENCH_TOLERANCE:-0.02}
fi

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

TMP=$(mktemp -d "${TMPDIR:-/tmp}/gpuslice-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
SAMPLES=$TMP/samples

# run_config CONFIG ROUNDS LAUNCHES [keep]: one process of CONFIG; its samples are kept
# (appended to $SAMPLES as "CONFIG API US") only when the fourth argument is "keep".
run_config() {
    local cfg=$1 rounds=$2 launches=$3 keep=${4:-} rc
    local -a cmd args=("$rounds" "$launches" 20000)
    case $cfg in
    native) cmd=("$BIN") ;;
    preload) cmd=(env LD_PRELOAD="$LIB" "$BIN") ;;
    limited) cmd=("$GS" run --memory 8G -- "$BIN") ;;
    capped) cmd=("$GS" run --compute "$CEIL" -- "$BIN") ;;
    esac
    [ "$MODE" = duty ] && args=(duty "$rounds" "$launches" 20000 "$BURST")
    # Every process on the same two cores: placement noise between processes is larger
    # than the effect measured.
    if command -v taskset >/dev/null 2>&1; then cmd=(taskset -c "${BENCH_CPUS:-2,3}" "${cmd[@]}"); fi
    timeout -k 5 60 "${cmd[@]}" "${args[@]}" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "@fail $cfg: the benchmark process exited $rc: $(tail -n 3 "$TMP/err" | tr '\n' ' ')"
        return 1
    fi
    [ "$keep" = keep ] && awk -v c="$cfg" '$1 == "sample" { print c, $2, $3 }' "$TMP/out" >>"$SAMPLES"
    return 0
}

CONFIGS=(native preload limited)
[ "$MODE" = duty ] && CONFIGS=(native capped)
NCFG=${#CONFIGS[@]}
start=$(date +%s)
echo "launch overhead${BURST:+ (duty-cycled: bursts of $BURST launches, each followed by an equal sleep)}:" \
    "$PROCS processes x $ROUNDS rounds x $LAUNCHES launches per API and configuration"
failed=0
for cfg in "${CONFIGS[@]}"; do # warm-up, discarded
    run_config "$cfg" 1 20000 || failed=1
done
for ((p = 0; p < PROCS; p++)); do
    for ((i = 0; i < NCFG; i++)); do
        cfg=${CONFIGS[$(((p + i) % NCFG))]}
        run_config "$cfg" "$ROUNDS" "$LAUNCHES" keep || failed=1
    done
    echo "  process set $((p + 1))/$PROCS done ($(($(date +%s) - start)) s)"
done
[ "$failed" -eq 0 ] || echo "@note some benchmark processes failed; medians use what ran"

"$PY" - "$SAMPLES" "$TOL" "$LAUNCHES" "${BENCH_TABLE:-}" "${CONFIGS[*]}" "$MODE" \
    "${BURST:-0}" "${CEIL:-0}" <<'EOF'
import statistics
import sys

path, tol, launches, table_path = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
configs, mode, burst, ceil = sys.argv[5].split(), sys.argv[6], int(sys.argv[7]), sys.argv[8]
data = {}
try:
    with open(path) as f:
        for line in f:
            cfg, api, us = line.split()
            data.setdefault((cfg, api), []).append(float(us))
except FileNotFoundError:
    pass
names = {"native": "native", "preload": "LD_PRELOAD, no limit", "limited": "gpuslice run --memory 8G",
         "capped": f"gpuslice run --compute {ceil}"}
prefix = "duty_" if mode == "duty" else ""  # headline names of the duty-cycled run
apis = ("runtime", "driver")
med = {k: statistics.median(v) for k, v in data.items()}
rows = ["| configuration | runtime <<<>>> µs/launch | vs native | driver cuLaunchKernel µs/launch "
        "| vs native | samples |", "|---|---|---|---|---|---|"]
verdicts = []
for cfg in configs:
    cells = []
    for api in apis:
        m = med.get((cfg, api))
        n = med.get(("native", api))
        if m is None:
            cells += ["-", "-"]
            continue
        v = data[(cfg, api)]
        spread = f" ({min(v):.3f}-{max(v):.3f})"
        cells.append(f"{m:.3f}{spread}")
        if n:
            ratio = m / n
            cells.append(f"{ratio:.4f}")
            print(f"@key {prefix}{api}_{cfg}_us {m:.4f}")
            if cfg != "native":
                print(f"@key {prefix}{api}_{cfg}_ratio {ratio:.4f}")
                verdicts.append((ratio <= 1 + tol, f"{names[cfg]}, {api} API: median "
                                 f"{m:.3f} µs vs native {n:.3f} µs, ratio {ratio:.4f} "
                                 f"(at most +{tol:.0%})"))
        else:
            cells.append("-")
    count = min((len(data.get((cfg, a), [])) for a in apis), default=0)
    rows.append(f"| {names[cfg]} | " + " | ".join(cells) + f" | {count} |")
what = "empty-kernel launch"
if mode == "duty":
    what = (f"empty-kernel launch inside bursts of {burst} launches, each followed by an equal "
            f"sleep (about 50% of the device busy, so a {ceil}% ceiling does not bind)")
table = (f"Median host time per {what} ({launches} launches a sample; "
         f"min-max in brackets); pass: at most {tol:.0%} above native.\n\n" + "\n".join(rows))
print(table)
if table_path:
    with open(table_path, "w") as f:
        f.write(table + "\n")
if len(verdicts) != 2 * (len(configs) - 1):
    print("@fail not every configuration produced samples")
for good, text in verdicts:
    print(("@ok " if good else "@fail ") + text)
EOF

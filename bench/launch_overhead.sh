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
# usage: bench/launch_overhead.sh          run (from anywhere; needs build-gpu/ built)
#        bench/launch_overhead.sh --build  only compile build-gpu/gpu/launch_overhead
# env:   GPU_BUILD_DIR (build-gpu), BENCH_PROCS (6), BENCH_ROUNDS (3), BENCH_LAUNCHES (100000),
#        BENCH_TOLERANCE (0.02), BENCH_TABLE (also write the markdown table to this file), NVCC
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
PROCS=${BENCH_PROCS:-10}
ROUNDS=${BENCH_ROUNDS:-3}
LAUNCHES=${BENCH_LAUNCHES:-100000}
TOL=${BENCH_TOLERANCE:-0.02}
PY=${PYTHON:-python3}

build() {
    mkdir -p "$(dirname "$BIN")" && "$NVCC" -arch=sm_90 -O2 -o "$BIN" "$SRC"
}

if [ "${1:-}" = --build ]; then
    build
    exit
fi
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
    local -a cmd
    case $cfg in
    native) cmd=("$BIN") ;;
    preload) cmd=(env LD_PRELOAD="$LIB" "$BIN") ;;
    limited) cmd=("$GS" run --memory 8G -- "$BIN") ;;
    esac
    # Every process on the same two cores: placement noise between processes is larger
    # than the effect measured.
    if command -v taskset >/dev/null 2>&1; then cmd=(taskset -c "${BENCH_CPUS:-2,3}" "${cmd[@]}"); fi
    timeout -k 5 60 "${cmd[@]}" "$rounds" "$launches" 20000 >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "@fail $cfg: the benchmark process exited $rc: $(tail -n 3 "$TMP/err" | tr '\n' ' ')"
        return 1
    fi
    [ "$keep" = keep ] && awk -v c="$cfg" '$1 == "sample" { print c, $2, $3 }' "$TMP/out" >>"$SAMPLES"
    return 0
}

CONFIGS=(native preload limited)
start=$(date +%s)
echo "launch overhead: $PROCS processes x $ROUNDS rounds x $LAUNCHES launches per API and configuration"
failed=0
for cfg in "${CONFIGS[@]}"; do # warm-up, discarded
    run_config "$cfg" 1 20000 || failed=1
done
for ((p = 0; p < PROCS; p++)); do
    for ((i = 0; i < 3; i++)); do
        cfg=${CONFIGS[$(((p + i) % 3))]}
        run_config "$cfg" "$ROUNDS" "$LAUNCHES" keep || failed=1
    done
    echo "  process set $((p + 1))/$PROCS done ($(($(date +%s) - start)) s)"
done
[ "$failed" -eq 0 ] || echo "@note some benchmark processes failed; medians use what ran"

"$PY" - "$SAMPLES" "$TOL" "$LAUNCHES" "${BENCH_TABLE:-}" <<'EOF'
import statistics
import sys

path, tol, launches, table_path = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
data = {}
try:
    with open(path) as f:
        for line in f:
            cfg, api, us = line.split()
            data.setdefault((cfg, api), []).append(float(us))
except FileNotFoundError:
    pass
names = {"native": "native", "preload": "LD_PRELOAD, no limit", "limited": "gpuslice run --memory 8G"}
apis = ("runtime", "driver")
med = {k: statistics.median(v) for k, v in data.items()}
rows = ["| configuration | runtime <<<>>> µs/launch | vs native | driver cuLaunchKernel µs/launch "
        "| vs native | samples |", "|---|---|---|---|---|---|"]
verdicts = []
for cfg in ("native", "preload", "limited"):
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
            print(f"@key {api}_{cfg}_us {m:.4f}")
            if cfg != "native":
                print(f"@key {api}_{cfg}_ratio {ratio:.4f}")
                verdicts.append((ratio <= 1 + tol, f"{names[cfg]}, {api} API: median "
                                 f"{m:.3f} µs vs native {n:.3f} µs, ratio {ratio:.4f} "
                                 f"(at most +{tol:.0%})"))
        else:
            cells.append("-")
    count = min((len(data.get((cfg, a), [])) for a in apis), default=0)
    rows.append(f"| {names[cfg]} | " + " | ".join(cells) + f" | {count} |")
table = (f"Median host time per empty-kernel launch ({launches} launches a sample; "
         f"min-max in brackets); pass: at most {tol:.0%} above native.\n\n" + "\n".join(rows))
print(table)
if table_path:
    with open(table_path, "w") as f:
        f.write(table + "\n")
if len(verdicts) != 4:
    print("@fail not every configuration produced samples")
for good, text in verdicts:
    print(("@ok " if good else "@fail ") + text)
EOF

#!/usr/bin/env bash
# The real-GPU suite: builds gpuslice and the CUDA test programs, records the machine, runs
# every check below with its own timeout inside an overall time budget, prints a summary
# table and writes gpu-summary.md, gpu-results.json, gpu-log.txt, driver-facts.txt and the
# benchmarks' tables (bench-launch.md, bench-launch-duty.md, bench-attach.md,
# bench-compute.md, bench-compute-small.md and the JSON beside each compute table, the
# host-bound workloads' picture bench-compute-small.svg (.png with rsvg-convert), the SM
# tables) to $OUT when it is set.
# Exit status 0 only when no check failed (a KNOWN shortfall or a SKIP fails it only with
# GPU_SUITE_STRICT=1; an informational check never does). See tests/gpu/README.md.
#
# usage: tests/gpu/run.sh [--only REGEX]     run the suite (or the checks whose name matches)
#        tests/gpu/run.sh --list             list the checks
#        tests/gpu/run.sh --check FUNCTION   run one check function (used internally)
# env:   GPU_BUILD_DIR (build-gpu), GPU_SUITE_BUDGET (seconds for everything, 780),
#        GPU_SUITE_STRICT=1 (a SKIP fails the run too), GPU_CMAKE_ARGS (extra cmake options,
#        default "-DGPUSLICE_WERROR=OFF -DGPUSLICE_SIM=OFF"), PYTHON (python3), NVCC, OUT
# The check functions are called by name (run.sh --check FUNCTION):
# shellcheck disable=SC2317
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SELF=$HERE/run.sh
cd "$ROOT" || exit 1

BUILD=${GPU_BUILD_DIR:-build-gpu}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
GS=$BUILD/bin/gpuslice
LIB=$BUILD/lib/libgpuslice.so
GPUBIN=$BUILD/gpu
PY=${PYTHON:-python3}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$NVCC")")")}
BUDGET=${GPU_SUITE_BUDGET:-780}
GiB=1073741824
export GPU_BUILD_DIR=$BUILD PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH=$HERE${PYTHONPATH:+:$PYTHONPATH}

# Nothing from the caller's environment may preload, limit or reconfigure the checks
# (GPUSLICE_RUN_DIR, where tenants' state lives, is kept).
unset LD_PRELOAD CUDA_DEVICE_MEMORY_LIMIT PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF
for v in $(compgen -e); do
    case $v in
    GPUSLICE_RUN_DIR) ;;
    GPUSLICE_* | TENSOR_FUSION_* | CUDA_DEVICE_MEMORY_LIMIT_*) unset "$v" ;;
    esac
done

# --- the check protocol (see check.h) -------------------------------------------------------
ok() { echo "@ok $*"; }
fail() { echo "@fail $*"; }
key() { echo "@key $1 $2"; }
num() { echo "@num $1 $2"; }
note() { echo "@note $*"; }
# expect TEXT COMMAND...: @ok TEXT when COMMAND succeeds, else @fail TEXT.
expect() {
    local text=$1
    shift
    if "$@"; then ok "$text"; else fail "$text"; fi
}
# need FILE...: fails the check when a file it needs was not built.
need() {
    local f
    for f; do
        [ -e "$f" ] || { fail "missing $f (did the build step fail?)"; return 1; }
    done
}
is_int() { [[ $1 =~ ^[0-9]+$ ]]; }
tmpdir() { mktemp -d "$GPU_SUITE_WORK/tmp.XXXXXX"; }

# debug_report FILE: the GPUSLICE_DEBUG=1 lines of FILE (a check's stderr), in short.
debug_report() {
    local f=$1 n
    n=$(grep -c '^gpuslice: debug:' "$f")
    key debug_lines "$n"
    expect "GPUSLICE_DEBUG=1 printed $n 'gpuslice: debug:' lines on stderr" test "$n" -gt 0
    echo "--- first debug lines ---"
    grep '^gpuslice: debug:' "$f" | head -n 25
    echo "--- debug lines about cuGetProcAddress, exact matches, fallbacks ---"
    grep -iE 'getprocaddress|exact|fallback|version rule' "$f" | head -n 40
    echo "--- last debug lines ---"
    grep '^gpuslice: debug:' "$f" | tail -n 15
    echo "--- other stderr ---"
    grep -v '^gpuslice: debug:' "$f" | head -n 30
    # The exit line of each process counts its cuGetProcAddress lookups:
    # "cuGetProcAddress lookups: N hooked by pointer match, N by version rule, N passed through".
    "$PY" - "$f" <<'EOF'
import re, sys
sums, procs, unlisted = [0, 0, 0], 0, 0
for line in open(sys.argv[1], errors="replace"):
    if not line.startswith("gpuslice: debug:"):
        continue
    unlisted += "returned an unlisted pointer" in line
    m = re.search(r"(\d+) hooked by pointer match, (\d+) by version rule(?:, (\d+) passed through)?",
                  line)
    if m:
        procs += 1
        for i in range(3):
            sums[i] += int(m.group(i + 1) or 0)
if procs:
    print(f"@key gpa_pointer_match {sums[0]}")
    print(f"@key gpa_version_rule {sums[1]}")
    print(f"@key gpa_passed_through {sums[2]}")
    print(f"@num gpa_count_lines {procs}")
else:
    print("@note no 'cuGetProcAddress lookups' count line in the debug output")
print(f"@num gpa_unlisted_pointer_lines {unlisted}")
EOF
}

# --- checks: each function prints check lines and returns non-zero on a hard failure --------

c_build() {
    local log=$GPU_SUITE_WORK/build.log rc p pids=() names=() stubs cudart i
    echo "cmake build into $BUILD"
    # shellcheck disable=SC2086 # GPU_CMAKE_ARGS is a list of options
    # gpusliced needs libmicrohttpd, jansson and libcurl: built where pkg-config finds them. The
    # GPU image has none: Debian's packages carried in .deb/ (apt-get download libmicrohttpd12
    # libmicrohttpd-dev libjansson4 libjansson-dev libcurl4 libcurl4-openssl-dev libssh2-1
    # libpsl5 librtmp1 libnghttp2-14) are unpacked into the work directory.
    daemon=OFF
    # The DRA driver's gRPC: libnghttp2-dev libprotobuf-c1 libprotobuf-c-dev, and protoc-c
    # (protobuf-c-compiler libprotoc32 libprotobuf32) to generate its messages at build time.
    if ! pkg-config --exists libmicrohttpd jansson libcurl libnghttp2 libprotobuf-c 2>/dev/null && ls "$ROOT"/.deb/*.deb >/dev/null 2>&1; then
        local d=$GPU_SUITE_WORK/deps f
        for f in "$ROOT"/.deb/*.deb; do dpkg -x "$f" "$d"; done
        # libmicrohttpd.pc names gnutls (for static links only); the system's library is used.
        printf 'Name: gnutls\nDescription: the system library\nVersion: 3\nLibs:\nCflags:\n' \
            >"$d/usr/lib/x86_64-linux-gnu/pkgconfig/gnutls.pc"
        export PKG_CONFIG_PATH=$d/usr/lib/x86_64-linux-gnu/pkgconfig PKG_CONFIG_SYSROOT_DIR=$d
        export LD_LIBRARY_PATH=$d/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        export PATH=$d/usr/bin:$PATH
    fi
    pkg-config --exists libmicrohttpd jansson libcurl libnghttp2 libprotobuf-c 2>/dev/null && daemon=ON
    cmake -S "$ROOT" -B "$BUILD" -DGPUSLICE_TESTS=OFF -DGPUSLICE_DAEMON=$daemon -DCMAKE_BUILD_TYPE=Release \
        ${GPU_CMAKE_ARGS--DGPUSLICE_WERROR=OFF -DGPUSLICE_SIM=OFF} >"$log" 2>&1 &&
        cmake --build "$BUILD" -j"$(nproc)" >>"$log" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || tail -n 40 "$log"
    expect "cmake configure + build (exit $rc)" test "$rc" -eq 0
    expect "built $GS" test -x "$GS"
    expect "built $LIB" test -f "$LIB"
    [ -f "$LIB" ] && num libgpuslice_exported_symbols "$(nm -D --defined-only "$LIB" | wc -l)"

    if ! [ -x "$NVCC" ]; then
        fail "nvcc not found (set NVCC)"
        return 1
    fi
    "$NVCC" --version | tail -n 2
    stubs=$CUDA_HOME/lib64/stubs
    [ -e "$stubs/libcuda.so" ] || stubs=$CUDA_HOME/targets/x86_64-linux/lib/stubs
    cudart=$CUDA_HOME/lib64
    [ -e "$cudart/libcudart.so" ] || cudart=$CUDA_HOME/targets/x86_64-linux/lib
    mkdir -p "$GPUBIN"
    compile() { # NAME COMMAND...: compile in the background, log to GPUBIN/NAME.log
        names+=("$1")
        rm -f "$GPUBIN/$1" # never test a stale binary
        "${@:2}" >"$GPUBIN/$1.log" 2>&1 &
        pids+=($!)
    }
    for p in drv_limit threads_race probe driver_facts ctx_steps; do
        compile "$p" "$NVCC" -arch=sm_90 -O2 -I"$HERE" -o "$GPUBIN/$p" "$HERE/$p.c" \
            -L"$stubs" -lcuda -lpthread -ldl
    done
    compile rt_limit "$NVCC" -arch=sm_90 -O2 -I"$HERE" -o "$GPUBIN/rt_limit" "$HERE/rt_limit.cu"
    compile sm_threads "$NVCC" -arch=sm_90 -O2 -I"$HERE" -o "$GPUBIN/sm_threads" "$HERE/sm_threads.cu"
    compile pool_race "$NVCC" -arch=sm_90 -O2 --default-stream per-thread -I"$HERE" \
        -o "$GPUBIN/pool_race" "$HERE/pool_race.cu" -L"$stubs" -lcuda -lpthread -ldl
    compile rt_limit_shared "$NVCC" -arch=sm_90 -O2 -cudart shared -I"$HERE" \
        -Xlinker -rpath="$cudart" -o "$GPUBIN/rt_limit_shared" "$HERE/rt_limit.cu"
    compile lanes_api "$NVCC" -arch=sm_90 -O2 -I"$ROOT/include" -o "$GPUBIN/lanes_api" \
        "$ROOT/bench/lanes_api.cu" -L"$BUILD/lib" -lgpuslice -Xlinker -rpath="$BUILD/lib"
    compile launch_overhead "$ROOT/bench/launch_overhead.sh" --build
    compile compute_small "$ROOT/bench/compute_share.sh" --build
    compile attach "$ROOT/bench/attach.sh" --build
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}"
        rc=$?
        [ "$rc" -eq 0 ] || cat "$GPUBIN/${names[$i]}.log"
        expect "nvcc built ${names[$i]} (exit $rc)" test "$rc" -eq 0
    done
}

c_probe_driver() {
    local lib real
    need "$GPUBIN/probe" || return 1
    lib=$(ldconfig -p 2>/dev/null | awk '$1 == "libcuda.so.1" && /x86-64/ { print $NF; exit }')
    [ -n "$lib" ] || lib=/usr/lib/x86_64-linux-gnu/libcuda.so.1
    real=$(readlink -f "$lib")
    echo "real driver library: $lib -> $real"
    note "libcuda: $real"
    if [ -e "$real" ]; then
        num libcuda_defined_exports "$(nm -D --defined-only "$real" | wc -l)"
        echo "--- nm -D --defined-only $real | grep cu(MemAlloc|MemFree|MemGetInfo|DeviceTotalMem|GetProcAddress|CtxCreate|ArrayCreate) ---"
        nm -D --defined-only "$real" |
            grep -E " cu(MemAlloc|MemFree|MemGetInfo|DeviceTotalMem|GetProcAddress|CtxCreate|ArrayCreate)"
        num libcuda_matching_exports "$(nm -D --defined-only "$real" |
            grep -cE " cu(MemAlloc|MemFree|MemGetInfo|DeviceTotalMem|GetProcAddress|CtxCreate|ArrayCreate)")"
    else
        note "cannot find libcuda.so.1 ($lib)"
    fi
    echo "--- native probe (no gpuslice) ---"
    "$GPUBIN/probe"
}

# What the real driver does where the simulator must match it (tests/gpu/driver_facts.c,
# natively): informational; its whole output is kept as driver-facts.txt.
c_driver_facts() {
    need "$GPUBIN/driver_facts" || return 1
    "$GPUBIN/driver_facts" | tee "$GPU_SUITE_WORK/driver-facts.txt"
}

# The driver-API program under several ways of setting a 2 GiB limit.
c_drv_gpuslice_run() { need "$GS" "$GPUBIN/drv_limit" && "$GS" run --memory 2G -- "$GPUBIN/drv_limit" $((2 * GiB)); }
c_drv_per_device() { need "$GS" "$GPUBIN/drv_limit" && "$GS" run --memory 0:2G -- "$GPUBIN/drv_limit" $((2 * GiB)); }
c_drv_ld_preload() {
    need "$LIB" "$GPUBIN/drv_limit" &&
        env LD_PRELOAD="$LIB" GPUSLICE_MEMORY_LIMIT=2G "$GPUBIN/drv_limit" $((2 * GiB))
}
c_drv_hami_env() {
    need "$LIB" "$GPUBIN/drv_limit" &&
        env LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_LIMIT=2g "$GPUBIN/drv_limit" $((2 * GiB))
}
c_drv_vgpu_env() {
    need "$LIB" "$GPUBIN/drv_limit" &&
        env LD_PRELOAD="$LIB" TENSOR_FUSION_CUDA_MEM_LIMIT='{"0": 2147483648}' \
            "$GPUBIN/drv_limit" $((2 * GiB))
}
c_drv_bad_env() {
    local t rc
    need "$LIB" "$GPUBIN/drv_limit" || return 1
    t=$(tmpdir)
    env LD_PRELOAD="$LIB" GPUSLICE_MEMORY_LIMIT=banana "$GPUBIN/drv_limit" --expect-init-fail \
        2>"$t/err"
    rc=$?
    sed 's/^/stderr: /' "$t/err" | head -n 20
    expect "with GPUSLICE_MEMORY_LIMIT=banana the program saw cuInit fail and exited normally (exit $rc)" \
        test "$rc" -eq 0
    expect "stderr names GPUSLICE_MEMORY_LIMIT" grep -q GPUSLICE_MEMORY_LIMIT "$t/err"
}
c_cli_bad_size() {
    local t rc
    need "$GS" || return 1
    t=$(tmpdir)
    "$GS" run --memory "8 GB" -- touch "$t/ran" 2>"$t/err"
    rc=$?
    sed 's/^/stderr: /' "$t/err" | head -n 10
    key exit_status "$rc"
    expect "gpuslice run --memory \"8 GB\" exits 2 (got $rc)" test "$rc" -eq 2
    expect "the command was not started" test ! -e "$t/ran"
    expect "the message names --memory" grep -q -- --memory "$t/err"
}

c_rt_static() { need "$GS" "$GPUBIN/rt_limit" && "$GS" run --memory 2G -- "$GPUBIN/rt_limit" $((2 * GiB)); }
c_rt_shared() {
    need "$GS" "$GPUBIN/rt_limit_shared" || return 1
    ldd "$GPUBIN/rt_limit_shared" | grep -E 'cudart|cuda\.so' | sed 's/^/ldd: /'
    "$GS" run --memory 2G -- "$GPUBIN/rt_limit_shared" $((2 * GiB))
}
c_rt_debug() {
    local t rc
    need "$GS" "$GPUBIN/rt_limit" || return 1
    t=$(tmpdir)
    GPUSLICE_DEBUG=1 "$GS" run --memory 2G -- "$GPUBIN/rt_limit" $((2 * GiB)) 2>"$t/err"
    rc=$?
    debug_report "$t/err"
    return "$rc"
}

c_threads_race() { need "$GS" "$GPUBIN/threads_race" && "$GS" run --memory 1G -- "$GPUBIN/threads_race" "$GiB" 30; }

# Issue 28, item 20: 32 threads of stream-ordered allocations (per-thread streams, three pools)
# under 1 GiB, the real use sampled from NVML outside the process (the GPU otherwise idle).
c_pool_race() { need "$GS" "$GPUBIN/pool_race" && "$GS" run --memory 1G -- "$GPUBIN/pool_race" "$GiB" 10; }

c_nvidia_smi_view() {
    local smi t native limited rc real_ok=false
    # shellcheck disable=SC2054 # the commas belong to nvidia-smi's --format
    local q=(--query-gpu=memory.total --format=csv,noheader,nounits -i 0)
    need "$GS" || return 1
    smi=$(command -v nvidia-smi) || { fail "nvidia-smi not found"; return 1; }
    t=$(tmpdir)
    echo "nvidia-smi: $smi"
    ldd "$smi" 2>&1 | sed 's/^/ldd: /' | head -n 12
    native=$(nvidia-smi "${q[@]}" 2>&1 | head -n 1 | tr -d ' \r')
    limited=$("$GS" run --memory 4G -- nvidia-smi "${q[@]}" 2>"$t/err" | head -n 1 | tr -d ' \r')
    rc=$?
    sed 's/^/stderr: /' "$t/err" | head -n 10
    key nvidia_smi_native_MiB "$native"
    key nvidia_smi_limited_MiB "$limited"
    expect "under gpuslice run --memory 4G, nvidia-smi memory.total is 4096 (got '$limited', exit $rc)" \
        test "$limited" = 4096
    is_int "$native" && [ "$native" -gt 4096 ] && real_ok=true
    expect "without gpuslice nvidia-smi memory.total is the real total ($native > 4096)" "$real_ok"
    echo "--- under the limit: memory.total,memory.used,memory.free ---"
    "$GS" run --memory 4G -- nvidia-smi --query-gpu=memory.total,memory.used,memory.free \
        --format=csv -i 0 2>&1 | head -n 5
    echo "--- plain nvidia-smi under the limit ---"
    "$GS" run --memory 4G -- nvidia-smi 2>&1 | head -n 25
    echo "--- pynvml under the limit ---"
    "$GS" run --memory 4G -- "$PY" "$HERE/nvml_view.py" limit $((4 * GiB)) ||
        fail "nvml_view.py limit exited $?"
    echo "--- pynvml without gpuslice ---"
    "$PY" "$HERE/nvml_view.py" native $((4 * GiB)) || fail "nvml_view.py native exited $?"
}

c_torch() { need "$GS" && "$GS" run --memory 4G -- "$PY" "$HERE/torch_limit.py" "$1" $((4 * GiB)); }
c_torch_plain() { c_torch plain; }
c_torch_graphs() { c_torch graphs; }
c_torch_threads() { c_torch threads; }
c_torch_expandable() { PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True c_torch expandable; }
c_torch_debug() {
    local t rc
    need "$GS" || return 1
    t=$(tmpdir)
    GPUSLICE_DEBUG=1 "$GS" run --memory 4G -- "$PY" "$HERE/torch_limit.py" plain $((4 * GiB)) \
        2>"$t/err"
    rc=$?
    debug_report "$t/err"
    return "$rc"
}

c_tenant_two_procs() {
    local d
    need "$GS" || return 1
    d=$(tmpdir)
    # shellcheck disable=SC2016 # expanded by the inner bash
    "$GS" run --memory 4G -- bash -c '
        py=$1 t=$2 d=$3 lim=$4
        "$py" "$t" A "$d" "$lim" & a=$!
        "$py" "$t" B "$d" "$lim" "$a"; b=$?
        : >"$d/b_exit"
        wait "$a"; ar=$?
        echo "tenant: process A exited $ar, process B exited $b"
        [ "$ar" -eq 0 ] && [ "$b" -eq 0 ]' tenant "$PY" "$HERE/tenant.py" "$d" $((4 * GiB))
}
c_tenant_sigkill() {
    local d
    need "$GS" || return 1
    d=$(tmpdir)
    # shellcheck disable=SC2016 # expanded by the inner bash
    "$GS" run --memory 4G -- bash -c '
        py=$1 t=$2 d=$3 lim=$4
        "$py" "$t" hold "$d" "$lim" & h=$!
        "$py" "$t" kill "$d" "$lim" "$h"; k=$?
        kill -9 "$h" 2>/dev/null; wait "$h"; hr=$?
        echo "tenant: holder exited $hr (137 = killed), killer exited $k"
        [ "$k" -eq 0 ]' tenant "$PY" "$HERE/tenant.py" "$d" $((4 * GiB))
}

# gpuslice info --json against the H200's known SMs, compute capability and green-context sizes.
c_cli_info() { need "$GS" && "$PY" "$HERE/cli_info.py" "$GS"; }

# PyTorch's current stream under gpuslice run: the highest priority by default, the default
# stream (priority 0) with --no-torch-priority; with set_device(d) for every device, and with
# no set_device (the first CUDA use). The four programs run at once.
c_cli_torch_priority() {
    local t mode v rc line prio hi text
    need "$GS" || return 1
    t=$(tmpdir)
    # Prints "PRIO HIGHEST P..." (the highest priority, then each device's current stream).
    # priority_range() comes last so that nothing initialises CUDA before set_device.
    local set_prog='import torch; ds = list(range(torch.cuda.device_count())); [(torch.cuda.set_device(d), torch.ones(1, device="cuda").add_(1).sum().item()) for d in ds]; print("PRIO", min(torch.cuda.Stream.priority_range()), *[torch.cuda.current_stream(d).priority for d in ds])'
    local noset_prog='import torch; x = torch.ones(1, device="cuda").add_(1).sum().item(); print("PRIO", min(torch.cuda.Stream.priority_range()), torch.cuda.current_stream(torch.cuda.current_device()).priority)'
    for mode in default:set default:noset off:set off:noset; do
        local opts=() prog=$set_prog
        [ "${mode%%:*}" = off ] && opts=(--no-torch-priority)
        [ "${mode#*:}" = noset ] && prog=$noset_prog
        timeout 100 "$GS" run "${opts[@]}" -- "$PY" -c "$prog" >"$t/${mode/:/_}.out" 2>"$t/${mode/:/_}.err" &
    done
    wait
    for mode in default:set default:noset off:set off:noset; do
        v=${mode/:/_}
        line=$(grep '^PRIO ' "$t/$v.out" | tail -n 1)
        echo "--- $v: ${line:-no PRIO line} ---"
        sed 's/^/stdout: /' "$t/$v.out" | grep -v '^stdout: PRIO ' | head -n 10
        sed 's/^/stderr: /' "$t/$v.err" | head -n 20
        # shellcheck disable=SC2086 # split into words
        set -- $line
        if [ $# -lt 3 ]; then
            fail "$v: the program printed no 'PRIO HIGHEST P...' line"
            continue
        fi
        hi=$2
        shift 2
        key "prio_$v" "$(IFS=,; echo "$*")"
        [ "$v" = default_set ] && key highest_priority "$hi"
        [ "$v" = default_set ] &&
            expect "the device has a priority above the default (highest $hi < 0)" test "$hi" -lt 0
        rc=0
        for prio; do
            case $v in
            default_*) [ "$prio" = "$hi" ] || rc=1 ;;
            off_*) [ "$prio" = 0 ] || rc=1 ;;
            esac
        done
        case $v in
        default_set) text="with set_device(d) on each device, every current stream has the highest priority $hi (got $*)" ;;
        default_noset) text="without set_device, the current stream has the highest priority $hi (got $*)" ;;
        off_set) text="--no-torch-priority, with set_device(d): every current stream is the default one, priority 0 (got $*)" ;;
        off_noset) text="--no-torch-priority, without set_device: the current stream has priority 0 (got $*)" ;;
        esac
        expect "$text" test "$rc" -eq 0
    done
}

# Two MPS clients at once under --gpu-share 25 and 75: throughput shares, mps status/stop.
c_cli_mps_share() {
    need "$GS" || return 1
    command -v nvidia-cuda-mps-control >/dev/null || { fail "nvidia-cuda-mps-control not in PATH"; return 1; }
    "$PY" "$HERE/mps_share.py" control "$GS" "$(tmpdir)" 6
}

c_nvml_agreement() { need "$GS" && "$GS" run --memory 8G -- "$PY" "$HERE/nvml_agreement.py" $((8 * GiB)); }

# Three contexts in one process, made and destroyed: accounted vs the device's growth.
c_ctx_agreement() { need "$GS" "$GPUBIN/ctx_steps" && "$PY" "$HERE/ctx_agreement.py" "$GS" "$GPUBIN/ctx_steps" $((8 * GiB)); }

# Launch cost as 20 interleaved pairs (native, LD_PRELOAD, gpuslice run --memory 8G), the
# verdict on the pairs' median ratio and its bootstrap interval (bench/launch_pairs.py). On the
# H200 a pair of three fresh processes took about 3 s.
c_bench_launch() {
    need "$GS" "$LIB" || return 1
    BENCH_TABLE=$GPU_SUITE_WORK/bench-launch.md BENCH_PAIRS=${BENCH_PAIRS:-20} \
        BENCH_BUDGET=$((${GPU_CHECK_LIMIT:-200} - 20)) "$ROOT/bench/launch_overhead.sh"
}
# A PyTorch launch-bound loop (eager ops of one small kernel each) through the interposer with
# no limit, in a tenant, with a memory limit, and under a ceiling it never reaches, as
# interleaved pairs (issue 30: at least 98 % of native, judged on the interval).
c_bench_launch_torch() {
    need "$GS" "$LIB" || return 1
    BENCH_TABLE=$GPU_SUITE_WORK/bench-launch-torch.md BENCH_PAIRS=${BENCH_TORCH_PAIRS:-8} \
        BENCH_BUDGET=$((${GPU_CHECK_LIMIT:-150} - 25)) "$ROOT/bench/launch_torch.sh"
}
# The latency table (bench/contention.py): a latency job beside a saturating background
# under time-slicing, MPS (plain, client priority, 50 % active threads) and gpuslice's classes
# with and without MPS; with --faults, a client killed mid-kernel under MPS (a hang of the
# survivor told from a slowdown). contention_generate: the same with a transformers GPT-2
# generate loop beside a GPT-2-medium training job. The tables and pictures go to
# $GPU_SUITE_WORK/contention-*/ (and $OUT).
c_contention() {
    need "$GS" || return 1
    "$PY" "$ROOT/bench/contention.py" --gpuslice "$GS" --seconds 2.5 --repeats 2 \
        --only solo-latency,solo-background,time-sliced,mps,mps-priority,mps-threads50,gs-priority,mps-gs-priority \
        --faults latency-dies-mps,latency-dies --out "$GPU_SUITE_WORK/contention-gemm" |
        grep -v '^{' | goal_verdicts
}
# contention.py's "Goals (issue 30)" list as check lines: "- GOAL: met (…)" is @ok, "missed" @fail.
goal_verdicts() {
    awk '{ print } /^- .*: met( |$)/ { print "@ok " substr($0, 3) }
         /^- .*: missed( |$)/ { print "@fail " substr($0, 3) }
         /^- .*: not measured/ { print "@fail " substr($0, 3) }'
}
c_contention_generate() {
    need "$GS" || return 1
    "$PY" "$ROOT/bench/contention.py" --gpuslice "$GS" --latency-job generate --repeats 2 \
        --only solo-latency,solo-background,time-sliced,mps,mps-priority,mps-threads50,gs-priority,mps-gs-priority \
        --out "$GPU_SUITE_WORK/contention-generate" | grep -v '^{' | goal_verdicts
}
# Launch cost under a compute ceiling that is accounted but does not bind (duty-cycled).
c_bench_launch_duty() {
    need "$GS" "$LIB" || return 1
    BENCH_TABLE=$GPU_SUITE_WORK/bench-launch-duty.md BENCH_PAIRS=${BENCH_PAIRS:-20} \
        BENCH_BUDGET=$((${GPU_CHECK_LIMIT:-120} - 20)) "$ROOT/bench/launch_overhead.sh" --duty
}
# 64 processes of one tenant attaching at once (natively first, then under gpuslice run):
# attach times, refusals, accounting against the device. A context takes ~518 MiB on an H200,
# so the tenant gets the device's free memory (--memory auto) and each process 8 MiB. The
# 256-process benchmark (bench/attach.sh -n 256) takes longer than the suite can give it: it
# is run on its own (docs/results.md).
c_attach() {
    need "$GS" "$GPUBIN/attach" || return 1
    "$ROOT/bench/attach.sh" -n "${ATTACH_N:-64}" --alloc-mib 8 --memory auto --native --timeout 60 \
        --table "$GPU_SUITE_WORK/bench-attach.md"
}
# run --filled 0.9 around a PyTorch program that allocates 20 GiB, frees it, allocates 40 GiB;
# a second process beside it.
c_cli_filled() { need "$GS" && "$PY" "$HERE/filled.py" control "$GS" "$(tmpdir)"; }
# gpusliced on the GPU: /v1/devices and /metrics against nvidia-smi, torch_limit under a tenant
# made through the API, and a kill -9 and restart in the middle of a PyTorch run.
c_daemon() {
    need "$GS" &&
        GPU_DEPS_LIB=$GPU_SUITE_WORK/deps/usr/lib/x86_64-linux-gnu "$PY" "$HERE/daemon.py" "$GS" \
            "$BUILD/bin/gpusliced" "$(tmpdir)"
}
# The carried libraries' own dependencies (libcurl's) are not on gpusliced's RUNPATH: the
# daemon alone gets them (GPU_DEPS_LIB), not the pod's programs.
c_py_priority() { "$PY" "$HERE/py_priority.py" "$ROOT"; }
# The guard: managed tenants past their interposer (zeroed usage words, LD_PRELOAD cleared, a
# filled compute budget) stopped from NVML within a second, a well-behaved tenant beside them.
c_guard() {
    need "$GS" &&
        GPU_DEPS_LIB=$GPU_SUITE_WORK/deps/usr/lib/x86_64-linux-gnu "$PY" "$HERE/guard.py" "$GS" \
            "$BUILD/bin/gpusliced" "$(tmpdir)"
}
# Two or more GPUs (skipped on one): per-device limits, keys and reordering, a DDP job with NCCL
# under --memory 16G and --compute 50, --sms and procs on GPU 1, --filled, info, the daemon.
c_multi_gpu() {
    need "$GS" || return 1
    GPU_DEPS_LIB=$GPU_SUITE_WORK/deps/usr/lib/x86_64-linux-gnu "$PY" "$HERE/multi_gpu.py" "$GS" \
        "$BUILD/bin/gpusliced" "$(tmpdir)"
}
c_k8s_pod() {
    need "$BUILD/bin/gpusliced" "$LIB" &&
        GPU_DEPS_LIB=$GPU_SUITE_WORK/deps/usr/lib/x86_64-linux-gnu "$PY" "$HERE/k8s_pod.py" "$ROOT" \
            "$BUILD/bin/gpusliced" "$LIB" "$(tmpdir)"
}
c_dra() {
    need "$BUILD/bin/gpusliced" "$LIB" &&
        GPU_DEPS_LIB=$GPU_SUITE_WORK/deps/usr/lib/x86_64-linux-gnu "$PY" "$HERE/dra.py" "$ROOT" \
            "$BUILD/bin/gpusliced" "$LIB" "$(tmpdir)"
}

# Compute ceilings (bench/compute_share.py): a ceiling bills the time the tenant's kernels run.
# The host-bound workloads (small kernels launched one by one) are judged against themselves
# native (an uncapped phase before every ceiling, their launch rate drifting between windows):
# under their ceiling (100 = the governor armed with no budget, 90, 75, 50) not throttled, by
# NVML's absolute share (within 1 point of native) and the rate (>= 97 % of native by its
# interval), and held at one ceiling that binds (15 for PyTorch's ~23 %, 25 for the cuda-rt
# loop's ~56 %); 3 repeats of 1 s windows, 0.3 s settling (about 112 s on an H100). The
# saturating ones (GEMM, graphs) at 25/50/75, one 1 s window each, then the pair and `set`
# (about 111 s). The 0.2 s tail keeps NVML's ~1/6 s sample straddling a window's end under the
# same ceiling. Cut to the time this check was given (GPU_CHECK_LIMIT).
c_compute_share() {
    local t0 left rc=0
    need "$GS" "$LIB" || return 1
    t0=$(date +%s)
    "$ROOT/bench/compute_share.sh" --only small,cuda-small --interleave --repeats 3 \
        --ceilings-small 100,90,75,50,15 --ceilings-cuda-small 100,90,75,50,25 \
        --phase-seconds 1.0 --settle 0.3 --tail 0.2 --budget $((${GPU_CHECK_LIMIT:-330} - 115)) \
        --table "$GPU_SUITE_WORK/bench-compute-small.md" || rc=1
    left=$((${GPU_CHECK_LIMIT:-330} - ($(date +%s) - t0) - 5))
    "$ROOT/bench/compute_share.sh" --only gemm,graph,cuda-graph,pair,set --repeats 1 \
        --ceilings 25,50,75 --phase-seconds 1.0 --settle 0.25 --tail 0.2 --budget "$left" \
        --table "$GPU_SUITE_WORK/bench-compute.md" || rc=1
    return "$rc"
}
# SM partitions: one PyTorch process on 16 SMs (every path, %smid counted), then lanes of
# gpuslice procs side by side and of green-run in one process (bench/sm_partition.py prints
# the tables).
c_sm_one() {
    need "$GS" || return 1
    GPUSLICE=$GS "$PY" "$ROOT/bench/sm_partition.py" one --sms 16 --seconds 2 \
        | tee "$GPU_SUITE_WORK/bench-sm-one.md" | sm_verdict
}
c_sm_lanes() {
    local rc=0
    need "$GS" || return 1
    command -v nvidia-cuda-mps-control >/dev/null || { fail "nvidia-cuda-mps-control not in PATH"; return 1; }
    # One measurement alone, then each split through procs and through green-run (issue 30:
    # every lane within 2 points of its weight, together at least 97 % of one process).
    GPUSLICE=$GS "$PY" "$ROOT/bench/sm_partition.py" lanes --shares 20,30,50 --shares 10,20,30,40 \
        --shares 20,20,20,20,20 --green --seconds 2 \
        | tee "$GPU_SUITE_WORK/bench-sm-lanes.md" | sm_verdict || rc=1
    "$GS" mps stop --force >/dev/null 2>&1
    return "$rc"
}
# One green context current on 16 threads at once: streams, allocations, launches, graphs.
c_sm_threads() {
    local whole
    need "$GS" "$GPUBIN/sm_threads" || return 1
    # The whole GPU's SM count, for a cooperative grid sized for it (the partition hides it).
    whole=$("$GS" info --json 2>/dev/null |
        "$PY" -c 'import json,sys; print(json.load(sys.stdin)["gpus"][0]["sm_count"])' 2>/dev/null)
    "$GS" run -q --sms 16 -- "$GPUBIN/sm_threads" 16 16 20 "${whole:-0}"
}
# The in-process C API: two lanes 25/75 of gpuslice_lanes_run (bench/lanes_api.cu).
c_sm_lanes_api() {
    need "$GPUBIN/lanes_api" || return 1
    "$GPUBIN/lanes_api" --seconds 3 25 75 | tee "$GPU_SUITE_WORK/bench-sm-lanes-api.md" | sm_verdict
}
# sm_verdict: echoes a bench table, one @ok/@fail per row verdict and per summary line.
sm_verdict() {
    local line seen=0
    while IFS= read -r line; do
        echo "$line"
        case $line in
        "| "*"| PASS |"*) ok "${line%% |*} |"; seen=1 ;;
        "| "*"| FAIL |"*) fail "${line}"; seen=1 ;;
        "Verdict: PASS"* | *"(PASS: at least 9"[57]" %)"*) ok "$line" ;;
        "Verdict: FAIL"* | *"(FAIL: at least 9"[57]" %)"*) fail "$line" ;;
        esac
    done
    [ "$seen" = 1 ] || fail "the benchmark printed no table"
}

# Throughput of a power-limited GEMM under an MPS SM partition and under --compute, beside
# the SM clock: why a share of throughput alone is not a share of the GPU.
c_partition_clock() {
    need "$GS" || return 1
    "$PY" "$ROOT/bench/partition_clock.py" --gpuslice "$GS" --seconds 2.0
}

# name, timeout in seconds, function[, seconds kept for it]. Quick C checks first, PyTorch
# next, then the CLI (info, torch priority, MPS), the benchmarks last; until a benchmark (or a
# CLI check with a fourth field) runs, the time it usually takes is kept from the checks
# before it when they run long.
CHECKS=(
    "probe_driver 60 c_probe_driver"
    "driver_facts 60 c_driver_facts"
    "driver_api_limit/gpuslice_run 60 c_drv_gpuslice_run"
    "driver_api_limit/per_device_size 60 c_drv_per_device"
    "driver_api_limit/ld_preload 60 c_drv_ld_preload"
    "driver_api_limit/hami_env 60 c_drv_hami_env"
    "driver_api_limit/vgpu_env 60 c_drv_vgpu_env"
    "driver_api_limit/bad_env 30 c_drv_bad_env"
    "driver_api_limit/bad_cli_size 30 c_cli_bad_size"
    "runtime_api_limit/static 60 c_rt_static"
    "runtime_api_limit/shared 60 c_rt_shared"
    "runtime_api_limit/debug 60 c_rt_debug"
    "threads_race 90 c_threads_race"
    "pool_race 60 c_pool_race"
    "nvidia_smi_view 60 c_nvidia_smi_view"
    "torch_limit/plain 120 c_torch_plain"
    "torch_limit/graphs 120 c_torch_graphs"
    "torch_limit/expandable 120 c_torch_expandable"
    "torch_limit/threads 120 c_torch_threads"
    "torch_limit/debug 120 c_torch_debug"
    "tenant_two_procs 180 c_tenant_two_procs"
    "tenant_sigkill 120 c_tenant_sigkill"
    "nvml_agreement 120 c_nvml_agreement"
    "ctx_agreement 90 c_ctx_agreement"
    "cli_info 60 c_cli_info"
    "cli_torch_priority 120 c_cli_torch_priority 15"
    "cli_mps_share 150 c_cli_mps_share 35"
    "cli_filled 120 c_cli_filled 20"
    "daemon 150 c_daemon 40"
    "k8s_pod 120 c_k8s_pod"
    "dra 150 c_dra"
    "guard 150 c_guard 60"
    "py_priority 60 c_py_priority"
    "multi_gpu 300 c_multi_gpu"
    "attach 120 c_attach 25"
    "bench_launch 120 c_bench_launch 65"
    "bench_launch_duty 90 c_bench_launch_duty 35"
    "sm_one 150 c_sm_one 45"
    "sm_threads 90 c_sm_threads 5"
    "sm_lanes 200 c_sm_lanes 75"
    "sm_lanes_api 60 c_sm_lanes_api 10"
    "partition_clock 90 c_partition_clock 40"
    "compute_share 330 c_compute_share 140"
    "bench_launch_torch 150 c_bench_launch_torch"
    "contention 400 c_contention"
    "contention_generate 400 c_contention_generate"
)
# Informational checks: they show what a program found and assert nothing, so their verdict
# is INFO, which neither passes nor fails the suite (tests/gpu/README.md).
INFO_CHECKS=" probe_driver driver_facts partition_clock "
# Checks run only when --only names them: partition_clock (40 s, informational: why a
# throughput share is not a time share on a power-limited GPU) does not fit the whole suite's
# ten minutes beside the benchmarks that judge.
# The latency tables (contention, contention_generate: about 2.5 and 3 minutes) and the
# PyTorch launch pairs (bench_launch_torch, about 2 minutes) neither: each is run with --only.
OPT_IN=" partition_clock bench_launch_torch contention contention_generate "

# --- the runner ------------------------------------------------------------------------------

record_env() {
    local smi
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "kernel: $(uname -r)"
    echo "host: $(hostname 2>/dev/null)"
    echo "cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores"
    smi=$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total \
        --format=csv,noheader -i 0 2>/dev/null | head -n 1)
    [ -n "$smi" ] || smi="(nvidia-smi failed),?,?"
    echo "gpu: ${smi%%,*}"
    echo "driver: $(echo "$smi" | cut -d, -f2 | tr -d ' ')"
    echo "gpu memory: $(echo "$smi" | cut -d, -f3- | sed 's/^ *//')"
    echo "nvcc: $("$NVCC" --version 2>/dev/null | sed -n 's/.*release //p' | head -n 1)"
    echo "python: $("$PY" -c 'import sys; print(sys.version.split()[0])' 2>&1)"
    echo "torch: $(timeout 60 "$PY" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -n 1)"
    echo "pynvml: $("$PY" -c 'import importlib.metadata as m; print(m.version("nvidia-ml-py"))' 2>&1 | tail -n 1)"
    echo "gpuslice commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo none)$(
        [ -n "$(git -C "$ROOT" status --porcelain 2>/dev/null | head -n 1)" ] && echo ' (with uncommitted changes)')"
}

# run_check NAME TIMEOUT FUNCTION [RESERVE]: runs the function in a fresh bash under timeout
# (its own process group; GPU_CHECK_LIMIT tells it its timeout), streams its output, records
# its verdict in results.jsonl, and kills whatever it left running. RESERVE seconds of the
# budget are kept for later checks.
run_check() {
    local name=$1 limit=$2 fn=$3 reserve=${4:-0} left log pid rc t0 t1 secs
    left=$((DEADLINE - $(date +%s) - reserve))
    if [ "$left" -lt 10 ]; then
        echo "=== [$name] not run: the suite's time budget (${BUDGET} s) is spent"
        "$PY" "$HERE/report.py" unrun "$name" "not run: the suite's time budget (${BUDGET} s) was spent" \
            >>"$GPU_SUITE_WORK/results.jsonl"
        return
    fi
    [ "$limit" -le "$left" ] || limit=$left
    log=$GPU_SUITE_WORK/checks/${name//\//__}.log
    echo "=== [$name] start $(date -u +%H:%M:%S), timeout ${limit} s"
    : >"$log"
    t0=$(date +%s.%N)
    GPU_CHECK_LIMIT=$limit timeout -k 5 "$limit" bash "$SELF" --check "$fn" >"$log" 2>&1 </dev/null &
    pid=$!
    tail --pid="$pid" -s 0.2 -n +1 -f "$log" 2>/dev/null
    wait "$pid"
    rc=$?
    t1=$(date +%s.%N)
    # timeout made itself a process-group leader: anything still in that group was left behind.
    if kill -0 -- "-$pid" 2>/dev/null; then
        echo "=== [$name] killing processes it left running (group $pid)"
        kill -KILL -- "-$pid" 2>/dev/null
    fi
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    local info=
    [[ $INFO_CHECKS == *" $name "* ]] && info=info
    "$PY" "$HERE/report.py" parse "$name" "$log" "$rc" "$secs" "$limit" ${info:+"$info"} \
        >"$GPU_SUITE_WORK/last.json"
    cat "$GPU_SUITE_WORK/last.json" >>"$GPU_SUITE_WORK/results.jsonl"
    echo "=== [$name] $("$PY" -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(r["result"], ("- " + "; ".join(r["reasons"]))[:400] if r["reasons"] else "")' \
        "$GPU_SUITE_WORK/last.json") (${secs} s, exit $rc)"
}

# selected NAME: whether this run includes the check (opt-in ones only when --only was given).
selected() {
    [[ $1 =~ $ONLY ]] && { [ "$ONLY" != . ] || [[ $OPT_IN != *" $1 "* ]]; }
}

# reserve_after INDEX: the seconds kept for the selected checks after CHECKS[INDEX] (-1: all).
reserve_after() {
    local i total=0 name limit fn keep
    for ((i = $1 + 1; i < ${#CHECKS[@]}; i++)); do
        read -r name limit fn keep <<<"${CHECKS[$i]}"
        selected "$name" && total=$((total + ${keep:-0}))
    done
    echo "$total"
}

main() {
    local i name limit fn
    echo "gpuslice GPU suite, work directory $GPU_SUITE_WORK, budget ${BUDGET} s"
    record_env | tee "$GPU_SUITE_WORK/env.txt"
    echo "--- nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv ---"
    timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
    run_check build 300 c_build "$(reserve_after -1)"
    for i in "${!CHECKS[@]}"; do
        read -r name limit fn _ <<<"${CHECKS[$i]}"
        selected "$name" || continue
        run_check "$name" "$limit" "$fn" "$(reserve_after "$i")"
    done
    "$PY" "$HERE/report.py" summary "$GPU_SUITE_WORK" "${OUT:-}"
    echo $? >"$GPU_SUITE_WORK/exit"
    echo "full logs: $GPU_SUITE_WORK (checks/, build.log)"
}

case ${1:-} in
--check)
    if [ $# -ne 2 ] || ! declare -F "$2" >/dev/null; then
        echo "no check function '${2:-}'" >&2
        exit 2
    fi
    "$2"
    exit
    ;;
--list)
    for c in "${CHECKS[@]}"; do
        read -r name limit _ keep <<<"$c"
        echo "$name (timeout $limit s${keep:+, $keep s kept for it}$(
            [[ $INFO_CHECKS == *" $name "* ]] && echo ', informational'))"
    done
    exit 0
    ;;
--only)
    [ $# -eq 2 ] || { echo "usage: tests/gpu/run.sh [--only REGEX]" >&2; exit 2; }
    ONLY=$2
    ;;
"") ONLY=. ;;
*)
    echo "usage: tests/gpu/run.sh [--only REGEX | --list | --check FUNCTION]" >&2
    exit 2
    ;;
esac

# A budget the benchmarks' kept time already fills would mark every check "not run": refuse it.
if ! [[ $BUDGET =~ ^[0-9]+$ ]]; then
    echo "GPU_SUITE_BUDGET: \"$BUDGET\" is not a number of seconds (e.g. 780)" >&2
    exit 2
fi
KEPT=$(reserve_after -1)
if [ "$BUDGET" -lt $((KEPT + 120)) ]; then
    echo "GPU_SUITE_BUDGET=$BUDGET s is less than the $KEPT s kept for the selected benchmarks" \
        "plus 120 s for the build and the quick checks: give at least $((KEPT + 120)) s, or select" \
        "fewer checks with --only (tests/gpu/run.sh --list shows the kept time)" >&2
    exit 2
fi

GPU_SUITE_WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpuslice-gpu.XXXXXX") || exit 1
export GPU_SUITE_WORK
mkdir -p "$GPU_SUITE_WORK/checks"
DEADLINE=$(($(date +%s) + BUDGET))
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT" || OUT=; fi

main 2>&1 | tee "$GPU_SUITE_WORK/log.txt"
if [ -n "${OUT:-}" ]; then
    cp "$GPU_SUITE_WORK/log.txt" "$OUT/gpu-log.txt"
    for f in bench-launch.md bench-launch-duty.md bench-compute.md bench-compute-small.md \
        bench-compute.json bench-compute-small.json bench-compute-small.svg \
        bench-compute-small.png bench-attach.md driver-facts.txt \
        bench-sm-one.md bench-sm-lanes.md bench-sm-lanes-api.md bench-launch-torch.md; do
        [ -f "$GPU_SUITE_WORK/$f" ] && cp "$GPU_SUITE_WORK/$f" "$OUT/"
    done
    for d in contention-gemm contention-generate; do
        [ -d "$GPU_SUITE_WORK/$d" ] && cp -r "$GPU_SUITE_WORK/$d" "$OUT/"
    done
fi
exit "$(cat "$GPU_SUITE_WORK/exit" 2>/dev/null || echo 1)"

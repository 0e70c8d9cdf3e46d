#!/bin/sh
# Integration tests: real programs run through the real gpuslice binaries
# against the simulated GPU. Usage: run.sh BUILD_DIR CASE
set -u
B=$1
CASE=$2
T=$(mktemp -d /tmp/gs-itest-XXXXXX)
trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$B/lib/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GPUSLICE_SIM_STATE="$T/sim.state"
export GPUSLICE_RUN_DIR="$T/run"
mkdir -p "$GPUSLICE_RUN_DIR"
unset GPUSLICE_MEMORY_LIMIT TENSOR_FUSION_CUDA_MEM_LIMIT CUDA_DEVICE_MEMORY_LIMIT GPUSLICE_TENANT
GS="$B/bin/gpuslice"
LIB="$B/lib/libgpuslice.so"
IT="$B/tests/itest_dl"
ITL="$B/tests/itest_link"
G=1073741824
fails=0

ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect() { # expect STATUS DESCRIPTION -- command...
    want=$1; what=$2; shift 3
    "$@" >"$T/out" 2>"$T/err"; got=$?
    if [ "$got" = "$want" ]; then ok "$what"; else bad "$what: exit $got, want $want"; cat "$T/out" "$T/err"; fi
}
stderr_has() {
    if grep -q -- "$1" "$T/err"; then ok "message names $1"; else bad "stderr lacks '$1'"; cat "$T/err"; fi
}
preload() { env LD_PRELOAD="$LIB" "$@"; }

case $CASE in
limit_link) ITEST_LOOKUP=link expect 0 "limit via direct linking" -- "$GS" run -q --memory 1G -- "$ITL" limit $G ;;
limit_dlsym) ITEST_LOOKUP=dlsym expect 0 "limit via dlsym" -- "$GS" run -q --memory 1G -- "$IT" limit $G ;;
limit_getproc) ITEST_LOOKUP=getproc expect 0 "limit via cuGetProcAddress_v2" -- "$GS" run -q --memory 1G -- "$IT" limit $G ;;
limit_getproc_self) ITEST_LOOKUP=getproc-self expect 0 "limit via the pointer cuGetProcAddress returns for itself" -- "$GS" run -q --memory 1G -- "$IT" limit $G ;;
limit_getproc_v1) ITEST_LOOKUP=getproc-v1 expect 0 "limit via cuGetProcAddress (v1)" -- "$GS" run -q --memory 1G -- "$IT" limit $G ;;
limit_getproc_ptds) ITEST_LOOKUP=getproc-ptds expect 0 "limit via per-thread-stream lookups" -- "$GS" run -q --memory 1G -- "$IT" limit $G ;;
families) expect 0 "every allocation family counted and given back" -- "$GS" run -q --memory 2G -- "$IT" families $((2 * G)) ;;
threads) expect 0 "16 threads cannot overshoot together" -- "$GS" run -q --memory 1G -- "$IT" threads $G ;;
contexts) expect 0 "a context's footprint is counted; destroying it gives all back" -- "$GS" run -q --memory 2G -- "$IT" ctx $((2 * G)) ;;
views)
    expect 0 "cuDeviceTotalMem reports the limit" -- "$GS" run -q --memory 3G -- "$IT" totalmem $((3 * G))
    expect 0 "NVML memory info (v1, v2) reports the limit" -- "$GS" run -q --memory 3G -- "$IT" nvml $((3 * G)) ;;
env_forms)
    GPUSLICE_MEMORY_LIMIT=1G expect 0 "GPUSLICE_MEMORY_LIMIT" -- preload "$IT" limit $G
    GPUSLICE_MEMORY_LIMIT=0:1G expect 0 "GPUSLICE_MEMORY_LIMIT per index" -- preload "$IT" limit $G
    GPUSLICE_MEMORY_LIMIT=GPU-5AC1CE00-0000-4000-8000-000000000000:1G expect 0 "GPUSLICE_MEMORY_LIMIT per UUID" -- preload "$IT" limit $G
    TENSOR_FUSION_CUDA_MEM_LIMIT='{"0": 1073741824}' expect 0 "vgpu.rs TENSOR_FUSION_CUDA_MEM_LIMIT by index" -- preload "$IT" limit $G
    TENSOR_FUSION_CUDA_MEM_LIMIT='{"gpu-5ac1ce00-0000-4000-8000-000000000000": 1073741824}' expect 0 "vgpu.rs form by UUID" -- preload "$IT" limit $G
    CUDA_DEVICE_MEMORY_LIMIT=1g expect 0 "HAMi CUDA_DEVICE_MEMORY_LIMIT" -- preload "$IT" limit $G
    CUDA_DEVICE_MEMORY_LIMIT=4g CUDA_DEVICE_MEMORY_LIMIT_0=1024m expect 0 "HAMi per-device variable wins" -- preload "$IT" limit $G
    GPUSLICE_MEMORY_LIMIT=1G TENSOR_FUSION_CUDA_MEM_LIMIT='{"0": 4294967296}' expect 0 "GPUSLICE_ wins over vgpu.rs form" -- preload "$IT" limit $G ;;
bad_config)
    GPUSLICE_MEMORY_LIMIT=banana expect 4 "unparseable size: cuInit fails" -- preload "$IT" init; stderr_has GPUSLICE_MEMORY_LIMIT
    GPUSLICE_MEMORY_LIMIT=0 expect 4 "zero limit: cuInit fails" -- preload "$IT" init; stderr_has "above zero"
    GPUSLICE_MEMORY_LIMIT=-1G expect 4 "negative limit: cuInit fails" -- preload "$IT" init; stderr_has GPUSLICE_MEMORY_LIMIT
    TENSOR_FUSION_CUDA_MEM_LIMIT='{"0": 1073741824' expect 4 "malformed JSON: cuInit fails" -- preload "$IT" init; stderr_has TENSOR_FUSION_CUDA_MEM_LIMIT
    CUDA_DEVICE_MEMORY_LIMIT=lots expect 4 "bad HAMi size: cuInit fails" -- preload "$IT" init; stderr_has CUDA_DEVICE_MEMORY_LIMIT
    GPUSLICE_MEMORY_LIMIT=3:1G expect 4 "unknown device index: cuInit fails" -- preload "$IT" init; stderr_has "device 3 does not exist"
    GPUSLICE_MEMORY_LIMIT=GPU-00000000-1111-2222-3333-444444444444:1G expect 4 "unknown UUID: cuInit fails" -- preload "$IT" init; stderr_has "no GPU has UUID"
    GPUSLICE_MEMORY_LIMIT=banana expect 5 "allocations refused too, never unlimited" -- preload "$IT" try 1048576
    GPUSLICE_TENANT=$T/missing.tenant expect 4 "missing tenant state: cuInit fails" -- preload "$IT" init; stderr_has GPUSLICE_TENANT ;;
cli)
    expect 2 "run --memory '8 GB' is bad usage" -- "$GS" run --memory "8 GB" -- true; stderr_has '"8 GB" is not a size'
    expect 2 "run --memory 0 is bad usage" -- "$GS" run --memory 0 -- true
    expect 2 "run --memory x:1G is bad usage" -- "$GS" run --memory x:1G -- true
    expect 2 "run without a command" -- "$GS" run --memory 1G
    expect 2 "run with an unknown option" -- "$GS" run --bogus -- true
    expect 2 "unknown command" -- "$GS" frobnicate
    expect 0 "--version" -- "$GS" --version
    expect 0 "run --help" -- "$GS" run --help
    expect 7 "run returns the program's status" -- "$GS" run -q -- sh -c 'exit 7'
    expect 137 "run returns 128+N for a signal" -- "$GS" run -q -- sh -c 'kill -9 $$'
    expect 127 "run of a missing program" -- "$GS" run -q -- /nonexistent/prog
    expect 0 "python-style trailing args reach the program" -- "$GS" run -q -- sh -c 'test "$1" = --epochs' sh --epochs
    if [ -z "$(ls -A "$GPUSLICE_RUN_DIR")" ]; then ok "no tenant state left behind"; else bad "stale tenant files: $(ls "$GPUSLICE_RUN_DIR")"; fi ;;
tenant)
    # Two processes of one tenant share the limit; a SIGKILLed one gives its usage back within a second.
    cat >"$T/two.sh" <<EOS
set -u
"$IT" hold 734003200 "$T/release" >"$T/hold.out" &
h=\$!
for i in \$(seq 100); do grep -q "hold" "$T/hold.out" 2>/dev/null && break; sleep 0.05; done
"$IT" try 524288000; a=\$?
touch "$T/release"; wait \$h
"$IT" try 524288000; b=\$?
"$IT" hold 734003200 "$T/never" >"$T/hold2.out" &
k=\$!
for i in \$(seq 100); do grep -q "hold" "$T/hold2.out" 2>/dev/null && break; sleep 0.05; done
kill -9 \$k; wait \$k 2>/dev/null
start=\$(date +%s%N)
"$IT" try 734003200; c=\$?
end=\$(date +%s%N)
echo "second process while first holds: \$a (want 3); after release: \$b (want 0); after SIGKILL: \$c (want 0) in \$(( (end - start) / 1000000 )) ms"
[ \$a = 3 ] && [ \$b = 0 ] && [ \$c = 0 ] && [ \$(( (end - start) / 1000000 )) -lt 1000 ]
EOS
    expect 0 "two processes of one tenant share one limit; SIGKILL gives usage back" -- "$GS" run -q --memory 1G -- sh "$T/two.sh"
    cat "$T/out"
    if [ -z "$(ls -A "$GPUSLICE_RUN_DIR")" ]; then ok "tenant state removed"; else bad "stale tenant files"; fi ;;
passthrough)
    GPUSLICE_DEBUG=1 expect 0 "no limit: the device's own view passes through" -- preload "$IT" limit $((16 * G))
    stderr_has "inactive (pass-through)"
    ITEST_LOOKUP=getproc GPUSLICE_DEBUG=1 expect 0 "no limit via cuGetProcAddress" -- preload "$IT" limit $((16 * G)) ;;
rtld_next)
    out=$(env LD_PRELOAD="$LIB:$B/tests/librtldnext.so" true)
    if [ "$out" = "rtld-next-ok" ]; then ok "dlsym(RTLD_NEXT) still means after the caller"; else bad "RTLD_NEXT broken: $out"; fi ;;
exports)
    syms=$(nm -D --defined-only "$LIB" | awk '{print $3}')
    for s in $syms; do
        case $s in
        dlsym) ;;
        cu* | nvml*) grep -q "X([^,]*, *[A-Za-z0-9_]*, *$s," "$SRC/src/preload/hooks.h" || bad "exported $s is not in the hook list" ;;
        *) bad "exports $s" ;;
        esac
    done
    ok "exports: $(echo $syms | wc -w) symbols, all interposition points"
    if [ "${SANITIZE:-0}" = 1 ]; then
        ok "NEEDED check skipped under sanitizers"
    else
        needed=$(readelf -d "$LIB" | awk '/NEEDED/ {print $NF}' | tr -d '[]')
        if [ "$needed" = "libc.so.6" ]; then ok "links only libc"; else bad "links $needed"; fi
    fi ;;
*) echo "unknown case $CASE"; exit 2 ;;
esac
echo "$CASE: $fails failed"
[ $fails = 0 ]

#!/bin/sh
# Integration tests: real programs run through the real gpuslice binaries
# against the simulated GPU. Usage: run.sh BUILD_DIR CASE
set -u
B=$1
CASE=$2
T=$(mktemp -d /tmp/gs-itest-XXXXXX)
BG=
# Release holders and stop what a case started in the background, even when it fails midway.
cleanup() { touch "$T/release"; [ -n "$BG" ] && kill $BG 2>/dev/null; wait; reap_strays; rm -rf "$T"; }
# reap_strays: kills what is left of the case: every process whose environment names its
# directory (each inherits GPUSLICE_SIM_STATE and the rest from here). A program started in the
# background through a function or as another user (as_nobody ... &) has a subshell's PID in
# $!, and killing that left it running; it held ctest's output open, and ctest counted the case
# until it ended (daemon_trust_planted: 14 s of work, 60 s counted, for a "sleep 60" of
# nobody's). (The grep lists itself too: gone when killed.)
reap_strays() {
    for f in $(grep -lzF "$T/" /proc/[0-9]*/environ 2>/dev/null); do
        f=${f#/proc/}
        [ "${f%/environ}" != $$ ] && kill -KILL "${f%/environ}" 2>/dev/null
    done
    return 0
}
trap cleanup EXIT
export LD_LIBRARY_PATH="$B/lib/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Hermetic: whatever a case reads or makes is in $T. The run directory (tenants, boards), the
# MPS directories (XDG_RUNTIME_DIR; CUDA_MPS_* for a default daemon), HOME and TMPDIR are the
# case's own, so tenants, daemons and files of other runs (in /dev/shm, /tmp/nvidia-mps,
# /tmp/gpuslice-mps-UID, ~) are never seen; case mps_stray checks it with a stray daemon.
export GPUSLICE_SIM_STATE="$T/sim.state"
export GPUSLICE_RUN_DIR="$T/run"
# The daemon's directory too: the CLI asks only the daemon there (the one a case starts, in
# daemon.sh), never a real one in /run/gpuslice or the user's own (`make start` beside `make
# test`: README). The interposer still looks in /run/gpuslice, where a test's processes are
# members of no tenant (checked below).
export GPUSLICE_DAEMON_DIR="$T/drun"
export XDG_RUNTIME_DIR="$T/xdg" HOME="$T/home" TMPDIR="$T/tmp"
export CUDA_MPS_PIPE_DIRECTORY="$T/nvidia-mps" CUDA_MPS_LOG_DIRECTORY="$T/nvidia-mps-log"
mkdir -p "$GPUSLICE_RUN_DIR"
mkdir -m 700 "$XDG_RUNTIME_DIR" "$HOME" "$TMPDIR"
unset GPUSLICE_MEMORY_LIMIT TENSOR_FUSION_CUDA_MEM_LIMIT CUDA_DEVICE_MEMORY_LIMIT GPUSLICE_TENANT
unset CUDA_DEVICE_MEMORY_SHARED_CACHE
unset GPUSLICE_COMPUTE_LIMIT TENSOR_FUSION_CUDA_UP_LIMIT CUDA_DEVICE_SM_LIMIT
# Nor does the caller's environment leak in: no GPU selection, preloading, simulator shape,
# timeout or driver path of its own (HAMi's per-device variables included).
unset GPUSLICE_SMS GPUSLICE_LANE GPUSLICE_DEBUG GPUSLICE_MPS_TIMEOUT GPUSLICE_REAL_LIBCUDA \
    GPUSLICE_REAL_LIBNVML GPUSLICE_PRELOAD_LIB GPUSLICE_PYTHON_DIR GPUSLICE_SIM_DEVICES \
    GPUSLICE_SIM_SMS GPUSLICE_SIM_MEMORY GPUSLICE_SIM_GREEN CUDA_VISIBLE_DEVICES \
    CUDA_DEVICE_ORDER CUDA_MPS_ACTIVE_THREAD_PERCENTAGE CUDA_MPS_CLIENT_PRIORITY LD_PRELOAD PYTHONPATH
for v in $(env | sed -n 's/^\(CUDA_DEVICE_\(MEMORY\|SM\)_LIMIT_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
GS="$B/bin/gpuslice"
LIB="$B/lib/libgpuslice.so"
IT="$B/tests/itest_dl"
ITL="$B/tests/itest_link"
CL="$B/tests/compute_load"
G=1073741824
fails=0
# loose LO: a lower bound on a measured share or rate, 0.7 of it under the sanitizers. There every
# call is several times slower and the governor, late to see work end, bills the gaps as busy time:
# in CI's ASan run of 2026-12-01, 20 us kernels at 60% held the device 49% of the time (on this
# 2-CPU machine, loaded, 52% while billed 62%), and 500 us kernels at 25% were billed up to 1.30
# times their kernels' time, the worst path changing from run to run. The plain build holds the
# bounds as given, and the mutation run judges by it; a share's upper bound (the ceiling held) is
# never loosened. over HI: the bound on billed over kernel time, 1.5 under the sanitizers.
over() { if [ "${SANITIZE:-0}" = 1 ]; then echo 1.5; else echo "$1"; fi; }
loose() { if [ "${SANITIZE:-0}" = 1 ]; then awk -v v="$1" 'BEGIN { printf "%.3f", v * 0.7 }'; else echo "$1"; fi; }

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
# share_in LO HI WHAT [FILE]: the share compute_load printed (in FILE, default $T/out) lies in
# [LO, HI] (LO loosened under the sanitizers: see loose).
share_in() {
    local lo
    lo=$(loose "$1")
    v=$(awk '/^share/ {print $2}' "${4:+$T/}${4:-$T/out}")
    if [ -n "$v" ] && awk -v v="$v" -v lo="$lo" -v hi="$2" 'BEGIN { exit !(v >= lo && v <= hi) }'; then
        ok "$3: share $v in [$lo, $2]"
    else
        bad "$3: share ${v:-none}, want [$lo, $2]"; cat "$T/err" 2>/dev/null
    fi
}
# billed_in LO HI WHAT: the device time the tenant was billed over its kernels' own time (both
# printed by compute_load under gpuslice run) lies in [LO, HI]: a governor that bills less than
# its work held the device lets the tenant past its ceiling by that much.
billed_in() {
    v=$(awk '/^billed_s/ { if ($4 > 0) printf "%.4f", $2 / $4 }' "$T/out")
    if [ -n "$v" ] && awk -v v="$v" -v lo="$1" -v hi="$2" 'BEGIN { exit !(v >= lo && v <= hi) }'; then
        ok "$3: billed $v of its kernels' time, in [$1, $2]"
    else
        bad "$3: billed ${v:-nothing} of its kernels' time, want [$1, $2]"; cat "$T/out"
    fi
}
# share_twice LO HI DESC CMD...: runs CMD (a load under a ceiling) and checks its share is in
# [LO, HI]. A share under LO is measured once more: on a 2-CPU machine a neighbour's load can keep
# launching threads from reaching the ceiling (4 times in about a dozen full runs on 2026-12-01),
# which says nothing of the governor. When the host is that slow, the governor, itself late to
# see work end, bills the gaps as busy time (on a loaded 2-CPU machine under ASan, 4 threads at
# 40% were billed 41% of the time for kernels holding the device 28-31% of it), so a second share
# under LO still passes when the tenant was billed its ceiling ([LO, HI + 0.02]) and at most 1.15
# times its kernels' time (1.5 under the sanitizers: see over); it never passes over HI.
share_twice() {
    local goal=$1 lo hi=$2 desc=$3 v b
    lo=$(loose "$1")
    shift 3
    expect 0 "$desc" -- "$@"
    v=$(awk '/^share/ {print $2}' "$T/out")
    if [ -n "$v" ] && awk -v v="$v" -v lo="$lo" 'BEGIN { exit !(v < lo) }'; then
        echo "note: $desc: share $v under $lo; measuring once more"
        expect 0 "$desc, again" -- "$@"
        v=$(awk '/^share/ {print $2}' "$T/out")
        b=$(awk '/^billed_s/ { if ($4 > 0 && $6 > 0) printf "%.3f %.3f", $2 / $6, $2 / $4 }' "$T/out")
        if [ -n "$v" ] && [ -n "$b" ] && awk -v v="$v" -v b="$b" -v lo="$lo" -v goal="$goal" -v hi="$hi" -v over="$(over 1.15)" '
            BEGIN { split(b, x, " "); exit !(v < lo && v > 0 && x[1] >= goal && x[1] <= hi + 0.02 && x[2] <= over) }'; then
            ok "$desc: share $v under $lo on a slow host, billed ${b% *} of the time (${b#* } times its kernels' time)"
            return
        fi
    fi
    share_in "$goal" "$hi" "$desc"
}
# side_by_side LABEL CA LOA HIA CB LOB HIB: a tenant at CA% and one at CB% loading the device
# together (stderr in $T/a.err and $T/b.err); each share must lie in its band [LO, HI]. A pair
# with a share under its band is measured once more (see share_twice): a governor that holds a
# tenant under its ceiling fails both.
side_by_side() {
    local label=$1 ca=$2 loa=$3 hia=$4 cb=$5 lob=$6 hib=$7 attempt pa
    # Under the sanitizers a loaded host's governor bills more of the gaps (see share_twice):
    # the lower bounds are loose() there, the upper ones never (a board that does not take
    # turns still fails: each was billed for the other's kernels, 27 % of 45).
    loa=$(loose "$loa") lob=$(loose "$lob")
    for attempt in 1 2; do
        "$GS" run -q --compute "$ca" -- "$CL" stream 2.5 500 >"$T/a" 2>"$T/a.err" &
        pa=$!
        "$GS" run -q --compute "$cb" -- "$CL" stream 2.5 500 >"$T/b" 2>"$T/b.err"
        wait $pa
        a=$(awk '/^share/ {print $2}' "$T/a"); b=$(awk '/^share/ {print $2}' "$T/b")
        if [ "$attempt" = 1 ] && awk -v a="$a" -v b="$b" -v la="$loa" -v lb="$lob" \
            'BEGIN { exit !(a < la || b < lb) }'; then
            echo "note: $label: shares $a and $b under their bands; measuring once more"
        else
            break
        fi
    done
    if awk -v v="$a" -v lo="$loa" -v hi="$hia" 'BEGIN { exit !(v >= lo && v <= hi) }'; then
        ok "$label: the tenant at $ca%: $a"
    else bad "$label: the tenant at $ca%: $a, want $loa..$hia"; cat "$T/a.err"; fi
    if awk -v v="$b" -v lo="$lob" -v hi="$hib" 'BEGIN { exit !(v >= lo && v <= hi) }'; then
        ok "$label: the tenant at $cb%: $b"
    else bad "$label: the tenant at $cb%: $b, want $lob..$hib"; cat "$T/b.err"; fi
}
table_is() { # table_is DESCRIPTION LINE...: stdout of the last expect is exactly these lines
    local what=$1
    shift
    if [ "$(cat "$T/out")" = "$(printf '%s\n' "$@")" ]; then ok "$what"; else
        bad "$what"; echo "got:"; cat "$T/out"; echo "want:"; printf '%s\n' "$@"; fi
}
json_ok() { # json_ok DESCRIPTION PYTHON: runs PYTHON with d = the JSON on stdout of the last expect
    if python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); exec(sys.argv[2])' "$T/out" "$2" 2>"$T/py"; then
        ok "$1"
    else
        bad "$1"; cat "$T/out" "$T/py"
    fi
}
holder() { # holder NAME LIMIT BYTES: a tenant whose one process holds BYTES until $T/release exists
    "$GS" run -q --name "$1" --memory "$2" -- "$IT" hold "$3" "$T/release" >"$T/holder.out" 2>&1 &
    HOLDER=$!
    for i in $(seq 100); do grep -q "^hold" "$T/holder.out" 2>/dev/null && break; sleep 0.05; done
    if grep -q "^hold $3 -> 0" "$T/holder.out"; then ok "tenant $1 holds $3 bytes"; else bad "holder did not start"; cat "$T/holder.out"; fi
}
release() { touch "$T/release"; wait $HOLDER; rm -f "$T/release"; }
# tenant_id [NAME]: the id of the case's tenant named NAME (of its only tenant without NAME); none
# when there is not exactly one.
tenant_id() {
    "$GS" tenants --json --interval 0 | python3 -c 'import json, sys
t = [x for x in json.load(sys.stdin)["tenants"] if len(sys.argv) < 2 or x["name"] == sys.argv[1]]
print(t[0]["id"] if len(t) == 1 else "")' "$@"
}
# A case talks to no daemon it did not start. The CLI cannot (GPUSLICE_DAEMON_DIR above), but
# the interposer always finds a process's tenant in the system daemon's directory: tests run
# from inside a daemon's tenant (gpuslice run --tenant NAME -- make test) would run every program
# in it, charging its usage there. Refused here, saying so.
if ! "$GS" run -q --memory 1G -- true 2>"$T/nested"; then
    if grep -q "inside the daemon's tenant" "$T/nested"; then
        echo "FAIL: these tests run inside a gpuslice daemon's tenant, whose limits would apply to"
        echo "every program they start and whose usage they would change: run them outside it"
        cat "$T/nested"
        exit 1
    fi
fi

case $CASE in
# The limit_* cases: limits and allocations above 4 GiB, where a lookup that wrongly hands out a
# 32-bit variant (cuMemAlloc's unsigned int size for cuMemAlloc_v2, cuMemGetInfo's unsigned int
# sizes) shows: 7 GiB would be asked as 3 GiB and admitted, the total read as 4 GiB - 1.
limit_link)
    ITEST_LOOKUP=link expect 0 "limit via direct linking (6 GiB)" -- "$GS" run -q --memory 6G -- "$ITL" limit $((6 * G))
    ITEST_LOOKUP=link expect 0 "via direct linking: 5 GiB at once under 6 GiB" -- "$GS" run -q --memory 6G -- "$ITL" try $((5 * G))
    ITEST_LOOKUP=link expect 3 "via direct linking: 7 GiB at once refused under 6 GiB" -- "$GS" run -q --memory 6G -- "$ITL" try $((7 * G)) ;;
limit_dlsym)
    ITEST_LOOKUP=dlsym expect 0 "limit via dlsym (6 GiB)" -- "$GS" run -q --memory 6G -- "$IT" limit $((6 * G))
    ITEST_LOOKUP=dlsym expect 0 "via dlsym: 5 GiB at once under 6 GiB" -- "$GS" run -q --memory 6G -- "$IT" try $((5 * G))
    ITEST_LOOKUP=dlsym expect 3 "via dlsym: 7 GiB at once refused under 6 GiB" -- "$GS" run -q --memory 6G -- "$IT" try $((7 * G)) ;;
limit_getproc)
    ITEST_LOOKUP=getproc expect 0 "limit via cuGetProcAddress_v2 (6 GiB)" -- "$GS" run -q --memory 6G -- "$IT" limit $((6 * G))
    ITEST_LOOKUP=getproc expect 0 "via cuGetProcAddress_v2: 5 GiB at once under 6 GiB" -- "$GS" run -q --memory 6G -- "$IT" try $((5 * G))
    ITEST_LOOKUP=getproc expect 3 "via cuGetProcAddress_v2: 7 GiB at once refused under 6 GiB" -- "$GS" run -q --memory 6G -- "$IT" try $((7 * G)) ;;
limit_getproc_self)
    ITEST_LOOKUP=getproc-self expect 0 "limit via the pointer cuGetProcAddress returns for itself (6 GiB)" -- "$GS" run -q --memory 6G -- "$IT" limit $((6 * G))
    ITEST_LOOKUP=getproc-self expect 0 "via the pointer cuGetProcAddress returns for itself: 5 GiB at once under 6 GiB" -- "$GS" run -q --memory 6G -- "$IT" try $((5 * G))
    ITEST_LOOKUP=getproc-self expect 3 "via the pointer cuGetProcAddress returns for itself: 7 GiB at once refused under 6 GiB" -- "$GS" run -q --memory 6G -- "$IT" try $((7 * G)) ;;
limit_getproc_v1)
    ITEST_LOOKUP=getproc-v1 expect 0 "limit via cuGetProcAddress (v1) (6 GiB)" -- "$GS" run -q --memory 6G -- "$IT" limit $((6 * G))
    ITEST_LOOKUP=getproc-v1 expect 0 "via cuGetProcAddress (v1): 5 GiB at once under 6 GiB" -- "$GS" run -q --memory 6G -- "$IT" try $((5 * G))
    ITEST_LOOKUP=getproc-v1 expect 3 "via cuGetProcAddress (v1): 7 GiB at once refused under 6 GiB" -- "$GS" run -q --memory 6G -- "$IT" try $((7 * G)) ;;
limit_getproc_ptds)
    ITEST_LOOKUP=getproc-ptds expect 0 "limit via per-thread-stream lookups (6 GiB)" -- "$GS" run -q --memory 6G -- "$IT" limit $((6 * G))
    ITEST_LOOKUP=getproc-ptds expect 0 "via per-thread-stream lookups: 5 GiB at once under 6 GiB" -- "$GS" run -q --memory 6G -- "$IT" try $((5 * G))
    ITEST_LOOKUP=getproc-ptds expect 3 "via per-thread-stream lookups: 7 GiB at once refused under 6 GiB" -- "$GS" run -q --memory 6G -- "$IT" try $((7 * G)) ;;
getproc_pointers)
    # Which hook cuGetProcAddress hands out, for every hooked name, version and flag, against the
    # H200 driver's rule: with the simulator's exported pointers (matched by pointer), then with
    # pointers no dlsym gives (the interposer's fallback version rules).
    PC="$B/tests/procaddr_check"
    GPUSLICE_MEMORY_LIMIT=8G expect 0 "cuGetProcAddress gives the driver's variant's hook (exported pointers)" -- preload "$PC"
    GPUSLICE_MEMORY_LIMIT=8G GPUSLICE_SIM_PROCADDR=unexported expect 0 "cuGetProcAddress gives the driver's variant's hook (unexported pointers: the version rules)" -- preload "$PC" ;;
families)
    expect 0 "every allocation family counted and given back" -- "$GS" run -q --memory 2G -- "$IT" families $((2 * G))
    # Where NVML does not list the process (a PID namespace) the charges alone say it, as exactly.
    GPUSLICE_SIM_NVML_PID_OFFSET=100000 expect 0 "every allocation family counted and given back, in a PID namespace" -- \
        "$GS" run -q --memory 2G -- "$IT" families $((2 * G)) ;;
threads) expect 0 "16 threads cannot overshoot together" -- "$GS" run -q --memory 1G -- "$IT" threads $G ;;
contexts) expect 0 "a context's footprint is counted; destroying it gives all back" -- "$GS" run -q --memory 2G -- "$IT" ctx $((2 * G)) ;;
views)
    expect 0 "cuDeviceTotalMem reports the limit" -- "$GS" run -q --memory 3G -- "$IT" totalmem $((3 * G))
    # (The device with 100 MiB in use that no process holds: the tenant's used is its own.)
    GPUSLICE_SIM_IDLE_USED=100M expect 0 "NVML memory info (v1, v2) reports the limit" -- "$GS" run -q --memory 3G -- "$IT" nvml $((3 * G))
    # NVML's used follows the tenant's members (issue 32): a member holding 512 MiB SIGKILLed
    # (it gives nothing back itself) is out of the next reading of another member's NVML.
    "$GS" run -q --memory 3G -- sh -c '"$0" hold $((512 << 20)) "$1/never" 30 >"$1/holder" & h=$!
        i=0; while ! grep -q "hold .* -> 0" "$1/holder" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
        "$0" nvml_used >"$1/u1"; kill -9 $h; wait $h 2>/dev/null; "$0" nvml_used >"$1/u2"' "$IT" "$T"
    u1=$(awk '{print $2}' "$T/u1"); u2=$(awk '{print $2}' "$T/u2")
    if [ -n "$u1" ] && [ "$u1" -ge $((512 << 20)) ] && [ "$u2" = 0 ]; then ok "NVML's used: $u1 with a member holding 512 MiB, $u2 once it was killed"
    else bad "NVML's used: ${u1:-?} with the member, ${u2:-?} after it was killed"; cat "$T/u1" "$T/u2" "$T/holder"; fi
    # A refused configuration refuses NVML too: nvidia-smi under it fails, never shows the
    # device's memory as the tenant's.
    GPUSLICE_MEMORY_LIMIT=banana expect 1 "NVML under a refused configuration fails" -- preload "$IT" nvml_used
    grep -qx "NVML failed" "$T/out" && ok "nvmlInit refused" || { bad "NVML under a refused configuration"; cat "$T/out"; }
    stderr_has '"banana" is not a size'
    # A tenant with no memory limit (a compute ceiling only) sees the device's own figures.
    expect 0 "no memory limit: cuDeviceTotalMem is the device's 16 GiB" -- "$GS" run -q --compute 50 -- "$IT" totalmem $((16 * G))
    expect 0 "no memory limit: NVML's total is the device's 16 GiB, its used the process's" -- \
        "$GS" run -q --compute 50 -- "$IT" nvml $((16 * G)) ;;
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
    # Audit defect 11: a malformed per-device name is refused, named, never ignored.
    for v in CUDA_DEVICE_MEMORY_LIMIT_O CUDA_DEVICE_MEMORY_LIMIT_0x CUDA_DEVICE_MEMORY_LIMIT_0000 CUDA_DEVICE_MEMORY_LIMIT_; do
        expect 4 "defect 11: $v fails cuInit" -- env "$v=1g" LD_PRELOAD="$LIB" "$IT" init
        stderr_has "$v"
    done
    GPUSLICE_MEMORY_LIMIT=3:1G expect 4 "unknown device index: cuInit fails" -- preload "$IT" init; stderr_has "device 3 does not exist"
    GPUSLICE_MEMORY_LIMIT=GPU-00000000-1111-2222-3333-444444444444:1G expect 4 "unknown UUID: cuInit fails" -- preload "$IT" init; stderr_has "no GPU has UUID"
    # Issue 28.2: an index and the UUID of one GPU would silently leave one of them unused.
    GPUSLICE_MEMORY_LIMIT=0:8G,GPU-5ac1ce00-0000-4000-8000-000000000000:4G expect 4 "index and UUID of one GPU: cuInit fails" -- preload "$IT" init
    stderr_has "two entries name CUDA device 0"
    GPUSLICE_COMPUTE_LIMIT=GPU-5AC1CE00-0000-4000-8000-000000000000:30,0:90 expect 4 "UUID (upper case) and index of one GPU: cuInit fails" -- preload "$IT" init
    stderr_has "two entries name CUDA device 0"
    GPUSLICE_MEMORY_LIMIT=banana expect 5 "allocations refused too, never unlimited" -- preload "$IT" try 1048576
    GPUSLICE_TENANT=$T/missing.tenant expect 4 "missing tenant state: cuInit fails" -- preload "$IT" init; stderr_has GPUSLICE_TENANT
    # A relative daemon directory names no place (each process's working directory): refused by
    # the interposer, the CLI and the daemon alike, never taken for another daemon's (issue 32).
    GPUSLICE_DAEMON_DIR=rundir expect 4 "a relative GPUSLICE_DAEMON_DIR: cuInit fails" -- preload "$IT" init
    stderr_has 'GPUSLICE_DAEMON_DIR="rundir" is not an absolute path'
    for c in "top --once" "tenants" "set x --memory 1G" "run -- true" "exec -- true" "info"; do
        GPUSLICE_DAEMON_DIR=rundir expect 2 "a relative GPUSLICE_DAEMON_DIR: gpuslice $c refuses it" -- "$GS" $c
        stderr_has 'GPUSLICE_DAEMON_DIR="rundir" is not an absolute path'
    done
    GPUSLICE_DAEMON_DIR=rundir expect 2 "a relative GPUSLICE_DAEMON_DIR: gpusliced refuses it" -- env -C "$T" "$B/bin/gpusliced"
    stderr_has 'GPUSLICE_DAEMON_DIR "rundir" is not an absolute path'
    [ ! -e "$T/rundir" ] && ok "nothing made under the working directory" || bad "$T/rundir made"
    # So is a relative GPUSLICE_RUN_DIR: tenant files and boards would be each working
    # directory's own, and processes of one tenant would not share its compute. (The directory
    # is there: a command that took the path would make its files in it.)
    mkdir "$T/tdir"
    GPUSLICE_RUN_DIR=tdir expect 4 "a relative GPUSLICE_RUN_DIR: cuInit fails" -- env -C "$T" LD_PRELOAD="$LIB" "$IT" init
    stderr_has 'GPUSLICE_RUN_DIR="tdir" is not an absolute path'
    for c in "run -- true" "tenants" "set x --memory 1G" "top --once"; do
        GPUSLICE_RUN_DIR=tdir expect 2 "a relative GPUSLICE_RUN_DIR: gpuslice $c refuses it" -- env -C "$T" "$GS" $c
        stderr_has 'GPUSLICE_RUN_DIR="tdir" is not an absolute path'
    done
    GPUSLICE_RUN_DIR=tdir expect 2 "a relative GPUSLICE_RUN_DIR: gpusliced refuses it" -- env -C "$T" "$B/bin/gpusliced" --config /dev/null --print-config
    stderr_has 'GPUSLICE_RUN_DIR "tdir" is not an absolute path'
    [ -z "$(ls -A "$T/tdir")" ] && ok "nothing made in the working directory's tdir" || { bad "files made in $T/tdir"; ls -la "$T/tdir"; } ;;
cli)
    expect 2 "run --memory '8 GB' is bad usage" -- "$GS" run --memory "8 GB" -- true; stderr_has '"8 GB" is not a size'
    expect 2 "run --memory 0 is bad usage" -- "$GS" run --memory 0 -- true
    expect 2 "run --memory x:1G is bad usage" -- "$GS" run --memory x:1G -- true
    expect 2 "run --memory with an index and the UUID of one GPU is bad usage" -- "$GS" run --memory 0:8G,GPU-5ac1ce00-0000-4000-8000-000000000000:4G -- true
    stderr_has "two entries name GPU 0 (GPU-5ac1ce00-0000-4000-8000-000000000000)"
    expect 2 "run --compute with the UUID in two cases is bad usage" -- "$GS" run --compute GPU-5ac1ce00-0000-4000-8000-000000000000:30,GPU-5AC1CE00-0000-4000-8000-000000000000:90 -- true
    expect 2 "run without a command" -- "$GS" run --memory 1G
    expect 2 "run with an unknown option" -- "$GS" run --bogus -- true
    expect 2 "unknown command" -- "$GS" frobnicate; stderr_has 'unknown command "frobnicate" (commands: run, exec, '
    expect 2 "a command's first letters are no command" -- "$GS" ru -- true; stderr_has 'unknown command "ru"'
    # Global options: the exit status and the message are pinned (a wrong status survived once).
    for o in --bogus -x --quiet=1 --versionx; do
        expect 2 "bad global option $o" -- "$GS" "$o" run -q -- touch "$T/started"
        stderr_has "^gpuslice: unknown option $o (the options before a command are -q/--quiet, -V/--version and -h/--help"
        if [ -s "$T/out" ]; then bad "stdout for a bad global option"; cat "$T/out"; else ok "nothing on stdout"; fi
    done
    if [ -e "$T/started" ]; then bad "a bad global option ran the command"; else ok "the command was not run"; fi
    expect 2 "gpuslice with no command" -- "$GS"; stderr_has "no command given"; stderr_has "^usage: gpuslice "
    if [ -s "$T/out" ]; then bad "usage on stdout"; else ok "usage on stderr only"; fi
    expect 2 "gpuslice -q with no command" -- "$GS" -q; stderr_has "no command given"
    for o in --version -V; do
        expect 0 "$o" -- "$GS" "$o"
        if grep -Eq '^gpuslice [0-9]+\.[0-9]+\.[0-9]+$' "$T/out"; then ok "$o prints the version"; else bad "$o printed: $(cat "$T/out")"; fi
    done
    for o in --help -h; do
        expect 0 "$o" -- "$GS" "$o"
        if grep -q "^usage: gpuslice " "$T/out" && grep -q "^  tenants " "$T/out" && [ ! -s "$T/err" ]; then ok "$o: usage on stdout"; else bad "$o output"; cat "$T/out" "$T/err"; fi
    done
    expect 0 "a global option before the command" -- "$GS" -q --quiet run -- true
    # help [COMMAND]: an unknown one is bad usage, naming it and the commands.
    expect 0 "help" -- "$GS" help; if grep -q "^usage: gpuslice " "$T/out"; then ok "help prints the usage"; else bad "help output"; fi
    expect 0 "help tenants" -- "$GS" help tenants; if grep -q "^usage: gpuslice tenants" "$T/out"; then ok "help tenants"; else bad "help tenants output"; fi
    expect 2 "help of an unknown command" -- "$GS" help nope
    stderr_has 'help: unknown command "nope" (commands: run, exec, info, reserve, procs, tenants, set, mps, top, green-run)'
    if [ -s "$T/out" ]; then bad "help nope printed a usage"; cat "$T/out"; else ok "nothing on stdout"; fi
    expect 2 "help of two commands" -- "$GS" help run set; stderr_has "one command at a time"
    expect 0 "run --help" -- "$GS" run --help
    expect 7 "run returns the program's status" -- "$GS" run -q -- sh -c 'exit 7'
    expect 137 "run returns 128+N for a signal" -- "$GS" run -q -- sh -c 'kill -9 $$'
    expect 127 "run of a missing program" -- "$GS" run -q -- /nonexistent/prog
    expect 0 "python-style trailing args reach the program" -- "$GS" run -q -- sh -c 'test "$1" = --epochs' sh --epochs
    # --name: 63 characters fit the tenant's name (64 bytes with its NUL), all of them kept; 64 do not.
    n63=$(printf '%063d' 0 | tr 0 n)
    expect 0 "--name of 63 characters" -- "$GS" run -q --name "$n63" -- "$GS" tenants --json --interval 0
    json_ok "the tenant has all 63 of them" "assert [t['name'] for t in d['tenants']] == ['$n63'], d"
    expect 2 "--name of 64 characters" -- "$GS" run --name "${n63}x" -- touch "$T/started"
    stderr_has "^gpuslice: --name: \"${n63}x\" is longer than 63 characters$"
    # --tenant takes the daemon tenant's limits, class, weight and name: each option of its own is
    # refused before any daemon is asked, naming the tenant.
    for o in "--memory 1G" "--compute 30" "--filled 0.5" "--name x" "--priority background" "--weight 3"; do
        expect 2 "--tenant job with $o" -- "$GS" run --tenant job $o -- touch "$T/started"
        stderr_has "^gpuslice: --tenant job: the daemon's tenant has its limits, class, weight and name; give "
    done
    # The limits, class and weight in run's environment become the tenant's: bad ones are bad usage.
    GPUSLICE_MEMORY_LIMIT=lots expect 2 "a bad GPUSLICE_MEMORY_LIMIT" -- "$GS" run -- touch "$T/started"
    stderr_has "GPUSLICE_MEMORY_LIMIT.*(the limits in run's environment become the tenant's)$"
    GPUSLICE_COMPUTE_LIMIT=101 expect 2 "a bad GPUSLICE_COMPUTE_LIMIT" -- "$GS" exec -- touch "$T/started"
    stderr_has "GPUSLICE_COMPUTE_LIMIT.*(the limits in exec's environment become the tenant's)$"
    GPUSLICE_WEIGHT=0 expect 2 "a bad GPUSLICE_WEIGHT" -- "$GS" run -- touch "$T/started"
    stderr_has "GPUSLICE_WEIGHT: \"0\" is not a weight (use an integer from 1 to 100) (the environment's class and weight become the tenant's)$"
    # ... and good ones are the tenant's, unless an option says otherwise.
    GPUSLICE_MEMORY_LIMIT=3G expect 0 "GPUSLICE_MEMORY_LIMIT under run" -- "$GS" run -q -- "$IT" totalmem $((3 * G))
    GPUSLICE_MEMORY_LIMIT=3G expect 0 "--memory over GPUSLICE_MEMORY_LIMIT" -- "$GS" run -q --memory 2G -- "$IT" totalmem $((2 * G))
    if [ -e "$T/started" ]; then bad "a refused run started its program"; else ok "no refused run started its program"; fi
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
cli_compute)
    for v in 0 101 abc 5.5 -5 x:30 0:0 0:30,0:40 ""; do
        expect 2 "run --compute '$v' is bad usage" -- "$GS" run --compute "$v" -- touch "$T/started"
        stderr_has "--compute: "
    done
    stderr_has "use an integer percentage from 1 to 100"
    expect 2 "run --compute without a value" -- "$GS" run --compute
    stderr_has "--compute needs a value"
    if [ -e "$T/started" ]; then bad "a refused run started the program"; else ok "nothing started"; fi
    if [ -z "$(ls -A "$GPUSLICE_RUN_DIR")" ]; then ok "no tenant state made"; else bad "tenant files: $(ls "$GPUSLICE_RUN_DIR")"; fi
    GPUSLICE_SIM_STATE="$T/two.state" GPUSLICE_SIM_DEVICES=2 expect 0 "run exports --compute as GPUSLICE_COMPUTE_LIMIT" -- "$GS" run -q --compute 0:30,1:50 -- sh -c 'test "$GPUSLICE_COMPUTE_LIMIT" = 0:30,1:50'
    expect 0 "run -c with a default and a UUID entry" -- "$GS" run -q -c 40,GPU-5AC1CE00-0000-4000-8000-000000000000:20 -- sh -c 'test "$GPUSLICE_COMPUTE_LIMIT" = 40,GPU-5AC1CE00-0000-4000-8000-000000000000:20'
    expect 0 "run --compute 100 (no ceiling) is accepted" -- "$GS" run -q --compute 100 -- true
    expect 0 "run --help describes --compute" -- "$GS" run --help
    if grep -q -- "--compute PERCENT" "$T/out"; then ok "usage names --compute"; else bad "usage lacks --compute"; fi
    expect 0 "a CUDA program runs under --compute and --memory" -- "$GS" run -q --compute 50 --memory 1G -- "$IT" limit $G ;;
tenants)
    expect 0 "tenants with nothing to list" -- "$GS" tenants
    if [ -s "$T/out" ]; then bad "a table of nothing on stdout"; cat "$T/out"; else ok "stdout empty"; fi
    stderr_has "^gpuslice: no tenants in $GPUSLICE_RUN_DIR$"
    expect 0 "tenants --json with nothing to list" -- "$GS" tenants --json
    json_ok "an empty list" 'assert d == {"source": "run-directory", "tenants": []}'
    expect 0 "tenants -q with nothing to list" -- "$GS" tenants -q
    if [ -s "$T/err" ] || [ -s "$T/out" ]; then bad "-q printed"; cat "$T/out" "$T/err"; else ok "-q says nothing"; fi
    # --interval: seconds up to 3600, both ends and a fraction accepted (with nothing to list,
    # nothing is measured, so no wait), past 3600 refused as too long.
    for v in 0 0.5 .5 5. 3600 3600.0 3599.999999999; do
        expect 0 "tenants --interval $v" -- "$GS" tenants -q --json --interval "$v"
    done
    for v in 3601 3600.000000001 3600.5 99999999999999999999; do
        expect 2 "tenants --interval $v" -- "$GS" tenants --interval "$v"
        stderr_has "^gpuslice: --interval: \"$v\" is too long (use seconds such as 0.5 or 2, up to 3600; 0 skips the measurement)$"
    done
    for v in . -1 1e3 0x10 "1 " 1.2.3 abc; do
        expect 2 "tenants --interval '$v'" -- "$GS" tenants --interval "$v"
        stderr_has "^gpuslice: --interval: \"$v\" is not a number of seconds (use"
    done
    # (holder's, held up to 300 s rather than 30: the case outlasts 30 s on a loaded machine)
    "$GS" run -q --name itest-t --memory 1G -- "$IT" hold 268435456 "$T/release" 300 >"$T/holder.out" 2>&1 &
    HOLDER=$!
    for i in $(seq 100); do grep -q "^hold" "$T/holder.out" 2>/dev/null && break; sleep 0.05; done
    if grep -q "^hold 268435456 -> 0" "$T/holder.out"; then ok "tenant itest-t holds 268435456 bytes"; else bad "holder did not start"; cat "$T/holder.out"; fi
    # Oldest first: a tenant started later is listed after it, in JSON and in the table.
    "$GS" run -q --name itest-later -- sleep 60 &
    BG=$!
    for i in $(seq 100); do [ "$(ls "$GPUSLICE_RUN_DIR" | wc -l)" -ge 2 ] && break; sleep 0.05; done
    expect 0 "tenants --json with two tenants" -- "$GS" tenants --json --interval 0
    json_ok "the older first" "assert [t['name'] for t in d['tenants']] == ['itest-t', 'itest-later'], d"
    expect 0 "tenants (table) with two tenants" -- "$GS" tenants --interval 0
    if [ "$(awk 'NR > 1 { print $2 }' "$T/out" | tr '\n' ' ')" = "itest-t itest-later " ]; then ok "the table lists the older first"; else bad "table order"; cat "$T/out"; fi
    # One that uses no GPU yet: one row of dashes, its processes none.
    if grep -Eq "^[0-9]+-[0-9]+-[0-9a-f]+ +itest-later +$(id -u)\($(id -un)\) +$BG +- +normal +- +- +- +- +- +-$" "$T/out"; then ok "a tenant on no GPU: its row"; else bad "itest-later's row"; cat "$T/out"; fi
    kill $BG; wait $BG; BG=
    expect 0 "tenants --json" -- "$GS" tenants --json
    json_ok "the tenant's name, owner, processes, limit and usage" "
import os
assert len(d['tenants']) == 1, d
t = d['tenants'][0]
assert t['name'] == 'itest-t' and t['owner_uid'] == os.getuid(), t
assert t['id'].startswith('%d-%d-' % (os.getuid(), t['creator_pid'])), t
assert len(t['pids']) == 1 and os.path.exists('/proc/%d' % t['pids'][0]), t
assert len(t['devices']) == 1, t
v = t['devices'][0]
assert v['index'] == 0 and v['uuid'] == 'GPU-5ac1ce00-0000-4000-8000-000000000000', v
assert v['memory_limit_bytes'] == $G, v
assert 268435456 <= v['memory_used_bytes'] <= $G, v
assert v['compute_limit_percent'] is None, v
assert isinstance(v['compute_used_percent'], float), v
assert isinstance(v['compute_busy_seconds'], float), v
assert sorted(v) == sorted(['index', 'uuid', 'memory_limit_bytes', 'memory_used_bytes', 'compute_limit_percent', 'compute_used_percent', 'compute_busy_seconds']), v
"
    expect 0 "tenants --json --interval 0" -- "$GS" tenants --json --interval 0
    json_ok "no sampling: usage is null" "assert d['tenants'][0]['devices'][0]['compute_used_percent'] is None"
    expect 0 "tenants (table)" -- "$GS" tenants
    if grep -q "itest-t .* 1 GiB" "$T/out"; then ok "the table shows the tenant and its limit"; else bad "table"; cat "$T/out"; fi
    # Every cell: an idle tenant's measured use is 0.0% (not "-", which is "not measured").
    tid=$(tenant_id itest-t)
    if head -n 1 "$T/out" | grep -Eq "^ID +NAME +OWNER +CREATOR +PROCESSES +PRIORITY +GPU +UUID +MEM USED +MEM LIMIT +COMPUTE +CEILING$"; then ok "the header"; else bad "header"; cat "$T/out"; fi
    row="^$tid +itest-t +$(id -u)\($(id -un)\) +$HOLDER +[0-9]+ +normal +0 +GPU-5ac1ce00-0000-4000-8000-000000000000 +[0-9]+ MiB +1 GiB"
    if grep -Eq "$row +0\.0% +none$" "$T/out"; then ok "the row, its use measured 0.0%"; else bad "the row: want $row +0.0% +none"; cat "$T/out"; fi
    expect 0 "tenants (table) --interval 0" -- "$GS" tenants --interval 0
    if grep -Eq "$row +- +none$" "$T/out"; then ok "the row, its use not measured: -"; else bad "the row unmeasured"; cat "$T/out"; fi
    # UUIDs as NVIDIA prints them: GPU- and lower-case hex, in the table and in JSON.
    if grep -q " GPU-5ac1ce00-0000-4000-8000-000000000000 " "$T/out" && ! grep -qi "gpu-5ac1ce00.*gpu-" "$T/out" && ! grep -q "gpu-" "$T/out"; then
        ok "the table prints the UUID as GPU-…"; else bad "UUID form in the table"; cat "$T/out"; fi
    expect 0 "tenants -q after the command" -- "$GS" tenants -q --json --interval 0
    # Device time used at half the wall-clock rate, written where the interposer keeps it
    # (tenant_abi.h: dev[0] at 232, compute_busy_ns at 64 within it).
    f=$(ls "$GPUSLICE_RUN_DIR"/gpuslice-*.tenant)
    # (It says when it has begun: under a loaded CI machine python3's start took over the 0.3 s
    # this test used to sleep, and the first sample saw nothing written yet: 27-30 %.)
    rm -f "$T/poking"
    python3 -c '
import mmap, struct, sys, time
with open(sys.argv[1], "r+b") as f:
    m = mmap.mmap(f.fileno(), 0)
    t0, said = time.monotonic_ns(), False
    while time.monotonic_ns() < t0 + 4e9:
        struct.pack_into("<Q", m, 296, (time.monotonic_ns() - t0) // 2)
        if not said and time.monotonic_ns() > t0 + 1e8:
            open(sys.argv[2], "a").close()
            said = True
        time.sleep(0.001)
' "$f" "$T/poking" &
    poker=$!
    for i in $(seq 100); do [ -e "$T/poking" ] && break; sleep 0.05; done
    expect 0 "tenants --json --interval 0.5" -- "$GS" tenants --json --interval 0.5
    kill $poker 2>/dev/null; wait $poker 2>/dev/null
    json_ok "compute usage is device time over wall time (50%)" "
v = d['tenants'][0]['devices'][0]
assert 35 <= v['compute_used_percent'] <= 65 and v['compute_busy_seconds'] > 0.1, v"
    head -c 4096 /dev/zero >"$GPUSLICE_RUN_DIR/gpuslice-0-1-junk.tenant"
    expect 0 "a file of another ABI is not fatal" -- "$GS" tenants --json --interval 0
    stderr_has "warning: skipping .*gpuslice-0-1-junk.tenant"
    json_ok "the other tenants are still listed" "assert [t['name'] for t in d['tenants']] == ['itest-t']"
    rm -f "$GPUSLICE_RUN_DIR/gpuslice-0-1-junk.tenant"
    # Names that are not a tenant's file are not read: no ID, another prefix or suffix.
    for n in gpuslice-.tenant gpuslice-0-3.tenantx xgpuslice-0-4.tenant gpuslice-0-5.tenan; do
        head -c 4096 /dev/zero >"$GPUSLICE_RUN_DIR/$n"
    done
    expect 0 "files named otherwise are no tenants" -- "$GS" tenants --json --interval 0
    json_ok "only the tenant is listed" "assert [t['name'] for t in d['tenants']] == ['itest-t'], d"
    if [ -s "$T/err" ]; then bad "a file named otherwise was read"; cat "$T/err"; else ok "nothing said of them"; fi
    rm -f "$GPUSLICE_RUN_DIR/gpuslice-.tenant" "$GPUSLICE_RUN_DIR/gpuslice-0-3.tenantx" "$GPUSLICE_RUN_DIR/xgpuslice-0-4.tenant" "$GPUSLICE_RUN_DIR/gpuslice-0-5.tenan"
    if [ "$(id -u)" != 0 ]; then
        cp "$f" "$GPUSLICE_RUN_DIR/gpuslice-0-2-unreadable.tenant"; chmod 000 "$GPUSLICE_RUN_DIR/gpuslice-0-2-unreadable.tenant"
        expect 0 "an unreadable file is skipped" -- "$GS" tenants --json --interval 0
        if [ -s "$T/err" ]; then bad "unreadable file reported"; cat "$T/err"; else ok "silently"; fi
        rm -f "$GPUSLICE_RUN_DIR/gpuslice-0-2-unreadable.tenant"
    elif command -v setpriv >/dev/null; then
        # As root, another user lists: root's tenant (mode 0600) is root's to hide, silently.
        chmod 755 "$T"
        expect 0 "another user lists a directory holding root's tenant" -- setpriv --reuid=65534 --regid=65534 --clear-groups "$GS" tenants -q --json --interval 0
        json_ok "root's tenant is not shown to nobody" "assert d == {'source': 'run-directory', 'tenants': []}, d"
        if [ -s "$T/err" ]; then bad "another user's private file reported"; cat "$T/err"; else ok "silently"; fi
        chmod 700 "$T"
    fi
    # Names come from files their owners write: control characters, C1 controls and bidi
    # overrides never reach the terminal raw, in the table, in JSON, nor in info's and set's text.
    python3 -c '
import mmap, sys
with open(sys.argv[1], "r+b") as f:
    m = mmap.mmap(f.fileno(), 0)
    m[104:168] = b"ev\x1b[2J\xc2\x9b\xe2\x80\xae\x9b\x7f\\il\xef\xbb\xbf".ljust(64, b"\0")' "$f"
    raw_clean() { # raw_clean WHAT FILE: no control byte or sequence in FILE, only their escapes
        if python3 -c '
import sys
b = open(sys.argv[1], "rb").read()
sys.exit(any(x in b for x in (b"\x1b", b"\x7f", b"\x9b", b"\xe2\x80\xae", b"\xef\xbb\xbf")))' "$2"; then ok "$1: no raw control bytes"; else bad "$1: raw control bytes"; od -c "$2" | head -20; fi
    }
    esc='ev\x1b[2J\u009b\u202e\x9b\x7f\\il\ufeff'
    expect 0 "tenants with a hostile name (table)" -- "$GS" tenants --interval 0
    raw_clean "tenants table" "$T/out"
    if grep -qF -- "$esc" "$T/out"; then ok "the table escapes the name: $esc"; else bad "table name"; cat -v "$T/out"; fi
    expect 0 "tenants with a hostile name (JSON)" -- "$GS" tenants --json --interval 0
    raw_clean "tenants --json" "$T/out"
    json_ok "JSON escapes the name, and keeps it" "assert d['tenants'][0]['name'] == 'ev\x1b[2J\x9b\u202e\ufffd\x7f\\\\il\ufeff', repr(d['tenants'][0]['name'])"
    expect 0 "info with a hostile tenant name" -- "$GS" info
    raw_clean "info" "$T/out"
    if grep -qF -- "$esc" "$T/out"; then ok "info escapes the name"; else bad "info name"; cat -v "$T/out"; fi
    expect 0 "set with a hostile tenant name" -- "$GS" set "$(tenant_id)" --compute 90
    raw_clean "set" "$T/err"
    if grep -qF -- "$esc" "$T/err"; then ok "set escapes the name"; else bad "set name"; cat -v "$T/err"; fi
    release
    # An unreadable run directory is an error that names it; a missing one holds no tenants.
    GPUSLICE_RUN_DIR="$T/missing" expect 0 "a missing run directory" -- "$GS" tenants --json
    json_ok "a missing run directory: no tenants" 'assert d == {"source": "run-directory", "tenants": []}'
    touch "$T/afile"
    GPUSLICE_RUN_DIR="$T/afile" expect 1 "a run directory that is a file" -- "$GS" tenants
    stderr_has "cannot read the run directory $T/afile: Not a directory"
    if [ -s "$T/out" ]; then bad "output for an unreadable directory"; cat "$T/out"; else ok "nothing on stdout"; fi
    GPUSLICE_RUN_DIR="$T/afile" expect 1 "info with a run directory that is a file" -- "$GS" info --json
    stderr_has "info: cannot read the run directory $T/afile"
    GPUSLICE_RUN_DIR="$T/afile" expect 1 "set with a run directory that is a file" -- "$GS" set x --memory 1G
    stderr_has "set: cannot read the run directory $T/afile"
    # Modes that keep this user out: 0 (cannot list) and 0444 (can list, cannot open what is listed).
    # Root may read anything, so as root the user is nobody.
    if [ "$(id -u)" = 0 ]; then
        if command -v setpriv >/dev/null; then as_user() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }; else as_user=; fi
        chmod 755 "$T"
    else
        as_user() { "$@"; }
    fi
    if command -v as_user >/dev/null; then
        mkdir "$T/locked000" "$T/locked444"; touch "$T/locked444/gpuslice-1-2-3.tenant"
        chmod 000 "$T/locked000"; chmod 444 "$T/locked444"
        for m in 000 444; do
            GPUSLICE_RUN_DIR="$T/locked$m" expect 1 "a run directory of mode $m" -- as_user "$GS" tenants
            stderr_has "cannot read the run directory $T/locked$m: Permission denied"
            GPUSLICE_RUN_DIR="$T/locked$m" expect 1 "tenants --json, a run directory of mode $m" -- as_user "$GS" tenants --json
            if [ -s "$T/out" ]; then bad "JSON for an unreadable directory"; cat "$T/out"; else ok "no JSON"; fi
        done
        chmod 700 "$T/locked000" "$T/locked444"
    else
        echo "note: root without setpriv: unreadable directories not checked"
    fi
    [ "$(id -u)" = 0 ] && chmod 700 "$T"
    # A zombie holds nothing: a member killed but not yet reaped by its parent (sleep, which
    # never waits) is not listed, nor its memory charged, while gpuslice run still runs.
    cat >"$T/zombie.sh" <<EOS
"$IT" hold 268435456 "$T/release" 120 >"$T/z.out" & echo \$! >"$T/z.pid"
exec sleep 60
EOS
    "$GS" run -q --name itest-zombie --memory 1G -- sh "$T/zombie.sh" >/dev/null 2>&1 &
    BG=$!
    for i in $(seq 100); do grep -q "^hold" "$T/z.out" 2>/dev/null && break; sleep 0.05; done
    zp=$(cat "$T/z.pid")
    kill -9 "$zp"
    for i in $(seq 100); do [ "$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$zp/stat" 2>/dev/null)" = Z ] && break; sleep 0.05; done
    if [ "$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$zp/stat" 2>/dev/null)" = Z ]; then ok "the member is a zombie"; else bad "the member is no zombie"; fi
    expect 0 "tenants with a zombie member" -- "$GS" tenants --json --interval 0
    json_ok "the zombie is no process of the tenant, and holds nothing" "
t = [x for x in d['tenants'] if x['name'] == 'itest-zombie']
assert len(t) == 1 and t[0]['pids'] == [] and t[0]['creator_pid'] == $BG, d
assert [v['memory_used_bytes'] for v in t[0]['devices']] == [0], t"
    kill $BG; wait $BG; BG=
    # Usage is what live processes hold. With gpuslice run SIGKILLed nobody reaps the dead:
    # a dead member's charge is not shown, and a tenant with no live process is not listed.
    cat >"$T/two.sh" <<EOS
"$IT" hold 268435456 "$T/release" >"$T/h1.out" & echo \$! >"$T/h1.pid"
"$IT" hold 134217728 "$T/release" >"$T/h2.out" & echo \$! >"$T/h2.pid"
wait
EOS
    "$GS" run -q --name itest-dead --memory 1G -- sh "$T/two.sh" >/dev/null 2>&1 &
    runp=$!
    for i in $(seq 100); do grep -q "^hold" "$T/h1.out" 2>/dev/null && grep -q "^hold" "$T/h2.out" 2>/dev/null && break; sleep 0.05; done
    kill -9 $runp; wait $runp 2>/dev/null
    kill -9 "$(cat "$T/h1.pid")"
    for i in $(seq 100); do [ -e "/proc/$(cat "$T/h1.pid")" ] || break; sleep 0.05; done
    expect 0 "tenants after gpuslice run and one member were SIGKILLed" -- "$GS" tenants --json --interval 0
    json_ok "only the live member's memory and PID" "
t = [x for x in d['tenants'] if x['name'] == 'itest-dead']
assert len(t) == 1 and t[0]['pids'] == [$(cat "$T/h2.pid")], d
u = t[0]['devices'][0]['memory_used_bytes']
assert 134217728 <= u < 268435456, u"
    kill -9 "$(cat "$T/h2.pid")"
    for i in $(seq 100); do [ -e "/proc/$(cat "$T/h2.pid")" ] || break; sleep 0.05; done
    expect 0 "tenants after every member was SIGKILLed" -- "$GS" tenants --json --interval 0
    json_ok "a tenant with no live process is not listed" "assert d == {'source': 'run-directory', 'tenants': []}, d"
    if [ -n "$(ls "$GPUSLICE_RUN_DIR")" ]; then ok "(its file is still there)"; else bad "the file is gone: nothing was checked"; fi
    expect 0 "tenants (table) after every member was SIGKILLed" -- "$GS" tenants
    if grep -q itest-dead "$T/out"; then bad "the dead tenant is listed"; cat "$T/out"; else ok "not in the table"; fi
    rm -f "$T/release"
    expect 2 "tenants --interval abc" -- "$GS" tenants --interval abc; stderr_has "--interval"
    expect 2 "tenants --interval without a value" -- "$GS" tenants --interval; stderr_has "--interval needs a value"
    expect 2 "tenants with an unknown option" -- "$GS" tenants --bogus; stderr_has "--bogus"
    expect 2 "tenants with an argument" -- "$GS" tenants extra; stderr_has "extra"
    expect 0 "tenants --help" -- "$GS" tenants --help ;;
set)
    # (holder's, held up to 300 s rather than 30: the case outlasts 30 s on a loaded machine)
    "$GS" run -q --name itest-s --memory 1G -- "$IT" hold 268435456 "$T/release" 300 >"$T/holder.out" 2>&1 &
    HOLDER=$!
    for i in $(seq 100); do grep -q "^hold" "$T/holder.out" 2>/dev/null && break; sleep 0.05; done
    if grep -q "^hold 268435456 -> 0" "$T/holder.out"; then ok "tenant itest-s holds 268435456 bytes"; else bad "holder did not start"; cat "$T/holder.out"; fi
    id=$(tenant_id itest-s)
    f="$GPUSLICE_RUN_DIR/gpuslice-$id.tenant"
    dev0() { python3 -c 'import json, sys; print(json.load(sys.stdin)["tenants"][0]["devices"][0][sys.argv[1]])' "$1" <"$T/out"; }
    look() { # look KEY WANT: the device's KEY in tenants --json
        "$GS" tenants --json --interval 0 >"$T/out" 2>"$T/err"
        got=$(dev0 "$1")
        if [ "$got" = "$2" ]; then ok "tenants shows $1 $2"; else bad "$1 is $got, want $2"; cat "$T/out"; fi
    }
    expect 0 "set NAME --memory 2G" -- "$GS" set itest-s --memory 2G; stderr_has "memory limit 2 GiB"
    expect 1 "set itest (the first letters of itest-s) names no tenant" -- "$GS" set itest --memory 3G
    stderr_has 'set: no tenant with the ID or name "itest"'
    look memory_limit_bytes $((2 * G))
    expect 0 "set ID --compute 40" -- "$GS" set "$id" --compute 40; stderr_has "compute ceiling 40%"
    look compute_limit_percent 40
    expect 0 "set PATH with an index entry" -- "$GS" set "$f" --compute 0:25
    # What set says: the GPU's limits now, its class, and what GPUs it uses later get (an index
    # entry changes only its GPU: the default stays 40%).
    stderr_has "^gpuslice: $id (itest-s): GPU 0 (GPU-5ac1ce00-0000-4000-8000-000000000000): memory limit 2 GiB ([0-9]* MiB in use), compute ceiling 25%$"
    stderr_has "^gpuslice: $id (itest-s): priority normal, weight 1$"
    stderr_has "^gpuslice: $id (itest-s): GPUs it starts using from now on get memory limit 2 GiB, compute ceiling 40%$"
    if [ "$(wc -l <"$T/err")" = 3 ]; then ok "three lines"; else bad "set said: $(cat "$T/err")"; fi
    look compute_limit_percent 25
    expect 0 "set --compute 100 removes the ceiling" -- "$GS" set itest-s --compute 100
    look compute_limit_percent None
    expect 0 "set -q -c 30" -- "$GS" set -q itest-s -c 30
    if [ -s "$T/err" ]; then bad "-q printed"; cat "$T/err"; else ok "-q is quiet"; fi
    expect 0 "set --compute none" -- "$GS" set itest-s --compute none
    look compute_limit_percent None
    expect 0 "set --memory none" -- "$GS" set itest-s --memory none
    # No limit is never one the usage is above.
    stderr_has "GPU 0 (GPU-5ac1ce00-0000-4000-8000-000000000000): memory limit none ([0-9]* MiB in use), compute ceiling none$"
    stderr_has "GPUs it starts using from now on get memory limit none, compute ceiling none$"
    if grep -q "above" "$T/err"; then bad "usage above no limit"; cat "$T/err"; else ok "no limit, no warning"; fi
    look memory_limit_bytes None
    # "none" per device too (the usage's 0:none), in any case; a limit per device set and removed.
    expect 0 "set --compute 0:30" -- "$GS" set -q itest-s --compute 0:30
    look compute_limit_percent 30
    expect 0 "set --compute 0:none" -- "$GS" set itest-s --compute 0:none
    stderr_has "compute ceiling none$"
    look compute_limit_percent None
    expect 0 "set --memory 0:1G" -- "$GS" set -q itest-s --memory 0:1G
    look memory_limit_bytes $G
    expect 0 "set --memory GPU-…:NONE" -- "$GS" set -q itest-s --memory GPU-5ac1ce00-0000-4000-8000-000000000000:NONE
    look memory_limit_bytes None
    expect 0 "set --memory 0:1G,none: the GPU's entry wins over the bare one" -- "$GS" set -q itest-s --memory 0:1G,none
    look memory_limit_bytes $G
    expect 0 "set --memory none,0:none" -- "$GS" set -q itest-s --memory none,0:none
    look memory_limit_bytes None
    expect 2 "set --compute 0:none, (a trailing comma)" -- "$GS" set itest-s --compute 0:none,
    stderr_has '^gpuslice: --compute: trailing comma in "0:none,"; none removes the limit$'
    expect 2 "set --compute 0:nonex" -- "$GS" set itest-s --compute 0:nonex; stderr_has '"nonex"'
    expect 2 "set --memory 0:" -- "$GS" set itest-s --memory 0:; stderr_has "--memory"
    # The class and weight: 1 and 100 are the weight's ends.
    expect 0 "set --priority background --weight 3" -- "$GS" set itest-s --priority background --weight 3
    stderr_has "^gpuslice: $id (itest-s): priority background, weight 3$"
    "$GS" tenants --json --interval 0 >"$T/out" 2>"$T/err"
    json_ok "tenants shows the class and the weight" "t = d['tenants'][0]; assert (t['priority'], t['weight']) == ('background', 3), t"
    expect 0 "tenants (table) with the class and the weight" -- "$GS" tenants --interval 0
    if grep -Eq "^$id +itest-s .* background x3 +0 +GPU-" "$T/out"; then ok "the table: background x3"; else bad "the table's class"; cat "$T/out"; fi
    expect 0 "set --weight 100" -- "$GS" set itest-s --weight 100; stderr_has "priority background, weight 100$"
    expect 0 "set --priority latency --weight 1" -- "$GS" set itest-s --priority latency --weight 1; stderr_has "priority latency, weight 1$"
    expect 2 "set --weight 0" -- "$GS" set itest-s --weight 0
    stderr_has '^gpuslice: set: --weight: "0" is not a weight (use an integer from 1 to 100)$'
    expect 2 "set --weight 101" -- "$GS" set itest-s --weight 101; stderr_has '"101" is not a weight'
    expect 2 "set --priority urgent" -- "$GS" set itest-s --priority urgent
    stderr_has '^gpuslice: set: --priority: "urgent" is not a priority class (use latency, normal or background)$'
    expect 0 "set --priority normal" -- "$GS" set itest-s --priority normal; stderr_has "priority normal, weight 1$"
    expect 0 "set --json" -- "$GS" set -q itest-s --compute 35 --json
    json_ok "set --json prints the tenant as it now is" "
assert len(d['tenants']) == 1, d
v = d['tenants'][0]['devices'][0]
assert d['tenants'][0]['name'] == 'itest-s' and v['compute_limit_percent'] == 35, d
assert v['compute_used_percent'] is None and v['memory_limit_bytes'] is None, v"
    expect 0 "set --compute none" -- "$GS" set -q itest-s --compute none
    expect 1 "an index not in use" -- "$GS" set itest-s --compute 50 --memory 3:1G; stderr_has "no device with index 3"
    look compute_limit_percent None
    expect 1 "a UUID not in use" -- "$GS" set itest-s --memory gpu-0000000A-1111-2222-3333-44444444444b:1G
    stderr_has "the tenant uses no device GPU-0000000a-1111-2222-3333-44444444444b (it uses 0 GPU-5ac1ce00-0000-4000-8000-000000000000)"
    expect 2 "set with an index and the UUID of one GPU" -- "$GS" set itest-s --memory 0:1G,GPU-5ac1ce00-0000-4000-8000-000000000000:2G
    stderr_has "two entries name GPU 0 (GPU-5ac1ce00-0000-4000-8000-000000000000)"
    expect 0 "set prints UUIDs as GPU-…" -- "$GS" set itest-s --compute none
    stderr_has "GPU 0 (GPU-5ac1ce00-0000-4000-8000-000000000000): memory limit"
    expect 1 "no such tenant" -- "$GS" set no-such-tenant --memory 1G; stderr_has '"no-such-tenant"'
    expect 1 "no such file" -- "$GS" set "$T/none.tenant" --memory 1G
    expect 2 "set without an option" -- "$GS" set itest-s; stderr_has "--compute"
    expect 2 "set --compute 0" -- "$GS" set itest-s --compute 0; stderr_has "--compute"
    expect 2 "set --compute 101" -- "$GS" set itest-s --compute 101; stderr_has "--compute"
    expect 2 "set --memory banana" -- "$GS" set itest-s --memory banana; stderr_has "--memory"
    expect 2 "set --memory without a value" -- "$GS" set itest-s --memory; stderr_has "--memory needs a value"
    expect 2 "set without a tenant" -- "$GS" set --memory 1G
    expect 2 "set with two tenants" -- "$GS" set a b --memory 1G
    expect 2 "set with an unknown option" -- "$GS" set itest-s --bogus 1; stderr_has "--bogus"
    expect 0 "set --help" -- "$GS" set --help
    # Below current usage: nothing is taken away, new allocations are refused.
    expect 0 "set --memory below usage" -- "$GS" set itest-s --memory 128M; stderr_has "usage is above the limit"
    GPUSLICE_TENANT=$f expect 3 "a new allocation in the tenant is refused" -- preload "$IT" try 2097152
    expect 0 "set --memory 2G" -- "$GS" set itest-s --memory 2G
    GPUSLICE_TENANT=$f expect 0 "and allowed again under the raised limit" -- preload "$IT" try 2097152
    # Two tenants with one name: a name is ambiguous, an ID is not.
    "$GS" run -q --name itest-s -- sleep 30 &
    BG=$!
    for i in $(seq 100); do [ "$(ls "$GPUSLICE_RUN_DIR" | wc -l)" -ge 2 ] && break; sleep 0.05; done
    expect 1 "an ambiguous name" -- "$GS" set itest-s --memory 1G; stderr_has "$id"
    # The second uses no GPU yet: a bare value is for the GPUs it will use, an index names none.
    id2=$("$GS" tenants --json --interval 0 | python3 -c 'import json, sys; print([t["id"] for t in json.load(sys.stdin)["tenants"] if t["id"] != sys.argv[1]][0])' "$id")
    expect 1 "an index entry for a tenant on no GPU" -- "$GS" set "$id2" --memory 0:1G
    stderr_has "^gpuslice: set: --memory: the tenant uses no device with index 0 (it uses no GPU yet; give a bare value)$"
    expect 0 "a bare value for a tenant on no GPU" -- "$GS" set "$id2" --memory 3G --compute 20
    stderr_has "^gpuslice: $id2 (itest-s) uses no GPU yet$"
    stderr_has "^gpuslice: $id2 (itest-s): GPUs it starts using from now on get memory limit 3 GiB, compute ceiling 20%$"
    expect 0 "the memory alone" -- "$GS" set "$id2" --memory 2G
    stderr_has "^gpuslice: $id2 (itest-s): GPUs it starts using from now on get memory limit 2 GiB, compute ceiling 20%$"
    expect 0 "an ID still works" -- "$GS" set "$id" --memory 1G
    kill $BG; wait $BG; BG=
    # Only the owner (or root) may set, and the owner is the file's: its header's owner_uid is
    # whatever the file's writer put there (audit defect 8). A header naming another user than
    # the file's owner makes it no tenant: set refuses it, the listing leaves it out and says so.
    python3 -c 'import mmap, struct, sys
with open(sys.argv[1], "r+b") as f:
    m = mmap.mmap(f.fileno(), 0); struct.pack_into("<I", m, 80, 12345)' "$f"
    expect 1 "a header naming another owner than the file's is refused" -- "$GS" set "$id" --memory 1G
    stderr_has "its contents name another owner than the file's"
    expect 0 "tenants --json" -- "$GS" tenants --json --interval 0
    json_ok "the listing leaves it out" "assert d['tenants'] == [], d"
    stderr_has "its contents name another owner than the file's (uid $(id -u))"
    python3 -c 'import mmap, os, struct, sys
with open(sys.argv[1], "r+b") as f:
    m = mmap.mmap(f.fileno(), 0); struct.pack_into("<I", m, 80, os.geteuid())' "$f"
    expect 0 "with the header put right, set works again" -- "$GS" set "$id" --memory 1G
    if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
        chmod 755 "$T" "$GPUSLICE_RUN_DIR"; chmod 644 "$f"
        expect 1 "another user may not" -- setpriv --reuid=65534 --regid=65534 --clear-groups "$GS" set "$id" --memory 3G
        stderr_has "permission denied: tenant $id belongs to uid 0 (root); only its owner and root may change it"
        chmod 600 "$f"; chmod 700 "$T"
    else
        echo "note: not root (or no setpriv): another user's refusal is not checked here"
    fi
    look memory_limit_bytes $G
    release
    if [ -z "$(ls -A "$GPUSLICE_RUN_DIR")" ]; then ok "tenant state removed"; else bad "stale tenant files: $(ls "$GPUSLICE_RUN_DIR")"; fi ;;
tenants_trust)
    # Audit defect 8: another user plants tenant files in a shared run directory (/dev/shm is one).
    # Only files gs_tenant_open_owned accepts are listed or resolved, each other one named in one
    # warning line; the owner shown and checked is the file's; a name matching several is refused.
    chmod 755 "$T"; chmod 1777 "$GPUSLICE_RUN_DIR"
    if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
        AS="setpriv --reuid=65534 --regid=65534 --clear-groups"; other=65534
    else
        AS=; other=$(id -u)
        echo "note: not root (or no setpriv): the planted files are this user's own"
    fi
    holder victim 1G 268435456
    id=$(tenant_id victim)
    f="$GPUSLICE_RUN_DIR/gpuslice-$id.tenant"
    cp "$f" "$T/template"; chmod 644 "$T/template"
    # The planted content: the real tenant's file, named victim, its header claiming uid 0.
    python3 -c '
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<I", b, 80, 0)
b[104:168] = b"victim".ljust(64, b"\0")
open(sys.argv[1], "wb").write(b)' "$T/template"
    plant() { # plant FILE MODE: the other user makes FILE with the planted content and MODE
        $AS sh -c 'cat "$1" >"$2" && chmod "$3" "$2"' sh "$T/template" "$1" "$2"
    }
    limit_of() { python3 -c 'import struct, sys; print(struct.unpack_from("<Q", open(sys.argv[1], "rb").read(), 248)[0])' "$1"; }
    listed() { # listed WHAT PYTHON: tenants --json, then PYTHON on d with one warning line at most
        expect 0 "$1" -- "$GS" tenants --json --interval 0
        json_ok "$1: the list" "import os; $2"
    }
    p1="$GPUSLICE_RUN_DIR/gpuslice-0-1-planted.tenant"
    plant "$p1" 666
    listed "tenants beside a planted file of mode 0666" "assert [(t['id'], t['owner_uid']) for t in d['tenants']] == [('$id', os.getuid())], d"
    stderr_has "^gpuslice: warning: skipping $p1: it is writable by group or others (mode 0666), so anyone could have written it"
    if [ "$(wc -l <"$T/err")" = 1 ]; then ok "one warning line"; else bad "warnings: $(cat "$T/err")"; fi
    if grep -q planted "$T/out"; then bad "the planted file is in the JSON"; else ok "not in the JSON"; fi
    expect 0 "the table beside a planted file" -- "$GS" tenants --interval 0
    if [ "$(grep -c victim "$T/out")" = 1 ] && ! grep -q planted "$T/out"; then ok "the table lists the real tenant only"; else bad "table"; cat "$T/out"; fi
    expect 0 "info beside a planted file" -- "$GS" info --json
    stderr_has "warning: skipping $p1"
    json_ok "info lists the real tenant only" "assert [t['id'] for t in d['tenants']] == ['$id'], d"
    expect 0 "set NAME beside a planted file of mode 0666" -- "$GS" set victim --memory 2G
    if [ "$(limit_of "$f")" = $((2 * G)) ] && [ "$(limit_of "$p1")" = $G ]; then ok "the real tenant was changed, the planted file was not"
    else bad "real tenant's limit $(limit_of "$f"), planted file's $(limit_of "$p1")"; fi
    expect 1 "set PATH of a planted file of mode 0666" -- "$GS" set "$p1" --memory 3G; stderr_has "its file is writable by group or others"
    if [ "$(limit_of "$p1")" = $G ]; then ok "the planted file was not written"; else bad "the planted file was written"; fi
    rm -f "$p1"
    # Mode 0600 with a header that names uid 0, not the file's owner: left out, with a warning.
    p2="$GPUSLICE_RUN_DIR/gpuslice-0-2-planted.tenant"
    plant "$p2" 600
    listed "tenants beside a planted file whose header lies" "assert [t['id'] for t in d['tenants']] == ['$id'], d"
    stderr_has "^gpuslice: warning: skipping $p2: its contents name another owner than the file's (uid $other)"
    expect 1 "set PATH of a file whose header lies" -- "$GS" set "$p2" --memory 3G; stderr_has "its contents name another owner than the file's"
    # Mode 0600 and a header naming its real owner: a tenant of the other user's, shown as theirs;
    # the name is now ambiguous, and nothing changes until an ID is given.
    python3 -c 'import struct, sys; b = bytearray(open(sys.argv[1], "rb").read()); struct.pack_into("<I", b, 80, int(sys.argv[2])); open(sys.argv[1], "wb").write(b)' "$T/template" "$other"
    rm -f "$p2"; plant "$p2" 600
    listed "tenants beside a planted file of mode 0600" "
o = {t['id']: t['owner_uid'] for t in d['tenants']}
assert o == {'$id': os.getuid(), '0-2-planted': $other}, d"
    if [ -s "$T/err" ]; then bad "a warning for a file of mode 0600"; cat "$T/err"; else ok "no warning"; fi
    expect 0 "the table beside a planted file of mode 0600" -- "$GS" tenants --interval 0
    if grep -q "^0-2-planted .* $other" "$T/out"; then ok "the table shows its real owner"; else bad "owner in the table"; cat "$T/out"; fi
    expect 1 "set NAME matching two tenants" -- "$GS" set victim --memory 4G
    stderr_has '2 tenants are named "victim"; nothing changed: give the ID'
    stderr_has "^  $id  owned by uid $(id -u)"; stderr_has "^  0-2-planted  owned by uid $other"
    if [ "$(limit_of "$f")" = $((2 * G)) ] && [ "$(limit_of "$p2")" = $G ]; then ok "neither was changed"
    else bad "real tenant's limit $(limit_of "$f"), planted file's $(limit_of "$p2")"; fi
    expect 0 "set ID" -- "$GS" set "$id" --memory 3G
    if [ "$(limit_of "$f")" = $((3 * G)) ] && [ "$(limit_of "$p2")" = $G ]; then ok "the ID names the real tenant"; else bad "set ID"; fi
    if [ -n "$AS" ]; then
        # The planter may not change the real tenant, whatever its header says of the owner.
        chmod 644 "$f"
        expect 1 "the other user may not set the real tenant" -- $AS "$GS" set "$id" --memory 5G
        stderr_has "permission denied: tenant $id belongs to uid 0 (root)"
        chmod 600 "$f"
    fi
    release ;;
passthrough)
    GPUSLICE_DEBUG=1 expect 0 "no limit: the device's own view passes through" -- preload "$IT" limit $((16 * G))
    stderr_has "inactive (pass-through)"
    ITEST_LOOKUP=getproc GPUSLICE_DEBUG=1 expect 0 "no limit via cuGetProcAddress" -- preload "$IT" limit $((16 * G))
    # GPUSLICE_DEBUG=0 and an empty one are off: not a word on stderr, limited or not.
    for v in 0 ""; do
        GPUSLICE_DEBUG=$v expect 0 "GPUSLICE_DEBUG='$v', no limit" -- preload "$IT" limit $((16 * G))
        if [ -s "$T/err" ]; then bad "GPUSLICE_DEBUG='$v' wrote on stderr"; cat "$T/err"; else ok "GPUSLICE_DEBUG='$v': stderr empty"; fi
        GPUSLICE_DEBUG=$v expect 0 "GPUSLICE_DEBUG='$v' under --memory 1G" -- "$GS" run -q --memory 1G -- "$IT" limit $G
        if [ -s "$T/err" ]; then bad "GPUSLICE_DEBUG='$v' under a limit wrote on stderr"; cat "$T/err"; else ok "GPUSLICE_DEBUG='$v' under a limit: stderr empty"; fi
    done ;;
rtld_next)
    out=$(env LD_PRELOAD="$LIB:$B/tests/librtldnext.so" true)
    if [ "$out" = "rtld-next-ok" ]; then ok "dlsym(RTLD_NEXT) still means after the caller"; else bad "RTLD_NEXT broken: $out"; fi ;;
exports)
    syms=$(nm -D --defined-only "$LIB" | awk '{print $3}')
    for s in $syms; do
        case $s in
        dlsym | dlvsym | dlmopen) ;;
        cu* | nvml*) grep -q "X([A-Za-z0-9_]*, *$s," "$SRC/src/preload/hooks.h" || bad "exported $s is not in the hook list" ;;
        gpuslice_*) grep -q "^[a-z].* \**$s(" "$SRC/include/gpuslice/gpuslice.h" || bad "exported $s is not in gpuslice.h" ;;
        *) bad "exports $s" ;;
        esac
    done
    ok "exports: $(echo $syms | wc -w) symbols, all interposition points and the C API"
    if [ "${SANITIZE:-0}" = 1 ]; then
        ok "NEEDED check skipped under sanitizers"
    else
        needed=$(readelf -d "$LIB" | awk '/NEEDED/ {print $NF}' | tr -d '[]')
        if [ "$needed" = "libc.so.6" ]; then ok "links only libc"; else bad "links $needed"; fi
        needed=$(readelf -d "$(dirname "$LIB")/libgpuslice-addpath.so" | awk '/NEEDED/ {print $NF}' | tr -d '[]')
        if [ "$needed" = "libc.so.6" ]; then ok "libgpuslice-addpath.so links only libc"; else bad "libgpuslice-addpath.so links $needed"; fi
        syms=$(nm -D --defined-only "$(dirname "$LIB")/libgpuslice-addpath.so" | awk '$2 ~ /[TDBW]/ {print $3}' | grep -v '^_' | tr '\n' ' ')
        if [ -z "$syms" ]; then ok "libgpuslice-addpath.so exports nothing"; else bad "libgpuslice-addpath.so exports $syms"; fi
    fi ;;
compute_paths)
    # Every launch path is held to the ceiling; without one the load saturates the device.
    expect 0 "no ceiling: the load holds the device" -- "$GS" run -q -- "$CL" stream 1 500
    share_in 0.85 1.01 "uncapped"
    # Every path, the per-thread-default-stream ones too, at most 3 points over the ceiling, and
    # billed for what its kernels held the device (every launch is charged; none is missed).
    # Billed over 1.15 times its kernels' time (or a share under its band) is measured once more:
    # a host that keeps the governor's thread from running bills the gaps (an idle plain build:
    # 1.005-1.041; once 1.215 in a full make test). Over-billing is the safe side (the tenant
    # stays under its ceiling), so the second measurement may be billed up to 1.3 times its
    # kernels' time when its share is in its band: CI's 2-CPU machine billed the legacy path
    # 1.162 and then 1.161 at a share of 0.215 (billed exactly 25%: the ceiling held). A governor
    # that bills a launch twice (2x) or misses one (a path's launches uncharged: far under) fails
    # both. The bill is the time in flight scaled by the duty learnt from NVML's samples
    # (duty.c), an estimate of the kernels' time: 1.004-1.014 of it on an idle machine, and a
    # little under it now and then on a loaded one, hence 0.95 at the low end.
    for p in stream legacy ptds ex ex_ptsz coop coop_ptsz graph graph_ptsz capture; do
        hi=$(over 1.15)
        expect 0 "$p launches under --compute 25" -- "$GS" run -q --compute 25 -- "$CL" $p 1.2 500
        v=$(awk '/^billed_s/ { if ($4 > 0) printf "%.4f", $2 / $4 }' "$T/out")
        sh=$(awk '/^share/ {print $2}' "$T/out")
        if [ -n "$v" ] && [ -n "$sh" ] && awk -v v="$v" -v hi="$hi" -v s="$sh" -v lo="$(loose 0.19)" 'BEGIN { exit !(v > hi || s < lo) }'; then
            echo "note: $p at 25%: share $sh, billed $v of its kernels' time; measuring once more"
            expect 0 "$p launches under --compute 25, again" -- "$GS" run -q --compute 25 -- "$CL" $p 1.2 500
            hi=$(over 1.3)
        fi
        share_in 0.19 0.28 "$p at 25%"
        # (0.88-0.93 were seen in CI, plain and ASan, while the duty guessed NVML's period
        # before it had seen one and weighed device samples by overlap: tests/unit/test_duty.c.)
        billed_in 0.95 "$hi" "$p at 25%"
    done
    share_twice 0.33 0.43 "4 threads at 40%" "$GS" run -q --compute 40 -- "$CL" stream 1.2 300 4
    share_twice 0.53 0.63 "20 us kernels at 60%" "$GS" run -q --compute 60 -- "$CL" stream 1.2 20 ;;
compute_tenant)
    # Two processes of one tenant share its ceiling; two tenants take turns at 30/70.
    "$GS" run -q --compute 50 -- sh -c "'$CL' stream 2 500 >'$T/a' & '$CL' stream 2 500 >'$T/b'; wait"
    a=$(awk '/^share/ {print $2}' "$T/a"); b=$(awk '/^share/ {print $2}' "$T/b")
    if awk -v a="$a" -v b="$b" 'BEGIN { exit !(a + b >= 0.42 && a + b <= 0.53) }'; then ok "two processes of a 50% tenant: $a + $b"; else bad "two processes of a 50% tenant: $a + $b"; fi
    side_by_side "two tenants at 30% and 70%" 30 0.24 0.33 70 0.62 0.73 ;;
compute_set)
    # A ceiling set on a running tenant bites; tenants shows the ceiling and the usage (measured
    # over its interval from two readings of the file: 80.4 and 19.7 here, idle host; never
    # more than the ceiling by more than 3 points).
    t_go=$(date +%s.%N)
    "$GS" run -q --name cset --compute 80 -- "$CL" stream 3 500 >"$T/a" &
    pa=$!
    sleep 1
    expect 0 "tenants --json while it runs" -- "$GS" tenants --json --interval 0.3
    json_ok "ceiling 80 and usage near it" "
v = d['tenants'][0]['devices'][0]
assert v['compute_limit_percent'] == 80 and 72 <= v['compute_used_percent'] <= 83, v"
    expect 0 "set --compute 20" -- "$GS" set cset --compute 20
    t_set=$(date +%s.%N)
    sleep 0.5
    expect 0 "tenants --json after the set" -- "$GS" tenants --json --interval 0.5
    json_ok "usage follows the new ceiling within a second" "
v = d['tenants'][0]['devices'][0]
assert v['compute_limit_percent'] == 20 and 15 <= v['compute_used_percent'] <= 23, v"
    wait $pa
    # The share the two ceilings make for the time each held (about 1.3 s at 80 %: 0.53 on an
    # idle host; a loaded one set it later, 0.59-0.62 in a CI run beside a daemon).
    d80=$(awk -v a="$t_go" -v b="$t_set" 'BEGIN { d = b - a; if (d > 3) d = 3; printf "%.3f", d }')
    lo=$(awk -v d="$d80" 'BEGIN { printf "%.3f", (0.8 * d + 0.2 * (3 - d)) / 3 - 0.10 }')
    hi=$(awk -v d="$d80" 'BEGIN { printf "%.3f", (0.8 * d + 0.2 * (3 - d)) / 3 + 0.06 }')
    share_in "$lo" "$hi" "80% for $d80 s then 20%" a
    # A tenant started without a ceiling gets one.
    "$GS" run -q --name cset2 --memory 1G -- "$CL" stream 2 500 >"$T/a" &
    pa=$!
    sleep 0.5
    expect 0 "set a first ceiling" -- "$GS" set cset2 --compute 10
    wait $pa
    share_in 0.25 0.45 "no ceiling for 0.5 s then 10%" a
    # A ceiling set on an uncapped load bites from the moment it is set: its budget starts empty,
    # not full from the uncapped spell (which let a load just over 90% hold 93% of the next
    # second on the H200, and 78.1-78.2% at 75% here). Now 74.2-74.8 in the second after the set.
    "$GS" run -q --name cset3 --compute 100 -- "$CL" stream 2.5 5 >"$T/a" &
    pa=$!
    sleep 0.8
    expect 0 "set 75 on an uncapped load" -- "$GS" set cset3 --compute 75
    expect 0 "tenants --json over the second after the set" -- "$GS" tenants --json --interval 1
    json_ok "usage in the second after the set is at most 76.5" "
v = [t for t in d['tenants'] if t['name'] == 'cset3'][0]['devices'][0]
assert v['compute_limit_percent'] == 75 and 60 <= v['compute_used_percent'] <= 76.5, v"
    wait $pa ;;
compute_env)
    # Capped loads below their band are measured once more (see share_twice).
    share_twice 0.23 0.33 "HAMi's CUDA_DEVICE_SM_LIMIT=30" env CUDA_DEVICE_SM_LIMIT=30 LD_PRELOAD="$LIB" "$CL" stream 1.2 500
    share_twice 0.23 0.33 "HAMi's per-device CUDA_DEVICE_SM_LIMIT_0=30 wins" env CUDA_DEVICE_SM_LIMIT=80 CUDA_DEVICE_SM_LIMIT_0=30 LD_PRELOAD="$LIB" "$CL" stream 1.2 500
    expect 0 "HAMi's 0 means no ceiling" -- env CUDA_DEVICE_SM_LIMIT=0 LD_PRELOAD="$LIB" "$CL" stream 1 500
    share_in 0.85 1.01 "CUDA_DEVICE_SM_LIMIT=0"
    share_twice 0.23 0.33 "vgpu.rs's TENSOR_FUSION_CUDA_UP_LIMIT by UUID" env TENSOR_FUSION_CUDA_UP_LIMIT='{"GPU-5AC1CE00-0000-4000-8000-000000000000": 30}' LD_PRELOAD="$LIB" "$CL" stream 1.2 500
    share_twice 0.23 0.33 "GPUSLICE_COMPUTE_LIMIT=0:30 by index" env GPUSLICE_COMPUTE_LIMIT=0:30 LD_PRELOAD="$LIB" "$CL" stream 1.2 500
    expect 0 "GPUSLICE_COMPUTE_LIMIT=100 is no ceiling" -- env GPUSLICE_COMPUTE_LIMIT=100 LD_PRELOAD="$LIB" "$CL" stream 1 500
    share_in 0.85 1.01 "GPUSLICE_COMPUTE_LIMIT=100"
    for v in GPUSLICE_COMPUTE_LIMIT=0 GPUSLICE_COMPUTE_LIMIT=101 GPUSLICE_COMPUTE_LIMIT=abc CUDA_DEVICE_SM_LIMIT=150 'TENSOR_FUSION_CUDA_UP_LIMIT={"0": 0}'; do
        expect 1 "$v is refused" -- env "$v" LD_PRELOAD="$LIB" "$CL" stream 1 500
        stderr_has "${v%%=*}"
    done ;;
compute_robust)
    # Failure paths found in review: none may hang a program, stall it, or bill idle time.
    expect 0 "a per-thread-stream launch during another thread's capture" -- timeout 20 "$GS" run -q --compute 30 -- "$CL" ptds-capture 1.2 500
    share_in 0.23 0.33 "loading after it"
    GPUSLICE_DEBUG=1 expect 0 "a mostly idle program" -- "$GS" run -q --compute 30 -- "$CL" idle 1.5 5
    held=$(sed -n 's/.*has held it \([0-9.]*\) s.*/\1/p' "$T/err")
    if [ -n "$held" ] && awk -v h="$held" 'BEGIN { exit !(h < 0.05) }'; then ok "idle time is not charged: ${held} s"; else bad "idle program charged ${held:-?} s"; cat "$T/err"; fi
    "$GS" run -q --compute 30 -- "$CL" stream 3.5 500 >"$T/a" 2>"$T/err" &
    sleep 0.8
    p=$(pgrep -f "^$CL stream 3.5 500" | head -n 1)
    kill -STOP "$p"; sleep 1.2; kill -CONT "$p"; wait
    share_in 0.12 0.33 "stopped for 1.2 s of 3.5 s, no stall after" a
    "$GS" run -q --compute 30 -- "$CL" stream 3.5 500 >"$T/a" 2>/dev/null &
    "$GS" run -q --compute 30 -- "$CL" legacy 3.5 500 >"$T/b" 2>/dev/null &
    sleep 0.8
    p=$(pgrep -f "^$CL stream 3.5 500" | head -n 1)
    kill -STOP "$p"; sleep 1.5; kill -CONT "$p"; wait
    share_in 0.2 0.33 "a tenant beside one stopped while it held the device" b ;;
compute_devices)
    # Ceilings are per device: each device's own, with its own budget.
    export GPUSLICE_SIM_DEVICES=2
    # (Below their bands, measured once more: see share_twice.)
    share_twice 0.14 0.23 "device 1 at 20% under 0:50,1:20" env COMPUTE_LOAD_DEVICE=1 "$GS" run -q --compute 0:50,1:20 -- "$CL" stream 1.2 500
    share_twice 0.43 0.53 "device 0 at 50% under 0:50,1:20" env COMPUTE_LOAD_DEVICE=0 "$GS" run -q --compute 0:50,1:20 -- "$CL" stream 1.2 500
    COMPUTE_LOAD_DEVICE=1 expect 0 "device 1 under 0:50 (no ceiling there)" -- "$GS" run -q --compute 0:50 -- "$CL" stream 1 500
    share_in 0.85 1.01 "device 1 without a ceiling"
    # One job over both devices, a worker on each (as torchrun starts them): --compute 50 holds
    # on each device with its own budget, not one budget shared (that would be 25% each).
    "$GS" run -q --compute 50 -- sh -c "COMPUTE_LOAD_DEVICE=0 '$CL' stream 1.5 500 >'$T/a' & COMPUTE_LOAD_DEVICE=1 '$CL' stream 1.5 500 >'$T/b'; wait"
    share_in 0.40 0.53 "worker on device 0 of a job at 50%" a
    share_in 0.40 0.53 "worker on device 1 of a job at 50%" b
    # The same on four devices, a worker on each (a share over 0.3 is no budget shared by four).
    GPUSLICE_SIM_DEVICES=4 GPUSLICE_SIM_STATE="$T/four.state" "$GS" run -q --compute 50 -- sh -c "
        for d in 0 1 2 3; do COMPUTE_LOAD_DEVICE=\$d '$CL' stream 1.5 500 >'$T/w'\$d & done; wait"
    for d in 0 1 2 3; do share_in 0.30 0.53 "worker on device $d of 4 at 50%" w$d; done ;;
compute_duty)
    # A launch-bound loop: 20 us kernels, 80 us of host work after each (about a fifth of the
    # device's time). A ceiling bills the share of the time in flight in which its kernels ran,
    # learnt from NVML's per-process samples (src/preload/compute/duty.c): under its ceiling it
    # keeps its native rate; over one it is held to it by its kernels' time.
    late() { awk '/^share/ {print $6}' "$T/$1"; }
    expect 0 "the loop, native" -- "$CL" gaps 3 20; cp "$T/out" "$T/native"
    r0=$(late native)
    GPUSLICE_DEBUG=1 expect 0 "the loop under --compute 50" -- "$GS" run -q --compute 50 -- "$CL" gaps 3 20
    cp "$T/out" "$T/c50"
    r50=$(late c50)
    if awk -v a="$r50" -v b="$r0" -v lo="$(loose 0.9)" 'BEGIN { exit !(b > 0 && a / b >= lo) }'; then
        ok "under its ceiling, its rate after the first half second: $r50/s against $r0/s natively"
    else bad "under --compute 50 its rate fell to $r50/s from $r0/s natively"; cat "$T/native" "$T/c50" "$T/err"; fi
    billed_in 0.8 1.35 "under its ceiling, billed its kernels' time, not the gaps"
    if grep -q "billed [12][0-9.]* % of its time in flight (duty, from [1-9][0-9]* of NVML" "$T/err"; then
        ok "the duty, learnt from NVML's samples: $(grep -o 'billed [0-9.]* %' "$T/err")"
    else bad "no duty of about a fifth learnt from NVML"; cat "$T/err"; fi
    expect 0 "the loop under --compute 10" -- "$GS" run -q --compute 10 -- "$CL" gaps 3 20
    cp "$T/out" "$T/c10"
    # Over its ceiling: after the duty is learnt, its kernels hold 10 % of the device's time.
    s10=$(awk '/^share/ {printf "%.4f", $6 * 20e-6}' "$T/c10")
    if awk -v v="$s10" -v lo="$(loose 0.08)" 'BEGIN { exit !(v >= lo && v <= 0.115) }'; then
        ok "over its ceiling of 10: its kernels held $s10 of the device in the second half"
    else bad "over its ceiling of 10: its kernels held $s10 of the device in the second half"; cat "$T/c10"; fi
    # Kernels queued back to back with the device's own 10 us gap before each (NVML's
    # per-process figure counts the gaps, the device's utilisation does not): over its ceiling
    # the load is held by the device's figure, so its kernels hold half the device.
    GPUSLICE_SIM_KERNEL_GAP_NS=10000 expect 0 "back-to-back kernels with device gaps, natively" -- "$CL" stream 1 20
    share_in 0.62 0.70 "back-to-back 20 us kernels, 10 us gaps, natively"
    # (The device's sample periods 2/5 of a period apart from the processes': a device sample
    # must be weighed by how much of the process's period it covers.)
    GPUSLICE_SIM_DEV_SAMPLE_SHIFT_PCT=40 GPUSLICE_SIM_KERNEL_GAP_NS=10000 expect 0 "the same under --compute 50" -- "$GS" run -q --compute 50 -- "$CL" stream 4 20
    share_in 0.45 0.53 "back-to-back kernels with device gaps under --compute 50, held by the device's time"
    # The same where the device's samples come stamped on the monotonic clock and typed
    # unsigned long long (NVML promises neither clock nor type).
    GPUSLICE_SIM_DEV_SAMPLE_SHIFT_PCT=40 GPUSLICE_SIM_NVML_DEVICE_SAMPLES=monotonic GPUSLICE_SIM_KERNEL_GAP_NS=10000 expect 0 "the same, device samples on the monotonic clock" -- \
        "$GS" run -q --compute 50 -- "$CL" stream 4 20
    share_in 0.45 0.53 "device samples on the monotonic clock, typed unsigned long long: still the device's time"
    # A loop that turns saturating after 3 s of kernels shorter than its gaps (a duty of about a
    # fifth learnt): NVML's count settles what the lagging duty under-billed, so the stream is
    # held at its ceiling from the switch on (0.79 of the device for 2 s without the
    # settling).
    GPUSLICE_DEBUG=1 expect 0 "launch-bound for 3 s, then saturating, under --compute 50" -- \
        "$GS" run -q --compute 50 -- "$CL" gaps-stream 2 20
    share_in 0.45 0.55 "saturating after a low duty was learnt: held at its ceiling"
    billed_in 0.9 1.1 "saturating after a low duty: billed its kernels' time"
    if grep -q "NVML's count changed the bills by +0\.[1-9]" "$T/err"; then ok "NVML's count added to the bills: $(grep -o 'changed the bills by [^;]*' "$T/err")"
    else bad "NVML's count did not add to the bills"; cat "$T/err"; fi
    # NVML cannot name the process (another PID namespace): nothing learnt, all the time in
    # flight is billed, as before (the ceiling holds; the loop is throttled).
    GPUSLICE_SIM_NVML_PID_OFFSET=100000 GPUSLICE_DEBUG=1 expect 0 "the loop under --compute 50, NVML blind to it" -- \
        "$GS" run -q --compute 50 -- "$CL" gaps 3 20
    billed_in 2.5 6 "NVML blind to it: billed all its time in flight"
    if grep -q "billed 100.0 % of its time in flight (duty, from 0 of NVML" "$T/err"; then ok "no duty from NVML"; else bad "a duty without NVML's samples"; cat "$T/err"; fi ;;
compute_duty_fresh)
    # When the duty is fresh and when stale (issue 30; not in the sanitized run: timing only).
    # The duty outlives a stretch without a ceiling: uncapped for 4 s (`gpuslice set --compute
    # none`: nothing is counted in flight then), the loop is not billed all its time in flight
    # once the ceiling is back (the duty goes stale only after 3 s of time in flight counted
    # with NVML silent about the process), so it keeps its rate from the first moment.
    COMPUTE_LOAD_RATE_MS=250 "$GS" run -q --name duty-kept --compute 50 -- "$CL" gaps 10 20 \
        >"$T/kept" 2>"$T/kept.err" &
    kp=$!
    sleep 3
    "$GS" set duty-kept --compute none >/dev/null 2>>"$T/kept.err"
    sleep 4
    "$GS" set duty-kept --compute 50 >/dev/null 2>>"$T/kept.err"; t_on=$(date +%s.%N)
    wait "$kp"
    # Launches/s in the 2 s before the ceiling came back, and in the first second after it.
    rates=$(awk -v on="$t_on" '$1 == "rate" {
        if ($2 > on - 2 && $2 <= on) { a += $3; na++ }
        if ($2 > on + 0.25 && $2 <= on + 1.25) { b += $3; nb++ } }
        END { printf "%.0f %.0f", na ? a / na : 0, nb ? b / nb : 0 }' "$T/kept")
    r_off=${rates% *} r_on=${rates#* }
    if awk -v a="$r_on" -v b="$r_off" -v lo="$(loose 0.85)" 'BEGIN { exit !(b > 0 && a / b >= lo) }'; then
        ok "the ceiling back after 4 s without it: $r_on launches/s in its first second, $r_off/s uncapped"
    else bad "the ceiling back after 4 s without it: $r_on launches/s in its first second against $r_off/s uncapped"
        cat "$T/kept" "$T/kept.err"; fi
    # NVML falls silent about the process after 2 s: after 3 s more of time in flight the duty
    # is stale, and all the time in flight is billed again (the loop is throttled to it).
    rm -f "$T/silent"
    COMPUTE_LOAD_RATE_MS=250 GPUSLICE_SIM_NVML_SILENT="$T/silent" "$GS" run -q --compute 50 -- \
        "$CL" gaps 9 20 >"$T/silenced" 2>"$T/silenced.err" &
    kp=$!
    sleep 2.5
    : >"$T/silent"; t_sil=$(date +%s.%N)
    wait "$kp"
    rm -f "$T/silent"
    rates=$(awk -v s="$t_sil" '$1 == "rate" {
        if ($2 > s - 1.5 && $2 <= s) { a += $3; na++ }
        if ($2 > s + 5 && $2 <= s + 6.5) { b += $3; nb++ } }
        END { printf "%.0f %.0f", na ? a / na : 0, nb ? b / nb : 0 }' "$T/silenced")
    r_before=${rates% *} r_after=${rates#* }
    if awk -v a="$r_after" -v b="$r_before" 'BEGIN { exit !(b > 0 && a > 0 && a / b <= 0.8) }'; then
        ok "NVML silent for 5 s: the duty went stale, $r_after launches/s against $r_before/s before"
    else bad "NVML silent for 5 s: $r_after launches/s against $r_before/s before (the old duty kept)"
        cat "$T/silenced" "$T/silenced.err"; fi ;;
compute_fork)
    # A child forked while its parent's kernels run under a ceiling is a process of its own: it
    # launches as itself (its board turns and NVML's samples under its own PID, as the debug
    # summary at its exit says), follows its own work (a marker behind each of its launches,
    # none of its parent's), and both are governed.
    expect 0 "a child forked while the parent's launches run, launching too" -- env GPUSLICE_DEBUG=1 "$GS" run -q --compute 50 -- "$B/tests/life_probe" fork 2000 30 inflight
    cp=$(awk '/^child / { print $2 }' "$T/out"); pp=$(awk '/^parent / { print $2 }' "$T/out")
    grep -q "^parent $pp status 0$" "$T/out" && ok "the child ended with 0" || { bad "the child's status"; cat "$T/out"; }
    n=$(grep -c "board held by [0-9]* (this process $cp, " "$T/err"); m=$(grep -c "board held by [0-9]* (this process $pp, " "$T/err")
    if [ -n "$cp" ] && [ "$n" = 1 ] && [ "$m" = 1 ]; then ok "the child ($cp) launched as itself, the parent ($pp) as itself"
    else bad "the child ($cp) and the parent ($pp) as themselves: $n and $m"; grep "board held" "$T/err"; fi
    # Each summary counts the process's own 30 launches and markers (not its parent's too).
    n=$(grep -c "debug: compute: 30 launches governed, 30 markers " "$T/err")
    [ "$n" = 2 ] && ok "each governed its own 30 launches, a marker behind each" || { bad "launches governed: $n summaries of 30 and 30"; grep "launches governed" "$T/err"; } ;;
compute_off)
    # No ceiling: nothing measured, no marker recorded, the launch hooks pass through.
    GPUSLICE_DEBUG=1 expect 0 "a tenant without a ceiling" -- "$GS" run -q --memory 1G -- "$CL" stream 1 500
    share_in 0.85 1.01 "memory limit only"
    if grep -q "compute:" "$T/err"; then bad "launches were governed"; cat "$T/err"; else ok "no launch governed"; fi
    if ls "$GPUSLICE_RUN_DIR" | grep -q board; then bad "a device board was made"; else ok "no device board"; fi ;;
compute_edges)
    # The governor at its edges (each check a few seconds at most; bands as wide as the other
    # compute cases'): what arms it, the lowest ceilings, a burst after a rest.
    # A weight or a class from the environment alone (no ceiling) governs the process's launches.
    for v in GPUSLICE_WEIGHT=1 GPUSLICE_WEIGHT=100 GPUSLICE_PRIORITY=background GPUSLICE_PRIORITY=latency; do
        GPUSLICE_DEBUG=1 expect 0 "$v alone" -- preload env "$v" "$CL" stream 0.3 500
        grep -q "^gpuslice: debug: compute: [1-9][0-9]* launches governed" "$T/err" && ok "$v alone: its launches governed" || { bad "$v alone: no launch governed"; cat "$T/err"; }
    done
    # A ceiling of 99 % arms them; 100 % is none, and arms nothing (no launch governed).
    GPUSLICE_DEBUG=1 expect 0 "GPUSLICE_COMPUTE_LIMIT=99" -- preload env GPUSLICE_COMPUTE_LIMIT=99 "$CL" stream 0.3 500
    grep -q "^gpuslice: debug: compute: [1-9][0-9]* launches governed" "$T/err" && ok "99 %: its launches governed" || { bad "99 %: no launch governed"; cat "$T/err"; }
    GPUSLICE_DEBUG=1 expect 0 "GPUSLICE_COMPUTE_LIMIT=100" -- preload env GPUSLICE_COMPUTE_LIMIT=100 "$CL" stream 0.3 500
    if grep -q "compute:" "$T/err"; then bad "100 %: launches were governed"; cat "$T/err"; else ok "100 %: no launch governed"; fi
    # The lowest ceilings, whose budget's cap (P% of 50 ms) is under 2 ms: a starved tenant
    # resumes at half its cap, so 500 us kernels run at 1 % and 3 % (never waiting for ever).
    for c in 1 3; do
        expect 0 "500 us kernels under --compute $c" -- timeout 20 "$GS" run -q --compute $c -- "$CL" stream 1 500
        share_in "$(awk -v c=$c 'BEGIN { print c / 200 }')" "$(awk -v c=$c 'BEGIN { print c / 100 + 0.015 }')" "--compute $c"
    done
    # A tenant idle for a second (its budget full) that turns saturating: its first burst is at
    # most its ceiling's share of the 50 ms window, so 0.3 s of load under --compute 20 holds the
    # device about 0.2 + 10/300 of the time (0.21-0.23 here; a budget of 20 % of 500 ms gives
    # the first 100 ms whole: 0.51).
    for attempt in 1 2; do
        COMPUTE_LOAD_FIRST_S=1 expect 0 "saturating after a second's rest under --compute 20" -- "$GS" run -q --compute 20 -- "$CL" rest-stream 0.3 500
        v=$(awk '/^share/ {print $2}' "$T/out")
        [ -n "$v" ] && awk -v v="$v" 'BEGIN { exit !(v < 0.15) }' && [ $attempt = 1 ] || break
        echo "note: share $v after the rest, under its band; measuring once more"
    done
    share_in 0.15 0.33 "the first 0.3 s after a second's rest at 20 %"
    # Synchronising one stream, one context or one thread's per-thread stream settles that
    # alone: another's kernels queued behind it still run and are billed (pair-*: one kernel on
    # B, 4 on A behind it, a wait for B alone). So are a library's balanced retain and release
    # of the primary context (not its last release), a context destroyed with kernels in flight,
    # and a capture whose end failed. Each at 25 %: held to it, and billed its kernels' time
    # (measured once more when billed over 1.15 or under its band, as in compute_paths; a
    # settled stream's work unbilled reads 0.85-0.92 of the device, billed 0.25-0.3 of it).
    for p in pair-streams pair-ctx pair-ptds stream-retain ctx-destroy bad-capture; do
        hi=$(over 1.15)
        expect 0 "$p under --compute 25" -- timeout 20 "$GS" run -q --compute 25 -- "$CL" $p 1.2 500
        v=$(awk '/^billed_s/ { if ($4 > 0) printf "%.4f", $2 / $4 }' "$T/out")
        sh=$(awk '/^share/ {print $2}' "$T/out")
        if [ -n "$v" ] && [ -n "$sh" ] && awk -v v="$v" -v hi="$hi" -v s="$sh" -v lo="$(loose 0.19)" 'BEGIN { exit !(v > hi || s < lo) }'; then
            echo "note: $p at 25%: share $sh, billed $v of its kernels' time; measuring once more"
            expect 0 "$p under --compute 25, again" -- timeout 20 "$GS" run -q --compute 25 -- "$CL" $p 1.2 500
            hi=$(over 1.3)
        fi
        share_in 0.19 0.28 "$p at 25%"
        billed_in 0.95 "$hi" "$p at 25%"
    done
    grep -q "^begin_capture 900$" "$T/out" && ok "the legacy stream's capture refused to begin (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED), and the load after it held to 25 %" || { bad "bad-capture's begin"; cat "$T/out"; }
    grep -q "^end_capture 901$" "$T/out" && ok "the invalidated capture's end failed (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)" || { bad "bad-capture's end"; cat "$T/out"; }
    # A capture another thread failed to end goes on: the interposer keeps out of the driver
    # (its markers' queries would invalidate a global capture) until its own thread ends it.
    expect 0 "a global capture another thread failed to end, ended 20 ms later" -- timeout 20 "$GS" run -q --compute 25 -- "$CL" wrong-thread 0.5 500
    grep -q "^end_capture 908 0$" "$T/out" && ok "ended by its thread: CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, then 0" || { bad "wrong-thread capture"; cat "$T/out" "$T/err"; }
    # A process whose tenant met its GPUs in another order (a first process on device 1: entry
    # 0 is GPU 1) takes turns on its own GPU's board: at 50 % beside another 50 % tenant on
    # device 0, each holds about half (0.48 and 0.50 here; on GPU 1's board, no turns: 0.31).
    export GPUSLICE_SIM_DEVICES=2 GPUSLICE_SIM_STATE="$T/two.state"
    for attempt in 1 2; do
        "$GS" run -q --compute 50 -- sh -c "COMPUTE_LOAD_DEVICE=1 '$CL' stream 0.2 500 >/dev/null; COMPUTE_LOAD_DEVICE=0 '$CL' stream 2 500" >"$T/a" 2>"$T/a.err" &
        pa=$!
        sleep 0.3
        "$GS" run -q --compute 50 -- "$CL" stream 2 500 >"$T/b" 2>"$T/b.err"
        wait $pa
        a=$(awk '/^share/ {print $2}' "$T/a"); b=$(awk '/^share/ {print $2}' "$T/b")
        awk -v a="$a" -v b="$b" -v lo="$(loose 0.40)" 'BEGIN { exit !(a < lo || b < lo) }' && [ $attempt = 1 ] || break
        echo "note: entries in another order: shares $a and $b under their bands; measuring once more"
    done
    share_in 0.40 0.53 "device 0 of a tenant whose entry 0 is GPU 1, beside another tenant" a
    share_in 0.40 0.53 "the other tenant on device 0" b
    unset GPUSLICE_SIM_DEVICES; export GPUSLICE_SIM_STATE="$T/sim.state" ;;
cli_exec)
    # exec: the same launcher as run, any command as it is.
    expect 7 "exec returns the program's status" -- "$GS" exec -q -- sh -c 'exit 7'
    expect 0 "exec without -- and with the program's own options" -- "$GS" exec -q sh -c 'test "$1" = --epochs' sh --epochs
    expect 143 "exec returns 128+N for a signal" -- "$GS" exec -q -- sh -c 'kill -TERM $$'
    expect 137 "exec returns 128+9 for SIGKILL" -- "$GS" exec -q -- sh -c 'kill -9 $$'
    expect 127 "exec of a missing program" -- "$GS" exec -q -- /nonexistent/prog; stderr_has "exec: cannot run /nonexistent/prog"
    printf '#!/bin/sh\necho "direct $*"\n' >"$T/foo.py"
    expect 126 "exec of a .py file that is not executable: not handed to Python" -- "$GS" exec -q -- "$T/foo.py" a
    chmod +x "$T/foo.py"
    expect 0 "exec foo.py runs the file itself" -- "$GS" exec -q "$T/foo.py" a b
    if [ "$(cat "$T/out")" = "direct a b" ]; then ok "exec foo.py did not go through Python"; else bad "exec foo.py printed: $(cat "$T/out")"; fi
    expect 0 "exec puts the program in a tenant" -- "$GS" exec -q --compute 30 -- sh -c 'test -n "$GPUSLICE_TENANT" && test "$GPUSLICE_COMPUTE_LIMIT" = 30'
    # Each option's variable as given (they stay the limits of a process that leaves the tenant).
    expect 0 "exec passes each option on in its variable" -- "$GS" exec -q -d 0 --memory 1G --compute 0:30 --priority background --weight 3 --sms 16 -- \
        sh -c 'echo "$GPUSLICE_MEMORY_LIMIT|$GPUSLICE_COMPUTE_LIMIT|$GPUSLICE_PRIORITY|$GPUSLICE_WEIGHT|$GPUSLICE_SMS|$CUDA_VISIBLE_DEVICES|$CUDA_MPS_CLIENT_PRIORITY"'
    if [ "$(cat "$T/out")" = "1G|0:30|background|3|16|0|1" ]; then ok "the variables: $(cat "$T/out")"; else bad "the variables: $(cat "$T/out")"; fi
    # The environment's class is the tenant's where --priority is not given, whatever --weight is.
    GPUSLICE_PRIORITY=background expect 0 "--priority latency beside GPUSLICE_PRIORITY=background" -- "$GS" exec -q --priority latency -- sh -c 'echo "$GPUSLICE_PRIORITY"'
    out_a=$(cat "$T/out")
    GPUSLICE_PRIORITY=background expect 0 "--weight 3 beside GPUSLICE_PRIORITY=background" -- "$GS" exec -q --weight 3 -- sh -c 'echo "$GPUSLICE_PRIORITY|$GPUSLICE_WEIGHT"'
    [ "$out_a $(cat "$T/out")" = "latency background|3" ] && ok "--priority wins over the environment's class, which --weight alone keeps" || bad "classes: $out_a $(cat "$T/out")"
    CUDA_MPS_CLIENT_PRIORITY=0 expect 0 "a background tenant keeps the user's MPS client priority" -- "$GS" exec -q --priority background -- sh -c 'echo "$CUDA_MPS_CLIENT_PRIORITY"'
    if [ "$(cat "$T/out")" = 0 ]; then ok "CUDA_MPS_CLIENT_PRIORITY=0 kept"; else bad "CUDA_MPS_CLIENT_PRIORITY=$(cat "$T/out")"; fi
    expect 0 "a latency tenant is no below-normal MPS client" -- "$GS" exec -q --priority latency -- sh -c 'echo "${CUDA_MPS_CLIENT_PRIORITY-unset}|$GPUSLICE_PRIORITY"'
    if [ "$(cat "$T/out")" = "unset|latency" ]; then ok "no MPS client priority"; else bad "latency: $(cat "$T/out")"; fi
    expect 0 "a CUDA program is limited under exec --memory" -- "$GS" exec -q --memory 1G -- "$IT" limit $G
    # The interposer is preloaded, and only where it is: GPUSLICE_PRELOAD_LIB naming no file is
    # an error before anything starts (ld.so would ignore it, and the program run unlimited).
    expect 0 "exec preloads the interposer beside the build's gpuslice" -- "$GS" exec -q -- sh -c 'echo "$LD_PRELOAD"'
    if [ "$(cat "$T/out")" = "$B/bin/../lib/libgpuslice.so" ]; then
        ok "LD_PRELOAD=$(cat "$T/out")"; else bad "LD_PRELOAD was '$(cat "$T/out")'"; fi
    GPUSLICE_PRELOAD_LIB="$T/none/libgpuslice.so" expect 1 "GPUSLICE_PRELOAD_LIB naming no file" -- "$GS" exec -q --memory 1G -- touch "$T/started"
    stderr_has "cannot find the interposer libgpuslice.so ($T/none/libgpuslice.so: No such file or directory); set GPUSLICE_PRELOAD_LIB to its path"
    if [ -e "$T/started" ]; then bad "the program ran without its interposer"; else ok "nothing started"; fi
    cp "$LIB" "$T/copy.so"
    GPUSLICE_PRELOAD_LIB="$T/copy.so" expect 0 "GPUSLICE_PRELOAD_LIB names the interposer" -- "$GS" exec -q -- sh -c 'echo "$LD_PRELOAD"'
    if [ "$(cat "$T/out")" = "$T/copy.so" ]; then ok "LD_PRELOAD=\$GPUSLICE_PRELOAD_LIB"; else bad "LD_PRELOAD was '$(cat "$T/out")'"; fi
    GPUSLICE_PRELOAD_LIB="$T/copy.so" expect 0 "a CUDA program is limited through it" -- "$GS" exec -q --memory 1G -- "$IT" limit $G
    # The user's LD_PRELOAD is kept after it; an entry that is the interposer is not added twice.
    LD_PRELOAD="$T/copy.so" GPUSLICE_PRELOAD_LIB="$T/copy.so" expect 0 "the interposer on LD_PRELOAD already" -- "$GS" exec -q -- sh -c 'echo "$LD_PRELOAD"'
    if [ "$(cat "$T/out")" = "$T/copy.so" ]; then ok "LD_PRELOAD unchanged"; else bad "LD_PRELOAD was '$(cat "$T/out")'"; fi
    LD_PRELOAD="$LIB $T/copy.so" GPUSLICE_PRELOAD_LIB="$T/copy.so" expect 0 "the interposer listed second, after a space" -- "$GS" exec -q -- sh -c 'echo "$LD_PRELOAD"'
    if [ "$(cat "$T/out")" = "$LIB $T/copy.so" ]; then ok "LD_PRELOAD unchanged"; else bad "LD_PRELOAD was '$(cat "$T/out")'"; fi
    cp "$LIB" "$T/copy.sox"
    LD_PRELOAD="$T/copy.sox" GPUSLICE_PRELOAD_LIB="$T/copy.so" expect 0 "a library named like the interposer plus more is another" -- "$GS" exec -q -- sh -c 'echo "$LD_PRELOAD"'
    if [ "$(cat "$T/out")" = "$T/copy.so:$T/copy.sox" ]; then ok "the interposer put first"; else bad "LD_PRELOAD was '$(cat "$T/out")'"; fi
    expect 2 "exec without a command" -- "$GS" exec --memory 1G; stderr_has "exec: no command given"
    expect 2 "exec with an unknown option" -- "$GS" exec --bogus -- true; stderr_has "exec: unknown option --bogus"
    expect 2 "exec --memory banana" -- "$GS" exec --memory banana -- touch "$T/started"; stderr_has "--memory"
    if [ -e "$T/started" ]; then bad "a refused exec started the program"; else ok "nothing started"; fi
    expect 0 "exec --help" -- "$GS" exec --help
    if grep -q "usage: gpuslice exec" "$T/out" && ! grep -q "SCRIPT.py" "$T/out"; then ok "exec usage"; else bad "exec usage"; cat "$T/out"; fi
    expect 0 "gpuslice help exec" -- "$GS" help exec
    expect 0 "gpuslice --help lists exec" -- "$GS" --help
    if grep -q "^  exec " "$T/out"; then ok "exec in the command list"; else bad "exec not listed"; cat "$T/out"; fi
    if [ -z "$(ls -A "$GPUSLICE_RUN_DIR")" ]; then ok "no tenant state left behind"; else bad "stale tenant files: $(ls "$GPUSLICE_RUN_DIR")"; fi ;;
cli_signals)
    # A supervisor's SIGINT is the program's, as its SIGTERM is (issue 31): kill -INT,
    # Python's send_signal, timeout -s INT stop it, and the status says it died of SIGINT
    # (130), as a shell's $? does. The program's SIGINT is the default one (not the ignored
    # one sh gives a background job).
    # Each signal a supervisor sends is passed on: SIGTERM (kill, timeout, systemd), SIGHUP,
    # SIGUSR1 and SIGUSR2 too; the status is the program's death by it (128 + N).
    for cs in run:INT:130 exec:INT:130 run:TERM:143 exec:TERM:143 run:HUP:129 exec:USR1:138 run:USR2:140; do
        cmd=${cs%%:*} sig=${cs#*:} want=${sig#*:} sig=${sig%:*}
        rm -f "$T/started"
        python3 - "$GS" "$cmd" "$T/started" "$sig" >"$T/out" 2>"$T/err" <<'PY'
import os, signal, subprocess, sys, time
signal.signal(signal.SIGINT, signal.SIG_DFL)
gs, cmd, started, sig = sys.argv[1:]
p = subprocess.Popen([gs, cmd, "-q", "--", "sh", "-c", 'touch "$0"; exec sleep 30', started])
end = time.time() + 20
while not os.path.exists(started) and time.time() < end:
    time.sleep(0.05)
t = time.time()
p.send_signal(getattr(signal, "SIG" + sig))
try:
    rc = p.wait(timeout=10)
except subprocess.TimeoutExpired:
    p.kill()
    rc = "none (still running 10 s after SIG%s)" % sig
print("status", rc, "after %.1f s" % (time.time() - t))
PY
        if grep -q "^status $want " "$T/out"; then ok "$cmd: a supervisor's SIG$sig stops the program: $(cat "$T/out")"
        else bad "$cmd: SIG$sig to gpuslice $cmd: $(cat "$T/out"), want status $want"; cat "$T/err"; fi
    done
    # (A program with SIGINT's default from its start: python3, told to die of it, was still
    # importing site 1 s after its start on a loaded machine, and exited 1 with a traceback.)
    expect 130 "timeout --foreground -s INT: the program died of SIGINT" -- \
        timeout --foreground --preserve-status -s INT 1 "$GS" run -q -- sleep 30.61
    # A program that handles SIGINT sees it once and exits as it chooses. (Sent once it says its
    # handler is set: under ASan on a loaded CI machine python3 was still starting 3 s after.)
    rm -f "$T/handler-set"
    "$GS" run -q -- python3 -c 'import signal, sys, time
signal.signal(signal.SIGINT, lambda *a: sys.exit(3))
open(sys.argv[1], "w").close()
time.sleep(30)' "$T/handler-set" >"$T/out" 2>"$T/err" &
    sp=$!
    i=0; while [ ! -e "$T/handler-set" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
    kill -INT $sp; wait $sp; got=$?
    if [ $got = 3 ]; then ok "a program that handles SIGINT exits with its own status"; else bad "a program that handles SIGINT: exit $got, want 3"; cat "$T/out" "$T/err"; fi
    if [ -z "$(ls -A "$GPUSLICE_RUN_DIR")" ]; then ok "no tenant state left behind"; else bad "stale tenant files: $(ls "$GPUSLICE_RUN_DIR")"; fi ;;
cli_python)
    # run SCRIPT.py [ARGS]: an existing .py file named first runs under $PYTHON or python3.
    printf 'import sys\nprint("python", " ".join(sys.argv[1:]))\nsys.exit(5)\n' >"$T/train.py"
    printf '#!/bin/sh\necho "interpreter $*"\n' >"$T/fakepy"; chmod +x "$T/fakepy"
    if command -v python3 >/dev/null; then
        expect 5 "run train.py runs python3 and returns its status" -- "$GS" run -q "$T/train.py" --epochs 3 -q
        if [ "$(cat "$T/out")" = "python --epochs 3 -q" ]; then ok "the script's args reach it"; else bad "script printed: $(cat "$T/out")"; fi
        (cd "$T" && "$GS" run -q train.py x >"$T/out" 2>"$T/err"); got=$?
        if [ $got = 5 ] && [ "$(cat "$T/out")" = "python x" ]; then ok "a relative train.py"; else bad "relative train.py: exit $got, $(cat "$T/out")"; cat "$T/err"; fi
        expect 5 "run --memory ... train.py" -- "$GS" run --memory 1G "$T/train.py"
        stderr_has "running the Python script .*train.py with python3"
        # An empty PYTHON is no interpreter's name: python3 runs the script.
        PYTHON= expect 5 "an empty PYTHON: python3" -- "$GS" run -q "$T/train.py" y
        if [ "$(cat "$T/out")" = "python y" ]; then ok "PYTHON= runs python3"; else bad "PYTHON= printed: $(cat "$T/out")"; cat "$T/err"; fi
    else
        ok "python3 missing: skipped the python3 checks"
    fi
    PYTHON="$T/fakepy" expect 0 "\$PYTHON is the interpreter" -- "$GS" run -q "$T/train.py" a b
    if [ "$(cat "$T/out")" = "interpreter $T/train.py a b" ]; then ok "\$PYTHON gets the script and its args"; else bad "\$PYTHON printed: $(cat "$T/out")"; fi
    PYTHON="$T/fakepy" expect 0 "the .py form after --" -- "$GS" run -q -- "$T/train.py"
    if [ "$(cat "$T/out")" = "interpreter $T/train.py" ]; then ok "run -- train.py too"; else bad "printed: $(cat "$T/out")"; fi
    PYTHON=/nonexistent/python expect 127 "a missing interpreter" -- "$GS" run -q "$T/train.py"; stderr_has "set PYTHON"
    PYTHON="$T/fakepy" expect 127 "a missing .py file is not handed to Python" -- "$GS" run -q "$T/none.py"
    # ".py" alone is a name with no script's name before the suffix: run as it is (from PATH).
    printf '#!/bin/sh\necho "direct $*"\n' >"$T/.py"; chmod +x "$T/.py"
    (cd "$T" && PATH="$T:$PATH" PYTHON="$T/fakepy" "$GS" run -q .py z >"$T/out" 2>"$T/err"); got=$?
    if [ $got = 0 ] && [ "$(cat "$T/out")" = "direct z" ]; then ok "run .py runs the file itself"; else bad "run .py: exit $got, $(cat "$T/out")"; cat "$T/err"; fi
    mkdir "$T/dir.py"
    PYTHON="$T/fakepy" expect 126 "a directory named *.py is not handed to Python" -- "$GS" run -q "$T/dir.py"
    PYTHON="$T/fakepy" expect 126 "exec train.py is not handed to Python" -- "$GS" exec -q "$T/train.py"
    expect 0 "run --help describes the .py form" -- "$GS" run --help
    if grep -q "SCRIPT.py" "$T/out"; then ok "usage names SCRIPT.py"; else bad "usage lacks SCRIPT.py"; fi
    if [ -z "$(ls -A "$GPUSLICE_RUN_DIR")" ]; then ok "no tenant state left behind"; else bad "stale tenant files: $(ls "$GPUSLICE_RUN_DIR")"; fi ;;
cli_torch)
    # run/exec put gpuslice's sitecustomize first on PYTHONPATH; with a stand-in
    # for PyTorch (tests/integration/fake_torch, no GPU), it moves torch onto a
    # highest-priority stream per device, runs the user's sitecustomize once,
    # never imports torch itself, and says nothing.
    HOOK=$(cd "$B/share/gpuslice/python" 2>/dev/null && pwd -P)
    unset PYTHONPATH
    expect 0 "run puts the hook's directory on an unset PYTHONPATH" -- "$GS" run -q -- sh -c 'echo "$PYTHONPATH"'
    if [ -n "$HOOK" ] && [ "$(cat "$T/out")" = "$HOOK" ]; then ok "PYTHONPATH=$HOOK, no empty entry"; else bad "PYTHONPATH was '$(cat "$T/out")', want '$HOOK'"; fi
    # Set but empty is as unset: "HOOK:" would end in an empty entry, the current directory.
    PYTHONPATH= expect 0 "run with PYTHONPATH set but empty" -- "$GS" run -q -- sh -c 'echo "$PYTHONPATH"'
    if [ -n "$HOOK" ] && [ "$(cat "$T/out")" = "$HOOK" ]; then ok "an empty PYTHONPATH: $HOOK alone"; else bad "an empty PYTHONPATH became '$(cat "$T/out")', want '$HOOK'"; fi
    PYTHONPATH="/a:/b" expect 0 "exec keeps the user's PYTHONPATH after it" -- "$GS" exec -q -- sh -c 'echo "$PYTHONPATH"'
    if [ "$(cat "$T/out")" = "$HOOK:/a:/b" ]; then ok "PYTHONPATH=$HOOK:/a:/b"; else bad "PYTHONPATH was '$(cat "$T/out")'"; fi
    PYTHONPATH="$HOOK:/a" expect 0 "nested: the hook is not added twice" -- "$GS" run -q -- sh -c 'echo "$PYTHONPATH"'
    if [ "$(cat "$T/out")" = "$HOOK:/a" ]; then ok "PYTHONPATH unchanged"; else bad "PYTHONPATH was '$(cat "$T/out")'"; fi
    PYTHONPATH="$HOOK" expect 0 "nested: the hook alone is not added twice" -- "$GS" run -q -- sh -c 'echo "$PYTHONPATH"'
    if [ "$(cat "$T/out")" = "$HOOK" ]; then ok "PYTHONPATH unchanged"; else bad "PYTHONPATH was '$(cat "$T/out")'"; fi
    # Only the whole entry is the hook: a directory whose name begins with its path is another.
    PYTHONPATH="${HOOK}x:/a" expect 0 "a directory named like the hook plus more is another" -- "$GS" run -q -- sh -c 'echo "$PYTHONPATH"'
    if [ "$(cat "$T/out")" = "$HOOK:${HOOK}x:/a" ]; then ok "the hook put before it"; else bad "PYTHONPATH was '$(cat "$T/out")'"; fi
    PYTHONPATH="/a:$HOOK" expect 0 "the hook later on PYTHONPATH is put first" -- "$GS" run -q -- sh -c 'echo "$PYTHONPATH"'
    if [ "$(cat "$T/out")" = "$HOOK:/a:$HOOK" ]; then ok "the hook first"; else bad "PYTHONPATH was '$(cat "$T/out")'"; fi
    for c in run exec; do
        PYTHONPATH="/a" expect 0 "$c --no-torch-priority leaves PYTHONPATH alone" -- "$GS" $c -q --no-torch-priority -- sh -c 'echo "$PYTHONPATH"'
        if [ "$(cat "$T/out")" = "/a" ]; then ok "$c --no-torch-priority: PYTHONPATH=/a"; else bad "$c --no-torch-priority: PYTHONPATH was '$(cat "$T/out")'"; fi
    done
    PYTHONPATH="/a" GPUSLICE_PYTHON_DIR="$T/nohook" expect 3 "a missing hook: a warning, and the program runs" -- "$GS" run -q -- sh -c 'echo "$PYTHONPATH"; exit 3'
    stderr_has "warning: cannot find gpuslice's Python hook"
    stderr_has "GPUSLICE_PYTHON_DIR"
    if [ "$(cat "$T/out")" = "/a" ]; then ok "without the hook PYTHONPATH is left alone"; else bad "PYTHONPATH was '$(cat "$T/out")'"; fi
    if [ "$(grep -c "Python hook" "$T/err")" = 1 ]; then ok "warned once"; else bad "warned $(grep -c "Python hook" "$T/err") times"; fi
    mkdir "$T/hookcopy"; cp "$B/share/gpuslice/python/sitecustomize.py" "$T/hookcopy/"
    GPUSLICE_PYTHON_DIR="$T/hookcopy" expect 0 "GPUSLICE_PYTHON_DIR names the hook's directory" -- "$GS" exec -q -- sh -c 'echo "$PYTHONPATH"'
    if [ "$(cat "$T/out")" = "$(cd "$T/hookcopy" && pwd -P)" ]; then ok "PYTHONPATH=\$GPUSLICE_PYTHON_DIR"; else bad "PYTHONPATH was '$(cat "$T/out")'"; fi
    if ! command -v python3 >/dev/null; then
        ok "python3 missing: skipped the Python checks"
    else
        mkdir "$T/user"
        printf 'import os\nopen(os.environ["GS_MARK"], "a").write("ran\\n")\n' >"$T/user/sitecustomize.py"
        export GS_MARK="$T/mark"
        PY="$SRC/tests/integration/fake_torch:$T/user"
        # pyrun DESCRIPTION GPUSLICE-ARGS... -- PROGRAM: python3 -c PROGRAM under gpuslice; silent, user's sitecustomize once.
        pyrun() {
            what=$1; shift; rm -f "$T/mark"
            prog=; args=
            while [ "$1" != -- ]; do args="$args $1"; shift; done; prog=$2
            PYTHONPATH="$PY" expect 0 "$what" -- "$GS" $args -- python3 -c "$prog"
            if [ ! -s "$T/err" ]; then ok "$what: nothing on stderr"; else bad "$what: stderr: $(cat "$T/err")"; fi
            if [ "$(cat "$T/mark" 2>/dev/null)" = ran ]; then ok "$what: the user's sitecustomize ran once"; else bad "$what: the user's sitecustomize ran: '$(cat "$T/mark" 2>/dev/null)'"; fi
        }
        pyrun "torch's first use gets a top-priority stream on device 0, set_device(1) on device 1" run -q -- '
import sys, torch
c = torch.cuda
assert sys.modules["sitecustomize"].__file__.endswith("/user/sitecustomize.py"), sys.modules["sitecustomize"]
assert c.calls == [], c.calls
x = c.current_device()
assert c.calls == [("init", 0), ("Stream", 0, -5), ("set_stream", 0, -5)], c.calls
assert c.current_stream(0).priority == -5, c.current_stream(0)
c.set_device(1)
assert c.current_stream(1).priority == -5 and c.current_stream(1).device_index == 1, c.current_stream(1)
s0 = c.current_stream(0)
c.set_device(0)
assert c.current_stream(0) == s0, "a second set_device keeps the stream"
assert [k for k in c.calls if k[0] == "Stream"] == [("Stream", 0, -5), ("Stream", 1, -5)], c.calls
assert c.set_device.__name__ == "set_device"
assert torch.__spec__.loader is torch.__loader__ and type(torch.__loader__).__name__ == "SourceFileLoader", torch.__loader__
'
        pyrun "set_device first: no stream on the device it leaves" exec -q -- '
import torch
c = torch.cuda
c.set_device(1)
assert c.calls == [("init", 0), ("set_device", 1), ("Stream", 1, -5), ("set_stream", 1, -5)], c.calls
assert c.current_stream(1).priority == -5 and c.current_stream(0).priority == 0
'
        pyrun "a stream the program chose is kept" run -q -- '
import torch
c = torch.cuda
s = c.Stream(device=1, priority=0)
c.set_stream(s)
c.set_device(1)
assert c.current_stream(1) == s, c.current_stream(1)
assert c.current_stream(0).priority == -5, "device 0 was current at initialisation"
'
        pyrun "set_device(-1) initialises nothing" run -q -- '
import torch
torch.cuda.set_device(-1)
assert torch.cuda.calls == [], torch.cuda.calls
'
        pyrun "a program that never imports torch does not get it" run -q -- '
import sys, importlib.util
assert importlib.util.find_spec("torch") is not None, "the stand-in is importable"
assert "torch" not in sys.modules and "torch.cuda" not in sys.modules, sorted(sys.modules)
'
        pyrun "--no-torch-priority: torch untouched" run -q --no-torch-priority -- '
import sys, torch
c = torch.cuda
assert not any(type(f).__name__ == "_TorchFinder" for f in sys.meta_path)
c.current_device(); c.set_device(1)
assert c.calls == [("init", 0), ("set_device", 1)], c.calls
assert c.current_stream(0).priority == 0 and c.current_stream(1).priority == 0
'
        printf '%s\n' 'import multiprocessing as mp' 'def child(q):' '    import torch' '    torch.cuda.set_device(1)' \
            '    q.put(torch.cuda.current_stream(1).priority)' 'if __name__ == "__main__":' \
            '    ctx = mp.get_context("spawn"); q = ctx.Queue(); p = ctx.Process(target=child, args=(q,)); p.start()' \
            '    assert q.get(timeout=60) == -5; p.join(); assert p.exitcode == 0' >"$T/spawn.py"
        PYTHONPATH="$PY" expect 0 "torch imported in a multiprocessing spawn child is patched too" -- "$GS" run -q "$T/spawn.py"
        GPUSLICE_DEBUG=1 PYTHONPATH="$PY" expect 0 "GPUSLICE_DEBUG=1 tells what the hook does" -- "$GS" run -q -- python3 -c 'import torch; torch.cuda.set_device(1)'
        stderr_has "gpuslice: torch priority: device 1: current stream set"
        mkdir -p "$T/oldtorch/torch"
        printf 'class _Cuda(object):\n    def set_device(self, d): self.dev = d\ncuda = _Cuda()\n' >"$T/oldtorch/torch/__init__.py"
        PYTHONPATH="$T/oldtorch" expect 0 "a torch without _lazy_call is left as it is, silently" -- "$GS" run -q -- python3 -c '
import torch
assert type(torch.cuda.set_device).__name__ == "method", torch.cuda.set_device
torch.cuda.set_device(1); assert torch.cuda.dev == 1'
        if [ ! -s "$T/err" ]; then ok "no message"; else bad "stderr: $(cat "$T/err")"; fi
        printf 'raise RuntimeError("user hook failed")\n' >"$T/user/sitecustomize.py"
        PYTHONPATH="$PY" expect 0 "an error in the user's sitecustomize is reported as Python always does" -- "$GS" run -q -- python3 -c '
import torch
torch.cuda.set_device(1)
assert torch.cuda.current_stream(1).priority == -5'
        stderr_has "Error in sitecustomize"
        stderr_has "user hook failed"
    fi
    expect 0 "run --help names --no-torch-priority" -- "$GS" run --help
    if grep -q -- "--no-torch-priority" "$T/out"; then ok "usage has --no-torch-priority"; else bad "usage lacks --no-torch-priority"; fi
    if [ -z "$(ls -A "$GPUSLICE_RUN_DIR")" ]; then ok "no tenant state left behind"; else bad "tenant files: $(ls "$GPUSLICE_RUN_DIR")"; fi ;;
cli_device)
    # --device sets CUDA_VISIBLE_DEVICES for the program; without it, it is left as it was.
    cvd_is() { # cvd_is WANT DESCRIPTION -- gpuslice args...: the program sees CUDA_VISIBLE_DEVICES=WANT
        want=$1; what=$2; shift 3
        "$GS" "$@" -- sh -c 'echo "${CUDA_VISIBLE_DEVICES-unset}"' >"$T/out" 2>"$T/err"; got=$?
        if [ $got = 0 ] && [ "$(cat "$T/out")" = "$want" ]; then ok "$what: $want"; else bad "$what: exit $got, saw $(cat "$T/out"), want $want"; cat "$T/err"; fi
    }
    unset CUDA_VISIBLE_DEVICES
    # Six simulated GPUs for the selections (every GPU named must exist: below).
    export GPUSLICE_SIM_DEVICES=6 GPUSLICE_SIM_STATE="$T/six.state"
    U0=GPU-5ac1ce00-0000-4000-8000-000000000000 U1=GPU-5ac1ce00-0000-4000-8000-000000000001
    cvd_is 1 "run --device 1" -- run -q --device 1
    cvd_is 1 "exec -d 1" -- exec -q -d 1
    cvd_is 0,1 "--device 0,1" -- run -q --device 0,1
    cvd_is 0,1 "-d 0 -d 1" -- exec -q -d 0 -d 1
    cvd_is 1,0,2 "order is kept" -- exec -q -d 1,0 -d 2
    cvd_is $U1,$U0 "two UUIDs" -- exec -q -d $U1,$U0
    cvd_is unset "no --device: unset stays unset" -- exec -q
    "$GS" run -d 1 -- true >"$T/out" 2>"$T/err"; stderr_has "CUDA_VISIBLE_DEVICES=1 for true"
    export CUDA_VISIBLE_DEVICES=3,5
    cvd_is 5 "-d 1 under CUDA_VISIBLE_DEVICES=3,5" -- exec -q -d 1
    cvd_is 5,3 "-d 1,0 under CUDA_VISIBLE_DEVICES=3,5" -- run -q -d 1,0
    cvd_is $U0 "a UUID passes through" -- exec -q -d $U0
    cvd_is 3,5 "no --device: a set value is left exactly" -- run -q
    expect 2 "-d 2 under CUDA_VISIBLE_DEVICES=3,5" -- "$GS" exec -d 2 -- touch "$T/started"; stderr_has "--device: index 2 is not among"
    CUDA_VISIBLE_DEVICES=$U0,$U1 cvd_is $U1 "an index into a UUID list" -- exec -q -d 1
    CUDA_VISIBLE_DEVICES=GPU-aaaa,GPU-bbbb expect 2 "the same GPU by index and UUID" -- "$GS" exec -d 0,GPU-AAAA -- touch "$T/started"; stderr_has "given twice"
    CUDA_VISIBLE_DEVICES= cvd_is "" "no --device: an empty value is left empty" -- exec -q
    CUDA_VISIBLE_DEVICES= expect 2 "an index when CUDA_VISIBLE_DEVICES is empty" -- "$GS" exec -d 0 -- touch "$T/started"; stderr_has "CUDA_VISIBLE_DEVICES is empty"
    unset CUDA_VISIBLE_DEVICES
    # A GPU that does not exist is refused before anything starts (issue 31: CUDA would stop
    # reading CUDA_VISIBLE_DEVICES there, and the program see fewer GPUs, or none).
    six="0 = $U0, 1 = $U1, 2 = ${U0%0}2, 3 = ${U0%0}3, 4 = ${U0%0}4, 5 = ${U0%0}5"
    expect 2 "-d 6 on six GPUs" -- "$GS" exec -d 6 -- touch "$T/started"
    if [ "$(cat "$T/err")" = "gpuslice: exec: -d/--device: there is no GPU 6: the machine has 6 GPUs ($six)" ]; then
        ok "every GPU of the machine named"; else bad "-d 6 on six GPUs"; cat "$T/err"; fi
    # The machine's GPUs are counted without the caller's CUDA_VISIBLE_DEVICES (with it CUDA
    # would see one here: it stops at 7).
    CUDA_VISIBLE_DEVICES=1,7 expect 2 "-d 1 picking 7 of CUDA_VISIBLE_DEVICES=1,7 on six GPUs" -- "$GS" run -q -d 1 -- touch "$T/started"
    if [ "$(cat "$T/err")" = "gpuslice: run: -d/--device: there is no GPU 7 (picked from CUDA_VISIBLE_DEVICES=\"1,7\"): the machine has 6 GPUs ($six)" ]; then
        ok "the machine's six, not the one CUDA_VISIBLE_DEVICES leaves"; else bad "-d 1 under 1,7"; cat "$T/err"; fi
    unset GPUSLICE_SIM_DEVICES; export GPUSLICE_SIM_STATE="$T/one.state"
    expect 2 "-d 3 on one GPU" -- "$GS" run -d 3 -- touch "$T/started"; stderr_has "run: -d/--device: there is no GPU 3: the machine has 1 GPU (0 = $U0)"
    expect 2 "-d 0,1 on one GPU" -- "$GS" run -q -d 0,1 -- touch "$T/started"; stderr_has "there is no GPU 1: "
    expect 2 "-d 1 with a key of --memory" -- "$GS" run -q -d 1 --memory 0:1G -- touch "$T/started"; stderr_has "there is no GPU 1: "
    expect 2 "-d GPU-…-…01 on one GPU" -- "$GS" exec -q -d $U1 -- touch "$T/started"; stderr_has "there is no GPU $U1: "
    CUDA_VISIBLE_DEVICES=0,4 expect 2 "-d 1 picking 4 of CUDA_VISIBLE_DEVICES=0,4" -- "$GS" run -q -d 1 -- touch "$T/started"
    stderr_has 'there is no GPU 4 (picked from CUDA_VISIBLE_DEVICES="0,4"): the machine has 1 GPU'
    expect 2 "a UUID then an index" -- "$GS" run -q -d $U0,0 -- touch "$T/started"; stderr_has "as a list of UUIDs, as its first entry is"
    cvd_is 0 "-d 0 on one GPU" -- run -q -d 0
    # The interposer's debug lines write a GPU's UUID as everything else does (issue 31: gpu-…).
    GPUSLICE_DEBUG=1 expect 0 "a debug run" -- "$GS" run -q --memory 1G -- "$IT" limit $G
    if grep -q "device 0 (GPU-5ac1ce00-0000-4000-8000-000000000000)" "$T/err" && ! grep -q "gpu-5ac1ce00" "$T/err"; then
        ok "debug lines write GPU- and lower-case hex"; else bad "debug lines' UUIDs"; grep -i "5ac1ce00" "$T/err"; fi
    cvd_is $U0 "-d UUID on one GPU" -- run -q -d $U0
    for v in "" , 0, ,1 0,,1 -1 -2,0 abc 1x 1.5 " 1" 0,0 GPU- 99999999; do
        expect 2 "--device '$v' is bad usage" -- "$GS" run -d "$v" -- touch "$T/started"
        stderr_has "--device: "
    done
    expect 2 "-d 1 -d 1 is a duplicate" -- "$GS" exec -d 1 -d 1 -- touch "$T/started"; stderr_has "given twice"
    expect 2 "--device without a value" -- "$GS" exec --device; stderr_has "--device needs a value"
    if [ -e "$T/started" ]; then bad "a refused run started the program"; else ok "nothing started"; fi
    if [ -z "$(ls -A "$GPUSLICE_RUN_DIR")" ]; then ok "no tenant state left behind"; else bad "tenant files: $(ls "$GPUSLICE_RUN_DIR")"; fi
    expect 0 "run --help: limit keys are after --device" -- "$GS" run --help
    if grep -q "after --device" "$T/out"; then ok "usage says index keys follow --device"; else bad "usage lacks the --device note"; fi ;;
cli_nice)
    # --nice N: the program and what it starts run at nice value N.
    base=$(nice)
    nice_is() { # nice_is WANT DESCRIPTION: the last expect's program printed WANT
        if [ "$(cat "$T/out")" = "$1" ]; then ok "$2: nice $1"; else bad "$2: nice $(cat "$T/out"), want $1"; cat "$T/err"; fi
    }
    expect 0 "run --nice 5" -- "$GS" run -q --nice 5 -- sh -c nice
    nice_is 5 "the child"
    expect 0 "exec -n 5, /proc/self/stat" -- "$GS" exec -q -n 5 -- awk '{print $19}' /proc/self/stat
    nice_is 5 "field 19 of the program's stat"
    expect 0 "a grandchild inherits it" -- "$GS" exec -q -n 7 -- sh -c 'sh -c nice'
    nice_is 7 "the grandchild"
    expect 0 "no --nice" -- "$GS" exec -q -- nice
    nice_is "$base" "unchanged"
    for v in 99 20 -21 abc 1.5 "" " 5"; do
        expect 2 "--nice '$v' is bad usage" -- "$GS" exec --nice "$v" -- touch "$T/started"
        stderr_has "--nice: "
    done
    expect 2 "--nice without a value" -- "$GS" exec --nice; stderr_has "--nice needs a value"
    # Both ends of -20..19 are nice values: 19 is set; -20 is set where it may be, else a warning.
    expect 0 "--nice 19, the highest" -- "$GS" exec -q --nice 19 -- nice
    nice_is 19 "--nice 19"
    expect 0 "--nice -20, the lowest" -- "$GS" exec -q --nice -20 -- nice
    if [ "$(nice -n -40 nice 2>/dev/null)" = -20 ]; then
        nice_is -20 "--nice -20 where it may be lowered"
    else
        stderr_has "warning: --nice -20: Permission denied"
    fi
    expect 2 "--nice 20 is bad usage" -- "$GS" exec --nice 20 -- touch "$T/started"
    stderr_has '^gpuslice: --nice: "20" is not a nice value (use an integer from -20 to 19)$'
    if [ -e "$T/started" ]; then bad "a refused run started the program"; else ok "nothing started"; fi
    lowered=$((base - 5))
    if [ "$(id -u)" != 0 ]; then
        expect 3 "--nice -5 as non-root still runs" -- "$GS" exec -q --nice -5 -- sh -c 'nice; exit 3'
        stderr_has "warning: --nice -5: Permission denied"
        nice_is "$base" "at the current priority"
    else
        if [ "$(nice -n -5 nice 2>/dev/null)" = "$lowered" ]; then
            expect 0 "--nice -5 as root" -- "$GS" exec -q --nice -5 -- nice
            nice_is -5 "root lowers it"
        else
            ok "root without CAP_SYS_NICE here: the lowering check is skipped"
        fi
        if command -v setpriv >/dev/null; then
            chmod 755 "$T"; chmod 1777 "$GPUSLICE_RUN_DIR"
            expect 3 "--nice -5 as another user still runs" -- setpriv --reuid=65534 --regid=65534 --clear-groups "$GS" exec -q --nice -5 -- sh -c 'nice; exit 3'
            stderr_has "warning: --nice -5: Permission denied"
            nice_is "$base" "at the current priority"
        fi
    fi
    if [ -z "$(ls -A "$GPUSLICE_RUN_DIR")" ]; then ok "no tenant state left behind"; else bad "tenant files: $(ls "$GPUSLICE_RUN_DIR")"; fi ;;
info)
    # What the driver says, never invented: green contexts as the simulated GPU splits them,
    # and with a driver that has none, why not.
    export GPUSLICE_SIM_DEVICES=2 GPUSLICE_SIM_SMS=66 GPUSLICE_SIM_MEMORY=8G
    export CUDA_MPS_PIPE_DIRECTORY="$T/mps"
    mkdir -p "$T/mps" "$T/empty"
    # One unit per memory line (issue 31: "16 GiB total, 838 MiB used, 15546 MiB free").
    "$GS" run -q -- "$B/tests/mem_probe" alloc:838 mark:"$T/held" wait:"$T/info-release" >/dev/null 2>&1 &
    MPID=$!
    BG="$BG $MPID"
    i=0; while [ ! -e "$T/held" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    expect 0 "info with memory in use" -- "$GS" info
    if grep -E '^  memory +8\.0 GiB total, [0-9]+\.[0-9] GiB used, [0-9]+\.[0-9] GiB free$' "$T/out" >/dev/null && ! grep "^  memory" "$T/out" | grep -q "MiB"; then
        ok "info's memory lines: one unit each"; else bad "info's memory lines mix units"; grep memory "$T/out"; fi
    touch "$T/info-release"
    wait $MPID
    # The driver's own fields as it reports them, apart from the groups its splits make (a
    # driver may report a co-scheduled alignment other than its smallest partition).
    GPUSLICE_SIM_SM_ALIGNMENT=4 expect 0 "info --json with green contexts" -- "$GS" info --json
    json_ok "info --json: the driver's granularity" '
for x in d["gpus"]:
    gc = x["green_contexts"]
    assert gc["supported"] is True and gc["reason"] is None, gc
    assert (gc["min_sms"], gc["alignment"], gc["finest_split_sms"]) == (8, 8, 2), gc
    assert (gc["driver_min_sm_partition_size"], gc["driver_sm_coscheduled_alignment"]) == (8, 4), gc
    assert (gc["groups"], gc["groups_left_over_sms"], gc["finest_groups"]) == (8, 2, 33), gc'
    # The whole table, to the character (nothing in use: the prober has ended).
    expect 0 "info as a table with green contexts" -- "$GS" info
    table_is "the table: every GPU's lines, MPS, no tenants" "driver 580.159.04-sim, CUDA 13.0, 2 GPUs" "" \
        "GPU 0: gpuslice simulated GPU  GPU-5ac1ce00-0000-4000-8000-000000000000" \
        "  memory          8.0 GiB total, 0.0 GiB used, 8.0 GiB free" \
        "  SMs             66, compute capability 9.0" \
        "  green contexts  groups of 8 SMs or more, in steps of 8; 2 when co-scheduling is ignored" \
        "                  split: 8 groups of 8 and 2 SMs left over, or 33 groups of 2" \
        "  MPS             not running ($T/mps)" "" \
        "GPU 1: gpuslice simulated GPU  GPU-5ac1ce00-0000-4000-8000-000000000001" \
        "  memory          8.0 GiB total, 0.0 GiB used, 8.0 GiB free" \
        "  SMs             66, compute capability 9.0" \
        "  green contexts  groups of 8 SMs or more, in steps of 8; 2 when co-scheduling is ignored" \
        "                  split: 8 groups of 8 and 2 SMs left over, or 33 groups of 2" \
        "  MPS             not running ($T/mps)" "" \
        "tenants: none in $GPUSLICE_RUN_DIR"
    # 8 SMs: one group of 8, so no step between sizes to measure: said so. (A 570 driver: CUDA
    # 12.8, which it reports as 12080, is "12.8" in both forms.)
    export GPUSLICE_SIM_DRIVER_VERSION=570.124.06 GPUSLICE_SIM_CUDA_VERSION=12080
    GPUSLICE_SIM_STATE="$T/sm8.state" GPUSLICE_SIM_SMS=8 GPUSLICE_SIM_DEVICES=1 expect 0 "info --json on 8 SMs" -- "$GS" info --json
    json_ok "8 SMs: one group of 8, four of 2, no alignment" '
assert (d["driver_version"], d["cuda_driver_version"]) == ("570.124.06", "12.8"), d
gc = d["gpus"][0]["green_contexts"]
assert gc == {"supported": True, "min_sms": 8, "alignment": None, "finest_split_sms": 2, "groups": 1,
              "groups_left_over_sms": 0, "finest_groups": 4, "driver_min_sm_partition_size": 8,
              "driver_sm_coscheduled_alignment": 8,
              "reason": "alignment could not be measured with cuDevSmResourceSplitByCount"}, gc'
    # (and with CUDA_MPS_PIPE_DIRECTORY empty: the default pipe directory)
    CUDA_MPS_PIPE_DIRECTORY= GPUSLICE_SIM_STATE="$T/sm8.state" GPUSLICE_SIM_SMS=8 GPUSLICE_SIM_DEVICES=1 expect 0 "info on 8 SMs" -- "$GS" info
    if grep -qxF "  green contexts  groups of 8 SMs or more; 2 when co-scheduling is ignored" "$T/out" &&
        grep -qxF "                  split: 1 groups of 8 and 0 SMs left over, or 4 groups of 2" "$T/out" &&
        grep -qxF "                  (alignment could not be measured with cuDevSmResourceSplitByCount)" "$T/out" &&
        grep -qxF "driver 570.124.06, CUDA 12.8, 1 GPU" "$T/out" && grep -qx "  MPS             [a-z ]* (/tmp/nvidia-mps)" "$T/out"; then
        ok "8 SMs: no step, the split and why"; else bad "8 SMs as a table"; cat "$T/out"; fi
    unset GPUSLICE_SIM_DRIVER_VERSION GPUSLICE_SIM_CUDA_VERSION
    # Each memory figure in the unit the total is best told in, at the unit's edge.
    for m in "1G 1.0 GiB total, 0.0 GiB used, 1.0 GiB free" "1023M 1023 MiB total, 0 MiB used, 1023 MiB free"; do
        GPUSLICE_SIM_STATE="$T/mem-${m%% *}.state" GPUSLICE_SIM_MEMORY=${m%% *} GPUSLICE_SIM_DEVICES=1 expect 0 "info on ${m%% *}" -- "$GS" info
        if grep -qxF "  memory          ${m#* }" "$T/out"; then ok "${m%% *}: ${m#* }"; else bad "${m%% *}: $(grep memory "$T/out")"; fi
    done
    # No GPU visible (cuInit: CUDA_ERROR_NO_DEVICE): none described, and -d names none.
    CUDA_VISIBLE_DEVICES= expect 0 "info with CUDA_VISIBLE_DEVICES empty" -- "$GS" info
    table_is "no GPUs" "driver 580.159.04-sim, CUDA 13.0, 0 GPUs" "" "tenants: none in $GPUSLICE_RUN_DIR"
    CUDA_VISIBLE_DEVICES= expect 2 "info -d 0 with no GPU" -- "$GS" info -d 0
    if [ "$(cat "$T/err")" = 'gpuslice: --device: "0" is none of the 0 GPUs described here (none)' ]; then ok "none named"; else bad "-d 0 with no GPU"; cat "$T/err"; fi
    CUDA_VISIBLE_DEVICES=1 expect 2 "info -d 1 with one GPU visible" -- "$GS" info -d 1
    if [ "$(cat "$T/err")" = 'gpuslice: --device: "1" is none of the 1 GPU described here (CUDA indexes 0)' ]; then ok "one GPU named"; else bad "-d 1 with one GPU"; cat "$T/err"; fi
    export GPUSLICE_SIM_GREEN=0
    expect 0 "info --json" -- "$GS" info --json
    json_ok "info --json: two GPUs as configured, green contexts not supported, with a reason" '
g = d["gpus"]
assert len(g) == 2 and [x["index"] for x in g] == [0, 1], g
for x in g:
    assert x["name"] == "gpuslice simulated GPU" and x["sm_count"] == 66, x
    assert x["compute_capability"] == "9.0" and x["memory_total_bytes"] == 8 << 30, x
    assert x["memory_used_bytes"] + x["memory_free_bytes"] == x["memory_total_bytes"], x
    gc = x["green_contexts"]
    assert gc["supported"] is False and gc["reason"] == "not supported by this driver (cuDeviceGetDevResource: CUDA_ERROR_NOT_SUPPORTED)", gc
    assert [gc[k] for k in ("groups", "groups_left_over_sms", "finest_groups", "driver_min_sm_partition_size", "driver_sm_coscheduled_alignment")] == [None] * 5, gc
    assert gc["min_sms"] is None and gc["alignment"] is None and gc["finest_split_sms"] is None, gc
    assert x["mps"] == "not running", x
assert g[1]["uuid"] == "GPU-5ac1ce00-0000-4000-8000-000000000001", g
assert d["driver_version"] == "580.159.04-sim" and d["cuda_driver_version"] == "13.0", d
assert d["tenants"] == [] and d["tenants_source"] == "run-directory", d'
    expect 0 "info as a table" -- "$GS" info
    if grep -q "GPU-5ac1ce00-0000-4000-8000-000000000001" "$T/out" && [ "$(grep -cxF "  green contexts  not supported by this driver (cuDeviceGetDevResource: CUDA_ERROR_NOT_SUPPORTED)" "$T/out")" = 2 ]; then
        ok "the table names each UUID and why green contexts are unknown"
    else bad "table lacks the UUID or the reason"; cat "$T/out"; fi
    LD_LIBRARY_PATH="$T/empty" expect 1 "info without a driver fails" -- "$GS" info; stderr_has "no NVIDIA driver found: libcuda.so.1"
    # ... and names the fix where the simulated GPU lies beside the binary (as in the build tree).
    stderr_has "(for the simulated GPU: LD_LIBRARY_PATH=$(cd "$B/lib/sim" && pwd -P))"
    LD_LIBRARY_PATH="$T/empty" GPUSLICE_REAL_LIBCUDA="$B/lib/sim/libcuda.so.1" GPUSLICE_REAL_LIBNVML="$B/lib/sim/libnvidia-ml.so.1" \
        expect 0 "info loads GPUSLICE_REAL_LIBCUDA and GPUSLICE_REAL_LIBNVML" -- "$GS" info --json
    json_ok "info: the named libraries answer" 'assert len(d["gpus"]) == 2 and d["gpus"][0]["memory_total_bytes"] == 8 << 30, d'
    # -q after the command, as before it: notes (here: NVML missing) are not printed.
    GPUSLICE_REAL_LIBNVML="$T/none.so" expect 0 "info without NVML" -- "$GS" info --json
    stderr_has "info: NVML not loaded"
    json_ok "without NVML: no memory figures, no driver version" '
assert d["driver_version"] is None and d["cuda_driver_version"] == "13.0", d
assert all(x["memory_total_bytes"] is None and x["memory_used_bytes"] is None and x["memory_free_bytes"] is None for x in d["gpus"]), d'
    GPUSLICE_REAL_LIBNVML="$T/none.so" expect 0 "info without NVML as a table" -- "$GS" info
    if grep -qxF "driver ?, CUDA 13.0, 2 GPUs" "$T/out" && [ "$(grep -cxF "  memory          ? total, ? used, ? free" "$T/out")" = 2 ]; then
        ok "without NVML: ? for what is unknown"; else bad "table without NVML"; cat "$T/out"; fi
    for q in "info -q" "info --quiet" "-q info"; do
        GPUSLICE_REAL_LIBNVML="$T/none.so" expect 0 "gpuslice $q without NVML" -- "$GS" $q --json
        if [ -s "$T/err" ]; then bad "gpuslice $q printed a note"; cat "$T/err"; else ok "gpuslice $q is quiet"; fi
    done
    # Run again without the interposer, -q before the command is kept.
    LD_PRELOAD="$LIB" GPUSLICE_REAL_LIBNVML="$T/none.so" expect 0 "gpuslice -q info under the interposer without NVML" -- "$GS" -q info --json
    if [ -s "$T/err" ]; then bad "-q was lost"; cat "$T/err"; else ok "still quiet"; fi
    expect 2 "info with an unknown option" -- "$GS" info --bogus
    expect 2 "info --json=1" -- "$GS" info --json=1
    expect 2 "info with an argument" -- "$GS" info extra
    expect 0 "info --help" -- "$GS" info --help
    mkfifo "$T/mps/control"
    expect 0 "info with an MPS endpoint but no daemon" -- "$GS" info --json
    json_ok "info: a control pipe without a daemon is unknown" 'assert all(x["mps"] == "unknown" for x in d["gpus"]), d'
    rm -f "$T/mps/control"
    # A tenant shows with its limits; under the interposer info still sees the whole GPU.
    holder infohold 1G 536870912
    GPUSLICE_MEMORY_LIMIT=1G expect 0 "info under the interposer" -- preload "$GS" info --json
    json_ok "info: whole GPU and the running tenant" '
g = d["gpus"][0]
assert g["memory_total_bytes"] == 8 << 30 and g["memory_used_bytes"] >= 536870912, g
t = [x for x in d["tenants"] if x["name"] == "infohold"]
assert len(t) == 1 and len(t[0]["pids"]) == 1, d["tenants"]
dev = t[0]["devices"][0]
assert dev["index"] == 0 and dev["memory_limit_bytes"] == 1 << 30 and dev["memory_used_bytes"] >= 536870912, dev
assert dev["uuid"] == g["uuid"] == "GPU-5ac1ce00-0000-4000-8000-000000000000", (dev, g["uuid"])'
    # The table's tenant rows, column by column: a limit and no ceiling; a limit and a ceiling;
    # a tenant named after its program (sh) that has not used a GPU yet.
    "$GS" run -q --name ceil --memory 2G --compute 30 -- "$IT" hold 1048576 "$T/release2" >"$T/ceil.out" 2>&1 &
    CPID=$!
    "$GS" run -q --memory 3G --compute 40 -- sh -c 'touch "$1/nodev.up"; while [ ! -e "$1/release2" ]; do sleep 0.05; done' sh "$T" &
    NPID=$!
    BG="$BG $CPID $NPID"
    for i in $(seq 200); do grep -q "^hold" "$T/ceil.out" 2>/dev/null && [ -e "$T/nodev.up" ] && break; sleep 0.05; done
    expect 0 "info --json with three tenants" -- "$GS" info --json
    ids=$(python3 -c 'import json, sys
t = {x["name"]: x["id"] for x in json.load(open(sys.argv[1]))["tenants"]}
print(t.get("infohold", "?"), t.get("ceil", "?"), t.get("sh", "?"))' "$T/out")
    expect 0 "info table with tenants" -- "$GS" info
    set -- $ids
    u1=$(awk -v id="$1" '$1 == id { print $4 " " $5 }' "$T/out")
    u2=$(awk -v id="$2" '$1 == id { print $4 " " $5 }' "$T/out")
    row() { printf '  %-28s %-16s %-4s %-12s %-12s %s\n' "$@"; }
    want=$(row ID NAME GPU "MEM USED" "MEM LIMIT" CEILING)
    if grep -qxF "tenants (details: gpuslice tenants):" "$T/out" && grep -qxF -- "$want" "$T/out"; then ok "the tenants' header"; else bad "tenants' header"; cat "$T/out"; fi
    for r in "$1|infohold|0|$u1|1 GiB|none" "$2|ceil|0|$u2|2 GiB|30%" "$3|sh|-|-|-|-"; do
        want=$(IFS='|'; set -- $r; row "$@")
        if grep -qxF -- "$want" "$T/out"; then ok "row: $r"; else bad "no row '$want'"; cat "$T/out"; fi
    done
    case "$u1" in [0-9]*" MiB") ok "MEM USED in MiB: $u1" ;; *) bad "MEM USED '$u1'" ;; esac
    touch "$T/release2"
    wait $CPID $NPID
    release ;;
mps)
    # GPUSLICE_MPS_TIMEOUT: decimal seconds above 0, at most 600; 0 would time out every call.
    for v in abc 0 0.0 -1 601 1e1 " 5" inf 0x10 .; do
        GPUSLICE_MPS_TIMEOUT=$v expect 2 "GPUSLICE_MPS_TIMEOUT='$v' is refused" -- "$GS" mps status
        stderr_has "GPUSLICE_MPS_TIMEOUT: \"$v\" is not a number of seconds above 0 and at most 600"
    done
    for v in 600 0.5 3 ""; do
        GPUSLICE_MPS_TIMEOUT=$v PATH="$T/none:/usr/bin:/bin" expect 1 "GPUSLICE_MPS_TIMEOUT='$v' is accepted" -- "$GS" mps status
        stderr_has "nvidia-cuda-mps-control is not in PATH"
    done
    # gpuslice mps against a stand-in for nvidia-cuda-mps-control (no GPU, no MPS in CI).
    export GPUSLICE_SIM_DEVICES=2 XDG_RUNTIME_DIR="$T/xdg" GPUSLICE_MPS_TIMEOUT=3
    export CUDA_MPS_PIPE_DIRECTORY="$T/default-mps"
    mkdir -p "$T/bin" "$T/xdg" "$T/nobin"; chmod 700 "$T/xdg"
    U0=GPU-5ac1ce00-0000-4000-8000-000000000000
    U1=GPU-5ac1ce00-0000-4000-8000-000000000001
    D="$T/xdg/gpuslice-mps/$U0"
    P="$D/pipe"
    # Usage first: refused (2) before MPS is looked for.
    expect 2 "mps without a subcommand" -- "$GS" mps
    expect 2 "mps with an unknown subcommand" -- "$GS" mps restart; stderr_has "restart"
    expect 2 "mps start --force" -- "$GS" mps start --force; stderr_has "stop only"
    expect 2 "mps --device banana" -- "$GS" mps start --device banana; stderr_has '"banana" is not a GPU'
    expect 2 "mps --bogus" -- "$GS" mps status --bogus
    expect 2 "mps stop extra" -- "$GS" mps stop extra
    expect 0 "mps --help" -- "$GS" mps --help
    expect 2 "mps -q without a subcommand" -- "$GS" mps -q
    # No nvidia-cuda-mps-control in PATH: exit 1, named, and where it comes from.
    PATH="$T/nobin:/usr/bin:/bin" expect 1 "mps start without nvidia-cuda-mps-control" -- "$GS" mps start
    stderr_has "nvidia-cuda-mps-control is not in PATH"; stderr_has "ships with the NVIDIA driver"
    cp "$SRC/tests/integration/fake-mps-control" "$T/bin/nvidia-cuda-mps-control"
    export PATH="$T/bin:$PATH"
    # start: private directories, the daemon for GPU 0's UUID, default percentage 100.
    expect 0 "mps start" -- "$GS" mps start
    if grep -q "$U0: MPS control daemon started" "$T/out" && grep -q "CUDA_MPS_PIPE_DIRECTORY=$P" "$T/out"; then
        ok "start names the GPU and the pipe directory"; else bad "start output"; cat "$T/out"; fi
    for d in "$T/xdg/gpuslice-mps" "$D" "$P" "$D/log"; do
        m=$(stat -c %a "$d" 2>/dev/null)
        if [ "$m" = 700 ]; then ok "${d#$T/} is mode 0700"; else bad "${d#$T/} mode ${m:-missing}, want 700"; fi
    done
    if [ "$(wc -l <"$P/fake.starts")" = 1 ] && grep -q "CUDA_VISIBLE_DEVICES=$U0 CUDA_MPS_LOG_DIRECTORY=$D/log" "$P/fake.starts"; then
        ok "-d ran once with CUDA_VISIBLE_DEVICES=UUID and the log directory"; else bad "daemon starts"; cat "$P/fake.starts"; fi
    if [ "$(cat "$P/fake.percentage" 2>/dev/null)" = 100 ]; then ok "default active thread percentage set to 100"; else bad "percentage: $(cat "$P/fake.percentage" 2>/dev/null)"; fi
    rm -f "$P/fake.percentage"
    expect 0 "a second mps start" -- "$GS" mps start --json
    json_ok "the second start reuses the daemon" 'assert d["started"] is False and d["uuid"] == "'"$U0"'", d'
    if [ "$(wc -l <"$P/fake.starts")" = 1 ]; then ok "no second daemon"; else bad "the daemon was started again"; fi
    LD_PRELOAD="$LIB" expect 0 "mps start --device 1 under the interposer" -- "$GS" mps start --device 1
    if grep -q "CUDA_VISIBLE_DEVICES=$U1 .*LD_PRELOAD=\$" "$T/xdg/gpuslice-mps/$U1/pipe/fake.starts"; then
        ok "--device 1 is GPU 1's UUID; the daemon runs without libgpuslice"; else bad "device 1 start"; cat "$T/xdg/gpuslice-mps/$U1/pipe/fake.starts"; fi
    # status: servers and their clients, as a table and as JSON.
    echo 4242 >"$P/fake.servers"; echo "100 101" >"$P/fake.clients.4242"
    expect 0 "mps status" -- "$GS" mps status
    if grep -q "$U0  running" "$T/out" && grep -q "server 4242: clients 100 101" "$T/out" && grep -q "$U1  running" "$T/out"; then
        ok "status lists both daemons, the server and its clients"; else bad "status table"; cat "$T/out"; fi
    expect 0 "mps status --json" -- "$GS" mps status --json
    json_ok "status --json" '
g = {x["uuid"]: x for x in d["gpus"]}
assert sorted(g) == ["'"$U0"'", "'"$U1"'"], d
a = g["'"$U0"'"]
assert a["running"] is True and a["pipe_dir"] == "'"$P"'", a
assert a["servers"] == [{"pid": 4242, "clients": [100, 101]}], a
assert g["'"$U1"'"]["servers"] == [], g'
    expect 0 "mps status -q (after the subcommand)" -- "$GS" mps status -q --json
    expect 0 "mps -q status --quiet" -- "$GS" mps -q status --quiet
    expect 0 "mps status --device UUID" -- "$GS" mps status --json --device "$U1"
    json_ok "status --device shows that GPU only" 'assert [x["uuid"] for x in d["gpus"]] == ["'"$U1"'"], d'
    # info reports the daemon gpuslice started for each GPU.
    expect 0 "info --json with gpuslice MPS daemons" -- "$GS" info --json
    json_ok "info: running, in our pipe directory" '
assert [x["mps"] for x in d["gpus"]] == ["running", "running"], d["gpus"]
assert d["gpus"][0]["mps_pipe_dir"] == "'"$P"'", d["gpus"][0]'
    # A daemon that does not answer: never a hang.
    touch "$P/fake.hang"
    start=$(date +%s)
    expect 1 "mps status with a daemon that does not answer" -- "$GS" mps status --device 0
    stderr_has "did not answer within 3 s"
    if [ $(($(date +%s) - start)) -lt 10 ]; then ok "gave up after the timeout"; else bad "took $(($(date +%s) - start)) s"; fi
    rm -f "$P/fake.hang"
    # A daemon told to quit that still serves its clients answers nothing and cannot be
    # started anew (seen on an H200 after stop --force): said so.
    touch "$P/fake.quitting"
    expect 1 "mps start while the daemon is stopping" -- "$GS" mps start
    stderr_has "is running but has accepted no new client for 3 s: it is stopping"
    rm -f "$P/fake.quitting"
    # stop: refused with clients (named), then --force.
    expect 1 "mps stop with clients" -- "$GS" mps stop
    stderr_has "2 clients connected (PIDs 100 101)"; stderr_has "--force"
    if [ ! -e "$P/fake.quits" ] && [ -p "$P/control" ]; then ok "the daemon was left alone"; else bad "quit was sent"; fi
    expect 0 "mps stop --force" -- "$GS" mps stop --force --json
    json_ok "stop --force stopped it" 'assert d["stopped"] is True and d["clients"] == [100, 101], d'
    expect 0 "mps status after stop" -- "$GS" mps status --json --device 0
    json_ok "status: not running" 'assert d["gpus"][0]["running"] is False and d["gpus"][0]["servers"] == [], d'
    expect 0 "info after stop" -- "$GS" info --json
    json_ok "info: GPU 0 not running, GPU 1 running" 'assert [x["mps"] for x in d["gpus"]] == ["not running", "running"], d["gpus"]'
    rm -f "$T/xdg/gpuslice-mps/$U1/pipe/fake.servers"
    expect 0 "mps stop without clients" -- "$GS" mps stop -d 1
    if grep -q "$U1: MPS control daemon stopped" "$T/out"; then ok "stop reports it"; else bad "stop output"; cat "$T/out"; fi
    expect 0 "mps stop when nothing runs" -- "$GS" mps stop
    # The real daemon leaves its control pipe behind when it stops (seen on an H200).
    mkfifo "$P/control"
    expect 0 "info with a stale control pipe in our own directory" -- "$GS" info --json
    json_ok "info: our own stale pipe is not running" 'assert d["gpus"][0]["mps"] == "not running", d["gpus"]'
    # start again after a stop: a new daemon.
    expect 0 "mps start after stop" -- "$GS" mps start
    if [ "$(wc -l <"$P/fake.starts")" = 2 ]; then ok "started anew"; else bad "not restarted"; cat "$P/fake.starts"; fi
    "$GS" mps stop --force >/dev/null 2>&1
    # Directories that others may use, or that are another's, are refused.
    chmod 777 "$P"
    expect 1 "a pipe directory of mode 0777" -- "$GS" mps start
    stderr_has "$P has mode 0777"
    chmod 700 "$P"; chmod 755 "$T/xdg/gpuslice-mps"
    expect 1 "a base directory of mode 0755" -- "$GS" mps status; stderr_has "refusing"
    chmod 700 "$T/xdg/gpuslice-mps"
    rm -rf "$P"; ln -s "$T/bin" "$P"
    expect 1 "a pipe directory that is a link" -- "$GS" mps start; stderr_has "not a directory"
    rm -f "$P"
    if [ "$(id -u)" = 0 ]; then
        mkdir -m 700 "$P"; chown 65534 "$P"
        expect 1 "a pipe directory of another owner" -- "$GS" mps start; stderr_has "belongs to uid 65534"
        rm -rf "$P"
    else
        echo "skip: another owner's directory needs root to make"
    fi
    # WSL is refused (a bind-mounted osrelease where a mount namespace can be made).
    echo "5.15.153.1-microsoft-standard-WSL2" >"$T/osrelease"
    if unshare -m sh -c "mount --bind '$T/osrelease' /proc/sys/kernel/osrelease" 2>/dev/null; then
        expect 1 "mps under WSL" -- unshare -m sh -c "mount --bind '$T/osrelease' /proc/sys/kernel/osrelease && exec '$GS' mps start"
        stderr_has "not supported under WSL"
    else
        echo "skip: cannot make a mount namespace to pretend to be WSL"
    fi ;;
mps_stray)
    # A stray MPS control daemon (the stand-in) of another run, on the same GPU's UUID, with a
    # server and a client, must change nothing the mps and gpu_share cases see. Run as another
    # user (as root: nobody), the mps case sees a daemon whose environment it cannot read.
    U0=GPU-5ac1ce00-0000-4000-8000-000000000000
    O="$T/other-run/xdg/gpuslice-mps/$U0"
    mkdir -p "$O/pipe" "$O/log" "$T/bin"; chmod -R 700 "$T/other-run"
    cp "$SRC/tests/integration/fake-mps-control" "$T/bin/nvidia-cuda-mps-control"
    CUDA_MPS_PIPE_DIRECTORY="$O/pipe" CUDA_MPS_LOG_DIRECTORY="$O/log" "$T/bin/nvidia-cuda-mps-control" -d
    echo 4343 >"$O/pipe/fake.servers"; echo 4444 >"$O/pipe/fake.clients.4343"
    stray=$(cat "$O/pipe/fake.pid" 2>/dev/null)
    if [ -n "$stray" ] && kill -0 "$stray" 2>/dev/null; then ok "a stray daemon runs (PID $stray)"; else bad "no stray daemon"; fi
    for c in mps gpu_share; do
        if "$0" "$B" "$c" >"$T/$c.log" 2>&1; then ok "case $c passes beside the stray daemon"; else
            bad "case $c fails beside the stray daemon"; grep -v "^ok" "$T/$c.log"; fi
    done
    if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
        chmod 755 "$T"
        if setpriv --reuid=65534 --regid=65534 --clear-groups "$0" "$B" mps >"$T/mps-other.log" 2>&1; then
            ok "case mps passes as another user beside root's stray daemon"
        else bad "case mps fails as another user beside root's stray daemon"; grep -v "^ok" "$T/mps-other.log"; fi
        chmod 700 "$T"
    else
        echo "note: not root (or no setpriv): the case is not run as another user"
    fi
    if kill -0 "$stray" 2>/dev/null && [ ! -e "$O/pipe/fake.quits" ] && [ -p "$O/pipe/control" ]; then
        ok "the stray daemon was left alone"; else bad "the stray daemon was stopped or signalled"; fi
    rm -f "$O/pipe/control" # ends the stand-in's loop
    for i in $(seq 50); do kill -0 "$stray" 2>/dev/null || break; sleep 0.1; done ;;
gpu_share)
    # run/exec --gpu-share against the stand-in nvidia-cuda-mps-control and the simulated GPU.
    export GPUSLICE_SIM_DEVICES=2 XDG_RUNTIME_DIR="$T/xdg" GPUSLICE_MPS_TIMEOUT=3
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_VISIBLE_DEVICES
    mkdir -p "$T/bin" "$T/xdg" "$T/nobin"; chmod 700 "$T/xdg"
    U0=GPU-5ac1ce00-0000-4000-8000-000000000000
    P="$T/xdg/gpuslice-mps/$U0/pipe"
    cp "$SRC/tests/integration/fake-mps-control" "$T/bin/nvidia-cuda-mps-control"
    for v in 0 101 abc 50%; do
        PATH="$T/bin:$PATH" expect 2 "--gpu-share $v refused" -- "$GS" run --gpu-share "$v" -- touch "$T/started"
        stderr_has "--gpu-share: \"$v\""
    done
    GPUSLICE_MPS_TIMEOUT=0 PATH="$T/bin:$PATH" expect 2 "GPUSLICE_MPS_TIMEOUT=0 refused before anything starts" -- "$GS" run --gpu-share 10 -- touch "$T/started"
    stderr_has 'GPUSLICE_MPS_TIMEOUT: "0" is not a number of seconds above 0 and at most 600'
    PATH="$T/bin:$PATH" expect 2 "--mps-priority high refused" -- "$GS" exec --gpu-share 10 --mps-priority high -- touch "$T/started"
    stderr_has "use normal or below-normal"
    PATH="$T/bin:$PATH" expect 2 "--mps-priority without --gpu-share" -- "$GS" run --mps-priority normal -- touch "$T/started"
    stderr_has "needs --gpu-share"
    PATH="$T/bin:$PATH" expect 2 "--gpu-share on two GPUs" -- "$GS" run --gpu-share 10 -d 0,1 -- touch "$T/started"
    stderr_has "one control daemon"
    if [ ! -e "$T/started" ] && [ ! -e "$T/xdg/gpuslice-mps" ]; then ok "refused usage starts nothing"; else bad "something was started"; fi
    PATH="$T/nobin:/usr/bin:/bin" expect 1 "--gpu-share without nvidia-cuda-mps-control" -- "$GS" run --gpu-share 10 -- touch "$T/started"
    stderr_has "nvidia-cuda-mps-control is not in PATH"
    if [ ! -e "$T/started" ]; then ok "the program was not started"; else bad "the program ran"; fi
    export PATH="$T/bin:$PATH"
    expect 0 "run --gpu-share 25 --mps-priority below-normal" -- "$GS" run --gpu-share 25 --mps-priority below-normal -- sh -c 'echo $CUDA_MPS_ACTIVE_THREAD_PERCENTAGE $CUDA_MPS_CLIENT_PRIORITY $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY'
    if [ "$(cat "$T/out")" = "25 1 $P ${P%/pipe}/log" ]; then ok "the client settings reach the program"; else bad "client env: $(cat "$T/out")"; fi
    stderr_has "started the MPS control daemon for $U0"; stderr_has "25% of the GPU's threads, below-normal priority"
    if [ "$(wc -l <"$P/fake.starts")" = 1 ] && [ -p "$P/control" ]; then ok "one daemon started, left running"; else bad "daemon starts"; fi
    expect 0 "exec --gpu-share 60 reuses the daemon" -- "$GS" exec --gpu-share 60 -- sh -c 'echo $CUDA_MPS_ACTIVE_THREAD_PERCENTAGE $CUDA_MPS_CLIENT_PRIORITY'
    if [ "$(cat "$T/out")" = "60 0" ]; then ok "normal priority by default"; else bad "client env: $(cat "$T/out")"; fi
    stderr_has "reusing the MPS control daemon"
    if [ "$(wc -l <"$P/fake.starts")" = 1 ]; then ok "no second daemon"; else bad "the daemon was started again"; fi
    expect 0 "-q silences the notes" -- "$GS" run -q --gpu-share 5 --mps-priority normal -- sh -c 'echo $CUDA_MPS_CLIENT_PRIORITY'
    if [ ! -s "$T/err" ]; then ok "nothing on stderr"; else bad "stderr with -q"; cat "$T/err"; fi
    if [ "$(cat "$T/out")" = 0 ]; then ok "--mps-priority normal: client priority 0"; else bad "--mps-priority normal gave $(cat "$T/out")"; fi
    # A failing probe with a daemon that was already running: it stays.
    GPUSLICE_REAL_LIBCUDA="$T/nonexistent.so" expect 1 "probe failure" -- "$GS" run --gpu-share 25 -d "$U0" -- touch "$T/started"
    stderr_has "cannot connect through MPS (pipe dir $P)"; stderr_has "nonexistent.so"
    if [ ! -e "$T/started" ] && [ -p "$P/control" ] && [ ! -e "$P/fake.quits" ]; then ok "not started; the reused daemon left running"; else bad "after probe failure"; fi
    "$GS" mps stop >/dev/null 2>&1
    # A failing probe with a daemon this command started: it is stopped again.
    GPUSLICE_REAL_LIBCUDA="$T/nonexistent.so" expect 1 "probe failure, daemon started by it" -- "$GS" run --gpu-share 25 -d "$U0" -- touch "$T/started"
    if [ ! -e "$T/started" ] && [ ! -p "$P/control" ] && [ "$(wc -l <"$P/fake.starts")" = 2 ] && [ "$(wc -l <"$P/fake.quits")" = 2 ]; then
        ok "not started; the daemon it started was stopped"; else bad "after probe failure"; cat "$T/err"; fi
    stderr_has "stopped the MPS control daemon" ;;
reserve)
    # gpuslice reserve and run --filled on a 16 GiB simulated GPU (64 MiB a context, none of it
    # hidden from NVML's per-process figures: the arithmetic below is exact).
    export GPUSLICE_SIM_CONTEXT_HIDDEN=0
    MP="$B/tests/mem_probe"
    used() { "$GS" info --json 2>/dev/null | python3 -c 'import json, sys; print(json.load(sys.stdin)["gpus"][0]["memory_used_bytes"])'; }
    # near WHAT BYTES SLACK: the device's use is BYTES within SLACK, within 3 s.
    near() {
        for i in $(seq 60); do
            u=$(used); if [ -n "$u" ] && [ $((u > $2 ? u - $2 : $2 - u)) -le "$3" ]; then break; fi; sleep 0.05
        done
        if [ -n "$u" ] && [ $((u > $2 ? u - $2 : $2 - u)) -le "$3" ]; then ok "$1: $u bytes in use"; else bad "$1: ${u:-?} bytes in use, want $2 within $3"; fi
    }
    M=1048576
    expect 2 "reserve without a ratio" -- "$GS" reserve; stderr_has "no RATIO"
    for r in 0 1.5 -0.5 -.5 abc 0.5x "" nan inf 0.5.1 0..5 . 1.01 5e-1 " 0.5"; do
        expect 2 "reserve '$r'" -- "$GS" reserve "$r"
        stderr_has "^gpuslice: reserve: \"$r\" is not a ratio (use a number in (0, 1\], e.g. 0.9)$"
    done
    expect 2 "reserve with two ratios" -- "$GS" reserve 0.5 0.6
    stderr_has "^gpuslice: reserve: one RATIO only (usage: gpuslice reserve \[OPTIONS\] RATIO)$"
    expect 2 "reserve --device banana" -- "$GS" reserve -d banana 0.5; stderr_has "--device"
    expect 2 "reserve --bogus" -- "$GS" reserve --bogus 0.5
    expect 0 "reserve --help" -- "$GS" reserve --help
    LD_LIBRARY_PATH="$T/empty" expect 1 "reserve without a driver" -- "$GS" reserve 0.5; stderr_has "no NVIDIA driver found"
    for r in 0 1.01 abc 0.5.1; do
        expect 2 "run --filled $r" -- "$GS" run --filled "$r" -- touch "$T/started"
        stderr_has "^gpuslice: --filled: \"$r\" is not a ratio (use a number in (0, 1\], e.g. 0.9)$"
    done
    expect 2 "--filled with --gpu-share" -- "$GS" run -f 0.5 --gpu-share 50 -- touch "$T/started"; stderr_has "cannot be used with --gpu-share"
    if [ ! -e "$T/started" ]; then ok "refused usage starts nothing"; else bad "started"; fi
    LD_LIBRARY_PATH="$T/empty" expect 1 "run --filled without a driver" -- "$GS" run --filled 0.5 -- touch "$T/started"
    stderr_has "--filled: no NVIDIA driver found"
    if [ ! -e "$T/started" ]; then ok "the program did not start without its reservation"; else bad "started without the reservation"; fi
    # Alone: fills to the ratio, counting what is in use; gives it back at SIGTERM and SIGINT.
    "$MP" alloc:1024 mark:"$T/other" wait:"$T/other.end" >/dev/null 2>&1 & OTHER=$!
    for i in $(seq 100); do [ -e "$T/other" ] && break; sleep 0.05; done
    for sig in TERM HUP INT; do
        # (-q under SIGTERM: nothing on stderr.)
        q=; [ $sig = TERM ] && q=-q
        "$GS" reserve $q --json 0.25 >"$T/res.out" 2>"$T/res.err" & RES=$!
        for i in $(seq 100); do [ -s "$T/res.out" ] && break; sleep 0.05; done
        near "reserve 0.25 beside a process holding 1 GiB" $((4096 * M)) $((66 * M))
        python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))["gpus"][0]; assert d["target_bytes"] == 4 << 30 and d["used_bytes"] == 4 << 30 and d["reserved_bytes"] == (4 << 30) - (1 << 30) - (128 << 20), d' "$T/res.out" 2>"$T/py" && ok "reserve --json: target, use and what it holds" || { bad "reserve --json"; cat "$T/res.out" "$T/py"; }
        kill -$sig $RES; wait $RES; rc=$?
        if [ $rc = 0 ]; then ok "reserve ends with 0 on SIG$sig"; else bad "reserve exit $rc on SIG$sig"; cat "$T/res.err"; fi
        near "after SIG$sig only the other process remains" $((1088 * M)) $((2 * M))
        if [ $sig = TERM ]; then
            [ -s "$T/res.err" ] && { bad "reserve -q wrote on stderr"; cat "$T/res.err"; } || ok "reserve -q: nothing on stderr"
        fi
    done
    grep -q "^gpuslice: reserve: all memory given back$" "$T/res.err" && ok "reserve says it gave everything back" || { bad "reserve's last note"; cat "$T/res.err"; }
    grep -q "holding 2.88 GiB; the GPU is 25.0% full" "$T/res.err" && ok "reserve says what it holds" || { bad "reserve's note"; cat "$T/res.err"; }
    # Beside 4 GiB more, the GPU is fuller than the target: nothing held, and said.
    "$MP" alloc:4096 mark:"$T/other2" wait:"$T/other.end" >/dev/null 2>&1 & OTHER2=$!
    for i in $(seq 100); do [ -e "$T/other2" ] && break; sleep 0.05; done
    "$GS" reserve --json 0.25 >"$T/res.out" 2>"$T/res.err" & RES=$!
    for i in $(seq 100); do [ -s "$T/res.out" ] && break; sleep 0.05; done
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))["gpus"][0]; assert d["target_bytes"] == 4 << 30 and d["reserved_bytes"] == 0 and d["used_bytes"] == (5 << 30) + (192 << 20), d' "$T/res.out" 2>"$T/py" && ok "reserve 0.25 beside 5 GiB in use: nothing held" || { bad "reserve above the target"; cat "$T/res.out" "$T/py"; }
    near "the GPU holds only the others' 5 GiB and the three contexts" $((5312 * M)) 0
    kill -TERM $RES; wait $RES
    grep -q "^gpuslice: reserve: GPU 0 (GPU-5ac1ce00-0000-4000-8000-000000000000) is already 32.4% full, above the target: nothing held$" "$T/res.err" && ok "and says the GPU is already fuller" || { bad "the note of a GPU above the target"; cat "$T/res.err"; }
    touch "$T/other.end"; wait $OTHER $OTHER2
    # Around a program: the device stays at half; the program's allocations are served from it.
    "$GS" run --filled 0.5 -- "$MP" used nvmlused mark:"$T/s0" wait:"$T/g0" alloc:3072 mark:"$T/s1" wait:"$T/g1" \
        free alloc:32768 mark:"$T/s2" wait:"$T/g2" alloc:12288 mark:"$T/s3" wait:"$T/g3" >"$T/prog.out" 2>"$T/prog.err" & PROG=$!
    step() { for i in $(seq 200); do [ -e "$T/$1" ] && return 0; sleep 0.05; done; bad "the program did not reach $1"; cat "$T/prog.out" "$T/prog.err"; return 1; }
    step s0 && near "--filled 0.5: the GPU is half full" $((8192 * M)) $((66 * M))
    pu=$(sed -n 's/^used //p' "$T/prog.out" | head -n 1)
    if [ -n "$pu" ] && [ "$pu" -lt $((256 * M)) ]; then ok "the program sees the reservation as free (it sees $pu bytes in use)"; else bad "the program's view: ${pu:-?} bytes in use"; cat "$T/prog.out"; fi
    # NVML's view alike, with no limit: what the reservation holds is not in its used.
    nu=$(sed -n 's/^nvmlused //p' "$T/prog.out" | head -n 1)
    nf=$(sed -n 's/^nvmlfree //p' "$T/prog.out" | head -n 1)
    if [ -n "$nu" ] && [ "$nu" -lt $((256 * M)) ] && [ -n "$nf" ] && [ "$nf" -gt $((16128 * M)) ]; then ok "NVML in the program sees the reservation as free ($nu bytes in use, $nf free)"; else bad "NVML in the program: ${nu:-?} bytes in use, ${nf:-?} free"; cat "$T/prog.out"; fi
    touch "$T/g0"; step s1 && near "the program holds 3 GiB: still half full" $((8192 * M)) $((130 * M))
    # Another process gets only what is left: 8 GiB less its context.
    expect 0 "a second process" -- "$MP" alloc:8192 alloc:7936
    if grep -q "alloc 8192 CUDA_ERROR_OUT_OF_MEMORY" "$T/out" && grep -q "alloc 7936 ok" "$T/out"; then ok "the second process gets what is left, not the reservation"; else bad "second process"; cat "$T/out"; fi
    touch "$T/g1"; step s2
    # (At once: a reservation that gave itself up would take 0.5 s to come back.)
    u=$(used); if [ "$u" -ge $((5000 * M)) ]; then ok "the reservation did not give itself up for a 32 GiB allocation ($u bytes in use)"; else bad "the reservation shrank for an impossible allocation: $u"; fi
    if grep -q "alloc 32768 CUDA_ERROR_OUT_OF_MEMORY" "$T/prog.out"; then ok "an allocation larger than the GPU fails as before"; else bad "32 GiB"; cat "$T/prog.out"; fi
    near "the program freed its 3 GiB: half full again" $((8192 * M)) $((66 * M))
    touch "$T/g2"; step s3
    if grep -q "alloc 12288 ok" "$T/prog.out" && grep -q "alloc 3072 ok" "$T/prog.out"; then ok "the program's 3 GiB and 12 GiB allocations succeeded"; else bad "the program's allocations"; cat "$T/prog.out" "$T/prog.err"; fi
    near "the program holds 12 GiB: the reservation gave it back" $((12288 * M + 64 * M)) $((66 * M))
    touch "$T/g3"; wait $PROG; rc=$?
    if [ $rc = 0 ]; then ok "run --filled returns the program's status"; else bad "run --filled exit $rc"; cat "$T/prog.err"; fi
    near "after the program, nothing is held" 0 0
    # A program of the tenant ends holding 12 GiB, more than is free, which the driver frees a
    # while later (0.3 s here): the reservation waits for it instead of taking it as others'
    # memory, so the next program of the tenant finds the GPU half full again.
    GPUSLICE_SIM_EXIT_FREE_MS=300 "$GS" run --filled 0.5 -- sh -c "'$MP' alloc:12288 sleep:700 exit && '$MP' mark:'$T/e1' wait:'$T/e2'" >"$T/prog.out" 2>"$T/prog.err" & PROG=$!
    step e1 && near "a program ended holding 12 GiB: the next one finds the GPU half full" $((8192 * M)) $((66 * M))
    touch "$T/e2"; wait $PROG
    if ! grep -q "no more free memory" "$T/prog.err"; then ok "no shortfall reported for memory on its way back"; else bad "a shortfall was reported"; cat "$T/prog.err"; fi
    # A stream-ordered allocation larger than what is free is served from the reservation too.
    expect 0 "run --filled 0.5 around a 10 GiB cuMemAllocAsync" -- "$GS" run -q --filled 0.5 -- "$MP" async:10240 used
    if grep -q "async 10240 ok" "$T/out"; then ok "the pool allocation got the reservation's memory"; else bad "pool allocation"; cat "$T/out" "$T/err"; fi
    grep -q "filling every GPU" "$T/prog.err" && ok "run --filled says what it does" || { bad "note"; cat "$T/prog.err"; }
    # gpuslice itself under the interposer (a run inside another tenant): the reservation stays
    # out of the tenant it serves.
    LD_PRELOAD="$LIB" "$GS" run -q --name inner --filled 0.5 -- "$MP" alloc:1024 mark:"$T/n0" wait:"$T/n1" >"$T/n.out" 2>"$T/n.err" & NP=$!
    step n0 && near "--filled under the interposer: still half full" $((8192 * M)) $((66 * M))
    expect 0 "tenants beside it" -- "$GS" tenants --json --interval 0
    json_ok "the reservation is not a process of the tenant" 'assert [len(x["pids"]) for x in d["tenants"] if x["name"] == "inner"] == [1], d'
    touch "$T/n1"; wait $NP
    # The reservation goes when gpuslice run is killed.
    "$GS" run -q --filled 0.5 -- sleep 30.1237 & RUNP=$!
    for i in $(seq 100); do [ "$(used)" -ge $((8000 * M)) ] 2>/dev/null && break; sleep 0.05; done
    kill -9 $RUNP; wait $RUNP 2>/dev/null
    near "gpuslice run killed: its reservation is given back" 0 $((66 * M))
    pkill -f "sleep 30.1237" 2>/dev/null
    # The reserver's turns, made at once by a process of the tenant (reserve_probe): it shrinks
    # for the tenant's growth at the second turn in a row that sees it, never at the first (an
    # allocation is charged before the driver is asked, and uncharged at once when refused),
    # and takes the memory again at the turn after the growth is gone.
    RP="$B/tests/reserve_probe"
    expect 0 "--filled 0.5: the tenant's use grows by 1 GiB for two turns, three times" -- "$GS" run -q --filled 0.5 -- "$RP" steer 1024 3
    python3 - "$T/out" <<'PY' && ok "the reservation shrank by the 1 GiB at the second turn only, and took it again once it was gone" || { bad "the reservation's turns"; cat "$T/out" "$T/err"; }
import sys
G, band = 1 << 30, 64 << 20
t = [[float(x) for x in l.split()[1:]] for l in open(sys.argv[1]) if l.startswith("trial ")]
# Over 10 ms between the turn before the growth and the first that saw it: another turn may have
# come between (on a loaded machine); such a trial says nothing of the first turn. The probe
# tries until three say something; one is enough to judge by (a shrink at the first turn shows
# in every one).
c = [x for x in t if x[4] <= 10]
assert len(c) >= 1, ("no trial without a turn between", t)
assert all(h1 == h0 for h0, h1, h2, h3, ms in c), ("shrank at the first turn", t)
assert all(h0 - G - band <= h2 <= h0 - G + band for h0, h1, h2, h3, ms in t), ("not by 1 GiB at the second", t)
assert all(abs(h3 - h0) <= band for h0, h1, h2, h3, ms in t), ("not taken again", t)
PY
    # An ask is met with what it asks and the dead band (64 MiB) more, and the reservation then
    # takes nothing for 0.5 s (so that the process that asked gets it first), even though the
    # tenant allocated nothing: then it holds what it held again. (It holds 256 MiB chunks, the
    # newest last: it asks for all but 7 GiB, a chunk's end, so that the band takes one more.)
    expect 0 "--filled 0.5: an ask for all but 7 GiB, nothing allocated" -- "$GS" run -q --filled 0.5 -- "$RP" holdoff =7168
    python3 - "$T/out" <<'PY' && ok "the ask and the band given at once, taken again 0.5 s later: $(cat "$T/out")" || { bad "the hold-off"; cat "$T/out" "$T/err"; }
import sys
G, band, chunk = 1 << 30, 64 << 20, 256 << 20
l = [x.split() for x in open(sys.argv[1]) if x.startswith("holdoff ")]
assert len(l) == 1, l
ask, h0, h1, back, asked = int(l[0][1]), int(l[0][2]), int(l[0][3]), int(l[0][4]), int(l[0][5])
assert ask == 1 and asked == h0 - 7 * G and asked >= 512 << 20, l
assert h1 == 7 * G - chunk, l
# (0.5 s from the give; the answer follows it at once, but a loaded machine may delay it.)
assert 250 <= back <= 3000, l
PY
    # Two GPUs (GPU-5ac1ce00-...-00000000000N: every UUID starts alike): each GPU's reservation
    # follows the tenant's use on that GPU, found by its whole UUID.
    export GPUSLICE_SIM_DEVICES=2 GPUSLICE_SIM_STATE="$T/sim2.state"
    U=GPU-5ac1ce00-0000-4000-8000-00000000000
    used_of() { "$GS" info --json 2>/dev/null | python3 -c 'import json, sys; print(json.load(sys.stdin)["gpus"][int(sys.argv[1])]["memory_used_bytes"])' "$1"; }
    MEM_PROBE_DEVICE=1 "$GS" run -q --filled 0.5 -- "$MP" alloc:3072 mark:"$T/d1" wait:"$T/d2" >"$T/prog.out" 2>"$T/prog.err" & PROG=$!
    # half_full: both GPUs' use is 8 GiB within 66 MiB (one reading of both), for 4 s at most.
    half_full() {
        local end=$(($(date +%s) + 4))
        while :; do
            set -- $("$GS" info --json 2>/dev/null | python3 -c 'import json, sys; print(*[g["memory_used_bytes"] for g in json.load(sys.stdin)["gpus"]])')
            a=${1:-0} b=${2:-0}
            [ $((a > 8192 * M ? a - 8192 * M : 8192 * M - a)) -le $((66 * M)) ] && [ $((b > 8192 * M ? b - 8192 * M : 8192 * M - b)) -le $((66 * M)) ] && return 0
            [ "$(date +%s)" -ge $end ] && return 1
            sleep 0.1
        done
    }
    if step d1; then
        if half_full; then ok "a program holding 3 GiB on GPU 1 only: both GPUs half full ($a and $b bytes in use)"
        else bad "a program holding 3 GiB on GPU 1 only: $a and $b bytes in use, want 8 GiB each"; cat "$T/prog.err"; fi
    fi
    touch "$T/d2"; wait $PROG
    # reserve -d picks from CUDA_VISIBLE_DEVICES and fills its pick only, whatever was visible.
    for cvd in 0,1 "$U"1,"$U"0; do
        pick=1; [ "$cvd" = 0,1 ] || pick=0
        CUDA_VISIBLE_DEVICES=$cvd "$GS" reserve -d $pick --json 0.25 >"$T/res.out" 2>"$T/res.err" & RES=$!
        for i in $(seq 100); do [ -s "$T/res.out" ] || ! kill -0 $RES 2>/dev/null && break; sleep 0.05; done
        python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); g = d["gpus"]; assert d["ratio"] == 0.25 and [(x["index"], x["uuid"], x["total_bytes"], x["target_bytes"]) for x in g] == [(0, sys.argv[2], 16 << 30, 4 << 30)], d' "$T/res.out" "${U}1" 2>"$T/py" &&
            ok "CUDA_VISIBLE_DEVICES=$cvd reserve -d $pick: GPU 1 alone" || { bad "CUDA_VISIBLE_DEVICES=$cvd reserve -d $pick"; cat "$T/res.out" "$T/res.err" "$T/py"; }
        if [ $pick = 1 ]; then
            a=$(used_of 0); b=$(used_of 1)
            if [ "$a" = 0 ] && [ $((b > 4096 * M ? b - 4096 * M : 4096 * M - b)) -le $((66 * M)) ]; then ok "GPU 0 untouched, GPU 1 a quarter full ($b)"; else bad "GPU 0 $a, GPU 1 $b bytes in use"; fi
        fi
        kill -INT $RES; wait $RES
    done
    # -d given twice: both GPUs, in the order given. A target of 0.3 is whole 2 MiB (0.3 x 16 GiB
    # is 4915.2 MiB: 4914), what is held of it less the reservation's own context.
    "$GS" reserve -d 1 -d 0 --json 0.3 >"$T/res.out" 2>"$T/res.err" & RES=$!
    for i in $(seq 100); do [ -s "$T/res.out" ] || ! kill -0 $RES 2>/dev/null && break; sleep 0.05; done
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); g = d["gpus"]; assert d["ratio"] == 0.3 and [(x["index"], x["uuid"], x["target_bytes"], x["reserved_bytes"], x["used_bytes"]) for x in g] == [(0, sys.argv[2] + "1", 4914 << 20, 4850 << 20, 4914 << 20), (1, sys.argv[2] + "0", 4914 << 20, 4850 << 20, 4914 << 20)], d' "$T/res.out" "$U" 2>"$T/py" &&
        ok "reserve -d 1 -d 0 0.3: GPU 1 then GPU 0, each to 4914 MiB" || { bad "reserve -d 1 -d 0"; cat "$T/res.out" "$T/res.err" "$T/py"; }
    kill -TERM $RES; wait $RES
    CUDA_VISIBLE_DEVICES=0 expect 2 "reserve -d 1 where only GPU 0 is visible" -- "$GS" reserve -d 1 0.5; stderr_has "--device"
    # No GPU visible: the driver's answer, said.
    CUDA_VISIBLE_DEVICES= expect 1 "reserve with no GPU visible" -- "$GS" reserve 0.5
    stderr_has "^gpuslice: reserve: the CUDA driver did not initialise: CUDA_ERROR_NO_DEVICE$"
    unset GPUSLICE_SIM_DEVICES; export GPUSLICE_SIM_STATE="$T/sim.state" ;;
sms)
    # SM partitions (GPUSLICE_SMS, run --sms/--sm-share) on the simulated GPU: 132 SMs in groups
    # of 8, of 2 ignoring co-scheduling; a spin_2000us kernel takes 2 ms on all of them.
    SP="$B/tests/sm_probe"
    # every_line FILE SMS MS: each probe line says SMS SMs and a kernel of at least MS ms.
    every_line() {
        python3 - "$@" <<'PY'
import sys
lines = [l.split() for l in open(sys.argv[1]) if l.startswith(("thread", "created"))]
want, ms = int(sys.argv[2]), float(sys.argv[3])
bad = [" ".join(l) for l in lines if int(l[l.index("sms") + 1]) != want or float(l[l.index("ms") + 1]) < ms]
sys.exit(1 if bad or not lines else 0)
PY
    }
    expect 0 "sm_probe without a partition" -- "$SP" 2
    every_line "$T/out" 132 2.0 && ok "the whole device: 132 SMs, 2 ms" || { bad "unpartitioned"; cat "$T/out"; }
    grep -qx "attribute sms 132 primary_active 0" "$T/out" && ok "MULTIPROCESSOR_COUNT unpartitioned: 132" || { bad "attribute"; cat "$T/out"; }
    expect 0 "run --sms 16, four threads" -- "$GS" run --sms 16 -- "$SP" 4
    every_line "$T/out" 16 16.4 && ok "every thread, its NULL stream, a stream and a graph on 16 SMs (16.5 ms)" || { bad "--sms 16"; cat "$T/out"; }
    grep -qx "attribute sms 16 primary_active 0" "$T/out" && ok "MULTIPROCESSOR_COUNT asked before any context: the partition's 16, and no context made by asking" || { bad "attribute under --sms 16"; cat "$T/out"; }
    stderr_has "SM partition 16 for"
    expect 0 "run --sms 16 where the runtime makes the primary context current itself" -- "$GS" run -q --sms 16 -- "$SP" internal 3
    every_line "$T/out" 16 16.4 && ok "a primary context made current behind the hooks is swapped for the partition" || { bad "internal path"; cat "$T/out"; }
    # ... where the first call after that makes a stream with a priority (as PyTorch does).
    expect 0 "run --sms 16, the runtime's primary current, then cuStreamCreateWithPriority" -- "$GS" run -q --sms 16 -- "$SP" priority 2
    every_line "$T/out" 16 16.4 && [ "$(grep -c "^thread [01] priority sms 16 " "$T/out")" = 2 ] && ok "a stream made with a priority first runs on the partition's 16 SMs" || { bad "cuStreamCreateWithPriority first"; cat "$T/out"; }
    expect 0 "run --sm-share 25" -- "$GS" run -q --sm-share 25 -- "$SP" 1
    every_line "$T/out" 34 7.7 && ok "25% of 132 SMs is 34 (the nearest multiple of 2)" || { bad "--sm-share 25"; cat "$T/out"; }
    grep -qx "attribute sms 34 primary_active 0" "$T/out" && ok "MULTIPROCESSOR_COUNT under --sm-share 25: 34" || { bad "attribute under --sm-share"; cat "$T/out"; }
    # A share below one group is raised to one: 1 % of a GPU of 16 SMs (0.16) is 2 SMs, not none.
    GPUSLICE_SIM_SMS=16 expect 0 "run --sm-share 1 on a GPU of 16 SMs" -- "$GS" run -q --sm-share 1 -- "$SP" 1
    every_line "$T/out" 2 15.9 && ok "1% of 16 SMs is one group of 2 SMs (16 ms)" || { bad "--sm-share 1 of 16 SMs"; cat "$T/out" "$T/err"; }
    expect 0 "GPUSLICE_SMS=4@128 (the last 4 SMs, fine groups)" -- env GPUSLICE_SMS=4@128 LD_PRELOAD="$LIB" "$SP" 1
    every_line "$T/out" 4 66 && grep -q "^attribute sms 4 " "$T/out" && ok "the last 4 SMs alone, and told 4" || { bad "4@128"; cat "$T/out"; }
    expect 0 "GPUSLICE_SMS=6@2 (fine groups)" -- env GPUSLICE_SMS=6@2 LD_PRELOAD="$LIB" "$SP" 1
    every_line "$T/out" 6 44 && grep -q "^attribute sms 6 " "$T/out" && ok "6 SMs from SM 2, and told 6" || { bad "6@2"; cat "$T/out"; }
    GPUSLICE_SIM_STATE="$T/two.state" GPUSLICE_SIM_DEVICES=2 expect 0 "GPUSLICE_SMS per device" -- env GPUSLICE_SMS=0:40,1:8 LD_PRELOAD="$LIB" "$SP" 1
    every_line "$T/out" 40 6.6 && grep -q "^attribute sms 40 " "$T/out" && ok "device 0's entry, and told 40" || { bad "0:40"; cat "$T/out"; }
    # A UUID key names the device whatever its index (the simulator's GPUs are GPU-5ac1ce00-…-N).
    GPUSLICE_SIM_STATE="$T/two.state" GPUSLICE_SIM_DEVICES=2 expect 0 "GPUSLICE_SMS by UUID" -- env GPUSLICE_SMS=GPU-5ac1ce00-0000-4000-8000-000000000000:24,1:8 LD_PRELOAD="$LIB" "$SP" 1
    every_line "$T/out" 24 6.6 && grep -q "^attribute sms 24 " "$T/out" && ok "device 0 by its UUID, and told 24" || { bad "UUID key"; cat "$T/out"; }
    # A reservation beside the partition: the partition is made at the first context, through
    # the hook that asks the reservation for memory when the driver has none.
    expect 0 "run --filled 1 --sms 16" -- "$GS" run -q --filled 1 --sms 16 -- "$SP" 1
    every_line "$T/out" 16 16.4 && grep -qx "attribute sms 16 primary_active 0" "$T/out" && ok "a full GPU's reservation gives way to the partition's context" || { bad "--filled with --sms"; cat "$T/out"; }
    expect 0 "a context the program makes itself" -- "$GS" run -q --sms 16 -- "$SP" create 1
    stderr_has "not on the SM partition"
    grep -q "^created null sms 132" "$T/out" && grep -q "^thread 0 null sms 16" "$T/out" && ok "only the primary context is partitioned, and that is said" || { bad "cuCtxCreate"; cat "$T/out"; }
    # Refused: never unpartitioned by mistake.
    expect 1 "--sms 13 (not a multiple of 2)" -- "$GS" run -q --sms 13 -- "$SP" 1
    stderr_has "a partition of 13 SMs from SM 0 cannot be made on GPU 0: it splits its 132 SMs into groups of 8 (of 2 ignoring co-scheduling)"
    expect 1 "--sms 13 behind the hooks" -- "$GS" run -q --sms 13 -- "$SP" internal 1
    stderr_has "the device's contexts are refused"
    expect 1 "--sms 132@8 (past the last SM)" -- "$GS" run -q --sms 132@8 -- "$SP" 1
    stderr_has "132 SMs from SM 8 were asked for, but GPU 0 has 132 SMs"
    GPUSLICE_SIM_GREEN=0 expect 1 "--sms 16 on a driver without green contexts" -- "$GS" run -q --sms 16 -- "$SP" 1
    stderr_has "GPU 0 cannot partition its SMs with green contexts"
    expect 1 "GPUSLICE_SMS=abc" -- env GPUSLICE_SMS=abc LD_PRELOAD="$LIB" "$SP" 1
    stderr_has "GPUSLICE_SMS: \"abc\" is not a partition"
    for v in 0 x 16@ @4 16@4096 101% 5000; do
        expect 2 "run --sms '$v'" -- "$GS" run --sms "$v" -- touch "$T/started"; stderr_has "--sms"
    done
    for v in 0 101 x 2.5; do
        expect 2 "run --sm-share '$v'" -- "$GS" run --sm-share "$v" -- touch "$T/started"; stderr_has "--sm-share"
    done
    expect 2 "--sms with --sm-share" -- "$GS" run --sms 16 --sm-share 20 -- touch "$T/started"; stderr_has "give one of them"
    if [ ! -e "$T/started" ]; then ok "refused usage starts nothing"; else bad "started"; fi ;;
procs)
    # gpuslice procs against the stand-in nvidia-cuda-mps-control and the simulated GPU (132 SMs:
    # 15 groups of 8 and 12 left over, 66 of 2, as the H200's driver splits them).
    export XDG_RUNTIME_DIR="$T/xdg" GPUSLICE_MPS_TIMEOUT=3
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_VISIBLE_DEVICES
    mkdir -p "$T/bin" "$T/xdg"; chmod 700 "$T/xdg"
    cp "$SRC/tests/integration/fake-mps-control" "$T/bin/nvidia-cuda-mps-control"
    export PATH="$T/bin:$PATH"
    SP="$B/tests/sm_probe"
    # Usage, all refused before anything starts.
    expect 2 "procs without --shares" -- "$GS" procs -- true ::: true; stderr_has "--shares is needed"
    for v in 0 -1 abc 1,,2 1, nan 1e3; do
        expect 2 "--shares '$v'" -- "$GS" procs --shares "$v" -- true; stderr_has "--shares"
    done
    expect 2 "two shares, three programs" -- "$GS" procs --shares 1,2 -- true ::: true ::: true; stderr_has "2 shares for 3 programs"
    expect 2 "an empty program" -- "$GS" procs --shares 1,2 -- true ::: ; stderr_has "program 2 is empty"
    expect 2 "no programs" -- "$GS" procs --shares 1; stderr_has "no programs given"
    expect 2 "--device banana" -- "$GS" procs --shares 1 -d banana -- true; stderr_has "--device"
    expect 2 "--timeout 0" -- "$GS" procs --shares 1 --timeout 0 -- true; stderr_has "--timeout"
    # --timeout's range, both ends: above 0 and at most 3600 (an hour) accepted, just past refused.
    for v in 0.001 3600; do expect 0 "--timeout $v is accepted" -- "$GS" procs --shares 1 --timeout "$v" --dry-run -- a; done
    for v in 3600.01 -1 abc; do
        expect 2 "--timeout $v" -- "$GS" procs --shares 1 --timeout "$v" --dry-run -- a
        stderr_has "^gpuslice: --timeout: \"$v\" is not a number of seconds (use one above 0, at most 3600)$"
    done
    for v in 4G 4G,,1G 0,1G 1K,1G abc,1G 0%,1G 101%,1G nan%,1G x%,1G 4G, +25%,1G ' 25%,1G' 1e1%,1G 0x19%,1G 12.%,1G .5%,1G 0.0000001%,1G; do
        expect 2 "--memory '$v' for two programs" -- "$GS" procs --shares 1,1 --memory "$v" --dry-run -- true ::: true; stderr_has "^gpuslice: --memory: "
    done
    stderr_has '"0.0000001%" is not a share of the GPU'"'"'s memory'
    expect 2 "--memory 8388608T,8388608T (2^63 each: the sum must not wrap)" -- "$GS" procs --shares 1,1 --memory 8388608T,8388608T --dry-run -- a ::: b
    stderr_has "the limits add up to 16777216.00 TiB, more than GPU 0's 16 GiB"
    expect 2 "--memory '4G,'" -- "$GS" procs --shares 1,1 --memory 4G, --dry-run -- a ::: b
    stderr_has '"4G," has an empty entry'
    expect 2 "--memory past the GPU's 16 GiB" -- "$GS" procs --shares 1,1 --memory 10G,40% --dry-run -- a ::: b
    stderr_has "the limits add up to 16793 MiB, more than GPU 0's 16 GiB"
    # The bound itself: limits that add up to exactly the GPU's memory fit; 1 MiB more does not.
    expect 0 "procs --dry-run --memory 50%,8G (the GPU's 16 GiB exactly)" -- "$GS" procs --shares 1,1 --memory 50%,8G --dry-run -- a ::: b
    json_ok "limits adding up to all of the GPU's memory" 'assert [l["memory_limit_bytes"] for l in d["lanes"]] == [8 << 30, 8 << 30], d'
    expect 2 "--memory 8G,8193M (1 MiB past the GPU's 16 GiB)" -- "$GS" procs --shares 1,1 --memory 8G,8193M --dry-run -- a ::: b
    stderr_has "the limits add up to 16385 MiB, more than GPU 0's 16 GiB"
    expect 0 "procs --dry-run --memory 100% (a share's top)" -- "$GS" procs --shares 1 --memory 100% --dry-run -- a
    json_ok "100% of the GPU's memory" 'assert [l["memory_limit_bytes"] for l in d["lanes"]] == [16 << 30], d'
    expect 0 "procs --help" -- "$GS" procs --help
    grep -q -- "--memory LIST" "$T/out" && ok "--help names --memory" || bad "--help without --memory"
    # The plan, from the driver's granularity.
    expect 0 "procs --dry-run 20,30,50" -- "$GS" procs --shares 20,30,50 --dry-run -- a ::: b ::: c
    json_ok "three lanes in groups of 8, the 12 left over to the last" '
assert d["device"]["sm_count"] == 132 and d["device"]["group_sms"] == 8 and d["device"]["uuid"] == "GPU-5ac1ce00-0000-4000-8000-000000000000", d
assert d["device"]["index"] == 0 and d["device"]["name"] == "gpuslice simulated GPU" and d["device"]["memory_bytes"] == 16 << 30, d
assert d["device"]["coscheduled"] is True and d["device"]["max_cluster"] == 8, d
assert [(l["index"], l["requested_share"], l["sm_count"], l["first_sm"]) for l in d["lanes"]] == [(0, 20, 24, 0), (1, 30, 40, 24), (2, 50, 68, 64)], d'
    # Issue 30: groups of 8 gave 16/24/32/60 for 10/20/30/40 and 24/24/24/24/36 for 5 x 20.
    expect 0 "procs --dry-run 10,20,30,40" -- "$GS" procs --shares 10,20,30,40 --dry-run -- a ::: b ::: c ::: d
    json_ok "four lanes in groups of 2, each within 2 points; clusters of 2" '
assert d["device"]["group_sms"] == 2 and d["device"]["coscheduled"] is False and d["device"]["max_cluster"] == 2, d
assert [(l["sm_count"], l["first_sm"]) for l in d["lanes"]] == [(14, 0), (26, 14), (40, 40), (52, 80)], d'
    expect 0 "procs --dry-run 20,20,20,20,20" -- "$GS" procs --shares 20,20,20,20,20 --dry-run -- a ::: b ::: c ::: d ::: e
    json_ok "five equal lanes: 28, 26, 26, 26, 26 SMs" 'assert d["device"]["group_sms"] == 2 and [l["sm_count"] for l in d["lanes"]] == [28, 26, 26, 26, 26], d'
    if [ ! -e "$XDG_RUNTIME_DIR/gpuslice-mps" ]; then ok "--dry-run starts nothing (no MPS directory)"; else bad "dry run made MPS state"; fi
    expect 0 "procs --dry-run --memory 1G,25%,1.5G" -- "$GS" procs --shares 20,30,50 --memory 1G,25%,1.5G --dry-run -- a ::: b ::: c
    json_ok "each lane's limit; a share of the GPU's 16 GiB in bytes" '
assert d["device"]["memory_bytes"] == 16 << 30, d
assert [l["memory_limit_bytes"] for l in d["lanes"]] == [1 << 30, 4 << 30, 3 << 29], d'
    GPUSLICE_SIM_STATE="$T/m40.state" GPUSLICE_SIM_MEMORY=40G expect 0 "procs --dry-run --memory 12.5%,8G on a GPU of 40 GiB" -- "$GS" procs --shares 1,1 --memory 12.5%,8G --dry-run -- a ::: b
    json_ok "12.5% of 40 GiB is 5 GiB" 'assert d["device"]["memory_bytes"] == 40 << 30 and [l["memory_limit_bytes"] for l in d["lanes"]] == [5 << 30, 8 << 30], d'
    expect 0 "procs --dry-run without --memory" -- "$GS" procs --shares 1,1 --dry-run -- a ::: b
    json_ok "no limits" 'assert [l["memory_limit_bytes"] for l in d["lanes"]] == [None, None], d'
    expect 0 "procs --dry-run -d UUID (upper-case hex)" -- "$GS" procs --shares 1,3 --dry-run -d GPU-5AC1CE00-0000-4000-8000-000000000000 -- a ::: b
    json_ok "the device by UUID, with its index" 'assert d["device"]["index"] == 0 and d["device"]["uuid"] == "GPU-5ac1ce00-0000-4000-8000-000000000000" and [l["sm_count"] for l in d["lanes"]] == [32, 100], d'
    # A GPU the driver does not have, by index (at most 3 digits) or by UUID: named as given.
    expect 1 "procs -d 999 on one GPU" -- "$GS" procs --shares 1,1 --dry-run -d 999 -- a ::: b
    if [ "$(cat "$T/err")" = "gpuslice: procs: --device: there is no GPU 999 (1 visible)" ]; then ok "-d 999: none"; else bad "-d 999"; cat "$T/err"; fi
    expect 2 "procs -d 1000" -- "$GS" procs --shares 1,1 --dry-run -d 1000 -- a ::: b; stderr_has '"1000" is not a GPU'
    expect 1 "procs -d UUID of no GPU" -- "$GS" procs --shares 1,1 --dry-run -d gpu-5AC1CE00-0000-4000-8000-000000000009 -- a ::: b
    if [ "$(cat "$T/err")" = "gpuslice: procs: --device: no GPU gpu-5AC1CE00-0000-4000-8000-000000000009 among the 1 this process sees" ]; then
        ok "an unknown UUID named"; else bad "-d unknown UUID"; cat "$T/err"; fi
    expect 0 "procs --dry-run with 17 lanes" -- "$GS" procs --shares 1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1 --dry-run -- a ::: b ::: c ::: d ::: e ::: f ::: g ::: h ::: i ::: j ::: k ::: l ::: m ::: n ::: o ::: p ::: q
    json_ok "more lanes than groups of 8: groups of 2" 'assert d["device"]["group_sms"] == 2 and sum(l["sm_count"] for l in d["lanes"]) == 132 and all(l["sm_count"] % 2 == 0 for l in d["lanes"]), d'
    GPUSLICE_SIM_GREEN=0 expect 1 "procs on a driver without green contexts" -- "$GS" procs --shares 1,1 --dry-run -- a ::: b
    stderr_has "cannot partition its SMs with green contexts"
    GPUSLICE_SIM_STATE="$T/small.state" GPUSLICE_SIM_SMS=4 expect 1 "three lanes on 4 SMs" -- "$GS" procs --shares 1,1,1 --dry-run -- a ::: b ::: c
    stderr_has "3 lanes do not fit"
    # Three lanes: each on its partition, the MPS daemon started, released together.
    expect 0 "procs --shares 20,30,50 --json" -- "$GS" procs --shares 20,30,50 --json -- \
        sh -c "'$SP' 1 > '$T/l0'; date +%s%N > '$T/a'" ::: sh -c "sleep 1; date +%s%N > '$T/b'; exec '$SP' 1 > '$T/l1'" ::: "$SP" 2
    python3 - "$T/out" <<'PY' && ok "--json: the lanes with their PIDs when released" || { bad "procs --json"; cat "$T/out"; }
import json, sys
d = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][0]
assert [l["sm_count"] for l in d["lanes"]] == [24, 40, 68] and all(l["pid"] > 0 for l in d["lanes"]), d
PY
    grep -q "^thread 0 null sms 24 " "$T/l0" && grep -q "^thread 0 null sms 40 " "$T/l1" && grep -q "^thread 1 graph sms 68 " "$T/out" && ok "every lane on its partition" || { bad "lane partitions"; cat "$T/l0" "$T/l1" "$T/out"; }
    if [ "$(cat "$T/a")" -gt "$(cat "$T/b")" ]; then ok "the quick lane waited for the slow one (released together)"; else bad "lane 0 ran before lane 1 was ready"; fi
    stderr_has "procs: lane 2: PID"
    stderr_has "^gpuslice: procs: started the MPS control daemon for GPU-5ac1ce00-0000-4000-8000-000000000000$"
    stderr_has "^gpuslice: procs: 3 lanes on GPU-5ac1ce00-0000-4000-8000-000000000000 released together$"
    grep -q "CUDA_VISIBLE_DEVICES=GPU-5ac1ce00" "$XDG_RUNTIME_DIR/gpuslice-mps/GPU-5ac1ce00-0000-4000-8000-000000000000/pipe/fake.starts" && ok "the GPU's MPS daemon was started" || bad "no MPS daemon"
    # Four lanes on the 2-SM split: each made from that split's groups (COUNT@FIRST/fine).
    GPUSLICE_DEBUG=1 expect 0 "procs --shares 10,20,30,40 --json" -- "$GS" procs --shares 10,20,30,40 --json -- "$SP" 1 ::: "$SP" 1 ::: "$SP" 1 ::: "$SP" 1
    # 40@40 fits groups of 8 too, but the two splits need not number the SMs alike on a GPU.
    [ "$(grep -c "runs on [0-9]* SMs (.*, groups of 2)" "$T/err")" = 4 ] && ok "every lane made from the 2-SM split" || { bad "lanes of mixed splits"; grep "runs on" "$T/err"; }
    python3 - "$T/out" <<'PY' && ok "four lanes on 14, 26, 40 and 52 SMs, as --json says" || { bad "procs 10,20,30,40"; cat "$T/out" "$T/err"; }
import json, sys
lines = open(sys.argv[1]).read().splitlines()
d = [json.loads(l) for l in lines if l.startswith("{")][0]
assert [l["sm_count"] for l in d["lanes"]] == [14, 26, 40, 52] and d["device"]["max_cluster"] == 2, d
assert sorted(int(l.split()[4]) for l in lines if l.startswith("thread 0 null sms ")) == [14, 26, 40, 52], lines
PY
    # Each lane's memory limit holds in it (its own tenant), whatever the others are given.
    MP="$B/tests/mem_probe"
    expect 0 "procs --memory 1G,12.5%" -- "$GS" procs --shares 1,1 --memory 1G,12.5% -- \
        sh -c "'$MP' alloc:900 alloc:200 > '$T/m0'" ::: sh -c "'$MP' alloc:1900 alloc:200 > '$T/m1'"
    if [ "$(tr '\n' ' ' <"$T/m0")" = "alloc 900 ok alloc 200 CUDA_ERROR_OUT_OF_MEMORY " ] &&
        [ "$(tr '\n' ' ' <"$T/m1")" = "alloc 1900 ok alloc 200 CUDA_ERROR_OUT_OF_MEMORY " ]; then
        ok "lane 0 held to 1 GiB, lane 1 to 2 GiB"
    else
        bad "lane memory limits"; cat "$T/m0" "$T/m1"
    fi
    stderr_has "procs: lane 1: PID [0-9]*, share 1, 68 SMs (from SM 64), memory limit 2 GiB: sh"
    # A lane whose CUDA process is a grandchild started with its descriptors closed (Python's
    # subprocess): it still reports, through the directory; the lanes read no terminal and
    # have SIGPIPE at its default.
    expect 0 "a lane started through subprocess (close_fds)" -- "$GS" procs --shares 1,1 -- \
        python3 -c "import subprocess, sys; sys.exit(subprocess.run(['$SP', '1']).returncode)" ::: \
        sh -c "grep SigIgn /proc/self/status > '$T/sig'; readlink /proc/self/fd/0 > '$T/stdin'; echo \$GPUSLICE_LANE \$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE \$CUDA_MPS_PIPE_DIRECTORY > '$T/lane'; exec '$SP' 1"
    stderr_has "procs: lane 0: PID"; stderr_has "procs: 2 lanes on GPU-5ac1ce00-0000-4000-8000-000000000000 released together"
    stderr_has "^gpuslice: procs: reusing the MPS control daemon for GPU-5ac1ce00-0000-4000-8000-000000000000$"
    python3 -c "import sys; m = int(open(sys.argv[1]).read().split()[1], 16); sys.exit(m & 0x1000)" "$T/sig" && ok "SIGPIPE is not ignored in a lane" || { bad "SIGPIPE ignored in a lane"; cat "$T/sig"; }
    grep -q "^/dev/null$" "$T/stdin" && ok "a lane reads /dev/null, not the terminal" || { bad "lane stdin"; cat "$T/stdin"; }
    [ "$(cat "$T/lane")" = "1 100 $XDG_RUNTIME_DIR/gpuslice-mps/GPU-5ac1ce00-0000-4000-8000-000000000000/pipe" ] &&
        ok "the second lane: GPUSLICE_LANE=1, all the GPU's threads, through its MPS daemon" || { bad "lane 1's environment: $(cat "$T/lane")"; }
    if [ -z "$(ls -d "$XDG_RUNTIME_DIR"/gpuslice-procs-* 2>/dev/null)" ]; then ok "the lanes' directory is removed"; else bad "left: $(ls -d "$XDG_RUNTIME_DIR"/gpuslice-procs-*)"; fi
    # A stale barrier variable outside procs: no wait, no harm.
    expect 0 "GPUSLICE_LANE_BARRIER of no procs run" -- env GPUSLICE_LANE_BARRIER="$T/gone/0" "$GS" run -q --sms 16 -- "$SP" 1
    # More lanes than groups of 8: every lane from the fine split.
    GPUSLICE_DEBUG=1 expect 0 "GPUSLICE_SMS=8@0/fine" -- env GPUSLICE_SMS=8@0/fine LD_PRELOAD="$LIB" "$SP" 1
    stderr_has "runs on 8 SMs (8 from SM 0 of 132, groups of 2)"
    # procs killed outright: a lane waiting for the release notices and goes on.
    "$GS" procs -q --shares 1,1 -- sh -c "exec '$SP' 1 > '$T/orphan'" ::: sleep 30.4324 & PP=$!
    for i in $(seq 100); do [ -n "$(ls "$XDG_RUNTIME_DIR"/gpuslice-procs-*/ready.0 2>/dev/null)" ] && break; sleep 0.05; done
    kill -9 $PP; wait $PP 2>/dev/null
    for i in $(seq 60); do grep -q "^thread 0 graph" "$T/orphan" 2>/dev/null && break; sleep 0.05; done
    grep -q "^thread 0 graph sms 64 " "$T/orphan" && ok "a waiting lane went on when procs was killed" || { bad "orphaned lane"; cat "$T/orphan"; }
    pkill -f "sleep 30.4324" 2>/dev/null; rm -rf "$XDG_RUNTIME_DIR"/gpuslice-procs-*
    # A lane that fails: the others are terminated and its status is returned.
    start=$(date +%s)
    expect 3 "a lane exits 3 after the release" -- "$GS" procs --shares 1,1 -- sh -c "'$SP' 1 >/dev/null; exit 3" ::: sh -c "'$SP' 1 >/dev/null; exec sleep 30.4321"
    stderr_has "lane 0 (sh) failed with status 3; terminating the others"
    expect 137 "a lane killed by SIGKILL after the release" -- "$GS" procs --shares 1,1 -- sh -c "'$SP' 1 >/dev/null; kill -KILL \$\$" ::: sh -c "'$SP' 1 >/dev/null; exec sleep 30.4321"
    stderr_has "^gpuslice: procs: lane 0 (sh) failed with status 137; terminating the others$"
    if [ $(($(date +%s) - start)) -lt 15 ] && ! pgrep -f "sleep 30.4321" >/dev/null; then ok "the other lane was terminated"; else bad "the other lane ran on"; pkill -f "sleep 30.4321"; fi
    expect 1 "a lane that ends before its partition" -- "$GS" procs --shares 1,1 -- false ::: sh -c "exec sleep 30.4322"
    stderr_has "lane 0 (false) ended before the lanes were released"
    if ! pgrep -f "sleep 30.4322" >/dev/null; then ok "the waiting lane was terminated"; else bad "left running"; pkill -f "sleep 30.4322"; fi
    expect 1 "a lane that never uses CUDA" -- "$GS" procs --shares 1,1 --timeout 1 -- "$SP" 1 ::: sleep 30.4323
    stderr_has "lane 1 (sleep) did not make its partition within 1 s"
    # A lane that ends before the release fails procs at once, whether it exits 0 before making
    # its partition or fails after making it (its CUDA process left waiting); with --timeout 30,
    # waiting for it would take 30 s.
    start=$(date +%s)
    expect 1 "a lane that exits 0 before its partition" -- "$GS" procs --shares 1,1 --timeout 30 -- true ::: sleep 30.4325
    stderr_has "^gpuslice: procs: lane 0 (true) ended before the lanes were released, with status 0$"
    expect 4 "a lane that exits 4 after its partition, before the release" -- "$GS" procs --shares 1,1 --timeout 30 -- \
        sh -c "'$SP' 1 >'$T/left' 2>&1 & while [ ! -e \"\${GPUSLICE_LANE_BARRIER%/*}/ready.0\" ]; do sleep 0.05; done; exit 4" ::: sleep 30.4325
    stderr_has "^gpuslice: procs: lane 0 (sh) ended before the lanes were released, with status 4$"
    # A lane (its gpuslice run, the group's leader) killed by a signal before the release, as
    # the OOM killer would: 128 + N, as after it.
    expect 137 "a lane killed by SIGKILL before the release" -- "$GS" procs --shares 1,1 --timeout 30 -- sh -c 'kill -KILL $PPID; exec sleep 30.4327' ::: sleep 30.4325
    stderr_has "^gpuslice: procs: lane 0 (sh) ended before the lanes were released, with status 137$"
    for i in $(seq 40); do pgrep -f "sleep 30.4327" >/dev/null || break; sleep 0.05; done
    if ! pgrep -f "sleep 30.4327" >/dev/null; then ok "the killed lane's program went with its group"; else bad "the killed lane's program was left"; pkill -f "sleep 30.4327"; fi
    # Its CUDA program, left waiting for the release, is terminated with it: never released.
    for i in $(seq 20); do grep -q "^thread" "$T/left" && break; sleep 0.05; done
    if ! grep -q "^thread" "$T/left"; then ok "the program it left waiting never ran"; else bad "a failed lane's program ran after procs gave up"; cat "$T/left"; fi
    if [ $(($(date +%s) - start)) -lt 20 ]; then ok "neither waited for --timeout"; else bad "took $(($(date +%s) - start)) s"; fi
    # A lane whose partition is refused (its driver has no green contexts): the reason, not the PID.
    expect 1 "a lane whose partition is refused" -- "$GS" procs --shares 1,1 -- sh -c "GPUSLICE_SIM_GREEN=0 exec '$SP' 1" ::: sleep 30.4325
    stderr_has "^gpuslice: procs: lane 0 cannot have its partition: GPU 0 cannot partition its SMs with green contexts (cuDeviceGetDevResource: CUDA_ERROR_NOT_SUPPORTED)$"
    # procs told to stop while the lanes wait: they are terminated, and it says by what.
    "$GS" procs --shares 1,1 -- "$SP" 1 ::: sleep 30.4325 >/dev/null 2>"$T/err" & PP=$!
    for i in $(seq 200); do [ -n "$(ls "$XDG_RUNTIME_DIR"/gpuslice-procs-*/ready.0 2>/dev/null)" ] && break; sleep 0.05; done
    kill -TERM $PP; wait $PP; rc=$?
    if [ $rc = 143 ]; then ok "SIGTERM: exit 143"; else bad "SIGTERM: exit $rc"; cat "$T/err"; fi
    stderr_has "^gpuslice: procs: Terminated: terminating the lanes$"
    if ! pgrep -f "sleep 30.4325" >/dev/null; then ok "every waiting lane was terminated"; else bad "lanes left running"; fi
    # A hangup (the terminal closed) too: procs does not die leaving its lanes.
    "$GS" procs --shares 1,1 -- "$SP" 1 ::: sleep 30.4326 >/dev/null 2>"$T/err" & PP=$!
    for i in $(seq 200); do [ -n "$(ls "$XDG_RUNTIME_DIR"/gpuslice-procs-*/ready.0 2>/dev/null)" ] && break; sleep 0.05; done
    kill -HUP $PP; wait $PP; rc=$?
    if [ $rc = 129 ]; then ok "SIGHUP: exit 129"; else bad "SIGHUP: exit $rc"; cat "$T/err"; fi
    stderr_has "^gpuslice: procs: Hangup: terminating the lanes$"
    for i in $(seq 40); do pgrep -f "sleep 30.4326" >/dev/null || break; sleep 0.05; done
    if ! pgrep -f "sleep 30.4326" >/dev/null; then ok "SIGHUP: every waiting lane was terminated"; else bad "lanes left running after SIGHUP"; fi
    pkill -f "sleep 30.432" 2>/dev/null
    "$GS" mps stop --force >/dev/null 2>&1 ;;
python_green)
    # The gpuslice Python package (ctypes over libgpuslice.so, no PyTorch) on the simulated
    # GPU of 132 SMs: run_green_tasks with N tasks, what a lane's threads get, its errors, and
    # gpuslice green-run's JSON and exit statuses.
    export GPUSLICE_LIB="$LIB" PYTHONPATH="$SRC/python"
    mkdir -p "$T/jobs"
    cat >"$T/jobs/jobs.py" <<'PY'
import ctypes, threading
import gpuslice

cu = ctypes.CDLL("libcuda.so.1")

def sms():
    """MULTIPROCESSOR_COUNT as the driver answers it on this thread."""
    d, v = ctypes.c_int(), ctypes.c_int()
    cu.cuInit(0); cu.cuDeviceGet(ctypes.byref(d), 0)
    cu.cuDeviceGetAttribute(ctypes.byref(v), 16, d)
    return v.value

def ctx():
    """The context current on this thread (the lane's green context on a lane's threads)."""
    c = ctypes.c_void_p()
    cu.cuCtxGetCurrent(ctypes.byref(c))
    return c.value

def lane(tag="x"):
    seen = {}
    t = threading.Thread(target=lambda: seen.update(child=sms(), lane=gpuslice.current_lane().sm_count, child_ctx=ctx()))
    t.start(); t.join()
    own = ctx()
    return {"tag": tag, "told": gpuslice.current_lane().sm_count, "driver": sms(),
            "child": seen["child"], "lane": seen["lane"], "same_ctx": own is not None and seen["child_ctx"] == own}

def fails():
    raise ValueError("planned")
PY
    cd "$T/jobs"
    cat >"$T/jobs/green_check.py" <<'PY'

import sys, warnings
import gpuslice
import jobs
assert "torch" not in sys.modules
preloaded = sys.argv[1:] == ["preloaded"]
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    r = gpuslice.run_green_tasks([jobs.lane, "jobs:lane"], shares=(25, 75), task_kwargs=[{"tag": "a"}, {}])
    gpuslice.run_green_tasks([jobs.lane, jobs.lane])
# Without the interposer preloaded the libraries are told the whole GPU's count: said once.
texts = [str(w.message) for w in said if w.category is RuntimeWarning]
assert (texts == [] if preloaded else len(texts) == 1 and "not preloaded" in texts[0] and "LD_PRELOAD" in texts[0]), texts
d = r.to_dict()
assert d["shares"] == [25.0, 75.0] and d["total_sm_count"] == 132, d
assert [l["sm_count"] for l in d["lanes"]] == [32, 100], d
# The driver's own answer is the lane's under the interposer (PRELOADED=1), the whole GPU's
# without it (ctypes reaches the driver directly, as PyTorch does): the context is the lane's.
want = (32, 100) if preloaded else (132, 132)
assert r.results == [{"tag": "a", "told": 32, "driver": want[0], "child": want[0], "lane": 32, "same_ctx": True},
                     {"tag": "x", "told": 100, "driver": want[1], "child": want[1], "lane": 100, "same_ctx": True}], r.results
assert d["lanes"][1]["result"] == r.results[1] and d["lanes"][1]["first_sm"] == 32, d
assert gpuslice.current_lane() is None and jobs.sms() == 132
r = gpuslice.run_green_tasks([jobs.lane] * 3, shares=(20, 30, 50))
assert sum(l.sm_count for l in r.lanes) <= 132 and r.lanes[0].sm_count < r.lanes[1].sm_count < r.lanes[2].sm_count, r
assert [x["told"] for x in r.results] == [l.sm_count for l in r.lanes]
try:
    gpuslice.run_green_tasks([jobs.lane, jobs.fails])
    raise SystemExit("no error")
except gpuslice.GreenRunError as e:
    assert e.errors[0] is None and isinstance(e.errors[1], ValueError) and "lane 1: ValueError: planned" in str(e), e
    assert e.result.results[0]["told"] == 32 and e.result.lanes[1].sm_count == 100
for bad, exc, text in [(dict(shares=(1,)), ValueError, "one per task"),
                       (dict(shares=(1, -1)), ValueError, "above 0"),
                       (dict(task_kwargs=[{}, 3]), TypeError, "task_kwargs[1]"),
                       (dict(device=-1), ValueError, "device")]:
    try:
        gpuslice.run_green_tasks([jobs.lane, jobs.lane], **bad)
        raise SystemExit(f"accepted {bad}")
    except exc as e:
        assert text in str(e), (bad, e)
try:
    gpuslice.run_green_tasks(["nomodule:f", jobs.lane])
    raise SystemExit("accepted nomodule")
except ImportError as e:
    assert "nomodule" in str(e)
PY
    python3 "$T/jobs/green_check.py" && ok "run_green_tasks: 25/75 and 20/30/50, the SM counts told before the work, each lane's context on its threads and on threads it starts; errors by lane; bad arguments named" || bad "run_green_tasks"
    preload python3 "$T/jobs/green_check.py" preloaded && ok "under the interposer the driver itself answers each lane's SM count on its threads" || bad "run_green_tasks under the interposer"
    expect 0 "gpuslice green-run 25/75 --json" -- "$GS" green-run --shares 25,75 --task jobs:lane --task jobs:lane --task-kwargs '{"tag": "t"}' --task-kwargs '{}' --json
    python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).read()); assert d["shares"]==[25.0,75.0] and [(l["index"],l["requested_share"],l["sm_count"],l["result"]["told"],l["result"]["driver"],l["result"]["child"]) for l in d["lanes"]]==[(0,25.0,32,32,32,32),(1,75.0,100,100,100,100)] and d["lanes"][0]["result"]["tag"]=="t", d' "$T/out" && ok "its JSON: the shares, then each lane's index, share, SM count and result; the driver itself answers each lane's count (green-run preloads the interposer)" || { bad "green-run JSON"; cat "$T/out"; }
    ! grep -q "not preloaded" "$T/err" && ok "green-run: no warning about the preload" || { bad "green-run warned"; cat "$T/err"; }
    GPUSLICE_LIB=$T/nolib.so expect 1 "green-run with GPUSLICE_LIB naming no file" -- "$GS" green-run --task jobs:lane --task jobs:lane
    stderr_has "GPUSLICE_LIB names $T/nolib.so, which cannot be read"
    expect 0 "gpuslice green-run 10/20/30/40 --json" -- "$GS" green-run --shares 10,20,30,40 --task jobs:lane --task jobs:lane --task jobs:lane --task jobs:lane --json
    python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).read()); assert [(l["sm_count"],l["result"]["told"]) for l in d["lanes"]]==[(14,14),(26,26),(40,40),(52,52)], d' "$T/out" && ok "green-run plans as procs: 14, 26, 40, 52 SMs, each lane told its own" || { bad "green-run 10/20/30/40"; cat "$T/out"; }
    PYTHON= expect 0 "gpuslice green-run with three tasks, PYTHON set empty (python3)" -- "$GS" green-run --shares 20,30,50 --task jobs:lane --task jobs:lane --task jobs:lane
    grep -q "^lane 2: share 50.0 %" "$T/out" && ok "three lanes printed" || { bad "three lanes"; cat "$T/out"; }
    expect 2 "--task-kwargs that is not JSON" -- "$GS" green-run --task jobs:lane --task jobs:lane --task-kwargs '{' --task-kwargs '{}'
    stderr_has "task-kwargs #1 is not JSON"
    expect 2 "--task-kwargs not an object" -- "$GS" green-run --task jobs:lane --task jobs:lane --task-kwargs '[1]' --task-kwargs '{}'
    stderr_has "must be a JSON object"
    expect 2 "a function the module lacks" -- "$GS" green-run --task jobs:lane --task jobs:nothing
    stderr_has "task jobs:nothing"
    expect 2 "a module that does not exist" -- "$GS" green-run --task nomodule:f --task jobs:lane
    stderr_has "nomodule"
    expect 2 "three --task for two shares" -- "$GS" green-run --shares 25,75 --task jobs:lane --task jobs:lane --task jobs:lane
    stderr_has "give one share per --task"
    expect 2 "--task-kwargs once for two tasks" -- "$GS" green-run --task jobs:lane --task jobs:lane --task-kwargs '{}'
    stderr_has "once per --task"
    expect 2 "a share of 0" -- "$GS" green-run --shares 0,1 --task jobs:lane --task jobs:lane
    stderr_has "above 0"
    expect 1 "a task that raises" -- "$GS" green-run --task jobs:lane --task jobs:fails --json
    stderr_has "lane 1: ValueError: planned"
    # The package where make install puts it (share/gpuslice/python), which gpuslice run puts
    # on PYTHONPATH: a program it starts imports it without pip.
    expect 0 "import gpuslice under gpuslice run, without PYTHONPATH" -- env -u PYTHONPATH "$GS" run -q -- python3 -c 'import gpuslice, sys; print(gpuslice.__file__); assert "torch" not in sys.modules'
    grep -q "share/gpuslice/python/gpuslice/__init__.py" "$T/out" && ok "it is the installed layout's package" || { bad "import under run"; cat "$T/out" "$T/err"; }
    # info(), inject_priority and run_green_process_scripts (over procs, with the stand-in MPS).
    mkdir -p "$T/bin" "$T/xdg"; chmod 700 "$T/xdg"
    cp "$SRC/tests/integration/fake-mps-control" "$T/bin/nvidia-cuda-mps-control"
    T="$T" FAKE_TORCH="$SRC/tests/integration/fake_torch" PATH="$T/bin:$B/bin:$PATH" XDG_RUNTIME_DIR="$T/xdg" GPUSLICE_MPS_TIMEOUT=3 python3 - "$B/tests/sm_probe" <<'PY' && ok "info() as objects; inject_priority's nice while the function runs, restored after; enable_torch_priority on the stand-in torch; run_green_process_scripts' exit status and refusals" || bad "info, inject_priority, enable_torch_priority, run_green_process_scripts"
import os, sys
import gpuslice
i = gpuslice.info()
assert i.gpus[0].sm_count == 132 and i.gpus[0].uuid.startswith("GPU-") and i.driver_version, i
raw = gpuslice.info(raw=True)
assert isinstance(raw, dict) and raw["gpus"][0]["sm_count"] == 132, raw
assert [g.index for g in gpuslice.info(device=0).gpus] == [0]
try:
    gpuslice.info(device=5)
    raise SystemExit("info(device=5) answered")
except gpuslice.GpusliceError as e:
    assert "--device" in str(e), e
base = os.nice(0)
@gpuslice.inject_priority(nice_value=base + 5)
def f(x):
    return (x, os.nice(0))
assert f(7) == (7, base + 5) and os.nice(0) in (base, base + 5), (f(7), os.nice(0))
sp = sys.argv[1]
assert gpuslice.run_green_process_scripts([sp, sp], shares=(1, 3), script_args=[["1"], ["1"]], quiet=True) == 0
assert gpuslice.run_green_process_scripts(["true", "true"], shares=(1, 3), quiet=True) != 0  # no CUDA: never released
# enable_torch_priority: False without torch; with the stand-in torch, the stream of the
# highest priority (its range is (0, -5)) once CUDA initialises, and idempotent.
assert gpuslice.enable_torch_priority() is False
sys.path.insert(0, os.environ["FAKE_TORCH"])
import torch
assert gpuslice.enable_torch_priority(torch) is True and gpuslice.enable_torch_priority(torch) is True
torch.cuda._lazy_init()
assert torch.cuda.current_stream().priority == -5, torch.cuda.calls
assert [c for c in torch.cuda.calls if c[0] == "set_stream"] == [("set_stream", 0, -5)], torch.cuda.calls
for bad in (dict(shares=(1,)), dict(shares=(1, 3), startup_timeout=0)):
    try:
        gpuslice.run_green_process_scripts(["true", "true"], **bad)
        raise SystemExit(f"accepted {bad}")
    except ValueError:
        pass
# memory_shares: each script's hard limit, a fraction of the GPU's 16 GiB or a size.
import shlex
mp = os.path.join(os.path.dirname(sp), "mem_probe")
t = os.environ["T"]
sh = lambda out, *steps: ["-c", f"{shlex.quote(mp)} {' '.join(steps)} > {shlex.quote(t + '/' + out)}"]
assert gpuslice.run_green_process_scripts(
    ["sh", "sh"], shares=(1, 1), memory_shares=(0.0625, "2G"), quiet=True,
    script_args=[sh("py0", "alloc:900", "alloc:200"), sh("py1", "alloc:1900", "alloc:200")]) == 0
got = [open(f"{t}/py{i}").read().split("\n")[:2] for i in (0, 1)]
assert got == [["alloc 900 ok", "alloc 200 CUDA_ERROR_OUT_OF_MEMORY"],
               ["alloc 1900 ok", "alloc 200 CUDA_ERROR_OUT_OF_MEMORY"]], got
for bad in ((0.25,), (0, 0.5), (0.5, 1.5), (True, 0.5), (0.5, float("nan")), "0.5,0.5", (0.5, "1G,2G"), (0.5, None)):
    try:
        gpuslice.run_green_process_scripts(["true", "true"], shares=(1, 1), memory_shares=bad)
        raise SystemExit(f"memory_shares {bad!r} accepted")
    except ValueError as e:
        assert "memory_shares" in str(e), e
# A size gpuslice refuses, or limits past the GPU's memory: procs says so and exits 2.
assert gpuslice.run_green_process_scripts(["true", "true"], shares=(1, 1), memory_shares=("1K", 0.5), quiet=True) == 2
assert gpuslice.run_green_process_scripts(["true", "true"], shares=(1, 1), memory_shares=(0.75, 0.5), quiet=True) == 2
PY
    cd "$T" ;;
lanes)
    # The in-process C API (gpuslice_lanes_run) on the simulated GPU: 132 SMs, a spin_2000us
    # kernel 2 ms on all of them.
    LP="$B/tests/lanes_probe"
    export LD_LIBRARY_PATH="$B/lib:$LD_LIBRARY_PATH"
    expect 0 "two lanes 25/75" -- "$LP" 25 75
    python3 - "$T/out" <<'PY' && ok "SM counts 32 and 100 reported, current and told (MULTIPROCESSOR_COUNT, also through cuGetProcAddress, the cuGetProcAddress it hands back, dlsym, and the cuGetProcAddress_v2 dlsym gives) on each lane's thread, 132 after; kernels of 8.25 and 2.64 ms; started together" || { bad "lanes 25/75"; cat "$T/out"; }
import sys
l = {int(x[1]): x for x in (line.split() for line in open(sys.argv[1])) if x[0] == "lane"}
v = lambda i, k: float(l[i][l[i].index(k) + 1])
assert sorted(l) == [0, 1], l
assert (v(0, "sms"), v(0, "reported"), v(0, "attribute"), v(0, "first")) == (32, 32, 32, 0), l
assert (v(1, "sms"), v(1, "reported"), v(1, "attribute"), v(1, "first")) == (100, 100, 100, 32), l
assert (v(0, "via_gpa"), v(0, "via_dlsym"), v(1, "via_gpa"), v(1, "via_dlsym")) == (32, 32, 100, 100), l
# The runtime's own path: the cuGetProcAddress handed back for "cuGetProcAddress", then through it.
assert (v(0, "via_gpa_self"), v(1, "via_gpa_self")) == (32, 100), l
# ... and the cuGetProcAddress_v2 it starts from, asked of the driver's handle with dlsym.
assert (v(0, "via_dlsym_gpa"), v(1, "via_dlsym_gpa")) == (32, 100), l
assert "after attribute 132" in open(sys.argv[1]).read(), l
# The simulator's device runs one kernel at a time: the second lane's may wait for the first's.
assert 8.2 <= v(0, "ms") < 11.5 and 2.6 <= v(1, "ms") < 11.5, l
assert v(0, "ms") < 9.0 or v(1, "ms") < 3.0, l
assert abs(v(0, "start_us") - v(1, "start_us")) < 20000, l
PY
    [ "$(grep -c "^lane .* cluster 8$" "$T/out")" = 2 ] && ok "25/75 on co-scheduled groups of 8: clusters of 8 run" || { bad "25/75 clusters"; cat "$T/out"; }
    # The primary context it retained is released: after the run it is no longer active.
    grep -q "^primary active 0$" "$T/out" && ok "after the lanes the primary context is released" || { bad "the primary context kept after the lanes"; cat "$T/out"; }
    # Groups of 8 would give 16/24/32/60 (the 30 % lane 5.8 points short); 2-SM steps are within
    # 2 points, and then a lane runs clusters of 2 only (the simulator refuses 4, as the H200).
    expect 0 "four lanes 10/20/30/40" -- "$LP" 10 20 30 40
    python3 - "$T/out" <<'PY' && ok "the plan of procs: 14, 26, 40, 52 SMs in groups of 2, clusters of 2" || { bad "four lanes"; cat "$T/out"; }
import sys
l = {int(x[1]): x for x in (line.split() for line in open(sys.argv[1])) if x[0] == "lane"}
v = lambda i, k: int(float(l[i][l[i].index(k) + 1]))
assert [(v(i, "sms"), v(i, "reported"), v(i, "attribute"), v(i, "first"), v(i, "cluster")) for i in range(4)] == [
    (14, 14, 14, 0, 2), (26, 26, 26, 14, 2), (40, 40, 40, 40, 2), (52, 52, 52, 80, 2)], l
PY
    expect 0 "five lanes of 20" -- "$LP" 20 20 20 20 20
    grep -q "^lane 4 sms 26 reported 26 attribute 26 via_gpa 26 via_dlsym 26 first 106 " "$T/out" && grep -q "^lane 0 sms 28 " "$T/out" && ok "5 x 20: 28, 26, 26, 26, 26 SMs (not 24 x 4 and 36)" || { bad "five lanes"; cat "$T/out"; }
    expect 0 "three lanes 20/30/50" -- "$LP" 20 30 50
    grep -q "^lane 2 sms 68 reported 68 attribute 68 via_gpa 68 via_dlsym 68 first 64 .* cluster 8$" "$T/out" && ok "20/30/50 keep groups of 8 (within 2 points) and clusters of 8" || { bad "three lanes"; cat "$T/out"; }
    # A lane's work is finished when the run returns: each lane leaves a 300 ms kernel (1237 ms
    # on 32 SMs, 396 on 100, one kernel at a time on the simulator) running and returns at once.
    expect 0 "two lanes that leave their kernels running" -- "$LP" -a 25 75
    awk '$1 == "run_ms" && $2 >= 1550 { f = 1 } END { exit !f }' "$T/out" && ok "gpuslice_lanes_run returned once the lanes' kernels had run ($(grep run_ms "$T/out"))" || { bad "the lanes' work still ran after the run"; cat "$T/out"; }
    expect 1 "a weight of 0" -- "$LP" 0 1
    grep -q "^rc -22$" "$T/out" && grep -q "weight 0 (0) is not a positive number" "$T/out" && ok "refused with EINVAL and a reason" || { bad "weight 0"; cat "$T/out"; }
    expect 1 "no lanes" -- "$LP"
    grep -q "n must be 1 to 64" "$T/out" && ok "no lanes refused" || { bad "no lanes"; cat "$T/out"; }
    expect 1 "GPU 3" -- "$LP" -d 3 1 1
    grep -q "^rc -19$" "$T/out" && grep -q "there is no GPU 3" "$T/out" && ok "ENODEV" || { bad "device 3"; cat "$T/out"; }
    GPUSLICE_SIM_STATE="$T/nogreen.state" GPUSLICE_SIM_GREEN=0 expect 1 "a driver without green contexts" -- "$LP" 1 1
    grep -q "^rc -95$" "$T/out" && grep -q "cannot partition its SMs with green contexts" "$T/out" && ok "ENOTSUP naming the requirement" || { bad "no green"; cat "$T/out"; }
    grep -q "^primary active 0$" "$T/out" && ok "refused: the primary context released too" || { bad "no green: the primary context kept"; cat "$T/out"; }
    # No visible GPU (cuInit: CUDA_ERROR_NO_DEVICE): ENODEV, saying the driver's error.
    CUDA_VISIBLE_DEVICES=-1 expect 1 "no visible GPU" -- "$LP" 1 1
    grep -q "^rc -19$" "$T/out" && grep -q "^err gpuslice_lanes_run: the CUDA driver did not initialise (error 100)$" "$T/out" && ok "no visible GPU: ENODEV, error 100" || { bad "no visible GPU"; cat "$T/out"; }
    GPUSLICE_SIM_STATE="$T/small.state" GPUSLICE_SIM_SMS=4 expect 1 "three lanes on 4 SMs" -- "$LP" 1 1 1
    grep -q "^rc -95$" "$T/out" && grep -q "3 lanes do not fit" "$T/out" && ok "too fine a split: ENOTSUP" || { bad "4 SMs"; cat "$T/out"; }
    # Each lane its own argument, and its own record filled in: the weight given, its SMs and
    # first SM, what its function returned (100 + I under -q, which runs no kernel).
    # lanes_ok FILE N: N lanes, lane I given "aI", its record its partition's, side by side from SM 0.
    lanes_ok() {
        python3 - "$1" "$2" <<'PY'
import sys
n = int(sys.argv[2])
rows = [l.split() for l in open(sys.argv[1])]
lane = {int(r[1]): r for r in rows if r[0] == "lane"}
info = {int(r[1]): r for r in rows if r[0] == "info"}
assert sorted(lane) == list(range(n)) and sorted(info) == list(range(n)), rows
first = 0
for i in range(n):
    l, f = lane[i], info[i]
    assert l[3] == "a%d" % i, ("lane %d's argument" % i, l)
    assert l[5] == l[7] == f[5], ("lane %d's SMs" % i, l, f)
    assert int(f[7]) == first, ("lane %d's first SM" % i, f)
    assert (f[9], f[11]) == (str(100 + i), "0"), ("lane %d's result" % i, f)
    first += int(f[5])
assert first <= 132, rows
print(" ".join(info[i][5] for i in range(n)), " ".join(info[i][3] for i in range(n)))
PY
    }
    expect 0 "three lanes 1/2/3, each with its argument" -- "$LP" -q 1 2 3
    v=$(lanes_ok "$T/out" 3) && [ "$v" = "22 44 66 1 2 3" ] && ok "each lane its argument and record: SMs and weights $v" || { bad "lanes 1/2/3: ${v:-}"; cat "$T/out"; }
    # 64 lanes, the most the API takes: 2 SMs each at least, 132 in all; 65 are refused.
    expect 0 "64 lanes" -- "$LP" -q $(seq 64 | sed 's/.*/1/')
    v=$(lanes_ok "$T/out" 64) && awk -v v="$v" 'BEGIN { n = split(v, x, " "); s = 0; for (i = 1; i <= 64; i++) { if (x[i] < 2) exit 1; s += x[i] } exit !(s == 132) }' && ok "64 lanes of one weight: 132 SMs, 2 at least each" || { bad "64 lanes"; cat "$T/out"; }
    expect 1 "65 lanes" -- "$LP" -q $(seq 65 | sed 's/.*/1/')
    grep -q "^rc -22$" "$T/out" && grep -q "^err gpuslice_lanes_run: n must be 1 to 64$" "$T/out" && ok "65 lanes: EINVAL, n must be 1 to 64" || { bad "65 lanes"; cat "$T/out"; }
    for w in inf nan -1; do
        expect 1 "a weight of $w" -- "$LP" -q 1 "$w"
        grep -q "^rc -22$" "$T/out" && grep -q "^err gpuslice_lanes_run: weight 1 ($w) is not a positive number$" "$T/out" && ok "weight $w: EINVAL naming lane 1" || { bad "weight $w"; cat "$T/out"; }
    done
    for d in 1 -1; do
        expect 1 "GPU $d of one" -- "$LP" -d "$d" -q 1
        grep -q "^rc -19$" "$T/out" && grep -q "^err gpuslice_lanes_run: there is no GPU $d (1 visible)$" "$T/out" && ok "GPU $d: ENODEV" || { bad "GPU $d"; cat "$T/out"; }
    done ;;
accounting | audit_* | compute_board) . "$SRC/tests/integration/audit.sh" ;;
mem_lock | mem_lock_ns | mem_lock_compute | mem_pools) . "$SRC/tests/integration/mem_trust.sh" ;;
compute_weights | compute_priority) . "$SRC/tests/integration/priority.sh" ;;
daemon_net_*) . "$SRC/tests/integration/daemon_net.sh" ;;
daemon_*) . "$SRC/tests/integration/daemon.sh" ;;
multi_gpu) . "$SRC/tests/integration/multi_gpu.sh" ;;
mps_cli) . "$SRC/tests/integration/mps.sh" ;;
hami | compute_hami) . "$SRC/tests/integration/hami.sh" ;;
faults_*) . "$SRC/tests/integration/faults.sh" ;;
hermetic_*) . "$SRC/tests/integration/hermetic.sh" ;;
*) echo "unknown case $CASE"; exit 2 ;;
esac
echo "$CASE: $fails failed"
[ $fails = 0 ]

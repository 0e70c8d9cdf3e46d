#!/usr/bin/env bash
# What the duty (src/preload/compute/duty.c) gets from NVML on this GPU, and what it makes
# of it: NVML's device utilisation samples asked for the way duty.c asks (a 64-sample buffer,
# stamps newer than a second ago, on the realtime and then the monotonic clock) with each
# answer, the value type, the stamps against both clocks and their spacing; then the CUDA
# <<<>>> loop of small kernels (bench/compute_small.cu) and the PyTorch loop under --compute
# 50 and 25 with GPUSLICE_DEBUG=1, and the duty's report at exit: how many of NVML's samples it
# took, how many of them the device's, NVML's last answer and the clock learnt.
#
# usage: bench/duty_probe.sh            (after tests/gpu/run.sh --only build, or with
#                                        GPU_BUILD_DIR naming a build with compute_small)
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${GPU_BUILD_DIR:-build-gpu}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
GS=$BUILD/bin/gpuslice
SMALL=$BUILD/gpu/compute_small
PY=${PYTHON:-python3}
[ -x "$GS" ] || { echo "duty_probe: no $GS (build gpuslice into $BUILD first)" >&2; exit 1; }
[ -x "$SMALL" ] || "$ROOT/bench/compute_share.sh" --build || exit 1

echo "=== NVML's device utilisation samples, asked for as duty.c does"
"$PY" - "$ROOT/bench" <<'EOF'
import ctypes, sys, time
sys.path.insert(0, sys.argv[1])
import gpumeasure as gm
n = gm.Nvml(0, "libnvidia-ml.so.1")
fn = n._fn("nvmlDeviceGetSamples")
if fn is None:
    print("nvmlDeviceGetSamples: not exported")
    sys.exit(0)
for clock in ("realtime", "monotonic"):
    now = time.time() if clock == "realtime" else time.monotonic()
    since = int((now - 1.0) * 1e6)
    vt, cnt = ctypes.c_int(-1), ctypes.c_uint(64)
    buf = (gm._Sample * 64)()
    r = fn(n.h, ctypes.c_int(1), ctypes.c_ulonglong(since), ctypes.byref(vt), ctypes.byref(cnt), buf)
    rt, mono = time.time() * 1e6, time.monotonic() * 1e6
    print(f"since {clock} now-1s: answer {r}, count {cnt.value}, value type {vt.value}")
    ts = sorted(buf[i].timeStamp for i in range(min(cnt.value, 64))) if r == 0 else []
    if ts:
        print(f"  newest stamp - realtime now: {(ts[-1] - rt) / 1e3:.1f} ms; "
              f"- monotonic now: {(ts[-1] - mono) / 1e3:.1f} ms")
        print(f"  spacing ms: {[round((b - a) / 1e3, 1) for a, b in zip(ts, ts[1:])]}")
    cnt0 = ctypes.c_uint(0)
    r0 = fn(n.h, ctypes.c_int(1), ctypes.c_ulonglong(since), ctypes.byref(vt), ctypes.byref(cnt0), None)
    print(f"  with no buffer: answer {r0}, count {cnt0.value}")
r = fn(n.h, ctypes.c_int(1), ctypes.c_ulonglong(0), ctypes.byref(vt), ctypes.byref(cnt0), None)
print(f"since 0, no buffer: answer {r}, count {cnt0.value}")
EOF

for c in 50 25; do
    echo "=== the CUDA <<<>>> loop under --compute $c (GPUSLICE_DEBUG=1)"
    GPUSLICE_DEBUG=1 "$GS" run -q --compute "$c" -- "$SMALL" stream --repeats 1 --phase-seconds 3 \
        --settle 0.3 --ceilings "$c" --no-set 2>&1 | grep -E "^phase|duty|error" | cut -c1-400
done
echo "=== the PyTorch loop under --compute 50 (GPUSLICE_DEBUG=1)"
GPUSLICE_DEBUG=1 "$GS" run -q --compute 50 -- "$PY" -c '
import time, torch
x = torch.randn(65536, device="cuda")
torch.cuda.synchronize()
t = time.monotonic()
n = 0
while time.monotonic() - t < 4:
    for _ in range(100):
        x.mul_(1.0001)
    torch.cuda.synchronize()
    n += 100
print(f"rate {n / 4:.0f} kernels/s")
' 2>&1 | grep -E "^rate|duty|rror" | cut -c1-400

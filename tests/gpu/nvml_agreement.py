"""Does gpuslice's accounting agree with what the driver says this process uses?
Run as `gpuslice run --memory 8G -- python3 nvml_agreement.py LIMIT_BYTES`.

At several points (after the context, after 1 GiB + 300 MiB + 100 x 2 MiB and a
cuBLAS matmul, after freeing some, after empty_cache) it compares the tenant's accounted
usage (total - free from torch.cuda.mem_get_info(), through the interposer) with NVML's
per-process usedGpuMemory for this pid, read by a separate process started without the
interposer (so it is the driver's own figure). |difference| <= 64 MiB passes. The figure
NVML gives inside the interposer is recorded too. If NVML does not list the pid (a
container with its own PID namespace) the check is skipped.
Output follows gpucheck.py.
"""
import os
import subprocess
import sys
import time

import gpucheck as gc
from gpucheck import GiB, MiB

TOLERANCE = 64 * MiB
HERE = os.path.dirname(os.path.abspath(__file__))
SCRUB = ("LD_PRELOAD", "GPUSLICE_", "TENSOR_FUSION_", "CUDA_DEVICE_MEMORY_LIMIT")


def outside_nvml(pid):
    """NVML's per-process figure from a process without the interposer: (bytes, why)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUB)}
    r = subprocess.run([sys.executable, os.path.join(HERE, "nvml_view.py"), "proc", str(pid)],
                       env=env, capture_output=True, text=True, timeout=60)
    out = r.stdout.strip().splitlines()
    last = out[-1] if out else f"absent no output (rc {r.returncode}: {r.stderr.strip()[-200:]})"
    if last.startswith("used "):
        return int(last.split()[1]), ""
    return None, last[len("absent "):] if last.startswith("absent ") else last


def inside_nvml(pid):
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            if p.pid == pid:
                return p.usedGpuMemory
    except Exception as e:
        print(f"in-process NVML: {e}")
    return None


def main():
    if len(sys.argv) != 2:
        print("usage: nvml_agreement.py LIMIT_BYTES", file=sys.stderr)
        sys.exit(2)
    limit = int(sys.argv[1])
    import torch

    pid = os.getpid()
    samples = []

    def sample(tag):
        torch.cuda.synchronize()
        time.sleep(0.2)
        free, total, used = gc.mem(torch, tag)
        real, why = outside_nvml(pid)
        inside = inside_nvml(pid)
        samples.append((tag, used, real, why))
        line = f"[{tag}] accounted {used / MiB:.1f} MiB"
        if real is not None:
            gc.num(f"nvml_MiB_{tag}", round(real / MiB, 2))
            gc.num(f"diff_MiB_{tag}", round((used - real) / MiB, 2))
            line += f", driver (NVML, outside) {real / MiB:.1f} MiB, diff {(used - real) / MiB:+.1f} MiB"
        else:
            line += f", NVML outside: {why}"
        if inside is not None:
            gc.num(f"nvml_inside_MiB_{tag}", round(inside / MiB, 2))
            line += f", NVML inside the interposer {inside / MiB:.1f} MiB"
        print(line, flush=True)
        return total

    torch.zeros(1, device="cuda")
    total = sample("context")
    gc.check(total == limit, f"mem_get_info total {total} == limit {limit}")

    a = torch.empty(GiB, dtype=torch.uint8, device="cuda")
    b = torch.empty(300 * MiB, dtype=torch.uint8, device="cuda")
    small = [torch.empty(2 * MiB, dtype=torch.uint8, device="cuda") for _ in range(100)]
    x = torch.randn(2048, 2048, device="cuda")
    y = x @ x  # loads cuBLAS, allocates its workspace
    a.fill_(1)
    b.fill_(2)
    for s in small:
        s.fill_(3)
    sample("allocated_and_matmul")
    del a
    sample("freed_1GiB_cached")
    torch.cuda.empty_cache()
    sample("after_empty_cache")
    del b, small, x, y
    torch.cuda.empty_cache()
    sample("all_freed")

    have = [s for s in samples if s[2] is not None]
    if not have:
        gc.skip(f"NVML does not list pid {pid}: {samples[0][3]}")
    worst = max(abs(used - real) for _, used, real, _ in have)
    gc.key("max_abs_diff_MiB", round(worst / MiB, 2))
    gc.key("samples", len(have))
    for tag, used, real, why in samples:
        if real is None:
            gc.check(False, f"[{tag}] NVML gave no figure this time: {why}")
        else:
            gc.check(abs(used - real) <= TOLERANCE,
                     f"[{tag}] accounted {used / MiB:.1f} MiB vs driver {real / MiB:.1f} MiB: "
                     f"|diff| {abs(used - real) / MiB:.1f} <= {TOLERANCE / MiB:.0f} MiB")
    gc.done()


if __name__ == "__main__":
    main()

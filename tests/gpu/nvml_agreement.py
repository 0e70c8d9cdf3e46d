"""Does gpuslice's accounting agree with what the device really gave this process?
Run as `gpuslice run --memory 8G -- python3 nvml_agreement.py LIMIT_BYTES`, alone on the GPU.

Why not NVML's per-process figure: the interposer refills its own accounting from that very
figure (nvmlDeviceGetComputeRunningProcesses' usedGpuMemory), so comparing the two proves
nothing; a hook that charged nothing would still agree. The truth here is a figure NVML has no
part in: the device-wide free memory that the real driver reports (cuMemGetInfo), read by a
separate process started without the interposer (tests/gpu/devmem.py) before this process
makes its context and after each step; baseline free minus free now is what this process
holds, context included, on an otherwise idle GPU (the suite runs alone on the machine).

At several points (after the context; after 1 GiB + 300 MiB + 100 x 2 MiB and a cuBLAS
matmul; after freeing 1 GiB, still cached; after empty_cache; after freeing everything) the
tenant's accounted usage (total - free from torch.cuda.mem_get_info(), through the
interposer) must be within 64 MiB of that truth. NVML's per-process figure for this pid, read
by the same outside process, is printed as a third column for information (it is absent in a
PID namespace, which no longer matters).
Output follows gpucheck.py.
"""
import os
import sys
import time

import gpucheck as gc
from devmem import DeviceMemory
from gpucheck import GiB, MiB

TOLERANCE = 64 * MiB


def main():
    if len(sys.argv) != 2:
        print("usage: nvml_agreement.py LIMIT_BYTES", file=sys.stderr)
        sys.exit(2)
    limit = int(sys.argv[1])
    pid = os.getpid()
    # The outside view first, before this process touches CUDA.
    try:
        dm = DeviceMemory()
    except (RuntimeError, OSError) as e:
        gc.check(False, f"cannot start the device-memory measurer: {e}")
        gc.done()
    base_free, dev_total, _, _ = dm.read(pid)
    gc.num("device_total_MiB", round(dev_total / MiB, 1))
    gc.num("baseline_used_MiB", round((dev_total - base_free) / MiB, 1))
    print(f"baseline (outside, the measurer's context included): device {dev_total / MiB:.0f} "
          f"MiB, free {base_free / MiB:.1f} MiB", flush=True)

    import torch

    samples = []

    def sample(tag):
        torch.cuda.synchronize()
        time.sleep(0.2)
        free, total, used = gc.mem(torch, tag)
        dfree, _, nvml, why = dm.read(pid)
        truth = base_free - dfree
        samples.append((tag, used, truth))
        gc.num(f"truth_MiB_{tag}", round(truth / MiB, 2))
        gc.num(f"diff_MiB_{tag}", round((used - truth) / MiB, 2))
        line = (f"[{tag}] accounted {used / MiB:.1f} MiB, device (cuMemGetInfo outside, minus "
                f"the baseline) {truth / MiB:.1f} MiB, diff {(used - truth) / MiB:+.1f} MiB")
        if nvml is not None:
            gc.num(f"nvml_MiB_{tag}", round(nvml / MiB, 2))
            line += f"; NVML per-process (information) {nvml / MiB:.1f} MiB"
        else:
            line += f"; NVML per-process: {why or 'none'}"
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
    dm.close()

    worst = max(abs(used - truth) for _, used, truth in samples)
    gc.key("max_abs_diff_MiB", round(worst / MiB, 2))
    gc.key("samples", len(samples))
    for tag, used, truth in samples:
        gc.check(abs(used - truth) <= TOLERANCE,
                 f"[{tag}] accounted {used / MiB:.1f} MiB vs the device's own change "
                 f"{truth / MiB:.1f} MiB (cuMemGetInfo outside the interposer): "
                 f"|diff| {abs(used - truth) / MiB:.1f} <= {TOLERANCE / MiB:.0f} MiB")
    gc.done()


if __name__ == "__main__":
    main()

"""Tasks for gpuslice green-run on a GPU (bench/README: `gpuslice green-run --task
green_run_jobs:gemm ...`): fp16 4096^2 GEMMs, batches of 8 between synchronisations, for
`seconds` after a warm-up, all made and used in the task's own lane; returns the GEMMs per
second and the SM count the lane was told."""
import time


def gemm(seconds=3.0, n=4096, batch=8):
    import torch

    import gpuslice

    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    for _ in range(4):
        c = a @ b
    torch.cuda.synchronize()
    done, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        for _ in range(batch):
            c = a @ b  # noqa: F841
        torch.cuda.synchronize()
        done += batch
    rate = done / (time.monotonic() - t0)
    del a, b, c
    torch.cuda.synchronize()
    return {"gemm_per_s": round(rate, 1), "tflops": round(rate * 2 * n ** 3 / 1e12, 2),
            "sms": gpuslice.current_lane().sm_count}

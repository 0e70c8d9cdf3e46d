"""Tasks for gpuslice green-run on a GPU: fp16 n x n GEMMs, `batch` of them between
synchronisations, for `seconds` after a warm-up, all made and used in the task's own lane, on
the lane's current stream, waiting for that stream only; returns the GEMMs per second and the
SM count the lane was told. The two ways measured not to split the GPU by the shares (H200,
docs/results.md): own_stream (a torch.cuda.Stream() made in the task) and device_sync
(torch.cuda.synchronize(), which waits for every lane's work): with either, the lanes ran in
step at equal rates.

    cd bench && gpuslice green-run --shares 25,75 --task green_run_jobs:gemm \
        --task green_run_jobs:gemm --task-kwargs '{"n": 8192, "batch": 4}' \
        --task-kwargs '{"n": 8192, "batch": 4}' --json
"""
import time


def gemm(seconds=3.0, n=4096, batch=8, own_stream=False, device_sync=False):
    import torch

    import gpuslice

    if own_stream:  # a stream of the lane's own instead of the legacy default stream
        with torch.cuda.stream(torch.cuda.Stream()):
            return gemm(seconds, n, batch, False, device_sync)

    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    for _ in range(4):
        c = a @ b
    torch.cuda.synchronize()
    done, t0 = 0, time.monotonic()
    sync = torch.cuda.synchronize if device_sync else torch.cuda.current_stream().synchronize
    while time.monotonic() - t0 < seconds:
        for _ in range(batch):
            c = a @ b  # noqa: F841
        sync()
        done += batch
    rate = done / (time.monotonic() - t0)
    del a, b, c
    torch.cuda.synchronize()
    return {"gemm_per_s": round(rate, 1), "tflops": round(rate * 2 * n ** 3 / 1e12, 2),
            "sms": gpuslice.current_lane().sm_count}

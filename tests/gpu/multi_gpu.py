"""Several GPUs on one host (run as `python3 multi_gpu.py GS GPUSLICED WORKDIR`; skipped with
fewer than two GPUs). What issue 18 asks of a torchrun host, with real PyTorch and NCCL:
- `run --memory 0:8G,1:4G`: each GPU its own limit; a UUID key; `-d 1,0` reordering;
- `run --memory 16G -- torchrun --nproc_per_node=2`: a DDP step with NCCL all-reduce runs, each
  worker sees 16 GiB, the tenant's charge on each GPU is what that GPU holds more than before
  the job, as NVML counts it (memory NCCL maps from a peer is not charged again), and a worker
  past 16 GiB gets torch.cuda.OutOfMemoryError, not a hang;
- `--compute 50` on the same job holds on each GPU (the tenant's busy share there);
- `run -d 1 --sms 16` and `procs -d 1` on the second GPU; `--filled 0.5` on both;
- `gpuslice info` and the daemon's /v1/devices and /metrics show every GPU.
Every process runs with CUDA_DEVICE_ORDER=PCI_BUS_ID, so CUDA's numbering is nvidia-smi's.
Output follows gpucheck.py.
"""
import json
import os
import signal
import subprocess
import sys
import time

import gpucheck as gc
from gpucheck import GiB, MiB
from daemon import api, start_daemon

PY = sys.executable
ENV = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")


def sh(cmd, timeout=120, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env or ENV)
    if r.returncode:
        print(f"[{' '.join(cmd[:6])} ...] exit {r.returncode}: {r.stderr[-600:]}", flush=True)
    return r


def smi(query, kind="gpu"):
    out = subprocess.run(["nvidia-smi", f"--query-{kind}={query}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=30).stdout
    return [[x.strip() for x in line.split(",")] for line in out.splitlines() if line.strip()]


# What a program sees: each visible GPU's UUID and total memory, as PyTorch reports them.
VIEW = ("import json, torch\n"
        "print(json.dumps([['GPU-' + str(torch.cuda.get_device_properties(i).uuid), "
        "torch.cuda.mem_get_info(i)[1], torch.cuda.get_device_properties(i).multi_processor_count]"
        " for i in range(torch.cuda.device_count())]))")


def view(gs, *opts):
    r = sh([gs, "-q", "run", *opts, "--", PY, "-c", VIEW])
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


DDP = r'''
import json, os, sys, time, torch, torch.distributed as dist
work, phase = sys.argv[1], sys.argv[2]
r, w = int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
torch.cuda.set_device(r)
dist.init_process_group("nccl")
total = torch.cuda.mem_get_info()[1]
m = torch.nn.Linear(4096, 4096).cuda()
ddp = torch.nn.parallel.DistributedDataParallel(m, device_ids=[r])
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
for _ in range(3):
    ddp(torch.randn(256, 4096, device="cuda")).square().mean().backward()
    opt.step()
    opt.zero_grad()
t = torch.full((1 << 22,), float(r + 1), device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
out = dict(rank=r, pid=os.getpid(), total=total, reserved=torch.cuda.memory_reserved(),
           allreduce=t[0].item() == w * (w + 1) / 2)
if phase == "compute":
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    open(f"{work}/ddp.loop.{r}", "w").close()
    n, t0 = 0, time.time()
    while time.time() - t0 < 4:
        a @ a
        n += 1
        if n % 8 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    out["tflops"] = 2 * 8192 ** 3 * n / (time.time() - t0) / 1e12
open(f"{work}/ddp.{phase}.{r}.json", "w").write(json.dumps(out))
if phase == "memory":
    while not os.path.exists(f"{work}/ddp.go"):
        time.sleep(0.05)
    try:
        x = torch.empty(int(out["total"] - torch.cuda.memory_reserved() + (2 << 30)),
                        dtype=torch.uint8, device="cuda")
        res = "allocated"
    except torch.cuda.OutOfMemoryError:
        res = "oom"
    open(f"{work}/ddp.oom.{r}", "w").write(res)
dist.barrier()
dist.destroy_process_group()
'''


def torchrun(gs, work, phase, opts, n):
    """gpuslice run ... -- torchrun, in a session of its own (kill_all ends it whole), its output
    in WORK/ddp-PHASE.log."""
    script = os.path.join(work, "ddp.py")
    open(script, "w").write(DDP)
    log = open(os.path.join(work, f"ddp-{phase}.log"), "a")
    return subprocess.Popen([gs, "-q", "run", "--name", f"ddp-{phase}", *opts, "--", PY, "-m",
                             "torch.distributed.run", "--standalone", f"--nproc_per_node={n}",
                             script, work, phase], env=ENV, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def finish(p, limit, what):
    """Waits for p; past limit seconds, kills its whole session (torchrun and its workers, not
    only gpuslice) and fails what. Its exit status, or None."""
    try:
        return p.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        gc.check(False, f"{what}: ended within {limit} s (a hang)")
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()
    return None


def smi_int(v):
    try:
        return int(v)
    except ValueError:  # [N/A], [Not Supported]
        return None


def wait_files(paths, proc, limit):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if all(os.path.exists(p) for p in paths):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False


def tenant(gs, name, interval="0"):
    r = sh([gs, "tenants", "--json", "--interval", interval])
    try:
        return [t for t in json.loads(r.stdout)["tenants"] if t["name"] == name][0]
    except (ValueError, IndexError, KeyError):
        return None


def main():
    if len(sys.argv) != 4:
        print("usage: multi_gpu.py GS GPUSLICED WORKDIR", file=sys.stderr)
        sys.exit(2)
    gs, gsd, work = sys.argv[1:]
    gpus = smi("index,uuid,memory.total")
    n = len(gpus)
    if n < 2:
        gc.skip(f"{n} GPU here: this check needs two or more")
    uuid = [g[1] for g in gpus]
    native = [int(g[2]) * MiB for g in gpus]
    gc.key("gpus", n)

    # gpuslice info on every GPU, and -d.
    r = sh([gs, "info", "--json"])
    got = [g["uuid"] for g in json.loads(r.stdout)["gpus"]] if r.returncode == 0 else []
    gc.check(got == uuid, f"info --json lists the {n} GPUs in nvidia-smi's order ({got})")
    r = sh([gs, "info", "--json", "-d", "1"])
    got = [g["uuid"] for g in json.loads(r.stdout)["gpus"]] if r.returncode == 0 else []
    gc.check(got == [uuid[1]], f"info -d 1: GPU 1 alone ({got})")

    # Per-device limits: index keys, a UUID key, -d reordering.
    v = view(gs, "--memory", "0:8G,1:4G")
    gc.check(v is not None and [x[1] for x in v[:2]] == [8 * GiB, 4 * GiB]
             and all(x[1] == native[i] or abs(x[1] - native[i]) < 64 * MiB
                     for i, x in enumerate(v[2:], 2)),
             f"--memory 0:8G,1:4G: totals {[x[1] // MiB for x in v] if v else v} MiB")
    v = view(gs, "--memory", f"{uuid[1]}:4G")
    gc.check(v is not None and v[1][1] == 4 * GiB and v[0][1] != 4 * GiB,
             f"--memory {uuid[1]}:4G limits GPU 1 only ({[x[1] // MiB for x in v] if v else v})")
    v = view(gs, "-d", "1,0", "--memory", "0:8G,1:4G")
    gc.check(v is not None and [(x[0].lower(), x[1]) for x in v] ==
             [(uuid[1].lower(), 8 * GiB), (uuid[0].lower(), 4 * GiB)],
             f"-d 1,0: the program's GPU 0 is GPU 1 at 8 GiB, its GPU 1 is GPU 0 at 4 GiB ({v})")

    # A DDP job under --memory 16G: the step, the view, the charge per GPU, out of memory.
    for f in os.listdir(work):
        if f.startswith("ddp."):
            os.unlink(os.path.join(work, f))
    base = [smi_int(g[0]) for g in smi("memory.used")]
    p = torchrun(gs, work, "memory", ["--memory", "16G"], 2)
    try:
        ready = wait_files([f"{work}/ddp.memory.{r}.json" for r in (0, 1)], p, 180)
        gc.check(ready, "torchrun --nproc_per_node=2 under --memory 16G: both workers ran the "
                        "DDP step and the all-reduce")
        if ready:
            w = [json.load(open(f"{work}/ddp.memory.{r}.json")) for r in (0, 1)]
            gc.check(all(x["allreduce"] for x in w), "the NCCL all-reduce summed right")
            gc.check(all(x["total"] == 16 * GiB for x in w),
                     f"every worker sees 16 GiB ({[x['total'] // MiB for x in w]} MiB)")
            time.sleep(1)
            t = tenant(gs, "ddp-memory")
            now = [smi_int(g[0]) for g in smi("memory.used")]
            apps = smi("pid,gpu_uuid,used_memory", "compute-apps")
            pids = set(t["pids"]) if t else set()
            for r in (0, 1):
                mine = [x for x in (t["devices"] if t else [])
                        if x["uuid"].lower() == uuid[r].lower()]
                used = mine[0]["memory_used_bytes"] if mine else -1
                grew = (now[r] - base[r]) * MiB if now[r] is not None and base[r] is not None else None
                procs = [smi_int(a[2]) for a in apps
                         if len(a) == 3 and a[1] == uuid[r] and smi_int(a[0]) in pids]
                gc.num(f"ddp_gpu{r}_tenant_MiB", round(used / MiB))
                gc.num(f"ddp_gpu{r}_torch_reserved_MiB", round(w[r]["reserved"] / MiB))
                if procs and None not in procs:
                    gc.num(f"ddp_gpu{r}_nvml_processes_MiB", sum(procs))
                else:
                    gc.info(f"GPU {r}: NVML lists none of the tenant's PIDs with their memory "
                            "(another PID namespace?)")
                # The GPU's growth since before the job is what the job holds there, whoever
                # NVML names: the tenant's charge must be that, not that plus its peer's.
                gc.check(grew is not None and abs(used - grew) <= max(128 * MiB, grew // 20),
                         f"GPU {r}: the tenant is charged {used / MiB:.0f} MiB, the GPU holds "
                         f"{(grew or 0) / MiB:.0f} MiB more than before the job (within 5 %: "
                         "peer mappings are not charged again)")
    finally:
        open(f"{work}/ddp.go", "w").close()
    rc = finish(p, 120, "the DDP job after the go")
    oom = [open(f"{work}/ddp.oom.{r}").read() if os.path.exists(f"{work}/ddp.oom.{r}") else None
           for r in (0, 1)]
    gc.check(oom == ["oom", "oom"], f"each worker past its 16 GiB: torch.cuda.OutOfMemoryError "
                                    f"({oom}); torchrun exit {rc}")
    if rc:
        print(open(os.path.join(work, "ddp-memory.log")).read()[-2000:], flush=True)

    # --compute 50 on the same job: the busy share of each GPU, and throughput against none.
    tf = {}
    for phase, opts in (("compute", []), ("compute", ["--compute", "50"])):
        tag = "capped" if opts else "free"
        for r in (0, 1):
            for f in (f"{work}/ddp.compute.{r}.json", f"{work}/ddp.loop.{r}"):
                if os.path.exists(f):
                    os.unlink(f)
        p = torchrun(gs, work, phase, opts, 2)
        if opts:
            # Once both GEMM loops (4 s) run: the busy share over the next second.
            wait_files([f"{work}/ddp.loop.{r}" for r in (0, 1)], p, 180)
            time.sleep(0.5)
            t = tenant(gs, "ddp-compute", "1")
            pct = {x["uuid"].lower(): x["compute_used_percent"] for x in (t["devices"] if t else [])}
            for r in (0, 1):
                u = pct.get(uuid[r].lower())
                gc.num(f"ddp_gpu{r}_compute_used_percent", u if u is not None else -1)
                gc.check(u is not None and 40 <= u <= 53,
                         f"--compute 50: GPU {r} busy {u}% of a second for the tenant")
        finish(p, 180, f"the DDP job {' '.join(opts) or 'without a ceiling'}")
        for r in (0, 1):
            f = f"{work}/ddp.compute.{r}.json"
            tf[(tag, r)] = json.load(open(f))["tflops"] if os.path.exists(f) else None
    for r in (0, 1):
        a, b = tf.get(("capped", r)), tf.get(("free", r))
        if a and b:
            gc.num(f"ddp_gpu{r}_tflops_ratio_capped_to_free", round(a / b, 3))
            gc.info(f"GPU {r}: {a:.0f} TFLOPS at --compute 50, {b:.0f} without "
                    f"(ratio {a / b:.3f}; a throughput share exceeds the time share where the "
                    "clock rises off the power cap)")

    # SM partitions on GPU 1.
    v = view(gs, "-d", "1", "--sms", "16")
    gc.check(v is not None and len(v) == 1 and v[0][0].lower() == uuid[1].lower() and v[0][2] == 16,
             f"run -d 1 --sms 16: GPU 1 with 16 SMs ({v})")
    lane = ("import json, os, torch\n"
            "a = torch.randn(4096, 4096, device='cuda', dtype=torch.float16)\n"
            "[a @ a for _ in range(50)]; torch.cuda.synchronize()\n"
            "print(json.dumps(['GPU-' + str(torch.cuda.get_device_properties(0).uuid), "
            "torch.cuda.get_device_properties(0).multi_processor_count]))")
    r = sh([gs, "procs", "-q", "-d", "1", "--shares", "1,3", "--json", "--", PY, "-c", lane,
            ":::", PY, "-c", lane], timeout=180)
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith(("{", "["))]
    plan = [x for x in lines if isinstance(x, dict)]
    seen = [x for x in lines if isinstance(x, list)]
    gc.check(r.returncode == 0 and plan and plan[0]["device"]["uuid"].lower() == uuid[1].lower()
             and sorted(x[1] for x in seen) == sorted(l["sm_count"] for l in plan[0]["lanes"])
             and all(x[0].lower() == uuid[1].lower() for x in seen),
             f"procs -d 1 --shares 1,3: both lanes on GPU 1 with their SM counts ({plan}, {seen})")
    sh([gs, "mps", "stop", "-d", "1", "--force"])

    # --filled 0.5 on both GPUs.
    flag = os.path.join(work, "filled.go")
    p = subprocess.Popen([gs, "-q", "run", "--filled", "0.5", "--", PY, "-c",
                          f"import os, time, torch; torch.zeros(1, device='cuda')\n"
                          f"while not os.path.exists({flag!r}): time.sleep(0.1)"], env=ENV,
                         start_new_session=True)
    time.sleep(8)
    used = [(smi_int(g[0]) or 0) * MiB for g in smi("memory.used")]
    open(flag, "w").close()
    finish(p, 60, "run --filled 0.5")
    for r in range(n):
        gc.num(f"filled_gpu{r}_used_ratio", round(used[r] / native[r], 4))
    gc.check(all(abs(used[r] / native[r] - 0.5) <= 0.02 for r in range(n)),
             f"--filled 0.5: every GPU half full ({[round(u / m, 3) for u, m in zip(used, native)]})")

    # The daemon: /v1/devices and /metrics show every GPU.
    if not os.access(gsd, os.X_OK):
        gc.note(f"{gsd} was not built: the daemon's part not run")
        gc.done()
    log = open(os.path.join(work, "gpusliced-multi.log"), "w")
    denv = dict(ENV)
    deps = denv.pop("GPU_DEPS_LIB", "")
    if deps:  # the carried libraries' own dependencies (libcurl's), for the daemon alone
        denv["LD_LIBRARY_PATH"] = deps + (":" + denv["LD_LIBRARY_PATH"]
                                          if denv.get("LD_LIBRARY_PATH") else "")
    d, sock, _ = start_daemon(gsd, os.path.join(work, "drun-multi"), log, denv)
    gc.check(d is not None, "gpusliced became ready")
    if d is not None:
        st, devs = api(sock, "GET", "/v1/devices")
        got = [x["uuid"] for x in devs.get("devices", [])] if st == 200 else []
        gc.check(got == uuid, f"/v1/devices: the {n} GPUs ({got})")
        st, body = api(sock, "GET", "/metrics")
        text = body if isinstance(body, str) else ""
        series = [l for l in text.splitlines() if l.startswith("gpuslice_gpu_memory_total_bytes{")]
        gc.check(len(series) == n and all(any(u in l for l in series) for u in uuid),
                 f"/metrics: one memory series per GPU ({len(series)})")
        d.terminate()
        d.wait(timeout=30)
    gc.done()


if __name__ == "__main__":
    main()

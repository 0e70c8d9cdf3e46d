#!/usr/bin/env python3
"""SM partitions on a real GPU: what one partitioned PyTorch process gets on every path, and
what partitioned processes side by side get together.

usage: sm_partition.py one   [--gpuslice BIN] [--sms 16] [--seconds 2]
       sm_partition.py lanes [--gpuslice BIN] [--shares 20,30,50]... [--green] [--seconds 3]
       sm_partition.py worker MODE DIR SECONDS      (started by the two above)

one: the same workloads run in a plain process (the whole GPU) and in one started with
`gpuslice run --sms N` -- a GEMM on the main thread, a GEMM on a second thread, a captured CUDA
graph of GEMMs, and an MLP's forward+backward training step -- and for each the partitioned
throughput over the whole-GPU one is printed beside N/SMs x 1.15, with the mean SM clock of
each run (a power-limited GEMM clocks higher on fewer SMs, so its ratio exceeds N/SMs by the
clocks' ratio). Then a kernel that records %smid is launched on PyTorch's current stream from
the main thread, a second thread, the autograd backward pass and a graph replay (CuPy), and
the distinct SMs it ran on are counted. Exit status 1 unless every path ran on exactly N SMs
and no throughput ratio reaches 2 x N/SMs (a path that escaped the partition gets ~1).

lanes: `gpuslice procs --shares S1,S2,... -- WORKER ::: WORKER ...`: a saturating GEMM in every
lane for SECONDS in one common window; each lane's share of the summed throughput is printed
beside its requested share and SM share, and the sum beside one unpartitioned process alone
(measured once, first). --shares may be repeated; --green runs each also as `gpuslice
green-run` (one process, a lane per share, the same GEMM on the lane's current stream). Exit
status 1 if a lane's throughput share is more than 2 points from its requested share or a sum
is under 97 % of the process alone.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

N = 8192


def tflops(n, secs):
    return 2.0 * N ** 3 * n / secs / 1e12 if secs > 0 else 0.0


class Clock:
    """Mean SM clock (MHz), board power (W) and how often the power cap held the clock down,
    while it runs, through NVML; None without pynvml."""

    POWER_CAP = 0x4  # NVML's clocks event reason: the software power cap

    def __init__(self):
        self.samples, self.power, self.capped, self.stop = [], [], [], threading.Event()
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nvml, self.h = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
            self.reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                getattr(pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        except Exception:  # noqa: BLE001 - no NVML: no clock column
            self.nvml = None

    def __enter__(self):
        if self.nvml:
            self.t = threading.Thread(target=self.run, daemon=True)
            self.t.start()
        return self

    def run(self):
        while not self.stop.is_set():
            self.samples.append(self.nvml.nvmlDeviceGetClockInfo(self.h, self.nvml.NVML_CLOCK_SM))
            try:
                self.power.append(self.nvml.nvmlDeviceGetPowerUsage(self.h) / 1000.0)
                if self.reasons:
                    self.capped.append(bool(self.reasons(self.h) & self.POWER_CAP))
            except Exception:  # noqa: BLE001 - a GPU without these: the clock alone
                pass
            time.sleep(0.05)

    def __exit__(self, *exc):
        self.stop.set()
        if self.nvml:
            self.t.join()

    def mean(self):
        return round(sum(self.samples) / len(self.samples)) if self.samples else None

    def describe(self):
        """'1531 MHz, 688 W, power-capped in 97 % of samples' (what was measured)."""
        if not self.samples:
            return "clock not measured"
        text = f"{self.mean()} MHz"
        if self.power:
            text += f", {sum(self.power) / len(self.power):.0f} W"
        if self.capped:
            text += f", power-capped in {100.0 * sum(self.capped) / len(self.capped):.0f} % of samples"
        return text


def gemm_operands(torch):
    """Two N x N fp16 matrices and an output, after a warm-up of three GEMMs."""
    a = torch.randn(N, N, device="cuda", dtype=torch.float16)
    b = torch.randn(N, N, device="cuda", dtype=torch.float16)
    out = torch.empty(N, N, device="cuda", dtype=torch.float16)
    for _ in range(3):
        torch.matmul(a, b, out=out)
    torch.cuda.synchronize()
    return a, b, out


def gemm_loop(torch, seconds):
    a, b, out = gemm_operands(torch)
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        for _ in range(2):
            torch.matmul(a, b, out=out)
        torch.cuda.synchronize()
        n += 2
    return tflops(n, time.monotonic() - t0)


SMID_SRC = r"""
extern "C" __global__ void smid(unsigned int *out, long long spin) {
    unsigned int s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    long long t0 = clock64();
    while (clock64() - t0 < spin) {}
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}
"""


def smid_counts(torch):
    """Distinct SMs a kernel's 4096 blocks ran on, launched on the current PyTorch stream from
    the main thread, a second thread, the autograd backward pass, and a graph replay."""
    try:
        import cupy
    except ImportError:
        return {"smid": "cupy missing"}
    kern = cupy.RawKernel(SMID_SRC, "smid")
    blocks = 4096

    def launch():
        out = torch.zeros(blocks, dtype=torch.int32, device="cuda")
        with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            kern((blocks,), (64,), (out.data_ptr(), cupy.int64(20000)))
        return out

    def distinct(out):
        torch.cuda.synchronize()
        return int(torch.unique(out).numel())

    res = {"smid_main": distinct(launch())}
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("v", distinct(launch())))
    t.start()
    t.join()
    res["smid_thread"] = box.get("v")

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            box["bw"] = launch()  # runs on autograd's device thread
            return g

    x = torch.ones(4, device="cuda", requires_grad=True)
    Probe.apply(x).sum().backward()
    res["smid_backward"] = distinct(box["bw"])
    s = torch.cuda.Stream()
    out = torch.zeros(blocks, dtype=torch.int32, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, stream=s):
            with cupy.cuda.ExternalStream(s.cuda_stream):
                kern((blocks,), (64,), (out.data_ptr(), cupy.int64(20000)))
    out.zero_()
    g.replay()
    res["smid_graph"] = distinct(out)
    return res


def work_one(seconds):
    """The four paths; one JSON object on stdout."""
    import torch
    res = {"multi_processor_count": torch.cuda.get_device_properties(0).multi_processor_count}
    try:
        res.update(smid_counts(torch))
    except Exception as e:  # noqa: BLE001 - reported, the rest still runs
        res["smid"] = repr(e)[:200]
    with Clock() as c:
        res["gemm_main"] = gemm_loop(torch, seconds)
    res["clock_gemm_main"] = c.mean()
    res["power_gemm_main"] = c.describe()

    box = {}

    def second():
        try:
            box["v"] = gemm_loop(torch, seconds)
        except Exception as e:  # noqa: BLE001 - reported as the result
            box["e"] = repr(e)

    with Clock() as c:
        t = threading.Thread(target=second)
        t.start()
        t.join()
    if "e" in box:
        raise RuntimeError("second thread: " + box["e"])
    res["gemm_thread"] = box["v"]
    res["clock_gemm_thread"] = c.mean()
    res["power_gemm_thread"] = c.describe()

    # A CUDA graph of 4 GEMMs, captured on a side stream and replayed.
    a = torch.randn(N, N, device="cuda", dtype=torch.float16)
    b = torch.randn(N, N, device="cuda", dtype=torch.float16)
    out = torch.empty(N, N, device="cuda", dtype=torch.float16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            torch.matmul(a, b, out=out)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(4):
            torch.matmul(a, b, out=out)
    g.replay()
    torch.cuda.synchronize()
    with Clock() as c:
        n, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < seconds:
            g.replay()
            torch.cuda.synchronize()
            n += 4
        res["graph"] = tflops(n, time.monotonic() - t0)
    res["clock_graph"] = c.mean()
    res["power_graph"] = c.describe()

    # Training: forward and backward (autograd runs the backward on its own device thread).
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(4096, 4096), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).cuda().half()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(8192, 4096, device="cuda", dtype=torch.float16)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with Clock() as c:
        n, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < seconds:
            step()
            torch.cuda.synchronize()
            n += 1
        res["train_steps_per_s"] = n / (time.monotonic() - t0)
    res["clock_train"] = c.mean()
    res["power_train"] = c.describe()
    print(json.dumps(res), flush=True)


def work_lane(d, seconds):
    """Warms up, flags ready, waits for the window in DIR/go, runs GEMMs in it; JSON result."""
    import torch
    a, b, out = gemm_operands(torch)
    me = os.environ.get("GPUSLICE_LANE", str(os.getpid()))
    with open(os.path.join(d, f"ready.{me}"), "w") as f:
        f.write(str(os.getpid()))
    while not os.path.exists(os.path.join(d, "go")):
        time.sleep(0.005)
    with open(os.path.join(d, "go")) as f:
        t0, t1 = (float(x) for x in f.read().split())
    while time.monotonic() < t0:
        time.sleep(0.0005)
    n, last = 0, t0
    while True:
        for _ in range(2):
            torch.matmul(a, b, out=out)
        torch.cuda.synchronize()
        now = time.monotonic()
        if now <= t1:
            n += 2
            last = now
        if now > t1 + 0.5:  # nobody is alone at the end of the window
            break
    # One write of the whole line: the lanes of procs share one pipe and end together, and
    # print() under PYTHONUNBUFFERED=1 (tests/gpu/run.sh) writes the newline on its own, which
    # ran two lanes' lines into one (5 x 20 on the H100, 2026-12-07).
    line = json.dumps({"lane": me, "pid": os.getpid(), "gemms": n, "tflops": tflops(n, last - t0)})
    os.write(1, (line + "\n").encode())


def run_json(cmd, env=None, timeout=300):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit(f"{' '.join(cmd[:4])}...: exit {p.returncode}")
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def one(args):
    me = os.path.abspath(__file__)
    full, _ = run_json([sys.executable, me, "worker", "one", "-", str(args.seconds)])
    part, err = run_json([args.gpuslice, "run", "--sms", str(args.sms), "--", sys.executable, me,
                          "worker", "one", "-", str(args.seconds)])
    sms = full["multi_processor_count"]
    bound = args.sms / sms * 1.15
    print(f"One PyTorch process on {args.sms} of {sms} SMs (`gpuslice run --sms {args.sms}`) "
          f"against the whole GPU; bound {args.sms}/{sms} x 1.15 = {bound:.4f}.\n")
    print(f"| path | whole GPU | partition | ratio | SM clock MHz (whole / partition) | within "
          f"{bound:.4f} |")
    print("|---|---|---|---|---|---|")
    ok = True
    escape = 2.0 * args.sms / sms
    for key, unit, clock in (("gemm_main", "TFLOP/s", "clock_gemm_main"),
                             ("gemm_thread", "TFLOP/s", "clock_gemm_thread"),
                             ("graph", "TFLOP/s", "clock_graph"),
                             ("train_steps_per_s", "steps/s", "clock_train")):
        ratio = part[key] / full[key] if full[key] else 0.0
        good = 0 < ratio <= bound
        ok &= 0 < ratio < escape
        print(f"| {key} | {full[key]:.2f} {unit} | {part[key]:.2f} {unit} | {ratio:.4f} | "
              f"{full.get(clock)} / {part.get(clock)} | {'yes' if good else 'no'} |")
    print("\nThe same rows divided by the ratio of the SM clocks (partition / whole): the "
          "throughput per clock cycle, which a power-limited GPU does not keep equal.\n")
    print(f"| path | ratio per clock | within {bound:.4f} |")
    print("|---|---|---|")
    for key, clock in (("gemm_main", "clock_gemm_main"), ("gemm_thread", "clock_gemm_thread"),
                       ("graph", "clock_graph"), ("train_steps_per_s", "clock_train")):
        if full.get(clock) and part.get(clock):
            r = part[key] / full[key] / (part[clock] / full[clock])
            print(f"| {key} | {r:.4f} | {'yes' if 0 < r <= bound else 'no'} |")
    print("\nDistinct SMs (%smid) a 4096-block kernel ran on, launched on PyTorch's current "
          "stream:\n")
    print("| path | whole GPU | partition | verdict |")
    print("|---|---|---|---|")
    for key in ("smid_main", "smid_thread", "smid_backward", "smid_graph"):
        got = part.get(key, part.get("smid"))
        good = got == args.sms
        ok &= good
        print(f"| {key[5:]} | {full.get(key, full.get('smid'))} | {got} | "
              f"{'PASS' if good else 'FAIL'} |")
    print("\nSM clock and board power while each path ran (whole GPU / partition):\n")
    for key in ("gemm_main", "gemm_thread", "graph", "train"):
        print(f"- {key}: {full.get('power_' + key)} / {part.get('power_' + key)}")
    count = part.get("multi_processor_count")
    good = count == args.sms
    ok &= good
    print(f"\nPyTorch's `multi_processor_count`: {sms} on the whole GPU, {count} on the partition "
          f"({'PASS' if good else 'FAIL'}: {args.sms} expected).")
    print(f"\nVerdict: {'PASS' if ok else 'FAIL'} (every path on exactly {args.sms} SMs, PyTorch "
          f"told {args.sms} SMs, no "
          f"throughput ratio at {escape:.4f} or above)")
    for line in err.splitlines():
        if line.startswith("gpuslice:"):
            print(f"\n    {line}")
    return 0 if ok else 1


GREEN = {}  # green-run tasks of one process: the common window, set once all are warm


def green_gemm(lanes, seconds=3.0):
    """A green-run task: the saturating GEMM of work_lane on the lane's current stream, waiting
    for that stream only, counted in one window common to the `lanes` tasks of the process."""
    import torch

    import gpuslice

    with GREEN.setdefault("lock", threading.Lock()):
        if "barrier" not in GREEN:
            GREEN["barrier"] = threading.Barrier(
                lanes, action=lambda: GREEN.update(t0=time.monotonic() + 0.3))
    a, b, out = gemm_operands(torch)
    stream = torch.cuda.current_stream()
    GREEN["barrier"].wait()
    t0 = GREEN["t0"]
    t1 = t0 + seconds
    while time.monotonic() < t0:
        time.sleep(0.0005)
    n, last = 0, t0
    while True:
        for _ in range(2):
            torch.matmul(a, b, out=out)
        stream.synchronize()
        now = time.monotonic()
        if now <= t1:
            n += 2
            last = now
        if now > t1 + 0.5:  # nobody is alone at the end of the window
            break
    return {"gemms": n, "tflops": tflops(n, last - t0), "sms": gpuslice.current_lane().sm_count}


def lane_table(title, shares, plan, results, alone, clock):
    """Prints one table; True when every lane is within 2 points of its weight and the lanes
    together make at least 97 % of one process alone."""
    weights = sum(shares)
    total_sms = sum(l["sm_count"] for l in plan)
    tot = sum(r["tflops"] for r in results.values())
    print(f"{title}: a saturating 8192^3 fp16 GEMM in every lane for the same window; one "
          f"unpartitioned process alone: {alone:.1f} TFLOP/s (the lanes' SM clock and board "
          f"power: {clock}).\n")
    print("| lane | requested share | SMs | SM share | TFLOP/s | throughput share | verdict |")
    print("|---|---|---|---|---|---|---|")
    ok = True
    for l in plan:
        r = results[l["index"]]
        want = 100.0 * shares[l["index"]] / weights
        sm_share = 100.0 * l["sm_count"] / total_sms
        share = 100.0 * r["tflops"] / tot if tot else 0.0
        good = abs(share - want) <= 2.0
        ok &= good
        print(f"| {l['index']} | {want:.2f} % | {l['sm_count']} | {sm_share:.2f} % | "
              f"{r['tflops']:.1f} | {share:.2f} % | {'PASS' if good else 'FAIL'} |")
    frac = tot / alone if alone else 0.0
    ok &= frac >= 0.97
    print(f"\nTogether {tot:.1f} TFLOP/s = {100 * frac:.1f} % of one process alone "
          f"({'PASS' if frac >= 0.97 else 'FAIL'}: at least 97 %).\n")
    return ok


def procs_lanes(args, spec, shares, d, alone):
    """One run of `gpuslice procs` (or, with --direct, of its plan by gpuslice run); its table."""
    me = os.path.abspath(__file__)
    lane_dir = tempfile.mkdtemp(prefix="lanes-", dir=d)
    worker = [sys.executable, me, "worker", "lane", lane_dir, str(args.seconds)]
    if args.direct:
        # The same plan, each lane started alone by gpuslice run (no procs, no barrier).
        plan_out = subprocess.run([args.gpuslice, "procs", "--shares", spec, "--dry-run",
                                   "--", *sum([([":::"] if i else []) + ["x"]
                                               for i in range(len(shares))], [])],
                                  capture_output=True, text=True, check=True).stdout
        plan = json.loads(plan_out)
        fine = "/fine" if not plan["device"].get("coscheduled", True) else ""
        subprocess.run([args.gpuslice, "mps", "start"], check=True, capture_output=True)
        procs = [subprocess.Popen([args.gpuslice, "run", "-q", "--gpu-share", "100", "--sms",
                                   f"{l['sm_count']}@{l['first_sm']}{fine}", "--", *worker],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=dict(os.environ, GPUSLICE_LANE=str(l["index"])))
                 for l in plan["lanes"]]
    else:
        cmd = [args.gpuslice, "procs", "--shares", spec, "--json", "--"]
        for i in range(len(shares)):
            if i:
                cmd.append(":::")
            cmd += worker
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)]
    try:
        wait_ready(lane_dir, len(shares), procs)
        with Clock() as clock:
            go(lane_dir, args.seconds)
            outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_, err) in zip(procs, outs):
        if p.returncode != 0:
            sys.stderr.write(err)
            raise SystemExit(f"a lane: exit {p.returncode}")
    results = {}
    for line in "\n".join(o for o, _ in outs).splitlines():
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if "lanes" in o:
            plan = o
        elif "lane" in o:
            results[int(o["lane"])] = o
    missing = [l["index"] for l in plan["lanes"] if l["index"] not in results]
    if missing:
        sys.stderr.write("".join(o for o, _ in outs))
        raise SystemExit(f"procs --shares {spec}: no result from lane(s) {missing} (their "
                         "output, above, has no line of theirs)")
    dev = plan["device"]
    how = ("each lane started by `gpuslice run --gpu-share 100 --sms COUNT@FIRST` with the plan "
           "of " if args.direct else "")
    title = (f"{how}`gpuslice procs --shares {spec}` (groups of {dev['group_sms']} SMs, "
             f"clusters up to {dev.get('max_cluster', '?')})")
    return lane_table(title, shares, plan["lanes"], results, alone, clock.describe())


def green_lanes(args, spec, shares, alone):
    """One `gpuslice green-run` of the same GEMM in one process, a lane per share; its table."""
    here = os.path.dirname(os.path.abspath(__file__))
    cmd = [args.gpuslice, "green-run", "--shares", spec, "--json"]
    for _ in shares:
        cmd += ["--task", "sm_partition:green_gemm", "--task-kwargs",
                json.dumps({"lanes": len(shares), "seconds": args.seconds})]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        x for x in (here, os.environ.get("PYTHONPATH")) if x))
    with Clock() as clock:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=here, env=env, timeout=300)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit(f"green-run: exit {p.returncode}")
    d = json.loads(p.stdout.strip().splitlines()[-1])
    plan = [{"index": l["index"], "sm_count": l["sm_count"]} for l in d["lanes"]]
    results = {l["index"]: l["result"] for l in d["lanes"]}
    return lane_table(f"`gpuslice green-run --shares {spec}` (one process, a lane per share)",
                      shares, plan, results, alone, clock.describe())


def lanes(args):
    me = os.path.abspath(__file__)
    specs = args.shares or ["20,30,50"]
    d = tempfile.mkdtemp(prefix="sm-lanes-")
    # One unpartitioned process alone first: the yardstick for every run's sum.
    solo_dir = os.path.join(d, "solo")
    os.mkdir(solo_dir)
    solo = subprocess.Popen([sys.executable, me, "worker", "lane", solo_dir, str(args.seconds)],
                            stdout=subprocess.PIPE, text=True)
    wait_ready(solo_dir, 1, [solo])
    with Clock() as c:
        go(solo_dir, args.seconds)
        alone = json.loads(solo.communicate(timeout=120)[0].strip().splitlines()[-1])["tflops"]
    print(f"One unpartitioned process alone: {alone:.1f} TFLOP/s ({c.describe()}).\n")
    ok = True
    for spec in specs:
        shares = [float(x) for x in spec.split(",")]
        ok &= procs_lanes(args, spec, shares, d, alone)
        if args.green:
            ok &= green_lanes(args, spec, shares, alone)
    return 0 if ok else 1


def wait_ready(d, n, procs, timeout=120):
    t0 = time.monotonic()
    while len([f for f in os.listdir(d) if f.startswith("ready.")]) < n:
        if any(p.poll() is not None for p in procs) or time.monotonic() - t0 > timeout:
            raise SystemExit(f"not every worker got ready in {d}")
        time.sleep(0.05)


def go(d, seconds):
    t0 = time.monotonic() + 0.3
    with open(os.path.join(d, "go.tmp"), "w") as f:
        f.write(f"{t0} {t0 + seconds}")
    os.replace(os.path.join(d, "go.tmp"), os.path.join(d, "go"))


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "worker":
        if sys.argv[2] == "one":
            return work_one(float(sys.argv[4]))
        return work_lane(sys.argv[3], float(sys.argv[4]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["one", "lanes"])
    ap.add_argument("--gpuslice", default=os.environ.get("GPUSLICE", "build/bin/gpuslice"))
    ap.add_argument("--sms", type=int, default=16)
    ap.add_argument("--shares", action="append",
                    help="lanes: the weights, e.g. 20,30,50 (default); repeat for several runs "
                         "against one measurement alone")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--green", action="store_true",
                    help="lanes: also run each --shares as gpuslice green-run in one process")
    ap.add_argument("--direct", action="store_true",
                    help="lanes: start each lane with gpuslice run instead of gpuslice procs")
    args = ap.parse_args()
    if os.sep in args.gpuslice:
        args.gpuslice = os.path.abspath(args.gpuslice)  # green-run runs from bench/
    return one(args) if args.mode == "one" else lanes(args)


if __name__ == "__main__":
    sys.exit(main())

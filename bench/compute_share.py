"""Compute-ceiling benchmark: does a tenant under `gpuslice run --compute P` hold P% of the
GPU's time, and no less than it needs when it needs less?

A ceiling bills the time the tenant's kernels run on the device: the governor counts the time
its work is in flight and scales it by the duty, the share of that time in which the tenant's
kernels really ran (NVML's per-process samples, src/preload/compute/duty.c). So a saturating
workload is held at P% of the device's time, and a host-bound one (small kernels launched one
by one, the GPU idle between launches) is billed its kernels only: under its ceiling it is not
throttled at all.

Each phase is measured over the same steady-state window (the --settle seconds after a change
and the --tail seconds before the next are left out) two ways:
  (a) gpuslice's own count: the tenant's compute_busy_ns (the device time its governor
      billed, all its processes together), read from its shared-memory file every 5 ms;
  (b) NVML, sampled in this process, which runs without the interposer: the raw
      GPU-utilisation samples (nvmlDeviceGetSamples, each the share of its ~1/6 s period in
      which a kernel ran) whose periods lie inside the window, an absolute share of the
      device's time; for two tenants at once, each one's per-process SM utilisation samples.
Throughput (completed work over wall time, each worker synchronising after every chunk of
about --chunk-ms) is the rate; "rate vs native" is a capped window's rate over the mean of
the uncapped phases bracketing it (--alone), with the SM clock and board power beside it.

Verdicts:
  saturating workloads (gemm, graph, cuda-graph; default ceilings 25,50,75): (a) and (b) each
      within --tolerance (2) points of the ceiling and of each other; throughput reported (a
      power-limited GEMM runs at a higher clock when partly idle, so its throughput share is
      above its time share), judged only where the GPU is contended: the 30/70 pair.
  host-bound workloads (small, cuda-small; default ceilings 100,90,75,50 and one that binds:
      15 for small, whose native share on an H100 is ~23 %, 25 for cuda-small, ~56 %):
      against the same workload native, i.e. in the uncapped phases bracketing each capped
      one (use --interleave): its absolute NVML share S and its rate. With c the ceiling:
        under its ceiling, c >= S + tolerance: not throttled: (b) within --under-tolerance (1)
          point of S (paired, mean over repeats), (a) within --tolerance of (b), and the rate
          at least --min-rate (0.97) of native, judged with the ratio's confidence: the mean of
          each window's ratio to its bracketing uncapped phases, with a ~95 % interval (mean
          ± 2 standard errors over repeats); it fails only when the interval's upper end is
          below --min-rate;
        over its ceiling, c <= S - tolerance: (a) and (b) each within --tolerance of c;
        in between: (a) and (b) each within --tolerance of min(S, c).
      Ceiling 100 (`gpuslice set --compute 100`) arms the governor with no budget: its row is
      the cost of an armed governor that cannot bind, against native, judged as "under".
  A verdict is on the mean over the repeats (the standard error printed beside it).

Settling. Each workload runs in one process started as `gpuslice run --compute 100`, so its
governor follows NVML from its start (warm-up, calibration and one steady second, >= 2 s:
the duty is learnt within ~0.5 s of samples) before the first phase; --settle (0.3) then
covers the budget's change at each `gpuslice set`. --warmup-seconds W adds W s of unmeasured
work at the ceiling before each capped phase that follows an uncapped one (the ceiling is then
not set again), for a duty that an uncapped phase disturbed.

Sections (--only picks some; all by default):
  gemm, small, graph   (A) one PyTorch process per workload, run as
                       `gpuslice run --name bench-WORKLOAD --compute 100 -- python3 ...`, that
                       alternates phases: uncapped (`gpuslice set "$GPUSLICE_TENANT" --compute
                       none`), then each ceiling in turn (`... --compute P`), each phase
                       --settle s discarded, --phase-seconds s measured, --tail s discarded;
                       --repeats times, then one more uncapped phase (--interleave: an uncapped
                       phase before every ceiling).
                         gemm   torch.matmul 8192x8192 @ 8192x8192 fp16 into a preallocated out
                         small  x.mul_(a).add_(b) on a 64K-element fp32 tensor, eager
                         graph  the same 100 kernels captured once in torch.cuda.graph, replayed
  cuda                 (B) bench/compute_small.cu, the same protocol from a CUDA C runtime-API
                       program: "cuda-small" (<<<>>> launches on one stream) and "cuda-graph"
                       (100 launches captured with cudaStreamBeginCapture, cudaGraphLaunch);
                       cuda-small / cuda-graph select one of them
  pair                 (C) the GEMM alone (one uncapped process), then two GEMM tenants at once
                       under --compute 30 and --compute 70, started together from a barrier and
                       measured over the same window: each one's time share (a) and (b, per
                       process), and its throughput share of the GEMM alone (the GPU is
                       contended, so the clock is shared: judged too)
  set                  (D) a GEMM tenant; the script runs `gpuslice set NAME --compute 90`, then
                       20, then 80: how long after each change the tenant's busy share (a) over
                       --set-window s is within --set-band points of the new ceiling and stays
                       there (judged: under --set-deadline s), and the level it holds from 1 s
                       after the change to the next one, by (a) and (b) (judged like A)

Check lines ("@ok"/"@fail", read by tests/gpu/report.py) per workload and ceiling; numbers:
"@key"/"@num". The markdown tables (one per workload: ceiling | expected | native NVML share |
NVML share capped | gpuslice's count | rate vs native [interval] | verdict) go to --table
(default $OUT/bench-compute.md when OUT is set), every phase and verdict as JSON next to it
(bench-compute.json), and for the host-bound workloads a picture (.svg, and .png where
rsvg-convert is on PATH): rate vs native and the shares by ceiling; --plot JSON SVG redraws it
from the JSON. Exit status 1 when a verdict failed.

usage: bench/compute_share.py [--only gemm,small,graph,cuda,pair,set] [--repeats N]
           [--phase-seconds S] [--settle S] [--tail S] [--ceilings 25,50,75]
           [--ceilings-small 100,90,75,50,15] [--ceilings-cuda-small 100,90,75,50,25]
           [--interleave] [--warmup-seconds W] [--budget S] [--table FILE]
           [--gpuslice BIN] [--compute-small BIN]  ...        (--help lists all)
       bench/compute_share.py --plot bench-compute-small.json picture.svg
       bench/compute_share.py worker ...           (internal: one PyTorch workload process)
Normally run through bench/compute_share.sh, which builds compute_small first. Needs only
the Python standard library (NVML through ctypes: bench/gpumeasure.py), plus torch in the
workers.
"""
import argparse
import atexit
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import gpumeasure as gm

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SELF = os.path.abspath(__file__)

GEMM_N = 8192
SMALL_N = 65536
GRAPH_KERNELS = 100
CLI_TIMEOUT = 20.0  # seconds for one `gpuslice set` / `gpuslice tenants`

TORCH_WORKLOADS = ("gemm", "small", "graph")
HOST_BOUND = ("small", "cuda-small")  # launch-bound: the GPU idles between launches
CUDA_WORKLOADS = ("cuda-small", "cuda-graph")
SHARE_WORKLOADS = TORCH_WORKLOADS + CUDA_WORKLOADS
SECTIONS = SHARE_WORKLOADS + ("pair", "set")
DESCRIBE = {
    "gemm": f"PyTorch GEMM {GEMM_N}³ fp16",
    "small": "PyTorch small kernels (64K elementwise)",
    "graph": "PyTorch small kernels in a CUDA graph",
    "cuda-small": "cuda-rt small (<<<>>> stream)",
    "cuda-graph": "cuda-rt graph (cudaGraphLaunch)",
}
UNIT = {"gemm": "GEMM/s"}  # the others count kernels


# --- shared by the workers and the driver: cumulative work over time ---------------------

class Trace:
    """Chunk completions: times t[i] (time.monotonic) and cumulative work w[i]."""

    def __init__(self, t0=None, w0=0.0):
        self.t = [] if t0 is None else [t0]
        self.w = [] if t0 is None else [w0]

    def add(self, t, w):
        self.t.append(t)
        self.w.append(w)

    def work_at(self, x):
        """Cumulative work at time x, linear between completions (clamped at the ends)."""
        t, w = self.t, self.w
        if not t:
            return 0.0
        if x <= t[0]:
            return w[0]
        if x >= t[-1]:
            return w[-1]
        lo, hi = 0, len(t) - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if t[mid] <= x:
                lo = mid
            else:
                hi = mid
        if t[hi] <= t[lo]:
            return w[hi]
        return w[lo] + (w[hi] - w[lo]) * (x - t[lo]) / (t[hi] - t[lo])

    def rate(self, a, b):
        """Work per second over [a, b]; None when [a, b] is not covered by completions."""
        if not self.t or b <= a or a < self.t[0] or b > self.t[-1]:
            return None
        return (self.work_at(b) - self.work_at(a)) / (b - a)

    def chunks(self, a, b):
        return sum(1 for x in self.t[1:] if a < x <= b)


# --- the worker: one workload inside a tenant (imports torch) ----------------------------

def out(line):
    print(line, flush=True)


def parent_gone():
    """True once the driver (BENCH_PARENT_PID) has gone: a worker must not run on alone."""
    pid = int(os.environ.get("BENCH_PARENT_PID") or 0)
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return False


def cli(args, timeout=CLI_TIMEOUT):
    """Runs `gpuslice ARGS` without the interposer preloaded. Returns (rc, stdout, stderr);
    rc is 124 on timeout and 127 when it cannot be started."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    argv = [os.environ.get("GPUSLICE_BIN") or "gpuslice"] + list(args)
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout, env=env)
        return r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout:.0f} s"
    except OSError as e:
        return 127, "", str(e)


def make_work(torch, name):
    """Returns (launch(n): enqueue n units without waiting, kernels per unit)."""
    dev = torch.device("cuda")
    if name == "gemm":
        a = torch.randn(GEMM_N, GEMM_N, device=dev, dtype=torch.float16)
        b = torch.randn(GEMM_N, GEMM_N, device=dev, dtype=torch.float16)
        c = torch.empty(GEMM_N, GEMM_N, device=dev, dtype=torch.float16)

        def launch(n):
            for _ in range(n):
                torch.matmul(a, b, out=c)
        return launch, 1

    x = torch.randn(SMALL_N, device=dev, dtype=torch.float32)
    if name == "small":
        def launch(n):  # one unit = one kernel
            for _ in range(n // 2):
                x.mul_(0.999).add_(0.001)
            if n % 2:
                x.mul_(0.999)
        return launch, 1

    def body():
        for _ in range(GRAPH_KERNELS // 2):
            x.mul_(0.999).add_(0.001)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            body()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        body()

    def launch(n):  # one unit = one replay of 100 kernels
        for _ in range(n):
            g.replay()
    return launch, GRAPH_KERNELS


class Runner:
    def __init__(self, torch, name, launch, kernels_per_unit):
        self.torch, self.name = torch, name
        self.launch, self.kpu = launch, kernels_per_unit
        self.units = 1  # per chunk

    def chunk(self, n=None):
        self.launch(self.units if n is None else n)
        self.torch.cuda.synchronize()

    def calibrate(self, chunk_ms):
        n = 1
        while True:  # grow until one chunk takes a tenth of the target or more
            t0 = time.monotonic()
            self.chunk(n)
            if (time.monotonic() - t0) * 1e3 >= chunk_ms / 10 or n >= 1 << 24:
                break
            n *= 4
        times = []
        for _ in range(5):
            t0 = time.monotonic()
            self.chunk(n)
            times.append(time.monotonic() - t0)
        self.units = max(1, round(chunk_ms * 1e-3 / (statistics.median(times) / n)))
        times = []
        for _ in range(5):
            t0 = time.monotonic()
            self.chunk()
            times.append(time.monotonic() - t0)
        out(f"calib {self.name} {self.units} {statistics.median(times) * 1e3:.3f} {self.kpu}")

    def run_until(self, t_end, trace=None, stop_file=None):
        """Runs chunks until one completes at or after t_end (or stop_file appears);
        records completions in trace (a new one from now when None)."""
        now = time.monotonic()
        if trace is None:
            trace = Trace(now, 0.0)
        w = trace.w[-1] if trace.w else 0.0
        last_check = now
        per_chunk = float(self.units * self.kpu)
        while True:
            self.chunk()
            now = time.monotonic()
            w += per_chunk
            trace.add(now, w)
            if now >= t_end:
                return trace
            if now - last_check > 0.05:
                last_check = now
                if stop_file and os.path.exists(stop_file):
                    return trace
                if parent_gone():
                    out("error the driver process is gone")
                    sys.exit(1)


def wait_file(path, timeout):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline or parent_gone():
            out(f"error gave up waiting for {path}")
            sys.exit(1)
        time.sleep(0.005)


def touch(path, text=""):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def worker_phases(r, a):
    """Section A: the phase protocol, setting the ceiling through `gpuslice set`."""
    tenant = os.environ.get("GPUSLICE_TENANT", "")
    if not tenant and not a.no_set:
        out("error GPUSLICE_TENANT is not set: run this under gpuslice run")
        sys.exit(1)
    ceilings = [int(c) for c in a.ceilings.split(",")]
    full = (a.settle, a.phase_seconds, a.tail)
    plan = []  # (repeat, label, value for gpuslice set, (settle, seconds, tail))
    for rep in range(a.repeats):
        for i, c in enumerate(ceilings):
            if i == 0 or a.interleave:
                plan.append((rep, "none", "none", full))
                if a.warmup_seconds > 0:  # unmeasured, at the ceiling that follows
                    plan.append((rep, "warmup", str(c), (0.0, a.warmup_seconds, 0.0)))
            plan.append((rep, str(c), str(c), full))
    plan.append((a.repeats, "none-end", "none", full))
    prev = "100"  # gpuslice run --compute 100
    for rep, label, value, (settle, seconds, tail) in plan:
        set_ms = 0.0
        if not a.no_set and value != prev:  # (after a warm-up, the ceiling is already set)
            prev = value
            t0 = time.monotonic()
            rc, so, se = cli(["set", tenant, "--compute", value])
            set_ms = (time.monotonic() - t0) * 1e3
            if rc != 0:
                msg = " ".join((se or so).split())[:300]
                out(f"error gpuslice set {tenant} --compute {value} exited {rc}: {msg}")
                sys.exit(1)
        t0 = time.monotonic()
        wa, wb = t0 + settle, t0 + settle + seconds
        tr = r.run_until(wb + tail)  # the tail keeps the ceiling past the window's end
        rate = tr.rate(wa, wb)
        rate = float("nan") if rate is None else rate
        out(f"phase {r.name} {rep} {label} {rate:.6g} {wb - wa:.4f} {tr.chunks(wa, wb)} "
            f"{set_ms:.2f} {wa:.6f} {wb:.6f}")


def worker_window(r, a):
    """Section C: wait at the barrier, then measure one window that the driver names."""
    touch(a.ready, str(os.getpid()))
    wait_file(a.go, 300)
    with open(a.go) as f:  # start time (time.monotonic), settle, window, tail (seconds)
        t_start, settle, seconds, tail = (float(v) for v in f.read().split())
    delay = t_start - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    wa, wb = t_start + settle, t_start + settle + seconds
    # Work on for `tail` after the window, so that other observers see it whole.
    tr = r.run_until(wb + tail, Trace(max(t_start, time.monotonic()), 0.0))
    rate = tr.rate(wa, wb)
    rate = float("nan") if rate is None else rate
    out(f"window {r.name} {a.label} {rate:.6g} {wb - wa:.4f} {tr.chunks(wa, wb)} {wa:.6f} {wb:.6f}")


def worker_trace(r, a):
    """Section D: report every chunk's completion until the stop file appears."""
    touch(a.ready, str(os.getpid()))
    tr = r.run_until(time.monotonic() + a.max_seconds, stop_file=a.stop)
    with open(a.trace_out + ".tmp", "w") as f:
        json.dump({"t": tr.t, "w": tr.w, "units": r.units, "kernels_per_unit": r.kpu}, f)
    os.replace(a.trace_out + ".tmp", a.trace_out)
    out(f"trace {r.name} {len(tr.t)} {a.trace_out}")


def worker_main(argv):
    p = argparse.ArgumentParser(prog="compute_share.py worker")
    p.add_argument("workload", choices=TORCH_WORKLOADS)
    p.add_argument("--mode", choices=("phases", "window", "trace"), default="phases")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--phase-seconds", type=float, default=2.0)
    p.add_argument("--settle", type=float, default=0.3)
    p.add_argument("--tail", type=float, default=0.0)
    p.add_argument("--ceilings", default="10,25,50,75,90")
    p.add_argument("--chunk-ms", type=float, default=8.0)
    p.add_argument("--chunk", type=int, default=0, help="units per chunk (skips calibration)")
    p.add_argument("--no-set", action="store_true", help="never call gpuslice (a dry run)")
    p.add_argument("--interleave", action="store_true",
                   help="an uncapped phase before every ceiling, not only the first")
    p.add_argument("--warmup-seconds", type=float, default=0.0,
                   help="an unmeasured phase at the ceiling before each capped phase that "
                        "follows an uncapped one")
    p.add_argument("--ready", default="")
    p.add_argument("--go", default="")
    p.add_argument("--stop", default="")
    p.add_argument("--trace-out", default="")
    p.add_argument("--label", default="")
    p.add_argument("--max-seconds", type=float, default=120.0)
    a = p.parse_args(argv)
    # For the driver: whose time to count (gpuslice's file) and which pid NVML lists.
    out(f"tenant {os.getpid()} {os.environ.get('GPUSLICE_TENANT') or '-'}")
    try:
        import torch
    except ImportError as e:
        out(f"error cannot import torch: {e}")
        sys.exit(1)
    if not torch.cuda.is_available():
        out("error torch.cuda.is_available() is False")
        sys.exit(1)
    try:
        launch, kpu = make_work(torch, a.workload)
        r = Runner(torch, a.workload, launch, kpu)
        t_end = time.monotonic() + 0.5  # warm-up: clocks, cuBLAS heuristics, graph upload
        while time.monotonic() < t_end:
            r.chunk(4)
        if a.chunk > 0:
            r.units = a.chunk
            out(f"calib {a.workload} {r.units} 0 {kpu}")
        else:
            r.calibrate(a.chunk_ms)
        if a.mode == "phases":
            r.run_until(time.monotonic() + 1.0)  # one more second of steady work
            worker_phases(r, a)
        elif a.mode == "window":
            worker_window(r, a)
        else:
            worker_trace(r, a)
    except RuntimeError as e:  # CUDA errors surface as RuntimeError in torch
        out("error " + " ".join(str(e).split())[:400])
        sys.exit(1)
    out(f"done {a.workload}")


# --- the driver --------------------------------------------------------------------------

_checks = {"ok": 0, "fail": 0}


def check(cond, text):
    print(("@ok " if cond else "@fail ") + text, flush=True)
    _checks["ok" if cond else "fail"] += 1
    return cond


def key(name, value):
    print(f"@key {name} {value:.6g}" if isinstance(value, float) else f"@key {name} {value}",
          flush=True)


def num(name, value):
    print(f"@num {name} {value:.6g}" if isinstance(value, float) else f"@num {name} {value}",
          flush=True)


def note(text):
    print(f"@note {text}", flush=True)


def ident(workload):
    return workload.replace("-", "_")


def descendants(pid):
    """pid's live descendants, read from /proc (children before grandchildren)."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    found, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(0), []):
            found.append(c)
            todo.append(c)
    return found


def kill_tree(pid):
    """Ends pid and everything under it: SIGTERM, then SIGKILL after 2 s."""
    procs = [pid] + descendants(pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in procs:
            try:
                os.kill(p, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + 2.0
        while sig == signal.SIGTERM and time.monotonic() < deadline:
            if not any(os.path.exists(f"/proc/{p}") and _alive(p) for p in procs):
                return
            time.sleep(0.05)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


LIVE = set()


class Worker:
    """A child process (gpuslice run ... or compute_small) whose output is echoed with a tag
    and kept; it is killed, with everything it started, at its deadline or our exit.
    on_line(line) is called for every line it prints."""

    def __init__(self, tag, argv, env, timeout, on_line=None):
        self.tag, self.argv, self.lines = tag, argv, []
        self.timed_out, self.start_error, self.rc = False, None, None
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
        self.on_line = on_line
        print(f"  [{tag}] $ {' '.join(argv)}", flush=True)
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, env=env)
        except OSError as e:
            self.proc, self.start_error, self.rc = None, str(e), 127
            return
        LIVE.add(self)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            print(f"  [{self.tag}] {line}", flush=True)
            if self.on_line:
                self.on_line(line)

    def running(self):
        if self.proc is None or self.proc.poll() is not None:
            return False
        if time.monotonic() > self.deadline:
            self.kill()
            self.timed_out = True
            return False
        return True

    def wait(self):
        while self.running():
            time.sleep(0.05)
        if self.proc is not None:
            self.rc = self.proc.wait()
            self.reader.join(timeout=5)
            LIVE.discard(self)
        return self.rc

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            kill_tree(self.proc.pid)

    def tagged(self, tag):
        """The words of the lines that start with tag."""
        return [ln.split() for ln in list(self.lines) if ln.startswith(tag + " ")]

    def failure(self):
        """Why this worker did not finish well, or None."""
        if self.start_error:
            return f"cannot start {self.argv[0]}: {self.start_error}"
        if self.timed_out:
            return f"timed out after {self.timeout:.0f} s and was killed"
        errs = [ln[6:] for ln in self.lines if ln.startswith("error ")]
        if errs:
            return errs[0] + (f" (exit {self.rc})" if self.rc else "")
        if self.rc:
            tail = " / ".join(ln.strip() for ln in self.lines[-3:] if ln.strip())[:300]
            return f"exited {self.rc}: {tail}"
        return None


def cleanup():
    for w in list(LIVE):
        w.kill()


def on_signal(sig, _frame):
    cleanup()
    sys.exit(128 + sig)


def wait_for(paths, workers, timeout):
    """Waits until every path exists; returns None, or why not (timeout, a worker ended)."""
    deadline = time.monotonic() + timeout
    while not all(os.path.exists(p) for p in paths):
        for w in workers:
            if not w.running():
                rc = w.wait()
                return f"[{w.tag}] ended before it was ready: {w.failure() or f'exit {rc}'}"
        if time.monotonic() > deadline:
            return f"not ready after {timeout:.0f} s"
        time.sleep(0.02)
    return None


def fmt(v, spec=".1f", none="-"):
    return none if v is None else format(v, spec)


def mean_or_none(v):
    v = [x for x in v if x is not None and x == x]  # neither missing nor NaN
    return statistics.fmean(v) if v else None


# --- verdicts on time shares (pure functions: tests/gpu/selftest.py runs them) -------------

def judge_time_share(what, c, busy, nvml, tol, nvml_what="NVML outside"):
    """The verdict on one ceiling c of a saturating workload from the tenant's busy shares (a)
    and NVML's (b), lists over repeats (None where a repeat gave no figure): both within tol
    points of c and of each other. Returns (kind, text, numbers), kind "ok" or "fail"."""
    a = [x for x in busy if x is not None]
    b = [x for x in nvml if x is not None]
    if not a or not b:
        missing = " and ".join(n for n, v in (("gpuslice's busy share", a), (nvml_what, b))
                               if not v)
        return "fail", f"{what} at --compute {c}: no figure from {missing}", {}
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    ea, eb, d = ma - c, mb - c, ma - mb
    ok_a, ok_b, agree = abs(ea) <= tol, abs(eb) <= tol, abs(d) <= tol
    nums = {"busy": ma, "busy_sem": gm.sem(a), "nvml": mb, "nvml_sem": gm.sem(b),
            "diff": d, "repeats": len(a)}
    text = (f"{what} at --compute {c}: the device's time it held: {ma:.2f}% ± {gm.sem(a):.2f} "
            f"by gpuslice's count, {mb:.2f}% ± {gm.sem(b):.2f} by {nvml_what} "
            f"({len(a)}/{len(b)} windows; ± standard error); they differ by {d:+.2f} "
            f"(agree within ±{tol:g}: {'yes' if agree else 'NO'}); errors {ea:+.2f} and "
            f"{eb:+.2f} points (within ±{tol:g} of {c}: "
            f"{'yes' if ok_a else 'NO'}/{'yes' if ok_b else 'NO'})")
    return ("ok" if ok_a and ok_b and agree else "fail"), text, nums


def ratio_interval(ratios):
    """Mean of the rate ratios and its ~95 % interval (mean ± 2 standard errors; the mean
    itself for one ratio): (mean, lo, hi), or (None, None, None) for none."""
    r = [x for x in ratios if x is not None and x == x]
    if not r:
        return None, None, None
    m = statistics.fmean(r)
    e = 2 * gm.sem(r)
    return m, m - e, m + e


def regime(c, native, tol):
    """How a ceiling c stands to a host-bound workload's native device share (%): "under" its
    ceiling (c >= native + tol: not throttled), "over" it (c <= native - tol: held at c), or
    "between" (held at min(native, c))."""
    if c >= native + tol:
        return "under"
    if c <= native - tol:
        return "over"
    return "between"


def band_interval(diffs):
    """(low, high): mean ± 2 standard errors of diffs (the mean alone for one)."""
    m = statistics.fmean(diffs)
    e = 2 * (gm.sem(diffs) or 0.0) if len(diffs) > 1 else 0.0
    return m - e, m + e


def judge_host_bound(what, c, busy, nvml, native, ratio, tol, under_tol, min_rate):
    """The verdict on one ceiling c of a host-bound workload (small kernels launched one by one)
    against the same workload native (uncapped). Lists over repeats, one entry per capped
    phase (None where it gave no figure): busy = gpuslice's count (a) in % of the device's time,
    nvml = NVML's device utilisation (b, absolute %), native = NVML's utilisation in the
    uncapped phases bracketing that phase (their mean), ratio = its rate over theirs.
    A ceiling bills the time the tenant's kernels run, so with S the native share:
      under   (c >= S + tol): not throttled: (b) within under_tol points of native and (a)
              within tol of (b) (paired differences, each judged on its ~95 % interval, mean
              ± 2 standard errors: failing only when wholly outside the band; (a) not at 100,
              where nothing is billed), and the rate ratio's interval reaching min_rate;
      over    (c <= S - tol): held at its ceiling: (a) and (b) each within tol of c;
      between (otherwise): (a) and (b) each within tol of min(S, c).
    Returns (kind "ok"/"fail", text, numbers)."""
    pairs = [(b, n) for b, n in zip(nvml, native) if b is not None and n is not None]
    a = [x for x in busy if x is not None]
    rm, rlo, rhi = ratio_interval(ratio)
    missing = [n for n, v in (("gpuslice's busy share", a), ("NVML outside", pairs),
                              ("the rate", [rm] if rm is not None else [])) if not v]
    if missing:
        return "fail", f"{what} at --compute {c}: no figure from {' and '.join(missing)}", {}
    b = [x for x, _ in pairs]
    s = statistics.fmean(n for _, n in pairs)
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    dn = statistics.fmean(x - n for x, n in pairs)  # (b) against native, paired
    reg = regime(c, s, tol)
    nums = {"native": s, "nvml": mb, "nvml_sem": gm.sem(b), "busy": ma, "busy_sem": gm.sem(a),
            "nvml_minus_native": dn, "rate_ratio": rm, "rate_lo": rlo, "rate_hi": rhi,
            "repeats": len(pairs)}
    head = (f"{what} at --compute {c} (native {s:.2f}% of the device by NVML: "
            + {"under": "under its ceiling, not throttled",
               "over": "over its ceiling, held at it",
               "between": f"held at min(native, ceiling) = {min(s, c):.2f}%"}[reg]
            + ("; the governor armed, no budget" if c >= 100 else "") + "): ")
    stats = (f"NVML {mb:.2f}% ± {gm.sem(b):.2f}, gpuslice's count {ma:.2f}% ± {gm.sem(a):.2f} "
             f"({len(pairs)}/{len(a)} windows; ± standard error); rate {rm:.4f} of native "
             f"[{rlo:.4f}, {rhi:.4f}] (mean [~95 % interval] of each window's ratio to its "
             f"bracketing uncapped phases)")
    yn = lambda ok: "yes" if ok else "NO"  # noqa: E731
    if reg == "under":
        # The launch rate of a host-bound loop drifts by tens of percent between windows on
        # these VMs (the "drift" column): each difference is judged on its ~95 % interval
        # (mean ± 2 standard errors of the paired differences), failing only when the whole
        # interval lies outside the band.
        dn_lo, dn_hi = band_interval([x - n for x, n in pairs])
        ok_n, ok_r = dn_lo <= under_tol and dn_hi >= -under_tol, rhi >= min_rate
        text = (head + stats + f"; NVML {dn:+.2f} points from native [{dn_lo:+.2f}, "
                f"{dn_hi:+.2f}] (the interval reaches ±{under_tol:g}: {yn(ok_n)}); the rate's "
                f"interval reaches {min_rate:g} of native: {yn(ok_r)}")
        ok = ok_n and ok_r
        if c < 100:
            # At 100 nothing is billed (no budget): the count is 0 by design.
            ab = [x - y for x, y in zip(busy, nvml) if x is not None and y is not None]
            ab_lo, ab_hi = band_interval(ab) if ab else (ma - mb, ma - mb)
            agree = ab_lo <= tol and ab_hi >= -tol
            text += (f"; gpuslice's count {ma - mb:+.2f} from NVML [{ab_lo:+.2f}, "
                     f"{ab_hi:+.2f}] (reaches ±{tol:g}: {yn(agree)})")
            ok = ok and agree
    else:
        e = c if reg == "over" else min(s, c)
        ok_a, ok_b = abs(ma - e) <= tol, abs(mb - e) <= tol
        text = (head + stats + f"; errors from {e:.2f}: {mb - e:+.2f} by NVML, {ma - e:+.2f} by "
                f"gpuslice's count (within ±{tol:g}: {yn(ok_b)}/{yn(ok_a)}; the rate reported, "
                "not judged)")
        ok = ok_a and ok_b
        nums["expected"] = e
    nums["regime"] = reg
    return ("ok" if ok else "fail"), text, nums


def settle_delay(busy_pct, t_c, t_next, level, window, band, step=0.05):
    """Seconds from t_c until the busy share over the `window` s before each point (every
    `step` s) is within `band` points of `level` and stays there until t_next; None if it
    never does. busy_pct(a, b) gives the share over [a, b] (None when unknown)."""
    ends, e = [], t_c + step
    while e <= t_next + 1e-9:
        ends.append(e)
        e += step
    inside = []
    for x in ends:
        v = busy_pct(x - window, x)
        inside.append(v is not None and abs(v - level) <= band)
    for k in range(len(ends)):
        if all(inside[k:]):
            return ends[k] - t_c
    return None


class Driver:
    def __init__(self, a):
        self.a = a
        self.gs = a.gpuslice
        self.env = dict(os.environ, GPUSLICE_BIN=self.gs, BENCH_PARENT_PID=str(os.getpid()),
                        PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
        self.ceilings = {wl: [int(c) for c in ceilings_of(a, wl).split(",")]
                         for wl in SHARE_WORKLOADS}
        self.tmp = tempfile.mkdtemp(prefix="gpuslice-compute.")
        atexit.register(shutil.rmtree, self.tmp, True)
        self.deadline = time.monotonic() + a.budget if a.budget > 0 else None
        self.cpu_sets = cpu_sets(a.cpus)
        if self.cpu_sets:  # keep this process (and its samplers) off the workers' CPUs
            mine = set(os.sched_getaffinity(0)) - {int(c) for cs in self.cpu_sets
                                                   for c in cs.split(",") if c.isdigit()}
            if mine:
                os.sched_setaffinity(0, mine)
        self.nvml = gm.NvmlSampler(not a.no_gpu_samples)
        atexit.register(self.nvml.stop)
        if self.nvml.error:
            note(f"NVML sampling: {self.nvml.error}")
        self.busy = gm.BusySampler()
        atexit.register(self.busy.stop)
        self.pids = {}    # tenant key -> the pid NVML lists
        self.share = {}   # workload -> {"calib", "phases", "error"}
        self.pair = None
        self.set = None
        self.timing = {}

    def tenant_line(self, key):
        """An on_line callback: "tenant PID PATH" starts sampling that tenant's busy time."""
        def cb(line):
            f = line.split(" ", 2)
            if len(f) == 3 and f[0] == "tenant" and f[1].isdigit():
                self.pids[key] = int(f[1])
                if f[2] != "-" and not self.busy.add(key, f[2]):
                    print(f"  [{key}] {self.busy.errors[key]}", flush=True)
        return cb

    def busy_why(self, key):
        """Why there is no busy figure for key."""
        if key in self.busy.errors:
            return self.busy.errors[key]
        if key not in self.pids:
            return "the worker never said which tenant it is"
        return "no readings of its file around the window"

    def window_gpu(self, a, b):
        """NVML over [a, b]: the clock and power means and the utilisation (dict or None)."""
        g = self.nvml.gpu(a, b)
        g["util"] = self.nvml.util_mean(a, b)
        return g

    # -- A and B --
    def share_cmd(self, wl):
        a = self.a
        common = ["--repeats", str(a.repeats), "--phase-seconds", str(a.phase_seconds),
                  "--settle", str(a.settle), "--tail", str(a.tail),
                  "--ceilings", ceilings_of(a, wl), "--chunk-ms", str(a.chunk_ms)] + (
                      ["--interleave"] if a.interleave else []) + (
                      ["--warmup-seconds", str(a.warmup_seconds)] if a.warmup_seconds > 0 else [])
        if wl in CUDA_WORKLOADS:
            prog = [a.compute_small, "stream" if wl == "cuda-small" else "graph"] + common
        else:
            prog = [sys.executable, SELF, "worker", wl, "--mode", "phases"] + common
        return [self.gs, "run", "--name", f"bench-{wl}", "--compute", "100", "--"] + self.pin(prog)

    def pin(self, argv, slot=0):
        """argv under taskset -c with the CPUs of slot (0 or 1: the two tenants of the pair)
        when --cpus asks for it and taskset exists."""
        cpus = self.cpu_sets[slot] if slot < len(self.cpu_sets) else ""
        if cpus and shutil.which("taskset"):
            return ["taskset", "-c", cpus] + argv
        return argv

    def limit(self, timeout):
        """timeout, cut to what is left of --budget."""
        if self.deadline is None:
            return timeout
        return max(5.0, min(timeout, self.deadline - time.monotonic()))

    def estimate(self, section):
        """Seconds a section is expected to take on an H200 (start-up included)."""
        a = self.a
        if section in SHARE_WORKLOADS:
            nphase, nwarm = self.phases_per_worker(section), self.warmups_per_worker(section)
            start = 4 if section in CUDA_WORKLOADS else 12  # torch's import and warm-up
            return (nphase * (a.settle + a.phase_seconds + a.tail + 0.05)
                    + nwarm * (a.warmup_seconds + 0.05) + start)
        if section == "pair":
            return a.pair_alone_seconds + a.pair_seconds + 25
        return a.set_alone + a.set_hold * len(self.set_steps) + 15

    def phases_per_worker(self, wl):
        n = len(self.ceilings[wl])
        return self.a.repeats * (2 * n if self.a.interleave else n + 1) + 1

    def warmups_per_worker(self, wl):
        """Warm-up phases (--warmup-seconds): one before each capped phase after an uncapped
        one."""
        if self.a.warmup_seconds <= 0:
            return 0
        return self.a.repeats * (len(self.ceilings[wl]) if self.a.interleave else 1)

    def run_share(self, wl):
        a = self.a
        expected = self.estimate(wl)
        res = {"calib": None, "phases": [], "error": None}
        self.share[wl] = res
        if wl in CUDA_WORKLOADS and not (a.compute_small and os.access(a.compute_small, os.X_OK)):
            res["error"] = f"compute_small not built ({a.compute_small or 'no path'})"
            return
        w = Worker(wl, self.share_cmd(wl), self.env, self.limit(120 + 1.5 * expected),
                   self.tenant_line(wl))
        w.wait()
        for f in w.tagged("calib"):
            res["calib"] = {"units": int(f[2]), "chunk_ms": float(f[3]),
                            "kernels_per_unit": int(f[4])}
        for f in w.tagged("phase"):
            ph = {"repeat": int(f[2]), "label": f[3], "rate": float(f[4]),
                  "window_s": float(f[5]), "chunks": int(f[6]), "set_ms": float(f[7])}
            if len(f) >= 10:
                wa, wb = float(f[8]), float(f[9])
                ph["window"] = (wa, wb)
                ph["gpu"] = self.window_gpu(wa, wb)
                ph["busy_pct"] = self.busy.pct(wl, wa, wb)
            res["phases"].append(ph)
        res["error"] = w.failure()

    def share_results(self, wl):
        """Per ceiling, lists over repeats (one entry per capped phase): gpuslice's busy % (a),
        NVML's utilisation (b, absolute), NVML's utilisation in the uncapped phases bracketing
        the phase ("native", their mean), the rate over theirs ("ratio"), the SM clock and
        power; and the uncapped phases."""
        phases = self.share[wl]["phases"]
        uncapped = [i for i, p in enumerate(phases) if p["label"].startswith("none")]
        out = {c: {"busy": [], "nvml": [], "native": [], "ratio": [], "mhz": [], "w": []}
               for c in self.ceilings[wl]}

        def util(p):
            u = (p.get("gpu") or {}).get("util")
            return None if u is None else u["pct"]
        for i, p in enumerate(phases):
            if p["label"].startswith("none") or not p["label"].isdigit():
                continue  # uncapped, or a warm-up
            c = int(p["label"])
            if c not in out:
                continue
            before = [j for j in uncapped if j < i]
            after = [j for j in uncapped if j > i]
            refs = ([before[-1]] if before else []) + (
                [after[0]] if after and (self.a.alone == "bracket" or not before) else [])
            ref_rate = mean_or_none([phases[j]["rate"] for j in refs])
            p["native_nvml"] = mean_or_none([util(phases[j]) for j in refs])
            p["ratio"] = (p["rate"] / ref_rate if ref_rate and p["rate"] == p["rate"]
                          else None)
            p["achieved"] = None if p["ratio"] is None else 100.0 * p["ratio"]
            p["nvml_share"] = util(p)
            o = out[c]
            o["busy"].append(p.get("busy_pct"))
            o["nvml"].append(p["nvml_share"])
            o["native"].append(p["native_nvml"])
            o["ratio"].append(p["ratio"])
            o["mhz"].append((p.get("gpu") or {}).get("sm_mhz"))
            o["w"].append((p.get("gpu") or {}).get("power_w"))
        alone = [phases[i] for i in uncapped]
        return alone, out

    def verdict(self, wl, c, o):
        """judge_host_bound or judge_time_share on one ceiling's lists: (kind, text, nums)."""
        a = self.a
        if wl in HOST_BOUND:
            return judge_host_bound(wl, c, o["busy"], o["nvml"], o["native"], o["ratio"],
                                    a.tolerance, a.under_tolerance, a.min_rate)
        return judge_time_share(wl, c, o["busy"], o["nvml"], a.tolerance)

    def judge_share(self, wl):
        a, res = self.a, self.share[wl]
        alone, per = self.share_results(wl)
        worst = None
        res["verdicts"] = {}
        for c in self.ceilings[wl]:
            o = per[c]
            if not o["busy"]:
                check(False, f"{wl} at --compute {c}: no measurement "
                             f"({res['error'] or 'the worker printed no phase for it'})")
                continue
            kind, text, nums = self.verdict(wl, c, o)
            res["verdicts"][str(c)] = {"kind": kind, **nums}
            if all(x is None for x in o["busy"]):
                text += f" [gpuslice: {self.busy_why(wl)}]"
            if all(x is None for x in o["nvml"]):
                text += f" [NVML: {self.nvml.error or 'no samples inside the windows'}]"
            elif wl in HOST_BOUND and all(x is None for x in o["native"]):
                text += " [NVML: no utilisation in the uncapped phases to compare with]"
            rm, rlo, rhi = ratio_interval(o["ratio"])
            mhz, w = mean_or_none(o["mhz"]), mean_or_none(o["w"])
            if wl not in HOST_BOUND:
                text += (f"; throughput {fmt(None if rm is None else 100 * rm, '.1f')}% of "
                         "uncapped")
            text += f" at {fmt(mhz, '.0f')} MHz, {fmt(w, '.0f')} W"
            check(kind == "ok", text)
            for k, v in nums.items():
                if isinstance(v, (int, float)):
                    num(f"{ident(wl)}_{c}_{k}", v)
            if rm is not None:
                num(f"{ident(wl)}_{c}_throughput", 100.0 * rm)
            if wl in HOST_BOUND and nums:
                if nums["regime"] == "under":
                    key(f"{ident(wl)}_{c}_rate_vs_native", round(rm, 4))
                    continue
                targets = (nums.get("busy"), nums.get("nvml"))
                c_eff = nums["expected"]
            else:
                targets, c_eff = (nums.get("busy"), nums.get("nvml")), c
            for e in targets:
                if e is not None and (worst is None or abs(e - c_eff) > abs(worst)):
                    worst = e - c_eff
        if worst is not None:
            key(f"{ident(wl)}_worst_err_pts", round(worst, 2))
        rates = [p["rate"] for p in alone if p["rate"] == p["rate"]]
        if rates:
            spread = max(rates) / min(rates) - 1 if min(rates) > 0 else 0.0
            num(f"{ident(wl)}_alone_rate", statistics.fmean(rates))
            num(f"{ident(wl)}_alone_drift_pct", 100.0 * spread)
            util = mean_or_none([((p.get("gpu") or {}).get("util") or {}).get("pct")
                                 for p in alone])
            if util is not None:
                num(f"{ident(wl)}_alone_nvml_util", util)
        if res["error"] and any(per[c]["busy"] for c in self.ceilings[wl]):
            check(False, f"{wl}: {res['error']}")

    # -- C --
    def gemm_worker(self, tag, name, compute, extra, timeout, slot=0, on_line=None):
        cmd = [self.gs, "run", "--name", name, "--compute", str(compute), "--"] + self.pin(
            [sys.executable, SELF, "worker", "gemm"] + extra, slot)
        return Worker(tag, cmd, self.env, self.limit(timeout), on_line)

    def run_pair(self):
        a = self.a
        res = {"alone": None, "tenants": [], "error": None}
        self.pair = res
        d = os.path.join(self.tmp, "pair")
        os.makedirs(d)
        # alone: one uncapped process, same script
        ready, go = os.path.join(d, "alone.ready"), os.path.join(d, "alone.go")
        w = self.gemm_worker("pair-alone", f"bench-pair-alone-{os.getpid()}", 100,
                             ["--mode", "window", "--ready", ready, "--go", go,
                              "--label", "alone", "--chunk-ms", str(a.chunk_ms)], 180)
        why = wait_for([ready], [w], 150)
        if why:
            w.kill()
            w.wait()
            res["error"] = f"alone: {why}"
            return
        touch(go, f"{time.monotonic() + 0.2} {a.settle + 0.2} {a.pair_alone_seconds} 0")
        w.wait()
        rows = w.tagged("window")
        calib = w.tagged("calib")
        if not rows or w.failure():
            res["error"] = f"alone: {w.failure() or 'no window line'}"
            return
        res["alone"] = float(rows[0][3])
        if len(rows[0]) >= 8:
            res["alone_gpu"] = self.window_gpu(float(rows[0][6]), float(rows[0][7]))
        units = int(calib[0][2]) if calib else 1
        # both tenants from one barrier
        go = os.path.join(d, "pair.go")
        workers, readies = [], []
        for k, c in enumerate(self.pair_ceilings):
            ready = os.path.join(d, f"{k}.ready")
            readies.append(ready)
            workers.append((k, c, self.gemm_worker(
                f"pair-{c}", f"bench-pair-{k}-{c}-{os.getpid()}", c,
                ["--mode", "window", "--ready", ready, "--go", go, "--label", str(c),
                 "--chunk", str(units)], 240, slot=k, on_line=self.tenant_line(f"pair-{k}"))))
        why = wait_for(readies, [w for _, _, w in workers], 150)
        if why:
            for _, _, w in workers:
                w.kill()
                w.wait()
            res["error"] = f"pair: {why}"
            return
        t0 = time.monotonic() + 0.3
        settle = max(a.settle, 0.5)
        # Both work on past the window for a whole NVML sample period and more.
        touch(go, f"{t0} {settle} {a.pair_seconds} {max(a.tail, 0.4)}")
        res["window"] = win = (t0 + settle, t0 + settle + a.pair_seconds)
        for k, c, w in workers:
            w.wait()
            rows = w.tagged("window")
            pid = self.pids.get(f"pair-{k}")
            res["tenants"].append({
                "ceiling": c, "rate": float(rows[0][3]) if rows else None,
                "chunks": int(rows[0][5]) if rows else 0, "error": w.failure(), "pid": pid,
                "busy_pct": self.busy.pct(f"pair-{k}", *win),
                "busy_why": self.busy_why(f"pair-{k}"),
                "nvml": None if pid is None else self.nvml.proc_mean(pid, *win)})
        res["pair_gpu"] = self.window_gpu(*win)

    def judge_pair(self):
        a, res = self.a, self.pair
        if res["error"]:
            for c in self.pair_ceilings:
                check(False, f"two tenants, --compute {c}: not measured ({res['error']})")
            return
        key("pair_alone_gemm_per_s", round(res["alone"], 2))
        g0, g1 = res.get("alone_gpu") or {}, res.get("pair_gpu") or {}
        total = 0.0
        for t in res["tenants"]:
            c = t["ceiling"]
            nv = t["nvml"]
            # Two processes time-sliced on one GPU: NVML's per-process samples give each the
            # busy time of the slices it was in (both read ~98 % on the H200), so they cannot
            # split the device's time. Here the second measure is throughput: the GPU is
            # contended, both run at one clock, so throughput shares are time shares.
            b = t["busy_pct"]
            text = (f"two tenants at once, the tenant at --compute {c}: the device's time it "
                    f"held by gpuslice's count {fmt(b, '.2f')}%, error "
                    f"{'?' if b is None else format(b - c, '+.2f')} points (within "
                    f"±{a.tolerance:g}); NVML's per-process samples (not judged: time-slicing) "
                    f"{'none' if nv is None else format(nv['pct'], '.2f') + '%'}")
            if b is None:
                text += f" [gpuslice: {t['busy_why']}]"
            check(b is not None and abs(b - c) <= a.tolerance, text)
            if b is not None:
                num(f"pair_{c}_busy", b)
            if nv is not None:
                num(f"pair_{c}_nvml_per_process", nv["pct"])
            if t["rate"] is None:
                check(False, f"two tenants, --compute {c}: no throughput ({t['error']})")
                continue
            ach = 100.0 * t["rate"] / res["alone"]
            t["achieved"] = ach
            total += ach
            key(f"pair_{c}_achieved", round(ach, 2))
            check(abs(ach - c) <= a.tolerance,
                  f"two tenants at once, --compute {c}: throughput {ach:.2f}% of the GEMM alone "
                  f"({t['rate']:.1f} vs {res['alone']:.1f} GEMM/s; the GPU is contended, so "
                  f"both run at one clock: {fmt(g1.get('sm_mhz'), '.0f')} MHz, "
                  f"{fmt(g1.get('power_w'), '.0f')} W; alone {fmt(g0.get('sm_mhz'), '.0f')} MHz, "
                  f"{fmt(g0.get('power_w'), '.0f')} W), error {ach - c:+.2f} points "
                  f"(within ±{a.tolerance:g})")
            if t["error"]:
                check(False, f"two tenants, --compute {c}: {t['error']}")
        res["sum"] = total
        num("pair_sum_achieved", total)

    # -- D --
    def run_set(self):
        a = self.a
        name = f"bench-set-{os.getpid()}"
        d = os.path.join(self.tmp, "set")
        os.makedirs(d)
        ready, stop, trace = (os.path.join(d, x) for x in ("ready", "stop", "trace.json"))
        res = {"name": name, "events": [], "error": None, "alone": None}
        self.set = res
        total = a.set_alone + a.set_hold * (1 + len(self.set_steps)) + 5
        w = self.gemm_worker("set", name, 100,
                             ["--mode", "trace", "--ready", ready, "--stop", stop,
                              "--trace-out", trace, "--chunk-ms", str(a.set_chunk_ms),
                              "--max-seconds", str(total + 30)], total + 150,
                             on_line=self.tenant_line("set"))
        why = wait_for([ready], [w], 150)
        if why:
            w.kill()
            w.wait()
            res["error"] = why
            return
        t_alone = time.monotonic()
        time.sleep(a.set_alone)
        res["alone_window"] = (t_alone + a.settle, time.monotonic())
        for target in self.set_steps:
            t0 = time.monotonic()
            rc, so, se = cli(["set", name, "--compute", str(target)])
            t1 = time.monotonic()
            res["events"].append({"target": target, "t_set": t0, "set_ms": (t1 - t0) * 1e3,
                                  "rc": rc, "msg": " ".join((se or so).split())[:300]})
            if rc != 0:
                res["error"] = (f"gpuslice set {name} --compute {target} exited {rc}: "
                                f"{res['events'][-1]['msg']}")
                break
            time.sleep(max(0.0, t0 + a.set_hold - time.monotonic()))
        res["t_end"] = time.monotonic()
        time.sleep(0.3)  # a whole NVML sample period past the last window
        touch(stop)
        w.wait()
        if w.failure() and not res["error"]:
            res["error"] = w.failure()
        try:
            with open(trace) as f:
                doc = json.load(f)
            res["trace"] = Trace()
            for t, x in zip(doc["t"], doc["w"]):
                res["trace"].add(t, x)
            res["chunk_units"] = doc["units"]
        except (OSError, ValueError, KeyError) as e:
            res["error"] = res["error"] or f"no trace from the worker ({e})"

    def judge_set(self):
        a, res = self.a, self.set
        tr = res.get("trace")
        evs = res["events"]
        if tr is None or len(tr.t) < 10 or not evs:
            for ev_from, ev_to in self.set_changes():
                check(False, f"gpuslice set {ev_from} -> {ev_to}: not measured "
                             f"({res['error'] or 'too few chunk completions'})")
            return
        alone = tr.rate(*res["alone_window"])
        res["alone"] = alone
        if alone:
            key("set_alone_gemm_per_s", round(alone, 2))
        busy = lambda x0, x1: self.busy.pct("set", x0, x1)  # noqa: E731
        res["changes"] = []
        for i, ev in enumerate(evs):
            t_c = ev["t_set"]
            t_next = evs[i + 1]["t_set"] if i + 1 < len(evs) else res["t_end"]
            prev = evs[i - 1]["target"] if i else "none"
            win = a.set_window
            steady = (min(t_c + 1.0, t_next - 0.5), t_next)
            level_busy = busy(*steady)
            nv = self.nvml.util_mean(*steady)
            gpu = self.nvml.gpu(*steady)
            thr = 100.0 * (tr.rate(*steady) or 0.0) / alone if alone else None
            delay = settle_delay(busy, t_c, t_next, ev["target"], win, a.set_band)
            delay_level = (settle_delay(busy, t_c, t_next, level_busy, win, a.set_band)
                           if level_busy is not None else None)
            series = []
            for k in range(-6, 31):
                x = t_c + 0.05 * k
                if x <= t_next:
                    v = busy(x - 0.05, x)
                    series.append(None if v is None else round(v, 1))
            ch = {"from": prev, "to": ev["target"], "delay_s": delay,
                  "delay_to_level_s": delay_level, "set_ms": ev["set_ms"],
                  "busy_pct": level_busy, "nvml_pct": None if nv is None else nv["pct"],
                  "throughput_pct": thr, "gpu": gpu, "series_busy_50ms": series}
            res["changes"].append(ch)
            print(f"set {prev} -> {ev['target']}: gpuslice busy % in 50 ms windows from 0.3 s "
                  f"before the change: {' '.join(str(x) for x in series)}", flush=True)
            if i < self.set_first_judged:
                continue
            tag = f"{prev}_to_{ev['target']}"
            if delay is not None:
                key(f"set_{tag}_delay_s", round(delay, 3))
            if delay_level is not None:
                num(f"set_{tag}_delay_to_level_s", round(delay_level, 3))
            num(f"set_{tag}_cli_ms", round(ev["set_ms"], 1))
            check(delay is not None and delay < a.set_deadline,
                  f"gpuslice set {prev} -> {ev['target']}: the tenant's busy share over "
                  f"{win * 1e3:.0f} ms windows is within ±{a.set_band:g} points of "
                  f"{ev['target']}% "
                  + (f"{delay:.2f} s after the command started and stays there"
                     if delay is not None else "at no point before the next change")
                  + f" (deadline {a.set_deadline:g} s; the command took {ev['set_ms']:.0f} ms)")
            kind, text, nums = judge_time_share(
                f"gpuslice set {prev} -> {ev['target']}, held from 1 s after the change,",
                ev["target"], [level_busy], [None if nv is None else nv["pct"]], a.tolerance)
            if level_busy is None:
                text += f" [gpuslice: {self.busy_why('set')}]"
            if nv is None:
                text += f" [NVML: {self.nvml.error or 'no samples inside the window'}]"
            text += (f"; throughput {fmt(thr, '.1f')}% of alone at {fmt(gpu['sm_mhz'], '.0f')} "
                     f"MHz, {fmt(gpu['power_w'], '.0f')} W (reported, not judged)")
            check(kind == "ok", text)
            for k_, v in nums.items():
                num(f"set_{tag}_{k_}", v)
        if res["error"]:
            check(False, f"gpuslice set: {res['error']}")

    def set_changes(self):
        """The (from, to) changes that are judged."""
        prev, out_ = "none", []
        for i, s in enumerate(self.set_steps):
            if i >= self.set_first_judged:
                out_.append((prev, s))
            prev = s
        return out_

    # -- report --
    def markdown(self):
        a = self.a
        md = []
        if self.share:
            md += ["## Compute ceilings: the share of the device's time the tenant held", "",
                   f"Per workload and ceiling, over {a.repeats} repeat(s)"
                   + (" (an uncapped phase before each ceiling)" if a.interleave else "")
                   + f" of {a.phase_seconds:g} s windows ({a.settle:g} s after `gpuslice set` "
                   f"and {a.tail:g} s before the next change left out"
                   + (f"; {a.warmup_seconds:g} s at the ceiling before each after an uncapped "
                      "phase" if a.warmup_seconds > 0 else "") + ")"
                   + (f"; workers pinned to CPUs {' / '.join(self.cpu_sets)}"
                      if self.cpu_sets else "")
                   + ". A ceiling bills the time the tenant's kernels run. NVML = the device's "
                   f"utilisation sampled outside the tenant ({self.nvml.method or 'unavailable'}"
                   "), absolute; native = the same in the uncapped phases bracketing each "
                   "window; gpuslice = the tenant's own count (`compute_busy_ns`, read every "
                   "5 ms); rate = each window's rate over its bracketing uncapped phases' mean, "
                   "mean [~95 % interval: ± 2 standard errors] over repeats. Mean ± standard "
                   "error.", "",
                   f"Pass, saturating workloads (GEMM, graphs): NVML and gpuslice each within "
                   f"±{a.tolerance:g} points of the ceiling and of each other. Host-bound "
                   "workloads (small kernels launched one by one), by their native share S: "
                   f"under their ceiling (c ≥ S + {a.tolerance:g}) not throttled: NVML within "
                   f"±{a.under_tolerance:g} of native, gpuslice within ±{a.tolerance:g} of "
                   f"NVML, the rate's interval reaching {a.min_rate:g} of native; over it "
                   f"(c ≤ S − {a.tolerance:g}): both within ±{a.tolerance:g} of c; between: "
                   f"both within ±{a.tolerance:g} of min(S, c). The 100 row: the governor "
                   "armed with no budget, against native.", ""]
            for wl, res in self.share.items():
                alone, per = self.share_results(wl)
                unit = UNIT.get(wl, "kernels/s")
                rates = [p["rate"] for p in alone if p["rate"] == p["rate"]]
                al = f"{statistics.fmean(rates):.4g} {unit}" if rates else "-"
                if wl == "gemm" and rates:
                    al += f" ({statistics.fmean(rates) * 2 * GEMM_N ** 3 / 1e12:.0f} TFLOP/s)"
                ug = [(p.get("gpu") or {}) for p in alone]
                au = mean_or_none([(g.get("util") or {}).get("pct") for g in ug])
                md += [f"### {DESCRIBE[wl]}", "",
                       f"Native (uncapped): {al}, NVML {fmt(au)}% of the device, "
                       f"{fmt(mean_or_none([g.get('sm_mhz') for g in ug]), '.0f')} MHz, "
                       f"{fmt(mean_or_none([g.get('power_w') for g in ug]), '.0f')} W.", "",
                       "| ceiling | expected | native NVML % | NVML % capped | gpuslice % | "
                       "rate vs native | verdict |", "|---|---|---|---|---|---|---|"]
                for c in self.ceilings[wl]:
                    o = per[c]
                    if not o["busy"]:
                        md.append(f"| {c}% | | | | | | not measured |")
                        continue
                    kind, _, nums = self.verdict(wl, c, o)
                    rm, rlo, rhi = ratio_interval(o["ratio"])
                    rate = ("-" if rm is None else
                            f"{100 * rm:.1f}% [{100 * rlo:.1f}, {100 * rhi:.1f}]")
                    nat = mean_or_none(o["native"])
                    if wl in HOST_BOUND and nums:
                        exp = {"under": "native (not throttled)", "over": f"{c}%",
                               "between": f"{nums.get('expected', 0):.1f}%"}[nums["regime"]]
                    else:
                        exp = f"{c}%"
                    bcell = (f"{nums['busy']:.1f} ± {nums['busy_sem']:.1f}" if nums else
                             fmt(mean_or_none(o["busy"])))
                    ncell = (f"{nums['nvml']:.1f} ± {nums['nvml_sem']:.1f}" if nums else
                             fmt(mean_or_none(o["nvml"])))
                    md.append(f"| {c}%{' (armed, no budget)' if c >= 100 else ''} | {exp} | "
                              f"{fmt(nat)} | {ncell} | {bcell} | {rate} | "
                              f"{'ok' if kind == 'ok' else '**FAIL**'} |")
                if res["error"]:
                    md.append(f"\nerror: {res['error'][:300]}")
                md.append("")
            md += ["Details: chunk = units launched between synchronisations; drift = spread "
                   "of the uncapped throughput over the run; `set` = median time of "
                   "`gpuslice set`.", "",
                   "| workload | chunk | chunk ms | drift | `set` ms |", "|---|---|---|---|---|"]
            for wl, res in self.share.items():
                alone, _ = self.share_results(wl)
                cal = res["calib"] or {}
                rates = [p["rate"] for p in alone if p["rate"] == p["rate"] and p["rate"] > 0]
                drift = f"{100 * (max(rates) / min(rates) - 1):.1f}%" if rates else "-"
                sets = [p["set_ms"] for p in res["phases"]]
                chunk = str(cal.get("units", "-"))
                if cal.get("kernels_per_unit", 1) > 1:
                    chunk += f" × {cal['kernels_per_unit']}"
                md.append(f"| {wl} | {chunk} | {fmt(cal.get('chunk_ms'))} | {drift} | "
                          f"{fmt(statistics.median(sets) if sets else None)} |")
            md.append("")
        if self.pair:
            res = self.pair
            g0, g1 = res.get("alone_gpu") or {}, res.get("pair_gpu") or {}
            md += ["## Two tenants on one device", "",
                   f"Both run the {GEMM_N}³ fp16 GEMM, started from one barrier and measured over "
                   f"the same {a.pair_seconds:g} s window: the share of the device's time each "
                   "held by (a) gpuslice's count and (b) NVML's per-process samples, and its "
                   "throughput ÷ the GEMM alone (one uncapped process just before: "
                   f"{fmt(res['alone'], '.1f')} GEMM/s at {fmt(g0.get('sm_mhz'), '.0f')} MHz, "
                   f"{fmt(g0.get('power_w'), '.0f')} W; during the pair "
                   f"{fmt(g1.get('sm_mhz'), '.0f')} MHz, {fmt(g1.get('power_w'), '.0f')} W). "
                   f"Pass: (a) and the throughput each within ±{a.tolerance:g} points of the "
                   "ceiling: the GPU is contended and both run at one clock, so throughput "
                   "shares are time shares; NVML's per-process samples cannot split time-sliced "
                   "work (each process reads as busy in every slice it was in) and are shown, "
                   "not judged.", "",
                   "| tenant | (a) gpuslice busy % | (b) NVML per-process % | GEMM/s | "
                   "throughput % of alone | verdict |", "|---|---|---|---|---|---|"]
            for t in res["tenants"]:
                c = t["ceiling"]
                nv = None if t["nvml"] is None else t["nvml"]["pct"]
                b, ach = t["busy_pct"], t.get("achieved")
                ok = (b is not None and abs(b - c) <= a.tolerance and ach is not None and
                      abs(ach - c) <= a.tolerance)
                md.append(f"| `--compute {c}` | {fmt(t['busy_pct'], '.2f')} | {fmt(nv, '.2f')} | "
                          f"{fmt(t['rate'])} | {fmt(ach, '.2f')} | "
                          f"{'ok' if ok else '**FAIL**'} |")
            if res.get("sum") is not None:
                md.append(f"| both | | | | {res['sum']:.2f} | |")
            if res["error"]:
                md.append(f"\nnot measured: {res['error']}")
            md.append("")
        if self.set:
            res = self.set
            md += ["## Changing a running tenant's ceiling", "",
                   f"A GEMM tenant (chunks of ~{a.set_chunk_ms:g} ms); `gpuslice set {res['name']} "
                   f"--compute P` at a known time. Delay = from the command's start until the "
                   f"tenant's busy share over {a.set_window * 1e3:.0f} ms windows is within "
                   f"±{a.set_band:g} points of P and stays there until the next change (so it "
                   f"includes the window's length); pass under {a.set_deadline:g} s. Then the "
                   "level held from 1 s after the change until the next: (a) gpuslice's busy "
                   "share, (b) NVML's utilisation, each within "
                   f"±{a.tolerance:g} of P and of each other; the throughput (÷ the first "
                   f"{a.set_alone:g} s uncapped, {fmt(res['alone'], '.1f')} GEMM/s) with the SM "
                   "clock and power, not judged.", "",
                   "| change | delay s | to its level s | `gpuslice set` ms | (a) busy % | "
                   "(b) NVML % | throughput % | SM MHz | W | verdict |",
                   "|---|---|---|---|---|---|---|---|---|---|"]
            for i, ch in enumerate(res.get("changes", [])):
                judged = i >= self.set_first_judged
                kind, _, _ = judge_time_share("", ch["to"], [ch["busy_pct"]], [ch["nvml_pct"]],
                                              a.tolerance)
                ok = kind == "ok" and ch["delay_s"] is not None and ch["delay_s"] < a.set_deadline
                g = ch["gpu"]
                md.append(f"| {ch['from']} → {ch['to']} | {fmt(ch['delay_s'], '.2f', 'never')} | "
                          f"{fmt(ch['delay_to_level_s'], '.2f', 'never')} | {ch['set_ms']:.0f} | "
                          f"{fmt(ch['busy_pct'])} | {fmt(ch['nvml_pct'])} | "
                          f"{fmt(ch['throughput_pct'])} | {fmt(g['sm_mhz'], '.0f')} | "
                          f"{fmt(g['power_w'], '.0f')} | "
                          f"{('ok' if ok else '**FAIL**') if judged else '(setup)'} |")
            if res["error"]:
                md.append(f"\nerror: {res['error']}")
            md.append("")
        return "\n".join(md)

    def picture(self, base):
        """The host-bound workloads' picture at base + .svg (and .png): see picture()."""
        try:
            return picture(self.as_json()["share"], base + ".svg")
        except OSError as e:
            note(f"cannot write {base}.svg: {e}")
            return []

    def as_json(self):
        share = {}
        for wl, res in self.share.items():
            alone, per = self.share_results(wl)
            share[wl] = {"calib": res["calib"], "phases": res["phases"], "error": res["error"],
                         "ceilings": self.ceilings[wl],
                         "per_ceiling": {str(c): v for c, v in per.items()},
                         "verdicts": res.get("verdicts", {})}
        st = None
        if self.set:
            st = {k: v for k, v in self.set.items() if k not in ("trace", "alone_window")}
        return {"options": vars(self.a), "cpu_sets": self.cpu_sets, "timing_s": self.timing,
                "nvml_method": self.nvml.method, "nvml_error": self.nvml.error,
                "nvml_sample_period_s": self.nvml.sample_period,
                "share": share, "pair": self.pair, "set": st}

    def main(self):
        a = self.a
        sel = self.sections
        est = sum(self.estimate(s) for s in sel)
        per = "; ".join(
            f"{wl} at {','.join(map(str, self.ceilings[wl]))}: {self.phases_per_worker(wl)} "
            f"phases" + (f" + {self.warmups_per_worker(wl)} warm-ups of "
                         f"{a.warmup_seconds:g} s" if self.warmups_per_worker(wl) else "")
            + f", ~{self.estimate(wl):.0f} s" for wl in sel if wl in SHARE_WORKLOADS)
        print(f"compute_share: sections {','.join(sel)}; {a.repeats} repeats"
              + (", interleaved" if a.interleave else "")
              + f", phases of {a.settle:g}+{a.phase_seconds:g}+{a.tail:g} s"
              + (f" ({per})" if per else "")
              + f"; CPUs {' / '.join(self.cpu_sets) or 'not pinned'}; NVML "
              f"{self.nvml.method or 'unavailable'}; expected duration {est:.0f} s"
              + (f" (budget {a.budget:g} s)" if a.budget > 0 else "") + f"; gpuslice {self.gs}",
              flush=True)
        t_all = time.monotonic()
        titles = {"pair": f"GEMM alone, then --compute "
                          f"{' and '.join(map(str, self.pair_ceilings))} at once",
                  "set": f"none -> {' -> '.join(map(str, self.set_steps))} while running"}
        for sec in sel:
            left = None if self.deadline is None else self.deadline - time.monotonic()
            if left is not None and self.estimate(sec) > left:
                check(False, f"{sec}: not run: it takes about {self.estimate(sec):.0f} s and "
                             f"{max(0.0, left):.0f} s of the --budget are left")
                continue
            t0 = time.monotonic()
            print(f"--- {sec}: {DESCRIBE.get(sec) or titles[sec]} ---", flush=True)
            if sec == "pair":
                self.run_pair()
                self.judge_pair()
            elif sec == "set":
                self.run_set()
                self.judge_set()
            else:
                self.run_share(sec)
                self.judge_share(sec)
            self.timing[sec] = round(time.monotonic() - t0, 1)
            print(f"--- {sec}: {self.timing[sec]} s ---", flush=True)
        self.timing["total"] = round(time.monotonic() - t_all, 1)
        num("compute_share_seconds", self.timing["total"])
        if self.nvml.sample_period:
            num("nvml_util_sample_period_ms", round(self.nvml.sample_period * 1e3, 1))
        md = ("# gpuslice compute ceilings\n\n" + self.markdown()
              + "\nSeconds per section: " + ", ".join(f"{k} {v}" for k, v in self.timing.items())
              + "\n")
        print()
        print(md, flush=True)
        table = a.table or (os.path.join(os.environ["OUT"], "bench-compute.md")
                            if os.environ.get("OUT") else "")
        if table:
            try:
                os.makedirs(os.path.dirname(os.path.abspath(table)), exist_ok=True)
                with open(table, "w") as f:
                    f.write(md)
                base = table[:-3] if table.endswith(".md") else table
                with open(base + ".json", "w") as f:
                    json.dump(self.as_json(), f, indent=1, default=str)
                    f.write("\n")
                print(f"wrote {table} and {base}.json", flush=True)
                pics = self.picture(base)
                if pics:
                    print(f"wrote {' and '.join(pics)}", flush=True)
            except OSError as e:
                note(f"cannot write {table}: {e}")
        print(f"compute_share: {_checks['ok']} passed, {_checks['fail']} failed, "
              f"{self.timing['total']} s", flush=True)
        return 1 if _checks["fail"] or not _checks["ok"] else 0


def picture(share, svg):
    """The host-bound workloads' rate against native and share of the device by ceiling, from
    the "share" part of this script's JSON (per workload "ceilings" and "verdicts"), as SVG at
    svg and PNG beside it where rsvg-convert is on PATH. Returns the files written."""
    import svgplot
    wls = [wl for wl in HOST_BOUND if (share.get(wl) or {}).get("verdicts")]
    if not wls:
        return []
    rate, held = [], []
    xs = set()
    for wl in wls:
        v = share[wl]["verdicts"]
        cs = sorted(int(c) for c in v if v[c].get("rate_ratio") is not None)
        xs.update(cs)
        pts = lambda k, f=1.0: [(c, f * v[str(c)][k]) for c in cs]  # noqa: E731
        rate += [(f"{wl}: rate, % of native", pts("rate_ratio", 100.0)),
                 (f"{wl}: its ~95 % interval's upper end", pts("rate_hi", 100.0))]
        held += [(f"{wl}: NVML, capped", pts("nvml")), (f"{wl}: gpuslice's count", pts("busy")),
                 (f"{wl}: NVML, native", pts("native"))]
    if not xs:
        return []
    xs = sorted(xs)
    lo, hi = min(xs), max(xs)
    rate.append(("the bar: 97 % of native", [(lo, 97.0), (hi, 97.0)]))
    held.append(("the ceiling", [(c, float(c)) for c in xs]))
    page = svgplot.Page(900, 760, "compute_share: small kernels launched one by one under "
                                  "--compute P (a ceiling bills the time kernels run)")
    lab = lambda v: f"{v:g}%"  # noqa: E731
    rmin = min([y for _, pts in rate for _, y in pts] + [90.0])
    page.panel(10, 40, 880, 330, "rate under the ceiling, % of native (mean over repeats)",
               rate, unit="percent", xlabel=lab, xticks=xs,
               ymin=max(0.0, 10 * ((rmin - 5) // 10)),
               ymax=105.0, xmin=lo, xmax=hi)
    page.panel(10, 390, 880, 360, "share of the device's time, % (NVML outside; gpuslice's "
               "own count)", held, unit="percent", xlabel=lab, xticks=xs, ymin=0.0,
               ymax=100.0, xmin=lo, xmax=hi)
    page.save(svg)
    done = [svg]
    rsvg = shutil.which("rsvg-convert")
    if rsvg:
        png = (svg[:-4] if svg.endswith(".svg") else svg) + ".png"
        r = subprocess.run([rsvg, "-o", png, svg], capture_output=True, text=True)
        if r.returncode == 0:
            done.append(png)
        else:
            note(f"rsvg-convert {svg}: {r.stderr.strip()[:200]}")
    return done


def cpu_sets(spec):
    """The CPU lists for the workers (the pair's second tenant uses the second): "auto" =
    two CPUs each at the top of our affinity mask when it has 8 or more; "none" = no pinning;
    else "LIST" or "LIST/LIST" for taskset -c."""
    if spec == "none" or not shutil.which("taskset"):
        return []
    if spec != "auto":
        return spec.split("/")
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 8:
        return []
    return [f"{cpus[-2]},{cpus[-1]}", f"{cpus[-4]},{cpus[-3]}"]


DEFAULT_CEILINGS = {"small": "100,90,75,50,15", "cuda-small": "100,90,75,50,25"}


def ceilings_of(a, wl):
    """The ceilings of workload wl: --ceilings-WL, else --ceilings."""
    return getattr(a, f"ceilings_{ident(wl)}", "") or a.ceilings


def int_list(text, lo=1, hi=100):
    try:
        v = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        v = []
    if not v or any(not lo <= x <= hi for x in v):
        raise argparse.ArgumentTypeError(f'"{text}" is not a list of integers {lo}..{hi} '
                                         "(use e.g. 10,25,50)")
    return text


def build_parser():
    build = os.environ.get("GPU_BUILD_DIR") or "build-gpu"
    if not os.path.isabs(build):
        build = os.path.join(ROOT, build)
    p = argparse.ArgumentParser(prog="compute_share.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default=",".join(("gemm", "small", "graph", "cuda", "pair", "set")),
                   help="sections: gemm, small, graph, cuda (= cuda-small,cuda-graph), "
                        "cuda-small, cuda-graph, pair, set (default: all)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--phase-seconds", type=float, default=2.0)
    p.add_argument("--settle", type=float, default=0.3,
                   help="seconds discarded after each change of ceiling (default 0.3)")
    p.add_argument("--tail", type=float, default=0.15,
                   help="seconds discarded at the end of each phase, before the next change "
                        "(default 0.15: NVML's samples straddling the window's end)")
    p.add_argument("--ceilings", type=int_list, default="25,50,75",
                   help="ceilings of the workloads not named below (default 25,50,75)")
    for wl in SHARE_WORKLOADS:
        p.add_argument(f"--ceilings-{wl}", dest=f"ceilings_{ident(wl)}", type=int_list,
                       default=DEFAULT_CEILINGS.get(wl),
                       help=f"{wl}'s ceilings (default "
                            f"{DEFAULT_CEILINGS.get(wl) or 'those of --ceilings'})")
    p.add_argument("--tolerance", type=float, default=2.0,
                   help="points (default 2): a ceiling's share, and gpuslice against NVML")
    p.add_argument("--under-tolerance", type=float, default=1.0,
                   help="points (default 1): a host-bound workload under its ceiling, NVML's "
                        "share against native")
    p.add_argument("--min-rate", type=float, default=0.97,
                   help="a host-bound workload under its ceiling keeps this share of its native "
                        "rate: fails when the ~95 %% interval of the ratio is wholly below it "
                        "(default 0.97)")
    p.add_argument("--warmup-seconds", type=float, default=0.0,
                   help="seconds of work at a ceiling, not measured, before each capped phase "
                        "that follows an uncapped one (default 0: see the docstring)")
    p.add_argument("--plot", nargs=2, metavar=("JSON", "SVG"),
                   help="only draw the picture of the host-bound workloads from a JSON this "
                        "script wrote (and a PNG beside it where rsvg-convert is on PATH)")
    p.add_argument("--alone", choices=("bracket", "before"), default="bracket",
                   help="native (uncapped) reference of a capped phase (its rate, and for "
                        "host-bound workloads NVML's share): the mean of the nearest uncapped "
                        "phases before and after it (bracket, default) or the one before")
    p.add_argument("--chunk-ms", type=float, default=8.0,
                   help="GPU work between synchronisations, uncapped (default 8)")
    p.add_argument("--pair-ceilings", type=int_list, default="30,70")
    p.add_argument("--pair-seconds", type=float, default=6.0)
    p.add_argument("--pair-alone-seconds", type=float, default=3.0)
    p.add_argument("--set-steps", type=int_list, default="90,20,80",
                   help="ceilings set in turn (default 90,20,80; the first only sets up)")
    p.add_argument("--set-hold", type=float, default=3.0, help="seconds at each step")
    p.add_argument("--set-alone", type=float, default=2.0, help="seconds uncapped first")
    p.add_argument("--set-window", type=float, default=0.2)
    p.add_argument("--set-band", type=float, default=5.0, help="points (default 5)")
    p.add_argument("--set-deadline", type=float, default=1.0, help="seconds (default 1)")
    p.add_argument("--set-chunk-ms", type=float, default=2.0)
    p.add_argument("--table", default="", help="markdown output (default $OUT/bench-compute.md)")
    p.add_argument("--budget", type=float, default=0,
                   help="seconds for everything: a section that would not fit is not run (@fail)")
    p.add_argument("--cpus", default="auto",
                   help="pin each worker to CPUs with taskset -c: auto (default: two CPUs of "
                        "its own when there are 8 or more), none, LIST, or LIST/LIST (the "
                        "pair's second tenant gets the second)")
    p.add_argument("--interleave", action="store_true",
                   help="an uncapped phase before every ceiling, not only the first of a "
                        "repeat (each ceiling then has its own uncapped reference; for the "
                        "host-bound workloads, whose uncapped rate drifts; about 1.6 times as "
                        "long)")
    p.add_argument("--no-gpu-samples", action="store_true",
                   help="do not sample NVML (then no ceiling can pass: (b) is missing)")
    p.add_argument("--gpuslice", default=os.environ.get("GPUSLICE_BIN")
                   or os.path.join(build, "bin", "gpuslice"))
    p.add_argument("--compute-small", default=os.path.join(build, "gpu", "compute_small"))
    return p


def driver_main(argv):
    p = build_parser()
    a = p.parse_args(argv)
    if a.plot:
        try:
            with open(a.plot[0]) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            p.error(f"--plot: cannot read {a.plot[0]}: {e}")
        pics = picture(doc.get("share") or {}, a.plot[1])
        print("wrote " + " and ".join(pics) if pics else "no host-bound workload in the JSON")
        return 0 if pics else 1
    if (a.repeats < 1 or a.phase_seconds <= 0 or a.settle < 0 or a.tail < 0 or a.chunk_ms <= 0
            or a.warmup_seconds < 0):
        p.error("--repeats must be at least 1, --phase-seconds and --chunk-ms positive, "
                "--settle, --tail and --warmup-seconds not negative")
    sections = []
    for s in a.only.split(","):
        s = s.strip()
        names = CUDA_WORKLOADS if s == "cuda" else (s,)
        for n in names:
            if n not in SECTIONS:
                p.error(f'--only: "{s}" is not a section (use {", ".join(SECTIONS)} or cuda)')
            if n not in sections:
                sections.append(n)
    a.gpuslice = os.path.abspath(a.gpuslice)
    os.environ["GPUSLICE_BIN"] = a.gpuslice  # for cli() here and in every worker
    a.compute_small = os.path.abspath(a.compute_small) if a.compute_small else ""

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    atexit.register(cleanup)

    if not os.access(a.gpuslice, os.X_OK):
        check(False, f"gpuslice is not built: {a.gpuslice} (build into $GPU_BUILD_DIR or set "
                     "GPUSLICE_BIN)")
        return 1
    d = Driver(a)
    d.sections = [s for s in SECTIONS if s in sections]
    d.pair_ceilings = [int(c) for c in a.pair_ceilings.split(",")]
    d.set_steps = [int(c) for c in a.set_steps.split(",")]
    d.set_first_judged = 1 if len(d.set_steps) > 1 else 0  # the first step only sets up
    return d.main()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker_main(sys.argv[2:])
    else:
        sys.exit(driver_main(sys.argv[1:]))

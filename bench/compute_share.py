"""Compute-ceiling benchmark: does a tenant under `gpuslice run --compute P` get P% of the GPU?

Achieved share = the tenant's throughput under the ceiling / its throughput alone, both
measured in the same run. Throughput is completed work over wall time: each worker launches
its work in chunks (about --chunk-ms of GPU time uncapped) and synchronises after each one,
so the completion time of every chunk is known; a window's work is read off the cumulative
completed work, interpolated linearly between chunk completions.

Sections (--only picks some; all by default):
  gemm, small, graph   (A) one PyTorch process per workload, run as
                       `gpuslice run --name bench-WORKLOAD --compute 100 -- python3 ...`, that
                       alternates phases: uncapped (`gpuslice set "$GPUSLICE_TENANT" --compute
                       none`), then each ceiling in turn (`... --compute P`), each phase
                       --settle s discarded then --phase-seconds s measured; --repeats times,
                       then one more uncapped phase (--interleave: an uncapped phase before
                       every ceiling). A capped phase's "alone" is the mean of the nearest
                       uncapped phases before and after it.
                         gemm   torch.matmul 8192x8192 @ 8192x8192 fp16 into a preallocated out
                         small  x.mul_(a).add_(b) on a 64K-element fp32 tensor, eager
                         graph  the same 100 kernels captured once in torch.cuda.graph, replayed
  cuda                 (B) bench/compute_small.cu, the same protocol from a CUDA C runtime-API
                       program: "cuda-small" (<<<>>> launches on one stream) and "cuda-graph"
                       (100 launches captured with cudaStreamBeginCapture, cudaGraphLaunch);
                       cuda-small / cuda-graph select one of them
  pair                 (C) the GEMM alone (one uncapped process), then two GEMM tenants at once
                       under --compute 30 and --compute 70, started together from a barrier,
                       measured over the same window; achieved_i = throughput_i / alone
  set                  (D) a GEMM tenant reports every chunk's completion (~2 ms chunks); the
                       script runs `gpuslice set NAME --compute 90`, then 20, then 80, and
                       reports how long after each change the 200 ms-window throughput is
                       within --set-band points of the new ceiling (relative to the alone
                       rate measured first in the same process) and stays there

Beside the throughput it records, for every measured window, the GPU's SM clock, power and
utilisation (`nvidia-smi -lms 100`) and gpuslice's own busy share of the tenant (polling
`gpuslice tenants --json --interval 0` for compute_busy_seconds). Workers are pinned to two
CPUs each (--cpus auto) when the machine has 8 or more: host-bound workloads (small,
cuda-small) varied by 10% between identical uncapped windows when they were not.

Verdicts ("@ok"/"@fail", read by tests/gpu/report.py): A and B per workload and ceiling,
the mean over the repeats within --tolerance (2) points of the ceiling (--verdict every: each
repeat), with the standard error of that mean printed beside it; C each tenant within --tolerance;
D each change settled in under --set-deadline (1 s). Numbers: "@key"/"@num". The markdown
table goes to --table (default $OUT/bench-compute.md when OUT is set), every phase as JSON
next to it (bench-compute.json). Exit status 1 when a verdict failed.

usage: bench/compute_share.py [--only gemm,small,graph,cuda,pair,set] [--repeats N]
           [--phase-seconds S] [--settle S] [--ceilings 10,25,50,75,90] [--interleave]
           [--budget S] [--table FILE] [--gpuslice BIN] [--compute-small BIN] ...
                                                   (--help lists all)
       bench/compute_share.py worker ...           (internal: one PyTorch workload process)
Normally run through bench/compute_share.sh, which builds compute_small first. Needs only
the Python standard library, plus torch in the workers.
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SELF = os.path.abspath(__file__)

GEMM_N = 8192
SMALL_N = 65536
GRAPH_KERNELS = 100
CLI_TIMEOUT = 20.0  # seconds for one `gpuslice set` / `gpuslice tenants`

TORCH_WORKLOADS = ("gemm", "small", "graph")
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
    plan = []
    for rep in range(a.repeats):
        for i, c in enumerate(ceilings):
            if i == 0 or a.interleave:
                plan.append((rep, "none", "none"))
            plan.append((rep, str(c), str(c)))
    plan.append((a.repeats, "none-end", "none"))
    for rep, label, value in plan:
        set_ms = 0.0
        if not a.no_set:
            t0 = time.monotonic()
            rc, so, se = cli(["set", tenant, "--compute", value])
            set_ms = (time.monotonic() - t0) * 1e3
            if rc != 0:
                msg = " ".join((se or so).split())[:300]
                out(f"error gpuslice set {tenant} --compute {value} exited {rc}: {msg}")
                sys.exit(1)
        t0 = time.monotonic()
        wa, wb = t0 + a.settle, t0 + a.settle + a.phase_seconds
        tr = r.run_until(wb)
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
    p.add_argument("--ceilings", default="10,25,50,75,90")
    p.add_argument("--chunk-ms", type=float, default=8.0)
    p.add_argument("--chunk", type=int, default=0, help="units per chunk (skips calibration)")
    p.add_argument("--no-set", action="store_true", help="never call gpuslice (a dry run)")
    p.add_argument("--interleave", action="store_true",
                   help="an uncapped phase before every ceiling, not only the first")
    p.add_argument("--ready", default="")
    p.add_argument("--go", default="")
    p.add_argument("--stop", default="")
    p.add_argument("--trace-out", default="")
    p.add_argument("--label", default="")
    p.add_argument("--max-seconds", type=float, default=120.0)
    a = p.parse_args(argv)
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
    and kept; it is killed, with everything it started, at its deadline or our exit."""

    def __init__(self, tag, argv, env, timeout):
        self.tag, self.argv, self.lines = tag, argv, []
        self.timed_out, self.start_error, self.rc = False, None, None
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
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


class TenantSampler:
    """gpuslice's own accounting of every tenant: `gpuslice tenants --json --interval 0`
    every `period` s (device 0's compute_limit_percent and cumulative compute_busy_seconds),
    so that its busy share over any measured window can be set beside the throughput."""

    def __init__(self, enabled, period=0.25):
        self.samples, self.error, self.period = [], None, period
        self._stop = threading.Event()
        if enabled:
            threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        fails = 0
        while not self._stop.wait(self.period):
            rc, so, se = cli(["tenants", "--json", "--interval", "0"], timeout=10)
            t = time.monotonic()
            try:
                doc = json.loads(so) if rc == 0 else None
            except ValueError:
                doc = None
            if doc is None:
                fails += 1
                self.error = (f"gpuslice tenants --json exited {rc}: "
                              f"{' '.join((se or so).split())[:200]}")
                if fails >= 5:
                    return  # not worth asking again
                continue
            snap = {}
            for tn in doc.get("tenants", []):
                for d in tn.get("devices", []):
                    if d.get("index") == 0:
                        try:
                            snap[tn.get("name")] = (d.get("compute_limit_percent"),
                                                    float(d.get("compute_busy_seconds") or 0))
                        except (TypeError, ValueError):
                            pass
            self.samples.append((t, snap))

    def _series(self, name):
        tr = Trace()
        for t, snap in list(self.samples):
            if name in snap:
                tr.add(t, snap[name][1])
        return tr

    def busy_pct(self, name, a, b):
        """gpuslice's busy % for tenant name over [a, b], or None without samples around it."""
        r = self._series(name).rate(a, b)
        return None if r is None else round(100.0 * r, 2)

    def limit_at(self, name, t):
        """The tenant's compute_limit_percent in the sample nearest to t (None: no ceiling or
        no sample)."""
        best = None
        for ts, snap in list(self.samples):
            if name in snap and (best is None or abs(ts - t) < abs(best[0] - t)):
                best = (ts, snap[name][0])
        return None if best is None else best[1]

    def stop(self):
        self._stop.set()


def sem(v):
    """Standard error of the mean of v (0 for fewer than two values)."""
    return statistics.stdev(v) / len(v) ** 0.5 if len(v) > 1 else 0.0


def share_error(v, c, verdict):
    """The error (points) that the verdict judges: the mean's, or the worst repeat's."""
    if verdict == "mean":
        return statistics.fmean(v) - c
    return max((x - c for x in v), key=abs)


def fmt(v, spec=".1f", none="-"):
    return none if v is None else format(v, spec)


class GpuSampler:
    """GPU 0's SM clock, power and utilisation every 100 ms from `nvidia-smi -lms`, read
    without the interposer; samples are stamped with time.monotonic() as they arrive."""

    FIELDS = ("sm_mhz", "power_w", "util_pct", "temp_c")

    def __init__(self, enabled):
        self.samples, self.proc = [], None
        exe = shutil.which("nvidia-smi") if enabled else None
        if not exe:
            return
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        try:
            self.proc = subprocess.Popen(
                [exe, "--query-gpu=clocks.sm,power.draw,utilization.gpu,temperature.gpu",
                 "--format=csv,noheader,nounits", "-i", "0", "-lms", "100"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env=env)
        except OSError:
            return
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in iter(self.proc.stdout.readline, b""):
            try:
                v = [float(x) for x in raw.decode(errors="replace").split(",")]
            except ValueError:
                continue  # "[N/A]" and the like
            if len(v) == len(self.FIELDS):
                self.samples.append((time.monotonic(), *v))

    def mean(self, a, b):
        """Mean of each field over [a, b] ({} when there are no samples)."""
        got = [s for s in list(self.samples) if a <= s[0] <= b]
        if not got:
            return {}
        return {f: round(statistics.fmean(s[i + 1] for s in got), 1)
                for i, f in enumerate(self.FIELDS)}

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Driver:
    def __init__(self, a):
        self.a = a
        self.gs = a.gpuslice
        self.env = dict(os.environ, GPUSLICE_BIN=self.gs, BENCH_PARENT_PID=str(os.getpid()),
                        PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
        self.ceilings = [int(c) for c in a.ceilings.split(",")]
        self.tmp = tempfile.mkdtemp(prefix="gpuslice-compute.")
        atexit.register(shutil.rmtree, self.tmp, True)
        self.deadline = time.monotonic() + a.budget if a.budget > 0 else None
        self.sampler = GpuSampler(not a.no_gpu_samples)
        atexit.register(self.sampler.stop)
        self.tenants = TenantSampler(not a.no_tenant_samples)
        atexit.register(self.tenants.stop)
        self.cpu_sets = cpu_sets(a.cpus)
        self.share = {}   # workload -> {"calib", "phases", "tenants", "error"}
        self.pair = None
        self.set = None
        self.timing = {}

    # -- A and B --
    def share_cmd(self, wl):
        a = self.a
        common = ["--repeats", str(a.repeats), "--phase-seconds", str(a.phase_seconds),
                  "--settle", str(a.settle), "--ceilings", a.ceilings,
                  "--chunk-ms", str(a.chunk_ms)] + (["--interleave"] if a.interleave else [])
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
            nphase = self.phases_per_worker()
            start = 3 if section in CUDA_WORKLOADS else 10  # torch's import and warm-up
            return nphase * (a.settle + a.phase_seconds + 0.12) + start
        if section == "pair":
            return a.pair_alone_seconds + a.pair_seconds + 25
        return a.set_alone + a.set_hold * len(self.set_steps) + 15

    def phases_per_worker(self):
        n = len(self.ceilings)
        return self.a.repeats * (2 * n if self.a.interleave else n + 1) + 1

    def run_share(self, wl):
        a = self.a
        expected = self.phases_per_worker() * (a.settle + a.phase_seconds + 0.1) + 3
        res = {"calib": None, "phases": [], "error": None}
        self.share[wl] = res
        if wl in CUDA_WORKLOADS and not (a.compute_small and os.access(a.compute_small, os.X_OK)):
            res["error"] = f"compute_small not built ({a.compute_small or 'no path'})"
            return
        w = Worker(wl, self.share_cmd(wl), self.env, self.limit(120 + 1.5 * expected))
        w.wait()
        for f in w.tagged("calib"):
            res["calib"] = {"units": int(f[2]), "chunk_ms": float(f[3]),
                            "kernels_per_unit": int(f[4])}
        for f in w.tagged("phase"):
            ph = {"repeat": int(f[2]), "label": f[3], "rate": float(f[4]),
                  "window_s": float(f[5]), "chunks": int(f[6]), "set_ms": float(f[7])}
            if len(f) >= 10:
                wa, wb = float(f[8]), float(f[9])
                ph["gpu"] = self.sampler.mean(wa, wb)
                ph["gs_busy_pct"] = self.tenants.busy_pct(f"bench-{wl}", wa, wb)
                ph["gs_limit"] = self.tenants.limit_at(f"bench-{wl}", (wa + wb) / 2)
            res["phases"].append(ph)
        res["error"] = w.failure()

    def share_results(self, wl):
        """Per ceiling: the achieved % of each repeat, and the uncapped rates. A capped
        phase's "alone" is the nearest uncapped phase before it, averaged with the nearest
        one after it (--alone bracket, when there is one)."""
        phases = self.share[wl]["phases"]
        uncapped = [i for i, p in enumerate(phases) if p["label"].startswith("none")]
        alone = [phases[i]["rate"] for i in uncapped]
        achieved = {c: [] for c in self.ceilings}
        for i, p in enumerate(phases):
            if p["label"].startswith("none") or not p["label"].isdigit():
                continue
            before = [j for j in uncapped if j < i]
            after = [j for j in uncapped if j > i]
            if not before:
                continue
            refs = [phases[before[-1]]["rate"]]
            if after and self.a.alone == "bracket":
                refs.append(phases[after[0]]["rate"])
            ref = statistics.fmean(refs)
            c = int(p["label"])
            if c in achieved and ref > 0:
                p["achieved"] = 100.0 * p["rate"] / ref
                achieved[c].append(p["achieved"])
        return alone, achieved

    def judge_share(self, wl):
        a, res = self.a, self.share[wl]
        alone, achieved = self.share_results(wl)
        worst = None
        for c in self.ceilings:
            v = achieved[c]
            if not v:
                check(False, f"{wl} at --compute {c}: no measurement "
                             f"({res['error'] or 'the worker printed no phase for it'})")
                continue
            w_err = share_error(v, c, a.verdict)
            worst = w_err if worst is None or abs(w_err) > abs(worst) else worst
            num(f"{ident(wl)}_{c}_mean", statistics.fmean(v))
            num(f"{ident(wl)}_{c}_sem", sem(v))
            num(f"{ident(wl)}_{c}_min", min(v))
            num(f"{ident(wl)}_{c}_max", max(v))
            judged = ("the mean's error" if a.verdict == "mean" else "the worst repeat's error")
            check(abs(w_err) <= a.tolerance,
                  f"{wl} at --compute {c}: achieved {statistics.fmean(v):.2f}% ± {sem(v):.2f} "
                  f"(standard error; min {min(v):.2f}, max {max(v):.2f}, {len(v)} repeats), "
                  f"{judged} {w_err:+.2f} points (within ±{a.tolerance:g})")
        if worst is not None:
            key(f"{ident(wl)}_worst_err_pts", round(worst, 2))
        if alone:
            spread = max(alone) / min(alone) - 1
            num(f"{ident(wl)}_alone_rate", statistics.fmean(alone))
            num(f"{ident(wl)}_alone_drift_pct", 100.0 * spread)
            if spread * max(self.ceilings) > a.tolerance:
                note(f"{wl}: its uncapped phases differ by {100 * spread:.1f}%, which alone can "
                     f"move an achieved share at {max(self.ceilings)}% by "
                     f"{spread * max(self.ceilings):.1f} points: its verdicts measure this "
                     "machine's noise too (try --interleave, more --repeats, or --cpus)")
        if res["error"] and any(achieved.values()):
            check(False, f"{wl}: {res['error']}")

    # -- C --
    def gemm_worker(self, tag, name, compute, extra, timeout, slot=0):
        cmd = [self.gs, "run", "--name", name, "--compute", str(compute), "--"] + self.pin(
            [sys.executable, SELF, "worker", "gemm"] + extra, slot)
        return Worker(tag, cmd, self.env, self.limit(timeout))

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
            res["alone_gpu"] = self.sampler.mean(float(rows[0][6]), float(rows[0][7]))
        units = int(calib[0][2]) if calib else 1
        # both tenants from one barrier
        go = os.path.join(d, "pair.go")
        workers, readies = [], []
        for k, c in enumerate(self.pair_ceilings):
            ready = os.path.join(d, f"{k}.ready")
            readies.append(ready)
            workers.append((c, self.gemm_worker(
                f"pair-{c}", f"bench-pair-{k}-{c}-{os.getpid()}", c,
                ["--mode", "window", "--ready", ready, "--go", go, "--label", str(c),
                 "--chunk", str(units)], 240, slot=k)))
        why = wait_for(readies, [w for _, w in workers], 150)
        if why:
            for _, w in workers:
                w.kill()
                w.wait()
            res["error"] = f"pair: {why}"
            return
        t0 = time.monotonic() + 0.3
        settle = max(a.settle, 0.5)
        touch(go, f"{t0} {settle} {a.pair_seconds} {self.tenants.period + 0.15}")
        res["window"] = (t0 + settle, t0 + settle + a.pair_seconds)
        for c, w in workers:
            w.wait()
            rows = w.tagged("window")
            res["tenants"].append({"ceiling": c, "rate": float(rows[0][3]) if rows else None,
                                   "chunks": int(rows[0][5]) if rows else 0,
                                   "error": w.failure(),
                                   "gs_busy_pct": self.tenants.busy_pct(
                                       f"bench-pair-{len(res['tenants'])}-{c}-{os.getpid()}",
                                       *res["window"])})

    def judge_pair(self):
        a, res = self.a, self.pair
        if res["error"]:
            for c in self.pair_ceilings:
                check(False, f"two tenants, --compute {c}: not measured ({res['error']})")
            return
        key("pair_alone_gemm_per_s", round(res["alone"], 2))
        total = 0.0
        for t in res["tenants"]:
            c = t["ceiling"]
            if t["rate"] is None:
                check(False, f"two tenants, --compute {c}: no measurement ({t['error']})")
                continue
            ach = 100.0 * t["rate"] / res["alone"]
            t["achieved"] = ach
            total += ach
            key(f"pair_{c}_achieved", round(ach, 2))
            check(abs(ach - c) <= a.tolerance,
                  f"two tenants at once, --compute {c}: achieved {ach:.2f}% of the GEMM alone "
                  f"({t['rate']:.1f} vs {res['alone']:.1f} GEMM/s), error {ach - c:+.2f} points "
                  f"(within ±{a.tolerance:g})")
            if t["error"]:
                check(False, f"two tenants, --compute {c}: {t['error']}")
        res["sum"] = total
        num("pair_sum_achieved", total)
        if res.get("window"):
            res["pair_gpu"] = self.sampler.mean(*res["window"])

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
                              "--max-seconds", str(total + 30)], total + 150)
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
        time.sleep(self.tenants.period + 0.1)  # one more sample of gpuslice's figures
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
        if tr is None or len(tr.t) < 10:
            for ev_from, ev_to in self.set_changes():
                check(False, f"gpuslice set {ev_from} -> {ev_to}: not measured "
                             f"({res['error'] or 'too few chunk completions'})")
            return
        alone = tr.rate(*res["alone_window"])
        res["alone"] = alone
        if not alone:
            check(False, "gpuslice set: no alone rate (the trace does not cover the first "
                         f"{a.set_alone:g} s)")
            return
        key("set_alone_gemm_per_s", round(alone, 2))
        evs = res["events"]
        res["changes"] = []
        for i, ev in enumerate(evs):
            t_c = ev["t_set"]
            t_next = evs[i + 1]["t_set"] if i + 1 < len(evs) else res["t_end"]
            prev = evs[i - 1]["target"] if i else "none"
            pct = lambda x0, x1: 100.0 * (tr.rate(x0, x1) or 0.0) / alone  # noqa: E731
            before = pct(t_c - min(1.0, a.set_hold / 2), t_c)
            after = pct(t_next - min(1.0, a.set_hold / 2), t_next)
            win = a.set_window
            ends, e = [], t_c + 0.05
            while e <= t_next + 1e-9:
                ends.append(e)
                e += 0.05
            def settle_delay(level):
                inside = [abs(pct(x - win, x) - level) <= a.set_band for x in ends]
                for k in range(len(ends)):
                    if all(inside[k:]):
                        return ends[k] - t_c
                return None
            delay = settle_delay(ev["target"])
            # Responsiveness apart from accuracy: until it reaches the level it settles at.
            delay_level = settle_delay(after)
            series = [round(pct(x - 0.05, x), 1) for x in
                      (t_c + 0.05 * k for k in range(-6, 31)) if x <= t_next]
            ch = {"from": prev, "to": ev["target"], "delay_s": delay,
                  "delay_to_level_s": delay_level, "set_ms": ev["set_ms"],
                  "before_pct": before, "after_pct": after, "series_50ms": series,
                  "gs_busy_pct": self.tenants.busy_pct(
                      res["name"], t_next - min(1.0, a.set_hold / 2), t_next)}
            res["changes"].append(ch)
            print(f"set {prev} -> {ev['target']}: achieved % in 50 ms windows from 0.3 s "
                  f"before the change: {' '.join(str(x) for x in series)}", flush=True)
            if i >= self.set_first_judged:
                tag = f"{prev}_to_{ev['target']}"
                if delay is not None:
                    key(f"set_{tag}_delay_s", round(delay, 3))
                if delay_level is not None:
                    num(f"set_{tag}_delay_to_level_s", round(delay_level, 3))
                num(f"set_{tag}_cli_ms", round(ev["set_ms"], 1))
                check(delay is not None and delay < a.set_deadline,
                      f"gpuslice set {prev} -> {ev['target']}: the {win * 1e3:.0f} ms-window "
                      f"throughput is within ±{a.set_band:g} points of {ev['target']}% "
                      + (f"{delay:.2f} s after the command started and stays there"
                         if delay is not None else "at no point before the next change")
                      + f" (deadline {a.set_deadline:g} s; before {before:.1f}%, "
                      f"settled at {after:.1f}%, the command took {ev['set_ms']:.0f} ms)")
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
            md += ["## Compute ceilings: achieved share", "",
                   "Achieved share = throughput under `--compute P` ÷ throughput uncapped in "
                   "the same process ("
                   + ("mean of the nearest uncapped phases before and after"
                      if a.alone == "bracket" else "the nearest uncapped phase before")
                   + f"). {a.repeats} repeats"
                   + (", an uncapped phase before each ceiling" if a.interleave else "")
                   + f"; each phase discards {a.settle:g} s after `gpuslice set`, then measures "
                   f"{a.phase_seconds:g} s"
                   + (f"; workers pinned to CPUs {' / '.join(self.cpu_sets)}"
                      if self.cpu_sets else "")
                   + ". Cell: mean achieved % ± its standard error (min–max over repeats), "
                   + ("the mean's error in points; pass: the mean within "
                      if a.verdict == "mean" else "the worst repeat's error in points; pass: "
                      "every repeat within ")
                   + f"±{a.tolerance:g} points.", "",
                   "| workload | alone | " + " | ".join(f"{c}%" for c in self.ceilings) + " |",
                   "|---|---|" + "---|" * len(self.ceilings)]
            for wl, res in self.share.items():
                alone, achieved = self.share_results(wl)
                unit = UNIT.get(wl, "kernels/s")
                al = f"{statistics.fmean(alone):.4g} {unit}" if alone else "-"
                if wl == "gemm" and alone:
                    al += f" ({statistics.fmean(alone) * 2 * GEMM_N ** 3 / 1e12:.0f} TFLOP/s)"
                cells = []
                for c in self.ceilings:
                    v = achieved[c]
                    if not v:
                        cells.append("-")
                        continue
                    w_err = share_error(v, c, a.verdict)
                    verdict = "ok" if abs(w_err) <= a.tolerance else "**FAIL**"
                    cells.append(f"{statistics.fmean(v):.1f} ± {sem(v):.1f} "
                                 f"({min(v):.1f}–{max(v):.1f}) {w_err:+.1f} {verdict}")
                md.append(f"| {DESCRIBE[wl]} | {al} | " + " | ".join(cells) + " |")
            md += ["", "Details: chunk = units launched between synchronisations; drift = "
                   "spread of the uncapped phases over the run; `set` = median time of "
                   "`gpuslice set`; then gpuslice's own busy share of the tenant over the same "
                   "windows (from `compute_busy_seconds` in `gpuslice tenants --json`, mean over "
                   "repeats; a ceiling it did not show during the window is noted).", "",
                   "| workload | chunk | chunk ms | drift | `set` ms | gpuslice busy % alone | "
                   + " | ".join(f"at {c}%" for c in self.ceilings) + " | error |",
                   "|---|---|---|---|---|---|" + "---|" * len(self.ceilings) + "---|"]
            for wl, res in self.share.items():
                alone, _ = self.share_results(wl)
                cal = res["calib"] or {}
                drift = f"{100 * (max(alone) / min(alone) - 1):.1f}%" if alone else "-"
                sets = [p["set_ms"] for p in res["phases"]]
                rep = []
                for labels, want in (((("none", "none-end")), None),) + tuple(
                        (((str(c),)), c) for c in self.ceilings):
                    ph = [p for p in res["phases"] if p["label"] in labels]
                    busy = [p["gs_busy_pct"] for p in ph if p.get("gs_busy_pct") is not None]
                    cell = fmt(statistics.fmean(busy) if busy else None)
                    seen = {p.get("gs_limit") for p in ph if "gs_limit" in p}
                    if busy and seen and seen != {want}:
                        cell += f" (limit {'/'.join(str(x) for x in sorted(seen, key=str))}!)"
                    rep.append(cell)
                err = (res["error"] or "").replace("|", "/")[:120]
                chunk = str(cal.get("units", "-"))
                if cal.get("kernels_per_unit", 1) > 1:
                    chunk += f" × {cal['kernels_per_unit']}"
                md.append(f"| {wl} | {chunk} | {fmt(cal.get('chunk_ms'))} | {drift} | "
                          f"{fmt(statistics.median(sets) if sets else None)} | "
                          + " | ".join(rep) + f" | {err} |")
            md.append("")
            gpu_rows = []
            for wl, res in self.share.items():
                cells = []
                for labels in (("none", "none-end"),) + tuple((str(c),) for c in self.ceilings):
                    g = [p["gpu"] for p in res["phases"] if p["label"] in labels and p.get("gpu")]
                    cells.append(" ".join(
                        f"{statistics.fmean(x[k] for x in g):.0f} {u}"
                        for k, u in (("sm_mhz", "MHz"), ("power_w", "W"), ("util_pct", "%"))
                    ) if g else "-")
                gpu_rows.append(f"| {wl} | " + " | ".join(cells) + " |")
            if any(r.count("-") < len(self.ceilings) + 1 for r in gpu_rows):
                md += ["GPU during the measured windows (nvidia-smi every 100 ms, mean): SM clock, "
                       "power, utilisation. A clock that is higher under a ceiling than alone "
                       "gives the capped phases more work per busy second.", "",
                       "| workload | alone | " + " | ".join(f"{c}%" for c in self.ceilings) + " |",
                       "|---|---|" + "---|" * len(self.ceilings)] + gpu_rows + [""]
        if self.pair:
            res = self.pair
            md += ["## Two tenants on one device", "",
                   f"Both run the {GEMM_N}³ fp16 GEMM, started from one barrier and measured over "
                   f"the same {a.pair_seconds:g} s window; achieved = throughput ÷ the GEMM alone "
                   f"(one uncapped process just before: "
                   f"{fmt(res['alone'], '.1f')} GEMM/s). Pass: within ±{a.tolerance:g} "
                   "points.", "",
                   "| tenant | ceiling | GEMM/s | achieved % | error | gpuslice busy % | verdict |",
                   "|---|---|---|---|---|---|---|"]
            for t in res["tenants"]:
                ach, c = t.get("achieved"), t["ceiling"]
                err = None if ach is None else ach - c
                verdict = "-" if err is None else "ok" if abs(err) <= a.tolerance else "**FAIL**"
                md.append(f"| `--compute {c}` | {c}% | {fmt(t['rate'])} | {fmt(ach, '.2f')} | "
                          f"{fmt(err, '+.2f')} | {fmt(t.get('gs_busy_pct'))} | {verdict} |")
            if res.get("sum") is not None:
                md.append(f"| both | {sum(self.pair_ceilings)}% | | {res['sum']:.2f} | | | |")
            g0, g1 = res.get("alone_gpu"), res.get("pair_gpu")
            if g0 and g1:
                md.append(f"\nGPU (nvidia-smi, mean): alone {g0['sm_mhz']:.0f} MHz "
                          f"{g0['power_w']:.0f} W; both tenants {g1['sm_mhz']:.0f} MHz "
                          f"{g1['power_w']:.0f} W.")
            if res["error"]:
                md.append(f"\nnot measured: {res['error']}")
            md.append("")
        if self.set:
            res = self.set
            md += ["## Changing a running tenant's ceiling", "",
                   f"A GEMM tenant (chunks of ~{a.set_chunk_ms:g} ms); `gpuslice set {res['name']} "
                   f"--compute P` at a known time. Delay = from the command's start until the "
                   f"{a.set_window * 1e3:.0f} ms-window throughput is within ±{a.set_band:g} "
                   f"points of P (relative to the alone rate, {fmt(res['alone'], '.1f')} GEMM/s) "
                   f"and stays "
                   f"there until the next change (so it includes the window's length). "
                   f"Pass: under {a.set_deadline:g} s. Beside it, the same delay to the level "
                   f"the throughput settled at (±{a.set_band:g} points of it), which separates "
                   f"how fast a change acts from how accurate the ceiling is.", "",
                   "| change | delay s | to its level s | `gpuslice set` ms | achieved before "
                   "| settled at | gpuslice busy % settled | verdict |",
                   "|---|---|---|---|---|---|---|---|"]
            for i, ch in enumerate(res.get("changes", [])):
                judged = i >= self.set_first_judged
                ok = ch["delay_s"] is not None and ch["delay_s"] < a.set_deadline
                md.append(f"| {ch['from']} → {ch['to']} | {fmt(ch['delay_s'], '.2f', 'never')} | "
                          f"{fmt(ch['delay_to_level_s'], '.2f', 'never')} | {ch['set_ms']:.0f} | "
                          f"{ch['before_pct']:.1f}% | {ch['after_pct']:.1f}% | "
                          f"{fmt(ch.get('gs_busy_pct'))} | "
                          f"{('ok' if ok else '**FAIL**') if judged else '(setup)'} |")
            if res["error"]:
                md.append(f"\nerror: {res['error']}")
            md.append("")
        return "\n".join(md)

    def as_json(self):
        share = {}
        for wl, res in self.share.items():
            alone, achieved = self.share_results(wl)
            share[wl] = {"calib": res["calib"], "phases": res["phases"], "error": res["error"],
                         "alone_rates": alone,
                         "achieved": {str(c): v for c, v in achieved.items()}}
        pair = self.pair
        st = None
        if self.set:
            st = {k: v for k, v in self.set.items() if k not in ("trace", "alone_window")}
        return {"options": vars(self.a), "cpu_sets": self.cpu_sets, "timing_s": self.timing,
                "share": share, "pair": pair, "set": st,
                "tenant_samples_error": self.tenants.error}

    def main(self):
        a = self.a
        sel = self.sections
        est = sum(self.estimate(s) for s in sel)
        print(f"compute_share: sections {','.join(sel)}; {a.repeats} repeats, "
              f"{self.phases_per_worker()} phases of {a.settle:g}+{a.phase_seconds:g} s per "
              f"workload; CPUs {' / '.join(self.cpu_sets) or 'not pinned'}; estimated {est:.0f} s"
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
            except OSError as e:
                note(f"cannot write {table}: {e}")
        print(f"compute_share: {_checks['ok']} passed, {_checks['fail']} failed, "
              f"{self.timing['total']} s", flush=True)
        return 1 if _checks["fail"] or not _checks["ok"] else 0


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


def int_list(text, lo=1, hi=100):
    try:
        v = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        v = []
    if not v or any(not lo <= x <= hi for x in v):
        raise argparse.ArgumentTypeError(f'"{text}" is not a list of integers {lo}..{hi} '
                                         "(use e.g. 10,25,50)")
    return text


def driver_main(argv):
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
    p.add_argument("--ceilings", type=int_list, default="10,25,50,75,90")
    p.add_argument("--tolerance", type=float, default=2.0, help="points (default 2)")
    p.add_argument("--verdict", choices=("mean", "every"), default="mean",
                   help="an achieved share passes when the mean over the repeats is within "
                        "--tolerance (mean, default; the standard error is printed beside it) "
                        "or when every repeat is (every)")
    p.add_argument("--alone", choices=("bracket", "before"), default="bracket",
                   help="alone rate of a capped phase: mean of the nearest uncapped phases "
                        "before and after it (bracket, default) or the one before")
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
                        "repeat (each ceiling then has its own alone; for noisy host-bound "
                        "workloads; about 1.6 times as long)")
    p.add_argument("--no-gpu-samples", action="store_true",
                   help="do not sample SM clock and power with nvidia-smi -lms 100")
    p.add_argument("--no-tenant-samples", action="store_true",
                   help="do not poll gpuslice tenants --json for gpuslice's own busy share")
    p.add_argument("--gpuslice", default=os.environ.get("GPUSLICE_BIN")
                   or os.path.join(build, "bin", "gpuslice"))
    p.add_argument("--compute-small", default=os.path.join(build, "gpu", "compute_small"))
    a = p.parse_args(argv)
    if a.repeats < 1 or a.phase_seconds <= 0 or a.settle < 0 or a.chunk_ms <= 0:
        p.error("--repeats must be at least 1, --phase-seconds and --chunk-ms positive")
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

    d = Driver(a)
    d.sections = [s for s in SECTIONS if s in sections]
    d.pair_ceilings = [int(c) for c in a.pair_ceilings.split(",")]
    d.set_steps = [int(c) for c in a.set_steps.split(",")]
    d.set_first_judged = 1 if len(d.set_steps) > 1 else 0  # the first step only sets up
    if not os.access(a.gpuslice, os.X_OK):
        check(False, f"gpuslice is not built: {a.gpuslice} (build into $GPU_BUILD_DIR or set "
                     "GPUSLICE_BIN)")
        return 1
    return d.main()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker_main(sys.argv[2:])
    else:
        sys.exit(driver_main(sys.argv[1:]))

"""Does any way of giving a program part of a GPU give a power-limited GEMM exactly that part of
its throughput? Runs the same 8192^3 fp16 PyTorch GEMM loop, one process at a time:

  alone        no gpuslice, the whole GPU
  mps:P        the only client of an MPS daemon, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=P (a hardware
               SM partition: `gpuslice run --gpu-share P`)
  compute:P    `gpuslice run --compute P` (a share of the GPU's time)

and prints, for each, the throughput as a share of `alone` beside the SM clock, power and
utilisation nvidia-smi saw during the measured window. On a GPU whose GEMM is power-limited
when it has the whole chip, a partition that leaves part of the chip idle lets the clock rise,
so the share of throughput is above P however the partition is made.

usage: bench/partition_clock.py [--gpuslice BIN] [--seconds S] [--modes alone,mps:25,...]
       bench/partition_clock.py worker SECONDS            (internal)
Output: progress, a markdown table, "@info"/"@fail" per mode (it ran or not: the shares are
information, not a verdict, so tests/gpu/report.py shows the check as INFO) and "@key" lines.
Exit status 0 when every mode ran.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

N = 8192
HERE = os.path.dirname(os.path.abspath(__file__))
SELF = os.path.abspath(__file__)


def worker(seconds):
    import torch
    a = torch.randn(N, N, device="cuda", dtype=torch.float16)
    b = torch.randn(N, N, device="cuda", dtype=torch.float16)
    c = torch.empty(N, N, device="cuda", dtype=torch.float16)
    t_end = time.monotonic() + 1.0
    while time.monotonic() < t_end:  # warm-up: clocks and power settle
        for _ in range(4):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
    print("start", flush=True)
    t0 = time.monotonic()
    n = 0
    while time.monotonic() - t0 < seconds:
        for _ in range(4):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
        n += 4
    dt = time.monotonic() - t0
    print(f"end {n / dt:.3f}", flush=True)


class Smi:
    def __init__(self):
        self.samples = []
        exe = shutil.which("nvidia-smi")
        self.proc = None
        if exe:
            env = dict(os.environ)
            env.pop("LD_PRELOAD", None)
            self.proc = subprocess.Popen(
                [exe, "--query-gpu=clocks.sm,power.draw,utilization.gpu",
                 "--format=csv,noheader,nounits", "-i", "0", "-lms", "100"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in iter(self.proc.stdout.readline, b""):
            try:
                v = [float(x) for x in raw.decode().split(",")]
            except ValueError:
                continue
            if len(v) == 3:
                self.samples.append((time.monotonic(), *v))

    def mean(self, a, b):
        got = [s for s in list(self.samples) if a <= s[0] <= b]
        if not got:
            return None
        return tuple(statistics.fmean(s[i] for s in got) for i in (1, 2, 3))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()


def run_mode(gs, mode, seconds, smi):
    prog = [sys.executable, SELF, "worker", str(seconds)]
    if mode == "alone":
        argv = prog
    else:
        kind, p = mode.split(":")
        opt = "--gpu-share" if kind == "mps" else "--compute"
        argv = [gs, "run", "-q", opt, p, "--"] + prog
    print(f"  $ {' '.join(argv)}", flush=True)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t_start = t_end = rate = None
    for line in proc.stdout:
        line = line.rstrip("\n")
        print(f"  [{mode}] {line}", flush=True)
        if line == "start":
            t_start = time.monotonic()
        elif line.startswith("end "):
            t_end, rate = time.monotonic(), float(line.split()[1])
    rc = proc.wait()
    if rc != 0 or rate is None:
        return None, None, f"exit {rc}"
    return rate, smi.mean(t_start + 0.1, t_end - 0.1), None


def main(argv):
    p = argparse.ArgumentParser(prog="partition_clock.py")
    p.add_argument("--gpuslice", default=os.path.join(os.path.dirname(HERE), "build-gpu", "bin",
                                                      "gpuslice"))
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--modes", default="alone,mps:25,compute:25,mps:50,compute:50,alone")
    a = p.parse_args(argv)
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    for m in modes:
        if m != "alone" and (m.split(":")[0] not in ("mps", "compute") or ":" not in m):
            p.error(f'--modes: "{m}" is not alone, mps:P or compute:P')
    smi = Smi()
    rows, ok = [], True
    for m in modes:
        rate, gpu, err = run_mode(a.gpuslice, m, a.seconds, smi)
        if err:
            ok = False
            print(f"@fail {m}: {err}", flush=True)
        else:
            print(f"@info {m}: the GEMM ran ({rate:.1f} GEMM/s)", flush=True)
        rows.append((m, rate, gpu))
    smi.stop()
    if any(m.startswith("mps:") for m in modes):
        subprocess.run([a.gpuslice, "mps", "stop", "--force"], check=False)
    alone = [r for m, r, _ in rows if m == "alone" and r]
    base = statistics.fmean(alone) if alone else None
    print("\n| mode | GEMM/s | share of alone % | SM MHz | power W | util % |")
    print("|---|---|---|---|---|---|")
    for m, r, gpu in rows:
        share = f"{100 * r / base:.1f}" if r and base else "-"
        g = ("%.0f | %.0f | %.0f" % gpu) if gpu else "- | - | -"
        print(f"| {m} | {r if r else '-'} | {share} | {g} |")
        if r and base:
            print(f"@key share_{m.replace(':', '_')} {100 * r / base:.1f}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(float(sys.argv[2]))
    else:
        sys.exit(main(sys.argv[1:]))

"""What NVML's per-process utilisation says about a process's GPU time, against the device's
own utilisation, for the workloads a compute ceiling must bill right: a launch-bound loop of
small kernels (most of its time in flight is the gaps between kernels), a saturating GEMM,
two saturating GEMMs time-sliced, and the small loop beside a GEMM. It decides what the
governor may take from NVML (docs/design.md, "What a ceiling bills").

Each scenario starts its jobs (fresh PyTorch processes, outside the interposer), lets them
warm up, then samples NVML for --seconds from this process: the device's utilisation samples
(nvmlDeviceGetSamples) and every process's SM utilisation samples
(nvmlDeviceGetProcessUtilization), with the spacing of the samples and what one call costs.
Each job also reports the share of wall time it had work in flight (from the first launch of
a burst to its synchronisation's end), the quantity today's governor bills.

usage: bench/nvml_busy.py [--seconds S] [--only a,b] [--json FILE]
       bench/nvml_busy.py job KIND SECONDS OUT     (a job; started by the above)
Prints a markdown table; exits 1 when NVML cannot be read.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpumeasure as gm  # noqa: E402

SCENARIOS = {"small": ["small"], "gemm": ["gemm"], "gemm+gemm": ["gemm", "gemm"],
             "small+gemm": ["small", "gemm"], "tiny": ["tiny"]}


def job(kind, seconds, out):
    """Runs KIND for SECONDS after a 1.5 s warm-up; writes {pid, inflight_pct, rate} to OUT."""
    import torch
    dev = torch.device("cuda")
    if kind == "gemm":
        a = torch.randn(8192, 8192, device=dev, dtype=torch.float16)
        b = torch.randn(8192, 8192, device=dev, dtype=torch.float16)
        c = torch.empty_like(a)

        def burst():
            for _ in range(4):
                torch.matmul(a, b, out=c)
    else:
        x = torch.randn(65536 if kind == "small" else 1024, device=dev)

        def burst():
            for _ in range(50):
                x.mul_(0.999).add_(0.001)
    t_end = time.monotonic() + 1.5
    while time.monotonic() < t_end:
        burst()
        torch.cuda.synchronize()
    with open(out + ".ready", "w") as f:  # the sampler starts now: its window is ours
        f.write("ready\n")
    t0 = time.monotonic()
    t_end = t0 + seconds
    inflight = 0.0
    n = 0
    while True:
        a0 = time.monotonic()
        burst()
        torch.cuda.synchronize()
        a1 = time.monotonic()
        inflight += a1 - a0
        n += 1
        if a1 >= t_end:
            break
    wall = time.monotonic() - t0
    with open(out, "w") as f:
        json.dump({"pid": os.getpid(), "inflight_pct": 100.0 * inflight / wall,
                   "bursts_per_s": n / wall, "t0": t0, "t1": t0 + wall}, f)


def scenario(name, kinds, seconds, nvml):
    tmp = tempfile.mkdtemp(prefix="nvml-busy-")
    procs, outs = [], []
    for i, k in enumerate(kinds):
        o = os.path.join(tmp, f"{i}.json")
        outs.append(o)
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "job", k,
                                       str(seconds), o], env=gm.scrubbed_env()))
    # Imports, CUDA and the warm-up take seconds, and not alike: sample from the moment every
    # job says it measures, for the seconds they measure.
    deadline = time.monotonic() + 120
    while not all(os.path.exists(o + ".ready") for o in outs):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            break
        time.sleep(0.01)
    t_a = time.monotonic()
    dev, per, calls = [], {}, []
    last_d = last_p = int(time.time() * 1e6)
    while time.monotonic() < t_a + seconds - 0.1:
        time.sleep(0.1)
        for ts, v in nvml.util_samples(last_d):
            last_d = max(last_d, ts)
            dev.append((ts, v))
        c0 = time.perf_counter()
        got = nvml.process_util(last_p)
        calls.append(time.perf_counter() - c0)
        for pid, ts, v in got:
            last_p = max(last_p, ts)
            per.setdefault(pid, []).append((ts, v))
    for p in procs:
        p.wait(timeout=120)
    rows = []
    for k, o in zip(kinds, outs):
        try:
            with open(o) as f:
                j = json.load(f)
        except (OSError, ValueError):
            rows.append({"scenario": name, "job": k, "error": "no result"})
            continue
        s = per.get(j["pid"], [])
        ts = sorted(t for t, _ in s)
        gaps = [b - a for a, b in zip(ts, ts[1:])]
        rows.append({"scenario": name, "job": k, "pid": j["pid"],
                     "inflight_pct": j["inflight_pct"], "bursts_per_s": j["bursts_per_s"],
                     "proc_sm_pct": statistics.fmean(v for _, v in s) if s else None,
                     "proc_samples": len(s),
                     "proc_spacing_ms": statistics.median(gaps) / 1e3 if gaps else None,
                     "device_pct": statistics.fmean(v for _, v in dev) if dev else None,
                     "call_ms_median": statistics.median(calls) * 1e3 if calls else None,
                     "call_ms_max": max(calls) * 1e3 if calls else None})
    return rows


def main(argv):
    if argv[:1] == ["job"]:
        job(argv[1], float(argv[2]), argv[3])
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--only", default=",".join(SCENARIOS))
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    try:
        nvml = gm.Nvml(0, "libnvidia-ml.so.1")
    except gm.NvmlError as e:
        print(f"nvml_busy: {e}", file=sys.stderr)
        return 1
    rows = []
    for name in a.only.split(","):
        if name not in SCENARIOS:
            print(f'nvml_busy: --only: "{name}" is not a scenario (use '
                  f'{", ".join(SCENARIOS)})', file=sys.stderr)
            return 2
        rows += scenario(name, SCENARIOS[name], a.seconds, nvml)
    print("| scenario | job | in flight % | NVML process SM % | samples | spacing ms | "
          "NVML device % | call ms (median/max) |")
    print("|---|---|---|---|---|---|---|---|")
    f = gm_fmt
    for r in rows:
        if "error" in r:
            print(f"| {r['scenario']} | {r['job']} | {r['error']} | | | | | |")
            continue
        print(f"| {r['scenario']} | {r['job']} | {f(r['inflight_pct'])} | "
              f"{f(r['proc_sm_pct'])} | {r['proc_samples']} | {f(r['proc_spacing_ms'])} | "
              f"{f(r['device_pct'])} | {f(r['call_ms_median'], '.3f')}/"
              f"{f(r['call_ms_max'], '.3f')} |")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


def gm_fmt(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

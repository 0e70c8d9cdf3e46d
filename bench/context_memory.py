#!/usr/bin/env python3
"""How a context's device memory shows in NVML while many processes create contexts at once.

Runs the attach launcher (bench/attach.c, natively: no gpuslice) with N processes released
together and samples NVML from outside every PERIOD seconds: the device's used memory and the
list of compute processes with their used memory. Prints, for the processes of the run:

- when each was first listed, against its own cuInit and context times (is a process listed
  while its context is still being made, and with how much of its memory?);
- the device's memory that no listed process accounts for ("unattributed"), less what it was
  before the go, divided by the number of processes listed beyond those before the go: the
  per-context hidden part as a window estimate, over the creation and once everything settled.

This is what the interposer's estimate of a context's hidden part (src/preload/mem/charge.c,
hidden_from_look) is designed from; the numbers go to docs/results.md.

usage: bench/context_memory.py --launcher BIN [-n N ...] [--period S] [--json FILE]
"""
import argparse
import json
import subprocess
import sys
import threading
import time

sys.path.insert(0, __import__('os').path.dirname(__file__))
import gpumeasure

MiB = 1 << 20


def sampler(handle, period, out, stop):
    """Appends (t, device_used, {pid: used}) to out every period seconds until stop is set."""
    while not stop.is_set():
        t = time.monotonic()
        try:
            used = handle.memory()[2]
            procs = handle.process_memory()
        except gpumeasure.NvmlError as e:
            out.append((t, None, str(e)))
        else:
            out.append((t, used, procs))
        rest = period - (time.monotonic() - t)
        if rest > 0:
            time.sleep(rest)


def run_once(handle, launcher, n, period, settle):
    samples, stop = [], threading.Event()
    th = threading.Thread(target=sampler, args=(handle, period, samples, stop), daemon=True)
    th.start()
    time.sleep(0.3)
    proc = subprocess.Popen([launcher, str(n), "8", "120"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    go, kids = None, {}
    for line in proc.stdout:
        f = line.split()
        if not f:
            continue
        if f[0] == "go":
            go = float(f[1])
        elif f[0] == "proc":
            kids[int(f[2])] = {"status": f[3], "t0": float(f[4]), "t_init": float(f[5]),
                               "t_ctx": float(f[6])}
        elif f[0] == "holding":
            break
    time.sleep(settle)
    t_release = time.monotonic()
    proc.stdin.write("\n")
    proc.stdin.flush()
    proc.wait(timeout=60)
    time.sleep(settle)
    stop.set()
    th.join()
    return analyse(samples, go, kids, t_release, n)


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))] if xs else float("nan")


def analyse(samples, go, kids, t_release, n):
    good = [s for s in samples if s[1] is not None]
    before = [s for s in good if s[0] < go]
    if not before or not kids:
        return {"n": n, "error": "no sample before the go or no child reported"}
    base_t, base_used, base_procs = before[-1]
    base_unattr = base_used - sum(base_procs.values())
    res = {"n": n, "samples": len(good), "errors": len(samples) - len(good),
           "period_ms": 1e3 * (good[-1][0] - good[0][0]) / max(1, len(good) - 1),
           "base_used_MiB": base_used / MiB, "base_listed": len(base_procs),
           "base_unattributed_MiB": base_unattr / MiB}
    first, first_used, final_used, full_at = {}, {}, {}, {}
    for t, used, procs in good:
        for pid in kids:
            if pid in procs:
                if pid not in first:
                    first[pid], first_used[pid] = t, procs[pid]
                if procs[pid] != final_used.get(pid):
                    final_used[pid], full_at[pid] = procs[pid], t
    listed_rel_ctx = [first[p] - kids[p]["t_ctx"] for p in first if kids[p]["t_ctx"] > 0]
    listed_rel_init = [first[p] - kids[p]["t_init"] for p in first if kids[p]["t_init"] > 0]
    res["listed"] = len(first)
    res["first_listed_minus_ctx_s"] = [q(listed_rel_ctx, p) for p in (0, .5, 1)]
    res["first_listed_minus_init_s"] = [q(listed_rel_init, p) for p in (0, .5, 1)]
    res["first_listed_used_MiB"] = [q([v / MiB for v in first_used.values()], p)
                                    for p in (0, .5, 1)]
    res["final_used_MiB"] = [q([v / MiB for v in final_used.values()], p) for p in (0, .5, 1)]
    res["used_changed_after_listing"] = sum(1 for p in first if first_used[p] != final_used[p])
    res["last_change_minus_ctx_s"] = q([full_at[p] - kids[p]["t_ctx"] for p in full_at
                                        if kids[p]["t_ctx"] > 0], 1)
    ctx_done = max(k["t_ctx"] for k in kids.values())
    # The window estimate along the run: (unattributed - base) / (listed - base listed).
    during, settled, unattr_peak = [], [], 0
    series = []
    for t, used, procs in good:
        extra = len(procs) - len(base_procs)
        unattr = used - sum(procs.values()) - base_unattr
        unattr_peak = max(unattr_peak, unattr)
        if go <= t <= t_release:
            series.append((round(t - go, 4), len(procs), round(unattr / MiB, 2)))
        # (a sample begun just before the release may read the list after some children left)
        if extra <= 0 or t < go or t > t_release - 0.05:
            continue
        est = unattr / extra / MiB
        (settled if t > ctx_done + 0.2 else during).append(est)
    res["creation_s"] = ctx_done - go
    res["unattributed_peak_MiB"] = unattr_peak / MiB
    res["estimate_during_MiB"] = [q(during, p) for p in (0, .05, .5, .95, 1)]
    res["estimate_settled_MiB"] = [q(settled, p) for p in (0, .5, 1)]
    res["series"] = series
    # Each child's figure as it changed: (seconds after its context was current, MiB).
    traj = {}
    for t, used, procs in good:
        for pid, k in kids.items():
            if pid in procs and (pid not in traj or traj[pid][-1][1] != procs[pid] / MiB):
                traj.setdefault(pid, []).append((round(t - k["t_ctx"], 4), procs[pid] / MiB))
    res["trajectories"] = {str(p): v for p, v in traj.items()}
    steps = [v for v in traj.values()]
    res["figure_steps"] = [q([len(v) for v in steps], p) for p in (0, .5, 1)]
    # When the figure first reached 100 MiB, against the context's time.
    big = [next((t for t, u in v if u >= 100), None) for v in steps]
    res["figure_100MiB_minus_ctx_s"] = [q([b for b in big if b is not None], p)
                                        for p in (0, .5, 1)]
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--launcher", required=True)
    p.add_argument("-n", type=int, action="append", help="processes (repeatable; 1, 8, 64)")
    p.add_argument("--period", type=float, default=0.005)
    p.add_argument("--settle", type=float, default=1.5)
    p.add_argument("--json", default="")
    a = p.parse_args()
    h = gpumeasure.Nvml(0)
    runs = [run_once(h, a.launcher, n, a.period, a.settle) for n in (a.n or [1, 8, 64])]
    for r in runs:
        print(json.dumps({k: v for k, v in r.items() if k not in ("series", "trajectories")}))
        for pid, v in list(r.get("trajectories", {}).items())[:3]:
            print(f"  n={r['n']} pid {pid}: {v}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(runs, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())

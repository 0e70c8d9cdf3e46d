"""Many processes of one tenant attaching at once (issue 12, defect 3): do they all get a
context quickly, is none refused, and does the tenant's accounting match the device?

Runs the launcher (bench/attach.c) as `gpuslice run --memory SIZE -- attach N ALLOC_MIB`: N
children released together from a barrier, each loading libcuda.so.1, initialising CUDA,
making device 0's primary context current and allocating ALLOC_MIB, then holding it. While
all hold, the tenant's accounted usage (its shared-memory file: the device entry's mem_used,
and the per-process records; `gpuslice tenants --json` beside it) is compared with the truth:
the device-wide used memory (NVML nvmlDeviceGetMemoryInfo, read by this process, which runs
without the interposer) minus what it was before. On the simulated GPU (LD_LIBRARY_PATH with
its libcuda and libnvidia-ml, GPUSLICE_SIM_STATE) the same NVML call is the simulator's truth.
With --native the same launcher runs first without gpuslice: the machine's own attach times.

Prints the attach time (from before dlopen to a current context) per process: median, p99,
max; how many were refused or failed; accounted against the truth. Goal: every process
attaches in under --attach-limit (1 s; with --native, where the driver itself takes longer,
1.1 times its slowest attach in the same run), none is refused, and the accounting is within
--tolerance-mib (64 MiB) of the truth. On an H200 a context takes about 518 MiB, so 256
contexts need about 130 GiB: --memory auto gives the tenant what the device has free less
1 GiB (the default 48G fits 256 processes only where contexts are small, as on the
simulator's 64 MiB).

usage: bench/attach.py [-n N] [--alloc-mib M] [--memory SIZE|auto] [--native]
           [--launcher BIN] [--gpuslice BIN] [--timeout S] [--table FILE]
Output: progress, a table, check lines (@ok/@fail/@key/@num) for tests/gpu/report.py.
Exit status 1 when a verdict failed.
"""
import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time

import gpumeasure as gm

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class Run:
    """One launcher process; its stdout lines arrive on a queue."""

    def __init__(self, argv, env, tag):
        self.tag = tag
        print(f"  [{tag}] $ {' '.join(argv)}", flush=True)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, text=True, bufsize=1)
        self.q, self.lines, self.err = queue.Queue(), [], []
        threading.Thread(target=self._read, args=(self.proc.stdout, True), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, False), daemon=True).start()

    def _read(self, f, out):
        for line in f:
            line = line.rstrip("\n")
            if out:
                self.lines.append(line)
                self.q.put(line)
            else:
                self.err.append(line)
        if out:
            self.q.put(None)

    def until(self, word, timeout):
        """Waits for a line starting with word; returns its words, or None."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                line = self.q.get(timeout=left)
            except queue.Empty:
                return None
            if line is None:
                return None
            if line.startswith(word + " "):
                return line.split()

    def probe(self, timeout):
        """Asks every held child for cuMemGetInfo once; returns the launcher's probed line."""
        try:
            self.proc.stdin.write("probe\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        return self.until("probed", timeout + 30)

    def release(self, timeout):
        try:
            self.proc.stdin.write("go\n")
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        rel = self.until("released", timeout)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return rel

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def procs(self):
        """The children's reports: dicts."""
        out = []
        for ln in list(self.lines):
            f = ln.split()
            if len(f) == 10 and f[0] == "proc":
                out.append({"idx": int(f[1]), "pid": int(f[2]), "status": f[3],
                            "t0": float(f[4]), "t_init": float(f[5]), "t_ctx": float(f[6]),
                            "t_alloc": float(f[7]), "step": f[8], "code": int(f[9])})
        return out


def distribution(procs, t_go):
    """Attach times (t_ctx - t0) of the processes that got a context, and from the barrier."""
    att = [p["t_ctx"] - p["t0"] for p in procs if p["t_ctx"] > 0]
    from_go = [p["t_ctx"] - t_go for p in procs if p["t_ctx"] > 0 and t_go]
    alloc = [p["t_alloc"] - p["t0"] for p in procs if p["t_alloc"] > 0]
    d = {"n": len(att)}
    for name, v in (("attach", att), ("from_go", from_go), ("to_alloc", alloc)):
        d[name] = {"median": gm.percentile(v, 50), "p99": gm.percentile(v, 99),
                   "max": max(v) if v else None}
    return d


def used_now(nvml):
    return nvml.memory()[2]


def settled_used(nvml, tries=5, gap=0.2):
    """Device used memory once two readings in a row agree within 2 MiB."""
    last = used_now(nvml)
    for _ in range(tries):
        time.sleep(gap)
        cur = used_now(nvml)
        if abs(cur - last) <= 2 * MiB:
            return cur
        last = cur
    return last


def wait_back(nvml, base, timeout=15.0):
    """Seconds until the device's use is back within 16 MiB of base (None: not in time)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if used_now(nvml) <= base + 16 * MiB:
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


def tenants_json(gs, path):
    """The tenant's memory_used_bytes on device 0 from `gpuslice tenants --json`, or None."""
    base = os.path.basename(path)
    tid = base[len("gpuslice-"):-len(".tenant")] if base.startswith("gpuslice-") else base
    try:
        r = subprocess.run([gs, "tenants", "--json", "--interval", "0"], capture_output=True,
                           text=True, timeout=20, env=gm.scrubbed_env())
        doc = json.loads(r.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    for t in doc.get("tenants", []):
        if t.get("id") == tid:
            for d in t.get("devices", []):
                if d.get("index") == 0:
                    return d.get("memory_used_bytes")
    return None


def read_tenant(res, path, suffix):
    """The tenant's accounted usage on device 0 from its file, into res[...suffix]."""
    try:
        tf = gm.TenantFile(path)
        entry = tf.entry_for(0)
        if entry is None:
            res["error"] = f"the tenant file {path} has no entry for device 0"
        else:
            res["accounted" + suffix] = tf.mem_used(entry)
            live = tf.procs(entry)
            res["slots" + suffix] = len(live)
            res["slots_sum" + suffix] = sum(u for _, _, u in live)
            res["mem_limit"] = tf.device(entry)["mem_limit"]
        tf.close()
    except (OSError, ValueError) as e:
        res["error"] = f"cannot read the tenant file: {e}"


def attach_run(argv, env, tag, a, nvml, base, gs=None):
    """Runs the launcher once; returns a dict of what was measured."""
    res = {"tag": tag, "error": None}
    r = Run(argv, env, tag)
    try:
        ten = r.until("tenant", 60)
        go = r.until("go", 60)
        hold = r.until("holding", a.timeout + 30)
        if hold is None or go is None:
            res["error"] = (f"the launcher never said {'go' if go is None else 'holding'} "
                            f"(stderr: {' / '.join(r.err[-3:])[:300]})")
            r.kill()
            return res
        time.sleep(0.3)  # the last charges and the driver's figures settle
        res["truth"] = used_now(nvml) - base
        res["ok"], res["refused"], res["errors"], res["missing"] = (int(x) for x in hold[1:5])
        res["t_go"] = float(go[1])
        res["procs"] = r.procs()
        path = ten[1] if ten and len(ten) > 1 else "-"
        res["tenant"] = path
        if path != "-":
            read_tenant(res, path, "")
            if gs:
                res["cli_accounted_attach"] = tenants_json(gs, path)
        # Then each child asks cuMemGetInfo once, as a program asking for its free memory
        # does: the accounting as the next allocation or query of every process sees it.
        probed = r.probe(a.timeout)
        res["probed"] = probed
        time.sleep(0.3)
        res["truth_probe"] = used_now(nvml) - base
        if path != "-":
            read_tenant(res, path, "_probe")
            if gs:
                res["cli_accounted"] = tenants_json(gs, path)
        t_rel = time.monotonic()
        rel = r.release(60)
        res["released"] = rel
        res["back_s"] = wait_back(nvml, base)
        res["release_wall_s"] = time.monotonic() - t_rel
        res["stderr"] = r.err[-20:]
        return res
    finally:
        r.kill()


def fmt(v, spec=".3f"):
    return "-" if v is None else format(v, spec)


def main(argv):
    build = os.environ.get("GPU_BUILD_DIR") or "build-gpu"
    if not os.path.isabs(build):
        build = os.path.join(ROOT, build)
    p = argparse.ArgumentParser(prog="attach.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=256, help="processes (default 256)")
    p.add_argument("--alloc-mib", type=int, default=64, help="each allocates this (default 64)")
    p.add_argument("--memory", default="48G",
                   help="the tenant's limit (default 48G), or auto: the device's free memory "
                        "less 1 GiB")
    p.add_argument("--native", action="store_true", help="run the launcher natively first")
    p.add_argument("--launcher", default=os.path.join(build, "gpu", "attach"))
    p.add_argument("--gpuslice", default=os.environ.get("GPUSLICE_BIN")
                   or os.path.join(build, "bin", "gpuslice"))
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds for every child to report")
    p.add_argument("--attach-limit", type=float, default=1.0)
    p.add_argument("--tolerance-mib", type=float, default=64.0)
    p.add_argument("--table", default="")
    a = p.parse_args(argv)
    for f, what in ((a.launcher, "the launcher (bench/attach.sh builds it)"),
                    (a.gpuslice, "gpuslice")):
        if not os.access(f, os.X_OK):
            print(f"@fail {what} is not built: {f}")
            return 1
    if not gm.outside_interposer():
        print("@fail attach.py runs under the interposer: its NVML figures would be gpuslice's")
        return 1
    try:
        nvml = gm.Nvml(0)
    except gm.NvmlError as e:
        print(f"@fail NVML: {e}")
        return 1
    total, free, _ = nvml.memory()
    base = settled_used(nvml)
    limit = a.memory
    if a.memory == "auto":
        limit = f"{max(1, (free - (1 << 30)) // MiB)}M"
    sim = "GPUSLICE_SIM_STATE" in os.environ
    print(f"attach: {a.n} processes x {a.alloc_mib} MiB, one tenant under --memory {limit}; "
          f"device {total / MiB:.0f} MiB, {base / MiB:.0f} MiB used before"
          + (" (simulated GPU)" if sim else ""), flush=True)
    num = lambda k, v: print(f"@num {k} {v}")  # noqa: E731
    key = lambda k, v: print(f"@key {k} {v}")  # noqa: E731
    largs = [a.launcher, str(a.n), str(a.alloc_mib), str(a.timeout)]
    runs = []
    if a.native:
        nat = attach_run(largs, gm.scrubbed_env(), "native", a, nvml, base)
        runs.append(nat)
        if nat.get("error"):
            print(f"@note native run: {nat['error']}")
        base = settled_used(nvml)
    env = gm.scrubbed_env()
    res = attach_run([a.gpuslice, "run", "--memory", limit, "--"] + largs, env, "gpuslice", a,
                     nvml, base, a.gpuslice)
    runs.append(res)
    ok = True

    def check(cond, text):
        nonlocal ok
        ok = ok and bool(cond)
        print(("@ok " if cond else "@fail ") + text, flush=True)

    rows = ["| run | processes | attached | refused | failed | no report | attach s: median "
            "| p99 | max | from the barrier, max s | accounted MiB: held | truth | diff "
            "| accounted MiB: after a cuMemGetInfo each | truth | diff |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        if "procs" not in r:
            rows.append(f"| {r['tag']} | {a.n} | - | - | - | - | - | - | - | - | - | - | - | "
                        f"- | - | {(r['error'] or '')[:60]} |")
            continue
        d = distribution(r["procs"], r["t_go"])
        r["dist"] = d
        cells = []
        for sfx in ("", "_probe"):
            acc, truth = r.get("accounted" + sfx), r.get("truth" + sfx)
            diff = None if acc is None or truth is None else acc - truth
            cells.append(f"{fmt(None if acc is None else acc / MiB, '.0f')} | "
                         f"{fmt(None if truth is None else truth / MiB, '.0f')} | "
                         f"{fmt(None if diff is None else diff / MiB, '+.0f')}")
        rows.append(f"| {r['tag']} | {a.n} | {r['ok']} | {r['refused']} | {r['errors']} | "
                    f"{r['missing']} | {fmt(d['attach']['median'])} | {fmt(d['attach']['p99'])} | "
                    f"{fmt(d['attach']['max'])} | {fmt(d['from_go']['max'])} | "
                    f"{cells[0]} | {cells[1]} |")
        pre = "native_" if r["tag"] == "native" else ""
        for k in ("median", "p99", "max"):
            v = d["attach"][k]
            if v is not None:
                (num if pre else key)(f"{pre}attach_{k}_s", round(v, 4))
        if d["from_go"]["max"] is not None:
            num(f"{pre}from_barrier_max_s", round(d["from_go"]["max"], 4))
        num(f"{pre}truth_MiB", round(r["truth"] / MiB, 1))
        num(f"{pre}truth_per_process_MiB", round(r["truth"] / MiB / max(1, r["ok"]), 1))
        if r["back_s"] is not None:
            num(f"{pre}device_back_s", round(r["back_s"], 2))
        bad = [x for x in r["procs"] if x["status"] != "ok"]
        kinds = {}
        for x in bad:
            kinds[f"{x['status']} at {x['step']} ({x['code']})"] = kinds.get(
                f"{x['status']} at {x['step']} ({x['code']})", 0) + 1
        if kinds:
            print(f"  [{r['tag']}] not ok: " + ", ".join(f"{v} {k}" for k, v in kinds.items()),
                  flush=True)
        if r["tag"] == "native":
            print(f"@note native (no gpuslice): {r['ok']} of {a.n} attached; attach median "
                  f"{fmt(d['attach']['median'])} s, p99 {fmt(d['attach']['p99'])} s, max "
                  f"{fmt(d['attach']['max'])} s; {r['truth'] / MiB:.0f} MiB on the device")
    r = res
    if r.get("error") and "procs" not in r:
        check(False, f"gpuslice run: {r['error']}")
    else:
        d = r["dist"]
        key("refused", r["refused"])
        num("failed", r["errors"])
        num("no_report", r["missing"])
        natrun = runs[0] if a.native and runs[0] is not r and "procs" in runs[0] else None
        check(r["ok"] == a.n,
              f"all {a.n} processes of one tenant attached and allocated {a.alloc_mib} MiB: "
              f"{r['ok']} did, {r['refused']} refused, {r['errors']} failed otherwise, "
              f"{r['missing']} never reported"
              + (f" (natively {natrun['ok']} did, {natrun['refused']} refused, "
                 f"{natrun['errors']} failed)" if natrun else ""))
        mx = d["attach"]["max"]
        nat = natrun.get("dist") if natrun else None
        nat_text = (f"; natively: median {fmt(nat['attach']['median'])}, p99 "
                    f"{fmt(nat['attach']['p99'])}, max {fmt(nat['attach']['max'])} s"
                    if nat else "")
        # The driver itself may take longer than the bar: 64 contexts made at once took 14-15 s
        # each natively on the H200. Then the bar is what gpuslice adds: at most 10 % over the
        # driver's own slowest, measured in the same run.
        bar, why = a.attach_limit, f"{a.attach_limit:g} s"
        if nat and nat["attach"]["max"] is not None and 1.1 * nat["attach"]["max"] > bar:
            bar = 1.1 * nat["attach"]["max"]
            why = (f"{bar:.3f} s (the bar of {a.attach_limit:g} s is below the driver's own "
                   f"time: 1.1 x the slowest native attach)")
        check(mx is not None and mx < bar,
              f"every process attached (dlopen to a current context) in under {why}: median "
              f"{fmt(d['attach']['median'])}, p99 {fmt(d['attach']['p99'])}, max {fmt(mx)} s "
              f"over {d['n']} contexts" + nat_text)
        pr = r.get("probed")
        told = ("no answer" if pr is None else
                f"{pr[1]} of {r['ok']}, {pr[2]} failed, {pr[3]} silent")
        check(pr is not None and int(pr[1]) == r["ok"],
              f"every attached process answered cuMemGetInfo: {told}")
        acc, acc0 = r.get("accounted_probe"), r.get("accounted")
        if acc0 is not None:
            # Before the query: what the charges made while contexts were still being made
            # left (on the H200 a process's NVML figure shows its context seconds late).
            num("held_accounted_MiB", round(acc0 / MiB, 1))
            num("held_diff_MiB", round((acc0 - r["truth"]) / MiB, 1))
        if acc is None:
            check(False, f"the tenant's accounted usage: {r.get('error') or 'no tenant file'}")
        else:
            truth = r["truth_probe"]
            diff = acc - truth
            key("accounted_MiB", round(acc / MiB, 1))
            key("diff_MiB", round(diff / MiB, 1))
            num("tenant_slots", r.get("slots_probe"))
            num("tenant_slots_sum_MiB", round(r.get("slots_sum_probe", 0) / MiB, 1))
            if r.get("cli_accounted") is not None:
                num("tenants_json_MiB", round(r["cli_accounted"] / MiB, 1))
            check(abs(diff) <= a.tolerance_mib * MiB,
                  f"the tenant's accounted usage once each process asked cuMemGetInfo "
                  f"{acc / MiB:.0f} MiB (its file; {r.get('slots_probe')} process records summing "
                  f"to {r.get('slots_sum_probe', 0) / MiB:.0f} MiB; `gpuslice tenants --json`: "
                  f"{fmt(None if r.get('cli_accounted') is None else r['cli_accounted'] / MiB, '.0f')}"
                  f" MiB) vs the device's own change {truth / MiB:.0f} MiB (NVML, outside): "
                  f"|diff| {abs(diff) / MiB:.0f} <= {a.tolerance_mib:g} MiB; while held, "
                  f"before: {fmt(None if acc0 is None else (acc0 - r['truth']) / MiB, '+.0f')} MiB")
        if r.get("released") is None:
            check(False, "the launcher did not report the release of its children")
        elif int(r["released"][2]):
            check(False, f"{r['released'][2]} children had to be killed after the release")
        for line in r.get("stderr", [])[-5:]:
            print(f"  [gpuslice] stderr: {line}")
    table = (f"{a.n} processes of one tenant (`gpuslice run --memory {limit}`) released "
             f"together, each making device 0's primary context current and allocating "
             f"{a.alloc_mib} MiB; attach = dlopen(libcuda.so.1) to a current context; truth = "
             f"NVML device used memory (outside the interposer) minus before; accounted "
             f"while all hold, and again once each asked cuMemGetInfo (as the next "
             f"allocation or query of each process sees it). Goal: all attach, each under "
             f"{a.attach_limit:g} s, accounting (after the query) within "
             f"{a.tolerance_mib:g} MiB.\n\n" + "\n".join(rows))
    print(table)
    if a.table:
        with open(a.table, "w") as f:
            f.write(table + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

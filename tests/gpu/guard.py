"""gpusliced's guard on a real GPU (run as `python3 guard.py GS GPUSLICED WORKDIR`): managed
tenants that get past their interposer are found from NVML and stopped within 1 s, while a
well-behaved tenant beside them loses nothing.
- memory, zeroed usage words: a PyTorch process of a 2 GiB tenant holds 1 GiB (and its context,
  about 590 MiB on an H100), zeroes its tenant's usage words in the state file (which its
  processes may write), and allocates 1 GiB more: its interposer lets it through, NVML shows it over 2 GiB, the guard kills it;
- memory, bypass: a process of the same tenant run with LD_PRELOAD cleared (the interposer never
  loaded) allocates 3 GiB: killed;
- compute, a filled budget: a GEMM loop of a tenant with a 20 % ceiling whose own thread keeps
  the tenant's compute budget full (so its interposer never holds it back): frozen, its NVML
  share over the run near its ceiling;
- beside them, a tenant of 8 GiB runs GEMMs on 6 GiB throughout: never stopped, never refused,
  its rate before and during the attacks measured.
The time to stop is from the program's own CLOCK_MONOTONIC line ("over T", printed once it
holds more than its limit) to the moment this script sees it gone (polled every 5 ms).
Output follows gpucheck.py.
"""
import json
import os
import subprocess
import sys
import time

import gpucheck as gc
from daemon import api, start_daemon, stop_all

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable
MiB, GiB = 1 << 20, 1 << 30

CHILD = r'''
import mmap, os, sys, threading, time
import torch
GiB = 1 << 30
mode, state, flag = sys.argv[1], sys.argv[2], sys.argv[3]

def zero(path):
    f = os.open(path, os.O_RDWR)
    m = mmap.mmap(f, 0)
    for e in range(16):
        m[232 + e * 88 + 24:232 + e * 88 + 32] = bytes(8)
    for p in range(1024):
        o = 232 + 16 * 88 + p * 144 + 16
        m[o:o + 128] = bytes(128)

def fill_budget(path):
    f = os.open(path, os.O_RDWR)
    m = mmap.mmap(f, 0)
    while True:
        for e in range(16):
            o = 232 + e * 88 + 48
            m[o:o + 8] = (1 << 62).to_bytes(8, "little")
        time.sleep(0.001)

if mode == "zero":
    a = torch.empty(1 * GiB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    zero(state)
    b = torch.empty(1 * GiB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    print("over %.6f" % time.monotonic(), flush=True)
elif mode == "bypass":
    a = torch.empty(3 * GiB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    print("over %.6f" % time.monotonic(), flush=True)
elif mode == "hog":
    threading.Thread(target=fill_budget, args=(state,), daemon=True).start()
    x = torch.randn(8192, 8192, dtype=torch.float16, device="cuda")
    print("start %.6f" % time.monotonic(), flush=True)
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < 12:
        y = x @ x
        torch.cuda.synchronize()
        n += 1
    print("gemms %d" % n, flush=True)
    sys.exit(0)
elif mode == "good":
    hold = torch.empty(6 * GiB, dtype=torch.uint8, device="cuda")
    x = torch.randn(8192, 8192, dtype=torch.float16, device="cuda")
    t0 = time.monotonic()
    while not os.path.exists(flag) and time.monotonic() - t0 < 120:
        s = time.monotonic()
        for _ in range(8):
            y = x @ x
        torch.cuda.synchronize()
        print("rate %.6f %.1f" % (time.monotonic(), 8 / (time.monotonic() - s)), flush=True)
    print("good done", flush=True)
    sys.exit(0)
time.sleep(30)
'''


def state_file(run_dir, name):
    d = os.path.join(run_dir, "tenants")
    for f in sorted(os.listdir(d)):
        b = open(os.path.join(d, f), "rb").read(168)
        if b[104:168].split(b"\0")[0].decode() == name:
            return os.path.join(d, f)
    return None


def events(sock, kind):
    import socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1.5)
    s.connect(sock)
    s.sendall(b"GET /v1/events HTTP/1.1\r\nHost: d\r\nLast-Event-ID: 0\r\n\r\n")
    buf = b""
    try:
        while True:
            c = s.recv(65536)
            if not c:
                break
            buf += c
    except OSError:
        pass
    s.close()
    out, ev = [], None
    for line in buf.decode(errors="replace").splitlines():
        if line.startswith("event: "):
            ev = line[7:]
        elif line.startswith("data: ") and ev == kind:
            try:
                out.append(json.loads(line[6:]))
            except ValueError:
                pass
    return out


def until_over(p, timeout=60):
    """The child's 'over T' time, or None."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        line = p.stdout.readline()
        if not line:
            return None
        if line.startswith("over "):
            return float(line.split()[1])
    return None


def stopped_after(p, t_over, limit=5.0):
    while time.monotonic() - t_over < limit:
        if p.poll() is not None:
            return time.monotonic() - t_over
        time.sleep(0.005)
    return None


def main():
    if len(sys.argv) != 4:
        print("usage: guard.py GS GPUSLICED WORKDIR", file=sys.stderr)
        sys.exit(2)
    gs, gsd, work = sys.argv[1:]
    if not os.access(gsd, os.X_OK):
        gc.skip(f"{gsd} was not built (it needs libmicrohttpd and jansson)")
    run_dir = os.path.join(work, "grun")
    env = dict(os.environ, GPUSLICE_DAEMON_DIR=run_dir)
    if os.environ.get("GPU_DEPS_LIB"):
        denv = dict(env, LD_LIBRARY_PATH=os.environ["GPU_DEPS_LIB"])
    else:
        denv = env
    log = open(os.path.join(work, "gpusliced-guard.log"), "w")
    d, sock, ready = start_daemon(gsd, run_dir, log, env=denv)
    if d is None:
        gc.check(False, "gpusliced became ready")
        gc.done()
    child = os.path.join(work, "guard_child.py")
    open(child, "w").write(CHILD)
    procs = []
    try:
        for name, body in (("cheat", {"memory": "2G"}), ("good", {"memory": "8G"}),
                           ("hog", {"compute": 20})):
            st, _ = api(sock, "POST", "/v1/tenants", dict(body, name=name))
            gc.check(st == 201, f"tenant {name} made ({st})")
        stop = os.path.join(work, "guard_good_stop")
        good = subprocess.Popen([gs, "-q", "run", "--tenant", "good", "--", PY, child, "good", "-",
                                 stop], env=env, stdout=subprocess.PIPE, text=True)
        procs.append(good)
        time.sleep(8)  # PyTorch's start and the first GEMMs
        # Memory: zeroed usage words.
        cheat_state = state_file(run_dir, "cheat")
        gc.check(cheat_state is not None, f"cheat's state file: {cheat_state}")
        p = subprocess.Popen([gs, "-q", "run", "--tenant", "cheat", "--", PY, child, "zero",
                              cheat_state or "-", "-"], env=env, stdout=subprocess.PIPE, text=True)
        procs.append(p)
        t_over = until_over(p)
        gc.check(t_over is not None, "zeroed usage words: 1 GiB more passed the interposer of "
                                     "a 2 GiB tenant")
        took = stopped_after(p, t_over) if t_over else None
        gc.key("guard_zero_stop_ms", round(took * 1000) if took else -1)
        gc.check(took is not None and took <= 1.0,
                 f"zeroed usage words: stopped {took * 1000 if took else -1:.0f} ms after it "
                 f"went over (bound 1000)")
        # Memory: LD_PRELOAD cleared.
        p = subprocess.Popen([gs, "-q", "run", "--tenant", "cheat", "--", "env", "-u",
                              "LD_PRELOAD", PY, child, "bypass", "-", "-"], env=env,
                             stdout=subprocess.PIPE, text=True)
        procs.append(p)
        t_over = until_over(p)
        gc.check(t_over is not None, "bypass: 3 GiB allocated with the interposer not loaded")
        took = stopped_after(p, t_over) if t_over else None
        gc.key("guard_bypass_stop_ms", round(took * 1000) if took else -1)
        gc.check(took is not None and took <= 1.0,
                 f"bypass: stopped {took * 1000 if took else -1:.0f} ms after it went over "
                 f"(bound 1000)")
        ev = events(sock, "tenant.over_limit")
        mem_ev = [e for e in ev if e["kind"] == "memory" and e["name"] == "cheat"]
        gc.check(len(mem_ev) == 2 and all(e["action"] == "killed" for e in mem_ev),
                 f"two tenant.over_limit events for cheat, killed: "
                 f"{[(e['used'] // MiB, e['limit'] // MiB) for e in mem_ev]}")
        # Compute: a filled budget.
        hog_state = state_file(run_dir, "hog")
        p = subprocess.Popen([gs, "-q", "run", "--tenant", "hog", "--", PY, child, "hog",
                              hog_state or "-", "-"], env=env, stdout=subprocess.PIPE, text=True)
        procs.append(p)
        line = p.stdout.readline()
        t_start = float(line.split()[1]) if line.startswith("start ") else None
        first_stop = None
        while p.poll() is None and time.monotonic() - (t_start or time.monotonic()) < 40:
            try:
                for pid in subprocess.run(["pgrep", "-f", "guard_child.py hog"],
                                          capture_output=True, text=True).stdout.split():
                    st = open(f"/proc/{pid}/status").read()
                    if "\nState:\tT" in st and first_stop is None:
                        first_stop = time.monotonic()
            except OSError:
                pass
            time.sleep(0.01)
        out = p.stdout.read()
        p.wait(60)
        gemms = int(out.split("gemms ")[1].split()[0]) if "gemms " in out else -1
        took = first_stop - t_start if first_stop and t_start else None
        gc.key("guard_hog_freeze_ms", round(took * 1000) if took else -1)
        gc.num("guard_hog_gemms_12s", gemms)
        ev = events(sock, "tenant.over_limit")
        comp_ev = [e for e in ev if e["kind"] == "compute" and e["name"] == "hog"]
        gc.check(bool(comp_ev) and all(e["action"] == "frozen" for e in comp_ev),
                 f"filled budget: tenant.over_limit compute events, frozen "
                 f"({[e['used'] for e in comp_ev]} % against 20)")
        # Frozen, never killed: the guard holds a multi-threaded PyTorch process (CUDA's and
        # PyTorch's threads, the budget filler) stopped by each thread's state, and a false
        # "continued while frozen" would kill it (exit -9, no gemms line).
        log.flush()
        cont = [l for l in open(log.name, errors="replace") if "continued while frozen" in l]
        gc.check(p.returncode == 0 and gemms > 0 and not cont,
                 f"filled budget: frozen and let go, never killed as continued (exit "
                 f"{p.returncode}, {gemms} GEMMs; {cont[:1]})")
        gc.check(took is not None and took <= 2.5,
                 f"filled budget: first frozen {took * 1000 if took else -1:.0f} ms after its GEMM "
                 f"loop started (NVML's per-process utilization lags; bound 2500)")
        # The well-behaved tenant.
        open(stop, "w").close()
        out = good.communicate(timeout=60)[0]
        rates = [(float(a), float(b)) for a, b in
                 (l.split()[1:3] for l in out.splitlines() if l.startswith("rate "))]
        gc.check(good.returncode == 0 and "good done" in out,
                 f"the well-behaved tenant ran through (exit {good.returncode})")
        ev = events(sock, "tenant.over_limit")
        gc.check(not [e for e in ev if e["name"] == "good"], "no action on the well-behaved tenant")
        if rates:
            n = len(rates)
            before = sorted(r for _, r in rates[:max(1, n // 6)])
            gc.num("guard_good_gemm_rate_first", round(before[len(before) // 2], 1))
            gc.num("guard_good_gemm_rate_all", round(sorted(r for _, r in rates)[n // 2], 1))
    finally:
        stop_all(procs, d, log)
    gc.done()


if __name__ == "__main__":
    main()

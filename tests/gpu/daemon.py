"""gpusliced on a real GPU (run as `python3 daemon.py GS GPUSLICED WORKDIR`):
- its /v1/devices and /metrics agree with nvidia-smi while a PyTorch tenant runs: memory within
  64 MiB and utilization within 5 points, at rest and under a saturating GEMM loop (the medians
  of paired readings, each pair read within ~0.2 s of each other);
- a tenant made through the API, joined with gpuslice run --tenant, holds torch_limit.py to its
  4 GiB as gpuslice run --memory does;
- a kill -9 and restart of the daemon while a PyTorch program of a tenant runs: the daemon shows
  the same tenant and usage again, and the program, after the restart, is still refused beyond
  its limit and allowed within it.
Output follows gpucheck.py.
"""
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

import gpucheck as gc
from gpucheck import GiB, MiB

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable


def api(sock, method, path, body=None):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock)
    data = json.dumps(body).encode() if body is not None else b""
    head = "%s %s HTTP/1.1\r\nHost: d\r\nConnection: close\r\nContent-Length: %d\r\n%s\r\n" % (
        method, path, len(data), "Content-Type: application/json\r\n" if body is not None else "")
    s.sendall(head.encode() + data)
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    s.close()
    head, _, rest = out.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    try:
        return status, json.loads(rest)
    except ValueError:
        return status, rest.decode(errors="replace")


def start_daemon(gsd, run_dir, log, env=None):
    p = subprocess.Popen([gsd, "--foreground", "--config", "/dev/null", "--run-dir", run_dir],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    sock = os.path.join(run_dir, "gpusliced.sock")
    t0 = time.monotonic()
    while time.monotonic() - t0 < 10:
        try:
            if api(sock, "GET", "/readyz")[0] == 200:
                return p, sock, time.monotonic() - t0
        except OSError:
            pass
        time.sleep(0.02)
    p.kill()
    return None, sock, None


def stop_all(procs, d, log):
    """Kills the test's processes left running, stops the daemon d (if started), closes its log."""
    for p in procs:
        if p.poll() is None:
            p.kill()
    if d is not None and d.poll() is None:
        d.terminate()
        d.wait(10)
    log.close()


def smi():
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used,utilization.gpu",
                          "--format=csv,noheader,nounits", "-i", "0"], capture_output=True,
                         text=True, timeout=30).stdout.strip().split(",")
    return float(out[0]) * MiB, float(out[1])


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + "{") and 'gpu="0"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def agreement(sock, phase, pairs=6):
    mem_d, util_d, mem_m, smi_m, smi_u, d_u = [], [], [], [], [], []
    for _ in range(pairs):
        st, devs = api(sock, "GET", "/v1/devices")
        m, u = smi()
        st2, text = api(sock, "GET", "/metrics")
        d = devs["devices"][0]
        smi_m.append(m)
        smi_u.append(u)
        d_u.append(100 * d["utilization"])
        mem_d.append(abs(d["memory_used_bytes"] - m))
        util_d.append(abs(100 * d["utilization"] - u))
        mm = metric(text, "gpuslice_gpu_memory_used_bytes")
        mem_m.append(abs(mm - m) if mm is not None else float("inf"))
        time.sleep(0.3)
    md, ud, mm = statistics.median(mem_d), statistics.median(util_d), statistics.median(mem_m)
    gc.num(f"daemon_{phase}_smi_mem_MiB", round(statistics.median(smi_m) / MiB, 1))
    gc.num(f"daemon_{phase}_smi_util", statistics.median(smi_u))
    gc.num(f"daemon_{phase}_util", statistics.median(d_u))
    gc.num(f"daemon_{phase}_reserved_MiB", round(devs["devices"][0].get("memory_reserved_bytes", 0) / MiB, 1))
    gc.num(f"daemon_{phase}_mem_diff_MiB", round(md / MiB, 1))
    gc.num(f"daemon_{phase}_util_diff_points", round(ud, 1))
    gc.check(md <= 64 * MiB, f"{phase}: /v1/devices memory within 64 MiB of nvidia-smi "
                             f"(median of {pairs}: {md / MiB:.1f} MiB)")
    gc.check(mm <= 64 * MiB, f"{phase}: /metrics memory within 64 MiB of nvidia-smi "
                             f"(median {mm / MiB:.1f} MiB)")
    gc.check(ud <= 5, f"{phase}: utilization within 5 points of nvidia-smi (median {ud:.1f})")
    return devs


def main():
    if len(sys.argv) != 4:
        print("usage: daemon.py GS GPUSLICED WORKDIR", file=sys.stderr)
        sys.exit(2)
    gs, gsd, work = sys.argv[1:]
    if not os.access(gsd, os.X_OK):
        gc.skip(f"{gsd} was not built (it needs libmicrohttpd and jansson)")
    run_dir = os.path.join(work, "drun")
    env = dict(os.environ, GPUSLICE_DAEMON_DIR=run_dir)
    log = open(os.path.join(work, "gpusliced.log"), "w")
    # The carried libraries' own dependencies (libcurl's) are the daemon's alone.
    denv = dict(env, LD_LIBRARY_PATH=os.environ["GPU_DEPS_LIB"]) if os.environ.get("GPU_DEPS_LIB") else None
    d, sock, ready = start_daemon(gsd, run_dir, log, env=denv)
    if d is None:
        gc.check(False, "gpusliced became ready")
        gc.done()
    procs = []
    try:
        st, r = api(sock, "GET", "/readyz")
        gc.check(st == 200 and r.get("simulated") is False,
                 f"ready in {ready:.2f} s on the real GPU ({r})")
        st, t = api(sock, "POST", "/v1/tenants", {"name": "gpu", "memory": "4G"})
        gc.check(st == 201, f"tenant made through the API ({st})")
        st, t = api(sock, "POST", "/v1/tenants", {"name": "load", "memory": "16G"})
        # torch_limit.py under the API's tenant, as under gpuslice run --memory 4G.
        r = subprocess.run([gs, "-q", "run", "--tenant", "gpu", "--", PY,
                            os.path.join(HERE, "torch_limit.py"), "plain", str(4 * GiB)],
                           env=env, capture_output=True, text=True, timeout=120)
        sys.stdout.write(r.stdout)
        gc.check(r.returncode == 0, f"torch_limit.py plain under the API's tenant (exit "
                                    f"{r.returncode}){': ' + r.stderr[-300:] if r.returncode else ''}")
        # nvidia-smi against the daemon: at rest, then with a tenant's GEMM loop running.
        agreement(sock, "idle")
        flag = os.path.join(work, "daemon_load_stop")
        procs.append(subprocess.Popen([gs, "-q", "run", "--tenant", "load", "--", PY,
                                       os.path.join(HERE, "daemon_torch.py"), "load", flag],
                                      env=env))
        time.sleep(6)
        devs = agreement(sock, "busy")
        st, lt = api(sock, "GET", "/v1/tenants/load")
        used = lt["devices"][0]["memory_used_bytes"] if st == 200 and lt["devices"] else 0
        gc.num("daemon_load_tenant_used_MiB", round(used / MiB, 1))
        gc.check(st == 200 and lt["processes"] == 1 and used >= 6 * GiB,
                 f"the busy tenant shown with its process and {used / MiB:.0f} MiB")
        open(flag, "w").close()
        procs[-1].wait(60)
        # kill -9 and restart while a PyTorch program of a tenant runs.
        ready_f, go_f = os.path.join(work, "dt_ready"), os.path.join(work, "dt_go")
        out = open(os.path.join(work, "daemon_torch.out"), "w")
        p = subprocess.Popen([gs, "-q", "run", "--tenant", "gpu", "--", PY,
                              os.path.join(HERE, "daemon_torch.py"), "restart", ready_f, go_f],
                             env=env, stdout=out, stderr=subprocess.STDOUT)
        procs.append(p)
        t0 = time.monotonic()
        while not os.path.exists(ready_f) and time.monotonic() - t0 < 60:
            time.sleep(0.1)
        time.sleep(0.5)
        st, before = api(sock, "GET", "/v1/tenants/gpu")
        d.send_signal(signal.SIGKILL)
        d.wait()
        d, sock, ready = start_daemon(gsd, run_dir, log, env=denv)
        gc.check(d is not None and ready < 1.0,
                 f"restarted after kill -9, ready in {ready if ready else -1:.2f} s")
        st, after = api(sock, "GET", "/v1/tenants/gpu")
        same = (st == 200 and after["limits"] == before["limits"] and after["id"] == before["id"]
                and after["processes"] == before["processes"] == 1 and abs(
                    after["devices"][0]["memory_used_bytes"] -
                    before["devices"][0]["memory_used_bytes"]) < 64 * MiB)
        gc.check(same, "after the restart: the same tenant, limit, process and usage "
                       f"({before['devices'][0]['memory_used_bytes'] / MiB:.0f} MiB before, "
                       f"{after['devices'][0]['memory_used_bytes'] / MiB:.0f} MiB after)")
        open(go_f, "w").close()
        rc = p.wait(120)
        out.close()
        text = open(out.name).read()
        sys.stdout.write(text)
        gc.check(rc == 0 and "refused beyond the limit" in text and "within the limit" in text,
                 f"the PyTorch run finished with its limit intact (exit {rc})")
    finally:
        stop_all(procs, d, log)
    gc.done()


if __name__ == "__main__":
    main()

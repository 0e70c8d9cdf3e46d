#!/usr/bin/env python3
"""The node soak of issue 28: gpusliced on the simulated GPU under what a busy node puts on it,
and its answers measured.

While it runs:
- HOGS CPU-heavy tenant processes (a shell's busy loop, nice 0), each joined to one of TENANTS
  managed tenants with `gpuslice run --tenant` (so the daemon's sweep follows them), and one
  more under a plain `gpuslice run --memory 512M`;
- SLOW slow clients of another user (nobody, when run as root): connections to the API socket
  that send a request one byte a second, opened again whenever the daemon answers or closes
  them (tests/integration/net_clients.py hold --reconnect);
- PLANT planted tenant files in the daemon's tenant directory, gpuslice-<uid>-<pid>-<n>.tenant,
  copies of the plain tenant's live file (--plant-kind copy: live-looking, as the audit made
  them) or zeros (--plant-kind zero), owned by that user;
- a load of RATE requests a second for SECONDS (bench/node_load.c, built here with cc): open
  loop over CONNS keep-alive connections, each request measured from when it was due, at nice
  CLIENT_NICE (root only) so that the load's own scheduling is not what is measured.

It prints the latency the load saw (p50, p90, p99, p99.9, max), its errors, the rate reached, the
daemon's own request histogram (gpuslice_daemon_request_duration_seconds) and, every
--every seconds, the daemon's RSS, CPU use and threads, the slow clients' state and the load's
p99 and max over that second; --json writes the same as JSON. The target (issue 28): p99 under
10 ms, RSS flat and under the DaemonSet's request (64 MiB).

First (--calibrate SECONDS, 10; 0: not), with the hogs already running, the same load is sent
for that long to a server that answers at once (node_load --serve: a thread per connection, at
the daemon's nice): what the machine itself gives at that moment, to set the daemon's numbers
against on a machine shared with other work.

    bench/node_soak.py [--build build] [--seconds 60] [--rate 1000] [--conns 16] [--hogs 2xCPUs]
                       [--tenants 8] [--slow 130] [--plant 600] [--plant-kind copy|zero]
                       [--daemon-arg ARG]... [--client-nice -15] [--mix "GET /healthz;..."]
                       [--every 5] [--json FILE]
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_common import Daemon, UnixConnection, request, ROOT  # noqa: E402

NOBODY = 65534
DEFAULT_MIX = ("GET /healthz;GET /v1/tenants;GET /v1/devices;GET /v1/tenants/soak-0;"
               "GET /v1/tenants/soak-1/processes;GET /readyz;GET /metrics;GET /v1/tenants")


def build_load(build):
    out = os.path.join(build, "bench", "node_load")
    src = os.path.join(ROOT, "bench", "node_load.c")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        subprocess.check_call([os.environ.get("CC", "cc"), "-O2", "-Wall", "-pthread", "-o", out,
                               src])
    return out


def machine():
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu_model": model, "kernel": os.uname().release,
            "loadavg_before": open("/proc/loadavg").read().split()[:3]}


def histogram(sock):
    """The daemon's own latency histogram: {le: count} of its request duration."""
    c = UnixConnection(sock)
    st, text = request(c, "GET", "/metrics")
    c.close()
    out = {}
    for m in re.finditer(r'gpuslice_daemon_request_duration_seconds_bucket\{le="([^"]+)"\} (\d+)',
                         text if isinstance(text, str) else ""):
        out[m.group(1)] = int(m.group(2))
    return out


def hist_quantile(h, q):
    """The bucket bound holding quantile q of a cumulative histogram."""
    if not h:
        return None
    total = max(h.values())
    for le, n in sorted(h.items(), key=lambda kv: float("inf") if kv[0] == "+Inf" else float(kv[0])):
        if n >= q * total:
            return le
    return "+Inf"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--rate", type=float, default=1000)
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--hogs", type=int, default=2 * (os.cpu_count() or 1))
    ap.add_argument("--tenants", type=int, default=8)
    ap.add_argument("--slow", type=int, default=130)
    ap.add_argument("--plant", type=int, default=600)
    ap.add_argument("--plant-kind", choices=["copy", "zero"], default="copy")
    ap.add_argument("--daemon-arg", action="append", default=[])
    ap.add_argument("--client-nice", type=int, default=-15)
    ap.add_argument("--mix", default=DEFAULT_MIX)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--calibrate", type=float, default=10)
    ap.add_argument("--json")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    root = os.geteuid() == 0
    load_bin = build_load(build)
    gs = os.path.join(build, "bin", "gpuslice")
    info = {"machine": machine(), "config": vars(a).copy()}

    extra = list(a.daemon_arg)
    if root and a.slow:
        extra += ["--socket-group", "nogroup"]
    d = Daemon(build, extra, session=True)
    procs = []
    try:
        # Another user's clients and files need to reach the run and tenant directories.
        for p in (d.dir, d.run_dir, d.env["GPUSLICE_RUN_DIR"]):
            os.chmod(p, 0o755 if p != d.env["GPUSLICE_RUN_DIR"] else 0o1777)
        c = UnixConnection(d.sock)
        for i in range(a.tenants):
            st, body = request(c, "POST", "/v1/tenants",
                               {"name": "soak-%d" % i, "memory": "1G", "compute": 50})
            if st != 201:
                raise SystemExit("node_soak: cannot make tenant soak-%d: %s %s" % (i, st, body))
        c.close()
        env = dict(d.env)
        hog = ["sh", "-c", "while :; do :; done"]
        for i in range(a.hogs):
            # A session each: gpuslice run forks its program, which a kill of the run alone
            # would leave running; its whole group is killed at the end.
            procs.append(subprocess.Popen([gs, "run", "-q", "--tenant", "soak-%d" % (i % a.tenants),
                                           "--"] + hog, env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, start_new_session=True))
        plain = subprocess.Popen([gs, "run", "-q", "--memory", "512M", "--"] + hog, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
        procs.append(plain)
        tdir = env["GPUSLICE_RUN_DIR"]
        src = None
        for _ in range(100):
            files = [f for f in os.listdir(tdir) if f.endswith(".tenant")]
            if files:
                src = os.path.join(tdir, files[0])
                break
            time.sleep(0.05)
        planted_uid = NOBODY if root else os.getuid()
        content = open(src, "rb").read() if (a.plant_kind == "copy" and src) else bytes(4096)
        for n in range(a.plant):
            path = os.path.join(tdir, "gpuslice-%d-%d-%x.tenant" % (planted_uid, 100000 + n, n))
            with open(path, "wb") as f:
                f.write(content)
            os.chmod(path, 0o600)
            if root:
                os.chown(path, NOBODY, NOBODY)
        info["planted"] = {"files": a.plant, "kind": a.plant_kind if src or a.plant_kind == "zero"
                           else "zero (no live file to copy)", "bytes_each": len(content)}
        slow_out = os.path.join(d.dir, "slow.out")
        slow = None
        if a.slow:
            nc = os.path.join(ROOT, "tests", "integration", "net_clients.py")
            cmd = ["hold", d.sock, str(a.slow), str(a.seconds + 10), "--reconnect", "--out",
                   slow_out]
            if root and os.path.exists("/usr/bin/python3"):
                open(slow_out, "w").close()
                os.chown(slow_out, NOBODY, NOBODY)
                slow = subprocess.Popen(["setpriv", "--reuid", str(NOBODY), "--regid",
                                         str(NOBODY), "--clear-groups", "/usr/bin/python3", nc]
                                        + cmd, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
            else:
                print("node_soak: not root: the slow clients are this user's, and share its "
                      "max-peer-connections with the load", file=sys.stderr)
                slow = subprocess.Popen([sys.executable, nc] + cmd, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
            procs.append(slow)
        time.sleep(2)  # the hogs joined, the slow clients in, a sweep or two over the files
        nice = a.client_nice if root else 0
        daemon_nice = -10
        for x in a.daemon_arg:
            if x.startswith("--nice="):
                daemon_nice = int(x.split("=", 1)[1])
        if a.calibrate > 0:
            floor_sock = os.path.join(d.dir, "floor.sock")
            floor = subprocess.Popen([load_bin, "--serve", floor_sock], start_new_session=True,
                                     preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0,
                                                                       daemon_nice if root else 0))
            procs.append(floor)
            while not os.path.exists(floor_sock):
                time.sleep(0.01)
            out = subprocess.run([load_bin, "--unix", floor_sock, "--rate", str(a.rate),
                                  "--seconds", str(a.calibrate), "--conns", str(a.conns),
                                  "--mix", a.mix], stdout=subprocess.PIPE, text=True,
                                 preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, nice))
            info["floor"] = json.loads([x for x in out.stdout.splitlines() if x.startswith("{")][0])
            os.killpg(floor.pid, signal.SIGKILL)

        samples, stop = [], threading.Event()
        cpu0, t_start = d.cpu_seconds(), time.monotonic()

        def sample():
            last_cpu, last_t = cpu0, t_start
            while not stop.wait(1.0):
                now, cpu = time.monotonic(), d.cpu_seconds()
                s = {"t": round(now - t_start, 1), "rss_kib": d.rss_kib(),
                     "cpu_pct": round(100 * (cpu - last_cpu) / (now - last_t), 1),
                     "threads": d.threads(), "slow": None}
                try:
                    lines = [line for line in open(slow_out) if line.startswith("alive ")]
                    if lines:
                        s["slow"] = lines[-1].strip()
                except OSError:
                    pass
                last_cpu, last_t = cpu, now
                samples.append(s)

        sampler = threading.Thread(target=sample)
        sampler.start()
        load = subprocess.Popen([load_bin, "--unix", d.sock, "--rate", str(a.rate), "--seconds",
                                 str(a.seconds), "--conns", str(a.conns), "--mix", a.mix],
                                stdout=subprocess.PIPE, text=True,
                                preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, nice))
        seconds_lines, summary = [], None
        for line in load.stdout:
            if line.startswith("sec "):
                w = line.split()
                seconds_lines.append({"sec": int(w[1]), "sent": int(w[3]), "done": int(w[5]),
                                      "errors": int(w[7]), "p99_ms": float(w[9]),
                                      "max_ms": float(w[11])})
            elif line.startswith("{"):
                summary = json.loads(line)
        load.wait()
        stop.set()
        sampler.join()
        cpu_total = d.cpu_seconds() - cpu0
        hist = histogram(d.sock)
        alive = d.alive()
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # each started a session of its own
            except OSError:
                pass
        for p in procs:
            p.wait()
        rc, log = d.stop()

    rss = [s["rss_kib"] for s in samples]
    info.update(load=summary, per_second=seconds_lines, samples=samples,
                daemon={"alive_at_end": alive, "exit": rc, "cpu_seconds": round(cpu_total, 2),
                        "cpu_pct_mean": round(100 * cpu_total / max(1e-9, a.seconds), 1),
                        "rss_kib_first": rss[0] if rss else None,
                        "rss_kib_max": max(rss) if rss else None,
                        "rss_kib_last": rss[-1] if rss else None,
                        "histogram": hist, "hist_p50_le": hist_quantile(hist, 0.5),
                        "hist_p99_le": hist_quantile(hist, 0.99)},
                loadavg_after=open("/proc/loadavg").read().split()[:3])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(info, f, indent=1)
    m = info["machine"]
    print("node soak: %d CPUs (%s), load average %s before, %s after" %
          (m["cpus"], m["cpu_model"], " ".join(m["loadavg_before"]),
           " ".join(info["loadavg_after"])))
    print("  %d CPU-heavy tenant processes in %d managed tenants and 1 plain; %d slow clients "
          "of uid %d; %d planted tenant files (%s)" %
          (a.hogs, a.tenants, a.slow, NOBODY if root else os.getuid(), a.plant,
           info["planted"]["kind"]))
    if info.get("floor"):
        f = info["floor"]
        print("  the machine's floor (node_load --serve at nice %d, %.0f s, same load, hogs running): "
              "p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, max %.3f ms" %
              (daemon_nice if root else 0, a.calibrate, f["p50_ms"], f["p99_ms"], f["p999_ms"],
               f["max_ms"]))
    if summary:
        print("  load: %d requests at %.0f/s for %.0f s over %d connections (client nice %d): "
              "%d answered" % (summary["requests"], a.rate, a.seconds, a.conns, nice,
                               summary["answered"]))
        print("  latency: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, max %.3f ms" %
              (summary["p50_ms"], summary["p90_ms"], summary["p99_ms"], summary["p999_ms"],
               summary["max_ms"]))
        print("  errors: %s; answers %s" % (summary["errors"], summary["status"]))
    dd = info["daemon"]
    print("  daemon: CPU %.1f %% of one CPU on average; RSS %s -> max %s -> %s KiB; its own "
          "histogram: p50 <= %s s, p99 <= %s s; alive at the end: %s, exit %s" %
          (dd["cpu_pct_mean"], dd["rss_kib_first"], dd["rss_kib_max"], dd["rss_kib_last"],
           dd["hist_p50_le"], dd["hist_p99_le"], dd["alive_at_end"], dd["exit"]))
    print("  %6s %9s %9s %8s %7s %7s  %s" % ("t (s)", "p99 (ms)", "max (ms)", "RSS KiB", "CPU %",
                                              "threads", "slow clients"))
    for s in samples:
        if int(s["t"]) % a.every == 0 or s is samples[-1]:
            sec = [x for x in seconds_lines if x["sec"] == int(s["t"])]
            print("  %6.0f %9s %9s %8d %7.1f %7d  %s" % (
                s["t"], "%.3f" % sec[0]["p99_ms"] if sec else "-",
                "%.3f" % sec[0]["max_ms"] if sec else "-", s["rss_kib"], s["cpu_pct"],
                s["threads"], s["slow"] or "-"))
    if rc not in (0, None) or not alive:
        print("node_soak: the daemon did not survive (exit %s); its log:\n%s" % (rc, log[-2000:]))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

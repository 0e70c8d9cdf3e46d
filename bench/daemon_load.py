#!/usr/bin/env python3
"""Load on gpusliced: CLIENTS keep-alive clients sending RATE requests a second in all, for
SECONDS, over the unix socket, with SSE subscribers reading the event stream, while PROCS tenant
processes run on the simulated GPU (joined to 8 managed tenants with gpuslice run --tenant).
Prints the request latency the clients saw (p50, p99, max) by kind and in all, the daemon's own
(its gpuslice_daemon_request_duration_seconds histogram: the bucket bounds holding p50 and p99,
and the share within 10 ms), the rate reached, errors, and the daemon's CPU use, memory and
threads; --json writes the same as JSON. The target: p99 < 10 ms. The clients are Python
threads: on a small machine their own scheduling shows in what they see.

    bench/daemon_load.py [--build build] [--clients 50] [--rate 1000] [--seconds 60]
                         [--procs 64] [--sse 4] [--json FILE]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_common import Daemon, UnixConnection, percentile, request, ROOT  # noqa: E402

KINDS = ["GET /v1/tenants", "GET /v1/devices", "GET /metrics", "GET /v1/tenants/{t}",
         "GET /v1/tenants/{t}/processes", "PATCH /v1/tenants/{t}", "GET /healthz"]


def client(sock, deadline, period, tenants, out, errors, rng):
    conn = UnixConnection(sock)
    nxt = time.monotonic() + rng.random() * period
    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        if now < nxt:
            time.sleep(nxt - now)
        nxt += period
        kind = rng.choice(KINDS)
        t = rng.choice(tenants)
        method, path = kind.split(" ", 1)
        path = path.replace("{t}", t)
        body = {"compute": rng.choice([30, 40, 50])} if method == "PATCH" else None
        t0 = time.perf_counter()
        try:
            status, _ = request(conn, method, path, body)
        except OSError as e:
            errors.append("%s: %s" % (kind, e))
            conn.close()
            conn = UnixConnection(sock)
            continue
        dt = time.perf_counter() - t0
        if status >= 400:
            errors.append("%s: HTTP %d" % (kind, status))
        out.append((kind, dt))
    conn.close()


def histogram(sock):
    """The daemon's own request-latency histogram: [(bound_s, cumulative count)]."""
    conn = UnixConnection(sock)
    _, text = request(conn, "GET", "/metrics")
    conn.close()
    out = []
    for line in text.splitlines():
        if line.startswith("gpuslice_daemon_request_duration_seconds_bucket{le=\""):
            le = line.split('"')[1]
            out.append((float("inf") if le == "+Inf" else float(le), int(line.rsplit(" ", 1)[1])))
    return out


def histogram_quantile(h0, h1, q):
    """The bound of the bucket holding quantile q of the requests between two histograms."""
    d = [(b, c1 - c0) for (b, c1), (_, c0) in zip(h1, h0)]
    total = d[-1][1] if d else 0
    for b, c in d:
        if total and c >= q * total:
            return b, total
    return float("inf"), total


def subscriber(sock, deadline, counts, i):
    import socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1)
    s.connect(sock)
    s.sendall(b"GET /v1/events HTTP/1.1\r\nHost: d\r\n\r\n")
    got = b""
    while time.monotonic() < deadline:
        try:
            chunk = s.recv(65536)
        except OSError:
            continue
        if not chunk:
            break
        got += chunk
    s.close()
    counts[i] = got.count(b"\nevent: ")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--rate", type=float, default=1000)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--procs", type=int, default=64)
    ap.add_argument("--sse", type=int, default=4)
    ap.add_argument("--json")
    a = ap.parse_args()
    d = Daemon(a.build)
    procs = []
    try:
        conn = UnixConnection(d.sock)
        tenants = []
        for i in range(8):
            st, _ = request(conn, "POST", "/v1/tenants",
                            {"name": "load%d" % i, "memory": "1G", "compute": 50})
            assert st == 201, st
            tenants.append("load%d" % i)
        gs = os.path.join(a.build, "bin", "gpuslice")
        probe = os.path.join(a.build, "tests", "mem_probe")
        release = os.path.join(d.dir, "release")
        for i in range(a.procs):
            procs.append(subprocess.Popen(
                [gs, "-q", "run", "--tenant", tenants[i % len(tenants)], "--", probe, "alloc:8",
                 "wait:" + release], env=d.env, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL))
        time.sleep(2)
        st, body = request(conn, "GET", "/v1/tenants")
        running = sum(t["processes"] for t in body["tenants"])
        conn.close()
        rng = random.Random(1)
        deadline = time.monotonic() + a.seconds
        results, errors, threads = [], [], []
        counts = [0] * a.sse
        period = a.clients / a.rate
        for i in range(a.sse):
            threads.append(threading.Thread(target=subscriber, args=(d.sock, deadline, counts, i)))
        for i in range(a.clients):
            threads.append(threading.Thread(
                target=client, args=(d.sock, deadline, period, tenants, results, errors,
                                     random.Random(rng.random()))))
        h0 = histogram(d.sock)
        cpu0, t0, rss0 = d.cpu_seconds(), time.monotonic(), d.rss_kib()
        peak_rss, peak_threads = rss0, d.threads()
        for t in threads:
            t.start()
        while time.monotonic() < deadline:
            time.sleep(0.5)
            peak_rss = max(peak_rss, d.rss_kib())
            peak_threads = max(peak_threads, d.threads())
        for t in threads:
            t.join()
        wall, cpu = time.monotonic() - t0, d.cpu_seconds() - cpu0
        h1 = histogram(d.sock)
        (s50, n_s), (s99, _) = histogram_quantile(h0, h1, 0.5), histogram_quantile(h0, h1, 0.99)
        under10 = dict(h1).get(0.01, 0) - dict(h0).get(0.01, 0)
        lat = sorted(dt for _, dt in results)
        by_kind = {}
        for k in KINDS:
            v = sorted(dt for kk, dt in results if kk == k)
            by_kind[k] = {"n": len(v), "p50_ms": 1e3 * percentile(v, 0.5),
                          "p99_ms": 1e3 * percentile(v, 0.99), "max_ms": 1e3 * (v[-1] if v else 0)}
        report = {
            "clients": a.clients, "rate_asked": a.rate, "seconds": wall,
            "requests": len(results), "rate": len(results) / wall, "errors": len(errors),
            "error_examples": errors[:5], "tenant_processes": running,
            "sse_subscribers": a.sse, "sse_events_each": counts,
            "p50_ms": 1e3 * percentile(lat, 0.5), "p99_ms": 1e3 * percentile(lat, 0.99),
            "max_ms": 1e3 * (lat[-1] if lat else 0), "by_kind": by_kind,
            "daemon_side": {"requests": n_s, "p50_le_s": s50, "p99_le_s": s99,
                            "share_within_10ms": under10 / n_s if n_s else None},
            "daemon_cpu_percent": 100 * cpu / wall, "daemon_rss_mib_start": rss0 / 1024,
            "daemon_rss_mib_peak": peak_rss / 1024, "daemon_threads_peak": peak_threads,
            "alive": d.alive(), "cpus": os.cpu_count(),
        }
        print("%d clients, %.0f req/s asked, %.1f s: %d requests (%.0f/s), %d errors; %d tenant "
              "processes; %d SSE subscribers saw %s events" % (
                  a.clients, a.rate, wall, len(results), report["rate"], len(errors), running,
                  a.sse, counts))
        print("latency: p50 %.2f ms, p99 %.2f ms, max %.1f ms (target: p99 < 10 ms)" % (
            report["p50_ms"], report["p99_ms"], report["max_ms"]))
        print("in the daemon (its histogram, headers to answer): p50 <= %.4g s, p99 <= %.4g s; "
              "%.2f%% of %d requests within 10 ms" % (s50, s99, 100 * under10 / max(n_s, 1), n_s))
        for k, v in by_kind.items():
            print("  %-32s n %6d  p50 %6.2f ms  p99 %6.2f ms  max %6.1f ms" % (
                k, v["n"], v["p50_ms"], v["p99_ms"], v["max_ms"]))
        print("daemon: %.1f%% of one CPU, RSS %.1f MiB at start, %.1f MiB at peak, %d threads at "
              "peak; %s" % (report["daemon_cpu_percent"], rss0 / 1024, peak_rss / 1024,
                            peak_threads, "alive" if d.alive() else "DEAD"))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(report, f, indent=2)
        open(release, "w").close()
        for p in procs:
            p.wait(30)
        return 0 if d.alive() and not errors else 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        d.stop()


if __name__ == "__main__":
    sys.exit(main())

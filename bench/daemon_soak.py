#!/usr/bin/env python3
"""A soak of gpusliced with bad input: REQUESTS random and malformed requests (random bytes,
broken request lines, oversized and malformed headers, lying Content-Lengths, chunked garbage,
mutated JSON bodies, bad Last-Event-IDs, connections dropped mid-request) from WORKERS
connections at once, over the unix socket, while tenant processes run on the simulated GPU.
Afterwards the daemon must be alive, its memory within --rss-growth-mib of where it was after a
warm-up, and its state correct: the tenants made before are there with the limits they had, and
a program of one is still held to its limit. Exit status 0 when all of that holds.

    bench/daemon_soak.py [--build build] [--requests 1000000] [--workers 8] [--seed 1]
                         [--rss-growth-mib 16] [--json FILE]
"""
import argparse
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_common import Daemon, UnixConnection, request, ROOT  # noqa: E402

# The soak's requests are an admin's (root's, over the socket): they may change any tenant they
# name, so they name "target", never "keep", whose state is checked afterwards.
PATHS = ["/healthz", "/readyz", "/metrics", "/v1/devices", "/v1/devices/0", "/v1/devices/x",
         "/v1/tenants", "/v1/tenants/target", "/v1/tenants/target/processes", "/v1/events",
         "/v1/openapi.json", "/v1/tenants/%00", "/v1/tenants/" + "a" * 300, "/../../etc/passwd",
         "/v1//tenants", "/v1/tenants/1/processes/x", "*"]
METHODS = ["GET", "POST", "PATCH", "DELETE", "PUT", "HEAD", "OPTIONS", "TRACE", "CONNECT",
           "get", "G\x00T", "X" * 40]
BODIES = [b'{"name":"soak%d","memory":"1G"}', b'{"memory":"512M"}', b'{"compute":30}',
          b'{"memory":{"0":"1G","GPU-5ac1ce00-0000-4000-8000-000000000000":"2G"}}',
          b'{"name":"x","memory":"8 GB"}', b'{"compute":{"7":10}}', b'[]', b'{}', b'null',
          b'{"name":"' + b"n" * 70 + b'"}', b'{"memory":1e400}', b'{"a":' * 3000,
          b'{"name":"\\ud800"}', b'{"owner":-1,"name":"o"}']


def mutate(rng, b):
    b = bytearray(b)
    for _ in range(rng.randint(0, 4)):
        op = rng.randrange(4)
        if op == 0 and b:
            del b[rng.randrange(len(b))]
        elif op == 1:
            b.insert(rng.randrange(len(b) + 1), rng.randrange(256))
        elif op == 2 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        else:
            b += b[: rng.randrange(len(b) + 1)]
    return bytes(b)


def one_request(rng, i):
    """The bytes of one request, and whether to close before reading the answer."""
    kind = rng.randrange(10)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 400))), False
    method = rng.choice(METHODS)
    path = rng.choice(PATHS)
    if rng.random() < 0.2:
        path = mutate(rng, path.encode()).decode("latin-1")
    headers = ["Host: d"]
    body = b""
    if method in ("POST", "PATCH") or rng.random() < 0.1:
        body = rng.choice(BODIES)
        if b"%d" in body:
            body = body % (i % 50)
        if rng.random() < 0.5:
            body = mutate(rng, body)
        headers.append(rng.choice(["Content-Type: application/json", "Content-Type: text/plain",
                                   "Content-Type: application/json; charset=utf-8"]))
    if kind == 1:
        headers.append("Content-Length: %d" % rng.choice([len(body) + 10, 10 ** 12, -1, 0]))
    elif kind == 2:
        headers.append("Transfer-Encoding: chunked")
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if rng.random() < 0.5 else body
    elif kind == 3:
        headers.append("X-Big: " + "b" * rng.choice([100, 20000, 70000]))
    elif kind == 4:
        headers.append("Last-Event-ID: " + rng.choice(["x", "-1", "99999999999999999999", "3"]))
    elif kind == 5:
        headers.append("Bad header without colon")
    else:
        headers.append("Content-Length: %d" % len(body))
    req = ("%s %s HTTP/1.1\r\n%s\r\n\r\n" % (method, path, "\r\n".join(headers))).encode(
        "latin-1", errors="replace") + body
    if rng.random() < 0.05:
        req = req[: rng.randrange(len(req) + 1)]
        return req, True
    return req, False


def worker(sock, n, seed, stats, lock):
    rng = random.Random(seed)
    local = {}
    for i in range(n):
        data, drop = one_request(rng, i)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(3)
        try:
            s.connect(sock)
            s.sendall(data)
            if drop:
                key = "dropped"
            else:
                s.shutdown(socket.SHUT_WR)
                got = s.recv(64)
                # An event stream stays open: its status line is enough.
                key = got[9:12].decode(errors="replace") if got.startswith(b"HTTP/1.") else (
                    "closed" if not got else "garbage")
        except socket.timeout:
            key = "timeout"
        except OSError as e:
            key = "error:" + e.__class__.__name__
        finally:
            s.close()
        local[key] = local.get(key, 0) + 1
    with lock:
        for k, v in local.items():
            stats[k] = stats.get(k, 0) + v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--requests", type=int, default=1000000)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rss-growth-mib", type=float, default=16)
    ap.add_argument("--json")
    a = ap.parse_args()
    d = Daemon(a.build, extra=("--max-sse", "8", "--timeout-s", "2"))
    procs = []
    try:
        conn = UnixConnection(d.sock)
        st, before = request(conn, "POST", "/v1/tenants",
                             {"name": "keep", "memory": "1G", "compute": 40})
        assert st == 201, (st, before)
        st, _ = request(conn, "POST", "/v1/tenants", {"name": "target", "memory": "2G"})
        assert st == 201, st
        gs = os.path.join(a.build, "bin", "gpuslice")
        probe = os.path.join(a.build, "tests", "mem_probe")
        release = os.path.join(d.dir, "release")
        for _ in range(8):
            # mem_probe waits at most 60 s a step: ten steps outlast a soak of 1M requests.
            procs.append(subprocess.Popen([gs, "-q", "run", "--tenant", "keep", "--", probe,
                                           "alloc:16"] + ["wait:" + release] * 10, env=d.env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        # Warm-up: the thread stacks and buffers the soak will reuse.
        stats, lock = {}, threading.Lock()
        worker(d.sock, 2000, a.seed + 1000, stats, lock)
        rss0 = d.rss_kib()
        t0 = time.monotonic()
        per = a.requests // a.workers
        ts = [threading.Thread(target=worker, args=(d.sock, per, a.seed + w, stats, lock))
              for w in range(a.workers)]
        for t in ts:
            t.start()
        peak = rss0
        while any(t.is_alive() for t in ts):
            time.sleep(1)
            if not d.alive():
                break
            peak = max(peak, d.rss_kib())
        for t in ts:
            t.join()
        wall = time.monotonic() - t0
        alive = d.alive()
        time.sleep(3)  # connections time out, threads end
        rss1 = d.rss_kib() if alive else 0
        ok = alive
        checks = []
        if alive:
            conn = UnixConnection(d.sock)
            st, after = request(conn, "GET", "/v1/tenants/keep")
            same = st == 200 and after["limits"] == before["limits"] and after["id"] == before["id"]
            checks.append(("the tenant made before, with its limits", same))
            checks.append(("its 8 processes", st == 200 and after["processes"] == 8))
            if not same or after.get("processes") != 8:
                print("before: %s\nafter: %s" % (before, after))
            # 8 x (16M + a 64M context) held: a new process has 1G - 640M - 64M left.
            r = subprocess.run([gs, "-q", "run", "--tenant", "keep", "--", probe, "alloc:200",
                                "alloc:400"], env=d.env, capture_output=True, text=True, timeout=60)
            checks.append(("a program of it still held to 1G beside the 8",
                           "alloc 200 ok" in r.stdout and "alloc 400 CUDA_ERROR_OUT_OF_MEMORY"
                           in r.stdout))
            st, _ = request(conn, "GET", "/readyz")
            checks.append(("ready", st == 200))
            growth = (rss1 - rss0) / 1024
            checks.append(("memory growth %.1f MiB within %.0f MiB" % (growth, a.rss_growth_mib),
                           growth <= a.rss_growth_mib))
            ok = all(c for _, c in checks)
        report = {"requests": per * a.workers, "workers": a.workers, "seconds": wall,
                  "rate": per * a.workers / wall, "answers": stats, "alive": alive,
                  "rss_mib_after_warmup": rss0 / 1024, "rss_mib_peak": peak / 1024,
                  "rss_mib_end": rss1 / 1024, "checks": checks, "ok": ok}
        print("%d requests from %d workers in %.1f s (%.0f/s); daemon %s" % (
            report["requests"], a.workers, wall, report["rate"], "alive" if alive else "DEAD"))
        print("answers: " + ", ".join("%s %d" % kv for kv in sorted(stats.items())))
        print("daemon RSS: %.1f MiB after warm-up, %.1f MiB peak, %.1f MiB at the end" % (
            rss0 / 1024, peak / 1024, rss1 / 1024))
        for what, c in checks:
            print("%s: %s" % ("ok" if c else "FAIL", what))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(report, f, indent=2)
        open(release, "w").close()
        for p in procs:
            p.wait(60)
        rc, log = d.stop()
        clean = rc == 0 and "Sanitizer" not in log
        print("%s: the daemon stopped on SIGTERM with exit %s%s" % (
            "ok" if clean else "FAIL", rc, "" if "Sanitizer" not in log else ", and a sanitizer "
            "report:\n" + log[log.index("Sanitizer") - 200:][:3000]))
        return 0 if ok and clean else 1
    finally:
        if d.alive():
            open(os.path.join(d.dir, "release"), "w").close()
            for p in procs:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
            d.stop()


if __name__ == "__main__":
    sys.exit(main())

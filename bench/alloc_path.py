"""The cost of gpuslice on the allocation path, on a real GPU: alloc_path (N pairs of
cuMemAlloc_v2 + cuMemFree_v2 of 2 MiB, timed one by one) natively, under `gpuslice run --memory`
(the interposer's accounting in its tenant file) and under `gpuslice run --tenant` of a
gpusliced whose guard watches the GPU (issue 28's daemon-owned limits), interleaved A B C for
ROUNDS rounds; prints each configuration's median time per pair and its ratio to native with a
95 % bootstrap interval over the rounds.
usage: python3 bench/alloc_path.py BUILD_DIR [ROUNDS] [N]   (BUILD_DIR: the GPU build, e.g.
build-gpu; GPU_DEPS_LIB: the carried libraries gpusliced needs, as tests/gpu/run.sh sets it)
"""
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def api(sock, method, path, body=None):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock)
    data = json.dumps(body).encode() if body is not None else b""
    s.sendall(("%s %s HTTP/1.1\r\nHost: d\r\nConnection: close\r\nContent-Length: %d\r\n"
               "Content-Type: application/json\r\n\r\n" % (method, path, len(data))).encode() + data)
    out = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        out += c
    s.close()
    return int(out.split()[1])


def run(cmd, env):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    for line in out.stdout.splitlines():
        if line.startswith("alloc_free_ns "):
            return float(line.split()[2])
    raise SystemExit("alloc_path failed: %s %s" % (out.stdout, out.stderr))


def ci(ratios):
    random.seed(1)
    boots = sorted(statistics.median(random.choices(ratios, k=len(ratios))) for _ in range(2000))
    return boots[50], boots[1949]


def main():
    build = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    n = sys.argv[3] if len(sys.argv) > 3 else "2000"
    work = tempfile.mkdtemp(prefix="gs-alloc-")
    probe = os.path.join(work, "alloc_path")
    subprocess.run(["gcc", "-O2", "-o", probe, os.path.join(HERE, "alloc_path.c"), "-ldl"],
                   check=True)
    gs = os.path.join(build, "bin", "gpuslice")
    run_dir = os.path.join(work, "drun")
    env = dict(os.environ, GPUSLICE_DAEMON_DIR=run_dir, GPUSLICE_RUN_DIR=os.path.join(work, "shm"))
    os.makedirs(env["GPUSLICE_RUN_DIR"])
    denv = dict(env)
    if os.environ.get("GPU_DEPS_LIB"):
        denv["LD_LIBRARY_PATH"] = os.environ["GPU_DEPS_LIB"]
    d = subprocess.Popen([os.path.join(build, "bin", "gpusliced"), "--foreground", "--config",
                          "/dev/null", "--run-dir", run_dir], env=denv,
                         stdout=open(os.path.join(work, "d.log"), "w"), stderr=subprocess.STDOUT)
    sock = os.path.join(run_dir, "gpusliced.sock")
    for _ in range(200):
        try:
            if api(sock, "GET", "/readyz") == 200:
                break
        except OSError:
            pass
        time.sleep(0.05)
    assert api(sock, "POST", "/v1/tenants", {"name": "alloc", "memory": "40G"}) == 201
    configs = {
        "native": [probe, n],
        "run --memory 40G": [gs, "-q", "run", "--memory", "40G", "--", probe, n],
        "run --tenant (daemon, guard)": [gs, "-q", "run", "--tenant", "alloc", "--", probe, n],
    }
    res = {k: [] for k in configs}
    try:
        for _ in range(rounds):
            for k, cmd in configs.items():
                res[k].append(run(cmd, env))
    finally:
        d.terminate()
        d.wait(10)
    print("| configuration | median ns per alloc+free (rounds) | ratio to native | 95 % CI |")
    print("|---|---|---|---|")
    for k, v in res.items():
        ratios = [a / b for a, b in zip(v, res["native"])]
        lo, hi = ci(ratios)
        print("| %s | %.0f (%s) | %.3f | [%.3f, %.3f] |" % (
            k, statistics.median(v), ", ".join("%.0f" % x for x in v),
            statistics.median(ratios), lo, hi))


if __name__ == "__main__":
    main()

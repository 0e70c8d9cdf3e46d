"""cli_mps_share: two PyTorch GEMM programs at once as MPS clients of gpuslice's daemon, under
`gpuslice run --gpu-share 25` and `--gpu-share 75`.

usage: mps_share.py control GPUSLICE_BIN DIR SECONDS    the check (starts everything)
       mps_share.py worker SHARE DIR                    one client (started by control)

control: `gpuslice mps start` (GPU 0); both workers start, warm up and flag ready; control
writes the go file with a common window [t0, t0 + SECONDS] on CLOCK_MONOTONIC; each worker
runs 8192^3 fp16 matmuls into a preallocated output until the window (and 0.5 s more, so
the other one is never alone) is over and counts the ones that completed inside it. During
the window: `gpuslice mps status --json` must list exactly the two workers as clients,
`gpuslice mps stop` must refuse (exit 1), and `gpuslice mps stop --force` must exit 0 (MPS
lets the two running clients finish their work; the command returns when the daemon has gone,
and a client started while it waits is reported). Afterwards each throughput's share of the
sum must be within 2 points of 25/75, and the daemon must be gone with no further command.
The daemon is stopped (--force) and the workers killed whatever happens.
"""
import json
import os
import signal
import subprocess
import sys
import time

from gpucheck import check, done, flag, key, note, num, wait_flag

N = 8192
SHARES = (25, 75)
TOL = 2.0


def worker(share, d):
    import torch
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    a = torch.randn(N, N, device=dev, dtype=torch.float16)
    b = torch.randn(N, N, device=dev, dtype=torch.float16)
    out = torch.empty(N, N, device=dev, dtype=torch.float16)
    for _ in range(5):
        torch.matmul(a, b, out=out)
    torch.cuda.synchronize()
    print(f"worker {share}: pid {os.getpid()}, {props.name}, multi_processor_count "
          f"{props.multi_processor_count}, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="
          f"{os.environ.get('CUDA_MPS_ACTIVE_THREAD_PERCENTAGE')}, CUDA_MPS_PIPE_DIRECTORY="
          f"{os.environ.get('CUDA_MPS_PIPE_DIRECTORY')}", flush=True)
    flag(d, f"ready_{share}")
    wait_flag(d, "go", timeout=120)
    with open(os.path.join(d, "go")) as f:
        t0, t1 = (float(x) for x in f.read().split())
    while time.monotonic() < t0:
        time.sleep(0.0005)
    chunk = 4
    n, last, t_end = 0, t0, t1 + 0.5
    while True:
        for _ in range(chunk):
            torch.matmul(a, b, out=out)
        torch.cuda.synchronize()
        now = time.monotonic()
        if now <= t1:
            n += chunk
            last = now
        if now > t_end:
            break
    secs = last - t0
    tflops = 2.0 * N ** 3 * n / secs / 1e12 if secs > 0 else 0.0
    res = {"share": share, "pid": os.getpid(), "gemms": n, "seconds": secs, "tflops": tflops,
           "sm_count": props.multi_processor_count}
    print(f"worker {share}: {n} GEMMs in {secs:.3f} s = {tflops:.1f} TFLOP/s", flush=True)
    with open(os.path.join(d, f"result_{share}.json.tmp"), "w") as f:
        json.dump(res, f)
    os.replace(os.path.join(d, f"result_{share}.json.tmp"),
               os.path.join(d, f"result_{share}.json"))


def run(cmd, timeout=30):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "", str(e)
    return p.returncode, p.stdout, p.stderr


def show(tag, rc, out, err):
    print(f"--- {tag} (exit {rc}) ---")
    for line in out.strip().splitlines():
        print(f"stdout: {line}")
    for line in err.strip().splitlines():
        print(f"stderr: {line}")


def mps_control_pids():
    pids = set()
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/comm") as f:
                    if f.read().strip() == "nvidia-cuda-mps":  # comm is cut to 15 chars
                        with open(f"/proc/{p}/cmdline", "rb") as c:
                            if b"nvidia-cuda-mps-control" in c.read():
                                pids.add(int(p))
            except OSError:
                pass
    return pids


def status(gs, uuid):
    """(running, [client pids]) of our daemon from `gpuslice mps status --json`."""
    rc, out, err = run([gs, "mps", "status", "--json"])
    show("gpuslice mps status --json", rc, out, err)
    try:
        for g in json.loads(out)["gpus"]:
            if g["uuid"] == uuid:
                return g["running"], sorted(c for s in g["servers"] for c in s["clients"])
    except (ValueError, KeyError, TypeError) as e:
        note(f"cannot read mps status --json: {e}")
        return None, []
    return False, []


def control(gs, d, seconds):
    procs, logs, uuid, cleaned = {}, [], None, []

    def cleanup():
        if cleaned:
            return
        cleaned.append(True)
        for p in procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                p.wait()
        if uuid is not None and mps_control_pids():
            show("cleanup: gpuslice mps stop --force", *run([gs, "mps", "stop", "--force"], 40))

    def on_term(signum, frame):
        cleanup()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    try:
        before = mps_control_pids()
        rc, out, err = run([gs, "mps", "start", "--json"], 60)
        show("gpuslice mps start --json", rc, out, err)
        if not check(rc == 0, f"gpuslice mps start exits 0 (got {rc})"):
            done()
        started = json.loads(out)
        uuid = started["uuid"]
        daemons = mps_control_pids() - before
        note(f"daemon for {uuid}: started {started.get('started')}, new nvidia-cuda-mps-control "
             f"pids {sorted(daemons)}, pipe dir {started.get('pipe_dir')}")
        if not started.get("started"):
            note("an MPS daemon was already running there and is reused")

        for share in SHARES:
            log = open(os.path.join(d, f"worker_{share}.log"), "w")
            logs.append(log)
            procs[share] = subprocess.Popen(
                [gs, "run", "--gpu-share", str(share), "--", sys.executable,
                 os.path.abspath(__file__), "worker", str(share), d],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        t_launch = time.monotonic()
        while not all(os.path.exists(os.path.join(d, f"ready_{s}")) for s in SHARES):
            ended = [s for s, p in procs.items() if p.poll() is not None]
            if ended or time.monotonic() - t_launch > 90:
                check(False, f"both workers start and warm up (ended early: {ended}, "
                             f"{time.monotonic() - t_launch:.0f} s)")
                cleanup()
                done()
            time.sleep(0.05)
        num("start_seconds", round(time.monotonic() - t_launch, 1))
        pids = {}
        for s in SHARES:
            with open(os.path.join(d, f"ready_{s}")) as f:
                pids[s] = int(f.read())
        t0 = time.monotonic() + 0.3
        with open(os.path.join(d, "go.tmp"), "w") as f:
            f.write(f"{t0} {t0 + seconds}")
        os.replace(os.path.join(d, "go.tmp"), os.path.join(d, "go"))

        # While both compute: status lists both, a plain stop refuses.
        time.sleep(max(0.0, t0 + 1.0 - time.monotonic()))
        running, clients = status(gs, uuid)
        key("mps_clients", len(clients))
        check(running and len(clients) == 2,
              f"while both run, gpuslice mps status --json shows the daemon running with 2 "
              f"clients (running {running}, clients {clients})")
        check(clients == sorted(pids.values()),
              f"the clients are the two workers (clients {clients}, workers {pids})")
        rc, out, err = run([gs, "mps", "stop"], 30)
        show("gpuslice mps stop (clients connected)", rc, out, err)
        check(rc == 1, f"gpuslice mps stop refuses with clients connected: exit 1 (got {rc})")
        running, _ = status(gs, uuid)
        check(running is True, f"after the refused stop the daemon still runs ({running})")
        # --force with both still connected: the daemon quits once they have finished (the
        # command waits for that, up to GPUSLICE_MPS_TIMEOUT); meanwhile a new client is
        # started and what it meets is reported.
        t_force = time.monotonic()
        force = subprocess.Popen([gs, "mps", "stop", "--force", "--json"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        force_pending = force.poll() is None
        key("force_pending_after_1s", force_pending)
        t_late = time.monotonic()
        rc, out, err = run([gs, "run", "-q", "--gpu-share", "50", "--", sys.executable, "-c",
                            "import torch; torch.zeros(1, device='cuda'); print('late client ran')"],
                           60)
        num("late_client_seconds", round(time.monotonic() - t_late, 2))
        show("a new client while stop --force waits: gpuslice run --gpu-share 50", rc, out, err)
        key("late_client_exit", rc)
        check(rc is not None, f"a client started while stop --force waits ends within 60 s "
                              f"(exit {rc}; {'its code ran' if 'late client ran' in out else 'its code did not run'})")
        try:
            out, err = force.communicate(timeout=max(5.0, t0 + seconds + 40 - time.monotonic()))
            rc = force.returncode
        except subprocess.TimeoutExpired:
            force.kill()
            out, err = force.communicate()
            rc = None
        num("force_stop_seconds", round(time.monotonic() - t_force, 2))
        show("gpuslice mps stop --force --json (clients connected)", rc, out, err)
        check(rc == 0, f"gpuslice mps stop --force with clients connected exits 0 (got {rc})")
        try:
            stopped = json.loads(out).get("stopped")
        except ValueError:
            stopped = None
        check(stopped is True, f"stop --force says the daemon stopped (stopped {stopped})")
        for s, p in procs.items():
            try:
                rc = p.wait(timeout=max(5.0, t0 + seconds + 30 - time.monotonic()))
            except subprocess.TimeoutExpired:
                rc = None
            check(rc == 0, f"worker --gpu-share {s} exits 0 (got {rc})")
        for log in logs:
            log.close()
        res = {}
        for s in SHARES:
            with open(os.path.join(d, f"worker_{s}.log")) as f:
                for line in f.read().splitlines():
                    print(f"worker {s}| {line}")
            try:
                with open(os.path.join(d, f"result_{s}.json")) as f:
                    res[s] = json.load(f)
            except (OSError, ValueError) as e:
                check(False, f"worker --gpu-share {s} wrote its result ({e})")
        if len(res) == 2:
            total = sum(r["tflops"] for r in res.values())
            for s, r in res.items():
                share = 100.0 * r["tflops"] / total if total > 0 else 0.0
                key(f"tflops_{s}", round(r["tflops"], 1))
                key(f"share_{s}", round(share, 2))
                num(f"gemms_{s}", r["gemms"])
                num(f"seconds_{s}", round(r["seconds"], 3))
                num(f"sm_count_seen_{s}", r["sm_count"])
                check(abs(share - s) <= TOL,
                      f"--gpu-share {s}: throughput share {share:.2f}% of the two is within "
                      f"{TOL:g} points of {s} ({r['tflops']:.1f} of {total:.1f} TFLOP/s)")
            key("tflops_sum", round(total, 1))

        # Both ended and --force returned: the daemon is gone with no further command.
        t_end = time.monotonic()
        while daemons & mps_control_pids() and time.monotonic() < t_end + 10:
            time.sleep(0.1)
        left = sorted(daemons & mps_control_pids())
        running, _ = status(gs, uuid)
        check(not left and running is False,
              f"the daemon is gone after its clients, with no command after --force "
              f"(nvidia-cuda-mps-control pids left {left}, status running {running})")
    finally:
        cleanup()
    done()


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "control":
        control(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    elif len(sys.argv) == 4 and sys.argv[1] == "worker":
        worker(int(sys.argv[2]), sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

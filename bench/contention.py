"""Contention on one GPU: a latency-critical job beside a saturating background job, in separate
processes, under each way of sharing the GPU, measured side by side in one run.

The latency job sends one request every PERIOD ms (request i is due at go + i * PERIOD, and
starts then, or when the one before ends if that is later); a request is 10 chained fp16
GEMMs of 8x4096 by 4096x4096, and its latency runs from its start to the end of its last
GEMM (a request that starts more than half a period late is counted as late). The
background job runs 8192^3 fp16 GEMMs back to back (4 per synchronisation) and counts those
finished within the latency job's window. Each configuration runs REPEATS times, the
configurations interleaved (a round-robin whose order rotates each round), so that the VM's
drift falls on all of them alike.

Configurations (--only picks some):
  solo-latency    the latency job alone (its solo p99 and busy share)
  solo-background the background alone (its solo rate)
  time-sliced     both, plain processes: the driver time-slices the two contexts
  mps             both as clients of one MPS server (NVIDIA's, started here)
  mps-priority    the same, the background at CUDA_MPS_CLIENT_PRIORITY=1 (below normal)
  mps-threads50   the same, the background at CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50
  streamprio      time-sliced, the latency job's work on a stream of the highest priority, the
                  background's on one of the lowest (the most stream priority rewriting gives)
  mps-streamprio  the same as MPS clients
  gs-compute50    time-sliced, the background under gpuslice run --compute 50
  gs-share50      the background under gpuslice run --gpu-share 50 --mps-priority below-normal,
                  the latency job under --gpu-share 100 (gpuslice's MPS daemon)
  gs-sms66        time-sliced, the background under gpuslice run --sms 66 (a green context of
                  half the H200's 132 SMs)
  mps-gs-sms66    both MPS clients, the background under gpuslice run --sms 66
  gs-priority     time-sliced, the latency job under gpuslice run --priority latency, the
                  background under --priority background (it keeps about one kernel in flight
                  while the latency job is active)
  mps-gs-priority both MPS clients of NVIDIA's MPS server, with the classes of gs-priority: the
                  background also moves its launches to half the SMs while the latency job is
                  active, and back when it idles
  mps-gs-priority-yN  the same with GPUSLICE_YIELD_SMS=N: the background keeps N SMs (rounded
                  down to whole co-scheduled groups, 8 on an H200) while the latency job is active

With --faults it also runs two faults beside MPS clients with classes, as result rows: a
latency tenant SIGKILLed with a request in flight (the background's rate before, while, in the
100 ms after and after its death), and a latency tenant that never idles (what the background
keeps: its partition bounds it below).

With --shares it also runs the share experiments, saturating 8192^3 GEMM jobs side by side:
by weight (--weight 1:1, 1:3, 1:1:2), by ceiling (--compute 25 and 75), by SM partition (--sms
32 and 96 as MPS clients), and 1:3 where the
weight-3 job stops halfway (how soon the other has the whole GPU); each job's share is its rate
over the solo rate, and shares.md, shares.json and contention-shares.svg are written too.

Prints a markdown table and writes contention.json, contention.md and contention-cdf.svg (the
latency CDF of each configuration) to --out. Per
configuration: the latency job's p50 and p99 (the median over repeats of each repeat's
percentile, with the range), p99 over solo p99, the background's rate and what it kept of its
solo rate, the total work done in GPUs (the latency job's served requests at its solo busy
share plus the background's kept share), and the issue's bar for the background: 75 % of the time the latency job leaves
idle, 0.75 x (1 - solo busy share). A configuration whose processes fail is a row that says
so, not a crash.

usage: contention.py [--gpuslice BIN] [--repeats N] [--seconds S] [--period-ms P] [--only A,B]
                     [--timeline] [--shares] [--faults] [--out DIR]
       contention.py latency SECONDS PERIOD_MS OUT READY GO      (a job; started by the above)
       contention.py background SECONDS OUT READY GO
       contention.py redraw DIR      (the pictures of an earlier run, again, from its JSON)

The pictures are SVG, and PNG beside them where rsvg-convert (librsvg2-bin) is on PATH.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpumeasure  # noqa: E402  (percentile, scrubbed_env)

CONFIGS = ["solo-latency", "solo-background", "time-sliced", "mps", "mps-priority",
           "mps-threads50", "streamprio", "mps-streamprio", "gs-compute50", "gs-share50",
           "gs-sms66", "mps-gs-sms66", "gs-priority", "mps-gs-priority"]
SHARES = {"w1:1": [["--weight", "1"], ["--weight", "1"]],
          "w1:3": [["--weight", "1"], ["--weight", "3"]],
          "w1:1:2": [["--weight", "1"], ["--weight", "1"], ["--weight", "2"]],
          "c25:75": [["--compute", "25"], ["--compute", "75"]],
          "w1:3-stop": [["--weight", "1"], ["--weight", "3"]],
          # SM partitions: a quarter and three quarters of the H200's 132 SMs in whole
          # co-scheduled groups, as clients of NVIDIA's MPS server (time-sliced, partitions
          # would only lengthen each context's turn).
          "mps-sms32:96": [["--sms", "32"], ["--sms", "96"]]}


def wait_file(path, timeout):
    end = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def stream_priority(torch):
    """With CONTENTION_STREAM_PRIORITY=N (the streamprio configurations) the job's work goes
    to a stream of priority N (PyTorch maps it into the device's range; lower is higher),
    made current for the rest of the job: the most that rewriting stream priorities could
    give, done by the program itself."""
    v = os.environ.get("CONTENTION_STREAM_PRIORITY")
    if v is not None:
        torch.cuda.set_stream(torch.cuda.Stream(priority=int(v)))


def job_latency(seconds, period_ms, out, ready, go, delay=0.0, die_after=0.0):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    w = torch.randn(4096, 4096, device=dev, dtype=torch.float16) / 64
    x0 = torch.randn(8, 4096, device=dev, dtype=torch.float16)
    stream_priority(torch)
    for _ in range(200):  # warm-up: cuBLAS picks its kernels, clocks settle
        x = x0
        for _ in range(10):
            x = x @ w
    torch.cuda.synchronize()
    open(ready, "w").close()
    wait_file(go, 120)
    t0 = time.monotonic() + 0.2 + delay  # the background is running by then
    period = period_ms / 1000.0
    n = int(seconds / period)
    lat, service = [], []
    late = 0
    end = t0 + n * period
    for i in range(n):
        arrive = t0 + i * period
        while time.monotonic() < arrive:
            pass
        start = time.monotonic()
        if start > end:
            break  # far behind: the window is over
        late += start - arrive > period / 2
        x = x0
        for _ in range(10):
            x = x @ w
        if die_after and arrive >= t0 + die_after:
            # A fault: killed with a request in flight (--faults, latency-dies).
            json.dump({"latency_s": lat, "start": t0, "died": time.monotonic(), "period_s": period,
                       "late": late, "requests": i}, open(out, "w"))
            os.kill(os.getpid(), signal.SIGKILL)
        torch.cuda.synchronize()
        lat.append(time.monotonic() - start)
    json.dump({"latency_s": lat, "start": t0, "end": max(end, time.monotonic()),
               "period_s": period, "late": late, "requests": n}, open(out, "w"))


def job_background(seconds, out, ready, go):
    import torch
    dev = torch.device("cuda")
    a = torch.randn(8192, 8192, device=dev, dtype=torch.float16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.float16)
    stream_priority(torch)
    for _ in range(10):
        c = a @ b
    torch.cuda.synchronize()
    open(ready, "w").close()
    wait_file(go, 120)
    end = time.monotonic() + seconds + 0.6
    done = []  # (time, GEMMs finished so far)
    k = 0
    while time.monotonic() < end:
        for _ in range(4):
            c = a @ b  # noqa: F841
        torch.cuda.synchronize()
        k += 4
        done.append((time.monotonic(), k))
    json.dump({"done": done}, open(out, "w"))


def rate_in(done, start, end):
    """GEMMs per second finished between start and end (from the (time, count) marks)."""
    inside = [(t, k) for t, k in done if start <= t <= end]
    if len(inside) < 2:
        return None
    (t1, k1), (t2, k2) = inside[0], inside[-1]
    return (k2 - k1) / (t2 - t1) if t2 > t1 else None


def finish(name, p, timeout, errors, expect=0):
    """Waits for job p (named name in errors); its output, or None if it failed (said in
    errors): an exit status other than expect. The interposer's own counts (GPUSLICE_DEBUG,
    at exit) are among the output."""
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        errors.append(f"{name}: did not finish")
    text = out.decode(errors="replace")
    if p.returncode != expect:
        errors.append(f"{name}: exit {p.returncode}: {text[-600:]}")
        return None
    return text


def counts(text):
    """The interposer's summary lines in a job's output."""
    return [ln for ln in text.splitlines() if "launches governed" in ln or "board held by" in ln]


def recovery_ms(done, window):
    """How soon after the latency job's window ended the background ran at its rate from before
    the window again: the start of the first synchronisation interval (4 GEMMs, about 7 ms on an
    H200) after the window at 90 % of that rate or more, in ms after the window's end (so the
    switch back happened by then; the resolution is one interval). None if never."""
    before = rate_in(done, window[0] - 1.0, window[0] - 0.05)
    after = [(t, k) for t, k in done if t > window[1]]
    if not before or len(after) < 2:
        return None
    for (t1, k1), (t2, k2) in zip(after, after[1:]):
        if t2 > t1 and (k2 - k1) / (t2 - t1) >= 0.9 * before:
            return 1000 * (t1 - window[1])
    return None


class Runner:
    def __init__(self, args, tmp):
        self.args, self.tmp, self.gs = args, tmp, args.gpuslice
        self.mps_dir = None

    def mps_start(self):
        """NVIDIA's own MPS control daemon, in a directory of this run's."""
        if self.mps_dir:
            return self.mps_dir
        d = os.path.join(self.tmp, "mps")
        os.makedirs(os.path.join(d, "pipe"), exist_ok=True)
        os.makedirs(os.path.join(d, "log"), exist_ok=True)
        env = gpumeasure.scrubbed_env({"CUDA_MPS_PIPE_DIRECTORY": d + "/pipe",
                                       "CUDA_MPS_LOG_DIRECTORY": d + "/log"})
        subprocess.run(["nvidia-cuda-mps-control", "-d"], env=env, check=True, timeout=30)
        self.mps_dir = d
        return d

    def mps_stop(self):
        if not self.mps_dir:
            return
        env = gpumeasure.scrubbed_env({"CUDA_MPS_PIPE_DIRECTORY": self.mps_dir + "/pipe",
                                       "CUDA_MPS_LOG_DIRECTORY": self.mps_dir + "/log"})
        subprocess.run(["nvidia-cuda-mps-control"], input=b"quit\n", env=env, timeout=30)
        time.sleep(1)
        self.mps_dir = None

    def gs_mps_stop(self):
        """gpuslice's own MPS daemon (--gpu-share starts it and leaves it running)."""
        if self.gs and os.path.exists(self.gs):
            subprocess.run([self.gs, "mps", "stop", "--force", "-q"], timeout=60,
                           env=gpumeasure.scrubbed_env(), capture_output=True)

    def commands(self, cfg):
        """(latency argv prefix, latency env, background prefix, background env) or None parts."""
        base = gpumeasure.scrubbed_env()
        lat, bg = ([], dict(base)), ([], dict(base))
        if cfg == "solo-latency":
            return lat, None
        if cfg == "solo-background":
            return None, bg
        if cfg.startswith("mps"):
            d = self.mps_start()
            for e in (lat[1], bg[1]):
                e["CUDA_MPS_PIPE_DIRECTORY"] = d + "/pipe"
                e["CUDA_MPS_LOG_DIRECTORY"] = d + "/log"
            if cfg == "mps-priority":
                bg[1]["CUDA_MPS_CLIENT_PRIORITY"] = "1"
            if cfg == "mps-threads50":
                bg[1]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = "50"
            if cfg == "mps-streamprio":
                lat[1]["CONTENTION_STREAM_PRIORITY"] = "-100"
                bg[1]["CONTENTION_STREAM_PRIORITY"] = "0"
            if cfg == "mps-gs-sms66":
                return lat, ([self.gs, "run", "-q", "--sms", "66", "--"], bg[1])
            if cfg == "mps-gs-priority" or cfg.startswith("mps-gs-priority-y"):
                bg[1]["GPUSLICE_DEBUG"] = "1"
                if cfg != "mps-gs-priority":
                    bg[1]["GPUSLICE_YIELD_SMS"] = cfg[len("mps-gs-priority-y"):]
                return (([self.gs, "run", "-q", "--priority", "latency", "--"], lat[1]),
                        ([self.gs, "run", "-q", "--priority", "background", "--"], bg[1]))
            return lat, bg
        if cfg == "streamprio":
            lat[1]["CONTENTION_STREAM_PRIORITY"] = "-100"
            bg[1]["CONTENTION_STREAM_PRIORITY"] = "0"
            return lat, bg
        if cfg == "gs-priority":
            bg[1]["GPUSLICE_DEBUG"] = "1"
            return (([self.gs, "run", "-q", "--priority", "latency", "--"], lat[1]),
                    ([self.gs, "run", "-q", "--priority", "background", "--"], bg[1]))
        if cfg == "gs-sms66":
            return lat, ([self.gs, "run", "-q", "--sms", "66", "--"], bg[1])
        if cfg == "gs-compute50":
            return lat, ([self.gs, "run", "-q", "--compute", "50", "--"], bg[1])
        if cfg == "gs-share50":
            return (([self.gs, "run", "-q", "--gpu-share", "100", "--"], lat[1]),
                    ([self.gs, "run", "-q", "--gpu-share", "50", "--mps-priority",
                      "below-normal", "--"], bg[1]))
        return lat, bg

    def once(self, cfg, rep, timeline=False):
        """One run of cfg. timeline: the background runs 3 x --seconds and the latency job
        the middle third, for the background's rate over time as the latency job comes and
        goes."""
        a = self.args
        tag = f"{cfg}-{rep}{'-t' if timeline else ''}"
        bg_s, lat_s, delay = ((3 * a.seconds, a.seconds, a.seconds) if timeline
                              else (a.seconds + 0.2, a.seconds, 0.0))
        ready_l, ready_b, go = (os.path.join(self.tmp, f"{tag}.{s}") for s in ("rl", "rb", "go"))
        out_l, out_b = (os.path.join(self.tmp, f"{tag}.{s}.json") for s in ("l", "b"))
        if not cfg.startswith("mps"):
            self.mps_stop()
        try:
            lat, bg = self.commands(cfg)
        except (OSError, subprocess.SubprocessError) as e:
            return {"config": cfg, "repeat": rep, "error": f"cannot start MPS: {e}"}
        procs = []
        me = [sys.executable, os.path.abspath(__file__)]
        row = {"config": cfg, "repeat": rep}
        try:
            if bg:
                procs.append(("background", subprocess.Popen(
                    bg[0] + me + ["background", str(bg_s), out_b, ready_b, go],
                    env=bg[1], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
            if lat:
                procs.append(("latency", subprocess.Popen(
                    lat[0] + me + ["latency", str(lat_s), str(a.period_ms), out_l, ready_l,
                                   go, str(delay)], env=lat[1], stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT)))
        except OSError as e:
            for _, p in procs:
                p.kill()
                p.wait()
            row["error"] = f"cannot start a job: {e}"
            return row
        ok = all(wait_file(r, 90) for r, want in ((ready_l, lat), (ready_b, bg)) if want)
        if ok:
            open(go, "w").close()
        else:
            for _, p in procs:  # they would start on their own once their wait for go ends
                p.kill()
        errors = []
        for name, p in procs:
            text = finish(name, p, bg_s + 60, errors)
            if text is not None and "priority" in cfg:
                row.setdefault("interposer", {})[name] = counts(text)[-2:]
        if not ok:
            errors.append("a job did not become ready in 90 s")
        if errors:
            row["error"] = "; ".join(errors)
            return row
        if lat:
            L = json.load(open(out_l))
            row["latency_ms"] = [round(1000 * v, 4) for v in L["latency_s"]]
            row["p50_ms"] = 1000 * gpumeasure.percentile(L["latency_s"], 50)
            row["p99_ms"] = 1000 * gpumeasure.percentile(L["latency_s"], 99)
            row["busy"] = sum(L["latency_s"]) / (L["end"] - L["start"])
            row["late"] = L["late"]
            row["served"] = len(L["latency_s"])
            row["requests"] = L["requests"]
            window = (L["start"], L["end"])
        else:
            window = None
        if bg:
            B = json.load(open(out_b))
            if window is None:
                t = [x for x, _ in B["done"]]
                window = (t[0] + 0.2, t[0] + 0.2 + a.seconds)
            row["bg_rate"] = rate_in(B["done"], *window)
            if timeline:
                # GEMMs per second in 100 ms bins, time 0 at the latency job's start.
                t0 = window[0]
                bins = {}
                prev = None
                for t, k in B["done"]:
                    if prev is not None:
                        b = int((t - t0) // 0.1)
                        bins[b] = bins.get(b, 0) + (k - prev)
                    prev = k
                # A bin with nothing finished in it is 0 GEMM/s, not left out.
                row["timeline"] = [(round(b * 0.1 + 0.05, 3), bins.get(b, 0) / 0.1)
                                   for b in range(min(bins), max(bins) + 1)] if bins else []
                row.pop("latency_ms", None)
                row["recover_ms"] = recovery_ms(B["done"], window)
        return row


def shares_once(r, name, rep):
    """One share experiment: its jobs side by side, each under gpuslice run with its options
    (w1:3-stop: the second job runs the first half only). Each job's rate over the common
    window, or, for w1:3-stop, the first job's rate in the 100 ms after the second stopped and
    its rate over 100 ms bins (the timeline)."""
    a, tmp = r.args, r.tmp
    tag = f"share-{name}-{rep}"
    stop = name.endswith("-stop")
    secs = 2 * a.seconds if stop else a.seconds
    go = os.path.join(tmp, tag + ".go")
    me = [sys.executable, os.path.abspath(__file__)]
    jobs = []
    row = {"experiment": name, "repeat": rep, "options": SHARES[name]}
    env = gpumeasure.scrubbed_env({"GPUSLICE_DEBUG": "1"})  # the interposer's counts at exit
    try:
        if name.startswith("mps-"):
            d = r.mps_start()
            env["CUDA_MPS_PIPE_DIRECTORY"] = d + "/pipe"
            env["CUDA_MPS_LOG_DIRECTORY"] = d + "/log"
        else:
            r.mps_stop()
    except (OSError, subprocess.SubprocessError) as e:
        row["error"] = f"cannot start MPS: {e}"
        return row
    try:
        for i, opts in enumerate(SHARES[name]):
            s_i = a.seconds if stop and i == 1 else secs
            ready, out = (os.path.join(tmp, f"{tag}.{i}.{x}") for x in ("ready", "json"))
            p = subprocess.Popen([r.gs, "run", "-q"] + opts + ["--"] + me +
                                 ["background", str(s_i), out, ready, go], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            jobs.append((ready, out, p))
    except OSError as e:
        for _, _, p in jobs:
            p.kill()
            p.wait()
        row["error"] = f"cannot start a job: {e}"
        return row
    ok = all(wait_file(ready, 90) for ready, _, _ in jobs)
    if ok:
        open(go, "w").close()
    errors = []
    for i, (_, _, p) in enumerate(jobs):
        if not ok:
            p.kill()
        text = finish(f"job {i}", p, secs + 60, errors)
        if text is not None:
            row.setdefault("interposer", []).append(counts(text)[-2:])
    if not ok:
        errors.append("a job did not become ready in 90 s")
    if errors:
        row["error"] = "; ".join(errors)
        return row
    done = [json.load(open(out))["done"] for _, out, _ in jobs]
    t0 = max(d[0][0] for d in done) + 0.2
    if stop:
        t_stop = done[1][-1][0]
        row["rates"] = [rate_in(done[0], t0, t_stop - 0.1), rate_in(done[1], t0, t_stop - 0.1)]
        row["after_stop_100ms"] = rate_in(done[0], t_stop, t_stop + 0.1)
        row["after_stop"] = rate_in(done[0], t_stop + 0.1, done[0][-1][0] - 0.1)
        row["timeline"] = []
        for d in done:
            bins, prev = {}, None
            for t, k in d:
                if prev is not None:
                    b = int((t - t0) // 0.1)
                    bins[b] = bins.get(b, 0) + (k - prev)
                prev = k
            row["timeline"].append([(round(b * 0.1 + 0.05, 3), bins.get(b, 0) / 0.1)
                                    for b in range(min(bins), max(bins) + 1)] if bins else [])
    else:
        t1 = min(d[-1][0] for d in done) - 0.1
        row["rates"] = [rate_in(d, t0, t1) for d in done]
    return row


FAULTS = ["latency-dies", "latency-stuck"]


def faults_once(r, name, rep):
    """A fault beside the chosen configuration (both tenants MPS clients with classes), as a
    result row. latency-dies: the background runs 3 x --seconds; the latency tenant sends its
    requests from --seconds on and is killed (SIGKILL, a request in flight) half a --seconds
    later: the background's rate before, while it ran, in the 100 ms after its death and after
    that, and how soon it ran at full speed again. latency-stuck: a latency tenant that never
    idles (8192^3 GEMMs back to back, like the background) beside the background for
    --seconds: what each kept of the solo rate (the background's partition bounds it below)."""
    a, tmp = r.args, r.tmp
    tag = f"fault-{name}-{rep}"
    dies = name == "latency-dies"
    row = {"experiment": name, "repeat": rep}
    try:
        d = r.mps_start()
    except (OSError, subprocess.SubprocessError) as e:
        row["error"] = f"cannot start MPS: {e}"
        return row
    env = gpumeasure.scrubbed_env({"CUDA_MPS_PIPE_DIRECTORY": d + "/pipe",
                                   "CUDA_MPS_LOG_DIRECTORY": d + "/log", "GPUSLICE_DEBUG": "1"})
    go = os.path.join(tmp, tag + ".go")
    rl, rb, out_l, out_b = (os.path.join(tmp, f"{tag}.{x}") for x in ("rl", "rb", "l", "b"))
    me = [sys.executable, os.path.abspath(__file__)]
    bg_s = 3 * a.seconds if dies else a.seconds
    lat_job = (["latency", str(a.seconds), str(a.period_ms), out_l, rl, go, str(a.seconds),
                str(a.seconds / 2)] if dies else ["background", str(a.seconds), out_l, rl, go])
    jobs = []
    try:
        for who, argv in (("background", ["background", str(bg_s), out_b, rb, go]),
                          ("latency", lat_job)):
            jobs.append((who, subprocess.Popen(
                [r.gs, "run", "-q", "--priority", who, "--"] + me + argv, env=env,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
    except OSError as e:
        for _, p in jobs:
            p.kill()
            p.wait()
        row["error"] = f"cannot start a job: {e}"
        return row
    ok = wait_file(rb, 90) and wait_file(rl, 90)
    if ok:
        open(go, "w").close()
    errors = []
    for who, p in jobs:
        if not ok:
            p.kill()
        # gpuslice run says a program killed by SIGKILL with 128 + 9.
        text = finish(who, p, bg_s + 60, errors, expect=137 if dies and who == "latency" else 0)
        if text is not None:
            row.setdefault("interposer", {})[who] = counts(text)[-2:]
    if not ok:
        errors.append("a job did not become ready in 90 s")
    if errors:
        row["error"] = "; ".join(errors)
        return row
    B = json.load(open(out_b))["done"]
    L = json.load(open(out_l))
    if dies:
        t0, died = L["start"], L["died"]
        row["bg_before"] = rate_in(B, t0 - a.seconds + 0.3, t0 - 0.05)
        row["bg_during"] = rate_in(B, t0 + 0.1, died - 0.05)
        row["bg_after_100ms"] = rate_in(B, died, died + 0.1)
        row["bg_after"] = rate_in(B, died + 0.1, B[-1][0] - 0.1)
        row["recover_ms"] = recovery_ms(B, (t0, died))
        row["served_before_death"] = len(L["latency_s"])
    else:
        t0 = max(B[0][0], L["done"][0][0]) + 0.2
        t1 = min(B[-1][0], L["done"][-1][0]) - 0.1
        row["bg_rate"] = rate_in(B, t0, t1)
        row["latency_rate"] = rate_in(L["done"], t0, t1)
    return row


def faults_table(rows, solo_rate):
    pct = lambda v: "" if v is None or not solo_rate else f"{100 * v / solo_rate:.1f} %"  # noqa: E731
    med = lambda v: statistics.median(v) if v else None  # noqa: E731
    lines = ["Faults beside MPS clients with classes (--faults); rates as % of the background's "
             f"solo rate ({solo_rate and round(solo_rate, 1)} GEMM/s), median over repeats.", "",
             "| fault | background before / while / first 100 ms after / after | full speed "
             "again after | the latency tenant | runs failed |", "|---|---|---|---|---|"]
    for name in FAULTS:
        rs = [x for x in rows if x["experiment"] == name]
        good = [x for x in rs if "error" not in x]
        errs = [x["error"] for x in rs if "error" in x][:1]
        m = {k: med([x[k] for x in good if x.get(k) is not None])
             for k in ("bg_before", "bg_during", "bg_after_100ms", "bg_after", "recover_ms",
                       "bg_rate", "latency_rate")}
        if name == "latency-dies":
            cells = " / ".join(pct(m[k]) or "?" for k in ("bg_before", "bg_during",
                                                          "bg_after_100ms", "bg_after"))
            rec = "never" if m["recover_ms"] is None else f"{m['recover_ms']:.1f} ms"
            lat = "SIGKILLed with a request in flight"
        else:
            cells, rec = f"{pct(m['bg_rate']) or '?'} the whole time", ""
            lat = f"never idles: {pct(m['latency_rate']) or '?'} of the solo rate"
        lines.append(f"| {name} | {cells} | {rec} | {lat} | {len(rs) - len(good)}/{len(rs)}"
                     f"{(': ' + errs[0][:160]) if errs else ''} |")
    return "\n".join(lines) + "\n"


def shares_summary(rows, solo_rate):
    out = {}
    for name in SHARES:
        if not any(r["experiment"] == name for r in rows):
            continue  # not run (--shares NAMES)
        good = [r for r in rows if r["experiment"] == name and "error" not in r]
        s = {"runs": len([r for r in rows if r["experiment"] == name]), "failed": 0,
             "errors": [r["error"] for r in rows if r["experiment"] == name and "error" in r][:1]}
        s["failed"] = s["runs"] - len(good)
        if good and solo_rate:
            n = len(SHARES[name])
            per = [[100 * r["rates"][i] / solo_rate for r in good if r["rates"][i]]
                   for i in range(n)]
            s["shares"] = [statistics.median(v) if v else None for v in per]
            s["share_ranges"] = [(min(v), max(v)) if v else None for v in per]
            if name.endswith("-stop"):
                v = [100 * r["after_stop_100ms"] / solo_rate for r in good
                     if r.get("after_stop_100ms")]
                s["after_stop_100ms"] = statistics.median(v) if v else None
                v = [100 * r["after_stop"] / solo_rate for r in good if r.get("after_stop")]
                s["after_stop"] = statistics.median(v) if v else None
        out[name] = s
    return out


def shares_table(summary, solo_rate, args):
    lines = [f"Saturating 8192^3 fp16 GEMM jobs side by side, each under gpuslice run with the "
             f"options shown; share = its GEMM rate over the solo rate ({solo_rate and round(solo_rate, 1)} "
             f"GEMM/s); {args.repeats} interleaved repeats, median [min, max].", "",
             "| experiment | options | shares % | sum % | first job after the other stopped "
             "(first 100 ms / after) | runs failed |", "|---|---|---|---|---|---|"]
    for name, s in summary.items():
        sh = s.get("shares") or []
        cells = ", ".join(f"{v:.1f} [{rg[0]:.1f}, {rg[1]:.1f}]"
                          for v, rg in zip(sh, s.get("share_ranges") or [])
                          if v is not None and rg)
        total = sum(v for v in sh if v is not None) if sh else None
        stop = ""
        if s.get("after_stop_100ms") is not None:
            stop = f"{s['after_stop_100ms']:.1f} % / {s.get('after_stop') or 0:.1f} %"
        opts = " / ".join(" ".join(o) for o in SHARES[name])
        lines.append(f"| {name} | {opts} | {cells} | {'' if total is None else f'{total:.1f}'} | "
                     f"{stop} | {s['failed']}/{s['runs']}"
                     f"{(': ' + s['errors'][0][:160]) if s['errors'] else ''} |")
    return "\n".join(lines) + "\n"


def whole_bins(points, lo, hi):
    """The (time, rate) bins of a timeline that lie wholly inside [lo, hi] (a job's last bin
    is partial and would read as a fall to nothing)."""
    return [(x, y) for x, y in points[:-1] if lo <= x - 0.05 and x + 0.05 <= hi]


def shares_picture(rows, summary, path, a):
    """Shares by weight and by ceiling (median shares of each experiment, stacked bars), and
    both jobs' rates over time in the w1:3-stop experiment (its first repeat)."""
    import svgplot
    bars = []
    for name, s in summary.items():
        if name.endswith("-stop") or not s.get("shares"):
            continue
        parts = [(" ".join(o).replace("--weight ", "w").replace("--compute ", "c"), v)
                 for o, v in zip(SHARES[name], s["shares"])]
        bars.append((" : ".join(p for p, _ in parts), parts))
    page = svgplot.Page(900, 820, "bench/contention.py --shares: saturating 8192^3 GEMM jobs "
                        "side by side, share = rate over the solo rate")
    page.bars(10, 40, 880, 300, "shares of the GPU (median over repeats)", bars)
    row = next((r for r in rows if r["experiment"] == "w1:3-stop" and "error" not in r), None)
    series = [] if row is None else [
        ("--weight 1", whole_bins(row["timeline"][0], 0, 2 * a.seconds)),
        ("--weight 3 (stops halfway)", whole_bins(row["timeline"][1], 0, 2 * a.seconds))]
    page.panel(10, 350, 880, 460, "weights 1 and 3, the weight-3 job stopping halfway: GEMM/s "
               "(100 ms bins)", series, unit="short", xlabel=lambda x: "%g s" % x,
               xticks=[k * a.seconds / 2 for k in range(5)], xmin=0, xmax=2 * a.seconds, ymin=0)
    page.save(path)


def summarize(rows, configs):
    by = {c: [r for r in rows if r["config"] == c] for c in configs}
    med = lambda v: statistics.median(v) if v else None  # noqa: E731
    out = {}
    for c, rs in by.items():
        good = [r for r in rs if "error" not in r]
        s = {"runs": len(rs), "failed": len(rs) - len(good),
             "errors": [r["error"] for r in rs if "error" in r][:2]}
        for r in good:
            if r.get("requests"):
                r["served_share"] = r.get("served", 0) / r["requests"]
        for k in ("p50_ms", "p99_ms", "busy", "bg_rate", "late", "served_share"):
            v = [r[k] for r in good if r.get(k) is not None]
            s[k] = med(v)
            s[k + "_range"] = (min(v), max(v)) if v else None
        out[c] = s
    solo_p99 = out.get("solo-latency", {}).get("p99_ms")
    solo_busy = out.get("solo-latency", {}).get("busy")
    solo_rate = out.get("solo-background", {}).get("bg_rate")
    for c, s in out.items():
        s["p99_over_solo"] = s["p99_ms"] / solo_p99 if s.get("p99_ms") and solo_p99 else None
        s["bg_kept"] = s["bg_rate"] / solo_rate if s.get("bg_rate") and solo_rate else None
        # The work both jobs did, in GPUs: the latency job's requests served at its solo busy
        # share, plus the background's rate over its solo rate.
        lat = (solo_busy * s["served_share"] if s.get("served_share") is not None and
               solo_busy is not None else 0.0)
        s["total"] = lat + (s["bg_kept"] or 0.0) if (lat or s["bg_kept"]) else None
    bar = 0.75 * (1 - solo_busy) if solo_busy is not None else None
    return out, bar


def table(summary, bar, args):
    f = lambda v, fmt: "" if v is None else fmt % v  # noqa: E731
    lines = [f"Latency job: 10 chained fp16 GEMMs 8x4096 by 4096x4096, one request every "
             f"{args.period_ms} ms, {args.seconds} s; background: 8192^3 fp16 GEMMs back to back. "
             f"{args.repeats} interleaved repeats; each cell the median over repeats "
             f"[min, max]. "
             + (f"Bar for the background: {100 * bar:.1f} % of its solo rate (75 % of the "
                f"time the latency job leaves idle)." if bar is not None else
                "No bar for the background: solo-latency was not run."), "",
             "| configuration | p50 ms | p99 ms | p99 / solo p99 | background GEMM/s | "
             "background kept | total | late requests | runs failed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c, s in summary.items():
        rng = lambda k: (f" [{s[k + '_range'][0]:.2f}, {s[k + '_range'][1]:.2f}]"  # noqa: E731
                         if s.get(k + "_range") else "")
        lines.append(f"| {c} | {f(s['p50_ms'], '%.3f')} | {f(s['p99_ms'], '%.3f')}{rng('p99_ms')} | "
                     f"{f(s['p99_over_solo'], '%.2f')} | {f(s['bg_rate'], '%.1f')} | "
                     f"{f(s['bg_kept'] and 100 * s['bg_kept'], '%.1f %%')} | "
                     f"{f(s['total'] and 100 * s['total'], '%.1f %%')} | "
                     f"{f(s['late'], '%.0f')} | "
                     f"{s['failed']}/{s['runs']}{(': ' + s['errors'][0][:160]) if s['errors'] else ''} |")
    return "\n".join(lines) + "\n"


def cdf_picture(rows, configs, path, title):
    """The latency CDF of each configuration (all its repeats pooled), as SVG."""
    import svgplot
    series, worst = [], 0.0
    for c in configs:
        v = sorted(x for r in rows if r["config"] == c and "error" not in r
                   for x in r.get("latency_ms", []))
        if not v:
            continue
        n = len(v)
        step = max(1, n // 400)
        pts = [(v[i], (i + 1) / n) for i in range(0, n, step)] + [(v[-1], 1.0)]
        series.append((c, pts))
        worst = max(worst, gpumeasure.percentile(v, 99.9))
    page = svgplot.Page(900, 520, title)
    xmax = max(1.0, worst * 1.05)
    page.panel(10, 40, 880, 470, "latency of a request (CDF, all repeats pooled)", series,
               unit="percentunit", xlabel=lambda x: "%.1f ms" % x, xmin=0, xmax=xmax, ymin=0,
               ymax=1.0)
    page.save(path)


def timeline_picture(rows, path, a):
    """The background's rate over time while the latency job runs the middle third."""
    import svgplot
    series = [(r["config"], whole_bins(r["timeline"], -a.seconds, 2 * a.seconds)) for r in rows
              if "error" not in r and r.get("timeline")]
    page = svgplot.Page(900, 520, "bench/contention.py --timeline: the background's GEMM/s, "
                        f"the latency job running from 0 to {a.seconds:g} s")
    page.panel(10, 40, 880, 470, "background throughput (100 ms bins)", series, unit="short",
               xlabel=lambda x: "%g s" % x, xticks=[k * a.seconds for k in range(-1, 3)],
               xmin=-a.seconds, xmax=2 * a.seconds, ymin=0)
    page.save(path)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "latency":
        return job_latency(float(sys.argv[2]), float(sys.argv[3]), *sys.argv[4:7],
                           delay=float(sys.argv[7]) if len(sys.argv) > 7 else 0.0,
                           die_after=float(sys.argv[8]) if len(sys.argv) > 8 else 0.0)
    if len(sys.argv) > 1 and sys.argv[1] == "background":
        return job_background(float(sys.argv[2]), *sys.argv[3:6])
    if len(sys.argv) == 3 and sys.argv[1] == "redraw":
        return redraw(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpuslice", default=os.path.join(os.path.dirname(HERE), "build", "bin",
                                                       "gpuslice"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--period-ms", type=float, default=2.0)
    ap.add_argument("--only", default=",".join(CONFIGS))
    ap.add_argument("--out", default=".")
    ap.add_argument("--shares", nargs="?", const="all", default=None, metavar="NAMES",
                    help="also run the share experiments (weights, ceilings, SM partitions) "
                         "after the rest: all of them, or those named (comma-separated: "
                         + ", ".join(SHARES) + ")")
    ap.add_argument("--faults", action="store_true",
                    help="also run the faults beside MPS clients with classes: a latency tenant "
                         "killed while active, and one that never idles")
    ap.add_argument("--timeline", action="store_true",
                    help="also run each non-solo configuration once with the background for 3 x "
                         "--seconds and the latency job in the middle third, and draw the "
                         "background's rate over time")
    a = ap.parse_args()
    configs = [c for c in a.only.split(",") if c]
    unknown = [c for c in configs if c not in CONFIGS and
               not re.fullmatch(r"mps-gs-priority-y[1-9][0-9]*", c)]
    if unknown:
        ap.error(f"--only: unknown configuration {unknown[0]!r} (choose from {', '.join(CONFIGS)})")
    if a.shares and a.shares != "all" and not set(a.shares.split(",")) <= set(SHARES):
        ap.error("--shares %s: give experiments of %s" % (a.shares, ", ".join(SHARES)))
    if a.repeats < 1 or a.seconds <= 0.5 or a.period_ms <= 0:
        ap.error("--repeats must be at least 1, --seconds over 0.5, --period-ms over 0")
    if not gpumeasure.outside_interposer():
        ap.error("run this without the interposer preloaded (it starts its own jobs)")
    tmp = tempfile.mkdtemp(prefix="gs-contention-")
    r = Runner(a, tmp)
    rows = []
    try:
        for rep in range(a.repeats):
            order = configs[rep % len(configs):] + configs[:rep % len(configs)]
            # MPS configurations together, so that one MPS server serves them in a row.
            order = [c for c in order if not c.startswith("mps")] + \
                    [c for c in order if c.startswith("mps")]
            for c in order:
                row = r.once(c, rep)
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "latency_ms"}), flush=True)
                if c == "gs-share50":
                    r.gs_mps_stop()  # its MPS daemon must not serve the configurations after it
            r.mps_stop()
    finally:
        r.mps_stop()
        r.gs_mps_stop()
        shutil.rmtree(tmp, ignore_errors=True)
    timeline_rows = []
    if a.timeline:
        r = Runner(a, tempfile.mkdtemp(prefix="gs-contention-"))
        try:
            for c in [c for c in configs if not c.startswith("solo")]:
                row = r.once(c, 0, timeline=True)
                timeline_rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "timeline"}), flush=True)
                if c == "gs-share50":
                    r.gs_mps_stop()
        finally:
            r.mps_stop()
            r.gs_mps_stop()
            shutil.rmtree(r.tmp, ignore_errors=True)
    share_rows = []
    if a.shares:
        r = Runner(a, tempfile.mkdtemp(prefix="gs-contention-"))
        try:
            for rep in range(a.repeats):
                names = list(SHARES) if a.shares == "all" else a.shares.split(",")
                for name in names[rep % len(names):] + names[:rep % len(names)]:
                    row = shares_once(r, name, rep)
                    share_rows.append(row)
                    print(json.dumps({k: v for k, v in row.items() if k != "timeline"}),
                          flush=True)
        finally:
            shutil.rmtree(r.tmp, ignore_errors=True)
    fault_rows = []
    if a.faults:
        r = Runner(a, tempfile.mkdtemp(prefix="gs-contention-"))
        try:
            for rep in range(a.repeats):
                for name in FAULTS:
                    row = faults_once(r, name, rep)
                    fault_rows.append(row)
                    print(json.dumps(row), flush=True)
        finally:
            r.mps_stop()
            shutil.rmtree(r.tmp, ignore_errors=True)
    summary, bar = summarize(rows, configs)
    md = table(summary, bar, a)
    if fault_rows:
        md += "\n" + faults_table(fault_rows, summary.get("solo-background", {}).get("bg_rate"))
    if timeline_rows:
        md += ("\nThe background over time (--timeline): how soon after the latency job's last "
               "request it ran at its earlier rate again (the start of the first 4-GEMM "
               "interval at 90 % of it or more; resolution one interval, about 7 ms):\n\n"
               "| configuration | full speed again after |\n|---|---|\n")
        for t in timeline_rows:
            v = t.get("recover_ms")
            md += f"| {t['config']} | {'never' if v is None else '%.1f ms' % v} |\n"
    print(md)
    os.makedirs(a.out, exist_ok=True)
    if share_rows:
        solo = summary.get("solo-background", {}).get("bg_rate")
        ssum = shares_summary(share_rows, solo)
        smd = shares_table(ssum, solo, a)
        print(smd)
        open(os.path.join(a.out, "shares.md"), "w").write(smd)
        json.dump({"rows": share_rows, "summary": ssum, "solo_rate": solo},
                  open(os.path.join(a.out, "shares.json"), "w"), indent=1)
        try:
            shares_picture(share_rows, ssum, os.path.join(a.out, "contention-shares.svg"), a)
        except Exception as e:
            print(f"contention: no shares picture: {e!r}", file=sys.stderr)
    json.dump({"rows": rows, "timeline": timeline_rows, "faults": fault_rows, "summary": summary,
               "background_bar": bar, "args": vars(a)}, open(os.path.join(a.out, "contention.json"), "w"), indent=1)
    open(os.path.join(a.out, "contention.md"), "w").write(md)
    try:
        draw(a.out, rows, configs, timeline_rows, a,
             f"bench/contention.py: a latency job beside an 8192^3 GEMM background, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    except Exception as e:  # the numbers are written already: a picture is not worth them
        print(f"contention: no picture: {e!r}", file=sys.stderr)
        sys.exit(1)


def draw(out, rows, configs, timeline_rows, a, title):
    """The CDF and timeline pictures into out, as SVG, and as PNG beside them where
    rsvg-convert (Debian's librsvg2-bin) is on PATH."""
    made = [os.path.join(out, "contention-cdf.svg")]
    cdf_picture(rows, configs, made[0], title)
    if timeline_rows:
        made.append(os.path.join(out, "contention-timeline.svg"))
        timeline_picture(timeline_rows, made[-1], a)
    shares = os.path.join(out, "contention-shares.svg")
    if os.path.exists(shares):
        made.append(shares)
    to_png(made)


def to_png(svgs):
    rsvg = shutil.which("rsvg-convert")
    if rsvg is None:
        print("contention: no PNG pictures (rsvg-convert not found: apt-get install "
              "librsvg2-bin); the SVG ones are written", file=sys.stderr)
        return
    for f in svgs:
        subprocess.run([rsvg, "-o", f[:-4] + ".png", f], check=True)


def redraw(d):
    """Draws the pictures of an earlier run again from the JSON it wrote to d (contention.json
    and, if there, shares.json), as SVG and PNG: e.g. on a machine with rsvg-convert, from a
    GPU run's results."""
    c = json.load(open(os.path.join(d, "contention.json")))
    a = argparse.Namespace(**c["args"])
    sp = os.path.join(d, "shares.json")
    if os.path.exists(sp):
        sj = json.load(open(sp))
        shares_picture(sj["rows"], sj["summary"], os.path.join(d, "contention-shares.svg"), a)
    configs = list(c["summary"])
    stamp = time.strftime("%Y-%m-%d %H:%M UTC",
                          time.gmtime(os.path.getmtime(os.path.join(d, "contention.json"))))
    draw(d, c["rows"], configs, c["timeline"], a,
         f"bench/contention.py: a latency job beside an 8192^3 GEMM background, {stamp}")


if __name__ == "__main__":
    main()

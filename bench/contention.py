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

With --latency-job generate (and its background, --background train) the jobs are models: the
latency job is a generate service, GPT-2 (GPT2Config(), 124M, random weights from a fixed
seed, fp16; nothing is downloaded) generating 32 tokens greedily from a fixed 32-token prompt
per request, one request every 300 ms (--period-ms) for 4 s (--seconds); the background trains
GPT-2-medium (355M, random weights) on a fixed batch of 8 x 512 tokens with bf16 autocast and
fused AdamW, one synchronisation per step, its rate in steps/s. A request every 300 ms rather
than back to back: a generate loop is mostly the host launching small kernels, so back to back
it would read as busy the whole time and leave the background's bar (below) at nothing; 300
ms leaves the GPU to the background about half the time at a solo request of 150-200 ms and
still starts each request on time at 1.5x that. About 13 requests a repeat make the request
p99 close to their maximum; the tail that means something is the token one: the time of each
of the 32 tokens of every request (from generate's streamer, which gets each token once it
has been copied to the host), about 400 a repeat, shown in its own columns and CDF.

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

With --faults it also runs faults beside MPS clients, as result rows: a latency tenant
SIGKILLed mid-kernel, as MPS clients with classes (latency-dies) and as plain MPS clients
(latency-dies-mps): at its death it launches 300 GEMMs of 8192^3 and kills itself once the
first has finished, the rest in flight. The background, the survivor, writes its progress to a
file as it goes: its rate before, while, in the 100 ms after and after the death, and the
longest time from the death on that it made no progress. Over 2 s is a hang (the issue:
under MPS a client killed mid-kernel can hang the others until the server restarts); shorter
is a slowdown, seen in the rates. The survivor is waited for at most 15 s past its end and
then SIGKILLed, so the bench never hangs, and NVIDIA's MPS server is restarted after each
(SIGKILLed if it will not quit). Also a latency tenant that never idles (what the background
keeps: its partition bounds it below). The goals of issue 30 are printed under the table.

With --shares it also runs the share experiments, saturating 8192^3 GEMM jobs side by side:
by weight (--weight 1:1, 1:3, 1:1:2), by ceiling (--compute 25 and 75), by SM partition (--sms
32 and 96 as MPS clients), and 1:3 where the
weight-3 job stops halfway (how soon the other has the whole GPU); each job's share is its rate
over the solo rate, and shares.md, shares.json and contention-shares.svg are written too.

Prints a markdown table and writes contention.json, contention.md and contention-cdf.svg (the
latency CDF of each configuration; contention-token-cdf.svg for generate's tokens) to --out. Per
configuration: the latency job's p50 and p99 (the median over repeats of each repeat's
percentile, with the range), p99 over solo p99, the background's rate and what it kept of its
solo rate, the total work done in GPUs (the latency job's served requests at its solo busy
share plus the background's kept share), and the issue's bar for the background: 75 % of the time the latency job leaves
idle, 0.75 x (1 - solo busy share). A configuration whose processes fail is a row that says
so, not a crash.

usage: contention.py [--gpuslice BIN] [--latency-job gemm|generate] [--background gemm|train]
                     [--repeats N] [--seconds S] [--period-ms P] [--only A,B]
                     [--timeline] [--shares [NAMES]] [--faults [NAMES]] [--out DIR]
       contention.py latency|generate SECONDS PERIOD_MS OUT READY GO [DELAY [DIE_AFTER]]
                                                                  (a job; started by the above)
       contention.py background|train SECONDS OUT READY GO [TRACE]
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
        torch.cuda.synchronize()  # what the default stream made is there for the new one
        torch.cuda.set_stream(torch.cuda.Stream(priority=int(v)))


# --- the jobs: each a process of its own, the only code here that needs PyTorch ------------

# --latency-job and --background: the job's name on the command line that starts it.
LATENCY_JOBS = {"gemm": "latency", "generate": "generate"}
BACKGROUND_JOBS = {"gemm": "background", "train": "train"}
MATCHING = {"gemm": "gemm", "generate": "train"}  # the background each latency job is meant for
LATENCY_DESC = {"gemm": "10 chained fp16 GEMMs 8x4096 by 4096x4096",
                "generate": "GPT-2 (124M, random weights, fp16) generating 32 tokens greedily "
                            "from a 32-token prompt"}
BACKGROUND_DESC = {"gemm": ("8192^3 fp16 GEMMs back to back", "GEMM/s"),
                   "train": ("GPT-2-medium training (355M, random weights, batch 8x512, bf16 "
                             "autocast, AdamW)", "steps/s")}
PROMPT_TOKENS, NEW_TOKENS = 32, 32
LONG_GEMMS = 300  # the chain a dying tenant leaves in flight: 0.5 s or more of 8192^3 GEMMs


def gemm_request(torch):
    """The gemm latency job's request, warmed up: 10 chained fp16 GEMMs 8x4096 by 4096x4096,
    launched and not waited for; it returns no token times."""
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    w = torch.randn(4096, 4096, device=dev, dtype=torch.float16) / 64
    x0 = torch.randn(8, 4096, device=dev, dtype=torch.float16)
    stream_priority(torch)

    def request():
        x = x0
        for _ in range(10):
            x = x @ w
        return None
    for _ in range(200):  # warm-up: cuBLAS picks its kernels, clocks settle
        request()
    return request


class Stamps:
    """A streamer for generate(): the time each put() came. generate() puts the prompt first,
    then each new token as it is chosen, copied to the host (.cpu()), so the step's GPU work is
    done when its put() comes."""

    def __init__(self):
        self.t = []

    def put(self, value):
        self.t.append(time.monotonic())

    def end(self):
        pass


def generate_request(torch):
    """The generate latency job's request, warmed up: GPT-2 (GPT2Config(), random weights from
    a fixed seed, fp16; nothing downloaded) generating NEW_TOKENS tokens greedily from a fixed
    prompt of PROMPT_TOKENS tokens, waited for; it returns the time each new token reached the
    host."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config()
    with torch.device("cuda"):
        model = GPT2LMHeadModel(cfg)
    model = model.to(dtype=torch.float16).eval()
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, cfg.vocab_size, (1, PROMPT_TOKENS), generator=g).to("cuda")
    mask = torch.ones_like(prompt)
    stream_priority(torch)

    def request():
        s = Stamps()
        with torch.inference_mode():
            out = model.generate(prompt, attention_mask=mask, do_sample=False,
                                 max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                                 pad_token_id=cfg.eos_token_id, streamer=s)
        if out.shape[1] != PROMPT_TOKENS + NEW_TOKENS or len(s.t) < NEW_TOKENS:
            raise RuntimeError(f"generate gave {out.shape[1] - PROMPT_TOKENS} tokens and "
                               f"{len(s.t)} puts, not {NEW_TOKENS}")
        return s.t[-NEW_TOKENS:]
    for _ in range(3):  # warm-up: kernels loaded, cuBLAS handles made
        request()
    return request


def gemm_step(torch):
    """The gemm background's step, warmed up: 4 fp16 GEMMs of 8192^3; (step, units per step)."""
    dev = torch.device("cuda")
    a = torch.randn(8192, 8192, device=dev, dtype=torch.float16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.float16)
    stream_priority(torch)

    def step():
        for _ in range(4):
            a @ b
    for _ in range(3):
        step()
    return step, 4


def train_step(torch):
    """The train background's step, warmed up: GPT-2-medium (n_embd 1024, 24 layers, 16 heads;
    random weights from a fixed seed, nothing downloaded) on a fixed batch of 8 x 512 tokens,
    bf16 autocast, fused AdamW; (step, units per step)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(n_embd=1024, n_layer=24, n_head=16)
    with torch.device("cuda"):
        model = GPT2LMHeadModel(cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    g = torch.Generator().manual_seed(2)
    batch = torch.randint(0, cfg.vocab_size, (8, 512), generator=g).to("cuda")
    stream_priority(torch)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    for _ in range(3):  # warm-up: the optimiser's state made, cuBLAS's choices made
        step()
    return step, 1


LATENCY_SETUP = {"latency": gemm_request, "generate": generate_request}
BACKGROUND_SETUP = {"background": gemm_step, "train": train_step}


def token_times(start, stamps):
    """The time each new token took, in s: the first from the request's start (the prompt's
    pass included), each other from the token before."""
    out, prev = [], start
    for t in stamps:
        out.append(t - prev)
        prev = t
    return out


def die_mid_kernel(torch, chain, out, state):
    """A fault (--faults latency-dies*): launches LONG_GEMMS 8192^3 fp16 GEMMs, waits until the
    first has finished (so the second runs and the rest wait behind it), writes state with
    what it saw to out and SIGKILLs itself with that work in flight."""
    a, b = chain
    first, last = torch.cuda.Event(), torch.cuda.Event()
    a @ b
    first.record()
    for _ in range(LONG_GEMMS - 1):
        a @ b
    last.record()
    launched = time.monotonic()
    limit = launched + 10
    while not first.query() and time.monotonic() < limit:
        time.sleep(0.0002)
    state.update(first_done=bool(first.query()), in_flight=not last.query(),
                 launched=launched, died=time.monotonic())
    with open(out, "w") as f:
        json.dump(state, f)
    os.kill(os.getpid(), signal.SIGKILL)


def job_latency(job, seconds, period_ms, out, ready, go, delay=0.0, die_after=0.0):
    import torch
    request = LATENCY_SETUP[job](torch)
    chain = None
    if die_after:
        chain = tuple(torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
                      for _ in range(2))
    torch.cuda.synchronize()
    open(ready, "w").close()
    wait_file(go, 120)
    t0 = time.monotonic() + 0.2 + delay  # the background is running by then
    period = period_ms / 1000.0
    n = int(seconds / period)
    lat, tokens = [], []
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
        if die_after and arrive >= t0 + die_after:
            # A fault: killed while a long kernel chain runs (--faults, latency-dies*).
            die_mid_kernel(torch, chain, out, {"latency_s": lat, "start": t0, "period_s": period,
                                               "late": late, "requests": i})
        stamps = request()
        torch.cuda.synchronize()
        lat.append(time.monotonic() - start)
        if stamps:
            tokens.extend(token_times(start, stamps))
    json.dump({"latency_s": lat, "token_s": tokens, "start": t0,
               "end": max(end, time.monotonic()), "period_s": period, "late": late,
               "requests": n}, open(out, "w"))


def job_background(job, seconds, out, ready, go, trace=None):
    """Steps back to back for seconds after go (and 0.6 s more), each waited for: the (time,
    units done) marks to out as JSON at the end, and, with trace, each mark as a line
    "time units" as it comes (read even if this process never ends)."""
    import torch
    step, units = BACKGROUND_SETUP[job](torch)
    torch.cuda.synchronize()
    open(ready, "w").close()
    wait_file(go, 120)
    end = time.monotonic() + seconds + 0.6
    done = []  # (time, units finished so far)
    k = 0
    tf = open(trace, "w", buffering=1) if trace else None
    while time.monotonic() < end:
        step()
        torch.cuda.synchronize()
        k += units
        now = time.monotonic()
        done.append((now, k))
        if tf:
            tf.write(f"{now:.6f} {k}\n")
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
        errors.append(f"{name}: did not finish")
        try:
            out, _ = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # stuck in the driver: left behind, never waited for
            errors.append(f"{name}: still there 10 s after SIGKILL (pid {p.pid})")
            return None
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


def mps_procs(pipe_dir, proc="/proc"):
    """([control daemon PIDs], [server PIDs]) of NVIDIA's MPS serving pipe_dir: the daemons
    whose CUDA_MPS_PIPE_DIRECTORY is pipe_dir, and the servers with that variable or one of
    those daemons as parent. Processes that cannot be read are left out."""
    seen = {}
    want = ("CUDA_MPS_PIPE_DIRECTORY=" + pipe_dir).encode()
    for pid in os.listdir(proc):
        if not pid.isdigit():
            continue
        try:
            with open(f"{proc}/{pid}/cmdline", "rb") as f:
                name = os.path.basename(f.read().split(b"\0")[0].decode(errors="replace"))
            if name not in ("nvidia-cuda-mps-control", "nvidia-cuda-mps-server"):
                continue
            with open(f"{proc}/{pid}/environ", "rb") as f:
                mine = want in f.read().split(b"\0")
            with open(f"{proc}/{pid}/status") as f:
                ppid = int(re.search(r"^PPid:\s*(\d+)", f.read(), re.M).group(1))
        except (OSError, AttributeError, ValueError):
            continue
        seen[int(pid)] = (name, mine, ppid)
    daemons = sorted(p for p, (n, mine, _) in seen.items()
                     if n == "nvidia-cuda-mps-control" and mine)
    servers = sorted(p for p, (n, mine, pp) in seen.items()
                     if n == "nvidia-cuda-mps-server" and (mine or pp in daemons))
    return daemons, servers


class Runner:
    def __init__(self, args, tmp):
        self.args, self.tmp, self.gs = args, tmp, args.gpuslice
        self.mps_dir = None
        self.notes = []  # what went wrong around the jobs (MPS that would not stop)

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
        """Quits NVIDIA's MPS control daemon of this run; its servers and the daemon are
        SIGKILLed (said in self.notes) if quit does not answer within 20 s or they are still
        there 5 s later: a server wedged by a fault must not serve what comes next."""
        if not self.mps_dir:
            return
        pipe = self.mps_dir + "/pipe"
        env = gpumeasure.scrubbed_env({"CUDA_MPS_PIPE_DIRECTORY": pipe,
                                       "CUDA_MPS_LOG_DIRECTORY": self.mps_dir + "/log"})
        how = None
        try:
            subprocess.run(["nvidia-cuda-mps-control"], input=b"quit\n", env=env, timeout=20,
                           capture_output=True)
        except subprocess.TimeoutExpired:
            how = "quit did not answer within 20 s"
        time.sleep(1)
        limit = time.monotonic() + (0 if how else 5)
        while True:
            daemons, servers = mps_procs(pipe)
            if not daemons + servers or time.monotonic() >= limit:
                break
            time.sleep(0.1)
        if daemons + servers:
            for pid in servers + daemons:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            self.notes.append(f"MPS stop: {how or 'still there 5 s after quit'}: SIGKILLed "
                              f"servers {servers} and control daemons {daemons}")
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
        # The background runs past the latency job's window by two periods (a request that
        # starts at the window's end may take that long).
        bg_s, lat_s, delay = ((3 * a.seconds, a.seconds, a.seconds) if timeline
                              else (a.seconds + 0.2 + 2 * a.period_ms / 1000, a.seconds, 0.0))
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
                    bg[0] + me + [BACKGROUND_JOBS[a.background], str(bg_s), out_b, ready_b,
                                  go],
                    env=bg[1], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
            if lat:
                procs.append(("latency", subprocess.Popen(
                    lat[0] + me + [LATENCY_JOBS[a.latency_job], str(lat_s), str(a.period_ms),
                                   out_l, ready_l, go, str(delay)], env=lat[1],
                    stdout=subprocess.PIPE,
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
            if L.get("token_s"):
                row["token_ms"] = [round(1000 * v, 4) for v in L["token_s"]]
                row["token_p50_ms"] = 1000 * gpumeasure.percentile(L["token_s"], 50)
                row["token_p99_ms"] = 1000 * gpumeasure.percentile(L["token_s"], 99)
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
                row.pop("token_ms", None)
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


FAULTS = ["latency-dies", "latency-dies-mps", "latency-stuck"]
HANG_S = 2.0  # the survivor making no progress for longer than this is a hang, not a slowdown
# How long past its end a survivor is waited for before it is SIGKILLed (CONTENTION_HANG_WAIT_S:
# tests/gpu/selftest.py's stand-ins, which need not wait that long).
def _hang_wait_s():
    v = os.environ.get("CONTENTION_HANG_WAIT_S") or "15"
    try:
        if float(v) > 0:
            return float(v)
    except ValueError:
        pass
    sys.exit(f'contention.py: CONTENTION_HANG_WAIT_S: "{v}" is not a number of seconds above 0 '
             "(e.g. 15)")


HANG_WAIT_S = _hang_wait_s()


def read_trace(text):
    """The (time, units) marks of a background's trace file (lines "time units"); a last line
    cut short by a SIGKILL is left out."""
    marks = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                marks.append((float(parts[0]), int(parts[1])))
            except ValueError:
                pass
    return marks


def hang_check(marks, died, cut, gap=HANG_S):
    """What the survivor did after another client died at time died, from its progress marks
    (time, units done) up to cut (when it ended or was killed): the longest time without
    progress from its last mark before the death on (stall_s; to cut if it never made progress
    again), when that stall began and ended (None: it never resumed before cut), and whether
    it hung: a stall longer than gap. Anything shorter is a slowdown, seen in the rates."""
    before = [t for t, _ in marks if t <= died]
    after = sorted(t for t, _ in marks if t > died)
    prev = before[-1] if before else died
    stall, stall_from, stall_to = 0.0, prev, prev
    for t in after:
        if t - prev > stall:
            stall, stall_from, stall_to = t - prev, prev, t
        prev = t
    resumed = True
    if cut - prev > stall:
        stall, stall_from, stall_to, resumed = cut - prev, prev, None, False
    return {"stall_s": stall, "stall_from": stall_from - died,
            "stall_to": None if stall_to is None else stall_to - died,
            "resumed": resumed or stall <= gap, "hung": stall > gap}


def wait_bounded(p, timeout):
    """Waits up to timeout s for p (the leader of a session of its own: gpuslice run and its
    program); then SIGKILLs its process group and waits 10 s more. ('exited', status),
    ('killed', status) or ('stuck', None): a process that SIGKILL could not end (in the driver)
    is left behind rather than waited for."""
    try:
        return "exited", p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        p.kill()
    try:
        return "killed", p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        return "stuck", None


def faults_once(r, name, rep):
    """A fault beside MPS clients, as a result row. latency-dies: both tenants clients of
    NVIDIA's MPS server with gpuslice's classes; latency-dies-mps: the same without gpuslice.
    The background (the survivor) runs 3 x --seconds, writing its progress to a trace file as
    it goes; the latency tenant sends its requests from --seconds on and half a --seconds later
    launches LONG_GEMMS 8192^3 GEMMs and SIGKILLs itself once the first has finished, the rest
    in flight. The row: the survivor's rate before, while the tenant ran, in the 100 ms after
    its death and after that; how soon it ran at full speed again; the longest time it made no
    progress from the death on and whether that was a hang (over HANG_S s) or a slowdown; the
    survivor is waited for at most HANG_WAIT_S s past its end, then SIGKILLed (stuck), and the
    MPS server is restarted after each fault. latency-stuck: a latency tenant that never idles
    (the background's job at --priority latency) beside the background for --seconds: what
    each kept of the solo rate (the background's partition bounds it below)."""
    a, tmp = r.args, r.tmp
    tag = f"fault-{name}-{rep}"
    dies = name.startswith("latency-dies")
    classes = name != "latency-dies-mps"
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
    trace = out_b + ".trace"
    me = [sys.executable, os.path.abspath(__file__)]
    bg_job = BACKGROUND_JOBS[a.background]
    bg_s = 3 * a.seconds if dies else a.seconds
    lat_job = ([LATENCY_JOBS[a.latency_job], str(a.seconds), str(a.period_ms), out_l, rl, go,
                str(a.seconds), str(a.seconds / 2)] if dies
               else [bg_job, str(a.seconds), out_l, rl, go])
    jobs = []
    try:
        for who, argv in (("background", [bg_job, str(bg_s), out_b, rb, go, trace]),
                          ("latency", lat_job)):
            pre = [r.gs, "run", "-q", "--priority", who, "--"] if classes else []
            jobs.append((who, subprocess.Popen(pre + me + argv, env=env, stdout=subprocess.PIPE,
                                               stderr=subprocess.STDOUT,
                                               start_new_session=dies)))
    except OSError as e:
        for _, p in jobs:
            p.kill()
            p.wait()
        row["error"] = f"cannot start a job: {e}"
        return row
    ok = wait_file(rb, 90) and wait_file(rl, 90)
    if ok:
        open(go, "w").close()
    go_t = time.monotonic()
    errors = []
    if dies and ok:
        # The victim first, then the survivor, each waited for a bounded time: a hang is a
        # result here, never a bench that hangs.
        victim, survivor = jobs[1][1], jobs[0][1]
        # gpuslice run says a program killed by SIGKILL with 128 + 9; Popen with -9.
        how, status = wait_bounded(victim, 1.5 * a.seconds + 30)
        row["victim_exit"] = status if how == "exited" else how
        if how != "exited" or status not in (137, -signal.SIGKILL):
            errors.append(f"latency: {how} with status {status}, not SIGKILLed by itself")
        limit = go_t + bg_s + 0.6 + HANG_WAIT_S - time.monotonic()
        how, status = wait_bounded(survivor, max(limit, 1.0))
        cut = time.monotonic()
        row["survivor_end"] = how if how != "exited" else f"exited {status}"
        # A survivor that fails is a result (the fault took it down with the victim), not a
        # failed run: its last words say how, and its trace how far it got.
        row["survivor_failed"] = how == "exited" and status != 0
        for who, p in jobs:
            try:  # bounded: a child left stuck may hold the pipe open
                text = p.communicate(timeout=5)[0].decode(errors="replace")
                row.setdefault("interposer", {})[who] = counts(text)[-2:]
                if who == "background" and row["survivor_failed"]:
                    row["survivor_output"] = " ".join(
                        ln for ln in text.splitlines() if "gpuslice: debug" not in ln)[-400:]
            except subprocess.TimeoutExpired:
                pass
        r.mps_stop()  # a fresh server for what comes next, whatever this one went through
    else:
        for who, p in jobs:
            if not ok:
                try:
                    os.killpg(p.pid, signal.SIGKILL) if dies else p.kill()
                except OSError:
                    pass
            text = finish(who, p, bg_s + 60, errors)
            if text is not None:
                row.setdefault("interposer", {})[who] = counts(text)[-2:]
    if not ok:
        errors.append("a job did not become ready in 90 s")
    try:
        L = json.load(open(out_l))
        B = read_trace(open(trace).read()) if dies else json.load(open(out_b))["done"]
    except (OSError, ValueError) as e:
        errors.append(f"no results: {e}")
    if errors:
        row["error"] = "; ".join(errors)
        return row
    if dies:
        t0, died = L["start"], L["died"]
        row["victim_in_flight"] = bool(L.get("first_done") and L.get("in_flight"))
        row["bg_before"] = rate_in(B, t0 - a.seconds + 0.3, t0 - 0.05)
        row["bg_during"] = rate_in(B, t0 + 0.1, died - 0.05)
        row["bg_after_100ms"] = rate_in(B, died, died + 0.1)
        row["bg_after"] = rate_in(B, died + 0.1, B[-1][0] - 0.1) if B else None
        row["recover_ms"] = recovery_ms(B, (t0, died))
        row["served_before_death"] = len(L["latency_s"])
        row.update(hang_check(B, died, cut))
        if row.get("survivor_failed"):
            row["hung"] = False  # it ended (with an error), it did not hang
    else:
        t0 = max(B[0][0], L["done"][0][0]) + 0.2
        t1 = min(B[-1][0], L["done"][-1][0]) - 0.1
        row["bg_rate"] = rate_in(B, t0, t1)
        row["latency_rate"] = rate_in(L["done"], t0, t1)
    return row


def faults_table(rows, solo_rate, unit="GEMM/s"):
    pct = lambda v: "" if v is None or not solo_rate else f"{100 * v / solo_rate:.1f} %"  # noqa: E731
    med = lambda v: statistics.median(v) if v else None  # noqa: E731
    lines = ["Faults beside MPS clients (--faults); rates as % of the background's solo rate "
             f"({solo_rate and round(solo_rate, 1)} {unit}), median over repeats. A dying "
             f"tenant is SIGKILLed with {LONG_GEMMS} 8192^3 GEMMs in flight; the survivor hung "
             f"if it made no progress for over {HANG_S:g} s (its longest stall from the death "
             f"on, per repeat; it is SIGKILLed {HANG_WAIT_S:g} s past its end if it never "
             "ends).", "",
             "| fault | background before / while / first 100 ms after / after | full speed "
             "again after | longest stall after the death [per repeat] | hung | the latency "
             "tenant | runs failed |", "|---|---|---|---|---|---|---|"]
    for name in FAULTS:
        rs = [x for x in rows if x["experiment"] == name]
        if not rs:
            continue  # not run (--faults NAMES)
        good = [x for x in rs if "error" not in x]
        errs = [x["error"] for x in rs if "error" in x][:1]
        m = {k: med([x[k] for x in good if x.get(k) is not None])
             for k in ("bg_before", "bg_during", "bg_after_100ms", "bg_after", "recover_ms",
                       "bg_rate", "latency_rate")}
        stall = hung = ""
        if name.startswith("latency-dies"):
            cells = " / ".join(pct(m[k]) or "?" for k in ("bg_before", "bg_during",
                                                          "bg_after_100ms", "bg_after"))
            rec = "never" if m["recover_ms"] is None else f"{m['recover_ms']:.1f} ms"
            stall = ", ".join(f"{1000 * x['stall_s']:.0f} ms"
                              + ("" if x.get("resumed") else " (never resumed)")
                              for x in good if x.get("stall_s") is not None)
            n_hung = sum(1 for x in good if x.get("hung"))
            hung = f"{n_hung}/{len(good)}" if good else ""
            stuck = sum(1 for x in good if x.get("survivor_end") in ("killed", "stuck"))
            if stuck:
                hung += f", {stuck} survivor(s) SIGKILLed at the end"
            died = [x for x in good if x.get("survivor_failed")]
            if died:
                hung += (f", the survivor failed in {len(died)}/{len(good)} "
                         f"({died[0]['survivor_end']}: "
                         f"{(died[0].get('survivor_output') or '?')[-160:]})")
            flight = sum(1 for x in good if x.get("victim_in_flight"))
            lat = (f"SIGKILLed mid-kernel ({flight}/{len(good)} with the chain seen running), "
                   + ("classes" if name == "latency-dies" else "no gpuslice"))
        else:
            cells, rec = f"{pct(m['bg_rate']) or '?'} the whole time", ""
            lat = f"never idles: {pct(m['latency_rate']) or '?'} of the solo rate"
        lines.append(f"| {name} | {cells} | {rec} | {stall} | {hung} | {lat} | "
                     f"{len(rs) - len(good)}/{len(rs)}"
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
        for k in ("p50_ms", "p99_ms", "token_p50_ms", "token_p99_ms", "busy", "bg_rate", "late",
                  "served_share"):
            v = [r[k] for r in good if r.get(k) is not None]
            s[k] = med(v)
            s[k + "_range"] = (min(v), max(v)) if v else None
        out[c] = s
    solo_p50 = out.get("solo-latency", {}).get("p50_ms")
    solo_p99 = out.get("solo-latency", {}).get("p99_ms")
    solo_busy = out.get("solo-latency", {}).get("busy")
    solo_rate = out.get("solo-background", {}).get("bg_rate")
    for c, s in out.items():
        s["p50_over_solo"] = s["p50_ms"] / solo_p50 if s.get("p50_ms") and solo_p50 else None
        s["p99_over_solo"] = s["p99_ms"] / solo_p99 if s.get("p99_ms") and solo_p99 else None
        s["bg_kept"] = s["bg_rate"] / solo_rate if s.get("bg_rate") and solo_rate else None
        # The work both jobs did, in GPUs: the latency job's requests served at its solo busy
        # share, plus the background's rate over its solo rate.
        lat = (solo_busy * s["served_share"] if s.get("served_share") is not None and
               solo_busy is not None else 0.0)
        s["total"] = lat + (s["bg_kept"] or 0.0) if (lat or s["bg_kept"]) else None
    bar = 0.75 * (1 - solo_busy) if solo_busy is not None else None
    return out, bar


def jobs_of(args):
    """(latency job, background) of a run's arguments; gemm for a run from before they were
    chosen."""
    lj = getattr(args, "latency_job", None) or "gemm"
    return lj, getattr(args, "background", None) or MATCHING[lj]


def table(summary, bar, args):
    f = lambda v, fmt: "" if v is None else fmt % v  # noqa: E731
    lj, bj = jobs_of(args)
    what, unit = BACKGROUND_DESC[bj]
    tokens = any(s.get("token_p50_ms") is not None for s in summary.values())
    lines = [f"Latency job: {LATENCY_DESC[lj]}, one request every {args.period_ms:g} ms, "
             f"{args.seconds:g} s; background: {what}. "
             f"{args.repeats} interleaved repeats; each cell the median over repeats "
             f"[min, max]. "
             + (f"Bar for the background: {100 * bar:.1f} % of its solo rate (75 % of the "
                f"time the latency job leaves idle)." if bar is not None else
                "No bar for the background: solo-latency was not run.")
             + (" Token: the time of each generated token (the first from the request's "
                "start), all of a repeat's tokens." if tokens else ""), "",
             "| configuration | p50 ms | p99 ms | p50 / solo | p99 / solo p99 | "
             + ("token p50 / p99 ms | " if tokens else "")
             + f"background {unit} | background kept | total | late requests | runs failed |",
             "|---|---|---|---|---|" + ("---|" if tokens else "") + "---|---|---|---|---|"]
    for c, s in summary.items():
        rng = lambda k: (f" [{s[k + '_range'][0]:.2f}, {s[k + '_range'][1]:.2f}]"  # noqa: E731
                         if s.get(k + "_range") else "")
        tok = (f"{f(s.get('token_p50_ms'), '%.2f')} / {f(s.get('token_p99_ms'), '%.2f')} | "
               if tokens else "")
        lines.append(f"| {c} | {f(s['p50_ms'], '%.3f')} | {f(s['p99_ms'], '%.3f')}{rng('p99_ms')} | "
                     f"{f(s.get('p50_over_solo'), '%.2f')} | "
                     f"{f(s['p99_over_solo'], '%.2f')} | {tok}{f(s['bg_rate'], '%.1f')} | "
                     f"{f(s['bg_kept'] and 100 * s['bg_kept'], '%.1f %%')} | "
                     f"{f(s['total'] and 100 * s['total'], '%.1f %%')} | "
                     f"{f(s['late'], '%.0f')} | "
                     f"{s['failed']}/{s['runs']}{(': ' + s['errors'][0][:160]) if s['errors'] else ''} |")
    return "\n".join(lines) + "\n"


def goals(summary, bar):
    """The issue's goals against a run's summary, as (goal, True/False, or None where a
    configuration it needs was not measured, what was measured): MPS clients with classes
    (mps-gs-priority) within 1.1x of solo in p50 and p99 with the background at the bar or
    over; --priority latency (gs-priority, mps-gs-priority) never worse than time-sliced in p50
    or p99."""
    def get(c, k):
        s = summary.get(c) or {}
        return s.get(k)
    out = []
    m = "mps-gs-priority"
    for k in ("p50", "p99"):
        v = get(m, k + "_over_solo")
        out.append((f"{m}: {k} within 1.10x of solo", None if v is None else v <= 1.10,
                    "" if v is None else f"{v:.2f}x"))
    kept = get(m, "bg_kept")
    out.append((f"{m}: background keeps 75 % of the time the latency job leaves idle",
                None if kept is None or bar is None else kept >= bar,
                "" if kept is None or bar is None else
                f"kept {100 * kept:.1f} %, bar {100 * bar:.1f} %"))
    for c in ("gs-priority", m):
        for k in ("p50_ms", "p99_ms"):
            v, ts = get(c, k), get("time-sliced", k)
            out.append((f"{c}: {k[:3]} no worse than time-sliced",
                        None if v is None or ts is None else v <= ts,
                        "" if v is None or ts is None else f"{v:.3f} ms against {ts:.3f} ms"))
    return out


def goals_text(gs):
    return "Goals (issue 30):\n" + "".join(
        f"- {g}: {'met' if ok else 'missed' if ok is False else 'not measured'}"
        f"{(' (' + v + ')') if v else ''}\n" for g, ok, v in gs)


def cdf_picture(rows, configs, path, title, key="latency_ms", what="latency of a request"):
    """The CDF of each configuration's latencies (key: of requests, or of generated tokens),
    all its repeats pooled, as SVG."""
    import svgplot
    series, worst = [], 0.0
    for c in configs:
        v = sorted(x for r in rows if r["config"] == c and "error" not in r
                   for x in r.get(key, []))
        if not v:
            continue
        n = len(v)
        step = max(1, n // 400)
        pts = [(v[i], (i + 1) / n) for i in range(0, n, step)] + [(v[-1], 1.0)]
        series.append((c, pts))
        worst = max(worst, gpumeasure.percentile(v, 99.9))
    page = svgplot.Page(900, 520, title)
    xmax = max(1.0, worst * 1.05)
    page.panel(10, 40, 880, 470, f"{what} (CDF, all repeats pooled)", series,
               unit="percentunit", xlabel=lambda x: "%.1f ms" % x, xmin=0, xmax=xmax, ymin=0,
               ymax=1.0)
    page.save(path)


def timeline_picture(rows, path, a):
    """The background's rate over time while the latency job runs the middle third."""
    import svgplot
    series = [(r["config"], whole_bins(r["timeline"], -a.seconds, 2 * a.seconds)) for r in rows
              if "error" not in r and r.get("timeline")]
    unit = BACKGROUND_DESC[jobs_of(a)[1]][1]
    page = svgplot.Page(900, 520, f"bench/contention.py --timeline: the background's {unit}, "
                        f"the latency job running from 0 to {a.seconds:g} s")
    page.panel(10, 40, 880, 470, "background throughput (100 ms bins)", series, unit="short",
               xlabel=lambda x: "%g s" % x, xticks=[k * a.seconds for k in range(-1, 3)],
               xmin=-a.seconds, xmax=2 * a.seconds, ymin=0)
    page.save(path)


def main():
    if len(sys.argv) > 1 and sys.argv[1] in LATENCY_SETUP:
        return job_latency(sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), *sys.argv[4:7],
                           delay=float(sys.argv[7]) if len(sys.argv) > 7 else 0.0,
                           die_after=float(sys.argv[8]) if len(sys.argv) > 8 else 0.0)
    if len(sys.argv) > 1 and sys.argv[1] in BACKGROUND_SETUP:
        return job_background(sys.argv[1], float(sys.argv[2]), *sys.argv[3:6],
                              trace=sys.argv[6] if len(sys.argv) > 6 else None)
    if len(sys.argv) == 3 and sys.argv[1] == "redraw":
        return redraw(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpuslice", default=os.path.join(os.path.dirname(HERE), "build", "bin",
                                                       "gpuslice"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--latency-job", choices=list(LATENCY_JOBS), default="gemm",
                    help="the latency job: GEMM requests, or GPT-2 generating 32 tokens")
    ap.add_argument("--background", choices=list(BACKGROUND_JOBS), default=None,
                    help="the background: 8192^3 GEMMs, or GPT-2-medium training (default: "
                         "gemm for --latency-job gemm, train for generate)")
    ap.add_argument("--seconds", type=float, default=None,
                    help="the latency job's window (default 3, 4 for generate)")
    ap.add_argument("--period-ms", type=float, default=None,
                    help="one request every this many ms (default 2, 300 for generate)")
    ap.add_argument("--only", default=",".join(CONFIGS))
    ap.add_argument("--out", default=".")
    ap.add_argument("--shares", nargs="?", const="all", default=None, metavar="NAMES",
                    help="also run the share experiments (weights, ceilings, SM partitions) "
                         "after the rest: all of them, or those named (comma-separated: "
                         + ", ".join(SHARES) + ")")
    ap.add_argument("--faults", nargs="?", const="all", default=None, metavar="NAMES",
                    help="also run the faults beside MPS clients: a latency tenant SIGKILLed "
                         "mid-kernel with classes and without gpuslice (does the other client "
                         "hang?), and one that never idles: all of them, or those named "
                         "(comma-separated: " + ", ".join(FAULTS) + ")")
    ap.add_argument("--timeline", action="store_true",
                    help="also run each non-solo configuration once with the background for 3 x "
                         "--seconds and the latency job in the middle third, and draw the "
                         "background's rate over time")
    a = ap.parse_args()
    gen = a.latency_job == "generate"
    a.background = a.background or MATCHING[a.latency_job]
    a.seconds = a.seconds if a.seconds is not None else 4.0 if gen else 3.0
    a.period_ms = a.period_ms if a.period_ms is not None else 300.0 if gen else 2.0
    configs = [c for c in a.only.split(",") if c]
    unknown = [c for c in configs if c not in CONFIGS and
               not re.fullmatch(r"mps-gs-priority-y[1-9][0-9]*", c)]
    if unknown:
        ap.error(f"--only: unknown configuration {unknown[0]!r} (choose from {', '.join(CONFIGS)})")
    if a.shares and a.shares != "all" and not set(a.shares.split(",")) <= set(SHARES):
        ap.error("--shares %s: give experiments of %s" % (a.shares, ", ".join(SHARES)))
    if a.shares and a.background != "gemm":
        ap.error("--shares: the share experiments are GEMM jobs, measured against the gemm "
                 "background's solo rate (leave --background train out of them)")
    if a.faults and a.faults != "all" and not set(a.faults.split(",")) <= set(FAULTS):
        ap.error("--faults %s: give faults of %s" % (a.faults, ", ".join(FAULTS)))
    if a.repeats < 1 or a.seconds <= 0.5 or a.period_ms <= 0:
        ap.error("--repeats must be at least 1, --seconds over 0.5, --period-ms over 0")
    if not gpumeasure.outside_interposer():
        ap.error("run this without the interposer preloaded (it starts its own jobs)")
    tmp = tempfile.mkdtemp(prefix="gs-contention-")
    r = Runner(a, tmp)
    rows, notes = [], []
    try:
        for rep in range(a.repeats):
            order = configs[rep % len(configs):] + configs[:rep % len(configs)]
            # MPS configurations together, so that one MPS server serves them in a row.
            order = [c for c in order if not c.startswith("mps")] + \
                    [c for c in order if c.startswith("mps")]
            for c in order:
                row = r.once(c, rep)
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items()
                                  if k not in ("latency_ms", "token_ms")}), flush=True)
                if c == "gs-share50":
                    r.gs_mps_stop()  # its MPS daemon must not serve the configurations after it
            r.mps_stop()
    finally:
        r.mps_stop()
        r.gs_mps_stop()
        notes += r.notes
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
            notes += r.notes
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
            names = FAULTS if a.faults == "all" else a.faults.split(",")
            for rep in range(a.repeats):
                for name in names:
                    row = faults_once(r, name, rep)
                    fault_rows.append(row)
                    print(json.dumps(row), flush=True)
        finally:
            r.mps_stop()
            notes += r.notes
            shutil.rmtree(r.tmp, ignore_errors=True)
    summary, bar = summarize(rows, configs)
    md = table(summary, bar, a)
    if "mps-gs-priority" in configs or "gs-priority" in configs:
        md += "\n" + goals_text(goals(summary, bar))
    if fault_rows:
        md += "\n" + faults_table(fault_rows, summary.get("solo-background", {}).get("bg_rate"),
                                  BACKGROUND_DESC[a.background][1])
    if timeline_rows:
        md += ("\nThe background over time (--timeline): how soon after the latency job's last "
               "request it ran at its earlier rate again (the start of the first interval "
               "between its synchronisations at 90 % of it or more; resolution one interval, "
               "4 GEMMs or a training step):\n\n"
               "| configuration | full speed again after |\n|---|---|\n")
        for t in timeline_rows:
            v = t.get("recover_ms")
            md += f"| {t['config']} | {'never' if v is None else '%.1f ms' % v} |\n"
    if notes:
        md += "\nNotes:\n" + "".join(f"- {n}\n" for n in notes)
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
               "notes": notes, "background_bar": bar, "args": vars(a)}, open(os.path.join(a.out, "contention.json"), "w"), indent=1)
    open(os.path.join(a.out, "contention.md"), "w").write(md)
    try:
        draw(a.out, rows, configs, timeline_rows, a,
             picture_title(a, time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())))
    except Exception as e:  # the numbers are written already: a picture is not worth them
        print(f"contention: no picture: {e!r}", file=sys.stderr)
        sys.exit(1)


def draw(out, rows, configs, timeline_rows, a, title):
    """The CDF and timeline pictures into out, as SVG, and as PNG beside them where
    rsvg-convert (Debian's librsvg2-bin) is on PATH."""
    made = [os.path.join(out, "contention-cdf.svg")]
    cdf_picture(rows, configs, made[0], title)
    if any(r.get("token_ms") for r in rows):
        made.append(os.path.join(out, "contention-token-cdf.svg"))
        cdf_picture(rows, configs, made[-1], title, key="token_ms",
                    what="time of a generated token")
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
    draw(d, c["rows"], configs, c["timeline"], a, picture_title(a, stamp))


def picture_title(a, stamp):
    lj, bj = jobs_of(a)
    return (f"bench/contention.py: {'a latency job' if lj == 'gemm' else 'GPT-2 generate'} "
            f"beside {'an 8192^3 GEMM background' if bj == 'gemm' else 'GPT-2-medium training'}"
            f", {stamp}")


if __name__ == "__main__":
    main()

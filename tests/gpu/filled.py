"""cli_filled: `gpuslice run --filled 0.9` around a PyTorch program that allocates 20 GiB,
frees it, then allocates 40 GiB; and a second process beside it.

usage: filled.py control GPUSLICE_BIN DIR     the check (starts everything)
       filled.py worker DIR                   the program under --filled (started by control)
       filled.py other DIR                    the second process (started by control)

control samples the GPU's memory in use every 20 ms through NVML (device-wide, outside any
tenant) while the program runs, and checks:
- each of the program's allocations succeeds (20 GiB, then 40 GiB after freeing the 20);
- at every step, once settled (0.5 s), the GPU's use is within 1 % of the total of 90 % of it;
- over the whole run, the share of samples outside that band and the longest excursion
  (the transients, reported as numbers);
- a second process, not in the tenant, cannot allocate more than what is left (the free memory
  it sees plus 256 MiB is refused) while the program holds 20 GiB, and gets what is left;
- after the program ends the reservation is gone (use back to within 1 GiB of before) in 2 s.
"""
import os
import subprocess
import sys
import threading
import time

from gpucheck import GiB, MiB, check, done, flag, key, note, num, wait_flag

RATIO = 0.9
BAND = 0.01  # of the total
STEPS = ("start", "a20", "freed", "a40")


def worker(d):
    import torch

    def alloc(gib, value):
        """A tensor of gib GiB, written; None (said) when the allocation fails."""
        try:
            t = torch.empty(gib * GiB, dtype=torch.uint8, device="cuda")
            t.fill_(value)
            torch.cuda.synchronize()
            print(f"alloc {gib} GiB ok", flush=True)
            return t
        except RuntimeError as e:
            print(f"alloc {gib} GiB failed: {e}", flush=True)
            return None

    torch.cuda.init()
    x = torch.ones(1, device="cuda")  # the context
    torch.cuda.synchronize()
    flag(d, "start")
    wait_flag(d, "go_a20")
    a = alloc(20, 1)
    flag(d, "a20")
    wait_flag(d, "go_freed")
    del a
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    flag(d, "freed")
    wait_flag(d, "go_a40")
    b = alloc(40, 2)
    flag(d, "a40")
    wait_flag(d, "go_end")
    del b, x


def other(d):
    import torch
    free, total = torch.cuda.mem_get_info()
    print(f"other: free {free} of {total}", flush=True)
    try:
        t = torch.empty(free + 256 * MiB, dtype=torch.uint8, device="cuda")
        print("other: more than free: ok (should have been refused)", flush=True)
        del t
    except RuntimeError:
        print("other: more than free: refused", flush=True)
    torch.cuda.empty_cache()
    free2, _ = torch.cuda.mem_get_info()
    try:
        t = torch.empty(max(free2 - 512 * MiB, MiB), dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        print(f"other: free less 512 MiB ({free2 - 512 * MiB} bytes): ok", flush=True)
        flag(d, "other_holds")
        wait_flag(d, "other_go", timeout=60)
        del t
    except RuntimeError as e:
        print(f"other: free less 512 MiB: failed: {e}", flush=True)


class Sampler:
    def __init__(self):
        import pynvml
        pynvml.nvmlInit()
        self.nvml = pynvml
        self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.total = pynvml.nvmlDeviceGetMemoryInfo(self.h).total
        self.samples = []
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)

    def used(self):
        return self.nvml.nvmlDeviceGetMemoryInfo(self.h).used

    def run(self):
        while not self.stop.is_set():
            self.samples.append((time.monotonic(), self.used()))
            time.sleep(0.02)


def control(gs, d):
    s = Sampler()
    total, target = s.total, RATIO * s.total
    band = BAND * total
    base = s.used()
    note(f"GPU 0: {total} bytes, {base} in use before; target {target:.0f} +- {band:.0f}")
    s.t.start()
    env = dict(os.environ)
    log = open(os.path.join(d, "worker.log"), "w")
    t_start = time.monotonic()
    p = subprocess.Popen([gs, "run", "--filled", str(RATIO), "--", sys.executable,
                          os.path.abspath(__file__), "worker", d],
                         stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    settled = {}
    marks = []  # (time, what): when each step was asked for, and the second process's span

    def mark(what):
        marks.append((time.monotonic(), what))

    try:
        for i, step in enumerate(STEPS):
            if i > 0:
                mark("go_" + step)
                flag(d, "go_" + step)
            wait_flag(d, step, timeout=120)
            time.sleep(0.5)
            u = s.used()
            settled[step] = u
            num(f"used_{step}_bytes", u)
            check(abs(u - target) <= band,
                  f"after '{step}' the GPU's use is {100 * u / total:.2f}% of its memory, within "
                  f"1% of {100 * RATIO:g}% ({u} bytes, target {target:.0f})")
            if step == "a20":
                olog = open(os.path.join(d, "other.log"), "w")
                mark("other_start")
                o = subprocess.Popen([sys.executable, os.path.abspath(__file__), "other", d],
                                     stdout=olog, stderr=subprocess.STDOUT)
                wait_flag(d, "other_holds", timeout=90, peer=o.pid)
                num("used_with_other_bytes", s.used())
                flag(d, "other_go")
                o.wait(timeout=60)
                mark("other_end")
                olog.close()
                with open(os.path.join(d, "other.log")) as f:
                    text = f.read()
                print(text)
                check("more than free: refused" in text,
                      "the second process cannot allocate more than what is left")
                check("free less 512 MiB" in text and ": ok" in text.split("free less 512 MiB")[-1],
                      "the second process gets what is left")
        mark("go_end")
        flag(d, "go_end")
        rc = p.wait(timeout=60)
        t_end = time.monotonic()
        check(rc == 0, f"gpuslice run --filled {RATIO} returns the program's status 0 (got {rc})")
        deadline = time.monotonic() + 2.0
        while s.used() > base + GiB and time.monotonic() < deadline:
            time.sleep(0.05)
        u = s.used()
        check(u <= base + GiB, f"after the program the reservation is gone ({u} bytes in use, "
                               f"{base} before)")
    finally:
        s.stop.set()
        if p.poll() is None:
            os.killpg(p.pid, 9)
        log.close()
    with open(os.path.join(d, "worker.log")) as f:
        text = f.read()
    print(text)
    check("alloc 20 GiB ok" in text, "the program's 20 GiB allocation succeeded")
    check("alloc 40 GiB ok" in text, "the program's 40 GiB allocation succeeded")
    # Transients: samples between the first fill and the end outside the band.
    # (Up to the program's end: the reservation's release then is checked above.)
    t_go_end = [t for t, w in marks if w == "go_end"]
    t_stop = t_go_end[0] if t_go_end else t_end
    inside = [(t, u) for t, u in s.samples if t_start + 0.2 < t < t_stop]
    filled = [(t, u) for t, u in inside if u >= target - band]
    if filled:
        t0 = filled[0][0]
        run = [(t, u) for t, u in inside if t >= t0]
        out = [abs(u - target) > band for t, u in run]
        longest, cur, last = 0.0, 0.0, None
        for (t, u), o in zip(run, out):
            if o:
                cur += (t - last) if last is not None else 0.0
                longest = max(longest, cur)
            else:
                cur = 0.0
            last = t
        key("samples_outside_band_pct", round(100.0 * sum(out) / len(out), 1))
        key("longest_excursion_s", round(longest, 3))
        num("samples", len(run))
        note(f"{sum(out)} of {len(run)} samples (every 20 ms) outside the band; the longest "
             f"excursion lasted {longest:.3f} s")
        # Each excursion: when it began after the last mark, how long, how far.
        spans, cur = [], None
        for (t, u), o in zip(run, out):
            if o and cur is None:
                cur = [t, t, u - target]
            elif o:
                cur[1] = t
                cur[2] = max(cur[2], u - target, key=abs)
            elif cur is not None:
                spans.append(cur)
                cur = None
        if cur is not None:
            spans.append(cur)
        other = [t for t, w in marks if w.startswith("other_")]
        beside = 0
        for t0, t1, dev in spans:
            before = [(t, w) for t, w in marks if t <= t0 + 0.02]
            t_m, w_m = before[-1] if before else (t_start, "start")
            inside_other = len(other) == 2 and other[0] <= t0 <= other[1]
            beside += inside_other
            print(f"excursion: {t0 - t_m:+.3f} s after {w_m}, {t1 - t0 + 0.02:.3f} s, farthest "
                  f"{100 * dev / total:+.2f}% of the memory{' (the second process holds what was left)' if inside_other else ''}")
        own = [s_ for s_ in spans if not (len(other) == 2 and other[0] <= s_[0] <= other[1])]
        key("excursions", len(spans))
        key("excursions_without_second_process", len(own))
        if own:
            key("longest_own_excursion_s", round(max(t1 - t0 + 0.02 for t0, t1, _ in own), 3))
    else:
        check(False, "the GPU was filled to the target at some point")
    done()


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "control":
        control(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "worker":
        worker(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "other":
        other(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

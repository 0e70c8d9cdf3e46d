"""Two PyTorch processes of one gpuslice tenant share its memory limit. run.sh starts
the roles together inside one `gpuslice run --memory 4G -- bash -c ...`; they take
turns through flag files in DIR.

  A DIR LIMIT             holds 2.5 GiB, frees it, holds it again, then exits holding it
  B DIR LIMIT A_PID       while A holds, 2 GiB must raise OutOfMemoryError; after A frees,
                          and again after A exits, 2 GiB must succeed
  hold DIR LIMIT          holds 2.5 GiB and waits to be killed
  kill DIR LIMIT H_PID    checks 2 GiB is refused while the holder lives, SIGKILLs it, and
                          measures how long until 2 GiB can be allocated
Output follows gpucheck.py.
"""
import os
import signal
import sys
import time

import gpucheck as gc
from gpucheck import GiB, MiB

HOLD = 2560 * MiB
ASK = 2 * GiB


def init(torch, role):
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    return gc.mem(torch, f"{role}_start", prefix=f"{role}_")


def alloc(torch, n, fill=1):
    """Returns (tensor, None) or (None, 'oom'|error text)."""
    try:
        t = torch.empty(n, dtype=torch.uint8, device="cuda")
        t.fill_(fill)
        torch.cuda.synchronize()
        return t, None
    except torch.cuda.OutOfMemoryError:
        return None, "oom"
    except RuntimeError as e:
        return None, repr(e)


def role_a(torch, d):
    init(torch, "A")
    gc.flag(d, "a_init")
    def wait(name):
        gc.wait_flag(d, name, abort_flags=("b_exit",))

    wait("b_ready")
    hold, err = alloc(torch, HOLD)
    gc.check(hold is not None, f"A: 2.5 GiB allocates ({err or 'ok'})")
    gc.mem(torch, "A_holding", prefix="A_")
    gc.flag(d, "a_held")
    wait("b_oom1")
    del hold
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    gc.mem(torch, "A_freed", prefix="A_")
    gc.flag(d, "a_freed")
    wait("b_ok")
    hold, err = alloc(torch, HOLD)
    gc.check(hold is not None, f"A: 2.5 GiB allocates again ({err or 'ok'})")
    gc.flag(d, "a_held2")
    wait("b_oom2")
    gc.flag(d, "a_exiting")
    gc.done()  # exits while still holding the 2.5 GiB


def role_b(torch, d, limit, a_pid):
    def wait(name):
        gc.wait_flag(d, name, peer=a_pid)

    _, total, _ = init(torch, "B")
    gc.check(total == limit, f"B: mem_get_info total {total} == limit {limit}")
    wait("a_init")
    _, _, used0 = gc.mem(torch, "B_both_contexts", prefix="B_")
    gc.key("tenant_two_contexts_MiB", round(used0 / MiB, 1))
    gc.flag(d, "b_ready")

    wait("a_held")
    free1, _, used1 = gc.mem(torch, "B_sees_A_holding", prefix="B_")
    seen = used1 - used0
    gc.key("B_sees_A_MiB", round(seen / MiB, 1))
    gc.check(HOLD <= seen <= HOLD + 64 * MiB,
             f"B's mem_get_info shows A's 2.5 GiB: tenant usage grew by {seen / MiB:.1f} MiB")
    t, err = alloc(torch, ASK)
    gc.check(err == "oom", f"B: 2 GiB while A holds 2.5 GiB (free {free1 / MiB:.1f} MiB) raises "
             f"OutOfMemoryError ({'allocated' if t is not None else err})")
    del t
    gc.flag(d, "b_oom1")

    wait("a_freed")
    free2, _, used2 = gc.mem(torch, "B_after_A_freed", prefix="B_")
    gc.check(abs(used2 - used0) <= 64 * MiB, f"after A frees, tenant usage {used2 / MiB:.1f} MiB is "
             f"back to {used0 / MiB:.1f} MiB")
    t, err = alloc(torch, ASK)
    gc.check(t is not None, f"B: after A freed, 2 GiB (free {free2 / MiB:.1f} MiB) allocates "
             f"({err or 'ok'})")
    del t
    torch.cuda.empty_cache()
    gc.flag(d, "b_ok")

    wait("a_held2")
    t, err = alloc(torch, ASK)
    gc.check(err == "oom", f"B: 2 GiB while A holds again raises OutOfMemoryError "
             f"({'allocated' if t is not None else err})")
    del t
    gc.flag(d, "b_oom2")

    wait("a_exiting")
    t0 = time.monotonic()
    t, err, latency = None, None, None
    while time.monotonic() - t0 < 30:
        if not gc.pid_alive(a_pid):
            t, err = alloc(torch, ASK)
            if t is not None:
                latency = time.monotonic() - t0
                break
        time.sleep(0.1)
    gc.mem(torch, "B_after_A_exit", prefix="B_")
    gc.num("A_gone_pid_alive", int(gc.pid_alive(a_pid)))
    if latency is not None:
        gc.key("release_after_exit_s", round(latency, 2))
    gc.check(t is not None, f"B: after A exited holding 2.5 GiB, 2 GiB allocates "
             f"({'after %.2f s' % latency if latency is not None else err or 'A never exited'})")
    gc.done()


def role_hold(torch, d):
    init(torch, "H")
    hold, err = alloc(torch, HOLD)
    gc.check(hold is not None, f"holder: 2.5 GiB allocates ({err or 'ok'})")
    gc.flag(d, "h_held")
    time.sleep(90)
    gc.check(False, "holder: was not killed within 90 s")
    gc.done()


def role_kill(torch, d, limit, h_pid):
    _, total, used_start = init(torch, "K")
    gc.check(total == limit, f"killer: mem_get_info total {total} == limit {limit}")
    gc.wait_flag(d, "h_held", peer=h_pid)
    free1, _, _ = gc.mem(torch, "K_sees_holder", prefix="K_")
    t, err = alloc(torch, ASK)
    gc.check(err == "oom", f"killer: 2 GiB while the holder lives (free {free1 / MiB:.1f} MiB) "
             f"raises OutOfMemoryError ({'allocated' if t is not None else err})")
    del t
    os.kill(h_pid, signal.SIGKILL)
    t0 = time.monotonic()
    gone = None
    t, latency = None, None
    while time.monotonic() - t0 < 30:
        if gone is None and not gc.pid_alive(h_pid):
            gone = time.monotonic() - t0
        t, err = alloc(torch, ASK)
        if t is not None:
            latency = time.monotonic() - t0
            break
        time.sleep(0.1)
    gc.mem(torch, "K_after_kill", prefix="K_")
    if gone is not None:
        gc.num("holder_gone_s", round(gone, 3))
    if latency is not None:
        gc.key("release_after_sigkill_s", round(latency, 2))
    gc.check(t is not None, "killer: after SIGKILL of the holder, 2 GiB allocates"
             + (f" after {latency:.2f} s" if latency is not None else " (not within 30 s)"))
    gc.check(latency is not None and latency <= 10.0,
             "the killed process's usage is given back promptly (<= 10 s)")
    gc.done()


def main():
    roles = {"A": 3, "B": 4, "hold": 3, "kill": 4}
    if len(sys.argv) < 2 or roles.get(sys.argv[1]) != len(sys.argv) - 1:
        print("usage: tenant.py A DIR LIMIT | B DIR LIMIT A_PID | hold DIR LIMIT | "
              "kill DIR LIMIT H_PID", file=sys.stderr)
        sys.exit(2)
    role, d, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
    import torch

    if role == "A":
        role_a(torch, d)
    elif role == "B":
        role_b(torch, d, limit, int(sys.argv[4]))
    elif role == "hold":
        role_hold(torch, d)
    else:
        role_kill(torch, d, limit, int(sys.argv[4]))


if __name__ == "__main__":
    main()

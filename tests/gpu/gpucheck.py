"""The output protocol of the GPU checks written in Python, the same as check.h:
"@ok", "@fail", "@skip", "@known", "@info", "@key", "@num" and "@note" lines on
stdout that tests/gpu/report.py reads back, plus small helpers the checks share
(file flags for synchronising processes, mem_get_info with a printout).

A check that only shows that something ran, and what it found, prints "@info"
lines and no "@ok": report.py gives it the verdict INFO, which neither passes
nor fails the suite. "@known" is a measured shortfall that docs/reference.md names: the
check's verdict is KNOWN, not PASS.
"""
import os
import sys
import time

MiB = 1 << 20
GiB = 1 << 30

_passes = 0
_failures = 0


def check(cond, text):
    """Prints "@ok TEXT" or "@fail TEXT"; returns cond."""
    global _passes, _failures
    print(("@ok " if cond else "@fail ") + text, flush=True)
    if cond:
        _passes += 1
    else:
        _failures += 1
    return bool(cond)


def known(text):
    """A measured known shortfall (docs/reference.md names it): "@known TEXT"; never a pass."""
    print(f"@known {text}", flush=True)


def info(text):
    """A fact, not an assertion: "@info TEXT" (a check of only these is informational)."""
    print(f"@info {text}", flush=True)


def key(name, value):
    print(f"@key {name} {_fmt(value)}", flush=True)


def num(name, value):
    print(f"@num {name} {_fmt(value)}", flush=True)


def note(text):
    print(f"@note {text}", flush=True)


def skip(reason):
    """Marks the whole check skipped and exits."""
    print(f"@skip {reason}", flush=True)
    done()


def done():
    print(f"{_passes} passed, {_failures} failed", flush=True)
    sys.stdout.flush()
    sys.exit(1 if _failures else 0)


def _fmt(value):
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


def mem(torch, tag, prefix=""):
    """torch.cuda.mem_get_info() with a printout; returns (free, total, used)."""
    free, total = torch.cuda.mem_get_info()
    used = total - free
    print(f"[{tag}] mem_get_info: total {total / MiB:.1f} MiB, used {used / MiB:.1f} MiB, "
          f"free {free / MiB:.1f} MiB; torch reserved {torch.cuda.memory_reserved() / MiB:.1f} MiB",
          flush=True)
    num(f"{prefix}used_MiB_{tag}", round(used / MiB, 2))
    return free, total, used


def flag(directory, name):
    """Creates the file directory/name (a signal to another process)."""
    path = os.path.join(directory, name)
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(path + ".tmp", path)


def pid_alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return False


def wait_flag(directory, name, timeout=60.0, peer=None, abort_flags=()):
    """Waits for directory/name. Fails the check (and exits) on timeout, when the peer
    pid dies first, or when one of abort_flags appears."""
    path = os.path.join(directory, name)
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        for a in abort_flags:
            if os.path.exists(os.path.join(directory, a)):
                check(False, f"gave up waiting for {name}: {a} appeared (the other process ended)")
                done()
        if peer is not None and not pid_alive(peer):
            if os.path.exists(path):
                break
            check(False, f"gave up waiting for {name}: process {peer} ended first")
            done()
        if time.monotonic() > deadline:
            check(False, f"timed out after {timeout:.0f} s waiting for {name}")
            done()
        time.sleep(0.02)

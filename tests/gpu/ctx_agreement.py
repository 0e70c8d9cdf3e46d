"""Several contexts in one process: does gpuslice account what the device really gave?

  ctx_agreement.py GPUSLICE CTX_STEPS LIMIT_BYTES

Runs tests/gpu/ctx_steps (a primary context, a second and a third from cuCtxCreate,
256 MiB allocated and freed in the third, then the third and the second destroyed) twice,
alone on the GPU: natively, then under `gpuslice run --memory LIMIT`. After each step the
device's free memory is read by a separate process outside the interposer (devmem.py), and
the device's growth since before the program started is the truth.

- Natively: the truth and NVML's figure for the process are printed, and their difference
  (what a context holds that NVML's figure omits) per context: information.
- Under gpuslice: the tenant's accounted use (total - free of cuMemGetInfo in the program)
  must be within TOLERANCE of the truth at every step. Charging the omitted part once per
  process, or per process for every context, misses by a multiple of it with three contexts.
Output follows gpucheck.py.
"""
import subprocess
import sys
import time

import gpucheck as gc
from devmem import DeviceMemory
from gpucheck import MiB

TOLERANCE = 4 * MiB
STEPS = ("primary", "create2", "create3", "alloc", "free", "destroy3", "destroy2")


def run(cmd, dm, tag):
    """[(step, accounted, truth, nvml or None)] for one run of ctx_steps."""
    base_free = dm.read(0)[0]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         bufsize=1)
    rows = []
    try:
        for want in STEPS:
            line = p.stdout.readline().split()
            if line != ["step", want]:
                gc.check(False, f"{tag}: ctx_steps said {' '.join(line) or 'nothing'} "
                                f"where step {want} was due")
                break
            used = None
            for _ in range(2):  # the second reading after the first refreshed the overhead
                time.sleep(0.4)
                p.stdin.write("q\n")
                a = p.stdout.readline().split()
                if len(a) != 3 or a[0] != "used":
                    gc.check(False, f"{tag}: ctx_steps answered {' '.join(a)} to q")
                    return rows
                used = int(a[1])
            dfree, _, nvml, _ = dm.read(p.pid)
            truth = base_free - dfree
            rows.append((want, used, truth, nvml))
            print(f"[{tag} {want}] program's cuMemGetInfo used {used / MiB:.2f} MiB, device "
                  f"grew {truth / MiB:.2f} MiB, NVML for the pid "
                  f"{'-' if nvml is None else f'{nvml / MiB:.2f}'} MiB", flush=True)
            p.stdin.write("next\n")
        p.stdin.close()
        rc = p.wait(timeout=30)
        gc.check(rc == 0, f"{tag}: ctx_steps exits 0 (got {rc})")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return rows


def main():
    if len(sys.argv) != 4:
        print("usage: ctx_agreement.py GPUSLICE CTX_STEPS LIMIT_BYTES", file=sys.stderr)
        sys.exit(2)
    gs, prog, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
    dm = DeviceMemory()
    native = run([prog], dm, "native")
    contexts = {"primary": 1, "create2": 2, "create3": 3}
    for step, _, truth, nvml in native:
        if nvml is not None and step in contexts:
            n = contexts[step]
            hidden = (truth - nvml) / n
            gc.num(f"native_{step}_truth_MiB", round(truth / MiB, 2))
            gc.num(f"native_{step}_nvml_MiB", round(nvml / MiB, 2))
            gc.key(f"hidden_per_ctx_{n}_MiB", round(hidden / MiB, 2))
            gc.info(f"natively with {n} context(s): the device grew {truth / MiB:.2f} MiB, "
                    f"NVML's figure {nvml / MiB:.2f} MiB: {hidden / MiB:.2f} MiB per context "
                    f"in no figure")
    limited = run([gs, "run", "--memory", str(limit), "--", prog], dm, "gpuslice")
    dm.close()
    gc.check(len(limited) == len(STEPS), f"gpuslice: all {len(STEPS)} steps ran "
                                         f"({len(limited)})")
    worst = 0
    for step, used, truth, _ in limited:
        worst = max(worst, abs(used - truth))
        gc.num(f"gpuslice_{step}_diff_MiB", round((used - truth) / MiB, 2))
        gc.check(abs(used - truth) <= TOLERANCE,
                 f"[{step}] accounted {used / MiB:.2f} MiB vs the device's growth "
                 f"{truth / MiB:.2f} MiB: |diff| {abs(used - truth) / MiB:.2f} <= "
                 f"{TOLERANCE / MiB:.0f} MiB")
    gc.key("max_abs_diff_MiB", round(worst / MiB, 2))
    gc.done()


if __name__ == "__main__":
    main()

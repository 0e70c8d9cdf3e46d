"""The device's free memory as the real driver reports it (cuMemGetInfo), read by a separate
process started without the interposer, and NVML's per-process figure beside it.

  DeviceMemory()        starts the measurer (this file run as a script, with LD_PRELOAD and
                        gpuslice's settings removed from its environment); .read(pid) returns
                        (free, total, nvml_used_by_pid or None, why)
  python3 devmem.py     the measurer: retains device 0's primary context once, prints
                        "ready FREE TOTAL", then answers each line "q PID" with
                        "mem FREE TOTAL NVML_USED_OF_PID|- [WHY]"; exits at end of input

The measurer's own context exists before the first reading and does not change, so the
difference between two readings is what everything else on the device took or gave back.
Needs no GPU to import; the measurer needs libcuda.so.1 (the simulated GPU's works too).
"""
import ctypes
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench"))
import gpumeasure as gm  # noqa: E402


class DeviceMemory:
    def __init__(self, timeout=60):
        self.timeout = timeout
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1,
                                     env=gm.scrubbed_env())
        line = self.proc.stdout.readline().split()
        if len(line) != 3 or line[0] != "ready":
            err = self.proc.stderr.read() if self.proc.poll() is not None else ""
            raise RuntimeError(f"the device-memory measurer did not start: {line} "
                               f"{' '.join(err.split())[-300:]}")
        self.first = (int(line[1]), int(line[2]))

    def read(self, pid=0):
        """(free, total, NVML's usedGpuMemory for pid or None, why it is None)."""
        self.proc.stdin.write(f"q {pid}\n")
        self.proc.stdin.flush()
        f = self.proc.stdout.readline().split(None, 4)
        if len(f) < 4 or f[0] != "mem":
            raise RuntimeError(f"the device-memory measurer answered {f!r}")
        used = None if f[3] == "-" else int(f[3])
        return int(f[1]), int(f[2]), used, (f[4].strip() if len(f) > 4 else "")

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


def measurer():
    if not gm.outside_interposer():
        print("error: the measurer runs under the interposer", file=sys.stderr)
        return 1
    cuda = ctypes.CDLL("libcuda.so.1")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    for what, r in (("cuInit", lambda: cuda.cuInit(0)),
                    ("cuDeviceGet", lambda: cuda.cuDeviceGet(ctypes.byref(dev), 0)),
                    ("cuDevicePrimaryCtxRetain",
                     lambda: cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)),
                    ("cuCtxSetCurrent", lambda: cuda.cuCtxSetCurrent(ctx))):
        rc = r()
        if rc != 0:
            print(f"error: {what} returned {rc}", file=sys.stderr)
            return 1
    meminfo = cuda.cuMemGetInfo_v2

    def mem():
        rc = meminfo(ctypes.byref(free), ctypes.byref(total))
        if rc != 0:
            raise RuntimeError(f"cuMemGetInfo_v2 returned {rc}")
        return free.value, total.value
    try:
        nvml, nvml_why = gm.Nvml(0), ""
    except gm.NvmlError as e:
        nvml, nvml_why = None, str(e)
    print("ready %d %d" % mem(), flush=True)
    for line in sys.stdin:
        f = line.split()
        if len(f) != 2 or f[0] != "q":
            continue
        fr, tot = mem()
        used, why = None, nvml_why
        if nvml is not None:
            try:
                procs = nvml.process_memory()
                used = procs.get(int(f[1]))
                if used == (1 << 64) - 1:  # NVML_VALUE_NOT_AVAILABLE_ULL
                    used, why = None, "NVML lists the pid without a figure"
                elif used is None:
                    why = f"NVML lists no pid {f[1]} (its pids: {sorted(procs)[:8]})"
            except gm.NvmlError as e:
                why = str(e)
        print(f"mem {fr} {tot} {'-' if used is None else used} {why}".rstrip(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(measurer())

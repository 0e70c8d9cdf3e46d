"""What NVML reports, through pynvml (ctypes: dlopen + dlsym on libnvidia-ml.so.1).

  limit BYTES    run under gpuslice: nvmlDeviceGetMemoryInfo and _v2 must report BYTES
                 as total
  native BYTES   run without gpuslice: the real total must be larger than BYTES
  proc PID       prints "used BYTES" (NVML's per-process usedGpuMemory of PID) or
                 "absent REASON"; used by nvml_agreement.py from outside the interposer
Output of limit/native follows gpucheck.py.
"""
import ctypes
import sys

import gpucheck as gc
from gpucheck import MiB


def open_device():
    import pynvml

    pynvml.nvmlInit()
    return pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)


def raw_v2(pynvml, handle):
    """nvmlDeviceGetMemoryInfo_v2 called directly, with our own struct: older pynvml
    releases set the version field wrongly, so do not depend on theirs."""

    class MemoryV2(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong),
                    ("reserved", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                    ("used", ctypes.c_ulonglong)]

    m = MemoryV2()
    m.version = ctypes.sizeof(MemoryV2) | (2 << 24)
    fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetMemoryInfo_v2")
    rc = fn(handle, ctypes.byref(m))
    return rc, m


def limit_mode(expected):
    pynvml, h = open_device()
    m = pynvml.nvmlDeviceGetMemoryInfo(h)
    print(f"nvmlDeviceGetMemoryInfo: total {m.total} used {m.used} free {m.free}")
    gc.key("nvml_v1_total_MiB", m.total / MiB)
    gc.num("nvml_v1_used_MiB", round(m.used / MiB, 2))
    gc.num("nvml_v1_free_MiB", round(m.free / MiB, 2))
    gc.check(m.total == expected, f"nvmlDeviceGetMemoryInfo total {m.total} == limit {expected}")
    gc.check(m.free <= m.total and m.used <= m.total,
             f"nvmlDeviceGetMemoryInfo used {m.used} and free {m.free} fit in total")

    if hasattr(pynvml, "nvmlMemory_v2"):
        try:
            m2 = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
            print(f"pynvml nvmlDeviceGetMemoryInfo(version=v2): total {m2.total} used {m2.used} "
                  f"free {m2.free} reserved {m2.reserved}")
            gc.check(m2.total == expected,
                     f"pynvml nvmlDeviceGetMemoryInfo(version=nvmlMemory_v2) total {m2.total} "
                     f"== limit {expected}")
        except TypeError:
            gc.note("this pynvml's nvmlDeviceGetMemoryInfo has no version argument")
        except pynvml.NVMLError as e:
            gc.note(f"pynvml's v2 call failed ({e}); the direct v2 call below decides")
    else:
        gc.note("this pynvml does not expose nvmlMemory_v2")
    rc, r2 = raw_v2(pynvml, h)
    print(f"nvmlDeviceGetMemoryInfo_v2 (direct): rc {rc} total {r2.total} used {r2.used} "
          f"free {r2.free} reserved {r2.reserved}")
    gc.key("nvml_v2_total_MiB", r2.total / MiB)
    gc.check(rc == 0 and r2.total == expected,
             f"nvmlDeviceGetMemoryInfo_v2 returns {rc} and total {r2.total} == limit {expected}")
    gc.done()


def native_mode(bound):
    pynvml, h = open_device()
    m = pynvml.nvmlDeviceGetMemoryInfo(h)
    print(f"native nvmlDeviceGetMemoryInfo: total {m.total} used {m.used} free {m.free}")
    gc.key("nvml_native_total_MiB", m.total / MiB)
    gc.check(m.total > bound, f"without gpuslice NVML reports the real total {m.total / MiB:.0f} MiB "
             f"> {bound / MiB:.0f} MiB")
    gc.done()


def proc_mode(pid):
    try:
        pynvml, h = open_device()
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
    except Exception as e:  # any NVML trouble means "no figure"
        print(f"absent NVML error: {e}")
        return
    for p in procs:
        if p.pid == pid:
            used = p.usedGpuMemory
            print("absent usedGpuMemory not available" if used is None else f"used {used}")
            return
    print(f"absent pid {pid} not among {[p.pid for p in procs]}")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("limit", "native", "proc"):
        print("usage: nvml_view.py limit BYTES | native BYTES | proc PID", file=sys.stderr)
        sys.exit(2)
    arg = int(sys.argv[2])
    {"limit": limit_mode, "native": native_mode, "proc": proc_mode}[sys.argv[1]](arg)


if __name__ == "__main__":
    main()

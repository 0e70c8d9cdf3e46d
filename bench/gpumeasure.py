"""What the benchmarks and GPU checks measure from outside the interposer, shared by
bench/compute_share.py, bench/attach.py, bench/launch_pairs.py and tests/gpu: NVML through
ctypes (no pynvml needed, and the simulated GPU's libnvidia-ml.so.1 works the same way), a
tenant's shared-memory file read directly (its layout from include/gpuslice/tenant_abi.h),
samplers that stamp every reading with time.monotonic(), and the statistics the verdicts
use (percentiles, a bootstrap confidence interval). Importing it needs no GPU.

A process using this must not run under the interposer (LD_PRELOAD): its NVML answers
would then be the interposer's. outside_interposer() says whether that holds.
"""
import bisect
import ctypes
import mmap
import os
import random
import re
import statistics
import struct
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ABI_HEADER = os.path.join(ROOT, "include", "gpuslice", "tenant_abi.h")
MiB = 1 << 20


def outside_interposer():
    """True when this process has no gpuslice interposer loaded."""
    try:
        with open("/proc/self/maps") as f:
            return "libgpuslice" not in f.read()
    except OSError:
        return "libgpuslice" not in os.environ.get("LD_PRELOAD", "")


def scrubbed_env(extra=None):
    """os.environ without the interposer and gpuslice's settings (for a process that must
    see the real driver), plus extra."""
    drop = ("GPUSLICE_", "TENSOR_FUSION_", "CUDA_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_SM_LIMIT")
    keep = ("GPUSLICE_SIM_", "GPUSLICE_RUN_DIR")
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and (not k.startswith(drop) or k.startswith(keep))}
    env.update(extra or {})
    return env


# --- statistics ---------------------------------------------------------------------------

def percentile(values, p):
    """The p-th percentile (0..100) of values, linear between order statistics (numpy's
    default); None for no values."""
    v = sorted(values)
    if not v:
        return None
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def bootstrap_ci(values, stat=statistics.median, resamples=2000, conf=0.95, seed=12345):
    """Percentile bootstrap confidence interval of stat(values): (lo, hi). The seed is
    fixed so that the same data always gives the same interval."""
    v = list(values)
    if not v:
        return None, None
    if len(v) == 1:
        return v[0], v[0]
    rng = random.Random(seed)
    n = len(v)
    reps = sorted(stat([v[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    alpha = (1.0 - conf) / 2.0
    lo = reps[max(0, int(alpha * resamples))]
    hi = reps[min(resamples - 1, int((1.0 - alpha) * resamples) - 1)]
    return lo, hi


def sem(values):
    """Standard error of the mean (0 for fewer than two values)."""
    v = list(values)
    return statistics.stdev(v) / len(v) ** 0.5 if len(v) > 1 else 0.0


class Series:
    """A cumulative quantity over time (e.g. busy nanoseconds): times t[i] (monotonic s),
    values w[i]; rate(a, b) is its slope over [a, b], linear between readings."""

    def __init__(self):
        self.t, self.w = [], []

    def add(self, t, w):
        self.t.append(t)
        self.w.append(w)

    def _snap(self):
        n = min(len(self.t), len(self.w))  # another thread may be between the two appends
        return self.t[:n], self.w[:n]

    def at(self, x, snap=None):
        t, w = snap or self._snap()
        if not t:
            return None
        if x <= t[0]:
            return w[0]
        if x >= t[-1]:
            return w[-1]
        i = bisect.bisect_right(t, x)
        lo, hi = i - 1, i
        if t[hi] <= t[lo]:
            return w[hi]
        return w[lo] + (w[hi] - w[lo]) * (x - t[lo]) / (t[hi] - t[lo])

    def rate(self, a, b):
        """Slope over [a, b]; None unless readings cover [a, b]."""
        snap = self._snap()
        t = snap[0]
        if not t or b <= a or a < t[0] or b > t[-1]:
            return None
        return (self.at(b, snap) - self.at(a, snap)) / (b - a)


# --- NVML through ctypes ---------------------------------------------------------------------

class NvmlError(Exception):
    pass


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class _Util(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class _Value(ctypes.Union):
    _fields_ = [("dVal", ctypes.c_double), ("uiVal", ctypes.c_uint), ("ulVal", ctypes.c_ulong),
                ("ullVal", ctypes.c_ulonglong), ("sllVal", ctypes.c_longlong),
                ("siVal", ctypes.c_int), ("usVal", ctypes.c_ushort)]


class _Sample(ctypes.Structure):
    _fields_ = [("timeStamp", ctypes.c_ulonglong), ("sampleValue", _Value)]


class _ProcUtil(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("timeStamp", ctypes.c_ulonglong),
                ("smUtil", ctypes.c_uint), ("memUtil", ctypes.c_uint),
                ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint)]


class _ProcInfo(ctypes.Structure):  # nvmlProcessInfo_v2_t (the _v3 query's element)
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class Nvml:
    """The few NVML queries the measurements need, on device `index`."""

    SUCCESS, NOT_SUPPORTED, NOT_FOUND, INSUFFICIENT_SIZE = 0, 3, 6, 7
    GPU_UTILIZATION_SAMPLES = 1
    CLOCK_SM = 1
    VALUE_FIELDS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")

    def __init__(self, index=0, lib="libnvidia-ml.so.1"):
        try:
            self.lib = ctypes.CDLL(lib)
        except OSError as e:
            raise NvmlError(f"cannot load {lib}: {e}") from e
        init = self._fn("nvmlInit_v2") or self._fn("nvmlInit")
        if init is None:
            raise NvmlError(f"{lib} has no nvmlInit")
        self._check(init(), "nvmlInit")
        self.h = ctypes.c_void_p()
        get = self._fn("nvmlDeviceGetHandleByIndex_v2") or self._fn("nvmlDeviceGetHandleByIndex")
        self._check(get(ctypes.c_uint(index), ctypes.byref(self.h)), "nvmlDeviceGetHandleByIndex")
        self.index = index

    def _fn(self, name):
        return getattr(self.lib, name, None)

    def _check(self, r, what):
        if r != self.SUCCESS:
            err = self._fn("nvmlErrorString")
            text = ""
            if err is not None:
                err.restype = ctypes.c_char_p
                text = (err(r) or b"").decode(errors="replace")
            raise NvmlError(f"{what}: NVML error {r}{' (' + text + ')' if text else ''}")

    def memory(self):
        """(total, free, used) bytes of the whole device."""
        m = _Memory()
        self._check(self.lib.nvmlDeviceGetMemoryInfo(self.h, ctypes.byref(m)),
                    "nvmlDeviceGetMemoryInfo")
        return m.total, m.free, m.used

    def utilization(self):
        """GPU utilisation % over the driver's last sample period."""
        u = _Util()
        self._check(self.lib.nvmlDeviceGetUtilizationRates(self.h, ctypes.byref(u)),
                    "nvmlDeviceGetUtilizationRates")
        return u.gpu

    def sm_clock(self):
        fn = self._fn("nvmlDeviceGetClockInfo")
        if fn is None:
            return None
        c = ctypes.c_uint()
        return c.value if fn(self.h, ctypes.c_int(self.CLOCK_SM), ctypes.byref(c)) == 0 else None

    def power_w(self):
        fn = self._fn("nvmlDeviceGetPowerUsage")
        if fn is None:
            return None
        p = ctypes.c_uint()
        return p.value / 1000.0 if fn(self.h, ctypes.byref(p)) == 0 else None

    def has_samples(self):
        return self._fn("nvmlDeviceGetSamples") is not None

    def util_samples(self, last_ts):
        """Raw GPU-utilisation samples newer than last_ts: [(timestamp_us, percent)]."""
        fn = self._fn("nvmlDeviceGetSamples")
        if fn is None:
            raise NvmlError("nvmlDeviceGetSamples is not exported")
        vtype, count = ctypes.c_int(), ctypes.c_uint(0)
        ts = ctypes.c_ulonglong(last_ts)
        r = fn(self.h, ctypes.c_int(self.GPU_UTILIZATION_SAMPLES), ts, ctypes.byref(vtype),
               ctypes.byref(count), None)
        if r == self.NOT_FOUND:
            return []
        self._check(r, "nvmlDeviceGetSamples (count)")
        if count.value == 0:
            return []
        buf = (_Sample * count.value)()
        r = fn(self.h, ctypes.c_int(self.GPU_UTILIZATION_SAMPLES), ts, ctypes.byref(vtype),
               ctypes.byref(count), buf)
        if r == self.NOT_FOUND:
            return []
        self._check(r, "nvmlDeviceGetSamples")
        field = self.VALUE_FIELDS[vtype.value] if 0 <= vtype.value < 7 else "uiVal"
        return [(s.timeStamp, float(getattr(s.sampleValue, field)))
                for s in buf[:count.value] if s.timeStamp > last_ts]

    def process_util(self, last_ts):
        """Per-process SM utilisation samples newer than last_ts: [(pid, timestamp_us, %)]."""
        fn = self._fn("nvmlDeviceGetProcessUtilization")
        if fn is None:
            raise NvmlError("nvmlDeviceGetProcessUtilization is not exported")
        count = ctypes.c_uint(0)
        ts = ctypes.c_ulonglong(last_ts)
        r = fn(self.h, None, ctypes.byref(count), ts)
        if r == self.NOT_FOUND or (r == self.SUCCESS and count.value == 0):
            return []
        if r not in (self.SUCCESS, self.INSUFFICIENT_SIZE):
            self._check(r, "nvmlDeviceGetProcessUtilization (count)")
        n = count.value + 8  # room for processes that appear between the two calls
        buf = (_ProcUtil * n)()
        count = ctypes.c_uint(n)
        r = fn(self.h, buf, ctypes.byref(count), ts)
        if r == self.NOT_FOUND:
            return []
        self._check(r, "nvmlDeviceGetProcessUtilization")
        return [(s.pid, s.timeStamp, float(s.smUtil)) for s in buf[:count.value]
                if s.timeStamp > last_ts]

    def process_memory(self):
        """{pid: usedGpuMemory bytes} of the compute processes NVML lists."""
        fn = self._fn("nvmlDeviceGetComputeRunningProcesses_v3")
        if fn is None:
            raise NvmlError("nvmlDeviceGetComputeRunningProcesses_v3 is not exported")
        n = 64
        while True:
            buf = (_ProcInfo * n)()
            count = ctypes.c_uint(n)
            r = fn(self.h, ctypes.byref(count), buf)
            if r == self.INSUFFICIENT_SIZE and n < 65536:
                n = max(2 * n, count.value + 16)
                continue
            self._check(r, "nvmlDeviceGetComputeRunningProcesses_v3")
            return {p.pid: p.usedGpuMemory for p in buf[:count.value]}


class NvmlSampler:
    """Samples device 0 from a thread, outside the interposer: the SM clock and board power
    every `period` s, NVML's raw GPU-utilisation samples (nvmlDeviceGetSamples: each one is
    the share of its own sample period, of about 1/6 s, in which a kernel ran) and the
    per-process SM utilisation samples. Every reading is put on time.monotonic().

    Where nvmlDeviceGetSamples is missing (the simulated GPU), nvmlDeviceGetUtilizationRates
    is polled and each reading taken as the mean over the `polled_period` s before it."""

    def __init__(self, enabled=True, period=0.05, polled_period=1.0, index=0,
                 lib="libnvidia-ml.so.1"):
        self.error, self.nvml = None, None
        self.clock, self.power = [], []          # (t, value)
        self.util = []                            # (t_start, t_end, percent)
        self.proc = {}                            # pid -> [(t_end, percent)]
        self.proc_error = None
        self.method = None
        self.sample_period = None
        self.period, self.polled_period = period, polled_period
        self._stop = threading.Event()
        if not enabled:
            self.error = "disabled"
            return
        if not outside_interposer():
            self.error = "this process runs under the interposer: NVML would be its view"
            return
        try:
            self.nvml = Nvml(index, lib)
        except NvmlError as e:
            self.error = str(e)
            return
        self.method = "samples" if self.nvml.has_samples() else "polled"
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _to_mono(self, ts_us):
        """An NVML CPU timestamp (µs) on time.monotonic(), or None if its clock is unknown."""
        s = ts_us / 1e6
        now_rt, now_mono = time.time(), time.monotonic()
        if abs(s - now_rt) < 120:
            return s - (now_rt - now_mono)
        if abs(s - now_mono) < 120:
            return s
        return None

    def _run(self):
        last_ts, last_proc_ts, last_end = 0, 0, None
        next_util = next_proc = 0.0
        proc_fails = 0
        while not self._stop.is_set():
            t = time.monotonic()
            c, p = self.nvml.sm_clock(), self.nvml.power_w()
            if c is not None:
                self.clock.append((t, float(c)))
            if p is not None:
                self.power.append((t, p))
            if self.method == "polled":
                try:
                    self.util.append((t - self.polled_period, t, float(self.nvml.utilization())))
                except NvmlError as e:
                    self.error = str(e)
            elif t >= next_util:
                next_util = t + 0.1
                try:
                    got = self.nvml.util_samples(last_ts)
                except NvmlError as e:
                    self.error, self.method = str(e), "polled"
                    got = []
                for ts, v in sorted(got):
                    last_ts = max(last_ts, ts)
                    end = self._to_mono(ts)
                    if end is None:
                        self.error = (f"NVML's sample timestamps ({ts} us) are on no clock this "
                                      "process knows: polling instead")
                        self.method = "polled"
                        break
                    # A sample is the share of the period since the one before it.
                    if last_end is not None and end > last_end:
                        self.util.append((last_end, end, v))
                    last_end = end if last_end is None else max(last_end, end)
                if self.sample_period is None and len(self.util) > 3:
                    self.sample_period = statistics.median(e - s for s, e, _ in self.util[-4:])
            if t >= next_proc and proc_fails < 20:
                next_proc = t + 0.1
                try:
                    for pid, ts, v in self.nvml.process_util(last_proc_ts):
                        last_proc_ts = max(last_proc_ts, ts)
                        end = self._to_mono(ts)
                        if end is not None:
                            self.proc.setdefault(pid, []).append((end, v))
                    proc_fails = 0
                except NvmlError as e:
                    self.proc_error = str(e)
                    proc_fails += 1
            self._stop.wait(max(0.0, self.period - (time.monotonic() - t)))

    @staticmethod
    def _mean(points, a, b):
        got = [v for t, v in list(points) if a <= t <= b]
        return round(statistics.fmean(got), 1) if got else None

    def util_mean(self, a, b):
        """NVML's GPU utilisation over [a, b]: {"pct", "coverage", "samples", "method"} or
        None. The samples whose period lies inside [a, b] are averaged, weighted by their
        periods; when they cover less than half the window (samples longer than it), those
        that overlap it are weighted by the overlap instead ("overlap")."""
        if b <= a:
            return None
        util = list(self.util)
        inside = [(s, e, v) for s, e, v in util if s >= a - 1e-6 and e <= b + 1e-6]
        cov = sum(e - s for s, e, _ in inside)
        method = "inside"
        if cov < 0.5 * (b - a):
            inside = [(max(s, a), min(e, b), v) for s, e, v in util if e > a and s < b]
            cov = sum(e - s for s, e, _ in inside)
            method = "overlap"
        if cov <= 0:
            return None
        pct = sum((e - s) * v for s, e, v in inside) / cov
        return {"pct": pct, "coverage": min(1.0, cov / (b - a)), "samples": len(inside),
                "method": f"{self.method}/{method}"}

    def proc_mean(self, pid, a, b):
        """NVML's SM utilisation of process pid over [a, b]: the mean of its samples whose
        period (about 1/6 s, ending at the sample's time) lies inside [a, b], as {"pct",
        "samples"}, or None. NVML lists a process only for periods in which it ran."""
        per = self.sample_period or 1 / 6
        mine = [v for t, v in list(self.proc.get(pid, [])) if a + per <= t <= b]
        if not mine:
            return None
        return {"pct": statistics.fmean(mine), "samples": len(mine)}

    def gpu(self, a, b):
        """{sm_mhz, power_w, util_pct} over [a, b] (each None without samples)."""
        u = self.util_mean(a, b)
        return {"sm_mhz": self._mean(self.clock, a, b), "power_w": self._mean(self.power, a, b),
                "util_pct": None if u is None else round(u["pct"], 2)}

    def stop(self):
        self._stop.set()


# --- a tenant's shared-memory file -------------------------------------------------------------

_CTYPES = {"uint8_t": 1, "int8_t": 1, "char": 1, "uint16_t": 2, "int16_t": 2,
           "uint32_t": 4, "int32_t": 4, "uint64_t": 8, "int64_t": 8}


def _layout(text):
    """The C layout of every struct in tenant_abi.h: {struct: (size, align, {field: (offset,
    size of one element, count, element type)})}, with natural alignment as on x86-64.
    Only what the header uses is understood: fixed-width integers, char, arrays, nested
    structs and an anonymous union; anything else raises ValueError."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    defines = {m.group(1): int(m.group(2)) for m in
               re.finditer(r"#define\s+(\w+)\s+(\d+)u?\b", text)}

    def count(expr):
        if not expr:
            return 1
        e = expr.strip()
        for k, v in defines.items():
            e = re.sub(r"\b" + k + r"\b", str(v), e)
        if not re.fullmatch(r"[\d\s+*()]+", e):
            raise ValueError(f"array size {expr!r}")
        return int(eval(e))  # digits, + * ( ) only

    structs = {}

    def members(body):
        """[(name, size, align, count, type)] of a struct or union body."""
        out = []
        for m in re.finditer(r"union\s*\{([^}]*)\}\s*(\w+)\s*;|([^;{}]+);", body):
            if m.group(1) is not None:
                inner = members(m.group(1))
                size = max(sz * n for _, sz, _, n, _ in inner)
                al = max(a for _, _, a, _, _ in inner)
                out.append((m.group(2), -(-size // al) * al, al, 1, "union"))
                continue
            decl = " ".join(m.group(3).split())
            f = re.fullmatch(r"(struct\s+\w+|\w+)\s+(\w+)\s*(?:\[([^\]]+)\])?", decl)
            if not f:
                raise ValueError(f"cannot read the field {decl!r}")
            typ, name, n = f.group(1), f.group(2), count(f.group(3))
            if typ.startswith("struct "):
                sz, al, _ = structs[typ.split()[1]]
            elif typ in _CTYPES:
                sz = al = _CTYPES[typ]
            else:
                raise ValueError(f"unknown type {typ!r}")
            out.append((name, sz, al, n, typ))
        return out
    for m in re.finditer(r"struct\s+(\w+)\s*\{((?:[^{}]|\{[^{}]*\})*)\}\s*;", text):
        off, al_max, fields = 0, 1, {}
        for name, sz, al, n, typ in members(m.group(2)):
            off = -(-off // al) * al
            fields[name] = (off, sz, n, typ)
            off += sz * n
            al_max = max(al_max, al)
        structs[m.group(1)] = (-(-off // al_max) * al_max, al_max, fields)
    return structs, defines


def _abi():
    """The layout of a tenant file, read from tenant_abi.h: the version, magic, and the
    offsets of the fields read here. The computed layout is checked against every
    _Static_assert of the header (sizes and offsets), so a header this reader misreads is
    refused (ValueError) rather than read at the wrong offsets."""
    with open(ABI_HEADER) as f:
        text = f.read()
    structs, defines = _layout(text)
    m = re.search(r"#define\s+GPUSLICE_TENANT_MAGIC\s+0x([0-9a-fA-F]+)", text)
    if not m or "GPUSLICE_TENANT_ABI_VERSION" not in defines:
        raise ValueError(f"{ABI_HEADER}: no magic or ABI version")
    for sa in re.finditer(r"_Static_assert\(\s*(sizeof|offsetof)\(struct\s+(\w+)\s*"
                          r"(?:,\s*(\w+))?\)\s*==\s*([^,]+),", text):
        kind, st, field, expr = sa.groups()
        want = int(eval(re.sub(r"\s", "", expr))) if re.fullmatch(r"[\d\s+*()]+", expr) else None
        got = structs[st][0] if kind == "sizeof" else structs[st][2][field][0]
        if want is None or got != want:
            raise ValueError(f"{ABI_HEADER}: {kind}(struct {st}{', ' + field if field else ''}) is "
                             f"{want} there but {got} as read by bench/gpumeasure.py")
    dev, proc, ten = (structs[k] for k in ("gpuslice_tenant_device", "gpuslice_tenant_proc",
                                           "gpuslice_tenant"))
    return {"version": defines["GPUSLICE_TENANT_ABI_VERSION"], "magic": int(m.group(1), 16),
            "devices": defines["GPUSLICE_MAX_DEVICES"], "procs": defines["GPUSLICE_MAX_PROCS"],
            "size": ten[0], "dev_off": ten[2]["dev"][0], "dev_size": dev[0],
            "proc_off": ten[2]["proc"][0], "proc_size": proc[0],
            "name": ten[2]["name"][:3:2], "dev_fields": dev[2], "proc_fields": proc[2]}


class TenantFile:
    """A tenant's state file (the path in GPUSLICE_TENANT), mapped read-only, its layout
    read from tenant_abi.h (_abi); a file of another magic or major ABI version, or smaller
    than the layout, is refused (ValueError); a later minor version is read."""

    _FMT = {1: "B", 4: "I", 8: "Q"}

    def __init__(self, path):
        self.path = path
        self.abi = _abi()
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_size < self.abi["size"]:
                raise ValueError(f"{path}: {st.st_size} bytes, the ABI's layout has "
                                 f"{self.abi['size']}")
            self.m = mmap.mmap(f.fileno(), self.abi["size"], prot=mmap.PROT_READ)
        # The common segment header (shm_abi.h): any minor version of the major (the low 16
        # bits) is read, if at least as large as the layout this reader knows.
        magic, version, size = struct.unpack_from("<QII", self.m, 0)
        major = self.abi["version"] & 0xFFFF
        if (magic != self.abi["magic"] or version & 0xFFFF != major or size < self.abi["size"]
                or size > st.st_size):
            self.m.close()
            raise ValueError(f"{path}: magic {hex(magic)}, tenant ABI {version & 0xFFFF}."
                             f"{version >> 16}, {size} bytes; this reader reads "
                             f"{hex(self.abi['magic'])}, tenant ABI {major}.x, at least "
                             f"{self.abi['size']} bytes")

    def close(self):
        self.m.close()

    def _field(self, base, fields, name, index=0):
        off, sz, n, typ = fields[name]
        fmt = ("<" + ("q" if typ == "int64_t" else "i" if typ == "int32_t" else self._FMT[sz]))
        return struct.unpack_from(fmt, self.m, base + off + index * sz)[0]

    def _dev(self, i, name):
        return self._field(self.abi["dev_off"] + i * self.abi["dev_size"],
                           self.abi["dev_fields"], name)

    def name(self):
        off, n = self.abi["name"]
        raw = bytes(self.m[off:off + n])
        return raw.split(b"\0", 1)[0].decode(errors="replace")

    def device(self, i):
        """Device entry i: dict of its integer fields (and uuid), or None when unused."""
        o = self.abi["dev_off"] + i * self.abi["dev_size"]
        uuid = bytes(self.m[o:o + 16])
        if not any(uuid):
            return None
        d = {"entry": i, "uuid": uuid}
        for name, (_, _, n, typ) in self.abi["dev_fields"].items():
            if n == 1 and typ in _CTYPES:
                d[name] = self._dev(i, name)
        return d

    def devices(self):
        return [d for d in (self.device(i) for i in range(self.abi["devices"])) if d]

    def entry_for(self, ordinal=0):
        """The device entry the tenant's processes know as CUDA ordinal `ordinal` (else the
        only one), or None."""
        devs = self.devices()
        for d in devs:
            if d["ordinal"] == ordinal:
                return d["entry"]
        return devs[0]["entry"] if len(devs) == 1 else None

    def busy_ns(self, entry):
        return self._dev(entry, "compute_busy_ns")

    def mem_used(self, entry):
        return self._dev(entry, "mem_used")

    def procs(self, entry=None):
        """[(pid, start_time, mem_used on entry or all entries)] of the occupied slots."""
        out, pf = [], self.abi["proc_fields"]
        for k in range(self.abi["procs"]):
            base = self.abi["proc_off"] + k * self.abi["proc_size"]
            pid = self._field(base, pf, "pid")
            if pid <= 0:
                continue
            start = self._field(base, pf, "start_time")
            if entry is not None:
                used = self._field(base, pf, "mem_used", entry)
            else:
                used = sum(self._field(base, pf, "mem_used", j) for j in range(pf["mem_used"][2]))
            out.append((pid, start, used))
        return out


def find_tenant(name, run_dir=None):
    """The path of the tenant file named `name` in run_dir ($GPUSLICE_RUN_DIR, /dev/shm)."""
    d = run_dir or os.environ.get("GPUSLICE_RUN_DIR") or "/dev/shm"
    try:
        files = sorted(os.listdir(d))
    except OSError:
        return None
    for fn in files:
        if not (fn.startswith("gpuslice-") and fn.endswith(".tenant")):
            continue
        try:
            t = TenantFile(os.path.join(d, fn))
        except (OSError, ValueError):
            continue
        try:
            if t.name() == name:
                return t.path
        finally:
            t.close()
    return None


class BusySampler:
    """Every `period` s, each registered tenant's compute_busy_ns on device ordinal 0, read
    from its file: the device time gpuslice's governor billed it, as a Series (ns)."""

    def __init__(self, period=0.005):
        self.period = period
        self.files, self.series, self.errors = {}, {}, {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def add(self, key, path):
        """Starts sampling the tenant file at path under key; False (reason in errors[key])
        when it cannot be read."""
        try:
            tf = TenantFile(path)
        except (OSError, ValueError) as e:
            self.errors[key] = f"cannot read the tenant file {path}: {e}"
            return False
        with self._lock:
            self.files[key] = [tf, None]
            self.series.setdefault(key, Series())
        return True

    def _run(self):
        while not self._stop.wait(self.period):
            with self._lock:
                items = list(self.files.items())
            for key, slot in items:
                tf, entry = slot
                try:
                    if entry is None:
                        entry = slot[1] = tf.entry_for(0)
                        if entry is None:
                            continue
                    v = tf.busy_ns(entry)
                except (ValueError, OSError):  # closed
                    continue
                s = self.series[key]
                t = time.monotonic()
                if s.w and v < s.w[-1]:
                    continue  # a torn or stale read: busy time only grows
                s.add(t, float(v))

    def pct(self, key, a, b):
        """Busy % of wall time over [a, b] (None without readings around it)."""
        s = self.series.get(key)
        r = None if s is None else s.rate(a, b)
        return None if r is None else 100.0 * r / 1e9

    def stop(self):
        self._stop.set()
        with self._lock:
            for tf, _ in self.files.values():
                tf.close()
            self.files.clear()

"""Tasks side by side in one process, each on its own share of one GPU's SMs (green contexts),
over libgpuslice.so's gpuslice_lanes_run: nVertake's run_green_tasks, with N tasks."""
import ctypes
import importlib
import math
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence, Union

from . import _lib
from .errors import GpusliceError, GreenContextUnavailable, GreenRunError

Task = Union[Callable[..., Any], str]

_local = threading.local()
_patched = False
_patch_lock = threading.Lock()


@dataclass(frozen=True)
class GreenLane:
    """One lane: its index, the share asked for (in percent of the whole), the SMs its
    partition really has (known before its task starts: current_lane() inside it) and where
    they start in the driver's split order."""
    index: int
    requested_share: float
    sm_count: int
    total_sm_count: Optional[int]
    first_sm: int

    @property
    def actual_sm_share(self) -> Optional[float]:
        return self.sm_count / self.total_sm_count if self.total_sm_count else None

    def to_dict(self) -> dict:
        return {"index": self.index, "requested_share": self.requested_share,
                "sm_count": self.sm_count, "total_sm_count": self.total_sm_count,
                "actual_sm_share": self.actual_sm_share, "first_sm": self.first_sm}


@dataclass(frozen=True)
class GreenRunResult:
    """What run_green_tasks did: the shares asked for (normalised to 100), each lane, and each
    task's return value, in lane order."""
    device: int
    compute_capability_major: Optional[int]
    total_sm_count: Optional[int]
    shares: List[float]
    lanes: List[GreenLane]
    results: List[Any] = field(default_factory=list)

    def to_dict(self) -> dict:
        """nVertake's shape (device, compute_capability_major, total_sm_count, lanes, results)
        with the requested shares first, and each lane's result beside it."""
        return {"shares": list(self.shares), "device": self.device,
                "compute_capability_major": self.compute_capability_major,
                "total_sm_count": self.total_sm_count,
                "lanes": [dict(lane.to_dict(), result=r) for lane, r in
                          zip(self.lanes, self.results)],
                "results": list(self.results)}


def current_lane() -> Optional[GreenLane]:
    """The lane the calling thread works in (a task's thread, or a thread it started), or
    None outside run_green_tasks."""
    return getattr(_local, "lane", None)


def resolve(task: Task) -> Callable[..., Any]:
    """A callable, or "module:attr.path" imported. Raises TypeError or ImportError/
    AttributeError naming the task."""
    if callable(task):
        return task
    if not isinstance(task, str) or task.count(":") != 1 or not all(task.split(":")):
        raise TypeError(f"task {task!r}: give a callable or \"MODULE:FUNC\"")
    mod_name, attr = task.split(":")
    try:
        obj = importlib.import_module(mod_name)
    except ImportError as e:
        raise ImportError(f"task {task}: cannot import module {mod_name}: {e}") from e
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AttributeError(f"task {task}: {mod_name} has no {attr}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"task {task}: {attr} is not callable")
    return obj


def _device_facts(device):
    """(total SMs, compute capability major) of CUDA device `device`, or (None, None)."""
    try:
        cu = _lib.cuda()
        dev, v, cc = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        if cu.cuInit(0) != 0 or cu.cuDeviceGet(ctypes.byref(dev), device) != 0:
            return None, None
        sms = v.value if cu.cuDeviceGetAttribute(ctypes.byref(v), 16, dev) == 0 else None
        major = cc.value if cu.cuDeviceGetAttribute(ctypes.byref(cc), 75, dev) == 0 else None
        return sms, major
    except GpusliceError:
        return None, None


def _answers_lane_sms(lib) -> bool:
    """Whether the driver calls of this process's libraries reach `lib`, which answers a lane's
    own SM count on the lane's threads: its cuDeviceGetAttribute is the one the process finds
    by name (preloaded; ctypes' handle of libcuda.so.1 finds it too, through its dlsym)."""
    try:
        ours = ctypes.cast(lib.cuDeviceGetAttribute, ctypes.c_void_p).value
        found = ctypes.cast(ctypes.CDLL("libcuda.so.1").cuDeviceGetAttribute,
                            ctypes.c_void_p).value
    except (AttributeError, OSError):
        return False
    return ours is not None and ours == found


_warned = False


def _warn_not_preloaded(lib):
    global _warned
    if _warned or _answers_lane_sms(lib):
        return
    _warned = True
    warnings.warn("libgpuslice.so is not preloaded in this process: the CUDA libraries (cuBLAS, "
                  "the runtime) are told the whole GPU's SM count on every lane and size their "
                  "grids for it, which cost 4 % of the lanes' throughput on an H100. Run under "
                  "`gpuslice green-run`, or with LD_PRELOAD naming the libgpuslice.so this "
                  "package loads (GPUSLICE_LIB).", RuntimeWarning, stacklevel=3)


def _bind_threads():
    """Threads a task starts work in its lane too: threading.Thread.start, called on a lane's
    thread, makes the new thread make the lane's context current first (the C API binds the
    lane's own thread only)."""
    global _patched
    with _patch_lock:
        if _patched:
            return
        real_start = threading.Thread.start

        def start(self, *a, **k):
            lane, ctx = getattr(_local, "lane", None), getattr(_local, "ctx", None)
            if lane is not None and ctx:
                real_run = self.run

                def run():
                    _lib.cuda().cuCtxSetCurrent(ctypes.c_void_p(ctx))
                    _local.lane, _local.ctx = lane, ctx
                    real_run()

                self.run = run
            return real_start(self, *a, **k)

        threading.Thread.start = start
        _patched = True


def run_green_tasks(tasks: Sequence[Task], *, device: int = 0,
                    shares: Sequence[float] = (25.0, 75.0),
                    task_kwargs: Optional[Sequence[Mapping]] = None) -> GreenRunResult:
    """Runs tasks[i](**task_kwargs[i]) side by side, each on its own thread with a partition
    of `shares[i]` parts of device `device`'s SMs current (threads it starts get it too), all
    released together; waits for them and their GPU work. Shares are weights (normalised to
    100). Returns a GreenRunResult; raises GreenRunError (with every lane's error and the
    result) when a task raised or its GPU work failed, GreenContextUnavailable when the GPU
    cannot be partitioned so, TypeError/ValueError for bad arguments.

    As with nVertake: memory is shared by all lanes, but a tensor must not cross lanes (make,
    use and free it in its lane); the shares are fixed for the run; do not initialise CUDA at
    module scope in a task's module. Measured on the H200: work on the lane's current stream
    and wait for that stream (torch.cuda.current_stream().synchronize()); a device-wide
    torch.cuda.synchronize() waits for every lane and puts them in step, and a
    torch.cuda.Stream() of the task's own lost the split.
    """
    if isinstance(tasks, (str, bytes)) or not isinstance(tasks, Sequence) or not tasks:
        raise TypeError("tasks: give a sequence of callables or \"MODULE:FUNC\" strings")
    n = len(tasks)
    if n > _lib.LANES_MAX:
        raise ValueError(f"tasks: at most {_lib.LANES_MAX}, not {n}")
    if isinstance(device, bool) or not isinstance(device, int) or device < 0:
        raise ValueError(f"device: give a CUDA index (0, 1, ...), not {device!r}")
    try:
        w = [float(s) for s in shares]
    except (TypeError, ValueError):
        raise ValueError(f"shares: give numbers, not {shares!r}") from None
    if len(w) != n:
        raise ValueError(f"shares: {len(w)} of them for {n} tasks: give one per task")
    if not all(math.isfinite(x) and x > 0 for x in w):
        raise ValueError(f"shares: each must be finite and above 0, not {list(shares)}")
    if task_kwargs is None:
        kwargs = [{} for _ in range(n)]
    else:
        kwargs = list(task_kwargs)
        if len(kwargs) != n:
            raise ValueError(f"task_kwargs: {len(kwargs)} of them for {n} tasks")
        for i, k in enumerate(kwargs):
            if not isinstance(k, Mapping):
                raise TypeError(f"task_kwargs[{i}]: give a mapping, not {type(k).__name__}")
    fns = [resolve(t) for t in tasks]
    total = sum(w)
    norm = [100.0 * x / total for x in w]
    lib = _lib.lib()
    _warn_not_preloaded(lib)
    total_sms, major = _device_facts(device)
    _bind_threads()
    results: List[Any] = [None] * n
    errors: List[Optional[BaseException]] = [None] * n

    def body(i, info, _arg):
        li = info.contents
        _local.lane = GreenLane(i, norm[i], li.sm_count, total_sms, li.first_sm)
        _local.ctx = lib.gpuslice_lane_context()
        try:
            results[i] = fns[i](**kwargs[i])
            return 0
        except BaseException as e:  # reported with every lane's, after all have ended
            errors[i] = e
            return 1
        finally:
            _local.lane = _local.ctx = None

    cb = _lib.LANE_FN(body)
    weights = (ctypes.c_double * n)(*w)
    lanes = (_lib.Lane * n)()
    err = ctypes.create_string_buffer(512)
    rc = lib.gpuslice_lanes_run(device, n, weights, cb, None, lanes, err, len(err))
    if rc < 0:
        msg = err.value.decode(errors="replace") or f"error {rc}"
        if rc == -95:  # -ENOTSUP
            raise GreenContextUnavailable(msg)
        if rc == -22:  # -EINVAL
            raise ValueError(msg)
        raise GpusliceError(msg)
    out = GreenRunResult(device, major, total_sms, norm,
                         [GreenLane(i, norm[i], lanes[i].sm_count, total_sms, lanes[i].first_sm)
                          for i in range(n)], results)
    for i in range(n):
        if errors[i] is None and lanes[i].cuda_error:
            errors[i] = GpusliceError(f"the lane's GPU work failed: CUresult {lanes[i].cuda_error}")
    if any(e is not None for e in errors):
        text = "; ".join(f"lane {i}: {type(e).__name__}: {e}" for i, e in enumerate(errors)
                         if e is not None)
        raise GreenRunError("a green task failed: " + text, errors, out) from next(
            e for e in errors if e is not None)
    return out

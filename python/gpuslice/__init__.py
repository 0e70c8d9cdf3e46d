"""gpuslice from Python: nVertake's API on gpuslice's engine, with no compiled extension
(ctypes over libgpuslice.so) and no PyTorch needed to import it.

    run_green_tasks([f, g], device=0, shares=(25, 75))   N tasks on weighted SM partitions
    current_lane()                                       inside a task: its lane's SMs
    run_green_process_scripts(["a.py", "b.py"], shares=(25, 75))   over gpuslice procs
    enable_torch_priority(), @inject_priority(device=0, nice_value=-10)
    info()                                               gpuslice info --json, as objects
    Tenant.create("job", memory="8G"), Tenant.list()     gpusliced's API
"""
from .errors import (DaemonError, GpusliceError, GreenContextUnavailable, GreenRunError,
                     LibraryNotFound)
from .daemon import Tenant, events
from .green import GreenLane, GreenRunResult, current_lane, run_green_tasks
from .info import info
from .priority import enable_torch_priority, inject_priority
from .procs import run_green_process_scripts

__version__ = "0.1.0"
__all__ = ["run_green_tasks", "current_lane", "GreenLane", "GreenRunResult",
           "run_green_process_scripts", "enable_torch_priority", "inject_priority", "info",
           "Tenant", "events", "GpusliceError",
           "GreenRunError", "GreenContextUnavailable", "LibraryNotFound", "DaemonError"]

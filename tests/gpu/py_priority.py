"""The gpuslice Python package's PyTorch priority on a real GPU (run as `python3
py_priority.py ROOT`): enable_torch_priority() makes the current stream one of the device's
highest priority once CUDA initialises (not the default stream), and @inject_priority gives a
function that stream priority and the nice value asked for while it runs, the nice value being
restored after. Output follows gpucheck.py.
"""
import os
import sys

import gpucheck as gc

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import gpuslice  # noqa: E402

try:
    import torch
except ImportError:
    gc.skip("no PyTorch")
gc.check(gpuslice.enable_torch_priority() is True, "enable_torch_priority() with torch: True")
x = torch.ones(4, device="cuda")  # CUDA initialises here
lo, hi = torch.cuda.Stream.priority_range()
top = min(lo, hi)
cur = torch.cuda.current_stream()
gc.num("stream_priority_range_top", top)
gc.check(cur.priority == top and cur != torch.cuda.default_stream(),
         f"the current stream after CUDA initialised: priority {cur.priority} (the top is {top})")
base = os.nice(0)


@gpuslice.inject_priority(device=0, nice_value=base + 3)
def work():
    s = torch.cuda.current_stream()
    y = (torch.ones(1024, 1024, device="cuda") @ torch.ones(1024, 1024, device="cuda")).sum()
    return s.priority, os.nice(0), y.item()


p, n, y = work()
gc.check(p == top and n == base + 3 and y == float(1024 ** 3),
         f"inside inject_priority: stream priority {p}, nice {n}, the matmul's sum right")
gc.check(os.nice(0) == base, f"after it: nice {os.nice(0)} again")
gc.done()

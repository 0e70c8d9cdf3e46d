"""The PyTorch programs tests/gpu/daemon.py runs as a daemon's tenant:
  load STOP_FILE          holds 6 GiB and runs 8192^3 fp16 GEMMs until STOP_FILE exists
  restart READY GO        under a 4 GiB tenant: holds 2 GiB, creates READY, waits for GO (the
                          daemon is killed and restarted meanwhile), then asks for 3 GiB more
                          (must be refused) and 1 GiB (must fit); exits 0 when both held
"""
import os
import sys
import time

import torch

GiB = 1 << 30


def load(stop):
    hold = torch.empty(6 * GiB, dtype=torch.uint8, device="cuda")
    a = torch.randn(8192, 8192, dtype=torch.float16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.float16, device="cuda")
    t0 = time.monotonic()
    while not os.path.exists(stop) and time.monotonic() - t0 < 60:
        for _ in range(4):
            c = a @ b
        torch.cuda.synchronize()
    del hold, c


def restart(ready, go):
    hold = torch.empty(2 * GiB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    open(ready, "w").close()
    t0 = time.monotonic()
    while not os.path.exists(go) and time.monotonic() - t0 < 120:
        time.sleep(0.05)
    ok = True
    try:
        more = torch.empty(3 * GiB, dtype=torch.uint8, device="cuda")
        print("3 GiB more was allowed: the limit did not hold")
        ok = False
        del more
    except torch.cuda.OutOfMemoryError:
        print("3 GiB more: refused beyond the limit")
    torch.cuda.empty_cache()
    try:
        fit = torch.empty(1 * GiB, dtype=torch.uint8, device="cuda")
        print("1 GiB more: allowed within the limit")
        del fit
    except torch.cuda.OutOfMemoryError:
        print("1 GiB more was refused: the limit shrank")
        ok = False
    del hold
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    if sys.argv[1] == "load":
        load(sys.argv[2])
    else:
        restart(sys.argv[2], sys.argv[3])

"""A PyTorch launch-bound loop that answers bench/launch_pairs.py's serve protocol: after
importing torch, making its tensors and warming up, it prints "ready", then answers one
command per line:
  run small N   N eager in-place ops (x.mul_(a) then x.add_(b), alternately) on a 64K-element
                fp32 tensor, then a synchronisation: "sample small US" (wall µs per op)
  run tiny N    the same on a 1K-element tensor
  quit
Each op is one kernel, launched by PyTorch's eager path one by one: the host's pace, not the
GPU's, sets the rate (such a loop holds about a fifth of an H100's time natively), which is
what issue 30 measures the interposer's and the governor's cost on.

usage: bench/torch_small_serve.py serve [WARMUP]     (WARMUP ops per kind, default 5000)
"""
import sys
import time


def main(argv):
    if not argv or argv[0] != "serve":
        print(__doc__, file=sys.stderr)
        return 2
    try:
        warmup = int(argv[1]) if len(argv) > 1 else 5000
    except ValueError:
        print(f"torch_small_serve: WARMUP: \"{argv[1]}\" is not a whole number", file=sys.stderr)
        return 2
    import torch
    dev = torch.device("cuda")
    xs = {"small": torch.randn(65536, device=dev), "tiny": torch.randn(1024, device=dev)}

    def run(kind, n):
        x = xs[kind]
        for _ in range(n // 2):
            x.mul_(0.999).add_(0.001)
        if n % 2:
            x.mul_(0.999)
        torch.cuda.synchronize()

    for k in xs:
        run(k, warmup)
    print("ready", flush=True)
    for line in sys.stdin:
        f = line.split()
        if f == ["quit"]:
            break
        if len(f) != 3 or f[0] != "run" or f[1] not in xs or not f[2].isdigit() or \
                int(f[2]) < 1:
            print(f"error bad command: {line.strip()[:100]} (use: run small|tiny N)",
                  flush=True)
            continue
        n = int(f[2])
        t0 = time.perf_counter()
        run(f[1], n)
        us = (time.perf_counter() - t0) * 1e6 / n
        print(f"sample {f[1]} {us:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

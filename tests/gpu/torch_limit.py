"""PyTorch under a gpuslice memory limit (run it as `gpuslice run --memory 4G -- python3
torch_limit.py MODE LIMIT_BYTES`).

Checks that torch.cuda.mem_get_info() reports the limit as total, that 3 x 1 GiB of
tensors fit, that a further 2 GiB raises torch.cuda.OutOfMemoryError, and that after
del + empty_cache 1 GiB allocates again. MODE:
  plain       just that
  graphs      also captures CUDA graphs (a matmul through cuBLAS and elementwise ops) on
              a side stream before and after the allocations and checks that every replay,
              including after the OOM, computes what eager execution does
  expandable  the same as plain; run.sh sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
              so PyTorch allocates through cuMemCreate/cuMemMap (the VMM path)
  threads     4 Python threads race to allocate 256 MiB tensors until each is refused; the
              total must fit the limit and usage must return afterwards
Output follows gpucheck.py.
"""
import os
import re
import sys
import threading

import gpucheck as gc
from gpucheck import GiB, MiB

MODES = ("plain", "graphs", "expandable", "threads")


def make_graph(torch):
    """Captures relu(x @ w) + 1 into a CUDA graph after warming up on a side stream."""
    x = torch.randn(512, 512, device="cuda")
    w = torch.randn(512, 512, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            y = torch.relu(x @ w) + 1.0
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = torch.relu(x @ w) + 1.0
    torch.cuda.synchronize()
    return g, x, w, y


def graph_replays(torch, graph, when):
    """Replays the graph on a side stream with fresh inputs; compares with eager."""
    g, x, w, y = graph
    side = torch.cuda.Stream()
    worst, ok = 0.0, True
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            g.replay()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        ref = torch.relu(x @ w) + 1.0
        worst = max(worst, (y - ref).abs().max().item())
        ok = ok and torch.allclose(y, ref, rtol=1e-4, atol=1e-3)
    gc.check(ok, f"CUDA graph replays {when} match eager execution (max |diff| {worst:.2e})")
    return ok


def threads_mode(torch, limit, used0):
    n_threads, block = 4, 256 * MiB
    cap = limit // block + 2
    barrier = threading.Barrier(n_threads)
    held = [[] for _ in range(n_threads)]
    ends = [None] * n_threads

    def worker(i):
        torch.cuda.set_device(0)
        barrier.wait()
        try:
            while len(held[i]) < cap:
                t = torch.empty(block, dtype=torch.uint8, device="cuda")
                t.fill_(i + 1)
                held[i].append(t)
            ends[i] = "cap"
        except torch.cuda.OutOfMemoryError:
            ends[i] = "oom"
        except Exception as e:  # reported below as a failure
            ends[i] = repr(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    torch.cuda.synchronize()
    counts = [len(h) for h in held]
    free, total, used = gc.mem(torch, "after_thread_race")
    got = sum(counts) * block
    gc.key("thread_blocks_256MiB", sum(counts))
    print(f"per-thread 256 MiB blocks: {counts}; endings: {ends}")
    gc.check(all(e == "oom" for e in ends),
             f"every thread stopped with torch.cuda.OutOfMemoryError ({ends})")
    gc.check(used0 + got <= limit, f"start usage {used0 / MiB:.1f} MiB + {sum(counts)} x 256 MiB "
             f"= {(used0 + got) / MiB:.1f} MiB <= limit {limit / MiB:.0f} MiB")
    gc.check(free < block, f"the threads filled the limit: free {free / MiB:.1f} MiB < 256 MiB")
    intact = all(int(t.min()) == i + 1 == int(t.max()) for i, h in enumerate(held) for t in h)
    gc.check(intact, "every tensor still holds what its thread wrote")
    held.clear()
    torch.cuda.empty_cache()
    _, _, used_end = gc.mem(torch, "after_threads_freed")
    gc.check(abs(used_end - used0) <= 64 * MiB, f"after freeing, used {used_end / MiB:.1f} MiB is "
             f"back to {used0 / MiB:.1f} MiB")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in MODES:
        print(f"usage: torch_limit.py {'|'.join(MODES)} LIMIT_BYTES", file=sys.stderr)
        sys.exit(2)
    mode, limit = sys.argv[1], int(sys.argv[2])
    import torch

    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, mode {mode}, "
          f"PYTORCH_CUDA_ALLOC_CONF={os.environ.get('PYTORCH_CUDA_ALLOC_CONF', '')}", flush=True)
    if not gc.check(torch.cuda.is_available(), "torch.cuda.is_available()"):
        gc.done()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    free0, total, used0 = gc.mem(torch, "start")
    gc.key("total_bytes", total)
    gc.key("context_MiB", round(used0 / MiB, 1))
    gc.num("totalGlobalMem_MiB", torch.cuda.get_device_properties(0).total_memory / MiB)
    if not gc.check(total == limit, f"mem_get_info total {total} == limit {limit}"):
        gc.done()
    if mode == "threads":
        threads_mode(torch, limit, used0)
        gc.done()

    graphs = mode == "graphs"
    g1 = g2 = None
    if graphs:
        g1 = make_graph(torch)
        graph_replays(torch, g1, "before the allocations")
    _, _, base = gc.mem(torch, "before_alloc")

    tensors, t = [], None
    try:
        for i in range(3):
            t = torch.empty(GiB, dtype=torch.uint8, device="cuda")
            t.fill_(i + 1)
            tensors.append(t)
        torch.cuda.synchronize()
    except torch.cuda.OutOfMemoryError as e:
        print(f"unexpected OOM: {e}")
    free1, _, used1 = gc.mem(torch, "after_3GiB")
    gc.check(len(tensors) == 3, f"3 x 1 GiB tensors allocate under the limit ({len(tensors)} did)")
    delta = used1 - base
    gc.key("alloc_3GiB_accounted_MiB", round(delta / MiB, 1))
    gc.check(3 * GiB <= delta <= 3 * GiB + 128 * MiB,
             f"the 3 GiB are accounted: used grew by {delta / MiB:.1f} MiB")
    if mode == "expandable":
        segs = torch.cuda.memory_snapshot()
        if segs and "is_expandable" in segs[0]:
            n_exp = sum(1 for s in segs if s.get("is_expandable"))
            gc.num("expandable_segments", n_exp)
            gc.check(n_exp > 0, f"PyTorch uses expandable segments (VMM): {n_exp} of {len(segs)}")
        else:
            gc.note("memory_snapshot() does not say whether segments are expandable")
    if graphs:
        graph_replays(torch, g1, "while 3 GiB are held")
        _, _, before_g2 = gc.mem(torch, "before_graph2")
        g2 = make_graph(torch)
        _, _, after_g2 = gc.mem(torch, "after_graph2")
        base += after_g2 - before_g2  # the second graph's memory pool stays allocated
        graph_replays(torch, g2, "of a graph captured while 3 GiB are held")

    free_before, _, _ = gc.mem(torch, "before_2GiB")
    gc.key("free_before_2GiB_MiB", round(free_before / MiB, 1))
    oom, msg, big = False, "", None
    try:
        big = torch.empty(2 * GiB, dtype=torch.uint8, device="cuda")
        big.fill_(9)
        torch.cuda.synchronize()
    except torch.cuda.OutOfMemoryError as e:
        oom, msg = True, str(e)
    except RuntimeError as e:
        msg = f"not an OutOfMemoryError: {e!r}"
    gc.check(oom, f"a further 2 GiB (free was {free_before / MiB:.1f} MiB) raises "
             f"torch.cuda.OutOfMemoryError{'' if oom else ' -- ' + msg[:300]}")
    del big
    if oom:
        print("OOM message: " + msg.splitlines()[0][:400])
        m = re.search(r"total capacity of ([\d.]+) GiB", msg)
        if m:
            gc.num("oom_msg_total_capacity_GiB", float(m.group(1)))
            gc.check(abs(float(m.group(1)) - limit / GiB) < 0.01,
                     f"the OOM message reports the limit as capacity ({m.group(1)} GiB)")
    gc.mem(torch, "after_oom")
    intact = all(int(t.min()) == i + 1 == int(t.max()) for i, t in enumerate(tensors))
    gc.check(intact, "the 3 held tensors are intact after the OOM")
    if graphs:
        graph_replays(torch, g1, "after the OOM")
        graph_replays(torch, g2, "of the second graph after the OOM")

    del tensors, t
    torch.cuda.empty_cache()
    _, _, used2 = gc.mem(torch, "after_free")
    gc.check(abs(used2 - base) <= 64 * MiB, f"after del + empty_cache used {used2 / MiB:.1f} MiB is "
             f"back to {base / MiB:.1f} MiB")
    try:
        again = torch.empty(GiB, dtype=torch.uint8, device="cuda")
        again.fill_(7)
        torch.cuda.synchronize()
        ok = int(again.min()) == 7 == int(again.max())
    except torch.cuda.OutOfMemoryError as e:
        ok = False
        print(f"OOM on re-allocation: {e}")
    gc.check(ok, "after freeing, 1 GiB allocates again")
    gc.mem(torch, "after_realloc")
    if graphs:
        graph_replays(torch, g1, "at the end")
        graph_replays(torch, g2, "of the second graph at the end")
    gc.done()


if __name__ == "__main__":
    main()

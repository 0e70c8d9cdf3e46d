"""How far a stream-ordered pool grows for each allocation on the real driver, beside the
interposer's estimate (src/preload/mem/pools.c, pool_growth: the growth by count rounded to
32 MiB, at least the request rounded to 32 MiB). Run natively, no interposer:
`python3 bench/pool_growth_probe.py`. Each line: the pool's reserved memory before and after
(synchronised), what it grew by, the estimate, and PAST where it grew by more than the estimate
(the interposer then charges the difference at once and refuses the allocation if that crosses
the limit: pool_past_admission). The device's own pool, its release threshold set to keep
everything, so holes persist between allocations. Results: docs/results.md.
"""
import cupy as cp
from cupy.cuda import runtime as rt
MiB = 1 << 20
dev = 0
pool = rt.deviceGetMemPool(dev)
RES = 5  # cudaMemPoolAttrReservedMemCurrent
USED = 7  # cudaMemPoolAttrUsedMemCurrent
s = cp.cuda.Stream(non_blocking=True)
def st():
    s.synchronize()
    return rt.memPoolGetAttribute(pool, RES) // MiB, rt.memPoolGetAttribute(pool, USED) / MiB
def est(reserved, used, b):
    step = 32 * MiB
    ru = lambda x: (x + step - 1) // step * step
    by = 0 if used + b <= reserved else ru(used + b) - reserved
    return max(by, ru(b))
live = {}
def alloc(name, mib):
    r0, u0 = st()
    e = est(r0 * MiB, int(u0 * MiB), int(mib * MiB)) // MiB
    live[name] = rt.mallocAsync(int(mib * MiB), s.ptr)
    r1, u1 = st()
    print(f"alloc {name} {mib} MiB: reserved {r0}->{r1} (grew {r1-r0}, estimate {e}){'  PAST' if r1-r0 > e else ''} used {u1:.1f}")
def free(name):
    rt.freeAsync(live.pop(name), s.ptr); print(f"free {name}: {st()}")
# keep memory in the pool between syncs so holes persist
rt.memPoolSetAttribute(pool, 4, 2**64 - 1)  # cudaMemPoolAttrReleaseThreshold: keep everything
for seq in [
    [("a",20),("b",20),("-a",),("c",30)],
    [("a",60),("b",4),("c",4),("-a",),("d",40)],
    [("a",31),("b",33)],
    [("a",20),("b",20),("c",20),("-a",),("-c",),("d",50)],
    [("a",0.004),("b",1),("c",20),("d",8),("e",4),("f",40),("g",1),("h",100)],
    [("a",30),("b",4),("-a",),("c",36)],
    [("a",2),("b",62),("-a",),("c",3)],
]:
    for op in seq:
        if op[0].startswith("-"): free(op[0][1:])
        else: alloc(*op)
    for n in list(live): free(n)
    rt.memPoolTrimTo(pool, 0); print("trim", st()); print("--")

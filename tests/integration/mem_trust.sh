# Cases for the interposer's memory accounting under pressure from the tenant's own side (issue 28),
# sourced by run.sh with its helpers (expect, ok, bad, stderr_has, …) and variables ($B, $T, $GS,
# $LIB): the tenant's lock held past its bound (a process stopped inside it, the word written into
# the file, a holder of another PID namespace), and stream-ordered allocations of many threads,
# with the device's real use read from outside the process.
MP="$B/tests/mem_probe"
ACCT="$B/tests/acct"
# Contexts with no part hidden from NVML's per-process figures: the device's use is then exactly
# what the tenant's processes hold, and the tenant's total must equal it.
export GPUSLICE_SIM_CONTEXT_HIDDEN=0
# The layout, from the ABI header itself: LOCK_OFF DEV_USED_OFF REFUSED_OFF (device entry 0's),
# DEV_OFF DEV_SIZE NDEVS (the device table).
printf '#include <stdio.h>\n#include "gpuslice/tenant_abi.h"\nint main(void) { printf("%%zu %%zu %%zu %%zu %%zu %%d", offsetof(struct gpuslice_tenant, lock), offsetof(struct gpuslice_tenant, dev) + offsetof(struct gpuslice_tenant_device, mem_used), offsetof(struct gpuslice_tenant, mem_refused), offsetof(struct gpuslice_tenant, dev), sizeof(struct gpuslice_tenant_device), GPUSLICE_MAX_DEVICES); return 0; }\n' >"$T/abi.c"
cc -I"$SRC/include" -o "$T/abi" "$T/abi.c" || { echo "cannot build the ABI probe"; exit 2; }
read -r LOCK_OFF DEV_USED_OFF REFUSED_OFF DEV_OFF DEV_SIZE NDEVS <<EOF_ABI
$("$T/abi")
EOF_ABI
MiB=1048576
# truth: the device's use, read by a process without the interposer (the simulator's NVML).
truth() { env -u LD_PRELOAD -u GPUSLICE_TENANT "$ACCT" --device-used; }
# word FILE OFFSET: the 64-bit word at OFFSET of a tenant file.
word() { python3 -c 'import struct, sys; f = open(sys.argv[1], "rb"); f.seek(int(sys.argv[2])); print(struct.unpack("<Q", f.read(8))[0])' "$1" "$2"; }
# poke FILE OFFSET LOW HIGH: writes two 32-bit words into a tenant file, as its owner can.
poke() { python3 -c 'import struct, sys; f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); f.write(struct.pack("<II", int(sys.argv[3]), int(sys.argv[4])))' "$@"; }
# wait_mark FILE [TENTHS]: until FILE exists (TENTHS of a second at most, 100 by default).
wait_mark() { for i in $(seq "${2:-100}"); do [ -e "$1" ] && return 0; sleep 0.1; done; return 1; }
# stopped PID: until the process is stopped (5 s at most).
stopped() { for i in $(seq 100); do [ "$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null)" = T ] && return 0; sleep 0.05; done; return 1; }
# settled WHAT: the tenant's total (file $f) comes to equal the device's use within 3 s.
settled() {
    local i u d
    for i in $(seq 30); do
        u=$(word "$f" "$DEV_USED_OFF"); d=$(truth)
        [ "$u" = "$d" ] && { ok "$1: the tenant counts $((u / MiB)) MiB, what the device holds"; return; }
        sleep 0.1
    done
    bad "$1: the tenant counts $u, the device holds $d"
}
PIDNS=$(stat -L -c %i /proc/self/ns/pid)

case $CASE in
mem_lock)
    # Issue 28, item 4: a process stopped inside the tenant's lock made the next process's
    # allocations pass uncharged after the 2 s wait (4 x 512 MiB under 1 GiB). Every allocation
    # and context that cannot take the lock is refused, counted and said once; none passes.
    "$GS" run -q --name lk --memory 1G -- "$MP" alloc:128 mark:"$T/h1" wait:"$T/go1" lockstop \
        mark:"$T/h2" wait:"$T/end" >"$T/holder.out" 2>"$T/holder.err" &
    BG=$!
    wait_mark "$T/h1" || { bad "the holder did not start"; cat "$T/holder.out" "$T/holder.err"; }
    f=$(ls "$GPUSLICE_RUN_DIR"/gpuslice-*.tenant)
    # Four processes of the tenant, each with its context, ready to allocate 512 MiB twice.
    AL=
    for i in 1 2 3 4; do
        GPUSLICE_TENANT=$f preload "$MP" mark:"$T/a$i" wait:"$T/go2" alloc:512 mark:"$T/b$i" \
            wait:"$T/go3" alloc:512 mark:"$T/c$i" wait:"$T/end1" >"$T/p$i.out" 2>"$T/p$i.err" &
        AL="$AL $!"
    done
    BG="$BG $AL"
    for i in 1 2 3 4; do wait_mark "$T/a$i" || bad "allocator $i did not start"; done
    held=$(truth)
    touch "$T/go1"
    for i in $(seq 100); do grep -q "^lockstop [0-9]" "$T/holder.out" && break; sleep 0.05; done
    hp=$(awk '/^lockstop [0-9]/ { print $2 }' "$T/holder.out")
    if [ -n "$hp" ] && stopped "$hp"; then ok "a process of the tenant stopped inside its lock ($hp)"; else bad "the holder did not stop in the lock"; cat "$T/holder.out"; fi
    touch "$T/go2"
    for i in 1 2 3 4; do wait_mark "$T/b$i" 100 || bad "allocator $i did not answer within 10 s"; done
    n=$(cat "$T"/p[1-4].out | grep -c "^alloc 512 CUDA_ERROR_OUT_OF_MEMORY")
    if [ "$n" = 4 ]; then ok "4 x 512 MiB while the lock is held: all refused"; else bad "4 x 512 MiB while the lock is held: $n refused"; cat "$T"/p[1-4].out; fi
    now=$(truth)
    if [ "$now" = "$held" ]; then ok "nothing was allocated meanwhile: the device holds $((now / MiB)) MiB"; else bad "the device went from $held to $now bytes while the lock was held"; fi
    for i in 1 2 3 4; do
        n=$(grep -c "accounting lock was held for more than 2 s by thread $hp " "$T/p$i.err")
        [ "$n" = 1 ] && ok "allocator $i said once that thread $hp held the lock" || { bad "allocator $i said $n times who held the lock"; cat "$T/p$i.err"; }
    done
    refused=$(word "$f" "$REFUSED_OFF")
    if [ "$refused" -ge 4 ]; then ok "the refusals are counted ($refused)"; else bad "refusals counted: $refused"; fi
    # The audit's case: four processes that join meanwhile and ask 512 MiB each (they passed
    # uncharged). Each gets no context: its memory could not be counted.
    JO=
    for i in 1 2 3 4; do
        GPUSLICE_TENANT=$f preload "$MP" alloc:512 mark:"$T/j$i" wait:"$T/jend" >"$T/j$i.out" 2>"$T/j$i.err" &
        JO="$JO $!"
    done
    for i in $(seq 100); do
        n=0; for j in $JO; do kill -0 "$j" 2>/dev/null && n=$((n + 1)); done
        m=$(ls "$T"/j[1-4] 2>/dev/null | wc -l)
        [ $((n - m)) -le 0 ] && break; sleep 0.1
    done
    now=$(truth)
    n=$(cat "$T"/j[1-4].out | grep -c "^alloc 512 ok")
    if [ "$n" = 0 ]; then ok "4 processes joining while the lock is held: none allocates"; else bad "4 processes joining while the lock is held: $n x 512 MiB admitted uncharged (the device holds $((now / MiB)) MiB under a 1 GiB limit)"; fi
    [ "$now" = "$held" ] && ok "and the device holds what it held" || bad "the joining processes took the device from $held to $now"
    n=$(cat "$T"/j[1-4].err | grep -c "mem_probe: CUDA did not start")
    [ "$n" = 4 ] && ok "each was refused its context" || { bad "$n of 4 refused their context"; cat "$T"/j[1-4].err; }
    n=$(cat "$T"/j[1-4].err | grep -c "accounting lock was held for more than 2 s by thread $hp ")
    [ "$n" = 4 ] && ok "each said who held the lock" || bad "$n of 4 said who held the lock"
    touch "$T/jend"; wait $JO
    # Continued, the holder lets the lock go: exactly what fits is admitted (5 contexts of 64 MiB
    # and 128 MiB leave 576: one 512), and the tenant counts what the device holds.
    kill -CONT "$hp"
    wait_mark "$T/h2" || bad "the holder did not let the lock go"
    touch "$T/go3"
    for i in 1 2 3 4; do wait_mark "$T/c$i" 100 || bad "allocator $i did not answer again"; done
    n=$(cat "$T"/p[1-4].out | grep -c "^alloc 512 ok")
    if [ "$n" = 1 ]; then ok "after the holder went on, one 512 MiB of the four fits and is admitted"; else bad "after the holder went on, $n of 4 x 512 MiB admitted"; cat "$T"/p[1-4].out; fi
    now=$(truth)
    [ "$now" = $((held + 512 * MiB)) ] && ok "the device holds the 512 MiB more" || bad "the device holds $now, want $((held + 512 * MiB))"
    settled "after SIGCONT"
    touch "$T/end1"; wait $AL
    # A holder killed inside the lock (SIGKILL of the stopped process): the next process takes
    # the lock over at once and the totals are rebuilt; once the dead process's slot is reaped,
    # the tenant counts exactly what the device holds.
    GPUSLICE_TENANT=$f preload "$MP" alloc:64 lockstop >"$T/k.out" 2>&1 &
    kj=$!
    for i in $(seq 100); do grep -q "^lockstop [0-9]" "$T/k.out" && break; sleep 0.05; done
    kp=$(awk '/^lockstop [0-9]/ { print $2 }' "$T/k.out")
    [ -n "$kp" ] && stopped "$kp" || { bad "the second holder did not stop in the lock"; cat "$T/k.out"; }
    kill -KILL "$kp"; wait "$kj" 2>/dev/null
    t0=$(date +%s%N)
    GPUSLICE_TENANT=$f expect 0 "a process after a holder killed inside the lock" -- preload "$MP" alloc:32
    grep -q "^alloc 32 ok" "$T/out" && ok "its allocation is admitted" || { bad "after the killed holder"; cat "$T/out" "$T/err"; }
    ms=$((($(date +%s%N) - t0) / 1000000))
    [ "$ms" -lt 1500 ] && ok "the dead holder was replaced at once ($ms ms)" || bad "the dead holder was waited for ($ms ms)"
    settled "after SIGKILL of a holder"
    # The lock word written into the file by hand, naming a live thread (what the tenant's owner
    # can do to her own file): a process's allocations are refused until it is cleared, then
    # admitted. A context it makes meanwhile (the driver's memory, which cannot be refused after
    # the fact) stays owed to the tenant, and its next allocation waits for it to be charged.
    GPUSLICE_TENANT=$f preload "$MP" mark:"$T/w0" wait:"$T/w1" ctx alloc:32 mark:"$T/w2" wait:"$T/w3" \
        alloc:32 mark:"$T/w4" wait:"$T/w5" alloc:32 mark:"$T/w6" wait:"$T/end" >"$T/w.out" 2>"$T/w.err" &
    BG="$BG $!"
    wait_mark "$T/w0" || bad "the process did not start"
    sleep 60 & sl=$!
    poke "$f" "$LOCK_OFF" "$sl" 0
    touch "$T/w1"; wait_mark "$T/w2" 100
    sed -n 1p "$T/w.out" | grep -q "^ctx ok" && ok "a context made under it is made (the driver's)" || { bad "no context"; cat "$T/w.out" "$T/w.err"; }
    sed -n 2p "$T/w.out" | grep -q "^alloc 32 CUDA_ERROR_OUT_OF_MEMORY" && ok "an allocation under a lock word written by hand is refused" || { bad "under a written lock word"; cat "$T/w.out" "$T/w.err"; }
    grep -q "held for more than 2 s by thread $sl " "$T/w.err" && ok "naming its thread" || { bad "the message does not name $sl"; cat "$T/w.err"; }
    # ... and naming a thread of another PID namespace, whose TID means nothing here: however
    # dead that TID looks from here, it is never taken over (two holders would change the totals
    # at once); refused.
    kill "$sl"; wait "$sl" 2>/dev/null
    poke "$f" "$LOCK_OFF" "$sl" $((PIDNS + 1))
    touch "$T/w3"; wait_mark "$T/w4" 100
    sed -n 3p "$T/w.out" | grep -q "^alloc 32 CUDA_ERROR_OUT_OF_MEMORY" && ok "an allocation under a dead-looking holder of another PID namespace is refused" || { bad "under a foreign holder"; cat "$T/w.out" "$T/w.err"; }
    poke "$f" "$LOCK_OFF" 0 0
    touch "$T/w5"; wait_mark "$T/w6" 100
    sed -n 4p "$T/w.out" | grep -q "^alloc 32 ok" && ok "once the word is cleared, an allocation is admitted" || { bad "after clearing"; cat "$T/w.out" "$T/w.err"; }
    settled "after the written words (the context made under them charged)"
    # A word of this namespace naming a thread that is gone: taken over at once.
    poke "$f" "$LOCK_OFF" "$sl" "$PIDNS"
    t0=$(date +%s%N)
    GPUSLICE_TENANT=$f expect 0 "a process under a dead holder of its own namespace" -- preload "$MP" alloc:32
    grep -q "^alloc 32 ok" "$T/out" && ok "is admitted" || { bad "under a dead holder"; cat "$T/out" "$T/err"; }
    ms=$((($(date +%s%N) - t0) / 1000000))
    [ "$ms" -lt 1500 ] && ok "the dead holder was replaced at once ($ms ms)" || bad "the dead holder was waited for ($ms ms)"
    settled "after the dead holder's takeover"
    # Any other failure to count the device fails closed too: a device table filled (by hand)
    # with other GPUs leaves no entry for this one, and a process joining gets no context there
    # (it ran without a limit).
    python3 - "$f" "$DEV_OFF" "$DEV_SIZE" "$NDEVS" <<'PY'
import sys
path, off, size, n = sys.argv[1], *map(int, sys.argv[2:])
with open(path, "r+b") as f:
    for i in range(n):
        f.seek(off + i * size)
        f.write(bytes([0xee, i + 1]) + bytes(14))
PY
    GPUSLICE_TENANT=$f expect 1 "with no room in the device table, a joining process gets no context" -- \
        preload "$MP" alloc:2048
    stderr_has "device table has no room"
    touch "$T/end"; wait $BG; BG= ;;
mem_pools)
    # Issue 28, item 20: 32 threads of stream-ordered allocations on their per-thread streams,
    # from three pools, under 1 GiB: the device's use, sampled from outside the process, never
    # passes the limit (acct.c; the pools fragment as the H200's did, tests/sim/README.md).
    for run in 1 2 3; do
        expect 0 "32 threads, per-thread streams, 3 pools: real use never over 1 GiB (run $run)" -- \
            "$GS" run -q --memory 1G -- "$ACCT" pool_threads_ptsz
        grep "held at most" "$T/out"
    done
    # A pool's release at a synchronisation the interposer does not see, then a re-read of the
    # driver's overhead before the pool's: the drop was given back twice.
    expect 0 "a pool's unseen release is not given back twice" -- \
        "$GS" run -q --memory 1G -- "$ACCT" pool_release_unseen ;;
mem_lock_compute)
    # A launch that cannot resolve its GPU's tenant entry because a process of the tenant is
    # stopped inside the tenant's lock waits for the lock, as an allocation is refused: it never
    # runs ungoverned. The launcher's GPU entry is not resolved before its first launch: it makes
    # no primary context, only a green context (which only the driver sees) of 8 SMs. Each try
    # waits out the lock's 2 s bound: a launch let through after one try starts 2 s in.
    LP="$B/tests/life_probe"
    "$GS" run -q --name lkc --compute 30 -- "$MP" lockstop mark:"$T/h2" wait:"$T/end" >"$T/holder.out" 2>"$T/holder.err" &
    BG=$!
    for i in $(seq 100); do grep -q "^lockstop [0-9]" "$T/holder.out" && break; sleep 0.05; done
    hp=$(awk '/^lockstop [0-9]/ { print $2 }' "$T/holder.out")
    if [ -n "$hp" ] && stopped "$hp"; then ok "a process of the tenant stopped inside its lock ($hp)"; else bad "the holder did not stop in the lock"; cat "$T/holder.out" "$T/holder.err"; fi
    f=$(ls "$GPUSLICE_RUN_DIR"/gpuslice-*.tenant)
    GPUSLICE_TENANT=$f preload "$LP" green 500 1 >"$T/g.out" 2>"$T/g.err" &
    gp=$!; BG="$BG $gp"
    for i in $(seq 100); do grep -q "^green ready" "$T/g.out" && break; sleep 0.1; done
    grep -q "^green ready" "$T/g.out" && ok "the launcher has its green context under the held lock" || { bad "the launcher did not start"; cat "$T/g.out" "$T/g.err"; }
    sleep 4.5
    if grep -q "^green launches" "$T/g.out"; then bad "its launches ran while the lock was held: $(cat "$T/g.out")"; else ok "4.5 s later it has launched nothing: its first launch waits"; fi
    kill -CONT "$hp"
    wait_mark "$T/h2" || bad "the holder did not let the lock go"
    wait "$gp"
    python3 - "$T/g.out" <<'PY' && ok "its first launch ran after the lock was let go, and its load under the 30 % ceiling: $(grep '^green launches' "$T/g.out")" || { bad "the launcher after the lock"; cat "$T/g.out" "$T/g.err"; }
import sys
l = [x.split() for x in open(sys.argv[1]) if x.startswith("green launches")]
assert len(l) == 1, l
n, first = int(l[0][2]), float(l[0][4])
# Ungoverned, 1 s of 500 us kernels on 8 of 132 SMs (8.25 ms each) is 121 launches; 30 % is 36.
assert first >= 4000 and n <= 60, l
PY
    touch "$T/end"; wait $BG; BG= ;;
mem_lock_ns)
    # A holder in another PID namespace is alive there whatever kill(2) says here. Before issue
    # 28 a process in a container's namespace (a pod's) took a host process's live holder for
    # dead (ESRCH) and changed the totals beside it: here root's gpuslice set, run in a new PID
    # namespace, must wait for the stopped holder and fail, naming it, not take the lock.
    if ! unshare -p -f --mount-proc true 2>/dev/null; then echo "SKIP: no PID namespaces here (root and unshare -p needed)"; exit 77; fi
    "$GS" run -q --name lkns --memory 1G -- "$MP" lockstop mark:"$T/h2" wait:"$T/end" >"$T/holder.out" 2>"$T/holder.err" &
    BG=$!
    for i in $(seq 100); do grep -q "^lockstop [0-9]" "$T/holder.out" && break; sleep 0.05; done
    hp=$(awk '/^lockstop [0-9]/ { print $2 }' "$T/holder.out")
    stopped "$hp" || { bad "the holder did not stop in the lock"; cat "$T/holder.out" "$T/holder.err"; }
    expect 1 "set from another PID namespace while a host process holds the lock" -- \
        unshare -p -f --mount-proc "$GS" set lkns --memory 2G
    stderr_has "thread $hp of another PID namespace has held it"
    kill -CONT "$hp"
    wait_mark "$T/h2" || bad "the holder did not let the lock go"
    expect 0 "once it is let go, set from the other namespace works" -- \
        unshare -p -f --mount-proc "$GS" set -q lkns --memory 2G
    touch "$T/end"; wait $BG; BG= ;;
esac

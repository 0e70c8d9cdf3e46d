# Priority classes and weights on the simulated GPU (sourced by run.sh: compute_priority,
# compute_weights). compute_load prints its share of wall time in whole-device kernel time
# ("share"), latency_probe the latency of requests of 5 x 40 us kernels every 2 ms.
LPR="$B/tests/latency_probe"

# shares_in FILE LO HI WHAT: compute_load's share in FILE lies in [LO, HI].
shares_in() {
    local v lo
    lo=$(loose "$2")
    v=$(awk '/^share/ {print $2}' "$1")
    if [ -n "$v" ] && awk -v v="$v" -v lo="$lo" -v hi="$3" 'BEGIN { exit !(v >= lo && v <= hi) }'; then
        ok "$4: share $v in [$lo, $3]"
    else
        bad "$4: share ${v:-none}, want [$lo, $3]"; cat "$1" "$1.err" 2>/dev/null
    fi
}
# The probe's 90th percentile: its 99th is the host's (a latency job alone on this 2-CPU VM
# reads 330 us one run and 1572 us the next: a descheduled thread, not the GPU).
p99() { awk '/^p50_us/ {print $10}' "$1"; }
# The probe's median: where a host's stalls move the p90 (two CPU hogs on this VM: the latency
# job alone at p90 1990 us, its requests every 2 ms), the median still tells a request that
# waits on a 2 ms background kernel (2150 us) from one that does not (470 us).
p50() { awk '/^p50_us/ {print $2}' "$1"; }
# p99_under FILE MAX WHAT: the probe's p90 in FILE is at most MAX us.
p99_under() {
    local v
    v=$(p99 "$1")
    if [ -n "$v" ] && [ "$v" -le "$2" ]; then ok "$3: p90 $v us <= $2"; else bad "$3: p90 ${v:-none} us, want <= $2"; cat "$1" "$1.err" 2>/dev/null; fi
}

# split_13 RUN: weights 1:3, both tenants saturating, into $T/w1 and $T/w3; RUN W FILE runs
# compute_load as the tenant of weight W. Again once when the first misses 25/75 +-3.
split_13() {
    local a b attempt
    for attempt in 1 2; do
        "$1" 1 "$T/w1" &
        pa=$!
        "$1" 3 "$T/w3"
        wait $pa
        a=$(awk '/^share/ {print $2}' "$T/w1"); b=$(awk '/^share/ {print $2}' "$T/w3")
        awk -v a="$a" -v b="$b" 'BEGIN { exit !(a >= 0.22 && a <= 0.28 && b >= 0.72 && b <= 0.78) }' && return 0
        echo "attempt $attempt: $a $b"
    done
}
# latency_try MAX BGFILE LATFILE BG LAT [STAT]: BG BGFILE runs a background, and 0.3 s on LAT
# LATFILE the latency probe beside it. Again once when the probe's STAT (p99: its p90, the
# default; or p50) is over MAX us: on a loaded
# 2-CPU VM a governor's thread can be off the CPU for milliseconds (one CI run: alone p90
# 690 us, beside the background 6.6 ms); code that does not yield reads ~20 ms both times.
latency_try() {
    local v attempt
    for attempt in 1 2; do
        "$4" "$2" &
        pa=$!
        sleep 0.3
        "$5" "$3"
        wait $pa
        v=$("${6:-p99}" "$3")
        [ -n "$v" ] && [ "$v" -le "$1" ] && return 0
        echo "attempt $attempt: ${6:-p99} ${v:-none} us"
    done
}

case "$CASE" in
compute_weights)
    # Bad values are refused, naming the option and the accepted forms; nothing runs.
    for w in 0 101 1.5 -1 '' x; do
        expect 2 "run --weight '$w'" -- "$GS" run --weight "$w" -- true
        stderr_has "is not a weight (use an integer from 1 to 100)"
    done
    expect 2 "set --weight 0" -- "$GS" set sometenant --weight 0
    GPUSLICE_WEIGHT=7x expect 2 "GPUSLICE_WEIGHT=7x in run's environment" -- "$GS" run -- true
    stderr_has "GPUSLICE_WEIGHT"
    expect 1 "GPUSLICE_WEIGHT=0 in a process: CUDA fails" -- preload env GPUSLICE_WEIGHT=0 "$CL" stream 0.2 500
    stderr_has "GPUSLICE_WEIGHT"
    for y in 1 1025 x 8x -8 ''; do
        GPUSLICE_YIELD_SMS=$y expect 2 "GPUSLICE_YIELD_SMS='$y' in run's environment" -- "$GS" run -- true
        stderr_has "GPUSLICE_YIELD_SMS: \"$y\" is not a count of SMs (use an integer from 2 to 1024"
    done
    expect 1 "GPUSLICE_YIELD_SMS=x in a process: CUDA fails" -- preload env GPUSLICE_YIELD_SMS=x "$CL" stream 0.2 500
    stderr_has "GPUSLICE_YIELD_SMS"
    # Weights 1:3, both saturating: a quarter and three quarters (turns of 10 and 30 ms).
    by_weight() { "$GS" run -q --weight "$1" -- "$CL" stream 3 1000 >"$2" 2>"$2.err"; }
    split_13 by_weight
    shares_in "$T/w1" 0.22 0.28 "weight 1 of 1:3"
    shares_in "$T/w3" 0.72 0.78 "weight 3 of 1:3"
    # Three tenants 1:1:2: 25/25/50.
    for attempt in 1 2; do
        "$GS" run -q --weight 1 -- "$CL" stream 3 1000 >"$T/x1" 2>"$T/x1.err" &
        pa=$!
        "$GS" run -q --weight 1 -- "$CL" stream 3 1000 >"$T/x2" 2>"$T/x2.err" &
        pb=$!
        "$GS" run -q --weight 2 -- "$CL" stream 3 1000 >"$T/x3" 2>"$T/x3.err"
        wait $pa $pb
        a=$(awk '/^share/ {print $2}' "$T/x1"); b=$(awk '/^share/ {print $2}' "$T/x2"); c=$(awk '/^share/ {print $2}' "$T/x3")
        awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN { exit !(a >= 0.21 && a <= 0.29 && b >= 0.21 && b <= 0.29 && c >= 0.44 && c <= 0.56) }' && break
        echo "attempt $attempt: $a $b $c"
    done
    shares_in "$T/x1" 0.21 0.29 "first weight 1 of 1:1:2"
    shares_in "$T/x2" 0.21 0.29 "second weight 1 of 1:1:2"
    shares_in "$T/x3" 0.44 0.56 "weight 2 of 1:1:2"
    # 1:8: the weight-8 tenant's turn (80 ms) is within the other's patience (it waits longer
    # than the holder's turn before it runs beside it): 11/89. (1:20 reads 9/85 here: weights
    # much above 8 do not hold to a few points.)
    "$GS" run -q --weight 1 -- "$CL" stream 3 1000 >"$T/e1" 2>"$T/e1.err" &
    pa=$!
    "$GS" run -q --weight 8 -- "$CL" stream 3 1000 >"$T/e8" 2>"$T/e8.err"
    wait $pa
    shares_in "$T/e1" 0.07 0.16 "weight 1 of 1:8"
    shares_in "$T/e8" 0.80 0.92 "weight 8 of 1:8"
    # 1:20: the other waits out the holder's whole turn of 200 ms (its patience is the turn it
    # reads on the board, plus the queue and 50 ms) and never runs beside it (with a patience
    # of 100 ms it ran beside the holder for half of each turn, hundreds of launches).
    GPUSLICE_DEBUG=1 "$GS" run -q --weight 1 -- "$CL" stream 2 1000 >"$T/t1" 2>"$T/t1.err" &
    pa=$!
    "$GS" run -q --weight 20 -- "$CL" stream 2 1000 >"$T/t20" 2>"$T/t20.err"
    wait $pa
    beside=$(grep -o "[0-9]* ran beside a holder" "$T/t1.err" | awk '{print $1}')
    [ -n "$beside" ] && [ "$beside" -lt 20 ] && ok "weight 1 beside weight 20: $beside launches ran beside the holder" || { bad "weight 1 beside weight 20 ran beside the holder: ${beside:-no report}"; grep "launches governed" "$T/t1.err"; }
    shares_in "$T/t1" 0.02 0.16 "weight 1 of 1:20"
    # A tenant of no weight takes turns of one unit, and a tenant of no class is a normal one:
    # beside --priority normal (weight unset), --weight 1 (class unset) gets half.
    "$GS" run -q --priority normal -- "$CL" stream 2 1000 >"$T/n0" 2>"$T/n0.err" &
    pa=$!
    "$GS" run -q --weight 1 -- "$CL" stream 2 1000 >"$T/n1" 2>"$T/n1.err"
    wait $pa
    shares_in "$T/n0" 0.42 0.58 "class normal, no weight, beside weight 1"
    shares_in "$T/n1" 0.42 0.58 "weight 1, no class, beside class normal"
    # Work-conserving: the weight-1 tenant runs 3 s, the weight-3 one the first 1.5 s of them;
    # alone afterwards, it gets the whole device: 0.25 x 1.5 + 1 x 1.5 = 0.625 of its 3 s.
    "$GS" run -q --weight 1 -- "$CL" stream 3 1000 >"$T/c1" 2>"$T/c1.err" &
    pa=$!
    "$GS" run -q --weight 3 -- "$CL" stream 1.5 1000 >"$T/c3" 2>"$T/c3.err"
    wait $pa
    shares_in "$T/c1" 0.57 0.68 "weight 1, alone for its last 1.5 s"
    # A tenant that works in bursts and idles between them never keeps the board over an idle
    # spell (its governor would sleep holding it: the other waited 100 ms, then ran beside it
    # for good, 428 times in 2 s here, and got 0.73).
    "$GS" run -q --weight 1 -- "$CL" idle 2 1000 >"$T/i1" 2>"$T/i1.err" &
    pa=$!
    GPUSLICE_DEBUG=1 "$GS" run -q --weight 1 -- "$CL" stream 2 1000 >"$T/i2" 2>"$T/i2.err"
    wait $pa
    shares_in "$T/i2" 0.88 1.0 "beside a tenant that idles between bursts"
    grep -q "; 0 ran beside a holder" "$T/i2.err" && ok "it never had to run beside a holder" || { bad "ran beside a holder"; grep "launches governed" "$T/i2.err"; }
    # A holder stopped for 0.3 s (SIGSTOP): the other runs beside it after 100 ms, and says it
    # still waits, so the holder, once resumed, yields to it and turns resume (without that,
    # the two ran side by side for the rest of the run: 865 launches beside a holder, against
    # about 200, those of the stop after the 100 ms of patience).
    GPUSLICE_DEBUG=1 "$GS" run -q --weight 1 -- "$CL" stream 3 1000 >"$T/s1" 2>"$T/s1.err" &
    pa=$!
    GPUSLICE_DEBUG=1 "$GS" run -q --weight 1 -- "$CL" stream 3 1000 >"$T/s2" 2>"$T/s2.err" &
    pb=$!
    sleep 0.8
    # Stop whichever holds the device board now (holder_pid, at offset 32; between two turns, or
    # slower to start under the sanitizers, nobody may: look again for up to 2 s).
    for _ in $(seq 40); do
        h=$(python3 -c 'import struct, sys; print(struct.unpack_from("<i", open(sys.argv[1], "rb").read(), 32)[0])' \
            "$XDG_RUNTIME_DIR/gpuslice-$(id -u)-gpu-5ac1ce00000040008000000000000000.board" 2>/dev/null)
        [ "${h:-0}" -gt 0 ] && break
        sleep 0.05
    done
    [ "$h" -gt 0 ] && kill -STOP "$h"
    sleep 0.3
    [ "$h" -gt 0 ] && kill -CONT "$h"
    wait $pa $pb
    # Both report: the one that was not stopped is the one that ran beside the other.
    beside=$(grep -ho "[0-9]* ran beside a holder" "$T/s1.err" "$T/s2.err" | awk '{s += $1} END {print s + 0}')
    if [ -n "$h" ] && [ "$h" -gt 0 ] && [ "$beside" -lt 500 ]; then ok "after the holder resumed, turns again ($beside launches ran beside it)"; else bad "ran beside the resumed holder (pid ${h:-?}): $beside launches"; grep -h "launches governed" "$T/s1.err" "$T/s2.err"; fi
    # A weight's turn on the board (issue 32): 10 ms x the weight, at most 200 ms, as the
    # holder writes it (holder_pid at offset 32, holder_turn_ns at 120 of board_abi.h).
    for wt in 8:80000000 100:200000000; do
        w=${wt%%:*} want=${wt#*:}
        "$GS" run -q --weight "$w" -- "$CL" stream 1.5 1000 >/dev/null 2>&1 &
        pw=$!
        turn=
        for _ in $(seq 60); do
            sleep 0.05
            turn=$(python3 -c 'import struct, sys
b = open(sys.argv[1], "rb").read()
pid, turn = struct.unpack_from("<i", b, 32)[0], struct.unpack_from("<Q", b, 120)[0]
print(turn if pid > 0 else "")' "$XDG_RUNTIME_DIR/gpuslice-$(id -u)-gpu-5ac1ce00000040008000000000000000.board" 2>/dev/null)
            [ -n "$turn" ] && break
        done
        wait "$pw"
        [ "$turn" = "$want" ] && ok "weight $w: a turn of $((want / 1000000)) ms on the board" || bad "weight $w: a turn of ${turn:-nothing} ns, want $want"
    done
    # A ceiling stays a hard bound on top of a weight.
    "$GS" run -q --weight 3 --compute 40 -- "$CL" stream 2.5 1000 >"$T/k3" 2>"$T/k3.err" &
    pa=$!
    "$GS" run -q --weight 1 -- "$CL" stream 2.5 1000 >"$T/k1" 2>"$T/k1.err"
    wait $pa
    shares_in "$T/k3" 0.33 0.41 "weight 3 under --compute 40"
    shares_in "$T/k1" 0.50 0.68 "weight 1 beside it gets what the ceiling leaves" ;;
compute_priority)
    # A background tenant is a below-normal MPS client, unless a client priority is set.
    expect 0 "run --priority background: below-normal MPS client priority" -- \
        "$GS" run -q --priority background -- sh -c 'test "$CUDA_MPS_CLIENT_PRIORITY" = 1'
    expect 0 "a client priority already set is kept" -- env CUDA_MPS_CLIENT_PRIORITY=0 \
        "$GS" run -q --priority background -- sh -c 'test "$CUDA_MPS_CLIENT_PRIORITY" = 0'
    expect 0 "run --priority latency: no client priority set" -- env -u CUDA_MPS_CLIENT_PRIORITY \
        "$GS" run -q --priority latency -- sh -c 'test -z "${CUDA_MPS_CLIENT_PRIORITY+x}"'
    for p in urgent '' LATENCY1 high; do
        expect 2 "run --priority '$p'" -- "$GS" run --priority "$p" -- true
        stderr_has "is not a priority class (use latency, normal or background)"
    done
    expect 2 "set --priority urgent" -- "$GS" set sometenant --priority urgent
    expect 1 "GPUSLICE_PRIORITY=urgent in a process: CUDA fails" -- preload env GPUSLICE_PRIORITY=urgent "$CL" stream 0.2 500
    stderr_has "GPUSLICE_PRIORITY"
    expect 2 "--tenant with --priority" -- "$GS" run --tenant x --priority latency -- true
    stderr_has "give --memory, --compute, --priority"
    # Classes are shown and changed.
    "$GS" run -q --name lat --priority latency -- "$LPR" 1.5 2000 40 5 >/dev/null 2>&1 &
    pa=$!
    sleep 0.4
    expect 0 "tenants --json" -- "$GS" tenants --json --interval 0
    json_ok "a latency tenant of weight 1" "
t = [t for t in d['tenants'] if t['name'] == 'lat'][0]
assert t['priority'] == 'latency' and t['weight'] == 1, t"
    expect 0 "tenants (table)" -- "$GS" tenants --interval 0
    grep -qE ' lat .* latency ' "$T/out" && ok "the table shows the class" || { bad "class column"; cat "$T/out"; }
    expect 0 "set --priority background --weight 4" -- "$GS" set lat --priority background --weight 4
    grep -q "priority background, weight 4" "$T/err" && ok "set reports the class and weight" || { bad "set report"; cat "$T/err"; }
    expect 0 "tenants --json after set" -- "$GS" tenants --json --interval 0
    json_ok "the new class and weight" "
t = [t for t in d['tenants'] if t['name'] == 'lat'][0]
assert t['priority'] == 'background' and t['weight'] == 4, t"
    wait $pa

    # The latency job alone, then beside a saturating background of 2 ms kernels.
    "$LPR" 2 2000 40 5 >"$T/solo" 2>"$T/solo.err"
    # (Alone it is 300-500 us, but up to 2.2 ms when the VM takes the CPU away: shown, not judged.)
    echo "alone: $(cat "$T/solo")"
    # No classes: the background's queue (it synchronises every 20 ms) is ahead of each request.
    "$CL" stream 3 2000 >"$T/bg0" 2>"$T/bg0.err" &
    pa=$!
    sleep 0.3
    "$LPR" 2 2000 40 5 >"$T/lat0" 2>"$T/lat0.err"
    wait $pa
    none=$(p99 "$T/lat0")
    # Classes, time-sliced: the background keeps one kernel in flight while the latency job is
    # active, so a request waits for about one background kernel (2 ms), not its queue (the
    # bound allows a second: two processes' launching threads and governors share 2 CPUs).
    bg_class() { GPUSLICE_DEBUG=1 "$GS" run -q --priority background -- "$CL" stream 3 2000 >"$1" 2>"$1.err"; }
    lat_class() { "$GS" run -q --priority latency -- "$LPR" 2 2000 40 5 >"$1" 2>"$1.err"; }
    latency_try 5500 "$T/bg1" "$T/lat1" bg_class lat_class
    p99_under "$T/lat1" 5500 "time-sliced, background class"
    v=$(p99 "$T/lat1")
    if [ -n "$none" ] && [ -n "$v" ] && [ $((v * 3)) -le "$none" ]; then ok "time-sliced: p90 $v us with classes, $none without"; else bad "time-sliced: p90 $v with classes, $none without"; fi
    shares_in "$T/bg1" 0.55 1.0 "time-sliced background beside the latency job"
    grep -q "0 launches moved to the yield partition" "$T/bg1.err" && ok "no MPS: nothing moves to a partition" || { bad "moved without MPS"; cat "$T/bg1.err"; }

    # Normal set explicitly over background, both saturating and taking turns (time-sliced):
    # the background yields its turn at once to a waiting normal tenant, keeping about one
    # kernel a turn of the normal one: never starved, never more than that.
    "$GS" run -q --priority background -- "$CL" stream 2.5 1000 >"$T/nb" 2>"$T/nb.err" &
    pa=$!
    "$GS" run -q --priority normal -- "$CL" stream 2.5 1000 >"$T/nn" 2>"$T/nn.err"
    wait $pa
    shares_in "$T/nn" 0.70 1.0 "normal beside background"
    shares_in "$T/nb" 0.01 0.15 "background beside normal (not starved)"
    a=$(awk '/^share/ {print $2}' "$T/nn"); b=$(awk '/^share/ {print $2}' "$T/nb")
    awk -v a="$a" -v b="$b" 'BEGIN { exit !(a >= 5 * b) }' && ok "normal gets at least 5x the background ($a, $b)" || bad "normal $a, background $b"

    # Simulated MPS (a control pipe where the driver looks): the background moves to half the
    # SMs while the latency job is active; the latency job's kernels find the other half free.
    # (Half, 64 SMs in groups of 8, where a background stuck on its partition is told apart
    # from one on the whole device best; the default of 96 is checked with the clusters below.)
    mkdir -p "$T/mps" && mkfifo "$T/mps/control"
    export CUDA_MPS_PIPE_DIRECTORY="$T/mps" GPUSLICE_YIELD_SMS=66
    "$CL" stream 3 2000 >"$T/bg2" 2>"$T/bg2.err" &
    pa=$!
    sleep 0.3
    "$LPR" 2 2000 40 5 >"$T/lat2" 2>"$T/lat2.err"
    wait $pa
    mpsnone=$(p50 "$T/lat2")
    # Judged by the median: one CI run on a loaded VM read p90 2757 and 2988 us here (the job
    # alone: 1284) with the median at 524 us; a background left on the whole device reads ~2150.
    latency_try 1000 "$T/bg3" "$T/lat3" bg_class lat_class p50
    v=$(p50 "$T/lat3")
    if [ -n "$v" ] && [ "$v" -le 1000 ]; then ok "MPS, background class on half the SMs: p50 $v us <= 1000"; else bad "MPS, background class on half the SMs: p50 ${v:-none} us, want <= 1000"; cat "$T/lat3" "$T/lat3.err" 2>/dev/null; fi
    if [ -n "$mpsnone" ] && [ -n "$v" ] && [ $((v * 4)) -le "$mpsnone" ]; then ok "MPS: p50 $v us with classes, $mpsnone without"; else bad "MPS: p50 $v with classes, $mpsnone without"; fi
    shares_in "$T/bg3" 0.42 0.80 "MPS background on half the SMs for 2 of its 3 s"
    if grep -qE "[1-9][0-9]* launches moved to the yield partition" "$T/bg3.err"; then ok "MPS: launches moved to the partition"; else bad "nothing moved under MPS"; cat "$T/bg3.err"; fi
    # Work-conserving: the latency job runs 1 s of the background's 3 s; the background gets
    # the whole device back when it ends (stuck on half: 0.5 x 3 s + ...= 0.5..0.6).
    "$GS" run -q --priority background -- "$CL" stream 3 2000 >"$T/bg4" 2>"$T/bg4.err" &
    pa=$!
    sleep 0.3
    "$GS" run -q --priority latency -- "$LPR" 1 2000 40 5 >"$T/lat4" 2>"$T/lat4.err"
    wait $pa
    shares_in "$T/bg4" 0.72 1.0 "MPS background, whole device again after the latency job"
    # A latency tenant killed while active: the background has the whole device again 5 ms on.
    "$GS" run -q --priority background -- "$CL" stream 3 2000 >"$T/bg5" 2>"$T/bg5.err" &
    pa=$!
    sleep 0.3
    env LD_PRELOAD="$LIB" GPUSLICE_PRIORITY=latency "$LPR" 10 2000 40 5 >"$T/lat5" 2>&1 &
    pl=$!
    sleep 0.7
    kill -KILL $pl
    wait $pl 2>/dev/null
    wait $pa
    shares_in "$T/bg5" 0.72 1.0 "MPS background after its latency tenant was killed"
    # A latency job that never idles: the background keeps half the device, never starved.
    "$GS" run -q --priority background -- "$CL" stream 2 2000 >"$T/bg6" 2>"$T/bg6.err" &
    pa=$!
    "$GS" run -q --priority latency -- "$CL" stream 2.5 200 >"$T/lat6" 2>"$T/lat6.err"
    wait $pa
    shares_in "$T/bg6" 0.30 0.60 "background beside a latency tenant that never idles"
    # A latency tenant's long kernels (20 ms) count as its activity while they run, not only
    # their launches: the background yields the whole time (moves every launch).
    # (Its activity is stamped by its governor's poll: a second attempt where a loaded VM kept
    # that thread off the CPU past the 5 ms grace; one CI run moved 32 of 61.)
    for attempt in 1 2; do
        "$GS" run -q --priority latency -- "$CL" stream 2.5 20000 >"$T/lat7" 2>"$T/lat7.err" &
        pa=$!
        sleep 0.3
        GPUSLICE_DEBUG=1 "$GS" run -q --priority background -- "$CL" stream 1.8 2000 >"$T/bg7" 2>"$T/bg7.err"
        wait $pa
        gov=$(grep -o "[0-9]* launches governed" "$T/bg7.err" | awk '{print $1}')
        mov=$(grep -o "[0-9]* launches moved" "$T/bg7.err" | awk '{print $1}')
        [ -n "$gov" ] && [ -n "$mov" ] && [ "$gov" -gt 0 ] && [ $((mov * 10)) -ge $((gov * 8)) ] && break
        echo "attempt $attempt: ${mov:-?} of ${gov:-?} moved"
    done
    if [ -n "$gov" ] && [ -n "$mov" ] && [ "$gov" -gt 0 ] && [ $((mov * 10)) -ge $((gov * 8)) ]; then ok "long latency kernels: $mov of $gov background launches moved"; else bad "long latency kernels: ${mov:-?} of ${gov:-?} moved"; fi
    # Thread-block clusters of 8 (as cuBLAS's Hopper GEMMs launch them, cuLaunchKernelEx): they
    # move to a partition of co-scheduled groups of 8 (the default, 3/4 of the SMs); on one of the
    # 2-SM split (GPUSLICE_YIELD_SMS=6, under a group), where the driver refuses them, they stay
    # where they were asked and still run.
    cluster_run() {
        "$GS" run -q --priority latency -- "$CL" stream 2 20000 >"$T/lat8" 2>"$T/lat8.err" &
        pa=$!
        sleep 0.3
        env COMPUTE_LOAD_CLUSTER=8 GPUSLICE_DEBUG=1 $1 "$GS" run -q --priority background -- "$CL" ex 1.2 2000 >"$T/$2" 2>"$T/$2.err"
        wait $pa
    }
    unset GPUSLICE_YIELD_SMS
    cluster_run "" bg8
    if grep -qE "launches moved to the yield partition \([1-9][0-9]* in thread-block clusters; 0 clusters" "$T/bg8.err" &&
       grep -q "yields to a higher class on 96 of 132 SMs (thread-block clusters of up to 8 blocks" "$T/bg8.err"; then
        ok "clusters of 8 moved to 96 SMs in groups of 8"
    else bad "clusters of 8 did not move"; cat "$T/bg8.err"; fi
    cluster_run GPUSLICE_YIELD_SMS=6 bg9
    if grep -qE " 0 launches moved to the yield partition \(0 in thread-block clusters; [1-9][0-9]* clusters larger" "$T/bg9.err" &&
       grep -q "yields to a higher class on 6 of 132 SMs (thread-block clusters of up to 2 blocks" "$T/bg9.err"; then
        ok "clusters of 8 stayed beside a partition of the 2-SM split"
    else bad "clusters of 8 moved to 2-SM groups"; cat "$T/bg9.err"; fi
    shares_in "$T/bg9" 0.01 1.0 "the clusters that stayed ran"
    # More than the groups cover (the H200's 15 groups of 8 leave 12 SMs over): capped at 120,
    # still in groups, so the clusters still move.
    cluster_run GPUSLICE_YIELD_SMS=130 bg10
    if grep -q "yields to a higher class on 120 of 132 SMs (thread-block clusters of up to 8 blocks" "$T/bg10.err" &&
       grep -qE "launches moved to the yield partition \([1-9][0-9]* in thread-block clusters" "$T/bg10.err"; then
        ok "GPUSLICE_YIELD_SMS=130: 120 SMs in groups, clusters moved"
    else bad "GPUSLICE_YIELD_SMS=130"; cat "$T/bg10.err"; fi
    unset CUDA_MPS_PIPE_DIRECTORY GPUSLICE_YIELD_SMS ;;
esac

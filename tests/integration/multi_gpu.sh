# Several GPUs, on the simulated driver with 2 and then 4 of them (sourced by run.sh, which
# provides T, B, GS, expect, ok, bad...): what issue 18 asks of a multi-GPU host, less NCCL.
# The simulator's GPUs are GPU-5ac1ce00-0000-4000-8000-00000000000N, 16 GiB each, and it
# numbers them as CUDA_VISIBLE_DEVICES says (NVML sees every one, as the real one does).
MP="$B/tests/mem_probe"
SP="$B/tests/sm_probe"
U=GPU-5ac1ce00-0000-4000-8000-00000000000
GI=17179869184
# lines_are FILE WHAT LINE...: FILE holds exactly these lines.
lines_are() {
    local f=$1 what=$2
    shift 2
    if [ "$(cat "$f")" = "$(printf '%s\n' "$@")" ]; then ok "$what"; else
        bad "$what"; echo "got:"; cat "$f"; echo "want:"; printf '%s\n' "$@"; fi
}
# gpu_used N: what NVML says is in use on GPU N (every process), in bytes.
gpu_used() {
    "$GS" info --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["gpus"][int(sys.argv[1])]["memory_used_bytes"])' "$1"
}
wait_for() { # wait_for FILE: up to 10 s
    for i in $(seq 200); do [ -e "$1" ] && return 0; sleep 0.05; done
    bad "$1 never appeared"; return 1
}
mkdir -p "$T/bin" "$T/xdg"; chmod 700 "$T/xdg"
cp "$SRC/tests/integration/fake-mps-control" "$T/bin/nvidia-cuda-mps-control"
export PATH="$T/bin:$PATH" XDG_RUNTIME_DIR="$T/xdg" GPUSLICE_MPS_TIMEOUT=3
unset CUDA_MPS_PIPE_DIRECTORY
for N in 2 4; do
    L=$((N - 1))
    export GPUSLICE_SIM_DEVICES=$N GPUSLICE_SIM_STATE="$T/sim$N.state"
    unset GPUSLICE_SIM_MEMORY
    # gpuslice info: every GPU, and one of them by index.
    expect 0 "info --json on $N GPUs" -- "$GS" info --json
    json_ok "$N GPUs, in order, each with its UUID and memory" "
assert [g['index'] for g in d['gpus']] == list(range($N)), d
assert [g['uuid'] for g in d['gpus']] == ['$U%d' % i for i in range($N)], d
assert all(g['memory_total_bytes'] == $GI and g['sm_count'] == 132 for g in d['gpus']), d
gc = [g['green_contexts'] for g in d['gpus']]
assert all((c['min_sms'], c['alignment'], c['finest_split_sms'], c['groups'], c['groups_left_over_sms'], c['finest_groups']) == (8, 8, 2, 15, 12, 66) for c in gc), gc"
    expect 0 "info -d $L --json" -- "$GS" info -d $L --json
    json_ok "GPU $L alone" "assert [g['uuid'] for g in d['gpus']] == ['$U$L'], d"
    expect 0 "info -d $L -d gpu-5AC1CE00-…-0 (by UUID, any case)" -- "$GS" info -d $L -d gpu-5AC1CE00-0000-4000-8000-000000000000 --json
    json_ok "GPUs 0 and $L, in CUDA order" "assert [g['index'] for g in d['gpus']] == [0, $L], d"
    expect 2 "info -d $N (no such GPU)" -- "$GS" info -d $N
    stderr_has "\"$N\" is none of the $N GPUs described here (CUDA indexes 0, 1"
    expect 2 "info -d 1, (an empty entry)" -- "$GS" info -d 1,
    stderr_has '"1," has an empty entry'
    # Per-device memory limits, by index: each device holds its own, the rest none.
    rest=16
    [ $N = 2 ] && rest=
    expect 0 "run --memory 0:8G,1:4G on $N GPUs" -- "$GS" run -q --memory 0:8G,1:4G -- "$MP" \
        dev:0 total alloc:8000 alloc:300 dev:1 total alloc:4000 alloc:200 ${rest:+dev:$L total alloc:9000}
    lines_are "$T/out" "$N GPUs: GPU 0 held to 8 GiB, GPU 1 to 4 GiB${rest:+, GPU $L free}" \
        "dev 0 ok" "total 8589934592" "alloc 8000 ok" "alloc 300 CUDA_ERROR_OUT_OF_MEMORY" \
        "dev 1 ok" "total 4294967296" "alloc 4000 ok" "alloc 200 CUDA_ERROR_OUT_OF_MEMORY" \
        ${rest:+"dev $L ok" "total $GI" "alloc 9000 ok"}
    # gpuslice set's index entries name CUDA's numbering, not the tenant's first-used order: a
    # tenant that has used GPU 1 alone is set on GPU 1 by 1:50.
    if [ $N = 2 ]; then
        rm -f "$T/g1.up" "$T/g1.go"
        MEM_PROBE_DEVICE=1 "$GS" run -q --name g1only -- "$MP" alloc:10 mark:"$T/g1.up" wait:"$T/g1.go" >/dev/null 2>&1 &
        G1=$!
        wait_for "$T/g1.up"
        expect 0 "set g1only --compute 1:50 (it uses GPU 1 alone)" -- "$GS" set g1only --compute 1:50
        stderr_has "GPU 1 (${U}1): memory limit none ([0-9]* MiB in use), compute ceiling 50%"
        touch "$T/g1.go"; wait $G1
    fi
    # By UUID: the GPU it names, whatever its index.
    expect 0 "run --memory ${U}$L:2G" -- "$GS" run -q --memory "${U}$L:2G" -- "$MP" dev:0 total dev:$L total
    lines_are "$T/out" "a UUID key limits GPU $L only" "dev 0 ok" "total $GI" "dev $L ok" "total 2147483648"
    # -d reorders what the program sees; index keys follow its numbering, UUID keys the GPU.
    expect 0 "run -d $L,0 --memory 0:8G,1:4G" -- "$GS" run -q -d $L,0 --memory 0:8G,1:4G -- "$MP" dev:0 uuid total dev:1 uuid total
    lines_are "$T/out" "-d $L,0: the program's GPU 0 is GPU $L, at 8 GiB; its GPU 1 is GPU 0, at 4 GiB" \
        "dev 0 ok" "uuid ${U}$L" "total 8589934592" "dev 1 ok" "uuid ${U}0" "total 4294967296"
    expect 0 "run -d $L,0 --memory ${U}0:1G" -- "$GS" run -q -d $L,0 --memory "${U}0:1G" -- "$MP" dev:0 uuid total dev:1 uuid total
    lines_are "$T/out" "-d $L,0 with a UUID key: GPU 0 limited where the program sees it (its 1)" \
        "dev 0 ok" "uuid ${U}$L" "total $GI" "dev 1 ok" "uuid ${U}0" "total 1073741824"
    expect 2 "-d $L,0 --memory 2:1G (the program sees 2 GPUs)" -- "$GS" run -q -d $L,0 --memory 2:1G -- true
    stderr_has "device 2 does not exist"
    # One tenant over every GPU, a worker per GPU as torchrun starts them (LOCAL_RANK picks
    # the device): each sees its 16 GiB, all hold 15000 MiB at once (a per-device limit, not
    # one total), and a worker past its limit gets out of memory, not a hang.
    export GPUSLICE_SIM_MEMORY=24G
    rm -f "$T"/w*.out "$T"/w*.up "$T/go"
    timeout 60 "$GS" run -q --name ddp --memory 16G -- sh -c '
        r=0
        while [ $r -lt "$1" ]; do
            MEM_PROBE_DEVICE=$r "$2" dev:$r total alloc:15000 mark:"$3/w$r.up" wait:"$3/go" alloc:2000 >"$3/w$r.out" &
            r=$((r + 1))
        done
        wait' sh $N "$MP" "$T" 2>"$T/werr" &
    W=$!
    for r in $(seq 0 $L); do wait_for "$T/w$r.up"; done
    expect 0 "tenants --json while the $N workers hold 15000 MiB each" -- "$GS" tenants --json --interval 0
    json_ok "one tenant, each GPU charged its worker's 15000 MiB and no more" "
t = [t for t in d['tenants'] if t['name'] == 'ddp'][0]
dv = sorted(t['devices'], key=lambda v: v['index'])
assert [v['uuid'] for v in dv] == ['$U%d' % i for i in range($N)], dv
assert all(v['memory_limit_bytes'] == 16 << 30 for v in dv), dv
assert all(15000 << 20 <= v['memory_used_bytes'] < 15200 << 20 for v in dv), dv"
    # info's table: the tenant's first row names it, the others only their GPU.
    expect 0 "info while the $N workers hold memory" -- "$GS" info
    # Each GPU's MPS: the daemon gpuslice made for it (stopped: GPU $L's of the round before), else
    # the default pipe directory's (CUDA_MPS_PIPE_DIRECTORY unset), whatever runs there.
    want=$(for g in $(seq 0 $L); do p="$XDG_RUNTIME_DIR/gpuslice-mps/$U$g/pipe"
        if [ -d "$p" ]; then echo "not running ($p)"; else echo "(/tmp/nvidia-mps)"; fi; done)
    got=$(grep "^  MPS  " "$T/out" | sed 's/^  MPS  *//; s/^[a-z ]* (\/tmp\/nvidia-mps)$/(\/tmp\/nvidia-mps)/')
    if [ "$got" = "$want" ]; then ok "each GPU's MPS pipe directory"; else bad "MPS lines"; echo "$got"; echo "want:"; echo "$want"; fi
    id=$(awk '$2 == "ddp" { print $1 }' "$T/out")
    # ID|NAME|GPU|MEM LIMIT|CEILING of the tenant's rows (its own, then those with ID and NAME blank).
    rows=$(awk -v id="$id" 'f && substr($0, 1, 48) !~ /^ +$/ { f = 0 } $1 == id { f = 1 }
        f { x = substr($0, 3, 28); y = substr($0, 32, 16); gsub(/ +$/, "", x); gsub(/ +$/, "", y)
            print x "|" y "|" substr($0, 49, 4) + 0 "|" $(NF - 2) " " $(NF - 1) "|" $NF }' "$T/out")
    names=$(echo "$rows" | cut -d'|' -f1,2,4,5)
    gpus=$(echo "$rows" | cut -d'|' -f3 | sort -n | tr '\n' ' ')
    want=$(echo "$id|ddp|16 GiB|none"; for r in $(seq 1 $L); do echo "||16 GiB|none"; done)
    if [ -n "$id" ] && [ "$names" = "$want" ] && [ "$gpus" = "$(seq 0 $L | tr '\n' ' ')" ]; then
        ok "info: one row per GPU, the tenant named on the first only"; else
        bad "info's rows for ddp"; echo "$rows"; echo "want:"; echo "$want"; cat "$T/out"; fi
    touch "$T/go"
    wait $W; rc=$?
    if [ $rc = 0 ]; then ok "the workers ended (no hang)"; else bad "workers: exit $rc"; cat "$T/werr"; fi
    for r in $(seq 0 $L); do
        lines_are "$T/w$r.out" "worker $r: 16 GiB on GPU $r, 15000 MiB held, 2000 more refused" \
            "dev $r ok" "total $GI" "alloc 15000 ok" "alloc 2000 CUDA_ERROR_OUT_OF_MEMORY"
    done
    unset GPUSLICE_SIM_MEMORY
    # A buffer of GPU 1 mapped where GPU 0 works too (a peer's memory, as NCCL maps it): charged
    # once, to GPU 1, which owns it, and held to GPU 1's limit.
    rm -f "$T/up" "$T/go"
    "$GS" run -q --name peer --memory 0:2G,1:1G -- "$MP" dev:1 dev:0 vmm:1:900 vmm:1:200 mark:"$T/up" wait:"$T/go" >"$T/peer.out" 2>&1 &
    W=$!
    wait_for "$T/up"
    expect 0 "tenants --json with GPU 1's buffer mapped for GPU 0" -- "$GS" tenants --json --interval 0
    json_ok "GPU 1 charged 900 MiB (and its context), GPU 0 only its context" "
t = [t for t in d['tenants'] if t['name'] == 'peer'][0]
u = {v['index']: v['memory_used_bytes'] for v in t['devices']}
assert 900 << 20 <= u[1] < 1000 << 20 and u[0] < 100 << 20, u"
    touch "$T/go"; wait $W
    lines_are "$T/peer.out" "the peer buffer mapped; 200 MiB more on GPU 1 refused at its 1 GiB" \
        "dev 1 ok" "dev 0 ok" "vmm 1 900 ok" "vmm 1 200 CUDA_ERROR_OUT_OF_MEMORY"
    # --filled on every GPU the program sees, and only on those.
    rm -f "$T/up" "$T/go"
    "$GS" run -q --filled 0.5 -- "$MP" mark:"$T/up" wait:"$T/go" >/dev/null 2>"$T/ferr" &
    W=$!
    wait_for "$T/up"
    ok_all=1
    for g in $(seq 0 $L); do
        v=$(gpu_used $g)
        awk -v v="$v" -v g=$GI 'BEGIN { exit !(v >= g / 2 - 128 * 1048576 && v <= g / 2 + 128 * 1048576) }' || { ok_all=0; bad "--filled 0.5: GPU $g has $v bytes in use"; }
    done
    [ $ok_all = 1 ] && ok "--filled 0.5: each of the $N GPUs half full"
    touch "$T/go"; wait $W || { bad "--filled 0.5"; cat "$T/ferr"; }
    rm -f "$T/up" "$T/go"
    "$GS" run -q -d $L --filled 0.5 -- "$MP" mark:"$T/up" wait:"$T/go" >/dev/null 2>"$T/ferr" &
    W=$!
    wait_for "$T/up"
    a=$(gpu_used 0); b=$(gpu_used $L)
    if [ "$a" -lt 268435456 ] && [ "$b" -ge $((GI / 2 - 134217728)) ] && [ "$b" -le $((GI / 2 + 134217728)) ]; then
        ok "-d $L --filled 0.5: GPU $L half full ($b), GPU 0 untouched ($a)"
    else bad "-d $L --filled 0.5: GPU 0 $a, GPU $L $b"; cat "$T/ferr"; fi
    touch "$T/go"; wait $W
    # SM partitions on the last GPU: run --sms, and procs -d.
    expect 0 "run -d $L --sms 16" -- "$GS" run -q -d $L --sms 16 -- "$SP" 1
    grep -q "^thread 0 null sms 16 " "$T/out" && ok "GPU $L: 16 SMs" || { bad "run -d $L --sms 16"; cat "$T/out"; }
    # By index on 2 GPUs, by UUID on 4: the plan gives the GPU's CUDA index either way.
    dev=$L
    [ $N = 4 ] && dev=$U$L
    expect 0 "procs -d $dev --dry-run" -- "$GS" procs -d $dev --shares 1,3 --dry-run -- a ::: b
    json_ok "the plan is for GPU $L" "assert d['device']['index'] == $L and d['device']['uuid'] == '$U$L' and [l['sm_count'] for l in d['lanes']] == [32, 100], d"
    expect 0 "procs -d $L --shares 1,3" -- "$GS" procs -q -d $L --shares 1,3 -- \
        sh -c "'$SP' 1 > '$T/l0'" ::: sh -c "'$MP' uuid > '$T/l1'; exec '$SP' 1 > '$T/l2'"
    if grep -q "^thread 0 null sms 32 " "$T/l0" && grep -qx "uuid ${U}$L" "$T/l1" && grep -q "^thread 0 null sms 100 " "$T/l2"; then
        ok "procs -d $L: both lanes on GPU $L, on 32 and 100 SMs"
    else bad "procs -d $L"; cat "$T/l0" "$T/l1" "$T/l2"; fi
    grep -q "CUDA_VISIBLE_DEVICES=${U}$L" "$XDG_RUNTIME_DIR/gpuslice-mps/${U}$L/pipe/fake.starts" 2>/dev/null && ok "GPU $L's own MPS daemon" || bad "no MPS daemon for GPU $L"
    "$GS" mps stop --force -d $L >/dev/null 2>&1
done

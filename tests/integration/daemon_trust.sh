# The node's table of tenants against one user who fills it (sourced by daemon.sh, which
# provides start_daemon, api, want, jq_py...): a quota per user, and room kept for pods.
case $CASE in
daemon_trust_room)
    # Issue 28.13: one user filled the node's 256-tenant table; a new GPU pod then got no
    # tenant, and stayed so after the tenants were deleted.
    . "$SRC/tests/k8s/lib.sh"
    tls_apiserver
    # has_tenant NAME SECONDS [no]: pod NAME's tenant exists (or, with no, does not) within SECONDS.
    has_tenant() {
        i=0; while [ $i -lt $(($2 * 10)) ]; do
            api GET /v1/pods >/dev/null
            uid=$(jq_py "print([p['uid'] for p in d['pods'] if p['name'] == '$1'][0])" 2>/dev/null)
            if [ -n "$uid" ]; then
                c=$(api GET "/v1/tenants/pod-$uid")
                if [ "${3:-}" = no ]; then [ "$c" = 404 ] && return 0; else [ "$c" = 200 ] && return 0; fi
            fi
            sleep 0.1; i=$((i + 1))
        done
        return 1
    }
    start_daemon --kube-api "$KA" --kube-ca-file "$T/ca.crt" --kube-token-file "$T/token" --node-name node1 --sweep-ms 100 || exit 1
    # Room kept for pods (64 by default): API tenants stop at 192.
    n=0
    while [ $n -lt 200 ]; do
        code=$(api POST /v1/tenants "{\"name\":\"t$n\"}")
        [ "$code" = 201 ] || break
        n=$((n + 1))
    done
    [ "$n" = 192 ] && [ "$code" = 507 ] && ok "API tenants stop at 192: 507 (the last 64 places are the pods')" || { bad "stopped at $n with $code"; cat "$T/body"; }
    body_has "kept for pods"
    kctl -d "$(kpod p1 1G node1)" "$KC/pods" >/dev/null
    if has_tenant p1 10; then ok "a GPU pod still gets its tenant"; else bad "pod p1 has no tenant"; fi
    stop_daemon
    # With no room kept: a pod that finds the table full gets its tenant as soon as a place frees.
    rm -rf "$T/drun" "$T/drun/state"
    start_daemon --kube-api "$KA" --kube-ca-file "$T/ca.crt" --kube-token-file "$T/token" --node-name node1 --sweep-ms 100 --pod-reserve 0 --state-dir "$T/st2" || exit 1
    has_tenant p1 10
    n=0
    while [ $n -lt 300 ]; do
        code=$(api POST /v1/tenants "{\"name\":\"u$n\"}")
        [ "$code" = 201 ] || break
        n=$((n + 1))
    done
    [ "$code" = 507 ] && ok "the table full after $n more tenants (507)" || { bad "not full: $code"; }
    kctl -d "$(kpod p2 1G node1)" "$KC/pods" >/dev/null
    sleep 1
    if has_tenant p2 1 no; then ok "pod p2 finds the table full: no tenant"; else bad "p2 has a tenant in a full table"; fi
    want 204 "one tenant deleted" DELETE /v1/tenants/u0
    if has_tenant p2 3; then ok "p2 gets its tenant once a place frees, with no change to the pod"; else bad "p2 stayed without a tenant"; fi
    stop_daemon
    # A quota per user (16 by default): a user who is not an admin.
    if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
        chmod 755 "$T"
        mkdir -m 777 "$T/nobody"
        rm -rf "$T/drun"
        start_daemon --socket-group nogroup --state-dir "$T/st3" || exit 1
        n=0
        while [ $n -lt 20 ]; do
            code=$(setpriv --reuid 65534 --regid 65534 --clear-groups curl -s -o "$T/nobody/body" -w '%{http_code}' --unix-socket "$SOCK" -H 'Content-Type: application/json' -d "{\"name\":\"n$n\"}" http://d/v1/tenants)
            [ "$code" = 201 ] || break
            n=$((n + 1))
        done
        cp "$T/nobody/body" "$T/body"
        [ "$n" = 16 ] && [ "$code" = 429 ] && ok "nobody stops at 16 tenants: 429" || { bad "nobody stopped at $n with $code"; cat "$T/body"; }
        err_code quota
        want 201 "an admin still makes one for nobody" POST /v1/tenants '{"name":"forn","owner":65534}'
    fi
    ;;
daemon_trust_planted)
    # Issue 28.12: another user plants 600 live-looking tenant files in the run directory
    # (/dev/shm on a node): the daemon read them all (31 % CPU, 122 MB; 351 MB with 1500) and
    # a real tenant went missing from the API and metrics.
    if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
        echo "skip: needs root and setpriv to act as another user"; exit 77
    fi
    chmod 755 "$T"; chmod 1777 "$GPUSLICE_RUN_DIR"
    mkdir -m 777 "$T/nobody"
    as_nobody() { setpriv --reuid 65534 --regid 65534 --clear-groups env HOME="$T/nobody" XDG_RUNTIME_DIR="$T/nobody" GPUSLICE_SIM_STATE="$T/nobody/sim" "$@"; }
    # nobody's own gpuslice run, alive: its file is live, and so is every copy of it.
    as_nobody "$GS" run -q -- sleep 60 &
    NB=$!; BG="$BG $NB"
    for i in $(seq 100); do ls "$GPUSLICE_RUN_DIR"/gpuslice-65534-*.tenant >/dev/null 2>&1 && break; sleep 0.05; done
    f=$(ls "$GPUSLICE_RUN_DIR"/gpuslice-65534-*.tenant | head -1)
    [ -n "$f" ] && ok "nobody's live tenant file" || { bad "no file of nobody"; exit 1; }
    as_nobody sh -c 'i=0; while [ $i -lt 600 ]; do cp "$0" "${0%.tenant}$i.tenant"; i=$((i + 1)); done' "$f"
    [ "$(ls "$GPUSLICE_RUN_DIR" | grep -c '^gpuslice-65534-')" -ge 600 ] && ok "600 copies planted" || bad "planting"
    # Four more users plant 64 each: 320 files the listing reads, more than the table's 256.
    for u in 1000 1001 1002 1003; do
        mkdir -m 777 "$T/u$u"
        setpriv --reuid $u --regid $u --clear-groups env HOME="$T/u$u" XDG_RUNTIME_DIR="$T/u$u" "$GS" run -q -- sleep 60 &
        BG="$BG $!"
    done
    for u in 1000 1001 1002 1003; do
        for i in $(seq 100); do ls "$GPUSLICE_RUN_DIR"/gpuslice-$u-*.tenant >/dev/null 2>&1 && break; sleep 0.05; done
        g=$(ls "$GPUSLICE_RUN_DIR"/gpuslice-$u-*.tenant | head -1)
        setpriv --reuid $u --regid $u --clear-groups sh -c 'i=0; while [ $i -lt 63 ]; do cp "$0" "${0%.tenant}$i.tenant"; i=$((i + 1)); done' "$g"
    done
    # Root's real tenant, made after them (the newest: listed last by age).
    rm -f "$T/r.up"
    "$GS" run -q --name real --memory 1G -- "$P" alloc:100 mark:"$T/r.up" sleep:20000 >"$T/real.out" 2>&1 &
    R=$!; BG="$BG $R"
    for i in $(seq 200); do [ -e "$T/r.up" ] && break; sleep 0.05; done
    start_daemon || exit 1 # its default sweep, every 250 ms
    sleep 1
    want 200 "tenants" GET /v1/tenants
    jq_py 'assert "real" in [t["name"] for t in d["tenants"]], [t["name"] for t in d["tenants"]][:5]' && ok "root's real tenant (the newest) is listed beside the planted files of five users" || bad "the real tenant is hidden"
    jq_py 'n=len([t for t in d["tenants"] if t["owner"]==65534]); assert n <= 64, n' && ok "at most 64 of nobody's files listed ($(jq_py 'print(len([t for t in d["tenants"] if t["owner"]==65534]))'))" || bad "nobody's files listed"
    want 200 "metrics" GET /metrics
    grep -q 'tenant_name="real"' "$T/body" && ok "and in /metrics" || bad "the real tenant is not in /metrics"
    # What it costs, measured twice: with these files, then with 600 more of nobody's. The work
    # a sweep does is bounded (256 files read), so more planted files must not cost more CPU; the
    # figures themselves follow the machine: 21-24 % of a CPU and under 48 MiB on this 2-CPU VM
    # on 2026-12-06, 43-66 % and 64-101 MiB on 2026-12-07 for the tree of that day before and
    # the tree of this one alike. (Reading them all, before issue 28.12: 31 % and 122 MB with
    # 600, 351 MB with 1500.)
    vmrss() { sed -n 's/^VmRSS:[^0-9]*\([0-9]*\).*/\1/p' "/proc/$DPID/status"; }
    cost() { # cpu: % of a CPU over 2 s; rss: the larger of the readings before and after (KiB)
        local t0 t1 r0 r1
        r0=$(vmrss)
        t0=$(awk '{print $14 + $15}' "/proc/$DPID/stat"); sleep 2; t1=$(awk '{print $14 + $15}' "/proc/$DPID/stat")
        cpu=$(( (t1 - t0) * 100 / ($(getconf CLK_TCK) * 2) ))
        r1=$(vmrss)
        rss=$(( r0 > r1 ? r0 : r1 ))
    }
    cost; rss1=$rss cpu1=$cpu
    as_nobody sh -c 'i=600; while [ $i -lt 1200 ]; do cp "$0" "${0%.tenant}$i.tenant"; i=$((i + 1)); done' "$f"
    sleep 1
    cost; rss2=$rss cpu2=$cpu
    # (The RSS is not judged against the first: it moved between 64 and 102 MiB from run to run
    # and within one, whatever the count, as the allocator's arenas took the sweeps' copies.
    # Reading all 1200 would hold 175 MiB of them. Under a sanitizer it is the sanitizer's:
    # ASan's quarantine keeps freed memory, 148 and then 268 MiB here, so it is only shown.)
    bound=131072
    if [ "${SANITIZE:-0}" = 1 ]; then
        ok "the daemon's RSS under a sanitizer, not judged: $rss1 KiB, then $rss2 KiB"
    elif [ "$rss1" -lt $bound ] && [ "$rss2" -lt $bound ]; then
        ok "the daemon's RSS: $rss1 KiB with 600 of nobody's files, $rss2 KiB with 1200 (bound $((bound / 1024)) MiB)"
    else bad "the daemon's RSS: $rss1 KiB with 600 of nobody's files, $rss2 KiB with 1200"; fi
    cbound=90; [ "${SANITIZE:-0}" = 1 ] && cbound=150
    [ "$cpu2" -le $cbound ] && [ "$cpu2" -le $((cpu1 * 4 / 3 + 8)) ] &&
        ok "its CPU over 2 s: $cpu1 % with 600 of nobody's files, $cpu2 % with 1200 (at most 256 files read a sweep)" ||
        bad "its CPU over 2 s: $cpu1 % with 600 of nobody's files, $cpu2 % with 1200"
    as_nobody "$GS" tenants --json >"$T/nb.json" 2>"$T/nb.err"
    grep -q "holds more tenant files than a listing reads" "$T/nb.err" && ok "gpuslice tenants says it left files unread" || { bad "no warning"; cat "$T/nb.err"; }
    kill "$R" "$NB" 2>/dev/null; wait "$R" "$NB" 2>/dev/null
    ;;
daemon_trust_wall)
    # The second wall: where the driver holds per-cgroup memory limits (r615+; the simulated
    # driver is one with GPUSLICE_SIM_DRIVER_VERSION=615.00-sim), a pod's limit is set on its
    # container's cgroup, and a process that never loaded the interposer is refused by the
    # driver itself; on 580 (ours) there is no such call and the guard stops it instead.
    . "$SRC/tests/k8s/lib.sh"
    pod_cgroups # CGB
    case "$CGB" in */unified|/sys/fs/cgroup) ;; *) echo "skip: needs a cgroup v2 hierarchy"; exit 77 ;; esac
    tls_apiserver
    U1=77777777-2222-4333-8444-555555555555 C1=$(printf 'c7%062d' 0)
    kctl -d '{"metadata":{"name":"walled","namespace":"ns1","uid":"'$U1'","annotations":{"gpuslice.io/memory":"1G"}},"spec":{"nodeName":"node1","containers":[{"name":"main"}]},"status":{"containerStatuses":[{"name":"main","containerID":"containerd://'$C1'"}]}}' "$KC/pods" >/dev/null
    D1="$CGB/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$(echo "$U1" | tr - _).slice/cri-containerd-$C1.scope"
    mkdir -p "$D1"
    trap 'cg_cleanup_own $U1; cleanup' EXIT
    # in_container [env ...] ARGS: ARGS in the pod's container cgroup (the daemon's PID
    # namespace: the simulated NVML names processes by the PIDs they see themselves).
    in_container() { sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$D1" "$@"; }
    # Two GPUs: the pod's limit is its default, on each (a wall per container and GPU).
    export GPUSLICE_SIM_DEVICES=2 GPUSLICE_SIM_STATE="$T/sim2.state"
    for V in 615.00-sim 580.159.04-sim; do
        rm -rf "$T/drun"; rm -f "$GPUSLICE_SIM_STATE.memlimits"
        # On 615 NVML is sampled only every 3 s, so the wall the bypass meets is the one set
        # when the first process of its container joined, not the guard's.
        sm=100; [ "$V" = 615.00-sim ] && sm=3000
        GPUSLICE_SIM_DRIVER_VERSION=$V start_daemon --kube-api "$KA" --kube-ca-file "$T/ca.crt" --kube-token-file "$T/token" --node-name node1 --sweep-ms 100 --sample-ms $sm || exit 1
        i=0; while [ $i -lt 100 ] && [ "$(api GET "/v1/tenants/pod-$U1")" != 200 ]; do sleep 0.1; i=$((i + 1)); done
        # A process of the container joins its pod (the interposer loaded).
        rm -f "$T/j.up"
        in_container env LD_PRELOAD="$LIB" "$P" alloc:100 mark:"$T/j.up" sleep:4000 >"$T/join.out" 2>&1 &
        J=$!; BG="$BG $J"
        for i in $(seq 500); do [ -e "$T/j.up" ] && break; sleep 0.02; done
        grep -q "alloc 100 ok" "$T/join.out" && ok "$V: a process of the pod joined and allocated" || { bad "$V: join"; cat "$T/join.out" "$T/dlog" | tail; }
        # One that never loads the interposer, in the same container.
        in_container "$P" alloc:1500 sleep:3000 >"$T/bypass.out" 2>&1 &
        BP=$!; BG="$BG $BP"
        if [ "$V" = 615.00-sim ]; then
            wait "$BP"
            grep -q "alloc 1500 CUDA_ERROR_OUT_OF_MEMORY" "$T/bypass.out" && ok "615: the driver refused 1500 MiB over the pod's 1 GiB (second wall)" || { bad "615: not refused"; cat "$T/bypass.out"; }
            grep -q "second wall: pods' memory limits are also set" "$T/dlog" && ok "615: the daemon says it uses the driver's limits" || bad "615: log"
            want 200 "615: readyz" GET /readyz
            jq_py 'assert d["memory_wall"] == "driver", d' && ok "615: readyz: memory_wall driver" || bad "615: readyz"
            grep -q "^0 1073741824 0 $D1\$" "$GPUSLICE_SIM_STATE.memlimits" && ok "615: the limit is on the container's cgroup" || { bad "615: limits"; cat "$GPUSLICE_SIM_STATE.memlimits"; }
            grep -q "^1 1073741824 0 $D1\$" "$GPUSLICE_SIM_STATE.memlimits" && ok "615: and on the second GPU's, the same cgroup and limit" || { bad "615: no wall on GPU 1"; cat "$GPUSLICE_SIM_STATE.memlimits"; }
        else
            took=0; while kill -0 "$BP" 2>/dev/null && [ $took -lt 150 ]; do sleep 0.01; took=$((took + 1)); done
            grep -q "alloc 1500 ok" "$T/bypass.out" && ! kill -0 "$BP" 2>/dev/null && ok "580: no wall in the driver; the guard stopped it" || { bad "580: bypass"; cat "$T/bypass.out"; }
            grep -q "second wall: none: NVML has nvmlDeviceSetMemoryLimits_v1 but the driver is 580.159.04-sim" "$T/dlog" && ok "580: the daemon says there is no second wall, and why" || { bad "580: log"; grep wall "$T/dlog"; }
            want 200 "580: readyz" GET /readyz
            jq_py 'assert "r615" in d["memory_wall"], d' && ok "580: readyz says why there is no wall" || bad "580: readyz"
        fi
        kill "$J" 2>/dev/null; wait "$J" 2>/dev/null
        stop_daemon
    done
    ;;
daemon_trust_shadow)
    # Review of issue 28: a gpuslice run's ID comes from a file name in a directory anyone may
    # write. A file planted as gpuslice-pod-<uid>.tenant took a pod's tenant away (its processes
    # got no CUDA; one past the interposer ran unlimited), and one named after a managed tenant
    # turned an admin's change onto the planter's own tenant.
    if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
        echo "skip: needs root and setpriv to act as another user"; exit 77
    fi
    . "$SRC/tests/k8s/lib.sh"
    tls_apiserver
    chmod 755 "$T"; chmod 1777 "$GPUSLICE_RUN_DIR"; mkdir -m 777 "$T/nobody"
    setpriv --reuid 65534 --regid 65534 --clear-groups env HOME="$T/nobody" XDG_RUNTIME_DIR="$T/nobody" "$GS" run -q -- sleep 60 &
    BG="$BG $!"
    for i in $(seq 100); do ls "$GPUSLICE_RUN_DIR"/gpuslice-65534-*.tenant >/dev/null 2>&1 && break; sleep 0.05; done
    f=$(ls "$GPUSLICE_RUN_DIR"/gpuslice-65534-*.tenant | head -1)
    UP=88888888-2222-4333-8444-555555555555
    for n in "pod-$UP" train 1; do
        setpriv --reuid 65534 --regid 65534 --clear-groups cp "$f" "$GPUSLICE_RUN_DIR/gpuslice-$n.tenant"
    done
    start_daemon --kube-api "$KA" --kube-ca-file "$T/ca.crt" --kube-token-file "$T/token" --node-name node1 --sweep-ms 100 || exit 1
    want 201 "a managed tenant train for uid 1000" POST /v1/tenants '{"name":"train","owner":1000,"memory":"1G"}'
    kctl -d '{"metadata":{"name":"victim","namespace":"ns1","uid":"'$UP'","annotations":{"gpuslice.io/memory":"1G"}},"spec":{"nodeName":"node1","containers":[{"name":"c"}]}}' "$KC/pods" >/dev/null
    i=0; while [ $i -lt 50 ]; do api GET "/v1/tenants/pod-$UP" >/dev/null; jq_py 'sys.exit(0 if d.get("managed") else 1)' 2>/dev/null && break; sleep 0.1; i=$((i + 1)); done
    jq_py 'assert d["managed"] and d["pod"]["name"] == "victim", d' && ok "the pod's tenant is the pod's, a file planted under its name aside" || { bad "pod tenant shadowed"; cat "$T/body"; grep "has no tenant" "$T/dlog"; }
    ! grep -q "has no tenant" "$T/dlog" && ok "no pod left without a tenant" || bad "a pod without a tenant"
    want 200 "root changes train" PATCH /v1/tenants/train '{"memory":"2G"}'
    jq_py 'assert d["managed"] and d["owner"] == 1000 and d["limits"]["memory"]["default"] == 2 << 30, d' && ok "the change went to the managed tenant, not the planted file's" || { bad "change went astray"; cat "$T/body"; }
    want 200 "tenant 1 by its id" GET /v1/tenants/1
    jq_py 'assert d["managed"], d' && ok "a managed id, not a file named 1" || bad "id shadowed"
    want 400 "a managed name of a gpuslice run's ID's form" POST /v1/tenants '{"name":"1000-123-abc"}'
    want 200 "the planted files are not listed under those names" GET /v1/tenants
    jq_py 'ids=[t["id"] for t in d["tenants"] if not t["managed"]]; assert all(i.count("-") == 2 for i in ids), ids' && ok "gpuslice run IDs only of the form UID-PID-HEX" || { bad "odd IDs listed"; cat "$T/body"; }
    ;;
daemon_trust_lockstall)
    # Review of issue 28: a user's PATCH of her own gpuslice run tenant waited up to 2 s for the
    # tenant's lock, a word she can hold, with the daemon's one lock held: 16 of them stalled
    # every other request, the sampler and the guard for 10 s.
    if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
        echo "skip: needs root and setpriv to act as another user"; exit 77
    fi
    chmod 755 "$T"; chmod 1777 "$GPUSLICE_RUN_DIR"; mkdir -m 777 "$T/nobody"
    start_daemon --socket-group nogroup || exit 1
    as_nobody() { setpriv --reuid 65534 --regid 65534 --clear-groups env HOME="$T/nobody" XDG_RUNTIME_DIR="$T/nobody" GPUSLICE_SIM_STATE="$T/nobody/sim" "$@"; }
    as_nobody "$GS" run -q --memory 1G -- "$P" alloc:10 lockstop >"$T/nobody/ls.out" 2>&1 &
    LS=$!; BG="$BG $LS"
    for i in $(seq 200); do grep -q "^lockstop [0-9]" "$T/nobody/ls.out" 2>/dev/null && break; sleep 0.05; done
    grep -q "^lockstop [0-9]" "$T/nobody/ls.out" && ok "nobody's tenant's lock held by a stopped process" || { bad "lockstop"; cat "$T/nobody/ls.out"; }
    sleep 0.5
    api GET /v1/tenants >/dev/null
    id=$(jq_py 'print([t["id"] for t in d["tenants"] if t["owner"] == 65534][0])')
    for k in $(seq 8); do
        as_nobody curl -s -o /dev/null --max-time 30 --unix-socket "$SOCK" -X PATCH -H 'Content-Type: application/json' -d '{"memory":"512M"}' "http://d/v1/tenants/$id" &
        BG="$BG $!"
    done
    sleep 0.3
    t0=$(date +%s%N)
    api GET /v1/tenants >/dev/null
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    [ $ms -lt 500 ] && ok "root's request answered in $ms ms while 8 PATCHes wait for the held lock" || bad "root's request took $ms ms behind the PATCHes"
    kill -CONT "$(sed -n 's/^lockstop //p' "$T/nobody/ls.out")" 2>/dev/null
    kill "$LS" 2>/dev/null; wait "$LS" 2>/dev/null
    ;;
daemon_trust_members)
    # Review of issue 28: one user filled the node's member table (4096) with sleeping joiners,
    # and every other user's join, and every pod's, failed.
    if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
        echo "skip: needs root and setpriv to act as another user"; exit 77
    fi
    chmod 755 "$T"; mkdir -m 777 "$T/nobody"
    start_daemon --socket-group nogroup --members-per-user 6 --pod-member-reserve 4086 || exit 1
    as_nobody() { setpriv --reuid 65534 --regid 65534 --clear-groups env HOME="$T/nobody" XDG_RUNTIME_DIR="$T/nobody" GPUSLICE_SIM_STATE="$T/nobody/sim" "$@"; }
    as_nobody curl -s -o /dev/null --unix-socket "$SOCK" -H 'Content-Type: application/json' -d '{"name":"many"}' http://d/v1/tenants
    for k in 1 2 3 4 5 6; do
        as_nobody "$GS" run -q --tenant many -- sleep 8 &
        BG="$BG $!"
    done
    sleep 1 # (each joined at its start)
    as_nobody "$GS" run -q --tenant many -- true >"$T/out" 2>"$T/err"; rc=$?
    [ $rc != 0 ] && grep -q "members-per-user" "$T/err" && ok "nobody's seventh joined process: refused, naming members-per-user" || { bad "seventh join: $rc"; cat "$T/err"; }
    want 201 "root's own tenant" POST /v1/tenants '{"name":"rooty"}'
    expect 0 "root still joins" -- "$GS" run -q --tenant rooty -- true
    # The last places are kept for pods: with 4086 kept, 10 are left for every other tenant.
    for k in 1 2 3 4; do "$GS" run -q --tenant rooty -- sleep 8 & BG="$BG $!"; done
    sleep 1
    "$GS" run -q --tenant rooty -- true >"$T/out" 2>"$T/err"; rc=$?
    [ $rc != 0 ] && grep -q "pod-member-reserve" "$T/err" && ok "past the places kept for pods: refused, naming pod-member-reserve" || { bad "reserve: $rc"; cat "$T/err"; }
    ;;
esac

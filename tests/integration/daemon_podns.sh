# Pods on a node whose daemon has a cgroup namespace of its own, pods that are never admins,
# and peers the kernel names (issue 28, items 1 and 6 to 9). Sourced by daemon.sh for its
# daemon_podns_* cases, after its helpers (start_daemon, stop_daemon, api, want, jq_py,
# tenants_until) and run.sh's (T, B, D, P, LIB, expect, ok, bad, stderr_has). Every pod is a
# set of processes in cgroups this case makes, as the kubelet's drivers name them, under the
# machine's writable cgroup hierarchy ($CGB, pod_cgroups); the daemon runs in one of them, in
# cgroup and mount namespaces of its own, as a container of the shipped DaemonSet does on
# cgroup v2.

# podns_setup LETTER: the stand-in API server over TLS ($KA, $KC), the token, $KUBE (the
# daemon's options to follow node1's pods), the daemon's own pod ($DU, its UID), the scripts
# below; 77 where the machine cannot. The daemon's pod UID begins with LETTER, the case's own.
# At its end the case removes the cgroups of the pods in $PODS (each case lists its own: the
# cases run side by side, here and in the other scripts, and none may remove another's).
podns_setup() {
    DU=${1}0d0d0d0-2222-4333-8444-555555555555 PODS=
    . "$SRC/tests/k8s/lib.sh"
    pod_cgroups # CGB
    if ! unshare --cgroup --mount true 2>/dev/null; then
        echo "SKIP: needs unshare --cgroup (root)"; exit 77
    fi
    tls_apiserver --history 400
    KUBE="--kube-api $KA --kube-ca-file $T/ca.crt --kube-token-file $T/token --node-name node1"
    # container.sh ARGS...: in a pod's PID and mount namespaces, the run directory as the
    # webhook's patch mounts it (its pod/ in its place, tenants/ on pod/tenants, read-only),
    # then ARGS with the interposer preloaded.
    printf '%s\n' 'mount --bind "$RUNDIR/tenants" "$RUNDIR/pod/tenants" && mount --rbind "$RUNDIR/pod" "$RUNDIR" && mount -o remount,bind,ro "$RUNDIR" && mount -o remount,bind,ro "$RUNDIR/tenants" || exit 99' \
        'exec env LD_PRELOAD="$PODLIB" "$@"' >"$T/container.sh"
    export RUNDIR="$T/drun" PODLIB="$LIB" CONTAINER_SH="$T/container.sh"
    # nsd.sh CGDIR HOSTCG PROGRAM ARGS...: PROGRAM in cgroup CGDIR, then in cgroup and mount
    # namespaces of its own, as a container runtime starts one on cgroup v2: the host's tree
    # bound at HOSTCG first (the DaemonSet's hostPath), then cgroup v2 mounted again from the
    # new namespace's root where the host had it (the runtime's /sys/fs/cgroup; the host's
    # mount taken off first: the kernel refuses a superblock on its own root). One PID
    # throughout (exec), the daemon's.
    # With FAKECG set, a tree that is not the host's is made there first (fake.sh).
    printf '%s\n' 'cgd=$1 hostcg=$2; shift 2' 'echo $$ >"$cgd/cgroup.procs" || exit 97' \
        'exec unshare --cgroup --mount sh -c '"'"'mount --rbind /sys/fs/cgroup "$0" && umount -l "$1" && mount -t cgroup2 none "$1" && { [ -z "${FAKECG:-}" ] || sh "$FAKESH" "$FAKECG" $$; } && shift && exec "$@"'"'"' "$hostcg" "$CGB" "$@"' >"$T/nsd.sh"
    # fake.sh DIR PID: a cgroup tree at DIR shaped as a host's, each hierarchy's root marked as
    # the kernel marks it, PID listed in /fake/root of each (a copy, or a stale tree).
    cat >"$T/fake.sh" <<'SH'
while IFS=: read -r id ctrl path; do
    if [ -z "$ctrl" ]; then r="$1/unified"; mkdir -p "$r"; : >"$r/cgroup.controllers"
    else r="$1/${ctrl#name=}"; mkdir -p "$r"; : >"$r/release_agent"; fi
    echo 1 >"$r/cgroup.procs"
    mkdir -p "$r/fake/root$path" && echo "$2" >"$r/fake/root$path/cgroup.procs"
done <"/proc/$2/cgroup"
SH
    export FAKESH="$T/fake.sh"
    export CGB
    mkdir -p "$T/hostcg"
    trap 'podns_cleanup; cleanup' EXIT
}
# The cgroups this case made (ones still in use stay: rmdir refuses them).
podns_cleanup() {
    # Its pods' UIDs, exactly.
    cg_cleanup_own $DU $PODS
    # The lookalike user's subtree is daemon_podns_cgroupns' ($LA set).
    [ -n "${LA:-}" ] && [ -d "$CGB/user.slice/user-4242.slice" ] &&
        find "$CGB/user.slice/user-4242.slice" -depth -type d -exec rmdir {} \; 2>/dev/null
    [ -n "${MADE_USER_SLICE:-}" ] && rmdir "$CGB/user.slice" 2>/dev/null
    return 0
}
# cg_systemd QOS UID CID: a container's cgroup as the kubelet's systemd driver names it (QOS
# besteffort, burstable, or "" for a guaranteed pod), made; its path on stdout.
cg_systemd() {
    u=$(echo "$2" | tr - _)
    if [ -n "$1" ]; then d="$CGB/kubepods.slice/kubepods-$1.slice/kubepods-$1-pod$u.slice/cri-containerd-$3.scope"
    else d="$CGB/kubepods.slice/kubepods-pod$u.slice/cri-containerd-$3.scope"; fi
    mkdir -p "$d" && echo "$d"
}
# cg_cgroupfs QOS UID CID: the same as the cgroupfs driver names it.
cg_cgroupfs() { d="$CGB/kubepods${1:+/$1}/pod$2/$3"; mkdir -p "$d" && echo "$d"; }
# in_cg DIR ARGS...: ARGS as a process of the container whose cgroup is DIR (container.sh).
in_cg() {
    d=$1; shift
    sh -c 'echo $$ >"$0/cgroup.procs" && exec unshare --pid --fork --mount --mount-proc sh "$CONTAINER_SH" "$@"' "$d" "$@"
}
# as_cg DIR ARGS...: ARGS in cgroup DIR, seeing the machine as it is (no namespace of its own).
as_cg() { d=$1; shift; sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$d" "$@"; }
# ns_start CGDIR ready|alive OPTIONS...: gpusliced in CGDIR and namespaces of its own (nsd.sh),
# until /readyz says ready (or, alive, until it answers 503 for a reason other than its start:
# before it has read its GPUs and tenants, every daemon answers that, and its pods' side, with
# the reason and the log line a case looks for, is not started yet).
ns_start() {
    cgd=$1 w=$2; shift 2
    env -u LD_LIBRARY_PATH ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=1" sh "$T/nsd.sh" "$cgd" "$T/hostcg" \
        "$D" --foreground --simulated --config /dev/null --run-dir "$T/drun" "$@" >>"$T/dlog" 2>&1 &
    DPID=$!
    BG="$BG $DPID"
    i=0
    while [ $i -lt 100 ]; do
        code=$(curl -s -o "$T/ns_ready" -w '%{http_code}' --unix-socket "$SOCK" http://d/readyz 2>/dev/null)
        { [ "$code" = 200 ] || { [ "$w" = alive ] && [ "$code" = 503 ] && ! grep -q "not read its GPUs" "$T/ns_ready"; }; } && return 0
        sleep 0.05
        i=$((i + 1))
    done
    bad "the daemon did not start"; cat "$T/dlog"; return 1
}
# mpod NS NAME UID ANNOTATIONS [SPEC]: a pod of node1 (SPEC: more of its spec, after nodeName).
mpod() {
    printf '{"metadata":{"name":"%s","namespace":"%s","uid":"%s","annotations":%s},"spec":{"nodeName":"node1","containers":[{"name":"c"}]%s}}' \
        "$2" "$1" "$3" "$4" "${5:-}"
}
PODT='{t["name"]: t for t in d["tenants"] if t["name"].startswith("pod-")}'
C1=$(printf 'c1%062d' 0)
# The daemon's own container (its pod's UID, $DU, is the case's: podns_setup).
DC=$(printf 'dc%062d' 0)

case $CASE in
daemon_podns_cgroupns)
    # Item 1: the daemon in a cgroup namespace of its own reads every other pod's process as
    # 0::/../../../… . It finds where its namespace is rooted (its own PID in the host's tree)
    # and places every path from the hierarchy's root before anchoring it. Items 6 and 9 ride
    # along: the latency class only where the admin allows it; a pod whose only GPU is an
    # init container's is a tenant.
    podns_setup a
    U1=a1111111-2222-4333-8444-555555555555 U2=a2222222-2222-4333-8444-555555555555
    U3=a3333333-2222-4333-8444-555555555555 U4=a4444444-2222-4333-8444-555555555555
    U5=a5555555-2222-4333-8444-555555555555 PODS="$U1 $U2 $U3 $U4 $U5"
    kctl -d "$(mpod gpuslice-system gpusliced-x "$DU" '{"gpuslice.io/memory":"512M"}')" "$KC/pods" >/dev/null
    kctl -d "$(mpod ns1 web "$U1" '{"gpuslice.io/memory":"1G"}')" "$KC/pods" >/dev/null
    kctl -d "$(mpod ns1 cfs "$U2" '{"gpuslice.io/memory":"512M"}')" "$KC/pods" >/dev/null
    kctl -d "$(mpod ns1 initonly "$U3" '{}' ',"initContainers":[{"name":"prep","resources":{"limits":{"nvidia.com/gpumem":"768"}}}]')" "$KC/pods" >/dev/null
    kctl -d "$(mpod rt fast "$U4" '{"tensor-fusion.ai/qos":"critical","gpuslice.io/memory":"1G"}')" "$KC/pods" >/dev/null
    kctl -d "$(mpod ns1 greedy "$U5" '{"gpuslice.io/priority":"latency"}')" "$KC/pods" >/dev/null
    DCG=$(cg_systemd burstable "$DU" "$DC")
    ns_start "$DCG" ready $KUBE --host-cgroup-root "$T/hostcg" --pod-latency-namespaces rt,other || exit 1
    grep -q "a cgroup namespace of its own, rooted at /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$(echo "$DU" | tr - _).slice/cri-containerd-$DC.scope" "$T/dlog" &&
        ok "the daemon found its namespace's root in the host's tree (its own PID)" || { bad "the root found"; cat "$T/dlog"; }
    if tenants_until 10 'sorted('"$PODT"') == sorted(["pod-'"$DU"'", "pod-'"$U1"'", "pod-'"$U2"'", "pod-'"$U3"'", "pod-'"$U4"'", "pod-'"$U5"'"])'; then ok "a tenant per GPU pod"; else bad "pod tenants"; fi
    # Another QoS class under the systemd driver: read as 0::/../../../kubepods-besteffort.slice/...
    expect 0 "a process of pod web (systemd driver, besteffort; the daemon is burstable)" -- \
        in_cg "$(cg_systemd besteffort "$U1" "$C1")" env GPUSLICE_POD=1 "$P" alloc:512 alloc:400 alloc:200
    grep -q "alloc 400 ok" "$T/out" && grep -q "alloc 200 CUDA_ERROR_OUT_OF_MEMORY" "$T/out" && ok "joined, held to web's 1G" || { bad "web from the daemon's namespace"; cat "$T/out" "$T/err"; }
    # The other driver's names, climbing to the hierarchy's root.
    expect 0 "a process of pod cfs (cgroupfs driver: /kubepods/burstable/pod<uid>/<id>)" -- \
        in_cg "$(cg_cgroupfs burstable "$U2" "$C1")" env GPUSLICE_POD=1 "$P" alloc:400 alloc:200
    grep -q "alloc 400 ok" "$T/out" && grep -q "alloc 200 CUDA_ERROR_OUT_OF_MEMORY" "$T/out" && ok "joined, held to cfs's 512M" || { bad "cgroupfs pod"; cat "$T/out" "$T/err"; }
    expect 0 "a process of pod web as a guaranteed pod (kubepods.slice/kubepods-pod<uid>.slice)" -- \
        in_cg "$(cg_systemd "" "$U1" "$C1")" env GPUSLICE_POD=1 "$P" alloc:900 alloc:200
    grep -q "alloc 200 CUDA_ERROR_OUT_OF_MEMORY" "$T/out" && ok "joined, held to web's 1G" || { bad "guaranteed pod"; cat "$T/out" "$T/err"; }
    # Lookalikes are placed where they are. A user's delegated subtree: no pod's, whatever its name.
    [ -d "$CGB/user.slice" ] || MADE_USER_SLICE=1
    LA="$CGB/user.slice/user-4242.slice/user@4242.service/kubepods.slice/kubepods-pod$(echo "$U1" | tr - _).slice/cri-containerd-$C1.scope"
    mkdir -p "$LA"
    expect 1 "GPUSLICE_POD=1 in a user's subtree named as pod web's container" -- in_cg "$LA" env GPUSLICE_POD=1 "$P" alloc:100
    stderr_has "no Kubernetes pod's cgroup"
    expect 0 "the same without GPUSLICE_POD" -- in_cg "$LA" "$P" alloc:2000
    grep -q "alloc 2000 ok" "$T/out" && ok "no pod's limit for it" || { bad "a lookalike got a pod's limit"; cat "$T/out" "$T/err"; }
    # Below the daemon's own namespace root, named as web's container: read as 0::/kubepods.slice/…,
    # which a reader that took it from the hierarchy's root would give web's 1G. It is in the
    # daemon's own container's cgroup: its pod's (512M here), never web's.
    LB="$DCG/kubepods.slice/kubepods-pod$(echo "$U1" | tr - _).slice/cri-containerd-$C1.scope"
    mkdir -p "$LB"
    expect 0 "a process below the daemon's root named as web's container" -- in_cg "$LB" env GPUSLICE_POD=1 "$P" alloc:300 alloc:300
    grep -q "alloc 300 ok" "$T/out" && grep -q "alloc 300 CUDA_ERROR_OUT_OF_MEMORY" "$T/out" && ok "placed where it is: the daemon's own pod's 512M, not web's 1G" || { bad "lookalike below the root"; cat "$T/out" "$T/err"; }
    # Item 9: the only GPU of pod initonly is its init container's: a tenant, with its 768M.
    jq_py 't = '"$PODT"'["pod-'"$U3"'"]; assert t["limits"]["memory"]["default"] == 768 << 20 and not t["pod"]["refused"], t' && ok "pod initonly (GPU on its init container only): a tenant of 768M" || bad "init container's pod"
    expect 0 "a process of pod initonly (its init container)" -- in_cg "$(cg_systemd besteffort "$U3" "$C1")" env GPUSLICE_POD=1 "$P" alloc:500 alloc:300
    grep -q "alloc 500 ok" "$T/out" && grep -q "alloc 300 CUDA_ERROR_OUT_OF_MEMORY" "$T/out" && ok "joined at once, held to 768M" || { bad "init container's process"; cat "$T/out" "$T/err"; }
    # Item 6: latency for namespace rt (listed), not for ns1.
    jq_py 't = '"$PODT"'; assert t["pod-'"$U4"'"]["priority"] == "latency" and not t["pod-'"$U4"'"]["pod"]["refused"], t["pod-'"$U4"'"]; g = t["pod-'"$U5"'"]; assert g["pod"]["refused"] and "gpuslice.io/priority" in g["pod"]["error"] and "pod-latency-namespaces" in g["pod"]["error"] and g["priority"] != "latency", g' &&
        ok "latency: given to rt's pod (tensor-fusion.ai/qos: critical), refused to ns1's (gpuslice.io/priority)" || { bad "latency class"; cat "$T/body"; }
    expect 0 "a process of rt's latency pod" -- in_cg "$(cg_systemd burstable "$U4" "$C1")" env GPUSLICE_POD=1 "$P" alloc:100
    expect 1 "a process of ns1's pod that asked for latency" -- in_cg "$(cg_systemd burstable "$U5" "$C1")" env GPUSLICE_POD=1 "$P" alloc:100
    stderr_has "gpuslice.io/priority"
    stderr_has "pod-latency-namespaces: rt,other"
    i=0; while [ $i -lt 50 ] && ! kctl "$KC/events" | grep -q '"greedy"'; do sleep 0.1; i=$((i + 1)); done
    kctl "$KC/events" >"$T/events"
    python3 -c 'import json,sys; e=[x for x in json.load(open(sys.argv[1])) if x["involvedObject"]["name"]=="greedy"]; assert len(e)==1 and e[0]["type"]=="Warning" and "latency" in e[0]["message"], e' "$T/events" && ok "a Warning Event on pod greedy naming the latency class" || { bad "event"; cat "$T/events"; }
    api GET /metrics >/dev/null
    grep -q '^gpuslice_pod_cgroups_placed 1$' "$T/body" && ok "metrics: pods' cgroups placed" || { bad "placed metric"; grep cgroups_placed "$T/body"; }
    stop_daemon
    # The daemon in a container named by the cgroupfs driver instead.
    ns_start "$(cg_cgroupfs besteffort "$DU" "$DC")" ready $KUBE --host-cgroup-root "$T/hostcg" || exit 1
    grep -q "rooted at /kubepods/besteffort/pod$DU/$DC" "$T/dlog" && ok "the cgroupfs driver's daemon: its root found" || { bad "cgroupfs daemon root"; cat "$T/dlog"; }
    expect 0 "a process of pod web (systemd names) from the cgroupfs-named daemon" -- \
        in_cg "$(cg_systemd besteffort "$U1" "$C1")" env GPUSLICE_POD=1 "$P" alloc:900 alloc:200
    grep -q "alloc 200 CUDA_ERROR_OUT_OF_MEMORY" "$T/out" && ok "joined, held to web's 1G" || { bad "from the cgroupfs-named daemon"; cat "$T/out" "$T/err"; }
    stop_daemon
    # Without the host's tree (its /sys/fs/cgroup is its namespace's own mount): never guessed.
    ns_start "$DCG" alive $KUBE || exit 1
    code=$(api GET /readyz)
    [ "$code" = 503 ] && grep -q "not mounted from the root" "$T/body" && grep -q "host-cgroup-root" "$T/body" && ok "/readyz: 503, saying why ($(jq_py 'print(d["error"]["message"][:100])'))" || { bad "readyz without the host's tree: $code"; cat "$T/body"; }
    # (Said when the pods' side starts, which may come a moment after /readyz answers.)
    for i in $(seq 100); do grep -q "pods' processes cannot be told by their cgroup, and are refused" "$T/dlog" && break; sleep 0.05; done
    grep -q "pods' processes cannot be told by their cgroup, and are refused" "$T/dlog" && ok "the log says so" || { bad "no log line"; cat "$T/dlog"; }
    # (The pods' series are an admin's: asked from the daemon's own container.)
    as_cg "$DCG" curl -s -o "$T/body" --unix-socket "$SOCK" http://d/metrics
    grep -q '^gpuslice_pod_cgroups_placed 0$' "$T/body" && ok "metrics: gpuslice_pod_cgroups_placed 0" || { bad "placed metric 0"; grep cgroups_placed "$T/body"; }
    # Nor is a peer of the API that climbs out of the daemon's namespace told from a pod's: the
    # host's root is no admin here (it sees no one's tenants); a process of the daemon's own
    # container (kubectl exec) is.
    api GET /v1/tenants >/dev/null
    jq_py 'assert d["tenants"] == [], d' && ok "the host's root, not placed: taken for a pod's peer (sees nothing)" || { bad "an unplaced peer"; cat "$T/body"; }
    as_cg "$DCG" curl -s -o "$T/body" --unix-socket "$SOCK" http://d/v1/tenants
    jq_py 'assert "pod-'"$U1"'" in '"$PODT"', d' && ok "root in the daemon's own container sees every tenant" || { bad "the daemon's container"; cat "$T/body"; }
    expect 1 "a process of pod web" -- in_cg "$(cg_systemd besteffort "$U1" "$C1")" env GPUSLICE_POD=1 "$P" alloc:100
    stderr_has "cannot tell which pod"
    as_cg "$DCG" curl -s -o "$T/body" --unix-socket "$SOCK" http://d/metrics
    grep -q '^gpuslice_pod_join_unplaced_total [1-9]' "$T/body" && ok "counted as unplaced" || { bad "unplaced counter"; grep unplaced "$T/body"; }
    stop_daemon
    # A tree that lists the daemon's PID but is not the host's (a copy): kthreadd, a kernel
    # thread at the root of every hierarchy, does not place at its roots. Refused.
    FAKECG="$T/fakecg" ns_start "$DCG" alive $KUBE --host-cgroup-root "$T/fakecg" || exit 1
    code=$(api GET /readyz)
    [ "$code" = 503 ] && grep -q "kthreadd" "$T/body" && ok "a tree that is not the host's: /readyz 503 ($(jq_py 'print(d["error"]["message"][60:160])'))" || { bad "a copied tree believed: $code"; cat "$T/body"; } ;;
daemon_podns_admin)
    # Item 7: a pod mounts the run directory's pod/ only (the webhook's patch): what a pod's
    # process needs, not the API's socket. And a process in a pod's cgroup that reaches the API
    # all the same (a hostPath of its own, hostNetwork to a TCP listener without the token) is
    # never an admin, whatever its uid: root in a container is not root of the node.
    podns_setup b
    U1=b1111111-2222-4333-8444-555555555555 PODS=$U1
    kctl -d "$(mpod ns1 web "$U1" '{"gpuslice.io/memory":"1G"}')" "$KC/pods" >/dev/null
    kctl -d "$(mpod gpuslice-system gpusliced-x "$DU" '{}')" "$KC/pods" >/dev/null
    DCG=$(cg_systemd burstable "$DU" "$DC")
    ns_start "$DCG" ready $KUBE --host-cgroup-root "$T/hostcg" || exit 1
    if tenants_until 10 '"pod-'"$U1"'" in '"$PODT"; then ok "pod web's tenant"; else bad "pod tenant"; fi
    WEB=$(cg_systemd besteffort "$U1" "$C1")
    expect 0 "what a pod's process sees of the run directory" -- in_cg "$WEB" sh -c 'ls -A "$RUNDIR" | tr "\n" " "'
    [ "$(cat "$T/out")" = "gpusliced.boards gpusliced.node gpusliced.pods tenants " ] && ok "the node segment, the pods' and boards' sockets, tenants/: no API socket" || { bad "the pod's view: $(cat "$T/out")"; cat "$T/err"; }
    for f in gpusliced.node gpusliced.pods gpusliced.boards; do
        [ "$(stat -c %i "$T/drun/$f")" = "$(stat -c %i "$T/drun/pod/$f")" ] || bad "pod/$f is not the run directory's $f"
    done
    ok "pod/'s entries are the run directory's own (hard links)"
    expect 7 "curl to the API's socket from the pod" -- in_cg "$WEB" curl -s --unix-socket "$T/drun/gpusliced.sock" http://d/v1/tenants
    expect 0 "a process of the pod" -- in_cg "$WEB" env GPUSLICE_POD=1 "$P" alloc:900 alloc:200
    grep -q "alloc 900 ok" "$T/out" && grep -q "alloc 200 CUDA_ERROR_OUT_OF_MEMORY" "$T/out" && ok "joined through pod/, held to its 1G" || { bad "pod/ alone"; cat "$T/out" "$T/err"; }
    expect 2 "writing the node segment from the pod" -- in_cg "$WEB" sh -c "echo x >>'$T/drun/gpusliced.node'"
    stderr_has "Read-only file system"
    # A tenant of another user's (nobody), and one of root's.
    want 201 "the host's root makes nobody's tenant" POST /v1/tenants '{"name":"other","owner":65534,"memory":"1G"}'
    want 201 "and one of its own" POST /v1/tenants '{"name":"mine","memory":"1G"}'
    # capi DIR METHOD PATH [BODY]: the API from cgroup DIR, as root; the status, the body in $T/body.
    capi() {
        d=$1; shift
        if [ $# -ge 3 ]; then
            as_cg "$d" curl -s -o "$T/body" -w '%{http_code}' --unix-socket "$SOCK" -X "$1" -H 'Content-Type: application/json' --data-binary "$3" "http://d$2"
        else
            as_cg "$d" curl -s -o "$T/body" -w '%{http_code}' --unix-socket "$SOCK" -X "$1" "http://d$2"
        fi
    }
    code=$(capi "$WEB" PATCH /v1/tenants/other '{"memory":"8G"}')
    [ "$code" = 403 ] || [ "$code" = 404 ] && ok "root in pod web: raising nobody's tenant refused ($code)" || { bad "root in a pod raised another's tenant: $code"; cat "$T/body"; }
    code=$(capi "$WEB" POST /v1/tenants '{"name":"rt","priority":"latency"}')
    [ "$code" = 403 ] && ok "root in pod web: a latency tenant refused (403)" || { bad "root in a pod made a latency tenant: $code"; cat "$T/body"; }
    code=$(capi "$WEB" DELETE /v1/tenants/mine)
    [ "$code" = 403 ] || [ "$code" = 404 ] && ok "root in pod web: root's tenant is not its own ($code)" || { bad "root in a pod ended root's tenant: $code"; cat "$T/body"; }
    capi "$WEB" GET /v1/tenants >/dev/null
    jq_py 'assert not [t for t in d["tenants"] if t["name"] in ("other", "mine")], d' && ok "root in pod web sees neither" || { bad "a pod's root sees others' tenants"; cat "$T/body"; }
    api GET /v1/tenants/other >/dev/null
    jq_py 'assert d["limits"]["memory"]["default"] == 1 << 30, d' && ok "nobody's tenant is still 1G" || bad "other changed"
    # The daemon's own pod (kubectl exec into the DaemonSet's container) and the host's root: admins.
    code=$(capi "$DCG" PATCH /v1/tenants/other '{"memory":"2G"}')
    [ "$code" = 200 ] && ok "root in the daemon's own container: an admin (200)" || { bad "the daemon's container: $code"; cat "$T/body"; }
    want 200 "the host's root: an admin" PATCH /v1/tenants/other '{"memory":"3G"}' ;;
daemon_podns_pidreuse)
    # Item 8: a peer's PID, recycled between its connect() and the daemon's reading of /proc,
    # must not lend it another process's cgroup or groups. The daemon, and every process here,
    # runs in a PID namespace of its own, whose ns_last_pid the test sets: the daemon is stopped
    # (SIGSTOP), process A connects (the kernel keeps A's credentials and PID for the
    # connection) and exits, a process C of another pod (or another user's with the admin
    # group) takes A's PID, the daemon goes on and answers the connection, which A's parent
    # holds. Before: it was answered as C (another pod's tenant file; an admin's request).
    podns_setup c
    AG=
    for g in audio video games users plugdev; do getent group "$g" >/dev/null && AG=$g && break; done
    { [ -n "$AG" ] && getent group nogroup >/dev/null; } || { echo "SKIP: no group to be the admin group, or no nogroup"; exit 77; }
    chmod 755 "$T" # nobody reaches the API's socket (mode 0660, group nogroup)
    AGID=$(getent group "$AG" | cut -d: -f3)
    UX=c1111111-2222-4333-8444-555555555555 UY=c2222222-2222-4333-8444-555555555555 PODS="$UX $UY"
    kctl -d "$(mpod ns1 x "$UX" '{"gpuslice.io/memory":"1G"}')" "$KC/pods" >/dev/null
    kctl -d "$(mpod ns1 y "$UY" '{"gpuslice.io/memory":"2G"}')" "$KC/pods" >/dev/null
    export CGX="$(cg_systemd besteffort "$UX" "$C1")" CGY="$(cg_systemd besteffort "$UY" "$C1")"
    cat >"$T/reuse.py" <<'PY'
# reuse.py pods|api SOCKET DAEMON-PID: the daemon stopped, A (in pod x's cgroup; for api, as
# nobody without groups, in no pod, its request sent) connects and exits; C takes its PID (in
# pod y's cgroup; for api, nobody with the admin group, in no pod); the daemon goes on. Prints
# "reuse A C", then what the daemon answered A's connection.
import os, signal, socket, sys, time
mode, path, dpid = sys.argv[1], sys.argv[2], int(sys.argv[3])
agid = int(os.environ["AGID"])
def move(cg):
    with open(cg + "/cgroup.procs", "w") as f:
        f.write(str(os.getpid()))
def as_nobody(groups):
    os.setgroups(groups); os.setgid(65534); os.setuid(65534)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
r, w = os.pipe()
os.kill(dpid, signal.SIGSTOP)
try:
    a = os.fork()
    if a == 0:
        # For the API, no pod's cgroup (a pod's process is no admin anyway): only the PID counts.
        if mode == "api":
            as_nobody([])
        else:
            move(os.environ["CGX"])
        s.connect(path)
        if mode == "api":
            body = b'{"memory":"8G"}'
            s.sendall(b"PATCH /v1/tenants/other HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        os._exit(0)
    os.waitpid(a, 0)
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(a - 1))
    c = os.fork()
    if c == 0:
        try:
            if mode == "api":
                as_nobody([agid])
            else:
                move(os.environ["CGY"])
        finally:
            os.write(w, b"x") # said whatever happened: the daemon is stopped meanwhile
        time.sleep(20)
        os._exit(0)
    import select
    select.select([r], [], [], 10)
    print("reuse", a, c, flush=True)
finally:
    os.kill(dpid, signal.SIGCONT)
s.settimeout(10)
got = b""
try:
    while True:
        k = s.recv(4096)
        if not k:
            break
        got += k
except socket.timeout:
    pass
print(got.decode(errors="replace").replace("\r", "").split("\n\n")[0].split("\n")[0])
os.kill(c, signal.SIGKILL)
os.waitpid(c, 0)
PY
    cat >"$T/reuse.sh" <<'SH'
# In a PID namespace of its own: the daemon, then reuse.py against its two sockets.
"$D" --foreground --simulated --config /dev/null --run-dir "$T/drun" $KUBE --admin-group "$AG" --socket-group nogroup >>"$T/dlog" 2>&1 &
DP=$!
i=0; while [ $i -lt 100 ] && [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$T/drun/gpusliced.sock" http://d/readyz)" != 200 ]; do sleep 0.05; i=$((i + 1)); done
i=0; while [ $i -lt 100 ] && ! curl -s --unix-socket "$T/drun/gpusliced.sock" http://d/v1/tenants | grep -q "pod-$UY"; do sleep 0.1; i=$((i + 1)); done
curl -s -o /dev/null -H 'Content-Type: application/json' --unix-socket "$T/drun/gpusliced.sock" -d '{"name":"other","owner":65534,"memory":"1G"}' http://d/v1/tenants
python3 "$T/reuse.py" pods "$T/drun/gpusliced.pods" $DP >"$T/reuse.pods" 2>&1
python3 "$T/reuse.py" api "$T/drun/gpusliced.sock" $DP >"$T/reuse.api" 2>&1
curl -s --unix-socket "$T/drun/gpusliced.sock" http://d/v1/tenants/other >"$T/reuse.other"
kill $DP; wait $DP; echo $? >"$T/reuse.rc"
SH
    export T D KUBE AG AGID UY
    unshare --pid --fork --mount --mount-proc sh "$T/reuse.sh"
    for m in pods api; do
        set -- $(head -1 "$T/reuse.$m")
        [ "${1:-}" = reuse ] && [ "$2" = "$3" ] && ok "$m: PID $2 of the connecting process taken by another ($3) before the daemon read it" || { bad "$m: no PID reused"; cat "$T/reuse.$m"; }
    done
    ans=$(sed -n 2p "$T/reuse.pods")
    case $ans in
    error*) ok "the pods' socket: \"$ans\"" ;;
    *) bad "the pods' socket answered a recycled PID: $ans" ;;
    esac
    ans=$(sed -n 2p "$T/reuse.api")
    case $ans in
    *" 200 "*) bad "the API took a recycled PID's groups: $ans" ;;
    HTTP/1.1\ 4*) ok "the API: $ans" ;;
    *) bad "the API answered $ans" ;;
    esac
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["limits"]["memory"]["default"] == 1 << 30, d' "$T/reuse.other" && ok "nobody's tenant is still 1G" || { bad "raised through a recycled PID"; cat "$T/reuse.other"; }
    [ "$(cat "$T/reuse.rc")" = 0 ] && ! grep -q Sanitizer "$T/dlog" && ok "the daemon stopped cleanly" || { bad "the daemon's exit"; tail -20 "$T/dlog"; } ;;
esac

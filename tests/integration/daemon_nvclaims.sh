# Pods whose GPUs come from NVIDIA's DRA driver with ConsumableShares (sourced by daemon.sh):
# the stand-in API server (over TLS) holds gpu.nvidia.com's ResourceSlice of node1, as the
# driver publishes it (device gpu-0, attribute uuid, capacity memory shared), and claims
# allocated on it as the scheduler leaves them (results with consumedCapacity, reservedFor the
# pod); the pods name them only through spec.resourceClaims and status.resourceClaimStatuses.
# gpusliced makes each pod's tenant with the claims' memory on the GPU's UUID.
. "$SRC/tests/k8s/lib.sh"
pod_cgroups # CGB
tls_apiserver
UUID0=GPU-5ac1ce00-0000-4000-8000-000000000000
C1=$(printf 'e1%062d' 0)
# nvclaim NAME CLAIM-UID POD-NAME POD-UID DEVICE POOL [MEMORY]: a claim of ns1 allocated to
# DEVICE of gpu.nvidia.com in POOL, consuming MEMORY (none: a whole GPU), reserved for the pod.
nvclaim() {
    cc= req=
    [ -n "${7:-}" ] && cc=',"consumedCapacity":{"memory":"'"$7"'"}' && req='"capacity":{"requests":{"memory":"'"$7"'"}},'
    kctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"'"$1"'","namespace":"ns1","uid":"'"$2"'"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{'"$req"'"deviceClassName":"gpu.nvidia.com"}}]}},"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"'"$6"'","device":"'"$5"'","shareID":"0f1e2d3c"'"$cc"'}]}},"reservedFor":[{"resource":"pods","name":"'"$3"'","uid":"'"$4"'"}]}}' "$KC/objects" >/dev/null
}
# nvpod NAME UID CLAIM [ANNOTATIONS-JSON]: a pod of ns1 on node1 whose claim "gpu" comes from
# a template, its generated claim named CLAIM by the status; container main (C1) uses it.
nvpod() {
    ann=${4:-'{}'}
    printf '{"metadata":{"name":"%s","namespace":"ns1","uid":"%s","annotations":%s},"spec":{"nodeName":"node1","resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"gpu-share"}],"containers":[{"name":"main","resources":{"claims":[{"name":"gpu"}]}}]},"status":{"resourceClaimStatuses":[{"name":"gpu","resourceClaimName":"%s"}],"containerStatuses":[{"name":"main","containerID":"containerd://%s"}]}}' "$1" "$2" "$ann" "$3" "$C1"
}
# in_pod UID CID ARGS...: ARGS in that container's cgroup, new PID and mount namespaces, the
# run directory mounted as the webhook's patch mounts it (daemon_pod_tenants' container.sh).
in_pod() {
    d="$CGB/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$(echo "$1" | tr - _).slice/cri-containerd-$2.scope"
    mkdir -p "$d"; shift 2
    sh -c 'echo $$ >"$0/cgroup.procs" && exec unshare --pid --fork --mount --mount-proc sh "$CONTAINER_SH" "$@"' "$d" "$@"
}
printf '%s\n' 'mount --bind "$RUNDIR/tenants" "$RUNDIR/pod/tenants" && mount --rbind "$RUNDIR/pod" "$RUNDIR" && mount -o remount,bind,ro "$RUNDIR" && mount -o remount,bind,ro "$RUNDIR/tenants" || exit 99' \
    'exec env GPUSLICE_POD=1 LD_PRELOAD="$PODLIB" "$@"' >"$T/container.sh"
export RUNDIR="$T/drun" PODLIB="$LIB" CONTAINER_SH="$T/container.sh"
# tenant_until SECONDS UID PYTHON-CONDITION on d (GET /v1/tenants/pod-UID)
tenant_until() {
    i=0; while [ $i -lt $(($1 * 10)) ]; do
        [ "$(api GET /v1/tenants/pod-$2)" = 200 ] && jq_py "sys.exit(0 if ($3) else 1)" 2>/dev/null && return 0
        sleep 0.1; i=$((i + 1))
    done
    cat "$T/body"; echo; return 1
}

case $CASE in
daemon_nvclaims)
    U1=a1a1a1a1-0000-4000-8000-000000000001 U2=a2a2a2a2-0000-4000-8000-000000000002
    U3=a3a3a3a3-0000-4000-8000-000000000003 U4=a4a4a4a4-0000-4000-8000-000000000004
    U5=a5a5a5a5-0000-4000-8000-000000000005
    U7=a7a7a7a7-0000-4000-8000-000000000007
    trap 'cg_cleanup_own $U1 $U2 $U3 $U4 $U5 $U7 a8a8a8a8-0000-4000-8000-000000000008; cleanup' EXIT
    # Two GPUs, of which NVIDIA's slice lists the first until later.
    export GPUSLICE_SIM_DEVICES=2 GPUSLICE_SIM_STATE="$T/sim2.state"
    UUID1=GPU-5ac1ce00-0000-4000-8000-000000000001
    # NVIDIA's slice of node1 (ConsumableShares, --consumable-shares=memory), and another node's.
    for n in node1 node2; do
        u=$UUID0; [ $n = node2 ] && u=GPU-0ddba11e-0000-4000-8000-000000000000
        kctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"'$n'-gpu.nvidia.com-x7k2p"},"spec":{"driver":"gpu.nvidia.com","nodeName":"'$n'","pool":{"name":"'$n'","generation":1,"resourceSliceCount":1},"devices":[{"name":"gpu-0","allowMultipleAllocations":true,"attributes":{"type":{"string":"gpu"},"uuid":{"string":"'$u'"},"productName":{"string":"NVIDIA H100 80GB HBM3"}},"capacity":{"memory":{"value":"16Gi","requestPolicy":{"default":"16Gi","validRange":{"min":"1Mi","max":"16Gi","step":"1Mi"}}}}}]}}' "$KC/objects" >/dev/null
    done
    nvclaim nv-4g cccc0001-0000-4000-8000-000000000001 web "$U1" gpu-0 node1 4Gi
    nvclaim nv-gone cccc0002-0000-4000-8000-000000000002 gone "$U2" gpu-3 node1 4Gi
    nvclaim nv-whole cccc0003-0000-4000-8000-000000000003 whole "$U3" gpu-0 node1
    nvclaim nv-both cccc0004-0000-4000-8000-000000000004 both "$U4" gpu-0 node1 4Gi
    kctl -d "$(nvpod web "$U1" nv-4g)" "$KC/pods" >/dev/null
    kctl -d "$(nvpod gone "$U2" nv-gone)" "$KC/pods" >/dev/null
    kctl -d "$(nvpod whole "$U3" nv-whole)" "$KC/pods" >/dev/null
    kctl -d "$(nvpod both "$U4" nv-both '{"gpuslice.io/memory":"2G"}')" "$KC/pods" >/dev/null
    # 36 pods more, each with a claim of 1Gi: more than two passes of the claims' reader take
    # (16 each), all listed at once when the daemon starts.
    for k in $(seq 10 45); do
        nvclaim "nv-m$k" "cccc10$k-0000-4000-8000-000000000000" "m$k" "b0b0b0$k-0000-4000-8000-000000000000" gpu-0 node1 1Gi
        printf '{"metadata":{"name":"m%s","namespace":"ns1","uid":"b0b0b0%s-0000-4000-8000-000000000000"},"spec":{"nodeName":"node1","resourceClaims":[{"name":"gpu","resourceClaimName":"nv-m%s"}],"containers":[{"name":"main","resources":{"claims":[{"name":"gpu"}]}}]},"status":{"containerStatuses":[{"name":"main","containerID":"containerd://f%s%061d"}]}}' \
            "$k" "$k" "$k" "$k" 0 >"$T/pod.json"
        kctl -d @"$T/pod.json" "$KC/pods" >/dev/null
    done
    start_daemon --kube-api "$KA" --kube-ca-file "$T/ca.crt" --kube-token-file "$T/token" --node-name node1 || exit 1
    # All 40 pods' claims read within 8 s of the start (of the wall clock: each look takes a
    # while on a loaded machine), though a pass takes 16: the reader goes on at once (the retry
    # of claims that failed is 10 s away).
    t0=$(date +%s%N); ms=0; n=0
    while [ $ms -lt 8000 ]; do
        api GET /v1/tenants >/dev/null
        n=$(jq_py 'print(len([t for t in d["tenants"] if (t.get("pod") or {}).get("name", "").startswith("m") and t["limits"]["memory"].get("'"$UUID0"'") == 1 << 30]))')
        ms=$((($(date +%s%N) - t0) / 1000000))
        [ "$n" = 36 ] && break
        sleep 0.1
    done
    [ "$n" = 36 ] && [ $ms -lt 8000 ] && ok "40 pods with claims: the 36 pods m10..m45 hold their 1 GiB $ms ms after the start" || { bad "claims past the first 16 not read at once: $n of 36 after $ms ms"; grep -c '"m[0-9]*"' "$T/body"; }
    # A pod with only an NVIDIA claim (no annotation, no nvidia.com/gpu) is a GPU pod: its tenant
    # holds the claim's consumedCapacity.memory on the GPU's UUID.
    tenant_until 10 "$U1" 'd["limits"]["memory"].get("'"$UUID0"'") == 4 << 30' && ok "pod web's tenant: 4 GiB on $UUID0, from its claim" || bad "web's tenant"
    jq_py 'assert d["pod"]["name"] == "web" and not d["pod"]["refused"] and d["pod"]["memory_limit_bytes_total"] == 4 << 30, d' && ok "not refused; its limit total 4 GiB" || { bad "web's pod view"; cat "$T/body"; }
    expect 0 "a process of pod web's container" -- in_pod "$U1" "$C1" "$P" total alloc:3000 alloc:1000 alloc:900
    grep -q "total $((4 << 30))" "$T/out" && grep -q "alloc 1000 ok" "$T/out" && grep -q "alloc 900 CUDA_ERROR_OUT_OF_MEMORY" "$T/out" && ok "it sees 4 GiB and is held to it" || { bad "web's process"; cat "$T/out" "$T/err"; }
    # A claim whose device is in no slice of the node: refused, naming the claim; never unlimited.
    tenant_until 10 "$U2" 'd["pod"]["refused"]' && ok "pod gone is refused" || bad "gone not refused"
    jq_py 'e = d["pod"]["error"]; assert "ns1/nv-gone" in e and "gpu-3" in e, e' && ok "the reason names claim ns1/nv-gone and device gpu-3" || { bad "gone's reason"; cat "$T/body"; }
    expect 1 "a process of pod gone" -- in_pod "$U2" "$C1" "$P" alloc:100
    stderr_has "nv-gone"
    # A whole-GPU claim (no consumedCapacity): no limit from it.
    tenant_until 10 "$U3" 'not d["pod"]["refused"] and not any(d["limits"]["memory"].values())' && ok "pod whole: a tenant with no memory limit" || bad "whole's tenant"
    expect 0 "a process of pod whole" -- in_pod "$U3" "$C1" "$P" alloc:9000
    grep -q "alloc 9000 ok" "$T/out" && ok "it holds 9000M" || { bad "whole's process"; cat "$T/out" "$T/err"; }
    # Annotation 2G beside a claim of 4Gi: the smaller, 2 GiB, on the GPU.
    tenant_until 10 "$U4" 'd["limits"]["memory"].get("'"$UUID0"'") == 2 << 30' && ok "pod both: 2 GiB on the GPU (annotation 2G, claim 4Gi)" || bad "both's tenant"
    expect 0 "a process of pod both" -- in_pod "$U4" "$C1" "$P" alloc:1500 alloc:600
    grep -q "alloc 1500 ok" "$T/out" && grep -q "alloc 600 CUDA_ERROR_OUT_OF_MEMORY" "$T/out" && ok "held to 2 GiB" || { bad "both's process"; cat "$T/out" "$T/err"; }
    # Claims that cannot be read (403): refused by name; readable again, the pod gets its limit.
    kctl -d '{"verb":"get","resource":"resourceclaims"}' "$KC/deny" >/dev/null
    nvclaim nv-late cccc0005-0000-4000-8000-000000000005 late "$U5" gpu-0 node1 3Gi
    kctl -d "$(nvpod late "$U5" nv-late)" "$KC/pods" >/dev/null
    tenant_until 10 "$U5" 'd["pod"]["refused"] and "ns1/nv-late cannot be read" in d["pod"]["error"]' && ok "an unreadable claim: pod late refused, naming it" || bad "late not refused"
    kctl -d '{"clear":true}' "$KC/deny" >/dev/null
    tenant_until 20 "$U5" 'not d["pod"]["refused"] and d["limits"]["memory"].get("'"$UUID0"'") == 3 << 30' && ok "readable again: pod late gets its 3 GiB" || bad "late not recovered"
    # The API server cannot answer (503) when the pod changes: the claims' limits are kept as
    # last read (an allocation holds while its claim is reserved), not refused for a blip.
    kctl -d '{"verb":"get","resource":"resourceclaims","code":503}' "$KC/deny" >/dev/null
    kctl -d "$(nvpod late "$U5" nv-late '{"example.com/changed":"1"}')" "$KC/pods" >/dev/null
    i=0; while [ $i -lt 100 ] && ! grep -q "pod ns1/late: its claims' limits kept as last read" "$T/dlog"; do sleep 0.1; i=$((i + 1)); done
    grep -q "pod ns1/late: its claims' limits kept as last read: claim ns1/nv-late" "$T/dlog" && ok "503 on a changed pod: its limits kept, the log says so" || { bad "no 'kept as last read'"; tail -5 "$T/dlog"; }
    tenant_until 2 "$U5" 'not d["pod"]["refused"] and d["limits"]["memory"].get("'"$UUID0"'") == 3 << 30' && ok "pod late: still 3 GiB, not refused" || bad "late lost its limit on a 503"
    expect 0 "a process of pod late during the 503s" -- in_pod "$U5" "$C1" "$P" alloc:2800 alloc:400
    grep -q "alloc 2800 ok" "$T/out" && grep -q "alloc 400 CUDA_ERROR_OUT_OF_MEMORY" "$T/out" && ok "held to 3 GiB" || { bad "late's process"; cat "$T/out" "$T/err"; }
    # A refusal (403) on the same change is one: the pod is refused, naming the claim.
    kctl -d '{"clear":true}' "$KC/deny" >/dev/null
    kctl -d '{"verb":"get","resource":"resourceclaims"}' "$KC/deny" >/dev/null
    kctl -d "$(nvpod late "$U5" nv-late '{"example.com/changed":"2"}')" "$KC/pods" >/dev/null
    tenant_until 10 "$U5" 'd["pod"]["refused"] and "ns1/nv-late cannot be read" in d["pod"]["error"]' && ok "403 on a changed pod: refused" || bad "late not refused on a 403"
    kctl -d '{"clear":true}' "$KC/deny" >/dev/null
    # A GPU NVIDIA's driver publishes after the daemon read the slices: a claim on it sends the
    # daemon to the slices again, and the pod gets its limit on that GPU at the first reading.
    kctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"node1-gpu.nvidia.com-x7k2p"},"spec":{"driver":"gpu.nvidia.com","nodeName":"node1","pool":{"name":"node1","generation":2,"resourceSliceCount":1},"devices":[{"name":"gpu-0","allowMultipleAllocations":true,"attributes":{"type":{"string":"gpu"},"uuid":{"string":"'$UUID0'"}},"capacity":{"memory":{"value":"16Gi"}}},{"name":"gpu-1","allowMultipleAllocations":true,"attributes":{"type":{"string":"gpu"},"uuid":{"string":"'$UUID1'"}},"capacity":{"memory":{"value":"16Gi"}}}]}}' "$KC/objects" >/dev/null
    nvclaim nv-g1 cccc0007-0000-4000-8000-000000000007 g1 "$U7" gpu-1 node1 2Gi
    kctl -d "$(nvpod g1 "$U7" nv-g1)" "$KC/pods" >/dev/null
    tenant_until 10 "$U7" 'd["pod"]["refused"] or d["limits"]["memory"].get("'"$UUID1"'")' || bad "pod g1: no tenant"
    jq_py 'assert not d["pod"]["refused"] and d["limits"]["memory"].get("'"$UUID1"'") == 2 << 30, d' && ok "pod g1: 2 GiB on $UUID1 at the first reading, never refused" || { bad "g1 refused first"; cat "$T/body"; }
    # One pod's claim read alone brings its tenant up to date at once, not at the next retry
    # of failed claims (10 s away): pod g2, just after g1, holds its 1 GiB within 8 s.
    U8=a8a8a8a8-0000-4000-8000-000000000008
    nvclaim nv-g2 cccc0008-0000-4000-8000-000000000008 g2 "$U8" gpu-1 node1 1Gi
    t0=$(date +%s%N)
    kctl -d "$(nvpod g2 "$U8" nv-g2)" "$KC/pods" >/dev/null
    tenant_until 20 "$U8" 'd["limits"]["memory"].get("'"$UUID1"'") == 1 << 30' || bad "pod g2's claim never applied"
    ms=$((($(date +%s%N) - t0) / 1000000))
    [ $ms -lt 8000 ] && ok "pod g2, one claim read alone: 1 GiB on $UUID1 after $ms ms" || bad "pod g2's claim applied after $ms ms, not within 8 s"
    # More claims than are followed: refused (their limits cannot all be known), with an Event.
    U6=a6a6a6a6-0000-4000-8000-000000000006
    rc=$(python3 -c 'import json; print(json.dumps([{"name": "r%d" % i, "resourceClaimName": "c%d" % i} for i in range(9)]))')
    kctl -d '{"metadata":{"name":"many","namespace":"ns1","uid":"'"$U6"'"},"spec":{"nodeName":"node1","resourceClaims":'"$rc"',"containers":[{"name":"main"}]}}' "$KC/pods" >/dev/null
    tenant_until 10 "$U6" 'd["pod"]["refused"] and "more than 8 resource claims" in d["pod"]["error"]' && ok "nine claims: pod many refused" || bad "many not refused"
    kctl "$KC/events" >"$T/events"
    grep -q "nv-gone" "$T/events" && ok "a Warning Event names the claim" || { bad "no event for nv-gone"; cat "$T/events"; }
    grep -q "nv-g1" "$T/events" && { bad "an Event refused pod g1"; grep nv-g1 "$T/events"; }
    stop_daemon
    ;;
esac

# gpusliced as the DRA driver gpu.gpuslice.io (sourced by daemon.sh): on the simulated GPU
# (16 GiB), against the stand-in API server taught resource.k8s.io/v1 (tests/k8s/apiserver.py),
# the test allocator that plays the scheduler by KEP-5075's rules (tests/k8s/allocator.py), and
# the kubelet's side on a real gRPC library (tests/k8s/kubelet.py, Debian's python3-grpcio).
# Every directory is the case's own: the kubelet's registry and plugin directories, the CDI
# directory and NVIDIA's are under $T.
. "$SRC/tests/k8s/lib.sh"
KPY=
for p in /usr/bin/python3 python3; do
    if "$p" -c 'import grpc, google.protobuf' 2>/dev/null; then KPY=$p; break; fi
done
[ -n "$KPY" ] || { echo "SKIP: no python3 with grpcio (python3-grpcio)"; exit 77; }
pod_cgroups # CGB
tls_apiserver
UUID0=GPU-5ac1ce00-0000-4000-8000-000000000000
REG="$T/registry" PLUG="$T/plugins/gpu.gpuslice.io" CDI="$T/cdi" NVCDI="$T/nvcdi" ILIB="$T/ilib"
mkdir -p "$REG" "$CDI" "$NVCDI" "$ILIB" "$T/plugins"
cp "$LIB" "$ILIB/libgpuslice.so"
echo /usr/local/gpuslice/libgpuslice.so >"$ILIB/ld.so.preload"
# NVIDIA's spec as nvidia-ctk writes it, naming the simulated GPU by UUID (YAML, its default).
printf 'cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: "%s"\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n' "$UUID0" >"$NVCDI/nvidia.yaml"
ALLOC="$SRC/tests/k8s/allocator.py"
KUBELET="$SRC/tests/k8s/kubelet.py"
SCHEMA="$SRC/tests/k8s/schema.py"
alloc() { python3 "$ALLOC" --control "$KC" "$@"; }
kubelet() { "$KPY" "$KUBELET" --descriptor-set "$B/proto/kubelet.pb" "$@"; }
# claim NAME UID MEMORY CORES: a claim of namespace ns1 for one device of the class gpuslice.io.
claim() {
    caps=
    [ -n "$3" ] && caps="\"memory\":\"$3\""
    [ -n "$4" ] && caps="$caps${caps:+,}\"cores\":\"$4\""
    kctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"'"$1"'","namespace":"ns1","uid":"'"$2"'"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpuslice.io","capacity":{"requests":{'"$caps"'}}}}]}}}' "$KC/objects" >/dev/null
}
kctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"gpuslice.io"},"spec":{"selectors":[{"cel":{"expression":"device.driver == \"gpu.gpuslice.io\""}}]}}' "$KC/objects" >/dev/null
DRA_ARGS="--state-dir $T/dstate --kube-api $KA --kube-ca-file $T/ca.crt --kube-token-file $T/token --node-name node1 --dra --kubelet-plugin-dir $PLUG --kubelet-registry-dir $REG --cdi-dir $CDI --nvidia-cdi-dirs $NVCDI --inject-lib-dir $ILIB --dra-publish-s 1"
# slice_until SECONDS: the node's ResourceSlice published (into $T/slices).
slice_until() {
    i=0; while [ $i -lt $(($1 * 10)) ]; do
        kctl "$KC/objects/resourceslices" >"$T/slices" 2>/dev/null
        python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if len(s)==1 else 1)' "$T/slices" 2>/dev/null && return 0
        sleep 0.1; i=$((i + 1))
    done
    cat "$T/slices"; return 1
}
# prep VERSION REF...: NodePrepareResources; the answer in $T/prep (JSON).
prep() { v=$1; shift; : >"$T/prep.errors"; kubelet prepare --sock "$PLUG/dra.sock" --version "$v" --errors "$T/prep.errors" "$@" >"$T/prep" 2>"$T/prep.err"; }
unprep() { v=$1; shift; kubelet unprepare --sock "$PLUG/dra.sock" --version "$v" "$@" >"$T/unprep" 2>"$T/unprep.err"; }
# claim_err UID: the error the last Prepare answered for that claim ("" for none).
claim_err() { awk -F '\t' -v u="$1" '$1 == u { print $2 }' "$T/prep.errors"; }
# in_claim POD-UID CID ARGS...: ARGS as a process of that pod's container, set up from the
# claim's CDI spec as a runtime applies it (tests/k8s/cdi_apply.py): the pod's cgroup, new PID
# and mount namespaces, the spec's mounts (read-only) and environment.
in_claim() {
    spec=$1; u=$2; c=$3; shift 3
    d="$CGB/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$(echo "$u" | tr - _).slice/cri-containerd-$c.scope"
    mkdir -p "$d"
    python3 "$SRC/tests/k8s/cdi_apply.py" "$spec" >"$T/apply.sh" || return 98
    sh -c 'echo $$ >"$0/cgroup.procs" && s=$1 && shift && exec unshare --pid --fork --mount --mount-proc env -u GPUSLICE_DAEMON_DIR sh "$s" "$@"' "$d" "$T/apply.sh" "$@"
}

case $CASE in
daemon_dra)
    UA=aaaaaaaa-0000-4000-8000-00000000000a UB=bbbbbbbb-0000-4000-8000-00000000000b
    CA=cccccccc-1111-4000-8000-00000000000a CB=cccccccc-1111-4000-8000-00000000000b
    CC=cccccccc-1111-4000-8000-00000000000c CD=cccccccc-1111-4000-8000-00000000000d
    CE=cccccccc-1111-4000-8000-00000000000e
    C1=$(printf 'd1%062d' 0) C2=$(printf 'd2%062d' 0)
    trap 'cg_cleanup_own $UA $UB cccccccc-0000-4000-8000-0000000000cc dddddddd-0000-4000-8000-0000000000dd eeeeeeee-0000-4000-8000-0000000000ee; cleanup' EXIT
    start_daemon $DRA_ARGS || exit 1
    # Publishing: one device of the GPU, shared, its capacities; the slice passes the schema.
    if slice_until 10; then ok "the node's ResourceSlice is published"; else bad "no slice"; fi
    python3 - "$T/slices" "$UUID0" <<'PY' && ok "one device gpu-0: its UUID, 16 GiB in steps of 256Mi, 100 cores, allowMultipleAllocations" || bad "slice content"
import json, sys
s = json.load(open(sys.argv[1]))[0]
sp = s["spec"]
assert sp["driver"] == "gpu.gpuslice.io" and sp["nodeName"] == "node1" and sp["pool"]["name"] == "node1", sp
d = sp["devices"]
assert len(d) == 1 and d[0]["name"] == "gpu-0" and d[0]["allowMultipleAllocations"] is True, d
a, c = d[0]["attributes"], d[0]["capacity"]
assert a["uuid"]["string"] == sys.argv[2] and a["index"]["int"] == 0, a
# The simulator's NVML names no SMs in its attributes, as an H100 without MIG: 16896 CUDA cores
# over Hopper's 128 a SM.
assert a["multiprocessors"] == {"int": 132} and a["architecture"] == {"string": "Hopper"}, a
assert a["productName"] == {"string": "gpuslice simulated GPU"}, a
assert int(c["memory"]["value"]) == 16 << 30 and c["cores"]["value"] == "100", c
assert c["memory"]["requestPolicy"]["validRange"]["step"] in ("256Mi", str(256 << 20)), c
PY
    python3 -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))[0], open(sys.argv[2], "w"))' "$T/slices" "$T/slice.json"
    python3 "$SCHEMA" resourceslice "$T/slice.json" >"$T/schema" 2>&1 && ok "the slice passes the upstream schema's rules" || { bad "slice schema"; cat "$T/schema"; }
    # Deleted by someone else, it is published again.
    kctl -X DELETE "$KC/objects/resourceslices/$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["metadata"]["name"])' "$T/slices")" >/dev/null
    sleep 0.3
    if slice_until 5; then ok "a slice deleted by another is published again"; else bad "slice not republished"; fi
    # Changed by another: replaced as it should be, under the next generation of its pool.
    python3 - "$KC" <<'PY' && ok "a slice changed by another is replaced, its pool's generation 1 -> 2" || bad "changed slice"
import json, sys, time, urllib.request
kc = sys.argv[1]
def slices():
    return json.load(urllib.request.urlopen(kc + "/objects/resourceslices", timeout=10))
s = slices()[0]
assert s["spec"]["pool"]["generation"] == 1, s["spec"]["pool"]
s["spec"]["devices"][0]["attributes"]["index"] = {"int": 7}
urllib.request.urlopen(urllib.request.Request(kc + "/objects", data=json.dumps(s).encode(), headers={"Content-Type": "application/json"}), timeout=10).read()
end = time.time() + 15
while time.time() < end:
    s = slices()[0]
    if s["spec"]["devices"][0]["attributes"]["index"] == {"int": 0}:
        break
    time.sleep(0.1)
assert s["spec"]["devices"][0]["attributes"]["index"] == {"int": 0}, s
assert s["spec"]["pool"]["generation"] == 2 and s["spec"]["pool"]["resourceSliceCount"] == 1, s["spec"]["pool"]
PY
    # Registration, as the kubelet does it.
    kubelet register --registry-sock "$REG/gpu.gpuslice.io-reg.sock" >"$T/reg" 2>&1 && ok "registration: GetInfo and NotifyRegistrationStatus" || { bad "registration"; cat "$T/reg"; }
    grep -q '"endpoint": *"'"$PLUG/dra.sock"'"' "$T/reg" && grep -q '"v1.DRAPlugin"' "$T/reg" && grep -q '"v1beta1.DRAPlugin"' "$T/reg" && ok "PluginInfo names the driver's socket, v1.DRAPlugin and v1beta1.DRAPlugin (kubelets of 1.32, 1.33)" || { bad "plugin info"; cat "$T/reg"; }
    grep -q "registered with the kubelet" "$T/dlog" && ok "the daemon logs its registration" || bad "registration not logged"
    # Two claims, 8Gi/25 cores and 4Gi/50 cores, allocated to one device, prepared in one call.
    claim a "$CA" 8Gi 25; claim b "$CB" 4Gi 50
    alloc allocate --claim ns1/a --pod pa/$UA --node node1 >"$T/al" 2>&1 && alloc allocate --claim ns1/b --pod pb/$UB --node node1 >>"$T/al" 2>&1 && ok "the allocator gives both gpu-0" || { bad "allocation"; cat "$T/al"; }
    claim c "$CC" 8Gi ""
    alloc allocate --claim ns1/c --node node1 >"$T/al3" 2>&1; rc=$?
    [ $rc = 3 ] && ok "a third claim of 8Gi is not allocated (exit 3)" || { bad "third claim allocated (exit $rc)"; cat "$T/al3"; }
    if prep v1 ns1/a/$CA ns1/b/$CB && [ -z "$(claim_err $CA)" ] && [ -z "$(claim_err $CB)" ]; then ok "Prepare of two claims in one call"; else bad "prepare a, b"; cat "$T/prep" "$T/prep.err"; fi
    python3 - "$T/prep" "$CA" "$UUID0" <<'PY' && ok "the answer: gpu-0 of pool node1 for request gpu, CDI IDs ours and NVIDIA's" || bad "prepare answer"
import json, sys
d = json.load(open(sys.argv[1]))["claims"][sys.argv[2]]["devices"]
assert len(d) == 1 and d[0]["pool_name"] == "node1" and d[0]["device_name"] == "gpu-0" and d[0]["request_names"] == ["gpu"], d
assert d[0]["cdi_device_ids"] == ["gpuslice.io/claim=" + sys.argv[2], "nvidia.com/gpu=" + sys.argv[3]], d
PY
    for u in $CA $CB; do
        f="$CDI/gpuslice.io-claim_$u.json"
        [ -f "$f" ] && python3 "$SCHEMA" cdi "$f" >"$T/schema" 2>&1 && ok "CDI spec of $u written, passes the CDI schema" || { bad "cdi spec $u"; cat "$T/schema"; }
    done
    api GET /metrics >/dev/null
    grep -q '^gpuslice_dra_prepares_total 2$' "$T/body" && grep -q '^gpuslice_dra_registered 1$' "$T/body" && grep -q '^gpuslice_dra_prepared_claims 2$' "$T/body" && ok "metrics: registered, 2 claims prepared" || { bad "dra metrics"; grep gpuslice_dra "$T/body"; }
    api GET /v1/tenants/claim-$CA >/dev/null
    jq_py 'assert d["managed"] and d["limits"]["memory"]["'"$UUID0"'"] == 8 << 30 and d["limits"]["compute"]["'"$UUID0"'"] == 25, d' && ok "claim a's tenant: 8 GiB and 25 % on the GPU's UUID" || { bad "tenant a"; cat "$T/body"; }
    # Processes in the pods' containers, set up from the CDI specs.
    expect 0 "a process of pod pa's container (claim a's spec)" -- in_claim "$CDI/gpuslice.io-claim_$CA.json" $UA $C1 "$P" total alloc:8000 alloc:300
    grep -q "total $((8 << 30))" "$T/out" && grep -q "alloc 8000 ok" "$T/out" && grep -q "alloc 300 CUDA_ERROR_OUT_OF_MEMORY" "$T/out" && ok "pod pa sees 8 GiB, holds 8000M, is refused 300M more" || { bad "pod pa memory"; cat "$T/out" "$T/err"; }
    expect 0 "a process of pod pb's container" -- in_claim "$CDI/gpuslice.io-claim_$CB.json" $UB $C2 "$P" total alloc:4000 alloc:200
    grep -q "total $((4 << 30))" "$T/out" && grep -q "alloc 200 CUDA_ERROR_OUT_OF_MEMORY" "$T/out" && ok "pod pb sees 4 GiB and is held to it" || { bad "pod pb memory"; cat "$T/out" "$T/err"; }
    # A claim shared by pods is prepared once, for the first (the kubelet prepares a claim once
    # per node): a later pod that names it joins its tenant too.
    UC=cccccccc-0000-4000-8000-0000000000cc C3=$(printf 'd4%062d' 0)
    kctl -d '{"metadata":{"name":"pc","namespace":"ns1","uid":"'"$UC"'"},"spec":{"nodeName":"node1","resourceClaims":[{"name":"gpu","resourceClaimName":"b"}],"containers":[{"name":"c","resources":{"claims":[{"name":"gpu"}]}}]},"status":{"containerStatuses":[{"name":"c","containerID":"containerd://'"$C3"'"}]}}' "$KC/pods" >/dev/null
    expect 0 "a process of pod pc, which names claim b (prepared for pb)" -- in_claim "$CDI/gpuslice.io-claim_$CB.json" $UC $C3 "$P" total alloc:100
    grep -q "total $((4 << 30))" "$T/out" && ok "pod pc joins claim b's tenant: 4 GiB" || { bad "shared claim"; cat "$T/out" "$T/err"; }
    # A pod of another namespace that names "b" names its own namespace's b: it joins nothing of ns1's.
    UD=dddddddd-0000-4000-8000-0000000000dd C5=$(printf 'd9%062d' 0)
    kctl -d '{"metadata":{"name":"pd","namespace":"ns2","uid":"'"$UD"'"},"spec":{"nodeName":"node1","resourceClaims":[{"name":"gpu","resourceClaimName":"b"}],"containers":[{"name":"c","resources":{"claims":[{"name":"gpu"}]}}]},"status":{"containerStatuses":[{"name":"c","containerID":"containerd://'"$C5"'"}]}}' "$KC/pods" >/dev/null
    expect 1 "a process of pod pd of ns2, which names b" -- in_claim "$CDI/gpuslice.io-claim_$CB.json" $UD $C5 "$P" total alloc:100
    ! grep -q "total $((4 << 30))" "$T/out" && grep -q "claim ns2/b cannot be read" "$T/err" && ok "pod pd of ns2 does not join ns1/b's tenant: its claim is ns2/b" || { bad "pod of ns2 and ns1/b"; cat "$T/out" "$T/err"; }
    # A process of a pod the claim is not reserved for gets nothing of it.
    expect 1 "a process of a pod with no claim and no tenant" -- in_claim "$CDI/gpuslice.io-claim_$CA.json" eeeeeeee-0000-4000-8000-00000000000e $C1 "$P" alloc:100
    # A broken scheduler: 8Gi more forced onto gpu-0 (now 12 of 16 GiB held) is refused by name.
    claim d "$CD" 8Gi 10
    alloc allocate --claim ns1/d --node node1 --force node1/gpu-0 >/dev/null 2>&1
    prep v1 ns1/d/$CD
    e=$(claim_err $CD)
    case $e in *"ns1/d"*overfills*) ok "an over-capacity allocation is refused, naming the claim: $e" ;; *) bad "forced claim: '$e'"; cat "$T/prep" ;; esac
    [ ! -f "$CDI/gpuslice.io-claim_$CD.json" ] && ok "and has no CDI spec" || bad "spec of a refused claim"
    # Cores: 25 + 50 prepared; 30 more forced onto gpu-0 (1Gi fits) overfills its 100 cores.
    claim f cccccccc-1111-4000-8000-00000000000f 1Gi 30
    alloc allocate --claim ns1/f --node node1 --force node1/gpu-0 >/dev/null 2>&1
    prep v1 ns1/f/cccccccc-1111-4000-8000-00000000000f
    e=$(claim_err cccccccc-1111-4000-8000-00000000000f)
    case $e in *"ns1/f"*"105 of its 100 cores"*) ok "cores past 100 are refused: $e" ;; *) bad "cores overfill: '$e'" ;; esac
    alloc release --claim ns1/d --claim ns1/f >/dev/null 2>&1 || bad "release of the forced claims"
    # Claims are told apart by UID, not name: ns2's claim "a" (8Gi, forced onto gpu-0) is summed
    # with ns1's a (8Gi) and b (4Gi), and overfills the GPU.
    kctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"a","namespace":"ns2","uid":"cccccccc-1111-4000-8000-000000000018"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpuslice.io","capacity":{"requests":{"memory":"8Gi"}}}}]}}}' "$KC/objects" >/dev/null
    alloc allocate --claim ns2/a --node node1 --force node1/gpu-0 >/dev/null 2>&1
    prep v1 ns2/a/cccccccc-1111-4000-8000-000000000018
    e=$(claim_err cccccccc-1111-4000-8000-000000000018)
    case $e in *"ns2/a"*overfills*) ok "ns2/a beside ns1/a of the same name is summed with it: $e" ;; *) bad "ns2/a: '$e'"; cat "$T/prep" ;; esac
    alloc release --claim ns2/a >/dev/null 2>&1
    # A class and a weight from the admin's DeviceClass configuration reach the claim's tenant.
    kctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"gpuslice-bg"},"spec":{"selectors":[{"cel":{"expression":"device.driver == \"gpu.gpuslice.io\""}}],"config":[{"opaque":{"driver":"gpu.gpuslice.io","parameters":{"priority":"background","weight":7}}}]}}' "$KC/objects" >/dev/null
    kctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"bgw","namespace":"ns1","uid":"cccccccc-1111-4000-8000-000000000019"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpuslice-bg","capacity":{"requests":{"memory":"1Gi"}}}}]}}}' "$KC/objects" >/dev/null
    alloc allocate --claim ns1/bgw --node node1 >/dev/null 2>&1 || bad "allocation of bgw"
    prep v1 ns1/bgw/cccccccc-1111-4000-8000-000000000019
    api GET /v1/tenants/claim-cccccccc-1111-4000-8000-000000000019 >/dev/null
    jq_py 'assert (d["priority"], d["weight"]) == ("background", 7), d' && ok "the DeviceClass's background class and weight 7 are the claim's tenant's" || { bad "class config"; cat "$T/prep" "$T/body"; }
    unprep v1 ns1/bgw/cccccccc-1111-4000-8000-000000000019
    alloc release --claim ns1/bgw >/dev/null 2>&1
    # The latency class is the node admin's to give (pod-latency-namespaces: none here).
    kctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"lat","namespace":"ns1","uid":"cccccccc-1111-4000-8000-000000000010"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpuslice.io","capacity":{"requests":{"memory":"1Gi"}}}}],"config":[{"opaque":{"driver":"gpu.gpuslice.io","parameters":{"priority":"latency"}}}]}}}' "$KC/objects" >/dev/null
    alloc allocate --claim ns1/lat --node node1 >/dev/null 2>&1 || bad "allocation of lat"
    prep v1 ns1/lat/cccccccc-1111-4000-8000-000000000010
    e=$(claim_err cccccccc-1111-4000-8000-000000000010)
    case $e in *"ns1/lat"*latency*pod-latency-namespaces*) ok "a claim's own latency class is refused: $e" ;; *) bad "latency claim: '$e'" ;; esac
    alloc release --claim ns1/lat >/dev/null 2>&1
    # A weight is the node admin's to give too (a DeviceClass's configuration may).
    kctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"wt","namespace":"ns1","uid":"cccccccc-1111-4000-8000-000000000012"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpuslice.io","capacity":{"requests":{"memory":"1Gi"}}}}],"config":[{"opaque":{"driver":"gpu.gpuslice.io","parameters":{"weight":50}}}]}}}' "$KC/objects" >/dev/null
    alloc allocate --claim ns1/wt --node node1 >/dev/null 2>&1 || bad "allocation of wt"
    prep v1 ns1/wt/cccccccc-1111-4000-8000-000000000012
    e=$(claim_err cccccccc-1111-4000-8000-000000000012)
    case $e in *"ns1/wt"*"weight 50"*DeviceClass*) ok "a claim's own weight is refused: $e" ;; *) bad "weight claim: '$e'" ;; esac
    alloc release --claim ns1/wt >/dev/null 2>&1
    # A second claim for pod pa (which has claim a): refused at Prepare, naming both.
    claim h cccccccc-1111-4000-8000-000000000013 1Gi ""
    alloc allocate --claim ns1/h --pod pa/$UA --node node1 >/dev/null 2>&1 || bad "allocation of h"
    prep v1 ns1/h/cccccccc-1111-4000-8000-000000000013
    e=$(claim_err cccccccc-1111-4000-8000-000000000013)
    case $e in *"ns1/h"*"$UA"*"ns1/a"*) ok "a pod's second claim is refused, naming the first: $e" ;; *) bad "second claim: '$e'" ;; esac
    alloc release --claim ns1/h >/dev/null 2>&1
    # A subrequest's result (firstAvailable: "gpu/small") is answered under its request, "gpu".
    kctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"sub","namespace":"ns1","uid":"cccccccc-1111-4000-8000-000000000014"},"spec":{"devices":{"requests":[{"name":"gpu","firstAvailable":[{"name":"small","deviceClassName":"gpuslice.io"}]}]}},"status":{"allocation":{"devices":{"results":[{"request":"gpu/small","driver":"gpu.gpuslice.io","pool":"node1","device":"gpu-0","consumedCapacity":{"memory":"1Gi","cores":"0"}}]}}}}' "$KC/objects" >/dev/null
    prep v1 ns1/sub/cccccccc-1111-4000-8000-000000000014
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["claims"][sys.argv[2]]; assert not d.get("error") and d["devices"][0]["request_names"] == ["gpu"], d' "$T/prep" cccccccc-1111-4000-8000-000000000014 && ok "a subrequest's device answered under its request's name" || { bad "subrequest"; cat "$T/prep"; }
    unprep v1 ns1/sub/cccccccc-1111-4000-8000-000000000014
    alloc release --claim ns1/sub >/dev/null 2>&1
    # NVIDIA's spec as JSON (nvidia-ctk --format=json) names the GPU as well as its YAML.
    mv "$NVCDI/nvidia.yaml" "$T/nvidia.yaml.off"
    claim g cccccccc-1111-4000-8000-000000000011 1Gi ""
    alloc allocate --claim ns1/g --node node1 >/dev/null 2>&1 || bad "allocation of g"
    printf '{"cdiVersion":"0.5.0","kind":"nvidia.com/gpu","devices":[{"name":"%s","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia0"}]}}]}\n' "$UUID0" >"$NVCDI/nvidia.json"
    prep v1 ns1/g/cccccccc-1111-4000-8000-000000000011
    [ -z "$(claim_err cccccccc-1111-4000-8000-000000000011)" ] && ok "NVIDIA's CDI spec in JSON names the GPU: prepared" || { bad "nvidia spec in JSON"; cat "$T/prep"; }
    # Without NVIDIA's CDI spec of the GPU, Prepare says how to make it (g, prepared, is
    # judged again as a retry is: refused, kept as it was; unprepared with a and b below).
    rm "$NVCDI/nvidia.json"
    prep v1 ns1/g/cccccccc-1111-4000-8000-000000000011
    e=$(claim_err cccccccc-1111-4000-8000-000000000011)
    case $e in *"ns1/g"*"nvidia.com/gpu=$UUID0"*"nvidia-ctk cdi generate"*) ok "no NVIDIA CDI spec: refused, saying how to generate it" ;; *) bad "nvidia spec missing: '$e'" ;; esac
    mv "$T/nvidia.yaml.off" "$NVCDI/nvidia.yaml"
    # A claim of another driver, of another node, and one the API server does not know.
    kctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"nv","namespace":"ns1","uid":"'"$CE"'"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"x"}}]}},"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"node1","device":"gpu-0"}]}}}}' "$KC/objects" >/dev/null
    prep v1 ns1/nv/$CE; e=$(claim_err $CE)
    case $e in *"ns1/nv"*gpu.gpuslice.io*) ok "a claim of another driver is refused by name: $e" ;; *) bad "other driver: '$e'" ;; esac
    kctl -X DELETE "$KC/objects/resourceclaims/ns1/nv" >/dev/null
    kctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"nv","namespace":"ns1","uid":"'"$CE"'"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpuslice.io"}}]}},"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.gpuslice.io","pool":"node2","device":"gpu-0"}]}}}}' "$KC/objects" >/dev/null
    prep v1 ns1/nv/$CE; e=$(claim_err $CE)
    case $e in *"ns1/nv"*node2*) ok "a claim of another node's pool is refused by name: $e" ;; *) bad "other node: '$e'" ;; esac
    prep v1 ns1/odd/Not_A..UID; e=$(claim_err Not_A..UID)
    case $e in *"ns1/odd"*"is not a Kubernetes UID"*) ok "a UID that is none is refused before it names anything: $e" ;; *) bad "odd UID: '$e'" ;; esac
    prep v1 ns1/ghost/$CE; e=$(claim_err $CE)
    case $e in *"ns1/ghost"*) ok "a claim the API server does not have: $e" ;; *) bad "ghost: '$e'" ;; esac
    # The same over v1beta1, and idempotence: claim a prepared again answers the same.
    cp "$T/prep" "$T/prep0"
    prep v1beta1 ns1/a/$CA && [ -z "$(claim_err $CA)" ] && ok "Prepare again over v1beta1: the same claim, no error" || { bad "v1beta1 prepare"; cat "$T/prep" "$T/prep.err"; }
    # Bad gRPC input: garbage for a message, an unknown method.
    kubelet call --sock "$PLUG/dra.sock" --method /k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources --raw-hex ffffffff0f >"$T/raw" 2>&1
    grep -qi "INVALID_ARGUMENT\|invalid" "$T/raw" && ok "a message that is not one: INVALID_ARGUMENT" || { bad "garbage message"; cat "$T/raw"; }
    kubelet call --sock "$PLUG/dra.sock" --method /k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeSomething --raw-hex "" >"$T/raw" 2>&1
    grep -qi "UNIMPLEMENTED" "$T/raw" && ok "an unknown method: UNIMPLEMENTED" || { bad "unknown method"; cat "$T/raw"; }
    # Unprepare: the tenant and the spec go; again: nothing to do, no error.
    unprep v1 ns1/a/$CA ns1/b/$CB ns1/g/cccccccc-1111-4000-8000-000000000011 && ok "Unprepare of both (and g)" || { bad "unprepare"; cat "$T/unprep" "$T/unprep.err"; }
    want 404 "claim a's tenant is gone" GET /v1/tenants/claim-$CA
    [ ! -e "$CDI/gpuslice.io-claim_$CA.json" ] && [ ! -e "$CDI/gpuslice.io-claim_$CB.json" ] && ok "their CDI specs are removed" || bad "specs left"
    unprep v1 ns1/a/$CA && ok "Unprepare again: no error" || bad "second unprepare"
    # The counters: prepared a, b, bgw, sub, g, a again; unprepared bgw, sub, g, a, b; refused
    # d, f, ns2/a, lat, wt, h, g (no NVIDIA spec), nv twice, the odd UID and ghost. The slice of
    # generation 2.
    api GET /metrics >/dev/null
    n=0
    for m in prepares_total:6 unprepares_total:5 refusals_total:11 prepared_claims:0 registered:1 slice_generation:2; do
        grep -q "^gpuslice_dra_${m%%:*} ${m#*:}\$" "$T/body" || { bad "metric gpuslice_dra_${m%%:*}: want ${m#*:}"; grep "^gpuslice_dra" "$T/body"; n=1; }
    done
    [ $n = 0 ] && ok "metrics: 6 prepares, 5 unprepares, 11 refusals, slice generation 2"
    # A claim of the whole GPU (no memory consumed) is alone on it: refused beside one claim
    # prepared, and one claim beside it refused while it is prepared. Claims that fill the GPU
    # exactly (1 + 1 + 14 GiB of 16; 100 cores) are prepared. A claim's UID makes its tenant's
    # name, claim-<uid>, of 63 bytes: a UID of 57 is prepared as the tenant of its whole name;
    # one of 58 is refused by name (cut, it named the tenant of another claim whose UID shares
    # its first 57 characters).
    UX=cccccccc-1111-4000-8000-000000000015 UW=cccccccc-1111-4000-8000-000000000016
    UY=cccccccc-1111-4000-8000-000000000017 U57=$(printf 'e%056d' 0) U58=$(printf 'e%057d' 0)
    # allocated NAME UID [CONSUMED]: a claim of ns1 allocated gpu-0, consuming CONSUMED (JSON).
    allocated() {
        kctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"'"$1"'","namespace":"ns1","uid":"'"$2"'"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpuslice.io"}}]}},"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.gpuslice.io","pool":"node1","device":"gpu-0"'"${3:+,\"consumedCapacity\":$3}"'}]}}}}' "$KC/objects" >/dev/null
    }
    allocated x $UX '{"memory":"1Gi"}'
    allocated w $UW
    allocated u57 "$U57" '{"memory":"1Gi"}'
    allocated u58 "$U58" '{"memory":"1Gi"}'
    allocated y $UY '{"memory":"14Gi","cores":"100"}'
    prep v1 ns1/x/$UX ns1/w/$UW ns1/u57/$U57 ns1/u58/$U58 ns1/y/$UY
    e=$(claim_err $UW)
    [ -z "$(claim_err $UX)" ] && [ "$e" = "claim ns1/w: gpu-0 (GPU $UUID0) is held whole by a claim prepared here, or this claim asks it whole beside 1 other(s): the scheduler's allocation overfills it" ] && ok "the whole GPU beside one claim prepared: refused: $e" || { bad "whole beside one: '$e'"; cat "$T/prep"; }
    [ -z "$(claim_err $U57)" ] && [ "$(api GET /v1/tenants/claim-$U57)" = 200 ] && ok "a UID of 57 characters: prepared, its tenant named by it whole" || { bad "UID of 57"; cat "$T/prep"; }
    e=$(claim_err $U58)
    case $e in *"ns1/u58"*"is not a Kubernetes UID"*"at most 57)") ok "a UID of 58 is refused: $e" ;; *) bad "UID of 58: '$e'" ;; esac
    e=$(claim_err $UY)
    [ -z "$e" ] && ok "14 GiB and 100 cores beside 1 + 1 GiB: the GPU filled exactly, prepared" || bad "exact fill refused: '$e'"
    # A pod that names two prepared claims of the driver (x and y) joins neither, saying why.
    UE=eeeeeeee-0000-4000-8000-0000000000ee C6=$(printf 'da%062d' 0)
    kctl -d '{"metadata":{"name":"pe","namespace":"ns1","uid":"'"$UE"'"},"spec":{"nodeName":"node1","resourceClaims":[{"name":"g1","resourceClaimName":"x"},{"name":"g2","resourceClaimName":"y"}],"containers":[{"name":"c","resources":{"claims":[{"name":"g1"},{"name":"g2"}]}}]},"status":{"containerStatuses":[{"name":"c","containerID":"containerd://'"$C6"'"}]}}' "$KC/pods" >/dev/null
    expect 1 "a process of pod pe, which names claims x and y" -- in_claim "$CDI/gpuslice.io-claim_$UX.json" $UE $C6 "$P" total
    grep -q "pod $UE names more than one claim of gpu.gpuslice.io prepared" "$T/err" && ok "refused: a pod takes its GPUs in one claim" || { bad "pod of two claims"; cat "$T/out" "$T/err"; }
    unprep v1 ns1/x/$UX ns1/u57/$U57 ns1/y/$UY
    prep v1 ns1/w/$UW ns1/x/$UX
    e=$(claim_err $UX)
    [ -z "$(claim_err $UW)" ] && case $e in "claim ns1/x: gpu-0 (GPU $UUID0) is held whole by a claim prepared here"*"beside 1 other(s)"*) true ;; *) false ;; esac && ok "the whole GPU alone: prepared; a claim beside it refused: $e" || { bad "beside the whole: '$e'"; cat "$T/prep"; }
    # Stopped, the driver removes its slice.
    stop_daemon
    kctl "$KC/objects/resourceslices" >"$T/slices"
    python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])) == [] else 1)' "$T/slices" && ok "stopped, the daemon removed its ResourceSlice" || { bad "slice left"; cat "$T/slices"; }
    ;;
daemon_dra_compute)
    # Cores are a compute ceiling: 25 and 50 measured as shares of the simulated GPU's time
    # (run alone: shares on a machine of two CPUs).
    UA=aaaaaaaa-0000-4000-8000-0000000000ca UB=bbbbbbbb-0000-4000-8000-0000000000cb
    CA=cccccccc-3333-4000-8000-00000000000a CB=cccccccc-3333-4000-8000-00000000000b
    C1=$(printf 'd5%062d' 0) C2=$(printf 'd6%062d' 0)
    trap 'cg_cleanup_own $UA $UB; cleanup' EXIT
    # NVML's attributes, where they name SMs (a GPU in MIG mode), come before CUDA cores / 128 (132).
    GPUSLICE_SIM_NVML_ATTR_SMS=66 start_daemon $DRA_ARGS || exit 1
    slice_until 10 || bad "no slice"
    python3 -c 'import json,sys; a = json.load(open(sys.argv[1]))[0]["spec"]["devices"][0]["attributes"]; sys.exit(a.get("multiprocessors") != {"int": 66})' "$T/slices" && ok "NVML's attributes' 66 SMs are the slice's multiprocessors" || { bad "multiprocessors from the attributes"; cat "$T/slices"; }
    claim a "$CA" 8Gi 25; claim b "$CB" 4Gi 50
    alloc allocate --claim ns1/a --pod pa/$UA --node node1 >/dev/null 2>&1 && alloc allocate --claim ns1/b --pod pb/$UB --node node1 >/dev/null 2>&1 || bad "allocation"
    prep v1 ns1/a/$CA ns1/b/$CB && [ -z "$(claim_err $CA)" ] && [ -z "$(claim_err $CB)" ] || { bad "prepare"; cat "$T/prep"; }
    in_claim "$CDI/gpuslice.io-claim_$CA.json" $UA $C1 "$CL" stream 2 500 >"$T/sa" 2>"$T/sa.err"
    in_claim "$CDI/gpuslice.io-claim_$CB.json" $UB $C2 "$CL" stream 2 500 >"$T/sb" 2>"$T/sb.err"
    sa=$(awk '/^share/ {print $2}' "$T/sa"); sb=$(awk '/^share/ {print $2}' "$T/sb")
    if awk -v a="$sa" -v b="$sb" 'BEGIN { exit !(a >= 0.20 && a <= 0.28 && b >= 0.44 && b <= 0.53) }'; then ok "25 and 50 cores: shares $sa and $sb of the GPU's time"
    else bad "compute shares $sa $sb (want 0.25, 0.50)"; cat "$T/sa.err" "$T/sb.err"; fi
    stop_daemon
    ;;
daemon_dra_guard)
    # The guard holds a claim's pods to the claim, from NVML: a process of the pod without the
    # interposer (a bypass) that takes 1500 MiB under the claim's 1 GiB is stopped.
    UA=aaaaaaaa-0000-4000-8000-0000000000da CA=cccccccc-4444-4000-8000-00000000000a
    trap 'cg_cleanup_own $UA aaaaaaaa-0000-4000-8000-0000000000db aaaaaaaa-0000-4000-8000-0000000000dc; cleanup' EXIT
    start_daemon $DRA_ARGS --sweep-ms 100 || exit 1
    slice_until 10 || bad "no slice"
    claim a "$CA" 1Gi ""
    alloc allocate --claim ns1/a --pod pa/$UA --node node1 >/dev/null 2>&1 || bad "allocation"
    prep v1 ns1/a/$CA && [ -z "$(claim_err $CA)" ] || { bad "prepare"; cat "$T/prep"; }
    d="$CGB/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$(echo "$UA" | tr - _).slice/cri-containerd-$(printf 'd7%062d' 0).scope"
    mkdir -p "$d"
    rm -f "$T/e.up"
    sh -c 'echo $$ >"$0/cgroup.procs" && exec env -u LD_PRELOAD "$1" alloc:1500 mark:"$2" sleep:8000' "$d" "$P" "$T/e.up" >"$T/esc.out" 2>&1 &
    E=$!
    for i in $(seq 300); do [ -e "$T/e.up" ] && break; sleep 0.01; done
    [ -e "$T/e.up" ] && ok "a process of the claim's pod took 1500 MiB past the interposer" || { bad "bypass setup"; cat "$T/esc.out"; }
    i=0; while kill -0 "$E" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 "$E" 2>/dev/null; then bad "the bypassing process runs on over the claim's 1 GiB"; kill -9 "$E"
    else ok "the guard stopped it within $((i * 100)) ms (the claim's tenant, by its pod's cgroup)"; fi
    wait "$E" 2>/dev/null
    grep -q "claim-$CA" "$T/dlog" && ok "the log names the claim's tenant" || { bad "guard log"; tail -15 "$T/dlog"; }
    # A pod that shares the claim by naming it (not reserved for it) is held to it as well, once
    # one of its processes has joined: a bypass of 1500 MiB in pod ps is stopped too.
    US=aaaaaaaa-0000-4000-8000-0000000000dc CS=$(printf 'dc%062d' 0)
    kctl -d '{"metadata":{"name":"ps","namespace":"ns1","uid":"'"$US"'"},"spec":{"nodeName":"node1","resourceClaims":[{"name":"gpu","resourceClaimName":"a"}],"containers":[{"name":"c","resources":{"claims":[{"name":"gpu"}]}}]},"status":{"containerStatuses":[{"name":"c","containerID":"containerd://'"$CS"'"}]}}' "$KC/pods" >/dev/null
    expect 0 "a process of pod ps, which names claim a, joins it" -- in_claim "$CDI/gpuslice.io-claim_$CA.json" $US $CS "$P" total
    grep -q "total $((1 << 30))" "$T/out" || { bad "pod ps did not join claim a"; cat "$T/out" "$T/err"; }
    d="$CGB/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$(echo "$US" | tr - _).slice/cri-containerd-$CS.scope"
    rm -f "$T/s.up"
    sh -c 'echo $$ >"$0/cgroup.procs" && exec env -u LD_PRELOAD "$1" alloc:1500 mark:"$2" sleep:8000' "$d" "$P" "$T/s.up" >"$T/ss.out" 2>&1 &
    E=$!
    for i in $(seq 300); do [ -e "$T/s.up" ] && break; sleep 0.01; done
    i=0; while kill -0 "$E" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 "$E" 2>/dev/null; then bad "a bypass in pod ps, which shares claim a, runs on over its 1 GiB"; kill -9 "$E"
    else ok "a bypass in pod ps, which shares claim a, is stopped within $((i * 100)) ms"; fi
    wait "$E" 2>/dev/null
    # A pod keyed by CUDA index (gpuslice.io/memory "2G,0:1G": 1 GiB on its CUDA device 0, 2 GiB
    # on any other): which of its indexes this GPU is, the guard cannot tell, so it holds the
    # pod to the loosest, 2 GiB: 1500 MiB past the interposer is left alone, 2500 MiB stopped.
    UP=aaaaaaaa-0000-4000-8000-0000000000db CP=$(printf 'd8%062d' 0)
    kctl -d '{"metadata":{"name":"px","namespace":"ns1","uid":"'"$UP"'","annotations":{"gpuslice.io/memory":"2G,0:1G"}},"spec":{"nodeName":"node1","containers":[{"name":"c"}]},"status":{"containerStatuses":[{"name":"c","containerID":"containerd://'"$CP"'"}]}}' "$KC/pods" >/dev/null
    i=0; while [ $i -lt 100 ] && [ "$(api GET "/v1/tenants/pod-$UP")" != 200 ]; do sleep 0.1; i=$((i + 1)); done
    dp="$CGB/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$(echo "$UP" | tr - _).slice/cri-containerd-$CP.scope"
    mkdir -p "$dp"
    rm -f "$T/p1.up" "$T/p2.up"
    sh -c 'echo $$ >"$0/cgroup.procs" && exec env -u LD_PRELOAD "$1" alloc:1500 mark:"$2" sleep:8000' "$dp" "$P" "$T/p1.up" >"$T/p1.out" 2>&1 &
    P1=$!
    for i in $(seq 300); do [ -e "$T/p1.up" ] && break; sleep 0.01; done
    sleep 1.5
    kill -0 "$P1" 2>/dev/null && ok "a pod of 2G,0:1G holding 1500 MiB on the GPU is left alone (the loosest of its limits)" || { bad "the pod was stopped within its loosest limit"; cat "$T/p1.out"; tail -5 "$T/dlog"; }
    sh -c 'echo $$ >"$0/cgroup.procs" && exec env -u LD_PRELOAD "$1" alloc:1000 mark:"$2" sleep:8000' "$dp" "$P" "$T/p2.up" >"$T/p2.out" 2>&1 &
    P2=$!
    i=0; while kill -0 "$P1" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 "$P1" 2>/dev/null; then bad "the pod runs on at 2500 MiB over its 2 GiB"; kill -9 "$P1" "$P2" 2>/dev/null
    else ok "at 2500 MiB, over its 2 GiB, it is stopped within $((i * 100)) ms"; fi
    kill "$P2" 2>/dev/null; wait "$P1" "$P2" 2>/dev/null
    stop_daemon
    ;;
daemon_dra_restart)
    # A SIGKILL between Prepare and Unprepare: both answered right afterwards (the checkpoint).
    UA=aaaaaaaa-0000-4000-8000-0000000000aa CA=cccccccc-2222-4000-8000-00000000000a
    C1=$(printf 'd3%062d' 0)
    trap 'cg_cleanup_own $UA; cleanup' EXIT
    start_daemon $DRA_ARGS || exit 1
    slice_until 10 || bad "no slice"
    claim a "$CA" 2Gi 30
    alloc allocate --claim ns1/a --pod pa/$UA --node node1 >/dev/null 2>&1 || bad "allocation"
    prep v1 ns1/a/$CA && [ -z "$(claim_err $CA)" ] && ok "prepared" || { bad "prepare"; cat "$T/prep"; }
    kill -9 "$DPID"; wait "$DPID" 2>/dev/null; DPID=
    start_daemon $DRA_ARGS || exit 1
    # (The DRA driver starts beside the API, ready first: its log line may come a little later.)
    for _ in $(seq 100); do grep -q "1 prepared claim(s)" "$T/dlog" && break; sleep 0.05; done
    grep -q "1 prepared claim(s)" "$T/dlog" && ok "the restarted daemon read its checkpoint" || { bad "checkpoint"; tail -5 "$T/dlog"; }
    api GET /v1/tenants/claim-$CA >/dev/null
    jq_py 'assert d["limits"]["memory"]["'"$UUID0"'"] == 2 << 30 and d["limits"]["compute"]["'"$UUID0"'"] == 30, d' && ok "the claim's tenant is back with its limits" || { bad "tenant after restart"; cat "$T/body"; }
    expect 0 "the pod's process after the restart" -- in_claim "$CDI/gpuslice.io-claim_$CA.json" $UA $C1 "$P" alloc:1500 alloc:600
    grep -q "alloc 1500 ok" "$T/out" && grep -q "alloc 600 CUDA_ERROR_OUT_OF_MEMORY" "$T/out" && ok "held to the claim's 2 GiB" || { bad "after restart"; cat "$T/out" "$T/err"; }
    prep v1 ns1/a/$CA && [ -z "$(claim_err $CA)" ] && ok "the kubelet's retry of Prepare: the same answer" || bad "retry"
    kill -9 "$DPID"; wait "$DPID" 2>/dev/null; DPID=
    start_daemon $DRA_ARGS || exit 1
    unprep v1 ns1/a/$CA && ok "Unprepare after a second SIGKILL" || { bad "unprepare"; cat "$T/unprep.err"; }
    want 404 "the tenant is gone" GET /v1/tenants/claim-$CA
    [ ! -e "$CDI/gpuslice.io-claim_$CA.json" ] && ok "the spec is gone" || bad "spec left"
    stop_daemon
    start_daemon $DRA_ARGS || exit 1
    want 404 "and stays gone after a restart" GET /v1/tenants/claim-$CA
    # Unprepare whose checkpoint cannot be written: still prepared, said so; retried, done, and
    # a restart does not bring the claim back.
    prep v1 ns1/a/$CA && [ -z "$(claim_err $CA)" ] || bad "prepare again"
    mkdir "$T/dstate/dra-claims.json.tmp"
    unprep v1 ns1/a/$CA
    grep -q "still prepared" "$T/unprep" && ok "Unprepare that cannot write the checkpoint says the claim is still prepared" || { bad "unprepare on a failed write"; cat "$T/unprep"; }
    want 200 "its tenant is kept" GET /v1/tenants/claim-$CA
    rmdir "$T/dstate/dra-claims.json.tmp"
    unprep v1 ns1/a/$CA && ! grep -q '"error"' "$T/unprep" && ok "retried, it is unprepared" || { bad "retry"; cat "$T/unprep"; }
    kill -9 "$DPID"; wait "$DPID" 2>/dev/null; DPID=
    start_daemon $DRA_ARGS || exit 1
    want 404 "and it does not come back after a SIGKILL" GET /v1/tenants/claim-$CA
    # A checkpoint that cannot be read is moved aside; the daemon starts.
    stop_daemon
    echo '{"version": 1, "claims": [{"bad": 1}]}' >"$T/dstate/dra-claims.json"
    start_daemon $DRA_ARGS || exit 1
    # The DRA driver starts beside the API (ready first): its log line may come a little later.
    for _ in $(seq 100); do grep -q "dra-claims.json.*moved to" "$T/dlog" && break; sleep 0.05; done
    grep -q "dra-claims.json.*moved to .*dra-claims.json.bad-" "$T/dlog" && ls "$T/dstate" | grep -q "dra-claims.json.bad-" && ok "a bad checkpoint is moved aside, and the daemon serves" || {
        bad "bad checkpoint"; grep dra "$T/dlog" | tail -8; ls -la "$T/dstate"; cat "$T/dstate/dra-claims.json" 2>/dev/null
    }
    stop_daemon
    ;;
daemon_dra_soak)
    # 400 claims prepared and unprepared, one at a time as the kubelet calls: none left behind;
    # the p99 time of Prepare.
    trap 'cleanup' EXIT
    # (The events kept for Last-Event-ID are few: 1024 of them, two per claim, would grow the
    # RSS over the first 500 claims.)
    start_daemon $DRA_ARGS --events-history 16 || exit 1
    slice_until 10 || bad "no slice"
    rss0=$(awk '/VmRSS/ {print $2}' /proc/$DPID/status)
    python3 - "$KC" "$KPY" "$KUBELET" "$PLUG/dra.sock" "${DRA_SOAK_CLAIMS:-400}" "$B/proto/kubelet.pb" "$DPID" >"$T/soak" 2>&1 <<'PY'
import json, subprocess, sys, time, urllib.request
kc, kpy, kubelet, sock, n, pb, dpid = sys.argv[1:8]
n = int(n)
def rss():
    for line in open("/proc/%s/status" % dpid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
rss_half = None
def post(obj):
    urllib.request.urlopen(urllib.request.Request(kc + "/objects", data=json.dumps(obj).encode(), headers={"Content-Type": "application/json"}), timeout=10).read()
# The kubelet's side, once: a client that keeps its connection, as the kubelet's does. Each
# claim is written allocated (1Gi and 10 cores of gpu-0, as allocator.py writes them: its
# rules are checked in integration.k8s_apiserver), then prepared and unprepared.
client = subprocess.Popen([kpy, kubelet, "--descriptor-set", pb, "serve-batch", "--sock", sock, "--version", "v1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
times = []
for i in range(n):
    uid = "5043a000-0000-4000-8000-%012d" % i
    name = "s%d" % i
    post({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "soak", "uid": uid},
          "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpuslice.io", "capacity": {"requests": {"memory": "1Gi", "cores": "10"}}}}]}},
          "status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.gpuslice.io", "pool": "node1", "device": "gpu-0", "shareID": "00000000-0000-4000-8000-%012d" % i, "consumedCapacity": {"memory": "1Gi", "cores": "10"}}]}},
                     "reservedFor": [{"resource": "pods", "name": "p%d" % i, "uid": "9043a000-0000-4000-8000-%012d" % i}]}})
    client.stdin.write(json.dumps({"op": "prepare", "claims": ["soak/%s/%s" % (name, uid)]}) + "\n")
    ans = json.loads(client.stdout.readline())
    assert not ans["claims"].get(uid, {"error": ans}).get("error"), ans
    times.append(ans["seconds"])
    client.stdin.write(json.dumps({"op": "unprepare", "claims": ["soak/%s/%s" % (name, uid)]}) + "\n")
    ans = json.loads(client.stdout.readline())
    assert not ans["claims"].get(uid, {"error": ans}).get("error"), ans
    if i == n // 2 - 1:
        rss_half = rss()
client.stdin.close()
client.wait()
times.sort()
print("prepares %d p50_ms %.2f p99_ms %.2f max_ms %.2f rss_half_kib %d rss_end_kib %d" % (n, times[n // 2] * 1e3, times[int(n * 0.99) - 1] * 1e3, times[-1] * 1e3, rss_half, rss()))
PY
    rc=$?
    [ $rc = 0 ] && ok "${DRA_SOAK_CLAIMS:-400} claims prepared and unprepared: $(cat "$T/soak")" || { bad "soak"; tail -20 "$T/soak"; }
    rss1=$(awk '/VmRSS/ {print $2}' /proc/$DPID/status)
    api GET /v1/tenants >/dev/null
    jq_py 'assert not [t for t in d["tenants"] if t["name"].startswith("claim-")], d' && ok "no claim's tenant left" || bad "tenants left"
    [ -z "$(ls "$CDI")" ] && ok "no CDI spec left" || { bad "specs left"; ls "$CDI" | head; }
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["claims"]==[] else 1)' "$T/drun/state/dra-claims.json" 2>/dev/null || python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["claims"]==[] else 1)' "$T/dstate/dra-claims.json" && ok "the checkpoint is empty" || bad "checkpoint not empty"
    # Flat over the second half (the first warms the allocator's per-thread arenas, as each
    # call has a thread of its own, and fills ASan's quarantine): under 1 KiB per claim (a
    # claim's record alone is 9 KiB).
    half=$(sed -n 's/.*rss_half_kib \([0-9]*\).*/\1/p' "$T/soak"); end=$(sed -n 's/.*rss_end_kib \([0-9]*\).*/\1/p' "$T/soak")
    echo "daemon RSS $rss0 -> ${half:-?} -> $rss1 KiB"
    n2=$(( ${DRA_SOAK_CLAIMS:-400} / 2 ))
    # (Under the sanitizers ASan keeps a record of every thread ever made, and each call has
    # one: 6 KiB a claim there; its leak check at the daemon's exit judges leaks instead.)
    perclaim=1; [ "${SANITIZE:-0}" = 1 ] && perclaim=16
    [ -n "$half" ] && [ $(( (end - half) / n2 )) -lt $perclaim ] && ok "the daemon's RSS over the second half: $half -> $end KiB" || bad "RSS grew over the second half: ${half:-?} -> ${end:-?} KiB"
    stop_daemon
    ;;
esac

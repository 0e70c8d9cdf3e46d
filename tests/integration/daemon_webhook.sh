# The webhook in webhook-claims mode (sourced by daemon.sh): pods keep the form they know, and
# the webhook turns a pod's slice into a claim of the DRA driver. gpusliced --webhook-only
# --webhook-claims against the stand-in API server over TLS (tests/k8s/apiserver.py, which
# checks every template written by the upstream schema's rules); AdmissionReviews sent with
# curl; the templates read back from the stand-in's control listener.
# daemon_webhook_claims_e2e goes on to the node: the node daemon as the DRA driver set up as
# daemon_dra.sh sets it up (the stand-in, the DeviceClass, the kubelet's side), the template's
# claim made as the API server's claim controller makes it, allocated by tests/k8s/allocator.py
# and prepared through tests/k8s/kubelet.py; the pod's process held to its slice.
if [ "$CASE" = daemon_webhook_claims_e2e ]; then
    . "$SRC/tests/integration/daemon_dra.sh" # (its setup only: no case of its own matches)
else
    . "$SRC/tests/k8s/lib.sh"
    tls_apiserver
fi
SCHEMA="$SRC/tests/k8s/schema.py"
cp "$T/srv.key" "$T/hook.key"; chmod 600 "$T/hook.key"
HP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
W="env -u LD_LIBRARY_PATH -u GPUSLICE_DAEMON_DIR -u KUBERNETES_SERVICE_HOST $D --foreground --config /dev/null --webhook-only --inject-run-dir /run/gpuslice --inject-lib-dir /opt/gs/lib"
HOOK="--webhook-listen 127.0.0.1:$HP --webhook-cert $T/srv.crt --webhook-key $T/hook.key"
KUBE="--kube-api $KA --kube-ca-file $T/ca.crt --kube-token-file $T/token"
# review NS DRYRUN POD-JSON: the AdmissionReview of a pod's CREATE in namespace NS, sent; the
# answer in $T/hook, the review in $T/rev.
review() {
    printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"r-%s","kind":{"group":"","version":"v1","kind":"Pod"},"namespace":"%s","operation":"CREATE","dryRun":%s,"object":%s}}' "$$" "$1" "$2" "$3" >"$T/rev"
    curl -s -o "$T/hook" -w '%{http_code}' --cacert "$T/ca.crt" -H 'Content-Type: application/json' --data-binary @"$T/rev" "https://127.0.0.1:$HP/mutate"
}
# refused WANT: the answer refuses the pod with a message that has WANT.
refused() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["response"]; assert not r["allowed"] and "patch" not in r and sys.argv[2] in r["status"]["message"], r' "$T/hook" "$1"; }
# templates: the stand-in's templates, as "NS/NAME" lines.
templates() { kctl "$KC/objects/resourceclaimtemplates" | python3 -c 'import json,sys; [print(o["metadata"]["namespace"] + "/" + o["metadata"]["name"]) for o in json.load(sys.stdin)]'; }
# tmpl NS NAME FILE: one template from the stand-in into FILE.
tmpl() { kctl "$KC/objects/resourceclaimtemplates/$1/$2" >"$3"; }
# applied: the pod of $T/rev with the patch of $T/hook applied (add and remove), into $T/pod.
applied() {
    python3 - "$T/rev" "$T/hook" "$T/pod" <<'PY'
import base64, json, sys
pod = json.load(open(sys.argv[1]))["request"]["object"]
r = json.load(open(sys.argv[2]))["response"]
assert r["allowed"] and r["patchType"] == "JSONPatch", r
for op in json.loads(base64.b64decode(r["patch"])):
    keys = [k.replace("~1", "/").replace("~0", "~") for k in op["path"].split("/")[1:]]
    at = pod
    for k in keys[:-1]:
        at = at[int(k)] if isinstance(at, list) else at[k]
    if op["op"] == "remove":
        del at[keys[-1]]
    elif isinstance(at, list):
        assert keys[-1] == "-"; at.append(op["value"])
    else:
        at[keys[-1]] = op["value"]
json.dump(pod, open(sys.argv[3], "w"))
PY
}

case $CASE in
daemon_webhook_claims)
    expect 2 "--webhook-claims without --webhook-listen" -- env -u LD_LIBRARY_PATH "$D" --foreground --simulated --config /dev/null --run-dir "$T/drun2" --webhook-claims
    stderr_has "is a mode of the webhook"
    expect 2 "--webhook-claims with kube-api off" -- $W $HOOK --webhook-claims --kube-api off
    stderr_has "needs kube-api"
    expect 1 "--webhook-claims with no API server (not in a cluster, no kube-api)" -- $W $HOOK --webhook-claims
    stderr_has "makes claim templates in the API server"
    expect 1 "a node daemon serving the webhook, --webhook-claims, no API server" -- env -u LD_LIBRARY_PATH -u KUBERNETES_SERVICE_HOST "$D" --foreground --simulated --config /dev/null --run-dir "$T/drun3" $HOOK --inject-lib-dir /opt/gs/lib --webhook-claims
    stderr_has "makes claim templates in the API server"
    $W $HOOK $KUBE --webhook-claims --pod-latency-namespaces prod --nice 0 >"$T/wlog" 2>&1 &
    WP=$!; BG="$BG $WP"
    i=0; while [ $i -lt 100 ] && ! curl -s --cacert "$T/ca.crt" "https://127.0.0.1:$HP/healthz" >/dev/null 2>&1; do sleep 0.05; i=$((i + 1)); done
    # A pod asking gpuslice.io/memory 8G and compute 50 of one nvidia.com/gpu.
    A='{"metadata":{"name":"a","annotations":{"gpuslice.io/memory":"8G","gpuslice.io/compute":"50"}},"spec":{"containers":[{"name":"main","image":"x","resources":{"limits":{"nvidia.com/gpu":"1","cpu":"1"}}},{"name":"side","image":"y"}]}}'
    code=$(review ns1 false "$A")
    [ "$code" = 200 ] && applied && ok "pod a: allowed with a patch (200)" || { bad "pod a: HTTP $code"; cat "$T/hook" "$T/wlog"; }
    python3 - "$T/pod" <<'PY' && ok "its patch: the claim gpuslice from template gpuslice-m8192mi-c50-n1 in container main only, nvidia.com/gpu taken away, the annotation; no interposer mounts" || { bad "pod a's patch"; cat "$T/pod"; }
import json, sys
p = json.load(open(sys.argv[1]))
T = "gpuslice-m8192mi-c50-n1"
assert p["spec"]["resourceClaims"] == [{"name": "gpuslice", "resourceClaimTemplateName": T}], p["spec"]
main, side = p["spec"]["containers"]
assert main["resources"] == {"limits": {"cpu": "1"}, "claims": [{"name": "gpuslice"}]}, main
assert "resources" not in side and "volumeMounts" not in main and "env" not in main, p
assert "volumes" not in p["spec"], p["spec"]
a = p["metadata"]["annotations"]
assert a["gpuslice.io/claim-template"] == T and a["gpuslice.io/memory"] == "8G", a
PY
    [ "$(templates)" = "ns1/gpuslice-m8192mi-c50-n1" ] && ok "the template is made in the pod's namespace" || { bad "templates: $(templates)"; cat "$T/wlog"; }
    tmpl ns1 gpuslice-m8192mi-c50-n1 "$T/t1.json"
    python3 "$SCHEMA" claimtemplate "$T/t1.json" >"$T/schema" 2>&1 && ok "it passes the upstream schema's rules (schema.py claimtemplate)" || { bad "template schema"; cat "$T/schema" "$T/t1.json"; }
    python3 - "$T/t1.json" <<'PY' && ok "one request of 1 device of class gpuslice.io, 8192Mi and 50 cores, managed-by gpuslice" || { bad "template content"; cat "$T/t1.json"; }
import json, sys
t = json.load(open(sys.argv[1]))
assert t["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpuslice"}, t
r = t["spec"]["spec"]["devices"]["requests"]
assert len(r) == 1 and r[0]["name"] == "gpu", r
e = r[0]["exactly"]
assert e["deviceClassName"] == "gpuslice.io" and e.get("count", 1) == 1, e
assert e["capacity"]["requests"] == {"memory": "8192Mi", "cores": "50"}, e
assert "config" not in t["spec"]["spec"]["devices"], t
PY
    RV1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["resourceVersion"])' "$T/t1.json")
    # The pod as patched, again (the API server's reinvocation): nothing more, nothing made.
    code=$(review ns1 false "$(cat "$T/pod")")
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["response"]; assert r["allowed"] and "patch" not in r, r' "$T/hook" && ok "the patched pod again: allowed, nothing to add" || { bad "second call"; cat "$T/hook"; }
    # The same slice in HAMi's form (8000 MiB rounds up to 8192Mi): the same template, reused.
    B='{"metadata":{"name":"b"},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1","nvidia.com/gpumem":"8000","nvidia.com/gpucores":"50"}}}]}}'
    code=$(review ns1 false "$B")
    [ "$code" = 200 ] && applied && python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); c=p["spec"]["containers"][0]; assert p["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]=="gpuslice-m8192mi-c50-n1" and c["resources"]=={"limits":{},"claims":[{"name":"gpuslice"}]}, p' "$T/pod" && ok "HAMi's gpumem 8000 and gpucores 50: the same template, its resources taken away" || { bad "pod b"; cat "$T/hook"; }
    tmpl ns1 gpuslice-m8192mi-c50-n1 "$T/t1b.json"
    [ "$(templates)" = "ns1/gpuslice-m8192mi-c50-n1" ] && [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["resourceVersion"])' "$T/t1b.json")" = "$RV1" ] && ok "pod b reuses it: no second template, the first unchanged" || { bad "reuse: $(templates)"; }
    # Another namespace: a template of its own there (a pod names templates of its namespace).
    code=$(review ns2 false "$A")
    templates | grep -qx "ns2/gpuslice-m8192mi-c50-n1" && ok "the same slice in ns2: a template in ns2" || bad "ns2: $(templates)"
    # Two webhook replicas at once: another makes the template between this one's GET (404)
    # and its POST (409 AlreadyExists): it looks again, finds the same, and allows the pod.
    # (The stand-in's /race: the template made by "another writer" right after the GET.)
    race() { # race NS TIMES GONE: t1.json's template in NS, made by another writer on a GET
        python3 - "$T/t1.json" "$1" "$2" "$3" <<'PY' | kctl -d @- "$KC/race" >/dev/null
import json, sys
t = json.load(open(sys.argv[1]))
md = t["metadata"]
for k in ("uid", "resourceVersion", "creationTimestamp", "generation"):
    md.pop(k, None)
md["namespace"], md["uid"] = sys.argv[2], "race-" + sys.argv[2]
print(json.dumps({"object": t, "times": int(sys.argv[3]), "gone": sys.argv[4] == "true"}))
PY
    }
    race ns4 1 false
    code=$(review ns4 false "$A")
    if [ "$code" = 200 ] && applied && python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]=="gpuslice-m8192mi-c50-n1", p' "$T/pod"; then
        ok "a template made by another replica between the GET and the POST (409): looked at again, the same, the pod allowed"
    else bad "a race with another replica: HTTP $code"; cat "$T/hook"; fi
    tmpl ns4 gpuslice-m8192mi-c50-n1 "$T/t4.json"
    grep -q '"uid": *"race-ns4"' "$T/t4.json" && ok "ns4's template is the other replica's, not made twice" || { bad "ns4's template"; cat "$T/t4.json"; }
    # Made and deleted again between each GET and POST, twice: refused, saying so.
    race ns5 2 true
    code=$(review ns5 false "$A")
    refused "made and gone again while the webhook looked" && ! templates | grep -q "^ns5/" && ok "a template made and gone again twice: refused, saying so" || { bad "made and gone twice"; cat "$T/hook"; }
    # A dry run: the patch, and nothing made.
    code=$(review ns1 true '{"metadata":{"name":"d","annotations":{"gpuslice.io/memory":"2G"}},"spec":{"containers":[{"name":"c"}]}}')
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["response"]; assert r["allowed"] and r["patch"], r' "$T/hook" && ! templates | grep -q m2048mi && ok "dryRun: the patch, no template made" || { bad "dry run: $(templates)"; cat "$T/hook"; }
    # A template of that name that asks for something else: the pod is refused, naming it.
    kctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate","metadata":{"name":"gpuslice-m4096mi-n1","namespace":"ns1"},"spec":{"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpuslice.io","capacity":{"requests":{"memory":"4Gi","cores":"90"}}}}]}}}}' "$KC/objects" >/dev/null
    code=$(review ns1 false '{"metadata":{"name":"e","annotations":{"gpuslice.io/memory":"4G"}},"spec":{"containers":[{"name":"c"}]}}')
    refused "ResourceClaimTemplate ns1/gpuslice-m4096mi-n1: a template of that name asks for something else" && ok "a conflicting template of that name: refused, naming it" || { bad "conflict"; cat "$T/hook"; }
    # ... and one that asks the same in the API server's own forms (defaults, 4Gi): reused.
    kctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate","metadata":{"name":"gpuslice-m4096mi-n1","namespace":"ns3"},"spec":{"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpuslice.io","allocationMode":"ExactCount","count":1,"capacity":{"requests":{"memory":"4Gi"}}}}]}}}}' "$KC/objects" >/dev/null
    code=$(review ns3 false '{"metadata":{"name":"e","annotations":{"gpuslice.io/memory":"4G"}},"spec":{"containers":[{"name":"c"}]}}')
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["response"]; assert r["allowed"] and r["patch"], r' "$T/hook" && ok "the same slice written as 4Gi with the defaults: reused" || { bad "same in other forms"; cat "$T/hook"; }
    # Per-GPU values cannot be one request: refused, saying to give one size.
    code=$(review ns1 false '{"metadata":{"name":"f","annotations":{"gpuslice.io/memory":"0:8G,1:4G"}},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"2"}}}]}}')
    refused "annotation gpuslice.io/memory" && refused "give one size" && ok "per-GPU memory: refused, naming the annotation" || { bad "per-GPU"; cat "$T/hook"; }
    # The latency class: only in pod-latency-namespaces, and then in the template's config.
    code=$(review dev false '{"metadata":{"name":"g","annotations":{"gpuslice.io/memory":"1G","gpuslice.io/priority":"latency"}},"spec":{"containers":[{"name":"c"}]}}')
    refused "pods of namespace dev may not have" && ok "latency outside pod-latency-namespaces: refused" || { bad "latency in dev"; cat "$T/hook"; }
    code=$(review prod false '{"metadata":{"name":"g","annotations":{"gpuslice.io/memory":"1G","gpuslice.io/priority":"latency"}},"spec":{"containers":[{"name":"c"}]}}')
    tmpl prod gpuslice-m1024mi-n1-latency "$T/t2.json"
    python3 "$SCHEMA" claimtemplate "$T/t2.json" >"$T/schema" 2>&1 &&
        python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); c=t["spec"]["spec"]["devices"]["config"]; assert c==[{"requests":["gpu"],"opaque":{"driver":"gpu.gpuslice.io","parameters":{"apiVersion":"gpu.gpuslice.io/v1alpha1","kind":"ClaimConfig","priority":"latency"}}}], c' "$T/t2.json" &&
        ok "latency in prod: template gpuslice-m1024mi-n1-latency, the class in its config, schema-valid" || { bad "latency in prod"; cat "$T/hook" "$T/t2.json" "$T/schema"; }
    # The API server refuses the webhook (RBAC): the pod is refused, not let through unplaced.
    kctl -d '{"verb":"create","resource":"resourceclaimtemplates"}' "$KC/deny" >/dev/null
    code=$(review ns1 false '{"metadata":{"name":"h","annotations":{"gpuslice.io/memory":"3G"}},"spec":{"containers":[{"name":"c"}]}}')
    refused "did not make it: HTTP 403" && ok "templates forbidden to the webhook: the pod is refused, saying why" || { bad "403"; cat "$T/hook"; }
    kctl -d '{"clear":true}' "$KC/deny" >/dev/null
    # Opted out: untouched (its nvidia.com/gpu goes to the device plugin as ever).
    code=$(review ns1 false '{"metadata":{"name":"o","annotations":{"gpuslice.io/inject":"false","gpuslice.io/memory":"5G"}},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}')
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["response"]; assert r["allowed"] and "patch" not in r, r' "$T/hook" && ! templates | grep -q m5120mi && ok "gpuslice.io/inject: false: untouched, nothing made" || { bad "opt-out"; cat "$T/hook"; }
    kill "$WP"; wait "$WP"; rc=$?
    [ $rc = 0 ] && ok "SIGTERM: exit 0" || { bad "webhook exit $rc"; cat "$T/wlog"; } ;;
daemon_webhook_claims_e2e)
    UW=eeeeeeee-0000-4000-8000-00000000000e CW=eeeeeeee-1111-4000-8000-00000000000e
    C1=$(printf 'e1%062d' 0)
    trap 'cg_cleanup_own $UW; cleanup' EXIT
    start_daemon $DRA_ARGS || exit 1
    slice_until 10 && ok "the node's ResourceSlice is published" || bad "no slice"
    $W $HOOK $KUBE --webhook-claims --nice 0 >"$T/wlog" 2>&1 &
    WP=$!; BG="$BG $WP"
    i=0; while [ $i -lt 100 ] && ! curl -s --cacert "$T/ca.crt" "https://127.0.0.1:$HP/healthz" >/dev/null 2>&1; do sleep 0.05; i=$((i + 1)); done
    # The pod as its author writes it: 4G and 25 % of one nvidia.com/gpu.
    POD='{"metadata":{"name":"pw","namespace":"ns1","uid":"'"$UW"'","annotations":{"gpuslice.io/memory":"4G","gpuslice.io/compute":"25"}},"spec":{"nodeName":"node1","containers":[{"name":"main","resources":{"limits":{"nvidia.com/gpu":"1"}}}]},"status":{"containerStatuses":[{"name":"main","containerID":"containerd://'"$C1"'"}]}}'
    code=$(review ns1 false "$POD")
    [ "$code" = 200 ] && applied && ok "the webhook: pod pw in claim form" || { bad "review: $code"; cat "$T/hook" "$T/wlog"; }
    # The claim controller's part: a claim from the template, named for the pod, reserved for it.
    tmpl ns1 gpuslice-m4096mi-c25-n1 "$T/t.json"
    python3 - "$T/t.json" "$CW" >"$T/claim.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
print(json.dumps({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                  "metadata": {"name": "pw-gpuslice-x7k2q", "namespace": "ns1", "uid": sys.argv[2],
                               "annotations": {"resource.kubernetes.io/pod-claim-name": "gpuslice"}},
                  "spec": t["spec"]["spec"]}))
PY
    kctl -d @"$T/claim.json" "$KC/objects" >/dev/null
    alloc allocate --claim ns1/pw-gpuslice-x7k2q --pod pw/$UW --node node1 >"$T/al" 2>&1 && ok "the allocator places the template's claim on gpu-0" || { bad "allocation"; cat "$T/al"; }
    if prep v1 ns1/pw-gpuslice-x7k2q/$CW && [ -z "$(claim_err $CW)" ]; then ok "the kubelet prepares it"; else bad "prepare"; cat "$T/prep" "$T/prep.err"; fi
    api GET /v1/tenants/claim-$CW >/dev/null
    jq_py 'assert d["limits"]["memory"]["'"$UUID0"'"] == 4 << 30 and d["limits"]["compute"]["'"$UUID0"'"] == 25, d' && ok "the claim's tenant: the pod's 4G and 25 %" || { bad "claim tenant"; cat "$T/body"; }
    # The pod as the API server keeps it (patched), on node1: followed, but no tenant of its own.
    kctl -d "$(cat "$T/pod")" "$KC/pods" >/dev/null
    i=0; while [ $i -lt 100 ]; do api GET /v1/pods >/dev/null; grep -q '"pw"' "$T/body" && break; sleep 0.1; i=$((i + 1)); done
    grep -q '"pw"' "$T/body" || bad "the daemon does not follow pod pw"
    sleep 0.3 # (a tenant, were one made, is made as the pod is read)
    api GET /v1/tenants >/dev/null
    jq_py 'n=[t["name"] for t in d["tenants"]]; assert "pod-'"$UW"'" not in n and "claim-'"$CW"'" in n, n' && ok "the pod in claim form is followed, and no annotation tenant pod-<uid> is made" || { bad "pod tenant made"; cat "$T/body"; }
    expect 0 "a process of pod pw's container (its claim's CDI spec)" -- in_claim "$CDI/gpuslice.io-claim_$CW.json" $UW $C1 "$P" total alloc:4000 alloc:200
    grep -q "total $((4 << 30))" "$T/out" && grep -q "alloc 4000 ok" "$T/out" && grep -q "alloc 200 CUDA_ERROR_OUT_OF_MEMORY" "$T/out" && ok "its process sees 4 GiB, holds 4000M, is refused 200M more" || { bad "pod memory"; cat "$T/out" "$T/err"; }
    kill "$WP"; wait "$WP" ;;
esac

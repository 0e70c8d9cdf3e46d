#!/bin/sh
# The stand-in API server (tests/k8s/apiserver.py) speaks the protocol the daemon will rely on,
# checked with curl over TLS with the tests' own CA: list with resourceVersion and pages; a
# chunked watch with ADDED, MODIFIED, DELETED and BOOKMARK from a resourceVersion; 410 Expired
# after a compaction; a connection closed mid-line; 401 without the token; 403 for a denied
# verb; events written and kept; and TLS refused without the CA. resource.k8s.io/v1: discovery,
# ResourceSlices created, listed by selectors, updated (409 when stale, 422 for an immutable
# field), deleted one by one and by collection; the schema checks (tests/k8s/schema.py) of good
# and bad samples, each bad one refused by the stand-in with 422 naming its field; claims and
# their status; and the allocator (tests/k8s/allocator.py) sharing a 16 GiB device by consumable
# capacity, its rounding, its defaults, its refusals and --force. usage: apiserver_check.sh SRC
set -u
SRC=$1
T=$(mktemp -d)
. "$SRC/tests/k8s/lib.sh"
# The interpreter itself, found once: a version manager's shim (pyenv) costs 0.1 s a call.
PY=$(python3 -c 'import sys; print(sys.executable)') || { echo "FAIL: python3"; exit 1; }
APISERVER= w1= w2=
trap 'kill $APISERVER $w1 $w2 2>/dev/null; rm -rf "$T"' EXIT

make_ca ca srv || { echo "FAIL: openssl"; exit 1; }
start_apiserver --tls "$T/srv.crt" "$T/srv.key" --token sekrit --history 50 || { echo "FAIL: the stand-in did not start"; exit 1; }
A=$KA C=$KC
k() { curl -sS --cacert "$T/ca.crt" -H "Authorization: Bearer sekrit" "$@"; }
ctl() { kctl "$@"; }
pod() { kpod "$@"; }
jget() { "$PY" -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$@"; }

# TLS: refused without our CA; 401 without the token.
curl -sS -o /dev/null "$A/api/v1/pods" 2>/dev/null; r=$?
if [ "$r" = 60 ]; then ok "TLS without the CA is refused (curl 60)"; else bad "TLS without the CA: curl $r"; fi
code=$(curl -sS --cacert "$T/ca.crt" -o "$T/401" -w '%{http_code}' "$A/api/v1/pods")
if [ "$code" = 401 ] && [ "$(jget 'd["reason"]' <"$T/401")" = Unauthorized ]; then ok "no token: 401 Unauthorized"; else bad "no token: $code"; fi

# A list, selected by node, with its resourceVersion; pages with limit and continue.
ctl -d "$(pod a 8G node1)" "$C/pods" >/dev/null
ctl -d "$(pod b 4G node1)" "$C/pods" >/dev/null
ctl -d "$(pod c 2G node2)" "$C/pods" >/dev/null
k "$A/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1" >"$T/list"
n=$(jget 'len(d["items"])' <"$T/list"); rv=$(jget 'd["metadata"]["resourceVersion"]' <"$T/list")
if [ "$n" = 2 ] && [ "$(jget 'd["kind"]' <"$T/list")" = PodList ] && [ "$rv" -gt 0 ]; then ok "list: 2 pods of node1 at resourceVersion $rv"; else bad "list: $n items, rv $rv"; fi
k "$A/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1&limit=1" >"$T/p1"
cont=$(jget 'd["metadata"].get("continue","")' <"$T/p1")
k "$A/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1&limit=1&continue=$("$PY" -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1]))' "$cont")" >"$T/p2"
if [ "$(jget 'd["items"][0]["metadata"]["name"]' <"$T/p1")" = a ] && [ "$(jget 'd["items"][0]["metadata"]["name"]' <"$T/p2")" = b ] && [ -z "$(jget 'd["metadata"].get("continue","")' <"$T/p2")" ]; then ok "pages: limit 1 and continue give a, then b, then no continue"; else bad "pages: $(cat "$T/p1" "$T/p2")"; fi
code=$(k -o /dev/null -w '%{http_code}' "$A/api/v1/pods?fieldSelector=spec.nodeName%21%3Dx")
[ "$code" = 400 ] && ok "an unsupported field selector: 400" || bad "selector !=: $code"

# A watch from that resourceVersion: changes as chunked JSON lines, a bookmark, the end.
k -N --raw -D "$T/wh" "$A/api/v1/pods?watch=true&allowWatchBookmarks=true&timeoutSeconds=3&fieldSelector=spec.nodeName%3Dnode1&resourceVersion=$rv" >"$T/w1raw" &
w1=$!
sleep 0.5
ctl -d "$(pod a 6G node1)" "$C/pods" >/dev/null
ctl -d "$(pod d 1G node1)" "$C/pods" >/dev/null
ctl -d "$(pod e 1G node2)" "$C/pods" >/dev/null
ctl -X DELETE "$C/pods/ns1/b" >/dev/null
ctl -X POST "$C/bookmark" >/dev/null
wait $w1; w1=
if grep -qi '^transfer-encoding: chunked' "$T/wh"; then ok "the watch is a chunked stream"; else bad "not chunked: $(cat "$T/wh")"; fi
k -N "$A/api/v1/pods?watch=true&allowWatchBookmarks=true&timeoutSeconds=1&fieldSelector=spec.nodeName%3Dnode1&resourceVersion=$rv" >"$T/w1"
types=$("$PY" -c '
import json, sys
print(" ".join(json.loads(l)["type"] + ":" + json.loads(l)["object"]["metadata"].get("name", "-") for l in open(sys.argv[1]) if l.strip()))' "$T/w1")
if [ "$types" = "MODIFIED:a ADDED:d DELETED:b" ]; then ok "watch from $rv replays: $types"; else bad "watch replay: '$types'"; fi
raw=$("$PY" -c '
import sys
d = open(sys.argv[1], "rb").read()
# chunked framing: size line, data, CRLF; the data lines are JSON events
out, i = [], 0
while True:
    j = d.index(b"\r\n", i); n = int(d[i:j], 16)
    if n == 0: break
    out.append(d[j + 2:j + 2 + n]); i = j + 2 + n + 2
import json
print(" ".join(json.loads(c)["type"] for c in out))' "$T/w1raw" 2>&1)
if [ "$raw" = "MODIFIED ADDED DELETED BOOKMARK" ]; then ok "live watch: $raw, then the end of the stream"; else bad "live watch: '$raw'"; fi

# 410: a watch from before a compaction gets an ERROR event with a 410 Expired Status.
ctl -X POST "$C/compact" >/dev/null
k -N "$A/api/v1/pods?watch=true&timeoutSeconds=2&resourceVersion=$rv" >"$T/w410"
if [ "$(jget 'd["type"] + " " + str(d["object"]["code"]) + " " + d["object"]["reason"]' <"$T/w410")" = "ERROR 410 Expired" ]; then ok "a compacted resourceVersion: ERROR 410 Expired"; else bad "410: $(cat "$T/w410")"; fi

# A connection closed mid-stream: half a line, then the end without the last chunk.
k -N "$A/api/v1/pods?watch=true&timeoutSeconds=5" >"$T/wdrop" 2>"$T/wdrop.err" &
w2=$!
sleep 0.5
ctl -X POST "$C/drop" >/dev/null
wait $w2; r=$?; w2=
if [ "$r" != 0 ] && tail -c 20 "$T/wdrop" | grep -q 'metad$'; then ok "dropped mid-line (curl $r: $(tr -d '\n' <"$T/wdrop.err" | cut -c1-60))"; else bad "drop: curl $r, $(tail -c 60 "$T/wdrop")"; fi

# RBAC: a denied verb is 403 Forbidden, naming it.
ctl -d '{"verb":"watch","resource":"pods"}' "$C/deny" >/dev/null
code=$(k -o "$T/403" -w '%{http_code}' "$A/api/v1/pods?watch=true")
if [ "$code" = 403 ] && grep -q 'cannot watch resource \\"pods\\"' "$T/403"; then ok "denied watch: 403 naming the verb"; else bad "403: $code $(cat "$T/403")"; fi
ctl -d '{"clear":true}' "$C/deny" >/dev/null

# Events: written, kept, and malformed ones refused.
code=$(k -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -d '{"metadata":{"generateName":"a."},"involvedObject":{"kind":"Pod","namespace":"ns1","name":"a"},"reason":"InvalidAnnotation","message":"m","type":"Warning"}' "$A/api/v1/namespaces/ns1/events")
code2=$(k -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -d '{"reason":"x"}' "$A/api/v1/namespaces/ns1/events")
if [ "$code" = 201 ] && [ "$code2" = 422 ] && [ "$(ctl "$C/events" | jget 'd[0]["reason"]')" = InvalidAnnotation ]; then ok "events: 201 kept, 422 without involvedObject"; else bad "events: $code $code2"; fi

# ---- resource.k8s.io/v1 ----
R="$A/apis/resource.k8s.io/v1"
kj() { k -H 'Content-Type: application/json' "$@"; }
code() { kj -o "$T/out" -w '%{http_code}' "$@"; }
SCH="$SRC/tests/k8s/schemas"

# Discovery: the group, its version, the resources and their scopes.
k "$A/apis" | jget '"resource.k8s.io" in [g["name"] for g in d["groups"]]' >"$T/d1"
k "$A/apis/resource.k8s.io" | jget 'd["kind"] + " " + d["preferredVersion"]["groupVersion"]' >"$T/d2"
k "$R" | jget '" ".join(sorted(r["name"] + ":" + str(r["namespaced"]) for r in d["resources"]))' >"$T/d3"
if [ "$(cat "$T/d1")" = True ] && [ "$(cat "$T/d2")" = "APIGroup resource.k8s.io/v1" ] &&
   [ "$(cat "$T/d3")" = "deviceclasses:False resourceclaims/status:True resourceclaims:True resourceclaimtemplates:True resourceslices:False" ]; then
    ok "discovery: resource.k8s.io/v1 with $(cat "$T/d3")"
else bad "discovery: $(cat "$T/d1" "$T/d2" "$T/d3")"; fi

# ResourceSlices: create (uid, resourceVersion, creationTimestamp), 409 on a taken name,
# generateName, lists by node, driver and label, get, update (409 when stale), delete.
c1=$(code -d @"$SCH/resourceslice.json" "$R/resourceslices"); cp "$T/out" "$T/s1"
c2=$(code -d @"$SCH/resourceslice.json" "$R/resourceslices")
r2=$(jget 'd["reason"]' <"$T/out")
if [ "$c1" = 201 ] && [ -n "$(jget 'd["metadata"]["uid"] and d["metadata"]["resourceVersion"] and d["metadata"]["creationTimestamp"]' <"$T/s1")" ] &&
   [ "$c2" = 409 ] && [ "$r2" = AlreadyExists ]; then ok "slice created (201, uid and resourceVersion), again: 409 AlreadyExists"; else bad "slice create: $c1 $c2 $r2"; fi
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["metadata"]={"generateName":"node2-gpu.gpuslice.io-","labels":{"tier":"b"}}; d["spec"]["nodeName"]=d["spec"]["pool"]["name"]="node2"; print(json.dumps(d))' "$SCH/resourceslice.json" >"$T/s2.json"
c=$(code -d @"$T/s2.json" "$R/resourceslices"); gen=$(jget 'd["metadata"]["name"]' <"$T/out")
case "$c $gen" in "201 node2-gpu.gpuslice.io-"?????) ok "generateName: $gen" ;; *) bad "generateName: $c $gen" ;; esac
n1=$(k "$R/resourceslices?fieldSelector=spec.nodeName%3Dnode1" | jget '",".join(i["spec"]["nodeName"] for i in d["items"])')
n2=$(k "$R/resourceslices?fieldSelector=spec.driver%3Dgpu.gpuslice.io" | jget 'len(d["items"])')
n3=$(k "$R/resourceslices?labelSelector=tier%3Db" | jget '",".join(i["spec"]["nodeName"] for i in d["items"])')
n4=$(k "$R/resourceslices?labelSelector=tier%20notin%20(b)" | jget '",".join(i["spec"]["nodeName"] for i in d["items"])')
lrv=$(k "$R/resourceslices" | jget 'd["kind"] + " " + d["metadata"]["resourceVersion"]')
c=$(code "$R/resourceslices?fieldSelector=spec.devices%3Dx")
if [ "$n1 $n2 $n3 $n4" = "node1 2 node2 node1" ] && [ "$c" = 400 ]; then ok "lists: by node, driver and labels ($lrv); an unknown field: 400"; else bad "lists: '$n1 $n2 $n3 $n4' $c"; fi
S1="$R/resourceslices/node1-gpu.gpuslice.io-x7k2p"
k "$S1" >"$T/s1get"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["spec"]["pool"]["generation"]=2; print(json.dumps(d))' "$T/s1get" >"$T/s1new"
c1=$(code -X PUT -d @"$T/s1new" "$S1"); g=$(jget 'str(d["metadata"]["generation"]) + " " + str(d["spec"]["pool"]["generation"])' <"$T/out")
c2=$(code -X PUT -d @"$T/s1new" "$S1"); r2=$(jget 'd["reason"]' <"$T/out")
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["metadata"].pop("resourceVersion"); d["spec"]["driver"]="other.example.com"; print(json.dumps(d))' "$T/s1new" >"$T/s1drv"
c3=$(code -X PUT -d @"$T/s1drv" "$S1"); f3=$(jget '" ".join(c["field"] for c in d["details"]["causes"])' <"$T/out")
if [ "$c1 $g" = "200 2 2" ] && [ "$c2 $r2" = "409 Conflict" ] && [ "$c3 $f3" = "422 spec.driver" ]; then ok "update: 200 (generation 2), stale resourceVersion: 409 Conflict, a new driver: 422 naming spec.driver"; else bad "update: $c1 '$g' / $c2 $r2 / $c3 '$f3'"; fi
c1=$(code -X DELETE "$R/resourceslices?labelSelector=tier%3Db"); d1=$(jget '" ".join(i["spec"]["nodeName"] for i in d["items"])' <"$T/out")
left=$(k "$R/resourceslices" | jget '" ".join(i["spec"]["nodeName"] for i in d["items"])')
c2=$(code -X DELETE "$S1"); c3=$(code "$S1")
if [ "$c1 $d1 $left" = "200 node2 node1" ] && [ "$c2 $c3" = "200 404" ]; then ok "delete: a collection by label (node2's), then one (404 after)"; else bad "delete: $c1 '$d1' '$left' $c2 $c3"; fi

# The bearer token and RBAC as for pods.
c1=$(curl -sS --cacert "$T/ca.crt" -o /dev/null -w '%{http_code}' "$R/resourceslices")
ctl -d '{"verb":"create","resource":"resourceslices"}' "$C/deny" >/dev/null
c2=$(code -d @"$SCH/resourceslice.json" "$R/resourceslices")
if [ "$c1" = 401 ] && [ "$c2" = 403 ] && grep -q 'cannot create resource \\"resourceslices\\" in API group \\"resource.k8s.io\\"' "$T/out"; then ok "slices: 401 without the token, 403 for a denied create"; else bad "slices auth: $c1 $c2 $(cat "$T/out")"; fi
ctl -d '{"clear":true}' "$C/deny" >/dev/null

# The documents: the good samples pass, and each bad one is refused naming its field, by
# schema.py and by the stand-in (422 with a cause for that field).
mkdir -p "$T/bad"
"$PY" "$SRC/tests/k8s/schema.py" resourceslice "$SCH/resourceslice.json" >"$T/one"; r0=$?
if "$PY" "$SRC/tests/k8s/schema.py" cases "$SCH" "$T/bad" >"$T/cases"; then r=0; else r=1; fi
"$PY" "$SRC/tests/k8s/schema.py" resourceslice "$T/bad/slice-max-over-capacity.json" >"$T/one"; r1=$?
n=$(grep -c '^ok ' "$T/cases"); ng=$(grep -c '^good ' "$T/cases")
if [ $r0 = 0 ] && [ $r = 0 ] && [ $r1 = 1 ] && grep -q 'validRange.max: Invalid value: "32Gi"' "$T/one"; then ok "schema.py: $ng good samples pass, $n bad ones refused naming their field"; else bad "schema.py: good $r0, cases $r, one $r1: $(grep -v '^ok' "$T/cases") $(cat "$T/one")"; fi
# (one process posts them all: a curl and a python per case would double the test's time)
"$PY" - "$T/cases" "$T/bad" "$R" "$T/ca.crt" sekrit >"$T/api422" <<'EOF'
import json, ssl, sys, urllib.error, urllib.request
cases, bad, base, ca, token = sys.argv[1:]
ctx = ssl.create_default_context(cafile=ca)
url = {"resourceslice": "/resourceslices", "claimtemplate": "/namespaces/ns1/resourceclaimtemplates"}
for line in open(cases):
    if not line.startswith("ok "):
        continue
    _, name, kind, field = line.split()
    if kind not in url:
        continue
    req = urllib.request.Request(base + url[kind], data=open(f"{bad}/{name}.json", "rb").read(),
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req, context=ctx)
        print(f"FAIL {name}: accepted")
    except urllib.error.HTTPError as e:
        st = json.load(e)
        fields = [c["field"] for c in st.get("details", {}).get("causes", [])]
        ok = e.code == 422 and st["reason"] == "Invalid" and field in fields and field in st["message"]
        print(f"{'ok' if ok else 'FAIL'} {name}: {e.code} {st['message'][:200]}")
EOF
napi=$(grep -c '^ok ' "$T/api422")
if [ "$napi" -gt 30 ] && ! grep -q '^FAIL' "$T/api422"; then ok "the stand-in refuses all $napi bad slices and templates with 422 naming the field"; else bad "the stand-in's 422s: $(grep -v '^ok' "$T/api422")"; fi
c=$(code -d @"$SCH/claimtemplate.json" "$R/namespaces/ns1/resourceclaimtemplates")
n=$(k "$R/resourceclaimtemplates" | jget 'len(d["items"])')
[ "$c $n" = "201 1" ] && ok "the good template: 201, listed across namespaces" || bad "template: $c $n"

# Claims: created without a status; /status changes only the status; the main resource keeps it.
CL="$R/namespaces/ns1/resourceclaims"
c1=$(code -d '{"metadata":{"name":"s"},"spec":{"devices":{"requests":[]}},"status":{"reservedFor":[{"resource":"pods","name":"p","uid":"u"}]}}' "$CL")
st1=$(jget '"status" in d' <"$T/out")
k "$CL/s" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); d["status"]={"reservedFor":[{"resource":"pods","name":"p","uid":"u1"}]}; d["spec"]["x"]=1; print(json.dumps(d))' >"$T/cs"
c2=$(code -X PUT -d @"$T/cs" "$CL/s/status"); st2=$(jget 'd["status"]["reservedFor"][0]["uid"] + " " + str("x" in d["spec"])' <"$T/out")
k "$CL/s" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); d["status"]={}; d["metadata"]["labels"]={"a":"b"}; print(json.dumps(d))' >"$T/cm"
c3=$(code -X PUT -d @"$T/cm" "$CL/s"); st3=$(jget 'd["status"]["reservedFor"][0]["uid"] + " " + d["metadata"]["labels"]["a"]' <"$T/out")
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["metadata"].pop("resourceVersion"); print(json.dumps(d))' "$T/cs" >"$T/cs2"
c5=$(code -X PUT -d @"$T/cs2" "$CL/s"); f5=$(jget 'd["details"]["causes"][0]["field"]' <"$T/out")
ctl -d '{"verb":"update","resource":"resourceclaims/status"}' "$C/deny" >/dev/null
c4=$(code -X PUT -d @"$T/cs" "$CL/s/status")
ctl -d '{"clear":true}' "$C/deny" >/dev/null
if [ "$c1 $st1 $c2 $st2 $c3 $st3 $c4 $c5 $f5" = "201 False 200 u1 False 200 u1 b 403 422 spec" ]; then ok "claims: no status on create, /status writes only it, the main resource keeps it (its spec immutable: 422), 403 when denied"; else bad "claims: '$c1 $st1 $c2 $st2 $c3 $st3 $c4 $c5 $f5'"; fi

# The allocator, playing the scheduler: a 16 GiB device (memory in steps of 256Mi, cores 0..100).
ALLOC="$PY $SRC/tests/k8s/allocator.py --control $C"
ALLOC_API="$PY $SRC/tests/k8s/allocator.py --api $A --ca $T/ca.crt --token sekrit"
kj -d @"$SCH/resourceslice.json" "$R/resourceslices" >/dev/null
ctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"gpu.gpuslice.io"},"spec":{"selectors":[{"cel":{"expression":"device.driver == \"gpu.gpuslice.io\""}}]}}' "$C/objects" >/dev/null
# dclaims NAME[:MEMORY[:CORES]]...: claims of ns1, each asking one device of the class with those
# capacities (none: the defaults).
dclaims() {
    "$PY" - "$C/objects" "$@" <<'EOF'
import json, sys, urllib.request
for arg in sys.argv[2:]:
    name, *caps = arg.split(":")
    ex = {"deviceClassName": "gpu.gpuslice.io"}
    if caps:
        ex["capacity"] = {"requests": dict(zip(["memory", "cores"], caps))}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": name, "namespace": "ns1"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": ex}], "config": [
                 {"requests": ["gpu"], "opaque": {"driver": "gpu.gpuslice.io", "parameters": {"weight": 50}}}]}}}
    urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=json.dumps(claim).encode(),
                                                  headers={"Content-Type": "application/json"}))
EOF
}
# got FILE: "DEVICE memory=M cores=C" from the allocator's line for the claim's first result
got() { sed -n '1s/^[^>]*-> [^ ]* [^/]*\/\([^ ]*\) share [^ ]* \(.*\)$/\1 \2/p' "$1"; }
dclaims a:8Gi:25 b:4Gi:50 c:8Gi r1:1 r2:100Mi r3:300Mi none many:1Gi:150 big:32Gi
$ALLOC_API allocate --claim ns1/a --pod pa/uid-a >"$T/ala" 2>&1; ra=$?
$ALLOC allocate --claim ns1/b --pod pb/uid-b >"$T/alb" 2>&1; rb=$?
$ALLOC allocate --claim ns1/c >"$T/alc" 2>&1; rc=$?
ctl "$C/objects/resourceclaims/ns1/a" >"$T/ca"
shape=$(jget 'str((d["status"]["allocation"]["devices"]["results"][0]["driver"], d["status"]["allocation"]["devices"]["results"][0]["pool"], d["status"]["allocation"]["devices"]["results"][0]["device"], d["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"], d["status"]["allocation"]["devices"]["config"][0]["source"], d["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"], d["status"]["reservedFor"]))' <"$T/ca")
sa=$(grep -o 'share [^ ]*' "$T/ala"); sb=$(grep -o 'share [^ ]*' "$T/alb")
if [ "$ra $rb" = "0 0" ] && [ "$(got "$T/ala")" = "gpu-0 cores=25 memory=8Gi" ] && [ "$(got "$T/alb")" = "gpu-0 cores=50 memory=4Gi" ] &&
   [ "$shape" = "('gpu.gpuslice.io', 'node1', 'gpu-0', {'cores': '25', 'memory': '8Gi'}, 'FromClaim', ['node1'], [{'resource': 'pods', 'name': 'pa', 'uid': 'uid-a'}])" ] &&
   [ -n "$sa" ] && [ "$sa" != "$sb" ]; then ok "allocator: 8Gi/25 (through the API) and 4Gi/50 share gpu-0, each with its own shareID"; else bad "allocator a, b: $ra $rb $shape $sa $sb $(cat "$T/ala" "$T/alb")"; fi
if [ "$rc" = 3 ] && grep -q 'memory: 8Gi more does not fit (12Gi' "$T/alc"; then ok "allocator: a third 8Gi does not fit: exit 3 ($(cut -c1-90 "$T/alc"))"; else bad "allocator c: $rc $(cat "$T/alc")"; fi
rr=""
for c in r1 r2 r3; do $ALLOC allocate --claim ns1/$c >"$T/al$c" 2>&1; rr="$rr $?:$(got "$T/al$c")"; done
if [ "$rr" = " 0:gpu-0 cores=0 memory=256Mi 0:gpu-0 cores=0 memory=256Mi 0:gpu-0 cores=0 memory=512Mi" ]; then ok "allocator: rounding (beside a and b): 1 byte -> 256Mi, 100Mi -> 256Mi, 300Mi -> 512Mi (cores 0 by default)"; else bad "rounding: '$rr'"; fi
$ALLOC release --claim ns1/a --claim ns1/b --claim ns1/r1 --claim ns1/r2 --claim ns1/r3 >/dev/null
$ALLOC allocate --claim ns1/none >"$T/alnone" 2>&1; rn=$?
$ALLOC allocate --claim ns1/a >"$T/aln" 2>&1; rn2=$?
if [ "$rn:$(got "$T/alnone") $rn2" = "0:gpu-0 cores=0 memory=16Gi 3" ]; then ok "allocator: a claim asking nothing takes the default: all the memory (16Gi), 0 cores; then nothing else fits"; else bad "default: $rn:$(got "$T/alnone") $rn2 $(cat "$T/aln")"; fi
$ALLOC release --claim ns1/none >/dev/null
$ALLOC allocate --claim ns1/many >"$T/alm" 2>&1; rm_=$?
if [ "$rm_" = 3 ] && grep -q "cores: 150 is over the policy's max 100" "$T/alm"; then ok "allocator: 150 cores refused (exit 3, over the policy's max)"; else bad "cores 150: $rm_ $(cat "$T/alm")"; fi
$ALLOC allocate --claim ns1/big >/dev/null 2>&1; rbig=$?
$ALLOC allocate --claim ns1/big --force node1/gpu-0 --pod pbig/uid-big >"$T/alf" 2>&1; rf=$?
stored=$(ctl "$C/objects/resourceclaims/ns1/big" | jget 'd["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"]["memory"] + " " + d["status"]["reservedFor"][0]["name"]')
if [ "$rbig $rf:$(got "$T/alf") $stored" = "3 0:gpu-0 cores=0 memory=32Gi 32Gi pbig" ]; then ok "allocator: 32Gi does not fit, --force writes it anyway (memory 32Gi of 16Gi)"; else bad "force: $rbig $rf:$(got "$T/alf") $stored"; fi

# The CEL subset: a driver's name and sharing are understood; other CEL is refused (exit 2).
ctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"whole"},"spec":{"selectors":[{"cel":{"expression":"device.driver == \"gpu.gpuslice.io\" && device.allowMultipleAllocations == false"}}]}}' "$C/objects" >/dev/null
ctl -d '{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"attr"},"spec":{"selectors":[{"cel":{"expression":"device.attributes[\"gpu.gpuslice.io\"].index == 0"}}]}}' "$C/objects" >/dev/null
ctl "$C/objects/resourceclaims/ns1/r1" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); d["status"]={}
for cls, name in (("whole", "w"), ("attr", "x")):
    d["metadata"]["name"] = name; d["metadata"].pop("uid", None); d["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = cls; print(json.dumps(d))' >"$T/wx"
head -1 "$T/wx" | ctl -d @- "$C/objects" >/dev/null; tail -1 "$T/wx" | ctl -d @- "$C/objects" >/dev/null
$ALLOC allocate --claim ns1/w >"$T/alw" 2>&1; rw=$?
$ALLOC allocate --claim ns1/x >"$T/alx" 2>&1; rx=$?
if [ "$rw $rx" = "3 2" ] && grep -q "no device the selectors of gpu accept" "$T/alw" && grep -q "only device.driver" "$T/alx"; then ok "allocator: a class of unshared devices finds none (exit 3); CEL outside the subset: exit 2"; else bad "CEL: $rw $rx $(cat "$T/alw" "$T/alx")"; fi

[ "$fails" -eq 0 ] && echo "all passed" || echo "$fails failed"
[ "$fails" -eq 0 ]

#!/bin/sh
# The stand-in API server (tests/k8s/apiserver.py) speaks the protocol the daemon will rely on,
# checked with curl over TLS with the tests' own CA: list with resourceVersion and pages; a
# chunked watch with ADDED, MODIFIED, DELETED and BOOKMARK from a resourceVersion; 410 Expired
# after a compaction; a connection closed mid-line; 401 without the token; 403 for a denied
# verb; events written and kept; and TLS refused without the CA. usage: apiserver_check.sh SRC
set -u
SRC=$1
T=$(mktemp -d)
. "$SRC/tests/k8s/lib.sh"
APISERVER= w1= w2=
trap 'kill $APISERVER $w1 $w2 2>/dev/null; rm -rf "$T"' EXIT

make_ca ca srv || { echo "FAIL: openssl"; exit 1; }
start_apiserver --tls "$T/srv.crt" "$T/srv.key" --token sekrit --history 50 || { echo "FAIL: the stand-in did not start"; exit 1; }
A=$KA C=$KC
k() { curl -sS --cacert "$T/ca.crt" -H "Authorization: Bearer sekrit" "$@"; }
ctl() { kctl "$@"; }
pod() { kpod "$@"; }
jget() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }

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
k "$A/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1&limit=1&continue=$(python3 -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1]))' "$cont")" >"$T/p2"
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
types=$(python3 -c '
import json, sys
print(" ".join(json.loads(l)["type"] + ":" + json.loads(l)["object"]["metadata"].get("name", "-") for l in open(sys.argv[1]) if l.strip()))' "$T/w1")
if [ "$types" = "MODIFIED:a ADDED:d DELETED:b" ]; then ok "watch from $rv replays: $types"; else bad "watch replay: '$types'"; fi
raw=$(python3 -c '
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

[ "$fails" -eq 0 ] && echo "all passed" || echo "$fails failed"
[ "$fails" -eq 0 ]

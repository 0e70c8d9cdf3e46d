# The daemon's network front under attack (issue 28, items 10, 11 and 21), sourced by run.sh for
# the cases daemon_net_*: slow and idle clients on the unix socket, TCP and the webhook, large
# uploads to the webhook, pipelined requests, and the webhook served alone (--webhook-only).
# The clients are tests/integration/net_clients.py. daemon.sh's helpers (start_daemon, api,
# want...) are read with none of its cases chosen.
NET_CASE=$CASE
CASE=helpers-only
. "$SRC/tests/integration/daemon.sh"
CASE=$NET_CASE
NC="$SRC/tests/integration/net_clients.py"
# Another user's clients run with the system's python3 (root's own may be out of their reach).
SYSPY=/usr/bin/python3
net_needs_users() {
    if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null || [ ! -x "$SYSPY" ]; then
        echo "SKIP: needs root, setpriv and /usr/bin/python3 to act as other users"; exit 77
    fi
    chmod 755 "$T"
    chmod 644 "$NC"
}
as_uid() { # as_uid UID COMMAND...: as that user, in group nogroup (the socket's, below)
    u=$1; shift
    setpriv --reuid "$u" --regid 65534 --clear-groups env HOME="$T/u$u" XDG_RUNTIME_DIR="$T/u$u" \
        GPUSLICE_RUN_DIR="$T/u$u" "$@"
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# until_line FILE SECONDS PYTHON-CONDITION: the latest "alive A answered {...}" line of a hold
# (a, answered) meets the condition within SECONDS.
until_line() {
    python3 - "$@" <<'PY'
import json, sys, time
f, secs, cond = sys.argv[1], float(sys.argv[2]), sys.argv[3]
end = time.time() + secs
while True:
    lines = [l for l in open(f) if l.startswith("alive ")] if __import__("os").path.exists(f) else []
    if lines:
        w = lines[-1].split(" ", 3)
        a, answered = int(w[1]), json.loads(w[3])
        if eval(cond):
            sys.exit(0)
    if time.time() > end:
        print("last:", lines[-1].strip() if lines else "none")
        sys.exit(1)
    time.sleep(0.1)
PY
}
# probe_ok WHAT WANT-STATUS MAX-SECONDS net_clients.py-probe-ARGS...: the probe's answer and time.
probe_ok() {
    what=$1 st=$2 max=$3; shift 3
    "$@" >"$T/probe" 2>&1
    if awk -v st="$st" -v max="$max" 'NR == 1 { exit !($1 == st && $2 <= max) }' "$T/probe"; then
        ok "$what: $st in $(head -1 "$T/probe" | cut -d' ' -f2) s"
    else
        bad "$what: $(head -1 "$T/probe") (want $st within $max s)"; cat "$T/probe"
    fi
}
review_json() {
    printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"r-1","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","object":{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}}}'
}
# hook_review PORT: an AdmissionReview posted over TLS; "STATUS SECONDS" into $T/hook.code.
hook_review() {
    review_json >"$T/rev"
    curl -s -m 5 -o "$T/hook" -w '%{http_code} %{time_total}\n' --cacert "$T/ca.crt" \
        -H 'Content-Type: application/json' --data-binary @"$T/rev" "https://127.0.0.1:$1/mutate" >"$T/hook.code"
}
webhook_certs() {
    . "$SRC/tests/k8s/lib.sh"
    make_ca ca srv || { bad "openssl"; exit 1; }
    cp "$T/srv.key" "$T/hook.key"; chmod 600 "$T/hook.key"
}

case $CASE in
daemon_net_slow)
    # 130 connections of one user that send a request one byte a second (the audit's
    # reproduction): that user keeps max-peer-connections of them and is answered 503 for the
    # rest, root's /healthz (the liveness probe), another user's request and her join to a
    # tenant are answered at once, and the slow ones are cut at request-timeout-s although
    # they never stop sending. Then the same on TCP, from one address and from 130.
    net_needs_users
    mkdir -m 777 "$T/u65534" "$T/u65533"
    head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$T/token"; chmod 600 "$T/token"
    TP=$(free_port)
    start_daemon --socket-group nogroup --listen "127.0.0.1:$TP" --token-file "$T/token" \
        --request-timeout-s 4 || exit 1
    # The answers at nice -10 (the listeners' threads, and each connection's), the daemon's
    # other threads 5 steps lower.
    prios=$(for t in /proc/$DPID/task/*; do printf '%s=%s\n' "$(cat $t/comm)" "$(awk '{print $19}' $t/stat)"; done | sort | uniq -c | tr -s ' \n' '  ')
    case "$prios" in *"MHD-listen=-10"*) mhd=1 ;; *) mhd=0 ;; esac
    [ "$(awk '{print $19}' /proc/$DPID/stat)" = -5 ] && [ $mhd = 1 ] && ! echo "$prios" | grep -q "MHD-[a-z]*=-5" &&
        ok "nice: the listeners at -10, the main thread at -5 ($prios)" || bad "nice: $prios"
    want 201 "a tenant of uid 65533's" POST /v1/tenants '{"name":"hers","owner":65533,"memory":"1G"}'
    as_uid 65534 "$SYSPY" "$NC" hold "$SOCK" 130 9 --out "$T/u65534/hold" 2>"$T/hold.err" &
    H=$!; BG="$BG $H"
    if until_line "$T/u65534/hold" 5 'a == 32 and answered.get("503", 0) == 98'; then
        ok "uid 65534's 130 slow connections: 32 held (max-peer-connections), 98 answered 503"
    else bad "uid 65534's slow connections"; cat "$T/u65534/hold" "$T/hold.err"; fi
    probe_ok "root's /healthz beside them" 200 1 python3 "$NC" probe "$SOCK"
    probe_ok "uid 65533's /v1/tenants beside them" 200 1 as_uid 65533 "$SYSPY" "$NC" probe "$SOCK" --path /v1/tenants
    grep -q '"hers"' "$T/probe" && ok "her tenant in her answer" || { bad "uid 65533's list"; cat "$T/probe"; }
    if as_uid 65533 "$GS" run --tenant hers -- true >"$T/out" 2>&1; then ok "uid 65533 joins her tenant beside them"; else bad "join: $(cat "$T/out")"; fi
    as_uid 65534 "$SYSPY" "$NC" probe "$SOCK" >"$T/probe" 2>&1
    head -1 "$T/probe" | grep -q '^503 ' && grep -q 'uid 65534 has 32 connections open here, its most (max-peer-connections)' "$T/probe" &&
        ok "uid 65534's next connection: 503 naming max-peer-connections" || { bad "uid 65534's 33rd"; cat "$T/probe"; }
    if until_line "$T/u65534/hold" 7 'a == 0'; then
        ok "its trickling connections cut by request-timeout-s (4 s), though they never stopped sending"
    else bad "the slow connections outlived request-timeout-s"; cat "$T/u65534/hold"; fi
    wait $H
    probe_ok "uid 65534 once its connections are gone" 200 1 as_uid 65534 "$SYSPY" "$NC" probe "$SOCK"
    grep -q "refused .* connection.* uid 65534 has 32 connections" "$T/dlog" && ok "the refusals logged, naming the user" || { bad "no log"; cat "$T/dlog"; }
    # TCP: 130 from one address leave room for another, and the token is still asked of them.
    python3 "$NC" hold "127.0.0.1:$TP" 130 6 --sources 1 --out "$T/hold" 2>"$T/hold.err" &
    H=$!; BG="$BG $H"
    if until_line "$T/hold" 5 'a == 32 and answered.get("503", 0) == 98'; then ok "TCP: 130 slow from 127.0.0.2: 32 held, 98 answered 503"; else bad "TCP one address"; cat "$T/hold" "$T/hold.err"; fi
    probe_ok "TCP: a client with the token from 127.0.0.1 beside them" 200 1 python3 "$NC" probe "127.0.0.1:$TP" --token "$T/token" --path /v1/devices
    probe_ok "TCP: from 127.0.0.1 without the token: 401" 401 1 python3 "$NC" probe "127.0.0.1:$TP"
    wait $H
    # From 130 addresses: the listener is full, and a newcomer takes the place of the
    # connection whose request has waited longest (over a second).
    python3 "$NC" hold "127.0.0.1:$TP" 130 6 --sources 130 --out "$T/hold" 2>"$T/hold.err" &
    H=$!; BG="$BG $H"
    until_line "$T/hold" 5 'a == 128' >/dev/null || { bad "TCP 130 addresses"; cat "$T/hold" "$T/hold.err"; }
    sleep 1.2
    probe_ok "TCP: a client with the token while 128 slow ones from 130 addresses fill the listener" 200 1 python3 "$NC" probe "127.0.0.1:$TP" --token "$T/token"
    wait $H ;;
daemon_net_webhook)
    # The webhook in the node daemon (as before): 120 uploads of 4 MiB at once keep its memory
    # within request-memory (the audit's: 553 MB), answered 200 or 503; JSON that would take
    # more than request-memory to parse is 413 before it is parsed; 150 idle connections from
    # 150 addresses do not keep a legitimate AdmissionReview out.
    webhook_certs
    HP=$(free_port)
    # Under the sanitizers, freed memory waits in ASan's quarantine (256 MiB by default), which
    # the bound below would count: 4 MiB of it here, and more room for ASan's own.
    saved_asan=${ASAN_OPTIONS:-}
    [ "${SANITIZE:-0}" = 1 ] && export ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=4"
    start_daemon --webhook-listen "127.0.0.1:$HP" --webhook-cert "$T/srv.crt" --webhook-key "$T/hook.key" \
        --inject-lib-dir /opt/gs/lib --request-memory 33554432 --max-peer-connections 200 --request-timeout-s 5 || exit 1
    export ASAN_OPTIONS="$saved_asan"
    slack=48; [ "${SANITIZE:-0}" = 1 ] && slack=128
    hook_review "$HP"
    grep -q '^200 ' "$T/hook.code" && ok "an AdmissionReview answered 200" || { bad "webhook: $(cat "$T/hook.code")"; cat "$T/hook"; }
    base=$(awk '/^VmRSS:/ {print $2}' /proc/$DPID/status)
    python3 "$NC" uploads "127.0.0.1:$HP" 120 4194304 review "$DPID" --tls "$T/ca.crt" >"$T/up" 2>&1
    python3 - "$T/up" "$base" "$slack" <<'PY' && ok "120 uploads of 4 MiB: $(cat "$T/up"); RSS from $base KiB" || { bad "uploads: $(cat "$T/up"), RSS from $base KiB"; tail -5 "$T/dlog"; }
import json, re, sys
m = re.match(r"answers (\{.*\}) peak_kib (\d+) after_kib (\d+)", open(sys.argv[1]).read())
got, peak, base = json.loads(m.group(1)), int(m.group(2)), int(sys.argv[2])
# request-memory is 32 MiB (one upload of 4 MiB takes 16 of it); connections, TLS and threads
# take a few more (48 MiB in all; 128 under the sanitizers). The daemon before: 646 MB.
assert peak - base < int(sys.argv[3]) * 1024, "peak %d KiB over %d" % (peak, base)
assert set(got) <= {"200", "503", "closed"} and got.get("200", 0) >= 1 and got.get("503", 0) >= 1, got
PY
    python3 "$NC" uploads "127.0.0.1:$HP" 1 4194304 objects "$DPID" --tls "$T/ca.crt" >"$T/up" 2>&1
    grep -q '"413": 1' "$T/up" && ok "4 MiB of {} (1.4 million objects, about 300 MB parsed): 413 unparsed" || bad "objects: $(cat "$T/up")"
    hook_review "$HP"
    grep -q '^200 ' "$T/hook.code" && ok "an AdmissionReview still answered after them" || bad "webhook after uploads: $(cat "$T/hook.code")"
    python3 "$NC" hold "127.0.0.1:$HP" 150 7 --mode idle --sources 150 --out "$T/hold" 2>"$T/hold.err" &
    H=$!; BG="$BG $H"
    until_line "$T/hold" 5 'a >= 128' >/dev/null || { bad "150 idle webhook connections"; cat "$T/hold" "$T/hold.err"; }
    sleep 1.2
    hook_review "$HP"
    awk '{ exit !($1 == 200 && $2 < 2) }' "$T/hook.code" && ok "beside 150 idle connections from 150 addresses: an AdmissionReview answered 200 in $(cut -d' ' -f2 "$T/hook.code") s" ||
        { bad "webhook beside idle connections: $(cat "$T/hook.code")"; cat "$T/hold"; }
    python3 "$NC" hold "127.0.0.1:$HP" 60 4 --mode tls --tls "$T/ca.crt" --sources 60 --out "$T/hold2" 2>"$T/hold2.err"
    hook_review "$HP"
    awk '{ exit !($1 == 200 && $2 < 2) }' "$T/hook.code" && ok "after 60 handshaken slow ones: answered" || bad "webhook after TLS slow ones: $(cat "$T/hook.code")"
    wait $H
    stop_daemon ;;
daemon_net_webhook_only)
    # gpusliced --webhook-only: the webhook alone, with no GPU, node segment, socket or run
    # directory of its own (a Deployment of its own in deploy/kubernetes/webhook).
    webhook_certs
    HP=$(free_port)
    W="env -u LD_LIBRARY_PATH -u GPUSLICE_DAEMON_DIR $D --foreground --config /dev/null --webhook-only"
    expect 2 "--webhook-only without --webhook-listen" -- $W --inject-run-dir /run/gpuslice
    stderr_has "needs --webhook-listen"
    expect 2 "--webhook-only without --inject-run-dir" -- $W --webhook-listen "127.0.0.1:$HP" --webhook-cert "$T/srv.crt" --webhook-key "$T/hook.key"
    stderr_has "needs --inject-run-dir"
    expect 2 "a request-memory too small for the webhook's largest body" -- $W --webhook-listen "127.0.0.1:$HP" --webhook-cert "$T/srv.crt" --webhook-key "$T/hook.key" --inject-run-dir /run/gpuslice --request-memory 8388608
    stderr_has "request-memory 8388608 is less than 4 times the largest body (4194304, webhook-max-body)"
    expect 2 "--webhook-only with --listen" -- $W --webhook-listen "127.0.0.1:$HP" --webhook-cert "$T/srv.crt" --webhook-key "$T/hook.key" --inject-run-dir /run/gpuslice --listen 127.0.0.1:1 --token-file "$T/hook.key"
    stderr_has "leave out --listen"
    # No NVML (an NVML that is not there) and a run directory it must not make.
    $W --webhook-listen "127.0.0.1:$HP" --webhook-cert "$T/srv.crt" --webhook-key "$T/hook.key" \
        --inject-run-dir /run/gpuslice --inject-lib-dir /opt/gs/lib --nvml /nonexistent/libnvidia-ml.so.1 \
        --run-dir "$T/never" --nice 0 >"$T/wlog" 2>&1 &
    WP=$!; BG="$BG $WP"
    i=0; while [ $i -lt 100 ] && ! curl -s --cacert "$T/ca.crt" "https://127.0.0.1:$HP/healthz" >/dev/null 2>&1; do sleep 0.05; i=$((i + 1)); done
    hook_review "$HP"
    python3 - "$T/hook" <<'PY' && ok "--webhook-only answers an AdmissionReview: the patch mounts from the nodes' /run/gpuslice" || { bad "webhook-only answer"; cat "$T/hook" "$T/wlog"; }
import base64, json, sys
r = json.load(open(sys.argv[1]))["response"]
ops = json.loads(base64.b64decode(r["patch"]))
vols = [v for o in ops if o["path"].startswith("/spec/volumes")
        for v in (o["value"] if isinstance(o["value"], list) else [o["value"]])]
assert r["allowed"] and any(v["hostPath"]["path"].startswith("/run/gpuslice") for v in vols), ops
PY
    [ ! -e "$T/never" ] && ok "no run directory made" || bad "--webhook-only made $T/never"
    ! grep -qi "nvml\|simulated GPU\|node segment" "$T/wlog" && ok "no GPU or node segment read: $(head -1 "$T/wlog")" || { bad "webhook-only log"; cat "$T/wlog"; }
    kill "$WP"; wait "$WP"; rc=$?
    [ $rc = 0 ] && ok "SIGTERM: exit 0" || { bad "webhook-only exit $rc"; cat "$T/wlog"; }
    # Leading its session (as systemd or a container starts it), it gives its session's group
    # its nice too, where the kernel groups tasks by session (autogroup).
    if [ "$(id -u)" = 0 ] && [ -w /proc/self/autogroup ]; then
        setsid $W --webhook-listen "127.0.0.1:$HP" --webhook-cert "$T/srv.crt" --webhook-key "$T/hook.key" \
            --inject-run-dir /run/gpuslice --nice -7 >"$T/wlog" 2>&1 &
        WP=$!; BG="$BG $WP"
        i=0; while [ $i -lt 100 ] && ! curl -s --cacert "$T/ca.crt" "https://127.0.0.1:$HP/healthz" >/dev/null 2>&1; do sleep 0.05; i=$((i + 1)); done
        grep -q "nice -7$" /proc/$WP/autogroup && [ "$(awk '{print $19}' /proc/$WP/stat)" = -2 ] &&
            ok "its session's group at nice -7 ($(cat /proc/$WP/autogroup)), its main thread 5 steps lower" ||
            bad "autogroup: $(cat /proc/$WP/autogroup), nice $(awk '{print $19}' /proc/$WP/stat)"
        kill "$WP"; wait "$WP"
    else
        echo "note: no autogroup here (or not root): its session's nice is not checked"
    fi
    # Not root, as the Deployment runs it: its key is a Secret mounted with the pod's fsGroup,
    # 0440 in its own group, which it reads; in another group it is refused.
    net_needs_users
    cp "$T/srv.key" "$T/fs.key"; chown 0:65532 "$T/fs.key"; chmod 440 "$T/fs.key"; chmod 644 "$T/srv.crt"
    # (Not through a shell function: "$!" would be the subshell's, and its daemon would outlive
    # the kill.)
    setpriv --reuid 65532 --regid 65532 --clear-groups $W --webhook-listen "127.0.0.1:$HP" --webhook-cert "$T/srv.crt" --webhook-key "$T/fs.key" \
        --inject-run-dir /run/gpuslice --nice 0 >"$T/wlog" 2>&1 &
    WP=$!; BG="$BG $WP"
    i=0; while [ $i -lt 100 ] && ! curl -s --cacert "$T/ca.crt" "https://127.0.0.1:$HP/healthz" >/dev/null 2>&1; do sleep 0.05; i=$((i + 1)); done
    hook_review "$HP"
    grep -q '^200 ' "$T/hook.code" && ok "as uid 65532 with its key 0440 in group 65532 (fsGroup): answers" || { bad "fsGroup key: $(cat "$T/hook.code")"; cat "$T/wlog"; }
    kill "$WP"; wait "$WP"
    # Another group of its (a supplementary one) that may read it: not its own, refused.
    chown 0:65534 "$T/fs.key"
    expect 1 "its key 0440 in another group of its: refused" -- setpriv --reuid 65532 --regid 65532 --groups 65534 $W --webhook-listen "127.0.0.1:$HP" --webhook-cert "$T/srv.crt" --webhook-key "$T/fs.key" --inject-run-dir /run/gpuslice --nice 0
    stderr_has "only its owner can read" ;;
daemon_net_pipeline)
    # Requests pipelined in one write are all answered, in order: on the unix socket, and on
    # TCP with one without the token among them (it was answered 401 at its headers, and the
    # connection closed with the rest unanswered).
    head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$T/token"; chmod 600 "$T/token"
    TP=$(free_port)
    start_daemon --listen "127.0.0.1:$TP" --token-file "$T/token" --request-timeout-s 2 || exit 1
    got=$(python3 "$NC" pipeline "$SOCK" "GET /healthz" 'POST /v1/tenants {"name":"pipe1","memory":"1G"}' "GET /v1/tenants/pipe1" "GET /nothing" "GET /v1/devices")
    [ "$got" = "200 201 200 404 200" ] && ok "unix socket: 5 pipelined requests answered in order ($got)" || bad "unix socket pipelined: '$got', want 200 201 200 404 200"
    got=$(python3 "$NC" pipeline "127.0.0.1:$TP" --token "$T/token" "NOAUTH:GET /v1/tenants" "GET /healthz" "GET /v1/devices")
    [ "$got" = "401 200 200" ] && ok "TCP: a request without the token, then two with it: $got" || bad "TCP pipelined after a 401: '$got', want 401 200 200"
    got=$(python3 "$NC" pipeline "127.0.0.1:$TP" --token "$T/token" "GET /healthz" 'NOAUTH:POST /v1/tenants {"name":"intruder"}' "GET /v1/tenants/pipe1" 'POST /v1/tenants {"name":"pipe2"}')
    [ "$got" = "200 401 200 201" ] && ok "TCP: a body without the token among them: $got" || bad "TCP pipelined with a body: '$got', want 200 401 200 201"
    want 404 "the tenant of the request without the token was not made" GET /v1/tenants/intruder
    want 200 "the one after it was" GET /v1/tenants/pipe2
    # A chunked body is held to max-body (64 KiB) in all, not chunk by chunk: in 1 KiB chunks
    # it is read whole up to the cap, and past it the connection is closed, with the token or
    # without (one without is not read on for ever for its 401).
    got=$(python3 "$NC" chunked "127.0.0.1:$TP" --token "$T/token" --chunk 7 --body '{"name":"chunky","memory":"1G"}')
    [ "$got" = 201 ] && ok "TCP: a body in chunks of 7 bytes: 201" || bad "TCP: a body in small chunks: $got, want 201"
    want 200 "the tenant of the chunked body" GET /v1/tenants/chunky
    got=$(python3 "$NC" chunked "127.0.0.1:$TP" --token "$T/token" --bytes 70000)
    [ "$got" = closed ] && ok "TCP: 70000 bytes in 1 KiB chunks, with the token: closed" || bad "TCP: a chunked body past max-body with the token: $got, want closed"
    got=$(python3 "$NC" chunked "127.0.0.1:$TP" --bytes 70000)
    [ "$got" = closed ] && ok "TCP: 70000 bytes in 1 KiB chunks, without the token: closed" || bad "TCP: a chunked body past max-body without the token: $got, want closed"
    # After an answer, the next request on the connection has request-timeout-s (2 s) again,
    # from the answer: one trickled a byte every quarter second is cut then, on both doors.
    for addr in "$SOCK" "127.0.0.1:$TP"; do
        door=TCP; [ "$addr" = "$SOCK" ] && door="unix socket"
        got=$(python3 "$NC" after-answer "$addr" 6 --token "$T/token")
        if echo "$got" | awk '{ exit !($1 == 200 && $2 == "closed" && $3 >= 1.5 && $3 <= 4) }'; then
            ok "$door: a second request trickled after the first's answer, cut by request-timeout-s: $got"
        else bad "$door: a second request trickled after an answer: '$got', want 200 closed within 1.5..4 s"; fi
    done ;;
esac
stop_daemon

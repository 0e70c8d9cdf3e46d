# Faults (issue 28, items 15-17 and 22), sourced by run.sh after daemon.sh's helpers: a full
# run directory, state directory or /dev/shm (tiny tmpfs mounts, in a mount namespace of the
# case's own so that nothing outlives it), a shutdown under load, and a tenant of many processes.
. "$SRC/tests/integration/daemon.sh"

# in_own_mounts: runs this case again in a private mount namespace (its tmpfs mounts go with
# it), or skips it (77) where mounts are not allowed. Returns in the inner run only.
in_own_mounts() {
    if [ -n "${GS_FAULTS_NS:-}" ]; then
        return 0
    fi
    if [ "$(id -u)" != 0 ] || ! unshare -m --propagation private sh -c \
        'd=$(mktemp -d) && mount -t tmpfs -o size=4k none "$d" && umount "$d" && rmdir "$d"' 2>/dev/null; then
        echo "SKIP: needs root, a mount namespace and tmpfs mounts"
        exit 77
    fi
    GS_FAULTS_NS=1 unshare -m --propagation private "$SRC/tests/integration/run.sh" "$B" "$CASE"
    exit $?
}
# tiny DIR SIZE: a tmpfs of SIZE (k) on DIR, unmounted when the case ends.
MOUNTS=
tiny() {
    mkdir -p "$1" && mount -t tmpfs -o "size=$2,mode=700" none "$1" || { bad "mount a tmpfs on $1"; exit 1; }
    MOUNTS="$1 $MOUNTS"
}
# fill DIR: a file taking every block left on DIR's filesystem.
fill() { dd if=/dev/zero of="$1/filler" bs=4096 >/dev/null 2>&1; sync; }
unmount_all() { for m in $MOUNTS; do umount -l "$m" 2>/dev/null; done; MOUNTS=; }
# elapsed_since T0: seconds since T0 (date +%s.%N).
elapsed_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'; }
# stop_timed PID [SIGNALS]: SIGTERM (then each of SIGNALS, 0.3 s apart) to the daemon PID, a
# child of this shell; waits up to 12 s for it to exit (else kills it: RC "none"). Sets RC, TOOK.
stop_timed() {
    local pid=$1 t0 s
    shift
    kill -TERM "$pid"
    t0=$(date +%s.%N)
    for s in "$@"; do sleep 0.3; kill -"$s" "$pid" 2>/dev/null; done
    i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt 240 ]; do sleep 0.05; i=$((i + 1)); done
    TOOK=$(elapsed_since "$t0")
    if kill -0 "$pid" 2>/dev/null; then
        kill -9 "$pid"; wait "$pid" 2>/dev/null; RC=none
    else
        wait "$pid"; RC=$?
    fi
}

case $CASE in
faults_full_rundir)
    # A full filesystem where a tenant's, the node's or a board's file is made: an error that
    # names the file and the lack of space, never SIGBUS (a sparse file written through its
    # mapping, whose pages the filesystem cannot back).
    in_own_mounts
    trap 'unmount_all; cleanup' EXIT
    tiny "$T/full" 64k
    fill "$T/full"
    GPUSLICE_RUN_DIR="$T/full" expect 1 "gpuslice run with a full run directory" -- "$GS" run --memory 1G -- true
    stderr_has "cannot create the tenant's state file $T/full/gpuslice-"
    stderr_has "No space left on device"
    stderr_has "its filesystem is full"
    if grep -q "truncated" "$T/err"; then bad "reported as a truncated file"; cat "$T/err"; else ok "not reported as a truncated file"; fi
    [ -z "$(ls "$T/full" | grep -v filler)" ] && ok "no half-made file left" || { bad "files left"; ls -l "$T/full"; }
    # A governed program whose board goes to a full XDG_RUNTIME_DIR: it runs, without turns.
    tiny "$T/fullxdg" 4k
    fill "$T/fullxdg"
    XDG_RUNTIME_DIR="$T/fullxdg" expect 0 "a governed program with a full board directory" -- "$GS" run -q --compute 50 -- "$CL" stream 0.3 500
    stderr_has "no device board in $T/fullxdg (No space left on device)"
    # The daemon: its node segment in a full run directory is an error at its start.
    tiny "$T/drun" 64k
    env -u LD_LIBRARY_PATH "$D" --foreground --simulated --config /dev/null --run-dir "$T/drun" \
        --state-dir "$T/state" >"$T/out" 2>"$T/err"
    rc=$?
    [ "$rc" = 1 ] && ok "a daemon with a full run directory: exit 1" || bad "a full run directory: exit $rc, want 1"
    stderr_has "cannot create the node segment $T/drun/gpusliced.node: No space left on device"
    umount "$T/drun"; MOUNTS=$(echo "$MOUNTS" | sed "s|$T/drun ||")
    # Room for its node segment (284 KiB) but not for a tenant's state file (151 KiB): the
    # tenant is refused with 507, and the daemon lives on.
    tiny "$T/drun" 300k
    start_daemon --state-dir "$T/state" || exit 1
    want 507 "a tenant whose state file does not fit" POST /v1/tenants '{"name":"nofit","memory":"1G"}'
    body_has "cannot create its state file $T/drun/tenants/gpuslice-"
    body_has "No space left on device"
    want 200 "the daemon lives on" GET /healthz
    want 404 "no half-made tenant" GET /v1/tenants/nofit
    [ -z "$(ls "$T/drun/tenants")" ] && ok "no state file left" || { bad "state files left"; ls -l "$T/drun/tenants"; }
    stop_daemon ;;
faults_full_state)
    # A full state directory: an answer says success only once the change is durable in
    # STATE_DIR/tenants.json; otherwise it is 507 naming the file, nothing changes, and the
    # daemon is not ready until the file can be written again. The audit saw a POST answered
    # 201 and a PATCH 200, both gone after a reboot.
    in_own_mounts
    trap 'unmount_all; cleanup' EXIT
    tiny "$T/state" 16k
    start_daemon --state-dir "$T/state" || exit 1
    want 201 "a tenant while there is room" POST /v1/tenants '{"name":"kept","memory":"1G","compute":40}'
    fill "$T/state"
    want 507 "a tenant while the state's filesystem is full" POST /v1/tenants '{"name":"lost","memory":"2G"}'
    err_code state_not_written
    body_has "$T/state/tenants.json"
    body_has "no space left"
    want 404 "it was not made" GET /v1/tenants/lost
    want 503 "not ready while the state cannot be written" GET /readyz
    body_has "$T/state/tenants.json"
    want 507 "a change of limits" PATCH /v1/tenants/kept '{"memory":"512M"}'
    want 200 "the tenant as it was" GET /v1/tenants/kept
    jq_py 'assert d["limits"]["memory"]["default"] == 1 << 30 and d["limits"]["compute"]["default"] == 40, d["limits"]' && ok "its limits unchanged" || bad "a refused change applied"
    want 507 "a delete" DELETE /v1/tenants/kept
    want 200 "the tenant still there" GET /v1/tenants/kept
    rm -f "$T/state/filler"
    i=0; while [ "$(api GET /readyz)" != 200 ] && [ $i -lt 60 ]; do sleep 0.1; i=$((i + 1)); done
    want 200 "ready again once it can be written (within 3 s)" GET /readyz
    want 200 "the change, made again" PATCH /v1/tenants/kept '{"memory":"512M"}'
    want 201 "a second tenant" POST /v1/tenants '{"name":"second","compute":20}'
    want 201 "a third, to delete" POST /v1/tenants '{"name":"third"}'
    want 204 "a third deleted" DELETE /v1/tenants/third
    # A reboot: the run directory (a tmpfs on a node) is gone; what was answered comes back.
    stop_daemon
    rm -rf "$T/drun"
    start_daemon --state-dir "$T/state" || exit 1
    want 200 "after a reboot" GET /v1/tenants
    jq_py 't = {x["name"]: x for x in d["tenants"]}; assert sorted(t) == ["kept", "second"], sorted(t); assert t["kept"]["limits"]["memory"]["default"] == 512 << 20 and t["kept"]["limits"]["compute"]["default"] == 40 and t["second"]["limits"]["compute"]["default"] == 20, t' && ok "exactly the acknowledged tenants and limits" || bad "after a reboot"
    python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$T/state/tenants.json" && ok "tenants.json is whole" || bad "tenants.json"
    [ -z "$(ls "$T/state" | grep -v '^tenants.json$')" ] && ok "no temporary file left" || { bad "files left"; ls -l "$T/state"; }
    stop_daemon ;;
faults_many_pids)
    # Without a daemon, tenants --json lists every process of a tenant (up to its 1024 slots):
    # it listed 64 at most.
    rm -f "$T/go"
    "$GS" run -q --name many -- sh -c 'for i in $(seq 80); do "$0" alloc:1 mark:"$1.$i" wait:"$2" & done; wait' \
        "$P" "$T/m" "$T/go" >"$T/many.out" 2>&1 &
    MANY=$!; BG="$BG $MANY"
    # And one of exactly 4, which the table shows whole (no " +0").
    "$GS" run -q --name four -- sh -c 'for i in 1 2 3 4; do "$0" alloc:1 mark:"$1.$i" wait:"$2" & done; wait' \
        "$P" "$T/f" "$T/go" >"$T/four.out" 2>&1 &
    FOUR=$!; BG="$BG $FOUR"
    i=0; while [ "$(ls "$T" | grep -c '^[mf]\.')" -lt 84 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    [ "$(ls "$T" | grep -c '^m\.')" = 80 ] && ok "80 processes of one tenant hold memory" || { bad "the 80 processes"; cat "$T/many.out"; }
    expect 0 "tenants --json" -- "$GS" tenants --json --interval 0
    pgrep -f "$P alloc:1 mark:$T/m" | sort -n >"$T/want.pids"
    json_ok "all 80 PIDs listed, each a process of the tenant" "t = [x for x in d['tenants'] if x['name'] == 'many'][0]; want = sorted(int(p) for p in open('$T/want.pids')); assert len(want) == 80 and sorted(t['pids']) == want, (len(t['pids']), len(want))"
    expect 0 "tenants (the table)" -- "$GS" tenants --interval 0
    grep -q '+76' "$T/out" && ok "the table shows 4 PIDs and +76" || { bad "the table's PID cell"; cat "$T/out"; }
    grep -Eq ' four +[^ ]+ +[0-9]+ +[0-9]+,[0-9]+,[0-9]+,[0-9]+ +normal ' "$T/out" && ! grep ' four ' "$T/out" | grep -q ' +0' && ok "a tenant of exactly 4 processes: its 4 PIDs, nothing more" || { bad "the PID cell of 4 processes"; cat "$T/out"; }
    touch "$T/go"
    wait "$MANY" "$FOUR" ;;
faults_shutdown)
    # A SIGTERM under load ends the daemon within its deadline (5 s), with exit 0. As on the
    # H100, where a daemon once ignored SIGTERM for 12 minutes: a daemon killed (-9) while a
    # process of its managed tenant holds memory, restarted; then a governed program of the
    # tenant, a refused allocation, gpuslice top; and event streams open (readers, and ones
    # that read nothing), slow clients that never finish their headers, a pod watch open on the
    # stand-in API server.
    . "$SRC/tests/k8s/lib.sh"
    tls_apiserver --history 100
    kctl -d "$(kpod p1 1G node1)" "$KC/pods" >/dev/null
    kube="--kube-api $KA --kube-ca-file $T/ca.crt --kube-token-file $T/token --node-name node1"
    # shellcheck disable=SC2086
    start_daemon $kube || exit 1
    want 201 "a managed tenant of 1G at 30 %" POST /v1/tenants '{"name":"shut","compute":30,"memory":"1G"}'
    rm -f "$T/held" "$T/go"
    "$GS" run -q --tenant shut -- "$P" alloc:600 mark:"$T/held" wait:"$T/go" >"$T/holder" 2>&1 &
    HOLD=$!; BG="$BG $HOLD"
    i=0; while [ ! -f "$T/held" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done # (30 s: slow under load)
    kill -9 "$DPID"; wait "$DPID" 2>/dev/null; DPID=
    # shellcheck disable=SC2086
    # A node's idle connections may be kept long (timeout-s): a stop must not wait for them.
    start_daemon $kube --events-history 100000 --timeout-s 600 || exit 1
    "$GS" run -q --tenant shut -- "$CL" stream 15 500 >"$T/load.out" 2>&1 &
    LOAD=$!; BG="$BG $LOAD"
    expect 0 "an allocation past the tenant's 1G, refused" -- "$GS" run -q --tenant shut -- "$P" alloc:600
    grep -q "alloc 600 CUDA_ERROR_OUT_OF_MEMORY" "$T/out" && ok "refused beside the holder" || { bad "not refused"; cat "$T/out" "$T/err"; }
    "$GS" top --interval 0.2 >/dev/null 2>&1 &
    TOP=$!; BG="$BG $TOP"
    for i in 1 2 3; do
        curl -sN --unix-socket "$SOCK" http://d/v1/events >/dev/null 2>&1 &
        BG="$BG $!"
    done
    # Events enough to fill a socket's buffer (2400, about 300 KB): tenants made and ended.
    python3 - "$SOCK" 1200 <<'PY' || bad "tenants made and ended"
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rb")
def req(method, path, body=b""):
    s.sendall(b"%s %s HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (method, path, len(body), body))
    status, length = int(f.readline().split()[1]), 0
    for line in iter(f.readline, b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    f.read(length)
    return status
for i in range(int(sys.argv[2])):
    assert req(b"POST", b"/v1/tenants", json.dumps({"name": "churn%d" % i}).encode()) == 201
    assert req(b"DELETE", b"/v1/tenants/churn%d" % i) == 204
PY
    python3 - "$SOCK" "$T/slow.ready" <<'PY' &
import socket, sys, time
keep = []
for i in range(20):  # headers never finished
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(b"GET /v1/tenants HTTP/1.1\r\nHost: d\r\n")
    keep.append(s)
for i in range(3):  # every event since the first, read by nobody: the daemon's sends block
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(b"GET /v1/events HTTP/1.1\r\nHost: d\r\nLast-Event-ID: 0\r\n\r\n")
    keep.append(s)
open(sys.argv[2], "w").close()
time.sleep(120)
PY
    SLOW=$!; BG="$BG $SLOW"
    i=0; while [ ! -f "$T/slow.ready" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done # (30 s: slow under load)
    sleep 1.5 # the program governed, top sampling, the watch open, the event streams stuck
    want 200 "the daemon answers under load" GET /readyz
    stop_timed "$DPID"; DPID=
    # Its parts all stopped (exit 0), not the deadline's exit.
    if [ "$RC" = 0 ] && awk -v t="$TOOK" 'BEGIN { exit !(t <= 3) }'; then
        ok "SIGTERM under load: exit 0 in $TOOK s"
    else
        bad "SIGTERM under load: exit $RC after $TOOK s"; tail -20 "$T/dlog"
    fi
    grep -q "stopping (signal 15)" "$T/dlog" && ok "its log says it stops" || { bad "no stop in the log"; tail "$T/dlog"; }
    touch "$T/go"
    kill $LOAD $TOP $SLOW 2>/dev/null
    wait $HOLD $LOAD $TOP $SLOW 2>/dev/null
    # A part that never stops (an NVML call that does not return, as a hung driver's): the
    # daemon still exits within the deadline, with status 1, naming what it waited for.
    export GPUSLICE_SIM_NVML_HANG="$T/hang"
    start_daemon || exit 1
    touch "$T/hang"
    sleep 0.5 # the sampler is in a call that does not return
    want 200 "the API answers while NVML hangs" GET /readyz
    stop_timed "$DPID"; DPID=
    if [ "$RC" = 1 ] && awk -v t="$TOOK" 'BEGIN { exit !(t >= 4.5 && t <= 7) }'; then
        ok "SIGTERM with NVML hung: exit 1 after the 5 s deadline ($TOOK s)"
    else
        bad "SIGTERM with NVML hung: exit $RC after $TOOK s, want 1 after 5 s"; tail "$T/dlog"
    fi
    grep -q "not stopped after 5 s: still waiting for the GPU sampler (an NVML call" "$T/dlog" &&
        ok "its log names what it waited for" || { bad "the log does not say what it waited for"; tail -3 "$T/dlog"; }
    # A second signal does not wait for the deadline.
    rm -f "$T/hang"
    start_daemon || exit 1
    touch "$T/hang"
    sleep 0.5
    stop_timed "$DPID" TERM; DPID=
    if [ "$RC" = 1 ] && awk -v t="$TOOK" 'BEGIN { exit !(t <= 2) }'; then
        ok "a second SIGTERM: exit 1 at once ($TOOK s)"
    else
        bad "a second SIGTERM: exit $RC after $TOOK s"; tail "$T/dlog"
    fi
    grep -q "signal 15 while stopping: exiting now, not waiting for the GPU sampler" "$T/dlog" &&
        ok "its log says so" || { bad "the second signal unsaid"; tail -3 "$T/dlog"; }
    # A SIGTERM while it starts (its first NVML call hangs) ends it too: the signals were
    # blocked until it served, and a daemon stuck in its start ignored SIGTERM.
    env -u LD_LIBRARY_PATH "$D" --foreground --simulated --config /dev/null --run-dir "$T/drun" \
        >>"$T/dlog" 2>&1 &
    DPID=$!
    sleep 0.5
    stop_timed "$DPID"; DPID=
    if [ "$RC" = 1 ] && awk -v t="$TOOK" 'BEGIN { exit !(t >= 4.5 && t <= 7) }'; then
        ok "SIGTERM while it starts: exit 1 after the deadline ($TOOK s)"
    else
        bad "SIGTERM while it starts: exit $RC after $TOOK s"; tail "$T/dlog"
    fi
    grep -q "still waiting for its start" "$T/dlog" && ok "its log says it was starting" || { bad "start unsaid"; tail -3 "$T/dlog"; }
    rm -f "$T/hang"
    unset GPUSLICE_SIM_NVML_HANG ;;
*) echo "faults.sh: no case $CASE"; exit 2 ;;
esac
stop_daemon
unmount_all
echo "$CASE: $fails failed"
[ $fails = 0 ]
exit $?

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
*) echo "faults.sh: no case $CASE"; exit 2 ;;
esac
stop_daemon
unmount_all
echo "$CASE: $fails failed"
[ $fails = 0 ]
exit $?

# The tests beside a real daemon (issue 28, items 23-25), sourced by run.sh after daemon.sh's
# helpers. Each case runs in a mount namespace of its own whose /run is an empty tmpfs, where
# it starts the "real" daemon in /run/gpuslice itself: the machine's real one is never seen.
. "$SRC/tests/integration/daemon.sh"

# in_private_run: runs this case again in a mount namespace whose /run is an empty tmpfs, or
# skips it (77) where that is not allowed. Returns in the inner run only.
in_private_run() {
    if [ -n "${GS_HERMETIC_NS:-}" ]; then
        return 0
    fi
    if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null ||
        ! unshare -m --propagation private sh -c 'mount -t tmpfs none /run' 2>/dev/null; then
        echo "SKIP: needs root, setpriv and a mount namespace"
        exit 77
    fi
    GS_HERMETIC_NS=1 unshare -m --propagation private sh -c \
        'mount -t tmpfs -o mode=755 none /run && ln -s /dev/shm /run/shm && exec "$@"' sh \
        "$SRC/tests/integration/run.sh" "$B" "$CASE"
    exit $?
}
SYS=/run/gpuslice/gpusliced.sock
# sys_api METHOD PATH [BODY]: a request to the "real" daemon of /run/gpuslice (status on stdout).
sys_api() {
    local SOCK=$SYS
    api "$@"
}
# as_nobody CMD...: CMD as user nobody, with its own runtime directory and no daemon directory.
as_nobody() {
    setpriv --reuid 65534 --regid 65534 --clear-groups env -u GPUSLICE_DAEMON_DIR \
        XDG_RUNTIME_DIR="$T/xdgn" GPUSLICE_RUN_DIR="$T/xdgn/run" GPUSLICE_SIM_STATE="$T/xdgn/sim" \
        HOME="$T/xdgn" "$@"
}

case $CASE in
hermetic_beside_daemon)
    # README's make start, then make test: the cases that failed beside it (the CLI and the
    # interposer looked in /run/gpuslice first; tenant_id took its tenant and set, as root,
    # rewrote it; a leftover /run/gpuslice failed daemon_pod_tenants) pass, and its tenant stays
    # exactly as it was. tests/beside-daemon.sh does it, here in a namespace of its own.
    "$SRC/tests/beside-daemon.sh" --private --build "$B" tenants set tenants_trust compute_set \
        info audit_escapes daemon_pod_tenants >"$T/beside.log" 2>&1
    rc=$?
    [ $rc = 77 ] && { cat "$T/beside.log"; exit 77; }
    if [ $rc = 0 ]; then ok "make test's cases beside a daemon: all pass, its tenant unchanged"; else bad "beside a daemon: exit $rc"; cat "$T/beside.log"; fi ;;
hermetic_discovery)
    # Which daemon the CLI asks: a user's own gpusliced (in her runtime directory) even where
    # the system's /run/gpuslice exists; and when the system's is the one left, a refusal that
    # names the real cause (permission denied, and the group to ask for), not "start gpusliced".
    in_private_run
    chmod 755 "$T"
    # GPUSLICE_POD with no daemon in /run/gpuslice nor in the case's directory: 0 (or empty) is
    # not a pod's process, and gets CUDA; 1 must join a pod's tenant, and gets none, saying why;
    # anything else is refused, naming it.
    for v in 0 ""; do
        expect 0 "GPUSLICE_POD='$v' without a daemon" -- env GPUSLICE_POD="$v" LD_PRELOAD="$LIB" "$P" alloc:1
    done
    expect 1 "GPUSLICE_POD=1 without a daemon" -- env GPUSLICE_POD=1 LD_PRELOAD="$LIB" "$P" alloc:1
    stderr_has "GPUSLICE_POD=1, but no daemon joined this process to its pod's tenant (none runs in /run/gpuslice or $GPUSLICE_DAEMON_DIR)"
    for v in 2 yes 01 " 1"; do
        expect 1 "GPUSLICE_POD='$v'" -- env GPUSLICE_POD="$v" LD_PRELOAD="$LIB" "$P" alloc:1
        stderr_has "GPUSLICE_POD=\"$v\": give 1 (a pod's process, which must join its pod's tenant) or 0"
    done
    env -u GPUSLICE_DAEMON_DIR -u LD_LIBRARY_PATH "$D" --foreground --simulated --config /dev/null \
        --state-dir "$T/sysstate" >"$T/sys.log" 2>&1 &
    SYSPID=$!; BG="$BG $SYSPID"
    i=0; while [ "$(sys_api GET /readyz)" != 200 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    [ "$(sys_api POST /v1/tenants '{"name":"sys","memory":"1G"}')" = 201 ] && ok "the system daemon in /run/gpuslice, its tenant sys" || { bad "the system daemon"; cat "$T/sys.log"; exit 1; }
    ls -l "$SYS" | grep -q '^srw-rw----' && ok "its socket is its group's alone (0660)" || { bad "socket mode"; ls -l "$SYS"; }
    # It follows no pods (no pods' socket): GPUSLICE_POD=0 runs, GPUSLICE_POD=1 is told so.
    expect 0 "GPUSLICE_POD=0 beside a daemon that follows no pods" -- env GPUSLICE_POD=0 LD_PRELOAD="$LIB" "$P" alloc:1
    expect 1 "GPUSLICE_POD=1 beside a daemon that follows no pods" -- env GPUSLICE_POD=1 LD_PRELOAD="$LIB" "$P" alloc:1
    stderr_has "could not join its pod's tenant (GPUSLICE_POD=1): /run/gpuslice/gpusliced.pods does not exist (the daemon does not follow Kubernetes pods)"
    # Root (no GPUSLICE_DAEMON_DIR) asks it; with GPUSLICE_DAEMON_DIR, only the daemon there.
    env -u GPUSLICE_DAEMON_DIR "$GS" tenants --json --interval 0 >"$T/out" 2>"$T/err"
    json_ok "root's CLI lists the system daemon's tenants" "assert d['source'] == 'gpusliced' and [t['name'] for t in d['tenants']] == ['sys'], d"
    GPUSLICE_DAEMON_DIR="$T/none" expect 0 "with GPUSLICE_DAEMON_DIR" -- "$GS" tenants --json --interval 0
    json_ok "only that directory is asked: no tenant of /run/gpuslice's" "assert d['source'] != 'gpusliced' and d['tenants'] == [], d"
    GPUSLICE_DAEMON_DIR="$T/none" expect 1 "top with GPUSLICE_DAEMON_DIR naming no daemon" -- "$GS" top --once
    stderr_has "no gpuslice daemon answers on $T/none/gpusliced.sock (no such socket)"
    if grep -q "/run/gpuslice" "$T/err"; then bad "it asked /run/gpuslice too"; cat "$T/err"; else ok "and not /run/gpuslice"; fi
    # Nobody's own daemon, in her runtime directory.
    mkdir -m 700 "$T/xdgn" && chown 65534:65534 "$T/xdgn"
    # (Not through as_nobody: $! must be the daemon's PID, not a subshell's.)
    setpriv --reuid 65534 --regid 65534 --clear-groups env -u GPUSLICE_DAEMON_DIR -u LD_LIBRARY_PATH \
        XDG_RUNTIME_DIR="$T/xdgn" GPUSLICE_SIM_STATE="$T/xdgn/sim" HOME="$T/xdgn" \
        "$D" --foreground --simulated --config /dev/null >"$T/own.log" 2>&1 &
    OWNPID=$!; BG="$BG $OWNPID"
    OWN="$T/xdgn/gpuslice/gpusliced.sock"
    i=0; while [ "$(as_nobody curl -s -o /dev/null -w '%{http_code}' --unix-socket "$OWN" http://d/readyz)" != 200 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    [ "$(as_nobody curl -s -o /dev/null -w '%{http_code}' --unix-socket "$OWN" -X POST -H 'Content-Type: application/json' --data '{"name":"mine","compute":30}' http://d/v1/tenants)" = 201 ] &&
        ok "nobody's own gpusliced --foreground, in her runtime directory, her tenant mine" || { bad "nobody's daemon"; cat "$T/own.log"; }
    expect 0 "nobody's gpuslice tenants" -- as_nobody "$GS" tenants --json --interval 0
    json_ok "her CLI finds her own daemon although /run/gpuslice exists" "assert d['source'] == 'gpusliced' and [t['name'] for t in d['tenants']] == ['mine'], d"
    expect 0 "nobody's gpuslice top --once" -- as_nobody "$GS" top --once --interval 0.2
    grep -q "mine" "$T/out" && ok "top shows her tenant" || { bad "top"; cat "$T/out" "$T/err"; }
    kill "$OWNPID"; wait "$OWNPID" 2>/dev/null
    # Her daemon stopped: the system's is the one left, and she may not ask it.
    expect 1 "nobody's top with only the system daemon" -- as_nobody "$GS" top --once
    stderr_has "permission denied on /run/gpuslice/gpusliced.sock: ask to be in group"
    if grep -q "start gpusliced" "$T/err"; then bad "the hint says start gpusliced"; cat "$T/err"; else ok "no hint to start a daemon that runs"; fi
    expect 1 "nobody's run --tenant sys" -- as_nobody "$GS" run --tenant sys -- true
    stderr_has "permission denied on /run/gpuslice/gpusliced.sock"
    if grep -q "start gpusliced" "$T/err"; then bad "run --tenant's hint says start gpusliced"; cat "$T/err"; else ok "run --tenant names the real cause"; fi
    # The tests refuse to run inside a daemon's tenant (every program would be in it).
    expect 1 "the tests, run inside the system daemon's tenant" -- env -u GPUSLICE_DAEMON_DIR "$GS" run -q --tenant sys -- "$SRC/tests/integration/run.sh" "$B" limit_link
    grep -q "these tests run inside a gpuslice daemon's tenant" "$T/out" && ok "refused, saying so" || { bad "not refused"; cat "$T/out" "$T/err"; }
    [ "$(sys_api GET /v1/tenants/sys)" = 200 ] && jq_py 'assert d["limits"]["memory"]["default"] == 1 << 30 and d["processes"] == 0, d' &&
        ok "the system daemon's tenant unchanged" || bad "the system daemon's tenant changed"
    kill "$SYSPID"; wait "$SYSPID" 2>/dev/null
    # A daemon whose pods' socket is left but refuses (it died) is never passed over for the
    # next directory: a process that may be a pod's gets no CUDA rather than no limit.
    python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.close()' \
        /run/gpuslice/gpusliced.pods
    expect 1 "a process beside a pods' socket that refuses" -- env LD_PRELOAD="$LIB" "$P" alloc:1
    stderr_has "could not join its pod's tenant: /run/gpuslice/gpusliced.pods: Connection refused"
    # A pods' socket served by another user than the daemon's (root's) is not the daemon's: its
    # answer is never taken (it would hand over any state file), and the process gets no CUDA.
    rm -f /run/gpuslice/gpusliced.pods
    python3 -c 'import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o666)
ready = open(sys.argv[2], "w")
os.setgid(65534); os.setuid(65534)  # the peer credentials are those of the listen
s.listen(4)
ready.write("listening\n"); ready.close()
s.settimeout(20)
c, _ = s.accept()
c.sendall(b"ok 1\n")
c.close()' /run/gpuslice/gpusliced.pods "$T/planted" &
    BG="$BG $!"
    i=0; while [ ! -s "$T/planted" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    expect 1 "a process beside a pods' socket served by uid 65534" -- env LD_PRELOAD="$LIB" "$P" alloc:1
    stderr_has "could not join its pod's tenant: /run/gpuslice/gpusliced.pods is served by uid 65534, not the daemon's (0)"
    # A pods' socket of the daemon's user that accepts and never answers (a daemon wedged): the
    # process waits the socket's 2 s for an answer, then gets no CUDA, saying so; never hangs.
    rm -f /run/gpuslice/gpusliced.pods
    python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(4)
open(sys.argv[2], "w").write("listening\n")
s.settimeout(30)
c, _ = s.accept()
time.sleep(30)' /run/gpuslice/gpusliced.pods "$T/wedged" &
    BG="$BG $!"
    i=0; while [ ! -s "$T/wedged" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    t0=$(date +%s.%N)
    expect 1 "a process beside a pods' socket that accepts and never answers" -- timeout 20 env LD_PRELOAD="$LIB" "$P" alloc:1
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    stderr_has "could not join its pod's tenant: /run/gpuslice/gpusliced.pods gave no answer"
    if awk -v d="$dt" 'BEGIN { exit !(d >= 1.8 && d <= 8) }'; then ok "told after the socket's 2 s timeout: ${dt} s"; else bad "a wedged pods' socket: ${dt} s, want about 2"; fi ;;
*) echo "hermetic.sh: no case $CASE"; exit 2 ;;
esac
stop_daemon
echo "$CASE: $fails failed"
[ $fails = 0 ]
exit $?

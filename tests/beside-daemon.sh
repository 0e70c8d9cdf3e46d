#!/bin/sh
# A MANUAL CHECK, not part of `make test`: README's two commands, `make start` (a real
# gpusliced in the foreground, in its default directories: /run/gpuslice and /var/lib/gpuslice
# as root) and then `make test`, must leave that daemon's tenants exactly as they were, and pass.
#
# usage: tests/beside-daemon.sh [--private] [--build DIR] [CASE...]
#
# It starts gpusliced as `make start` does (DIR/bin/gpusliced --foreground, default directories;
# it refuses if a daemon already answers there), makes a managed tenant with limits and a member
# holding memory, records what the API says of it, runs the integration suite (every ctest test
# integration.*; or each CASE through tests/integration/run.sh), then checks that every test
# passed and that the tenant is exactly as it was: limits, class, members, memory used. It then
# stops the member and the daemon, and removes the directories it made (those that did not exist
# before). Without --private it uses the machine's real /run/gpuslice: run it when nothing else
# uses that directory. Exit 0 when all holds.
#
# --private: the same in a mount namespace of its own whose /run and /var/lib are empty tmpfs,
# so that the machine's real directories are neither used nor seen (root; integration.beside_daemon
# runs it so, with a few cases, in `make test`).
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
B=$SRC/build
private=0
while [ $# -gt 0 ]; do
    case $1 in
    --private) private=1; shift ;;
    --in-private) private=2; shift ;;
    --build) B=$(cd "$2" && pwd) || exit 2; shift 2 ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "beside-daemon.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
    esac
done
if [ "$private" = 1 ]; then
    if [ "$(id -u)" != 0 ] || ! unshare -m --propagation private true 2>/dev/null; then
        echo "SKIP: --private needs root and a mount namespace"
        exit 77
    fi
    exec unshare -m --propagation private sh -c '
        mount -t tmpfs -o mode=755 none /run && mount -t tmpfs -o mode=755 none /var/lib &&
        ln -s /dev/shm /run/shm && b=$1 && shift && exec "$0" --in-private --build "$b" "$@"' \
        "$0" "$B" "$@"
fi
D=$B/bin/gpusliced
GS=$B/bin/gpuslice
[ -x "$D" ] && [ -x "$GS" ] || { echo "beside-daemon.sh: no build in $B (make first, or --build DIR)" >&2; exit 2; }
W=$(mktemp -d /tmp/gs-beside-XXXXXX)
chmod 755 "$W"
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# As `make start` runs it: no variable of the tests' (those of a caller's shell stay out too).
for v in GPUSLICE_DAEMON_DIR GPUSLICE_RUN_DIR GPUSLICE_TENANT GPUSLICE_MEMORY_LIMIT \
    GPUSLICE_COMPUTE_LIMIT LD_PRELOAD; do unset "$v"; done
if [ "$private" = 2 ]; then
    export GPUSLICE_SIM_STATE="$W/sim.state" # the daemon's and its member's, nobody else's
fi
run_dir=$("$D" --print-config | sed -n 's/^run-dir = //p')
state_dir=$("$D" --print-config | sed -n 's/^state-dir = //p')
[ -n "$run_dir" ] && [ -n "$state_dir" ] || { echo "beside-daemon.sh: gpusliced --print-config names no directories" >&2; exit 2; }
SOCK=$run_dir/gpusliced.sock
if curl -s --max-time 2 --unix-socket "$SOCK" http://d/healthz >/dev/null 2>&1; then
    echo "beside-daemon.sh: a gpusliced already answers on $SOCK; stop it first (this check starts its own)" >&2
    rm -rf "$W"
    exit 2
fi
made_run=0 made_state=0 made_sim=0
[ -e "$run_dir" ] || made_run=1
[ -e "$state_dir" ] || made_state=1
# On the simulated GPU, its state file (the daemon's and its member's) is one this check makes.
sim_state=${GPUSLICE_SIM_STATE:-/dev/shm/gpuslice-sim-$(id -u)}
[ -e "$sim_state" ] || made_sim=1
DPID= MPID=
finish() {
    touch "$W/release"
    [ -n "$MPID" ] && wait "$MPID" 2>/dev/null
    if [ -n "$DPID" ]; then
        curl -s -o /dev/null --unix-socket "$SOCK" -X DELETE "http://d/v1/tenants/$NAME" 2>/dev/null
        kill -TERM "$DPID" 2>/dev/null
        wait "$DPID" 2>/dev/null
    fi
    [ "$made_run" = 1 ] && rm -rf "$run_dir"
    [ "$made_state" = 1 ] && rm -rf "$state_dir"
    [ "$made_sim" = 1 ] && rm -f "$sim_state"
    rm -rf "$W"
}
trap finish EXIT
trap 'exit 1' INT TERM

echo "gpusliced as make start runs it: run directory $run_dir, state $state_dir"
"$D" --foreground >"$W/daemon.log" 2>&1 &
DPID=$!
i=0
while ! curl -s --unix-socket "$SOCK" http://d/readyz 2>/dev/null | grep -q '"ready"'; do
    i=$((i + 1))
    if [ $i -gt 100 ] || ! kill -0 "$DPID" 2>/dev/null; then
        bad "the daemon did not become ready"; cat "$W/daemon.log"; exit 1
    fi
    sleep 0.1
done
curl -s --unix-socket "$SOCK" http://d/readyz | grep -q '"simulated":true' &&
    export LD_LIBRARY_PATH="$B/lib/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
NAME=beside-$$
code=$(curl -s -o "$W/created" -w '%{http_code}' --unix-socket "$SOCK" -X POST \
    -H 'Content-Type: application/json' \
    --data "{\"name\":\"$NAME\",\"memory\":\"512M\",\"compute\":30,\"weight\":3}" http://d/v1/tenants)
[ "$code" = 201 ] && ok "a managed tenant $NAME: 512M, 30 %, weight 3" || { bad "POST: $code"; cat "$W/created"; exit 1; }
"$GS" run --tenant "$NAME" -- sh -c '"$0" "$@"; echo "member exit $?"' "$B/tests/itest_dl" hold $((100 << 20)) "$W/release" 7200 >"$W/member" 2>&1 &
MPID=$!
i=0
while ! grep -q '^hold' "$W/member" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
grep -q '^hold 104857600 -> 0' "$W/member" && ok "a member of it holds 100 MiB" || { bad "the member"; cat "$W/member"; exit 1; }

# view FILE: what the API says of the tenant, without its clocks and counters of time.
view() {
    sleep 0.6 # a sweep after the last change
    curl -s --unix-socket "$SOCK" "http://d/v1/tenants/$NAME" | python3 -c '
import json, sys
t = json.load(sys.stdin)
for k in ("read_monotonic_ns",):
    t.pop(k, None)
for d in t.get("devices", []):
    for k in ("gpu_time_seconds", "throttled_seconds"):
        d.pop(k, None)
json.dump(t, sys.stdout, indent=1, sort_keys=True)' >"$1"
}
view "$W/before"
grep -q '"memory_used_bytes"' "$W/before" || { bad "the tenant shows no use"; cat "$W/before"; }

status=0
if [ $# -gt 0 ]; then
    for c in "$@"; do
        echo "--- integration case $c"
        env SRC="$SRC" SANITIZE="${SANITIZE:-0}" "$SRC/tests/integration/run.sh" "$B" "$c" >"$W/case.log" 2>&1
        rc=$?
        if [ $rc != 0 ] && [ $rc != 77 ]; then
            # Once more, as the suite measures a share once more: a loaded host fails a timing
            # check now and then (tenants' 50 % of device time); a case the daemon disturbs
            # fails both times.
            echo "note: case $c failed ($(grep -E '^FAIL' "$W/case.log" | head -3 | tr '\n' ' ')); once more"
            env SRC="$SRC" SANITIZE="${SANITIZE:-0}" "$SRC/tests/integration/run.sh" "$B" "$c" >"$W/case.log" 2>&1
            rc=$?
        fi
        kill -0 "$MPID" 2>/dev/null || echo "note: the member has exited by now"
        if [ $rc = 0 ] || [ $rc = 77 ]; then
            ok "case $c (exit $rc)"
        else
            bad "case $c: exit $rc"; grep -E '^FAIL' "$W/case.log" | head -20; status=1
        fi
    done
else
    echo "--- the integration suite (ctest -R '^integration\\.'), beside the daemon"
    (cd "$B" && ctest -R '^integration\.' -E 'beside_daemon' -j "$(nproc)" --output-on-failure) >"$W/ctest.log" 2>&1
    status=$?
    grep -E 'tests passed|\*\*\*(Skipped|Not Run)' "$W/ctest.log"
    [ $status = 0 ] && ok "every integration test passed" || { bad "integration tests failed"; grep -E 'Failed|FAIL' "$W/ctest.log" | head -40; }
fi
kill -0 "$MPID" 2>/dev/null || { bad "the member has exited"; cat "$W/member"; }
view "$W/after"
if cmp -s "$W/before" "$W/after"; then
    ok "the daemon's tenant is exactly as it was (limits, class, members, memory used)"
else
    bad "the daemon's tenant changed"; diff "$W/before" "$W/after"
fi
curl -s --unix-socket "$SOCK" http://d/v1/tenants | python3 -c '
import json, sys
names = [t["name"] for t in json.load(sys.stdin)["tenants"] if t["managed"]]
sys.exit(0 if names == [sys.argv[1]] else 1)' "$NAME" && ok "and it is still the daemon's only managed tenant" || { bad "the daemon has other managed tenants now"; curl -s --unix-socket "$SOCK" http://d/v1/tenants; echo; }
echo "beside-daemon: $fails failed"
[ $fails = 0 ]

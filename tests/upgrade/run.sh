#!/bin/sh
# An upgrade with tenants running: a program started by an older gpuslice (its CLI and its
# interposer, tenant ABI 4.1) keeps running under its limit while this tree's gpusliced and CLI
# take over the node, and both list it with its limit, usage and process.
# usage: tests/upgrade/run.sh OLD_BUILD NEW_BUILD
#   OLD_BUILD: a build (bin/gpuslice, lib/libgpuslice.so) of an older commit, e.g.
#     git worktree add /tmp/old 0e62cfd && cmake -S /tmp/old -B /tmp/old/build -DGPUSLICE_TESTS=OFF && cmake --build /tmp/old/build
#   NEW_BUILD: this tree's build with its tests (bin/gpusliced, bin/gpuslice, tests/mem_probe, lib/sim)
# Runs on the simulated GPU; prints ok/FAIL lines and exits non-zero on a failure.
set -u
OLD=$(cd "$1" && pwd)
NEW=$(cd "$2" && pwd)
T=$(mktemp -d /tmp/gs-upgrade-XXXXXX)
fails=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }
DPID=
PPID_=
cleanup() { touch "$T/go"; [ -n "$DPID" ] && kill "$DPID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
export LD_LIBRARY_PATH="$NEW/lib/sim" GPUSLICE_SIM_STATE="$T/sim" GPUSLICE_RUN_DIR="$T/run"
export GPUSLICE_DAEMON_DIR="$T/drun" XDG_RUNTIME_DIR="$T/xdg" TMPDIR="$T"
mkdir -p "$T/run" "$T/xdg"
"$OLD/bin/gpuslice" run --name old --memory 1G -- "$NEW/tests/mem_probe" alloc:512 mark:"$T/up" wait:"$T/go" alloc:400 alloc:200 >"$T/prog" 2>&1 &
PPID_=$!
i=0; while [ ! -e "$T/up" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
[ -e "$T/up" ] && ok "the older gpuslice's program holds 512M under --memory 1G" || { bad "the older program did not start"; cat "$T/prog"; exit 1; }
f=$(ls "$T"/run/gpuslice-*.tenant)
abi=$(od -An -tu4 -j8 -N4 "$f" | tr -d ' ')
size=$(stat -c %s "$f")
# GPUSLICE_TENANT_SIZE_4_1 (include/gpuslice/tenant_abi.h): the layout this tree reads read-only.
[ "$abi" = $(((1 << 16) | 4)) ] && [ "$size" = $((232 + 16 * 88 + 1024 * 144 + 664 + 128 + 4096)) ] &&
    ok "its state file is tenant ABI 4.1, $size bytes: an upgrade is tested" ||
    { bad "the older build made tenant ABI $((abi & 65535)).$((abi >> 16)), $size bytes: not the 4.1 this test is for"; exit 1; }
env -u LD_LIBRARY_PATH "$NEW/bin/gpusliced" --foreground --simulated --config /dev/null --run-dir "$T/drun" >"$T/dlog" 2>&1 &
DPID=$!
i=0; until curl -s --unix-socket "$T/drun/gpusliced.sock" http://d/readyz 2>/dev/null | grep -q ready; do
    i=$((i + 1)); [ $i -lt 100 ] || { bad "the new daemon did not start"; cat "$T/dlog"; exit 1; }; sleep 0.05
done
sleep 0.4
curl -s --unix-socket "$T/drun/gpusliced.sock" http://d/v1/tenants >"$T/tenants"
python3 - "$T/tenants" <<'PY' && ok "the new daemon lists it: 1G limit, 512M used, 1 process" || { bad "the daemon's view"; cat "$T/tenants"; }
import json, sys
t = [x for x in json.load(open(sys.argv[1]))["tenants"] if x["name"] == "old"]
assert len(t) == 1 and not t[0]["managed"] and t[0]["processes"] == 1, t
d = t[0]["devices"][0]
assert d["memory_limit_bytes"] == 1 << 30 and d["memory_used_bytes"] >= 512 << 20, d
PY
"$NEW/bin/gpuslice" tenants --json --interval 0 >"$T/cli" 2>"$T/cli.err"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); t=[x for x in d["tenants"] if x["name"]=="old"]; assert d["source"]=="gpusliced" and len(t)==1 and t[0]["devices"][0]["memory_limit_bytes"]==1<<30, d' "$T/cli" && ok "the new CLI lists it through the daemon" || { bad "the new CLI"; cat "$T/cli" "$T/cli.err"; }
"$NEW/bin/gpuslice" set old --memory 2G >"$T/set" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "was made by another version of gpuslice" "$T/set" &&
    ok "the new gpuslice set refuses it, naming another version" || { bad "set on the older tenant: exit $rc"; cat "$T/set"; }
touch "$T/go"
wait "$PPID_"; rc=$?
grep -q "alloc 400 ok" "$T/prog" && grep -q "alloc 200 CUDA_ERROR_OUT_OF_MEMORY" "$T/prog" && [ $rc = 0 ] && ok "the program ran on under the new daemon, still held to 1G" || { bad "the older program after the upgrade (exit $rc)"; cat "$T/prog"; }
grep -q "Sanitizer\|error" "$T/dlog" && { bad "the daemon's log"; cat "$T/dlog"; }
echo "upgrade: $fails failed"
[ $fails = 0 ]

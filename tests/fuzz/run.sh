#!/bin/sh
# Runs every libFuzzer target for SECONDS against its seed corpus (corpus/<target>/, read only)
# and what earlier runs found (BUILD_DIR/fuzz/work/<target>/), JOBS at a time; exits 1 if any
# target crashed or broke an invariant, naming the input it saved.
# usage: run.sh BUILD_DIR SECONDS [JOBS]
set -u
if [ "${1:-}" = --one ]; then
    B=$2 S=$3 t=$4
    SRC=$(cd "$(dirname "$0")" && pwd)
    mkdir -p "$B/fuzz/work/$t" "$B/fuzz/artifacts"
    dict=
    [ -f "$SRC/$t.dict" ] && dict="-dict=$SRC/$t.dict"
    "$B/fuzz/fuzz_$t" -max_total_time="$S" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
        -use_value_profile=1 -print_final_stats=1 -artifact_prefix="$B/fuzz/artifacts/$t-" \
        $dict "$B/fuzz/work/$t" "$SRC/corpus/$t" >"$B/fuzz/$t.log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$B/fuzz/$t.log")
    if [ "$rc" -eq 0 ]; then
        echo "fuzz: $t: ${runs:-?} runs in ${S}s, no crash"
        exit 0
    fi
    echo "fuzz: $t: FAILED (exit $rc); the log is $B/fuzz/$t.log:"
    grep -E "invariant broken|ERROR: |SUMMARY|Test unit written|^artifact_prefix" "$B/fuzz/$t.log" | head -20
    echo "fuzz: $t: replay with $B/fuzz/fuzz_$t FILE; add the input as a case in tests/unit"
    exit 1
fi
B=${1:?usage: run.sh BUILD_DIR SECONDS [JOBS]}
S=${2:?usage: run.sh BUILD_DIR SECONDS [JOBS]}
J=${3:-2}
# Every target built (the daemon's only where GPUSLICE_DAEMON was on).
TARGETS=$(for f in "$B"/fuzz/fuzz_*; do [ -f "$f" ] && [ -x "$f" ] && basename "$f" | sed 's/^fuzz_//'; done)
[ -n "$TARGETS" ] || { echo "fuzz: no targets in $B/fuzz" >&2; exit 1; }
start=$(date +%s)
printf '%s\n' $TARGETS | xargs -P "$J" -I{} "$0" --one "$B" "$S" {}
rc=$?
echo "fuzz: $(echo $TARGETS | wc -w) targets, ${S}s each, $J at a time: $(($(date +%s) - start))s"
[ "$rc" -eq 0 ] || { echo "fuzz: a target failed" >&2; exit 1; }

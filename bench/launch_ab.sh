#!/usr/bin/env bash
# Launch overhead of two builds side by side: the library of an older commit (built from a
# git worktree into build-old) and the working tree's (build-gpu), alternated ROUNDS times
# with bench/launch_overhead.sh on the same machine. Prints the native and LD_PRELOAD rows of
# each round; whether a launch-overhead change is the code or the machine's spread.
#
# usage: bench/launch_ab.sh REV [ROUNDS]     (ROUNDS 2; BENCH_PROCS 4 unless set; tables in
#                                             $OUT or /tmp when OUT is unset)
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REV=${1:-}
ROUNDS=${2:-2}
[ -n "$REV" ] && [[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || {
    echo "usage: bench/launch_ab.sh REV [ROUNDS]  (REV: a commit; ROUNDS: a positive integer)" >&2
    exit 2
}
cd "$ROOT" || exit 1
git rev-parse --verify -q "$REV^{commit}" >/dev/null || { echo "launch_ab: no commit '$REV'" >&2; exit 2; }
TABLES=${OUT:-/tmp}
WT=$(mktemp -d "${TMPDIR:-/tmp}/gpuslice-ab.XXXXXX")
trap 'git worktree remove --force "$WT" >/dev/null 2>&1; rm -rf "$WT"' EXIT
git worktree add -f --detach "$WT" "$REV" >/dev/null || exit 1
OPTS=(-DGPUSLICE_TESTS=OFF -DCMAKE_BUILD_TYPE=Release -DGPUSLICE_WERROR=OFF -DGPUSLICE_SIM=OFF)
for pair in "$WT:build-old" "$ROOT:build-gpu"; do
    src=${pair%%:*} dir=$ROOT/${pair#*:}
    cmake -S "$src" -B "$dir" "${OPTS[@]}" >/dev/null && cmake --build "$dir" -j"$(nproc)" >/dev/null ||
        { echo "launch_ab: building $src into $dir failed" >&2; exit 1; }
done
for ((k = 1; k <= ROUNDS; k++)); do
    for b in build-old build-gpu; do
        echo "== $b ($([ $b = build-old ] && echo "$REV" || echo "working tree")), round $k"
        GPU_BUILD_DIR=$ROOT/$b BENCH_PROCS=${BENCH_PROCS:-4} BENCH_TABLE=$TABLES/launch-ab.$b.$k.md \
            bench/launch_overhead.sh >/dev/null 2>&1
        grep -E "^\| (native|LD_PRELOAD)" "$TABLES/launch-ab.$b.$k.md" || echo "(no table)"
    done
done

#!/usr/bin/env bash
# Launch overhead of two builds side by side: the library of an older commit (built from a
# git worktree into build-old) and the working tree's (build-gpu), each preloaded
# (LD_PRELOAD, no limit) into the same launch_overhead binary, with a native process as a
# third configuration, measured as PAIRS interleaved pairs by bench/launch_pairs.py (one
# fresh process per configuration each pair, sampled in turn). The ratios are to the old
# build: "new" says whether a launch-overhead change is the code, with a 95 % bootstrap
# confidence interval, and "native" how far the old build itself is from native.
#
# usage: bench/launch_ab.sh REV [PAIRS]      (PAIRS 40; the table goes to $OUT/launch-ab.md,
#                                             or /tmp when OUT is unset)
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REV=${1:-}
PAIRS=${2:-40}
[ -n "$REV" ] && [[ $PAIRS =~ ^[1-9][0-9]*$ ]] || {
    echo "usage: bench/launch_ab.sh REV [PAIRS]  (REV: a commit; PAIRS: a positive integer)" >&2
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
GPU_BUILD_DIR=$ROOT/build-gpu bench/launch_overhead.sh --build || exit 1
exec "${PYTHON:-python3}" "$ROOT/bench/launch_pairs.py" --bin "$ROOT/build-gpu/gpu/launch_overhead" \
    --pairs "$PAIRS" --cpus "${BENCH_CPUS-2,3}" --table "$TABLES/launch-ab.md" \
    --config "old=env LD_PRELOAD=$(printf '%q' "$ROOT/build-old/lib/libgpuslice.so")" \
    --label "old=$REV (LD_PRELOAD)" \
    --config "new=env LD_PRELOAD=$(printf '%q' "$ROOT/build-gpu/lib/libgpuslice.so")" \
    --label "new=working tree (LD_PRELOAD)" \
    --config native= --baseline old

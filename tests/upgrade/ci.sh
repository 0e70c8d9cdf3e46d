#!/bin/sh
# ctest's integration.upgrade: builds gpuslice as it was at OLD_COMMIT (tenant ABI 4.1, before
# the daemon) from this repository's history, once per build directory, and runs run.sh with it.
# usage: tests/upgrade/ci.sh SRC BUILD [OLD_COMMIT]   (exit 77: the commit is not in this clone)
set -eu
SRC=$1
B=$2
OLD_COMMIT=${3:-0e62cfd16b30e572761d41bfd118dd6d4938995c}
O="$B/upgrade-old"
if ! git -C "$SRC" cat-file -e "$OLD_COMMIT^{commit}" 2>/dev/null; then
    echo "upgrade: commit $OLD_COMMIT is not in $SRC (a shallow clone?): nothing to upgrade from" >&2
    exit 77
fi
if [ ! -x "$O/build/bin/gpuslice" ] || [ "$(cat "$O/commit" 2>/dev/null)" != "$OLD_COMMIT" ]; then
    rm -rf "$O"
    mkdir -p "$O/src"
    git -C "$SRC" archive "$OLD_COMMIT" | tar -x -C "$O/src"
    cmake -S "$O/src" -B "$O/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUSLICE_TESTS=OFF >"$O/build.log" 2>&1 &&
        cmake --build "$O/build" -j "$(nproc)" >>"$O/build.log" 2>&1 || { cat "$O/build.log"; exit 1; }
    echo "$OLD_COMMIT" >"$O/commit"
fi
exec "$(dirname "$0")/run.sh" "$O/build" "$B"

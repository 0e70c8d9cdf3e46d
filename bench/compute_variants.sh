#!/usr/bin/env bash
# Side-by-side tuning runs of the compute governor: builds gpuslice once per variant, each
# with some of the compute governor's tunables changed by -D (src/preload/compute/compute_internal.h:
# every tunable there is wrapped in #ifndef), then runs the same command for each variant in turn, with GPUSLICE_BIN naming
# that variant's CLI (whose interposer is beside it) and GPUSLICE_VARIANT its name, so the
# variants are compared in one run on one machine.
#
# usage: bench/compute_variants.sh VARIANT... -- COMMAND [ARGS...]
#        VARIANT is NAME or NAME=CFLAGS, e.g.  base  spin='-DSPIN_NS=1000000000LL -DSPIN_LONG=1'
#        (a bare NAME builds the code as it is); e.g.
#        bench/compute_variants.sh base spin=... -- bench/compute_share.sh --only cuda-small
# env:   GPU_BUILD_DIR (build-gpu); each variant is built into $GPU_BUILD_DIR-var-NAME
# Exit status: 0 when every variant was built (whatever the commands' verdicts), 2 bad usage.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${GPU_BUILD_DIR:-build-gpu}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac

variants=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    variants+=("$1")
    shift
done
[ "${1:-}" = -- ] && shift
if [ ${#variants[@]} -eq 0 ] || [ $# -eq 0 ]; then
    echo "usage: bench/compute_variants.sh VARIANT... -- COMMAND [ARGS...]" >&2
    exit 2
fi

rc=0
for v in "${variants[@]}"; do
    name=${v%%=*}
    flags=
    [ "$name" != "$v" ] && flags=${v#*=}
    if ! [[ $name =~ ^[A-Za-z0-9_-]+$ ]]; then
        echo "compute_variants: \"$name\" is not a variant name (letters, digits, _ and -)" >&2
        exit 2
    fi
    dir=$BUILD-var-$name
    echo "=== variant $name: CFLAGS='$flags', build $dir"
    if ! { cmake -S "$ROOT" -B "$dir" -DGPUSLICE_TESTS=OFF -DGPUSLICE_SIM=OFF \
        -DGPUSLICE_WERROR=OFF -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="$flags" >"$dir.log" 2>&1 &&
        cmake --build "$dir" -j"$(nproc)" --target gpuslice gpuslice_cli >>"$dir.log" 2>&1; }; then
        tail -n 30 "$dir.log"
        echo "=== variant $name: build failed"
        rc=1
        continue
    fi
    GPUSLICE_BIN=$dir/bin/gpuslice GPUSLICE_VARIANT=$name GPU_BUILD_DIR=$BUILD "$@"
    echo "=== variant $name: exit $?"
done
exit "$rc"

#!/usr/bin/env bash
# The Python package installs as README says, offline, into a fresh venv of each python3 this
# machine has (Debian's /usr/bin/python3, and the one on PATH when it is another, e.g. pyenv's):
# `pip install --no-index ./python`, with and without build isolation, then `import gpuslice`
# from the venv and gpuslice.info() on the simulated GPU; pip uninstall leaves nothing behind.
# Debian's python3 needs python3-venv (scripts/install-deps).
# Usage: python_install.sh SOURCE_DIR BUILD_DIR
set -u
SRC=$1
B=$2
T=$(mktemp -d /tmp/gs-pyinst-XXXXXX)
trap 'rm -rf "$T"' EXIT
export GPUSLICE_RUN_DIR="$T/run" XDG_RUNTIME_DIR="$T/xdg" HOME="$T/home" GPUSLICE_SIM_STATE="$T/sim.state"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_NO_CACHE_DIR=1
unset PYTHONPATH GPUSLICE_LIB
mkdir -p "$GPUSLICE_RUN_DIR"
mkdir -m 700 "$XDG_RUNTIME_DIR" "$HOME"
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# A copy of python/, so that no build leaves anything in the checkout.
cp -r "$SRC/python" "$T/src"
pythons=/usr/bin/python3
p=$(command -v python3)
[ -n "$p" ] && [ "$(readlink -f "$p")" != "$(readlink -f /usr/bin/python3)" ] && pythons="$pythons $p"
n=0
for py in $pythons; do
    [ -x "$py" ] || { echo "skip: no $py"; continue; }
    for iso in "" --no-build-isolation; do
        n=$((n + 1))
        v="$T/venv$n"
        what="$py -m venv; pip install --no-index${iso:+ $iso} ./python"
        if ! "$py" -m venv "$v" >"$T/venv.log" 2>&1; then
            bad "$what: the venv: $(tail -1 "$T/venv.log") (Debian: apt-get install python3-venv)"
            continue
        fi
        if ! "$v/bin/pip" install -q --no-index $iso "$T/src" >"$T/pip.log" 2>&1; then
            bad "$what failed:"; cat "$T/pip.log"; continue
        fi
        ok "$what"
        # From / so that the checkout's python/ is not on sys.path.
        got=$(cd / && PATH="$B/bin:$PATH" LD_LIBRARY_PATH="$B/lib/sim" "$v/bin/python" -c '
import gpuslice, sys
i = gpuslice.info()
print(gpuslice.__file__.startswith(sys.prefix), gpuslice.__version__, i.gpus[0].sm_count)' 2>&1)
        if [ "$got" = "True 0.1.0 132" ]; then
            ok "$what: import gpuslice from the venv; info() sees the simulated GPU's 132 SMs"
        else bad "$what: import gpuslice and info() printed: $got"; fi
        "$v/bin/pip" uninstall -q -y gpuslice >/dev/null 2>&1
        left=$(cd "$v" && find . -path '*gpuslice*' | head -3)
        if [ -z "$left" ]; then ok "$what: pip uninstall removes it all"; else
            bad "$what: pip uninstall left $left"; fi
    done
done
[ "$n" -gt 0 ] || bad "no python3 to try"
echo "$fails failure(s)"
[ "$fails" = 0 ]

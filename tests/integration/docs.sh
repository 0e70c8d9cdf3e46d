#!/usr/bin/env bash
# Documentation checks, no GPU needed: the man pages render without warnings
# and cover every command and long option the binary prints in its --help; the
# bash completion parses and completes; cmake --install and make install
# PREFIX=... put both in place with the binaries.
# Usage: docs.sh SOURCE_DIR BUILD_DIR [CMAKE]
set -u
SRC=$1
B=$2
CMAKE=${3:-cmake}
GS="$B/bin/gpuslice"
T=$(mktemp -d /tmp/gs-docs-XXXXXX)
BG=
cleanup() { [ -n "$BG" ] && kill "$BG" 2>/dev/null; wait; rm -rf "$T"; }
trap cleanup EXIT
# Hermetic, as tests/integration/run.sh: tenants, MPS directories and HOME are this run's own.
export GPUSLICE_RUN_DIR="$T/run" XDG_RUNTIME_DIR="$T/xdg" HOME="$T/home"
export CUDA_MPS_PIPE_DIRECTORY="$T/nvidia-mps" CUDA_MPS_LOG_DIRECTORY="$T/nvidia-mps-log"
mkdir -p "$GPUSLICE_RUN_DIR"
mkdir -m 700 "$XDG_RUNTIME_DIR" "$HOME"
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# The man page source with roff escapes undone, for text searches.
plain() { sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\(\(em\|en\)/-/g' "$1"; }
commands() { "$GS" --help | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p'; }
long_opts() { "$GS" "$@" --help | grep -o -- '--[a-z][a-z-]*' | sort -u; }

# 1. Every page renders without a warning.
if command -v man >/dev/null 2>&1; then
    lint() { MANWIDTH=80 man --warnings -l -E UTF-8 "$1" 2>&1 >/dev/null; }
    linter=man
elif command -v groff >/dev/null 2>&1; then
    lint() { groff -man -ww -z "$1" 2>&1; }
    linter=groff
else
    lint() { :; }
    linter=
    echo "skip: neither man nor groff is installed; the pages are not linted"
fi
for f in "$SRC"/man/*.1; do
    [ -n "$linter" ] || break
    out=$(lint "$f")
    if [ -z "$out" ]; then ok "$(basename "$f") renders without warnings ($linter)"; else
        bad "$(basename "$f"): $linter warns:"; echo "$out"; fi
done

# 2. A page per command, a command per page, and the overview names them all.
cmds=$(commands)
[ -n "$cmds" ] || bad "no commands parsed from gpuslice --help"
for c in $cmds; do
    if [ -f "$SRC/man/gpuslice-$c.1" ]; then ok "command $c has man/gpuslice-$c.1"; else
        bad "command $c has no man page man/gpuslice-$c.1"; fi
    if plain "$SRC/man/gpuslice.1" | grep -q "gpuslice-$c"; then ok "gpuslice.1 refers to gpuslice-$c"; else
        bad "gpuslice.1 does not refer to gpuslice-$c(1)"; fi
done
for f in "$SRC"/man/gpuslice-*.1; do
    c=$(basename "$f" .1); c=${c#gpuslice-}
    if printf '%s\n' $cmds | grep -qx "$c"; then ok "man page of $c names a command"; else
        bad "man/gpuslice-$c.1 documents \"$c\", which gpuslice --help does not list"; fi
done

# 3. Every long option in a --help is in the man page and in the completion.
. "$SRC/completions/gpuslice.bash" || bad "completions/gpuslice.bash cannot be sourced"
for c in "" $cmds; do
    page="$SRC/man/gpuslice${c:+-$c}.1"
    var=_gpuslice_opts_${c:-global}
    var=${var//-/_} # green-run: _gpuslice_opts_green_run
    [ -f "$page" ] || continue
    opts=$(long_opts $c)
    [ -n "$opts" ] || bad "no options parsed from gpuslice $c --help"
    for o in $opts; do
        if plain "$page" | grep -Eq -- "(^|[^a-z-])$o([^a-z-]|\$)"; then ok "$(basename "$page") has $o"; else
            bad "$(basename "$page") lacks $o (printed by gpuslice $c --help)"; fi
        if [[ " ${!var-} " == *" $o "* ]]; then ok "completion of ${c:-gpuslice} offers $o"; else
            bad "completion: $var lacks $o (printed by gpuslice $c --help)"; fi
    done
done

# 3b. The yield partition of a lower class is three quarters of the SMs (GPUSLICE_YIELD_SMS's
# default, route.c) wherever the help texts and pages say how much it is (issue 31: run --help
# said half).
for c in run exec; do
    if "$GS" $c --help | tr -s ' \n' ' ' | grep -q "three quarters of the SMs"; then
        ok "$c --help: the yield partition is three quarters of the SMs"; else
        bad "$c --help does not say three quarters of the SMs"; fi
done
if grep -n -i "half \(of \)\?the \(GPU's \)\?SMs\|half of its SMs" "$SRC"/man/*.[18] "$SRC"/src/cli/*.c; then
    bad "a page or help text says half of the SMs (the yield partition is three quarters)"; else
    ok "no page or help text says half of the SMs"; fi

# 4. The completion parses and completes.
if bash -n "$SRC/completions/gpuslice.bash"; then ok "bash -n completions/gpuslice.bash"; else
    bad "completions/gpuslice.bash has a syntax error"; fi
complete_words() { # complete_words WORD...: the COMPREPLY for the last word, one a line
    bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=()
             _gpuslice; printf "%s\n" "${COMPREPLY[@]}"' _ "$SRC/completions/gpuslice.bash" "$@"
}
expect_completion() { # expect_completion WANT WORD...
    want=$1; shift
    got=$(PATH="$B/bin:$PATH" complete_words "$@")
    if printf '%s\n' "$got" | grep -qx -- "$want"; then ok "completing \"$*\" offers $want"; else
        bad "completing \"$*\" gave \"$(echo $got)\", want $want"; fi
}
expect_completion tenants gpuslice t
expect_completion tenants "$GS" t
expect_completion --memory gpuslice run --mem
expect_completion --interval gpuslice tenants --i
expect_completion run gpuslice help r
expect_completion status gpuslice mps st
expect_completion --force gpuslice mps stop --f
# Values of the options that take a word from a list (issue 31: --priority offered none).
expect_completion background gpuslice run --priority b
expect_completion latency gpuslice exec --priority l
expect_completion normal gpuslice set --priority n
expect_completion below-normal gpuslice run --mps-priority b
expect_completion ls gpuslice run -m 4G -- ls
# set completes tenant names and IDs: a tenant whose program sleeps.
"$GS" run -q --name docs-tenant -- sleep 60 >"$T/bg.out" 2>&1 &
BG=$!
for i in $(seq 100); do
    grep -q docs-tenant <("$GS" tenants --json --interval 0 2>/dev/null) && break
    sleep 0.05
done
id=$("$GS" tenants --json --interval 0 | grep -o '"id":"[^"]*"' | head -1 | sed 's/"id":"\(.*\)"/\1/')
expect_completion docs-tenant gpuslice set docs
expect_completion "$id" gpuslice set "${id:0:3}"
kill "$BG" 2>/dev/null
wait "$BG" 2>/dev/null
BG=

# 5. cmake --install puts the pages and the completion in place.
if "$CMAKE" --install "$B" --prefix "$T/prefix" >"$T/install.log" 2>&1; then
    ok "cmake --install --prefix"
    mandir=$(sed -n 's/^CMAKE_INSTALL_MANDIR:PATH=//p' "$B/CMakeCache.txt")
    datadir=$(sed -n 's/^CMAKE_INSTALL_DATADIR:PATH=//p' "$B/CMakeCache.txt")
    for f in "$SRC"/man/*.1; do
        if cmp -s "$f" "$T/prefix/${mandir:-share/man}/man1/$(basename "$f")"; then
            ok "installed ${mandir:-share/man}/man1/$(basename "$f")"
        else bad "$(basename "$f") is not installed in ${mandir:-share/man}/man1"; fi
    done
    comp="$T/prefix/${datadir:-share}/bash-completion/completions/gpuslice"
    if cmp -s "$SRC/completions/gpuslice.bash" "$comp"; then ok "installed the bash completion"; else
        bad "the bash completion is not installed as ${comp#$T/prefix/}"; fi
    [ -x "$T/prefix/bin/gpuslice" ] && ok "installed bin/gpuslice" || bad "bin/gpuslice not installed"
    hook="$T/prefix/share/gpuslice/python/sitecustomize.py"
    if cmp -s "$SRC/python/gpuslice_torch/sitecustomize.py" "$hook"; then ok "installed the Python hook"; else
        bad "python/gpuslice_torch/sitecustomize.py is not installed as share/gpuslice/python/sitecustomize.py"; fi
    got=$(env -u GPUSLICE_PYTHON_DIR -u PYTHONPATH GPUSLICE_PRELOAD_LIB="$B/lib/libgpuslice.so" \
        "$T/prefix/bin/gpuslice" run -q -- sh -c 'echo "$PYTHONPATH"' 2>&1)
    if [ "$got" = "$(cd "$T/prefix/share/gpuslice/python" 2>/dev/null && pwd -P)" ]; then
        ok "the installed gpuslice finds its Python hook"
    else bad "the installed gpuslice set PYTHONPATH=\"$got\""; fi
else
    bad "cmake --install failed"; cat "$T/install.log"
fi

# 6. make install PREFIX=DIR (the top-level Makefile) installs under DIR, and DESTDIR stages it.
mandir=$(sed -n 's/^CMAKE_INSTALL_MANDIR:PATH=//p' "$B/CMakeCache.txt")
datadir=$(sed -n 's/^CMAKE_INSTALL_DATADIR:PATH=//p' "$B/CMakeCache.txt")
installed() { # installed ROOT WHAT: the files make install puts under ROOT
    local f missing=
    for f in bin/gpuslice lib/libgpuslice.so include/gpuslice/gpuslice.h \
        share/gpuslice/python/sitecustomize.py "${datadir:-share}/bash-completion/completions/gpuslice" \
        $(cd "$SRC/man" && printf "${mandir:-share/man}/man1/%s " *.1); do
        [ -f "$1/$f" ] || missing="$missing $f"
    done
    if [ -z "$missing" ]; then ok "$2: bin/gpuslice, lib/libgpuslice.so, the man pages and the completion are there"
    else bad "$2: missing under ${1#$T/}:$missing"; fi
}
mk() { make -C "$SRC" --no-print-directory install BUILD="$B" CMAKE="$CMAKE" "$@"; }
if ! command -v make >/dev/null 2>&1; then
    echo "skip: make is not installed; make install is not checked"
elif ! mk -n PREFIX="$T/mk prefix" 2>&1 | grep -qF "$T/mk prefix"; then
    # Not run for real: a rule that ignores PREFIX would install into the configured prefix.
    bad "make install ignores PREFIX: $(mk -n PREFIX="$T/mk prefix" 2>&1 | tail -1)"
elif make -C "$SRC" --no-print-directory install BUILD="$B" CMAKE="$CMAKE" PREFIX="$T/mk prefix" \
    >"$T/make.log" 2>&1; then
    ok "make install PREFIX=DIR"
    installed "$T/mk prefix" "make install PREFIX"
    [ -x "$T/mk prefix/bin/gpuslice" ] && "$T/mk prefix/bin/gpuslice" --version >/dev/null &&
        ok "the installed gpuslice runs" || bad "the installed gpuslice does not run"
    if make -C "$SRC" --no-print-directory install BUILD="$B" CMAKE="$CMAKE" PREFIX=/opt/gs \
        DESTDIR="$T/stage" >"$T/make.log" 2>&1; then
        installed "$T/stage/opt/gs" "make install PREFIX=/opt/gs DESTDIR=DIR"
        if [ -e /opt/gs/bin/gpuslice ] && [ ! -e "$T/stage/opt/gs/bin/gpuslice" ]; then
            bad "DESTDIR ignored: installed into /opt/gs"; fi
    else
        bad "make install DESTDIR failed"; cat "$T/make.log"
    fi
else
    bad "make install PREFIX=DIR failed"; cat "$T/make.log"
fi

# 7. The environment variables: one list (src/common/env.h), which the code names them by and
#    the documentation agrees with: every one a person sets has an entry in a man page's
#    ENVIRONMENT section and is in README or docs/reference.md; no page or either documents one
#    the list lacks; no source file spells a GPUSLICE_ name out instead of using the list's macro.
if python3 - "$SRC" >"$T/env.out" 2>&1 <<'PY'
import glob, os, re, sys
src = sys.argv[1]
h = open(os.path.join(src, "src/common/env.h")).read()
names = dict(re.findall(r'#define\s+(GS_ENV_\w+)\s+"(\w+)"', h))
rows = re.findall(r"X\((GS_ENV_\w+),\s*(GS_ENV_USER|GS_ENV_INTERNAL),", h)
bad = []
listed = {m for m, _ in rows}
bad += [f"{m} ({n}) is defined but not in GS_ENV_VARS" for m, n in names.items() if m not in listed]
bad += [f"GS_ENV_VARS names {m}, which is not defined" for m in listed if m not in names]
user = {names[m] for m, w in rows if w == "GS_ENV_USER" and m in names}
ours = set(names.values())
pages = {}
for p in sorted(glob.glob(os.path.join(src, "man", "*.1"))):
    t = open(p).read()
    env = t.split(".SH ENVIRONMENT", 1)[1].split("\n.SH ", 1)[0] if ".SH ENVIRONMENT" in t else ""
    for n in re.findall(r"^\.BI? ((?:GPUSLICE|TENSOR_FUSION|CUDA_DEVICE)_[A-Z_]*?)_?(?: |$)", env, re.M):
        pages.setdefault(n, os.path.basename(p))
# README is the short tour; the variables are in its reference, docs/reference.md.
readme = open(os.path.join(src, "README.md")).read() + open(os.path.join(src, "docs/reference.md")).read()
for n in sorted(user):
    if n not in pages:
        bad.append(f"{n} has no entry in any man page's ENVIRONMENT section")
    if not re.search(r"\b" + n + r"\b", readme):
        bad.append(f"{n} is in neither README.md nor docs/reference.md")
for n, p in sorted(pages.items()):
    if n not in user:
        bad.append(f"{p} documents {n}, which src/common/env.h does not list as a variable people set")
for n in sorted(set(re.findall(r"\bGPUSLICE_[A-Z][A-Z_]*[A-Z]\b", readme))):
    if n not in ours and not n.startswith("GPUSLICE_SIM_") and n not in ("GPUSLICE_TESTS", "GPUSLICE_SANITIZE", "GPUSLICE_TSAN", "GPUSLICE_FUZZ", "GPUSLICE_SIM"):
        bad.append(f"README.md or docs/reference.md names {n}, which src/common/env.h does not list")
for f in glob.glob(os.path.join(src, "src", "**", "*.[ch]"), recursive=True):
    if f.endswith("common/env.h"):
        continue
    for i, line in enumerate(open(f), 1):
        if re.search(r'"GPUSLICE_[A-Z_]+', line):
            bad.append(f"{os.path.relpath(f, src)}:{i} spells a GPUSLICE_ name out: use its GS_ENV_ macro")
print("\n".join(bad) if bad else f"{len(rows)} variables, {len(user)} documented")
sys.exit(1 if bad else 0)
PY
then ok "environment variables: $(cat "$T/env.out")"
else bad "environment variables disagree with src/common/env.h:"; cat "$T/env.out"; fi

echo "$fails failure(s)"
[ "$fails" = 0 ]

#!/usr/bin/env bash
# README's "try it now" blocks, run on the simulated GPU: each `console` block after an
# `<!-- try-it -->` line is a list of `$ COMMAND` lines, each followed by what it prints
# (stdout and stderr together). The commands run in order in one bash, from a directory whose
# `build` is BUILD_DIR, hermetically (run directory, XDG_RUNTIME_DIR, HOME, TMPDIR, simulator
# state of their own; README's first block makes the daemon's directory with mktemp -d, under
# this TMPDIR), and what each prints must match README: runs of spaces match any run of
# spaces, `…` any text within a line, a line of only `…` any lines, `≈N` a number within a
# quarter of N. So README cannot drift from the program. docs/development.md describes it.
# Usage: readme.sh SOURCE_DIR BUILD_DIR [--print]   (--print: show what each command printed)
set -u
SRC=$1
B=$(cd "$2" && pwd)
PRINT=${3:-}
T=$(mktemp -d /tmp/gs-readme-XXXXXX)
cleanup() {
    # What the blocks left running (background jobs, the daemon): their process group.
    [ -s "$T/pgid" ] && kill -TERM -- "-$(cat "$T/pgid")" 2>/dev/null
    wait
    rm -rf "$T"
}
trap cleanup EXIT
export GPUSLICE_RUN_DIR="$T/run" XDG_RUNTIME_DIR="$T/xdg" HOME="$T/home" TMPDIR="$T/tmp"
export GPUSLICE_SIM_STATE="$T/sim.state"
export CUDA_MPS_PIPE_DIRECTORY="$T/nvidia-mps" CUDA_MPS_LOG_DIRECTORY="$T/nvidia-mps-log"
# Whatever the caller set is not README's: the blocks set what they need.
unset GPUSLICE_DAEMON_DIR LD_LIBRARY_PATH LD_PRELOAD PYTHONPATH GPUSLICE_TENANT GPUSLICE_DEBUG \
    GPUSLICE_MEMORY_LIMIT GPUSLICE_COMPUTE_LIMIT GPUSLICE_SMS GPUSLICE_PRIORITY GPUSLICE_WEIGHT \
    GPUSLICE_SIM_DEVICES GPUSLICE_SIM_SMS GPUSLICE_SIM_MEMORY GPUSLICE_SIM_GREEN CUDA_VISIBLE_DEVICES
mkdir -p "$GPUSLICE_RUN_DIR" "$T/cwd"
mkdir -m 700 "$XDG_RUNTIME_DIR" "$HOME" "$TMPDIR"
ln -s "$B" "$T/cwd/build"

python3 - "$SRC/README.md" "$T" "$PRINT" <<'PY'
import os, re, subprocess, sys

readme, T, show = sys.argv[1], sys.argv[2], sys.argv[3] == "--print"
lines = open(readme, encoding="utf-8").read().split("\n")

# The blocks: after "<!-- try-it -->", a ```console fence; commands and their outputs.
cmds = []  # (README line number, command, [expected lines])
i = 0
while i < len(lines):
    if lines[i].strip() != "<!-- try-it -->":
        i += 1
        continue
    i += 1
    if i >= len(lines) or lines[i].strip() != "```console":
        sys.exit(f"README.md:{i + 1}: <!-- try-it --> is not followed by a ```console block")
    i += 1
    while i < len(lines) and lines[i].strip() != "```":
        if lines[i].startswith("$ "):
            no, cmd = i + 1, lines[i][2:]
            while cmd.endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd + "\n" + lines[i]
            cmds.append((no, cmd, []))
        elif cmds:
            cmds[-1][2].append(lines[i])
        else:
            sys.exit(f"README.md:{i + 1}: output before any command")
        i += 1
    i += 1
if not cmds:
    sys.exit("README.md has no <!-- try-it --> block")

# One bash runs them all, in its own process group (the caller kills it at the end), a marker
# before each command's output.
script = ["exec 2>&1", "echo $$ >%s/pgid" % T, "set +m"]
for k, (_, cmd, _) in enumerate(cmds):
    script += ["printf '\\n@@readme %d\\n'" % k, cmd]  # a line of its own after any output
# Then what they left running (background jobs, the daemon) is stopped, so the output ends.
script += ["printf '\\n@@readme end\\n'", "trap '' TERM", "kill -TERM 0", "wait"]
p = subprocess.run(["setsid", "bash", "-c", "\n".join(script)], cwd=os.path.join(T, "cwd"),
                   stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=240)
out = p.stdout.decode("utf-8", "replace").split("\n")
got = {}
cur = None
for l in out:
    m = re.fullmatch(r"@@readme (\d+|end)", l)
    if m:
        cur = None if m.group(1) == "end" else int(m.group(1))
        got.setdefault(cur, [])
    elif cur is not None:
        got[cur].append(l)


def line_re(exp):
    """A README output line as a regex, and the ≈N values to check on its groups."""
    parts, approx = [], []
    for tok in re.split(r"(…|≈[0-9]+(?:\.[0-9]+)?| +)", exp.rstrip()):
        if tok == "…":
            parts.append(".*?")
        elif tok.startswith("≈"):
            parts.append(r"([0-9]+(?:\.[0-9]+)?)")
            approx.append(float(tok[1:]))
        elif tok and tok.strip() == "":
            parts.append(r"\s+")
        else:
            parts.append(re.escape(tok))
    return re.compile("".join(parts) + r"\s*"), approx


def match(exp, act):
    """Whether the actual lines match the expected ones; a line of only … takes any lines."""
    if not exp:
        return not act
    if exp[0].strip() == "…":
        return any(match(exp[1:], act[k:]) for k in range(len(act) + 1))
    if not act:
        return False
    r, approx = line_re(exp[0])
    m = r.fullmatch(act[0].rstrip())
    if not m:
        return False
    for want, v in zip(approx, m.groups()):
        if abs(float(v) - want) > want / 4:
            return False
    return match(exp[1:], act[1:])


# The matcher itself must tell a drifted README from a good one (checked on the first output).
assert not match(["total 4294967296"], ["total 4294967295"]) and match(["a  …  b"], ["a x  y b"])
assert match(["share ≈0.30 x"], ["share 0.297 x"]) and not match(["share ≈0.30"], ["share 0.5"])

fails = 0
for k, (no, cmd, exp) in enumerate(cmds):
    while exp and exp[-1].strip() == "":
        exp = exp[:-1]
    act = got.get(k)
    if act is None:
        print(f"FAIL: README.md:{no}: `{cmd}` did not run (the commands before it ended the shell)")
        fails += 1
        continue
    while act and act[-1].strip() == "":
        act = act[:-1]
    if show:
        print(f"--- README.md:{no}: $ {cmd}\n" + "\n".join(act))
    if match(exp, act):
        print(f"ok: README.md:{no}: $ {cmd}")
    else:
        fails += 1
        print(f"FAIL: README.md:{no}: $ {cmd}\n  README shows:\n" +
              "".join(f"    {l}\n" for l in exp) + "  it printed:\n" +
              "".join(f"    {l}\n" for l in act))
print(f"{len(cmds)} commands, {fails} failure(s)")
sys.exit(1 if fails else 0)
PY

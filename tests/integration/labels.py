#!/usr/bin/env python3
"""make test runs a test labelled "behaviour" under ASan only (tests/integration/CMakeLists.txt).
A case whose judgment depends on the build (SANITIZE: a check skipped or a bound loosened under
the sanitizers, through run.sh's over/loose or a helper that uses them) would then never be
judged at its plain-build bound: it must run in both builds. Fails naming each such case.
usage: labels.py SOURCE_DIR BUILD_DIR"""
import glob
import os
import re
import subprocess
import sys

src, build = sys.argv[1], sys.argv[2]
out = subprocess.run(["ctest", "-N", "-L", "^behaviour$"], cwd=build, capture_output=True,
                     text=True, check=True).stdout
behaviour = set(re.findall(r"Test +#\d+: integration\.(\S+)", out))
if len(behaviour) < 50:
    sys.exit(f"labels: only {len(behaviour)} tests labelled behaviour in {build}: {out[-500:]}")

# The helpers whose bounds depend on SANITIZE, and what calls them, to a fixed point. Comments
# and quoted text (messages, Python, awk) are no calls; "$(helper ...)" and "${SANITIZE...}" in
# double quotes are.
def code(body):
    body = re.sub(r"(^|\s)#.*$", r"\1", body, flags=re.M)
    body = re.sub(r"'[^'\n]*'", "''", body)
    return re.sub(r'"(?:[^"\\\n]|\\.)*"',
                  lambda m: " ".join(re.findall(r"\$\([^)]*\)|\$\{[^}]*\}", m.group(0))),
                  body)


text = {f: code(open(f).read()) for f in glob.glob(os.path.join(src, "tests/integration/*.sh"))}
dependent = {"SANITIZE"}
funcs = {}
for body in text.values():
    for m in re.finditer(r"^([a-z_]+)\(\) *\{(.*)\}\s*$", body, re.M):  # on one line
        funcs[m.group(1)] = m.group(2)
    for m in re.finditer(r"^([a-z_]+)\(\) *\{ *$(.*?)^\}", body, re.M | re.S):
        funcs[m.group(1)] = m.group(2)


def calls(name, body):
    """Whether body runs name: a command, not a word of a comment or a message."""
    if name == "SANITIZE":
        return re.search(r"\bSANITIZE\b", body) is not None
    return re.search(r"(\$\(|^\s*|[;&|{(]\s*|\b(?:then|do|else|if|!)\s+)%s\b" % re.escape(name),
                     body, re.M) is not None


changed = True
while changed:
    changed = False
    for name, body in funcs.items():
        if name not in dependent and any(calls(d, body) for d in dependent):
            dependent.add(name)
            changed = True

# Each case's body: from its "name)" line at column 0 to the next.
bad = []
for f, body in text.items():
    parts = re.split(r"^([a-z_*|]+)\)\s*(?:#.*)?$", body, flags=re.M)
    for names, case in zip(parts[1::2], parts[2::2]):
        for name in names.split("|"):
            if name in behaviour:
                uses = sorted(d for d in dependent if calls(d, case))
                if uses:
                    bad.append(f"{name} ({os.path.basename(f)}: {', '.join(uses)})")
for b in bad:
    print(f"FAIL: {b} is labelled behaviour (ASan only in make test), but judges by the build: "
          "add it to GS_BOTH in tests/integration/CMakeLists.txt")
print(f"labels: {len(behaviour)} behaviour tests; helpers that depend on SANITIZE: "
      f"{', '.join(sorted(dependent - {'SANITIZE'}))}; {len(bad)} case(s) misplaced")
sys.exit(1 if bad else 0)

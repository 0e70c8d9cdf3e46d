#!/usr/bin/env python3
"""Mutation testing of gpuslice's CPU suite (tests/mutation/run.sh runs this).

Each mutant in mutants.txt plants one realistic bug in product code (src/**):
an exact snippet that must occur exactly once in its file, and what replaces
it. The source tree is copied (without .git and build*/) into a temporary
directory; every mutant is applied there, one at a time, the copy rebuilt
incrementally in its own RelWithDebInfo build directory, and the CPU suite
run with ctest --stop-on-failure: a mutant is KILLED when a test fails,
SURVIVED when every test passes. The mutated file is restored from its saved
original before the next mutant. The checkout itself is never written.

A kill counts only if the test that failed passes again once the original
file is back (a test that fails on the real code, or a timing test that
fails by chance, proves nothing). If it does not, that test alone is run
again on the mutant and on the original, twice at most: a failure on the
mutant with a pass on the original is a kill; otherwise the mutant is
UNSURE, counted as a survivor. A mutant whose snippet does not occur exactly once is STALE,
and one that does not compile is INVALID; neither is counted, and either
fails the run, since the list must be fixed.

The exit status is 0 only when the kill rate, killed / (killed + survived),
is at least 90 % and no mutant is stale or invalid.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LIST = os.path.join(HERE, "mutants.txt")
THRESHOLD = 90.0


class Mutant:
    def __init__(self, mid, line):
        self.id = mid
        self.line = line  # where it starts in mutants.txt
        self.file = None
        self.bug = None
        self.tests = []  # tests to run first (a hint: the whole suite runs if they pass)
        self.old = None
        self.new = None


def parse_list(path):
    """The mutants of path, in order. The format is described at the top of mutants.txt."""
    mutants, cur, section, buf = [], None, None, []
    errors = []

    def close_section():
        if cur is not None and section is not None:
            setattr(cur, section, "\n".join(buf))

    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        if section is not None:
            if line == "--- end":
                close_section()
                section = None
                mutants.append(cur)
                cur = None
            elif line == "--- to":
                close_section()
                section, buf = "new", []
            elif re.fullmatch(r"\[([a-z0-9][a-z0-9._-]*)\]", line):
                # A merge that dropped a '--- end' would make the next mutant part of this
                # one's snippet, and silently lose it.
                errors.append("%s:%d: mutant %s: %s begins before its '--- end'"
                              % (path, n, cur.id, line))
                buf.append(line)
            else:
                buf.append(line)
            continue
        if not line.strip() or line.startswith("#"):
            continue
        m = re.fullmatch(r"\[([a-z0-9][a-z0-9._-]*)\]", line)
        if m:
            if cur is not None:
                errors.append("%s:%d: mutant %s has no '--- from' section" % (path, cur.line, cur.id))
            cur = Mutant(m.group(1), n)
            continue
        if cur is None:
            errors.append("%s:%d: text outside a mutant: %r" % (path, n, line))
            continue
        m = re.fullmatch(r"(file|bug|tests):\s*(.*)", line)
        if m:
            key, val = m.group(1), m.group(2).strip()
            if key == "tests":
                cur.tests = val.split()
            else:
                setattr(cur, key, val)
            continue
        if line == "--- from":
            section, buf = "old", []
            continue
        errors.append("%s:%d: not understood: %r" % (path, n, line))
    if section is not None or cur is not None:
        errors.append("%s: the last mutant has no '--- end'" % path)
    seen = set()
    for m in mutants:
        if m.id in seen:
            errors.append("%s:%d: mutant id %s is used twice" % (path, m.line, m.id))
        seen.add(m.id)
        if not m.file or not m.bug or m.old is None or m.new is None:
            errors.append("%s:%d: mutant %s needs file:, bug:, '--- from', '--- to' and '--- end'"
                          % (path, m.line, m.id))
        elif not m.file.startswith(("src/", "python/")):
            errors.append("%s:%d: mutant %s: %s is not product code (src/..., python/...)" % (path, m.line, m.id, m.file))
        elif not m.old:
            errors.append("%s:%d: mutant %s: the snippet is empty" % (path, m.line, m.id))
        elif m.old == m.new:
            errors.append("%s:%d: mutant %s changes nothing" % (path, m.line, m.id))
    if errors:
        sys.exit("\n".join(errors))
    return mutants


def stale_reason(tree, m):
    """Why m cannot be applied to the tree at root tree, or None."""
    path = os.path.join(tree, m.file)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        return "%s: %s" % (m.file, e.strerror)
    n = text.count(m.old)
    if n != 1:
        return "the snippet occurs %d times in %s (it must occur exactly once)" % (n, m.file)
    return None


def run(cmd, cwd, log=None, timeout=None):
    """Runs cmd; returns (status, output). The output is also appended to log."""
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout)
        out, rc = p.stdout.decode("utf-8", "replace"), p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode("utf-8", "replace") + "\n(timed out)\n", 124
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write("$ %s\n%s\n" % (" ".join(cmd), out))
    return rc, out


def first_failure(out):
    """The name of the first test ctest reported failed in out, or None."""
    m = re.search(r"Test\s+#\d+: (\S+) \.*\s*\*\*\*(Failed|Timeout|Exception)", out)
    if m:
        return m.group(1)
    m = re.search(r"Test\s+#\d+: (\S+) \.*\s*Not Run", out)
    if m:
        return m.group(1)
    m = re.search(r"The following tests FAILED:\s*\n\s*\d+ - (\S+)", out)
    return m.group(1) if m else None


def first_error(out):
    for line in out.splitlines():
        if re.search(r"\berror\b", line):
            return line.strip()
    return "(no error line; see the log)"


class Work:
    def __init__(self, args):
        self.jobs = str(args.jobs)
        self.base = tempfile.mkdtemp(prefix="gpuslice-mutation-")
        self.src = os.path.join(self.base, "src")
        self.build = os.path.join(self.base, "build")
        self.logs = os.path.join(self.base, "logs")
        self.keep = args.keep
        # Some tests run a program as another user (nobody), who must reach the build.
        os.chmod(self.base, 0o755)
        os.makedirs(self.logs)

    def copy_tree(self):
        def ignore(d, names):
            top = os.path.abspath(d) == ROOT
            return [n for n in names if n == ".git" or (top and n.startswith("build"))]

        shutil.copytree(ROOT, self.src, symlinks=True, ignore=ignore)

    def configure(self):
        rc, out = run(["cmake", "-S", self.src, "-B", self.build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
                      self.base, os.path.join(self.logs, "configure.log"))
        if rc != 0:
            sys.exit("mutation: cmake configure failed:\n" + out[-3000:])

    def make(self, log):
        return run(["cmake", "--build", self.build, "-j", self.jobs], self.base, log)

    def ctest(self, log, include=None, exclude=None):
        cmd = ["ctest", "--stop-on-failure", "-j", self.jobs, "--output-on-failure"]
        if include:
            cmd += ["-R", include, "--no-tests=error"]
        if exclude:
            cmd += ["-E", exclude]
        return run(cmd, self.build, log)

    def test_names(self):
        rc, out = run(["ctest", "-N"], self.build)
        return set(re.findall(r"Test\s+#\d+: (\S+)", out))

    def done(self):
        if self.keep:
            print("mutation: the work directory is kept: %s" % self.base)
        else:
            shutil.rmtree(self.base, ignore_errors=True)


def regex_of(names):
    return "^(" + "|".join(re.escape(n) for n in names) + ")$"


class Planted:
    """m's file mutated for the duration of a with block, then restored."""

    def __init__(self, w, m):
        self.path = os.path.join(w.src, m.file)
        self.m = m

    def __enter__(self):
        with open(self.path, encoding="utf-8") as f:
            self.original = f.read()
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(self.original.replace(self.m.old, self.m.new, 1))

    def __exit__(self, *exc):
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(self.original)


def test_mutant(w, m, log, hinted_only=False):
    """'KILLED', test | 'SURVIVED', None | 'HINT-PASSED', None | 'INVALID', error line."""
    with Planted(w, m):
        rc, out = w.make(log)
        if rc != 0:
            return "INVALID", first_error(out)
        if m.tests:
            rc, out = w.ctest(log, include=regex_of(m.tests))
            if rc != 0:
                return "KILLED", first_failure(out) or "(ctest exit %d)" % rc
        if hinted_only:
            return "HINT-PASSED", None
        rc, out = w.ctest(log, exclude=regex_of(m.tests) if m.tests else None)
        if rc != 0:
            return "KILLED", first_failure(out) or "(ctest exit %d)" % rc
        return "SURVIVED", None


def fails_on_mutant(w, m, test, log):
    """Whether test alone fails with m planted (rebuilt)."""
    with Planted(w, m):
        rc, out = w.make(log)
        if rc != 0:
            return True
        rc, out = w.ctest(log, include=regex_of([test]))
        return rc != 0


def confirm(w, test, log):
    """Whether test passes on the original tree (rebuilt)."""
    rc, out = w.make(log)
    if rc != 0:
        sys.exit("mutation: the original tree no longer builds (see %s):\n%s" % (log, out[-3000:]))
    if test.startswith("("):
        rc, out = w.ctest(log)
        return rc == 0
    rc, out = w.ctest(log, include=regex_of([test]))
    return rc == 0


def main():
    ap = argparse.ArgumentParser(
        prog="tests/mutation/run.sh",
        description="Plants each mutant of tests/mutation/mutants.txt in a copy of the source tree, "
                    "one at a time, runs the CPU suite against it, and prints the kill rate and the "
                    "survivors.")
    ap.add_argument("ids", nargs="*", metavar="ID", help="run only these mutants (default: all)")
    ap.add_argument("--list", action="store_true", help="list the mutants (STALE marks one that no "
                    "longer applies to this checkout) and exit")
    ap.add_argument("--jobs", type=int, default=2, help="parallel build and test jobs (default 2)")
    ap.add_argument("--baseline", action="store_true", help="run the whole suite on the unmutated "
                    "copy first, and stop if it fails")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (copy, build, "
                    "one log per mutant)")
    ap.add_argument("--mutants", metavar="FILE", default=LIST, help="the list to read (default "
                    "tests/mutation/mutants.txt): candidates can be screened before they join it")
    ap.add_argument("--hinted-only", action="store_true", help="screening: run only each mutant's "
                    "tests: line, not the rest of the suite (a survivor is HINT-PASSED, not proven "
                    "to survive the whole suite, and the kill rate is not judged)")
    args = ap.parse_args()

    if not os.path.isfile(args.mutants):
        sys.exit("mutation: --mutants %s: no such file (a list in the format of mutants.txt)"
                 % args.mutants)
    mutants = parse_list(args.mutants)
    by_id = {m.id: m for m in mutants}
    unknown = [i for i in args.ids if i not in by_id]
    if unknown:
        sys.exit("mutation: no mutant %s (see --list)" % ", ".join(unknown))
    chosen = [by_id[i] for i in args.ids] if args.ids else mutants

    if args.list:
        for m in chosen:
            why = stale_reason(ROOT, m)
            print("%-28s %-30s %s%s" % (m.id, m.file, "STALE: " if why else "", m.bug))
        return 0

    def on_term(sig, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    t0 = time.time()
    w = Work(args)
    results = []
    try:
        print("mutation: copying %s to %s" % (ROOT, w.src), flush=True)
        w.copy_tree()
        w.configure()
        rc, out = w.make(os.path.join(w.logs, "build.log"))
        if rc != 0:
            sys.exit("mutation: the unmutated copy does not build:\n" + out[-3000:])
        names = w.test_names()
        for m in chosen:
            missing = [t for t in m.tests if t not in names]
            if missing:
                sys.exit("mutation: mutant %s (mutants.txt:%d) names tests that do not exist: %s"
                         % (m.id, m.line, " ".join(missing)))
        if args.baseline:
            print("mutation: the whole suite on the unmutated copy ...", flush=True)
            rc, out = w.ctest(os.path.join(w.logs, "baseline.log"))
            if rc != 0:
                sys.exit("mutation: the unmutated copy fails %s; fix that first (log: %s)"
                         % (first_failure(out), os.path.join(w.logs, "baseline.log")))
        print("mutation: %d mutant(s), %s" % (len(chosen), "CPU suite: ctest --stop-on-failure -j %s"
                                              % w.jobs), flush=True)
        for k, m in enumerate(chosen, 1):
            s0 = time.time()
            log = os.path.join(w.logs, m.id + ".log")
            why = stale_reason(w.src, m)
            if why:
                verdict, detail = "STALE", why
            else:
                if args.hinted_only and not m.tests:
                    sys.exit("mutation: --hinted-only: mutant %s has no tests: line" % m.id)
                verdict, detail = test_mutant(w, m, log, args.hinted_only)
                if verdict == "KILLED" and not confirm(w, detail, log):
                    # A test that failed by chance (a timing band on a busy machine)? Again,
                    # that test alone: on the mutant, then on the original.
                    unsure = detail.startswith("(") or not any(
                        fails_on_mutant(w, m, detail, log) and confirm(w, detail, log)
                        for _ in range(2))
                    if unsure:
                        verdict, detail = "UNSURE", ("%s also fails on the original code, or passes "
                                                     "on the mutant when run again" % detail)
            results.append((m, verdict, detail))
            shown = {"KILLED": "by " + str(detail), "SURVIVED": "", "HINT-PASSED": "", "UNSURE": detail,
                     "INVALID": detail, "STALE": detail}[verdict]
            print("[%2d/%d] %-9s %-28s %s (%.0f s)" % (k, len(chosen), verdict, m.id, shown,
                                                        time.time() - s0), flush=True)
    except KeyboardInterrupt:
        print("\nmutation: interrupted; the summary covers the mutants run so far", flush=True)
    finally:
        w.done()

    killed = [r for r in results if r[1] == "KILLED"]
    survived = [r for r in results if r[1] in ("SURVIVED", "UNSURE", "HINT-PASSED")]
    stale = [r for r in results if r[1] == "STALE"]
    invalid = [r for r in results if r[1] == "INVALID"]
    counted = len(killed) + len(survived)
    rate = 100.0 * len(killed) / counted if counted else 0.0
    mins = (time.time() - t0) / 60
    print()
    print("mutation: %d killed, %d survived, %d invalid, %d stale; kill rate %.1f %% (%d/%d), "
          "%.1f min" % (len(killed), len(survived), len(invalid), len(stale), rate, len(killed),
                        counted, mins))
    for title, rows in (("survivors", survived), ("invalid (do not compile: fix them)", invalid),
                        ("stale (the snippet no longer matches once: fix them)", stale)):
        if rows:
            print("%s:" % title)
            for m, verdict, detail in rows:
                print("  %-28s %s: %s%s" % (m.id, m.file, m.bug,
                                            " [%s]" % detail if verdict == "UNSURE" else ""))
    if args.hinted_only:
        print("mutation: screening only (--hinted-only): the survivors passed their hinted tests; "
              "the rest of the suite was not run")
        return 1 if stale or invalid else 0
    ok = counted > 0 and rate >= THRESHOLD and not stale and not invalid
    if not ok:
        print("mutation: FAIL (%s)" % "; ".join(
            x for x in ("kill rate under %.0f %%" % THRESHOLD if rate < THRESHOLD or not counted else "",
                        "stale mutants" if stale else "", "invalid mutants" if invalid else "") if x))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

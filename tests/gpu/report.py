"""Turns the GPU checks' logs into results (run by tests/gpu/run.sh; no GPU needed).

  report.py parse NAME LOG RC SECONDS TIMEOUT [info]
                                                prints one JSON line: the check's verdict
                                                ("info": the check is informational)
  report.py unrun NAME REASON                   prints one JSON line for a check not run
  report.py summary WORKDIR [OUTDIR]            writes gpu-summary.md and gpu-results.json
                                                to WORKDIR (and OUTDIR), prints the table,
                                                exits 0 when no check failed
A check's verdict comes from its "@" lines (see check.h):
  INFO   an informational check (run.sh lists it, or it printed "@info" lines and asserted
         nothing): it shows that a program ran and what it found, nothing more, so it
         neither passes nor fails the suite; a crash, timeout or "@fail" of one is shown as
         "incomplete: ..." beside it
  FAIL   it timed out, printed "@fail", exited non-zero, or asserted nothing
  SKIP   it printed "@skip"
  KNOWN  it printed "@known" (a measured shortfall that docs/reference.md names), no "@fail"
  PASS   otherwise
SKIP and KNOWN do not fail the suite unless GPU_SUITE_STRICT=1.
"""
import json
import os
import sys
import time

TABLE_NUMBERS_MD = 400
TABLE_NUMBERS_TTY = 150
# The benchmarks' tables that gpu-summary.md (and the printed summary) include.
BENCH_TABLES = (("Launch overhead", "bench-launch.md"),
                ("Launch overhead under a ceiling that does not bind", "bench-launch-duty.md"),
                ("Many processes attaching at once", "bench-attach.md"))


def parse_value(text):
    try:
        v = float(text)
    except ValueError:
        return text
    return int(v) if v.is_integer() and abs(v) < 2**53 else v


def parse(name, log, rc, seconds, timeout, info=False):
    oks, fails, skips, notes, knowns, infos = [], [], [], [], [], []
    keys, nums = {}, {}
    try:
        with open(log, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        lines = [f"@fail cannot read the check's log: {e}"]
    for line in lines:
        if not line.startswith("@"):
            continue
        tag, _, rest = line.partition(" ")
        if tag == "@ok":
            oks.append(rest)
        elif tag == "@fail":
            fails.append(rest)
        elif tag == "@skip":
            skips.append(rest)
        elif tag == "@note":
            notes.append(rest)
        elif tag == "@known":
            knowns.append(rest)
        elif tag == "@info":
            infos.append(rest)
        elif tag in ("@key", "@num"):
            k, _, v = rest.partition(" ")
            if not k:
                continue
            target = keys if tag == "@key" else nums
            while k in keys or k in nums:  # a repeated name (several processes) gets a suffix
                k += "'"
            target[k] = parse_value(v.strip())
    rc, timeout = int(rc), int(timeout)
    reasons = []
    if rc in (124, 137):
        reasons.append(f"timed out after {timeout} s")
    elif rc != 0 and not fails:
        reasons.append(f"exit status {rc}")
    reasons += fails
    if info or (infos and not oks and not fails and not knowns):
        result = "INFO"
        reasons = ["incomplete: " + r for r in reasons] + skips
    elif reasons:
        result = "FAIL"
    elif skips:
        result = "SKIP"
        reasons = skips
    elif not oks and not knowns:
        result = "FAIL"
        reasons = ["asserted nothing"]
    elif knowns:
        result = "KNOWN"
        reasons = knowns
    else:
        result = "PASS"
    return {
        "name": name, "result": result, "pass": result == "PASS", "seconds": float(seconds),
        "exit_status": rc, "asserted": len(oks) + len(fails) + len(knowns),
        "failed": len(fails), "reasons": reasons, "numbers": dict(keys), "details": nums,
        "notes": notes, "passed_assertions": oks, "known_shortfalls": knowns, "facts": infos,
    }


def fmt_numbers(r, width):
    text = ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in r["numbers"].items())
    if r["result"] != "PASS" and r["reasons"]:
        extra = f" (+{len(r['reasons']) - 1} more)" if len(r["reasons"]) > 1 else ""
        text = (r["reasons"][0] + extra + ("; " + text if text else ""))
    text = text.replace("|", "/")
    return text if len(text) <= width else text[: width - 3] + "..."


def read_env(path):
    env = {}
    try:
        with open(path) as f:
            for line in f:
                k, sep, v = line.rstrip("\n").partition(": ")
                if sep:
                    env[k] = v
    except OSError:
        pass
    return env


def summary(work, out):
    results = []
    with open(os.path.join(work, "results.jsonl")) as f:
        for line in f:
            if line.strip():
                results.append(json.loads(line))
    env = read_env(os.path.join(work, "env.txt"))
    counts = {k: sum(r["result"] == k for r in results)
              for k in ("PASS", "FAIL", "SKIP", "KNOWN", "INFO")}
    strict = os.environ.get("GPU_SUITE_STRICT") == "1"
    ok = (counts["FAIL"] == 0 and (not strict or counts["SKIP"] + counts["KNOWN"] == 0)
          and results)
    tally = (f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped, "
             f"{counts['KNOWN']} with a known shortfall, {counts['INFO']} informational")

    def table(width):
        rows = ["| check | result | measured numbers |", "|---|---|---|"]
        for r in results:
            rows.append(f"| {r['name']} | {r['result']} | {fmt_numbers(r, width)} |")
        return "\n".join(rows)

    md = ["# gpuslice GPU suite", ""]
    md += [f"- {k}: {v}" for k, v in env.items()]
    md += ["", table(TABLE_NUMBERS_MD), "", tally, "",
           "INFO: informational (it shows what a program found; neither passes nor fails). "
           "KNOWN: a measured shortfall that docs/reference.md names; not a pass.", ""]
    for r in results:
        if r["result"] != "PASS" and (r["result"] != "INFO" or r["reasons"]):
            md.append(f"## {r['name']}: {r['result']}")
            md += [f"- {x}" for x in r["reasons"][:20]]
            md.append("")
    benches = [(title, os.path.join(work, fn)) for title, fn in BENCH_TABLES
               if os.path.exists(os.path.join(work, fn))]
    for title, path in benches:
        with open(path) as f:
            md += [f"## {title}", "", f.read().strip(), ""]
    probe = next((r for r in results if r["name"] == "probe_driver"), None)
    if probe and probe["details"]:
        md += ["## Driver probe (native)", "", "| quantity | value |", "|---|---|"]
        md += [f"| {k} | {v} |" for k, v in {**probe["numbers"], **probe["details"]}.items()]
        md.append("")
    md_text = "\n".join(md) + "\n"
    doc = {"generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "environment": env,
           "passed": counts["PASS"], "failed": counts["FAIL"], "skipped": counts["SKIP"],
           "known_shortfall": counts["KNOWN"], "informational": counts["INFO"],
           "strict": strict, "all_passed": bool(ok), "checks": results}
    for d in [work] + ([out] if out else []):
        with open(os.path.join(d, "gpu-summary.md"), "w") as f:
            f.write(md_text)
        with open(os.path.join(d, "gpu-results.json"), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")

    print()
    print("## gpuslice GPU suite: " + ", ".join(f"{k}: {v}" for k, v in env.items()
                                                  if k in ("date", "gpu", "driver")))
    print(table(TABLE_NUMBERS_TTY))
    for title, path in benches:
        with open(path) as f:
            print()
            print(f.read().strip())
    print()
    for r in results:
        if r["result"] == "KNOWN":
            for x in r["reasons"][:10]:
                print(f"known shortfall, {r['name']}: {x}")
    print(f"gpu: {tally}")
    return 0 if ok else 1


def main():
    a = sys.argv[1:]
    if len(a) in (6, 7) and a[0] == "parse" and (len(a) == 6 or a[6] in ("info", "")):
        print(json.dumps(parse(*a[1:6], info=len(a) == 7 and a[6] == "info")))
    elif len(a) == 3 and a[0] == "unrun":
        print(json.dumps({"name": a[1], "result": "FAIL", "pass": False, "seconds": 0.0,
                          "exit_status": None, "asserted": 0, "failed": 0, "reasons": [a[2]],
                          "numbers": {}, "details": {}, "notes": [], "passed_assertions": [],
                          "known_shortfalls": [], "facts": []}))
    elif len(a) in (2, 3) and a[0] == "summary":
        sys.exit(summary(a[1], a[2] if len(a) == 3 else ""))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()

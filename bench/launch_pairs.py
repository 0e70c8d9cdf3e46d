"""Launch overhead as interleaved pairs: is an empty-kernel launch through the interposer as
cheap as a native one? Run by bench/launch_overhead.sh (see there for the configurations).

Each pair is one fresh process per configuration of the same binary (launch_overhead serve),
all started together, so each pays its start-up once and none runs while another measures:
when every one has said "ready", the samples are taken in turn, A B C A B C ... (the order
rotating from pair to pair), each a run of --launches launches through one API. A pair's ratio
for configuration X and API P is the median of X's samples over the median of the baseline's,
both from the same moment of the machine. The verdict is on the median of the pairs' ratios
with its bootstrap confidence interval (--resamples resamples of the pairs, --confidence):
FAIL only when the whole interval lies above 1 + --tolerance. A single median of a few
processes, as before, moved by ±8 % between runs on the H200's virtual machine.

usage: bench/launch_pairs.py --bin BIN --config NAME=ARGV ... [--baseline NAME] [--pairs N]
           [--samples S] [--launches N] [--duty --burst B] [--tolerance T] [--cpus LIST]
           [--table FILE] [--prefix P] [--title TEXT]
  ARGV is the command prefix the configuration runs the binary under (shell words, may be
  empty), e.g. --config native= --config 'preload=env LD_PRELOAD=/path/libgpuslice.so'
Output: progress, the table and check lines (@ok/@fail/@key/@num) for tests/gpu/report.py.
Exit status 1 when a verdict failed.
"""
import argparse
import os
import select
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import gpumeasure as gm

APIS = ("runtime", "driver")  # the sample kinds (--apis changes them)
API_LABELS = {"runtime": "runtime API", "driver": "driver API"}  # in verdicts
API_HEADS = {"runtime": "runtime <<<>>>", "driver": "driver cuLaunchKernel"}  # in the table
START_TIMEOUT = 60.0
SAMPLE_TIMEOUT = 30.0


class Server:
    """One `launch_overhead serve` process of a configuration."""

    def __init__(self, cfg, argv, env):
        self.cfg, self.error = cfg, None
        # stderr to a file: a chatty process must never block on a full pipe.
        self.err = tempfile.TemporaryFile(mode="w+")
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self.err, env=env, text=True, bufsize=1)
        except OSError:
            self.err.close()
            raise

    def readline(self, timeout):
        """The next stdout line, or None (self.error says why)."""
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not r:
            self.error = f"no answer in {timeout:.0f} s"
            return None
        line = self.proc.stdout.readline()
        if not line:
            self.error = f"exited {self.proc.wait()}: {self.stderr_tail()}"
            return None
        return line.strip()

    def stderr_tail(self):
        try:
            self.err.seek(0)
            return " ".join(self.err.read().split())[-300:]
        except (OSError, ValueError):
            return ""

    def ask(self, cmd):
        """Sends cmd; returns the sample's µs per launch, or None."""
        try:
            self.proc.stdin.write(cmd + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            self.error = f"cannot send '{cmd}': {e}"
            return None
        line = self.readline(SAMPLE_TIMEOUT)
        if line is None:
            return None
        f = line.split()
        if len(f) >= 3 and f[0] == "sample":
            try:
                return float(f[2])
            except ValueError:
                pass
        self.error = f"answered '{line[:200]}' to '{cmd}'"
        return None

    def close(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.err.close()


def run_pair(k, a, configs, order_names):
    """One pair: every configuration started at once, then the samples in turn. Returns
    ({cfg: {api: [us...]}}, error or None)."""
    servers = {}
    for name in order_names:
        argv = configs[name] + shlex.split(a.bin) + ["serve", str(a.warmup)]
        if a.cpus and shutil.which("taskset"):
            argv = ["taskset", "-c", a.cpus] + argv
        try:
            servers[name] = Server(name, argv, os.environ)
        except OSError as e:
            for s in servers.values():
                s.close()
            return None, f"{name}: cannot start {argv[0]}: {e}"
    try:
        for s in servers.values():
            line = s.readline(START_TIMEOUT)
            if line != "ready":
                return None, f"{s.cfg}: {s.error or repr(line)} instead of ready"
        got = {n: {api: [] for api in APIS} for n in servers}
        for rep in range(a.samples):
            shift = k + rep
            apis = APIS[shift % len(APIS):] + APIS[:shift % len(APIS)]
            names = order_names[shift % len(order_names):] + order_names[:shift % len(order_names)]
            for api in apis:
                for n in names:
                    cmd = (f"duty {api} {a.launches} {a.burst}" if a.duty
                           else f"run {api} {a.launches}")
                    us = servers[n].ask(cmd)
                    if us is None:
                        return None, f"{n}: {servers[n].error}"
                    got[n][api].append(us)
        return got, None
    finally:
        for s in servers.values():
            s.close()


def summarize(pairs, baseline, names, tolerance, resamples=2000, confidence=0.95):
    """From the pairs' samples: per (configuration, api) the pairs' ratios to the baseline,
    their median, its bootstrap interval and the verdict. Pure: tests/gpu/selftest.py runs
    it on made-up numbers."""
    out = {}
    for n in names:
        for api in APIS:
            us = [statistics.median(p[n][api]) for p in pairs if p[n][api]]
            r = {"us_median": statistics.median(us) if us else None, "pairs": len(us)}
            if n != baseline:
                ratios = [statistics.median(p[n][api]) / statistics.median(p[baseline][api])
                          for p in pairs if p[n][api] and p[baseline][api]]
                lo, hi = gm.bootstrap_ci(ratios, statistics.median, resamples, confidence)
                r.update({"ratios": ratios, "pairs": len(ratios),
                          "ratio": statistics.median(ratios) if ratios else None,
                          "ci": (lo, hi), "bound": 1.0 + tolerance,
                          # FAIL only when the whole interval lies above the bound.
                          "fail": bool(ratios) and lo > 1.0 + tolerance,
                          "faster": bool(ratios) and hi < 1.0 - tolerance})
            out[(n, api)] = r
    return out


def main(argv):
    p = argparse.ArgumentParser(prog="launch_pairs.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", required=True,
                   help="the server's command (shell words): the launch_overhead binary, or "
                        "e.g. 'python3 bench/torch_small_serve.py'")
    p.add_argument("--apis", default="",
                   help="the sample kinds the server answers, NAME=LABEL,... (default "
                        "runtime and driver: launch_overhead's)")
    p.add_argument("--config", action="append", default=[], metavar="NAME=ARGV",
                   help="a configuration: its name and the command prefix it runs under")
    p.add_argument("--label", action="append", default=[], metavar="NAME=TEXT",
                   help="how a configuration is named in the table")
    p.add_argument("--baseline", default="", help="the configuration the others are divided "
                                                  "by (default: the first)")
    p.add_argument("--pairs", type=int, default=40)
    p.add_argument("--min-pairs", type=int, default=20,
                   help="fewer pairs than this is a FAIL (processes that failed)")
    p.add_argument("--samples", type=int, default=1, help="samples per API in each process")
    p.add_argument("--launches", type=int, default=10000, help="launches per sample")
    p.add_argument("--warmup", type=int, default=5000, help="launches per API before ready")
    p.add_argument("--duty", action="store_true", help="duty-cycled samples (bursts)")
    p.add_argument("--burst", type=int, default=2000)
    p.add_argument("--tolerance", type=float, default=0.02)
    p.add_argument("--resamples", type=int, default=2000)
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--cpus", default="2,3", help="taskset -c for every process ('' for none)")
    p.add_argument("--table", default="")
    p.add_argument("--prefix", default="", help="prefix of the @key names")
    p.add_argument("--title", default="empty-kernel launch")
    p.add_argument("--budget", type=float, default=0,
                   help="seconds: stop starting pairs when the next would not fit")
    a = p.parse_args(argv)
    configs, labels = {}, {}
    for c in a.config:
        name, sep, prefix = c.partition("=")
        if not sep or not name:
            p.error(f'--config: "{c}" is not NAME=ARGV')
        configs[name] = shlex.split(prefix)
    for c in a.label:
        name, _, text = c.partition("=")
        labels[name] = text
    names = list(configs)
    if len(names) < 2:
        p.error("give at least two --config")
    baseline = a.baseline or names[0]
    if baseline not in configs:
        p.error(f"--baseline {baseline}: no such --config")
    global APIS
    if a.apis:
        kinds = [k.partition("=") for k in a.apis.split(",")]
        if any(not k[0] for k in kinds) or len({k[0] for k in kinds}) != len(kinds):
            p.error(f'--apis: "{a.apis}" is not NAME=LABEL,... with distinct names')
        APIS = tuple(k[0] for k in kinds)
        API_LABELS.update({k[0]: k[2] or k[0] for k in kinds})
        API_HEADS.update({k[0]: k[2] or k[0] for k in kinds})
    words = shlex.split(a.bin)
    if not words or (len(words) == 1 and not os.access(words[0], os.X_OK)):
        print(f"@fail {a.bin} is not built")
        return 1

    print(f"launch overhead as interleaved pairs: {a.pairs} pairs of {', '.join(names)} "
          f"(one process each per pair, started together), {a.samples} sample(s) per API and "
          f"process of {a.launches} launches"
          + (f" in bursts of {a.burst}, each followed by an equal sleep" if a.duty else "")
          + f"; ratio to {baseline}; CPUs {a.cpus or 'not pinned'}", flush=True)
    t_start = time.monotonic()
    pairs, errors = [], []
    for k in range(a.pairs):
        if a.budget > 0 and k:
            per = (time.monotonic() - t_start) / k
            if time.monotonic() - t_start + per > a.budget:
                print(f"@note stopped after {k} pairs: the next would not fit the "
                      f"{a.budget:.0f} s budget", flush=True)
                break
        got, err = run_pair(k, a, configs, names)
        if err:
            errors.append(f"pair {k + 1}: {err}")
            print(f"  pair {k + 1}: {err}", flush=True)
            continue
        pairs.append(got)
        if (k + 1) % 10 == 0 or k + 1 == a.pairs:
            print(f"  {k + 1}/{a.pairs} pairs ({time.monotonic() - t_start:.0f} s)", flush=True)
    for e in errors[:5]:
        print(f"@fail {e}")

    res = summarize(pairs, baseline, names, a.tolerance, a.resamples, a.confidence)
    conf = f"{a.confidence:.0%}"
    head = []
    for i, api in enumerate(APIS):
        head.append(f"{API_HEADS.get(api, api)} µs/launch" + (" (median of pairs)" if i == 0
                                                               else ""))
        head.append(f"ratio to {baseline} [{conf} CI]" if i == 0 else f"ratio [{conf} CI]")
    rows = ["| configuration | " + " | ".join(head) + " | pairs |",
            "|---|" + "---|" * (2 * len(APIS) + 1)]
    verdicts = []
    for n in names:
        cells = []
        for api in APIS:
            r = res[(n, api)]
            cells.append(gm_fmt(r["us_median"], ".3f"))
            if n == baseline:
                cells.append("1")
                if r["us_median"] is not None:
                    print(f"@key {a.prefix}{api}_{n}_us {r['us_median']:.4f}")
                continue
            if r["ratio"] is None:
                cells.append("-")
                verdicts.append((False, f"{labels.get(n, n)}, {API_LABELS.get(api, api)}: no pair "
                                        "produced "
                                        "samples"))
                continue
            lo, hi = r["ci"]
            cells.append(f"{r['ratio']:.4f} [{lo:.4f}, {hi:.4f}]")
            print(f"@key {a.prefix}{api}_{n}_ratio {r['ratio']:.4f}")
            print(f"@num {a.prefix}{api}_{n}_ci_low {lo:.4f}")
            print(f"@num {a.prefix}{api}_{n}_ci_high {hi:.4f}")
            print(f"@num {a.prefix}{api}_{n}_us {r['us_median']:.4f}")
            text = (f"{labels.get(n, n)}, {API_LABELS.get(api, api)}: median ratio to {baseline} "
                    f"{r['ratio']:.4f} over {r['pairs']} pairs, {conf} bootstrap CI "
                    f"[{lo:.4f}, {hi:.4f}] ({a.resamples} resamples); bound {r['bound']:.4f}: "
                    + ("the whole interval lies above it" if r["fail"] else
                       "the interval is not wholly above it"))
            if r["faster"]:
                text += f" (the whole interval lies below {1 - a.tolerance:.4f}: faster)"
            verdicts.append((not r["fail"], text))
        count = min(res[(n, api)]["pairs"] for api in APIS)
        rows.append(f"| {labels.get(n, n)} | " + " | ".join(cells) + f" | {count} |")
    table = (f"Host time per {a.title}: {len(pairs)} interleaved pairs (one fresh process "
             f"per configuration each, samples of {a.launches} launches taken in turn); a "
             f"pair's ratio is the median of its samples over the {baseline} process's; cell: "
             f"the median over pairs and its {conf} bootstrap confidence interval. FAIL only "
             f"when the whole interval lies above {1 + a.tolerance:.2f}.\n\n" + "\n".join(rows))
    print(table)
    if a.table:
        with open(a.table, "w") as f:
            f.write(table + "\n")
    print(f"@num {a.prefix}pairs {len(pairs)}")
    print(f"@num {a.prefix}seconds {time.monotonic() - t_start:.1f}")
    if len(pairs) < a.min_pairs:
        verdicts.append((False, f"only {len(pairs)} pairs completed (at least {a.min_pairs})"))
    for good, text in verdicts:
        print(("@ok " if good else "@fail ") + text)
    return 0 if all(g for g, _ in verdicts) and not errors else 1


def gm_fmt(v, spec):
    return "-" if v is None else format(v, spec)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

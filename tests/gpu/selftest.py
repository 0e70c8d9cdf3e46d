"""Self-tests of the GPU suite's own logic, on a machine without a GPU: the verdicts of
report.py on made-up logs, the statistics (percentiles, the bootstrap interval), the
launch-pairs verdict and its orchestration (with a fake launch_overhead server), the
compute-share verdicts, tables and JSON on made-up phases, NVML window means, the
tenant-file reader on a file laid out from tenant_abi.h, and bench/contention.py: its hang
check, summary, goals and tables on made-up rows, and whole runs (generate beside train, a
tenant killed mid-kernel, a survivor that hangs for good) on stand-ins for PyTorch,
transformers, MPS and gpuslice run (tests/gpu/fakes). With --sim it also runs
bench/attach.sh -n 16 against the simulated GPU of a build (--build DIR, default build).

usage: python3 tests/gpu/selftest.py [--sim] [--build DIR]     exit status 0 when all pass
"""
import contextlib
import io
import json
import mmap
import os
import py_compile
import random
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import types

sys.dont_write_bytecode = True  # no __pycache__ in the tree
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BENCH = os.path.join(ROOT, "bench")
sys.path[:0] = [HERE, BENCH]

import gpumeasure as gm  # noqa: E402
import report  # noqa: E402

FAILED = []


def expect(cond, what):
    if not cond:
        FAILED.append(what)
        print(f"  FAIL {what}")
    return cond


def run_test(fn):
    print(f"{fn.__name__}")
    try:
        fn()
    except Exception as e:  # a test that crashes fails, and the others still run
        import traceback
        traceback.print_exc()
        FAILED.append(f"{fn.__name__} raised {type(e).__name__}: {e}")


def captured(fn, *a, **k):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        r = fn(*a, **k)
    return r, buf.getvalue()


# --- report.py -------------------------------------------------------------------------------

def parse_log(text, rc=0, info=False):
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
        f.write(text)
    try:
        return report.parse("x", f.name, rc, 1.0, 60, info=info)
    finally:
        os.unlink(f.name)


def test_report_verdicts():
    cases = [
        ("@ok a\n@key k 1\n", 0, False, "PASS"),
        ("@ok a\n@fail b\n", 1, False, "FAIL"),
        ("@ok a\n", 3, False, "FAIL"),
        ("@ok a\n", 124, False, "FAIL"),
        ("just output\n", 0, False, "FAIL"),                 # asserted nothing
        ("@skip no pid\n", 0, False, "SKIP"),
        ("@ok a\n@known short by 3.9\n", 0, False, "KNOWN"),
        ("@known short\n@fail worse\n", 1, False, "FAIL"),    # a fail wins over known
        ("@known short\n", 0, False, "KNOWN"),
        ("@info it ran\n@num n 1\n", 0, False, "INFO"),      # facts only: informational
        ("@info it ran\n@ok but asserted\n", 0, False, "PASS"),
        ("@ok a\n", 0, True, "INFO"),                          # listed as informational
        ("@num n 1\n@fail a call failed\n", 1, True, "INFO"),  # incomplete, still INFO
        ("", 124, True, "INFO"),
    ]
    for text, rc, info, want in cases:
        r = parse_log(text, rc, info)
        expect(r["result"] == want, f"report: {text!r} rc {rc} info {info} -> {r['result']}, "
                                    f"want {want}")
    r = parse_log("@num n 1\n@fail a call failed\n", 1, True)
    expect(r["reasons"] and r["reasons"][0].startswith("incomplete: "),
           f"an incomplete informational check says so: {r['reasons']}")
    r = parse_log("@ok a\n@known short by 3.9\n")
    expect(r["reasons"] == ["short by 3.9"] and r["known_shortfalls"] == ["short by 3.9"],
           "a KNOWN check lists its shortfalls as reasons")


def test_report_summary_exit():
    def summary(results, strict):
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "results.jsonl"), "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
        with open(os.path.join(d, "env.txt"), "w") as f:
            f.write("gpu: test\n")
        old = os.environ.get("GPU_SUITE_STRICT")
        os.environ["GPU_SUITE_STRICT"] = "1" if strict else "0"
        try:
            rc, out = captured(report.summary, d, "")
        finally:
            if old is None:
                os.environ.pop("GPU_SUITE_STRICT")
            else:
                os.environ["GPU_SUITE_STRICT"] = old
        doc = json.load(open(os.path.join(d, "gpu-results.json")))
        md = open(os.path.join(d, "gpu-summary.md")).read()
        return rc, out, doc, md
    p = parse_log("@ok a\n")
    k = parse_log("@ok a\n@known short\n")
    i = parse_log("@ok a\n", info=True)
    f = parse_log("@fail b\n", 1)
    rc, out, doc, md = summary([p, i], False)
    expect(rc == 0 and doc["informational"] == 1 and doc["passed"] == 1,
           f"PASS + INFO passes the suite ({rc}, {doc['passed']}, {doc['informational']})")
    rc, out, doc, md = summary([p, k, i], False)
    expect(rc == 0 and doc["known_shortfall"] == 1 and "known shortfall, x: short" in out,
           "KNOWN does not fail the suite, and the summary prints it")
    expect("| x | KNOWN |" in md and "| x | INFO |" in md, "the table shows KNOWN and INFO")
    rc, _, _, _ = summary([p, k], True)
    expect(rc == 1, "with GPU_SUITE_STRICT=1 a KNOWN fails the suite")
    rc, _, _, _ = summary([p, i, f], False)
    expect(rc == 1, "a FAIL fails the suite")


# --- statistics --------------------------------------------------------------------------------

def test_statistics():
    expect(gm.percentile([1, 2, 3, 4], 50) == 2.5, "median of 1..4 is 2.5")
    expect(gm.percentile(list(range(101)), 99) == 99, "p99 of 0..100 is 99")
    expect(gm.percentile([], 50) is None, "percentile of nothing is None")
    rng = random.Random(7)
    v = [1.0 + rng.gauss(0, 0.05) for _ in range(40)]
    lo, hi = gm.bootstrap_ci(v)
    m = statistics.median(v)
    expect(lo <= m <= hi and hi - lo < 0.06, f"bootstrap CI [{lo:.4f}, {hi:.4f}] around {m:.4f}")
    expect(gm.bootstrap_ci(v) == (lo, hi), "the bootstrap interval is deterministic")
    hits = 0
    for k in range(60):  # coverage of the true median 1.0
        r = random.Random(100 + k)
        w = [1.0 + r.gauss(0, 0.05) for _ in range(40)]
        a, b = gm.bootstrap_ci(w, resamples=500, seed=k)
        hits += a <= 1.0 <= b
    expect(hits >= 50, f"a 95% interval covered the true median {hits}/60 times")
    s = gm.Series()
    for t in range(11):
        s.add(float(t), 5.0 * t)
    expect(abs(s.rate(2.5, 7.5) - 5.0) < 1e-9, "Series.rate is the slope")
    expect(s.rate(-1, 3) is None and s.rate(3, 11) is None, "Series.rate outside: None")
    s.t.append(11.0)  # another thread between its two appends
    expect(abs(s.rate(1, 10) - 5.0) < 1e-9, "Series reads only complete readings")


# --- launch pairs ------------------------------------------------------------------------------

def fake_pairs(n, ratio, noise, seed=1, outliers=0):
    rng = random.Random(seed)
    pairs = []
    for k in range(n):
        base = 4.0 * (1 + rng.gauss(0, 0.04))  # the machine drifts between pairs
        p = {"native": {}, "preload": {}}
        for api in ("runtime", "driver"):
            p["native"][api] = [base * (1 + rng.gauss(0, noise)) for _ in range(2)]
            r = ratio * (1.096 if k < outliers else 1.0)
            p["preload"][api] = [base * r * (1 + rng.gauss(0, noise)) for _ in range(2)]
        pairs.append(p)
    return pairs


def test_launch_pairs_summary():
    import launch_pairs as lp
    res = lp.summarize(fake_pairs(40, 1.0, 0.04), "native", ["native", "preload"], 0.02)
    r = res[("preload", "runtime")]
    expect(not r["fail"] and r["pairs"] == 40 and r["ci"][0] <= 1.0 + 0.02,
           f"no overhead, 4% noise: not a FAIL (ratio {r['ratio']:.4f}, CI {r['ci']})")
    res = lp.summarize(fake_pairs(40, 1.10, 0.01), "native", ["native", "preload"], 0.02)
    r = res[("preload", "driver")]
    expect(r["fail"] and r["ci"][0] > 1.02, f"10% overhead: a FAIL (CI {r['ci']})")
    res = lp.summarize(fake_pairs(40, 1.0, 0.01, outliers=6), "native", ["native", "preload"],
                       0.02)
    r = res[("preload", "runtime")]
    expect(not r["fail"], f"6 of 40 pairs at 1.096: the median is not moved ({r['ratio']:.4f})")
    res = lp.summarize(fake_pairs(40, 0.95, 0.005), "native", ["native", "preload"], 0.02)
    expect(res[("preload", "runtime")]["faster"] and not res[("preload", "runtime")]["fail"],
           "5% faster: noted as faster, not a FAIL")


FAKE_SERVER = r'''
import os, sys
us = float(os.environ.get("FAKE_US", "4.0"))
if os.environ.get("FAKE_DIE"):
    sys.exit(3)
print("ready", flush=True)
for line in sys.stdin:
    f = line.split()
    if not f or f[0] == "quit":
        break
    if f[0] == "run":
        print(f"sample {f[1]} {us:.4f}", flush=True)
    elif f[0] == "duty":
        print(f"sample {f[1]} {us:.4f} 8.000", flush=True)
'''


def test_launch_pairs_end_to_end():
    import launch_pairs as lp
    d = tempfile.mkdtemp()
    fake = os.path.join(d, "launch_overhead")
    with open(fake, "w") as f:
        f.write(f"#!{sys.executable}\n{FAKE_SERVER}")
    os.chmod(fake, 0o755)
    table = os.path.join(d, "t.md")
    rc, out = captured(lp.main, ["--bin", fake, "--pairs", "6", "--min-pairs", "5",
                                 "--cpus", "", "--table", table, "--config", "native=env FAKE_US=4.0",
                                 "--config", "same=env FAKE_US=4.02",
                                 "--config", "slow=env FAKE_US=4.6"])
    expect(rc == 1, f"a 15% slower configuration fails the run (exit {rc})")
    expect("@ok same, runtime API" in out and "@fail slow, driver API" in out,
           "the equal one passes, the slow one fails, per API")
    expect("@key runtime_slow_ratio 1.1500" in out, "the slow ratio is 1.15")
    expect(os.path.exists(table) and "| slow |" in open(table).read(), "the table is written")
    rc, out = captured(lp.main, ["--bin", fake, "--pairs", "3", "--min-pairs", "3", "--cpus", "",
                                 "--duty", "--tolerance", "0.05", "--config", "native=",
                                 "--config", "x=env FAKE_US=4.1"])
    expect(rc == 0 and "@ok x, runtime API" in out, f"duty mode runs (exit {rc})")
    rc, out = captured(lp.main, ["--bin", fake, "--pairs", "3", "--min-pairs", "3", "--cpus", "",
                                 "--config", "native=", "--config", "dies=env FAKE_DIE=1"])
    expect(rc == 1 and "@fail pair 1: dies:" in out and "only 0 pairs" in out,
           "a configuration that cannot start fails the run, naming it")
    # Another server (bench/torch_small_serve.py's kinds), given as a command of several words.
    rc, out = captured(lp.main, ["--bin", f"{sys.executable} {fake}", "--pairs", "3",
                                 "--min-pairs", "3", "--cpus", "", "--apis",
                                 "small=64K-element ops,tiny=1K-element ops", "--table", table,
                                 "--config", "native=", "--config", "run=env FAKE_US=4.01"])
    expect(rc == 0 and "@ok run, 64K-element ops" in out and "@ok run, 1K-element ops" in out
           and "@key small_run_ratio" in out and "runtime" not in out.split("Host time")[1],
           f"--apis names the sample kinds (exit {rc}):\n{out[-600:]}")
    expect("| 64K-element ops µs/launch (median of pairs) |" in open(table).read(),
           "the table's columns are the kinds'")
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            captured(lp.main, ["--bin", fake, "--apis", "a=x,a=y", "--config", "n=",
                               "--config", "m="])
        rc = 0
    except SystemExit as e:
        rc = e.code
    expect(rc == 2, "--apis with a name twice is refused")
    lp.APIS = ("runtime", "driver")


# --- compute share -----------------------------------------------------------------------------

def test_compute_verdicts():
    import compute_share as cs
    j = cs.judge_time_share
    kind, text, _ = j("gemm", 50, [50.4], [49.6], 2.0)
    expect(kind == "ok", f"50.4/49.6 at 50: ok ({text})")
    kind, _, _ = j("gemm", 90, [86.5], [90.2], 2.0)
    expect(kind == "fail", "86.5 vs 90.2 at 90: the two disagree -> fail")
    kind, _, _ = j("gemm", 50, [53.0], [53.5], 2.0)
    expect(kind == "fail", "53/53.5 at 50: over the ceiling -> fail")
    kind, _, _ = j("gemm", 50, [46.1], [46.5], 2.0)
    expect(kind == "fail", "a saturating workload 4 points under its ceiling fails")
    kind, _, _ = j("gemm", 50, [50.0], [None], 2.0)
    expect(kind == "fail", "no NVML figure -> fail")
    busy = lambda a, b: 90.0 if b < 10.3 else 20.0  # noqa: E731
    dl = cs.settle_delay(busy, 10.0, 13.0, 20, 0.2, 5.0)
    expect(dl is not None and 0.25 < dl < 0.6, f"settle delay {dl}")
    expect(cs.settle_delay(busy, 10.0, 13.0, 50, 0.2, 5.0) is None, "never at 50 -> None")


def test_compute_host_bound_verdicts():
    """judge_host_bound: a host-bound workload judged against itself native."""
    import compute_share as cs

    def h(c, busy, nvml, native, ratio, tol=2.0, under=1.0, min_rate=0.97):
        return cs.judge_host_bound("small", c, busy, nvml, native, ratio, tol, under, min_rate)
    expect(cs.regime(75, 23.0, 2.0) == "under" and cs.regime(15, 23.0, 2.0) == "over"
           and cs.regime(24, 23.0, 2.0) == "between" and cs.regime(21, 23.0, 2.0) == "over",
           "regimes around a native share of 23 %")
    # under its ceiling: not throttled
    kind, text, n = h(75, [23.3, 22.9, 23.1], [23.2, 22.8, 23.0], [23.0, 23.1, 22.9],
                      [0.99, 1.01, 1.00])
    expect(kind == "ok" and n["regime"] == "under", f"small at 75, as native: ok ({text})")
    expect("@known" not in text and "KNOWN" not in text, "no known shortfall in the text")
    kind, text, n = h(75, [20.8, 20.6, 20.9], [20.7, 20.6, 20.8], [23.0, 22.9, 23.1],
                      [0.90, 0.90, 0.91])
    expect(kind == "fail" and n["rate_hi"] < 0.97,
           f"under its ceiling, throttled to 90 % of its native rate: fail ({text})")
    kind, _, n = h(90, [21.6, 21.4, 21.5], [21.6, 21.5, 21.4], [23.0, 23.0, 23.0],
                   [0.99, 0.99, 0.99])
    expect(kind == "fail" and abs(n["nvml_minus_native"] + 1.5) < 1e-9,
           "NVML 1.5 points under native while under its ceiling: fail")
    kind, _, _ = h(90, [22.5, 22.3, 22.4], [22.4, 22.3, 22.5], [23.0, 23.0, 23.0],
                   [0.985, 0.99, 0.98])
    expect(kind == "ok", "NVML 0.6 points under native, the rate 0.985: ok")
    kind, _, n = h(90, [23.0] * 3, [23.0] * 3, [23.0] * 3, [0.90, 1.00, 1.01])
    expect(kind == "ok" and n["rate_lo"] < 0.97 <= n["rate_hi"],
           f"a mean of {n['rate_ratio']:.3f} whose interval reaches 0.97: ok (not shown slower)")
    kind, _, n = h(90, [23.0] * 3, [23.0] * 3, [23.0] * 3, [0.95, 0.951, 0.949])
    expect(kind == "fail", "0.95 of native with a tight interval: fail")
    kind, _, _ = h(90, [23.0], [23.0], [23.0], [0.965])
    expect(kind == "fail", "one repeat: its ratio is its interval (0.965 < 0.97: fail)")
    kind, _, _ = h(90, [27.5, 27.4, 27.6], [23.0] * 3, [23.0] * 3, [1.0] * 3)
    expect(kind == "fail", "gpuslice's count 4.5 points over NVML under its ceiling: fail")
    kind, text, n = h(100, [23.1] * 3, [23.0] * 3, [23.1] * 3, [0.995, 1.0, 0.99])
    expect(kind == "ok" and n["regime"] == "under" and "armed, no budget" in text,
           "the 100 row: armed, not binding, against native: ok")
    kind, _, _ = h(100, [21.0] * 3, [21.0] * 3, [23.1] * 3, [0.91, 0.9, 0.92])
    expect(kind == "fail", "the 100 row 9 % slower than native: fail")
    # over its ceiling: held at it
    kind, text, n = h(15, [15.2, 14.9, 15.1], [15.3, 14.6, 15.0], [23.0, 23.2, 22.8],
                      [0.66, 0.65, 0.65])
    expect(kind == "ok" and n["regime"] == "over" and n["expected"] == 15,
           f"small at 15 (native 23): held at 15: ok ({text})")
    kind, _, _ = h(15, [15.1] * 3, [18.0] * 3, [23.0] * 3, [0.78] * 3)
    expect(kind == "fail", "over its ceiling, NVML at c+3: fail")
    kind, _, _ = h(15, [18.0] * 3, [15.1] * 3, [23.0] * 3, [0.66] * 3)
    expect(kind == "fail", "over its ceiling, gpuslice's count at c+3: fail")
    kind, _, _ = h(50, [47.5] * 3, [47.6] * 3, [56.0] * 3, [0.85] * 3)
    expect(kind == "fail", "cuda-small at 50 (native 56) held 2.5 under: fail")
    kind, _, _ = h(50, [49.5] * 3, [50.4] * 3, [56.0] * 3, [0.9] * 3)
    expect(kind == "ok", "cuda-small at 50 (native 56) held at 50: ok")
    # in between: min(native, c)
    kind, _, n = h(24, [23.4] * 3, [22.9] * 3, [23.5] * 3, [0.98] * 3)
    expect(kind == "ok" and n["regime"] == "between" and abs(n["expected"] - 23.5) < 1e-9,
           "24 against a native 23.5: held at 23.5: ok")
    kind, _, _ = h(24, [20.0] * 3, [20.5] * 3, [23.5] * 3, [0.87] * 3)
    expect(kind == "fail", "24 against a native 23.5, held at 20.5: fail")
    # missing figures
    kind, text, _ = h(75, [23.0], [None], [23.0], [1.0])
    expect(kind == "fail" and "no figure from NVML" in text, "no NVML figure: fail")
    kind, text, _ = h(75, [23.0], [23.0], [None], [1.0])
    expect(kind == "fail", "no native NVML figure: fail")
    kind, text, _ = h(75, [None], [23.0], [23.0], [1.0])
    expect(kind == "fail" and "gpuslice" in text, "no gpuslice figure: fail")
    kind, text, _ = h(75, [23.0], [23.0], [23.0], [None])
    expect(kind == "fail" and "the rate" in text, "no rate: fail")
    m, lo, hi = cs.ratio_interval([0.98, 1.0, 1.02])
    expect(abs(m - 1.0) < 1e-12 and abs(hi - m - 2 * gm.sem([0.98, 1.0, 1.02])) < 1e-12
           and lo < m < hi, "the interval is the mean ± 2 standard errors")


def fake_driver(only):
    import compute_share as cs
    a = cs.build_parser().parse_args(["--only", only, "--no-gpu-samples", "--cpus", "none",
                                      "--repeats", "2", "--interleave"])
    a.warmup_seconds = 0.0
    d = cs.Driver(a)
    d.sections = [only]
    d.pair_ceilings, d.set_steps, d.set_first_judged = [30, 70], [90, 20, 80], 1
    d.nvml.method = "samples"
    return cs, d


def fake_util(d, t0, t1, fn, period=1 / 6):
    t = t0
    while t + period <= t1:
        d.nvml.util.append((t, t + period, fn(t + period / 2)))
        t += period
    d.nvml.sample_period = period


def fake_share_phases(d, wl, native_util, held, rate_of, busy_of, reps=2):
    """Interleaved phases of a host-bound workload: uncapped at native_util (% of the device)
    and each ceiling c at held(c) %, with rate_of(c) of the native rate and gpuslice's count
    busy_of(c); NVML's utilisation is given in each phase's gpu."""
    phases, t = [], 100.0
    for rep in range(reps):
        for c in d.ceilings[wl]:
            for label, util, ratio, busy in (("none", native_util, 1.0, None),
                                             (str(c), held(c), rate_of(c), busy_of(c))):
                phases.append({"repeat": rep, "label": label, "rate": 1e5 * ratio,
                               "window_s": 1.0, "chunks": 100, "set_ms": 1.5,
                               "window": (t, t + 1.0),
                               "gpu": {"sm_mhz": 1980.0, "power_w": 130.0,
                                       "util": {"pct": util}},
                               "busy_pct": busy})
                t += 1.5
    phases.append(dict(phases[0], label="none-end", repeat=reps))
    d.share[wl] = {"calib": {"units": 1000, "chunk_ms": 8.0, "kernels_per_unit": 1},
                   "phases": phases, "error": None}


def test_compute_driver_tables():
    cs, d = fake_driver("small")
    expect(d.ceilings["small"] == [100, 90, 75, 50, 15] and d.ceilings["cuda-small"] ==
           [100, 90, 75, 50, 25] and d.ceilings["gemm"] == [25, 50, 75],
           f"default ceilings per workload: {d.ceilings}")
    native = 23.0
    held = lambda c: min(native, c)  # noqa: E731
    fake_share_phases(d, "small", native, held, lambda c: min(1.0, c / native),
                      lambda c: held(c) + 0.2)
    _, out = captured(d.judge_share, "small")
    expect(out.count("@ok ") == 5 and "@fail" not in out and "@known" not in out,
           f"5 ceilings pass, nothing known:\n{out[:1500]}")
    expect("@key small_75_rate_vs_native 1" in out and "@key small_worst_err_pts 0.2" in out,
           "the rate vs native and the worst error of the held ceilings are keys")
    md = d.markdown()
    expect("| 15% | 15% |" in md and "| 100% (armed, no budget) | native (not throttled) |"
           in md and "100.0% [100.0, 100.0]" in md and "KNOWN" not in md,
           f"the per-workload table:\n{md[:2500]}")
    doc = json.loads(json.dumps(d.as_json(), default=str))
    v = doc["share"]["small"]["verdicts"]
    expect(v["15"]["regime"] == "over" and v["75"]["regime"] == "under"
           and v["75"]["kind"] == "ok", "verdicts in the JSON")
    svg = os.path.join(tempfile.mkdtemp(), "p.svg")
    pics = cs.picture(doc["share"], svg)
    expect(pics and pics[0] == svg and "<polyline" in open(svg).read()
           and "small: rate, % of native" in open(svg).read(), f"the picture ({pics})")
    # throttled under its ceiling at 75 and 90; over its ceiling at 15 by 3 points
    cs, d = fake_driver("small")
    rate = {100: 1.0, 90: 0.9, 75: 0.9, 50: 1.0, 15: 18 / native}
    fake_share_phases(d, "small", native, lambda c: 18.0 if c == 15 else native * rate[c],
                      lambda c: rate[c], lambda c: 18.0 if c == 15 else native * rate[c])
    _, out = captured(d.judge_share, "small")
    expect(out.count("@fail small at --compute 90") == 1 and
           out.count("@fail small at --compute 75") == 1 and
           out.count("@fail small at --compute 15") == 1 and out.count("@ok ") == 2,
           f"throttled under its ceiling and over it at c+3 fail:\n{out[:2000]}")
    expect("**FAIL**" in d.markdown(), "the table marks them")


def test_compute_driver_pair_and_set():
    cs, d = fake_driver("pair")
    fake_util(d, 0, 40, lambda t: 98.0)
    for pid, v in ((111, 30.5), (222, 69.0)):
        d.nvml.proc[pid] = [(10 + k / 6, v) for k in range(60)]
    d.pair = {"alone": 570.0, "error": None, "window": (11.0, 17.0),
              "alone_gpu": {"sm_mhz": 1410.0, "power_w": 690.0},
              "pair_gpu": {"sm_mhz": 1430.0, "power_w": 680.0},
              "tenants": [{"ceiling": 30, "rate": 168.0, "chunks": 100, "error": None, "pid": 111,
                           "busy_pct": 30.2, "busy_why": "", "nvml": d.nvml.proc_mean(111, 11, 17)},
                          {"ceiling": 70, "rate": 395.0, "chunks": 100, "error": None, "pid": 222,
                           "busy_pct": 69.6, "busy_why": "", "nvml": d.nvml.proc_mean(222, 11, 17)}]}
    _, out = captured(d.judge_pair)
    expect(out.count("@ok") == 4 and "@fail" not in out, f"the pair passes:\n{out}")
    d.markdown()
    cs, d = fake_driver("set")
    tr = cs.Trace()
    for k in range(1, 1200):
        tr.add(k * 0.01, k * 5.0)
    levels = [(0, 2.0, 100), (2.0, 5.0, 90), (5.0, 8.0, 20), (8.0, 12.0, 80)]
    s = gm.Series()
    w = 0.0
    for k in range(0, 1200):
        x = k * 0.01
        lvl = next(v for a, b, v in levels if a <= x < b)
        s.add(x, w)
        w += lvl / 100 * 0.01 * 1e9
    d.busy.series["set"] = s
    fake_util(d, 0, 12, lambda x: next(v for a, b, v in levels if a <= x < b))
    d.set = {"name": "bench-set-1", "error": None, "alone": None, "trace": tr,
             "alone_window": (0.3, 2.0), "t_end": 11.0,
             "events": [{"target": 90, "t_set": 2.0, "set_ms": 2.0, "rc": 0, "msg": ""},
                        {"target": 20, "t_set": 5.0, "set_ms": 2.0, "rc": 0, "msg": ""},
                        {"target": 80, "t_set": 8.0, "set_ms": 2.0, "rc": 0, "msg": ""}]}
    _, out = captured(d.judge_set)
    expect(out.count("@ok") == 4 and "@fail" not in out, f"set passes:\n{out}")
    md = d.markdown()
    expect("| 90 → 20 |" in md, "the set table has the change")
    json.dumps(d.as_json(), default=str)


def test_nvml_window_means():
    s = gm.NvmlSampler(enabled=False)
    s.method = "samples"
    t = 0.0
    while t < 10:
        s.util.append((t, t + 1 / 6, 50.0 if t < 5 else 90.0))
        t += 1 / 6
    u = s.util_mean(1.0, 4.0)
    expect(u and abs(u["pct"] - 50.0) < 1e-9 and u["coverage"] > 0.9, f"inside mean {u}")
    u = s.util_mean(5.2, 6.2)
    expect(u and abs(u["pct"] - 90.0) < 1e-9 and u["method"].endswith("inside"), f"{u}")
    s.util = [(0.0, 1.0, 40.0), (1.0, 2.0, 60.0)]  # periods longer than the window
    u = s.util_mean(0.5, 1.5)
    expect(u and abs(u["pct"] - 50.0) < 1e-9 and u["method"].endswith("overlap"), f"{u}")
    expect(s.util_mean(5, 6) is None, "no samples: None")
    s.proc = {7: [(1.0 + k / 6, 30.0) for k in range(30)]}
    s.sample_period = 1 / 6
    p = s.proc_mean(7, 2.0, 5.0)
    expect(p and abs(p["pct"] - 30.0) < 1e-9 and p["samples"] >= 15, f"proc mean {p}")
    expect(s.proc_mean(8, 2.0, 5.0) is None, "an unknown pid: None")


# --- the tenant file ---------------------------------------------------------------------------

def fabricate_tenant(path, name, entries, procs):
    abi = gm._abi()
    buf = bytearray(abi["size"])
    struct.pack_into("<QII", buf, 0, abi["magic"], abi["version"], abi["size"])
    off, n = abi["name"]
    buf[off:off + len(name)] = name.encode()
    df = abi["dev_fields"]
    for i, (ordinal, used, busy) in enumerate(entries):
        o = abi["dev_off"] + i * abi["dev_size"]
        buf[o:o + 16] = bytes(range(1, 17))
        struct.pack_into("<Q", buf, o + df["mem_used"][0], used)
        struct.pack_into("<i", buf, o + df["ordinal"][0], ordinal)
        struct.pack_into("<Q", buf, o + df["compute_busy_ns"][0], busy)
    pf = abi["proc_fields"]
    for k, (pid, used) in enumerate(procs):
        o = abi["proc_off"] + k * 3 * abi["proc_size"]
        struct.pack_into("<i", buf, o + pf["pid"][0], pid)
        struct.pack_into("<Q", buf, o + pf["mem_used"][0], used)
    with open(path, "wb") as f:
        f.write(buf)
    return abi


def test_tenant_file():
    d = tempfile.mkdtemp()
    path = os.path.join(d, "gpuslice-0-1-a.tenant")
    abi = fabricate_tenant(path, "bench-x", [(0, 3 << 20, 0)], [(100, 1 << 20), (101, 2 << 20)])
    t = gm.TenantFile(path)
    expect(t.name() == "bench-x", f"name {t.name()}")
    e = t.entry_for(0)
    expect(e == 0 and t.mem_used(e) == 3 << 20, "entry and mem_used")
    expect([(p, u) for p, _, u in t.procs(e)] == [(100, 1 << 20), (101, 2 << 20)],
           f"process records {t.procs(e)}")
    expect(gm.find_tenant("bench-x", d) == path, "find_tenant by name")
    t.close()
    # A later minor version (the high 16 bits), its file larger: read.
    with open(path, "r+b") as f:
        f.seek(8)
        f.write(struct.pack("<II", abi["version"] | 3 << 16, abi["size"] + 64))
        f.seek(0, 2)
        f.write(bytes(64))
    t = gm.TenantFile(path)
    expect(t.name() == "bench-x", "a later minor version is read")
    t.close()
    with open(path, "r+b") as f:
        f.seek(8)
        f.write(struct.pack("<I", abi["version"] + 1))
    try:
        gm.TenantFile(path)
        expect(False, "a file of another major ABI version is refused")
    except ValueError as e:
        major, minor = abi["version"] & 0xFFFF, abi["version"] >> 16
        expect(f"tenant ABI {major + 1}.{minor}" in str(e), f"the message names its version: {e}")
    fabricate_tenant(path, "bench-y", [(0, 0, 0)], [])
    bs = gm.BusySampler(period=0.002)
    expect(bs.add("k", path), f"BusySampler opens the file {bs.errors}")
    off = abi["dev_off"] + abi["dev_fields"]["compute_busy_ns"][0]
    with open(path, "r+b") as f:
        m = mmap.mmap(f.fileno(), abi["size"])
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.6:  # a tenant busy 40% of the time
            struct.pack_into("<Q", m, off, int(0.4 * (time.monotonic() - t0) * 1e9))
            time.sleep(0.001)
        m.close()
    pct = bs.pct("k", t0 + 0.1, t0 + 0.5)
    bs.stop()
    expect(pct is not None and abs(pct - 40.0) < 3.0, f"busy share {pct}")


def test_real_tenant_file(build):
    """A tenant file made by the real `gpuslice run` of a build (if there is one)."""
    gs = os.path.join(build, "bin", "gpuslice")
    if not os.access(gs, os.X_OK):
        print(f"  (no {gs}: skipped)")
        return
    d = tempfile.mkdtemp()
    env = dict(gm.scrubbed_env(), GPUSLICE_RUN_DIR=d)
    r = subprocess.run([gs, "run", "-q", "--name", "selftest", "--", sys.executable, "-c",
                        "import os, sys; sys.path.insert(0, sys.argv[1]); import gpumeasure as gm; "
                        "t = gm.TenantFile(os.environ['GPUSLICE_TENANT']); print(t.name())", BENCH],
                       capture_output=True, text=True, env=env, timeout=60)
    expect(r.returncode == 0 and r.stdout.strip() == "selftest",
           f"the reader opens a tenant file gpuslice made ({r.returncode}: {r.stdout.strip()} "
           f"{r.stderr.strip()[-300:]}); a mismatch means the build and tenant_abi.h differ")


def test_attach_sim(build):
    sim = os.path.join(build, "lib", "sim")
    if not os.path.exists(os.path.join(sim, "libcuda.so.1")):
        print(f"  (no simulator in {sim}: skipped)")
        return
    d = tempfile.mkdtemp()
    gb = os.path.join(d, "build")
    os.makedirs(os.path.join(gb, "gpu"))
    for sub in ("bin", "lib"):
        os.symlink(os.path.join(os.path.abspath(build), sub), os.path.join(gb, sub))
    env = dict(gm.scrubbed_env(), GPU_BUILD_DIR=gb, LD_LIBRARY_PATH=sim,
               GPUSLICE_SIM_STATE=os.path.join(d, "sim"), GPUSLICE_SIM_MEMORY="8G",
               GPUSLICE_RUN_DIR=d)
    r = subprocess.run([os.path.join(BENCH, "attach.sh"), "-n", "16", "--native"],
                       capture_output=True, text=True, env=env, timeout=300)
    print("\n".join("  " + x for x in r.stdout.splitlines()[-6:]))
    expect(r.returncode == 0 and r.stdout.count("@ok") == 3,
           f"attach.sh -n 16 on the simulator passes (exit {r.returncode})")


def test_samplers_sim(build):
    """gpuslice's busy count (read from the tenant file) and NVML's utilisation (the
    simulator's, polled) over the same window of a real governed load on the simulated GPU."""
    sim = os.path.join(build, "lib", "sim")
    load = os.path.join(build, "tests", "compute_load")
    gs = os.path.join(build, "bin", "gpuslice")
    if not all(os.path.exists(x) for x in (os.path.join(sim, "libcuda.so.1"), load, gs)):
        print(f"  (no simulator, compute_load or gpuslice in {build}: skipped)")
        return
    d = tempfile.mkdtemp()
    env = dict(gm.scrubbed_env(), LD_LIBRARY_PATH=sim, GPUSLICE_SIM_STATE=os.path.join(d, "sim"),
               GPUSLICE_RUN_DIR=d)
    old = {k: os.environ.get(k) for k in ("LD_LIBRARY_PATH", "GPUSLICE_SIM_STATE")}
    os.environ.update(LD_LIBRARY_PATH=sim, GPUSLICE_SIM_STATE=env["GPUSLICE_SIM_STATE"])
    try:
        nv = gm.NvmlSampler(polled_period=1.0, lib=os.path.join(sim, "libnvidia-ml.so.1"))
        # The simulator has nvmlDeviceGetSamples, as the real NVML: its samples are used.
        expect(nv.error is None and nv.method == "samples", f"NVML sampler on the simulator "
                                                           f"({nv.error}, {nv.method})")
        bs = gm.BusySampler()
        t0 = time.monotonic()
        p = subprocess.Popen([gs, "run", "-q", "--name", "selftest-busy", "--compute", "30", "--",
                              load, "stream", "3.5", "1000"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        path = None
        while path is None and time.monotonic() - t0 < 10:
            path = gm.find_tenant("selftest-busy", d)
            time.sleep(0.01)
        expect(path is not None and bs.add("t", path), f"the tenant file appears ({path})")
        out = p.communicate(timeout=60)[0]
        a, b = t0 + 1.2, t0 + 3.0
        busy, util = bs.pct("t", a, b), nv.util_mean(a, b)
        bs.stop()
        nv.stop()
        print(f"  compute_load: {out.strip()[-120:]}; gpuslice busy {busy}, NVML {util}")
        expect(busy is not None and abs(busy - 30) <= 3, f"gpuslice's busy share {busy} ~ 30")
        expect(util is not None and abs(util["pct"] - 30) <= 3, f"NVML's utilisation {util} ~ 30")
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


FAKE_SMALL = r'''
import os, subprocess, sys, time
args = sys.argv[1:]
val = lambda k, d: args[args.index(k) + 1] if k in args else d
settle, secs, tail = (float(val(k, "0.1")) for k in ("--settle", "--phase-seconds", "--tail"))
ceil = val("--ceilings", "50").split(",")
print("tenant", os.getpid(), os.environ.get("GPUSLICE_TENANT", "-"), flush=True)
import ctypes  # a context, so that the tenant has a device entry (the real one launches)
cu, ctx, dev = ctypes.CDLL("libcuda.so.1"), ctypes.c_void_p(), ctypes.c_int()
cu.cuInit(0), cu.cuDeviceGet(ctypes.byref(dev), 0)
cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), cu.cuCtxSetCurrent(ctx)
print("calib cuda-small 100 8.000 1", flush=True)
plan = [("none", "none")] + [(c, c) for c in ceil] + [("none-end", "none")]
for rep, (label, value) in enumerate(plan):
    t0 = time.monotonic()
    r = subprocess.run([os.environ["GPUSLICE_BIN"], "set", os.environ["GPUSLICE_TENANT"],
                        "--compute", value], capture_output=True, text=True)
    if r.returncode:
        print("error gpuslice set:", r.stderr.strip(), flush=True)
        sys.exit(1)
    ms = (time.monotonic() - t0) * 1e3
    a = time.monotonic() + settle
    time.sleep(settle + secs + tail)
    print(f"phase cuda-small {min(rep, 1) if label != 'none-end' else 1} {label} "
          f"{1e5 if value == 'none' else 1e5 * int(value) / 100:.6g} {secs:.4f} 10 {ms:.2f} "
          f"{a:.6f} {a + secs:.6f}", flush=True)
print("done cuda-small", flush=True)
'''


def test_compute_share_sim(build):
    """compute_share.py's driver end to end on the simulated GPU, with a fake compute_small
    (no CUDA runtime there) under the real `gpuslice run` and `gpuslice set`: no crash, a
    table, a picture, a verdict line per ceiling (a FAIL: the fake slows down under a ceiling
    it is under)."""
    sim = os.path.join(build, "lib", "sim")
    gs = os.path.join(build, "bin", "gpuslice")
    if not (os.path.exists(os.path.join(sim, "libcuda.so.1")) and os.access(gs, os.X_OK)):
        print(f"  (no simulator or gpuslice in {build}: skipped)")
        return
    d = tempfile.mkdtemp()
    fake = os.path.join(d, "compute_small")
    with open(fake, "w") as f:
        f.write(f"#!{sys.executable}\n{FAKE_SMALL}")
    os.chmod(fake, 0o755)
    env = dict(gm.scrubbed_env(), LD_LIBRARY_PATH=sim, GPUSLICE_SIM_STATE=os.path.join(d, "sim"),
               GPUSLICE_RUN_DIR=d)
    table = os.path.join(d, "t.md")
    r = subprocess.run([sys.executable, os.path.join(BENCH, "compute_share.py"), "--gpuslice", gs,
                        "--compute-small", fake, "--only", "cuda-small", "--repeats", "1",
                        "--ceilings-cuda-small", "50", "--phase-seconds", "1.2", "--settle", "0.05",
                        "--tail", "0.05", "--cpus", "none", "--table", table],
                       capture_output=True, text=True, env=env, timeout=120)
    out = r.stdout + r.stderr
    expect("Traceback" not in out, f"no exception:\n{out[-2000:]}")
    # The fake holds nothing (NVML: 0 %, so 50 % is a ceiling it is under) and runs at half its
    # uncapped rate under it: throttled under its ceiling, a FAIL.
    expect(r.returncode == 1 and "@fail cuda-small at --compute 50 (native 0.00%" in out
           and "@known" not in out, f"a FAIL for a workload slowed under its ceiling (exit "
           f"{r.returncode}):\n"
           + "\n".join(x for x in out.splitlines() if x.startswith("@"))[-1500:])
    expect(os.path.exists(table) and os.path.exists(table[:-3] + ".json"), "table and JSON")
    expect(os.path.exists(table[:-3] + ".svg"), "the picture")


# --- contention.py ---------------------------------------------------------------------------

def test_contention_hang_check():
    import contention as ct
    marks = [(float(t) / 100, t) for t in range(0, 500)]  # 100 marks a second up to 4.99 s
    h = ct.hang_check(marks, died=2.0, cut=5.0)
    expect(not h["hung"] and h["resumed"] and h["stall_s"] < 0.02,
           f"steady progress after the death is no hang: {h}")
    slow = [(t / 100, t) for t in range(200)] + [(2.0 + k * 0.5, 200 + k) for k in range(1, 7)]
    h = ct.hang_check(slow, died=2.0, cut=5.0)
    expect(not h["hung"] and abs(h["stall_s"] - 0.51) < 1e-9,  # from the mark at 1.99 s
           f"progress every 0.5 s after the death is a slowdown, not a hang: {h}")
    gap = [(t / 100, t) for t in range(200)] + [(5.0 + t / 100, 200 + t) for t in range(100)]
    h = ct.hang_check(gap, died=2.0, cut=6.0)
    expect(h["hung"] and h["resumed"] and abs(h["stall_s"] - 3.01) < 1e-9
           and abs(h["stall_to"] - 3.0) < 1e-9,
           f"3 s without progress, then progress again, is a hang that ended: {h}")
    stuck = [(t / 100, t) for t in range(200)]
    h = ct.hang_check(stuck, died=2.0, cut=20.0)
    expect(h["hung"] and not h["resumed"] and h["stall_to"] is None
           and abs(h["stall_s"] - 18.01) < 1e-9,
           f"no progress until the survivor was killed is a hang never resumed: {h}")
    h = ct.hang_check(stuck[:150], died=2.0, cut=3.0)
    expect(not h["hung"] and abs(h["stall_s"] - 1.51) < 1e-9,
           f"1.5 s without progress up to the cut is under the 2 s of a hang: {h}")
    expect(ct.read_trace("1.5 4\n1.6 8\n1.7") == [(1.5, 4), (1.6, 8)],
           "a trace's last line, cut by SIGKILL, is left out")
    expect(ct.token_times(10.0, [10.5, 10.6, 10.8]) == [0.5, 0.09999999999999964,
                                                        0.20000000000000107],
           "token times: the first from the start, then from the token before")


def test_contention_summary_goals():
    import contention as ct
    rows = []
    for rep in range(2):
        rows += [{"config": "solo-latency", "repeat": rep, "p50_ms": 160.0, "p99_ms": 230.0,
                  "token_p50_ms": 5.0, "token_p99_ms": 7.0, "busy": 0.5, "late": 0,
                  "served": 13, "requests": 13},
                 {"config": "solo-background", "repeat": rep, "bg_rate": 10.0},
                 {"config": "time-sliced", "repeat": rep, "p50_ms": 247.0, "p99_ms": 275.0,
                  "busy": 0.8, "late": 2, "served": 13, "requests": 13, "bg_rate": 6.0},
                 {"config": "gs-priority", "repeat": rep, "p50_ms": 240.0, "p99_ms": 280.0,
                  "busy": 0.8, "late": 0, "served": 13, "requests": 13, "bg_rate": 6.0},
                 {"config": "mps-gs-priority", "repeat": rep, "p50_ms": 170.0 + rep,
                  "p99_ms": 240.0, "token_p50_ms": 5.2, "token_p99_ms": 7.5, "busy": 0.52,
                  "late": 0, "served": 13, "requests": 13, "bg_rate": 8.7}]
    rows.append({"config": "mps", "repeat": 0, "error": "latency: exit 1: boom"})
    configs = ["solo-latency", "solo-background", "time-sliced", "mps", "gs-priority",
               "mps-gs-priority"]
    summary, bar = ct.summarize(rows, configs)
    expect(abs(bar - 0.375) < 1e-9, f"bar 0.75 x (1 - solo busy 0.5) = 0.375, not {bar}")
    m = summary["mps-gs-priority"]
    expect(abs(m["p50_ms"] - 170.5) < 1e-9 and abs(m["p50_over_solo"] - 170.5 / 160) < 1e-9
           and abs(m["bg_kept"] - 0.87) < 1e-9, f"mps-gs-priority summarised: {m}")
    goals = {g: (ok, v) for g, ok, v in ct.goals(summary, bar)}
    want = {"mps-gs-priority: p50 within 1.10x of solo": True,
            "mps-gs-priority: p99 within 1.10x of solo": True,  # 240 / 230 = 1.04
            "mps-gs-priority: background keeps 75 % of the time the latency job leaves idle": True,
            "gs-priority: p50 no worse than time-sliced": True,
            "gs-priority: p99 no worse than time-sliced": False,
            "mps-gs-priority: p50 no worse than time-sliced": True,
            "mps-gs-priority: p99 no worse than time-sliced": True}
    expect({g: ok for g, (ok, _) in goals.items()} == want, f"goals: {goals}")
    g2 = {g: ok for g, ok, _ in ct.goals(ct.summarize(rows[:2], configs[:2])[0], bar)}
    expect(all(ok is None for g, ok in g2.items()), f"goals unmeasured without the rows: {g2}")
    text = ct.goals_text(ct.goals(summary, bar))
    expect("gs-priority: p99 no worse than time-sliced: missed (280.000 ms against 275.000 ms)"
           in text, f"goals text:\n{text}")
    args = types.SimpleNamespace(latency_job="generate", background="train", period_ms=300.0,
                                 seconds=4.0, repeats=2)
    md = ct.table(summary, bar, args)
    lines = md.splitlines()
    head = next(x for x in lines if x.startswith("| configuration"))
    row = next(x for x in lines if x.startswith("| mps-gs-priority"))
    expect("token p50 / p99 ms" in head and "background steps/s" in head
           and len(head.split("|")) == len(row.split("|")),
           f"the generate table has token and steps/s columns, as many cells as heads:\n{md}")
    expect("| 5.20 / 7.50 |" in row and "| 87.0 % |" in row, f"mps-gs-priority row: {row}")
    expect("1/1: latency: exit 1: boom" in md, "a failed configuration says why")
    old = types.SimpleNamespace(period_ms=2.0, seconds=2.5, repeats=3)  # a run from before
    md = ct.table(ct.summarize([r for r in rows if "token_p50_ms" not in r], configs)[0], bar,
                  old)
    expect("token" not in md.split("\n\n")[1] and "GEMM/s" in md,
           f"the gemm table of an earlier run's arguments has no token columns:\n{md}")
    frows = [{"experiment": "latency-dies-mps", "repeat": 0, "bg_before": 10.0, "bg_during": 8.0,
              "bg_after_100ms": 0.0, "bg_after": 9.5, "recover_ms": 3100.0, "stall_s": 3.05,
              "resumed": True, "hung": True, "survivor_end": "exited 0",
              "victim_in_flight": True},
             {"experiment": "latency-dies-mps", "repeat": 1, "bg_before": 10.0,
              "bg_during": 8.0, "bg_after_100ms": None, "bg_after": None, "recover_ms": None,
              "stall_s": 17.5, "resumed": False, "hung": True, "survivor_end": "killed",
              "victim_in_flight": True}]
    ft = ct.faults_table(frows, 10.0, "steps/s")
    row = next(x for x in ft.splitlines() if x.startswith("| latency-dies-mps"))
    expect("3050 ms, 17500 ms (never resumed)" in row and "| 2/2, 1 survivor(s) SIGKILLed" in row
           and "latency-stuck" not in ft and "steps/s" in ft, f"faults table:\n{ft}")


def test_contention_mps_procs():
    import contention as ct
    d = tempfile.mkdtemp()
    fake = os.path.join(d, "nvidia-cuda-mps-server")
    os.symlink("/bin/sleep", fake)
    mine = subprocess.Popen([fake, "30"], env={"CUDA_MPS_PIPE_DIRECTORY": d + "/pipe"})
    other = subprocess.Popen([fake, "30"], env={"CUDA_MPS_PIPE_DIRECTORY": d + "/other"})
    try:
        time.sleep(0.2)
        daemons, servers = ct.mps_procs(d + "/pipe")
        expect(daemons == [] and servers == [mine.pid],
               f"the MPS server of this pipe directory only: {servers} (want [{mine.pid}])")
    finally:
        for p in (mine, other):
            p.kill()
            p.wait()


def contention_run(extra, env=None, timeout=120):
    fakes = os.path.join(HERE, "fakes")
    out = tempfile.mkdtemp()
    e = dict(os.environ, PYTHONPATH=fakes, PATH=os.path.join(fakes, "bin") + ":" +
             os.environ["PATH"])
    e.update(env or {})
    r = subprocess.run([sys.executable, os.path.join(BENCH, "contention.py"), "--gpuslice",
                        os.path.join(fakes, "bin", "gpuslice"), "--repeats", "1", "--seconds",
                        "1", "--out", out] + extra, capture_output=True, text=True, env=e,
                       timeout=timeout)
    return r, out


def test_contention_generate_fake():
    """contention.py end to end on stand-ins for PyTorch, transformers, MPS and gpuslice run
    (tests/gpu/fakes): the generate and train jobs, the runner, the table, the goals, the
    pictures, and a tenant killed mid-kernel beside a survivor that keeps going."""
    r, out = contention_run(["--latency-job", "generate", "--period-ms", "200", "--only",
                             "solo-latency,solo-background,time-sliced,mps-gs-priority",
                             "--faults", "latency-dies,latency-dies-mps"])
    text = r.stdout + r.stderr
    expect(r.returncode == 0 and "Traceback" not in text, f"exit {r.returncode}:\n{text[-3000:]}")
    expect(re.search(r"^\| mps-gs-priority \| [0-9.]+ \|", text, re.M)
           and "background steps/s" in text
           and "Goals (issue 30):" in text, f"the generate table and goals:\n{text[-3000:]}")
    j = json.load(open(os.path.join(out, "contention.json")))
    s = j["summary"]
    expect(all(s[c]["failed"] == 0 for c in s), f"no configuration failed: {s}")
    tok = [r for r in j["rows"] if r.get("token_ms")]
    expect(tok and all(len(r["token_ms"]) == 32 * r["served"] for r in tok),
           "32 token times for each request served")
    f = {x["experiment"]: x for x in j["faults"]}
    expect(set(f) == {"latency-dies", "latency-dies-mps"} and
           all("error" not in x and x["victim_in_flight"] and not x["hung"]
               and x["bg_after"] for x in f.values()),
           f"a tenant killed mid-kernel, the survivor going on: {f}")
    expect(f.get("latency-dies", {}).get("victim_exit") == 137
           and f.get("latency-dies-mps", {}).get("victim_exit") == -9,
           f"the victim's exit: 137 through gpuslice run, -9 on its own: {f}")
    for name in ("contention-cdf.svg", "contention-token-cdf.svg"):
        expect(os.path.exists(os.path.join(out, name)), f"{name} written")


def test_contention_hang_fake():
    """A survivor that hangs for good once the victim died (the stand-in's synchronize never
    returns): told as a hang, never resumed, SIGKILLed 4 s past its end (CONTENTION_HANG_WAIT_S;
    15 s by default); the bench ends."""
    mark = os.path.join(tempfile.mkdtemp(), "died")
    t = time.monotonic()
    r, out = contention_run(["--only", "solo-background", "--faults", "latency-dies-mps"],
                            env={"FAKE_TORCH_MARK": mark, "FAKE_TORCH_HANG_S": "inf",
                                 "CONTENTION_HANG_WAIT_S": "4"})
    text = r.stdout + r.stderr
    expect(r.returncode == 0 and "Traceback" not in text, f"exit {r.returncode}:\n{text[-3000:]}")
    f = json.load(open(os.path.join(out, "contention.json")))["faults"]
    x = f[0] if f else {}
    expect(x.get("hung") and not x.get("resumed") and x.get("survivor_end") == "killed"
           and x.get("stall_s", 0) > 4, f"a hang for good, the survivor killed: {x}")
    expect(time.monotonic() - t < 60, f"bounded: {time.monotonic() - t:.0f} s")


def test_compiles():
    for d in (HERE, BENCH):
        for fn in sorted(os.listdir(d)):
            if fn.endswith(".py"):
                try:
                    py_compile.compile(os.path.join(d, fn), doraise=True,
                                       cfile=os.path.join(tempfile.mkdtemp(), "x.pyc"))
                except py_compile.PyCompileError as e:
                    expect(False, f"{fn}: {e}")


def main(argv):
    build = os.path.join(ROOT, "build")
    if "--build" in argv:
        build = argv[argv.index("--build") + 1]
    tests = [test_compiles, test_report_verdicts, test_report_summary_exit, test_statistics,
             test_launch_pairs_summary, test_launch_pairs_end_to_end, test_compute_verdicts,
             test_compute_host_bound_verdicts, test_compute_driver_tables,
             test_compute_driver_pair_and_set, test_nvml_window_means, test_tenant_file,
             test_contention_hang_check, test_contention_summary_goals,
             test_contention_mps_procs, test_contention_generate_fake,
             test_contention_hang_fake]
    for t in tests:
        run_test(t)
    run_test(types.FunctionType(test_real_tenant_file.__code__, globals(), None, (build,)))
    if "--sim" in argv:
        for t in (test_attach_sim, test_samplers_sim, test_compute_share_sim):
            run_test(types.FunctionType(t.__code__, globals(), None, (build,)))
    print(f"selftest: {len(FAILED)} failed" + (": " + "; ".join(FAILED) if FAILED else ""))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

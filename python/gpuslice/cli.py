"""gpuslice green-run (python3 -m gpuslice green-run): nVertake's green-run with N tasks."""
import argparse
import json
import math
import sys

from .errors import GpusliceError, GreenRunError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage and the message on stderr, exit 2 (argparse's own)
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: {message}\n")


def parser():
    p = _Parser(prog="gpuslice green-run",
                description="Runs N Python callables side by side in one process, each on its "
                            "own weighted share of one GPU's SMs (green contexts), released "
                            "together; prints each lane's SM count and result.")
    p.add_argument("--shares", default="25,75",
                   help="one positive weight per --task, comma-separated (default 25,75)")
    p.add_argument("--task", action="append", required=True, metavar="MODULE:FUNC",
                   help="a callable to run, once per lane, in lane order")
    p.add_argument("--task-kwargs", action="append", metavar="JSON",
                   help="a JSON object of keyword arguments, once per --task, or never")
    p.add_argument("-d", "--device", default="0", help="the CUDA device index (default 0)")
    p.add_argument("--json", action="store_true",
                   help="print the result as one JSON line (the shares, then each lane's "
                        "index, requested share, SM count and result)")
    return p


def main(argv=None):
    from .green import resolve, run_green_tasks

    p = parser()
    a = p.parse_args(argv)
    try:
        shares = [float(x) for x in a.shares.split(",")]
    except ValueError:
        p.error(f"--shares {a.shares}: give comma-separated numbers, e.g. 25,75")
    if not all(math.isfinite(x) and x > 0 for x in shares):
        p.error(f"--shares {a.shares}: each must be finite and above 0")
    if len(shares) != len(a.task):
        p.error(f"--shares {a.shares} gives {len(shares)} shares for {len(a.task)} --task: "
                "give one share per --task")
    if a.task_kwargs is not None and len(a.task_kwargs) != len(a.task):
        p.error(f"--task-kwargs given {len(a.task_kwargs)} times for {len(a.task)} --task: "
                "give it once per --task, or never")
    kwargs = []
    for i, text in enumerate(a.task_kwargs or []):
        try:
            v = json.loads(text)
        except ValueError as e:
            p.error(f"--task-kwargs #{i + 1} is not JSON: {e}")
        if not isinstance(v, dict):
            p.error(f"--task-kwargs #{i + 1} must be a JSON object, not {type(v).__name__}")
        kwargs.append(v)
    try:
        device = int(a.device)
        if device < 0:
            raise ValueError
    except ValueError:
        p.error(f"--device {a.device}: give a CUDA index (0, 1, ...)")
    sys.path.insert(0, "")  # MODULE is looked for where the command runs, as python -m does
    fns = []
    for t in a.task:
        try:
            fns.append(resolve(t))
        except (ImportError, AttributeError, TypeError) as e:
            p.error(f"--task {t}: {e}")
    try:
        r = run_green_tasks(fns, device=device, shares=shares,
                            task_kwargs=kwargs if a.task_kwargs else None)
    except KeyboardInterrupt:
        print("gpuslice green-run: interrupted", file=sys.stderr)
        return 130
    except GreenRunError as e:
        print(f"gpuslice green-run: {e}", file=sys.stderr)
        if a.json:
            print(json.dumps(dict(e.result.to_dict(),
                                  errors=[None if x is None else f"{type(x).__name__}: {x}"
                                          for x in e.errors]), default=repr))
        return 1
    except (GpusliceError, ValueError) as e:
        print(f"gpuslice green-run: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps(r.to_dict(), default=repr))
    else:
        print(f"device {r.device}: {r.total_sm_count} SMs")
        for lane, res in zip(r.lanes, r.results):
            print(f"lane {lane.index}: share {lane.requested_share:.1f} %, {lane.sm_count} SMs "
                  f"(from {lane.first_sm}), result {res!r}")
    return 0

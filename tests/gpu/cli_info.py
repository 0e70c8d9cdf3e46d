"""cli_info: `gpuslice info --json` against the values an H200 is known to have, and its
memory total against nvidia-smi's.

usage: cli_info.py GPUSLICE_BIN

Expected on an H200 (measured earlier by other means): 132 SMs, compute capability 9.0, green
contexts supported with a smallest group of 8 SMs, groups in steps of 8, and 2 SMs as the
smallest group when SM co-scheduling is ignored. The actual values are printed as @key lines
whether or not they match.
"""
import json
import subprocess
import sys

from gpucheck import check, done, key, note, num

EXPECT = {"sm_count": 132, "compute_capability": "9.0"}
EXPECT_GREEN = {"supported": True, "min_sms": 8, "alignment": 8, "finest_split_sms": 2}


def run(cmd, timeout=60):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "", str(e)
    return p.returncode, p.stdout, p.stderr


def main():
    gs = sys.argv[1]
    rc, out, err = run([gs, "info"])
    print(f"--- gpuslice info (exit {rc}) ---")
    print(out.rstrip())
    if err.strip():
        print("stderr: " + err.strip().replace("\n", "\nstderr: "))

    rc, out, err = run([gs, "info", "--json"])
    print(f"--- gpuslice info --json (exit {rc}) ---")
    print(out.rstrip())
    if err.strip():
        print("stderr: " + err.strip().replace("\n", "\nstderr: "))
    check(rc == 0, f"gpuslice info --json exits 0 (got {rc})")
    try:
        info = json.loads(out)
        g = info["gpus"][0]
    except (ValueError, KeyError, IndexError, TypeError) as e:
        check(False, f"gpuslice info --json prints an object with gpus[0] ({e})")
        done()
    note(f"driver {info.get('driver_version')}, CUDA {info.get('cuda_driver_version')}, "
         f"GPU 0 {g.get('name')} {g.get('uuid')}, MPS {g.get('mps')}")
    num("gpus", len(info["gpus"]))

    for f, want in EXPECT.items():
        got = g.get(f)
        key(f, got)
        check(got == want, f"gpus[0].{f} is {want!r} (got {got!r})")
    gc = g.get("green_contexts") or {}
    for f, want in EXPECT_GREEN.items():
        got = gc.get(f)
        key(f"green_{f}", got)
        check(got == want, f"gpus[0].green_contexts.{f} is {want!r} (got {got!r})")
    for f in ("driver_min_sm_partition_size", "driver_sm_coscheduled_alignment"):
        num(f"green_{f}", gc.get(f))
    # The whole split, as procs plans from it (15 groups of 8 and 12 over seen through procs).
    for f in ("groups", "groups_left_over_sms", "finest_groups"):
        key(f"green_{f}", gc.get(f))
    check(isinstance(gc.get("groups"), int) and isinstance(gc.get("finest_groups"), int) and
          gc["groups"] * 8 + gc["groups_left_over_sms"] == g.get("sm_count"),
          f"the split adds up: {gc.get('groups')} groups of 8 and {gc.get('groups_left_over_sms')} "
          f"left over make the {g.get('sm_count')} SMs")
    if gc.get("reason"):
        note(f"green contexts: {gc['reason']}")

    total = g.get("memory_total_bytes")
    key("memory_total_bytes", total)
    rc, out, err = run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits",
                        "-i", "0"])
    smi = out.strip().splitlines()[0].strip() if out.strip() else ""
    print(f"nvidia-smi memory.total (MiB): '{smi}' (exit {rc}) {err.strip()}")
    try:
        smi_bytes = int(smi) * (1 << 20)
    except ValueError:
        check(False, f"nvidia-smi prints memory.total in MiB (got '{smi}', exit {rc})")
        done()
    key("nvidia_smi_memory_total_bytes", smi_bytes)
    ok = isinstance(total, int) and abs(total - smi_bytes) <= 0.01 * smi_bytes
    check(ok, f"memory_total_bytes {total} is within 1% of nvidia-smi's {smi} MiB "
              f"({smi_bytes} bytes)")
    done()


if __name__ == "__main__":
    main()

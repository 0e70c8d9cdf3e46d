"""nVertake's run_green_process_scripts, over `gpuslice procs`: programs side by side, each
in its own process on its own weighted share of one GPU's SMs, released together."""
import math
import numbers
import subprocess
from typing import Optional, Sequence, Union

from .info import gpuslice_program


def run_green_process_scripts(scripts: Sequence[str], *, shares: Sequence[float],
                              script_args: Optional[Sequence[Sequence[str]]] = None,
                              device: int = 0, startup_timeout: float = 60.0,
                              quiet: bool = False,
                              memory_shares: Optional[Sequence[Union[float, str]]] = None) -> int:
    """Runs each script (a *.py file under Python, or any program) as a process of
    `gpuslice procs --shares ...`, with script_args[i] after it; returns the exit status
    (0 when every one exited 0, else the first failure's, the others being terminated; 1 when
    the GPU cannot be partitioned; 2 for bad arguments, gpuslice's message on stderr).

    memory_shares, as in nVertake: one hard memory limit per script, each a fraction of the
    GPU's memory above 0 and at most 1 (0.25), or a size as gpuslice takes it ("8G"); together
    at most the GPU's memory. Without it the scripts share the GPU's memory unlimited."""
    if isinstance(scripts, str) or not scripts:
        raise TypeError("scripts: give a sequence of programs")
    w = [float(s) for s in shares]
    if len(w) != len(scripts) or not all(math.isfinite(x) and x > 0 for x in w):
        raise ValueError(f"shares: one finite weight above 0 per script, not {list(shares)}")
    if script_args is not None and len(script_args) != len(scripts):
        raise ValueError("script_args: one list of arguments per script, or none")
    if not (startup_timeout > 0):
        raise ValueError(f"startup_timeout: give seconds above 0, not {startup_timeout}")
    memory = None
    if memory_shares is not None:
        if isinstance(memory_shares, str) or len(memory_shares) != len(scripts):
            raise ValueError("memory_shares: one limit per script (a fraction of the GPU's "
                             f"memory such as 0.25, or a size such as '8G'), not {memory_shares!r}")
        parts = []
        for m in memory_shares:
            if isinstance(m, str) and m and "," not in m:
                parts.append(m)
            elif (isinstance(m, numbers.Real) and not isinstance(m, bool)
                  and math.isfinite(float(m)) and 0 < float(m) <= 1
                  and int(float(m) * 1e8) > 0):
                # procs takes a percentage with at most 6 decimals: rounded down, never up.
                micro = min(int(float(m) * 1e8), 100000000)
                parts.append(f"{micro // 1000000}.{micro % 1000000:06d}%")
            else:
                raise ValueError(f"memory_shares: {m!r} is not a limit (give a fraction of the "
                                 "GPU's memory above 0 and at most 1, or a size such as '8G')")
        memory = ",".join(parts)
    cmd = [gpuslice_program(), "procs", "--shares", ",".join("%g" % x for x in w), "-d",
           str(device), "--timeout", "%g" % startup_timeout] + (["-q"] if quiet else [])
    if memory is not None:
        cmd += ["--memory", memory]
    cmd.append("--")
    for i, s in enumerate(scripts):
        if i:
            cmd.append(":::")
        cmd.append(str(s))
        cmd += [str(a) for a in (script_args[i] if script_args else [])]
    return subprocess.call(cmd)

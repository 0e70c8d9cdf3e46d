"""PyTorch and CPU priority from Python: nVertake's enable_torch_priority() and
@inject_priority. Importing this module imports no torch."""
import functools
import os
import sys
from typing import Any, Callable, Optional


def enable_torch_priority(torch_module: Any = None, device: Optional[int] = None, *,
                          eager: bool = True) -> bool:
    """Makes the current stream of each CUDA device PyTorch uses one of the highest priority
    the device allows (as gpuslice run does for every Python program), when CUDA initialises
    and at each torch.cuda.set_device(). Only a device's default stream is replaced, never one
    the program chose. eager: also now, on `device` (default the current one) if CUDA is
    initialised already. Returns False when torch cannot be imported or has no CUDA module,
    else True; calling it again is harmless."""
    torch = torch_module
    if torch is None:
        try:
            import torch  # noqa: F811
        except ImportError:
            return False
    if getattr(torch, "cuda", None) is None:
        return False
    from ._torchprio import patch_torch

    patch_torch(torch)
    prio = getattr(torch.cuda, "_gpuslice_prioritize", None)
    if eager and prio is not None:
        try:
            if device is not None:
                torch.cuda.set_device(device)  # the patched set_device prioritises it
            elif torch.cuda.is_initialized():
                prio()
        except Exception as e:  # CUDA absent or refused: the hook stays for later
            if os.environ.get("GPUSLICE_DEBUG"):
                sys.stderr.write(f"gpuslice: torch priority: not now ({type(e).__name__}: {e})\n")
    return True


def inject_priority(func: Optional[Callable] = None, *, device: int = 0,
                    nice_value: int = -10) -> Callable:
    """A decorator (bare or with arguments): while the function runs, the process's CPU nice
    value is `nice_value` (restored after; a value it may not take, e.g. below 0 without
    privilege, is left as it was with a warning on stderr), and, when PyTorch with CUDA is
    there, the current stream of `device` on the calling thread is a new one of the highest
    priority (the previous one after). Returns what the function returns."""

    def wrap(f):
        @functools.wraps(f)
        def run(*args, **kwargs):
            before = os.nice(0)
            changed = False
            if nice_value != before:
                try:
                    os.nice(nice_value - before)
                    changed = True
                except OSError as e:
                    sys.stderr.write(f"gpuslice: inject_priority: nice {nice_value}: {e}; "
                                     f"left at {before}\n")
            try:
                torch = sys.modules.get("torch")
                if torch is None:
                    try:
                        import torch  # noqa: F811
                    except ImportError:
                        torch = None
                stream = None
                if torch is not None and torch.cuda.is_available():
                    try:
                        prio = min(torch.cuda.Stream.priority_range())
                    except Exception:
                        prio = -1
                    stream = torch.cuda.Stream(device=device, priority=prio)
                if stream is None:
                    return f(*args, **kwargs)
                with torch.cuda.stream(stream):
                    return f(*args, **kwargs)
            finally:
                if changed:
                    try:
                        os.nice(before - os.nice(0))
                    except OSError:
                        pass  # raising it back needs privilege we may not have

        return run

    return wrap(func) if func is not None else wrap

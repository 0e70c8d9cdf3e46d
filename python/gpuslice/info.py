"""gpuslice info as Python objects: what `gpuslice info --json` says."""
import json
import os
import shutil
import subprocess
from types import SimpleNamespace
from typing import Any, Optional

from .errors import GpusliceError


def _ns(v: Any) -> Any:
    if isinstance(v, dict):
        return SimpleNamespace(**{k: _ns(x) for k, x in v.items()})
    if isinstance(v, list):
        return [_ns(x) for x in v]
    return v


def gpuslice_program() -> str:
    """The gpuslice program: $GPUSLICE_BIN, else gpuslice on PATH."""
    p = os.environ.get("GPUSLICE_BIN") or shutil.which("gpuslice")
    if not p:
        raise GpusliceError("the gpuslice program is not on PATH (set GPUSLICE_BIN to it)")
    return p


def info(device: Optional[str] = None, *, raw: bool = False) -> Any:
    """`gpuslice info --json [-d DEVICE]`, as nested objects (attributes for JSON keys), or the
    dict itself with raw=True. Raises GpusliceError with gpuslice's message when it fails."""
    cmd = [gpuslice_program(), "info", "--json"] + (["-d", str(device)] if device is not None
                                                    else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise GpusliceError(f"gpuslice info: {r.stderr.strip() or 'exit %d' % r.returncode}")
    try:
        doc = json.loads(r.stdout)
    except ValueError as e:
        raise GpusliceError(f"gpuslice info --json printed no JSON: {e}") from e
    return doc if raw else _ns(doc)

"""libgpuslice.so through ctypes: where it is, and the declarations of its C API
(include/gpuslice/gpuslice.h)."""
import ctypes
import os
import shutil

from .errors import LibraryNotFound

LANES_MAX = 64


class Lane(ctypes.Structure):
    """struct gpuslice_lane."""
    _fields_ = [("weight", ctypes.c_double), ("sm_count", ctypes.c_uint),
                ("first_sm", ctypes.c_uint), ("result", ctypes.c_int),
                ("cuda_error", ctypes.c_int)]


LANE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(Lane), ctypes.c_void_p)

_lib = None


def candidates():
    """Where libgpuslice.so is looked for, in order: $GPUSLICE_LIB; beside the gpuslice
    program on PATH (../lib); this package's install prefix (share/gpuslice/python/gpuslice
    -> lib); the dynamic loader's own search."""
    out = []
    env = os.environ.get("GPUSLICE_LIB")
    if env:
        return [env]
    exe = shutil.which("gpuslice")
    if exe:
        out.append(os.path.join(os.path.dirname(os.path.realpath(exe)), "..", "lib",
                                "libgpuslice.so"))
    here = os.path.dirname(os.path.realpath(__file__))
    out.append(os.path.join(here, "..", "..", "..", "..", "lib", "libgpuslice.so"))
    out.append("libgpuslice.so")
    return out


def lib():
    """The loaded library (loaded once). Raises LibraryNotFound naming what was tried."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in candidates():
        try:
            handle = ctypes.CDLL(os.path.normpath(path) if "/" in path else path)
        except OSError as e:
            tried.append(f"{path}: {e}")
            continue
        handle.gpuslice_lanes_run.argtypes = [
            ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_double), LANE_FN,
            ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(Lane), ctypes.c_char_p,
            ctypes.c_size_t]
        handle.gpuslice_lanes_run.restype = ctypes.c_int
        handle.gpuslice_lane_context.argtypes = []
        handle.gpuslice_lane_context.restype = ctypes.c_void_p
        _lib = handle
        return _lib
    raise LibraryNotFound("libgpuslice.so not found (set GPUSLICE_LIB to its path, or put "
                          "gpuslice's bin/ on PATH); tried: " + "; ".join(tried))


def cuda():
    """libcuda.so.1 (for the device's SM count and compute capability, and to make a lane's
    context current on threads a task starts)."""
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        raise LibraryNotFound(f"libcuda.so.1 (the NVIDIA driver) cannot be loaded: {e}") from e

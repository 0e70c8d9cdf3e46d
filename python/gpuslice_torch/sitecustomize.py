"""gpuslice's Python startup hook: PyTorch work on the highest-priority CUDA stream.

gpuslice run and gpuslice exec put this file's directory first on PYTHONPATH
(unless --no-torch-priority), so Python's site module imports it as
`sitecustomize`. It then
  1. runs the sitecustomize it shadows (the next one on sys.path after this
     directory: the user's or the distribution's), exactly once, as if this
     one were not there;
  2. waits for the program to import torch, without importing it: a finder
     first on sys.meta_path wraps torch's own loader, and right after torch
     has finished importing, patches torch.cuda so that on each device the
     program uses, the current stream becomes one created with the highest
     priority the device allows (lowest number of Stream.priority_range()).
A device is taken up when CUDA initialises (the current device then) and
when torch.cuda.set_device() switches to it. Only a device's default stream
is replaced, never a stream the program chose. Nothing here touches CUDA
before the program does, and a failure leaves torch as it was, silently;
GPUSLICE_DEBUG=1 prints what happens on stderr.
"""
import os
import sys

_DEBUG = bool(os.environ.get("GPUSLICE_DEBUG"))
_HERE = os.path.dirname(os.path.realpath(os.path.abspath(__file__)))
_MARK = "gpuslice_torch_priority"


def _debug(msg):
    if _DEBUG:
        try:
            sys.stderr.write("gpuslice: torch priority: %s\n" % msg)
        except Exception:
            pass


def _same_dir(entry):
    try:
        return os.path.realpath(os.path.abspath(entry or os.curdir)) == _HERE
    except Exception:
        return False


# --- 1. torch: the highest-priority stream on each device used -------------

def _patch_torch(torch):
    """gpuslice._torchprio.patch_torch, from the gpuslice package beside this file."""
    try:
        if _HERE not in sys.path:
            sys.path.insert(0, _HERE)
        from gpuslice._torchprio import patch_torch
    except Exception as e:  # leave the program as it would have run
        _debug("no gpuslice package beside the hook (%s: %s)" % (type(e).__name__, e))
        return
    patch_torch(torch)


def _torch_imported(module):
    try:
        _patch_torch(module)
    except Exception as e:
        _debug("torch left untouched (%s: %s)" % (type(e).__name__, e))


class _TorchLoader(object):
    """torch's own loader, which it gets back before its code runs; then the patch."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def create_module(self, spec):
        create = getattr(self._real, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        real = self._real
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = real
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = real
        real.exec_module(module)
        _torch_imported(module)


class _TorchFinder(object):
    """Answers only for the top-level `torch`, with the spec the next finder gives."""

    gpuslice_torch_priority = True

    def __init__(self):
        self._busy = False

    def find_spec(self, name, path=None, target=None):
        if name != "torch" or self._busy:
            return None
        self._busy = True
        try:
            spec = None
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    break
        except Exception as e:
            _debug("cannot look for torch (%s: %s)" % (type(e).__name__, e))
            return None
        finally:
            self._busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None  # the import system finds it again, unpatched
        try:
            sys.meta_path.remove(self)  # once is enough
        except ValueError:
            pass
        spec.loader = _TorchLoader(spec.loader)
        return spec


def _install():
    if any(getattr(f, _MARK, False) for f in sys.meta_path):
        return  # another copy of this hook, earlier on the path
    torch = sys.modules.get("torch")
    if torch is not None:  # imported already (a .pth file): patch it as it is
        _torch_imported(torch)
        return
    sys.meta_path.insert(0, _TorchFinder())


try:
    _install()
except Exception as _e:
    _debug("not installed (%s: %s)" % (type(_e).__name__, _e))


# --- 2. the sitecustomize this one shadows ---------------------------------

def _chain():
    import importlib.machinery
    import importlib.util

    # After this directory's first place on sys.path, so that two copies of
    # this hook (nested gpuslice runs) each run the next and stop.
    start = 0
    for i, entry in enumerate(sys.path):
        if _same_dir(entry):
            start = i + 1
            break
    rest = [p for p in sys.path[start:] if not _same_dir(p)]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    # The shadowed module becomes `sitecustomize`, as it would have been; an
    # error in it reaches site.py, which reports it as it always would.
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_chain()

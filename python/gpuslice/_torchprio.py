"""PyTorch work on the highest-priority CUDA stream of each device it uses: the patch that
gpuslice's startup hook (sitecustomize.py, under gpuslice run) and enable_torch_priority()
both apply. It never touches CUDA before the program does, and a failure leaves torch as it
was.
"""
import os
import sys

_MARK = "gpuslice_torch_priority"


def _debug(msg):
    if os.environ.get("GPUSLICE_DEBUG"):
        try:
            sys.stderr.write("gpuslice: torch priority: %s\n" % msg)
        except Exception:
            pass


def patch_torch(torch):
    """Wraps torch.cuda.set_device and queues a call for CUDA's initialisation."""
    import threading

    cuda = getattr(torch, "cuda", None)
    if cuda is None or getattr(cuda, "_" + _MARK, False):
        return
    real_set_device = cuda.set_device
    lazy_call = cuda._lazy_call
    streams = {}  # device index -> its high-priority Stream, kept alive for the process
    lock = threading.Lock()
    tls = threading.local()  # switching: inside set_device, the device is about to change

    def prioritize():
        """Makes the current device's current stream the high-priority one, if it is the default."""
        try:
            dev = cuda.current_device()
            cur = cuda.current_stream(dev)
            with lock:
                s = streams.get(dev)
                if s is None:
                    try:
                        prio = min(cuda.Stream.priority_range())
                    except Exception:
                        prio = -1  # PyTorch's "high" where the range is not exposed
                    s = cuda.Stream(device=dev, priority=prio)
                    streams[dev] = s
                    _debug("device %d: created a stream of priority %s" % (dev, getattr(s, "priority", prio)))
            if cur == s:
                return
            if cur != cuda.default_stream(dev):
                _debug("device %d: the program chose its own stream; left as it is" % dev)
                return
            cuda.set_stream(s)
            _debug("device %d: current stream set to the high-priority one" % dev)
        except Exception as e:  # leave the program as it would have run
            _debug("device: not changed (%s: %s)" % (type(e).__name__, e))

    def on_cuda_init():
        # set_device initialises CUDA before it switches: the device it leaves
        # may never be used, and a stream there would cost it a context.
        if getattr(tls, "switching", 0):
            return
        prioritize()

    def set_device(device):
        tls.switching = getattr(tls, "switching", 0) + 1
        try:
            real_set_device(device)
        finally:
            tls.switching -= 1
        try:
            ready = cuda.is_initialized()  # set_device(-1) is a no-op that initialises nothing
        except Exception:
            ready = False
        if ready:
            prioritize()

    for attr in ("__doc__", "__name__", "__qualname__", "__module__"):
        try:
            setattr(set_device, attr, getattr(real_set_device, attr))
        except Exception:
            pass
    set_device.__wrapped__ = real_set_device
    # _lazy_call is how torch.cuda itself defers per-device setup (seeding) to
    # the moment CUDA initialises, from Python or from C++ (device_lazy_init);
    # if CUDA is initialised already it calls at once.
    lazy_call(on_cuda_init)
    cuda.set_device = set_device
    cuda._gpuslice_prioritize = prioritize
    setattr(cuda, "_" + _MARK, True)
    _debug("torch %s patched" % getattr(torch, "__version__", "?"))



"""A stand-in for the few parts of PyTorch that bench/contention.py's jobs use, for selftest.py
on a machine without PyTorch: each process has a GPU queue that work is timed onto (a matmul
of m x k by k x n takes 2mkn / 5e14 s), synchronize() sleeps until it drains, events are
points on it. With FAKE_TORCH_MARK=FILE, the first Event.query() creates FILE (a dying
tenant's); with FAKE_TORCH_HANG_S=S too, another process's synchronize() after FILE exists
sleeps S s once (inf: for ever), as a client of a wedged MPS server would."""
import contextlib
import math
import os
import time

float16, bfloat16, float32 = "float16", "bfloat16", "float32"
_free_at = [0.0]  # when this process's queue drains
_hung = [False]


def _enqueue(seconds):
    _free_at[0] = max(_free_at[0], time.monotonic()) + seconds
    return _free_at[0]


class Tensor:
    def __init__(self, shape):
        self.shape = tuple(shape)

    def __matmul__(self, other):
        m, k = self.shape[-2:]
        n = other.shape[-1]
        _enqueue(2.0 * m * k * n / 5e14)
        return Tensor(self.shape[:-1] + (n,))

    def __truediv__(self, v):
        return self

    def to(self, *a, **k):
        return self

    def backward(self):
        _enqueue(0.015)


def randn(*shape, device=None, dtype=None):
    return Tensor(shape)


def randint(lo, hi, shape, generator=None):
    return Tensor(shape)


def ones_like(t):
    return Tensor(t.shape)


def manual_seed(n):
    pass


class Generator:
    def manual_seed(self, n):
        return self


class device(contextlib.ContextDecorator):
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@contextlib.contextmanager
def inference_mode():
    yield


@contextlib.contextmanager
def autocast(device_type, dtype=None):
    yield


class _Matmul:
    allow_tf32 = True


class backends:
    class cuda:
        matmul = _Matmul()


class cuda:
    class Stream:
        def __init__(self, priority=0):
            self.priority = priority

    class Event:
        def record(self):
            self.at = _free_at[0]

        def query(self):
            mark = os.environ.get("FAKE_TORCH_MARK")
            if mark and not os.path.exists(mark):
                open(mark, "w").close()
            return time.monotonic() >= self.at

    @staticmethod
    def set_stream(s):
        pass

    @staticmethod
    def synchronize():
        mark, hang = os.environ.get("FAKE_TORCH_MARK"), os.environ.get("FAKE_TORCH_HANG_S")
        if mark and hang and not _hung[0] and os.path.exists(mark):
            _hung[0] = True
            if math.isinf(float(hang)):
                while True:
                    time.sleep(1)
            time.sleep(float(hang))
        time.sleep(max(0.0, _free_at[0] - time.monotonic()))


class optim:
    class AdamW:
        def __init__(self, params, lr=1e-3, fused=False):
            self.params = list(params)

        def step(self):
            _enqueue(0.002)

        def zero_grad(self, set_to_none=True):
            pass

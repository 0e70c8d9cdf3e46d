# The fake torch.cuda: lazy initialisation with queued calls (_lazy_call), two
# devices, per-device current streams, priorities clamped to [-5, 0] like a
# device whose Stream.priority_range() is (0, -5).
import threading

calls = []
_initialized = False
_queued_calls = []
_tls = threading.local()
_device = 0
_current = {}
_next_id = [1]


def _lazy_init():
    global _initialized
    if _initialized or hasattr(_tls, "is_initializing"):
        return
    calls.append(("init", _device))
    _tls.is_initializing = True
    try:
        for c in _queued_calls:
            c()
    finally:
        del _tls.is_initializing
    _initialized = True


def _lazy_call(cb):
    if _initialized:
        cb()
    else:
        _queued_calls.append(cb)


def is_initialized():
    return _initialized


def is_available():
    return True


def device_count():
    return 2


def current_device():
    _lazy_init()
    return _device


def set_device(d):
    global _device
    d = int(d)
    if d < 0:
        return
    _lazy_init()
    calls.append(("set_device", d))
    _device = d


class Stream(object):
    def __init__(self, device=None, priority=0, _id=None):
        _lazy_init()
        self.device_index = _device if device is None else int(device)
        self.priority = max(-5, min(0, priority))
        if _id is None:
            _id = _next_id[0]
            _next_id[0] += 1
            calls.append(("Stream", self.device_index, self.priority))
        self.stream_id = _id

    @staticmethod
    def priority_range():
        return (0, -5)

    def __eq__(self, o):
        return isinstance(o, Stream) and (o.stream_id, o.device_index) == (self.stream_id, self.device_index)

    def __ne__(self, o):
        return not self == o

    def __repr__(self):
        return "<Stream %d on %d, priority %d>" % (self.stream_id, self.device_index, self.priority)


def default_stream(device=None):
    _lazy_init()
    return Stream(_device if device is None else device, 0, _id=0)


def current_stream(device=None):
    _lazy_init()
    d = _device if device is None else int(device)
    return _current.get(d, default_stream(d))


def set_stream(s):
    _lazy_init()
    calls.append(("set_stream", s.device_index, s.priority))
    _current[s.device_index] = s

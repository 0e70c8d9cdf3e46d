"""The exceptions gpuslice raises: every one is a GpusliceError."""


class GpusliceError(RuntimeError):
    """Something gpuslice could not do; the message says what and why."""


class LibraryNotFound(GpusliceError):
    """libgpuslice.so could not be found or loaded."""


class GreenContextUnavailable(GpusliceError):
    """The driver or GPU has no green contexts, or cannot split the SMs that finely."""


class GreenRunError(GpusliceError):
    """A task of run_green_tasks raised. `errors` holds each lane's exception (None for a lane
    that succeeded) and `result` the GreenRunResult with every lane's SM count and result."""

    def __init__(self, message, errors, result):
        super().__init__(message)
        self.errors = errors
        self.result = result


class DaemonError(GpusliceError):
    """gpusliced answered with an error: `status` (HTTP), `code` and the daemon's message."""

    def __init__(self, status, code, message):
        super().__init__(f"gpusliced: {message} (HTTP {status}, {code})")
        self.status = status
        self.code = code
        self.message = message

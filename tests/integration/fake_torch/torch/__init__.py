# A stand-in for PyTorch (tests/integration/run.sh, case cli_torch): only what
# gpuslice's sitecustomize hook touches, with every CUDA call recorded in
# torch.cuda.calls. No GPU, no real torch.
__version__ = "0.0-fake"
from . import cuda  # noqa: E402,F401  (real torch imports torch.cuda too)

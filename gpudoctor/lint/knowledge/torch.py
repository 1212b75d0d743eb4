"""PyTorch: CUDA is initialized lazily, by the first CUDA tensor or device query.

Version notes (also in the rule docs):
- ``torch.cuda.is_available()`` calls ``cudaGetDeviceCount``, which runs ``cuInit``:
  a forked child then fails with "Cannot re-initialize CUDA in forked subprocess",
  unless ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` was set before import (torch >= 1.13).
- ``torch.cuda.device_count()`` counts through NVML since torch 1.13 and does not
  initialize CUDA there; on older releases it did. gpudoctor follows >= 1.13.
Device placement (``.cuda()``, ``.to("cuda")``, ``device="cuda"``) is not in the table: it
depends on argument values rather than on a name, so the record says only that torch
places values so (``cuda_placement``) and the analysis reads the arguments.
"""

from __future__ import annotations

from gpudoctor.lint.knowledge.framework import Framework
from gpudoctor.lint.knowledge.table import DRIVER_INIT, GPU_OBJECT, INERT, RUNTIME_INIT, Api

FW = "torch"
NOTES = "https://pytorch.org/docs/stable/notes/multiprocessing.html"
CUDA = "https://pytorch.org/docs/stable/cuda.html"


def _api(pattern: str, effect: str, source: str) -> Api:
    return Api(pattern, effect, FW, source)


TABLE = (
    _api("torch.cuda.*", INERT, CUDA + " (most helpers are lazy)"),
    _api("torch.cuda.is_available", DRIVER_INIT, NOTES + "; pytorch/pytorch#17680"),
    _api("torch.cuda.device_count", INERT, "NVML-based since torch 1.13 (pytorch/pytorch#84879)"),
    _api("torch.cuda.init", RUNTIME_INIT, CUDA),
    _api("torch.cuda.set_device", RUNTIME_INIT, CUDA),
    _api("torch.cuda.current_device", RUNTIME_INIT, CUDA),
    _api("torch.cuda.get_device_properties", RUNTIME_INIT, CUDA),
    _api("torch.cuda.get_device_name", RUNTIME_INIT, CUDA),
    _api("torch.cuda.get_device_capability", RUNTIME_INIT, CUDA),
    _api("torch.cuda.synchronize", RUNTIME_INIT, CUDA),
    _api("torch.cuda.mem_get_info", RUNTIME_INIT, CUDA),
    _api("torch.cuda.device", RUNTIME_INIT, CUDA + " (entering sets the device)"),
    _api("torch.cuda.stream", RUNTIME_INIT, CUDA),
    _api("torch.cuda.Stream", RUNTIME_INIT, CUDA),
    _api("torch.cuda.Event", RUNTIME_INIT, CUDA),
    _api("torch.cuda.FloatTensor", GPU_OBJECT, CUDA),
    _api("torch.cuda.LongTensor", GPU_OBJECT, CUDA),
    _api("torch.cuda.IntTensor", GPU_OBJECT, CUDA),
    _api("torch.cuda.HalfTensor", GPU_OBJECT, CUDA),
    _api("torch.cuda.DoubleTensor", GPU_OBJECT, CUDA),
    _api("torch.cuda.ByteTensor", GPU_OBJECT, CUDA),
    _api("torch.cuda.BoolTensor", GPU_OBJECT, CUDA),
)

FRAMEWORK = Framework(
    name=FW,
    display="PyTorch",
    modules=("torch",),
    table=TABLE,
    consequence='fail with "Cannot re-initialize CUDA in forked subprocess"',
    host_copy="t.cpu()",
    # "CUDA semantics" (the caching allocator); torch/cuda/__init__.py (the NVML check)
    environment=("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NVML_BASED_CUDA_CHECK"),
    host_methods=frozenset({"cpu", "numpy", "tolist", "item"}),
    device_type="torch.device",
    cuda_placement=True,
)

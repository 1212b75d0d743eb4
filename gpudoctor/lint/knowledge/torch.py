"""PyTorch: CUDA is initialized lazily, by the first CUDA tensor or device query.

Checked against the torch 2.11 sources (and 2.5.1 where noted); the table says which
helpers only queue work (``manual_seed``), which run ``cuInit`` (``is_available``,
``get_arch_list``, a CUDA GradScaler or autocast) and which build the runtime (anything
that reaches ``_lazy_init()``).

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
from gpudoctor.lint.knowledge.table import DRIVER_INIT, GPU_OBJECT, INERT, ON_CUDA, RUNTIME_INIT, Api

FW = "torch"
NOTES = "https://pytorch.org/docs/stable/notes/multiprocessing.html"
CUDA = "https://pytorch.org/docs/stable/cuda.html"
# Read in the torch 2.11 wheel (the same files in 2.5.1 unless noted).
SRC = "torch 2.11 torch/cuda/__init__.py"
AMP = "torch 2.11 torch/amp/grad_scaler.py, torch/amp/autocast_mode.py, torch/cuda/amp/common.py"
ACCEL = "torch 2.11 torch/accelerator/__init__.py (torch >= 2.6)"


def _api(pattern: str, effect: str, source: str, **condition: object) -> Api:
    return Api(pattern, effect, FW, source, **condition)  # type: ignore[arg-type]


# Helpers of torch.cuda that call _lazy_init() (or current_device(), which does) and so
# build the CUDA runtime, although their names read like queries.
_RUNTIME_HELPERS = (
    "get_rng_state", "get_rng_state_all", "initial_seed", "current_stream", "default_stream",
    "set_per_process_memory_fraction", "reset_peak_memory_stats", "memory_summary", "is_bf16_supported",
    "ipc_collect", "cudart", "can_device_access_peer", "set_rng_state_all",
)


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
    # Constructing an Event creates nothing: CUDA events are made when first recorded
    # (c10/cuda/CUDAEvent.h; torch/csrc/cuda/Event.cpp has no lazy init in the constructor).
    _api("torch.cuda.Event", INERT, "c10/cuda/CUDAEvent.h: events are created lazily, when recorded"),
    _api("torch.cuda.Event.record", RUNTIME_INIT, "c10/cuda/CUDAEvent.h"),
    _api("torch.cuda.Event.synchronize", RUNTIME_INIT, "torch/csrc/cuda/Event.cpp"),
    _api("torch.cuda.Event.elapsed_time", RUNTIME_INIT, "torch/csrc/cuda/Event.cpp"),
    # is_available() and then the compiled architecture flags (which also poison fork).
    _api("torch.cuda.get_arch_list", DRIVER_INIT, SRC + " get_arch_list; torch/csrc/cuda/Module.cpp"),
    _api("torch.cuda.get_gencode_flags", DRIVER_INIT, SRC + " get_gencode_flags calls get_arch_list"),
    *(_api(f"torch.cuda.{name}", RUNTIME_INIT, SRC + ", memory.py, random.py: _lazy_init()")
      for name in _RUNTIME_HELPERS),
    # Mixed precision: the constructors ask torch.cuda.is_available() (cuInit) for a CUDA
    # device; torch.amp.GradScaler's device defaults to "cuda"; enabled=False skips it.
    _api("torch.cuda.amp.GradScaler", DRIVER_INIT, AMP),
    _api("torch.cuda.amp.autocast", DRIVER_INIT, AMP),
    _api("torch.amp.GradScaler", DRIVER_INIT, AMP, when=ON_CUDA, cuda_default=True),
    _api("torch.amp.grad_scaler.GradScaler", DRIVER_INIT, AMP, when=ON_CUDA, cuda_default=True),
    _api("torch.autocast", DRIVER_INIT, AMP, when=ON_CUDA),
    _api("torch.amp.autocast", DRIVER_INIT, AMP, when=ON_CUDA),
    # The device-generic API (torch >= 2.6): is_available() is torch.cuda.is_available() on a
    # CUDA build; device_count() counts through NVML; current_accelerator() does not touch
    # the device; the rest needs the runtime.
    _api("torch.accelerator.*", INERT, ACCEL),
    _api("torch.accelerator.is_available", DRIVER_INIT, ACCEL),
    *(_api(f"torch.accelerator.{name}", RUNTIME_INIT, ACCEL)
      for name in ("current_device_index", "current_device_idx", "set_device_index", "set_device_idx",
                   "synchronize", "current_stream", "set_stream", "memory.memory_allocated",
                   "memory.max_memory_allocated", "memory.memory_reserved", "memory.max_memory_reserved",
                   "memory.memory_stats", "memory.reset_peak_memory_stats", "memory.reset_accumulated_memory_stats",
                   "memory.get_memory_info")),
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
    # PYTORCH_ALLOC_CONF: the device-generic spelling libc10 reads too (torch 2.11).
    environment=("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_NVML_BASED_CUDA_CHECK"),
    host_methods=frozenset({"cpu", "numpy", "tolist", "item"}),
    device_type="torch.device",
    cuda_placement=True,
)

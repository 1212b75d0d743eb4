"""PyTorch: CUDA is initialized lazily, by the first CUDA tensor or device query.

Checked against the torch 2.11 sources (and 2.5.1 where noted); the table says which
helpers only queue work (``manual_seed``), which run ``cuInit`` (``is_available``,
``get_arch_list``, a CUDA GradScaler or autocast) and which build the runtime (anything
that reaches ``_lazy_init()``).

Version notes (also in the rule docs):
- ``torch.cuda.is_available()`` calls ``cudaGetDeviceCount``, which runs ``cuInit``:
  a forked child then fails with "Cannot re-initialize CUDA in forked subprocess",
  unless ``PYTORCH_NVML_BASED_CUDA_CHECK`` is "1" when it is called (torch >= 1.13; it
  is read on every call, not at import: ``INIT_UNLESS`` below).
- ``torch.cuda.device_count()`` counts through NVML since torch 1.13 and does not
  initialize CUDA there; on older releases it did. gpudoctor follows >= 1.13.
Device placement (``.cuda()``, ``.to("cuda")``, ``device="cuda"``) is not in the table: it
depends on argument values rather than on a name, so the record says only that torch
places values so (``cuda_placement``) and the analysis reads the arguments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpudoctor.knowledge.framework import Framework, Runtime, SharedByDescriptor
from gpudoctor.knowledge.table import DRIVER_INIT, GPU_OBJECT, INERT, ON_CUDA, RUNTIME_INIT, Api

if TYPE_CHECKING:
    from typing_extensions import Unpack  # (typing.Unpack is 3.11's: named for the type checker only)

    from gpudoctor.knowledge.table import Conditions

FW = "torch"
NOTES = "https://pytorch.org/docs/stable/notes/multiprocessing.html"
CUDA = "https://pytorch.org/docs/stable/cuda.html"
# Read in the torch 2.11 wheel (the same files in 2.5.1 unless noted).
SRC = "torch 2.11 torch/cuda/__init__.py"
AMP = "torch 2.11 torch/amp/grad_scaler.py, torch/amp/autocast_mode.py, torch/cuda/amp/common.py"
ACCEL = "torch 2.11 torch/accelerator/__init__.py (torch >= 2.6)"


def _api(pattern: str, effect: str, source: str, **condition: Unpack[Conditions]) -> Api:
    return Api(pattern, effect, FW, source, **condition)


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

# torch/cuda/__init__.py (2.11) ``_nvml_based_avail``: ``is_available()`` reads the variable
# with ``os.getenv`` each time it is called; "1" makes it count devices through NVML
# (``device_count()``), which does not initialize CUDA (it falls back to cuInit only when NVML
# fails, as ``device_count()`` does). torch/accelerator/__init__.py (2.11) ``is_available``
# delegates to it. ``os.getenv`` reads ``os.environ``: ``os.putenv`` alone does not count.
# (vLLM sets the variable when it is imported, vllm/env_override.py; third-party imports are
# not followed.)
NVML_CHECK = ("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
INIT_UNLESS = {
    name: NVML_CHECK for name in (
        "torch.cuda.is_available", "torch.accelerator.is_available",
        # The mixed-precision constructors ask torch.cuda.is_available() and nothing else
        # (get_arch_list does not belong here: its arch-flag query poisons fork itself).
        "torch.cuda.amp.GradScaler", "torch.cuda.amp.autocast", "torch.amp.GradScaler",
        "torch.amp.grad_scaler.GradScaler", "torch.autocast", "torch.amp.autocast")}

# torch/utils/_device.py (2.11) ``_device_constructors``: the functions a ``DeviceContext``
# (pushed by ``torch.set_default_device`` in torch/__init__.py, or by ``with torch.device(d):``,
# torch/csrc/Device.cpp) gives ``device=`` when a call passes none. Not the ``*_like``
# functions (they follow their input's device), nor ``torch.from_numpy``.
DEFAULT_DEVICE_FACTORIES = tuple(f"torch.{name}" for name in (
    "empty", "empty_permuted", "empty_strided", "empty_quantized", "ones", "arange",
    "bartlett_window", "blackman_window", "eye", "fft.fftfreq", "fft.rfftfreq", "full",
    "hamming_window", "hann_window", "kaiser_window", "linspace", "logspace",
    "nested.nested_tensor", "rand", "randn", "randint", "randperm", "range", "sparse_coo_tensor",
    "sparse_compressed_tensor", "sparse_csr_tensor", "sparse_csc_tensor", "sparse_bsr_tensor",
    "sparse_bsc_tensor", "tril_indices", "triu_indices", "zeros", "asarray", "tensor", "as_tensor",
    "scalar_tensor",
))
# torch/nn/modules/{linear,conv,sparse,batchnorm,rnn,activation,transformer}.py (2.11): layers
# whose constructor always allocates parameters or buffers with ``torch.empty``/``zeros``/
# ``ones`` and ``device=None`` (so on the default device). Layers whose parameters are
# optional (``LayerNorm(elementwise_affine=False)``, ``GroupNorm(affine=False)``) and lazy ones
# are left out.
DEFAULT_DEVICE_MODULES = tuple(f"torch.nn.{name}" for name in (
    "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "Embedding", "EmbeddingBag", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
    "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "MultiheadAttention", "PReLU",
    "Transformer", "TransformerEncoderLayer", "TransformerDecoderLayer",
))

# torch/multiprocessing/reductions.py (2.x; 2.13 read) ``reduce_storage``: under the
# ``file_descriptor`` sharing strategy (the default on Linux) a CPU tensor's storage is pickled
# as a ``multiprocessing.reduction.DupFd`` of its shared-memory file, and the receiver's
# ``rebuild_storage_fd`` calls ``df.detach()``, which connects to the SENDING process's
# ``resource_sharer`` thread to be handed the descriptor (multiprocessing/resource_sharer.py
# ``get_connection``). A sender that has exited by then fails the receiver's get() with
# FileNotFoundError, ConnectionRefusedError, ConnectionResetError or EOFError
# (pytorch/pytorch#65418, #70536). ``file_system`` sends a file name instead.
SHARED_BY_DESCRIPTOR = SharedByDescriptor(
    frames=("torch/multiprocessing/reductions.py",),
    what="a tensor's storage (torch.multiprocessing's default `file_descriptor` sharing strategy)",
    fix=('`torch.multiprocessing.set_sharing_strategy("file_system")` in every process before the first '
         "tensor is sent (a tensor is then found by the name of its shared-memory file, not fetched from its "
         "sender), or send copies that carry their data (`tensor.numpy()`, or `tensor.tolist()` for small ones)"),
)

FRAMEWORK = Framework(
    name=FW,
    display="PyTorch",
    modules=("torch",),
    runtimes=(Runtime("torch.cuda", "PyTorch CUDA", "PyTorch CUDA", cuda=True, libraries=("libtorch_cuda",),
                      evidence="torch.cuda says it is initialized", seen=("torch.cuda", ("_initialized",), "true")),),
    cuda_in_child='PyTorch raises "Cannot re-initialize CUDA in forked subprocess"',
    table=TABLE,
    consequence='fail with "Cannot re-initialize CUDA in forked subprocess"',
    host_copy="t.cpu()",
    # "CUDA semantics" (the caching allocator). PYTORCH_NVML_BASED_CUDA_CHECK is not one:
    # it is read at each call (INIT_UNLESS).
    # PYTORCH_ALLOC_CONF: the device-generic spelling libc10 reads too (torch 2.11).
    environment=("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"),
    init_unless=INIT_UNLESS,
    default_device_factories=DEFAULT_DEVICE_FACTORIES,
    default_device_modules=DEFAULT_DEVICE_MODULES,
    # torch/multiprocessing/reductions.py (2.11) ``reduce_tensor``: a CUDA tensor is pickled
    # as a CUDA IPC handle (``storage._share_cuda_()``) with a reference count the receiver
    # releases; torch/__init__.py imports torch.multiprocessing, whose ``init_reductions()``
    # registers this with multiprocessing's ForkingPickler: every multiprocessing channel
    # (queues, pipes, pool tasks, spawn arguments) shares CUDA tensors so once torch is imported.
    # The memory stays the sender's: torch/csrc/CudaIPCTypes.cpp keeps each sent block until
    # the receivers' reference counts drop, and warns when the sending process exits first
    # (the probe reports that warning; docs/error-strings.md row 35).
    ipc_sharing="shares it through CUDA IPC, without a copy (the receiver maps the sender's device memory)",
    host_methods=frozenset({"cpu", "numpy", "tolist", "item"}),
    device_type="torch.device",
    cuda_placement=True,
    shared_by_descriptor=SHARED_BY_DESCRIPTOR,
    # torch/nn/modules/module.py (2.11): Module.__call__ is _wrapped_call_impl, which calls
    # self.forward after the hooks.
    call_methods={"torch.nn.Module": "forward", "torch.nn.modules.module.Module": "forward"},
    # Module.to, cuda, cpu, train, eval, half, float, double, bfloat16, share_memory,
    # requires_grad_, apply and type return self (module.py, 2.11).
    self_methods={base: frozenset({"to", "cuda", "cpu", "train", "eval", "half", "float", "double", "bfloat16",
                                   "share_memory", "requires_grad_", "apply", "type"})
                  for base in ("torch.nn.Module", "torch.nn.modules.module.Module")},
)

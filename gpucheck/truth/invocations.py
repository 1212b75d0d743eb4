"""How ``truth_table`` calls each API the knowledge tables classify: one line of code each.

Every entry of the PyTorch, JAX, CuPy and Numba CUDA tables is here, as an
:class:`Invocation` (code that calls it) or as :class:`NotExercised` (why it cannot be
called meaningfully in a fresh process); tests/gpucheck/test_truth_invocations.py fails
when a knowledge entry has neither, so a new entry cannot go unchecked. A pattern
ending in ``.*`` gets a representative: an API its broad rule covers and no narrower
entry names.

``setup`` runs before the "before" reading and must, by the tables, initialize nothing
(``e = torch.cuda.Event()`` before ``e.record()``); when it does initialize, the row is
inconclusive, not wrong. ``expect`` overrides the entry's effect for a variant whose
condition does not hold (``torch.autocast("cpu")``: ON_CUDA is false, so inert) or that
reaches another entry (a method of the object a call returns).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudoctor.knowledge.table import INERT, RUNTIME_INIT


@dataclass(frozen=True)
class FrameworkSetup:
    """How a child imports one framework and which distributions carry its version."""

    name: str  # the knowledge record's name
    module: str  # the top-level module whose presence says the framework is installed
    imports: str
    distributions: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()  # settings that keep concurrent children apart


@dataclass(frozen=True)
class Invocation:
    """One call of one knowledge entry."""

    pattern: str  # the knowledge entry's pattern, exactly as its table writes it
    call: str
    setup: str = ""
    label: str = ""  # tells variants of one pattern apart
    expect: str | None = None  # the effect this variant should have, when not the entry's

    @property
    def key(self) -> str:
        return f"{self.pattern} [{self.label}]" if self.label else self.pattern


@dataclass(frozen=True)
class NotExercised:
    """A knowledge entry this check does not call, and why."""

    pattern: str
    reason: str


IMPORT_ONLY = "(import alone)"  # the baseline row's pattern: importing must initialize nothing

# The effects that claim no initialization level: a host copy needs a device object
# first, and a configuration call claims an order (before the runtime), not a level.
NO_LEVEL = "the knowledge claims an order or a result for it, not an initialization level"

FRAMEWORKS = (
    FrameworkSetup("torch", "torch", "import torch", ("torch",)),
    # JAX preallocates 75 % of the GPU when its backend starts: eight children at once
    # would run out of memory. Preallocation does not change when the backend starts.
    FrameworkSetup("jax", "jax", "import numpy\nimport jax\nimport jax.numpy\nimport jax.random\nimport jax.nn\n"
                   "import jax.lax\nimport jax.scipy.special\nimport jax.extend.backend\nimport jax.tree_util",
                   ("jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda13-pjrt", "jax-cuda12-plugin"),
                   (("XLA_PYTHON_CLIENT_PREALLOCATE", "false"),)),
    FrameworkSetup("cupy", "cupy", "import numpy\nimport cupy", ("cupy-cuda13x", "cupy-cuda12x", "cupy")),
    FrameworkSetup("numba", "numba", "import numpy\nimport numba\nimport numba.cuda", ("numba", "numba-cuda")),
)

_STREAM_FIRST = "needs a stream object, and making one already builds the runtime"


def _c(pattern: str, call: str, setup: str = "", label: str = "", expect: str | None = None) -> Invocation:
    return Invocation(pattern, call, setup, label, expect)


def _calls(prefix: str, names: str, arguments: str = "") -> tuple[Invocation, ...]:
    """``prefix.name(arguments)`` for each whitespace-separated name."""
    return tuple(_c(f"{prefix}.{name}", f"{prefix}.{name}({arguments})") for name in names.split())


TORCH: tuple[Invocation | NotExercised, ...] = (
    _c("torch.cuda.*", "torch.cuda.manual_seed(0)", label="manual_seed (queued until init)"),
    _c("torch.cuda.is_available", "torch.cuda.is_available()"),
    _c("torch.cuda.device_count", "torch.cuda.device_count()"),
    _c("torch.cuda.init", "torch.cuda.init()"),
    _c("torch.cuda.set_device", "torch.cuda.set_device(0)"),
    *_calls("torch.cuda", "current_device synchronize mem_get_info get_arch_list get_gencode_flags "
            "get_rng_state get_rng_state_all initial_seed current_stream default_stream reset_peak_memory_stats "
            "memory_summary is_bf16_supported ipc_collect cudart Stream Event"),
    *_calls("torch.cuda", "get_device_properties get_device_name get_device_capability", "0"),
    _c("torch.cuda.device", "with torch.cuda.device(0):\n    pass"),
    NotExercised("torch.cuda.stream", _STREAM_FIRST),
    _c("torch.cuda.Event.record", "event.record()", setup="event = torch.cuda.Event()"),
    _c("torch.cuda.Event.synchronize", "event.synchronize()", setup="event = torch.cuda.Event()"),
    NotExercised("torch.cuda.Event.elapsed_time", "needs two recorded events, and recording builds the runtime"),
    _c("torch.cuda.set_per_process_memory_fraction", "torch.cuda.set_per_process_memory_fraction(0.5)"),
    _c("torch.cuda.can_device_access_peer", "torch.cuda.can_device_access_peer(0, 0)"),
    _c("torch.cuda.set_rng_state_all", "torch.cuda.set_rng_state_all([torch.zeros(16, dtype=torch.uint8)])"),
    _c("torch.cuda.amp.GradScaler", "torch.cuda.amp.GradScaler()"),
    _c("torch.cuda.amp.autocast", "torch.cuda.amp.autocast()"),
    _c("torch.amp.GradScaler", 'torch.amp.GradScaler("cuda")'),
    _c("torch.amp.GradScaler", "torch.amp.GradScaler()", label="no device: cuda by default"),
    _c("torch.amp.GradScaler", 'torch.amp.GradScaler("cpu")', label="cpu", expect=INERT),
    _c("torch.amp.grad_scaler.GradScaler", 'torch.amp.grad_scaler.GradScaler("cuda")'),
    _c("torch.autocast", 'torch.autocast("cuda")'),
    _c("torch.autocast", 'torch.autocast("cpu")', label="cpu", expect=INERT),
    _c("torch.amp.autocast", 'torch.amp.autocast("cuda")'),
    _c("torch.accelerator.*", "torch.accelerator.current_accelerator()", label="current_accelerator"),
    _c("torch.accelerator.*", "torch.accelerator.device_count()", label="device_count (NVML)"),
    *_calls("torch.accelerator", "is_available current_device_index current_device_idx synchronize current_stream"),
    *_calls("torch.accelerator", "set_device_index set_device_idx", "0"),
    NotExercised("torch.accelerator.set_stream", _STREAM_FIRST),
    *_calls("torch.accelerator.memory", "memory_allocated max_memory_allocated memory_reserved "
            "max_memory_reserved memory_stats reset_peak_memory_stats reset_accumulated_memory_stats "
            "get_memory_info"),
    *_calls("torch.cuda", "FloatTensor LongTensor IntTensor HalfTensor DoubleTensor ByteTensor BoolTensor", "4"),
)

JAX: tuple[Invocation | NotExercised, ...] = (
    _c("jax.numpy.*", "jax.numpy.zeros(3)", label="zeros"),
    _c("jax.random.*", "jax.random.key(0)", label="key"),
    _c("jax.random.*", "jax.random.PRNGKey(0)", label="PRNGKey"),
    _c("jax.nn.*", "jax.nn.relu(1.0)", label="relu"),
    _c("jax.lax.*", "jax.lax.add(1.0, 2.0)", label="add"),
    _c("jax.scipy.*", "jax.scipy.special.erf(0.5)", label="special.erf"),
    _c("jax.device_put", "jax.device_put(numpy.ones(3))"),
    *_calls("jax", "devices local_devices device_count local_device_count default_backend process_index "
            "process_count"),
    _c("jax.extend.backend.get_backend", "jax.extend.backend.get_backend()"),
    NotExercised("jax.device_get", NO_LEVEL),
    _c("jax.numpy.dtype", 'jax.numpy.dtype("float32")'),
    _c("jax.numpy.issubdtype", "jax.numpy.issubdtype(jax.numpy.float32, jax.numpy.floating)"),
    _c("jax.numpy.isdtype", 'jax.numpy.isdtype(jax.numpy.float32, "real floating")'),
    _c("jax.numpy.result_type", "jax.numpy.result_type(jax.numpy.float32, jax.numpy.int32)"),
    _c("jax.numpy.finfo", "jax.numpy.finfo(jax.numpy.float32)"),
    _c("jax.numpy.iinfo", "jax.numpy.iinfo(jax.numpy.int32)"),
    _c("jax.numpy.promote_types", 'jax.numpy.promote_types("float32", "int32")'),
    _c("jax.numpy.can_cast", 'jax.numpy.can_cast("float32", "int32")'),
    _c("jax.make_mesh", 'jax.make_mesh((1,), ("x",))'),
    NotExercised("jax.config.update", NO_LEVEL),
    NotExercised("jax.distributed.initialize", NO_LEVEL + "; it also needs a coordinator"),
    *(_c(f"jax.{name}", f"jax.{name}(lambda x: x)") for name in ("jit", "grad", "value_and_grad", "vmap", "pmap")),
    _c("jax.tree_util.*", 'jax.tree_util.tree_leaves({"a": 1})', label="tree_leaves"),
    _c("jax.tree.*", 'jax.tree.leaves({"a": 1})', label="leaves"),
)

_KERNEL = r'extern "C" __global__ void gpucheck_k() {}'

CUPY: tuple[Invocation | NotExercised, ...] = (
    _c("cupy.*", "cupy.arange(4)", label="arange"),
    NotExercised("cupy.asnumpy", NO_LEVEL),
    _c("cupy.get_array_module", "cupy.get_array_module(numpy.ones(1))"),
    _c("cupy.fuse", "cupy.fuse(lambda x: x)"),
    _c("cupy.ElementwiseKernel", 'cupy.ElementwiseKernel("T x", "T y", "y = x", "gpucheck_copy")'),
    _c("cupy.ReductionKernel",
       'cupy.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "gpucheck_sum")'),
    _c("cupy.RawKernel", f"cupy.RawKernel(r'{_KERNEL}', 'gpucheck_k')"),
    _c("cupy.RawModule", f"cupy.RawModule(code=r'{_KERNEL}')"),
    _c("cupy.get_default_memory_pool", "cupy.get_default_memory_pool()"),
    # The pool's methods are cupy.cuda.MemoryPool methods (the entry's ``returns``).
    _c("cupy.get_default_memory_pool", "cupy.get_default_memory_pool().used_bytes()",
       label="then used_bytes()", expect=RUNTIME_INIT),
    _c("cupy.get_default_pinned_memory_pool", "cupy.get_default_pinned_memory_pool()"),
    _c("cupy.show_config", "cupy.show_config()"),
    _c("cupy.cuda.*", "cupy.cuda.Stream()", label="Stream"),
    _c("cupy.cuda.*", "cupy.cuda.runtime.getDevice()", label="runtime.getDevice"),
    _c("cupy.cuda.Device", "cupy.cuda.Device()"),
    _c("cupy.cuda.Device", "cupy.cuda.Device(0)", label="with an argument", expect=INERT),
    _c("cupy.cuda.Device.use", "device.use()", setup="device = cupy.cuda.Device(0)"),
    _c("cupy.cuda.is_available", "cupy.cuda.is_available()"),
    _c("cupy.cuda.runtime.getDeviceCount", "cupy.cuda.runtime.getDeviceCount()"),
    *_calls("cupy.cuda.runtime", "runtimeGetVersion driverGetVersion"),
    *_calls("cupy.cuda", "get_local_runtime_version get_cuda_path get_nvcc_path MemoryPool PinnedMemoryPool"),
    _c("cupy.cuda.set_allocator", "cupy.cuda.set_allocator(cupy.cuda.MemoryPool().malloc)"),
    _c("cupy.cuda.set_pinned_memory_allocator", "cupy.cuda.set_pinned_memory_allocator(None)"),
    _c("cupyx.scipy.*", "cupyx.scipy.special.erf(0.5)", setup="import cupyx.scipy.special", label="special.erf"),
)

NUMBA: tuple[Invocation | NotExercised, ...] = (
    _c("numba.cuda.*", 'numba.cuda.declare_device("gpucheck_f", "int32(int32)")', label="declare_device"),
    _c("numba.cuda.gpus", "numba.cuda.gpus", label="attribute read"),
    _c("numba.cuda.gpus", "len(numba.cuda.gpus)", label="len()"),
    *_calls("numba.cuda", "is_available detect list_devices get_current_device current_context synchronize "
            "stream default_stream legacy_default_stream per_thread_default_stream event "
            "is_bfloat16_supported is_fp8_supported"),
    _c("numba.cuda.select_device", "numba.cuda.select_device(0)"),
    _c("numba.cuda.to_device", "numba.cuda.to_device(numpy.ones(4))"),
    *_calls("numba.cuda", "device_array mapped_array pinned_array managed_array", "4"),
    *_calls("numba.cuda", "device_array_like mapped_array_like pinned_array_like", "numpy.ones(4)"),
    _c("numba.cuda.jit", "numba.cuda.jit(kernel)", setup="def kernel(x):\n    x[0] = 1"),
    NotExercised("numba.cuda.from_cuda_array_interface",
                 "needs a device pointer, and making the array that owns it builds the runtime"),
    NotExercised("numba.cuda.open_ipc_array", "needs an IPC handle exported by another process's context"),
    _c("numba.cuda.external_stream", "numba.cuda.external_stream(0)", label="the legacy default stream (0)"),
    _c("numba.cuda.pinned", "with numba.cuda.pinned(numpy.ones(4)):\n    pass"),
    _c("numba.cuda.mapped", "with numba.cuda.mapped(numpy.ones(4)):\n    pass"),
)

TABLE: dict[str, tuple[Invocation | NotExercised, ...]] = {
    "torch": TORCH, "jax": JAX, "cupy": CUPY, "numba": NUMBA}

"""CuPy: array creation and every op initialize the CUDA runtime in this process.

CuPy has no fork detection: a child of an initialized parent fails with
``cudaErrorInitializationError`` (cupy_backends/cuda/api/runtime.pyx). ``import cupy``
alone touches no device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpudoctor.knowledge.framework import Framework, Runtime
from gpudoctor.knowledge.table import (
    DRIVER_INIT,
    GPU_OBJECT,
    HOST_COPY,
    INERT,
    ON_NO_ARGUMENTS,
    RUNTIME_INIT,
    Api,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack  # (typing.Unpack is 3.11's: named for the type checker only)

    from gpudoctor.knowledge.table import Conditions

FW = "cupy"
BASICS = "https://docs.cupy.dev/en/stable/user_guide/basic.html"
DEVICE = "https://docs.cupy.dev/en/stable/reference/generated/cupy.cuda.Device.html"


SRC = "cupy v14.2.0"


def _api(pattern: str, effect: str, source: str, **condition: Unpack[Conditions]) -> Api:
    return Api(pattern, effect, FW, source, **condition)


TABLE = (
    _api("cupy.*", GPU_OBJECT, BASICS + " (arrays live on the current device)"),
    _api("cupy.asnumpy", HOST_COPY, BASICS + " (move arrays to the host)"),
    _api("cupy.get_array_module", INERT, "returns a module, no device work"),
    _api("cupy.fuse", INERT, "decorator; compiles on first call"),
    _api("cupy.ElementwiseKernel", INERT, "kernel definition; compiled on first launch"),
    _api("cupy.ReductionKernel", INERT, "kernel definition; compiled on first launch"),
    _api("cupy.RawKernel", INERT, "kernel definition; compiled on first launch"),
    _api("cupy.RawModule", INERT, "module definition; loaded on first use"),
    # Getting the pool allocates nothing, but its methods (set_limit, used_bytes,
    # free_all_blocks, ...) make the current device's pool, asking the runtime for the
    # device count and the current device: they are cupy.cuda.MemoryPool methods below.
    _api("cupy.get_default_memory_pool", INERT, SRC + " cupy/cuda/memory.pyx _ensure_pools_and_return_device_pool",
         returns="cupy.cuda.MemoryPool"),
    _api("cupy.get_default_pinned_memory_pool", INERT, "returns the pool object without allocating"),
    _api("cupy.show_config", RUNTIME_INIT, "queries the runtime and driver versions"),
    _api("cupy.cuda.*", RUNTIME_INIT, "cupy.cuda calls the CUDA runtime"),
    # Device(n) only stores n (selecting nothing until use); Device() with no argument asks
    # the runtime for the current device (cudaGetDevice).
    _api("cupy.cuda.Device", RUNTIME_INIT, DEVICE + "; " + SRC + " cupy/cuda/device.pyx Device.__init__",
         when=ON_NO_ARGUMENTS),
    _api("cupy.cuda.Device.use", RUNTIME_INIT, DEVICE),
    _api("cupy.cuda.is_available", DRIVER_INIT, "runtime.getDeviceCount() calls cuInit"),
    _api("cupy.cuda.runtime.getDeviceCount", DRIVER_INIT, "cudaGetDeviceCount calls cuInit"),
    # Version queries do not initialize the runtime (cupy_backends/cuda/api/runtime.pyx).
    *(_api(name, INERT, SRC + " version queries; the CUDA runtime API documents them as not initializing")
      for name in ("cupy.cuda.runtime.runtimeGetVersion", "cupy.cuda.runtime.driverGetVersion",
                   "cupy.cuda.get_local_runtime_version", "cupy.cuda.get_cuda_path", "cupy.cuda.get_nvcc_path")),
    _api("cupy.cuda.set_allocator", INERT, "installs an allocator function"),
    _api("cupy.cuda.set_pinned_memory_allocator", INERT, "installs an allocator function"),
    _api("cupy.cuda.MemoryPool", INERT, "pool object; allocates on first use"),
    _api("cupy.cuda.PinnedMemoryPool", INERT, "pool object; allocates on first use"),
    _api("cupyx.scipy.*", GPU_OBJECT, "cupyx.scipy works on device arrays"),
)

FRAMEWORK = Framework(
    name=FW,
    display="CuPy",
    modules=("cupy", "cupyx"),
    runtimes=(Runtime("cupy", "CuPy", "CuPy", cuda=True, libraries=("cupy_backends",)),),
    cuda_in_child="CuPy fails with `cudaErrorInitializationError`",
    table=TABLE,
    consequence="fail with cudaErrorInitializationError",
    host_copy="x.get() or cupy.asnumpy(x)",
    environment=("CUPY_GPU_MEMORY_LIMIT",),  # https://docs.cupy.dev/en/stable/reference/environment.html
    host_methods=frozenset({"get", "asnumpy", "tolist", "item"}),
    device_contexts=("cupy.cuda.Device",),  # DEVICE: "with Device(n):" makes n current
)

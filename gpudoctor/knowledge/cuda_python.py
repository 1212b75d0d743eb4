"""NVIDIA's CUDA Python: ``cuda.bindings`` (the driver and runtime APIs one to one) and
``cuda.core`` (the Pythonic layer: ``Device``, streams, buffers, launches).

``cuda.bindings.driver.cuInit`` is the driver initialization itself; every
``cuda.bindings.runtime`` call but the version queries initializes the CUDA runtime (the
CUDA runtime API documents its implicit initialization). In ``cuda.core``,
``Device().set_current()`` makes the device's primary context current; allocations,
streams and launches then need it. Older releases spelled ``cuda.core`` as
``cuda.core.experimental``. A forked child of an initialized parent gets
CUDA_ERROR_NOT_INITIALIZED from its first driver call.
"""

from __future__ import annotations

from gpudoctor.knowledge.framework import Framework
from gpudoctor.knowledge.table import DRIVER_INIT, GPU_OBJECT, INERT, RUNTIME_INIT, Api

FW = "cuda-python"
CORE = "https://nvidia.github.io/cuda-python/cuda-core/latest/"
BINDINGS = "https://nvidia.github.io/cuda-python/cuda-bindings/latest/"
RUNTIME_API = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DRIVER.html"


def _api(pattern: str, effect: str, source: str) -> Api:
    return Api(pattern, effect, FW, source)


TABLE = (
    _api("cuda.bindings.driver.*", INERT, BINDINGS + " (a call that is not listed needs cuInit to have run)"),
    _api("cuda.bindings.driver.cuInit", DRIVER_INIT, BINDINGS),
    _api("cuda.bindings.driver.cuDeviceGetCount", DRIVER_INIT, BINDINGS + " (fails unless cuInit ran)"),
    _api("cuda.bindings.driver.cuCtxCreate", RUNTIME_INIT, BINDINGS),
    _api("cuda.bindings.driver.cuDevicePrimaryCtxRetain", RUNTIME_INIT, BINDINGS),
    _api("cuda.bindings.runtime.*", RUNTIME_INIT, RUNTIME_API + " (runtime calls initialize it implicitly)"),
    _api("cuda.bindings.runtime.cudaRuntimeGetVersion", INERT, RUNTIME_API),
    _api("cuda.bindings.runtime.cudaDriverGetVersion", INERT, RUNTIME_API),
    _api("cuda.core.*", INERT, CORE),
    _api("cuda.core.Device.set_current", RUNTIME_INIT, CORE + " (retains and pushes the primary context)"),
    _api("cuda.core.Device.create_stream", RUNTIME_INIT, CORE),
    _api("cuda.core.Device.create_event", RUNTIME_INIT, CORE),
    _api("cuda.core.Device.sync", RUNTIME_INIT, CORE),
    _api("cuda.core.Device.allocate", GPU_OBJECT, CORE),
    _api("cuda.core.launch", RUNTIME_INIT, CORE),
)

FRAMEWORK = Framework(
    name=FW,
    display="CUDA Python",
    modules=("cuda.core", "cuda.bindings", "cuda.cuda", "cuda.cudart"),
    table=TABLE,
    consequence="fail with CUDA_ERROR_NOT_INITIALIZED",
    host_copy="copy the buffer to host memory (Buffer.copy_to)",
    # cuda.cuda and cuda.cudart: the bindings' names before cuda-python 12.6.1.
    aliases=(("cuda.core.experimental.", "cuda.core."), ("cuda.cuda.", "cuda.bindings.driver."),
             ("cuda.cudart.", "cuda.bindings.runtime.")),
)

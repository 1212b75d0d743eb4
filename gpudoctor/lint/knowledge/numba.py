"""Numba CUDA: device queries initialize the driver; transfers and launches the context.

Numba detects fork after init itself: "CUDA initialized before forking"
(numba/cuda/cudadrv/driver.py). ``@cuda.jit`` compiles lazily.
"""

from __future__ import annotations

from gpudoctor.lint.knowledge.framework import Framework
from gpudoctor.lint.knowledge.table import DRIVER_INIT, GPU_OBJECT, INERT, RUNTIME_INIT, Api

FW = "numba"
DOCS = "https://numba.readthedocs.io/en/stable/cuda/device-management.html"
MEM = "https://numba.readthedocs.io/en/stable/cuda/memory.html"


def _api(pattern: str, effect: str, source: str, attribute: bool = False) -> Api:
    return Api(pattern, effect, FW, source, attribute)


TABLE = (
    _api("numba.cuda.*", INERT, "numba.cuda helpers not listed here are lazy"),
    _api("numba.cuda.gpus", DRIVER_INIT, DOCS, attribute=True),
    _api("numba.cuda.is_available", DRIVER_INIT, DOCS),
    _api("numba.cuda.detect", DRIVER_INIT, DOCS),
    _api("numba.cuda.list_devices", DRIVER_INIT, DOCS),
    _api("numba.cuda.select_device", RUNTIME_INIT, DOCS),
    _api("numba.cuda.get_current_device", RUNTIME_INIT, DOCS),
    _api("numba.cuda.current_context", RUNTIME_INIT, DOCS),
    _api("numba.cuda.synchronize", RUNTIME_INIT, DOCS),
    _api("numba.cuda.stream", RUNTIME_INIT, MEM),
    _api("numba.cuda.to_device", GPU_OBJECT, MEM),
    _api("numba.cuda.device_array", GPU_OBJECT, MEM),
    _api("numba.cuda.device_array_like", GPU_OBJECT, MEM),
    _api("numba.cuda.mapped_array", GPU_OBJECT, MEM),
    _api("numba.cuda.pinned_array", RUNTIME_INIT, MEM),
    _api("numba.cuda.jit", INERT, "compiles on first launch"),
)

FRAMEWORK = Framework(
    name=FW,
    display="Numba CUDA",
    modules=("numba",),
    table=TABLE,
    consequence='fail with "CUDA initialized before forking"',
    host_copy="d.copy_to_host()",
    # ``get_ipc_handle()`` returns an IpcArrayHandle, a host object made to be pickled and
    # opened in another process on the same machine: the way to share device memory, not a
    # device array (numba-cuda 0.30 numba/cuda/cudadrv/devicearray.py). There is no
    # module-level ``numba.cuda.get_ipc_handle``; ``cuda.open_ipc_array`` opens a handle.
    host_methods=frozenset({"copy_to_host", "get_ipc_handle"}),
    kernel_decorators=("numba.cuda.jit",),
)

"""Numba CUDA: device queries initialize the driver; transfers and launches the context.

Numba detects fork after init itself: "CUDA initialized before forking"
(numba/cuda/cudadrv/driver.py). ``@cuda.jit`` compiles lazily.

Only ``numba.cuda`` is the GPU framework: ``import numba`` and ``@numba.njit`` are the
CPU compiler. The CUDA target now lives in the ``numba-cuda`` package (which redirects
``numba.cuda`` to itself) and, for new development, ``numba-cuda-mlir``
(``from numba_cuda_mlir import cuda``); both keep numba.cuda's API and its fork check
(numba-cuda v0.30 README and cudadrv/driver.py; numba-cuda-mlir README).
"""

from __future__ import annotations

from gpudoctor.knowledge.framework import Framework, Runtime
from gpudoctor.knowledge.table import DRIVER_INIT, GPU_OBJECT, INERT, RUNTIME_INIT, Api

FW = "numba"
DOCS = "https://numba.readthedocs.io/en/stable/cuda/device-management.html"
MEM = "https://numba.readthedocs.io/en/stable/cuda/memory.html"
NUMBA_CUDA = "numba-cuda v0.30.4"


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
    # numba-cuda v0.30 numba/cuda/api.py: these need the current context (require_context
    # or current_context()).
    *(_api(f"numba.cuda.{name}", GPU_OBJECT, NUMBA_CUDA + " api.py")
      for name in ("managed_array", "mapped_array_like", "from_cuda_array_interface", "open_ipc_array")),
    *(_api(f"numba.cuda.{name}", RUNTIME_INIT, NUMBA_CUDA + " api.py")
      for name in ("pinned_array_like", "default_stream", "legacy_default_stream", "per_thread_default_stream",
                   "external_stream", "event", "pinned", "mapped", "is_bfloat16_supported", "is_fp8_supported")),
)

FRAMEWORK = Framework(
    name=FW,
    display="Numba CUDA",
    modules=("numba.cuda", "numba_cuda", "numba_cuda_mlir"),
    runtimes=(Runtime("numba.cuda", "Numba CUDA", "Numba CUDA", cuda=True,
                      evidence="its CUDA driver object is initialized",
                      # (vars(): numba's Driver initializes CUDA from __getattr__ on a missing name)
                      seen=("numba.cuda.cudadrv.driver", ("driver", "is_inited"), "true")),),
    cuda_in_child='Numba raises "CUDA initialized before forking"',
    aliases=(("numba_cuda_mlir.cuda.", "numba.cuda."), ("numba_cuda.numba.cuda.", "numba.cuda.")),
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

"""PyCUDA: explicit driver init and contexts; ``import pycuda.autoinit`` does both at import.

A forked child of an initialized parent fails with "cuInit failed: initialization
error" (inducer/pycuda#137).
"""

from __future__ import annotations

from gpudoctor.knowledge.framework import Framework, Runtime
from gpudoctor.knowledge.table import DRIVER_INIT, GPU_OBJECT, INERT, RUNTIME_INIT, Api

FW = "pycuda"
DRIVER = "https://documen.tician.de/pycuda/driver.html"


def _api(pattern: str, effect: str, source: str) -> Api:
    return Api(pattern, effect, FW, source)


TABLE = (
    _api("pycuda.driver.*", INERT, DRIVER),
    _api("pycuda.driver.init", DRIVER_INIT, DRIVER),
    _api("pycuda.driver.Device.count", DRIVER_INIT, DRIVER),
    _api("pycuda.driver.Device.make_context", RUNTIME_INIT, DRIVER),
    _api("pycuda.driver.Context.*", RUNTIME_INIT, DRIVER),
    _api("pycuda.driver.mem_alloc", GPU_OBJECT, DRIVER),
    _api("pycuda.driver.to_device", GPU_OBJECT, DRIVER),
    _api("pycuda.driver.In", INERT, DRIVER),
    _api("pycuda.driver.Out", INERT, DRIVER),
    _api("pycuda.driver.InOut", INERT, DRIVER),
    _api("pycuda.gpuarray.*", GPU_OBJECT, "https://documen.tician.de/pycuda/array.html"),
    _api("pycuda.compiler.SourceModule", RUNTIME_INIT, "compiles and loads into the current context"),
    # PyCUDA 2026.1: both make a context current (pycuda/tools.py make_default_context;
    # Device.retain_primary_context in the driver module).
    _api("pycuda.tools.make_default_context", RUNTIME_INIT, "pycuda v2026.1 pycuda/tools.py"),
    _api("pycuda.driver.Device.retain_primary_context", RUNTIME_INIT, DRIVER),
)

# Importing these modules initializes CUDA at import time.
INITIALIZING_IMPORTS = (
    Api("pycuda.autoinit", RUNTIME_INIT, FW, "https://documen.tician.de/pycuda/util.html#module-pycuda.autoinit"),
    Api("pycuda.autoprimaryctx", RUNTIME_INIT, FW, "https://documen.tician.de/pycuda/util.html"),
    Api("pycuda.gl.autoinit", RUNTIME_INIT, FW, "pycuda v2026.1 pycuda/gl/autoinit.py (an OpenGL-sharing context)"),
)

FRAMEWORK = Framework(
    name=FW,
    display="PyCUDA",
    modules=("pycuda",),
    runtimes=(Runtime("pycuda", "PyCUDA", "PyCUDA", cuda=True, evidence="pycuda.autoinit is imported",
                      seen=("pycuda.autoinit", (), "loaded")),),
    table=TABLE,
    consequence='fail with "cuInit failed: initialization error"',
    host_copy="a.get()",
    host_methods=frozenset({"get"}),
    initializing_imports=INITIALIZING_IMPORTS,
)

"""JAX: the first device query or array op creates the backend (and preallocates 75 %).

After backend creation JAX warns on ``os.fork()`` ("JAX is multithreaded, so this will
likely lead to a deadlock", jax/_src/xla_bridge.py) and forked children can hang.
Transformations (``jit``, ``grad``, ``vmap``) are lazy and touch no device.
"""

from __future__ import annotations

from gpudoctor.lint.knowledge.framework import Framework
from gpudoctor.lint.knowledge.table import GPU_OBJECT, HOST_COPY, INERT, RUNTIME_INIT, Api

FW = "jax"
GPU_MEM = "https://docs.jax.dev/en/latest/gpu_memory_allocation.html"
FAQ = "https://docs.jax.dev/en/latest/faq.html"


def _api(pattern: str, effect: str, source: str) -> Api:
    return Api(pattern, effect, FW, source)


TABLE = (
    _api("jax.numpy.*", GPU_OBJECT, GPU_MEM + " (arrays are created on the default backend)"),
    _api("jax.random.*", GPU_OBJECT, "random keys and samples are device arrays"),
    _api("jax.nn.*", GPU_OBJECT, "ops on device arrays"),
    _api("jax.lax.*", GPU_OBJECT, "ops on device arrays"),
    _api("jax.scipy.*", GPU_OBJECT, "ops on device arrays"),
    _api("jax.device_put", GPU_OBJECT, FAQ),
    _api("jax.devices", RUNTIME_INIT, GPU_MEM + " (backend creation)"),
    _api("jax.local_devices", RUNTIME_INIT, GPU_MEM),
    _api("jax.device_count", RUNTIME_INIT, GPU_MEM),
    _api("jax.local_device_count", RUNTIME_INIT, GPU_MEM),
    _api("jax.default_backend", RUNTIME_INIT, GPU_MEM),
    _api("jax.extend.backend.get_backend", RUNTIME_INIT, GPU_MEM),
    _api("jax.device_get", HOST_COPY, FAQ),
    _api("jax.config.update", INERT, "configuration, read at backend creation"),
    _api("jax.jit", INERT, "lazy transformation"),
    _api("jax.grad", INERT, "lazy transformation"),
    _api("jax.value_and_grad", INERT, "lazy transformation"),
    _api("jax.vmap", INERT, "lazy transformation"),
    _api("jax.pmap", INERT, "lazy transformation"),
    _api("jax.tree_util.*", INERT, "pytree helpers"),
    _api("jax.tree.*", INERT, "pytree helpers"),
)

FRAMEWORK = Framework(
    name=FW,
    display="JAX",
    modules=("jax", "jaxlib"),
    table=TABLE,
    consequence="deadlock",
    host_copy="jax.device_get(x)",
    # GPU_MEM; JAX_PLATFORMS: https://docs.jax.dev/en/latest/installation.html
    environment=("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_CLIENT_MEM_FRACTION",
                 "XLA_PYTHON_CLIENT_ALLOCATOR", "JAX_PLATFORMS"),
    host_methods=frozenset({"tolist", "item", "__array__"}),
    reserves="preallocates 75% of GPU memory",
    memory_caps={
        "XLA_PYTHON_CLIENT_PREALLOCATE": frozenset({"false", "0"}),
        "XLA_PYTHON_CLIENT_MEM_FRACTION": None,
        "XLA_CLIENT_MEM_FRACTION": None,
        "XLA_PYTHON_CLIENT_ALLOCATOR": frozenset({"platform"}),
        "JAX_PLATFORMS": frozenset({"cpu"}),
    },
)

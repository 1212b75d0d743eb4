"""JAX: the first device query or array op creates the backend (and preallocates 75 %).

After backend creation JAX warns on ``os.fork()`` ("JAX is multithreaded, so this will
likely lead to a deadlock", jax/_src/xla_bridge.py) and forked children can hang.
Transformations (``jit``, ``grad``, ``vmap``) are lazy and touch no device; so are the
dtype helpers of ``jax.numpy``. Checked by running jax 0.10.2 on CPU (whether
``xla_bridge.backends_are_initialized()`` turned true) and reading jax 0.11's source.

Configuration is read at two moments: ``JAX_PLATFORMS`` and the other ``JAX_*`` flags
when ``jax`` is imported (jax/_src/config.py reads each flag's variable as it defines
it), the ``XLA_*`` variables when the backend is created. Some configuration must come
before the backend exists: ``jax.distributed.initialize()`` and
``jax.config.update("jax_num_cpu_devices", ...)`` then raise RuntimeError, and
``jax.config.update("jax_platforms", ...)`` is silently ignored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpudoctor.knowledge.framework import Framework, Runtime
from gpudoctor.knowledge.table import GPU_OBJECT, HOST_COPY, INERT, RUNTIME_INIT, TF_CONFIG, Api

if TYPE_CHECKING:
    from typing_extensions import Unpack  # (typing.Unpack is 3.11's: named for the type checker only)

    from gpudoctor.knowledge.table import Conditions

FW = "jax"
GPU_MEM = "https://docs.jax.dev/en/latest/gpu_memory_allocation.html"
FAQ = "https://docs.jax.dev/en/latest/faq.html"
RAN = "run on jax 0.10.2 (CPU): the backend stays uncreated"
BRIDGE = "jax 0.11 jax/_src/xla_bridge.py"


def _api(pattern: str, effect: str, source: str, **condition: Unpack[Conditions]) -> Api:
    return Api(pattern, effect, FW, source, **condition)


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
    # dtype helpers compute with NumPy dtypes and never reach a device.
    *(_api(f"jax.numpy.{name}", INERT, RAN)
      for name in ("dtype", "issubdtype", "isdtype", "result_type", "finfo", "iinfo", "promote_types", "can_cast")),
    _api("jax.process_index", RUNTIME_INIT, RAN.replace("stays uncreated", "is created")),
    _api("jax.process_count", RUNTIME_INIT, RAN.replace("stays uncreated", "is created")),
    _api("jax.make_mesh", RUNTIME_INIT, "builds a mesh of jax.devices()"),
    # Configuration that must come before the backend exists (see the module docstring);
    # other options are inert. Not ``jax_platform_name``: it is read on every backend
    # lookup (xla_bridge._get_backend_uncached), so set late it picks another of the
    # backends made (run: jax 0.10.2, the update after get_backend() took effect).
    _api("jax.config.update", TF_CONFIG, BRIDGE + " _validate_backend_not_initialized; jax_platforms: run",
         keys=frozenset({"jax_platforms", "jax_num_cpu_devices", "jax_cuda_visible_devices",
                         "jax_cpu_get_local_topology_timeout_minutes",
                         "jax_cpu_get_global_topology_timeout_minutes"})),
    _api("jax.distributed.initialize", TF_CONFIG, "jax 0.11 jax/_src/distributed.py (raises after backend init)"),
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
    # jaxlib's runtime extension (``jaxlib/_jax.so`` in jaxlib 0.10.2's wheel, xla_extension in
    # older ones), not any file under jaxlib/, which another library may map without JAX's
    # runtime (Keras maps ``jaxlib/cpu/_lapack.so`` for its linear algebra). The bootstrap
    # records "jax:<backend>"; a backend of CUDA or ROCm holds GPU state.
    runtimes=(Runtime("jax:", "JAX", "JAX", cuda=False, libraries=("xla_extension", "libxla", "jaxlib/_jax."),
                      evidence="a backend exists", seen=("jax._src.xla_bridge", ("_backends",), "keys")),),
    cuda_in_child="JAX warns (`os.fork() was called`) and its workers hang",
    cpu_pool="JAX's (XLA's) CPU thread pool",
    table=TABLE,
    consequence="deadlock",
    # Its backend's threads make a fork child deadlock on the CPU backend too.
    initialized="initialized its backend",
    host_copy="jax.device_get(x)",
    # GPU_MEM: read by the CUDA plugin when the backend is created (jaxlib/xla_client.py);
    # XLA_FLAGS then too (run: a device count forced after ``import jax`` still applies).
    environment=("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_CLIENT_MEM_FRACTION",
                 "XLA_PYTHON_CLIENT_ALLOCATOR", "XLA_FLAGS"),
    # jax/_src/config.py and xla_bridge.py read these as ``import jax`` defines its flags
    # (run: JAX_PLATFORMS written after the import leaves jax.config.jax_platforms None).
    import_environment=dict.fromkeys(("JAX_PLATFORMS", "JAX_PLATFORM_NAME", "JAX_CUDA_VISIBLE_DEVICES"), "jax"),
    host_methods=frozenset({"tolist", "item", "__array__"}),
    reserves="preallocates 75% of GPU memory",
    config_too_late="raises RuntimeError (jax_platforms: is silently ignored)",
    memory_caps={
        # jaxlib/xla_client.py: only these spellings turn preallocation off.
        "XLA_PYTHON_CLIENT_PREALLOCATE": frozenset({"false", "False", "0"}),
        "XLA_PYTHON_CLIENT_MEM_FRACTION": None,
        "XLA_CLIENT_MEM_FRACTION": None,
        "XLA_PYTHON_CLIENT_ALLOCATOR": frozenset({"platform"}),
        "JAX_PLATFORMS": frozenset({"cpu"}),
    },
)

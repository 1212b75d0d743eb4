"""Every lookup over the framework records, derived from them once per process.

The gate, the analysis, the rules and the probe read framework facts from here, never
from copies of their own: a variable or module added to a record reaches all of them.
"""

from __future__ import annotations

from functools import lru_cache

from gpudoctor.knowledge import (
    cuda_python,
    cupy,
    environment,
    jax,
    numba,
    processes,
    pycuda,
    tensorflow,
    torch,
    triton,
)
from gpudoctor.knowledge.framework import Framework
from gpudoctor.knowledge.table import TF_CONFIG, Api, ApiTable

RECORDS: tuple[Framework, ...] = (
    tensorflow.FRAMEWORK, cupy.FRAMEWORK, torch.FRAMEWORK, jax.FRAMEWORK, numba.FRAMEWORK, pycuda.FRAMEWORK,
    cuda_python.FRAMEWORK, triton.FRAMEWORK,
)
BY_NAME = {framework.name: framework for framework in RECORDS}
FRAMEWORKS = tuple(BY_NAME)
# Module -> framework (``keras`` is TensorFlow's, ``cupyx`` CuPy's; ``numba.cuda``, not
# ``numba``, is Numba's GPU framework).
FRAMEWORK_MODULES = {module: framework.name for framework in RECORDS for module in framework.modules}
DISPLAY = {framework.name: framework.display for framework in RECORDS}
# The top-level names of those modules: a package of the linted project named so is the
# framework's own tree (or a vendored copy), and the tables apply to its public modules.
FRAMEWORK_ROOTS = frozenset(module.split(".", 1)[0] for module in FRAMEWORK_MODULES)
# Environment variable -> the framework that reads it (None: the driver), and when:
# AT_IMPORT (``import jax``), AT_DRIVER (cuInit) or AT_RUNTIME (the framework builds its
# runtime). A write after that moment is ignored.
AT_IMPORT, AT_DRIVER, AT_RUNTIME = "import", "driver", "runtime"
READERS: dict[str, str | None] = {
    **dict.fromkeys(environment.DRIVER),
    **{var: framework.name for framework in RECORDS for var in framework.environment},
    **{var: framework.name for framework in RECORDS for var in framework.import_environment},
}
READ_AT: dict[str, str] = {
    **dict.fromkeys(environment.DRIVER, AT_DRIVER),
    **{var: AT_RUNTIME for framework in RECORDS for var in framework.environment},
    **{var: AT_IMPORT for framework in RECORDS for var in framework.import_environment},
}
# Variable read at import -> the module whose import reads it.
IMPORT_READERS = {var: module for framework in RECORDS for var, module in framework.import_environment.items()}
# Module -> (variable read at its import, value -> the framework its calls then belong to).
BACKEND_SWITCH = {module: switch for framework in RECORDS for module, switch in framework.backend_switch.items()}
ALIASES = tuple(alias for framework in RECORDS for alias in framework.aliases)
# Base class -> the method a call of an instance of a subclass runs (``forward``).
CALL_METHODS = {base: method for framework in RECORDS for base, method in framework.call_methods.items()}
# Base class -> its methods that return the object itself.
SELF_METHODS = {base: names for framework in RECORDS for base, names in framework.self_methods.items()}
# Initializing APIs that initialize nothing when a variable holds a value at the call:
# qualified name -> (variable, value); and those variables, which are read at each call, so
# that writing them is never "too late" (GD301 leaves them alone).
INIT_UNLESS: dict[str, tuple[str, str]] = {
    api: condition for framework in RECORDS for api, condition in framework.init_unless.items()}
CALL_TIME_VARIABLES = frozenset(var for var, _ in INIT_UNLESS.values())
# Every variable whose writes the analysis records (EnvWrite events).
WATCHED_VARIABLES = frozenset(READERS) | CALL_TIME_VARIABLES
# Qualified name -> framework, for factories and layers that allocate on the default device.
DEFAULT_DEVICE_FACTORIES = {
    name: framework.name for framework in RECORDS
    for name in (*framework.default_device_factories, *framework.default_device_modules)}
# Framework -> how its device objects are shared with another process (when not by a copy).
IPC_SHARING = {framework.name: framework.ipc_sharing for framework in RECORDS if framework.ipc_sharing}
# Methods of device objects that return host values (a host copy; a model's predictions).
HOST_METHODS = frozenset().union(*(framework.host_methods for framework in RECORDS))
HOST_RESULT_METHODS = frozenset().union(*(framework.host_result_methods for framework in RECORDS))
# Qualified name -> framework, for constructors whose ``with`` selects a device and for
# kernel decorators.
DEVICE_CONTEXTS = {name: framework.name for framework in RECORDS for name in framework.device_contexts}
KERNEL_DECORATORS = {name: framework.name for framework in RECORDS for name in framework.kernel_decorators}
DEVICE_TYPES = frozenset(framework.device_type for framework in RECORDS if framework.device_type)
# Frameworks whose values ``.cuda()``, ``.to("cuda")`` and ``device="cuda"`` place on the
# GPU; the first is the one such a call on a value of unknown type is credited to.
CUDA_PLACEMENT = tuple(framework.name for framework in RECORDS if framework.cuda_placement)
# The framework whose device configuration must precede its runtime (GD302), and the
# names of those configuration calls.
CONFIG_APIS = frozenset(api.pattern for framework in RECORDS for api in framework.table if api.effect == TF_CONFIG)
# How a configuration call shows in source text: its last name, or its last two for a
# plain verb (``config.update``, ``distributed.initialize``).
CONFIG_WORDS = tuple(dict.fromkeys(
    pattern.rsplit(".", 1)[-1] if "_" in pattern.rsplit(".", 1)[-1] else ".".join(pattern.split(".")[-2:])
    for pattern in sorted(CONFIG_APIS)))
CONFIG_FRAMEWORK = next(api.framework for framework in RECORDS for api in framework.table if api.effect == TF_CONFIG)
# The framework a DataLoader (processes.DATALOADER) belongs to.
DATALOADER_FRAMEWORK = FRAMEWORK_MODULES[
    next(name for name, kind in processes.APIS.items() if kind == processes.DATALOADER).split(".", 1)[0]]
# Every top-level name a framework is reached by: its modules, and the roots of every name
# its records mention. A module mentioning none of them uses no GPU framework.
GPU_WORDS = tuple(dict.fromkeys(
    name.split(".", 1)[0]
    for framework in RECORDS
    for name in (*framework.modules, *(api.pattern for api in framework.table),
                 *(alias for alias, _ in framework.aliases),
                 *(api.pattern for api in framework.initializing_imports), *framework.device_contexts,
                 *framework.kernel_decorators, *((framework.device_type,) if framework.device_type else ()))
))
_INITIALIZING_IMPORTS = {api.pattern: api for framework in RECORDS for api in framework.initializing_imports}


@lru_cache(maxsize=1)
def api_table() -> ApiTable:
    """Return the merged table of every framework's APIs."""
    return ApiTable((api for framework in RECORDS for api in framework.table), ALIASES)


def canonical(qualname: str) -> str:
    """The spelling the tables use for ``qualname`` (records' ``aliases``)."""
    for prefix, target in ALIASES:
        if qualname.startswith(prefix):
            return target + qualname[len(prefix):]
    return qualname


def initializing_import(module: str) -> Api | None:
    """Return the entry for a module whose import alone initializes CUDA."""
    return _INITIALIZING_IMPORTS.get(module)


def framework_of_module(qualname: str) -> str | None:
    """Return the framework a qualified name belongs to (``keras`` counts as TensorFlow),
    by its longest module prefix."""
    parts = qualname.split(".")
    for cut in range(min(len(parts), _DEEPEST_MODULE), 0, -1):
        found = FRAMEWORK_MODULES.get(".".join(parts[:cut]) if cut > 1 else parts[0])
        if found is not None:
            return found
    return None


_DEEPEST_MODULE = max(module.count(".") + 1 for module in FRAMEWORK_MODULES)

"""The record of one GPU framework: everything gpudoctor knows about it, in one place.

Each framework module holds one ``FRAMEWORK``; registry.py derives every lookup the gate,
the analysis, the rules and the probe use from those records, so that a fact written
once (an import root, an environment variable) reaches all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpudoctor.knowledge.table import Api


@dataclass(frozen=True)
class Runtime:
    """A runtime the probe sees in a process: recorded by the bootstrap when it is
    initialized there, or found loaded from the libraries the process maps."""

    id: str  # as the probe records it ("torch.cuda"); "jax:" stands for every "jax:<backend>"
    display: str  # a chart's legend ("PyTorch CUDA")
    said: str  # in a sentence, when it differs ("the CUDA driver (cuInit had run)")
    cuda: bool  # it holds CUDA state, which does not survive fork()
    # Parts of the file names of the shared libraries whose mapping means it is loaded
    # (loaded is not initialized: a mapped library says it was imported); "folder/start"
    # for a name beginning so in that folder.
    libraries: tuple[str, ...] = ()
    # What the bootstrap sees when it says the runtime is initialized, in words (a report's
    # evidence: "its eager context exists").
    evidence: str = "seen initialized"
    # How the bootstrap sees it, from ``sys.modules`` alone (it runs in the user's process,
    # imports nothing and calls nothing of the framework): (module, attributes read one
    # after another through ``vars()``, the test of the last value: "set" not None, "true"
    # truthy, "keys" a mapping whose keys are backends ("jax:<key>"), "loaded" the module
    # is imported). None: it is seen only as loaded, from the libraries mapped.
    seen: tuple[str, tuple[str, ...], str] | None = None


@dataclass(frozen=True)
class SharedByDescriptor:
    """How a framework sends shared memory between processes as a handle the receiver
    redeems with the sending process when it unpickles it (a file descriptor fetched from
    the sender's ``multiprocessing.resource_sharer``): the sender must still run then."""

    frames: tuple[str, ...]  # the library files a receiver's traceback passes through while it redeems one
    what: str  # what is sent so, in a sentence ("a tensor's storage")
    fix: str  # the framework's own ways out, to follow the general fix ("or ...")


@dataclass(frozen=True)
class Framework:
    """One framework's names, APIs and behaviour."""

    name: str  # the key of everything else (``Api.framework``, ``Init.framework``)
    display: str  # what messages and reports call it
    modules: tuple[str, ...]  # top-level modules that belong to it (``keras`` is TensorFlow's)
    table: tuple[Api, ...]  # its APIs and their effects (table.py)
    consequence: str  # what a forked child of an initialized parent will do (GD101)
    host_copy: str  # the call that copies one of its device objects to the host (GD201)
    # Variables its runtime reads once, when it initializes (a later write is ignored).
    environment: tuple[str, ...] = ()
    # Variables read once, when a module of the framework is imported: variable -> that
    # module. A write after the import is ignored even if no device was touched yet (JAX
    # reads its configuration so, Keras its backend).
    import_environment: Mapping[str, str] = field(default_factory=dict, hash=False)
    # Other spellings of its API: prefix -> the prefix its table is written under
    # (``numba_cuda_mlir.cuda.`` is ``numba.cuda.``).
    aliases: tuple[tuple[str, str], ...] = ()
    # Modules of its own whose calls belong to another framework when an environment
    # variable, read at their import, says so: module -> (variable, value -> framework).
    backend_switch: Mapping[str, tuple[str, Mapping[str, str]]] = field(default_factory=dict, hash=False)
    # Initializing APIs that read a variable each time they are called: pattern ->
    # (variable, value). A call made while ``os.environ`` holds that value initializes
    # nothing; a write after an init is not too late for the calls after it.
    init_unless: Mapping[str, tuple[str, str]] = field(default_factory=dict, hash=False)
    # Factories that allocate on the default device when called without ``device=``, once
    # a default device is set (``set_default_device``, a device used as a context manager).
    default_device_factories: tuple[str, ...] = ()
    # Layers whose constructor allocates parameters or buffers through those factories.
    default_device_modules: tuple[str, ...] = ()
    # How its device objects cross a process boundary when pickled, when that is not a
    # host copy (GD201): the receiver maps the same device memory. None: a host copy.
    ipc_sharing: str | None = None
    # Methods of its device objects that return a host value.
    host_methods: frozenset[str] = frozenset()
    # Methods of its device objects that run on the device and return host values
    # (a Keras model's ``fit`` and ``predict``).
    host_result_methods: frozenset[str] = frozenset()
    # Imports that initialize CUDA by themselves (``import pycuda.autoinit``).
    initializing_imports: tuple[Api, ...] = ()
    # Constructors whose ``with`` block selects (and so initializes) a device.
    device_contexts: tuple[str, ...] = ()
    # Decorators that make a function a CUDA kernel: calling it launches the kernel.
    kernel_decorators: tuple[str, ...] = ()
    # The constructor of a device descriptor (``torch.device("cuda")``), if it has one.
    device_type: str | None = None
    # Whether ``.cuda()``, ``.to("cuda")`` and ``device="cuda"`` put its values on the GPU:
    # placement read from argument values rather than from a name.
    cuda_placement: bool = False
    # How its runtime reserves GPU memory by default, when it takes (nearly) all of it
    # (GD401); None when it allocates as it goes.
    reserves: str | None = None
    # Environment settings that bound the reservation: variable -> the values that do,
    # spelled exactly as the framework compares them (None: any value does).
    memory_caps: Mapping[str, frozenset[str] | None] = field(default_factory=dict, hash=False)
    # What its initialization started, as messages say it ("after TensorFlow initialized its
    # runtime"): CUDA for a framework that exists to drive it; a runtime (thread pools, and
    # CUDA on a GPU build) for one whose fork hazard does not need a GPU.
    initialized: str = "initialized CUDA"
    # What a configuration call that must precede the runtime (TF_CONFIG) does after it.
    config_too_late: str = "raises RuntimeError"
    # Device configuration calls (last name) that bound the reservation.
    capping_config: frozenset[str] = frozenset()
    # The runtimes of it the probe tells apart (its CUDA state; its CPU runtime).
    runtimes: tuple[Runtime, ...] = ()
    # What a fork child of a parent where it initialized CUDA meets, as a clause
    # ("PyTorch raises ...": the probe's explanation of a fork after init).
    cuda_in_child: str | None = None
    # The CPU thread pool its ops run on, which a fork child does not get (a freeze with no
    # GPU at all); None when a forked child of a CPU-only parent is fine.
    cpu_pool: str | None = None
    # Shared memory it sends between processes as a handle redeemed with the sender when
    # received (None: it sends none so).
    shared_by_descriptor: SharedByDescriptor | None = None
    # Base classes whose instances, when called, run a method of the subclass: base ->
    # that method (``model(x)`` runs ``forward`` of a ``torch.nn.Module`` subclass).
    call_methods: Mapping[str, str] = field(default_factory=dict, hash=False)
    # Methods such a base defines that return the object itself (``model.to(device)``,
    # ``model.eval()``): base -> their names.
    self_methods: Mapping[str, frozenset[str]] = field(default_factory=dict, hash=False)

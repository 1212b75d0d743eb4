"""Abstract values: what a name may hold, as a set of atoms (empty set = unknown).

The analysis is a may-analysis: an ``if`` that binds a CuPy array in one branch and a
NumPy array in the other leaves both atoms on the name.
"""

from __future__ import annotations

from dataclasses import dataclass, field, is_dataclass, replace
from typing import TYPE_CHECKING

from gpudoctor.knowledge.processes import ProcessKind
from gpudoctor.lint.findings import Site

if TYPE_CHECKING:
    import libcst as cst
    from _typeshed import DataclassInstance

    from gpudoctor.lint.frontend.parsed import LazySite


@dataclass(frozen=True)
class Condition:
    """A test the analysis could not decide, and the side a branch took: code under it
    runs only when the test is true (``holds``) or false. A finding that depends on such
    code names the condition."""

    site: LazySite
    holds: bool
    # The test's source, shortened (condition_text), or the test's node to make it from
    # when a message first needs it: most conditions are never shown.
    source: object = field(compare=False)
    # For a test on the rank of a distributed job: its truth on each sample rank (ranks.py),
    # and the call made under it that led to the code it guards (None: the code is in the
    # branch itself). None for other tests.
    ranks: tuple[bool | None, ...] | None = field(default=None, compare=False)
    call: LazySite | None = field(default=None, compare=False)

    @property
    def text(self) -> str:
        if not isinstance(self.source, str):
            from gpudoctor.lint.frontend.conditions import condition_text

            object.__setattr__(self, "source", condition_text(self.source))  # type: ignore[arg-type]
        return str(self.source)

    def takes(self, rank: int) -> bool:
        """May the branch run on sample rank ``rank`` (undecided there: it may)?"""
        if self.ranks is None:
            return True
        value = self.ranks[rank]
        return value is None or value == self.holds

    def describe(self) -> str:
        text = self.text
        head, _, word = text.rpartition(": ")
        if text.startswith("if ") and word in ("return", "continue", "break", "raise"):
            text = head[3:]  # what follows ``if test: return`` (named so for GD501): the test
        return f"`{text}` is {'true' if self.holds else 'false'}"


Conditions = tuple[Condition, ...]


def distinguishes(ranks: tuple[bool | None, ...] | None) -> bool:
    """Does a test with these truths on the sample ranks (``Condition.ranks``) run its
    branch on some ranks of a distributed job and not on others?"""
    return ranks is not None and len(set(ranks)) > 1


@dataclass(frozen=True)
class ModRef:
    """A qualified name reached through imports (``cupy``, ``multiprocessing.Pool``)."""

    qualname: str


@dataclass(frozen=True)
class Str:
    value: str
    # The conditions under which a conditional expression gave this value (``"cuda" if
    # args.gpu else "cpu"``): carried to what the value does, never part of its identity.
    when: Conditions = field(default=(), compare=False)


@dataclass(frozen=True)
class Int:
    value: int


@dataclass(frozen=True)
class Bool:
    value: bool


@dataclass(frozen=True)
class GpuObj:
    """A device-resident object (CuPy array, CUDA tensor, TF tensor or model, ...)."""

    framework: str
    site: LazySite
    when: Conditions = field(default=(), compare=False)  # the undecided tests it was made under
    resident: bool = True  # False: bound to the runtime, not on the device (table.RUNTIME_OBJECT)


@dataclass(frozen=True)
class CudaDevice:
    """``torch.device("cuda")`` or a string naming a CUDA device."""

    when: Conditions = field(default=(), compare=False)


@dataclass(frozen=True)
class Container:
    """A list, tuple, dict, zip or comprehension: the union of what it holds.

    ``ordered`` keeps the position of each item for tuple and list literals, so that
    ``Process(args=(queue, data))`` binds ``data`` to the target's second parameter.
    """

    items: frozenset[Atom]
    ordered: tuple[frozenset[Atom], ...] = ()


@dataclass(frozen=True)
class ModuleObj:
    """A module of the checked project, by file."""

    path: str


# Where a function or class is defined, which decides whether another process can load it
# by name (pickle sends functions and classes as "module.qualname"): at the top level of
# its module; in the ``if __name__ == "__main__":`` block of the script (a spawned process
# imports the script without running that block); inside a function or method.
MODULE_SCOPE = "module"
MAIN_BLOCK_SCOPE = "main-block"
LOCAL_SCOPE = "local"


@dataclass(frozen=True)
class FuncRef:
    """A function, method or lambda of the checked project."""

    module: str  # the file's path
    qualname: str
    node: cst.FunctionDef | cst.Lambda
    bound: tuple[frozenset[Atom], ...] = ()  # partial() / bound self
    cuda_kernel: str | None = None  # the framework whose kernel decorator it carries (registry.KERNEL_DECORATORS)
    closure: tuple[tuple[str, frozenset[Atom]], ...] = ()  # enclosing names a nested def uses
    scope: str = MODULE_SCOPE  # where it is defined (not part of its identity)

    def __hash__(self) -> int:
        # Not the node: a function read back from a module summary (summaries.py) is
        # hashed, and put in sets, without its module being parsed.
        return hash((self.module, self.qualname, self.bound, self.closure))

    def __getattr__(self, name: str) -> object:
        return _materialise(self, name)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, FuncRef) and self.node is other.node
            and self.module == other.module and self.bound == other.bound
            and self.closure == other.closure
        )


@dataclass(frozen=True)
class ClassRef:
    """A class of the checked project, with the qualified names of its bases."""

    module: str
    qualname: str
    node: cst.ClassDef
    bases: tuple[str, ...]
    scope: str = MODULE_SCOPE  # where it is defined (not part of its identity)

    def __hash__(self) -> int:
        return hash((self.module, self.qualname))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClassRef) and self.node is other.node

    def __getattr__(self, name: str) -> object:
        return _materialise(self, name)


def _materialise(ref: object, name: str) -> object:
    """The node of a function or class read back from a module summary, found in its
    module's tree when first asked for (parsing the module then): Python calls this only
    for an attribute the object lacks, so a reference made by the walk itself costs
    nothing more. ``_locate`` (set by summaries.py) finds the node."""
    locate = ref.__dict__.get("_locate") if name == "node" else None
    if locate is None:
        raise AttributeError(name)
    node = locate()
    object.__setattr__(ref, "node", node)
    return node


@dataclass(frozen=True)
class Instance:
    cls: ClassRef


@dataclass(frozen=True)
class Super:
    """``super()`` in a method of ``owner``: attributes are looked up in the bases of
    ``owner`` and bound to ``instance`` (the method's ``self``, or its class)."""

    owner: ClassRef
    instance: Instance | ClassRef


@dataclass(frozen=True)
class Options:
    """Command-line options: an ``argparse.ArgumentParser`` being given its arguments, or
    the namespace its ``parse_args()`` returns (``parsed``). What it holds: the string
    defaults that name a CUDA device (``add_argument("--device", default="cuda")``), by
    destination. Only those: a flag's or a count's default is one run's value among
    others, and deciding a test by it would hide what the other runs do."""

    defaults: tuple[tuple[str, str], ...] = ()
    parsed: bool = False


@dataclass(frozen=True)
class MpContext:
    """A multiprocessing context; ``method`` None means the platform default."""

    method: str | None


@dataclass(frozen=True)
class PoolObj:
    """A process pool or executor; identified by its constructor site."""

    kind: ProcessKind  # POOL, EXECUTOR or THREAD_POOL
    method: str | None
    site: LazySite
    initializer: tuple[FuncRef, ...]
    initargs: frozenset[Atom]
    workers: int | None
    entered: bool = False  # a pool built on entering its ``with`` block (joblib's Parallel)


@dataclass(frozen=True)
class ProcessObj:
    method: str | None
    site: LazySite
    targets: tuple[FuncRef, ...]
    args: tuple[frozenset[Atom], ...]
    daemon: bool


@dataclass(frozen=True)
class QueueObj:
    method: str | None


@dataclass(frozen=True)
class ThreadObj:
    site: LazySite
    targets: tuple[FuncRef, ...] = ()
    args: frozenset[Atom] = frozenset()
    api: str = "threading.Thread"  # what makes the thread (a library's listener starts its own)


@dataclass(frozen=True)
class LoaderObj:
    """A DataLoader, with what decides what iterating it does in this process."""

    site: LazySite
    pin_memory: bool  # surely ``pin_memory=True``
    workers: int | None  # ``num_workers`` when it is a literal
    persistent: bool  # surely ``persistent_workers=True``: its iterator lives with it


@dataclass(frozen=True)
class Compiled:
    """What a lazy compiler wrapped (registry: processes.COMPILER): calling it compiles."""

    site: LazySite  # where it was compiled (the call or the decorator)


@dataclass(frozen=True)
class Compiler:
    """A compiler called with options only (``@compile(mode=...)``): a decorator."""

    site: LazySite


@dataclass(frozen=True)
class Deferred:
    """A call recorded to run later in a worker: ``joblib.delayed(f)`` (``args`` None),
    then ``delayed(f)(*args)`` (the values per position, and what the other parameters
    may receive)."""

    funcs: tuple[FuncRef, ...]
    args: tuple[frozenset[Atom], ...] | None = None
    rest: frozenset[Atom] = frozenset()


@dataclass(frozen=True)
class JoblibConfig:
    """``joblib.parallel_backend(...)``/``parallel_config(...)``: in its ``with`` block, the
    backend of ``Parallel`` objects that name none. ``backend``: the start method (in a
    1-tuple, None meaning the default context) when it is a multiprocessing Pool, else
    None; ``jobs``: their ``n_jobs`` (None: unset, 0: unknown)."""

    backend: tuple[str | None] | None
    jobs: int | None


@dataclass(frozen=True)
class ForkPid:
    """The return value of ``os.fork()``: 0 in the child."""

    site: LazySite


@dataclass(frozen=True)
class SavedEnv:
    """The value an environment variable held when the code read it (``os.environ.get``,
    ``os.getenv``, ``os.environ[...]``, ``os.environ.pop``): writing it back to the same
    variable restores it rather than configures anything."""

    var: str


@dataclass(frozen=True)
class Opaque:
    """Something the analysis cannot name, beside values it can: the mark an unknown
    value (the empty set) leaves when it is joined with known ones. ``x = cfg.flag``
    then ``if c: x = True`` leaves ``x`` True or unknown, not surely True; without the
    mark the join was ``{True}``, and the branch of a later ``if x:`` taken for dead."""


Atom = (ModRef | ModuleObj | Str | Int | Bool | GpuObj | CudaDevice | Container | FuncRef | ClassRef | Instance
        | Super | MpContext | PoolObj | ProcessObj | QueueObj | ThreadObj | LoaderObj | Compiled | Compiler | ForkPid
        | Deferred | JoblibConfig | SavedEnv | Opaque | Options)
Value = frozenset[Atom]
UNKNOWN: frozenset[Atom] = frozenset()
SOME_UNKNOWN: frozenset[Atom] = frozenset((Opaque(),))
# The name under which a scope's environment holds the default device factories allocate
# on (set_default_device, a device used as a context manager): not an identifier, so no
# code can bind it, and starting with "_" so that ``from m import *`` does not copy it.
DEFAULT_DEVICE = "_<default device>"
# The name under which a class's namespace holds what a dataclass field's
# ``default_factory`` is (followed by the field's name): not an identifier either.
FACTORY_PREFIX = "_<default factory>"
# The name under which a scope holds an item written by constant keys (followed by the
# name and its keys: ``_<item>cfg['training']['workers']``), see Evaluator.item_key.
ITEM_PREFIX = "_<item>"


def ordered(value: frozenset[Atom]) -> list[Atom] | frozenset[Atom]:
    """The atoms of ``value`` in an order that is the same on every run.

    A set's order follows the hashes of its members, and those change from run to run
    (strings hash with a per-process seed, functions by address): where the atoms of a
    value each emit events, iterating the set itself would make the findings depend on
    the run. Values of one atom, almost all of them, are returned as they are."""
    if len(value) < 2:
        return value
    return sorted(value, key=_atom_key)


def _atom_key(atom: DataclassInstance) -> str:
    if isinstance(atom, (FuncRef, ClassRef)):
        return f"{type(atom).__name__}:{atom.module}:{atom.qualname}:{_part(getattr(atom, 'bound', ()))}"
    return f"{type(atom).__name__}:" + "|".join(_part(getattr(atom, name)) for name in _fields(type(atom)))


def _part(value: object) -> str:
    if value is None or isinstance(value, (str, int, bool)):
        return str(value)
    if isinstance(value, Site):
        return f"{value.path}:{value.row}:{value.col}"
    if isinstance(value, tuple):
        return "(" + ",".join(_part(item) for item in value) + ")"
    if isinstance(value, frozenset):
        return "{" + ",".join(sorted(_part(item) for item in value)) + "}" if len(value) < 8 else f"{{{len(value)}}}"
    if is_dataclass(value) and not isinstance(value, type):
        return _atom_key(value)
    return ""


_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(kind: type[DataclassInstance]) -> tuple[str, ...]:
    names = _FIELDS.get(kind)
    if names is None:
        names = _FIELDS[kind] = tuple(name for name in kind.__dataclass_fields__ if name != "node")
    return names


def one(atom: Atom) -> frozenset[Atom]:
    return frozenset((atom,))


def join(*values: frozenset[Atom]) -> frozenset[Atom]:
    """What a name holds where ways that left it these values meet (branches, loop
    iterations, ``a or b``): their union, marked as possibly something unknown when one
    of them is unknown and another is not (see Opaque)."""
    joined = frozenset().union(*values)
    if not joined - SOME_UNKNOWN:
        return UNKNOWN
    if not all(values):
        return joined | SOME_UNKNOWN
    return joined


def elements(value: frozenset[Atom]) -> frozenset[Atom]:
    """Return what iterating over ``value`` may yield."""
    out: set[Atom] = set()
    for atom in value:
        if isinstance(atom, Container):
            out.update(atom.items)
        elif isinstance(atom, GpuObj):
            out.add(atom)  # rows of a device array are device arrays
    return frozenset(out)


def gpu_objects(value: frozenset[Atom], depth: int = 3) -> list[GpuObj]:
    """Return the device objects in ``value``, looking into containers and into what a
    function carries with it (a partial's arguments, a closure's captured objects)."""
    found: list[GpuObj] = []
    for atom in value:
        if isinstance(atom, GpuObj):
            found.append(atom)
        elif isinstance(atom, Container) and depth > 0:
            found.extend(gpu_objects(atom.items, depth - 1))
        elif isinstance(atom, FuncRef) and depth > 0 and (atom.closure or atom.bound):
            for held in (*atom.bound, *(v for _, v in atom.closure)):
                found.extend(gpu_objects(held, depth - 1))
    return found


def container(*values: frozenset[Atom], ordered: bool = False) -> frozenset[Atom]:
    items = frozenset().union(*values) if values else frozenset()
    return one(Container(frozenset(_flatten(items)), tuple(values) if ordered else ()))


def positions(value: frozenset[Atom]) -> tuple[tuple[frozenset[Atom], ...], frozenset[Atom]]:
    """Split an argument tuple into per-position values and a value for any other position."""
    ordered = [a for a in value if isinstance(a, Container) and a.ordered]
    if len(ordered) == 1 and len(value) == 1:
        return ordered[0].ordered, UNKNOWN
    return (), elements(value)


def _flatten(items: frozenset[Atom], depth: int = 2) -> set[Atom]:
    # Nested containers are flattened past a small depth so values stay finite.
    out: set[Atom] = set()
    for atom in items:
        if isinstance(atom, Container) and depth <= 0:
            out.update(_flatten(atom.items, 0))
        elif isinstance(atom, Container):
            out.add(Container(frozenset(_flatten(atom.items, depth - 1))))
        else:
            out.add(atom)
    return out


def truth(value: frozenset[Atom]) -> bool | None:
    """True or False when the value is surely that boolean; None when it is not known."""
    if len(value) == 1:
        (atom,) = value
        if isinstance(atom, Bool):
            return atom.value
    return None


def cuda_conditions(value: frozenset[Atom]) -> Conditions:
    """When a value may name a CUDA device or not, the conditions under which it names one
    (from a conditional expression: ``"cuda" if args.gpu else "cpu"``); () when it surely
    does, or nothing says when."""
    cuda = [a for a in value if isinstance(a, CudaDevice) or (isinstance(a, Str) and a.value.startswith("cuda"))]
    if not cuda or len(cuda) == len(value - SOME_UNKNOWN) and not value & SOME_UNKNOWN:
        return ()
    if any(not a.when for a in cuda):
        return ()
    return min((a.when for a in cuda), key=len)


def with_conditions(value: frozenset[Atom], when: Conditions) -> frozenset[Atom]:
    """``value`` with its strings and devices marked as given under ``when``."""
    if not when:
        return value
    return frozenset(replace(a, when=a.when + when) if isinstance(a, (Str, CudaDevice)) else a for a in value)


def strings(value: frozenset[Atom]) -> set[str]:
    return {atom.value for atom in value if isinstance(atom, Str)}


def is_cuda(value: frozenset[Atom]) -> bool:
    """True if the value may name a CUDA device ("cuda", "cuda:0", torch.device("cuda"))."""
    return any(
        isinstance(atom, CudaDevice) or (isinstance(atom, Str) and atom.value.startswith("cuda"))
        for atom in value
    )


def literal_default(param: cst.Param, max_integer_chars: int) -> frozenset[Atom]:
    """The value of a parameter's default when it is a literal string or integer (of at
    most ``max_integer_chars``)."""
    import libcst as cst

    default = param.default
    from gpudoctor.lint.frontend.literals import integer_value, string_value

    if isinstance(default, cst.SimpleString) and isinstance(value := string_value(default), str):
        return one(Str(value))
    if isinstance(default, cst.Integer) and (number := integer_value(default.value, max_integer_chars)) is not None:
        return one(Int(number))
    return UNKNOWN

"""What a piece of code does, read from CPython's AST: the names it refers to, and whether
it starts processes, configures TensorFlow or writes the environment (see prescan.py)."""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from typing import Any

from gpudoctor.lint.knowledge import processes as P
from gpudoctor.lint.knowledge.registry import CONFIG_WORDS

_STARTS = frozenset({P.POOL, P.PROCESS, P.EXECUTOR, P.OS_FORK, P.SPAWN_LAUNCHER, P.DATALOADER, P.QUEUE, P.PIPE,
                     P.JOBLIB})
# Identifiers whose mention in code may start a process or talk to one (``mp.Pool``,
# ``ctx.Process``, ``class Worker(Process)``, ``os.fork()``, ``torch.multiprocessing.spawn``,
# ``mp.Queue``, joblib's ``Parallel``).
START_NAMES = frozenset(
    {name.rsplit(".", 1)[-1] for name, kind in P.APIS.items() if kind in _STARTS}
    | {name for name, kind in P.CONTEXT_METHODS.items() if kind in _STARTS}
) - {"DataLoader"}
# Configuration calls by their last name; a plain verb (``config.update``) counts only
# called on an object of that name (registry.CONFIG_WORDS).
CONFIG_NAMES = frozenset(word for word in CONFIG_WORDS if "." not in word)
CONFIG_CALLS = frozenset(tuple(word.split(".")) for word in CONFIG_WORDS if "." in word)
# Choosing how processes start acts on every process the code it calls starts (a helper
# module's pool forks after this file initialized the GPU); so does choosing what the
# forkserver imports before it forks them.
METHOD_NAMES = frozenset({"set_start_method"} | {name.rsplit(".", 1)[-1] for name, kind in P.APIS.items()
                                                 if kind == P.SET_PRELOAD})
ENV_WRITERS = frozenset({"setdefault", "update"})
# Methods of objects built elsewhere that start or feed processes: a function calling them
# acts as far as the elision of bodies is concerned.
USE_METHODS = P.POOL_TASK_METHODS | P.EXECUTOR_TASK_METHODS | {"start", "put", "put_nowait", "send"}
_SPECIAL = START_NAMES | CONFIG_NAMES | METHOD_NAMES | {"putenv"}

class Scan:
    """Names referred to, and whether the code starts processes, configures TF or writes env."""

    def __init__(self, imports: list[tuple[str, str, int, str | None]]) -> None:
        self.refs: set[str] = set()  # identifiers, and strings that may name an attribute
        # Identifiers the code reads (names and attributes), not counting import statements
        # nor strings: what an importer must mention to use a name it imports.
        self.loads: set[str] = set()
        self.calls: set[str] = set()  # the last names of the callables called
        self.starts = False
        self.config = False
        self.env_write = False
        self.uses = False  # calls a method that starts or feeds processes built elsewhere
        self.imports = imports

    def merge(self, other: Scan) -> None:
        """Count what ``other`` found as found here."""
        self.refs |= other.refs
        self.loads |= other.loads
        self.calls |= other.calls
        self.starts |= other.starts
        self.config |= other.config
        self.env_write |= other.env_write
        self.uses |= other.uses

    @property
    def sites(self) -> bool:
        """Is there code a finding can be reported at (see Prescan.sites)?"""
        return self.starts or self.config or self.env_write or self.uses

    def acts(self, env_keys: bool) -> bool:
        """Starts a process, configures TF, or writes the environment of a file naming GPU variables."""
        return self.starts or self.config or (self.env_write and env_keys)

    def scan(self, root: ast.AST) -> None:
        # The names of this node alone: the flags only ever turn on, so the special names
        # are looked for among the new ones, and what was found before is not copied again
        # (a module of many statements, each scanned in turn, was quadratic in them).
        refs: set[str] = set()  # identifiers read: what the special names are looked for in
        bound: set[str] = set()  # identifiers of import statements (looked for too)
        strings: set[str] = set()
        # Each node is told apart by its exact type, once (cheaper than isinstance tests,
        # which the type checker could narrow): its fields are read as that type's.
        node: Any
        for node in _walk(root):
            kind = type(node)
            if kind is ast.Name:
                refs.add(node.id)
            elif kind is ast.Attribute:
                attr = node.attr
                refs.add(attr)
                if attr in USE_METHODS:
                    self.uses = True
                elif attr in ENV_WRITERS and _is_environ(node.value):
                    self.env_write = True
            elif kind is ast.Constant:
                value = node.value
                if type(value) is str and value.isidentifier():
                    strings.add(value)  # getattr(obj, "name")
            elif kind is ast.Call:
                func = node.func
                name = getattr(func, "id", None) or getattr(func, "attr", None)
                if name is not None:
                    self.calls.add(name)
                if name == "DataLoader" and _may_have_workers(node):
                    self.starts = True
                elif CONFIG_CALLS and kind is ast.Call and type(func) is ast.Attribute:
                    owner = func.value
                    owner_name = getattr(owner, "id", None) or getattr(owner, "attr", None)
                    if (owner_name, name) in CONFIG_CALLS:
                        self.config = True
            elif kind is ast.Subscript:
                if type(node.ctx) is ast.Store and _is_environ(node.value):
                    self.env_write = True
            elif kind is ast.AugAssign:
                if _is_environ(node.target):
                    self.env_write = True  # os.environ |= {...}
            elif kind is ast.Import:
                for alias in node.names:
                    name = alias.asname or alias.name.split(".")[0]
                    bound.update((name, alias.name.rsplit(".", 1)[-1]))
                    self.imports.append((name, alias.name, 0, None))
            elif kind is ast.ImportFrom:
                for alias in node.names:
                    if alias.name != "*":
                        bound.update((alias.asname or alias.name, alias.name))
                        self.imports.append((alias.asname or alias.name, node.module or "",
                                             node.level, alias.name))
        self.loads |= refs
        if bound:
            refs |= bound
        found = refs & _SPECIAL  # (not in strings: ``set_start_method("fork")`` forks nothing)
        if found & (START_NAMES | METHOD_NAMES):
            self.starts = True
        if found & CONFIG_NAMES:
            self.config = True
        if "putenv" in found:
            self.env_write = True
        self.refs |= refs
        self.refs |= strings


def _walk(root: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` (breadth first, same order) without the Load/Store context nodes, and
    about half again as fast: it is most of the cost of the gate's CPython stage."""
    todo = deque([root])
    pop, extend, append = todo.popleft, todo.extend, todo.append
    node_type = ast.AST
    while todo:
        node = pop()
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                extend(v for v in value if isinstance(v, node_type))
            elif isinstance(value, node_type) and name != "ctx":
                append(value)
        yield node


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "environ") or (
        isinstance(node, ast.Attribute) and node.attr == "environ")


def _may_have_workers(call: ast.Call) -> bool:
    """A DataLoader starts worker processes unless ``num_workers`` is absent or 0."""
    if len(call.args) >= 6 or any(isinstance(a, ast.Starred) for a in call.args):
        return True
    for keyword in call.keywords:
        if keyword.arg is None:
            return True  # **kwargs
        if keyword.arg == "num_workers":
            return not (isinstance(keyword.value, ast.Constant) and keyword.value.value == 0)
    return False

"""A fast first look at a file with CPython's parser, before libcst is paid for.

libcst builds a concrete tree much slower than CPython builds its AST (docs/performance.md,
"The prescan"). Two questions are answered here from CPython's AST instead:

- **Can a rule report anything in this file?** Only if its code (not its strings or
  comments) names a process start, a GPU environment variable write or a device
  configuration call. A file that only says "multiprocessing" in a docstring, or builds a
  ``ThreadPool``, is not analysed on its own.
- **Which functions can matter on their own?** In a linted file, those that act or can
  reach (by name) one that does; the others are not analysed as entry points.

Both read what a piece of code does (a ``Scan``): the names it refers to, and whether it
starts processes, configures TensorFlow or writes the environment.

libcst parses each top-level function and method of a top-level class separately, when the
analysis first needs it: the module is parsed with those bodies *elided* (one ``...``,
the rest of the body's lines dropped and remembered), and a body, when needed, is parsed
from its own lines, at its own line numbers and columns.

Everything here over-approximates: a name that might refer to a function keeps it.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.knowledge import distributed as D
from gpudoctor.knowledge import processes as P
from gpudoctor.knowledge.registry import CONFIG_WORDS, WATCHED_VARIABLES
from gpudoctor.lint.frontend.reading import split_lines
from gpudoctor.lint.frontend.text_facts import collectives_possible
from gpudoctor.lint.nesting import pinned

# CPython's parser gets Python's default room to recurse in: nesting it refuses at the
# default recursion limit is refused wherever the file is read from (the analysis runs
# with a raised limit: see lint/nesting.py).
PARSER_FRAMES = 1_000
_DIRECTIVE = re.compile(r"(?i:noqa:[\w \t,]*?\bGD\d)|gpudoctor:")

_STARTS = frozenset({P.POOL, P.PROCESS, P.EXECUTOR, P.OS_FORK, P.SPAWN_LAUNCHER, P.DATALOADER, P.QUEUE, P.PIPE,
                     P.JOBLIB, P.MANAGER})
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
_SPECIAL = START_NAMES | CONFIG_NAMES | METHOD_NAMES | D.WORDS | {"putenv"}
STRATEGY_NAMES = frozenset(D.STRATEGY_WORDS)
COLLECTIVE_NAMES = D.WORDS - STRATEGY_NAMES

class Scan:
    """Names referred to, and whether the code starts processes, configures TF or writes env."""

    def __init__(self, imports: list[tuple[str, str, int, str | None]], collectives: bool = True) -> None:
        # Whether the file may call collectives at all (it imports a module that has them:
        # text_facts.collectives_possible); when not, their names mean something else.
        self.collectives = collectives
        self.refs: set[str] = set()  # identifiers, and strings that may name an attribute
        # Identifiers the code reads (names and attributes), not counting import statements
        # nor strings: what an importer must mention to use a name it imports.
        self.loads: set[str] = set()
        self.calls: set[str] = set()  # the last names of the callables called
        self.starts = False
        self.config = False
        self.env_write = False
        self.uses = False  # calls a method that starts or feeds processes built elsewhere
        self.collective = False  # names a collective of a distributed job (knowledge/distributed.py)
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
        self.collective |= other.collective

    @property
    def sites(self) -> bool:
        """Is there code a finding can be reported at (see Prescan.sites)?"""
        return self.starts or self.config or self.env_write or self.uses or self.collective

    def acts(self, env_keys: bool) -> bool:
        """Starts a process, configures TF, or writes the environment of a file naming GPU variables."""
        return self.starts or self.config or self.collective or (self.env_write and env_keys)

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
                    if name in STRATEGY_NAMES:
                        self.collective = True  # made here (an isinstance test names it too)
                if name == "DataLoader" and _may_have_workers(node):
                    self.starts = True
                elif name in P.LIBRARY_POOL_BY_NAME and node.keywords and \
                        any(k.arg == P.LIBRARY_POOL_BY_NAME[name].workers for k in node.keywords):
                    self.starts = True  # ``dataset.map(f, num_proc=8)``
                elif CONFIG_CALLS and kind is ast.Call and type(func) is ast.Attribute:
                    owner = func.value
                    owner_name = getattr(owner, "id", None) or getattr(owner, "attr", None)
                    if (owner_name, name) in CONFIG_CALLS:
                        self.config = True
                    elif name in D.GENERIC_NAMES and owner_name in D.OWNER_WORDS and self.collectives:
                        self.collective = True
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
        if self.collectives and found & COLLECTIVE_NAMES:
            self.collective = True
        if "putenv" in found:
            self.env_write = True
        self.refs |= refs
        self.refs |= strings


def _walk(root: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` (breadth first, same order) without the Load/Store context nodes, and
    faster: it is most of the prescan's cost (docs/performance.md, "The prescan")."""
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


@dataclass
class Unit:
    """A function whose body may be elided: a top-level def or a method of a top-level class."""

    name: str
    def_row: int  # the ``def`` line (decorators are above it and stay)
    body_row: int  # first line of the body
    end_row: int
    indent: str  # the body's indentation, for the ``...`` that replaces it
    method: bool
    acts: bool = False  # starts, feeds or configures processes or the GPU environment
    file_acts: bool = False  # starts or configures itself: the file is worth linting
    refs: set[str] = field(default_factory=set)
    owner: str = ""  # a method's class
    sites: bool = False  # has code a finding can be reported at (see Prescan.sites)

    def __reduce__(self) -> tuple[type[Unit], tuple[object, ...]]:
        # Pickled as its fields (see Prescan.__getstate__): faster than a dict of them.
        return (Unit, (self.name, self.def_row, self.body_row, self.end_row, self.indent, self.method,
                       self.acts, self.file_acts, self.refs, self.owner, self.sites))


# Names -> the units referring to them, the methods of each class, the subclasses of each
# base, and the names each top-level statement reading them binds (see Prescan.reaching).
_Index = tuple[dict[str, list[int]], dict[str, list[int]], dict[str, list[str]], dict[str, list[set[str]]]]


class Prescan:
    """What the CPython AST says about one file; the names in it are read when first asked for."""

    def __init__(self, text: str, tree: ast.Module) -> None:
        self._text = text
        self._tree: ast.Module | None = tree
        lines = split_lines(text)
        self.units: list[Unit] = []
        self._bodies: list[list[ast.stmt]] = []
        self._outside: list[ast.AST] = []
        self._bases: list[tuple[str, list[ast.AST]]] = []  # each top-level class's bases
        self._statements: list[ast.stmt] = []  # the top level's own statements (not def, class)
        self._decorators: set[str] = set()  # names applied as decorators at the top level
        # The first row of each top-level statement as libcst sees them: statements on one
        # line (``a = 1; b = 2``) are one libcst statement.
        self.top_rows: list[int] = []
        # The rows where a long module may be cut into pieces to parse (chunked.py): the
        # first row of each top-level statement, its decorators included.
        self.cut_rows: list[int] = []
        for statement in tree.body:
            if not self.top_rows or statement.lineno != self.top_rows[-1]:
                self.top_rows.append(statement.lineno)
                decorators = getattr(statement, "decorator_list", ())
                self.cut_rows.append(min([d.lineno for d in decorators], default=statement.lineno))
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.units.append(_unit(statement, lines, method=False, outside=self._outside))
                self._bodies.append(statement.body)
            elif isinstance(statement, ast.ClassDef):
                self._outside.extend(statement.decorator_list)
                self._bases.append((statement.name, [*statement.bases, *statement.keywords]))
                for member in statement.body:
                    if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.units.append(_unit(member, lines, method=True, outside=self._outside,
                                                owner=statement.name))
                        self._decorators.update(_applied(member))
                        self._bodies.append(member.body)
                    else:
                        self._outside.append(member)
            else:
                self._outside.append(statement)
                self._statements.append(statement)
            self._decorators.update(_applied(statement))
        self._acts: bool | None = None
        self._names: set[str] = set()
        self._used: set[str] = set()
        self._top_used: set[str] = set()  # what the code outside the units reads
        self._sites = False
        self._top_calls: set[str] = set()  # called by the top level (decorators included)
        self._top_sites = False
        self._bindings: list[tuple[set[str], set[str]]] = []  # top-level statement: (names read, names bound)
        self._class_bases: dict[str, set[str]] = {}  # class -> the names its bases read
        self._index: _Index | None = None  # see reaching
        # Every import, anywhere in the file: (name it binds, module, relative level, member).
        self._imports: list[tuple[str, str, int, str | None]] = []

    @property
    def acts(self) -> bool:
        """Can a rule report something in this file?"""
        self._scan()
        return bool(self._acts)

    @property
    def imports(self) -> list[tuple[str, str, int, str | None]]:
        self._scan()
        return self._imports

    @property
    def sites(self) -> bool:
        """Has the file code a finding can be reported at, whoever's analysis reaches it: a
        process start, a task or object handed to a process, a device configuration, an
        environment write (of any variable: the name may come from another module)?"""
        self._scan()
        return self._sites

    @property
    def used(self) -> set[str]:
        """Every identifier the file's code reads (as a name or an attribute), import
        statements and strings left out: a name imported and never used is not among them."""
        self._scan()
        return self._used

    @property
    def top_used(self) -> set[str]:
        """The identifiers the code outside the units reads (the top level, class bodies,
        decorators and bases): what importing the file runs, as ``used`` is for the file."""
        self._scan()
        return self._top_used

    @property
    def names(self) -> set[str]:
        """Every name the file's code refers to."""
        self._scan()
        return self._names

    def _scan(self) -> None:
        if self._acts is not None:
            return
        text = self._text
        env_keys = any(key in text for key in WATCHED_VARIABLES)
        collectives = collectives_possible(text)
        scan = Scan(self._imports, collectives)
        for node in self._outside:
            scan.scan(node)
        top_calls, top_sites = scan.calls | self._decorators, scan.sites
        for statement in self._statements:
            read, bound = _reads_and_binds(statement)
            if read and bound:
                self._bindings.append((read, bound))
        for name, bases in self._bases:
            base_scan = Scan(self._imports, collectives)
            for node in bases:
                base_scan.scan(node)
            self._class_bases[name] = base_scan.loads
            scan.merge(base_scan)
        used = set(scan.loads)
        self._top_used = set(used)
        sites = scan.sites
        for unit, body in zip(self.units, self._bodies, strict=True):
            inner = Scan(self._imports, collectives)
            for statement in body:
                inner.scan(statement)
            unit.refs = inner.refs
            unit.sites = inner.sites
            used |= inner.loads
            sites = sites or inner.sites
            unit.file_acts = inner.acts(env_keys)
            unit.acts = unit.file_acts or inner.uses
        self._acts = (_DIRECTIVE.search(text) is not None or scan.acts(env_keys)
                      or any(u.file_acts for u in self.units))
        self._names = set(scan.refs).union(*(u.refs for u in self.units))
        self._used, self._sites, self._top_calls, self._top_sites = used, sites, top_calls, top_sites
        self._bodies, self._outside, self._bases, self._statements, self._tree = [], [], [], [], None

    def _build_index(self) -> _Index:
        """Who refers to each name: units, classes by their bases, top-level bindings."""
        referring: dict[str, list[int]] = {}
        methods: dict[str, list[int]] = {}
        for index, unit in enumerate(self.units):
            for name in unit.refs:
                referring.setdefault(name, []).append(index)
            if unit.owner:
                methods.setdefault(unit.owner, []).append(index)
        subclasses: dict[str, list[str]] = {}
        for cls, bases in self._class_bases.items():
            for name in bases:
                subclasses.setdefault(name, []).append(cls)
        binding: dict[str, list[set[str]]] = {}
        for read, bound in self._bindings:
            for name in read:
                binding.setdefault(name, []).append(bound)
        return referring, methods, subclasses, binding

    def reaching(self, seeds: set[str], own_sites: bool) -> tuple[set[str], bool, bool]:
        """Which names of this module lead to code a finding can be reported at, from
        ``seeds`` (names it imports that do) and, if ``own_sites``, its own such code.

        Returns the names, whether its own code uses them (a function, or the top level),
        and whether importing it runs such code (its top level calls one). By name, as
        ``entry_points``: a function that refers to one leads there, so does a class whose
        method or base does, and a module variable bound from one."""
        self._scan()
        if self._index is None:
            self._index = self._build_index()
        referring, methods, subclasses, binding = self._index
        reach = set(seeds)
        hit: set[int] = set()
        todo = [i for i, u in enumerate(self.units) if own_sites and u.sites]
        names = list(seeds)

        def add(name: str) -> None:
            if name and name not in reach:
                reach.add(name)
                names.append(name)

        while todo or names:
            while todo:
                index = todo.pop()
                if index not in hit:
                    hit.add(index)
                    add(self.units[index].name)
                    add(self.units[index].owner)
            while names:
                name = names.pop()
                todo.extend(referring.get(name, ()))
                for cls in subclasses.get(name, ()):  # its methods may call the base's
                    todo.extend(methods.get(cls, ()))
                    add(cls)
                for bound in binding.get(name, ()):
                    for other in bound:
                        add(other)
        top = (own_sites and self._top_sites) or not self._top_calls.isdisjoint(reach)
        return reach, bool(hit) or top, top

    def __getstate__(self) -> dict[str, object]:
        """A scanned Prescan travels to a worker process without its text and trees (the
        worker has the text; the answers no longer need the trees)."""
        self._scan()
        return {name: value for name, value in self.__dict__.items() if name not in ("_text", "_index")}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._text = ""
        self._index = None

    def elidable(self) -> list[Unit]:
        """The units whose bodies are parsed only when the analysis needs them.

        Every function whose body starts on a line of its own: a body is parsed (alone,
        at its own lines and columns) when the analysis first calls the function or runs
        it as an entry point. A libcst parse of the rest of the file is then small, and so
        is the cost of computing source positions for a finding in one function.
        """
        return [u for u in self.units if u.body_row > u.def_row]

    def entry_points(self, acting_names: frozenset[str] = frozenset()) -> list[Unit]:
        """The functions of a linted file worth analysing on their own.

        Those that act, that refer to ``acting_names`` (names imported from a project
        module that acts), or that refer by name to a function kept for these reasons
        (it may reach one that acts). The others have nothing to report on their own.
        """
        self._scan()
        # Kept names spread to the units that refer to them, each name once: a chain of
        # functions each calling the one before is not rescanned once per link.
        referring: dict[str, list[Unit]] = {}
        for unit in self.units:
            for name in unit.refs:
                referring.setdefault(name, []).append(unit)
        kept = {id(u) for u in self.units if u.acts or u.refs & acting_names}
        todo = [u.name for u in self.units if id(u) in kept]
        spread: set[str] = set()
        while todo:
            name = todo.pop()
            if name in spread:
                continue
            spread.add(name)
            for unit in referring.get(name, ()):
                if id(unit) not in kept:
                    kept.add(id(unit))
                    todo.append(unit.name)
        return [u for u in self.units if id(u) in kept]


class TooDeep(Exception):
    """CPython's own parser gives up on the file's nesting: no Python can run it, and
    libcst's parser slows down without bound on it, so it is not handed to libcst."""

    def __init__(self, message: str, row: int = 1, col: int = 0) -> None:
        super().__init__(message)
        self.message, self.row, self.col = message, row, col


def prescan(text: str) -> Prescan | None:
    """Scan ``text``; None if CPython cannot parse it (libcst then has the last word,
    since the target Python may accept syntax the running one does not).

    Raises TooDeep if CPython gives up on the nesting, which no version accepts.
    """
    try:
        # Python 3.12+ warns about the checked code (invalid escapes, "is" with a literal)
        # while compiling it; those warnings are the code's, not gpudoctor's output.
        with pinned(PARSER_FRAMES), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except RecursionError:
        raise TooDeep("cannot parse: the code is nested too deeply for Python's parser") from None
    except MemoryError:
        raise TooDeep("cannot parse: the file is too large for Python's parser") from None
    except SyntaxError as error:
        if "too many nested" in (error.msg or "") or "too complex" in (error.msg or ""):
            raise TooDeep(f"cannot parse: {error.msg}", error.lineno or 1,
                          max((error.offset or 1) - 1, 0)) from None
        return None
    except ValueError:
        return None
    _check_chains(text, tree)
    _check_lambdas(text, tree)
    return Prescan(text, tree)


# libcst nests an ``and``/``or`` chain one level per term, where CPython keeps it flat:
# a chain of 20,000 terms (valid Python, 120 kB) crashed libcst's parser with a segfault,
# taking the whole run with it. Past this many terms the file is refused as too deep.
MAX_CHAIN_TERMS = 2_000


def _check_chains(text: str, tree: ast.Module) -> None:
    """Raise TooDeep for an ``and``/``or`` chain longer than libcst's parser takes."""
    if text.count(" and ") + text.count(" or ") < MAX_CHAIN_TERMS:  # the usual case: no walk
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp) and len(node.values) > MAX_CHAIN_TERMS:
            raise TooDeep(f"cannot parse: an '{'and' if isinstance(node.op, ast.And) else 'or'}' chain of "
                          f"{len(node.values):,} terms, more than gpudoctor's parser takes ({MAX_CHAIN_TERMS:,})",
                          node.lineno, node.col_offset)



# libcst's tree of lambdas nested in one another grows as the square of their depth (1,000
# took 216 MB, 2,900 took 1.6 GB) where CPython's stays small; real code nests a few.
MAX_LAMBDA_NESTING = 500


def _check_lambdas(text: str, tree: ast.Module) -> None:
    """Raise TooDeep for lambdas nested deeper than libcst's parser takes."""
    if text.count("lambda") < MAX_LAMBDA_NESTING:  # the usual case: no walk
        return
    todo: list[tuple[ast.AST, int]] = [(tree, 0)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, ast.Lambda):
            depth += 1
            if depth > MAX_LAMBDA_NESTING:
                raise TooDeep(f"cannot parse: lambdas nested more than {MAX_LAMBDA_NESTING} deep, more than "
                              "gpudoctor's parser takes", node.lineno, node.col_offset)
        todo.extend((child, depth) for child in ast.iter_child_nodes(node))

def _applied(node: ast.stmt) -> set[str]:
    """The names of the decorators given by name (applied: called when the def runs)."""
    return {d.id if isinstance(d, ast.Name) else d.attr for d in getattr(node, "decorator_list", ())
            if isinstance(d, (ast.Name, ast.Attribute))}


def _reads_and_binds(statement: ast.stmt) -> tuple[set[str], set[str]]:
    """The names a top-level statement reads and those it binds (imports left out)."""
    read: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) else read).add(node.id)
        elif isinstance(node, ast.Attribute):
            read.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)  # defined under an ``if`` or ``try``
    return read, bound


def _unit(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str], method: bool,
          outside: list[ast.AST], owner: str = "") -> Unit:
    # The header (decorators, defaults, annotations) runs where the def is: not elided.
    outside.extend(node.decorator_list)
    outside.extend(d for d in (*node.args.defaults, *node.args.kw_defaults) if d is not None)
    first = node.body[0]
    decorators = getattr(first, "decorator_list", None)
    if decorators:  # a decorated def or class opens the body: it starts at its first "@"
        row = min(d.lineno for d in decorators)
        line = lines[row - 1] if row - 1 < len(lines) else ""
        starts_line = line.lstrip(" \t\f").startswith("@")
    else:
        row = first.lineno
        line = lines[row - 1] if row - 1 < len(lines) else ""
        # ``col_offset`` counts UTF-8 bytes; the body starts its own line only if nothing
        # but indentation precedes it there.
        starts_line = not line.encode("utf-8")[: first.col_offset].strip()
    indent = line[: len(line) - len(line.lstrip(" \t\f"))]
    return Unit(node.name, node.lineno, row if starts_line else node.lineno, node.end_lineno or row,
                indent, method, owner=owner)

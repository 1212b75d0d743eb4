"""Module walks as plain data: what a later run reads of a module instead of walking it.

A walk (shared_walks.py) binds names to values and emits import-time events; another
module's analysis reads only those, and the modules, files and listings the walk depended
on. A summary writes them as JSON-ready lists, with no libcst node in them:

- a function or class is its module and its *place*: the path, child by child, from the
  module's tree down to its ``def`` or ``class`` statement, through compound statements and
  class bodies but never into a function's body. Read back, it is a FuncRef or ClassRef
  whose node is found (and its module parsed) only when something asks for it, a call
  into its body above all (values.py);
- a site is its rows and columns and its node's kind (source.StoredSite);
- an effect is written once per summary with the walk it first came from, so that the
  effects several summaries share are again one object when they are read back (an
  effect reached through two imports counts once: module_state.ModuleState.import_events).

A walk that holds anything else (a pool, a device object, a process start: values with
sites of their own) is not summarised; it is walked again. What a summary depends on, and
when it is believed, is the cache's business (cache.py): every file it read has the same
bytes, every listing the same names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import libcst as cst

from gpudoctor.knowledge.table import InitLevel
from gpudoctor.lint.analysis.events import (
    Collective,
    Context,
    DefaultDevice,
    DeviceChoice,
    Effect,
    EnvWrite,
    Event,
    Imported,
    Init,
    ProcessGroupInit,
    SetMethod,
    TfConfig,
)
from gpudoctor.lint.analysis.module_state import ModuleState
from gpudoctor.lint.analysis.shared_walks import Walked
from gpudoctor.lint.analysis.values import (
    Atom,
    Bool,
    ClassRef,
    Condition,
    Container,
    CudaDevice,
    FuncRef,
    Instance,
    Int,
    JoblibConfig,
    ModRef,
    ModuleObj,
    MpContext,
    Opaque,
    Options,
    QueueObj,
    SavedEnv,
    Str,
    Value,
)
from gpudoctor.lint.findings import Site
from gpudoctor.lint.frontend.parsed import LazySite, ParsedModule, StoredSite
from gpudoctor.lint.frontend.project_gate import Touched
from gpudoctor.lint.frontend.reading import ParseFailure

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.project import Project
    from gpudoctor.lint.analysis.shared_walks import _Memo

__all__ = ["NotPlain", "decode", "encode", "locate", "place_of"]


class NotPlain(Exception):
    """The walk holds something a summary does not write: it is walked again next time."""


# Statements a place goes through: a ``def`` or ``class`` is found in these, never in a
# function's body (what a function binds is not the module's).
_THROUGH = (cst.Module, cst.ClassDef, cst.If, cst.Else, cst.Try, cst.TryStar, cst.ExceptHandler,
            cst.ExceptStarHandler, cst.Finally, cst.With, cst.For, cst.While, cst.IndentedBlock)


def _places(parsed: ParsedModule) -> dict[int, tuple[int, ...]]:
    """The place of every ``def`` and ``class`` a summary can name in this tree, by node id
    (made once per tree)."""
    found: dict[int, tuple[int, ...]] | None = getattr(parsed, "_summary_places", None)
    if found is None:
        found = {}
        todo: list[tuple[cst.CSTNode, tuple[int, ...]]] = [(parsed.module, ())]
        while todo:
            node, place = todo.pop()
            for index, child in enumerate(node.children):
                if isinstance(child, (cst.FunctionDef, cst.ClassDef)):
                    found[id(child)] = (*place, index)
                if isinstance(child, _THROUGH):
                    todo.append((child, (*place, index)))
        parsed._summary_places = found  # type: ignore[attr-defined]
    return found


def place_of(project: Project, module: str, node: cst.CSTNode) -> tuple[int, ...] | None:
    """Where a function or class of ``module`` is (None: not where a summary can name it)."""
    parsed = project.parsed(project.path_of(module))
    return None if isinstance(parsed, ParseFailure) else _places(parsed).get(id(node))


def locate(project: Project, module: str, place: tuple[int, ...]) -> cst.CSTNode:
    """The node at ``place`` in ``module``'s tree (parsing the module if it was not)."""
    parsed = project.parsed(project.path_of(module))
    if isinstance(parsed, ParseFailure):  # the bytes the summary was made from parsed
        raise LookupError(f"{module} cannot be parsed")
    node: cst.CSTNode = parsed.module
    for index in place:
        node = node.children[index]
    return node


# -- writing -----------------------------------------------------------------------------

@dataclass
class _Writer:
    project: Project
    origins: dict[int, list[Any]]  # id(effect) -> the walk it first came from, and its index
    effects: list[Any]
    effect_index: dict[int, int]

    def value(self, value: Value) -> list[Any]:
        return [self.atom(atom) for atom in value]

    def atom(self, atom: Atom) -> list[Any]:  # noqa: PLR0911 - one case per kind of value
        if isinstance(atom, ModRef):
            return ["M", atom.qualname]
        if isinstance(atom, Str):
            return ["S", atom.value]
        if isinstance(atom, Bool):
            return ["B", atom.value]
        if isinstance(atom, Int):
            return ["I", str(atom.value)]
        if isinstance(atom, ModuleObj):
            return ["O", atom.path]
        if isinstance(atom, Opaque):
            return ["?"]
        if isinstance(atom, CudaDevice):
            return ["D"]
        if isinstance(atom, MpContext):
            return ["X", atom.method]
        if isinstance(atom, QueueObj):
            return ["Q", atom.method]
        if isinstance(atom, SavedEnv):
            return ["E", atom.var]
        if isinstance(atom, JoblibConfig):
            return ["J", None if atom.backend is None else list(atom.backend), atom.jobs]
        if isinstance(atom, Options):
            return ["A", [list(pair) for pair in atom.defaults], atom.parsed]
        if isinstance(atom, Container):
            return ["C", self.value(atom.items), [self.value(v) for v in atom.ordered]]
        if isinstance(atom, FuncRef):
            return ["F", atom.module, atom.qualname, self.place(atom.module, atom),
                    [self.value(v) for v in atom.bound], atom.cuda_kernel,
                    [[name, self.value(v)] for name, v in atom.closure], atom.scope]
        if isinstance(atom, ClassRef):
            return self.cls(atom)
        if isinstance(atom, Instance):
            return ["N", self.cls(atom.cls)]
        raise NotPlain(type(atom).__name__)

    def cls(self, cls: ClassRef) -> list[Any]:
        return ["K", cls.module, cls.qualname, self.place(cls.module, cls), list(cls.bases), cls.scope]

    def place(self, module: str, ref: FuncRef | ClassRef) -> list[int]:
        stored = ref.__dict__.get("_place")
        if stored is not None and "node" not in ref.__dict__:  # read back, never needed since
            return list(stored)
        place = place_of(self.project, module, ref.node)
        if place is None:
            raise NotPlain("a function or class defined where no place names it")
        return list(place)

    def site(self, site: LazySite | None) -> list[Any] | None:
        if site is None:
            return None
        if not isinstance(site, LazySite):
            raise NotPlain("a site that is not a node's")
        where = site.concrete()
        if where.cell is not None:
            raise NotPlain("a site in a notebook's cell")
        return [where.path, where.row, where.col, where.end_row, where.end_col, site.kind]

    def effect(self, effect: Effect) -> int:
        known = self.effect_index.get(id(effect))
        if known is not None:
            return known
        if isinstance(effect, Imported):
            body: list[Any] = ["Imported", effect.module, self.site(effect.site)]
        elif isinstance(effect, EnvWrite):
            body = ["EnvWrite", effect.var, self.value(effect.value), self.site(effect.site), effect.environ,
                    effect.keeps]
        elif isinstance(effect, Init):
            body = ["Init", effect.framework, effect.level.value, effect.api, self.site(effect.site),
                    None if effect.unless is None else list(effect.unless)]
        elif isinstance(effect, TfConfig):
            body = ["TfConfig", effect.api, self.site(effect.site), effect.swallowed, effect.framework]
        elif isinstance(effect, SetMethod):
            body = ["SetMethod", effect.method, self.site(effect.site), effect.force, effect.namespace]
        elif isinstance(effect, DefaultDevice):
            body = ["DefaultDevice", effect.cuda, self.site(effect.site)]
        elif isinstance(effect, Collective):
            body = ["Collective", effect.api, effect.kind, self.site(effect.site), effect.group, effect.device]
        elif isinstance(effect, ProcessGroupInit):
            body = ["ProcessGroupInit", effect.api, effect.backend, effect.device, self.site(effect.site)]
        elif isinstance(effect, DeviceChoice):
            body = ["DeviceChoice", effect.api, self.site(effect.site)]
        else:
            raise NotPlain(type(effect).__name__)
        origin = self.origins.get(id(effect))
        if origin is None:
            raise NotPlain("an effect of no walk")
        self.effects.append([origin, body])
        index = self.effect_index[id(effect)] = len(self.effects) - 1
        return index

    def event(self, event: Event) -> list[Any]:
        ctx = event.ctx
        return [self.effect(event.effect), ctx.import_time, ctx.in_loop, self.site(ctx.loop),
                [self.site(s) for s in ctx.fork_parent], [self.site(s) for s in ctx.fork_child],
                self.site(ctx.via), self.site(ctx.entry), ctx.main_block,
                [[c.text, self.site(c.site), c.holds, None if c.ranks is None else list(c.ranks), self.site(c.call)]
                 for c in ctx.conditions],
                [self.site(s) for s in ctx.threads]]


def origins(project: Project, made: list[tuple[Path, int, _Memo]]) -> dict[int, list[Any]]:
    """For each effect of the walks made in this run (or read back from summaries), the
    walk it first came from and its index there: effects that are one object in this run
    are one object again when their summaries are read back."""
    out: dict[int, list[Any]] = {}
    for key, token in project.summary_parts.items():
        if isinstance(key, tuple) and key[0] == "origin":
            out[key[1]] = token  # type: ignore[assignment]
    for path, depth, memo in made:
        state = memo.walked.state
        if isinstance(state, ModuleState):
            for index, event in enumerate(state.import_events):
                out.setdefault(id(event.effect), [str(path), depth, index])
    return out


def encode(project: Project, path: Path, depth: int, memo: _Memo,
           origin_of: dict[int, list[Any]]) -> dict[str, Any] | None:
    """The summary of one walk made in this run, or None when it holds what a summary does
    not write (or read a file that could not be read)."""
    walked = memo.walked
    state = walked.state
    if walked.tripped or walked.touched is None or not isinstance(state, ModuleState):
        return None
    writer = _Writer(project, origin_of, [], {})
    try:
        summary = {
            "env": [[name, writer.value(value)] for name, value in state.env.items()],
            "events": [writer.event(event) for event in state.import_events],
            "frameworks": sorted(state.frameworks),
            "backends": state.backends,
            "functions": [writer.atom(f) for f in state.functions],
            "classes": [writer.cls(c) for c in state.classes],
            "main_guard": state.has_main_guard,
        }
        reached = {(m, tuple(p)) for m, p in walked.reached_at}
        by_id: dict[int, tuple[str, tuple[int, ...]]] = {}
        for module in walked.closure:  # (a node called was parsed: a module read back was not)
            parsed = project.parsed_already(module)
            if parsed is not None:
                by_id.update((node, (str(module), place)) for node, place in _places(parsed).items())
        reached.update(by_id[node] for node in walked.reached if node in by_id)
        classes = [[writer.cls(c), [writer.cls(b) for b in bases]] for c, bases in walked.classes.items()]
    except (NotPlain, LookupError):
        return None
    files = {str(p): project.digest(p) for p in sorted(walked.touched.files, key=str)}
    if "-" in files.values():
        return None
    return {
        "hits": sorted(str(p) for p in memo.hits),
        "misses": sorted(str(p) for p in memo.misses),
        "peak": walked.peak, "height": walked.height, "work": walked.work,
        "files": files,
        "dirs": {str(d): project.listing_digest(d) for d in sorted(walked.touched.dirs, key=str)},
        "closure": {str(p): project.size(p) for p in sorted(walked.closure, key=str)},
        "failures": [[f.path, f.message, f.row, f.col] for f in walked.failures],
        "reached": sorted([m, list(p)] for m, p in reached),
        "classes": classes,
        "effects": writer.effects,
        "state": summary,
    }


# -- reading -----------------------------------------------------------------------------

class _Reader:
    def __init__(self, project: Project, effects: list[Any]) -> None:
        self.project = project
        self.parts = project.summary_parts
        self.raw_effects = effects
        self.effects: dict[int, Effect] = {}

    def value(self, items: list[Any]) -> Value:
        return frozenset(self.atom(item) for item in items)

    def atom(self, item: list[Any]) -> Atom:  # noqa: PLR0911 - one case per kind of value
        kind = item[0]
        if kind == "M":
            return ModRef(item[1])
        if kind == "S":
            return Str(item[1])
        if kind == "B":
            return Bool(bool(item[1]))
        if kind == "I":
            return Int(int(item[1]))
        if kind == "O":
            return ModuleObj(item[1])
        if kind == "?":
            return Opaque()
        if kind == "D":
            return CudaDevice()
        if kind == "X":
            return MpContext(item[1])
        if kind == "Q":
            return QueueObj(item[1])
        if kind == "E":
            return SavedEnv(item[1])
        if kind == "J":
            return JoblibConfig(None if item[1] is None else (item[1][0],), item[2])
        if kind == "A":
            return Options(tuple((str(k), str(v)) for k, v in item[1]), bool(item[2]))
        if kind == "C":
            return Container(self.value(item[1]), tuple(self.value(v) for v in item[2]))
        if kind == "N":
            return Instance(self.cls(item[1]))
        if kind == "K":
            return self.cls(item)
        if kind == "F":
            return self.func(item)
        raise ValueError(f"unknown value {kind!r}")

    def _shared(self, item: list[Any], make: Any) -> Any:
        """One object per function or class read back in a run: two summaries naming it
        give the same reference, whose node is found once."""
        key = ("ref", json.dumps(item))
        found = self.parts.get(key)
        if found is None:
            found = self.parts[key] = make()
        return found

    def _lazy(self, kind: type[Any], fields: dict[str, Any], module: str, place: list[int]) -> Any:
        ref = object.__new__(kind)
        for name, value in fields.items():
            object.__setattr__(ref, name, value)
        project, where = self.project, tuple(int(i) for i in place)
        object.__setattr__(ref, "_place", where)  # written again as it is, without the node
        object.__setattr__(ref, "_locate", lambda: locate(project, module, where))
        return ref

    def func(self, item: list[Any]) -> FuncRef:
        _, module, qualname, place, bound, kernel, closure, scope = item
        return cast(FuncRef, self._shared(item, lambda: self._lazy(FuncRef, {
            "module": module, "qualname": qualname, "bound": tuple(self.value(v) for v in bound),
            "cuda_kernel": kernel, "closure": tuple((name, self.value(v)) for name, v in closure),
            "scope": scope}, module, place)))

    def cls(self, item: list[Any]) -> ClassRef:
        _, module, qualname, place, bases, scope = item
        if item[0] != "K":
            raise ValueError("not a class")
        return cast(ClassRef, self._shared(item, lambda: self._lazy(ClassRef, {
            "module": module, "qualname": qualname, "bases": tuple(bases), "scope": scope}, module, place)))

    def site(self, item: list[Any] | None) -> StoredSite | None:
        if item is None:
            return None
        path, row, col, end_row, end_col, kind = item
        return StoredSite(Site(str(path), int(row), int(col), int(end_row), int(end_col)), str(kind))

    def effect(self, index: int) -> Effect:
        found = self.effects.get(index)
        if found is not None:
            return found
        origin, body = self.raw_effects[index]
        key = ("effect", json.dumps(origin), json.dumps(body))
        shared = self.parts.get(key)
        if shared is None:
            shared = self.parts[key] = self._make_effect(body)
            self.parts[("origin", id(shared))] = origin
        made = cast("Effect", shared)
        self.effects[index] = made
        return made

    def _make_effect(self, body: list[Any]) -> Effect:
        kind = body[0]
        if kind == "Imported":
            return Imported(body[1], self._site(body[2]))
        if kind == "EnvWrite":
            return EnvWrite(body[1], self.value(body[2]), self._site(body[3]), bool(body[4]), bool(body[5]))
        if kind == "Init":
            return Init(body[1], InitLevel(body[2]), body[3], self._site(body[4]),
                        None if body[5] is None else (body[5][0], body[5][1]))
        if kind == "TfConfig":
            return TfConfig(body[1], self._site(body[2]), bool(body[3]), body[4])
        if kind == "SetMethod":
            return SetMethod(body[1], self._site(body[2]), bool(body[3]), body[4])
        if kind == "DefaultDevice":
            return DefaultDevice(bool(body[1]), self._site(body[2]))
        if kind == "Collective":
            return Collective(body[1], body[2], self._site(body[3]), bool(body[4]), bool(body[5]))
        if kind == "ProcessGroupInit":
            return ProcessGroupInit(body[1], body[2], bool(body[3]), self._site(body[4]))
        if kind == "DeviceChoice":
            return DeviceChoice(body[1], self._site(body[2]))
        raise ValueError(f"unknown effect {kind!r}")

    def _site(self, item: list[Any]) -> StoredSite:
        site = self.site(item)
        if site is None:
            raise ValueError("an effect without a site")
        return site

    def event(self, item: list[Any]) -> Event:
        effect, import_time, in_loop, loop, parent, child, via, entry, main_block, conditions, threads = item
        return Event(self.effect(effect), Context(
            bool(import_time), bool(in_loop), self.site(loop),
            frozenset(s for s in map(self.site, parent) if s is not None),
            frozenset(s for s in map(self.site, child) if s is not None),
            self.site(via), self.site(entry), bool(main_block),
            tuple(Condition(self._site(site), bool(holds), str(text), None if ranks is None else tuple(ranks),
                            self.site(call)) for text, site, holds, ranks, call in conditions),
            frozenset(s for s in map(self.site, threads) if s is not None)))


def decode(project: Project, path: Path, entry: dict[str, Any]) -> tuple[frozenset[Path], frozenset[Path], Walked]:
    """A walk read back from its summary (the caller checked that it still holds): its hits,
    its misses, and the walk. Raises ValueError, KeyError, TypeError or IndexError for an
    entry of another shape."""
    reader = _Reader(project, entry["effects"])
    raw = entry["state"]
    events = [reader.event(e) for e in raw["events"]]
    project_path = project.real(path)

    def parse() -> ParsedModule:
        parsed = project.parsed(project_path)
        if isinstance(parsed, ParseFailure):
            raise LookupError(f"{path} cannot be parsed")
        return parsed

    state = ModuleState(str(project_path), parse, project.limits,
                        env={str(name): reader.value(value) for name, value in raw["env"]},
                        events=events, frameworks=set(raw["frameworks"]),
                        backends={str(k): str(v) for k, v in raw["backends"].items()},
                        functions=[reader.func(f) for f in raw["functions"]],
                        classes=[reader.cls(c) for c in raw["classes"]], walking=False)
    state._import_events = events
    state._main_guard = bool(raw["main_guard"])
    closure = {Path(p): int(size) for p, size in entry["closure"].items()}
    for module, size in closure.items():
        project.note_size(module, size)
    walked = Walked(
        state, frozenset(project.real(p) for p in closure),
        Touched({project.real(Path(p)) for p in entry["files"]}, {project.real(Path(d)) for d in entry["dirs"]}),
        tuple(ParseFailure(str(f[0]), str(f[1]), int(f[2]), int(f[3])) for f in entry["failures"]),
        reached_at=frozenset((str(m), tuple(int(i) for i in p)) for m, p in entry["reached"]),
        classes={reader.cls(c): [reader.cls(b) for b in bases] for c, bases in entry["classes"]},
        peak=int(entry["peak"]), height=int(entry["height"]), work=int(entry["work"]))
    hits = frozenset(project.real(Path(p)) for p in entry["hits"])
    misses = frozenset(project.real(Path(p)) for p in entry["misses"])
    return hits, misses, walked

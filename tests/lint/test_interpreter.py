"""The interpreter on its own: snippets of code run into module states and events through
the Interpreter protocol, implemented here by a stand-in analysis (no Project, no file on
disk, no Analyzer)."""

from __future__ import annotations

import textwrap

import libcst as cst

from gpudoctor.lint.analysis.classes import ClassModel
from gpudoctor.lint.analysis.events import (
    Branch,
    Context,
    EnvWrite,
    Event,
    Imported,
    Init,
    Merge,
    Send,
    SetMethod,
    Start,
    Task,
    site_of,
)
from gpudoctor.lint.analysis.executor import Executor
from gpudoctor.lint.analysis.interpreter import Interpreter
from gpudoctor.lint.analysis.module_state import ModuleState
from gpudoctor.lint.analysis.values import UNKNOWN, Atom, ClassRef, FuncRef, GpuObj, ModRef, ModuleObj, Str, Value, one
from gpudoctor.lint.frontend.parsed import LazySite, ParsedModule
from gpudoctor.lint.limits import DEFAULT_LIMITS
from gpudoctor.lint.nesting import Meter


class Snippets:
    """An analysis of a few modules given as text (name -> code): an import of one of them
    runs its top level once; a call runs the function with its positional arguments."""

    def __init__(self, modules: dict[str, str]) -> None:
        self.limits = DEFAULT_LIMITS
        self.meter = Meter(DEFAULT_LIMITS.max_nesting, DEFAULT_LIMITS.max_cut_walks)
        self.classes = ClassModel(self)
        self.linted_paths = frozenset({"main.py"})
        self.events_cut = False
        self._texts = {name: textwrap.dedent(text) for name, text in modules.items()}
        self.states: dict[str, ModuleState] = {}

    def class_site(self, cls: ClassRef) -> None:
        return None

    def marks_in(self, events: list[Event]) -> list[Event]:
        return [e for e in events if isinstance(e.effect, (Branch, Merge))]

    def run(self, name: str) -> ModuleState:
        if name in self.states:
            return self.states[name]
        path, text = f"{name}.py", self._texts[name]
        state = self.states[name] = ModuleState(path, ParsedModule(path, cst.parse_module(text), text), self.limits)
        executor = Executor(self, state, state.env, module_level=True, ctx=Context(import_time=True))
        executor.walk_block(state.parsed.module.body)
        state.events, state.walking = executor.events, False
        return state

    def call(self, func: FuncRef, positional: tuple[Value, ...], rest: Value,
             keywords: dict[str, Value], entry: bool = False) -> tuple[list[Event], Value]:
        events, result, _ = self.call_in_thread(func, positional, rest, keywords, UNKNOWN, entry)
        return events, result

    def call_in_thread(self, func: FuncRef, positional: tuple[Value, ...], rest: Value,
                       keywords: dict[str, Value], device: Value,
                       entry: bool = False) -> tuple[list[Event], Value, Value]:
        node = func.node
        assert isinstance(node, cst.FunctionDef)
        env = dict(zip([p.name.value for p in node.params.params], (*func.bound, *positional), strict=False))
        executor = Executor(self, self.states[func.module.removesuffix(".py")], env, module_level=False,
                            ctx=Context())
        if not executor.walk_block(node.body.body):
            executor.give_back(UNKNOWN)
        return executor.events, executor.result(), device

    def note_method_tree(self, cls: ClassRef, node: cst.FunctionDef) -> None:
        pass

    def class_namespace(self, cls: ClassRef) -> dict[str, Value]:
        state = self.states[cls.module.removesuffix(".py")]
        frame = Executor(self, state, {}, module_level=False, ctx=Context())
        return frame.class_body(cls, cls.node, [])

    def module_member(self, atom: Atom, attr: str) -> Value:
        if not isinstance(atom, ModuleObj):
            return UNKNOWN
        return self.states[atom.path.removesuffix(".py")].env.get(attr, UNKNOWN)

    def needed_member(self, atom: Atom, attr: str) -> Value:
        return self.module_member(atom, attr)

    def import_module(self, importer: str, dotted: str, level: int,
                      site: LazySite | None) -> tuple[Value, list[ModuleState]]:
        if dotted not in self._texts:  # an installed module: known by its name
            return one(ModRef(dotted)), []
        return one(ModuleObj(f"{dotted}.py")), [] if site is None else [self.run(dotted)]

    def import_submodule(self, importer: str, package: Value, full: str, level: int,
                         site: LazySite) -> tuple[Value, list[ModuleState]]:
        return UNKNOWN, []

    def import_star(self, value: Value) -> list[tuple[str, Value]]:
        return []

    def import_effects(self, importer: str, dotted: str) -> list[Event]:
        return []


HELPERS = """
    import os
    import cupy as cp
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"

    def ones(n):
        return cp.ones(n)
"""


def _where(site: LazySite | None) -> str | None:
    return None if site is None else site.path


def test_a_snippet_runs_into_its_module_state_and_events() -> None:
    analysis = Snippets({"main": """
        import multiprocessing as mp
        import helpers
        import cupy as cp

        def work(x):
            return float(cp.sum(x))

        mp.set_start_method("fork")
        x = helpers.ones(3)
        with mp.Pool(2) as pool:
            pool.map(work, [x])
    """, "helpers": HELPERS})
    interpreter: Interpreter = analysis  # the stand-in is an Interpreter
    assert interpreter.linted_paths == {"main.py"}
    state = analysis.run("main")
    # (what happened, in which module, through which statement of main.py)
    assert [(type(e.effect).__name__, _where(site_of(e.effect)), _where(e.ctx.via))
            for e in state.events] == [
        ("Imported", "helpers.py", "main.py"),  # helpers' top level, run by ``import helpers``
        ("EnvWrite", "helpers.py", "main.py"),
        ("Imported", "main.py", None),
        ("SetMethod", "main.py", None),
        ("Init", "helpers.py", "main.py"),  # helpers.ones(3), called through the interpreter
        ("Start", "main.py", None),
        ("Send", "main.py", None),
        ("Task", "main.py", None),
    ]
    effects = [e.effect for e in state.events]
    assert isinstance(effects[1], EnvWrite) and effects[1].value == one(Str("0"))
    assert isinstance(effects[2], Imported) and effects[2].module == "cupy"
    assert isinstance(effects[3], SetMethod) and effects[3].method == "fork"
    assert isinstance(effects[4], Init) and (effects[4].framework, effects[4].api) == ("cupy", "cupy.ones")
    assert isinstance(effects[5], Start) and effects[5].workers == 2
    assert isinstance(effects[6], Send) and effects[6].channel == "task"
    task = effects[7]
    assert isinstance(task, Task) and [c.func.qualname for c in task.children] == ["work"]
    assert all(e.ctx.import_time for e in state.events)
    assert list(state.env) == ["mp", "helpers", "cp", "work", "x", "pool"]
    assert [type(a) for a in state.env["x"]] == [GpuObj]  # what helpers.ones returned


def test_a_module_imported_twice_runs_its_top_level_once() -> None:
    analysis = Snippets({"main": "import helpers\nimport helpers as again\n", "helpers": HELPERS})
    state = analysis.run("main")
    assert [type(e.effect).__name__ for e in state.events] == ["Imported", "EnvWrite"]
    assert state.env["again"] == state.env["helpers"] == one(ModuleObj("helpers.py"))


def test_the_branches_of_a_fork_are_told_apart_in_the_context() -> None:
    # ``if pid == 0:`` runs in the child: its events carry the fork's site in
    # ``fork_child``; the ``else`` branch, and what follows a child that exits, in ``fork_parent``.
    analysis = Snippets({"main": """
        import os
        import cupy as cp

        pid = os.fork()
        if pid == 0:
            cp.ones(1)
            os._exit(0)
        else:
            cp.zeros(1)
        cp.empty(1)
    """})
    state = analysis.run("main")
    fork = next(e.effect for e in state.events if isinstance(e.effect, Start))
    inits = [(e.effect.api, e.ctx.fork_child, e.ctx.fork_parent) for e in state.events
             if isinstance(e.effect, Init)]
    assert inits == [
        ("cupy.ones", frozenset({fork.site}), frozenset()),
        ("cupy.zeros", frozenset(), frozenset({fork.site})),
        ("cupy.empty", frozenset(), frozenset({fork.site})),
    ]

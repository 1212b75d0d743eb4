"""What interpreting one scope needs of the analysis around it: the Interpreter protocol.

The evaluator and the executor (evaluator.py, executor.py) run the code of one scope, in
a Frame (frame.py). Calling a function of the project, importing one of its modules, and
the classes met so far belong to the analysis of the whole linted file, which makes the
frames: the Analyzer (analyzer.py) implements this protocol. Written against it, the
interpreter imports nothing above itself, and a test can run a snippet of code with a
stand-in analysis, with no project on disk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.classes import ClassModel
    from gpudoctor.lint.analysis.events import Event
    from gpudoctor.lint.analysis.module_state import ModuleState
    from gpudoctor.lint.analysis.values import Atom, ClassRef, FuncRef, Value
    from gpudoctor.lint.frontend.parsed import LazySite
    from gpudoctor.lint.limits import Limits
    from gpudoctor.lint.nesting import Meter


class Interpreter(Protocol):
    """The analysis a frame runs in."""

    events_cut: bool  # a call did more than ``Limits.max_events`` things (some left out)

    @property
    def limits(self) -> Limits:
        """The run's budgets (long strings and integers are unknown past them)."""

    @property
    def meter(self) -> Meter:
        """How deep the analysis is nested (see nesting.py)."""

    @property
    def classes(self) -> ClassModel:
        """The project classes the analysis met: their bases and members."""

    @property
    def linted_paths(self) -> frozenset[str]:
        """The files being linted: a call or import made in one is an entry of its flows."""

    def class_site(self, cls: ClassRef) -> LazySite | None:
        """Where a project class is defined (None: its module cannot be parsed)."""

    def marks_in(self, events: list[Event]) -> list[Event]:
        """The marks of ``if`` chains among ``events`` (events.Branch, events.Merge)."""

    def call(self, func: FuncRef, positional: tuple[Value, ...], rest: Value,
             keywords: dict[str, Value], entry: bool = False) -> tuple[list[Event], Value]:
        """The events and the return value of a call of ``func``, in a thread of its own."""

    def call_in_thread(self, func: FuncRef, positional: tuple[Value, ...], rest: Value,
                       keywords: dict[str, Value], device: Value,
                       entry: bool = False) -> tuple[list[Event], Value, Value]:
        """``call`` made in a thread whose default device is ``device``; also the default
        device the call leaves."""

    def module_member(self, atom: Atom, attr: str) -> Value:
        """What a project module (``atom``) binds to ``attr``."""

    def needed_member(self, atom: Atom, attr: str) -> Value:
        """``module_member`` of a project module walked even where the gate would not follow
        it: a function that runs in a child process (a Process target, a pool's task)."""
        ...

    def import_module(self, importer: str, dotted: str, level: int,
                      site: LazySite | None) -> tuple[Value, list[ModuleState]]:
        """What an import of ``dotted`` in module ``importer`` binds, and the project
        modules whose top level it ran, in order (none when ``site`` is None: the name
        only)."""

    def import_submodule(self, importer: str, package: Value, full: str, level: int,
                         site: LazySite) -> tuple[Value, list[ModuleState]]:
        """``from package import name`` where the package binds no ``name``: the
        submodule ``full``, and the modules importing it ran (as ``import_module``)."""

    def import_star(self, value: Value) -> list[tuple[str, Value]]:
        """The public names, with their values, of the project modules in ``value``."""

    def import_effects(self, importer: str, dotted: str) -> list[Event]:
        """What importing the project module ``dotted`` runs in a process that has not
        imported it yet."""

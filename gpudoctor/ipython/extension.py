"""``%load_ext gpudoctor``: the ``%gpudoctor`` magic and the hooks around each cell.

Loading registers, on the shell IPython hands over:

* ``%gpudoctor``: what this kernel holds right now (report.py);
* ``%gpudoctor lint [--select CODES] [--extend-select CODES] [--ignore CODES]``: the
  executed cells, in the order they ran, through the linter (executed_cells.py);
* ``pre_run_cell``/``post_run_cell`` hooks: the ledger of which cell made each runtime
  appear (cell_ledger.py), and a check before each cell runs: the linter reads the
  executed cells followed by it, and what it finds that it did not find without that
  cell is printed before the cell runs, so that a fork from a poisoned kernel is
  explained before it hangs.

``%unload_ext gpudoctor`` removes all of it. A mistake in the magic's arguments is a
sentence, never a traceback; an error of gpudoctor's own in a hook is one line, and the
cell runs as it would have without gpudoctor.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpudoctor.ipython import executed_cells, live_state, report
from gpudoctor.ipython.cell_ledger import CellLedger

if TYPE_CHECKING:
    from IPython.core.interactiveshell import ExecutionInfo, ExecutionResult, InteractiveShell

    from gpudoctor.lint.findings import Finding

USAGE = """usage: %gpudoctor                 what this kernel holds: GPU runtimes, the cell that initialized them,
                                  the start method a Pool() would use, and what a fork would do now
       %gpudoctor lint [--select CODES] [--extend-select CODES] [--ignore CODES]
                                  lint the executed cells in the order the kernel ran them
                                  (CODES: comma-separated codes or prefixes, as in gpudoctor lint)
"""
_OPTIONS = ("--select", "--extend-select", "--ignore")


class UsageError(Exception):
    """The magic's arguments cannot be read: the message says why."""


class Session:
    """gpudoctor's state in one shell, from %load_ext to %unload_ext."""

    def __init__(self, shell: InteractiveShell) -> None:
        self.shell = shell
        # The cell that loads the extension is in the history already (IPython stores a
        # cell before running it); loaded from a startup file, there is none.
        count = len(executed_cells.history(shell))
        self.ledger = CellLedger(count or None)
        # The findings of the first N executed cells, for the N the last check saw: the
        # next check needs them (only what a cell adds is news).
        self._known: tuple[int, frozenset[tuple[object, ...]]] = (-1, frozenset())

    # -- hooks ------------------------------------------------------------------------------
    def before_cell(self, info: ExecutionInfo | None = None) -> None:
        self.ledger.before_cell(info)
        cell = getattr(info, "raw_cell", None)
        if isinstance(cell, str) and cell.strip():
            _guarded("the check before this cell", lambda: self._check(cell))

    def after_cell(self, result: ExecutionResult | None = None) -> None:
        self.ledger.after_cell(result)

    def _check(self, cell: str) -> None:
        """Print what the linter finds once ``cell`` follows the cells that ran before it
        and did not find without it: its own problems, and those it completes elsewhere (a
        call of an earlier cell's function that forks, now after a GPU initialization).

        The linter's gate keeps this cheap: a history that starts no process and touches
        no GPU setting is not analysed at all.
        """
        done = executed_cells.history(self.shell)
        path = executed_cells.virtual_path()
        config = executed_cells.settings(path)
        before = self._known if self._known[0] == len(done) else (len(done), _keys(
            executed_cells.lint(done, config, path).findings))
        result = executed_cells.lint([*done, cell], config, path)
        self._known = (len(done) + 1, _keys(result.findings))
        new = [f for f in result.findings if _key(f) not in before[1]]
        if new:
            print(report.cell_warning(new, len(done) + 1), end="", file=sys.stderr)

    # -- the magic --------------------------------------------------------------------------
    def magic(self, line: str) -> None:
        from gpudoctor.errors import GpudoctorError

        try:
            words = shlex.split(line)
        except ValueError as exc:
            print(f"gpudoctor: cannot read the arguments: {exc}\n{USAGE}", end="", file=sys.stderr)
            return
        try:
            if not words:
                print(self.kernel_report(), end="")
            elif words[0] == "lint":
                print(self.lint(**_lint_options(words[1:])), end="")
            elif words[0] in ("help", "-h", "--help"):
                print(USAGE, end="")
            else:
                raise UsageError(f"unknown command {words[0]!r}")
        except (UsageError, GpudoctorError) as exc:
            print(f"gpudoctor: {exc}\n{USAGE if isinstance(exc, UsageError) else ''}", end="", file=sys.stderr)

    def kernel_report(self) -> str:
        state = live_state.read()
        found = report.origins(state.runtimes, self.ledger, self._initializing_cells)
        return report.kernel_report(state, found, self.ledger.threads_at_load)

    def _initializing_cells(self) -> dict[str, executed_cells.Initializing]:
        path = executed_cells.virtual_path()
        return executed_cells.initializing_cells(executed_cells.history(self.shell),
                                                 executed_cells.settings(path), path)

    def lint(self, select: list[str] | None = None, extend_select: list[str] | None = None,
             ignore: list[str] | None = None) -> str:
        cells = executed_cells.history(self.shell)
        path = executed_cells.virtual_path()
        config = executed_cells.settings(path, select=select, ignore=ignore, extend_select=extend_select)
        return report.lint_report(executed_cells.lint(cells, config, path), len(cells))


def _lint_options(words: list[str]) -> dict[str, list[str]]:
    """``--select GD1,GD2`` (or ``--select=GD1``) and the others, as lists of codes."""
    options: dict[str, list[str]] = {}
    rest = list(words)
    while rest:
        word = rest.pop(0)
        name, _, value = word.partition("=")
        if name not in _OPTIONS:
            raise UsageError(f"unknown argument {word!r} for lint")
        if not value:
            if not rest:
                raise UsageError(f"{name} needs a value (codes or prefixes, comma-separated)")
            value = rest.pop(0)
        options.setdefault(name[2:].replace("-", "_"), []).extend(c for c in value.split(",") if c)
    return options


def _key(finding: Finding) -> tuple[object, ...]:
    return (finding.code, finding.site, finding.message)


def _keys(findings: list[Finding]) -> frozenset[tuple[object, ...]]:
    return frozenset(_key(f) for f in findings)


def _guarded(what: str, action: Callable[[], object]) -> None:
    """Run a hook's work; an error of gpudoctor's own is one line, and the cell still runs."""
    from gpudoctor.errors import GpudoctorError

    try:
        action()
    except GpudoctorError as exc:
        print(f"gpudoctor: {exc}", file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - the user's cell must run whatever happens here
        print(f"gpudoctor: {what} failed ({type(exc).__name__}: {exc}); the cell runs without it",
              file=sys.stderr)


_sessions: dict[int, Session] = {}


def load(shell: InteractiveShell) -> None:
    """Register the magic and the hooks on ``shell`` (IPython's InteractiveShell)."""
    found = _sessions.get(id(shell))
    if found is not None and found.shell is shell:
        return
    session = _sessions[id(shell)] = Session(shell)
    # IPython gives this method MagicsManager.register_function's signature (functools.wraps),
    # whose first parameter is the manager: the type checker reads that one.
    shell.register_magic_function(session.magic, magic_kind="line",  # type: ignore[call-arg,arg-type]
                                  magic_name="gpudoctor")
    shell.events.register("pre_run_cell", session.before_cell)
    shell.events.register("post_run_cell", session.after_cell)


def unload(shell: InteractiveShell) -> None:
    """Remove what ``load`` registered."""
    session = _sessions.pop(id(shell), None)
    if session is None or session.shell is not shell:
        return
    shell.events.unregister("pre_run_cell", session.before_cell)
    shell.events.unregister("post_run_cell", session.after_cell)
    shell.magics_manager.magics["line"].pop("gpudoctor", None)

"""Which executed cell made each GPU runtime appear in this kernel, watched as cells run.

IPython calls ``before_cell`` and ``after_cell`` around every cell it runs for the user
(``pre_run_cell`` and ``post_run_cell``): a runtime present after a cell and not before
it appeared in that cell. One present before a cell and not after the previous one
appeared while no cell ran (a thread the user started, a callback of the event loop).
What was there when the extension was loaded is recorded as such: the ledger cannot
say which cell made it (the executed cells are read for that: executed_cells.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudoctor.ipython import live_state

if TYPE_CHECKING:
    from IPython.core.interactiveshell import ExecutionInfo, ExecutionResult

# How the ledger came to know a runtime.
IN_CELL = "cell"  # it appeared while ``cell`` ran
BETWEEN_CELLS = "between"  # it appeared while no cell ran, before ``cell``
BEFORE_LOAD = "before-load"  # it was there when the extension was loaded, at cell ``cell``


@dataclass(frozen=True)
class Appearance:
    """When one runtime was first seen."""

    runtime: str
    how: str  # IN_CELL, BETWEEN_CELLS or BEFORE_LOAD
    cell: int | None  # the execution count; None where IPython gave none
    threads_before: int | None = None  # native threads around that cell (IN_CELL)
    threads_after: int | None = None


class CellLedger:
    """The runtimes seen so far, each with the cell it appeared in."""

    def __init__(self, loaded_at: int | None, read: Callable[[], tuple[str, ...]] | None = None,
                 threads: Callable[[], int | None] | None = None) -> None:
        self._read = read or live_state.runtimes
        self._threads = threads or live_state.native_threads
        self.loaded_at = loaded_at
        self.threads_at_load = self._threads()
        self.seen: dict[str, Appearance] = {
            runtime: Appearance(runtime, BEFORE_LOAD, loaded_at) for runtime in self._read()}
        self._between: list[str] = []  # appeared while no cell ran, not yet given a cell
        self._threads_before: int | None = None

    def before_cell(self, info: ExecutionInfo | None = None) -> None:
        self._between = self._new()
        self._threads_before = self._threads()

    def after_cell(self, result: ExecutionResult | None = None) -> None:
        cell = getattr(result, "execution_count", None)
        for runtime in self._between:
            self.seen[runtime] = Appearance(runtime, BETWEEN_CELLS, cell)
        self._between = []
        new = self._new()
        if new:
            after = self._threads()
            for runtime in new:
                self.seen[runtime] = Appearance(runtime, IN_CELL, cell, self._threads_before, after)

    def _new(self) -> list[str]:
        return [runtime for runtime in self._read() if runtime not in self.seen]

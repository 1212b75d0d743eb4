"""The ledger of which cell made each runtime appear, driven as IPython drives it."""

from __future__ import annotations

from types import SimpleNamespace

from gpudoctor.ipython.cell_ledger import BEFORE_LOAD, BETWEEN_CELLS, IN_CELL, Appearance, CellLedger


class Process:
    """What the ledger reads, set by the test: the runtimes and the native threads."""

    def __init__(self, *runtimes: str) -> None:
        self.runtimes, self.threads = list(runtimes), 3

    def read(self) -> tuple[str, ...]:
        return tuple(self.runtimes)

    def count(self) -> int:
        return self.threads


def _ran(ledger: CellLedger, process: Process, count: int | None, *appear: str, threads: int = 0) -> None:
    ledger.before_cell(SimpleNamespace(raw_cell="..."))
    process.runtimes += appear
    process.threads += threads
    ledger.after_cell(SimpleNamespace(execution_count=count))


def test_a_runtime_that_appears_during_a_cell_belongs_to_that_cell() -> None:
    process = Process()
    ledger = CellLedger(1, process.read, process.count)
    _ran(ledger, process, 2)
    _ran(ledger, process, 3, "tensorflow", threads=30)
    _ran(ledger, process, 4, "cuda-driver")
    assert ledger.seen == {"tensorflow": Appearance("tensorflow", IN_CELL, 3, 3, 33),
                           "cuda-driver": Appearance("cuda-driver", IN_CELL, 4, 33, 33)}


def test_what_was_there_at_load_is_said_so_and_never_given_a_later_cell() -> None:
    process = Process("torch.cuda")
    ledger = CellLedger(5, process.read, process.count)
    _ran(ledger, process, 6)
    assert ledger.seen == {"torch.cuda": Appearance("torch.cuda", BEFORE_LOAD, 5)}
    assert ledger.threads_at_load == 3


def test_a_runtime_that_appears_while_no_cell_runs_is_not_blamed_on_the_next_cell() -> None:
    process = Process()
    ledger = CellLedger(1, process.read, process.count)
    _ran(ledger, process, 2)
    process.runtimes.append("jax:cpu")  # a thread of the program's, between cells
    _ran(ledger, process, 3)
    assert ledger.seen == {"jax:cpu": Appearance("jax:cpu", BETWEEN_CELLS, 3)}

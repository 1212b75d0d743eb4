"""Explain a ``BrokenProcessPool`` by the worker whose death broke the pool.

The shape: a process died of ``concurrent.futures.process.BrokenProcessPool`` (or the
output carries it), and a child of that process, a worker of its executor, ended on its
own (a signal, a crash, a non-zero status) while the tree ran. The exception says only
that "a process in the process pool was terminated abruptly"; which one, how, and how
much memory it held is this module's part (what the exception means as an exception is
the error catalogue's).
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudoctor.hazards import EXECUTOR_WORKER_DIED
from gpudoctor.probe import peer_stacks
from gpudoctor.probe.diagnosis import OBSERVED, Cause
from gpudoctor.probe.failures import how_it_ended
from gpudoctor.probe.units import format_size

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict
    from gpudoctor.probe.record import RunRecord

_BROKEN = "BrokenProcessPool"


@dataclass(frozen=True)
class BrokenPool:
    parent: ProcessVerdict  # the executor's process
    dead: tuple[ProcessVerdict, ...]
    died: tuple[str, ...]
    oom_kills: int | None  # the cgroup's OOM kill counter's rise during the run (None: not read)

    @property
    def told(self) -> set[int]:
        return {self.parent.pid} | {p.pid for p in self.dead}


def find(run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[BrokenPool]:
    """Return, per process whose executor broke, the workers that died under it."""
    dead = peer_stacks.died_on_their_own(run, judged)
    if not dead:
        return []
    printed = _BROKEN in run.stderr or _BROKEN in run.stdout
    reaped = peer_stacks.reaped_at(run)
    found = []
    for parent in judged:
        if not (_BROKEN in (parent.exception or "") or printed):
            continue
        workers = [p for p in dead if p.ppid == parent.pid]
        if workers:
            found.append(BrokenPool(parent, tuple(workers), tuple(peer_stacks.when(p, reaped) for p in workers),
                                    run.oom_kills))
    return found


def _how(worker: ProcessVerdict, oom_kills: int | None) -> str:
    if worker.exit_code != -signal.SIGKILL:
        return ""
    held = f"; it held {format_size(worker.rss_peak)} at its peak" if worker.rss_peak else ""
    counter = (f"; this cgroup's OOM kill counter rose by {oom_kills} during the run" if oom_kills
               else "")
    return f" (the kernel's OOM killer sends SIGKILL when memory runs short{held}{counter})"


def _story(story: BrokenPool) -> list[str]:
    parent = story.parent
    each = [f"pid {p.pid} {how_it_ended(p.exit_code or 0)}{t}, not by gpudoctor{_how(p, story.oom_kills)}"
            for p, t in zip(story.dead, story.died, strict=True)]
    raised = (f"; pid {parent.pid} died of it" + (f", from your code {parent.exception_at}"
                                                   if parent.exception_at else "")
              if _BROKEN in (parent.exception or "") else "")
    return [f"Executor's worker died: {'; '.join(each)}. It was a worker of the ProcessPoolExecutor of pid "
            f"{parent.pid}, running or waiting for a task; the executor then marked the pool broken and every "
            f"pending future raised BrokenProcessPool{raised}."]


def lines(found: Sequence[BrokenPool]) -> list[str]:
    """Say which worker died and how, what it broke, why, and the fix."""
    said = [line for story in found for line in _story(story)]
    return said + [EXECUTOR_WORKER_DIED.why, EXECUTOR_WORKER_DIED.fix_line] if said else []


def causes(found: Sequence[BrokenPool]) -> list[Cause]:
    """One ``executor-worker-died`` cause per broken executor: observed."""
    return [Cause(kind=EXECUTOR_WORKER_DIED.cause, certainty=OBSERVED, rule=EXECUTOR_WORKER_DIED.rule,
                  parent=story.parent.pid, processes=tuple(p.pid for p in story.dead),
                  evidence=tuple(_story(story)), fix=EXECUTOR_WORKER_DIED.fix) for story in found]

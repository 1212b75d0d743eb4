"""Explain a hang in which a worker died in the middle of a task and its pool waits for
the result that will never come.

The shape: a child of a waiting parent ended (killed by a signal, crashed, exited
non-zero) while the tree still ran, before gpudoctor stopped anything; the parent waits
in ``multiprocessing/pool.py`` (``Pool.map`` → ``ApplyResult.wait``), and the pool's
live workers, the one it started in the dead one's place among them, wait for a new
task. CPython's ``Pool`` replaces a dead worker and forgets its task, so nothing will
ever send that result. Neither the start method nor the threads a ``Pool`` parent has
when it forks the replacement (its handler threads) is the cause: such a parent gets
this cause instead of ``multithreaded-fork``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudoctor.hazards import WORKER_DIED_IN_TASK
from gpudoctor.probe import stacks, wording
from gpudoctor.probe.diagnosis import Cause
from gpudoctor.probe.failures import how_it_ended, is_helper

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict
    from gpudoctor.probe.record import RunRecord

_POOL = "multiprocessing/pool.py"


@dataclass(frozen=True)
class LostTask:
    """Workers of one parent that died while the parent waited for their results."""

    parent: int
    dead: tuple[ProcessVerdict, ...]
    died_at: tuple[float | None, ...]  # when the parent reaped each, seconds from the start
    waits_in: str | None  # the parent's frames in the pool: "Pool.map → ApplyResult.get → ApplyResult.wait (...)"
    user: str | None  # the user's frame under them
    idle_workers: tuple[int, ...]  # its live workers, waiting for a new task
    in_worker_loop: bool  # their stacks show the pool's worker loop


def _posix(where: str) -> str:
    return where.replace(os.sep, "/")


def pool_wait(parent: ProcessVerdict) -> tuple[str | None, str | None]:
    """Where the parent waits in the pool ("Pool.map → ... (pool.py:765)"), and the user's
    frame under it; (None, None) without a stack, (None, user) outside the pool."""
    if not parent.stack:
        return None, None
    frames = stacks.python_frames(parent.stack, parent.stack_source)
    user = next((f"{name} ({where})" for name, where in frames
                 if not where.startswith("<") and not stacks.is_library(where)), None)
    pool = [(name, where) for name, where in frames if _POOL in _posix(where)]
    if not pool:
        return None, user
    chain = " → ".join(name for name, _ in reversed(pool))
    return f"{chain} ({pool[0][1]})", user


def _in_worker_loop(worker: ProcessVerdict) -> bool:
    if not worker.stack:
        return False
    return any(name.rsplit(".", 1)[-1] == "worker" and _POOL in _posix(where)
               for name, where in stacks.python_frames(worker.stack, worker.stack_source))


def find(run: RunRecord, judged: Sequence[ProcessVerdict], waiting: set[int]) -> list[LostTask]:
    """Return, per waiting parent, the workers that died under it while the tree ran."""
    stopped_by_us = {t.pid for t in run.processes if t.killed_by_supervisor or t.alive_at_stop}
    reaped = {e["child"]: e["t"] for e in run.events
              if e["event"] == "reaped" and isinstance(e.get("child"), int) and isinstance(e.get("t"), (int, float))}
    by_pid = {p.pid: p for p in judged}
    found = []
    for parent in sorted(waiting):
        children = [p for p in judged if p.ppid == parent and p.start != "root"]
        dead = [p for p in children if p.exit_code not in (None, 0) and p.pid not in stopped_by_us
                and not is_helper(p.cmdline)]
        if not dead or parent not in by_pid:
            continue
        workers = [p for p in children if p.pid in waiting and not is_helper(p.cmdline)]
        waits_in, user = pool_wait(by_pid[parent])
        found.append(LostTask(parent, tuple(dead), tuple(reaped.get(p.pid) for p in dead), waits_in, user,
                              tuple(p.pid for p in workers), bool(workers) and all(map(_in_worker_loop, workers))))
    return found


def _last_stack(dead: ProcessVerdict) -> str:
    """What is known of where a dead worker was: faulthandler's report of a crash, the
    exception it raised, or why there is no stack."""
    if dead.fatal_error:
        return f"Its last stack, written by faulthandler as it crashed: {dead.fatal_error}."
    if dead.exception:
        at = f", from your code {dead.exception_at}" if dead.exception_at else ""
        return f"It raised {dead.exception}{at}."
    if dead.exit_code is not None and dead.exit_code < 0:
        return (f"pid {dead.pid} left no stack: {how_it_ended(dead.exit_code).removeprefix('died of ')} ends a "
                "process without running any of its code, and gpudoctor dumps the stacks of the processes still "
                "alive when it stops the tree.")
    return f"pid {dead.pid} left no stack: it exited without an exception Python could report (os._exit)."


def _task_lines(task: LostTask) -> list[str]:
    """The evidence of one parent's lost task, a sentence per fact."""
    when = [f"pid {p.pid} {how_it_ended(p.exit_code or 0)}" + (f" at t={t:.1f} s" if t is not None else "")
            for p, t in zip(task.dead, task.died_at, strict=True)]
    where = f" in {task.waits_in}" if task.waits_in else " with no CPU progress"
    called = f", called from your code {task.user}" if task.user and task.waits_in else ""
    found = [f"Worker died while running a task: {'; '.join(when)}, while the tree still ran; its parent, "
             f"pid {task.parent}, has waited for that task's result ever since{where}{called}."]
    how = "wait for a new task in the pool's worker loop" if task.in_worker_loop else "wait with no CPU progress"
    if task.idle_workers and task.waits_in:
        # CPython's pool replaces a dead worker at once (Pool._maintain_pool).
        found.append(f"The pool's live workers ({wording.pids(list(task.idle_workers))}), the one it started in "
                     f"{wording.agree(len(task.dead), 'its', 'their')} place among them, {how}: no process runs the "
                     "lost task.")
    elif task.idle_workers:
        found.append(f"Its other children ({wording.pids(list(task.idle_workers))}) {how}.")
    return found + [_last_stack(p) for p in task.dead[:3]]


def lines(lost: Sequence[LostTask]) -> list[str]:
    """Say which worker died, when and how, what its parent waits for, why, and the fix."""
    found = [line for task in lost for line in _task_lines(task)]
    return found + [WORKER_DIED_IN_TASK.why, WORKER_DIED_IN_TASK.fix_line] if found else []


def causes(lost: Sequence[LostTask], certainty: str) -> list[Cause]:
    """One ``worker-died-in-task`` cause per parent whose worker died in a task."""
    return [Cause(kind=WORKER_DIED_IN_TASK.cause, certainty=certainty, rule=WORKER_DIED_IN_TASK.rule,
                  parent=task.parent, processes=tuple(p.pid for p in task.dead),
                  evidence=tuple(_task_lines(task)), fix=WORKER_DIED_IN_TASK.fix)
            for task in lost]

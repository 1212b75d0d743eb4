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

The Pool's story is told only where the parent's stack shows it waiting in the pool (or,
with no stack of the parent, its live workers wait in the pool's worker loop). A parent
that waits in ``Queue.get`` or ``Connection.recv`` for a child that died waits for a
result that child never sent (``result-never-sent``); a task that called ``sys.exit``
(recorded by the bootstrap) is ``task-called-exit``; and workers that all died of an
error a known error string explains (a spawn worker that cannot get its function,
GD108) are that cause, told once, with the line it points at.

No task is lost where the pool itself stopped its workers: all of them ended by SIGTERM
(or cleanly) and none replaced them, as ``Pool.terminate()`` (the ``with`` block's exit)
ends a pool. That parent waits for results after its pool was terminated
(explain_pool_terminated), not for a worker that died.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudoctor.hazards import (
    BY_CAUSE,
    FORK_AFTER_INIT,
    FORKSERVER_AFTER_INIT,
    MULTITHREADED_FORK,
    RESULT_NEVER_SENT,
    TASK_CALLED_EXIT,
    WORKER_DIED_IN_TASK,
    Hazard,
)
from gpudoctor.probe import explain_definition, explain_pool_terminated, peer_stacks, stacks, wording
from gpudoctor.probe.diagnosis import Cause
from gpudoctor.probe.error_strings import CAUSE, Match
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
    receives_in: str | None = None  # outside a pool: "Queue.get (multiprocessing/queues.py:103)"
    # Elsewhere: the library call the parent's own line waits in ("BaseProcess.join (...)").
    waits_elsewhere: str | None = None

    @property
    def in_pool(self) -> bool:
        """The parent waits in a multiprocessing.Pool (its stack), or, without its stack,
        its live workers wait in the pool's worker loop."""
        return self.waits_in is not None or (self.receives_in is None and self.in_worker_loop)


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
        if not dead or parent not in by_pid or explain_pool_terminated.terminated_by_pool(children, stopped_by_us):
            continue
        workers = [p for p in children if p.pid in waiting and not is_helper(p.cmdline)]
        waits_in, user = pool_wait(by_pid[parent])
        receives_in = None if waits_in else _receiving(by_pid[parent])
        elsewhere = None if waits_in or receives_in else _library_call(by_pid[parent])
        found.append(LostTask(parent, tuple(dead), tuple(reaped.get(p.pid) for p in dead), waits_in, user,
                              tuple(p.pid for p in workers), bool(workers) and all(map(_in_worker_loop, workers)),
                              receives_in, elsewhere))
    return found


def _library_call(parent: ProcessVerdict) -> str | None:
    """The library function the parent's own innermost line called and waits in."""
    frames = peer_stacks.main_frames(parent)
    at = next((i for i, (_, where) in enumerate(frames) if peer_stacks.is_users(where)), None)
    return f"{frames[at - 1][0]} ({frames[at - 1][1]})" if at else None


_RECEIVES = (("multiprocessing/queues.py", "get"), ("multiprocessing/connection.py", "recv"),
             ("multiprocessing/connection.py", "recv_bytes"), ("multiprocessing/connection.py", "poll"))


def _receiving(parent: ProcessVerdict) -> str | None:
    """Where the parent waits to receive from a Queue or a Pipe, outside a pool: the
    outermost such frame ("Queue.get (multiprocessing/queues.py:103)")."""
    frames = peer_stacks.main_frames(parent)
    found = [(name, where) for name, where in frames
             if any(peer_stacks.in_file(where, file) and peer_stacks.function(name) == call
                    for file, call in _RECEIVES)]
    return f"{found[-1][0]} ({found[-1][1]})" if found else None


def _exit_code(summary: str) -> str:
    return summary.removeprefix("SystemExit").lstrip(": ") or "None"


def _last_stack(dead: ProcessVerdict, in_pool: bool) -> str:
    """What is known of where a dead worker was: faulthandler's report of a crash, the
    exception it raised (``sys.exit`` among them), or why there is no stack."""
    at = f", from your code {dead.exception_at}" if dead.exception_at else ""
    if dead.fatal_error:
        return f"Its last stack, written by faulthandler as it crashed: {dead.fatal_error}."
    if dead.exception and dead.exception.startswith("SystemExit"):
        why = (": SystemExit is not an Exception, so the Pool cannot return it as the task's error" if in_pool
               else "")
        return f"pid {dead.pid} called sys.exit({_exit_code(dead.exception)}){at}{why}."
    if dead.exception:
        return f"It raised {dead.exception}{at}."
    if dead.exit_code is not None and dead.exit_code < 0:
        return (f"pid {dead.pid} left no stack: {how_it_ended(dead.exit_code).removeprefix('died of ')} ends a "
                "process without running any of its code, and gpudoctor dumps the stacks of the processes still "
                "alive when it stops the tree.")
    code = dead.exit_code
    return (f"pid {dead.pid} left no stack: it exited with status {code} and no exception gpudoctor recorded, "
            f"as `raise SystemExit({code})`, `exit({code})` or `os._exit({code})` in its code ends a process.")


def _last_stacks(task: LostTask) -> list[str]:
    """One sentence per way the dead workers ended: identical ends (the same exception from
    the same line) are said once, with their pids."""
    groups: dict[tuple[str | None, str | None, int | None], list[ProcessVerdict]] = {}
    for p in task.dead:
        groups.setdefault((p.exception, p.exception_at, None if p.exception else p.exit_code), []).append(p)
    found = []
    for members in list(groups.values())[:3]:
        first = members[0]
        said = _last_stack(first, task.in_pool)
        if len(members) > 1:
            each = f"{wording.pids([p.pid for p in members])} each "
            said = each + (said[len("It "):] if said.startswith("It ") else said.removeprefix(f"pid {first.pid} "))
        found.append(said)
    return found


def _task_lines(task: LostTask) -> list[str]:
    """The evidence of one parent's lost task, a sentence per fact."""
    when = [f"pid {p.pid} {how_it_ended(p.exit_code or 0)}" + (f" at t={t:.1f} s" if t is not None else "")
            for p, t in zip(task.dead, task.died_at, strict=True)]
    if task.in_pool:
        where = f" in {task.waits_in}" if task.waits_in else " with no CPU progress"
        called = f", called from your code {task.user}" if task.user and task.waits_in else ""
        found = [f"Worker died while running a task: {'; '.join(when)}, while the tree still ran; its parent, "
                 f"pid {task.parent}, has waited for that task's result ever since{where}{called}."]
    elif task.receives_in:
        called = f", called from your code {task.user}" if task.user else ""
        n = len(task.dead)
        found = [f"Child died before sending its result: {'; '.join(when)}, while the tree still ran; its parent, "
                 f"pid {task.parent}, waits in {task.receives_in}{called}, most likely for what "
                 f"{wording.agree(n, 'that child', 'those children')} would have sent: no live process will "
                 "send it."]
    else:
        where = f" in {task.waits_elsewhere}" if task.waits_elsewhere else " with no CPU progress"
        called = (f", called from your code {task.user}" if task.waits_elsewhere else f", in your code {task.user}") \
            if task.user else ""
        found = [f"Child died while its parent waited: {'; '.join(when)}, while the tree still ran; its parent, "
                 f"pid {task.parent}, has waited ever since{where}{called}."]
    how = "wait for a new task in the pool's worker loop" if task.in_worker_loop else "wait with no CPU progress"
    if task.idle_workers and task.waits_in:
        # CPython's pool replaces a dead worker at once (Pool._maintain_pool).
        found.append(f"The pool's live workers ({wording.pids(list(task.idle_workers))}), the one it started in "
                     f"{wording.agree(len(task.dead), 'its', 'their')} place among them, {how}: no process runs the "
                     "lost task.")
    elif task.idle_workers:
        found.append(f"Its other children ({wording.pids(list(task.idle_workers))}) {how}.")
    return found + _last_stacks(task)


# Causes named from the fork events themselves (causes._fork_causes), the lost task beside
# them: folding the task into one of them would name it twice.
_TOLD_BY_FORKS = frozenset({FORK_AFTER_INIT.cause, FORKSERVER_AFTER_INIT.cause, MULTITHREADED_FORK.cause,
                            WORKER_DIED_IN_TASK.cause})


def _explained_by(task: LostTask, matches: Sequence[Match]) -> tuple[Hazard, list[Match]] | None:
    """The known error string every dead worker died of, when one does and it names a
    hazard (a spawn worker that cannot get its function: GD108)."""
    if not task.dead or not all(p.exception for p in task.dead):
        return None
    for category in dict.fromkeys(m.pattern.category for m in matches if m.pattern.kind == CAUSE):
        hazard = BY_CAUSE.get(category)
        lines = [m for m in matches if m.pattern.kind == CAUSE and m.pattern.category == category]
        if hazard is None or hazard.cause in _TOLD_BY_FORKS:
            continue
        if all(any((p.exception or "")[:60].rstrip("…") in m.line for m in lines) for p in task.dead):
            return hazard, lines
    return None


def _hazard(task: LostTask) -> Hazard:
    if not task.in_pool:
        return RESULT_NEVER_SENT
    if all((p.exception or "").startswith("SystemExit") for p in task.dead):
        return TASK_CALLED_EXIT
    return WORKER_DIED_IN_TASK


def _definitions(found: Sequence[Match]) -> list[str]:
    return list(dict.fromkeys(d for m in found if (d := explain_definition.definition(m.line)) is not None))


def lines(lost: Sequence[LostTask], matches: Sequence[Match] = ()) -> list[str]:
    """Say which worker died, when and how, what its parent waits for, why, and the fix.

    A task explained by an error string leads with the line that string points at and
    leaves the why and the fix to that string's cause (told after this)."""
    said: list[str] = []
    hazards: list[Hazard] = []
    for task in lost:
        explained = _explained_by(task, matches)
        if explained is not None:
            said += _definitions(explained[1]) + _task_lines(task)
            continue
        said += _task_lines(task)
        hazard = _hazard(task)
        if hazard not in hazards:
            hazards.append(hazard)
    return said + [line for h in hazards for line in (h.why, h.fix_line)]


def causes(lost: Sequence[LostTask], certainty: str, matches: Sequence[Match] = ()) -> list[Cause]:
    """One cause per parent whose worker died in a task: the error string's hazard when it
    explains every death, else ``task-called-exit``, ``worker-died-in-task`` (a Pool) or
    ``result-never-sent``."""
    found = []
    for task in lost:
        explained = _explained_by(task, matches)
        if explained is not None:
            hazard, strings = explained
            frameworks = tuple(dict.fromkeys(m.pattern.framework for m in strings))
            evidence = _definitions(strings) + [strings[0].line] + _task_lines(task)
            found.append(Cause(kind=hazard.cause, certainty=certainty, rule=hazard.rule, frameworks=frameworks,
                               parent=task.parent, processes=tuple(p.pid for p in task.dead),
                               evidence=tuple(evidence), fix=hazard.fix))
            continue
        hazard = _hazard(task)
        found.append(Cause(kind=hazard.cause, certainty=certainty, rule=hazard.rule, parent=task.parent,
                           processes=tuple(p.pid for p in task.dead), evidence=tuple(_task_lines(task)),
                           fix=hazard.fix))
    return found

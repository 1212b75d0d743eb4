"""Explain a hang in which a ``ProcessPoolExecutor``'s shutdown waits for a worker stuck
in the user's own call.

The shape, from the stacks of the waiting processes: the parent's main thread waits in
the executor's shutdown (``ProcessPoolExecutor.shutdown``, reached from the ``with``
block's ``__exit__`` or from ``_python_exit`` at interpreter exit, joining its management
thread), and a worker of that parent waits inside a task: its innermost frames are the
user's function under ``_process_worker``, blocked in a call that does not return (a
socket read without a timeout, a lock, a subprocess). ``shutdown(wait=True)`` waits for
every running task, and a running task cannot be cancelled: ``Future.cancel()`` and a
``result(timeout=...)`` that gave up do not stop it. The workers idle on the executor's
call queue wait for their next task: the shutdown's, not a hang of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudoctor.hazards import EXECUTOR_SHUTDOWN_WAITS
from gpudoctor.probe import peer_stacks, wording
from gpudoctor.probe.diagnosis import Cause

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict

_EXECUTOR = "concurrent/futures/process.py"
_SHUTDOWNS = ("shutdown", "_python_exit")


@dataclass(frozen=True)
class StuckTask:
    pid: int
    user: str  # "fetch (prog.py:14)": the user's innermost line the task waits in
    blocked_in: str | None  # "sock_call_ex, Python fetch (prog.py:14)"


@dataclass(frozen=True)
class ShutdownWaits:
    """A parent waiting in its executor's shutdown for workers stuck in a task."""

    parent: int
    waits_in: str  # "ProcessPoolExecutor.shutdown (concurrent/futures/process.py:851)"
    user: str | None  # "<module> (prog.py:42)": where the parent left the with block
    stuck: tuple[StuckTask, ...]
    idle: tuple[int, ...]  # workers waiting for a task on the call queue

    @property
    def told(self) -> set[int]:
        return {self.parent, *(s.pid for s in self.stuck), *self.idle}


def _shutdown(parent: ProcessVerdict) -> tuple[str, str | None] | None:
    frames = peer_stacks.main_frames(parent)
    found = [i for i, (name, where) in enumerate(frames)
             if peer_stacks.in_file(where, _EXECUTOR) and peer_stacks.function(name) in _SHUTDOWNS]
    if not found:
        return None
    name, where = frames[found[-1]]
    return f"{name} ({where})", peer_stacks.user(frames[found[-1] + 1:])


def _in_task(worker: ProcessVerdict) -> tuple[bool, str | None]:
    """(is it an executor worker, the user's line it waits in when inside a task)."""
    frames = peer_stacks.main_frames(worker)
    at = next((i for i, (name, where) in enumerate(frames)
               if peer_stacks.in_file(where, _EXECUTOR) and peer_stacks.function(name) == "_process_worker"), None)
    if at is None:
        return False, None
    return True, peer_stacks.user(frames[:at])


def find(judged: Sequence[ProcessVerdict], waiting: set[int]) -> list[ShutdownWaits]:
    """Return each waiting parent whose executor's shutdown waits for a worker stuck in a task."""
    found = []
    for parent in judged:
        if parent.pid not in waiting or (wait := _shutdown(parent)) is None:
            continue
        stuck, idle = [], []
        for child in judged:
            if child.ppid != parent.pid or child.pid not in waiting:
                continue
            worker, user = _in_task(child)
            if user is not None:
                stuck.append(StuckTask(child.pid, user, child.blocked_in))
            elif worker:
                idle.append(child.pid)
        if stuck:
            found.append(ShutdownWaits(parent.pid, wait[0], wait[1], tuple(stuck), tuple(idle)))
    return found


def _story(story: ShutdownWaits) -> list[str]:
    called = f", called from your code {story.user}" if story.user else ""
    each = [f"pid {s.pid} waits in your code {s.user}" + (f" (blocked in {s.blocked_in.split(', Python')[0]})"
                                                          if s.blocked_in else "") for s in story.stuck]
    said = [f"The executor's shutdown waits for a task that does not return: pid {story.parent} waits in "
            f"{story.waits_in}{called}, which waits for every running task to end; "
            f"{'; '.join(each)}, inside a task, and nothing will end that call."]
    if story.idle:
        n = len(story.idle)
        said.append(f"The executor's other {wording.agree(n, 'worker', 'workers')} "
                    f"({wording.pids(list(story.idle))}) {wording.agree(n, 'waits', 'wait')} for a task on its call "
                    "queue, as a worker does until its executor stops it.")
    return said


def lines(found: Sequence[ShutdownWaits]) -> list[str]:
    """Say where the shutdown waits, which task it waits for, why, and the fix."""
    said = [line for story in found for line in _story(story)]
    return said + [EXECUTOR_SHUTDOWN_WAITS.why, EXECUTOR_SHUTDOWN_WAITS.fix_line] if said else []


def causes(found: Sequence[ShutdownWaits], certainty: str) -> list[Cause]:
    """One ``executor-shutdown-waits`` cause per waiting parent."""
    return [Cause(kind=EXECUTOR_SHUTDOWN_WAITS.cause, certainty=certainty, rule=EXECUTOR_SHUTDOWN_WAITS.rule,
                  parent=story.parent, processes=tuple(s.pid for s in story.stuck), evidence=tuple(_story(story)),
                  fix=EXECUTOR_SHUTDOWN_WAITS.fix) for story in found]

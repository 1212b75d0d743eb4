"""Explain a hang in which a process died while it held a ``multiprocessing`` lock and
the others wait for ever to acquire it.

The shape: a process of the tree ended on its own (a signal, such as the OOM killer's
SIGKILL, or an exit that ran none of its code) while the tree ran, and processes still
alive wait, from the user's own code, in ``SemLock.__enter__``/``acquire``
(``multiprocessing/synchronize.py``, or the native ``SemLock_acquire`` under a user's
``lock.acquire()``). A ``multiprocessing.Lock`` is a POSIX semaphore: nothing releases it
for a holder that dies, so who waits for it waits for ever. Which process held it is not
recorded anywhere (a semaphore has no owner); the dead one is named as the most likely
holder, and only waits from the user's code count (a ``Pool`` worker idle on its task
queue's lock waits for a task, not for a dead holder).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudoctor.hazards import LOCK_HOLDER_DIED
from gpudoctor.probe import peer_stacks, wording
from gpudoctor.probe.diagnosis import Cause
from gpudoctor.probe.failures import how_it_ended

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict
    from gpudoctor.probe.record import RunRecord

_SYNC = "multiprocessing/synchronize.py"
_PROCESS = "multiprocessing/process.py"


@dataclass(frozen=True)
class Waiter:
    """A process blocked acquiring a lock from its own code."""

    pid: int
    waits_in: str  # "SemLock.__enter__ (multiprocessing/synchronize.py:95)"
    user: str  # "worker (prog.py:27)"


@dataclass(frozen=True)
class LockStory:
    """Processes that died, and the live ones that wait for the lock one of them held."""

    dead: tuple[ProcessVerdict, ...]
    died: tuple[str, ...]  # " at t=0.1 s" or "", per dead process
    waiters: tuple[Waiter, ...]
    joiners: tuple[tuple[int, str | None], ...]  # (pid, its line) of the processes joining the waiters
    # The function the dead ran, when the bootstrap recorded it and the waiters wait in it too.
    same_target: str | None = None

    @property
    def told(self) -> set[int]:
        return {w.pid for w in self.waiters} | {pid for pid, _ in self.joiners}


def _acquiring(process: ProcessVerdict) -> Waiter | None:
    frames = peer_stacks.main_frames(process)
    for index, (name, where) in enumerate(frames):
        if peer_stacks.in_file(where, _SYNC) and peer_stacks.function(name) in ("__enter__", "acquire"):
            caller = next(((n, w) for n, w in frames[index + 1:] if not peer_stacks.in_file(w, _SYNC)), None)
            if caller is None or not peer_stacks.is_users(caller[1]):
                return None  # a library's lock (a Pool worker's task queue): not the user's
            return Waiter(process.pid, f"{name} ({where})", f"{caller[0]} ({caller[1]})")
    # lock.acquire() is C code: the native frame, under the user's own line.
    if frames and "SemLock_acquire" in (process.stack or "") and peer_stacks.is_users(frames[0][1]):
        return Waiter(process.pid, "SemLock.acquire", f"{frames[0][0]} ({frames[0][1]})")
    return None


def _joining(process: ProcessVerdict) -> tuple[int, str | None] | None:
    frames = peer_stacks.main_frames(process)
    at = next((i for i, (name, where) in enumerate(frames)
               if peer_stacks.function(name) == "join" and peer_stacks.in_file(where, _PROCESS)), None)
    return None if at is None else (process.pid, peer_stacks.user(frames[at + 1:]))


def find(run: RunRecord, judged: Sequence[ProcessVerdict], waiting: set[int]) -> list[LockStory]:
    """Return the story of a tree whose waiting processes acquire a lock after another died."""
    waiters = [w for p in judged if p.pid in waiting and (w := _acquiring(p)) is not None]
    if not waiters:
        return []
    # A process that raised in ``with lock:`` released it on the way out: only an end that
    # ran no code of its (a signal, os._exit) leaves the lock held.
    dead = [p for p in peer_stacks.died_on_their_own(run, judged)
            if (p.exit_code or 0) < 0 or not p.exception]
    if not dead:
        return []
    reaped = peer_stacks.reaped_at(run)
    told = {w.pid for w in waiters}
    joiners = tuple(j for p in judged if p.pid in waiting and p.pid not in told and (j := _joining(p)) is not None)
    started = peer_stacks.targets(run)
    waits_in = {w.user.split(" ", 1)[0] for w in waiters}
    ran = {started[p.pid][1].rsplit(".", 1)[-1] for p in dead if p.pid in started}
    same = next(iter(ran & waits_in), None) if len(ran) == 1 else None
    return [LockStory(tuple(dead), tuple(peer_stacks.when(p, reaped) for p in dead), tuple(waiters), joiners,
                      same)]


def _story(story: LockStory) -> list[str]:
    deaths = "; ".join(f"pid {p.pid} {how_it_ended(p.exit_code or 0)}{t}" for p, t in zip(story.dead, story.died,
                                                                                          strict=True))
    where = sorted({(w.waits_in, w.user) for w in story.waiters})
    waits = "; ".join(f"in {waits_in}, called from your code {user}" for waits_in, user in where)
    n, holders = len(story.waiters), len(story.dead)
    found = [f"Lock holder died: {deaths}, not by gpudoctor, and {wording.pids([w.pid for w in story.waiters])} "
             f"{wording.agree(n, 'has', 'have')} waited ever since to acquire a multiprocessing lock, {waits}. "
             f"Most likely {wording.agree(holders, 'it', 'one of them')} held that lock when it died"
             + (f" ({wording.agree(holders, 'it', 'they')} ran {story.same_target}, as they do)"
                if story.same_target else "")
             + ": nothing releases a multiprocessing lock for a process that dies holding it."]
    for pid, line in story.joiners:
        called = f", called from your code {line}" if line else ""
        found.append(f"pid {pid} waits for them in join{called}.")
    return found


def lines(found: Sequence[LockStory]) -> list[str]:
    """Say who died, who waits for the lock and where, why, and the fix."""
    said = [line for story in found for line in _story(story)]
    return said + [LOCK_HOLDER_DIED.why, LOCK_HOLDER_DIED.fix_line] if said else []


def causes(found: Sequence[LockStory], certainty: str) -> list[Cause]:
    """One ``lock-holder-died`` cause per story."""
    return [Cause(kind=LOCK_HOLDER_DIED.cause, certainty=certainty, rule=LOCK_HOLDER_DIED.rule,
                  parent=story.dead[0].ppid, processes=tuple(p.pid for p in story.dead),
                  evidence=tuple(_story(story)), fix=LOCK_HOLDER_DIED.fix) for story in found]

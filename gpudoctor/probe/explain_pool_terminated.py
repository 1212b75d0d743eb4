"""Explain a hang in which a parent waits for a ``multiprocessing.Pool``'s results after
the pool itself was terminated.

The shape: the parent's main thread waits in the pool for a result (``IMapIterator.next``,
``ApplyResult.get``/``wait``, ``Pool.map``), and every worker of that parent has ended
while the tree ran, each by SIGTERM (not gpudoctor's) or a clean exit, and no live worker
replaced them. That is how ``Pool.terminate()`` ends a pool — its handler threads stop, so
nothing starts new workers, and its parent SIGTERMs those still running (a worker that
took the shutdown's sentinel first exits cleanly) — and ``with Pool() as pool:`` calls it
when the block ends. A pool that replaces its workers (a death, ``maxtasksperchild``)
always has live ones; one closed with ``close()`` delivers its results before its workers
exit. A worker that died
on its own (another signal, a crash, a non-zero status) is a lost task
(explain_lost_task): the pool replaces it, and a live worker waits in its place.

Which call terminated the pool is not recorded: the ``with`` block's exit is said as the
usual one, beside an explicit ``terminate()``.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudoctor.hazards import POOL_TERMINATED_EARLY
from gpudoctor.probe import peer_stacks, wording
from gpudoctor.probe.diagnosis import Cause
from gpudoctor.probe.failures import is_helper

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict
    from gpudoctor.probe.record import RunRecord

_POOL = "multiprocessing/pool.py"
# The pool's calls a parent waits in for a result (and the iterator's).
_RESULT_WAITS = ("next", "__next__", "get", "wait", "map", "starmap", "apply")


@dataclass(frozen=True)
class PoolTerminated:
    """A parent that waits for results of a pool whose workers its own pool stopped."""

    parent: int
    waits_in: str  # "IMapIterator.next (multiprocessing/pool.py:861)"
    user: str | None  # "<module> (prog.py:26)"
    workers: tuple[int, ...]  # the workers, all ended
    terminated: tuple[int, ...]  # those of them SIGTERM ended (the others exited cleanly)
    stopped_at: float | None  # when the parent reaped the first SIGTERMed one

    @property
    def told(self) -> set[int]:
        return {self.parent, *self.workers}


def terminated_by_pool(children: Sequence[ProcessVerdict], stopped_by_us: set[int]) -> bool:
    """Tell whether a pool parent's workers ended as ``Pool.terminate()`` ends them: none
    alive, none stopped by gpudoctor, each by SIGTERM or a clean exit. A worker that died
    on its own is replaced by a live one: not this."""
    workers = [p for p in children if not is_helper(p.cmdline)]
    if not workers or any(p.pid in stopped_by_us for p in workers):
        return False
    return {p.exit_code for p in workers} <= {-signal.SIGTERM, 0}


def _result_wait(parent: ProcessVerdict) -> tuple[str, str | None] | None:
    """Where the parent's main thread waits for a pool's result, outermost pool frame, and
    the user's line that called it."""
    frames = peer_stacks.main_frames(parent)
    pool = [i for i, (_, where) in enumerate(frames) if peer_stacks.in_file(where, _POOL)]
    if not pool:
        return None
    name, where = frames[pool[-1]]
    if peer_stacks.function(name) not in _RESULT_WAITS:
        return None
    return f"{name} ({where})", peer_stacks.user(frames[pool[-1] + 1:])


def find(run: RunRecord, judged: Sequence[ProcessVerdict], waiting: set[int]) -> list[PoolTerminated]:
    """Return each waiting parent whose pool was terminated while it waits for results."""
    stopped_by_us = {t.pid for t in run.processes if t.killed_by_supervisor or t.alive_at_stop}
    reaped = peer_stacks.reaped_at(run)
    found = []
    for parent in judged:
        if parent.pid not in waiting:
            continue
        wait = _result_wait(parent)
        children = [p for p in judged if p.ppid == parent.pid and p.start != "root"]
        if wait is None or not terminated_by_pool(children, stopped_by_us):
            continue
        workers = [p for p in children if not is_helper(p.cmdline)]
        times = [t for p in workers if p.exit_code == -signal.SIGTERM and (t := reaped.get(p.pid)) is not None]
        found.append(PoolTerminated(parent.pid, wait[0], wait[1], tuple(p.pid for p in workers),
                                    tuple(p.pid for p in workers if p.exit_code == -signal.SIGTERM),
                                    min(times) if times else None))
    return found


def _story(story: PoolTerminated) -> list[str]:
    called = f", called from your code {story.user}" if story.user else ""
    when = f" at t={story.stopped_at:.1f} s" if story.stopped_at is not None else ""
    n = len(story.terminated)
    clean = [pid for pid in story.workers if pid not in story.terminated]
    ended = [f"{wording.pids(list(story.terminated))} {wording.agree(n, 'was', 'were')} stopped{when} by SIGTERM "
             f"from {wording.agree(n, 'its', 'their')} parent"] if story.terminated else []
    ended += [f"{wording.pids(clean)} exited cleanly"] if clean else []
    return [f"The pool was terminated while results were still expected: pid {story.parent} waits in "
            f"{story.waits_in}{called}, but its pool's workers have all ended ({'; '.join(ended)}), as "
            "`Pool.terminate()` ends them (the `with Pool()` block's exit calls it), and no worker replaced them: "
            "no process will send the results it waits for."]


def lines(found: Sequence[PoolTerminated]) -> list[str]:
    """Say who waits where, that its pool was terminated, why, and the fix."""
    said = [line for story in found for line in _story(story)]
    return said + [POOL_TERMINATED_EARLY.why, POOL_TERMINATED_EARLY.fix_line] if said else []


def causes(found: Sequence[PoolTerminated], certainty: str) -> list[Cause]:
    """One ``pool-terminated-early`` cause per waiting parent."""
    return [Cause(kind=POOL_TERMINATED_EARLY.cause, certainty=certainty, rule=POOL_TERMINATED_EARLY.rule,
                  parent=story.parent, processes=story.workers, evidence=tuple(_story(story)),
                  fix=POOL_TERMINATED_EARLY.fix) for story in found]

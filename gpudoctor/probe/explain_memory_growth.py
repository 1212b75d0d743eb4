"""Tell workers whose memory grew through their whole life from workers that each loaded
a copy once.

Both shapes end with N sibling workers holding about as much each (explain_memory finds
them). What tells them apart is each worker's RSS over its life, sampled every half
second: a worker that loads or copies its data reaches its size early, in one step or
a few, and stays there; a worker that keeps what each task leaves behind (a cache in a
module-level global) rises steadily, sample after sample, until memory runs out. A fork
child can also grow as it copies its parent's pages (copy-on-write), but never by more
than its parent holds: growth beyond that is memory the worker made itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from gpudoctor.probe.units import format_size

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import WorkerCopies
    from gpudoctor.probe.record import RunRecord

# Fewer samples than this (about 2 s of life at the sampler's half second) tell no shape.
_SAMPLES = 5
# Less growth than this is an interpreter warming up, not state kept.
_GROWTH = 50 << 20
# Steady: at least this share of the steps between samples rise (by a fifth of the mean
# step or more), none carries more than _ONE_STEP of the whole rise, and half-way through
# its life a worker had less than _MIDWAY of it (a plateau reached early has nearly all of
# it by then).
_RISING_STEPS = 0.6
_RISE = 0.2
_ONE_STEP = 0.5
_MIDWAY = 0.7
# A fork child copies at most its parent's pages: this much over the parent is its own.
_OVER_PARENT = 1.25


class Rise(NamedTuple):
    """One worker's RSS at its first and last sample (a tuple: WorkerCopies.grew keeps it)."""

    pid: int
    first_t: float
    first: int
    last_t: float
    last: int


def rise(run: RunRecord, pid: int) -> Rise | None:
    """The worker's rise when its RSS grew steadily through its whole life, else None."""
    seen = [(s.t, s.bytes or 0) for s in run.samples if s.kind == "rss" and s.pid == pid]
    if len(seen) < _SAMPLES:
        return None
    (first_t, first), (last_t, last) = seen[0], seen[-1]
    grown = last - first
    if grown < _GROWTH:
        return None
    steps = [b - a for (_, a), (_, b) in zip(seen, seen[1:], strict=False)]
    rising = sum(1 for step in steps if step > _RISE * grown / len(steps))
    if rising < _RISING_STEPS * len(steps) or max(steps) > _ONE_STEP * grown:
        return None
    if seen[len(seen) // 2][1] - first > _MIDWAY * grown:
        return None  # most of it came early: a plateau, not growth through its life
    return Rise(pid, first_t, first, last_t, last)


def too_short(run: RunRecord, workers: WorkerCopies) -> bool:
    """Did a worker live too short for its samples to tell a copy loaded once from memory
    grown task after task (fewer than _SAMPLES of them)?"""
    counts = {pid: 0 for pid in workers.processes}
    for s in run.samples:
        if s.kind == "rss" and s.pid in counts:
            counts[s.pid] += 1
    return any(n < _SAMPLES for n in counts.values())


# Said after the workers' line when their lives were too short to tell.
SHORT_LIVES = ("The workers lived too short for gpudoctor's samples to tell a copy each loaded once from memory "
               "each kept from task to task: if every task leaves something in its worker (a list or cache in a "
               "global), replace the workers after some tasks (`Pool(maxtasksperchild=N)`) instead.")


def grew(run: RunRecord, workers: WorkerCopies) -> tuple[Rise, ...]:
    """Every worker's rise, when each of them grew through its life by more than it could
    have copied from its parent; else nothing."""
    rises = [rise(run, pid) for pid in workers.processes]
    found = tuple(r for r in rises if r is not None)
    if len(found) < 2 or len(found) != len(rises):
        return ()
    if workers.start not in ("spawn",) and any(r.last - r.first <= _OVER_PARENT * (workers.parent_rss or 0)
                                              for r in found):
        return ()  # a fork child that grew by no more than its parent holds may be copying its pages
    return found


def line(workers: WorkerCopies, grown: Sequence[tuple[int, float, int, float, int]]) -> str:
    """Say how each worker grew, and why that is not a copy loaded once."""
    rises = [Rise(*r) for r in grown]
    each = "; ".join(f"pid {r.pid} from {format_size(r.first)} at t={r.first_t:.1f} s to {format_size(r.last)} at "
                     f"t={r.last_t:.1f} s" for r in rises)
    parent = (f", each by more than its parent (pid {workers.parent}, {format_size(workers.parent_rss)}) holds, so "
              "not copies of its pages") if workers.parent is not None and workers.parent_rss else ""
    kind = f"{workers.start} workers" if workers.start in ("fork", "spawn") else "workers"
    return (f"Worker memory grew through each worker's life: {len(rises)} {kind} rose steadily, sample after "
            f"sample, until memory ran out ({each}){parent}: not a copy loaded once (that reaches its size early "
            "and stays there), but memory each worker made and kept as it ran, as state kept from task to task "
            "does (a single task that keeps growing looks the same)." + _where(workers))


def _where(workers: WorkerCopies) -> str:
    """Where the workers were when the tree was stopped: a line that allocates as they grow."""
    places: dict[str, list[int]] = {}
    for pid, at in workers.grew_at:
        places.setdefault(at, []).append(pid)
    if not places:
        return ""
    said = "; ".join(f"{'pid' if len(pids) == 1 else 'pids'} {', '.join(map(str, pids))} in your code {at}"
                     for at, pids in places.items())
    return (f" When the tree was stopped they were running: {said}: a line that ran as they grew, the first "
            "place to look for what each task leaves behind.")

"""Explain fork children that wait for ever in an OpenMP runtime whose thread pool their
parent had started.

The evidence is the child's native stack (``py-spy dump --native``): its main thread
waits in a frame of a fork-unsafe OpenMP runtime (GNU OpenMP's ``libgomp``), called by a
framework's CPU op. Which runtimes lose their pool across a fork, and which frameworks run
on them, is ``gpudoctor/knowledge/openmp_runtime.py``'s; this module knows none by name.
Without native frames (no py-spy, or ptrace refused) nothing here can be seen, and such a
hang is told as a fork with threads (``multithreaded-fork``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudoctor.hazards import FORK_AFTER_OPENMP
from gpudoctor.knowledge import openmp_runtime as knowledge
from gpudoctor.probe import explain_lost_task, stacks
from gpudoctor.probe.diagnosis import Cause
from gpudoctor.probe.wording import agree, pids

if TYPE_CHECKING:
    from gpudoctor.knowledge.openmp_runtime import PoolOwner
    from gpudoctor.probe.diagnosis import ProcessVerdict

# Native libraries whose frames are no one's code: the wait primitives under a runtime.
_SYSTEM = ("libc.so", "libpthread", "ld-linux", "libstdc++", "libgcc_s")


@dataclass(frozen=True)
class Waiter:
    """A fork child whose main thread waits in an OpenMP runtime."""

    pid: int
    runtime: str  # "GNU OpenMP"
    library: str  # the runtime's file as the stack names it: "libgomp.so.1"
    caller: str | None  # the native frame that called into it: "at::TensorIteratorBase::for_each (libtorch_cpu.so)"
    owner: PoolOwner | None
    user: str | None  # the child's own line


@dataclass(frozen=True)
class OpenMpFork:
    """Children of one parent that wait in the OpenMP pool the parent had started."""

    parent: int | None
    threads: tuple[int, ...]  # the parent's native threads at each fork, as the children recorded them
    forked_at: float | None  # when the first was forked, seconds from the start
    waiters: tuple[Waiter, ...]
    parent_waits: str | None  # where the parent waits for them in a pool, and its own line
    parent_user: str | None

    @property
    def owner(self) -> PoolOwner | None:
        return next((w.owner for w in self.waiters if w.owner is not None), None)


def _in_runtime(frame: stacks.Frame) -> str | None:
    return knowledge.runtime_of(frame.where, frame.name)


def waiter(process: ProcessVerdict) -> Waiter | None:
    """Read a child's native stack: does its main thread wait in a fork-unsafe OpenMP runtime?"""
    if process.stack_source != "py-spy" or not process.stack:
        return None
    main = next((frames for title, frames in stacks.threads(process.stack, "py-spy")
                 if stacks.is_main_thread(title)), None)
    if not main:
        return None
    native = []
    for frame in main:
        if frame.python:
            break
        native.append(frame)
    at = next((i for i, frame in enumerate(native) if _in_runtime(frame)), None)
    if at is None:
        return None
    runtime = _in_runtime(native[at]) or ""
    rest = [f for f in native[at + 1:] if _in_runtime(f) is None and not f.where.startswith(_SYSTEM)]
    caller = f"{rest[0].name} ({rest[0].where})" if rest else None
    owner = next((o for o in (knowledge.owner_of(f.where) for f in native) if o is not None), None)
    python = [(f.name, f.where) for f in main if f.python]
    own = stacks.own_frames(python)
    user = next((f"{name} ({where})" for name, where in own
                 if not where.startswith("<") and not stacks.is_library(where)), None)
    return Waiter(process.pid, runtime, native[at].where, caller, owner, user)


def find(judged: Sequence[ProcessVerdict], waiting: set[int]) -> list[OpenMpFork]:
    """Return, per parent, its waiting fork children blocked in a fork-unsafe OpenMP runtime."""
    by_pid = {p.pid: p for p in judged}
    groups: dict[int | None, list[tuple[ProcessVerdict, Waiter]]] = {}
    for p in judged:
        if p.start != "fork" or p.pid not in waiting:
            continue
        found = waiter(p)
        if found is not None:
            groups.setdefault(p.ppid, []).append((p, found))
    stories = []
    for parent, members in groups.items():
        waits_in, user = explain_lost_task.pool_wait(by_pid[parent]) if parent in by_pid else (None, None)
        threads = tuple(sorted({p.threads_at_fork for p, _ in members if p.threads_at_fork}))
        stories.append(OpenMpFork(parent, threads, members[0][0].forked_at, tuple(w for _, w in members),
                                  waits_in, user))
    return stories


def fix(owner: PoolOwner | None) -> str:
    """The fix: a start method that does not fork the pool's parent, or a parent on one thread."""
    if owner is None:
        return FORK_AFTER_OPENMP.fix
    return f"{FORK_AFTER_OPENMP.fix.removesuffix('.')}; or {owner.one_thread}."


def _story(story: OpenMpFork) -> list[str]:
    first = story.waiters[0]
    n = len(story.waiters)
    called = f", called by {first.caller}" if first.caller else ""
    yours = f", in your code {first.user}" if first.user else ""
    threads = " to ".join(str(t) for t in (story.threads[0], story.threads[-1])) if len(story.threads) > 1 \
        else "".join(map(str, story.threads))
    had = f" ({threads} native {agree(story.threads[-1], 'thread', 'threads')} at the fork)" if story.threads else ""
    when = f" at t={story.forked_at:.1f} s" if story.forked_at is not None else ""
    pool = f"{owner.name}'s OpenMP thread pool" if (owner := story.owner) is not None else "an OpenMP thread pool"
    found = [f"{pids([w.pid for w in story.waiters])} {agree(n, 'waits', 'wait')} in {pool}: in {first.runtime} "
             f"({first.library}){called}{yours}. {agree(n, 'It was', 'They were')} forked{when} from pid "
             f"{story.parent}, which had started that pool{had}; the pool's threads do not exist in "
             f"{agree(n, 'the child', 'the children')}."]
    if owner is not None:
        found.append(f"{owner.pool}; the parent's first op large enough to run in parallel started it.")
    if story.parent_waits:
        where = f", called from your code {story.parent_user}" if story.parent_user else ""
        found.append(f"pid {story.parent} waits for {agree(n, 'its', 'their')} results in "
                     f"{story.parent_waits}{where}.")
    return found


def told(found: Sequence[OpenMpFork]) -> set[int]:
    """The processes whose waits these stories tell: the children, and each parent found
    waiting in its pool."""
    return {w.pid for story in found for w in story.waiters} | \
        {story.parent for story in found if story.parent is not None and story.parent_waits}


def parents(found: Sequence[OpenMpFork]) -> set[int]:
    """The parents whose threads at the fork are these stories' cause, no longer a generic one."""
    return {story.parent for story in found if story.parent is not None}


def lines(found: Sequence[OpenMpFork]) -> list[str]:
    """Say which children wait in which runtime's pool, for whose ops, why, and the fix."""
    said = [line for story in found for line in _story(story)]
    if not said:
        return []
    fixes = list(dict.fromkeys(f"Fix: {fix(story.owner)}" for story in found))
    return [*said, FORK_AFTER_OPENMP.why, *fixes]


def causes(found: Sequence[OpenMpFork], certainty: str) -> list[Cause]:
    """One ``fork-after-openmp`` cause per parent whose children wait in its OpenMP pool."""
    return [Cause(kind=FORK_AFTER_OPENMP.cause, certainty=certainty, rule=FORK_AFTER_OPENMP.rule,
                  frameworks=(story.owner.framework,) if story.owner else (), parent=story.parent,
                  processes=tuple(w.pid for w in story.waiters), evidence=tuple(_story(story)),
                  fix=fix(story.owner))
            for story in found]

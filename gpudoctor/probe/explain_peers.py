"""Gather the causes of a process that died or blocks while others wait on it: a lock's
holder that died, both ends of a pipe sending, a Manager's server that died, an
executor's worker whose death broke the pool; and a pool or subprocess waited for after
its own shutdown stopped it or while it cannot go on: a Pool terminated before its
results were read, an executor's shutdown held by a task that does not return, a child
blocked on a full pipe its parent does not read while it waits for the child.

Each has its own module (the evidence it needs, its sentences, its cause); this one
finds them all at once for the explanation and the causes, and says which processes
their stories tell (their waits are explained: no fork hazard or lost task is told for
them again) and which parents wait for a reason of their own (not their threads).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudoctor.probe import (
    explain_broken_executor,
    explain_executor_shutdown,
    explain_lock_holder,
    explain_manager,
    explain_pipe_full,
    explain_pipe_send,
    explain_pool_terminated,
)

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import Cause, ProcessVerdict
    from gpudoctor.probe.record import RunRecord


@dataclass(frozen=True)
class Peers:
    locks: tuple[explain_lock_holder.LockStory, ...] = ()
    pipes: tuple[explain_pipe_send.BothSending, ...] = ()
    managers: tuple[explain_manager.ManagerDied, ...] = ()
    executors: tuple[explain_broken_executor.BrokenPool, ...] = ()
    terminated: tuple[explain_pool_terminated.PoolTerminated, ...] = ()
    shutdowns: tuple[explain_executor_shutdown.ShutdownWaits, ...] = ()
    full_pipes: tuple[explain_pipe_full.PipeFull, ...] = ()

    @property
    def told(self) -> set[int]:
        """The processes whose wait or death these stories tell."""
        told: set[int] = set()
        for stories in (self.locks, self.pipes, self.managers, self.executors, self.terminated, self.shutdowns,
                        self.full_pipes):
            for story in stories:
                told |= story.told
        return told

    def lines(self) -> list[str]:
        return [*explain_lock_holder.lines(self.locks), *explain_pipe_send.lines(self.pipes),
                *explain_manager.lines(self.managers), *explain_broken_executor.lines(self.executors),
                *explain_pool_terminated.lines(self.terminated), *explain_executor_shutdown.lines(self.shutdowns),
                *explain_pipe_full.lines(self.full_pipes)]

    def causes(self, certainty: str) -> list[Cause]:
        """The causes, ``certainty`` for a hang's (observed or likely), observed for a death's."""
        return [*explain_lock_holder.causes(self.locks, certainty), *explain_pipe_send.causes(self.pipes, certainty),
                *explain_manager.causes(self.managers), *explain_broken_executor.causes(self.executors),
                *explain_pool_terminated.causes(self.terminated, certainty),
                *explain_executor_shutdown.causes(self.shutdowns, certainty),
                *explain_pipe_full.causes(self.full_pipes, certainty)]


def find(run: RunRecord, judged: Sequence[ProcessVerdict], waiting: set[int]) -> Peers:
    """Find every such story in ``run``; ``waiting``: the processes that hung (or idled)."""
    return Peers(tuple(explain_lock_holder.find(run, judged, waiting)),
                 tuple(explain_pipe_send.find(judged, waiting)),
                 tuple(explain_manager.find(run, judged)),
                 tuple(explain_broken_executor.find(run, judged)),
                 tuple(explain_pool_terminated.find(run, judged, waiting)),
                 tuple(explain_executor_shutdown.find(judged, waiting)),
                 tuple(explain_pipe_full.find(judged, waiting)))

"""Name the causes of a run's outcome as values a program can act on.

The explanation says in words why a run hung or failed; a script, the HTML report and
the pytest plugin need the same facts as data: which hazard (a ``hazards.py`` cause
and its lint rule), which runtimes, which parent and children, the evidence, and how
sure gpudoctor is. A hang that went past --hang-after is ``observed``; one cut short by
Ctrl-C or --timeout while the processes were idle is ``likely``; a fork from an
initialized parent that did no harm this time is ``latent``.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from gpudoctor import hazards
from gpudoctor.probe import (
    explain_crash_loop,
    explain_exceptions,
    explain_lost_task,
    explain_memory,
    explain_openmp_fork,
    explain_peers,
    explain_pool_starved,
    explain_queue_join,
    explain_rank_missing,
    explain_ranks,
)
from gpudoctor.probe.diagnosis import LATENT, LIKELY, OBSERVED, Cause, ProcessVerdict
from gpudoctor.probe.error_strings import CAUSE, Match
from gpudoctor.probe.explain import fork_origin, is_forkserver, waiting, waits_like_a_lock
from gpudoctor.probe.record import RunRecord
from gpudoctor.probe.verdicts import Verdict


def stuck_processes(run: RunRecord, verdict: Verdict, judged: Sequence[ProcessVerdict]) -> tuple[set[int], str]:
    """The PIDs that waited (hung, or idle when the run was cut short) and how sure that is."""
    if verdict == Verdict.HUNG:
        return {p.pid for p in judged if p.verdict == Verdict.HUNG}, OBSERVED
    return {p.pid for p in waiting(run, judged)}, LIKELY


def _fork_causes(run: RunRecord, verdict: Verdict, judged: Sequence[ProcessVerdict],
                 matches: Sequence[Match], lost: set[int], explained: AbstractSet[int] = frozenset()) -> list[Cause]:
    """One cause per parent that forked children from a hazardous state (``lost``: parents
    whose threads at the fork are not the cause: they wait for a dead worker's task, join a
    child held by its queue, or their children wait in an OpenMP pool, a cause of its own).
    Threads at the fork are named only where a waiting child may wait for a lock (a futex,
    or the kernel did not say): one reading a socket or pipe waits for data, not for a lock
    the fork left held.

    ``explained``: children whose wait another cause tells from their own stacks (held by
    their queue, waiting in an OpenMP pool): forked after a framework was initialized, that
    is a hazard of theirs (latent), not why they wait."""
    stuck, certainty = stuck_processes(run, verdict, judged)
    stuck = stuck - explained
    failed_with_string = {m.pattern.category for m in matches if m.pattern.kind == CAUSE}
    by_pid = {p.pid: p for p in judged}
    groups: dict[tuple[int | None, tuple[str, ...]], list[ProcessVerdict]] = {}
    for p in judged:
        if p.start == "fork":
            groups.setdefault((p.ppid, p.runtimes_at_fork), []).append(p)
    found = []
    for (parent, runtimes), children in groups.items():
        waited = [c for c in children if c.pid in stuck]
        threads = max((c.threads_at_fork or 0 for c in children), default=0)
        from_server = parent in by_pid and is_forkserver(by_pid[parent])
        if runtimes:
            hazard = hazards.FORKSERVER_AFTER_INIT if from_server else hazards.FORK_AFTER_INIT
        elif threads > 1 and any(map(waits_like_a_lock, waited)) and parent not in lost:
            hazard = hazards.MULTITHREADED_FORK
        else:
            continue
        if waited:
            how_sure = certainty
        elif hazards.FORK_AFTER_INIT.cause in failed_with_string and runtimes:
            how_sure = OBSERVED  # the children printed the framework's own fork error
        else:
            how_sure = LATENT
        named = waited or children
        evidence = [fork_origin(children, parent, runtimes, from_server)]
        evidence += [f"pid {c.pid} was idle (waiting with no CPU progress) for {c.stalled_for:.1f} s"
                     for c in waited]
        evidence += [f"pid {c.pid} blocked in {c.blocked_in}" for c in named if c.blocked_in]
        evidence += [m.line for m in matches if m.pattern.kind == CAUSE and m.pattern.category == hazard.cause]
        found.append(Cause(kind=hazard.cause, certainty=how_sure, rule=hazard.rule, frameworks=runtimes,
                           parent=parent, processes=tuple(c.pid for c in named), evidence=tuple(evidence),
                           fix=hazard.fix))
    return found


def find(run: RunRecord, verdict: Verdict, judged: Sequence[ProcessVerdict],
         matches: Sequence[Match]) -> tuple[Cause, ...]:
    """Return the causes the evidence of ``run`` names, most certain first."""
    stuck, certainty = stuck_processes(run, verdict, judged)
    peers = explain_peers.find(run, judged, stuck)
    lost = explain_lost_task.find(run, judged, stuck - peers.told)
    queued = explain_queue_join.find(judged, stuck)
    openmp = explain_openmp_fork.find(judged, stuck)
    not_threads = {task.parent for task in lost} | {q.parent for q in queued} | explain_openmp_fork.parents(openmp)
    explained = {c.pid for q in queued for c in q.children} | {w.pid for story in openmp for w in story.waiters}
    not_threads |= peers.told  # they wait for a dead or blocked peer, not because of their threads
    explained |= peers.told
    found = _fork_causes(run, verdict, judged, matches, not_threads, explained)
    found += explain_openmp_fork.causes(openmp, certainty)
    found += explain_queue_join.causes(queued, certainty)
    found += explain_pool_starved.causes(explain_pool_starved.find(judged, stuck), certainty)
    found += explain_rank_missing.causes(explain_rank_missing.find(run, judged, stuck), certainty)
    found += peers.causes(certainty)
    found += explain_lost_task.causes(lost, certainty, matches)
    found += explain_crash_loop.causes(run, judged)
    found += explain_ranks.causes(explain_ranks.find(run, judged, stuck), certainty, OBSERVED)
    if explain_memory.host_ran_out(run, judged):
        found += explain_memory.causes(explain_memory.attribute(run, judged), verdict)
    found += explain_exceptions.causes(explain_exceptions.find(run, judged), found)
    named = {c.kind for c in found}
    strings: dict[str, list[Match]] = {}
    for m in matches:
        if m.pattern.kind == CAUSE and m.pattern.category not in named:
            strings.setdefault(m.pattern.category, []).append(m)
    for category, found_here in strings.items():
        hazard = hazards.BY_CAUSE.get(category)
        frameworks = tuple(dict.fromkeys(m.pattern.framework for m in found_here))
        found.append(Cause(kind=category, certainty=OBSERVED, rule=hazard.rule if hazard else None,
                           frameworks=frameworks, evidence=tuple(m.line for m in found_here[:5]),
                           fix=hazard.fix if hazard else None))
    order = {OBSERVED: 0, LIKELY: 1, LATENT: 2}
    # A rank that died of what its backend called a collective mismatch (gloo aborts so)
    # failed because of the mismatch: that is the cause to lead with, the failure its effect.
    deeper = {hazards.COLLECTIVES_MISMATCHED.cause} if any(c.kind == hazards.RANK_FAILED.cause for c in found) \
        else set()
    return tuple(sorted(found, key=lambda c: (order.get(c.certainty, 3), c.kind not in deeper)))

"""Say which processes held the memory of a run that ran out of it, and name workers that
each held a copy of the same data.

The shape: a parent starts N workers and each loads the same data set or model for
itself (a spawn worker's initializer, a module every worker imports), or fork workers
read a list of Python objects they inherited and copy-on-write gives each a copy. The
RSS peaks show it: N siblings holding about the same amount, together most of the tree.
Whether each holds a copy of its own, or pages it still shares with its parent, is told
by the start method (a spawned interpreter shares no data with anyone) or, for fork
children, by their USS, read when the tree passed --memory-limit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from statistics import median
from typing import TYPE_CHECKING

from gpudoctor.hazards import WORKER_MEMORY_GROWS, WORKERS_EACH_A_COPY
from gpudoctor.probe import explain_memory_growth, peer_stacks
from gpudoctor.probe.diagnosis import LIKELY, OBSERVED, Cause, MemoryAttribution, MemoryHolder, WorkerCopies
from gpudoctor.probe.failures import is_helper
from gpudoctor.probe.units import format_size
from gpudoctor.probe.verdicts import StopReason, Verdict

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict
    from gpudoctor.probe.record import RunRecord

# Workers hold "about the same" when the largest is at most this much over the smallest.
_ABOUT_THE_SAME = 1.25
# ... and they matter when together they hold at least this share of the tree.
_MOST = 0.5
# Less than this each is an interpreter and its imports, not data worth a line.
_DATA = 50 << 20
# Fork workers' own pages (USS) count as copies when together they are at least this share
# of the tree's memory counted once (PSS): the rest is mostly their parent's, shared.
_MOST_OWN = 0.4
# The most processes the explanation ranks (the JSON has them all).
_RANKED = 8
# Children that share their parent's heap at the start: a fork, or a forkserver's fork.
_SHARE_AT_START = ("fork",)


def _sigkilled(run: RunRecord, judged: Sequence[ProcessVerdict]) -> bool:
    """Did some process die of a SIGKILL gpudoctor did not send, which may be the kernel's OOM
    killer's (the cgroup's OOM kill counter rose, or could not be read)?"""
    if run.oom_kills == 0:
        return False  # the counter was read and did not move: someone else's SIGKILL
    by_us = {p.pid for p in run.processes if p.killed_by_supervisor}
    return any(p.exit_code == -9 and p.pid not in by_us for p in judged)


def host_ran_out(run: RunRecord, judged: Sequence[ProcessVerdict]) -> bool:
    """Did the tree run out of host memory: over --memory-limit, or a SIGKILL from outside?"""
    return run.stop_reason == StopReason.MEMORY_LIMIT or _sigkilled(run, judged)


def roles(judged: Sequence[ProcessVerdict]) -> dict[int, str]:
    """Name what each process is to the tree: "parent" (or "command" without children),
    "resource tracker", "forkserver", "spawn worker 2" (numbered among its siblings)."""
    named: dict[int, str] = {}
    counts: dict[int | None, int] = {}
    parents = {p.ppid for p in judged if not is_helper(p.cmdline)}
    for p in sorted(judged, key=lambda p: p.pid):
        if p.start == "root":
            named[p.pid] = "parent" if p.pid in parents else "command"
        elif is_helper(p.cmdline):
            named[p.pid] = "forkserver" if any("forkserver" in a for a in p.cmdline) else "resource tracker"
        else:
            counts[p.ppid] = counts.get(p.ppid, 0) + 1
            kind = f"{p.start} worker" if p.start in ("fork", "spawn") else "child"
            named[p.pid] = f"{kind} {counts[p.ppid]}"
    return named


def _gpu(p: ProcessVerdict) -> int | None:
    used = [b for b in p.gpu_memory_peak.values() if b]
    return sum(used) if used else None


def attribute(run: RunRecord, judged: Sequence[ProcessVerdict]) -> MemoryAttribution | None:
    """Rank the processes by their peak RSS; find the workers that each held about as much
    (only when host memory ran out: a GPU that ran out says nothing of host copies)."""
    at_limit = run.at_memory_limit
    peak = {p.pid: p.rss_peak or 0 for p in judged}
    held = [p for p in judged if peak[p.pid]]
    total = sum(peak[p.pid] for p in held)
    if not total:
        return None
    named = roles(judged)
    ranked = tuple(
        MemoryHolder(pid=p.pid, role=named.get(p.pid, p.start), rss_peak=peak[p.pid],
                     share=round(peak[p.pid] / total, 4), gpu_peak=_gpu(p),
                     own=at_limit[p.pid].uss if p.pid in at_limit else None)
        for p in sorted(held, key=lambda p: (-peak[p.pid], p.pid)))
    if not host_ran_out(run, judged):
        return MemoryAttribution(total=total, processes=ranked)
    return MemoryAttribution(total=total, processes=ranked, workers=_workers(run, judged, total, peak))


def _growing(run: RunRecord, pid: int) -> bool:
    """Was this process still growing when the tree was stopped or it died: its last RSS
    sample over the one before (by 5%), or a single sample (it had only just started)?"""
    seen = [s.bytes or 0 for s in run.samples if s.kind == "rss" and s.pid == pid]
    if len(seen) == 1:
        return True
    return len(seen) >= 2 and seen[-1] > 1.05 * seen[-2]


def _family_copies(run: RunRecord, parent: int | None, children: list[ProcessVerdict], total: int,
                   parent_rss: int | None) -> WorkerCopies | None:
    """The workers of one parent that each held about the same, if together they hold most."""
    children.sort(key=lambda p: -(p.rss_peak or 0))
    alike = [c for c in children if c.start == children[0].start]
    own = {c.pid: f.uss for c in alike if (f := run.at_memory_limit.get(c.pid)) is not None and f.uss is not None}
    if alike[0].start in _SHARE_AT_START and len(own) == len(alike):
        # Fork children map their parent's pages: what each holds alone is its USS.
        copied = _copied(run, parent, alike, own, len(children), parent_rss)
        if copied is not None:
            return copied
    top = alike[0].rss_peak or 0
    full = [c for c in alike if (c.rss_peak or 0) * _ABOUT_THE_SAME >= top]
    growing = [c for c in alike if c not in full and _growing(run, c.pid)]
    group = full + growing
    each = int(median(c.rss_peak or 0 for c in full))
    together = sum(c.rss_peak or 0 for c in group)
    if len(group) < 2 or each < _DATA or together < _MOST * total:
        return None
    if alike[0].start not in _SHARE_AT_START:
        copies: bool | None = True  # a spawned (or exec'd) interpreter shares no data with its parent
    else:
        copies = False if len(own) == len(alike) else None
    own_each = int(median(own[c.pid] for c in full)) if all(c.pid in own for c in full) else None
    return WorkerCopies(parent=parent, start=alike[0].start, processes=tuple(sorted(c.pid for c in group)),
                        siblings=len(children), each=each, together=together, total=total, copies=copies,
                        own_each=own_each, parent_rss=parent_rss,
                        growing=tuple((c.pid, c.rss_peak or 0) for c in growing),
                        low=min(c.rss_peak or 0 for c in full), high=max(c.rss_peak or 0 for c in full))


def _copied(run: RunRecord, parent: int | None, alike: list[ProcessVerdict], own: dict[int, int], siblings: int,
            parent_rss: int | None) -> WorkerCopies | None:
    """Fork workers that each copied about as much of their parent's pages (their USS at
    --memory-limit), together a large part of the tree's PSS."""
    counted_once = sum(f.measured()[0] for f in run.at_memory_limit.values())
    # Each copies the pages it writes at its own pace: when memory runs out some have copied
    # more than others, so they need not hold about the same, only much each.
    full = [c for c in alike if own[c.pid] >= _DATA]
    together = sum(own[c.pid] for c in full)
    if len(full) < 2 or together < _MOST_OWN * counted_once:
        return None
    each = int(median(own[c.pid] for c in full))
    return WorkerCopies(parent=parent, start=alike[0].start, processes=tuple(sorted(c.pid for c in full)),
                        siblings=siblings, each=each, together=together, total=counted_once, copies=True,
                        own_each=each, parent_rss=parent_rss, measure="uss",
                        resident_each=int(median(c.rss_peak or 0 for c in full)),
                        low=min(own[c.pid] for c in full), high=max(own[c.pid] for c in full))


def _workers(run: RunRecord, judged: Sequence[ProcessVerdict], total: int,
             peak: dict[int, int]) -> WorkerCopies | None:
    """The siblings that each held about the same and together most of the tree; siblings
    caught still growing (loading their copy when memory ran out) count among them."""
    families: dict[int | None, list[ProcessVerdict]] = {}
    for p in judged:
        if p.start != "root" and p.rss_peak and not is_helper(p.cmdline):
            families.setdefault(p.ppid, []).append(p)
    found = [w for parent, children in families.items()
             if (w := _family_copies(run, parent, children, total, peak.get(parent) if parent else None))
             is not None]
    best = max(found, key=lambda w: w.together / w.total, default=None)
    if best is None or not best.copies:
        return best
    # Each its own memory: loaded once (a copy), or grown through its life (state kept)?
    grew = explain_memory_growth.grew(run, best)
    if not grew:
        return dataclasses.replace(best, short_lives=explain_memory_growth.too_short(run, best))
    at = tuple((p.pid, user) for p in judged
               if p.pid in best.processes and (user := peer_stacks.user(peer_stacks.main_frames(p))) is not None)
    return dataclasses.replace(best, grew=grew, grew_at=at)


def group_line(w: WorkerCopies) -> str:
    """The workers in one sentence: "4 spawn workers × ~160.2 MiB (each its own copy: ...)"."""
    kind = f"{w.start} workers" if w.start in ("fork", "spawn") else "workers"
    count = f"{len(w.processes)}" if len(w.processes) == w.siblings else \
        f"{len(w.processes)} of {'pid ' + str(w.parent) if w.parent else 'the'}'s {w.siblings}"
    spread = w.low is not None and w.high is not None and w.high > w.low * _ABOUT_THE_SAME
    head = f"{count} {kind} × {format_size(w.low)} to {format_size(w.high)}" if spread else \
        f"{count} {kind} × ~{format_size(w.each)}"
    together = f"together {format_size(w.together)} of the {format_size(w.total)}"
    if w.measure == "uss":
        parent = f" (pid {w.parent}, {format_size(w.parent_rss)})" if w.parent is not None and w.parent_rss else ""
        return (f"{head} of their own (each its own copy: its USS at --memory-limit, pages no other process "
                f"shares: what the worker loaded itself, or its parent's{parent} pages that copy-on-write copied "
                f"for it as it wrote to them; each maps ~{format_size(w.resident_each)} in all): together "
                f"{format_size(w.together)} of the tree's {format_size(w.total)} counted once (PSS).")
    if w.copies is False:
        return (f"{head} resident, most of it shared with their parent (each one's own: ~"
                f"{format_size(w.own_each)} at --memory-limit): not copies ({together}).")
    if w.copies is None:
        return (f"{head} resident ({together}); a fork child's RSS counts the pages it still shares with its "
                "parent, and how much of it each held alone was not measured (gpudoctor reads it when the tree "
                "passes --memory-limit).")
    more = ""
    if w.growing:
        pids = ", ".join(str(pid) for pid, _ in w.growing)
        sizes = ", ".join(format_size(size) for _, size in w.growing)
        one = len(w.growing) == 1
        more = (f"; {'pid' if one else 'pids'} {pids} {'was' if one else 'were'} still growing, at {sizes}, "
                "when memory ran out")
    if w.parent is not None and w.parent_rss and w.parent_rss * _ABOUT_THE_SAME >= w.each:
        more += (f"; their parent, pid {w.parent}, holds {format_size(w.parent_rss)} too: "
                 f"{len(w.processes) + 1} copies in all")
    return f"{head} (each its own copy: {together}{more})."


def _holder_line(h: MemoryHolder) -> str:
    gpu = f", GPU {format_size(h.gpu_peak)}" if h.gpu_peak else ""
    own = f", own {format_size(h.own)}" if h.own is not None else ""
    return f"  pid {h.pid} ({h.role}) {format_size(h.rss_peak)} ({100 * h.share:.0f}%){gpu}{own}"


def lines(found: MemoryAttribution | None) -> list[str]:
    """The ranking, the workers' line, and, when each held a copy, why and the fix."""
    if found is None:
        return []
    own = ", and own memory (USS) when the tree passed --memory-limit" \
        if any(h.own is not None for h in found.processes) else ""
    said = [f"Memory by process (peak RSS, {format_size(found.total)} in all{own}):"]
    said += [_holder_line(h) for h in found.processes[:_RANKED]]
    rest = found.processes[_RANKED:]
    if rest:
        said.append(f"  and {len(rest)} more: {format_size(sum(h.rss_peak for h in rest))}")
    w = found.workers
    if w is not None and w.grew:
        said += [explain_memory_growth.line(w, w.grew), WORKER_MEMORY_GROWS.why, WORKER_MEMORY_GROWS.fix_line]
    elif w is not None:
        said.append(group_line(w))
        if w.copies:
            said += [WORKERS_EACH_A_COPY.why, WORKERS_EACH_A_COPY.fix_line]
            if w.short_lives:
                said.append(explain_memory_growth.SHORT_LIVES)
    return said


def causes(found: MemoryAttribution | None, verdict: Verdict) -> list[Cause]:
    """``workers-each-a-copy`` when workers each held their own copy and memory ran out;
    ``worker-memory-grows`` when, instead, each grew through its life."""
    if found is None or found.workers is None or not found.workers.copies:
        return []
    w = found.workers
    certainty = OBSERVED if verdict == Verdict.OOM else LIKELY
    if w.grew:
        return [Cause(kind=WORKER_MEMORY_GROWS.cause, certainty=certainty, rule=WORKER_MEMORY_GROWS.rule,
                      parent=w.parent, processes=w.processes, evidence=(explain_memory_growth.line(w, w.grew),),
                      fix=WORKER_MEMORY_GROWS.fix)]
    short = (explain_memory_growth.SHORT_LIVES,) if w.short_lives else ()
    return [Cause(kind=WORKERS_EACH_A_COPY.cause, certainty=certainty,
                  rule=WORKERS_EACH_A_COPY.rule, parent=w.parent, processes=w.processes,
                  evidence=(group_line(w), *short), fix=WORKERS_EACH_A_COPY.fix)]

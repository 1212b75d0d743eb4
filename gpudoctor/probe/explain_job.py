"""One verdict for a job run with one probe per node, from the nodes' records.

Each node's probe judged its own part; the job is judged on all of them, on the wall
clock. **A rank failed** (crashed, out of memory, SIGKILLed by someone other than
gpudoctor) before gpudoctor stopped any node: the job is ``crashed``, the first failure
by the wall clock is the cause, and the other ranks' waits, SIGTERMs and timeouts are
its effect, told as the single-node probe tells them (``explain_ranks``). **Ranks
waited** (hung, or idle when a node was cut short): the job is ``hung`` when a node's
probe proved it past --hang-after, and told rank by rank across the nodes: which ranks
wait in which collective, which are elsewhere and under which rank test. A rank that
failed only after gpudoctor began to stop another node (the peer's connection closed
under its collective) is the effect of that stop: its place comes from its exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpudoctor.probe import explain_ranks, wording
from gpudoctor.probe.diagnosis import LIKELY, OBSERVED, Cause
from gpudoctor.probe.explain_ranks import Failed, Place, Story
from gpudoctor.probe.job_records import Node, RankEntry
from gpudoctor.probe.ranks import spans
from gpudoctor.probe.verdicts import Verdict

# The worst of the nodes' verdicts is the job's when the ranks tell nothing: most severe first.
_SEVERITY = (Verdict.ESCAPED, Verdict.OOM, Verdict.CRASHED, Verdict.CRASH_LOOP, Verdict.HUNG, Verdict.FAILED,
             Verdict.STOPPED, Verdict.KILLED, Verdict.UNKNOWN, Verdict.IDLE, Verdict.OK)


@dataclass(frozen=True)
class JobDiagnosis:
    """The job's verdict, explanation and causes, with the nodes they come from."""

    verdict: Verdict
    explanation: str
    causes: tuple[Cause, ...]
    nodes: tuple[Node, ...]
    start: float  # the wall clock of the earliest node's t=0: the job's times count from it
    missing: tuple[int, ...]  # ranks of the world size no record holds


def _failed_wall(node: Node, entry: RankEntry) -> float | None:
    return None if entry.failed_at is None else node.started_at + entry.failed_at


def _place(entry: RankEntry) -> Place:
    return Place(entry.process, entry.collective, entry.function, entry.at, entry.condition)


def _worst(nodes: Sequence[Node]) -> Verdict:
    found = {n.diagnosis.verdict for n in nodes}
    return next((v for v in _SEVERITY if v in found), Verdict.UNKNOWN)


def _node_line(node: Node, start: float) -> str:
    d = node.diagnosis
    ranks = [e.rank for e in node.ranks]
    who = f", {spans(ranks)}" if ranks else ""
    return (f"Node {node.name} ({node.path.name}{who}): {d.verdict} after {node.duration:.1f} s "
            f"({d.stop_reason}), started at t={node.started_at - start:.1f} s.")


def diagnose(nodes: Sequence[Node]) -> JobDiagnosis:
    """Judge the job the records of ``nodes`` (``job_records.read``'s) describe."""
    start = min(n.started_at for n in nodes)
    where = {e.rank: n for n in nodes for e in n.ranks}
    rank_nodes = {rank: node.name for rank, node in where.items()} if len(nodes) > 1 else {}
    stops = [t for n in nodes if (t := n.stopped_at) is not None and n.diagnosis.verdict != Verdict.OK]
    first_stop = min(stops) if stops else None
    first_stopper = next((n for n in nodes if first_stop is not None and n.stopped_at == first_stop), None)
    entries = [(n, e) for n in nodes for e in n.ranks]
    # A failure is the cause when it came before gpudoctor stopped anything; after, its effect.
    causal: list[tuple[float | None, Node, RankEntry]] = []
    effects: list[tuple[float | None, Node, RankEntry]] = []
    for node, entry in entries:
        if not entry.failed:
            continue
        t = _failed_wall(node, entry)
        late = first_stop is not None and (t is None or t >= first_stop)
        (effects if late else causal).append((t, node, entry))
    causal.sort(key=lambda x: (x[0] is None, x[0] or 0.0, x[2].rank))
    waiting = [e for _, e in entries if e.waiting and e.has_place]
    waiting += [e for _, _, e in effects if e.has_place]
    places = tuple(sorted((_place(e) for e in waiting), key=lambda p: p.rank))
    launchers = {n.name: n.launcher_pid for n in nodes if n.launcher_pid is not None} if len(nodes) > 1 else {}
    launcher_name = next((n.launcher_name for n in nodes if n.launcher_name), None)
    world = next((e.process.world_size for _, e in entries if e.process.world_size is not None), None)
    story = Story(
        launcher=None, launcher_name=launcher_name, world_size=world, places=places,
        failed=tuple(Failed(e.process, None if t is None else round(t - start, 3), e.traceback) for t, _, e in causal),
        stopped=tuple(e.process for _, e in entries if e.stopped_from_outside),
        nodes=rank_nodes, launchers=launchers)
    hung_nodes = [n for n in nodes if n.diagnosis.verdict == Verdict.HUNG]
    if causal:
        verdict = Verdict.CRASHED
    elif hung_nodes and places:
        verdict = Verdict.HUNG
    else:
        verdict = _worst(nodes)
    certainty = OBSERVED if hung_nodes else LIKELY
    lines = [_head(verdict, nodes, hung_nodes, places)]
    lines += [_node_line(n, start) for n in nodes]
    if causal:
        lines += explain_ranks.failure_lines(story)
    elif places:
        lines += explain_ranks.hang_lines(story) or [
            f"{_capital(explain_ranks.who([p.rank for p in places], rank_nodes))} "
            f"{wording.agree(len(places), 'was', 'were')} waiting when gpudoctor stopped the job."]
    if effects and first_stopper is not None and not causal:
        ranks = [e.rank for _, _, e in effects]
        lines.append(f"{_capital(explain_ranks.who(ranks, rank_nodes))} then failed "
                     f"({'; '.join(e.process.exception or e.process.explanation for _, _, e in effects)}) after "
                     f"gpudoctor began to stop node {first_stopper.name} at t={(first_stop or start) - start:.1f} s: "
                     "the effect of that stop (its peer went away under a collective), not a cause.")
    missing = _missing(world, where)
    if missing:
        lines.append(f"No record in the directory holds {spans(missing)} of the {world}: their node's probe did "
                     "not write one (not started with --record, or killed before it could), so the story "
                     "lacks them.")
    if not places and not causal:
        # Nothing to tell across nodes: each node's own explanation.
        for n in nodes:
            if n.diagnosis.explanation:
                lines.append(f"Node {n.name}: {n.diagnosis.explanation.splitlines()[0]}")
    causes = explain_ranks.causes(story, certainty, OBSERVED) if (causal or places) else []
    if not causes:
        causes = _node_causes(nodes)
    return JobDiagnosis(verdict, "\n".join(lines), tuple(causes), tuple(nodes), start, tuple(missing))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _head(verdict: Verdict, nodes: Sequence[Node], hung: Sequence[Node], places: Sequence[Place]) -> str:
    count = wording.plural(len(nodes), "node")
    if verdict == Verdict.HUNG:
        return (f"Hung: the job's ranks waited with no CPU progress; {wording.plural(len(hung), 'node')} of "
                f"{len(nodes)} proved it past --hang-after ({', '.join(n.name for n in hung)}).")
    if verdict == Verdict.CRASHED:
        return f"Crashed: a rank failed ({count} recorded)."
    return f"Verdict {verdict} from {count}" + (f", with {wording.plural(len(places), 'rank')} waiting." if places
                                                 else ".")


def _missing(world: int | None, where: dict[int, Node]) -> list[int]:
    if world is None or world > 4096:
        return []
    return [r for r in range(world) if r not in where]


def _node_causes(nodes: Sequence[Node]) -> list[Cause]:
    """Without a story across the nodes, the causes each node named."""
    found: list[Cause] = []
    for node in nodes:
        found += node.diagnosis.causes
    return found


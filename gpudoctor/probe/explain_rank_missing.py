"""Explain a distributed job whose ranks wait in the rendezvous for a rank that never comes.

The shape: every rank that runs waits in the call that gathers the job's ranks
(``init_process_group``: the knowledge's ``RENDEZVOUS_CALLS``), and the job's world size
is larger than the ranks that run. The world size is read where the job said it: the
argument its function takes as one (``train(rank, world_size)``, which the bootstrap
records for the processes ``torch.multiprocessing.spawn`` started) or the ``WORLD_SIZE``
a launcher set in the ranks' environment. Each missing rank either died before it joined
(a process had that rank and ended: its exit is named) or was never started (no process
had it: the launcher started fewer than the world size, and where the launcher is the
user's own script, its line and the line that computed how many it starts are named).

A rank that runs but is elsewhere (held up before the rendezvous) is another story
(``rank-held-up``, explain_ranks.py): then this one names nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.hazards import RANK_MISSING_AT_RENDEZVOUS
from gpudoctor.knowledge import distributed_runtime as knowledge
from gpudoctor.knowledge.distributed import WORLD_NAMES
from gpudoctor.knowledge.processes import SPAWN_LAUNCHER_COUNT, SPAWN_LAUNCHER_NAME, SPAWN_LAUNCHER_TARGET
from gpudoctor.probe import explain_ranks, peer_stacks, ranks, user_source, wording
from gpudoctor.probe.diagnosis import Cause

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict
    from gpudoctor.probe.record import RunRecord


@dataclass(frozen=True)
class MissingRanks:
    """Ranks that wait in the rendezvous for ranks that are not there."""

    world: int
    world_from: str  # "the world_size argument torch.multiprocessing.spawn gave train"
    waiting: tuple[explain_ranks.Place, ...]  # the ranks that run, each in the rendezvous
    died: tuple[ProcessVerdict, ...]  # missing ranks whose process ended
    never: tuple[int, ...]  # missing ranks no process had
    launcher: ProcessVerdict | None
    launcher_name: str | None
    started: int | None  # how many rank processes the launcher started, when it recorded them
    launched_at: str | None  # the launcher's own line it waits at: "<module> (prog.py:44)"
    count_at: str | None  # "prog.py:43: nprocs = max(torch.cuda.device_count(), 1)"

    @property
    def told(self) -> set[int]:
        pids = {p.process.pid for p in self.waiting} | {p.pid for p in self.died}
        return pids | ({self.launcher.pid} if self.launcher is not None else set())


def _spawn_events(run: RunRecord) -> dict[int, dict[str, object]]:
    return {e["pid"]: e for e in run.events if e.get("event") == "process" and isinstance(e.get("pid"), int)
            and e.get("target") == SPAWN_LAUNCHER_TARGET}


def _world(run: RunRecord, present: Sequence[ProcessVerdict]) -> tuple[int, str] | None:
    """The job's world size and where it was read: the function's argument a spawn recorded
    first (what the program passes to the rendezvous), else a launcher's environment."""
    spawned = _spawn_events(run)
    for p in present:
        event = spawned.get(p.pid)
        args = ranks.spawn_arguments(event) if event is not None else {}
        named = next(((k, v) for k, v in args.items() if k in WORLD_NAMES and v > 0), None)
        if named is not None:
            return named[1], f"the `{named[0]}` argument {SPAWN_LAUNCHER_NAME} passed to the function it runs"
    tracked = {t.pid: t for t in run.processes}
    for p in present:
        track = tracked.get(p.pid)
        if track is not None and track.rank is not None and track.rank.world_size is not None:
            return track.rank.world_size, f"{track.rank.source.replace('RANK', 'WORLD_SIZE', 1)} in the environment"
    return None




def _count_at(where: str, cmdline: Sequence[str]) -> str | None:
    """Where the launcher's call at ``where`` ("prog.py:44") got how many processes to start:
    its ``nprocs`` argument, and the assignment before it when that is a name."""
    path_text, _, number = where.rpartition(":")
    path = Path(path_text)
    if not path.is_absolute():
        folders = [Path(arg).parent for arg in cmdline if arg.endswith(".py")] + [Path.cwd()]
        path = next((folder / path for folder in folders if (folder / path).is_file()), path)
    parsed = user_source.parsed(str(path)) if number.isdigit() else None
    if parsed is None:
        return None
    tree, text = parsed
    line = int(number)
    keyword, position = SPAWN_LAUNCHER_COUNT
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.lineno <= line <= (node.end_lineno or node.lineno):
            continue
        value = next((k.value for k in node.keywords if k.arg == keyword), None) or \
            (node.args[position] if len(node.args) > position else None)
        if value is None:
            continue
        if isinstance(value, ast.Name):
            assigned = [a for a in ast.walk(tree) if isinstance(a, ast.Assign) and a.lineno < node.lineno
                        and any(isinstance(t, ast.Name) and t.id == value.id for t in a.targets)]
            if assigned:
                last = max(assigned, key=lambda a: a.lineno)
                written = " ".join((ast.get_source_segment(text, last) or "").split())
                return f"{path.name}:{last.lineno}: {written[:120]}"
        written = " ".join((ast.get_source_segment(text, value) or "").split())
        return f"{path.name}:{node.lineno}: {keyword}={written[:80]}"
    return None


def find(run: RunRecord, judged: Sequence[ProcessVerdict], stuck: set[int]) -> MissingRanks | None:
    """Return the ranks waiting in the rendezvous for missing ranks; None when any rank that
    runs is elsewhere, or the world size is not known or not larger than the ranks running."""
    ranked = explain_ranks.ranks_of(judged)
    alive = {t.pid for t in run.processes if t.alive_at_stop}
    running = [p for p in ranked if p.pid in alive]
    if not running or any(p.pid not in stuck or not p.stack for p in running):
        return None
    places = tuple(explain_ranks.place(p) for p in running)
    if any(place.collective not in knowledge.RENDEZVOUS_CALLS for place in places):
        return None
    found = _world(run, running)
    if found is None:
        return None
    world, world_from = found
    present = {p.rank for p in running}
    missing = [r for r in range(world) if r not in present]
    if not missing:
        return None
    died = tuple(p for p in ranked if p.rank in missing and p.pid not in alive)
    never = tuple(r for r in missing if r not in {p.rank for p in died})
    by_pid = {p.pid: p for p in judged}
    launcher = next((by_pid[p.ppid] for p in running if p.ppid in by_pid and by_pid[p.ppid].launches_ranks), None)
    name = explain_ranks.launcher_name(launcher)
    spawned = _spawn_events(run)
    started = None
    if launcher is not None and any(p.pid in spawned for p in running):
        name = name or SPAWN_LAUNCHER_NAME
        started = sum(1 for e in spawned.values() if e.get("ppid") == launcher.pid)
    launched_at = peer_stacks.user(peer_stacks.main_frames(launcher)) if launcher is not None else None
    where = launched_at.rsplit(" (", 1)[-1].rstrip(")") if launched_at else None
    count_at = _count_at(where, launcher.cmdline) if where and launcher is not None and never else None
    return MissingRanks(world, world_from, places, died, never, launcher, name, started, launched_at, count_at)


# -- telling it ---------------------------------------------------------------------------


def _file_line(where: str) -> str:
    """"train.py:40" for a frame's "path:line"."""
    path, _, line = where.rpartition(":")
    return f"{Path(path).name}:{line}" if path else where


def _story(story: MissingRanks) -> list[str]:
    running = [p.rank for p in story.waiting]
    n = len(running)
    pids = wording.pids([p.process.pid for p in story.waiting])
    said = [f"A rank that never comes: the job's world size is {story.world} ({story.world_from}), but only "
            f"{ranks.spans(running)} {wording.agree(n, 'runs', 'run')} ({pids})."]
    if story.never:
        by = ""
        if story.launcher is not None:
            who = f"{story.launcher_name} (pid {story.launcher.pid})" if story.launcher_name \
                else f"the launcher (pid {story.launcher.pid})"
            count = f" started {wording.plural(story.started, 'process', 'processes')}" \
                if story.started is not None else " started too few"
            at = f", from your code {story.launched_at}" if story.launched_at else ""
            many = f", how many from {story.count_at}" if story.count_at else ""
            by = f": {who}{count}{at}{many}"
        said.append(f"{explain_ranks.who(list(story.never), {}).capitalize()} "
                    f"{wording.agree(len(story.never), 'was', 'were')} never started{by}.")
    for p in story.died:
        said.append(f"Rank {p.rank} (pid {p.pid}) ended before it joined: {p.explanation}"
                    + (f", from your code {p.exception_at}" if p.exception_at else "") + ".")
    groups: dict[tuple[str | None, str | None], list[int]] = {}
    for place in story.waiting:
        groups.setdefault((place.collective, place.at), []).append(place.rank)
    gone = len(story.never) + len(story.died)
    for (collective, where), group in groups.items():
        at = f" at {_file_line(where)}" if where else ""
        said.append(f"{explain_ranks.who(group, {}).capitalize()} {wording.agree(len(group), 'waits', 'wait')} in "
                    f"`{collective}`{at}, called from your code, for the missing "
                    f"{wording.agree(gone, 'rank', 'ranks')} to join. {knowledge.RENDEZVOUS_TIMEOUT_NOTE}")
    return said


def lines(story: MissingRanks | None) -> list[str]:
    """Say the world size, the ranks there and missing, where they wait, and the fix."""
    if story is None:
        return []
    return [*_story(story), RANK_MISSING_AT_RENDEZVOUS.why, RANK_MISSING_AT_RENDEZVOUS.fix_line]


def causes(story: MissingRanks | None, certainty: str) -> list[Cause]:
    """One ``rank-missing-at-rendezvous`` cause."""
    if story is None:
        return []
    return [Cause(kind=RANK_MISSING_AT_RENDEZVOUS.cause, certainty=certainty, rule=RANK_MISSING_AT_RENDEZVOUS.rule,
                  parent=story.launcher.pid if story.launcher is not None else None,
                  processes=tuple(p.process.pid for p in story.waiting) + tuple(p.pid for p in story.died),
                  evidence=tuple(_story(story)), fix=RANK_MISSING_AT_RENDEZVOUS.fix)]

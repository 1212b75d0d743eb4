"""Explain a distributed job as one story: where each rank is, and which rank is the cause.

Two shapes. **A hang**: some ranks wait in a collective (a barrier, an all-reduce) that
the others never reach, because they are busy or blocked elsewhere, often in a branch
only some ranks take (``if rank == 0: save_checkpoint()``), or wait in another
collective. Each rank's stack says which: the outermost frame of a collective's file
names the collective, the user's frame under it the line. The user's source is read for
a rank test (an ``if`` on the rank) around the line, which is usually the bug.
**A failure**: a rank died (an exception, ``os._exit``, a signal); the others then wait in
their next collective for it, or are stopped by the launcher. The first rank that failed
is the cause, the others' waits and SIGTERMs its effect.

The facts of the frameworks (which files hold collectives, which launchers stop the other
ranks) are ``gpudoctor/knowledge/distributed_runtime.py``'s; the tests that read a rank
are the linter's knowledge (``gpudoctor/knowledge/distributed.py``).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpudoctor import hazards
from gpudoctor.knowledge import distributed_runtime as knowledge
from gpudoctor.knowledge.distributed import MAIN_FLAGS, RANK_CALLS, RANK_NAMES, RANK_VARIABLES
from gpudoctor.knowledge.processes import SPAWN_LAUNCHER_NAME
from gpudoctor.probe import failures, ranks, stacks, user_source, wording
from gpudoctor.probe.diagnosis import Cause
from gpudoctor.probe.ranks import spans
from gpudoctor.probe.verdicts import Verdict

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict
    from gpudoctor.probe.record import RunRecord


@dataclass(frozen=True)
class Condition:
    """A rank test enclosing a line of the user's: ``if rank == 0:`` at ``line``."""

    text: str  # the test as written, on one line ("if rank == 0:", "elif accelerator.is_main_process:")
    line: int
    in_else: bool  # the line is in the test's else branch
    at: str  # "file:line" of the frame whose line the test encloses
    # The test does not enclose the line: it ends the function (or the loop's turn) early
    # before it ("if rank != 0: return"), so the line runs on the other ranks only.
    exits: bool = False


@dataclass(frozen=True)
class Place:
    """Where one rank was when the tree was stopped."""

    process: ProcessVerdict
    collective: str | None  # the collective it waits in ("barrier"); None: elsewhere
    function: str | None  # the user's function ("save_checkpoint")
    at: str | None  # the user's line ("train.py:40")
    condition: Condition | None

    @property
    def rank(self) -> int:
        return self.process.rank if self.process.rank is not None else -1


@dataclass(frozen=True)
class Failed:
    """A rank that failed, and when (seconds from the start; None: not known)."""

    process: ProcessVerdict
    t: float | None
    traceback: tuple[str, ...]  # the user's frames of its exception, outermost first


@dataclass(frozen=True)
class Story:
    """The ranks of a job as the diagnosis tells them."""

    launcher: ProcessVerdict | None
    launcher_name: str | None  # "torchrun", from its command line
    world_size: int | None
    places: tuple[Place, ...]  # the ranks that waited (hung, or idle at a stop), in rank order
    failed: tuple[Failed, ...]  # first failure first
    stopped: tuple[ProcessVerdict, ...]  # ranks ended by SIGTERM from outside gpudoctor
    # A job over several machines (``gpudoctor report``): each rank's node by name, and
    # each node's launcher pid. Empty for one node's probe: its ranks need no node.
    nodes: Mapping[int, str] = field(default_factory=dict)
    launchers: Mapping[str, int] = field(default_factory=dict)

    @property
    def hazard(self) -> hazards.Hazard | None:
        """What the story names as the cause (None: nothing to blame on the ranks)."""
        if self.failed:
            return hazards.RANK_FAILED
        waiting = {p.collective for p in self.places}
        if None in waiting and len(waiting) > 1:
            # The collective under a test on the rank (or in its ``else``): the ranks that do
            # not take that branch never call it (GD501). Outside any: every rank calls it,
            # and the rank elsewhere is held up on its way there.
            under_test = any(p.condition is not None for p in self.places if p.collective)
            return hazards.COLLECTIVE_NOT_REACHED if under_test else hazards.RANK_HELD_UP
        if None not in waiting and len(waiting) > 1:
            return hazards.COLLECTIVES_MISMATCHED
        return None

    @property
    def told(self) -> set[int]:
        """The PIDs the story explains (their "Blocked in" lines would repeat it)."""
        pids = {p.process.pid for p in self.places} | {f.process.pid for f in self.failed}
        return pids | ({self.launcher.pid} if self.launcher is not None and (self.places or self.failed) else set())


def _posix(where: str) -> str:
    return where.replace(os.sep, "/")


def _in(where: str, files: Sequence[str]) -> bool:
    path = _posix(where.rsplit(":", 1)[0])
    return any(path == f or path.endswith("/" + f) for f in files)


def _users(where: str) -> bool:
    return not where.startswith("<") and not stacks.is_library(where) and not stacks.is_bootstrap(where)


def _short(name: str) -> str:
    """"ProcessGroup.barrier" -> "barrier" (py-spy names methods with their class)."""
    return name.rsplit(".", 1)[-1]


def launcher_name(process: ProcessVerdict | None) -> str | None:
    if process is None:
        return None
    words = [os.path.basename(part) for part in process.cmdline[:4]]
    return next((name for marker, name in knowledge.LAUNCHERS if marker in words), None)


# -- reading the user's source for the rank test ------------------------------------------






def _about_rank(test: ast.expr) -> bool:
    """Tell whether an ``if`` test reads the rank (``rank == 0``, ``dist.get_rank() != 0``,
    ``accelerator.is_main_process``, ``os.environ["RANK"]``)."""
    for node in ast.walk(test):
        if isinstance(node, ast.Name) and (node.id in RANK_NAMES or node.id in MAIN_FLAGS):
            return True
        if isinstance(node, ast.Attribute) and (node.attr in RANK_NAMES or node.attr in MAIN_FLAGS
                                                or node.attr in RANK_CALLS):
            return True
        if isinstance(node, ast.Name) and node.id in RANK_CALLS:
            return True
        if isinstance(node, ast.Constant) and node.value in RANK_VARIABLES:
            return True
    return False


def _condition_at(where: str, cmdline: Sequence[str]) -> Condition | None:
    """The innermost rank test around the line of ``where`` ("train.py:40")."""
    try:
        line = int(where.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return None
    path = user_source.file_of(where, cmdline)
    parsed = user_source.parsed(str(path)) if path is not None else None
    if parsed is None:
        return None
    tree, text = parsed
    best: ast.If | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and node.lineno < line <= (node.end_lineno or node.lineno) \
                and _about_rank(node.test) and (best is None or node.lineno > best.lineno):
            best = node
    if best is None:
        return _early_exit_before(tree, text, line, where)
    in_else = bool(best.orelse) and best.orelse[0].lineno <= line
    keyword = "elif" if text.splitlines()[best.lineno - 1].lstrip().startswith("elif") else "if"
    test = " ".join((ast.get_source_segment(text, best.test) or ast.unparse(best.test)).split())
    return Condition(f"{keyword} {test[:100]}:", best.lineno, in_else, where)


def _early_exit_before(tree: ast.Module, text: str, line: int, where: str) -> Condition | None:
    """The last rank test before ``line``, in a block that holds it, whose body only leaves
    (``if rank != 0: return``, ``continue``, ``break``, ``raise``, ``sys.exit()``)."""
    best: ast.If | None = None
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if not isinstance(block, list):
                continue
            holder = next((i for i, s in enumerate(block) if isinstance(s, ast.stmt)
                           and s.lineno <= line <= (s.end_lineno or s.lineno)), None)
            for statement in block[:holder] if holder is not None else ():
                if isinstance(statement, ast.If) and not statement.orelse and _about_rank(statement.test) \
                        and _leaves(statement.body) and (best is None or statement.lineno > best.lineno):
                    best = statement
    if best is None:
        return None
    test = " ".join((ast.get_source_segment(text, best.test) or ast.unparse(best.test)).split())
    last = best.body[-1]
    leaving = " ".join((ast.get_source_segment(text, last) or ast.unparse(last)).split())
    return Condition(f"if {test[:100]}: {leaving[:40]}", best.lineno, False, where, exits=True)


def _leaves(body: Sequence[ast.stmt]) -> bool:
    """Does a block end by leaving (return, continue, break, raise, an exit call)?"""
    last = body[-1] if body else None
    if isinstance(last, (ast.Return, ast.Continue, ast.Break, ast.Raise)):
        return True
    call = last.value if isinstance(last, ast.Expr) else None
    if isinstance(call, ast.Call):
        name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        return name in ("exit", "_exit", "quit")
    return False


def place(process: ProcessVerdict) -> Place:
    """Where a rank is in its stack: the collective it waits in, the user's line, the rank test."""
    return place_in(process, stacks.python_frames(process.stack or "", process.stack_source))


def place_in(process: ProcessVerdict, frames: Sequence[tuple[str, str]]) -> Place:
    """Where a rank is in ``frames`` (function, "path:line"), innermost first: a stack, or
    the traceback of the exception a collective raised when a peer went away."""
    inside = [i for i, (_, where) in enumerate(frames) if _in(where, knowledge.COLLECTIVE_FILES)]
    wrapped = [i for i, (_, where) in enumerate(frames) if _in(where, tuple(knowledge.COLLECTIVE_WRAPPERS))]
    collective = _short(frames[inside[-1]][0]) if inside else None
    if wrapped and (not inside or wrapped[-1] > inside[-1]):
        # A wrapper that runs collectives of its own (DDP's forward): its outermost frame.
        index = wrapped[-1]
        name, where = frames[index]
        owner = next(o for f, o in knowledge.COLLECTIVE_WRAPPERS.items() if _in(where, (f,)))
        collective = f"{owner}.{_short(name)}"
        inside = [*inside, index]
    start = inside[-1] + 1 if inside else 0
    outer = [(name, where) for name, where in frames[start:] if _users(where)]
    function, at = (_short(outer[0][0]), outer[0][1]) if outer else (None, None)
    condition = next((c for _, where in outer if (c := _condition_at(where, process.cmdline)) is not None), None)
    return Place(process, collective, function, at, condition)


# -- finding the story --------------------------------------------------------------------


def ranks_of(judged: Sequence[ProcessVerdict]) -> list[ProcessVerdict]:
    """The ranks' own processes, in rank order."""
    return sorted((p for p in judged if p.rank is not None), key=lambda p: (p.rank or 0, p.pid))


def failed(run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[ProcessVerdict]:
    """The ranks that failed on their own: crashed, out of memory, or SIGKILLed by
    someone other than gpudoctor (the kernel's OOM killer, most often). Not the processes of
    torch.multiprocessing.spawn: their failures are told by the spawn causes
    (explain_exceptions.py), from the traceback spawn relays to the parent."""
    ours = {t.pid for t in run.processes if t.killed_by_supervisor} | set(ranks.spawned(run.events))
    return [p for p in ranks_of(judged) if p.pid not in ours and p.start != "root" and (
        p.verdict in (Verdict.CRASHED, Verdict.OOM) or (p.verdict == Verdict.KILLED and p.exit_code == -9))]


def failed_at(run: RunRecord, pid: int) -> float | None:
    """When a process failed: its exception or exit record, else its parent's reaping."""
    times = [e["t"] for e in run.events if isinstance(e.get("t"), (int, float)) and (
        (e.get("pid") == pid and e.get("event") in ("exception", "exit")) or
        (e.get("event") == "reaped" and e.get("child") == pid))]
    return min(times) if times else None


def traceback(run: RunRecord, pid: int) -> tuple[str, ...]:
    error = failures.raised(run.events).get(pid)
    return tuple(f.where for f in error.frames if f.users) if error is not None else ()


def find(run: RunRecord, judged: Sequence[ProcessVerdict], stuck: set[int]) -> Story | None:
    """Return the story of the job's ranks; None when the tree has no ranks."""
    ranked = ranks_of(judged)
    if not ranked:
        return None
    by_pid = {p.pid: p for p in judged}
    parents = {p.ppid for p in ranked}
    launcher = next((by_pid[pid] for pid in parents if pid in by_pid and by_pid[pid].launches_ranks), None)
    ours = {t.pid for t in run.processes if t.killed_by_supervisor}
    found = sorted((Failed(p, failed_at(run, p.pid), traceback(run, p.pid)) for p in failed(run, judged)),
                   key=lambda f: (f.t is None, f.t or 0.0, f.process.pid))
    stopped = tuple(p for p in ranked if p.exit_code is not None and p.exit_code < 0 and p.pid not in ours
                    and not failures.is_failure(p.exit_code))
    places = tuple(place(p) for p in ranked if p.pid in stuck and p.stack)
    world = next((p.world_size for p in ranked if p.world_size is not None), None)
    name = launcher_name(launcher)
    if name is None and launcher is not None and set(ranks.spawned(run.events)) >= {p.pid for p in ranked}:
        name = SPAWN_LAUNCHER_NAME  # (its ranks are the processes it started, by their index)
        stopped = ()  # (spawn's own: told by the spawn causes, as its failed processes are)
    return Story(launcher, name, world, places, tuple(found), stopped)


# -- telling it ---------------------------------------------------------------------------


def _file_line(where: str) -> str:
    """"train.py:40" for a frame's "path:line" (the file's name; the report has the path)."""
    path, _, line = where.rpartition(":")
    return f"{os.path.basename(path)}:{line}" if path else where


def _condition_text(place: Place) -> str:
    c = place.condition
    if c is None:
        return ""
    called = f", called at {_file_line(c.at)}" if c.at != place.at else ""
    branch = f"after `{c.text}`" if c.exits else f"in the `else` of `{c.text}`" if c.in_else \
        else f"under `{c.text}`"
    return f"{called} {branch} (line {c.line})"


def who(ranks: Sequence[int], nodes: Mapping[int, str]) -> str:
    """"ranks 2–3", or on several machines "ranks 2–3 (node b)", "ranks 1–2 (nodes a, b)"."""
    named = sorted({nodes[r] for r in ranks if r in nodes})
    if not named:
        return spans(ranks)
    return f"{spans(ranks)} ({wording.agree(len(named), 'node', 'nodes')} {', '.join(named)})"


def _where(places: Sequence[Place], nodes: Mapping[int, str]) -> str:
    """One clause for ranks at the same place: "ranks 1–3 wait in `barrier` at train.py:40"."""
    first = places[0]
    who_ = who([p.rank for p in places], nodes)
    verb = wording.agree(len(places), "waits", "wait")
    at = f" at {_file_line(first.at)}" if first.at else ""
    if first.collective:
        return f"{who_} {verb} in `{first.collective}`{at}{_condition_text(first)}"
    if first.function:
        return f"{who_} {wording.agree(len(places), 'is', 'are')} in `{first.function}`{at}{_condition_text(first)}"
    return f"{who_} {verb} with no stack to say where"


def _grouped(places: Sequence[Place]) -> list[list[Place]]:
    groups: dict[tuple[str | None, str | None, str | None], list[Place]] = {}
    for place in places:
        groups.setdefault((place.collective, place.function, place.at), []).append(place)
    # The ranks in a collective first: the others are why they wait.
    return sorted(groups.values(), key=lambda g: (g[0].collective is None, g[0].rank))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _job(story: Story) -> str:
    size = f"{story.world_size} ranks" if story.world_size is not None else "ranks"
    if story.nodes:
        by_node: dict[str, list[int]] = {}
        for rank, node in sorted(story.nodes.items()):
            by_node.setdefault(node, []).append(rank)
        on = "; ".join(f"{node}: {spans(ranks)}" for node, ranks in by_node.items())
        by = f", launched by {story.launcher_name} on each node" if story.launcher_name else ""
        return f"Distributed job: {size} on {wording.plural(len(by_node), 'node')} ({on}){by}."
    by = f", launched by {story.launcher_name or 'a launcher'} (pid {story.launcher.pid})" if story.launcher else ""
    return f"Distributed job: {size}{by}."


def _waits(story: Story) -> list[str]:
    if not story.places:
        return []
    clauses = [_where(group, story.nodes) for group in _grouped(story.places)]
    lines = [_capital("; ".join(clauses)) + "."]
    if story.launchers:
        pids = ", ".join(f"pid {pid} on {node}" for node, pid in story.launchers.items())
        lines.append(f"The launchers ({pids}) wait for their ranks.")
    elif story.launcher is not None:
        lines.append(f"The launcher (pid {story.launcher.pid}) waits for its ranks.")
    return lines


def hang_lines(story: Story | None) -> list[str]:
    """The lines that tell a hung (or likely hung) job rank by rank, cause and fix; none
    when a rank failed (``failure_lines`` tells that) or nothing waited."""
    if story is None or story.failed or not story.places:
        return []
    lines = [_job(story), *_waits(story)]
    hazard = story.hazard
    if hazard in (hazards.COLLECTIVE_NOT_REACHED, hazards.RANK_HELD_UP):
        waiting = [p for p in story.places if p.collective]
        away = [p for p in story.places if not p.collective]
        names = sorted({f"`{p.collective}`" for p in waiting})
        lines.append(f"{_capital(who([p.rank for p in waiting], story.nodes))} "
                     f"{wording.agree(len(waiting), 'waits', 'wait')} "
                     f"for {who([p.rank for p in away], story.nodes)}, "
                     f"which never {wording.agree(len(away), 'reaches', 'reach')} "
                     f"{' or '.join(names)}. {hazard.why}")
    elif hazard is hazards.COLLECTIVES_MISMATCHED:
        lines.append(f"{hazard.why} {knowledge.MISMATCH_CHECK}")
    else:
        return lines
    return [*lines, knowledge.TIMEOUT_NOTE, hazard.fix_line]


def _node_pid(story: Story, process: ProcessVerdict) -> str:
    """"pid 12553", or on several machines "node b, pid 12553" (pids repeat across machines)."""
    node = story.nodes.get(process.rank) if process.rank is not None else None
    return f"node {node}, pid {process.pid}" if node else f"pid {process.pid}"


def failure_lines(story: Story | None) -> list[str]:
    """The lines that name the first rank that failed as the cause, and the others' ends
    or waits as its effect."""
    if story is None or not story.failed:
        return []
    first, *later = story.failed
    p = first.process
    when = f" at t={first.t:.1f} s" if first.t is not None else ""
    where = f", from your code {p.exception_at}" if p.exception_at else ""
    lines = [f"Rank {p.rank} ({_node_pid(story, p)}) failed first{when}: {p.explanation}{where}.", _job(story)]
    if len(first.traceback) > 1:
        lines.append(f"Its traceback in your code, outermost first: {' → '.join(first.traceback)}.")
    for other in later:
        at = f" at t={other.t:.1f} s" if other.t is not None else ""
        lines.append(f"Rank {other.process.rank} ({_node_pid(story, other.process)}) failed after it{at}: "
                     f"{other.process.explanation}.")
    if story.stopped:
        one = len(story.stopped) == 1
        if story.nodes:  # "rank 1 (node b, pid 990)": the node and the pid in one parenthesis
            them = ", ".join(f"rank {q.rank} ({_node_pid(story, q)})" for q in story.stopped)
        else:
            them = f"{who([q.rank or 0 for q in story.stopped], story.nodes)} " \
                   f"({wording.pids([q.pid for q in story.stopped])})"
        by = ((", most likely by its node's launcher" if one else ", most likely by their nodes' launchers")
              if story.launchers
              else f", most likely by the launcher (pid {story.launcher.pid})" if story.launcher is not None else "")
        habit = (f": {story.launcher_name} stops the other ranks as soon as one fails"
                 if story.launcher_name in knowledge.STOPS_RANKS_ON_FAILURE else "")
        lines.append(f"{_capital(them)} "
                     f"{wording.agree(len(story.stopped), 'was', 'were')} stopped with SIGTERM after it{by}{habit}. "
                     f"That is the effect of rank {p.rank}'s failure, not a cause.")
    waiting = [place for place in story.places if place.process.pid != p.pid]
    if waiting:
        clauses = "; ".join(_where(group, story.nodes) for group in _grouped(waiting))
        lines.append(f"{_capital(clauses)}: waiting for rank {p.rank}, the effect of its failure.")
    return [*lines, hazards.RANK_FAILED.why, hazards.RANK_FAILED.fix_line]


def causes(story: Story | None, certainty: str, observed: str) -> list[Cause]:
    """The story's cause, as data: the failed rank (``observed``), or the ranks that did
    not reach a collective or called another one (``certainty`` of the hang)."""
    if story is None or story.hazard is None:
        return []
    hazard = story.hazard
    if story.failed:
        named = tuple(f.process.pid for f in story.failed)
        evidence, how_sure = failure_lines(story)[:-2], observed
    else:
        collectives = {p.collective for p in story.places if p.collective}
        named = tuple(p.process.pid for p in story.places
                      if p.collective is None or hazard is hazards.COLLECTIVES_MISMATCHED and len(collectives) > 1)
        evidence, how_sure = [line for line in hang_lines(story) if not line.startswith("Fix: ")], certainty
    return [Cause(kind=hazard.cause, certainty=how_sure, rule=hazard.rule,
                  parent=story.launcher.pid if story.launcher is not None else None,
                  processes=named, evidence=tuple(evidence), fix=hazard.fix)]

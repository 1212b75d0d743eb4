"""Write the diagnosis in plain words, citing the evidence behind each claim."""

from __future__ import annotations

import signal
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpudoctor import hazards
from gpudoctor.knowledge.runtimes import said
from gpudoctor.probe import (
    explain_crash_loop,
    explain_exceptions,
    explain_lost_task,
    explain_memory,
    explain_oom,
    explain_openmp_fork,
    explain_peers,
    explain_pool_starved,
    explain_queue_join,
    explain_rank_missing,
    explain_ranks,
    wording,
)
from gpudoctor.probe.command_text import short_command
from gpudoctor.probe.error_strings import CAUSE, CONTEXT, FORK_AFTER_INIT, GPU_OOM, WARNING, Match
from gpudoctor.probe.units import format_size
from gpudoctor.probe.verdicts import StopReason, Verdict
from gpudoctor.probe.wording import agree, plural

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict
    from gpudoctor.probe.record import ProcessRun, RunRecord


# The command line CPython gives the forkserver process (multiprocessing/forkserver.py).
_FORKSERVER_MARK = "from multiprocessing.forkserver import main"


def is_forkserver(process: ProcessVerdict) -> bool:
    """Is this process a multiprocessing forkserver? (Its workers, forked from it, share
    its command line.)"""
    return process.start != "fork" and any(_FORKSERVER_MARK in part for part in process.cmdline)


def _fix_forkserver(server: int | None, runtimes: Sequence[str]) -> list[str]:
    had = f"{runtime_names(runtimes)} initialized" if runtimes else "a GPU framework initialized"
    return [f"The workers come from the forkserver (pid {server}), which had {had} before it "
            f"forked them. {hazards.FORKSERVER_AFTER_INIT.why}", hazards.FORKSERVER_AFTER_INIT.fix_line]


def _interrupted(run: RunRecord) -> str:
    """The lead of a run a signal to gpudoctor stopped: by whom, when, and, when the tree
    sent it, why a program's signal to its parent reaches gpudoctor."""
    name = signal_name(run.signal_received or signal.SIGINT)
    when = run.signal_at if run.signal_at is not None else run.duration
    sender = run.signal_sender
    if sender is None:  # the kernel (Ctrl-C on the terminal), or not known
        return f"Interrupted by {name} {when:.1f} s after the start; the tree was stopped."
    who = f"pid {sender.pid}" + (f" ({short_command(sender.command)})" if sender.command else "")
    if sender.in_tree is None:
        who += ", which had exited before gpudoctor could tell whether it belonged to the tree"
    if not sender.in_tree:
        return f"Interrupted by {name} {when:.1f} s after the start, from {who}; the tree was stopped."
    return (f"The program signalled gpudoctor itself: {who}, a process of the supervised tree, sent "
            f"{name} to gpudoctor {when:.1f} s after the start, and gpudoctor stopped the tree as it "
            f"does on any {name}. Under gpudoctor the command's parent is gpudoctor: a signal the program "
            "sends to its parent (os.getppid()), meant for the shell or launcher that usually starts it, "
            "reaches gpudoctor.")


def signal_name(number: int) -> str:
    """Return "SIGABRT" for 6; "signal 70" for numbers without a name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def runtime_names(runtimes: Sequence[str]) -> str:
    """Say which runtimes were initialized: "TensorFlow and JAX (cpu backend)"."""
    names = [said(r) for r in runtimes]
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def stall(track: ProcessRun) -> str:
    """Describe a stalled process: how long, and what the kernel says it waits in."""
    where = f" in the kernel's {track.wchan}" if track.wchan else ""
    lock = " (a lock or condition variable)" if track.wchan and "futex" in track.wchan else ""
    return f"waiting{where}{lock} with no CPU progress for {track.stalled_for:.1f} s"


def waits_like_a_lock(process: ProcessVerdict) -> bool:
    """Tell whether a waiting child may wait for a lock a fork left held: the kernel says it
    waits on a futex (every lock and condition variable, Python's or native), or does not
    say. A child the kernel shows reading a socket or pipe (``wait_woken``,
    ``anon_pipe_read``) waits for data, not for a lock: its parent's threads at the fork
    (GD102) are not why."""
    return not process.wchan or "futex" in process.wchan


def _pids(processes: Sequence[ProcessVerdict]) -> str:
    return ", ".join(str(p.pid) for p in processes)


def held(track: ProcessRun) -> str:
    """Why a process that was stopped is not called hung, in one clause."""
    how = ("by a tracer (a debugger, strace): ptrace" if track.state == "tracing-stop"
           else "by SIGSTOP (kill -STOP, Ctrl-Z, or a debugger)")
    return (f"stopped {how} for {track.stalled_for:.1f} s, not hung: it waits to be continued; "
            "gpudoctor continued it (SIGCONT) and killed it")


def _stopped(run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    held_ones = [p for p in judged if p.verdict == Verdict.STOPPED]
    return [f"Stopped, not hung: {plural(len(held_ones), 'process')} held stopped (SIGSTOP or ptrace): "
            f"{_pids(held_ones)}; nothing else in the tree moved for --hang-after "
            f"{run.limits.hang_after:g} s. A stopped process waits for SIGCONT or its debugger; it is "
            "not a deadlock of the program's own. gpudoctor continued and killed the tree."]


_HELD = ("stopped", "tracing-stop")  # a process held by SIGSTOP or a tracer: neither busy nor waiting

# Seconds without CPU progress that count as evidence of a wait when the run was stopped
# (Ctrl-C, --timeout) before --hang-after: a computing process gains CPU time every
# scan (0.1 s), so a second of none is a wait, though not yet a proven hang.
IDLE_EVIDENCE = 1.0


def busy(run: RunRecord) -> list[int]:
    """The PIDs that were still making CPU progress when the tree was stopped (in the
    last ``IDLE_EVIDENCE`` seconds). A tree with one of them is never called hung, proven
    or likely: a parent waiting on busy workers waits, it is not deadlocked."""
    return sorted(t.pid for t in run.processes
                  if t.alive_at_stop and t.state not in _HELD and t.stalled_for < IDLE_EVIDENCE)


def tree_still(run: RunRecord) -> bool:
    """Tell whether nothing in the tree moved for --hang-after when it was stopped: the
    supervisor saw it (stop reason ``hung``), or every process alive at the stop had been
    without CPU progress that long (a deadline that came in the same instant)."""
    if run.stop_reason == StopReason.HUNG:
        return True
    live = [t for t in run.processes if t.alive_at_stop]
    return bool(live) and all(t.stalled_for >= run.limits.hang_after for t in live)


def waiting(run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[ProcessVerdict]:
    """The processes that were idle when a signal or --timeout stopped the run short of
    --hang-after: the evidence of a likely hang. Empty unless every process still running
    waited (a parent waiting on busy workers is no hang)."""
    if run.stop_reason not in (StopReason.INTERRUPTED, StopReason.TIMEOUT) or busy(run):
        return []
    alive = {t.pid for t in run.processes if t.alive_at_stop}
    return [p for p in judged if p.pid in alive and p.verdict == Verdict.KILLED and p.stalled_for >= IDLE_EVIDENCE]


def busy_not_hung(run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """Say which processes were busy at the stop and which waited (on them, most likely):
    why a run cut short with idle processes in it is still not called hung."""
    working = busy(run)
    idle = [p for p in judged if p.verdict == Verdict.KILLED and p.pid not in working
            and p.stalled_for >= IDLE_EVIDENCE]
    if not working or not idle:
        return []
    longest = max(p.stalled_for for p in idle)
    return [f"Busy, not hung: {wording.pids(working)} {agree(len(working), 'was', 'were')} making CPU "
            f"progress; {wording.pids([p.pid for p in idle])} waited (idle up to {longest:.1f} s), most likely on "
            f"{agree(len(working), 'it', 'them')}: a process that waits on busy ones is not hung."]


def _hung(run: RunRecord, judged: Sequence[ProcessVerdict], lost: set[int],
          ranks: explain_ranks.Story | None, told: set[int]) -> list[str]:
    hung = [p for p in judged if p.verdict == Verdict.HUNG]
    return [f"Hung: {plural(len(hung), 'process')} waited with no CPU progress for at least "
            f"{run.limits.hang_after:g} s: {_pids(hung)}.", *explain_ranks.hang_lines(ranks),
            *_stuck(hung, judged, lost, ranks, told)]


def _likely_hung(run: RunRecord, idle: Sequence[ProcessVerdict], judged: Sequence[ProcessVerdict],
                 lost: set[int], ranks: explain_ranks.Story | None, told: set[int]) -> list[str]:
    """Explain a run stopped before --hang-after from the waits seen so far, as likely."""
    low, high = min(p.stalled_for for p in idle), max(p.stalled_for for p in idle)
    span = f"{low:.1f} s" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f} to {high:.1f} s"
    return [f"Likely hung: {plural(len(idle), 'process')} {agree(len(idle), 'was', 'were')} idle for {span} "
            "(waiting with no CPU progress) when "
            f"the tree was stopped, short of --hang-after {run.limits.hang_after:g} s, so the hang is likely, "
            f"not proven: {_pids(idle)}.", *explain_ranks.hang_lines(ranks), *_stuck(idle, judged, lost, ranks, told)]


def _stuck(hung: Sequence[ProcessVerdict], judged: Sequence[ProcessVerdict], lost: set[int],
           ranks: explain_ranks.Story | None = None, told_here: set[int] | None = None) -> list[str]:
    """Say who forked the waiting processes from what state, where they block, and the fix.

    ``lost``: parents whose threads at the fork are not why they wait: they wait for the task
    of a worker that died (explain_lost_task), join a child held by its queue
    (explain_queue_join), or forked children that wait in an OpenMP pool (explain_openmp_fork).
    ``ranks``: the ranks of a distributed job, whose places it has told already.
    ``told_here``: processes whose wait those causes tell, each with its own lines."""
    told_here = told_here or set()
    forked = [p for p in hung if p.start == "fork"]
    lines: list[str] = []
    servers = {p.pid for p in judged if is_forkserver(p)}
    by_parent: dict[tuple[int | None, tuple[str, ...]], list[ProcessVerdict]] = {}
    for p in forked:
        by_parent.setdefault((p.ppid, p.runtimes_at_fork), []).append(p)
    for (parent, runtimes), children in by_parent.items():
        if not runtimes and all(p.pid in told_here for p in children):
            continue
        lines.append(fork_origin(children, parent, runtimes, parent in servers))
        threads = sorted({p.threads_at_fork for p in children if p.threads_at_fork})
        if runtimes and all(p.pid in told_here for p in children):
            # Their stacks show another wait, told below: the framework is not why they wait.
            lines.append(f"That is a hazard of its own ({hazards.FORK_AFTER_INIT.rule}) for a child that runs "
                         f"{runtime_names(runtimes)}, but {agree(len(children), 'this one waits', 'these wait')} "
                         "elsewhere, as told below.")
        elif runtimes:
            lines.append(hazards.why_for(hazards.FORK_AFTER_INIT, runtimes))
        elif threads[-1:] > [1] and parent not in lost and any(map(waits_like_a_lock, children)):
            lines.append(hazards.MULTITHREADED_FORK.why)
    told = (ranks.told if ranks is not None and (ranks.places or ranks.failed) else set()) | told_here
    blocked = sorted({p.blocked_in for p in hung if p.blocked_in and p.start == "fork" and p.pid not in told})
    blocked = blocked or sorted({p.blocked_in for p in hung if p.blocked_in and p.pid not in told})
    for where in blocked[:3]:
        lines.append(f"Blocked in {where}.")
    waiting_ones = [p for p in hung if p.start != "fork"]
    if forked and waiting_ones and not lost & {p.pid for p in waiting_ones}:
        # A Pool is named only where no stack says otherwise: the stacks known show its frames.
        known = [p for p in waiting_ones if p.stack]
        how = " (e.g. Pool.map waiting for results)" if not known or \
            any(explain_lost_task.pool_wait(p)[0] for p in known) else \
            f", blocked in {known[0].blocked_in}" if known[0].blocked_in else ""
        lines.append(f"{_pids(waiting_ones)} {agree(len(waiting_ones), 'waits', 'wait')} for "
                     f"{agree(len(forked), 'it', 'them')}{how}.")
    initialized = [p for p in forked if p.runtimes_at_fork and p.pid not in told_here]
    if initialized:
        lines += _fork_fix(initialized, judged)
    elif any((p.threads_at_fork or 0) > 1 and waits_like_a_lock(p) for p in forked if p.ppid not in lost):
        lines.append(hazards.MULTITHREADED_FORK.fix_line)
    return lines


def fork_origin(children: Sequence[ProcessVerdict], parent: int | None, runtimes: Sequence[str],
                from_server: bool) -> str:
    """Say from which parent, when and in what state ``children`` were forked."""
    threads = sorted({p.threads_at_fork for p in children if p.threads_at_fork})
    what = []
    # A supervised run's fork hooks record when each child was forked and what its parent
    # had initialized then; an attached tree's runtimes come from /proc maps, which show
    # what was loaded, not whether it was initialized.
    seen_by_hooks = any(p.forked_at is not None for p in children)
    if runtimes:
        what.append(f"{runtime_names(runtimes)} {'initialized' if seen_by_hooks else 'loaded'}")
    if threads:
        counts = " to ".join(str(n) for n in (threads[0], threads[-1]) if n) if len(threads) > 1 \
            else str(threads[0])
        what.append(f"{counts} native {'thread' if threads == [1] else 'threads'}")
    had = " and ".join(what) or "no GPU runtime initialized"
    when = f" at t={children[0].forked_at:.1f} s" if children[0].forked_at is not None else ""
    server = "the forkserver, " if from_server else ""
    return (f"{_pids(children)} {agree(len(children), 'was', 'were')} forked{when} from {server}pid {parent}, "
            f"which had {had} at the fork.")


# The most kinds of failure the explanation lists, and the most PIDs it names for one.
_FAILURE_KINDS = 5
_PIDS_NAMED = 5


def some_pids(numbers: Sequence[int]) -> str:
    """Name a few PIDs and count the rest: "pids 7, 8, 9, 10, 11 and 15 more"."""
    shown = ", ".join(str(n) for n in numbers[:_PIDS_NAMED])
    more = f" and {len(numbers) - _PIDS_NAMED} more" if len(numbers) > _PIDS_NAMED else ""
    return f"{agree(len(numbers), 'pid', 'pids')} {shown}{more}"


def failure_groups(judged: Sequence[ProcessVerdict]) -> list[list[ProcessVerdict]]:
    """The children that failed, identical failures together (the same way of starting,
    verdict, exit and exception, from the same line of the user's), in PID order of the
    first of each. SIGTERM from a parent is how a pool shuts its workers down: no failure."""
    groups: dict[tuple[str, str, str, str | None], list[ProcessVerdict]] = {}
    for p in judged:
        if p.start != "root" and (p.verdict in (Verdict.CRASHED, Verdict.OOM)
                                  or (p.verdict == Verdict.KILLED and p.exit_code == -9)):
            groups.setdefault((p.start, p.verdict, p.explanation, p.exception_at), []).append(p)
    return list(groups.values())


def _failed(judged: Sequence[ProcessVerdict]) -> list[str]:
    """One line per kind of failure of the children: identical failures of many children
    are one line with their count, not a line each."""
    lines = []
    for members in failure_groups(judged)[:_FAILURE_KINDS]:
        first = members[0]
        where = f", from your code {first.exception_at}" if first.exception_at else ""
        if len(members) == 1:
            lines.append(f"pid {first.pid} ({first.start}) {first.explanation}{where}.")
            continue
        kind = f"{first.start} children" if first.start in ("fork", "spawn") else "children"
        lines.append(f"{len(members)} {kind} {first.explanation}{where} "
                     f"({some_pids([p.pid for p in members])}).")
    return lines


def _memory(run: RunRecord) -> list[str]:
    """Cite the GPU memory peaks, and which processes held the memory."""
    peaks = run.peaks
    lines: list[str] = []
    tree = {p.pid for p in run.processes} | {run.root_pid}
    for device, used in sorted(peaks.device_used.items()):
        total = peaks.device_total.get(device) or 0
        share = f" ({100 * used / total:.0f}%)" if total else ""
        lines.append(f"GPU {device} memory peaked at {format_size(used)} of "
                     f"{format_size(total)}{share}.")
        held = [(pid, b) for (d, pid), b in peaks.process_gpu.items() if d == device]
        ours = [f"pid {pid} {format_size(b)}" for pid, b in held if pid in tree]
        others = [f"pid {pid} {format_size(b)}" for pid, b in held if pid not in tree]
        if ours:
            lines.append(f"  held by this command: {', '.join(ours)}.")
        if others:
            lines.append(f"  held by other processes: {', '.join(others)}.")
    lines += list(peaks.pid_namespace_notes)
    if not lines and peaks.nvml_reason:
        lines.append(f"No GPU memory evidence: {peaks.nvml_reason}.")
    return lines


def _matched(matches: Sequence[Match], kind: str, label: str, said: Sequence[str] = ()) -> list[str]:
    """One line per known string found: what it means, and the line (not quoted again where
    a line of ``said``, the explanation so far, quotes it already)."""
    found = [m for m in matches if m.pattern.kind == kind]
    text = "\n".join(said)
    return [f"{label}{m.pattern.meaning}{_rule_of(m)}" + ("." if m.line in text else f": {m.line}")
            for m in found[:5]]


def _rule_of(match: Match) -> str:
    """" (GD302)" for a cause the linter finds in the code, else nothing."""
    hazard = hazards.BY_CAUSE.get(match.pattern.category)
    return f" ({hazard.rule})" if hazard is not None and hazard.rule and match.pattern.kind == CAUSE else ""


def _string_fixes(matches: Sequence[Match], said: Sequence[str]) -> list[str]:
    """The fix of each cause an error string named that no line above has fixed yet."""
    lines: list[str] = []
    for category in dict.fromkeys(m.pattern.category for m in matches if m.pattern.kind == CAUSE):
        hazard = hazards.BY_CAUSE.get(category)
        if hazard is not None and hazard.fix_line not in said and hazard.fix_line not in lines:
            lines.append(hazard.fix_line)
    return lines


def _forks_from_initialized(judged: Sequence[ProcessVerdict]) -> list[str]:
    forked = [p for p in judged if p.start == "fork" and p.runtimes_at_fork]
    if not forked:
        return []
    p = forked[0]
    return [f"{plural(len(forked), 'process')} {agree(len(forked), 'was', 'were')} forked from a parent with "
            f"{runtime_names(p.runtimes_at_fork)} initialized (e.g. pid {p.pid} from {p.ppid}).",
            *_fork_fix(forked, judged)]


def _fork_fix(forked: Sequence[ProcessVerdict], judged: Sequence[ProcessVerdict]) -> list[str]:
    """The fix for children forked from an initialized parent: a forkserver that did the
    initialization gets its own (spawn-or-forkserver advice would be wrong there)."""
    by_pid = {p.pid: p for p in judged}
    served = [p for p in forked if p.ppid in by_pid and is_forkserver(by_pid[p.ppid])]
    return _fix_forkserver(served[0].ppid, served[0].runtimes_at_fork) if served \
        else [hazards.FORK_AFTER_INIT.fix_line]


def explain(run: RunRecord, verdict: Verdict, judged: Sequence[ProcessVerdict],
            matches: Sequence[Match]) -> str:
    """Return the whole explanation: the verdict's reason first, evidence after."""
    lines: list[str] = []
    root = next((p for p in judged if p.start == "root"), None)
    idle = waiting(run, judged) if verdict != Verdict.HUNG else []
    stuck = {p.pid for p in judged if p.verdict == Verdict.HUNG} if verdict == Verdict.HUNG else {p.pid for p in idle}
    peers = explain_peers.find(run, judged, stuck)
    lost = explain_lost_task.find(run, judged, stuck - peers.told)
    queued = explain_queue_join.find(judged, stuck)
    openmp = explain_openmp_fork.find(judged, stuck)
    lost_parents = {task.parent for task in lost} | {q.parent for q in queued} | explain_openmp_fork.parents(openmp)
    told = explain_queue_join.told(queued) | explain_openmp_fork.told(openmp)
    lost_parents |= peers.told  # they wait for a dead or blocked peer (told below), not for a fork
    told |= peers.told
    ranks = explain_ranks.find(run, judged, stuck)
    if run.escaped:
        lines.append(f"Escaped: gpudoctor could not stop {wording.pids(run.escaped)} (SIGKILL had no effect: "
                     "another user's process, or another PID namespace's); still running after the run.")
    lines += explain_ranks.failure_lines(ranks)  # the first rank that failed leads: the rest is its effect
    if verdict == Verdict.STOPPED:
        lines += _stopped(run, judged)
    elif verdict == Verdict.HUNG:
        lines += _hung(run, judged, lost_parents, ranks, told)
    elif run.stop_reason == StopReason.MEMORY_LIMIT:
        total = sum(p.rss_peak or 0 for p in judged)
        lines.append(f"Out of host memory: the tree's resident memory passed --memory-limit "
                     f"{format_size(run.limits.memory_limit)} (sum of peaks {format_size(total)}); "
                     "gpudoctor stopped it.")
    elif run.stop_reason == StopReason.PROCESS_LIMIT:
        lines.append(f"Fork bomb: the tree grew past --max-processes {run.limits.max_processes} "
                     "live processes; gpudoctor stopped all of them.")
    elif run.stop_reason == StopReason.TIMEOUT and idle:
        lines.append(f"Stopped at --timeout {run.limits.timeout:g} s, before --hang-after "
                     f"{run.limits.hang_after:g} s.")
        lines += _likely_hung(run, idle, judged, lost_parents, ranks, told)
    elif run.stop_reason == StopReason.TIMEOUT:
        working = busy_not_hung(run, judged)
        lines.append(f"Still running after --timeout {run.limits.timeout:g} s; gpudoctor stopped it." if working
                     else f"Still running after --timeout {run.limits.timeout:g} s; no process had waited "
                     f"without CPU progress for --hang-after {run.limits.hang_after:g} s, so gpudoctor cannot "
                     "call it a hang (lower --hang-after to judge sooner); gpudoctor stopped it.")
        lines += working
    elif run.stop_reason == StopReason.INTERRUPTED:
        lines.append(_interrupted(run))
        lines += _likely_hung(run, idle, judged, lost_parents, ranks, told) if idle else busy_not_hung(run, judged)
    elif run.stop_reason == StopReason.CRASH_LOOP:
        lines += explain_crash_loop.lines(run, judged)
    elif root is not None:
        lines.append(f"The command {root.explanation}.")
    told = {f.process.pid for f in ranks.failed} if ranks is not None else set()
    lines += _failed([p for p in judged if p.pid not in told])
    lines += peers.lines()
    lines += explain_lost_task.lines(lost, matches)
    lines += explain_openmp_fork.lines(openmp)
    lines += explain_queue_join.lines(queued)
    lines += explain_pool_starved.lines(explain_pool_starved.find(judged, stuck))
    lines += explain_rank_missing.lines(explain_rank_missing.find(run, judged, stuck))
    exceptions = explain_exceptions.find(run, judged)
    lines += explain_exceptions.lines(exceptions, lines)
    lines += _matched([m for m in matches if m.pattern.category not in explain_exceptions.told(exceptions)],
                      CAUSE, "Cause: ", lines)
    causes_at = len(lines)
    cut_short = run.stop_reason in (StopReason.INTERRUPTED, StopReason.TIMEOUT)
    if any(m.pattern.category == FORK_AFTER_INIT for m in matches) and verdict != Verdict.HUNG and not idle:
        lines += _forks_from_initialized(judged)
    elif (verdict == Verdict.OK or (cut_short and not idle)) and \
            any(p.start == "fork" and p.runtimes_at_fork for p in judged):
        # It worked, or nothing waited yet: the hazard was there, with its evidence.
        found = _forks_from_initialized(judged)
        ended = ("This run finished" if verdict == Verdict.OK else "Nothing waited yet when the tree was stopped"
                 if not any(p.stalled_for >= IDLE_EVIDENCE for p in judged if p.verdict == Verdict.KILLED)
                 else "The tree was still busy when it was stopped")
        lines += [f"Warning: {found[0]} {ended}, but a child that uses the GPU runtime it "
                  f"inherited can hang or fail (gpudoctor lint reports it as {hazards.FORK_AFTER_INIT.rule}).",
                  *found[1:]]
    if verdict == Verdict.OOM or any(m.pattern.category == GPU_OOM for m in matches):
        lines += _memory(run)
        lines += explain_oom.one_holds_all(run, judged)
    if verdict == Verdict.OOM or any(m.pattern.category == GPU_OOM for m in matches) or \
            explain_memory.host_ran_out(run, judged):
        lines += explain_memory.lines(explain_memory.attribute(run, judged))
    lines[causes_at:causes_at] = _string_fixes(matches, lines)
    lines += _matched(matches, WARNING, "Warning: ")
    lines += _matched(matches, CONTEXT, "Context (not the cause): ")
    lines += [f"Note: {note}" for note in run.notes]
    if verdict == Verdict.FAILED and not any(m.pattern.kind == CAUSE for m in matches) and not exceptions:
        last = [line for line in run.stderr.strip().splitlines() if line.strip()]
        if last:
            lines.append(f"Last line of stderr: {last[-1].strip()[:300]}")
    return "\n".join(lines)

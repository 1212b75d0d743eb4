"""Turn a supervised run's evidence into verdicts: per process, and for the command.

The verdicts are ``Verdict``'s (verdicts.py): ``ok``, ``hung``, ``stopped`` (held by
SIGSTOP or a tracer: not a deadlock), ``crashed``, ``oom``, ``killed``, and ``unknown``
for a process whose own parent reaped it before its exit status could be observed; the
command as a whole can also be ``failed`` (exited non-zero without a crash, hang or OOM
to blame) or ``escaped`` (a process of its tree outlived gpudoctor's SIGKILL).
"""

from __future__ import annotations

import dataclasses
import signal

from gpudoctor.probe import (
    error_strings,
    events,
    explain,
    explain_exceptions,
    explain_memory,
    explain_ranks,
    failures,
    ranks,
    stacks,
    wording,
)
from gpudoctor.probe.causes import find as find_causes
from gpudoctor.probe.diagnosis import Diagnosis, ErrorMatch, ProcessVerdict
from gpudoctor.probe.error_strings import CAUSE, GPU_OOM, Match
from gpudoctor.probe.ranks import Rank
from gpudoctor.probe.record import ProcessRun, RunRecord
from gpudoctor.probe.verdicts import StopReason, Verdict

__all__ = ["Diagnosis", "ProcessVerdict", "diagnose"]

# Signals a process dies of when it crashed on its own (as opposed to being stopped).
_CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}


def _fatal(text: str | None) -> str | None:
    """Summarize faulthandler's fatal-error report: its first line and where it happened."""
    if not text:
        return None
    first = text.splitlines()[0].strip()
    where = stacks.blocked_in_python(text)
    return f"{first}, at {where}" if where else first


def _sigkill(run: RunRecord) -> tuple[Verdict, str]:
    """Judge a SIGKILL gpudoctor did not send, with the cgroup's OOM kill counter if readable."""
    lead = "killed by SIGKILL (exit -9), not by gpudoctor"
    if run.oom_kills:
        return Verdict.OOM, (f"{lead}: most likely the kernel's OOM killer, since this cgroup's OOM kill "
                       f"counter rose by {run.oom_kills} during the run")
    if run.oom_kills == 0:
        return Verdict.KILLED, (f"{lead}: possibly the kernel's OOM killer (it sends SIGKILL when memory "
                          "runs out), though this cgroup's OOM kill counter did not move")
    return Verdict.KILLED, (f"{lead}: possibly the kernel's OOM killer, which sends SIGKILL when host "
                      "memory runs out")


def _stall(track: ProcessRun) -> str:
    """``explain.stall``; for a process that can never finish whatever CPU it uses (wedged.py:
    a Pool whose result handler died), its main thread's stall, measured so."""
    if track.wedged_at is None:
        return explain.stall(track)
    return (f"its main thread waiting with no CPU progress for {track.stalled_for:.1f} s; the CPU its other threads "
            f"used is no progress: its Pool's result-handler thread died at t={track.wedged_at:.1f} s")


def _judge(run: RunRecord, track: ProcessRun | None, code: int | None, oom_seen: bool,
           fatal: str | None, python_exit: bool, busy: list[int]) -> tuple[Verdict, str]:
    """Return (verdict, one-sentence reason) for one process.

    ``fatal`` summarizes a fatal-error report faulthandler left; ``python_exit`` says
    the process recorded an exit through Python's own shutdown (so not a signal);
    ``busy`` are the processes still making CPU progress at the stop: while there are
    any, no process is hung, however long it waited (on them, most likely).
    """
    if track is not None and track.alive_at_stop:
        if run.stop_reason == StopReason.EXITED:  # the command ended by itself: a leftover, not the cause
            return Verdict.KILLED, "left running after the command exited, killed by gpudoctor"
        if track.state in ("stopped", "tracing-stop"):
            return Verdict.STOPPED, explain.held(track)
        if run.stop_reason == StopReason.STOPPED:  # waiting, most likely on a process that was held
            return Verdict.KILLED, (f"waiting with no CPU progress for {track.stalled_for:.1f} s while the tree "
                              "was held stopped, killed by gpudoctor")
        if any("resource_tracker" in a for a in track.cmdline) and \
                run.stop_reason in (StopReason.HUNG, StopReason.MEMORY_LIMIT):
            # It waits for its parent by design and holds none of the work's memory. (Not the
            # fork server: the workers it forks carry its command line.)
            return Verdict.KILLED, ("multiprocessing's resource tracker: it waits for its parent by design, "
                                    "stopped with the tree")
        if track.stalled_for >= run.limits.hang_after and explain.tree_still(run):
            return Verdict.HUNG, _stall(track)
        if run.stop_reason == StopReason.MEMORY_LIMIT:
            return Verdict.OOM, "running when the tree's host memory passed --memory-limit"
        others = [pid for pid in busy if pid != track.pid]
        if track.stalled_for >= explain.IDLE_EVIDENCE and others:
            return Verdict.KILLED, (f"{_stall(track)} while {wording.pids(others)} made CPU "
                                    f"progress: waiting, not hung, when gpudoctor stopped the tree "
                                    f"({run.stop_reason})")
        if track.stalled_for >= explain.IDLE_EVIDENCE and \
                run.stop_reason in (StopReason.INTERRUPTED, StopReason.TIMEOUT):
            # Stopped (Ctrl-C, --timeout) before the hang could be proven: say what was seen.
            return Verdict.KILLED, (f"{_stall(track)} when gpudoctor stopped the tree "
                                    f"({run.stop_reason}): likely hung, short of --hang-after "
                                    f"{run.limits.hang_after:g} s")
        return Verdict.KILLED, f"still running (not hung) when gpudoctor stopped the tree ({run.stop_reason})"
    if code is None:
        unseen = "its own parent reaped it, so its exit status was not observed"
        if fatal:
            return Verdict.CRASHED, f"died of a fatal error: {fatal} ({unseen})"
        if track is not None and track.killed_by_supervisor:
            return Verdict.KILLED, f"killed by gpudoctor ({unseen})"
        if python_exit:
            return Verdict.UNKNOWN, f"exited through Python's shutdown, not by a signal, but {unseen}"
        return Verdict.UNKNOWN, f"exit status not observed: {unseen}"
    if code == 0:
        return Verdict.OK, "exited with status 0"
    if code < 0:
        name = explain.signal_name(-code)
        if track is not None and track.killed_by_supervisor:
            return Verdict.KILLED, f"killed by gpudoctor ({name})"
        if -code in _CRASH_SIGNALS or fatal:
            extra = (" — a fatal native error (abort(): a failed check or an uncaught C++ exception in native "
                     "code)") if code == -6 else ""
            extra += f"; {fatal}" if fatal else ""
            return Verdict.CRASHED, f"died of {name} (exit {code}){extra}"
        if code == -9:
            return _sigkill(run)
        return Verdict.KILLED, f"terminated by {name} (exit {code})"
    if oom_seen:
        return Verdict.OOM, f"exited with status {code} after an out-of-memory error"
    return Verdict.CRASHED, f"exited with status {code}"


def _overall(run: RunRecord, judged: list[ProcessVerdict], causes: list[Match]) -> Verdict:
    verdicts = {p.verdict for p in judged}
    root = next((p for p in judged if p.start == "root"), None)
    root_code = run.exit_code
    if run.escaped:
        return Verdict.ESCAPED
    if run.stop_reason == StopReason.STOPPED:
        return Verdict.STOPPED
    if run.stop_reason == StopReason.CRASH_LOOP:
        return Verdict.CRASH_LOOP
    if run.stop_reason == StopReason.HUNG or Verdict.HUNG in verdicts:
        return Verdict.HUNG
    if run.stop_reason == StopReason.MEMORY_LIMIT or Verdict.OOM in verdicts:
        return Verdict.OOM
    if run.stop_reason in (StopReason.TIMEOUT, StopReason.INTERRUPTED, StopReason.PROCESS_LIMIT):
        return Verdict.KILLED
    if root is not None and root.verdict in (Verdict.CRASHED, Verdict.KILLED) and (root_code or 0) < 0:
        return root.verdict
    # A rank that failed fails the job, whatever its launcher made of it (torchrun stops
    # the other ranks and exits 1).
    if explain_ranks.failed(run, judged):
        return Verdict.CRASHED
    # A worker that exited non-zero was handled by its parent (the root's status says
    # how well); one that died of a crash signal is a crash whatever the root did.
    if any(p.verdict == Verdict.CRASHED and ((p.exit_code or 0) < 0 or p.fatal_error)
           for p in judged if p.start != "root"):
        return Verdict.CRASHED
    if root_code:
        forked_after_init = any(m.pattern.category == error_strings.FORK_AFTER_INIT for m in causes)
        return Verdict.CRASHED if forked_after_init else Verdict.FAILED
    return Verdict.OK


def _ranked(judged: list[ProcessVerdict], found: dict[int, Rank]) -> list[ProcessVerdict]:
    """Give each rank of a distributed job its place, and its launcher its role.

    A process whose parent has the same rank inherited its environment (a DataLoader
    worker of the rank): the rank is its parent. A process whose children have ranks of
    another family than its own (torchrun under ``srun``) is their launcher, no rank.
    A rank that a SIGTERM from outside gpudoctor ended was stopped, most likely by its
    launcher when another rank failed: not the clean end of a pool worker.
    """
    if not found:
        return judged
    by_pid = {p.pid: p for p in judged}
    launchers = {p.ppid for p in judged if p.pid in found and p.ppid is not None
                 and found.get(p.ppid) != found[p.pid]}
    out = []
    for p in judged:
        rank = found.get(p.pid)
        parent = by_pid.get(p.ppid) if p.ppid is not None else None
        if rank is not None and (p.pid in launchers or (parent is not None and found.get(parent.pid) == rank)):
            rank = None
        if rank is None:
            out.append(dataclasses.replace(p, launches_ranks=p.pid in launchers) if p.pid in launchers else p)
            continue
        p = dataclasses.replace(p, rank=rank.rank, local_rank=rank.local_rank, world_size=rank.world_size)
        if p.verdict == Verdict.OK and p.exit_code == -signal.SIGTERM:
            p = dataclasses.replace(p, verdict=Verdict.KILLED, explanation=(
                f"terminated by SIGTERM (exit -15), most likely from its launcher, pid {p.ppid}"))
        out.append(p)
    return out


def diagnose(run: RunRecord) -> Diagnosis:
    """Judge every process of ``run`` and explain the command's outcome."""
    matches = explain_exceptions.without_superseded(error_strings.find(run.stderr + "\n" + run.stdout), run.stderr)
    causes = [m for m in matches if m.pattern.kind == CAUSE]
    oom_seen = any(m.pattern.category == GPU_OOM for m in causes)
    origins = events.origins(run.events)
    recorded = events.exit_codes(run.events)
    raised = failures.raised(run.events)
    # One entry per process: a PID the kernel reused is two processes (earlier one first).
    entries: list[tuple[int, ProcessRun | None]] = [(p.pid, p) for p in run.processes]
    seen = {p.pid for p in run.processes}
    entries += [(pid, None) for pid in (set(origins) | {run.root_pid}) - seen]
    # The root first, then by pid: pids wrap around (a fork can have a smaller pid than
    # its parent), and a report reads from the process the user started.
    entries.sort(key=lambda entry: (entry[0] != run.root_pid, entry[0]))
    judged: list[ProcessVerdict] = []
    root_done = False
    busy = explain.busy(run)
    for pid, track in entries:
        origin = origins.get(pid)
        code = track.exit_code if track and track.exit_code is not None else recorded.get(pid)
        fatal = _fatal(run.fatal_errors.get(pid))
        python_exit = pid in recorded and recorded[pid] is None
        verdict, reason = _judge(run, track, code, oom_seen, fatal, python_exit, busy)
        if verdict == Verdict.KILLED and code == -signal.SIGTERM and pid != run.root_pid and \
                run.stop_reason == StopReason.EXITED and (track is None or not track.killed_by_supervisor):
            # How multiprocessing.Pool and ProcessPoolExecutor shut their workers down.
            verdict = Verdict.OK
            reason = "stopped with SIGTERM by its parent (how a process pool shuts down its workers)"
        error = raised.get(pid)
        if error is not None and code is not None and code > 0 and verdict in (Verdict.CRASHED, Verdict.OOM):
            reason = f"{reason}: {error.summary.rstrip('.')}"
        user = error.user_frame if error is not None else None
        stack = run.stacks.get(pid)
        if stack is None and pid in run.fatal_errors:
            stack = stacks.Stack(run.fatal_errors[pid], "faulthandler", None)
        is_root = pid == run.root_pid and not root_done
        root_done = root_done or is_root
        gpu = {device: used for (device, p), used in run.peaks.process_gpu.items() if p == pid}
        judged.append(ProcessVerdict(
            pid=pid,
            # Who forked it, as the child recorded at the fork: the parent gpudoctor saw first
            # may already have been gpudoctor itself (an orphan adopted by the subreaper).
            ppid=origin.parent if origin and origin.how == "fork" and origin.parent
            else track.ppid if track else (origin.parent if origin else None),
            cmdline=track.cmdline if track else (),
            start="root" if is_root else (origin.how if origin else "unknown"),
            verdict=verdict,
            exit_code=code,
            threads_at_fork=origin.threads_at_fork if origin else None,
            runtimes_at_fork=origin.runtimes_at_fork if origin else (),
            forked_at=origin.t if origin and origin.how == "fork" else None,
            stalled_for=track.stalled_for if track else 0.0,
            wchan=track.wchan if track else None,
            blocked_in=stack.blocked_in if stack else None,
            stack=stack.text if stack else None,
            stack_source=stack.source if stack else None,
            # What --memory-limit read may be later than the scan's last look, and more.
            rss_peak=max(track.rss_peak, limit.rss if (limit := run.at_memory_limit.get(pid)) else 0) if track
            else run.peaks.process_rss.get(pid),
            gpu_memory_peak=gpu,
            explanation=reason,
            fatal_error=fatal,
            exception=error.summary if error is not None else None,
            exception_at=user.where if user is not None else None,
        ))
    # (A launcher's variables first; then the index torch.multiprocessing.spawn gave a process.)
    judged = _ranked(judged, {**ranks.spawned(run.events),
                              **{p.pid: p.rank for p in run.processes if p.rank is not None}})
    verdict = _overall(run, judged, causes)
    text = explain.explain(run, verdict, judged, matches)
    found = tuple(ErrorMatch(m.pattern.row, m.pattern.framework, m.pattern.kind, m.pattern.category, m.line)
                  for m in matches)
    named = find_causes(run, verdict, judged, matches)
    memory = explain_memory.attribute(run, judged) if verdict == Verdict.OOM or \
        explain_memory.host_ran_out(run, judged) else None
    return Diagnosis(verdict, run.exit_code, text, tuple(judged), found, StopReason(run.stop_reason), named,
                     memory)

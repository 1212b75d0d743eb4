"""Turn a supervised run's evidence into verdicts: per process, and for the command.

Verdicts: ``ok``, ``hung``, ``crashed``, ``oom``, ``killed``; the command as a whole
can also be ``failed`` (exited non-zero without a crash, hang or OOM to blame).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from gpudoctor.probe import error_strings, events, explain
from gpudoctor.probe.error_strings import CAUSE, GPU_OOM, Match
from gpudoctor.probe.supervise import ProcessRun, RunRecord

# Signals a process dies of when it crashed on its own (as opposed to being stopped).
_CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}


@dataclass(frozen=True)
class ProcessVerdict:
    """One process of the tree, judged."""

    pid: int
    ppid: int | None
    cmdline: tuple[str, ...]
    start: str  # "root", "fork", "spawn", "exec", "unknown"
    verdict: str
    exit_code: int | None
    threads_at_fork: int | None
    runtimes_at_fork: tuple[str, ...]
    forked_at: float | None
    stalled_for: float
    wchan: str | None
    blocked_in: str | None
    stack: str | None
    stack_source: str | None
    rss_peak: int | None
    gpu_memory_peak: dict[int, int | None]
    explanation: str


@dataclass(frozen=True)
class Diagnosis:
    """The command's verdict, its explanation in plain words, and the judged processes."""

    verdict: str
    exit_code: int | None
    explanation: str
    processes: tuple[ProcessVerdict, ...]
    matches: tuple[Match, ...]


def _judge(
    run: RunRecord, track: ProcessRun | None, code: int | None, oom_seen: bool
) -> tuple[str, str]:
    """Return (verdict, one-sentence reason) for one process."""
    if track is not None and track.alive_at_stop:
        if track.stalled_for >= run.limits.hang_after:
            return "hung", explain.stall(track)
        if run.stop_reason == "memory-limit":
            return "oom", "running when the tree's host memory passed --memory-limit"
        return "killed", f"still running (not hung) when gpudoctor stopped the tree ({run.stop_reason})"
    if code is None:
        return "ok", "exit status not observed (its own parent reaped it)"
    if code == 0:
        return "ok", "exited with status 0"
    if code < 0:
        name = explain.signal_name(-code)
        if track is not None and track.killed_by_supervisor:
            return "killed", f"killed by gpudoctor ({name})"
        if -code in _CRASH_SIGNALS:
            extra = " — a fatal native error (TensorFlow's 'F' log lines abort)" if code == -6 else ""
            return "crashed", f"died of {name} (exit {code}){extra}"
        if code == -9:
            return "killed", ("killed by SIGKILL (exit -9), not by gpudoctor: the kernel's OOM "
                              "killer does this when host memory runs out")
        return "killed", f"terminated by {name} (exit {code})"
    if oom_seen:
        return "oom", f"exited with status {code} after an out-of-memory error"
    return "crashed", f"exited with status {code}"


def _overall(run: RunRecord, judged: list[ProcessVerdict], causes: list[Match]) -> str:
    verdicts = {p.verdict for p in judged}
    root = next((p for p in judged if p.start == "root"), None)
    root_code = run.exit_code
    if run.stop_reason == "hung" or "hung" in verdicts:
        return "hung"
    if run.stop_reason == "memory-limit" or "oom" in verdicts:
        return "oom"
    if run.stop_reason in ("timeout", "interrupted"):
        return "killed"
    if root is not None and root.verdict in ("crashed", "killed") and (root_code or 0) < 0:
        return root.verdict
    # A worker that exited non-zero was handled by its parent (the root's status says
    # how well); one that died of a crash signal is a crash whatever the root did.
    if any(p.verdict == "crashed" and (p.exit_code or 0) < 0 for p in judged if p.start != "root"):
        return "crashed"
    if root_code:
        return "crashed" if any(m.pattern.category == "fork-after-init" for m in causes) else "failed"
    return "ok"


def diagnose(run: RunRecord) -> Diagnosis:
    """Judge every process of ``run`` and explain the command's outcome."""
    matches = error_strings.find(run.stderr + "\n" + run.stdout)
    causes = [m for m in matches if m.pattern.kind == CAUSE]
    oom_seen = any(m.pattern.category == GPU_OOM for m in causes)
    origins = events.origins(run.events)
    recorded = events.exit_codes(run.events)
    tracks = {p.pid: p for p in run.processes}
    judged: list[ProcessVerdict] = []
    for pid in sorted(set(tracks) | set(origins) | {run.root_pid}):
        track, origin = tracks.get(pid), origins.get(pid)
        code = track.exit_code if track and track.exit_code is not None else recorded.get(pid)
        verdict, reason = _judge(run, track, code, oom_seen)
        stack = run.stacks.get(pid)
        gpu = {device: used for (device, p), used in run.peaks.process_gpu.items() if p == pid}
        judged.append(ProcessVerdict(
            pid=pid,
            ppid=track.ppid if track else (origin.parent if origin else None),
            cmdline=track.cmdline if track else (),
            start="root" if pid == run.root_pid else (origin.how if origin else "unknown"),
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
            rss_peak=track.rss_peak if track else run.peaks.process_rss.get(pid),
            gpu_memory_peak=gpu,
            explanation=reason,
        ))
    verdict = _overall(run, judged, causes)
    text = explain.explain(run, verdict, judged, matches)
    return Diagnosis(verdict, run.exit_code, text, tuple(judged), tuple(matches))

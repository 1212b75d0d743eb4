"""The report of a test that outlived its hang_timeout: a brief, then the diagnosis and every stack.

The brief is what a reader of a failed run needs first, in a few lines under the reason:
the cause (who forked from what state), where the processes are blocked (the frame of
the user's code and the first telling native frame) and the fix. The full report
(every process, every stack) is long; ``report_files`` decides where it goes.
"""

from __future__ import annotations

import os
import re

from gpudoctor.probe.diagnosis import OBSERVED, Cause, Diagnosis, ProcessVerdict
from gpudoctor.probe.explain import IDLE_EVIDENCE
from gpudoctor.probe.stacks import where_blocked
from gpudoctor.probe.verdicts import Verdict
from gpudoctor.probe.wording import plural
from gpudoctor.pytest_plugin.checks import Failure

_STACK_LINES = 60
# Frames of pytest, pluggy and the interpreter's start, in faulthandler's and py-spy's layouts.
_PYTEST_FRAME = re.compile(r"[/(](_pytest|pluggy)/|pytest/__main__\.py|<frozen runpy>")


def _process_line(process: ProcessVerdict) -> str:
    start = "test process" if process.start == "root" else process.start
    where = f"; blocked in {process.blocked_in}" if process.blocked_in else ""
    verdict, explanation = str(process.verdict), process.explanation
    if process.start == "root" and process.verdict == Verdict.KILLED:  # never killed: it is pytest itself
        verdict = "waiting" if process.stalled_for >= IDLE_EVIDENCE else "busy"
        if verdict == "busy":
            explanation = "still using CPU at the deadline"
    return f"pid {process.pid} ({start}) {verdict}: {explanation}{where}"


_RESCUE_FRAME = re.compile(r"gpudoctor/pytest_plugin/rescue\.py")


def _without_rescue_thread(text: str) -> str:
    """Drop the plugin's rescue thread from a faulthandler dump: it is the plugin's, not the test's."""
    blocks = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(b for b in blocks if not _RESCUE_FRAME.search(b))


def _stack(text: str) -> str:
    """Drop pytest's own frames (a forked worker's stack holds them too), keep the innermost."""
    lines = _without_rescue_thread(text).rstrip().splitlines()
    kept = [line for line in lines if not _PYTEST_FRAME.search(line)]
    if len(kept) < len(lines):
        kept.append(f"    ({len(lines) - len(kept)} frames of pytest itself not shown)")
    if len(kept) <= _STACK_LINES:
        return "\n".join(kept)
    return "\n".join(kept[:_STACK_LINES] + [f"    ... {len(kept) - _STACK_LINES} more lines"])


def _cause_line(cause: Cause) -> str:
    """One line per cause the diagnosis named, from its structured form."""
    rule = f"{cause.rule}, " if cause.rule else ""
    parent = f"; parent pid {cause.parent}" if cause.parent is not None else ""
    pids = f"; pid {', '.join(map(str, cause.processes))}" if cause.processes else ""
    return f"cause: {cause.kind} ({rule}{cause.certainty}){parent}{pids}"


def _named(causes: tuple[Cause, ...]) -> str:
    """The causes for the one-line reason: those seen happen, else the others."""
    shown = [c for c in causes if c.certainty == OBSERVED] or list(causes)
    return "".join(f"; {c.certainty} cause {c.kind}" + (f" ({c.rule})" if c.rule else "") for c in shown[:2])


_BLOCKED_LINES = 3


def _short_paths(frame: str) -> str:
    """Show a file under the current directory relative to it, as pytest shows test files."""
    from gpudoctor.safe_path import working_folder

    here = working_folder()
    return frame.replace(here + os.sep, "") if here else frame


def _blocked_lines(processes: list[ProcessVerdict]) -> list[str]:
    """Where the waiting processes are blocked, one line per place, forked workers first."""
    waiting = [p for p in processes if p.verdict in (Verdict.HUNG, Verdict.STOPPED)] or processes
    places: dict[tuple[str, str], list[int]] = {}
    for process in sorted(waiting, key=lambda p: p.start != "fork"):
        label = "test process" if process.start == "root" else process.start
        if process.stack and process.stack_source:
            at = where_blocked(process.stack, process.stack_source)
            where = " in your code " + at.user if at.user else (" in " + at.python if at.python else "")
            place = where + (f"; native frame {at.native}" if at.native else "")
        else:
            place = f" in {process.blocked_in}" if process.blocked_in else ""
        if place:
            places.setdefault((label, _short_paths(place)), []).append(process.pid)
    return [f"Blocked: pid {', '.join(map(str, pids))} ({label}){place}"
            for (label, place), pids in list(places.items())[:_BLOCKED_LINES]]


def _brief(diagnosis: Diagnosis, processes: list[ProcessVerdict], stuck: bool) -> list[str]:
    """The few lines that matter: the cause, where it is blocked, the fix."""
    causes = [c for c in diagnosis.causes if c.certainty == OBSERVED] or list(diagnosis.causes)
    cause = causes[0] if causes else None
    lines = [f"Cause: {cause.evidence[0]}"] if cause is not None and cause.evidence else []
    lines += _blocked_lines(processes)
    if cause is not None and cause.fix:
        lines.append(f"Fix: {cause.fix}")
    if stuck:
        lines.append("Its main thread stayed blocked in native code after the interrupt: the session ended "
                     "here; the tests after it were not run.")
    return lines


_STUCK = ("The test's main thread did not return after the interrupt: it is blocked in native code, "
          "where Python cannot interrupt it. gpudoctor failed the test from its rescue thread and "
          "ended the session; the tests after it were not run.")


def hang_failure(seconds: float, diagnosis: Diagnosis, killed: list[int], pools: list[int],
                 stuck: bool = False) -> Failure:
    """Fail a test that outlived its hang_timeout: a brief, and the diagnosis with every stack."""
    processes = [p for p in diagnosis.processes if p.verdict != Verdict.OK or p.stack]
    if diagnosis.verdict == Verdict.HUNG:
        hung = [p for p in processes if p.verdict == Verdict.HUNG]
        summary = f"{plural(len(hung), 'process')} hung: pid {', '.join(str(p.pid) for p in hung)}"
        explanation = diagnosis.explanation
    elif diagnosis.verdict == Verdict.STOPPED:
        held = [p for p in processes if p.verdict == Verdict.STOPPED]
        summary = (f"stopped, not hung: pid {', '.join(str(p.pid) for p in held)} held by SIGSTOP "
                   "or a debugger")
        explanation = diagnosis.explanation
    elif waited := [p for p in processes if p.verdict == Verdict.KILLED and p.stalled_for >= IDLE_EVIDENCE]:
        busy = [p.pid for p in processes if p.verdict == Verdict.KILLED and p not in waited]
        idle = f"pid {', '.join(str(p.pid) for p in waited)}"
        summary = (f"busy, not hung: pid {', '.join(map(str, busy))} still made CPU progress, {idle} waited "
                   "(on them, most likely)" if busy else f"likely hung: {idle} waited with no CPU progress")
        explanation = diagnosis.explanation
    else:
        summary = "no process was waiting: the test was still busy (slow, or looping)"
        explanation = "No process of the test waited without CPU progress: it was running, not deadlocked."
    reason = f"hang_timeout: still running after {seconds:g} s; {summary}{_named(diagnosis.causes)}"
    lines = [explanation, *[_cause_line(c) for c in diagnosis.causes], ""] + ([_STUCK, ""] if stuck else [])
    lines += [_process_line(p) for p in processes]
    if pools:
        lines.append(f"terminated the test's multiprocessing pool(s): workers {', '.join(map(str, pools))}")
    if killed:
        lines.append(f"killed by gpudoctor: pid {', '.join(map(str, killed))}")
    for process in processes:
        if process.stack:
            lines += ["", f"--- stack of pid {process.pid} ({process.stack_source}) ---", _stack(process.stack)]
    return Failure(reason, ("gpudoctor hang_timeout", "\n".join(lines)),
                   tuple(_brief(diagnosis, processes, stuck)))
